//! Device activity for the idle engine's disk gate (spec idletime §6, "Disk"): `/proc/diskstats`,
//! read from a path you choose so tests run on fixture files.
//!
//! The gate's foreground signal is "device activity less the job's own": the device side comes
//! from here ([`DiskStats::since`] gives the deltas between two samples), the job side from
//! [`crate::ProgressMeter`] with [`crate::ProgressSource::IoStorage`] (`read_bytes` +
//! `write_bytes` of `/proc/PID/io` summed over the job's tree, kept cumulative across exits).
//! Deciding from the two deltas whether the interval held foreground I/O (and keeping the
//! writeback ledger, since `write_bytes` is charged when a page is dirtied, not written) is the
//! engine's and the binary's business.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `/proc/diskstats` counts sectors of 512 bytes whatever the device's own sector size.
pub const SECTOR_BYTES: u64 = 512;

/// One device's line of `/proc/diskstats` (the fields the gate uses; counters since boot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskStats {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    /// Reads completed.
    pub reads: u64,
    pub sectors_read: u64,
    /// Writes completed.
    pub writes: u64,
    pub sectors_written: u64,
    /// Requests issued to the driver and not completed yet (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds during which the device had at least one request in flight.
    pub io_ticks_ms: u64,
    /// Milliseconds of request time, weighted by the number in flight.
    pub time_in_queue_ms: u64,
}

/// What a device did between two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskDelta {
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub io_ticks_ms: u64,
    pub time_in_queue_ms: u64,
    /// The later sample's in-flight count: requests still in service at its end.
    pub in_flight: u64,
}

impl DiskDelta {
    /// Bytes moved either way.
    pub fn bytes(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }

    /// Whether the device did anything at all: a completion, busy time, or a request in flight.
    pub fn active(&self) -> bool {
        self.reads + self.writes + self.io_ticks_ms + self.in_flight > 0
    }
}

impl DiskStats {
    /// The activity since `earlier` (a sample of the same device). Differences saturate at 0: a
    /// device that was removed and added again restarts its counters, and that interval then reads
    /// as idle rather than as an enormous burst.
    pub fn since(&self, earlier: &DiskStats) -> DiskDelta {
        DiskDelta {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
            bytes_read: self.sectors_read.saturating_sub(earlier.sectors_read) * SECTOR_BYTES,
            bytes_written: self.sectors_written.saturating_sub(earlier.sectors_written)
                * SECTOR_BYTES,
            io_ticks_ms: self.io_ticks_ms.saturating_sub(earlier.io_ticks_ms),
            time_in_queue_ms: self
                .time_in_queue_ms
                .saturating_sub(earlier.time_in_queue_ms),
            in_flight: self.in_flight,
        }
    }
}

/// Reads a diskstats file (`/proc/diskstats`, or a fixture).
#[derive(Debug, Clone)]
pub struct DiskstatsReader {
    path: PathBuf,
}

impl Default for DiskstatsReader {
    fn default() -> Self {
        Self::new()
    }
}

impl DiskstatsReader {
    /// The machine's `/proc/diskstats`.
    pub fn new() -> Self {
        Self::with_path("/proc/diskstats")
    }

    /// Another file in the same format.
    pub fn with_path(path: impl Into<PathBuf>) -> Self {
        DiskstatsReader { path: path.into() }
    }

    /// The file this reader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every device's line, in file order.
    pub fn read_all(&self) -> Result<Vec<DiskStats>> {
        let text = fs::read_to_string(&self.path).map_err(|e| Error::io(&self.path, e))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| parse_line(l).map_err(|msg| Error::parse(&self.path, i + 1, msg)))
            .collect()
    }

    /// The line of device `name` (a kernel name such as `sda` or `dm-0`, see
    /// [`crate::probe::block_device::BlockResolver`]).
    pub fn read(&self, name: &str) -> Result<DiskStats> {
        let all = self.read_all()?;
        let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
        let hint = format!("{} lists: {}", self.path.display(), names.join(", "));
        all.iter()
            .find(|d| d.name == name)
            .cloned()
            .ok_or_else(|| Error::UnknownDevice {
                kind: "block device",
                name: name.to_string(),
                hint,
            })
    }
}

/// `MAJOR MINOR NAME` then at least the 11 counters every kernel since 2.6 writes (4.18 adds 4
/// discard fields, 5.5 two flush fields; those are ignored).
fn parse_line(line: &str) -> std::result::Result<DiskStats, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 14 {
        return Err(format!(
            "expected MAJOR MINOR NAME and at least 11 counters, found {} fields",
            words.len()
        ));
    }
    let num = |i: usize, what: &str| -> std::result::Result<u64, String> {
        words[i]
            .parse()
            .map_err(|_| format!("bad {what} `{}` (field {})", words[i], i + 1))
    };
    let small = |i: usize, what: &str| -> std::result::Result<u32, String> {
        u32::try_from(num(i, what)?).map_err(|_| format!("{what} out of range (field {})", i + 1))
    };
    Ok(DiskStats {
        major: small(0, "major")?,
        minor: small(1, "minor")?,
        name: words[2].to_string(),
        reads: num(3, "reads completed")?,
        sectors_read: num(5, "sectors read")?,
        writes: num(7, "writes completed")?,
        sectors_written: num(9, "sectors written")?,
        in_flight: num(11, "I/Os in flight")?,
        io_ticks_ms: num(12, "io_ticks")?,
        time_in_queue_ms: num(13, "time in queue")?,
    })
}
