//! Decoding and validating a request line. Everything a client sends passes through
//! [`parse_request`], so every limit of `docs/protocol.md` is enforced here, and every refusal
//! names the field at fault. It never panics, whatever the bytes (property-tested).

use serde_json::{Map, Value};

use crate::error::ProtoError;
use crate::request::{
    ClassReport, GateReport, GateState, Hello, IdleCpu, IdleReport, JobId, Kind, NetKernelReport,
    OwnTraffic, Report, ReportState, Request,
};
use crate::{
    MAX_DAY_MS, MAX_GATES, MAX_MESSAGE, MAX_NAME, MAX_PID, MAX_RATE, MAX_TOTAL_MS, MAX_WHY,
    PRIORITY_MAX, PRIORITY_MIN, VERSION,
};

/// Parses one request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, ProtoError> {
    if line.len() > MAX_MESSAGE {
        return Err(ProtoError::TooLong { limit: MAX_MESSAGE });
    }
    let text = std::str::from_utf8(line).map_err(|e| ProtoError::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    let Value::Object(obj) = value else {
        return Err(ProtoError::NotAnObject);
    };
    check_version(&obj)?;
    let top = Fields::new(&obj, "");
    let op = match obj.get("op") {
        None => return Err(ProtoError::field("op", "missing")),
        Some(Value::String(op)) => op.as_str(),
        Some(other) => {
            return Err(ProtoError::field(
                "op",
                format!("must be a string, not {}", kind_of(other)),
            ))
        }
    };
    match op {
        "hello" => Ok(Request::Hello(Hello {
            name: top.name("name")?,
            pid: top.opt_int("pid", 1, MAX_PID.into())?.map(|p| p as i32),
            priority: top
                .opt_int("priority", PRIORITY_MIN.into(), PRIORITY_MAX.into())?
                .unwrap_or(0) as i32,
            kind: match top.string("kind", 16)?.as_str() {
                "library" => Kind::Library,
                "run" => Kind::Run,
                other => {
                    return Err(ProtoError::field(
                        "kind",
                        format!("must be \"library\" or \"run\", not {other:?}"),
                    ))
                }
            },
        })),
        "acquire" => Ok(Request::Acquire { job: top.job()? }),
        "release" => Ok(Request::Release {
            job: top.job()?,
            ran_ms: top.int("ran_ms", 0, MAX_DAY_MS as i64)? as u64,
            report: match obj.get("report") {
                None | Some(Value::Null) => None,
                Some(_) => Some(top.report("report")?),
            },
        }),
        "report" => Ok(Request::Report {
            job: top.job()?,
            report: top.report("report")?,
        }),
        "set_priority" => Ok(Request::SetPriority {
            job: top.job()?,
            priority: top.int("priority", PRIORITY_MIN.into(), PRIORITY_MAX.into())? as i32,
        }),
        "status" => Ok(Request::Status),
        "bye" => Ok(Request::Bye { job: top.job()? }),
        other => match crate::tickets::parse(other, &obj) {
            Some(tickets) => tickets.map(Request::Tickets),
            None => Err(ProtoError::UnknownOp(truncate(other, 64))),
        },
    }
}

/// `v` must be present and equal to [`VERSION`]; it is checked before anything else so that a
/// client speaking another version hears about the version, not about some field.
pub(crate) fn check_version(obj: &Map<String, Value>) -> Result<(), ProtoError> {
    match obj.get("v") {
        Some(v) if v.as_u64() == Some(VERSION) => Ok(()),
        Some(v) => Err(ProtoError::Version {
            supported: VERSION,
            got: truncate(&v.to_string(), 32),
        }),
        None => Err(ProtoError::Version {
            supported: VERSION,
            got: "none (every message carries \"v\": 1)".into(),
        }),
    }
}

