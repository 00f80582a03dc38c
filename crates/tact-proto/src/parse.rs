//! Decoding and validating a request line. Everything a client sends passes through
//! [`parse_request`], so every limit of `docs/protocol.md` is enforced here, and every refusal
//! names the field at fault. It never panics, whatever the bytes (property-tested).

use serde_json::{Map, Value};

use crate::error::ProtoError;
use crate::request::{Hello, JobId, Kind, Report, ReportState, Request};
use crate::{
    MAX_DAY_MS, MAX_MESSAGE, MAX_NAME, MAX_PID, MAX_RATE, MAX_TOTAL_MS, PRIORITY_MAX, PRIORITY_MIN,
    VERSION,
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
        other => Err(ProtoError::UnknownOp(truncate(other, 64))),
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
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, prefix: &'a str) -> Self {
        Fields { obj, prefix }
    }

    fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    fn err(&self, name: &str, problem: impl Into<String>) -> ProtoError {
        ProtoError::field(self.path(name), problem)
    }

    /// The value of a field, `None` when absent or `null`.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    fn job(&self) -> Result<JobId, ProtoError> {
        Ok(self.int("job", 1, i64::MAX)? as JobId)
    }

    fn int(&self, name: &str, min: i64, max: i64) -> Result<i64, ProtoError> {
        self.opt_int(name, min, max)?
            .ok_or_else(|| self.err(name, "missing"))
    }

    /// An integer in `min..=max`; `1.0` is not an integer here, and a number beyond the range of
    /// 64-bit integers is out of range rather than rounded.
    fn opt_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, ProtoError> {
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

    fn string(&self, name: &str, max: usize) -> Result<String, ProtoError> {
        self.opt_string(name, max)?
            .ok_or_else(|| self.err(name, "missing"))
    }

    /// A non-empty string of at most `max` bytes without control characters (it ends up on
    /// terminals and in metric labels).
    fn opt_string(&self, name: &str, max: usize) -> Result<Option<String>, ProtoError> {
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
        let obj = match self.get(name) {
            None => return Err(self.err(name, "missing")),
            Some(Value::Object(obj)) => obj,
            Some(other) => {
                return Err(self.err(name, format!("must be an object, not {}", kind_of(other))))
            }
        };
        let path = self.path(name);
        let f = Fields::new(obj, &path);
        let state = f.string("state", 16)?;
        let state = ReportState::ALL
            .into_iter()
            .find(|s| s.as_str() == state)
            .ok_or_else(|| {
                f.err(
                    "state",
                    format!(
                        "must be one of calibrating, probation, running, suspended, not {state:?}"
                    ),
                )
            })?;
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
        })
    }
}

fn kind_of(value: &Value) -> &'static str {
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
