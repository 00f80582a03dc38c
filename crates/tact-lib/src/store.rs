//! Calibrated targets persisted per program (spec 2.7 and section 4), so the next run of the same
//! program starts calibrated, as the paper's library did.
//!
//! The file format is the `tact` binary's (`crates/tact/src/store.rs`):
//! `{"program": .., "progress": [..], "targets": TargetSet}`, with `progress` set to
//! `["testpoint"]` so that neither side mistakes the other's file for its own.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tact_core::polite::{TargetSet, TARGETS_VERSION};

use crate::Error;

/// What the library's progress is, in the `progress` field: metrics reported through testpoints.
const PROGRESS: &str = "testpoint";

#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// What the key stands for, for a person reading the directory.
    program: String,
    progress: Vec<String>,
    targets: TargetSet,
}

/// The file of one program under `<state_dir>/polite/`.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    path: PathBuf,
    program: String,
}

impl Store {
    /// `name` (`TACT_NAME`) wins; otherwise the key is the executable's file name, a stable hash
    /// of its full path, and `-lib`, so a program regulated both from inside (library) and from
    /// outside (`tact run`) keeps two targets: their progress differs.
    pub(crate) fn new(state_dir: &Path, name: Option<&str>, exe: &Path) -> Self {
        let program = exe.to_string_lossy().into_owned();
        let key = match name {
            Some(n) => sanitize(n),
            None => {
                let base = exe
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let hash = fnv1a(program.as_bytes());
                format!("{}-{hash:016x}-lib", sanitize(&base))
            }
        };
        Store {
            path: state_dir.join("polite").join(format!("{key}.json")),
            program,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The saved targets, if any. A file from another version, of another kind or damaged is
    /// reported and ignored: calibrating again is safe, failing the program is not.
    pub(crate) fn load(&self) -> Option<TargetSet> {
        let text = fs::read_to_string(&self.path).ok()?;
        match serde_json::from_str::<Saved>(&text) {
            Ok(s) if s.targets.version == TARGETS_VERSION && s.progress == [PROGRESS] => {
                Some(s.targets)
            }
            Ok(_) => {
                eprintln!(
                    "tact: {}: saved by another version or for external regulation; calibrating afresh",
                    self.path.display()
                );
                None
            }
            Err(e) => {
                eprintln!(
                    "tact: {}: unreadable ({e}); calibrating afresh",
                    self.path.display()
                );
                None
            }
        }
    }

    /// Atomic replace: write a temporary file, fsync, rename. Nothing to save is no error.
    pub(crate) fn save(&self, targets: &TargetSet) -> Result<(), Error> {
        if targets.targets.is_empty() {
            return Ok(());
        }
        let saved = Saved {
            program: self.program.clone(),
            progress: vec![PROGRESS.to_string()],
            targets: targets.clone(),
        };
        let tmp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                fs::create_dir_all(dir)?;
            }
            let text = serde_json::to_string_pretty(&saved).map_err(std::io::Error::other)?;
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)
        };
        write().map_err(|source| {
            fs::remove_file(&tmp).ok();
            Error::Save {
                path: self.path.clone(),
                source,
            }
        })
    }
}

fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with('.') {
        format!("_{out}")
    } else {
        out
    }
}

/// FNV-1a: a stable hash for file names (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tact_core::polite::{Obs, PoliteConfig, Regulator};

    fn calibrated() -> TargetSet {
        let cfg = PoliteConfig {
            bootstrap: 2,
            ..PoliteConfig::default()
        };
        let mut reg = Regulator::new(cfg, Duration::ZERO, None).unwrap();
        let p = Duration::from_millis(200);
        for i in 1..=2 {
            for (index, dp) in [(0, &[10.0][..]), (1, &[3.0, 4.0][..])] {
                let obs = Obs {
                    index,
                    dp,
                    active: p,
                    quiet: None,
                };
                reg.step(p * (2 * i + index), obs).unwrap();
            }
        }
        reg.targets().clone()
    }

    #[test]
    fn keys() {
        let dir = Path::new("/state");
        let a = Store::new(dir, None, Path::new("/usr/bin/backup"));
        let name = a.path().file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("backup-") && name.ends_with("-lib.json"),
            "{name}"
        );
        // The same name elsewhere is another program.
        assert_ne!(
            Store::new(dir, None, Path::new("/opt/backup")).path(),
            a.path()
        );
        let named = Store::new(dir, Some("nightly backup/1"), Path::new("/usr/bin/backup"));
        assert_eq!(
            named.path(),
            Path::new("/state/polite/nightly_backup_1.json")
        );
        // The hash is FNV-1a, stable across releases.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn round_trip_in_the_binarys_format() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), Some("x"), Path::new("/bin/x"));
        assert_eq!(store.load(), None);
        store.save(&TargetSet::new()).unwrap();
        assert!(!store.path().exists(), "nothing to save writes nothing");
        store.save(&calibrated()).unwrap();
        assert_eq!(store.load(), Some(calibrated()));
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(store.path()).unwrap()).unwrap();
        assert_eq!(v["program"], "/bin/x");
        assert_eq!(v["progress"], serde_json::json!(["testpoint"]));
        assert_eq!(v["targets"]["targets"]["1"]["kind"], "multi");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path().join("polite")).unwrap().count(), 1);
    }

    #[test]
    fn foreign_and_damaged_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), Some("x"), Path::new("x"));
        fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        fs::write(store.path(), "{not json").unwrap();
        assert_eq!(store.load(), None);
        let external = serde_json::json!({
            "program": "x", "progress": ["io"], "targets": calibrated()
        });
        fs::write(store.path(), external.to_string()).unwrap();
        assert_eq!(store.load(), None);
    }
}
