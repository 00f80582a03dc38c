//! `tact tune` with `tcc:psi=1`: the pressure stall readings TCC takes as a saturation hint
//! (`docs/tune.md`, "PSI as a saturation hint"). Machine-wide, from `/proc/pressure`: a command's
//! jobs are not in a cgroup of their own.

use std::time::Duration;

use anyhow::{Context, Result};
use tact_core::tune::Pressure;
use tact_linux::probe::psi::PsiReader;

/// How often the files are read: their avg10 figures are 10 s averages the kernel updates
/// every 2 s, so reading them more often only repeats them.
pub const PSI_PERIOD: Duration = Duration::from_secs(1);

/// Reads memory `some` and `full` and io `full`.
pub struct PressureMeter {
    reader: PsiReader,
}

impl PressureMeter {
    /// Opens the files with one reading, so that a kernel without PSI (or booted with psi=0,
    /// whose files refuse reads) is told at the start.
    pub fn open(reader: PsiReader) -> Result<Self> {
        let meter = PressureMeter { reader };
        meter.read()?;
        Ok(meter)
    }

    /// The latest avg10 figures as fractions.
    pub fn read(&self) -> Result<Pressure> {
        let frac = |p: tact_linux::probe::psi::Pressure| p.avg10 / 100.0;
        Ok(Pressure {
            memory_some: frac(self.reader.some("memory").context("memory pressure")?),
            memory_full: frac(self.reader.full("memory").context("memory pressure")?),
            io_full: frac(self.reader.full("io").context("io pressure")?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_the_avg10_figures_as_fractions() {
        let dir = tempfile::tempdir().unwrap();
        let line = |kind: &str, avg10: &str| {
            format!("{kind} avg10={avg10} avg60=0.00 avg300=0.00 total=1\n")
        };
        std::fs::write(
            dir.path().join("memory"),
            line("some", "12.50") + &line("full", "3.00"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("io"),
            line("some", "40.00") + &line("full", "6.25"),
        )
        .unwrap();
        let meter = PressureMeter::open(PsiReader::with_root(dir.path())).unwrap();
        let p = meter.read().unwrap();
        assert_eq!(
            (p.memory_some, p.memory_full, p.io_full),
            (0.125, 0.03, 0.0625)
        );
    }

    #[test]
    fn missing_files_are_refused_at_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let e = PressureMeter::open(PsiReader::with_root(dir.path()))
            .err()
            .unwrap();
        assert!(format!("{e:#}").starts_with("memory pressure"), "{e:#}");
    }
}
