//! Where the daemon's socket is. Every client command and the daemon resolve it here, so they
//! agree.

use std::path::{Path, PathBuf};

use tact_linux::state::StateDir;

/// The environment variable that names the socket, for every command.
pub const SOCKET_ENV: &str = "TACT_SOCKET";

/// The socket of a system daemon (`tact daemon` run by root, e.g. from `tact.service`).
pub const SYSTEM_SOCKET: &str = "/run/tact/daemon.sock";

/// File name of the socket in a runtime directory.
const SOCKET_NAME: &str = "daemon.sock";

/// The socket a daemon listens on when not told: `$TACT_SOCKET`, else `daemon.sock` in
/// [`StateDir::default_dir`] (`/run/tact` for root, `$XDG_RUNTIME_DIR/tact` for other users).
pub fn daemon_socket_path(explicit: Option<&Path>) -> Result<PathBuf, tact_linux::Error> {
    if let Some(path) = explicit.map(Path::to_path_buf).or_else(from_env) {
        return Ok(path);
    }
    Ok(StateDir::default_dir()?.join(SOCKET_NAME))
}

/// The socket a client talks to when not told: `$TACT_SOCKET`, else the user's own daemon's
/// socket ([`daemon_socket_path`]) when it exists, else the system daemon's when that exists (a
/// machine-wide daemon serves every user), else the user's path (which then fails to connect
/// with "not found"). A user without a private directory for a daemon of their own (without
/// `$XDG_RUNTIME_DIR`, a `$TMPDIR/tact-<uid>` that another user owns or others may write) has
/// no own daemon: their daemon would refuse it too, and a socket there is never trusted, so the
/// system daemon's path is the answer then.
pub fn socket_path(explicit: Option<&Path>) -> Result<PathBuf, tact_linux::Error> {
    if let Some(path) = explicit.map(Path::to_path_buf).or_else(from_env) {
        return Ok(path);
    }
    let system = Path::new(SYSTEM_SOCKET);
    match daemon_socket_path(None) {
        Ok(own) if own.exists() || !system.exists() => Ok(own),
        Ok(_) | Err(tact_linux::Error::NotPrivate { .. }) => Ok(system.to_path_buf()),
        Err(e) => Err(e),
    }
}

fn from_env() -> Option<PathBuf> {
    std::env::var_os(SOCKET_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}
