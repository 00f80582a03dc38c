//! Pressure stall information (`/proc/pressure/{cpu,io,memory}`, spec 5.5): how much of the time
//! some task waited for a resource. tact uses it to tell whether a calibration ran on a quiet
//! machine, in which case the calibrated target can be trusted without a probation, and, while a
//! job is stopped, whether the rest of the machine is still busy (`StallMeter`); TCC's hosts read
//! it as a saturation hint ([`PsiReader::tcc_pressure`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::statfs::{statfs, CGROUP_SUPER_MAGIC};

use crate::error::{Error, Result};

/// The resources PSI reports on.
pub const RESOURCES: [&str; 3] = ["cpu", "io", "memory"];

/// How often TCC's hosts read [`PsiReader::tcc_pressure`]: its avg10 figures are 10 s averages
/// the kernel updates every 2 s, so reading them more often only repeats them.
pub const PSI_PERIOD: Duration = Duration::from_secs(1);

/// One line (`some` or `full`) of a pressure file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    /// Percent of the last 10 s during which at least one task stalled.
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Total stall time, microseconds.
    pub total_us: u64,
}

/// Reads pressure files under a root (`/proc/pressure`, or a cgroup directory's `*.pressure`
/// files with [`PsiReader::cgroup`]), so tests run on fixture files.
#[derive(Debug, Clone)]
pub struct PsiReader {
    dir: PathBuf,
    /// File name suffix: "" for /proc/pressure/cpu, ".pressure" for a cgroup's cpu.pressure.
    suffix: &'static str,
}

impl PsiReader {
    /// The system-wide files in `/proc/pressure`.
    pub fn new() -> Self {
        Self::with_root("/proc/pressure")
    }

    /// System-wide files under another directory (fixtures).
    pub fn with_root(dir: impl Into<PathBuf>) -> Self {
        PsiReader {
            dir: dir.into(),
            suffix: "",
        }
    }

    /// A cgroup v2 directory's `cpu.pressure`, `io.pressure`, `memory.pressure`.
    pub fn cgroup(dir: impl Into<PathBuf>) -> Self {
        PsiReader {
            dir: dir.into(),
            suffix: ".pressure",
        }
    }

    /// Whether this kernel reports pressure here at all.
    pub fn available(&self) -> bool {
        self.path("cpu").exists()
    }

    /// The `some` line of `resource` (cpu, io or memory).
    pub fn some(&self, resource: &str) -> Result<Pressure> {
        let path = self.path(resource);
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        parse_line(&path, &text, "some")
    }

    /// The `full` line of `resource` (io or memory; cpu's since Linux 5.13).
    pub fn full(&self, resource: &str) -> Result<Pressure> {
        let path = self.path(resource);
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        parse_line(&path, &text, "full")
    }

    /// Whether every resource's `some avg10` is below `percent`; None when PSI is unavailable.
    pub fn quiet(&self, percent: f64) -> Option<bool> {
        if !self.available() {
            return None;
        }
        let mut quiet = true;
        for r in RESOURCES {
            match self.some(r) {
                Ok(p) => quiet &= p.avg10 < percent,
                // A kernel may lack one file (memory PSI in some configs): judge on the others.
                Err(_) => continue,
            }
        }
        Some(quiet)
    }

    /// What TCC's PSI rules take (`docs/tune.md`, "PSI as a saturation hint"): the avg10 figures
    /// of memory `some` and `full` and io `full`, as fractions. The one reading `tact tune` and
    /// the library's pools share. Fails, naming the file, on a kernel without PSI or booted with
    /// psi=0 (whose files refuse reads).
    pub fn tcc_pressure(&self) -> Result<tact_core::tune::Pressure> {
        let frac = |p: Pressure| p.avg10 / 100.0;
        Ok(tact_core::tune::Pressure {
            memory_some: frac(self.some("memory")?),
            memory_full: frac(self.full("memory")?),
            io_full: frac(self.full("io")?),
        })
    }

    fn path(&self, resource: &str) -> PathBuf {
        self.dir.join(format!("{resource}{}", self.suffix))
    }
}

/// Why a cgroup directory has no pressure files, when the reason is its hierarchy: `dir` (or the
/// nearest of its ancestors that exists) is in a cgroup v1 hierarchy, which has none, and on a
/// hybrid machine the same processes' pressure is in the unified one. None otherwise. For the
/// errors of `tact tune --psi-cgroup` and Python's `psi_cgroup`.
pub fn cgroup_v1_hint(dir: &Path) -> Option<String> {
    let v1 = dir
        .ancestors()
        .find_map(|d| statfs(d).ok())
        .is_some_and(|fs| fs.filesystem_type() == CGROUP_SUPER_MAGIC);
    v1.then(|| {
        format!(
            "{} is in a cgroup v1 hierarchy, which has no pressure files: on a hybrid machine the \
             same processes' pressure is in the unified (cgroup2) hierarchy, e.g. \
             /sys/fs/cgroup/unified/..., whose directories have memory.pressure even with no \
             controllers enabled",
            dir.display()
        )
    })
}

/// The stall fraction between two readings: the largest over cpu, io and memory of
/// Δtotal / Δt, so a short burst shows at once (the `avg10` figures lag by seconds).
#[derive(Debug, Clone)]
pub struct StallMeter {
    reader: PsiReader,
    last: Option<([Option<u64>; 3], Instant)>,
}

impl StallMeter {
    pub fn new(reader: PsiReader) -> Self {
        StallMeter { reader, last: None }
    }

