//! How busy a resource was between two readings, for the concurrency engine's bottleneck hint
//! (`docs/tune.md`, "The bottleneck hint"): the busy fraction of chosen CPUs from `/proc/stat`,
//! the fraction of time some task waited for a resource from PSI, a block device's busy time or
//! its completed I/Os against an IOPS cap from `/proc/diskstats`, and a link's bytes against its
//! rate from `/sys/class/net`.
//!
//! All are counters read twice: the first reading only starts the interval. A CPU's busy time
//! is every `/proc/stat` column except idle and iowait (guest time is already inside user and
//! nice); the fraction is Δbusy / Δ(busy + idle) summed over the chosen CPUs, so it needs no
//! clock and an offline CPU (missing line) is an error naming it. The others divide a counter's
//! increase by the monotonic time between the readings.
//!
//! Fractions of time (CPU, PSI, a disk's io_ticks) are capped at 1: beyond it is only a counter
//! and the clock read a moment apart. Rates against a cap ([`DiskIops`], [`LinkUse`]) are not:
//! one above 1 that persists says the device does more than the IOPS given, or the link carries
//! more than the rate given, and whoever logs the readings should see that. TCC clamps each
//! report to [0, 1] itself.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::probe::diskstats::{DiskStats, DiskstatsReader};
use crate::probe::netstats::{NetCounters, NetReader};
use crate::probe::psi::PsiReader;

/// Busy and total jiffies of one CPU since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub busy: u64,
    pub total: u64,
}

/// Reads the per-CPU lines of `/proc/stat` (or a fixture's `stat` under another root).
#[derive(Debug, Clone)]
pub struct CpuStat {
    path: PathBuf,
}

impl CpuStat {
    pub fn new() -> Self {
        Self::with_root("/proc")
    }

    /// `ROOT/stat`.
    pub fn with_root(root: impl AsRef<Path>) -> Self {
        CpuStat {
            path: root.as_ref().join("stat"),
        }
    }

    /// The ticks of each CPU in `cpus`, in that order.
    pub fn read(&self, cpus: &[usize]) -> Result<Vec<CpuTicks>> {
        let text = fs::read_to_string(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let mut out = vec![None; cpus.len()];
        for (n, line) in text.lines().enumerate() {
            let mut fields = line.split_whitespace();
            let Some(id) = fields
                .next()
                .and_then(|name| name.strip_prefix("cpu"))
                .and_then(|id| id.parse::<usize>().ok())
            else {
                continue;
            };
            let Some(slot) = cpus.iter().position(|&c| c == id) else {
                continue;
            };
            out[slot] = Some(parse_ticks(&self.path, n + 1, fields)?);
        }
        out.into_iter()
            .zip(cpus)
            .map(|(t, cpu)| {
                t.ok_or_else(|| Error::parse(&self.path, 1, format!("no line for cpu{cpu}")))
            })
            .collect()
    }
}

impl Default for CpuStat {
    fn default() -> Self {
        Self::new()
    }
}

/// user nice system idle iowait irq softirq steal [guest guest_nice]: idle and iowait are idle.
fn parse_ticks<'a>(
    path: &Path,
    line: usize,
    fields: impl Iterator<Item = &'a str>,
) -> Result<CpuTicks> {
    let mut ticks = CpuTicks::default();
    for (i, f) in fields.enumerate().take(8) {
        let v: u64 = f.parse().map_err(|_| {
            Error::parse(path, line, format!("bad number {f:?} in column {}", i + 2))
        })?;
        ticks.total += v;
        if i != 3 && i != 4 {
            ticks.busy += v;
        }
    }
    Ok(ticks)
}

/// The busy fraction of a set of CPUs between calls.
#[derive(Debug, Clone)]
pub struct CpuBusy {
    stat: CpuStat,
    cpus: Vec<usize>,
    last: Option<CpuTicks>,
}

impl CpuBusy {
    /// Checks that every CPU has a line now, so a wrong list fails at the start.
    pub fn new(stat: CpuStat, cpus: Vec<usize>) -> Result<Self> {
        let mut meter = CpuBusy {
            stat,
            cpus,
            last: None,
        };
        meter.sample()?;
        Ok(meter)
    }

    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// The busy fraction in [0, 1] since the previous call (or since `new`); None when no tick
    /// passed in between.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        let now = self
            .stat
            .read(&self.cpus)?
            .into_iter()
            .fold(CpuTicks::default(), |a, t| CpuTicks {
                busy: a.busy + t.busy,
                total: a.total + t.total,
            });
        let Some(prev) = self.last.replace(now) else {
            return Ok(None);
        };
        let total = now.total.saturating_sub(prev.total);
        let busy = now.busy.saturating_sub(prev.busy);
        Ok((total > 0).then(|| (busy as f64 / total as f64).min(1.0)))
    }
}

