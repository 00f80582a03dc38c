//! Replies the daemon sends: `{"v":1,"ok":true, ...payload}` or
//! `{"v":1,"ok":false,"code":"...","error":"..."}`, one line each.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ClientError;
use crate::parse::check_version;
use crate::request::{IdleReport, JobId, Kind, ReportState};
use crate::VERSION;

/// The reply to `hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub job: JobId,
}

/// The reply to `acquire`: the job has the turn. It must `release` or `report` within
/// `lease_ms`, or it is presumed hung and loses the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    pub lease_ms: u64,
}

/// The reply to `release` and `report`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    /// The job had lost its turn before this message because it let its lease run out (presumed
    /// hung); it must `acquire` again before running on.
    #[serde(default)]
    pub revoked: bool,
    /// How many other jobs wait for the turn now. A holder that keeps running at a testpoint
    /// (`report`) should give the turn back when this is not zero, stopping first if it is
    /// stopped from outside, so that two jobs never run at once.
    #[serde(default)]
    pub waiting: u32,
}

/// The reply to `set_priority` and `bye`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {}

/// The reply to `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub daemon: DaemonStatus,
    /// Ordered by job id.
    pub jobs: Vec<JobStatus>,
}

/// The daemon itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: i32,
    pub uptime_s: f64,
    pub lease_ms: u64,
    /// The job holding the turn, if any.
    #[serde(default)]
    pub holder: Option<JobId>,
    /// Open client connections.
    pub connections: u64,
    /// Connections accepted since start.
    pub connections_total: u64,
    /// Turns handed out since start.
    pub grants_total: u64,
    /// Turns taken back from holders whose lease ran out.
    pub revoked_total: u64,
    /// Requests refused (malformed, invalid, not permitted).
    pub errors_total: u64,
}

/// One job as the daemon sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    pub job: JobId,
    pub pid: i32,
    pub uid: u32,
    /// The user name of `uid`, or the number when it has none.
    pub user: String,
    pub name: String,
    pub kind: Kind,
    pub priority: i32,
    pub state: JobState,
    /// Seconds until the current suspension ends (state `suspended`).
    #[serde(default)]
    pub suspended_for_s: Option<f64>,
    /// The job's own regulator state from its last report, if it sent one.
    #[serde(default)]
    pub reported: Option<ReportState>,
    #[serde(default)]
    pub rate: Option<f64>,
    #[serde(default)]
    pub target: Option<f64>,
    #[serde(default)]
    pub unit: Option<String>,
    /// Fraction of the last minute (or of its life, if shorter) it held the turn.
    pub duty_cycle: f64,
    /// Total time suspended, as the job last reported it.
    pub suspended_s: f64,
    /// Seconds since its last testpoint (`release` or `report`), or since it registered.
    pub since_yield_s: f64,
    /// Seconds it has held the current turn (state `running` or `hung`).
    #[serde(default)]
    pub holding_s: Option<f64>,
    /// Decayed run time the arbiter orders equal priorities by (half-life 10 s).
    pub usage_s: f64,
    /// Seconds since it registered.
    pub age_s: f64,
    /// An idle-gated job's gates and CPU setting, from its last report (added within version 1:
    /// `null` from daemons that predate it).
    #[serde(default)]
    pub idle: Option<IdleReport>,
}

/// A job's place in the turn-taking, with its own report folded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Holds the turn.
    Running,
    /// Waits in `acquire` for the turn.
    Waiting,
    /// Held the turn but neither released nor reported within the lease; lost it.
    Hung,
    /// Serving a suspension it reported.
    Suspended,
    /// Registered, doing none of the above (between testpoints without the turn, or not started).
    Idle,
}

impl JobState {
    pub const ALL: [JobState; 5] = [
        JobState::Running,
        JobState::Waiting,
        JobState::Hung,
        JobState::Suspended,
        JobState::Idle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Waiting => "waiting",
            JobState::Hung => "hung",
            JobState::Suspended => "suspended",
            JobState::Idle => "idle",
        }
    }
}

/// The machine-readable class of a refusal (`code`). Clients act on it; the `error` text is for
/// people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The message was not JSON, not UTF-8, or not an object.
    Malformed,
    /// Longer than the limit; the daemon closes the connection after this reply.
    TooLong,
    /// `v` is missing or another version.
    Version,
    UnknownOp,
    /// A field is missing, of the wrong type or out of range.
    Invalid,
    /// The peer may not do this (another user's process or job).
    Permission,
    /// No such job (it never existed, said bye, or was removed).
    NoSuchJob,
    /// A limit of the daemon (connections, jobs per connection) is reached.
    Busy,
    /// The tickets model refuses a well-formed operation: an unknown currency, ticket or process,
    /// a cycle, a hard total exceeded, an exchange a participant cannot cover.
    Refused,
    /// A code this client does not know (from a newer daemon).
    #[serde(other)]
    Other,
}

#[derive(Serialize)]
struct Success<'a, T> {
    v: u64,
    ok: bool,
    #[serde(flatten)]
    payload: &'a T,
}