/// The fields of one JSON object, with the dotted path to it for error messages.
pub(crate) struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(obj: &'a Map<String, Value>, prefix: &'a str) -> Self {
        Fields { obj, prefix }
    }

    pub(crate) fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    pub(crate) fn err(&self, name: &str, problem: impl Into<String>) -> ProtoError {
        ProtoError::field(self.path(name), problem)
    }

    /// The value of a field, `None` when absent or `null`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    fn job(&self) -> Result<JobId, ProtoError> {
        Ok(self.int("job", 1, i64::MAX)? as JobId)
    }

    pub(crate) fn int(&self, name: &str, min: i64, max: i64) -> Result<i64, ProtoError> {
        self.opt_int(name, min, max)?
            .ok_or_else(|| self.err(name, "missing"))
    }

    /// An integer in `min..=max`; `1.0` is not an integer here, and a number beyond the range of
    /// 64-bit integers is out of range rather than rounded.
    pub(crate) fn opt_int(
        &self,
        name: &str,
        min: i64,
        max: i64,
    ) -> Result<Option<i64>, ProtoError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let range = || format!("an integer from {min} to {max}");
        let Value::Number(n) = value else {
            return Err(self.err(name, format!("must be {}, not {}", range(), kind_of(value))));
        };
        match n.as_i64() {
            Some(i) if (min..=max).contains(&i) => Ok(Some(i)),
            _ => Err(self.err(name, format!("must be {}, not {n}", range()))),
        }
    }

    /// A finite number in `0..=max` (integers welcome), or `None` when absent or `null`.
    fn opt_amount(&self, name: &str, max: f64) -> Result<Option<f64>, ProtoError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let x = match value {
            Value::Number(n) => n.as_f64(),
            _ => {
                return Err(self.err(
                    name,
                    format!("must be a number from 0 to {max:e}, not {}", kind_of(value)),
                ))
            }
        };
        match x {
            Some(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(Some(x)),
            _ => Err(self.err(
                name,
                format!("must be a number from 0 to {max:e}, not {value}"),
            )),
        }
    }

    pub(crate) fn string(&self, name: &str, max: usize) -> Result<String, ProtoError> {
        self.opt_string(name, max)?
            .ok_or_else(|| self.err(name, "missing"))
    }

    /// A non-empty string of at most `max` bytes without control characters (it ends up on
    /// terminals and in metric labels).
    pub(crate) fn opt_string(&self, name: &str, max: usize) -> Result<Option<String>, ProtoError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let Value::String(s) = value else {
            return Err(self.err(name, format!("must be a string, not {}", kind_of(value))));
        };
        if s.is_empty() {
            return Err(self.err(name, "must not be empty"));
        }
        if s.len() > max {
            return Err(self.err(
                name,
                format!("must be at most {max} bytes, not {}", s.len()),
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(self.err(name, "must not contain control characters"));
        }
        Ok(Some(s.clone()))
    }

    fn name(&self, name: &str) -> Result<String, ProtoError> {
        self.string(name, MAX_NAME)
    }

    fn report(&self, name: &str) -> Result<Report, ProtoError> {
        let obj = self
            .opt_object(name)?
            .ok_or_else(|| self.err(name, "missing"))?;
        let path = self.path(name);
        let f = Fields::new(obj, &path);
        let state = f.choice("state", &ReportState::ALL, ReportState::as_str)?;
        Ok(Report {
            state,
            rate: f.opt_amount("rate", MAX_RATE)?,
            target: f.opt_amount("target", MAX_RATE)?,
            unit: f.opt_string("unit", MAX_NAME)?,
            suspended_ms: f
                .opt_int("suspended_ms", 0, MAX_TOTAL_MS as i64)?
                .unwrap_or(0) as u64,
            suspend_for_ms: f
                .opt_int("suspend_for_ms", 0, MAX_DAY_MS as i64)?
                .unwrap_or(0) as u64,
            idle: match f.opt_object("idle")? {
                None => None,
                Some(obj) => Some(Fields::new(obj, &f.path("idle")).idle()?),
            },
        })
    }

    /// An object field, or `None` when absent or `null`.
    fn opt_object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>, ProtoError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(obj)) => Ok(Some(obj)),
            Some(other) => {
                Err(self.err(name, format!("must be an object, not {}", kind_of(other))))
            }
        }
    }

    /// An array field of at most `max` items, empty when absent or `null`.
    fn opt_array(&self, name: &str, max: usize) -> Result<&'a [Value], ProtoError> {
        match self.get(name) {
            None => Ok(&[]),
            Some(Value::Array(items)) if items.len() <= max => Ok(items),
            Some(Value::Array(items)) => Err(self.err(
                name,
                format!("must have at most {max} items, not {}", items.len()),
            )),
            Some(other) => Err(self.err(name, format!("must be an array, not {}", kind_of(other)))),
        }
    }

    /// One of `choices` (by its wire name), or `None` when absent or `null`.
    fn opt_choice<T: Copy>(
        &self,
        name: &str,
        choices: &[T],
        wire: fn(T) -> &'static str,
    ) -> Result<Option<T>, ProtoError> {
        let Some(got) = self.opt_string(name, 32)? else {
            return Ok(None);
        };
        match choices.iter().find(|c| wire(**c) == got) {
            Some(c) => Ok(Some(*c)),
            None => {
                let names: Vec<&str> = choices.iter().map(|c| wire(*c)).collect();
                Err(self.err(
                    name,
                    format!("must be one of {}, not {got:?}", names.join(", ")),
                ))
            }
        }
    }

    fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[T],
        wire: fn(T) -> &'static str,
    ) -> Result<T, ProtoError> {
        self.opt_choice(name, choices, wire)?
            .ok_or_else(|| self.err(name, "missing"))
    }

    fn count(&self, name: &str) -> Result<u64, ProtoError> {
        Ok(self.opt_int(name, 0, i64::MAX)?.unwrap_or(0) as u64)
    }

    /// `report.idle`.
    fn idle(&self) -> Result<IdleReport, ProtoError> {
        let gates = self
            .opt_array("gates", MAX_GATES)?
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let path = format!("{}[{i}]", self.path("gates"));
                match item {
                    Value::Object(obj) => Fields::new(obj, &path).gate(),
                    other => Err(ProtoError::field(
                        path,
                        format!("must be an object, not {}", kind_of(other)),
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(IdleReport {
            cpu: self.opt_choice("cpu", &IdleCpu::ALL, IdleCpu::as_str)?,
            gates,
        })
    }

    /// One item of `report.idle.gates`.
    fn gate(&self) -> Result<GateReport, ProtoError> {
        Ok(GateReport {
            resource: self.name("resource")?,
            state: self.choice("state", &GateState::ALL, GateState::as_str)?,
            pi_ms: self
                .opt_amount("pi_ms", MAX_DAY_MS as f64)?
                .ok_or_else(|| self.err("pi_ms", "missing"))?,
            holds: self.count("holds")?,
            held_ms: self
                .opt_int("held_ms", 0, MAX_TOTAL_MS as i64)?
                .unwrap_or(0) as u64,
            fg_bytes: self.count("fg_bytes")?,
            counters: self.counters("counters")?,
            preempted: self.count("preempted")?,
            expired_pis: self.count("expired_pis")?,
            harm: self.opt_amount("harm", 1.0)?.unwrap_or(0.0),
            kernel: match self.opt_object("kernel")? {
                None => None,
                Some(obj) => Some(Fields::new(obj, &self.path("kernel")).net_kernel()?),
            },
            own_traffic: self.opt_choice("own_traffic", &OwnTraffic::ALL, OwnTraffic::as_str)?,
        })
    }

    /// A gate's `kernel` object.
    fn net_kernel(&self) -> Result<NetKernelReport, ProtoError> {
        Ok(NetKernelReport {
            htb_rate_bits: self
                .opt_int("htb_rate_bits", 1, i64::MAX)?
                .map(|r| r as u64),
            marking: self.opt_bool("marking")?.unwrap_or(false),
            why: self.opt_string("why", MAX_WHY)?.unwrap_or_default(),
            classes: match self.opt_object("classes")? {
                None => None,
                Some(obj) => {
                    let path = self.path("classes");
                    let f = Fields::new(obj, &path);
                    Some(ClassReport {
                        fg_bytes: f.count("fg_bytes")?,
                        bg_bytes: f.count("bg_bytes")?,
                    })
                }
            },
        })
    }

    /// A boolean, or `None` when absent or `null`.
    fn opt_bool(&self, name: &str) -> Result<Option<bool>, ProtoError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(self.err(name, format!("must be a boolean, not {}", kind_of(other))))
            }
        }
    }

    /// A 4×4 matrix of counts (rows and columns as in [`GateReport::counters`]); zeros when
    /// absent.
    fn counters(&self, name: &str) -> Result<[[u64; 4]; 4], ProtoError> {
        let shape = "must be 4 arrays of 4 integers from 0";
        let mut x = [[0u64; 4]; 4];
        let Some(value) = self.get(name) else {
            return Ok(x);
        };
        let rows = match value {
            Value::Array(rows) if rows.len() == 4 => rows,
            _ => return Err(self.err(name, shape)),
        };
        for (row, out) in rows.iter().zip(&mut x) {
            let cells = match row {
                Value::Array(cells) if cells.len() == 4 => cells,
                _ => return Err(self.err(name, shape)),
            };
            for (cell, out) in cells.iter().zip(out.iter_mut()) {
                *out = cell.as_u64().ok_or_else(|| self.err(name, shape))?;
            }
        }
        Ok(x)
    }
}

pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// At most `max` characters of `s`, so that an error message never echoes a huge input.
fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> String {
        parse_request(line.as_bytes()).unwrap_err().to_string()
    }

    /// A running job's report with one gate.
    fn running_with(gate: GateReport) -> Report {
        Report {
            state: ReportState::Running,
            rate: None,
            target: None,
            unit: None,
            suspended_ms: 0,
            suspend_for_ms: 0,
            idle: Some(IdleReport {
                cpu: None,
                gates: vec![gate],
            }),
        }
    }

    /// A report line from job 1 with one held gate on `net:lo`, `fields` added to the gate's
    /// required ones (`,"name":value`, or nothing).
    fn held_lo_line(fields: &str) -> String {
        format!(
            r#"{{"v":1,"op":"report","job":1,"report":{{"state":"running","idle":{{"gates":[
            {{"resource":"net:lo","state":"held","pi_ms":1{fields}}}]}}}}}}"#
        )
    }

    #[test]
    fn valid_requests() {
        assert_eq!(
            parse_request(br#"{"v":1,"op":"hello","name":"backup","kind":"run","pid":42}"#),
            Ok(Request::Hello(Hello {
                name: "backup".into(),
                pid: Some(42),
                priority: 0,
                kind: Kind::Run
            }))
        );
        assert_eq!(
            parse_request(br#"{"v":1,"op":"release","job":3,"ran_ms":0,"extra":[1]}"#),
            Ok(Request::Release {
                job: 3,
                ran_ms: 0,
                report: None
            })
        );
        let r = parse_request(
            br#"{"v":1,"op":"report","job":3,"report":{"state":"suspended","rate":1.5,
                "target":null,"suspended_ms":100,"suspend_for_ms":400}}"#,
        )
        .unwrap();
        let Request::Report { report, .. } = r else {
            panic!("{r:?}")
        };
        assert_eq!(report.state, ReportState::Suspended);
        assert_eq!((report.rate, report.target), (Some(1.5), None));
        assert_eq!((report.suspended_ms, report.suspend_for_ms), (100, 400));
        // A report in the format that predates `idle` (every polite job's) still parses.
        assert_eq!(report.idle, None);
        assert_eq!(
            parse_request(br#"{"op":"status","v":1}"#),
            Ok(Request::Status)
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert!(err(r#"{"v":2,"op":"status"}"#)
            .starts_with("v: this side speaks protocol version 1, the message has 2"));
        assert!(err(r#"{"op":"status"}"#).starts_with("v: "));
        assert!(err(r#"{"v":"1","op":"status"}"#).starts_with("v: "));
        assert!(err(r#"{"v":1}"#).starts_with("op: missing"));
        assert!(err(r#"{"v":1,"op":"dance"}"#).starts_with("op: unknown operation `dance`"));
        assert!(err(r#"{"v":1,"op":"acquire"}"#).starts_with("job: missing"));
        assert!(err(r#"{"v":1,"op":"acquire","job":"3"}"#).starts_with("job: must be an integer"));
        assert!(
            err(r#"{"v":1,"op":"acquire","job":0}"#).starts_with("job: must be an integer from 1")
        );
        assert!(err(r#"{"v":1,"op":"acquire","job":3.0}"#).starts_with("job: "));
        assert!(err(r#"{"v":1,"op":"release","job":1,"ran_ms":-5}"#).starts_with("ran_ms: "));
        assert!(err(r#"{"v":1,"op":"release","job":1,"ran_ms":86400001}"#).starts_with("ran_ms: "));
        assert!(err(r#"{"v":1,"op":"release","job":1,"ran_ms":1e300}"#).starts_with("ran_ms: "));
        assert!(
            err(r#"{"v":1,"op":"release","job":1,"ran_ms":99999999999999999999999}"#)
                .starts_with("ran_ms: ")
        );
        let e = err(r#"{"v":1,"op":"report","job":1,"report":{"state":"running","rate":-1}}"#);
        assert!(e.starts_with("report.rate: must be a number from 0"), "{e}");
        assert!(err(
            r#"{"v":1,"op":"report","job":1,"report":{"state":"running","target":1e300}}"#
        )
        .starts_with("report.target: "));
        assert!(
            err(r#"{"v":1,"op":"report","job":1,"report":{"state":"asleep"}}"#)
                .starts_with("report.state: must be one of")
        );
        assert!(err(r#"{"v":1,"op":"report","job":1,"report":[]}"#)
            .starts_with("report: must be an object"));
        assert!(err(r#"{"v":1,"op":"report","job":1}"#).starts_with("report: missing"));
        assert!(
            err(r#"{"v":1,"op":"set_priority","job":1,"priority":101}"#).starts_with("priority: ")
        );
        assert!(err(r#"{"v":1,"op":"hello","name":"","kind":"run"}"#)
            .starts_with("name: must not be empty"));
        assert!(err(r#"{"v":1,"op":"hello","name":"a\nb","kind":"run"}"#)
            .starts_with("name: must not contain"));
        assert!(err(r#"{"v":1,"op":"hello","name":"a","kind":"daemon"}"#).starts_with("kind: "));
        assert!(
            err(r#"{"v":1,"op":"hello","name":"a","kind":"run","pid":0}"#).starts_with("pid: ")
        );
        assert!(
            err(r#"{"v":1,"op":"hello","name":"a","kind":"run","pid":-1}"#).starts_with("pid: ")
        );
        let long = "x".repeat(MAX_NAME + 1);
        assert!(err(&format!(
            r#"{{"v":1,"op":"hello","name":"{long}","kind":"run"}}"#
        ))
        .starts_with("name: must be at most"));
    }

    #[test]
    fn an_idle_jobs_gates_parse_and_bad_ones_name_the_field() {
        let r = parse_request(
            br#"{"v":1,"op":"report","job":3,"report":{"state":"suspended","suspended_ms":120,
                "idle":{"cpu":"cgroup","gates":[{"resource":"disk:vda","state":"pi","pi_ms":12.5,
                "holds":3,"held_ms":120,"fg_bytes":65536,"counters":[[1,0,0,5],[4,0,0,0],
                [0,0,0,0],[0,0,2,0]],"preempted":1,"expired_pis":2,"harm":0.2}]}}}"#,
        )
        .unwrap();
        let Request::Report { report, .. } = r else {
            panic!("{r:?}")
        };
        let idle = report.idle.unwrap();
        assert_eq!(idle.cpu, Some(IdleCpu::Cgroup));
        let g = &idle.gates[0];
        assert_eq!((g.resource.as_str(), g.state), ("disk:vda", GateState::Pi));
        assert_eq!(
            (g.pi_ms, g.holds, g.held_ms, g.fg_bytes),
            (12.5, 3, 120, 65536)
        );
        assert_eq!((g.counters[0][3], g.counters[3][2]), (5, 2));
        assert_eq!((g.preempted, g.expired_pis, g.harm), (1, 2, 0.2));
        // Only the resource, the state and the PI are required.
        let r = parse_request(
            br#"{"v":1,"op":"report","job":3,"report":{"state":"running","idle":{"gates":[
                {"resource":"net:lo","state":"released","pi_ms":10}]}}}"#,
        )
        .unwrap();
        let Request::Report { report, .. } = r else {
            panic!("{r:?}")
        };
        let idle = report.idle.unwrap();
        assert_eq!((idle.cpu, idle.gates[0].counters), (None, [[0; 4]; 4]));

        let bad = |idle: &str| {
            err(&format!(
                r#"{{"v":1,"op":"report","job":1,"report":{{"state":"running","idle":{idle}}}}}"#
            ))
        };
        assert!(bad("[]").starts_with("report.idle: must be an object"));
        assert!(bad(r#"{"cpu":"nice"}"#).starts_with("report.idle.cpu: must be one of sched_idle"));
        assert!(bad(r#"{"gates":{}}"#).starts_with("report.idle.gates: must be an array"));
        assert!(bad(r#"{"gates":[1]}"#).starts_with("report.idle.gates[0]: must be an object"));
        let gate = |fields: &str| bad(&format!(r#"{{"gates":[{{{fields}}}]}}"#));
        let e = gate(r#""resource":"disk:vda","pi_ms":10"#);
        assert!(e.starts_with("report.idle.gates[0].state: missing"), "{e}");
        let e = gate(r#""resource":"disk:vda","state":"asleep","pi_ms":10"#);
        assert!(
            e.starts_with("report.idle.gates[0].state: must be one of held, pi"),
            "{e}"
        );
        let e = gate(r#""state":"held","pi_ms":10"#);
        assert!(
            e.starts_with("report.idle.gates[0].resource: missing"),
            "{e}"
        );
        let e = gate(r#""resource":"d","state":"held","pi_ms":-1"#);
        assert!(
            e.starts_with("report.idle.gates[0].pi_ms: must be a number"),
            "{e}"
        );
        let e = gate(r#""resource":"d","state":"held","pi_ms":1,"harm":2"#);
        assert!(e.starts_with("report.idle.gates[0].harm: "), "{e}");
        let e = gate(r#""resource":"d","state":"held","pi_ms":1,"holds":-3"#);
        assert!(e.starts_with("report.idle.gates[0].holds: "), "{e}");
        let e = gate(r#""resource":"d","state":"held","pi_ms":1,"counters":[[1,2,3,4]]"#);
        assert!(
            e.starts_with("report.idle.gates[0].counters: must be 4 arrays"),
            "{e}"
        );
        let e = gate(
            r#""resource":"d","state":"held","pi_ms":1,"counters":[[1,2,3,-4],[0,0,0,0],[0,0,0,0],[0,0,0,0]]"#,
        );
        assert!(e.starts_with("report.idle.gates[0].counters: "), "{e}");
        let many = vec![r#"{"resource":"d","state":"held","pi_ms":1}"#; MAX_GATES + 1].join(",");
        let e = bad(&format!(r#"{{"gates":[{many}]}}"#));
        assert!(
            e.starts_with("report.idle.gates: must have at most 16 items"),
            "{e}"
        );
    }

    #[test]
    fn a_links_kernel_part_round_trips_and_bad_ones_name_the_field() {
        let gate = GateReport {
            resource: "net:veth0".into(),
            state: GateState::Released,
            pi_ms: 10.0,
            holds: 0,
            held_ms: 0,
            fg_bytes: 0,
            counters: [[0; 4]; 4],
            preempted: 0,
            expired_pis: 0,
            harm: 0.0,
            kernel: Some(NetKernelReport {
                htb_rate_bits: Some(95_000_000),
                marking: false,
                why: "htb at 95Mbit; the job's packets are not marked (no nft)".into(),
                classes: Some(ClassReport {
                    fg_bytes: 1200,
                    bg_bytes: 3_400_000,
                }),
            }),
            own_traffic: None,
        };
        let sent = Request::Report {
            job: 2,
            report: running_with(gate),
        };
        let line = sent.to_line();
        assert_eq!(parse_request(&line[..line.len() - 1]), Ok(sent));

        let bad = |kernel: &str| err(&held_lo_line(&format!(r#","kernel":{kernel}"#)));
        let at = "report.idle.gates[0].kernel";
        let e = bad("1");
        assert!(e.starts_with(&format!("{at}: must be an object")), "{e}");
        let e = bad(r#"{"marking":"yes"}"#);
        assert!(
            e.starts_with(&format!("{at}.marking: must be a boolean")),
            "{e}"
        );
        let e = bad(r#"{"htb_rate_bits":0}"#);
        assert!(e.starts_with(&format!("{at}.htb_rate_bits: ")), "{e}");
        let e = bad(&format!(r#"{{"why":"{}"}}"#, "x".repeat(MAX_WHY + 1)));
        assert!(e.starts_with(&format!("{at}.why: must be at most")), "{e}");
        let e = bad(r#"{"classes":{"bg_bytes":-1}}"#);
        assert!(e.starts_with(&format!("{at}.classes.bg_bytes: ")), "{e}");
        // Every field is optional: a newer client may send less.
        let r = parse_request(held_lo_line(r#","kernel":{}"#).as_bytes()).unwrap();
        let Request::Report { report, .. } = r else {
            panic!("{r:?}")
        };
        let k = report.idle.unwrap().gates[0].kernel.clone().unwrap();
        assert_eq!((k.htb_rate_bits, k.marking, k.classes), (None, false, None));
        // An older tact also says whether the class was clamped (`bg_held`); like any field
        // this parser does not know, it is ignored.
        let line =
            held_lo_line(r#","kernel":{"classes":{"fg_bytes":1,"bg_bytes":2,"bg_held":true}}"#);
        let r = parse_request(line.as_bytes()).unwrap();
        let Request::Report { report, .. } = r else {
            panic!("{r:?}")
        };
        let k = report.idle.unwrap().gates[0].kernel.clone().unwrap();
        assert_eq!(
            k.classes,
            Some(ClassReport {
                fg_bytes: 1,
                bg_bytes: 2
            })
        );
    }

    /// A link's `own_traffic` is optional both ways: a job that predates it sends none, and a
    /// gate without it (a disk's) sends nothing rather than `null`.
    #[test]
    fn a_links_own_traffic_round_trips_and_is_optional() {
        let report = |own_traffic| {
            running_with(GateReport {
                resource: "net:eth0".into(),
                state: GateState::Held,
                pi_ms: 10.0,
                holds: 1,
                held_ms: 5,
                fg_bytes: 1500,
                counters: [[0; 4]; 4],
                preempted: 0,
                expired_pis: 0,
                harm: 0.0,
                kernel: None,
                own_traffic,
            })
        };
        for (own, wire) in [
            (OwnTraffic::Namespace, "namespace"),
            (OwnTraffic::HtbClass, "htb_class"),
            (OwnTraffic::TcpSockets, "tcp_sockets"),
            (OwnTraffic::Unknown, "none"),
        ] {
            let sent = Request::Report {
                job: 3,
                report: report(Some(own)),
            };
            let line = sent.to_line();
            let text = String::from_utf8_lossy(&line);
            assert!(
                text.contains(&format!(r#""own_traffic":"{wire}""#)),
                "{text}"
            );
            assert_eq!(parse_request(&line[..line.len() - 1]), Ok(sent));
        }
        let sent = Request::Report {
            job: 3,
            report: report(None),
        };
        let line = sent.to_line();
        assert!(
            !String::from_utf8_lossy(&line).contains("own_traffic"),
            "absent, not null"
        );
        assert_eq!(parse_request(&line[..line.len() - 1]), Ok(sent));
        // From a job that predates the field, and one that sends `null`.
        for own in ["", r#","own_traffic":null"#] {
            let line = held_lo_line(own);
            let Ok(Request::Report { report, .. }) = parse_request(line.as_bytes()) else {
                panic!("{line}")
            };
            assert_eq!(report.idle.unwrap().gates[0].own_traffic, None, "{line}");
        }
        let e = err(&held_lo_line(r#","own_traffic":"udp_sockets""#));
        assert!(
            e.starts_with(
                "report.idle.gates[0].own_traffic: must be one of namespace, htb_class, tcp_sockets, \
                 none, not \"udp_sockets\""
            ),
            "{e}"
        );
    }

    #[test]
    fn malformed_input() {
        assert!(err(r#"{"v":1,"op":"release","job":1,"ran_ms":NaN}"#)
            .starts_with("message: malformed JSON"));
        assert!(err("[1,2]").starts_with("message: must be a JSON object"));
        assert!(err("").starts_with("message: malformed JSON"));
        assert_eq!(
            parse_request(b"{\"v\":1,\xff}"),
            Err(ProtoError::NotUtf8 { valid_up_to: 7 })
        );
        let deep = "[".repeat(50_000);
        assert!(err(&deep).starts_with("message: malformed JSON"));
        let long = vec![b' '; MAX_MESSAGE + 1];
        assert_eq!(
            parse_request(&long),
            Err(ProtoError::TooLong { limit: MAX_MESSAGE })
        );
    }

    #[test]
    fn echoed_input_is_truncated() {
        let op = "y".repeat(10_000);
        let e = err(&format!(r#"{{"v":1,"op":"{op}"}}"#));
        assert!(e.len() < 300, "{e}");
    }
}
