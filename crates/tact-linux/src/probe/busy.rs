//! How busy a resource was between two readings, for the concurrency engine's bottleneck hint
//! (`docs/tune.md`, "The bottleneck hint"): the busy fraction of chosen CPUs from `/proc/stat`,
//! or the fraction of time some task waited for a resource from PSI.
//!
//! Both are counters read twice: the first reading only starts the interval. A CPU's busy time
//! is every `/proc/stat` column except idle and iowait (guest time is already inside user and
//! nice); the fraction is Δbusy / Δ(busy + idle) summed over the chosen CPUs, so it needs no
//! clock and an offline CPU (missing line) is an error naming it.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
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

/// The fraction of time some task waited for a resource (PSI `some` total) between calls: near
/// 1 when the resource is contended, near 0 when it has room.
#[derive(Debug, Clone)]
pub struct Pressure {
    reader: PsiReader,
    resource: String,
    last: Option<(u64, Instant)>,
}

impl Pressure {
    /// Fails when the kernel has no pressure file for `resource` (cpu, io, memory).
    pub fn new(reader: PsiReader, resource: &str) -> Result<Self> {
        let mut meter = Pressure {
            reader,
            resource: resource.to_owned(),
            last: None,
        };
        meter.sample()?;
        Ok(meter)
    }

    /// The stall fraction since the previous call; None when no time passed.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        let total = self.reader.some(&self.resource)?.total_us;
        let now = Instant::now();
        let Some((prev, then)) = self.last.replace((total, now)) else {
            return Ok(None);
        };
        let dt = (now - then).as_secs_f64() * 1e6;
        Ok((dt > 0.0).then(|| (total.saturating_sub(prev) as f64 / dt).min(1.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn reads_this_machine() {
        let mut busy = CpuBusy::new(CpuStat::new(), vec![0]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        if let Some(u) = busy.sample().unwrap() {
            assert!((0.0..=1.0).contains(&u));
        }
    }
}