#[derive(Serialize)]
struct Failure<'a> {
    v: u64,
    ok: bool,
    code: ErrorCode,
    error: &'a str,
}

/// A success reply line carrying `payload`'s fields.
pub fn ok_line<T: Serialize>(payload: &T) -> Vec<u8> {
    line(&Success {
        v: VERSION,
        ok: true,
        payload,
    })
}

/// A refusal line.
pub fn error_line(code: ErrorCode, message: &str) -> Vec<u8> {
    line(&Failure {
        v: VERSION,
        ok: false,
        code,
        error: message,
    })
}

fn line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).expect("replies always serialize");
    line.push(b'\n');
    line
}

/// Reads a reply line: the payload of a success, or the refusal as [`ClientError::Refused`].
pub fn parse_reply<T: DeserializeOwned>(line: &[u8]) -> Result<T, ClientError> {
    let bad = |what: String| ClientError::BadReply(what);
    let value: Value = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    let Value::Object(obj) = &value else {
        return Err(bad("not a JSON object".into()));
    };
    check_version(obj).map_err(|e| bad(e.to_string()))?;
    match obj.get("ok").and_then(Value::as_bool) {
        Some(false) => Err(ClientError::Refused {
            code: obj
                .get("code")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or(ErrorCode::Other),
            message: obj
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string(),
        }),
        Some(true) => serde_json::from_value(value).map_err(|e| bad(e.to_string())),
        None => Err(bad("no boolean `ok`".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip() {
        let line = ok_line(&Grant { lease_ms: 10_000 });
        assert_eq!(line, b"{\"v\":1,\"ok\":true,\"lease_ms\":10000}\n");
        assert_eq!(
            parse_reply::<Grant>(&line).unwrap(),
            Grant { lease_ms: 10_000 }
        );
        assert_eq!(ok_line(&Done {}), b"{\"v\":1,\"ok\":true}\n");
        let line = error_line(ErrorCode::Permission, "pid: process 1 belongs to uid 0");
        match parse_reply::<Done>(&line) {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::Permission);
                assert!(message.starts_with("pid: "));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A `status` reply from a daemon that predates `idle` (or a gate's `own_traffic`) still
    /// reads, and one with it reads back the same.
    #[test]
    fn status_replies_with_and_without_idle_gates_parse() {
        let old = br#"{"v":1,"ok":true,"daemon":{"pid":812,"uptime_s":3.5,"lease_ms":10000,
            "holder":null,"connections":1,"connections_total":2,"grants_total":0,
            "revoked_total":0,"errors_total":0},"jobs":[{"job":7,"pid":4242,"uid":1000,
            "user":"alice","name":"backup","kind":"run","priority":0,"state":"idle",
            "suspended_for_s":null,"reported":"running","rate":null,"target":null,"unit":null,
            "duty_cycle":0.0,"suspended_s":0.0,"since_yield_s":0.5,"holding_s":null,
            "usage_s":0.0,"age_s":3.0}]}"#;
        let mut status = parse_reply::<Status>(old).unwrap();
        assert_eq!(status.jobs[0].idle, None);
        status.jobs[0].idle = Some(IdleReport {
            cpu: Some(crate::IdleCpu::SchedIdle),
            gates: vec![crate::GateReport {
                resource: "net:lo".into(),
                state: crate::GateState::Held,
                pi_ms: 10.0,
                holds: 2,
                held_ms: 35,
                fg_bytes: 1 << 20,
                counters: [[1, 2, 3, 4]; 4],
                preempted: 1,
                expired_pis: 1,
                harm: 0.5,
                kernel: Some(crate::NetKernelReport {
                    htb_rate_bits: Some(1_000_000),
                    marking: true,
                    why: "htb at 1Mbit".into(),
                    classes: None,
                }),
                own_traffic: Some(crate::OwnTraffic::TcpSockets),
            }],
        });
        let line = ok_line(&status);
        assert_eq!(parse_reply::<Status>(&line).unwrap(), status);
        // A gate from a daemon (or job) that predates `own_traffic` has none.
        status.jobs[0].idle.as_mut().unwrap().gates[0].own_traffic = None;
        let line = ok_line(&status);
        assert!(!String::from_utf8_lossy(&line).contains("own_traffic"));
        assert_eq!(parse_reply::<Status>(&line).unwrap(), status);
    }

    #[test]
    fn unknown_codes_and_fields_are_tolerated_and_versions_are_not() {
        let r = parse_reply::<Done>(br#"{"v":1,"ok":false,"code":"new_thing","error":"x"}"#);
        assert!(matches!(
            r,
            Err(ClientError::Refused {
                code: ErrorCode::Other,
                ..
            })
        ));
        assert_eq!(
            parse_reply::<Ack>(br#"{"v":1,"ok":true,"revoked":true,"later":1}"#).unwrap(),
            Ack {
                revoked: true,
                waiting: 0
            }
        );
        let e = parse_reply::<Done>(br#"{"v":2,"ok":true}"#).unwrap_err();
        assert!(e.to_string().contains("version 1"), "{e}");
        assert!(matches!(
            parse_reply::<Done>(b"garbage"),
            Err(ClientError::BadReply(_))
        ));
    }
}
