//! Waiting for what can interrupt regulation: the job's exit (or the next tick of a timer), or a
//! signal to tact.
//!
//! Termination signals are blocked and read from a signalfd, so they arrive as events in the one
//! loop that also owns the stopped job: there is no handler that could run while the job is half
//! stopped, and the loop always resumes the job before acting on a signal. (Children start with
//! an empty signal mask: see [`unblock_signals_in_child`].)

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// Signals tact handles itself; each resumes the job first.
const HANDLED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// tact blocks termination signals to read them from a signalfd; a command it starts must not
/// inherit that mask, or it would ignore SIGTERM and Ctrl-C.
pub fn unblock_signals_in_child(command: &mut Command) {
    // SAFETY: sigprocmask is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A signal as received.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub signal: Signal,
    /// True when a terminal generated it (Ctrl-C): the job, in the same process group, got it
    /// too, so passing it on would deliver it twice.
    pub from_terminal: bool,
}

pub enum Event {
    Timeout,
    /// The watched file descriptor is readable: the process behind a pidfd exited, or a timerfd
    /// expired.
    Ready,
    Signal(Received),
}

pub struct Events {
    sfd: SignalFd,
}

impl Events {
    /// Blocks the handled signals in this thread (call before starting any thread) and opens
    /// a signalfd for them.
    pub fn new() -> Result<Self> {
        let mut set = SigSet::empty();
        for s in HANDLED {
            set.add(s);
        }
        set.thread_block()
            .context("cannot block termination signals")?;
        let sfd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("cannot open a signalfd")?;
        Ok(Events { sfd })
    }

    /// Reads no signal: for a thread of a process that takes its termination signals in
    /// another thread (the daemon's), which must not have them taken from it.
    pub fn without_signals() -> Result<Self> {
        let sfd = SignalFd::with_flags(
            &SigSet::empty(),
            SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC,
        )
        .context("cannot open a signalfd")?;
        Ok(Events { sfd })
    }

    /// Waits, however long it takes, for `fd` to become readable (`None`: the process behind a
    /// pidfd exited) or a signal to arrive (`Some`).
    pub fn ready_or_signal(&mut self, fd: BorrowedFd) -> Result<Option<Received>> {
        loop {
            match self.wait(fd, Duration::from_secs(3600))? {
                Event::Ready => return Ok(None),
                Event::Signal(sig) => return Ok(Some(sig)),
                Event::Timeout => {}
            }
        }
    }

    /// Waits up to `timeout` for `fd` to become readable (the process behind a pidfd exited, a
    /// timerfd expired) or a signal to arrive.
    pub fn wait(&mut self, fd: BorrowedFd, timeout: Duration) -> Result<Event> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(sig) = self.pending()? {
                return Ok(Event::Signal(sig));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            // Rounded up, so a wait never spins on a zero timeout below one millisecond.
            let ms = u16::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
            let mut fds = [
                PollFd::new(fd, PollFlags::POLLIN),
                PollFd::new(self.sfd.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e).context("poll"),
            }
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                return Ok(Event::Ready);
            }
            if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                continue;
            }
            if Instant::now() >= deadline {
                return Ok(Event::Timeout);
            }
        }
    }

    fn pending(&mut self) -> Result<Option<Received>> {
        let Some(info) = self.sfd.read_signal().context("cannot read the signalfd")? else {
            return Ok(None);
        };
        let signal = Signal::try_from(info.ssi_signo as i32).context("unknown signal number")?;
        Ok(Some(Received {
            signal,
            from_terminal: info.ssi_code == libc::SI_KERNEL,
        }))
    }
}
