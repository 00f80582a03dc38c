//! The knob writers of a [`KnobTree`]. Each clamps its value to the range the kernel accepts and
//! says so in the [`KnobWrite`] it returns, so that `explain` can show every clamp; a knob file
//! that does not exist is an error naming it, why it may be missing, and the fallback.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::hierarchy::Controller;
use super::tree::{KnobTree, NodeId};
use crate::actuate::cgroup_cpu::CgroupVersion;
use crate::error::{Error, Result};

/// The largest byte count a memory knob takes: the kernel keeps pages in a signed long.
pub const MEM_MAX: u64 = i64::MAX as u64;

/// A value that was outside the kernel's range and was clamped into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Clamp {
    pub requested: u64,
    pub applied: u64,
    /// The range accepted, inclusive.
    pub min: u64,
    pub max: u64,
}

/// One knob file written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KnobWrite {
    pub file: PathBuf,
    /// What was written (`250`, `default 250`, `max`, `-1`).
    pub written: String,
    /// Set when the requested value was out of range.
    pub clamp: Option<Clamp>,
    /// What the knob does not do, when that differs from what the model asked for.
    pub caveat: Option<String>,
}

/// The memory protection of a node, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum MemProtection {
    /// No protection: its pages are reclaimed like anyone's.
    None,
    /// A soft entitlement: v2 `memory.low`; v1 `memory.soft_limit_in_bytes`.
    Soft(u64),
    /// A floor on a path hard from the base: v2 `memory.min`; v1 `memory.soft_limit_in_bytes`.
    Hard(u64),
}

/// v2's protection files, hard then soft.
const PROTECTIONS: [&str; 2] = ["memory.min", "memory.low"];

/// A v2 protection file's value (`max` is [`MEM_MAX`]); `None` where there is no such file (the
/// root cgroup).
fn read_protection(file: &Path) -> Result<Option<u64>> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(file, e)),
    };
    match text.trim() {
        "max" => Ok(Some(MEM_MAX)),
        t => t
            .parse()
            .map(Some)
            .map_err(|_| Error::parse(file, 1, format!("bad byte count `{t}`"))),
    }
}

/// What v1 soft limits do not do (spec tickets §4, "Memory, in tact").
const V1_SOFT_LIMIT_CAVEAT: &str =
    "v1 memory.soft_limit_in_bytes is not a floor: it only biases global reclaim toward groups \
     above it, and is ignored by reclaim that a parent's memory.limit_in_bytes causes";

/// The disk weight file of a node, by what the kernel exposes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum DiskKnob {
    /// v2 `io.weight` (iocost; effective where iocost is enabled on the device).
    IoWeight,
    /// v2 `io.bfq.weight` (devices using the bfq scheduler).
    IoBfqWeight,
    /// v1 `blkio.bfq.weight` (devices using the bfq scheduler).
    BlkioBfqWeight,
}

impl DiskKnob {
    pub fn file(self) -> &'static str {
        match self {
            DiskKnob::IoWeight => "io.weight",
            DiskKnob::IoBfqWeight => "io.bfq.weight",
            DiskKnob::BlkioBfqWeight => "blkio.bfq.weight",
        }
    }

    /// The smallest and largest weight the kernel accepts (the default is 100 in all three).
    pub fn range(self) -> (u64, u64) {
        match self {
            DiskKnob::IoWeight => (1, 10_000),
            DiskKnob::IoBfqWeight | DiskKnob::BlkioBfqWeight => (1, 1000),
        }
    }

    /// The v2 files list a default and per-device weights (`default N` sets the default); the
    /// v1 file is a bare number.
    fn format(self, weight: u64) -> String {
        match self {
            DiskKnob::IoWeight | DiskKnob::IoBfqWeight => format!("default {weight}"),
            DiskKnob::BlkioBfqWeight => weight.to_string(),
        }
    }
}

impl KnobTree {
    /// The `cpu.weight` (v2, 1–10000) or `cpu.shares` (v1, 2–262144) range.
    pub fn cpu_weight_range(&self) -> Result<(u64, u64)> {
        Ok(self.version(Controller::Cpu)?.weight_range())
    }

    /// Writes `node`'s CPU weight: v2 `cpu.weight`, v1 `cpu.shares`.
    pub fn set_cpu_weight(&self, node: NodeId, weight: u64) -> Result<KnobWrite> {
        let version = self.version(Controller::Cpu)?;
        let (w, clamp) = clamp(weight, version.weight_range());
        let file = self
            .node_dir(node, Controller::Cpu)?
            .join(version.weight_file());
        write_knob(Controller::Cpu, &file, w.to_string(), clamp, None)
    }

