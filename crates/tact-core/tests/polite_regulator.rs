//! Behaviour of the polite regulator, driven by hand-made testpoint sequences.

use std::time::Duration;

use proptest::prelude::*;
use tact_core::polite::{Decision, Obs, Phase, PoliteConfig, Regulator, SampleKind, TargetSet};
use tact_core::stats::Verdict;

const P: Duration = Duration::from_millis(200);

fn cfg() -> PoliteConfig {
    PoliteConfig {
        bootstrap: 10,
        probation: Some(Duration::ZERO),
        ..PoliteConfig::with_period(P)
    }
}

/// Drives a regulator with one testpoint per period at a given progress rate, honouring suspensions.
struct Driver {
    reg: Regulator,
    now: Duration,
}

impl Driver {
    fn new(cfg: PoliteConfig) -> Self {
        Driver {
            reg: Regulator::new(cfg, Duration::ZERO, None).unwrap(),
            now: Duration::ZERO,
        }
    }

    /// Run one period at `rate` units/s; returns the decision, after sitting out any suspension.
    fn period(&mut self, rate: f64) -> Decision {
        self.now += P;
        let dp = [rate * P.as_secs_f64()];
        let step = self
            .reg
            .step(
                self.now,
                Obs {
                    index: 0,
                    dp: &dp,
                    active: P,
                    quiet: Some(true),
                },
            )
            .unwrap();
        if let Decision::Suspend(s) = step.decision {
            self.now += s;
        }
        step.decision
    }

    fn bootstrap(&mut self, rate: f64) {
        for _ in 0..self.reg.config().bootstrap {
            assert_eq!(self.period(rate), Decision::Run);
        }
        assert_eq!(self.reg.phase(), Phase::Regulated);
    }
}

#[test]
fn calls_sooner_than_the_period_only_accumulate() {
    let mut reg = Regulator::new(cfg(), Duration::ZERO, None).unwrap();
    let ms = Duration::from_millis;
    let s = reg
        .step(
            ms(50),
            Obs {
                index: 0,
                dp: &[5.0],
                active: ms(50),
                quiet: None,
            },
        )
        .unwrap();
    assert_eq!(
        (s.kind, s.decision),
        (SampleKind::Accumulated, Decision::Run)
    );
    let s = reg
        .step(
            ms(200),
            Obs {
                index: 0,
                dp: &[15.0],
                active: ms(150),
                quiet: None,
            },
        )
        .unwrap();
    assert_eq!(s.kind, SampleKind::Bootstrap);
    let e = s.eval.unwrap();
    assert_eq!(e.dp[&0], vec![20.0]);
    assert!((e.d - 0.2).abs() < 1e-12);
}

#[test]
fn bootstrap_seeds_the_target_with_a_plain_mean() {
    let mut d = Driver::new(cfg());
    for i in 0..10 {
        d.period(if i % 2 == 0 { 100.0 } else { 300.0 });
    }
    assert_eq!(d.reg.phase(), Phase::Regulated);
    let rate = d.reg.targets().get(0).unwrap().rates()[0];
    assert!((rate - 200.0).abs() < 1e-9, "rate {rate}");
}

#[test]
fn contention_suspends_after_m_testpoints_with_doubling_up_to_the_cap() {
    let cap = Duration::from_millis(1600);
    let mut d = Driver::new(PoliteConfig {
        max_suspension: cap,
        ..cfg()
    });
    d.bootstrap(100.0);
    let mut suspensions = vec![];
    for _ in 0..40 {
        if let Decision::Suspend(s) = d.period(50.0) {
            suspensions.push(s);
        }
    }
    // m = 5 poor samples per verdict: 40 periods give 8 verdicts.
    let ms = Duration::from_millis;
    assert_eq!(
        suspensions,
        vec![
            ms(200),
            ms(400),
            ms(800),
            ms(1600),
            ms(1600),
            ms(1600),
            ms(1600),
            ms(1600)
        ]
    );
}

#[test]
fn a_good_verdict_resumes_and_resets_the_suspension() {
    let mut d = Driver::new(cfg());
    d.bootstrap(100.0);
    for _ in 0..10 {
        d.period(10.0);
    }
    assert_eq!(d.reg.next_suspension(), Duration::from_millis(800));
    // Uncontended again: three good samples give a good verdict (c <= 0 at n = 3).
    let decisions: Vec<_> = (0..3).map(|_| d.period(150.0)).collect();
    assert_eq!(
        decisions,
        vec![
            Decision::Indeterminate,
            Decision::Indeterminate,
            Decision::Run
        ]
    );
    assert_eq!(d.reg.next_suspension(), P);
}

