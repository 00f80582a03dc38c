//! tact as the GNU make jobserver of the command: an anonymous pipe holding one byte per job
//! slot, passed to make as inherited file descriptors (`MAKEFLAGS=-j --jobserver-auth=R,W`,
//! which make 4.3, Debian 12's, understands; 4.4's named-FIFO style is not offered).
//!
//! make runs its first job in an implicit slot and takes a byte from the pipe for every further
//! job, writing it back when a job ends, so a count of n puts n − 1 tokens in circulation. tact
//! grows the count by writing tokens and shrinks it by reading tokens back as make returns them
//! (never taking one a job holds). At any moment FIONREAD tells how many tokens sit unclaimed,
//! so make's jobs in flight are the tokens issued minus those, plus the implicit slot.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{Context, Result};
use nix::fcntl::OFlag;
use tact_core::tune::Load;

/// The most jobs a jobserver can run: one per byte of a pipe's default capacity (64 KiB), plus
/// make's implicit slot. Writing more tokens would block tact.
pub const MAX_JOBS: usize = 65_537;

/// The byte make 4.3 writes for a token (any byte would do; make writes back what it read).
const TOKEN: u8 = b'+';

pub struct Jobserver {
    /// The pipe's ends as the command inherits them.
    read: OwnedFd,
    write: File,
    /// tact's own, non-blocking open of the read end. Reading back a token races with make for
    /// it, so tact's reads must never block; setting O_NONBLOCK on the shared end would change
    /// make's reads too, which a separate open file description does not.
    take: File,
    /// Tokens tact has put in circulation and not taken back.
    issued: usize,
    /// Tokens that should be in circulation: the target minus make's implicit slot.
    want: usize,
}

impl Jobserver {
    pub fn new(target: usize) -> Result<Self> {
        let (read, write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create the jobserver pipe")?;
        let proc_path = format!("/proc/self/fd/{}", read.as_raw_fd());
        let take = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&proc_path)
            .with_context(|| format!("cannot open the jobserver pipe again through {proc_path}"))?;
        let mut js = Jobserver {
            read,
            write: File::from(write),
            take,
            issued: 0,
            want: 0,
        };
        js.set_target(target)?;
        Ok(js)
    }

    /// Lets `command` inherit the pipe and tells make about it, keeping the user's MAKEFLAGS.
    pub fn prepare(&self, command: &mut Command) {
        let (r, w) = (self.read.as_raw_fd(), self.write.as_raw_fd());
        let old = std::env::var("MAKEFLAGS").ok();
        command.env("MAKEFLAGS", makeflags(old.as_deref(), r, w));
        // SAFETY: fcntl is async-signal-safe, and nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                for fd in [r, w] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Sets the number of jobs make may run: writes the missing tokens now; takes surplus ones
    /// back as they come free (see [`Jobserver::reclaim`]).
    pub fn set_target(&mut self, target: usize) -> Result<()> {
        self.want = target.saturating_sub(1);
        if self.issued < self.want {
            let more = vec![TOKEN; self.want - self.issued];
            self.write
                .write_all(&more)
                .context("cannot write jobserver tokens")?;
            self.issued = self.want;
        }
        self.reclaim()
    }

    /// More tokens are out than the target allows: wait for the pipe to become readable.
    pub fn reclaiming(&self) -> bool {
        self.issued > self.want
    }

    /// The read end to wait on while [`Jobserver::reclaiming`].
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.take.as_fd()
    }

