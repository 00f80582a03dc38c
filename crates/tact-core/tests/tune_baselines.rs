//! The baseline limiters (AIMD, Vegas, Gradient2, Envoy, static; hill climbing's own rules are in
//! `tune_hill.rs`) on synthetic event streams, and `policy_from_spec`.

use std::time::Duration;

use proptest::prelude::*;
use tact_core::tune::{
    policy_from_spec, Aimd, AimdParams, AimdTimeout, Bounds, Envoy, EnvoyParams, Event, Fixed,
    Gradient2, Gradient2Params, HillClimbing, HillClimbingParams, Load, Policy, Tcc, Vegas,
    VegasParams, VegasPlus, VegasPlusParams, POLICY_NAMES,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A completion at `at` ms with `in_flight` busy workers and a latency of `latency` µs.
fn done_us(at: u64, in_flight: usize, latency: u64) -> Event {
    Event::Complete {
        at: ms(at),
        load: Load::new(in_flight, 0),
        latency: Some(Duration::from_micros(latency)),
    }
}

fn done(at: u64, in_flight: usize, latency_ms: u64) -> Event {
    done_us(at, in_flight, latency_ms * 1000)
}

fn bounds(n_init: usize, n_min: usize, n_max: usize) -> Bounds {
    Bounds::new(n_init, n_min, n_max).unwrap()
}

// ---- AIMD ----

fn aimd_fixed(timeout_ms: u64, n_init: usize) -> Aimd {
    let params = AimdParams {
        timeout: AimdTimeout::Fixed(ms(timeout_ms)),
        ..AimdParams::default()
    };
    Aimd::new(params, bounds(n_init, 1, 100)).unwrap()
}

#[test]
fn aimd_grows_by_one_per_timely_completion_and_cuts_ten_percent_when_late() {
    let mut aimd = aimd_fixed(100, 10);
    for i in 0..10 {
        let n = aimd.target();
        assert_eq!(aimd.on_event(done(i, n, 10)), Some(n + 1));
    }
    assert_eq!(aimd.target(), 20);
    assert_eq!(aimd.on_event(done(20, 20, 101)), Some(18));
    // Below 10, ⌊0.9·n⌋ is n − 1.
    let mut small = aimd_fixed(100, 5);
    assert_eq!(small.on_event(done(0, 5, 500)), Some(4));
}

#[test]
fn aimd_holds_when_less_than_half_the_limit_is_in_use() {
    let mut aimd = aimd_fixed(100, 20);
    assert_eq!(aimd.on_event(done(0, 9, 10)), None);
    assert_eq!(aimd.on_event(done(1, 10, 10)), Some(21));
}

#[test]
fn aimd_ignores_completions_without_latency_and_other_events() {
    let mut aimd = aimd_fixed(100, 10);
    assert_eq!(aimd.on_complete(ms(0), Load::new(10, 5)), None);
    assert_eq!(aimd.on_start(ms(1), Load::new(10, 5)), None);
    assert_eq!(aimd.on_tick(ms(2)), None);
    assert_eq!(aimd.target(), 10);
}

#[test]
fn aimd_learns_its_timeout_as_twice_the_median_of_the_first_completions() {
    let params = AimdParams {
        timeout: AimdTimeout::Learned {
            completions: 5,
            factor: 2.0,
        },
        ..AimdParams::default()
    };
    let mut aimd = Aimd::new(params, bounds(1, 1, 50)).unwrap();
    for (i, latency) in [30, 10, 12, 11, 50].into_iter().enumerate() {
        assert_eq!(aimd.timeout(), None);
        // Holds the single worker while measuring, however busy it is.
        assert_eq!(aimd.on_event(done(i as u64, 1, latency)), None);
    }
    assert_eq!(aimd.timeout(), Some(ms(24)));
    assert_eq!(aimd.on_event(done(10, 1, 24)), Some(2));
    assert_eq!(aimd.on_event(done(11, 2, 24)), Some(3));
    assert_eq!(aimd.on_event(done(12, 3, 25)), Some(2));
}

#[test]
fn aimd_spec_params_learn_from_fifty_completions() {
    let mut aimd = Aimd::new(AimdParams::spec(), bounds(1, 1, 50)).unwrap();
    for i in 0..49 {
        aimd.on_event(done(i, 1, 10));
    }
    assert_eq!(aimd.timeout(), None);
    aimd.on_event(done(49, 1, 10));
    assert_eq!(aimd.timeout(), Some(ms(20)));
}

#[test]
fn aimd_rejects_a_backoff_outside_netflix_range() {
    let params = AimdParams {
        backoff_ratio: 1.0,
        ..AimdParams::default()
    };
    let err = Aimd::new(params, bounds(1, 1, 10)).unwrap_err();
    assert!(err.to_string().contains("backoff_ratio"), "{err}");
}

// ---- Vegas ----

/// A Vegas at limit 20 (log10 step 1: alpha 3, beta 6, threshold 1) that has seen a 10 ms
/// no-load RTT.
fn vegas_at_20() -> Vegas {
    let mut vegas = Vegas::new(VegasParams::default(), bounds(20, 1, 1000)).unwrap();
    assert_eq!(vegas.on_event(done(0, 20, 10)), None);
    assert_eq!(vegas.rtt_noload(), Some(ms(10)));
    vegas
}

#[test]
fn vegas_grows_by_beta_without_queue_and_by_one_below_alpha() {
    let mut vegas = vegas_at_20();
    // queue = ⌈20·(1 − 10/10)⌉ = 0 ≤ threshold: +beta.
    assert_eq!(vegas.on_event(done(1, 20, 10)), Some(26));
    let mut vegas = vegas_at_20();
    // queue = ⌈20·(1 − 10/11)⌉ = 2, above threshold, below alpha: +1.
    assert_eq!(vegas.on_event(done(1, 20, 11)), Some(21));
}

#[test]
fn vegas_shrinks_above_beta_and_holds_between_alpha_and_beta() {
    let mut vegas = vegas_at_20();
    // queue = 10 > beta.
    assert_eq!(vegas.on_event(done(1, 20, 20)), Some(19));
    let mut vegas = vegas_at_20();
    // queue = ⌈20·(1 − 10/12.5)⌉ = 4, in [alpha, beta].
    assert_eq!(vegas.on_event(done_us(1, 20, 12_500)), None);
    assert_eq!(vegas.target(), 20);
}

#[test]
fn vegas_neither_grows_nor_shrinks_when_app_limited() {
    let mut vegas = vegas_at_20();
    assert_eq!(vegas.on_event(done(1, 9, 10)), None);
    assert_eq!(vegas.on_event(done(2, 9, 40)), None);
    assert_eq!(vegas.target(), 20);
}

#[test]
fn vegas_takes_a_lower_rtt_as_the_new_noload_without_deciding() {
    let mut vegas = vegas_at_20();
    assert_eq!(vegas.on_event(done(1, 20, 5)), None);
    assert_eq!(vegas.rtt_noload(), Some(ms(5)));
}

#[test]
fn vegas_reprobes_noload_within_thirty_times_the_limit_samples() {
    for seed in 0..8 {
        let params = VegasParams {
            seed,
            ..VegasParams::default()
        };
        let mut vegas = Vegas::new(params, bounds(20, 1, 1000)).unwrap();
        vegas.on_event(done(0, 1, 10));
        // App-limited, so the limit stays at 20 and the probe period in [300, 600) samples.
        for i in 1..299 {
            vegas.on_event(done(i, 1, 20));
        }
        assert_eq!(vegas.rtt_noload(), Some(ms(10)), "seed {seed}");
        for i in 299..600 {
            vegas.on_event(done(i, 1, 20));
        }
        assert_eq!(vegas.rtt_noload(), Some(ms(20)), "seed {seed}");
    }
}

// ---- Gradient2 ----

fn gradient2_at_20() -> Gradient2 {
    Gradient2::new(Gradient2Params::default(), bounds(20, 1, 200)).unwrap()
}

#[test]
fn gradient2_grows_by_the_queue_allowance_when_rtts_are_equal() {
    let mut g = gradient2_at_20();
    // gradient 1: new = 0.8·l + 0.2·(l + 4) = l + 0.8 per sample, so l + 4 after five.
    for i in 0..5 {
        g.on_event(done(i, 30, 10));
    }
    assert!((g.estimate() - 24.0).abs() < 1e-9, "{}", g.estimate());
    assert!(g.target() >= 23);
}

#[test]
fn gradient2_holds_or_shrinks_when_short_rtt_rises_above_long_rtt() {
    let mut g = gradient2_at_20();
    for i in 0..20 {
        g.on_event(done(i, 40, 10));
    }
    let grown = g.estimate();
    assert!(grown > 30.0);
    let mut last = grown;
    for (i, rtt) in [15, 20, 40, 80].into_iter().enumerate() {
        g.on_event(done(100 + i as u64, 40, rtt));
        assert!(g.estimate() <= last, "rtt {rtt}: {} > {last}", g.estimate());
        last = g.estimate();
    }
    assert!(g.target() < grown as usize);
}

#[test]
fn gradient2_does_not_move_when_app_limited() {
    let mut g = gradient2_at_20();
    assert_eq!(g.on_event(done(0, 9, 10)), None);
    assert_eq!(g.on_event(done(1, 9, 100)), None);
    assert_eq!(g.estimate(), 20.0);
}

#[test]
fn gradient2_cuts_the_long_rtt_after_an_overload_ends() {
    let mut g = gradient2_at_20();
    for i in 0..10 {
        g.on_event(done(i, 5, 100));
    }
    let long = g.long_rtt();
    g.on_event(done(10, 5, 10));
    // The average moves by 2/601 of the gap, then the 10% cut applies.
    let expected = (0.1 - 0.09 * 2.0 / 601.0) * 0.9;
    assert!((g.long_rtt().as_secs_f64() - expected).abs() < 1e-9);
    assert!(g.long_rtt() < long);
}

// ---- Envoy ----

fn envoy() -> Envoy {
    Envoy::new(EnvoyParams::default(), bounds(10, 1, 100)).unwrap()
}

/// Runs the first minRTT window (50 completions of `rtt` ms at 1 ms spacing, ending at 50 ms).
fn after_first_window(rtt: u64) -> Envoy {
    let mut e = envoy();
    for i in 1..50 {
        assert_eq!(e.on_event(done(i, 3, rtt)), None);
        assert_eq!(e.target(), 3);
        assert!(e.measuring_min_rtt());
    }
    assert_eq!(e.on_event(done(50, 3, rtt)), Some(10));
    assert!(!e.measuring_min_rtt());
    assert_eq!(e.min_rtt(), ms(rtt));
    e
}

#[test]
fn envoy_pins_to_three_during_the_min_rtt_window_then_moves_by_the_gradient() {
    let mut e = after_first_window(10);
    // The sample timer restarted at 50 ms: the window ends at 150 ms.
    for i in 51..150 {
        assert_eq!(e.on_event(done(i, 10, 10)), None);
    }
    // gradient = 12.5/10 = 1.25 → 12.5 + √12.5 = 16.04.
    assert_eq!(e.on_tick(ms(150)), Some(16));
    for i in 151..250 {
        e.on_event(done(i, 16, 20));
    }
    // gradient = 12.5/20 = 0.625 → 10 + √10 = 13.16.
    assert_eq!(e.on_tick(ms(250)), Some(13));
    for i in 251..350 {
        e.on_event(done(i, 13, 100));
    }
    // gradient clamps at 0.5 → 6.5 + √6.5 = 9.05.
    assert_eq!(e.on_tick(ms(350)), Some(9));
    // A window without samples changes nothing.
    assert_eq!(e.on_tick(ms(450)), None);
}

#[test]
fn envoy_remeasures_min_rtt_after_sixty_seconds_plus_jitter() {
    let mut e = after_first_window(10);
    let mut t = 50;
    while !e.measuring_min_rtt() {
        t += 100;
        e.on_tick(ms(t));
    }
    // Due at 50 ms + 60 s + [0, 9 s).
    assert!((60_050..69_150).contains(&t), "window started at {t} ms");
    assert_eq!(e.target(), 3);
    // Completions of tasks started before the window are ignored.
    e.on_event(done(t + 1, 3, 50));
    for i in 0..49 {
        assert_eq!(e.on_event(done(t + 10 + i, 3, 5)), None);
    }
    assert_eq!(e.on_event(done(t + 60, 3, 5)), Some(10));
    assert_eq!(e.min_rtt(), ms(5));
}

#[test]
fn envoy_remeasures_at_once_after_five_windows_at_the_floor() {
    let mut e = after_first_window(1);
    let mut t = 50;
    let mut windows = 0;
    while !e.measuring_min_rtt() {
        for _ in 0..5 {
            t += 20;
            e.on_event(done(t, 3, 1000));
        }
        windows += 1;
        assert!(windows < 20, "never re-measured");
    }
    // 10 → 7 → 5 → 4 → 3, then five windows that keep it at 3.
    assert!(windows >= 5 + 3, "re-measured after {windows} windows");
    assert_eq!(e.target(), 3);
}

#[test]
fn envoy_jitter_follows_the_seed() {
    let start = |seed| {
        let params = EnvoyParams {
            seed,
            ..EnvoyParams::default()
        };
        let mut e = Envoy::new(params, bounds(10, 1, 100)).unwrap();
        for i in 1..=50 {
            e.on_event(done(i, 3, 10));
        }
        let mut t = 50;
        while !e.measuring_min_rtt() {
            t += 10;
            e.on_tick(ms(t));
        }
        t
    };
    assert_eq!(start(7), start(7));
    let starts: std::collections::HashSet<u64> = (0..6).map(start).collect();
    assert!(starts.len() > 1, "jitter does not depend on the seed");
}

// ---- Bounds on arbitrary streams ----

fn event_strategy() -> impl Strategy<Value = (u64, u8, usize, usize, Option<u64>)> {
    (
        0u64..3_000,
        0u8..4,
        0usize..300,
        0usize..4,
        proptest::option::weighted(0.9, 0u64..5_000_000),
    )
}

fn to_events(raw: &[(u64, u8, usize, usize, Option<u64>)]) -> Vec<Event> {
    let mut at = 0u64;
    raw.iter()
        .map(|&(dt, kind, in_flight, queued, latency)| {
            at += dt;
            let load = Load::new(in_flight, queued);
            let at_d = Duration::from_micros(at * 100);
            match kind {
                0 | 1 => Event::Complete {
                    at: at_d,
                    load,
                    latency: latency.map(Duration::from_micros),
                },
                2 => Event::Start { at: at_d, load },
                _ => Event::Tick { at: at_d },
            }
        })
        .collect()
}

fn all_policies(b: Bounds, seed: u64) -> Vec<(&'static str, Box<dyn Policy + Send>)> {
    vec![
        (
            "aimd",
            Box::new(
                Aimd::new(
                    AimdParams {
                        timeout: AimdTimeout::Learned {
                            completions: 3,
                            factor: 2.0,
                        },
                        ..AimdParams::default()
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        (
            "aimd-fixed",
            Box::new(
                Aimd::new(
                    AimdParams {
                        timeout: AimdTimeout::Fixed(ms(1000)),
                        backoff_ratio: 0.5,
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        (
            "vegas",
            Box::new(
                Vegas::new(
                    VegasParams {
                        seed,
                        smoothing: 0.5,
                        ..VegasParams::default()
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        (
            "vegas-default",
            Box::new(Vegas::new(VegasParams::default(), b).unwrap()),
        ),
        (
            "gradient2",
            Box::new(Gradient2::new(Gradient2Params::default(), b).unwrap()),
        ),
        (
            "envoy",
            Box::new(
                Envoy::new(
                    EnvoyParams {
                        request_count: 5,
                        min_rtt_interval: ms(500),
                        seed,
                        ..EnvoyParams::default()
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        (
            "hill",
            Box::new(
                HillClimbing::new(
                    HillClimbingParams {
                        seed,
                        ..HillClimbingParams::default()
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        // Fast and eager: every completion after 1 ms ends a sample, large moves.
        (
            "hill-eager",
            Box::new(
                HillClimbing::new(
                    HillClimbingParams {
                        sample_interval_low: ms(1),
                        sample_interval_high: ms(1),
                        max_change_per_second: 1000.0,
                        max_sample_error: 100.0,
                        gain_exponent: 1.0,
                        seed,
                        ..HillClimbingParams::default()
                    },
                    b,
                )
                .unwrap(),
            ),
        ),
        ("fixed", Box::new(Fixed::new(b.n_init()).unwrap())),
        (
            "vegas+",
            Box::new(VegasPlus::new(VegasPlusParams::plus(), b).unwrap()),
        ),
        (
            "vegas++",
            Box::new(VegasPlus::new(VegasPlusParams::plus_plus(50.0), b).unwrap()),
        ),
    ]
}

proptest! {
    #[test]
    fn every_policy_stays_within_its_bounds(
        raw in proptest::collection::vec(event_strategy(), 0..400),
        n_min in 1usize..6,
        span in 0usize..80,
        n_init in 0usize..200,
        seed in any::<u64>(),
    ) {
        let b = Bounds::new(n_init, n_min, n_min + span).unwrap();
        let events = to_events(&raw);
        for (name, mut policy) in all_policies(b, seed) {
            prop_assert!((b.n_min()..=b.n_max()).contains(&policy.target()), "{name} starts out of bounds");
            for &event in &events {
                let before = policy.target();
                let answer = policy.on_event(event);
                let after = policy.target();
                prop_assert!(after >= 1, "{name}: target 0");
                prop_assert!(
                    (b.n_min()..=b.n_max()).contains(&after),
                    "{name}: target {after} outside [{}, {}]", b.n_min(), b.n_max()
                );
                prop_assert_eq!(answer, (after != before).then_some(after), "{} misreports its change", name);
            }
        }
    }

    #[test]
    fn baselines_are_deterministic(
        raw in proptest::collection::vec(event_strategy(), 0..200),
        seed in any::<u64>(),
    ) {
        let b = Bounds::new(4, 1, 64).unwrap();
        let events = to_events(&raw);
        let run = || -> Vec<Vec<usize>> {
            all_policies(b, seed)
                .into_iter()
                .map(|(_, mut p)| events.iter().map(|&e| { p.on_event(e); p.target() }).collect())
                .collect()
        };
        prop_assert_eq!(run(), run());
    }
}

#[test]
fn bounds_reject_zero_and_inverted_ranges_and_clamp_n_init() {
    assert!(Bounds::new(1, 0, 5).is_err());
    assert!(Bounds::new(1, 6, 5).is_err());
    assert_eq!(Bounds::new(0, 2, 5).unwrap().n_init(), 2);
    assert_eq!(Bounds::new(9, 2, 5).unwrap().n_init(), 5);
    assert!(Fixed::new(0).is_err());
}

#[test]
fn envoy_pins_to_n_max_when_it_is_below_three() {
    let e = Envoy::new(EnvoyParams::default(), bounds(1, 1, 2)).unwrap();
    assert_eq!(e.target(), 2);
}

// ---- select ----

fn spec_for(name: &str) -> String {
    match name {
        "static" | "fixed" => format!("{name}:4"),
        "vegas++" => "vegas++:x1=35.7".to_string(),
        _ => name.to_string(),
    }
}

#[test]
fn every_policy_name_parses_and_starts_within_bounds() {
    for name in POLICY_NAMES {
        let policy =
            policy_from_spec(&spec_for(name), 2, 16).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!((1..=16).contains(&policy.target()), "{name}");
    }
    assert_eq!(policy_from_spec("static:4", 2, 16).unwrap().target(), 4);
    assert_eq!(policy_from_spec(" fixed:7 ", 2, 16).unwrap().target(), 7);
    assert_eq!(policy_from_spec("tcc", 2, 16).unwrap().target(), 2);
    assert_eq!(policy_from_spec("aimd", 1, 16).unwrap().target(), 1);
    assert_eq!(policy_from_spec("envoy", 8, 16).unwrap().target(), 3);
}

#[test]
fn tcc_spec_takes_overrides() {
    let policy = policy_from_spec("tcc:p=0.25,q=0.14,w=0.39", 4, 64).unwrap();
    assert_eq!(policy.target(), 4);
    policy_from_spec(
        "tcc: p=0.5, q=0.31, w=0.63, dwell=10s, remove=false, seed=3",
        4,
        64,
    )
    .unwrap();
    policy_from_spec("tcc:", 4, 64).unwrap();
}

fn spec_error(spec: &str) -> String {
    match policy_from_spec(spec, 4, 64) {
        Ok(_) => panic!("{spec:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_specs_are_rejected_naming_the_bad_part() {
    let unknown = spec_error("bogus");
    assert!(unknown.contains("bogus"), "{unknown}");
    for name in POLICY_NAMES {
        assert!(unknown.contains(name), "{unknown} does not list {name}");
    }
    let cases = [
        ("tcc:p=abc", "p"),
        ("tcc:zz=1", "zz"),
        ("tcc:p", "expected key=value"),
        ("tcc:dwell=ten", "dwell"),
        ("tcc:remove=maybe", "remove"),
        ("tcc:p=-1", "p"),
        // Condition (1) of Theorem 1.
        ("tcc:p=0.5,q=0.01", "condition (1)"),
        ("static", "size"),
        ("static:x", "x"),
        ("fixed:0", "at least one worker"),
        ("static:65", "maximum of 64"),
        ("aimd:timeout=1s", "takes no options"),
        ("envoy:x", "takes no options"),
        ("vegas+:x1=3", "takes no options"),
        ("vegas++", "x1"),
        ("vegas++:x=3", "x1"),
        ("vegas++:x1=fast", "fast"),
        ("vegas++:x1=0", "x1 = 0"),
    ];
    for (spec, part) in cases {
        let msg = spec_error(spec);
        assert!(
            msg.contains(part),
            "{spec:?}: {msg:?} does not name {part:?}"
        );
    }
    assert!(policy_from_spec("vegas", 1, 0).is_err());
}

#[test]
fn policies_are_send() {
    fn is_send<T: Send>() {}
    is_send::<Tcc>();
    is_send::<Aimd>();
    is_send::<Vegas>();
    is_send::<Gradient2>();
    is_send::<Envoy>();
    is_send::<HillClimbing>();
    is_send::<Fixed>();
    is_send::<VegasPlus>();
}
