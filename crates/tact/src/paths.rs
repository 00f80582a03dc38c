//! Where tact keeps things, following the XDG base directories.

use std::path::PathBuf;

/// Calibrated targets: `$XDG_STATE_HOME/tact`, else `~/.local/state/tact`.
pub fn state_dir() -> PathBuf {
    xdg("XDG_STATE_HOME", ".local/state").join("tact")
}

fn xdg(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
            PathBuf::from(home).join(fallback)
        }
    }
}

/// Crash records (stopped processes, for `tact recover`): `$TACT_RUNTIME_DIR` when set (tests,
/// independent instances), else `/run/tact` for root and `$XDG_RUNTIME_DIR/tact` for others, else
/// (no login session, e.g. cron or a bare ssh) a private `tact-<uid>` directory in the temporary
/// directory.
pub fn runtime_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TACT_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match tact_linux::state::StateDir::default_dir() {
        Ok(dir) => Ok(dir),
        Err(tact_linux::Error::NoRuntimeDir) => private_temp_dir(),
        Err(e) => Err(e.into()),
    }
}

/// `$TMPDIR/tact-<uid>`, created mode 0700. The temporary directory is shared, so a directory of
/// that name that another user owns, or that others may write, is refused: its records could
/// make `tact recover` signal processes the user never stopped.
fn private_temp_dir() -> anyhow::Result<PathBuf> {
    private_dir_in(&std::env::temp_dir())
}

fn private_dir_in(base: &std::path::Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    let dir = base.join(format!("tact-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => anyhow::bail!("cannot create {}: {e}", dir.display()),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{} is not a private directory of this user (owner uid {}, mode {:o}); \
             set XDG_RUNTIME_DIR or TACT_RUNTIME_DIR to a directory only you can write",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_fallback_runtime_dir_is_private() {
        let base = tempfile::tempdir().unwrap();
        let dir = private_dir_in(base.path()).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Reused as it is on the next call.
        assert_eq!(private_dir_in(base.path()).unwrap(), dir);
        // Opened up by someone: refused, with a way out named.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir_in(base.path()).unwrap_err().to_string();
        assert!(
            e.contains("not a private directory") && e.contains("TACT_RUNTIME_DIR"),
            "{e}"
        );
    }
}