    /// Takes back surplus tokens that sit in the pipe; make may win the race for any of them.
    pub fn reclaim(&mut self) -> Result<()> {
        while self.issued > self.want {
            let mut buf = vec![0u8; self.issued - self.want];
            match self.take.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.issued -= n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("cannot read jobserver tokens back"),
            }
        }
        Ok(())
    }

    /// Tokens in the pipe that no job holds.
    pub fn free(&self) -> Result<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer, which is valid for the call.
        let rc = unsafe { libc::ioctl(self.take.as_raw_fd(), libc::FIONREAD, &mut n) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("FIONREAD on the jobserver pipe");
        }
        Ok(n.max(0) as usize)
    }

    /// make's occupancy: jobs holding tokens, plus the implicit slot while make runs any job
    /// (`running`: the command's live children). make keeps no visible queue, so "work waits"
    /// is inferred: every token taken and the target reached (queued = 1), else none.
    pub fn load(&self, target: usize, running: usize) -> Result<Load> {
        let free = self.free()?;
        let in_flight = self.issued.saturating_sub(free) + running.min(1);
        let queued = usize::from(free == 0 && in_flight >= target);
        Ok(Load::new(in_flight, queued))
    }
}

/// The MAKEFLAGS the command gets: the user's flags without any `-j` or jobserver of their own,
/// then tact's `-j --jobserver-auth=R,W` (and `--jobserver-fds`, the same for make < 4.2), then
/// the user's variable definitions (after ` -- `), which must stay last.
fn makeflags(old: Option<&str>, r: i32, w: i32) -> String {
    let old = old.unwrap_or("").trim();
    let (flags, vars) = match old.strip_prefix("-- ") {
        Some(vars) => ("", Some(vars)),
        None => match old.split_once(" -- ") {
            Some((flags, vars)) => (flags, Some(vars)),
            None => (old, None),
        },
    };
    let mut words: Vec<String> = flags
        .split_whitespace()
        .filter(|w| {
            !(w.starts_with("-j")
                || w.starts_with("--jobserver-auth=")
                || w.starts_with("--jobserver-fds=")
                || w.starts_with("--jobs"))
        })
        .map(str::to_string)
        .collect();
    words.push("-j".into());
    words.push(format!("--jobserver-fds={r},{w}"));
    words.push(format!("--jobserver-auth={r},{w}"));
    let mut out = words.join(" ");
    if let Some(vars) = vars {
        out.push_str(" -- ");
        out.push_str(vars);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makeflags_keep_the_users_flags_and_variables() {
        let ours = "-j --jobserver-fds=3,4 --jobserver-auth=3,4";
        assert_eq!(makeflags(None, 3, 4), ours);
        // A leading bundle of single-letter flags stays first, where make looks for it.
        assert_eq!(makeflags(Some("ks"), 3, 4), format!("ks {ours}"));
        assert_eq!(
            makeflags(Some("k -j8 --jobserver-auth=5,6 -- CC=clang"), 3, 4),
            format!("k {ours} -- CC=clang")
        );
        assert_eq!(makeflags(Some("-- V=1"), 3, 4), format!("{ours} -- V=1"));
    }

    #[test]
    fn tokens_follow_the_target_and_surplus_comes_back_when_free() {
        let mut js = Jobserver::new(4).unwrap();
        assert_eq!(
            js.free().unwrap(),
            3,
            "4 jobs: 3 tokens plus the implicit slot"
        );
        assert_eq!(js.load(4, 0).unwrap(), Load::new(0, 0));

        // Two jobs take tokens (as make would, through the inherited end).
        let mut make = File::from(js.read.try_clone().unwrap());
        let mut held = [0u8; 2];
        make.read_exact(&mut held).unwrap();
        assert_eq!(js.load(4, 3).unwrap(), Load::new(3, 0));

        // Shrinking to 2 takes the free token at once, and one held token only when returned.
        js.set_target(2).unwrap();
        assert_eq!(js.free().unwrap(), 0);
        assert!(js.reclaiming());
        assert_eq!(js.load(2, 3).unwrap(), Load::new(3, 1));
        js.reclaim().unwrap();
        assert!(
            js.reclaiming(),
            "no token is free: nothing is taken from a job"
        );
        js.write.write_all(&held[..1]).unwrap();
        js.reclaim().unwrap();
        assert!(!js.reclaiming());
        assert_eq!(js.load(2, 2).unwrap(), Load::new(2, 1));

        // Growing again writes tokens.
        js.set_target(5).unwrap();
        assert_eq!(js.free().unwrap(), 3);
    }
}
