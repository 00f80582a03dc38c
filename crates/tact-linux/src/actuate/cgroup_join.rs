//! Joining cgroups between fork and exec, so that a program runs in them from its first
//! instruction: no CPU time of its own outside them, and every socket it opens created there
//! (what nftables' `socket cgroupv2` matches).
//!
//! [`join_before_exec`] opens each `cgroup.procs` before the fork, so that an error names the
//! file there, and makes the command's child write `0` ("myself") to each before it execs. In
//! the child only write(2) runs: it is async-signal-safe, and nothing is allocated. A join that
//! fails there fails the spawn, so the program never runs outside cgroups its caller promised;
//! the spawn's own error carries only an errno, so [`JoinCheck::failure`] tells the parent that
//! it was the join, and on which file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// Size of the child's report: its errno and the index of the file it failed on.
const REPORT: usize = 8;

/// The parent's end of a join armed by [`join_before_exec`].
#[derive(Debug)]
pub struct JoinCheck {
    /// The `cgroup.procs` files, in the order the child writes them.
    files: Vec<PathBuf>,
    /// Read end of the pipe the child reports a failed join on (non-blocking).
    report: File,
}

/// Makes the child that `command` spawns join the cgroup directories `dirs`, in that order,
/// between fork and exec. Call once per command.
pub fn join_before_exec(command: &mut Command, dirs: &[&Path]) -> Result<JoinCheck> {
    let files: Vec<PathBuf> = dirs.iter().map(|d| d.join("cgroup.procs")).collect();
    // O_CLOEXEC (std's default), as the pipe's ends: the program never sees these descriptors.
    let procs = files
        .iter()
        .map(|path| {
            OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))
        })
        .collect::<Result<Vec<File>>>()?;
    let (report, tell) = report_pipe().map_err(|e| Error::io("pipe2", e))?;
    // SAFETY: the closure calls write(2) and sched_{get,set}affinity(2) only, which are
    // async-signal-safe system calls, and allocates nothing (an `io::Error` made from an errno
    // is not boxed; the CPU set is on the stack).
    unsafe {
        command.pre_exec(move || {
            // The program keeps the CPU mask it inherits: before Linux 6.2 joining a cgroup
            // with another cpuset reset it (see `cgroup_cpu::write_pid`). A mask the new
            // cpuset does not allow at all stays as the kernel set it.
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let had_mask = libc::sched_getaffinity(0, size, &mut mask) == 0;
            for (i, procs) in procs.iter().enumerate() {
                let n = libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1);
                if n == 1 {
                    continue;
                }
                let errno = match n {
                    -1 => io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO),
                    _ => libc::EIO,
                };
                let mut msg = [0u8; REPORT];
                msg[..4].copy_from_slice(&errno.to_ne_bytes());
                msg[4..].copy_from_slice(&(i as u32).to_ne_bytes());
                // A pipe takes up to PIPE_BUF bytes at once; the parent reads after the spawn.
                libc::write(tell.as_raw_fd(), msg.as_ptr().cast(), REPORT);
                return Err(io::Error::from_raw_os_error(errno));
            }
            if had_mask {
                libc::sched_setaffinity(0, size, &mask);
            }
            Ok(())
        });
    }
    Ok(JoinCheck { files, report })
}

impl JoinCheck {
    /// After a failed spawn: the join's error, naming the file, if the join is what failed
    /// (`None`: the exec did, or the spawn succeeded).
    pub fn failure(&self) -> Option<Error> {
        let mut msg = [0u8; REPORT];
        match (&self.report).read(&mut msg) {
            Ok(REPORT) => {}
            _ => return None,
        }
        let errno = i32::from_ne_bytes(msg[..4].try_into().expect("4 bytes"));
        let index = u32::from_ne_bytes(msg[4..].try_into().expect("4 bytes")) as usize;
        let path = self.files.get(index)?;
        Some(Error::io(path, io::Error::from_raw_os_error(errno)))
    }
}

/// A pipe whose ends close on exec, the read end non-blocking: (read, write).
fn report_pipe() -> io::Result<(File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors owned by nobody else.
    unsafe { Ok((File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A `cgroup.procs` stand-in in `dir`: a plain file takes the write, as the kernel's does.
    fn fake_cgroup(dir: &Path) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.procs"), "").unwrap();
        dir.to_path_buf()
    }

    #[test]
    fn the_child_writes_itself_to_each_file_before_it_execs() {
        let tmp = tempfile::tempdir().unwrap();
        let a = fake_cgroup(&tmp.path().join("a"));
        let b = fake_cgroup(&tmp.path().join("b"));
        let mut command = Command::new("true");
        let check = join_before_exec(&mut command, &[&a, &b]).unwrap();
        assert!(command.status().unwrap().success());
        for dir in [&a, &b] {
            assert_eq!(fs::read_to_string(dir.join("cgroup.procs")).unwrap(), "0");
        }
        assert!(check.failure().is_none());
    }

    #[test]
    fn a_failed_join_fails_the_spawn_and_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let ok = fake_cgroup(&tmp.path().join("ok"));
        // Writes to /dev/full fail with ENOSPC, as a write to a cgroup that is gone fails.
        let bad = tmp.path().join("bad");
        fs::create_dir(&bad).unwrap();
        std::os::unix::fs::symlink("/dev/full", bad.join("cgroup.procs")).unwrap();
        let mut command = Command::new("true");
        let check = join_before_exec(&mut command, &[&ok, &bad]).unwrap();
        let err = command.spawn().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        let failure = check.failure().expect("the join failed").to_string();
        assert!(
            failure.contains("bad/cgroup.procs") && failure.contains("No space left"),
            "{failure}"
        );
        // The program never ran; the first file was written before the second failed.
        assert_eq!(fs::read_to_string(ok.join("cgroup.procs")).unwrap(), "0");
    }

    #[test]
    fn an_exec_failure_is_not_the_joins() {
        let tmp = tempfile::tempdir().unwrap();
        let a = fake_cgroup(&tmp.path().join("a"));
        let mut command = Command::new(tmp.path().join("no-such-program"));
        let check = join_before_exec(&mut command, &[&a]).unwrap();
        assert!(command.spawn().is_err());
        assert!(check.failure().is_none());
    }

    #[test]
    fn a_missing_file_is_an_error_before_the_fork() {
        let tmp = tempfile::tempdir().unwrap();
        let e = join_before_exec(&mut Command::new("true"), &[&tmp.path().join("gone")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("gone/cgroup.procs"), "{e}");
    }
}
