//! The tact daemon's control protocol, and a blocking client of it.
//!
//! Only one low-importance job on a machine runs at a time, so that regulated jobs do not slow
//! each other and mistake that for contention (spec `progress-regulation.md` 2.6). `tact daemon`
//! hands out the run turn; jobs (`tact-lib` supervisors, `tact run`) ask for it over a Unix
//! stream socket in newline-delimited JSON. `docs/protocol.md` is the reference; in short:
//!
//! ```text
//! → {"v":1,"op":"hello","name":"backup","kind":"run","pid":4242,"priority":0}
//! ← {"v":1,"ok":true,"job":7}
//! → {"v":1,"op":"acquire","job":7}                      (the reply waits for the turn)
//! ← {"v":1,"ok":true,"lease_ms":10000}
//! → {"v":1,"op":"release","job":7,"ran_ms":180,"report":{"state":"running","rate":2.1e6,"target":2.4e6}}
//! ← {"v":1,"ok":true,"revoked":false,"waiting":0}
//! ```
//!
//! * [`parse_request`] validates a request line against every limit below, naming the field at
//!   fault in its [`ProtoError`]; [`LineReader`] cuts the stream into lines of at most
//!   [`MAX_MESSAGE`] bytes.
//! * [`Request::to_line`], [`ok_line`] and [`error_line`] encode; [`parse_reply`] decodes replies.
//! * [`Client`] is the blocking client; [`socket_path`] finds the socket.

mod client;
mod error;
mod line;
mod parse;
mod path;
mod reply;
mod request;
pub mod tickets;

pub use client::{Client, Timeouts, MAX_REPLY};
pub use error::{ClientError, ProtoError};
pub use line::{Line, LineReader};
pub use parse::parse_request;
pub use path::{daemon_socket_path, socket_path, SOCKET_ENV, SYSTEM_SOCKET};
pub use reply::{
    error_line, ok_line, parse_reply, Ack, DaemonStatus, Done, ErrorCode, Grant, JobState,
    JobStatus, Status, Welcome,
};
pub use request::{
    job_name, ClassReport, GateReport, GateState, Hello, IdleCpu, IdleReport, JobId, Kind,
    NetKernelReport, OwnTraffic, Report, ReportState, Request,
};

/// The protocol version every message carries as `"v"`. It changes when a message's meaning
/// changes or a field is removed; adding an optional field does not change it (receivers ignore
/// fields they do not know).
pub const VERSION: u64 = 1;

/// Longest request line, newline excluded (64 KiB).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Longest `name` (and report `unit`), in bytes.
pub const MAX_NAME: usize = 128;

/// Priorities range over `PRIORITY_MIN..=PRIORITY_MAX`; higher runs first; 0 is the default.
pub const PRIORITY_MIN: i32 = -100;
pub const PRIORITY_MAX: i32 = 100;

/// Largest pid Linux can give (`PID_MAX_LIMIT`).
pub const MAX_PID: i32 = 1 << 22;

/// Longest single duration (`ran_ms`, `suspend_for_ms`): one day in ms.
pub const MAX_DAY_MS: u64 = 86_400_000;

/// Longest accumulated duration (`suspended_ms`): ten years in ms.
pub const MAX_TOTAL_MS: u64 = 10 * 365 * MAX_DAY_MS;

/// Largest `rate` or `target` (progress per second).
pub const MAX_RATE: f64 = 1e15;

/// Most gates an idle-gated job reports (one per disk or link it names).
pub const MAX_GATES: usize = 16;

/// Longest explanation a report carries (a link's kernel-assisted `why`): 16 gates of it still
/// fit a message.
pub const MAX_WHY: usize = 1024;