/// The increase of a cumulative counter per second of monotonic time, between readings.
#[derive(Debug, Clone, Default)]
struct PerSecond {
    last: Option<(u64, Instant)>,
}

impl PerSecond {
    /// The rate since the previous reading; None for the first one, or when no time passed. A
    /// counter that went back (a device or link that was removed and added again) reads as 0.
    fn rate(&mut self, value: u64, now: Instant) -> Option<f64> {
        let (prev, then) = self.last.replace((value, now))?;
        let dt = now.saturating_duration_since(then).as_secs_f64();
        (dt > 0.0).then(|| value.saturating_sub(prev) as f64 / dt)
    }
}

/// The fraction of time some task waited for a resource (PSI `some` total) between calls: near
/// 1 when the resource is contended, near 0 when it has room.
#[derive(Debug, Clone)]
pub struct Pressure {
    reader: PsiReader,
    resource: String,
    stalled_us: PerSecond,
}

impl Pressure {
    /// Fails when the kernel has no pressure file for `resource` (cpu, io, memory).
    pub fn new(reader: PsiReader, resource: &str) -> Result<Self> {
        let mut meter = Pressure {
            reader,
            resource: resource.to_owned(),
            stalled_us: PerSecond::default(),
        };
        meter.sample()?;
        Ok(meter)
    }

    /// The stall fraction since the previous call; None when no time passed.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        let total = self.reader.some(&self.resource)?.total_us;
        let rate = self.stalled_us.rate(total, Instant::now());
        Ok(rate.map(|us| (us / 1e6).min(1.0)))
    }
}

/// The fraction of wall time a block device had at least one request in flight (its
/// `/proc/diskstats` io_ticks), between calls. It says when a device serving one request at a
/// time is saturated; a device that serves many at once (an SSD, a cloud volume) reads 100% long
/// before it is, and a throttle (an IOPS cap) is invisible to it: see [`DiskIops`] for those.
#[derive(Debug, Clone)]
pub struct DiskBusy {
    reader: DiskstatsReader,
    device: String,
    busy_ms: PerSecond,
}

impl DiskBusy {
    /// `device` is a `/proc/diskstats` name (`vda`, `vda1`, `dm-0`); a name the file does not
    /// list fails here, with the names it does.
    pub fn new(reader: DiskstatsReader, device: &str) -> Result<Self> {
        let mut meter = DiskBusy {
            reader,
            device: device.to_owned(),
            busy_ms: PerSecond::default(),
        };
        meter.sample()?;
        Ok(meter)
    }

    /// The busy fraction in [0, 1] since the previous call; None when no time passed.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        self.sample_at(Instant::now())
    }

    /// [`DiskBusy::sample`] with the reading's time given (tests).
    pub fn sample_at(&mut self, now: Instant) -> Result<Option<f64>> {
        let ticks = self.reader.read(&self.device)?.io_ticks_ms;
        Ok(self.busy_ms.rate(ticks, now).map(|ms| (ms / 1e3).min(1.0)))
    }
}

/// Which completed requests count against an IOPS cap: the keys of cgroup v2's `io.max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOps {
    /// Reads and writes (`iops`: a cloud volume's provisioned IOPS).
    All,
    /// Reads only (`riops`).
    Reads,
    /// Writes only (`wiops`).
    Writes,
}

impl IoOps {
    /// The key as written after `@` (`iops`, `riops`, `wiops`).
    pub fn key(self) -> &'static str {
        match self {
            IoOps::All => "iops",
            IoOps::Reads => "riops",
            IoOps::Writes => "wiops",
        }
    }

    fn count(self, d: &DiskStats) -> u64 {
        match self {
            IoOps::All => d.reads + d.writes,
            IoOps::Reads => d.reads,
            IoOps::Writes => d.writes,
        }
    }
}