#[test]
fn mixed_samples_stay_indeterminate_and_keep_the_suspension() {
    let mut d = Driver::new(cfg());
    d.bootstrap(100.0);
    for _ in 0..5 {
        d.period(10.0);
    }
    let before = d.reg.next_suspension();
    // Alternating poor and good never reaches either threshold; the window is cleared at N_max.
    for i in 0..64 {
        let dec = d.period(if i % 2 == 0 { 90.0 } else { 110.0 });
        assert_eq!(dec, Decision::Indeterminate, "period {i}");
    }
    assert_eq!(d.reg.next_suspension(), before);
}

#[test]
fn running_through_a_suspension_is_ignored_not_calibrated() {
    let mut reg = Regulator::new(cfg(), Duration::ZERO, None).unwrap();
    let mut now = Duration::ZERO;
    for _ in 0..10 {
        now += P;
        reg.step(
            now,
            Obs {
                index: 0,
                dp: &[20.0],
                active: P,
                quiet: None,
            },
        )
        .unwrap();
    }
    let mut suspended_at = None;
    for _ in 0..5 {
        now += P;
        let s = reg
            .step(
                now,
                Obs {
                    index: 0,
                    dp: &[1.0],
                    active: P,
                    quiet: None,
                },
            )
            .unwrap();
        if let Decision::Suspend(len) = s.decision {
            suspended_at = Some((now, len));
        }
    }
    let (at, len) = suspended_at.expect("poor verdict");
    // The job ignores the suspension and reports again halfway through it, at a blazing rate.
    let half = at + len / 2;
    let s = reg
        .step(
            half,
            Obs {
                index: 0,
                dp: &[1e6],
                active: len / 2,
                quiet: None,
            },
        )
        .unwrap();
    assert_eq!(s.kind, SampleKind::Ignored);
    assert_eq!(s.decision, Decision::Suspend(at + len - half));
    assert!(
        (reg.targets().get(0).unwrap().rates()[0] - 100.0).abs() < 1.0,
        "the blazing sample must not calibrate"
    );
}

#[test]
fn hung_gaps_are_discarded() {
    let mut d = Driver::new(cfg());
    d.bootstrap(100.0);
    d.now += Duration::from_secs(30);
    let s = d
        .reg
        .step(
            d.now,
            Obs {
                index: 0,
                dp: &[1.0],
                active: Duration::from_secs(30),
                quiet: None,
            },
        )
        .unwrap();
    assert_eq!((s.kind, s.decision), (SampleKind::Discarded, Decision::Run));
    let s = d
        .reg
        .step(
            d.now + P,
            Obs {
                index: 0,
                dp: &[1.0],
                active: Duration::ZERO,
                quiet: None,
            },
        )
        .unwrap();
    assert_eq!(s.kind, SampleKind::Discarded);
}

#[test]
fn probation_caps_the_duty_cycle() {
    let c = PoliteConfig {
        probation: Some(Duration::from_secs(60)),
        duty_cap: 0.25,
        ..cfg()
    };
    let mut d = Driver::new(c);
    for _ in 0..10 {
        d.period(100.0);
    }
    assert!(matches!(d.reg.phase(), Phase::Probation { .. }));
    // On target, yet each testpoint of 200 ms is followed by a rest of 600 ms.
    assert_eq!(
        d.period(100.0),
        Decision::Suspend(Duration::from_millis(600))
    );
    while matches!(d.reg.phase(), Phase::Probation { .. }) {
        d.period(100.0);
    }
    assert!(d.now >= Duration::from_secs(60));
    assert!(!matches!(d.period(100.0), Decision::Suspend(_)));
}

#[test]
fn probation_defaults_on_unless_the_bootstrap_was_quiet() {
    let auto = PoliteConfig {
        probation: None,
        ..cfg()
    };
    let mut reg = Regulator::new(auto.clone(), Duration::ZERO, None).unwrap();
    for i in 1..=10u32 {
        let quiet = Some(i != 4); // one busy interval during the bootstrap
        reg.step(
            P * i,
            Obs {
                index: 0,
                dp: &[1.0],
                active: P,
                quiet,
            },
        )
        .unwrap();
    }
    assert_eq!(
        reg.phase(),
        Phase::Probation {
            until: P * 10 + auto.auto_probation
        }
    );
    let mut quiet = Driver::new(auto);
    quiet.bootstrap(100.0);
}

