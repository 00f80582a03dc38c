//! A pseudo-terminal for tests of what a user's Ctrl-C does.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// A pseudo-terminal whose slave becomes the controlling terminal of a process started with
/// [`Pty::controlling`]: writing `^C` to the master then sends SIGINT to its foreground process
/// group, as a user's Ctrl-C does.
pub struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

impl Pty {
    pub fn open() -> Pty {
        // SAFETY: plain libc calls; every fd returned is checked and owned once.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            let master = OwnedFd::from_raw_fd(m);
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            assert!(
                s >= 0,
                "open the pty slave: {}",
                std::io::Error::last_os_error()
            );
            Pty {
                master,
                slave: OwnedFd::from_raw_fd(s),
            }
        }
    }

    /// Makes `command` a session leader on the slave (its stdin), so that its process group is
    /// the terminal's foreground group, with SIGINT and SIGQUIT at their defaults as a terminal's
    /// shell leaves them. A test run from a script's `cmd &` inherits them ignored, and a `trap`
    /// of an ignored-on-entry signal is a no-op in sh, so the job's own handlers would never run.
    pub fn controlling(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        command.stdin(Stdio::from(self.slave.try_clone().unwrap()));
        // SAFETY: setsid, ioctl and signal are async-signal-safe; stdin is the slave by now.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0
                    || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0
                    || libc::signal(libc::SIGINT, libc::SIG_DFL) == libc::SIG_ERR
                    || libc::signal(libc::SIGQUIT, libc::SIG_DFL) == libc::SIG_ERR
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    pub fn ctrl_c(&self) {
        // SAFETY: writes one byte from a live buffer to an fd we own.
        let n = unsafe { libc::write(self.master.as_raw_fd(), b"\x03".as_ptr().cast(), 1) };
        assert_eq!(n, 1, "write ^C: {}", std::io::Error::last_os_error());
    }
}
