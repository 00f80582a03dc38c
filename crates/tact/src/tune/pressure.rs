//! `tact tune` with `tcc:psi=1`: the pressure stall readings TCC takes as a saturation hint
//! (`docs/tune.md`, "PSI as a saturation hint"). Machine-wide, from `/proc/pressure`: a command's
//! jobs are not in a cgroup of their own. The reading itself is
//! [`PsiReader::tcc_pressure`], which the library's pools use too.

use anyhow::{Context, Result};
use tact_core::tune::Pressure;
use tact_linux::probe::psi::PsiReader;
pub use tact_linux::probe::psi::PSI_PERIOD;

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
        self.reader.tcc_pressure().context("reading PSI")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_refused_at_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let e = PressureMeter::open(PsiReader::with_root(dir.path()))
            .err()
            .unwrap();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("reading PSI: ") && e.contains("memory"),
            "{e}"
        );
    }
}
