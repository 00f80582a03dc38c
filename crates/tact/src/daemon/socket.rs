//! The daemon's listening socket: one daemon per socket path, a stale socket file replaced, the
//! file removed again at exit.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use tact_proto::{Client, Timeouts};

/// A bound socket. The lock on `<socket>.lock`, held as long as this lives, is what makes the
/// daemon the only one on this path: two daemons starting together cannot both remove a stale
/// socket and bind.
pub struct Bound {
    pub listener: UnixListener,
    pub path: PathBuf,
    _lock: Flock<File>,
}

/// Binds `path`: creates its directory if missing, refuses if another daemon serves it, removes
/// a stale socket file, and opens the socket to every user when running as root (the peer's
/// credentials, checked per request, are the access control).
pub fn bind(path: &Path, root: bool) -> Result<Bound> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    prepare_dir(dir, root)?;
    let lock_path = lock_path(path);
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .with_context(|| format!("cannot open the lock file {}", lock_path.display()))?;
    let lock = match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => bail!(already_running(path)),
        Err((_, e)) => bail!("cannot lock {}: {e}", lock_path.display()),
    };
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            // A daemon that does not lock (an older tact, or something else) may still answer.
            if Client::connect_with(path, quick()).is_ok() {
                bail!(already_running(path));
            }
            tracing::info!("removing the stale socket {}", path.display());
            fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket; remove it or choose another --socket",
            path.display()
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    let mode = if root { 0o666 } else { 0o600 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(Bound {
        listener,
        path: path.to_path_buf(),
        _lock: lock,
    })
}

/// What identifies the socket file this daemon bound: device and inode.
pub type Identity = (u64, u64);

pub fn identity(path: &Path) -> Result<Identity> {
    let meta =
        fs::symlink_metadata(path).with_context(|| format!("cannot inspect {}", path.display()))?;
    Ok((meta.dev(), meta.ino()))
}

/// Removes the socket file at exit, if it is still the one this daemon bound (someone may have
/// removed it and started another daemon).
pub fn remove(path: &Path, bound: Identity) {
    if identity(path).ok() != Some(bound) {
        return;
    }
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

fn quick() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(1),
        reply: Duration::from_secs(2),
    }
}

/// The message for a socket a live daemon serves, with its pid when it answers `status`.
fn already_running(path: &Path) -> String {
    let pid = Client::connect_with(path, quick())
        .and_then(|mut c| c.status())
        .map(|s| format!(" (pid {})", s.daemon.pid))
        .unwrap_or_default();
    format!(
        "another tact daemon{pid} is already running on {}; stop it first, or give this one \
         another --socket",
        path.display()
    )
}

/// Creates the socket's directory: private (0700) for a user's daemon; for root's, traversable
/// by everyone (0711: others can reach the socket but not list the directory).
fn prepare_dir(dir: &Path, root: bool) -> Result<()> {
    let mode = if root { 0o711 } else { 0o700 };
    DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let meta = fs::metadata(dir).with_context(|| format!("cannot inspect {}", dir.display()))?;
    if root && meta.mode() & 0o001 == 0 {
        tracing::warn!(
            "other users cannot reach the socket: {} is mode {:o}; `chmod o+x` it to let them \
             register jobs",
            dir.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_daemon_per_path_and_stale_sockets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/s");
        let first = bind(&path, false).unwrap();
        let mode = fs::metadata(dir.path().join("sub")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let e = bind(&path, false).err().unwrap().to_string();
        assert!(e.contains("already running"), "{e}");
        // A dead daemon: its socket file remains, its lock is gone.
        drop(first);
        assert!(path.exists());
        let second = bind(&path, false).unwrap();
        let id = identity(&path).unwrap();
        remove(&path, (id.0, id.1 + 1));
        assert!(path.exists());
        remove(&second.path, id);
        assert!(!path.exists());
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        fs::write(&path, "mine").unwrap();
        let e = bind(&path, false).err().unwrap().to_string();
        assert!(e.contains("is not a socket"), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "mine");
    }
}