/// A block device's completed requests per second over the IOPS it is capped at, between
/// calls: the utilization of a throttle (a cgroup's `io.max`, a cloud volume's provisioned
/// IOPS), which io_ticks cannot see. Counts every process's requests on the device, as the cap
/// of a cloud volume does; a cgroup's cap covers only its own, so name a device the capped
/// jobs have to themselves.
#[derive(Debug, Clone)]
pub struct DiskIops {
    reader: DiskstatsReader,
    device: String,
    ops: IoOps,
    cap: u64,
    done: PerSecond,
}

impl DiskIops {
    /// `device` as for [`DiskBusy::new`]; `cap` (at least 1) in requests per second.
    pub fn new(reader: DiskstatsReader, device: &str, ops: IoOps, cap: u64) -> Result<Self> {
        let mut meter = DiskIops {
            reader,
            device: device.to_owned(),
            ops,
            cap: cap.max(1),
            done: PerSecond::default(),
        };
        meter.sample()?;
        Ok(meter)
    }

    /// Requests per second over the cap since the previous call (above 1 when the device did
    /// more than the cap); None when no time passed.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        self.sample_at(Instant::now())
    }

    /// [`DiskIops::sample`] with the reading's time given (tests).
    pub fn sample_at(&mut self, now: Instant) -> Result<Option<f64>> {
        let done = self.ops.count(&self.reader.read(&self.device)?);
        Ok(self.done.rate(done, now).map(|ops| ops / self.cap as f64))
    }
}

/// Which way of a link counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// What the interface sends (`tx_bytes`): a server's replies, an uploader.
    Egress,
    /// What it receives (`rx_bytes`): a client downloading through a capped link.
    Ingress,
}

impl Direction {
    fn bytes(self, c: &NetCounters) -> u64 {
        match self {
            Direction::Egress => c.tx_bytes,
            Direction::Ingress => c.rx_bytes,
        }
    }
}

/// A link's use: the bits an interface sent (or received) per second over the rate the link
/// carries, between calls. The rate is the user's (a shaper's, a provider's cap): the kernel
/// knows no link's real capacity behind a router.
#[derive(Debug, Clone)]
pub struct LinkUse {
    reader: NetReader,
    iface: String,
    direction: Direction,
    rate_bits: u64,
    bytes: PerSecond,
}

impl LinkUse {
    /// Fails when `iface` does not exist (naming the ones that do); `rate_bits` (at least 1) in
    /// bits per second.
    pub fn new(
        reader: NetReader,
        iface: &str,
        direction: Direction,
        rate_bits: u64,
    ) -> Result<Self> {
        let mut meter = LinkUse {
            reader,
            iface: iface.to_owned(),
            direction,
            rate_bits: rate_bits.max(1),
            bytes: PerSecond::default(),
        };
        meter.sample()?;
        Ok(meter)
    }