    /// The stall fraction since the previous call; None on the first call, when PSI is
    /// unavailable, or when no time has passed.
    pub fn stall(&mut self) -> Option<f64> {
        let now = Instant::now();
        let totals = RESOURCES.map(|r| self.reader.some(r).ok().map(|p| p.total_us));
        let (prev, then) = self.last.replace((totals, now))?;
        let dt = (now - then).as_secs_f64() * 1e6;
        if dt <= 0.0 {
            return None;
        }
        totals
            .iter()
            .zip(prev)
            .filter_map(|(t, p)| Some(t.as_ref()?.saturating_sub(p?) as f64 / dt))
            .reduce(f64::max)
            .map(|f| f.min(1.0))
    }
}

impl Default for PsiReader {
    fn default() -> Self {
        Self::new()
    }
}

/// Parses `some avg10=0.12 avg60=0.05 avg300=0.01 total=12345` (the line starting with `kind`).
fn parse_line(path: &Path, text: &str, kind: &str) -> Result<Pressure> {
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.split_whitespace().next() == Some(kind))
        .ok_or_else(|| Error::parse(path, 1, format!("no `{kind}` line")))?;
    let field = |name: &str| -> Result<&str> {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .ok_or_else(|| Error::parse(path, n + 1, format!("no {name}= field")))
    };
    let float = |name: &str| -> Result<f64> {
        field(name)?
            .parse()
            .map_err(|_| Error::parse(path, n + 1, format!("bad number for {name}")))
    };
    Ok(Pressure {
        avg10: float("avg10")?,
        avg60: float("avg60")?,
        avg300: float("avg300")?,
        total_us: field("total")?
            .parse()
            .map_err(|_| Error::parse(path, n + 1, "bad number for total"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(cpu: &str, io: &str, memory: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("cpu", cpu), ("io", io), ("memory", memory)] {
            fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    const CALM: &str = "some avg10=0.50 avg60=0.20 avg300=0.10 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
    const BUSY: &str = "some avg10=12.34 avg60=3.00 avg300=1.00 total=99999999\nfull avg10=5.00 avg60=1.00 avg300=0.50 total=555\n";

    #[test]
    fn stall_is_the_busiest_resource_since_the_last_reading() {
        let dir = fixture(CALM, CALM, CALM);
        let mut meter = StallMeter::new(PsiReader::with_root(dir.path()));
        assert_eq!(meter.stall(), None, "no interval yet");
        std::thread::sleep(std::time::Duration::from_millis(50));
        // io stalls for 10 ms more than it did: at most 10 ms / 50 ms of the interval.
        fs::write(
            dir.path().join("io"),
            CALM.replace("total=1000", "total=11000"),
        )
        .unwrap();
        let s = meter.stall().unwrap();
        assert!(s > 0.0 && s <= 0.2, "stall {s}");
        assert_eq!(meter.stall(), Some(0.0));
    }

    #[test]
    fn parses_the_some_line() {
        let dir = fixture(BUSY, CALM, CALM);
        let p = PsiReader::with_root(dir.path()).some("cpu").unwrap();
        assert_eq!(
            p,
            Pressure {
                avg10: 12.34,
                avg60: 3.0,
                avg300: 1.0,
                total_us: 99_999_999
            }
        );
    }

    #[test]
    fn quiet_only_when_every_resource_is_calm() {
        let calm = fixture(CALM, CALM, CALM);
        assert_eq!(PsiReader::with_root(calm.path()).quiet(5.0), Some(true));
        let busy_io = fixture(CALM, BUSY, CALM);
        assert_eq!(PsiReader::with_root(busy_io.path()).quiet(5.0), Some(false));
        let none = tempfile::tempdir().unwrap();
        assert_eq!(PsiReader::with_root(none.path()).quiet(5.0), None);
    }

    #[test]
    fn tcc_pressure_is_the_avg10_figures_as_fractions() {
        let line = |kind: &str, avg10: &str| {
            format!("{kind} avg10={avg10} avg60=0.00 avg300=0.00 total=1\n")
        };
        let dir = fixture(
            CALM,
            &(line("some", "40.00") + &line("full", "6.25")),
            &(line("some", "12.50") + &line("full", "3.00")),
        );
        let p = PsiReader::with_root(dir.path()).tcc_pressure().unwrap();
        assert_eq!(
            (p.memory_some, p.memory_full, p.io_full),
            (0.125, 0.03, 0.0625)
        );
        let none = tempfile::tempdir().unwrap();
        let e = PsiReader::with_root(none.path())
            .tcc_pressure()
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory"), "{e}");
    }

    #[test]
    fn cgroup_files_have_a_suffix() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("io.pressure"), BUSY).unwrap();
        assert_eq!(
            PsiReader::cgroup(dir.path()).some("io").unwrap().avg10,
            12.34
        );
    }

    #[test]
    fn malformed_files_name_the_file_and_line() {
        let dir = fixture(
            "some avg10=x avg60=0 avg300=0 total=1\n",
            "full avg10=0\n",
            CALM,
        );
        let r = PsiReader::with_root(dir.path());
        let e = r.some("cpu").unwrap_err().to_string();
        assert!(e.ends_with("cpu:1: bad number for avg10"), "{e}");
        let e = r.some("io").unwrap_err().to_string();
        assert!(e.ends_with("io:1: no `some` line"), "{e}");
    }

    #[test]
    fn reads_this_machine_when_it_has_psi() {
        let r = PsiReader::new();
        if r.available() {
            let p = r.some("cpu").unwrap();
            assert!((0.0..=100.0).contains(&p.avg10));
        }
    }
}
