//! Calibrated targets persisted per program and metric set (spec section 4), so the next run of
//! the same program starts calibrated, as the paper's library did.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tact_core::polite::{TargetSet, TARGETS_VERSION};

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

impl TargetStore {
    /// `name` (from `--name`) wins; otherwise the key is the program's file name plus a hash of its
    /// full path and the progress sources, so `/usr/bin/tar` on `io` and on `cpu` calibrate apart.
    pub fn new(state_dir: &Path, name: Option<&str>, program: &str, progress: &[String]) -> Self {
        let key = match name {
            Some(n) => sanitize(n),
            None => {
                let base = Path::new(program)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned());
                let hash = fnv1a(format!("{program}\0{}", progress.join("\0")).as_bytes());
                format!("{}-{hash:016x}", sanitize(&base.unwrap_or_default()))
            }
        };
        TargetStore {
            path: state_dir.join("polite").join(format!("{key}.json")),
            program: program.to_string(),
            progress: progress.to_vec(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved targets, if any. A file from another version or a damaged one is reported and
    /// ignored: calibrating again is safe, failing to start is not.
    pub fn load(&self) -> Option<TargetSet> {
        let text = fs::read_to_string(&self.path).ok()?;
        match serde_json::from_str::<Saved>(&text) {
            Ok(s) if s.targets.version == TARGETS_VERSION && s.progress == self.progress => {
                Some(s.targets)
            }
            Ok(_) => {
                tracing::warn!(
                    "{}: saved for another version or metric set; calibrating afresh",
                    self.path.display()
                );
                None
            }
            Err(e) => {
                tracing::warn!(
                    "{}: unreadable ({e}); calibrating afresh",
                    self.path.display()
                );
                None
            }
        }
    }

    /// Atomic replace: write a temporary file, fsync, rename.
    pub fn save(&self, targets: &TargetSet) -> Result<()> {
        if targets.targets.is_empty() {
            return Ok(());
        }
        let dir = self.path.parent().expect("path has a parent");
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let saved = Saved {
            program: self.program.clone(),
            progress: self.progress.clone(),
            targets: targets.clone(),
        };
        let tmp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(
                serde_json::to_string_pretty(&saved)
                    .expect("serializable")
                    .as_bytes(),
            )?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)
        };
        write().with_context(|| format!("cannot save targets to {}", self.path.display()))
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
            bootstrap: 3,
            ..PoliteConfig::default()
        };
        let mut reg = Regulator::new(cfg, Duration::ZERO, None).unwrap();
        for i in 1..=3 {
            let p = Duration::from_millis(200);
            reg.step(
                p * i,
                Obs {
                    index: 0,
                    dp: &[10.0],
                    active: p,
                    quiet: None,
                },
            )
            .unwrap();
        }
        reg.targets().clone()
    }

    #[test]
    fn round_trip_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        let io = vec!["io".to_string()];
        let store = TargetStore::new(dir.path(), None, "/usr/bin/tar", &io);
        assert!(store
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("tar-"));
        assert_eq!(store.load(), None);
        store.save(&calibrated()).unwrap();
        assert_eq!(store.load(), Some(calibrated()));
        // Another metric set of the same program is another target.
        let cpu = TargetStore::new(dir.path(), None, "/usr/bin/tar", &["cpu".to_string()]);
        assert_ne!(cpu.path(), store.path());
        assert_eq!(cpu.load(), None);
        let named = TargetStore::new(dir.path(), Some("nightly backup/1"), "/usr/bin/tar", &io);
        assert!(named.path().ends_with("polite/nightly_backup_1.json"));
    }

    #[test]
    fn damaged_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = TargetStore::new(dir.path(), Some("x"), "x", &["io".to_string()]);
        fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        fs::write(store.path(), "{not json").unwrap();
        assert_eq!(store.load(), None);
    }
}