    /// Bits per second over the rate since the previous call (above 1 when the link carried
    /// more than the rate given); None when no time passed.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        self.sample_at(Instant::now())
    }

    /// [`LinkUse::sample`] with the reading's time given (tests).
    pub fn sample_at(&mut self, now: Instant) -> Result<Option<f64>> {
        let bytes = self.direction.bytes(&self.reader.counters(&self.iface)?);
        Ok(self
            .bytes
            .rate(bytes, now)
            .map(|b| b * 8.0 / self.rate_bits as f64))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::probe::proc::ProcReader;

    fn write_stat(dir: &Path, cpu1: &str) {
        let text = format!(
            "cpu  500 0 300 9000 100 0 0 0 0 0\n\
             cpu0 100 0 100 4000 50 0 0 0 0 0\n\
             cpu1 {cpu1}\n\
             intr 12345 0 0\nctxt 999\n"
        );
        fs::write(dir.join("stat"), text).unwrap();
    }

    #[test]
    fn busy_fraction_of_the_chosen_cpus_between_readings() {
        let dir = tempfile::tempdir().unwrap();
        write_stat(dir.path(), "400 0 200 5000 50 0 0 0 0 0");
        let mut busy = CpuBusy::new(CpuStat::with_root(dir.path()), vec![1]).unwrap();
        assert_eq!(busy.sample().unwrap(), None, "no tick passed");
        // 90 busy ticks (user 60, system 20, irq 5, softirq 5), 10 idle (idle 6, iowait 4).
        write_stat(dir.path(), "460 0 220 5006 54 5 5 0 0 0");
        let u = busy.sample().unwrap().unwrap();
        assert!((u - 0.9).abs() < 1e-12, "{u}");
    }

    #[test]
    fn several_cpus_add_up() {
        let dir = tempfile::tempdir().unwrap();
        write_stat(dir.path(), "0 0 0 0 0 0 0 0 0 0");
        let stat = CpuStat::with_root(dir.path());
        let t = stat.read(&[1, 0]).unwrap();
        assert_eq!(
            t[1],
            CpuTicks {
                busy: 200,
                total: 4250
            }
        );
        assert_eq!(t[0], CpuTicks::default());
    }

    #[test]
    fn a_missing_cpu_or_a_bad_number_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write_stat(dir.path(), "1 2 x 4 5 6 7 8");
        let stat = CpuStat::with_root(dir.path());
        let e = stat.read(&[7]).unwrap_err().to_string();
        assert!(e.ends_with("stat:1: no line for cpu7"), "{e}");
        let e = stat.read(&[1]).unwrap_err().to_string();
        assert!(e.ends_with("stat:3: bad number \"x\" in column 4"), "{e}");
        assert!(CpuBusy::new(stat, vec![7]).is_err());
    }

    #[test]
    fn pressure_is_the_stall_fraction_between_readings() {
        let dir = tempfile::tempdir().unwrap();
        let line = |total: u64| {
            format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        };
        fs::write(dir.path().join("cpu"), line(1000)).unwrap();
        let mut p = Pressure::new(PsiReader::with_root(dir.path()), "cpu").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        // 10 ms of stall in at least 50 ms.
        fs::write(dir.path().join("cpu"), line(11_000)).unwrap();
        let s = p.sample().unwrap().unwrap();
        assert!(s > 0.0 && s <= 0.2, "{s}");
        assert!(Pressure::new(PsiReader::with_root(dir.path()), "io").is_err());
    }

    /// A reading over an interval in which the counter did not move (none when it was too short
    /// to measure).
    fn idle(reading: Result<Option<f64>>) -> bool {
        matches!(reading.unwrap(), None | Some(0.0))
    }

    /// A diskstats file with `vda` (and its partition `vda1`) at these counters.
    fn write_diskstats(dir: &Path, reads: u64, writes: u64, io_ticks_ms: u64) {
        let text = format!(
            " 254       0 vda {reads} 0 {} 0 {writes} 0 {} 0 0 {io_ticks_ms} 0 0 0 0 0\n              254       1 vda1 10 0 80 0 0 0 0 0 0 7 0 0 0 0 0\n",
            reads * 8,
            writes * 8
        );
        fs::write(dir.join("diskstats"), text).unwrap();
    }

    #[test]
    fn a_disks_busy_fraction_is_io_ticks_over_wall_time() {
        let dir = tempfile::tempdir().unwrap();
        write_diskstats(dir.path(), 0, 0, 5_000);
        let reader = DiskstatsReader::with_path(dir.path().join("diskstats"));
        let mut busy = DiskBusy::new(reader.clone(), "vda").unwrap();
        let t0 = Instant::now();
        // `new` read at about t0: nothing moved since.
        assert!(idle(busy.sample_at(t0)));
        write_diskstats(dir.path(), 0, 0, 5_450);
        let u = busy
            .sample_at(t0 + Duration::from_millis(500))
            .unwrap()
            .unwrap();
        assert!((u - 0.9).abs() < 1e-9, "{u}");
        // A tick counted just after the previous reading: capped at 1.
        write_diskstats(dir.path(), 0, 0, 5_560);
        let u = busy
            .sample_at(t0 + Duration::from_millis(600))
            .unwrap()
            .unwrap();
        assert_eq!(u, 1.0);
        assert_eq!(
            busy.sample_at(t0 + Duration::from_millis(600)).unwrap(),
            None,
            "no time passed"
        );
        // Partitions have their own line.
        let mut part = DiskBusy::new(reader, "vda1").unwrap();
        assert!(idle(part.sample_at(t0)));
    }

    #[test]
    fn iops_count_the_capped_kind_of_request() {
        let dir = tempfile::tempdir().unwrap();
        write_diskstats(dir.path(), 1_000, 500, 0);
        let reader = DiskstatsReader::with_path(dir.path().join("diskstats"));
        let t0 = Instant::now();
        let mut meters: Vec<DiskIops> = [IoOps::All, IoOps::Reads, IoOps::Writes]
            .into_iter()
            .map(|ops| {
                let mut m = DiskIops::new(reader.clone(), "vda", ops, 300).unwrap();
                assert!(idle(m.sample_at(t0)));
                m
            })
            .collect();
        // In 2 s: 510 reads and 90 writes.
        write_diskstats(dir.path(), 1_510, 590, 0);
        let t1 = t0 + Duration::from_secs(2);
        let got: Vec<f64> = meters
            .iter_mut()
            .map(|m| m.sample_at(t1).unwrap().unwrap())
            .collect();
        for (u, want) in got.iter().zip([1.0, 0.85, 0.15]) {
            assert!((u - want).abs() < 1e-9, "{got:?}");
        }
        // More than the cap is kept: the cap given is wrong, and that should show.
        write_diskstats(dir.path(), 2_410, 590, 0);
        let u = meters[1]
            .sample_at(t1 + Duration::from_secs(2))
            .unwrap()
            .unwrap();
        assert!((u - 1.5).abs() < 1e-9, "{u}");
        assert_eq!(IoOps::Reads.key(), "riops");
    }

    #[test]
    fn an_unknown_device_names_the_ones_there_are() {
        let dir = tempfile::tempdir().unwrap();
        write_diskstats(dir.path(), 0, 0, 0);
        let reader = DiskstatsReader::with_path(dir.path().join("diskstats"));
        let e = DiskBusy::new(reader.clone(), "sdz")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown block device `sdz`") && e.contains("vda, vda1"),
            "{e}"
        );
        assert!(DiskIops::new(reader, "sdz", IoOps::All, 10).is_err());
        let gone = DiskstatsReader::with_path(dir.path().join("no-such-file"));
        let e = DiskBusy::new(gone, "vda").unwrap_err().to_string();
        assert!(e.contains("no-such-file"), "{e}");
    }

    /// `SYS/class/net/IFACE/statistics/{rx,tx}_{bytes,packets}`.
    fn write_link(sys: &Path, iface: &str, rx: u64, tx: u64) {
        let stats = sys.join("class/net").join(iface).join("statistics");
        fs::create_dir_all(&stats).unwrap();
        for (name, v) in [
            ("rx_bytes", rx),
            ("tx_bytes", tx),
            ("rx_packets", 0),
            ("tx_packets", 0),
        ] {
            fs::write(stats.join(name), format!("{v}\n")).unwrap();
        }
    }

    #[test]
    fn a_links_use_is_its_bits_over_the_rate_either_way() {
        let dir = tempfile::tempdir().unwrap();
        write_link(dir.path(), "veth0", 0, 1_000_000);
        let reader = NetReader::with_roots(dir.path(), ProcReader::with_root(dir.path()));
        let mut tx = LinkUse::new(reader.clone(), "veth0", Direction::Egress, 50_000_000).unwrap();
        let mut rx = LinkUse::new(reader.clone(), "veth0", Direction::Ingress, 8_000).unwrap();
        let t0 = Instant::now();
        assert!(idle(tx.sample_at(t0)));
        assert!(idle(rx.sample_at(t0)));
        // 0.5 s: 2.5 MB sent = 40 Mbit/s of 50; 250 bytes received = 4 kbit/s of 8.
        write_link(dir.path(), "veth0", 250, 3_500_000);
        let t1 = t0 + Duration::from_millis(500);
        let u = tx.sample_at(t1).unwrap().unwrap();
        assert!((u - 0.8).abs() < 1e-9, "{u}");
        let u = rx.sample_at(t1).unwrap().unwrap();
        assert!((u - 0.5).abs() < 1e-9, "{u}");
        // Counters restarted (the interface was created again): idle, not a burst.
        write_link(dir.path(), "veth0", 0, 10);
        assert_eq!(
            tx.sample_at(t1 + Duration::from_secs(1)).unwrap(),
            Some(0.0)
        );
        let e = LinkUse::new(reader, "eth9", Direction::Egress, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown network interface `eth9`") && e.contains("veth0"),
            "{e}"
        );
    }

    #[test]
    fn reads_this_machine() {
        let mut busy = CpuBusy::new(CpuStat::new(), vec![0]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        if let Some(u) = busy.sample().unwrap() {
            assert!((0.0..=1.0).contains(&u));
        }
    }
}
