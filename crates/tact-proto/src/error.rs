//! What can go wrong: [`ProtoError`] for a message that breaks the protocol (each names the field
//! at fault, so the reply tells a client's author what to fix), [`ClientError`] for a client's
//! exchange with the daemon.

use std::io;
use std::path::PathBuf;

use crate::reply::ErrorCode;

/// A request the daemon cannot accept. The daemon sends `to_string()` back as the reply's `error`
/// and [`ProtoError::code`] as its `code`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtoError {
    /// A line longer than [`crate::MAX_MESSAGE`] bytes; the daemon drops the connection after
    /// replying, since it cannot tell where the next message starts.
    #[error("message: longer than the limit of {limit} bytes")]
    TooLong { limit: usize },

    #[error("message: not valid UTF-8 (byte {valid_up_to} starts an invalid sequence)")]
    NotUtf8 { valid_up_to: usize },

    /// Not JSON at all (this includes `NaN` and `Infinity`, which JSON does not have).
    #[error("message: malformed JSON: {0}")]
    Malformed(String),

    #[error("message: must be a JSON object")]
    NotAnObject,

    /// `v` is missing or is not the version this side speaks.
    #[error("v: this side speaks protocol version {supported}, the message has {got}")]
    Version { supported: u64, got: String },

    #[error("op: unknown operation `{0}` (known: hello, acquire, release, report, set_priority, status, bye, tickets_*)")]
    UnknownOp(String),

    /// A field is missing, of the wrong type, or out of its range. `field` is a dotted path
    /// (`report.rate`).
    #[error("{field}: {problem}")]
    Field { field: String, problem: String },
}

impl ProtoError {
    pub(crate) fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ProtoError::Field {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The machine-readable class of the error, sent as the reply's `code`.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProtoError::TooLong { .. } => ErrorCode::TooLong,
            ProtoError::NotUtf8 { .. } | ProtoError::Malformed(_) | ProtoError::NotAnObject => {
                ErrorCode::Malformed
            }
            ProtoError::Version { .. } => ErrorCode::Version,
            ProtoError::UnknownOp(_) => ErrorCode::UnknownOp,
            ProtoError::Field { .. } => ErrorCode::Invalid,
        }
    }
}

/// A client's exchange with the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing (or nothing alive) listens at the socket. [`ClientError::no_daemon`] tells this
    /// case apart: the caller then works alone.
    #[error("cannot connect to the tact daemon at {}: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },

    /// The daemon closed the connection (it exited, or dropped this client).
    #[error("the tact daemon closed the connection")]
    Disconnected,

    /// No reply within the time limit; the connection is closed, since a late reply would answer
    /// the wrong request.
    #[error("the tact daemon did not answer within {0:?}")]
    Timeout(std::time::Duration),

    #[error("talking to the tact daemon: {0}")]
    Io(#[from] io::Error),

    /// The daemon answered `ok: false`.
    #[error("the tact daemon refused: {message}")]
    Refused { code: ErrorCode, message: String },

    /// The daemon's reply was not what the protocol says.
    #[error("unreadable reply from the tact daemon: {0}")]
    BadReply(String),

    /// A call after the connection was lost; [`crate::Client::reconnect`] makes a new one.
    #[error("not connected to the tact daemon (the connection was lost; reconnect)")]
    NotConnected,

    /// The default socket path could not be worked out.
    #[error("cannot find the tact daemon's socket: {0}")]
    Path(#[from] tact_linux::Error),
}

impl ClientError {
    /// True when no daemon runs at the socket (no file, or nobody listening): the situation in
    /// which jobs run without coordination.
    pub fn no_daemon(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if matches!(source.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused))
    }

    /// True when the daemon went away or became unreachable mid-conversation: the caller may
    /// reconnect, or go on alone.
    pub fn lost(&self) -> bool {
        matches!(
            self,
            ClientError::Disconnected
                | ClientError::Timeout(_)
                | ClientError::Io(_)
                | ClientError::NotConnected
        )
    }
}