#[test]
fn saved_targets_skip_bootstrap_and_probation() {
    let mut d = Driver::new(cfg());
    d.bootstrap(100.0);
    let saved: TargetSet =
        serde_json::from_str(&serde_json::to_string(d.reg.targets()).unwrap()).unwrap();
    let reg = Regulator::new(
        PoliteConfig {
            probation: None,
            ..cfg()
        },
        Duration::ZERO,
        Some(saved),
    )
    .unwrap();
    assert_eq!(reg.phase(), Phase::Regulated);
}

#[test]
fn phased_metrics_are_judged_against_their_own_targets() {
    let mut reg = Regulator::new(cfg(), Duration::ZERO, None).unwrap();
    let mut now = Duration::ZERO;
    // Phase 0 runs at 1000 units/s, phase 1 at 10 units/s; alternate each testpoint.
    let mut tp = |reg: &mut Regulator, index: u32, rate: f64| {
        now += P;
        reg.step(
            now,
            Obs {
                index,
                dp: &[rate * 0.2],
                active: P,
                quiet: Some(true),
            },
        )
        .unwrap()
    };
    for i in 0..20 {
        tp(&mut reg, i % 2, if i % 2 == 0 { 1000.0 } else { 10.0 });
    }
    // Each at its own rate: never poor, although phase 1 is 100x slower than phase 0.
    for i in 0..20 {
        let s = tp(&mut reg, i % 2, if i % 2 == 0 { 1000.0 } else { 10.0 });
        assert_ne!(s.eval.unwrap().poor, Some(true));
        assert!(!matches!(s.decision, Decision::Suspend(_)));
    }
    // Phase 1 alone slows down: its samples are poor.
    let s = tp(&mut reg, 1, 5.0);
    assert_eq!(s.eval.unwrap().poor, Some(true));
}

#[test]
fn concurrent_metrics_compare_the_summed_target_duration() {
    // The paper's example (§4.4): 750 kB/s scanned and 120 entries/s indexed, testpoints ~120 ms.
    let c = PoliteConfig {
        period: Duration::from_millis(50),
        ..cfg()
    };
    let mut reg = Regulator::new(c, Duration::ZERO, None).unwrap();
    let mut now = Duration::ZERO;
    let mut tp = |reg: &mut Regulator, bytes: f64, entries: f64, slow: f64| {
        let d = (bytes / 750_000.0 + entries / 120.0) * slow;
        now += Duration::from_secs_f64(d);
        reg.step(
            now,
            Obs {
                index: 0,
                dp: &[bytes, entries],
                active: Duration::from_secs_f64(d),
                quiet: None,
            },
        )
        .unwrap()
    };
    for i in 0..10 {
        tp(
            &mut reg,
            60_000.0 + 20_000.0 * (i % 3) as f64,
            5.0 + (i % 4) as f64,
            1.0,
        );
    }
    // Measured 120 ms against a target of 80 + 42 = 122 ms: good.
    let e = tp(&mut reg, 60_000.0, 5.0, 0.120 / 0.1217).eval.unwrap();
    assert!(
        (e.dstar.unwrap() - 0.1217).abs() < 1e-3,
        "D* = {:?}",
        e.dstar
    );
    assert_eq!(e.poor, Some(false));
    let e = tp(&mut reg, 60_000.0, 5.0, 1.5).eval.unwrap();
    assert_eq!(e.poor, Some(true));
}

#[test]
fn bad_progress_reports_are_refused_with_a_named_field() {
    let mut reg = Regulator::new(cfg(), Duration::ZERO, None).unwrap();
    let obs = |dp: &'static [f64]| Obs {
        index: 3,
        dp,
        active: P,
        quiet: None,
    };
    for bad in [&[f64::NAN][..], &[-1.0], &[f64::INFINITY]] {
        let e = reg.step(P, obs(bad)).unwrap_err().to_string();
        assert!(e.contains("metric 0 of index 3"), "{e}");
    }
    assert!(reg.step(P, obs(&[])).is_err());
    reg.step(P, obs(&[1.0])).unwrap();
    let e = reg.step(P * 2, obs(&[1.0, 2.0])).unwrap_err().to_string();
    assert_eq!(e, "index 3 was given 2 metrics, but earlier 1");
}

