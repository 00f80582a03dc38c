//! Property tests of the request parser: it never panics, whatever the bytes; every valid
//! request survives encoding and parsing unchanged; a field replaced by anything either still
//! parses or is refused by name.

use proptest::prelude::*;
use serde_json::Value;
use tact_proto::{
    parse_request, Hello, Kind, Line, LineReader, ProtoError, Report, ReportState, Request,
    MAX_DAY_MS, MAX_NAME, MAX_RATE, MAX_TOTAL_MS, PRIORITY_MAX, PRIORITY_MIN,
};

fn name() -> impl Strategy<Value = String> {
    "\\PC{1,40}".prop_filter("at most MAX_NAME bytes", |s| s.len() <= MAX_NAME)
}

fn amount() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![Just(None), Just(Some(0.0)), (0.0..=MAX_RATE).prop_map(Some)]
}

fn report() -> impl Strategy<Value = Report> {
    (
        prop::sample::select(ReportState::ALL.to_vec()),
        amount(),
        amount(),
        prop::option::of(name()),
        0..=MAX_TOTAL_MS,
        0..=MAX_DAY_MS,
    )
        .prop_map(
            |(state, rate, target, unit, suspended_ms, suspend_for_ms)| Report {
                state,
                rate,
                target,
                unit,
                suspended_ms,
                suspend_for_ms,
                idle: None,
            },
        )
}

fn job() -> impl Strategy<Value = u64> {
    1..=i64::MAX as u64
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (
            name(),
            prop::option::of(1..=tact_proto::MAX_PID),
            PRIORITY_MIN..=PRIORITY_MAX,
            prop::bool::ANY
        )
            .prop_map(|(name, pid, priority, lib)| Request::Hello(Hello {
                name,
                pid,
                priority,
                kind: if lib { Kind::Library } else { Kind::Run },
            })),
        job().prop_map(|job| Request::Acquire { job }),
        (job(), 0..=MAX_DAY_MS, prop::option::of(report())).prop_map(|(job, ran_ms, report)| {
            Request::Release {
                job,
                ran_ms,
                report,
            }
        }),
        (job(), report()).prop_map(|(job, report)| Request::Report { job, report }),
        (job(), PRIORITY_MIN..=PRIORITY_MAX)
            .prop_map(|(job, priority)| Request::SetPriority { job, priority }),
        Just(Request::Status),
        job().prop_map(|job| Request::Bye { job }),
    ]
}

/// Any JSON value, nested a little.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from), // NaN and infinities become null
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_request(&bytes);
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,256}") {
        let _ = parse_request(text.as_bytes());
    }

    #[test]
    fn valid_requests_round_trip(request in request()) {
        let line = request.to_line();
        prop_assert_eq!(line.last(), Some(&b'\n'));
        prop_assert!(!line[..line.len() - 1].contains(&b'\n'));
        prop_assert_eq!(parse_request(&line[..line.len() - 1]), Ok(request));
    }

    #[test]
    fn a_replaced_field_parses_or_is_named(
        request in request(),
        pick in any::<prop::sample::Index>(),
        value in json(),
    ) {
        let line = request.to_line();
        let Value::Object(mut obj) = serde_json::from_slice(&line).unwrap() else {
            unreachable!()
        };
        let keys: Vec<String> = obj.keys().filter(|k| *k != "v" && *k != "op").cloned().collect();
        prop_assume!(!keys.is_empty());
        let key = keys[pick.index(keys.len())].clone();
        obj.insert(key.clone(), value);
        match parse_request(serde_json::to_string(&obj).unwrap().as_bytes()) {
            Ok(_) => {}
            Err(ProtoError::Field { field, .. }) => {
                prop_assert!(field == key || field.starts_with(&format!("{key}.")), "{} vs {}", field, key);
            }
            Err(other) => prop_assert!(false, "replacing {} gave {:?}", key, other),
        }
    }

    #[test]
    fn line_reader_respects_its_limit(
        bytes in prop::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..300),
        limit in 1usize..40,
    ) {
        let mut reader = LineReader::new(&bytes[..], limit);
        let mut consumed = 0;
        loop {
            match reader.read_line().unwrap() {
                Line::Message(m) => {
                    prop_assert!(m.len() <= limit);
                    prop_assert!(!m.contains(&b'\n'));
                    prop_assert_eq!(&bytes[consumed..consumed + m.len()], &m[..]);
                    consumed += m.len() + 1;
                }
                Line::TooLong => {
                    let rest = &bytes[consumed..];
                    prop_assert!(rest.iter().take(limit + 1).all(|&b| b != b'\n'));
                    prop_assert!(rest.len() > limit);
                    break;
                }
                Line::Eof => {
                    prop_assert!(!bytes[consumed..].contains(&b'\n'));
                    break;
                }
            }
        }
    }
}
