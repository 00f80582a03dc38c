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
/// independent instances), else tact-linux's default (`StateDir::default_dir`).
pub fn runtime_dir() -> anyhow::Result<PathBuf> {
    match std::env::var_os("TACT_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(tact_linux::state::StateDir::default_dir()?),
    }
}