#[test]
fn verdicts_are_reported_for_tracing() {
    let mut d = Driver::new(cfg());
    d.bootstrap(100.0);
    d.now += P;
    let s = d
        .reg
        .step(
            d.now,
            Obs {
                index: 0,
                dp: &[20.0],
                active: P,
                quiet: None,
            },
        )
        .unwrap();
    let e = s.eval.unwrap();
    assert_eq!(
        (e.verdict, e.n, e.c, e.poor),
        (Some(Verdict::Indeterminate), 1, 0, Some(false))
    );
}

/// A regulator whose suspensions past `every` are served in pieces, driven at rate 20 (target
/// 100) until its first such suspension; returns it with the time the first piece ends.
fn in_a_pieced_suspension(every: Duration) -> (Driver, Duration) {
    let mut d = Driver::new(PoliteConfig {
        peek_every: Some(every),
        max_suspension: Duration::from_secs(16),
        ..cfg()
    });
    d.bootstrap(100.0);
    loop {
        let before = d.now + P;
        if d.period(20.0) == Decision::Suspend(every) {
            // Suspensions double from 200 ms; the first past `every` is served in pieces.
            assert!(d.reg.suspended_until(before) > Some(before + every));
            return (d, before + every);
        }
        assert!(d.now < Duration::from_secs(60), "never suspended past 1 s");
    }
}

fn peek(d: &mut Driver, rate: f64) -> tact_core::polite::Step {
    d.now += P;
    d.reg
        .step(
            d.now,
            Obs {
                index: 0,
                dp: &[rate * P.as_secs_f64()],
                active: P,
                quiet: None,
            },
        )
        .unwrap()
}

#[test]
fn a_poor_peek_sits_out_the_rest_of_the_suspension() {
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(1));
    let target = d.reg.targets().clone();
    d.now = piece_end;
    let s = peek(&mut d, 20.0);
    assert_eq!(s.kind, SampleKind::Peek);
    // 1.6 s in all: 1 s piece, 200 ms peek, 400 ms left.
    assert_eq!(s.decision, Decision::Suspend(Duration::from_millis(400)));
    assert_eq!(d.reg.targets(), &target, "a peek must not calibrate");
    d.now += Duration::from_millis(400);
    // Past the end the next sample is judged as usual, and the doubling went on meanwhile.
    assert_eq!(peek(&mut d, 20.0).kind, SampleKind::Judged);
    assert_eq!(d.reg.next_suspension(), Duration::from_millis(3200));
}

#[test]
fn a_peek_at_the_target_ends_the_suspension_early() {
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(1));
    d.now = piece_end;
    // 85 of a target 100 passes (the pass level is 80%): contention is over.
    let s = peek(&mut d, 85.0);
    assert_eq!((s.kind, s.decision), (SampleKind::Peek, Decision::Run));
    assert_eq!(d.reg.suspended_until(d.now), None);
    // Like a good verdict, a peek that passes starts the doubling again from one testpoint.
    assert_eq!(d.reg.next_suspension(), P);
    assert_eq!(peek(&mut d, 85.0).kind, SampleKind::Judged);
}

#[test]
fn without_peeks_a_suspension_is_served_whole() {
    let mut d = Driver::new(PoliteConfig {
        peek_every: None,
        max_suspension: Duration::from_secs(8),
        ..cfg()
    });
    d.bootstrap(100.0);
    let mut longest = Duration::ZERO;
    for _ in 0..40 {
        longest = longest.max(d.period(20.0).suspension());
    }
    assert_eq!(longest, Duration::from_secs(8));
}

#[test]
fn pressure_puts_off_peeks_while_busy_and_wakes_the_job_when_calm() {
    let ms = Duration::from_millis;
    // Calm from the start proves nothing (the foreground may not show in PSI): no early wake,
    // and a busy machine at the end of a piece puts the peek off by another piece.
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(1));
    let start = piece_end - Duration::from_secs(1);
    assert_eq!(d.reg.hold(start + ms(250), Some(0.0)), Some(ms(750)));
    assert_eq!(d.reg.hold(start + ms(900), Some(0.01)), Some(ms(100)));
    assert_eq!(
        d.reg.hold(piece_end, Some(0.6)),
        Some(ms(600)),
        "to the end of the 1.6 s"
    );
    assert_eq!(
        d.reg.hold(piece_end + ms(600), Some(0.6)),
        None,
        "suspension over"
    );

    // Busy, then calm for calm_for (1 s): resume at once for a peek, long before the piece ends.
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(4));
    let start = piece_end - Duration::from_secs(4);
    let mut woke = None;
    let mut t = start;
    for stall in [0.5, 0.3, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.0] {
        t += ms(250);
        if d.reg.hold(t, Some(stall)).is_none() {
            woke = Some(t - start);
            break;
        }
    }
    assert_eq!(woke, Some(ms(1750)), "busy until 500 ms, calm from 750 ms");
    d.now = t;
    assert_eq!(peek(&mut d, 90.0).decision, Decision::Run);
}

