//! What a [`KnobTree`]'s nodes use, for `tact tickets explain` and the arena loop. Every counter
//! is hierarchical (a node's includes its descendants'), so a currency node shows its clients'
//! total.

use std::fs;
use std::path::Path;

use super::hierarchy::Controller;
use super::tree::{KnobTree, NodeId};
use crate::actuate::cgroup_cpu::{read_usage_ns, CgroupVersion};
use crate::error::{Error, Result};

/// Bytes transferred to and from disks, summed over devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiskBytes {
    pub read: u64,
    pub written: u64,
}

impl KnobTree {
    /// Cumulative CPU nanoseconds used in `node`: v2 `cpu.stat` `usage_usec`, v1 `cpuacct.usage`
    /// (co-mounted, or in the mirror tact keeps in a separate cpuacct hierarchy). `None` on v1
    /// when cpuacct is not mounted.
    pub fn cpu_usage_ns(&self, node: NodeId) -> Result<Option<u64>> {
        self.hier_of(Controller::Cpu)?;
        match self.hiers.iter().position(|h| h.counts_cpu) {
            Some(i) => read_usage_ns(&self.dir_in(i, node)?, self.hiers[i].version).map(Some),
            None => Ok(None),
        }
    }

    /// Memory in use by `node` in bytes (page cache included): v2 `memory.current`, v1
    /// `memory.usage_in_bytes`.
    pub fn mem_usage_bytes(&self, node: NodeId) -> Result<u64> {
        let file = match self.version(Controller::Memory)? {
            CgroupVersion::V2 => "memory.current",
            CgroupVersion::V1 => "memory.usage_in_bytes",
        };
        let path = self.node_dir(node, Controller::Memory)?.join(file);
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        text.trim()
            .parse()
            .map_err(|_| Error::parse(&path, 1, "expected a number of bytes"))
    }

    /// What of `node`'s memory the kernel cannot reclaim without swap: anonymous and shared
    /// memory, v1 `memory.stat` `total_rss` + `total_shmem`, v2 `memory.stat` `anon` + `shmem`.
    pub fn mem_pinned_bytes(&self, node: NodeId) -> Result<u64> {
        let keys: [&str; 2] = match self.version(Controller::Memory)? {
            CgroupVersion::V1 => ["total_rss", "total_shmem"],
            CgroupVersion::V2 => ["anon", "shmem"],
        };
        let path = self.node_dir(node, Controller::Memory)?.join("memory.stat");
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let mut sum = 0;
        for (i, line) in text.lines().enumerate() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            if keys.contains(&key) {
                sum += value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| Error::parse(&path, i + 1, format!("bad {key} `{value}`")))?;
            }
        }
        Ok(sum)
    }

    /// How many times a charge hit `node`'s memory limit (the kernel then reclaimed or failed
    /// it), cumulative: v1 `memory.failcnt`, v2 the `max` line of `memory.events`. The arena
    /// loop reads pressure from its growth.
    pub fn mem_limit_hits(&self, node: NodeId) -> Result<u64> {
        let dir = self.node_dir(node, Controller::Memory)?;
        let (path, key) = match self.version(Controller::Memory)? {
            CgroupVersion::V1 => (dir.join("memory.failcnt"), None),
            CgroupVersion::V2 => (dir.join("memory.events"), Some("max")),
        };
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let (line, value) = match key {
            None => (1, text.trim()),
            Some(key) => text
                .lines()
                .enumerate()
                .find_map(|(i, l)| Some((i + 1, l.strip_prefix(key)?.strip_prefix(' ')?)))
                .ok_or_else(|| Error::parse(&path, 1, format!("no `{key}` line")))?,
        };
        value
            .trim()
            .parse()
            .map_err(|_| Error::parse(&path, line, "expected a count"))
    }

    /// Disk bytes `node` has read and written: v2 `io.stat` (`rbytes`, `wbytes`); v1
    /// `blkio.throttle.io_service_bytes_recursive`, which counts every device whatever its
    /// scheduler once blk-throttle is set up on it (the tree does that when it is made:
    /// `count_disk_bytes_v1`), else `blkio.bfq.io_service_bytes_recursive`. v1 does not charge
    /// buffered writeback to the cgroup that dirtied the pages, so only reads and direct writes
    /// show.
    pub fn disk_bytes(&self, node: NodeId) -> Result<DiskBytes> {
        let dir = self.node_dir(node, Controller::Io)?;
        match self.version(Controller::Io)? {
            CgroupVersion::V2 => read_io_stat(&dir.join("io.stat")),
            CgroupVersion::V1 => {
                let throttle = dir.join("blkio.throttle.io_service_bytes_recursive");
                if throttle.exists() {
                    read_blkio_bytes(&throttle)
                } else {
                    read_blkio_bytes(&dir.join("blkio.bfq.io_service_bytes_recursive"))
                }
            }
        }
    }
}

/// v2 `io.stat`: one line per device, `MAJ:MIN rbytes=N wbytes=N rios=N ...`.
fn read_io_stat(path: &Path) -> Result<DiskBytes> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut sum = DiskBytes::default();
    for (i, line) in text.lines().enumerate() {
        for field in line.split_whitespace().skip(1) {
            let Some((key, value)) = field.split_once('=') else {
                return Err(Error::parse(path, i + 1, format!("bad field `{field}`")));
            };
            let slot = match key {
                "rbytes" => &mut sum.read,
                "wbytes" => &mut sum.written,
                _ => continue,
            };
            let n: u64 = value
                .parse()
                .map_err(|_| Error::parse(path, i + 1, format!("bad {key} `{value}`")))?;
            *slot += n;
        }
    }
    Ok(sum)
}

/// v1 `blkio.*io_service_bytes*`: `MAJ:MIN OP N` lines (OP: Read, Write, Sync, Async, Discard,
/// Total) and a closing `Total N`.
fn read_blkio_bytes(path: &Path) -> Result<DiskBytes> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut sum = DiskBytes::default();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] | ["Total", _] => {}
            [_dev, op, n] => {
                let slot = match *op {
                    "Read" => &mut sum.read,
                    "Write" => &mut sum.written,
                    _ => continue,
                };
                *slot += n
                    .parse::<u64>()
                    .map_err(|_| Error::parse(path, i + 1, format!("bad byte count `{n}`")))?;
            }
            _ => return Err(Error::parse(path, i + 1, "expected `MAJ:MIN OP BYTES`")),
        }
    }
    Ok(sum)
}
