//! Requests a client sends, and their encoding (decoding, with validation, is in `parse`).

use serde::{Deserialize, Serialize};

use crate::VERSION;

/// A job's number, given by the daemon in the reply to `hello`.
pub type JobId = u64;

/// One request line. Fields are documented with their limits in `docs/protocol.md`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Register a job; the reply carries its [`JobId`].
    Hello(Hello),
    /// Wait for the run turn; the reply comes when the job has it.
    Acquire { job: JobId },
    /// Give the turn back at a testpoint, saying how long the job ran.
    Release {
        job: JobId,
        ran_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        report: Option<Report>,
    },
    /// Figures for `tact status`, without giving the turn back; also renews the holder's lease.
    Report { job: JobId, report: Report },
    /// Change a job's priority.
    SetPriority { job: JobId, priority: i32 },
    /// Every job and the daemon's counters.
    Status,
    /// Unregister a job.
    Bye { job: JobId },
}

/// The `hello` request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hello {
    /// What `tact status` shows (1 to [`crate::MAX_NAME`] bytes, no control characters).
    pub name: String,
    /// The process doing the work; `None` means the connecting process. `tact run` gives its
    /// child's pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// Higher runs first ([`crate::PRIORITY_MIN`]..=[`crate::PRIORITY_MAX`]).
    pub priority: i32,
    pub kind: Kind,
}

/// Who registers: an in-process supervisor (`tact-lib`) or `tact run`/`tact attach`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Library,
    Run,
}

/// What a job tells about itself at a testpoint; the daemon only displays and exports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub state: ReportState,
    /// Progress per second of running time at the last evaluated testpoint (finite, >= 0,
    /// at most [`crate::MAX_RATE`]); `None` until there is one.
    #[serde(default)]
    pub rate: Option<f64>,
    /// The calibrated target rate, same unit and limits; `None` while calibrating.
    #[serde(default)]
    pub target: Option<f64>,
    /// Unit of `rate` and `target` for display (`B/s`), at most [`crate::MAX_NAME`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Total time the job has spent suspended since it registered, in ms.
    #[serde(default)]
    pub suspended_ms: u64,
    /// Length of the suspension that starts now (0: none), in ms, at most one day.
    #[serde(default)]
    pub suspend_for_ms: u64,
}

/// The job's own regulator state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportState {
    /// Running unregulated to calibrate its target.
    Calibrating,
    /// Regulated, under the probation duty cap.
    Probation,
    /// Regulated and running.
    Running,
    /// Serving a suspension (`suspend_for_ms` long from the report).
    Suspended,
}

impl ReportState {
    pub const ALL: [ReportState; 4] = [
        ReportState::Calibrating,
        ReportState::Probation,
        ReportState::Running,
        ReportState::Suspended,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReportState::Calibrating => "calibrating",
            ReportState::Probation => "probation",
            ReportState::Running => "running",
            ReportState::Suspended => "suspended",
        }
    }
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Library => "library",
            Kind::Run => "run",
        }
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    v: u64,
    #[serde(flatten)]
    request: &'a Request,
}

impl Request {
    /// The request as one line of JSON, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&Envelope {
            v: VERSION,
            request: self,
        })
        .expect("a request always serializes");
        line.push(b'\n');
        line
    }

    /// The operation's name on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Hello(_) => "hello",
            Request::Acquire { .. } => "acquire",
            Request::Release { .. } => "release",
            Request::Report { .. } => "report",
            Request::SetPriority { .. } => "set_priority",
            Request::Status => "status",
            Request::Bye { .. } => "bye",
        }
    }
}
