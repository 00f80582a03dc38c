//! Process file descriptors (Linux 5.3+): a handle on one process that keeps naming it after it
//! exits, so a signal sent through it can never reach a process that later reused the pid.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

/// An open pidfd.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: i32,
}

impl PidFd {
    /// `pidfd_open(pid, 0)`. Callers must check afterwards that `pid` still names the process
    /// they meant (start time), since the pid may have been recycled before the call.
    pub fn open(pid: i32) -> Result<PidFd> {
        // SAFETY: plain syscall with integer arguments; the result is a new fd we own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::ESRCH) {
                Error::NoProcess { pid }
            } else {
                Error::Syscall {
                    op: "pidfd_open",
                    pid,
                    source: e,
                }
            });
        }
        // SAFETY: the kernel just returned this fd and nothing else owns it.
        Ok(PidFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
            pid,
        })
    }

    /// Wraps a pidfd received from elsewhere (the guard gets them over SCM_RIGHTS); `pid` is only
    /// used in error messages.
    pub fn from_owned(fd: OwnedFd, pid: i32) -> PidFd {
        PidFd { fd, pid }
    }

    /// The pid this pidfd was opened on (for messages; never signal by it).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// `pidfd_send_signal(fd, sig, NULL, 0)`. A process that has exited gives `NoProcess`.
    pub fn send_signal(&self, sig: libc::c_int) -> Result<()> {
        // SAFETY: the fd is open for our lifetime; a null siginfo is allowed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::ESRCH) {
                Error::NoProcess { pid: self.pid }
            } else {
                Error::Syscall {
                    op: "pidfd_send_signal",
                    pid: self.pid,
                    source: e,
                }
            });
        }
        Ok(())
    }
}

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_reaches_the_process_and_not_a_dead_one() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = PidFd::open(child.id() as i32).unwrap();
        fd.send_signal(0).unwrap();
        fd.send_signal(libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(matches!(fd.send_signal(0), Err(Error::NoProcess { .. })));
    }
}