#[test]
fn a_slow_peek_on_a_calm_machine_after_busy_contention_lowers_the_target() {
    let ms = Duration::from_millis;
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(4));
    let start = piece_end - Duration::from_secs(4);
    let target = |d: &Driver| d.reg.targets().get(0).unwrap().rates()[0];
    let before = target(&d);
    // The foreground shows in PSI, then leaves; the job, resumed, is still at half its target.
    assert!(d.reg.hold(start + ms(250), Some(0.9)).is_some());
    assert!(d.reg.hold(start + ms(500), Some(0.0)).is_some());
    assert_eq!(d.reg.hold(start + ms(1500), Some(0.0)), None);
    d.now = start + ms(1500);
    let s = peek(&mut d, before / 2.0);
    assert_eq!(
        (s.kind, s.decision),
        (SampleKind::Recalibrated, Decision::Run)
    );
    let after = target(&d);
    assert!(
        (after - 0.875 * before).abs() < 1e-6 * before,
        "a quarter of the way to half the target: {before} -> {after}"
    );
    // Where the machine never showed pressure, a slow peek is contention PSI cannot see: the
    // suspension goes on and the target stays.
    let (mut d, piece_end) = in_a_pieced_suspension(Duration::from_secs(4));
    let before = target(&d);
    assert_eq!(d.reg.hold(piece_end - ms(1500), Some(0.0)), Some(ms(1500)));
    assert_eq!(d.reg.hold(piece_end, Some(0.0)), None);
    d.now = piece_end;
    let s = peek(&mut d, before / 2.0);
    assert_eq!(s.kind, SampleKind::Peek);
    assert!(matches!(s.decision, Decision::Suspend(_)));
    assert_eq!(target(&d), before);
}

proptest! {
    /// A job whose rate never drops is never suspended (probation off).
    #[test]
    fn a_never_slowing_job_is_never_suspended(
        base in 1.0f64..1e9,
        growth in proptest::collection::vec(1.0f64..1.5, 50..300),
        period_ms in 50u64..1000,
    ) {
        let p = Duration::from_millis(period_ms);
        let mut reg = Regulator::new(PoliteConfig { bootstrap: 10, probation: Some(Duration::ZERO), ..PoliteConfig::with_period(p) }, Duration::ZERO, None).unwrap();
        let mut rate = base;
        for (i, g) in growth.iter().enumerate() {
            rate *= g;
            let s = reg.step(p * (i as u32 + 1), Obs { index: 0, dp: &[rate * p.as_secs_f64()], active: p, quiet: None }).unwrap();
            prop_assert!(!matches!(s.decision, Decision::Suspend(_)), "suspended at {} with rate {}", i, rate);
        }
    }

    /// Suspensions never exceed the cap, whatever the progress does.
    #[test]
    fn suspension_never_exceeds_the_cap(
        rates in proptest::collection::vec(0.0f64..1000.0, 20..400),
        cap_ms in 200u64..20_000,
        alpha in 0.01f64..0.2,
    ) {
        let cap = Duration::from_millis(cap_ms);
        let cfg = PoliteConfig { alpha, beta: alpha + 0.15, max_suspension: cap, bootstrap: 5, probation: Some(Duration::ZERO), ..PoliteConfig::with_period(P) };
        let mut reg = Regulator::new(cfg, Duration::ZERO, None).unwrap();
        let mut now = Duration::ZERO;
        for r in rates {
            now += P;
            let s = reg.step(now, Obs { index: 0, dp: &[r * 0.2], active: P, quiet: None }).unwrap();
            if let Decision::Suspend(len) = s.decision {
                prop_assert!(len <= cap, "{:?} > cap {:?}", len, cap);
                now += len;
            }
            prop_assert!(reg.next_suspension() <= cap);
        }
    }
}
