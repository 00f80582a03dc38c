//! `tact tune` with `tcc:psi=1`: the pressure stall readings TCC takes as a saturation hint
//! (`docs/tune.md`, "PSI as a saturation hint"). The machine's, from `/proc/pressure`, or with
//! `--psi-cgroup DIR` those of a cgroup v2 directory, when the bottleneck's processes (or the
//! command) run in one of their own: then only their stalls count. The reading itself is
//! [`PsiReader::tcc_pressure`], which the library's pools use too.

use std::path::Path;

use anyhow::{anyhow, Result};
use tact_core::tune::Pressure;
pub use tact_linux::probe::psi::PSI_PERIOD;
use tact_linux::probe::psi::{cgroup_v1_hint, PsiReader};

/// Reads memory `some` and `full` and io `full`.
pub struct PressureMeter {
    reader: PsiReader,
    /// Where it reads, for the start line.
    source: String,
}

impl PressureMeter {
    /// The machine's `/proc/pressure`.
    pub fn machine() -> Result<Self> {
        Self::open(
            PsiReader::new(),
            "/proc/pressure (the whole machine's)".to_string(),
        )
    }

    /// `--psi-cgroup DIR`: its `memory.pressure` and `io.pressure`. A directory in a cgroup v1
    /// hierarchy has none; the error then says where the same processes' pressure is.
    pub fn cgroup(dir: &Path) -> Result<Self> {
        Self::open(PsiReader::cgroup(dir), format!("cgroup {}", dir.display())).map_err(|e| {
            let hint = cgroup_v1_hint(dir).map_or(String::new(), |h| format!("; {h}"));
            anyhow!("--psi-cgroup {}: {e:#}{hint}", dir.display())
        })
    }

    /// Opens the files with one reading, so that a kernel without PSI (or booted with psi=0,
    /// whose files refuse reads) is told at the start.
    fn open(reader: PsiReader, source: String) -> Result<Self> {
        let meter = PressureMeter { reader, source };
        meter.read()?;
        Ok(meter)
    }

    /// The latest avg10 figures as fractions.
    pub fn read(&self) -> Result<Pressure> {
        // Not as a context: the error's message names the file and already ends with its
        // cause, which a chain would repeat.
        self.reader
            .tcc_pressure()
            .map_err(|e| anyhow!("reading PSI: {e}"))
    }

    /// Where it reads: `/proc/pressure (the whole machine's)` or `cgroup DIR`.
    pub fn source(&self) -> &str {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_refused_at_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let e = PressureMeter::open(PsiReader::with_root(dir.path()), String::new())
            .err()
            .unwrap();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("reading PSI: ") && e.contains("memory"),
            "{e}"
        );
    }

    #[test]
    fn a_cgroup_directory_is_read_and_a_missing_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = format!("{:#}", PressureMeter::cgroup(dir.path()).err().unwrap());
        let file = dir.path().join("memory.pressure");
        assert!(
            e.starts_with(&format!(
                "--psi-cgroup {}: reading PSI: ",
                dir.path().display()
            )) && e.contains(&file.display().to_string()),
            "{e}"
        );
        // A temporary directory is no cgroup v1 one: no word about hierarchies.
        assert!(!e.contains("cgroup v1"), "{e}");
        let lines = "some avg10=20.00 avg60=0.00 avg300=0.00 total=1\n\
                     full avg10=50.00 avg60=0.00 avg300=0.00 total=1\n";
        std::fs::write(&file, lines).unwrap();
        let e = format!("{:#}", PressureMeter::cgroup(dir.path()).err().unwrap());
        assert!(e.contains("io.pressure"), "{e}");
        std::fs::write(dir.path().join("io.pressure"), lines).unwrap();
        let meter = PressureMeter::cgroup(dir.path()).unwrap();
        assert_eq!(meter.source(), format!("cgroup {}", dir.path().display()));
        let p = meter.read().unwrap();
        assert_eq!((p.memory_some, p.memory_full, p.io_full), (0.2, 0.5, 0.5));
    }
}
