//! The disk side of the cgroup backend: which jobs have I/O outstanding, and on which disks the
//! disk weights act at all.
//!
//! Activity (spec §2.3: a client is active while it has a request outstanding) is read per
//! interval, as an approximation the kernel exposes per process: a job is active when one of its
//! processes is in uninterruptible sleep (`D` in `/proc/PID/stat`, which is where a process
//! waiting for a read or a synchronous write sits) or its `read_bytes + write_bytes` of
//! `/proc/PID/io` grew since the last interval (I/O completed in between, so some was
//! outstanding). It misses I/O that starts and ends between two reads without moving the
//! counters (none does), and counts as active a job whose only I/O was dirtying the page cache
//! (`write_bytes` is charged when a page is dirtied, not when it is written back).

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use tact_core::tickets::compile::{WeightRange, BFQ_WEIGHT, IO_WEIGHT_V2};
use tact_linux::actuate::cgroup_knobs::DiskKnob;
use tact_linux::{ProcId, ProcReader};

use crate::share::group::Job;

/// Each job's disk byte counters per process, from the last interval.
pub struct DiskActivity {
    reader: ProcReader,
    last: Vec<HashMap<ProcId, u64>>,
}

impl DiskActivity {
    pub fn new(jobs: usize) -> DiskActivity {
        DiskActivity {
            reader: ProcReader::new(),
            last: vec![HashMap::new(); jobs],
        }
    }

    /// Whether job `i` has had disk I/O outstanding since the last call (see the module).
    pub fn active(&mut self, i: usize, job: &Job) -> bool {
        if job.gone {
            self.last[i].clear();
            return false;
        }
        let mut now = HashMap::new();
        let mut active = false;
        for id in job.tree().members() {
            let Ok(stat) = self.reader.stat(id.pid) else {
                continue;
            };
            if stat.start_time != id.start_time || stat.is_dead() {
                continue;
            }
            active |= stat.state == 'D';
            if let Ok(io) = self.reader.io(id.pid) {
                let bytes = io.read_bytes + io.write_bytes;
                // A process seen for the first time counts with what it moved since it started.
                active |= bytes > self.last[i].get(&id).copied().unwrap_or(0);
                now.insert(id, bytes);
            }
        }
        self.last[i] = now;
        active
    }
}

/// The weight range the model's disk rights are quantized into for `knob`: iocost's
/// `io.weight` (1–10000) or BFQ's (1–1000).
pub fn weight_range(knob: DiskKnob) -> WeightRange {
    if knob == DiskKnob::IoWeight {
        IO_WEIGHT_V2
    } else {
        BFQ_WEIGHT
    }
}

/// A block device and its I/O scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub name: String,
    /// The scheduler in use (the bracketed one of `queue/scheduler`).
    pub scheduler: String,
}

/// The block devices under `sys_block` (`/sys/block`) that have an I/O scheduler file and a
/// nonzero size (an unattached loop device has none), by name.
pub fn disks(sys_block: &Path) -> Vec<Disk> {
    let Ok(entries) = fs::read_dir(sys_block) else {
        return Vec::new();
    };
    let mut disks: Vec<Disk> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let dir = e.path();
            let size: u64 = fs::read_to_string(dir.join("size"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let text = fs::read_to_string(dir.join("queue/scheduler")).ok()?;
            let scheduler = text
                .split_whitespace()
                .find_map(|s| s.strip_prefix('[')?.strip_suffix(']'))
                .unwrap_or(text.trim())
                .to_string();
            (size > 0).then(|| Disk {
                name: e.file_name().to_string_lossy().into_owned(),
                scheduler,
            })
        })
        .collect();
    disks.sort_by(|a, b| a.name.cmp(&b.name));
    disks
}

/// What the user must know about where `knob` acts: the BFQ weights act only on disks whose
/// scheduler is bfq, so the disks that use another one are named (the jobs' I/O to those is not
/// weighed); `io.weight` acts where iocost is enabled, and on disks using bfq through
/// `io.bfq.weight`, which tact writes beside it.
pub fn where_weights_act(knob: DiskKnob, disks: &[Disk]) -> String {
    if knob == DiskKnob::IoWeight {
        return "io.weight acts only on disks where iocost is enabled (io.cost.qos in the root \
                cgroup), io.bfq.weight (written beside it, on its 1-1000 scale) on disks using \
                the bfq scheduler; on the others the disk weights have no effect"
            .into();
    }
    let (bfq, other): (Vec<&Disk>, Vec<&Disk>) = disks.iter().partition(|d| d.scheduler == "bfq");
    let names = |ds: &[&Disk]| {
        ds.iter()
            .map(|d| format!("{} ({})", d.name, d.scheduler))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let file = knob.file();
    match (bfq.is_empty(), other.is_empty()) {
        (_, true) => format!("{file} acts on every disk: {}", names(&bfq)),
        (true, false) => format!(
            "no disk uses the bfq scheduler, so {file} will have no effect: {} (echo bfq > \
             /sys/block/DEV/queue/scheduler for the disks the jobs use)",
            names(&other)
        ),
        (false, false) => format!(
            "{file} acts only on disks using the bfq scheduler: {}; it will have no effect on I/O \
             to {} (echo bfq > /sys/block/DEV/queue/scheduler to weigh those)",
            names(&bfq),
            names(&other)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(devices: &[(&str, u64, Option<&str>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, size, scheduler) in devices {
            let d = dir.path().join(name);
            fs::create_dir_all(d.join("queue")).unwrap();
            fs::write(d.join("size"), format!("{size}\n")).unwrap();
            if let Some(s) = scheduler {
                fs::write(d.join("queue/scheduler"), format!("{s}\n")).unwrap();
            }
        }
        dir
    }

    #[test]
    fn disks_are_read_with_their_scheduler_and_empty_ones_skipped() {
        let dir = fixture(&[
            ("vda", 536870912, Some("none [mq-deadline] kyber bfq")),
            ("loop0", 204800, Some("none mq-deadline kyber [bfq]")),
            ("loop1", 0, Some("[none] mq-deadline kyber bfq")),
            ("zram0", 0, None),
        ]);
        assert_eq!(
            disks(dir.path()),
            [
                Disk {
                    name: "loop0".into(),
                    scheduler: "bfq".into()
                },
                Disk {
                    name: "vda".into(),
                    scheduler: "mq-deadline".into()
                },
            ]
        );
        assert!(disks(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn the_message_names_the_disks_the_weights_do_not_act_on() {
        let d = |name: &str, s: &str| Disk {
            name: name.into(),
            scheduler: s.into(),
        };
        let knob = DiskKnob::BlkioBfqWeight;
        let mixed = where_weights_act(knob, &[d("loop0", "bfq"), d("vda", "mq-deadline")]);
        assert!(
            mixed.contains(
                "blkio.bfq.weight acts only on disks using the bfq scheduler: loop0 (bfq)"
            ) && mixed.contains("no effect on I/O to vda (mq-deadline)"),
            "{mixed}"
        );
        let none = where_weights_act(knob, &[d("vda", "mq-deadline")]);
        assert!(none.contains("no disk uses the bfq scheduler"), "{none}");
        let all = where_weights_act(DiskKnob::IoBfqWeight, &[d("sda", "bfq")]);
        assert_eq!(all, "io.bfq.weight acts on every disk: sda (bfq)");
        assert!(where_weights_act(DiskKnob::IoWeight, &[]).contains("iocost"));
    }
}
