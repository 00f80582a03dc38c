//! The one error type of this crate. Every variant names the file, pid or value it failed on, so a
//! message read in a log is enough to find the cause.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Errors of the probes, actuators, guard and state files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written (other than "the process is gone").
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// A file was read but its contents were not what the kernel (or tact) writes.
    #[error("{}:{line}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },

    /// The process does not exist any more (or never did, or its pid now names another process).
    #[error("process {pid} does not exist (it may have exited)")]
    NoProcess { pid: i32 },

    /// `JobTree::attach` refused a target (spec 5.2: never PID 1, kernel threads, tact's ancestors,
    /// or another user's processes).
    #[error("refusing to regulate process {pid}: {reason}")]
    Refused { pid: i32, reason: String },

    /// A system call aimed at one process failed.
    #[error("{op} on process {pid}: {source}")]
    Syscall {
        op: &'static str,
        pid: i32,
        source: io::Error,
    },

    /// `ProgressSource::from_str` got a value it does not know.
    #[error(
        "unknown progress source `{0}` (valid: io, io-read, io-write, io-storage, cpu, file:PATH)"
    )]
    UnknownSource(String),

    /// `JobTree::stop` signalled everything but some members were still running when it gave up.
    #[error("processes {pids:?} were still running {waited:?} after SIGSTOP")]
    NotStopped { pids: Vec<i32>, waited: Duration },

    /// Talking to (or starting, or serving as) the watchdog failed.
    #[error("guard: {what}: {source}")]
    Guard { what: String, source: io::Error },

    /// The fallback directory for state files exists but is not private to this user, so its
    /// records could make `recover` signal processes the user never stopped.
    #[error(
        "{} is not a private directory of this user (owner uid {uid}, mode {mode:o}); \
         set XDG_RUNTIME_DIR to a directory only you can write",
        path.display()
    )]
    NotPrivate { path: PathBuf, uid: u32, mode: u32 },

    /// A device or network interface the user named does not exist on this machine; `hint` lists
    /// what does.
    #[error("unknown {kind} `{name}` ({hint})")]
    UnknownDevice {
        kind: &'static str,
        name: String,
        hint: String,
    },

    /// An actuator's requirement is not met (root or a capability, BFQ, a cgroup controller, a
    /// kernel feature): `what` is the mechanism, `reason` what is missing and how to get it.
    #[error("{what} is not available: {reason}")]
    Unavailable { what: String, reason: String },

    /// An external command (`tc`) failed; `command` is the whole command line.
    #[error("`{command}` failed: {msg}")]
    Command { command: String, msg: String },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        Error::Parse {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }

    pub(crate) fn guard(what: impl Into<String>, source: io::Error) -> Self {
        Error::Guard {
            what: what.into(),
            source,
        }
    }
}