    /// Writes `node`'s memory protection. v2: `memory.min` (hard) and `memory.low` (soft), the
    /// other one set to 0, and every node above it up to the tree's top set to the sum of its
    /// children's (a cgroup's protection counts only up to what its parent is given), with a
    /// caveat when a cgroup above the top is given less. v1: `memory.soft_limit_in_bytes` =
    /// the protection for protected nodes and 0 for the rest, with a caveat saying that this is
    /// not a floor.
    pub fn set_mem_protection(&self, node: NodeId, p: MemProtection) -> Result<Vec<KnobWrite>> {
        let dir = self.node_dir(node, Controller::Memory)?;
        let range = (0, MEM_MAX);
        match self.version(Controller::Memory)? {
            CgroupVersion::V2 => {
                let (min, low) = match p {
                    MemProtection::None => (0, 0),
                    MemProtection::Soft(b) => (0, b),
                    MemProtection::Hard(b) => (b, 0),
                };
                let mut writes = [("memory.min", min), ("memory.low", low)]
                    .into_iter()
                    .map(|(f, bytes)| {
                        let (b, c) = clamp(bytes, range);
                        write_knob(Controller::Memory, &dir.join(f), b.to_string(), c, None)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let sums = self.sum_protection_up(node)?;
                if let Some(caveat) = self.protection_held_above(sums) {
                    for w in &mut writes {
                        w.caveat = Some(caveat.clone());
                    }
                }
                Ok(writes)
            }
            CgroupVersion::V1 => {
                let bytes = match p {
                    MemProtection::None => 0,
                    MemProtection::Soft(b) | MemProtection::Hard(b) => b,
                };
                let (b, c) = clamp(bytes, range);
                let file = dir.join("memory.soft_limit_in_bytes");
                let caveat = (p != MemProtection::None).then(|| V1_SOFT_LIMIT_CAVEAT.to_string());
                Ok(vec![write_knob(
                    Controller::Memory,
                    &file,
                    b.to_string(),
                    c,
                    caveat,
                )?])
            }
        }
    }

    /// v2: sets each node above `node`, up to the tree's top, to the sums of its children's
    /// `memory.min` and `memory.low`, so that the floors below count (a child's protection is
    /// capped by its parent's). Returns the top's sums.
    fn sum_protection_up(&self, node: NodeId) -> Result<[u64; 2]> {
        let i = self.hier_of(Controller::Memory)?;
        let mut sums = [0u64, 0];
        for above in self.ancestors(node)? {
            let dir = self.dir_in(i, above)?;
            sums = [0, 0];
            for child in self.children(above) {
                let child = self.dir_in(i, child)?;
                for (sum, f) in sums.iter_mut().zip(PROTECTIONS) {
                    *sum = sum.saturating_add(read_protection(&child.join(f))?.unwrap_or(0));
                }
            }
            for (sum, f) in sums.iter().zip(PROTECTIONS) {
                let (b, c) = clamp(*sum, (0, MEM_MAX));
                write_knob(Controller::Memory, &dir.join(f), b.to_string(), c, None)?;
            }
        }
        Ok(sums)
    }

    /// v2: what keeps the tree's floors (`sums` of `memory.min` and `memory.low` at its top)
    /// from counting against the rest of the machine: the cgroup the tree is made in, or one
    /// above it, given less (the root has no such files and needs none). They still hold
    /// against the tree's own arena, whose limit makes its top the root of the reclaim.
    fn protection_held_above(&self, sums: [u64; 2]) -> Option<String> {
        let i = self.hier_of(Controller::Memory).ok()?;
        let mount = self.mount_in(i);
        let mut dir = self.base_in(i);
        while dir.starts_with(mount) {
            for (need, f) in sums.iter().zip(PROTECTIONS) {
                let Ok(Some(given)) = read_protection(&dir.join(f)) else {
                    continue;
                };
                if given < *need {
                    return Some(format!(
                        "{} is {given}, less than the {need} bytes of {f} below it, and a \
                         cgroup's protection counts only up to its parent's: the floors hold \
                         against the tree's own arena, not the rest of the machine; give it at \
                         least that (systemd: MemoryMin=/MemoryLow= on its unit)",
                        dir.join(f).display()
                    ));
                }
            }
            dir = dir.parent()?;
        }
        None
    }

    /// Writes `node`'s memory limit (the arena loop lowers it on unprotected siblings): v2
    /// `memory.max`, v1 `memory.limit_in_bytes`; `None` removes it (`max`, or `-1` on v1). The
    /// kernel refuses a limit it cannot reclaim down to (EBUSY).
    pub fn set_mem_limit(&self, node: NodeId, limit: Option<u64>) -> Result<KnobWrite> {
        let dir = self.node_dir(node, Controller::Memory)?;
        let v2 = self.version(Controller::Memory)? == CgroupVersion::V2;
        let file = dir.join(if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        });
        let (text, c) = match limit {
            None if v2 => ("max".to_string(), None),
            None => ("-1".to_string(), None),
            Some(bytes) => {
                let (b, c) = clamp(bytes, (0, MEM_MAX));
                (b.to_string(), c)
            }
        };
        write_knob(Controller::Memory, &file, text, c, None)
    }

    /// Which disk weight file `node` has: v2 `io.weight` when it exists, else `io.bfq.weight`;
    /// v1 `blkio.bfq.weight`. An error names what is missing and why.
    pub fn disk_knob(&self, node: NodeId) -> Result<DiskKnob> {
        let dir = self.node_dir(node, Controller::Io)?;
        let (candidates, why): (&[DiskKnob], &str) = match self.version(Controller::Io)? {
            CgroupVersion::V2 => (
                &[DiskKnob::IoWeight, DiskKnob::IoBfqWeight],
                "io.weight needs the kernel's iocost controller (CONFIG_BLK_CGROUP_IOCOST) and \
                 io.bfq.weight the bfq I/O scheduler loaded (modprobe bfq)",
            ),
            CgroupVersion::V1 => (
                &[DiskKnob::BlkioBfqWeight],
                "blkio.weight left with CFQ in Linux 5.0; blkio.bfq.weight exists only in \
                 non-root cgroups and only with the bfq I/O scheduler loaded (modprobe bfq; echo \
                 bfq > /sys/block/DEV/queue/scheduler for the disks to weigh)",
            ),
        };
        candidates
            .iter()
            .copied()
            .find(|k| dir.join(k.file()).exists())
            .ok_or_else(|| Error::Unavailable {
                what: format!(
                    "{} in {}",
                    candidates
                        .iter()
                        .map(|k| k.file())
                        .collect::<Vec<_>>()
                        .join(" or "),
                    dir.display()
                ),
                reason: format!("{why}; {}", Controller::Io.fallback()),
            })
    }

    /// Writes `node`'s disk weight into the file [`KnobTree::disk_knob`] finds, clamped to its
    /// range. Beside v2 `io.weight`, `io.bfq.weight` gets the same weight on its tenfold
    /// coarser scale when the file exists: iocost ignores the bfq weight and bfq the iocost one,
    /// and a kernel with iocost built in (Debian 12's) has `io.weight` everywhere, so with it
    /// alone the disks that use bfq were not weighed at all (a cgroup v2 VM on 6.1, two readers
    /// of one bfq disk weighed 1:3: 511‰ for the larger; 744‰ with `io.bfq.weight` 100:300).
    pub fn set_disk_weight(&self, node: NodeId, weight: u64) -> Result<KnobWrite> {
        let knob = self.disk_knob(node)?;
        let (w, c) = clamp(weight, knob.range());
        let dir = self.node_dir(node, Controller::Io)?;
        let written = write_knob(
            Controller::Io,
            &dir.join(knob.file()),
            knob.format(w),
            c,
            None,
        )?;
        let bfq = DiskKnob::IoBfqWeight;
        if knob == DiskKnob::IoWeight && dir.join(bfq.file()).exists() {
            let (b, _) = clamp((w + 5) / 10, bfq.range());
            write_knob(
                Controller::Io,
                &dir.join(bfq.file()),
                bfq.format(b),
                None,
                None,
            )?;
        }
        Ok(written)
    }
}

fn clamp(value: u64, (min, max): (u64, u64)) -> (u64, Option<Clamp>) {
    let applied = value.clamp(min, max);
    let report = (applied != value).then_some(Clamp {
        requested: value,
        applied,
        min,
        max,
    });
    (applied, report)
}

/// Writes `text` to an existing knob file. It is never created: a missing file means a missing
/// kernel feature, reported with `c`'s fallback.
fn write_knob(
    c: Controller,
    file: &Path,
    text: String,
    clamp: Option<Clamp>,
    caveat: Option<String>,
) -> Result<KnobWrite> {
    let result = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(file)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match result {
        Ok(()) => Ok(KnobWrite {
            file: file.to_path_buf(),
            written: text,
            clamp,
            caveat,
        }),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound && file.parent().is_some_and(Path::is_dir) =>
        {
            Err(Error::Unavailable {
                what: file.display().to_string(),
                reason: format!(
                    "the kernel does not expose this {} knob; {}",
                    c.v2_name(),
                    c.fallback()
                ),
            })
        }
        Err(e) => Err(Error::io(file, e)),
    }
}
