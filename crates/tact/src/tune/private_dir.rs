//! A rendezvous file (the jobserver's fifo, the exec-wrap socket) alone in a temporary directory
//! only tact's user can enter, removed with it when tact drops it: on every exit path but
//! SIGKILL, since tact takes its termination signals as events and returns normally.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct PrivateDir {
    dir: PathBuf,
    /// The one entry the directory is for; its owner creates it.
    entry: PathBuf,
    /// What the entry is, for the warning when it cannot be removed.
    what: &'static str,
}

impl PrivateDir {
    /// Creates `PREFIX-XXXXXX/` in the temporary directory ($TMPDIR, else /tmp), mode 0700, and
    /// names `entry` in it (not created).
    pub fn create(prefix: &str, entry: &str, what: &'static str) -> Result<Self> {
        let base = std::env::temp_dir();
        // mkdtemp creates the directory 0700.
        let dir =
            nix::unistd::mkdtemp(&base.join(format!("{prefix}-XXXXXX"))).with_context(|| {
                format!(
                    "cannot create a directory for the {what} in {}",
                    base.display()
                )
            })?;
        Ok(PrivateDir {
            entry: dir.join(entry),
            dir,
            what,
        })
    }

    pub fn entry(&self) -> &Path {
        &self.entry
    }

    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateDir {
    /// Clients that opened the entry keep it open; none can open it afresh after this.
    fn drop(&mut self) {
        for removed in [
            std::fs::remove_file(&self.entry),
            std::fs::remove_dir(&self.dir),
        ] {
            // Not found: the entry was never created (its creation failed).
            if let Err(e) = removed.or_else(|e| match e.kind() {
                ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }) {
                tracing::warn!(
                    "cannot remove the {} {}: {e}",
                    self.what,
                    self.entry.display()
                );
            }
        }
    }
}
