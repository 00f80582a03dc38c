//! Requests a client sends, and their encoding (decoding, with validation, is in `parse`).

use serde::{Deserialize, Serialize};

use crate::tickets::TicketsRequest;
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
    /// An operation of the tickets model (`tickets_*`; see [`crate::tickets`]).
    #[serde(untagged)]
    Tickets(TicketsRequest),
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

/// `name` made fit for [`Hello::name`]: control characters become spaces, and it is cut at a
/// character boundary to at most [`crate::MAX_NAME`] bytes (not characters: `é` takes two).
/// An empty result (an empty name) becomes `"job"`.
pub fn job_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(crate::MAX_NAME));
    for c in name.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > crate::MAX_NAME {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        out.push_str("job");
    }
    out
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
    /// An idle-gated job's (`tact run --idle`) gates and CPU setting; `None` for other jobs.
    /// Added within version 1: daemons that predate it ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleReport>,
}

/// What an idle-gated job reports besides the common figures: it never takes the run turn (its
/// gates decide when it runs), so these are what `tact status` can tell about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleReport {
    /// How the job's CPU use is made idle (`--idle cpu`); `None` when the CPU is not named.
    #[serde(default)]
    pub cpu: Option<IdleCpu>,
    /// One gate per disk or link (at most [`crate::MAX_GATES`]).
    #[serde(default)]
    pub gates: Vec<GateReport>,
}

/// The mechanism behind `--idle cpu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleCpu {
    /// SCHED_IDLE on every thread only (no writable cgroup).
    SchedIdle,
    /// SCHED_IDLE on every thread, and the job in a child cgroup with `cpu.idle = 1`.
    Cgroup,
}

impl IdleCpu {
    pub const ALL: [IdleCpu; 2] = [IdleCpu::SchedIdle, IdleCpu::Cgroup];

    pub fn as_str(self) -> &'static str {
        match self {
            IdleCpu::SchedIdle => "sched_idle",
            IdleCpu::Cgroup => "cgroup",
        }
    }
}

/// One resource's gate (spec idletime §6): its state and the counters of the job's `--json-log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    /// `disk:vda`, `net:eth0` (1 to [`crate::MAX_NAME`] bytes, no control characters).
    pub resource: String,
    pub state: GateState,
    /// The preemption interval in force, ms (at most one day).
    pub pi_ms: f64,
    /// Times this gate has held the job.
    #[serde(default)]
    pub holds: u64,
    /// Total time this gate has held the job, ms (at most [`crate::MAX_TOTAL_MS`]).
    #[serde(default)]
    pub held_ms: u64,
    /// Foreground bytes seen on the resource since the job started.
    #[serde(default)]
    pub fg_bytes: u64,
    /// The thesis's X\[s\]\[e\]: rows idle, fg, bg, pi; columns f, b, t, i.
    #[serde(default)]
    pub counters: [[u64; 4]; 4],
    /// B\[f\]: probes that found foreground activity while the job was released.
    #[serde(default)]
    pub preempted: u64,
    /// P\[t\]: preemption intervals that ran out (chances for the job).
    #[serde(default)]
    pub expired_pis: u64,
    /// B\[f\] over every probe with foreground activity (0 to 1).
    #[serde(default)]
    pub harm: f64,
    /// What the kernel does for a link beyond the gate (`--idle net` as root); `None` for disks
    /// and from jobs that predate it. Added within version 1: daemons that predate it ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<NetKernelReport>,
    /// Where a link's gate learns the job's own traffic, which is not foreground; `None` for
    /// disks and from jobs that predate it. Added within version 1: daemons that predate it
    /// ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_traffic: Option<OwnTraffic>,
}

/// The source of a job's own traffic on a link (`docs/idle.md`, "The job's own traffic").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnTraffic {
    /// The job has a network namespace of its own: its interfaces' counters.
    Namespace,
    /// The job shares tact's namespace and its packets are marked into its class of tact's htb
    /// tree: the class's counters for what it sends (every protocol), its TCP sockets for what
    /// it receives; its received UDP and other traffic counts as foreground.
    HtbClass,
    /// The job shares tact's namespace: the byte counters of its TCP sockets (sock_diag); its
    /// UDP and other traffic counts as foreground.
    TcpSockets,
    /// No source: all of the job's traffic counts as foreground.
    #[serde(rename = "none")]
    Unknown,
}

impl OwnTraffic {
    pub const ALL: [OwnTraffic; 4] = [
        OwnTraffic::Namespace,
        OwnTraffic::HtbClass,
        OwnTraffic::TcpSockets,
        OwnTraffic::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OwnTraffic::Namespace => "namespace",
            OwnTraffic::HtbClass => "htb_class",
            OwnTraffic::TcpSockets => "tcp_sockets",
            OwnTraffic::Unknown => "none",
        }
    }
}

/// The kernel-assisted part of a link's gate: the htb tree on its egress and the marking of the
/// job's packets (`docs/idle.md`, "Kernel-assisted network priority").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetKernelReport {
    /// The htb rate in bits/s; `None` when tact built no tree on the link.
    #[serde(default)]
    pub htb_rate_bits: Option<u64>,
    /// Whether tact marks the job's packets DSCP LE (nftables, by the job's cgroup).
    #[serde(default)]
    pub marking: bool,
    /// What was applied and why not the rest (at most [`crate::MAX_WHY`] bytes).
    #[serde(default)]
    pub why: String,
    /// The bytes the tree's classes have sent, once a second; `None` without a tree.
    #[serde(default)]
    pub classes: Option<ClassReport>,
}

/// What the htb classes of a link have sent since tact built them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassReport {
    /// Class 1:10: every packet not marked LE.
    #[serde(default)]
    pub fg_bytes: u64,
    /// Class 1:20: the packets marked LE (the job's, when tact marks them).
    #[serde(default)]
    pub bg_bytes: u64,
}

/// Whether a gate lets the job run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateState {
    /// The foreground uses the resource: the gate holds the job.
    Held,
    /// The foreground has left the resource, and the gate holds the job until a preemption
    /// interval passes without it.
    Pi,
    /// The gate lets the job run.
    Released,
}

impl GateState {
    pub const ALL: [GateState; 3] = [GateState::Held, GateState::Pi, GateState::Released];

    pub fn as_str(self) -> &'static str {
        match self {
            GateState::Held => "held",
            GateState::Pi => "pi",
            GateState::Released => "released",
        }
    }
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
            Request::Tickets(t) => t.op(),
        }
    }
}
