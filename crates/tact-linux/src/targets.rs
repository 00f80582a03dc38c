//! Calibrated targets persisted per program and metric set (spec section 4), so the next run of
//! the same program starts calibrated, as the paper's library did. One file format for every
//! kind of regulation: `<state_dir>/polite/<key>.json` holding
//! `{"program": .., "progress": [..], "targets": TargetSet}`. `progress` names the metrics
//! (`["io"]` for `tact run --progress io`, `["testpoint"]` for the library), so that no caller
//! takes another's file for its own.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tact_core::polite::{TargetSet, TARGETS_VERSION};

use crate::error::{Error, Result};

#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// What the key stands for, for a person reading the directory.
    program: String,
    progress: Vec<String>,
    targets: TargetSet,
}

/// The file of one program and metric set under `<state_dir>/polite/`.
#[derive(Debug, Clone)]
pub struct TargetStore {
    path: PathBuf,
    program: String,
    progress: Vec<String>,
}

/// The file name (without `.json`) of a program's targets: `name` when the user gave one;
/// otherwise the program's file name, a stable hash of `hashed` (what tells this program and
/// metric set apart from others of the same name) and `suffix`.
pub fn target_key(name: Option<&str>, program: &str, hashed: &str, suffix: &str) -> String {
    match name {
        Some(n) => sanitize(n),
        None => {
            let base = Path::new(program)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!(
                "{}-{:016x}{suffix}",
                sanitize(&base),
                fnv1a(hashed.as_bytes())
            )
        }
    }
}

impl TargetStore {
    pub fn new(state_dir: &Path, key: &str, program: &str, progress: &[String]) -> Self {
        TargetStore {
            path: state_dir
                .join("polite")
                .join(format!("{}.json", sanitize(key))),
            program: program.to_string(),
            progress: progress.to_vec(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved targets; `Ok(None)` when there are none yet. A damaged file, or one saved by
    /// another version or for other metrics, is an error the caller reports before calibrating
    /// afresh: calibrating again is safe, failing to start is not.
    pub fn load(&self) -> Result<Option<TargetSet>> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let parse = |msg: String| Error::parse(&self.path, 1, msg);
        match serde_json::from_str::<Saved>(&text) {
            Ok(s) if s.targets.version == TARGETS_VERSION && s.progress == self.progress => {
                Ok(Some(s.targets))
            }
            Ok(_) => Err(parse(
                "saved by another version or for other progress metrics".into(),
            )),
            Err(e) => Err(parse(format!("unreadable ({e})"))),
        }
    }

    /// Atomic replace: write a temporary file, fsync, rename. Nothing to save is no error.
    pub fn save(&self, targets: &TargetSet) -> Result<()> {
        if targets.targets.is_empty() {
            return Ok(());
        }
        let saved = Saved {
            program: self.program.clone(),
            progress: self.progress.clone(),
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
        write().map_err(|e| {
            fs::remove_file(&tmp).ok();
            Error::io(&self.path, e)
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

    /// Targets of two indices, one with a single metric and one with two.
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

    fn progress(p: &str) -> Vec<String> {
        vec![p.to_string()]
    }

    #[test]
    fn keys() {
        let key = target_key(None, "/usr/bin/tar", "/usr/bin/tar\0io", "");
        assert!(key.starts_with("tar-"), "{key}");
        // Another metric set, or the same name elsewhere, is another key.
        assert_ne!(
            key,
            target_key(None, "/usr/bin/tar", "/usr/bin/tar\0cpu", "")
        );
        assert_ne!(
            target_key(None, "/usr/bin/backup", "/usr/bin/backup", "-lib"),
            target_key(None, "/opt/backup", "/opt/backup", "-lib")
        );
        assert!(target_key(None, "/usr/bin/backup", "x", "-lib").ends_with("-lib"));
        // A user's name wins, made safe for a file name, without suffix.
        assert_eq!(
            target_key(Some("nightly backup/1"), "/usr/bin/tar", "x", "-lib"),
            "nightly_backup_1"
        );
        assert_eq!(target_key(Some(".."), "x", "x", ""), "_..");
        // The hash is FNV-1a, stable across releases.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = TargetStore::new(dir.path(), "x", "/bin/x", &progress("testpoint"));
        assert_eq!(store.load().unwrap(), None);
        store.save(&TargetSet::new()).unwrap();
        assert!(!store.path().exists(), "nothing to save writes nothing");
        store.save(&calibrated()).unwrap();
        assert_eq!(store.load().unwrap(), Some(calibrated()));
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(store.path()).unwrap()).unwrap();
        assert_eq!(v["program"], "/bin/x");
        assert_eq!(v["progress"], serde_json::json!(["testpoint"]));
        assert_eq!(v["targets"]["targets"]["1"]["kind"], "multi");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path().join("polite")).unwrap().count(), 1);
    }

    #[test]
    fn foreign_and_damaged_files_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = TargetStore::new(dir.path(), "x", "x", &progress("testpoint"));
        fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        fs::write(store.path(), "{not json").unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(e.contains("x.json") && e.contains("unreadable"), "{e}");
        // Another caller's metrics (tact run on `io`) are not this caller's targets.
        let io = TargetStore::new(dir.path(), "x", "x", &progress("io"));
        io.save(&calibrated()).unwrap();
        assert_eq!(io.load().unwrap(), Some(calibrated()));
        let e = store.load().unwrap_err().to_string();
        assert!(e.contains("other progress metrics"), "{e}");
    }
}
