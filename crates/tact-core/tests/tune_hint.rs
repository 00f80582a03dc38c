//! The bottleneck hint (`TuneParams::util`, `Policy::on_hint`): with the bottleneck below its
//! utilization target TCC climbs past the paper's stop and keeps the count that holds the
//! target; with the bottleneck saturated, or without reports, it is exactly the paper's rule.

#[path = "tune_harness.rs"]
mod harness;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use harness::{call_checked, paper, settle, sparse, Pool};
use proptest::prelude::*;
use tact_core::tune::{
    Aimd, AimdParams, Bounds, Event, Load, Phase, Policy, Reason, Tcc, Transition, TuneParams,
};

const MAX: usize = 4_000_000;
const CAPACITY: f64 = 1000.0;
const TENTH: Duration = Duration::from_millis(100);

/// A bottleneck that saturates gradually: X(n) = C(1 − e^(−n/8)), at utilization X/C. The
/// paper's 25% step gains less than 14% from about 7 workers on (utilization ≈ 60%).
fn rate(n: usize) -> f64 {
    CAPACITY * (1.0 - (-(n as f64) / 8.0).exp())
}

fn util(n: usize) -> f64 {
    rate(n) / CAPACITY
}

fn curve() -> impl FnMut(usize, u64) -> f64 {
    |n, _| rate(n)
}

#[test]
fn below_the_target_tcc_climbs_past_the_papers_stop_and_holds_the_target() {
    for params in [
        paper(4),
        TuneParams {
            n_init: 4,
            ..TuneParams::default()
        },
    ] {
        let plain = settle(Pool::new(params.clone(), curve()), 1);
        let stop = plain.tcc.target();
        assert!(
            util(stop) < 0.8,
            "the paper stops at {stop}, {}",
            util(stop)
        );
        assert_eq!(plain.tcc.status().hinted, 0);

        let hinted = settle(Pool::new(params.clone(), curve()).with_hint(TENTH, util), 1);
        let n = hinted.tcc.target();
        assert!(n > stop, "hinted {n}, paper {stop}");
        // It adds while the bottleneck is below 90% and keeps what holds it there: the count
        // is the first at or above the target, or one step beyond it.
        assert!(util(n) >= params.util, "hinted count {n} at {}", util(n));
        assert!(util(params.remove_step(n)) < params.util || n == stop);
        let status = hinted.tcc.status();
        assert!(status.hinted > 0);
        let marked: Vec<_> = hinted.trace.iter().filter(|t| t.hinted).collect();
        assert_eq!(marked.len() as u64, status.hinted, "{:?}", hinted.moves());
        // A hinted add is a Better that gained less than q; a hinted removal is Lost.
        assert!(marked
            .iter()
            .all(|t| matches!(t.reason, Reason::Better | Reason::Ceiling | Reason::Lost)));
        assert!(marked.iter().any(|t| t.reason == Reason::Better));
    }
}

#[test]
fn a_removal_that_leaves_the_bottleneck_below_the_target_is_undone() {
    // Paper mode from 12: 15 workers gain too little (u = 84.7%, above the 0.84 target), so
    // Max holds 15 and the removal to 14 keeps throughput within δ (u = 82.6%); with the hint
    // that removal is undone.
    let params = TuneParams {
        util: 0.84,
        ..paper(12)
    };
    let plain = settle(Pool::new(params.clone(), curve()), 1);
    let hinted = settle(Pool::new(params.clone(), curve()).with_hint(TENTH, util), 1);
    let (a, b) = (plain.tcc.target(), hinted.tcc.target());
    assert!(util(a) < 0.84, "plain {a}: {:?}", plain.moves());
    assert!(b > a && util(b) >= 0.84, "hinted {b}: {:?}", hinted.moves());
    let last = hinted.trace.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.reason, last.hinted),
        (Phase::Remove, Phase::Steady, Reason::Lost, true),
        "{:?}",
        hinted.moves()
    );
    assert!(util(last.target_from) < 0.84 && util(last.target_to) >= 0.84);
}

#[test]
fn a_saturated_bottleneck_leaves_the_papers_rule_exactly() {
    for params in [
        paper(4),
        TuneParams {
            n_init: 4,
            ..TuneParams::default()
        },
    ] {
        let mut plain = settle(Pool::new(params.clone(), curve()), 3);
        let mut full = settle(
            Pool::new(params.clone(), curve()).with_hint(TENTH, |_| 1.0),
            3,
        );
        assert_eq!(full.moves(), plain.moves());
        assert_eq!(full.targets, plain.targets);
        assert_eq!(full.tcc.status().hinted, 0);
        assert!(full.trace.iter().all(|t| !t.hinted));
        assert_eq!(full.tcc.drain_decisions(), plain.tcc.drain_decisions());
        assert_eq!(plain.tcc.status().utilization, None);
    }
}

#[test]
fn reports_too_rare_to_cover_a_configuration_are_ignored() {
    let params = paper(4);
    let plain = settle(Pool::new(params.clone(), curve()), 1);
    // One report per 1000 s covers none of a configuration's few seconds.
    let rare = settle(
        Pool::new(params, curve()).with_hint(Duration::from_secs(1000), util),
        1,
    );
    assert_eq!(rare.moves(), plain.moves());
    assert_eq!(rare.tcc.status().hinted, 0);
}

/// TCC from 2 workers, saturated, after 20 completions 1 ms apart: settled (in flight equals
/// the target, then max(n, b) = 16 completions) and measuring. Returns it and the time.
fn measuring() -> (Tcc, Duration) {
    let mut tcc = Tcc::new(paper(2)).unwrap();
    let busy = Load::new(2, 1);
    tcc.on_start(Duration::ZERO, busy);
    let mut t = Duration::ZERO;
    for _ in 0..20 {
        t += Duration::from_millis(1);
        tcc.on_complete(t, busy);
    }
    assert!(!tcc.status().settling);
    (tcc, t)
}

#[test]
fn utilization_is_time_weighted_over_the_measured_busy_time() {
    // Reports alternate 0.2 over 100 ms and 0.8 over 300 ms: the mean is 0.65.
    let (mut tcc, mut t) = measuring();
    assert_eq!(tcc.status().utilization, None, "no report yet");
    tcc.on_hint(t, 0.5); // starts the chain only
    for _ in 0..5 {
        t += TENTH;
        tcc.on_hint(t, 0.2);
        t += 3 * TENTH;
        tcc.on_hint(t, 0.8);
    }
    let u = tcc.status().utilization.unwrap();
    assert!((u - 0.65).abs() < 1e-9, "{u}");
    // Out-of-range reports are clamped; NaN is dropped.
    t += TENTH;
    tcc.on_hint(t, f64::NAN);
    t += TENTH;
    tcc.on_hint(t, 7.0);
    let u2 = tcc.status().utilization.unwrap();
    assert!((u2 - (0.65 * 2.0 + 0.1) / 2.1).abs() < 1e-9, "{u2}");
}

#[test]
fn starved_time_carries_no_utilization() {
    let (mut tcc, mut t) = measuring();
    tcc.on_hint(t, 0.5);
    t += TENTH;
    tcc.on_hint(t, 0.4);
    tcc.on_load(t, Load::new(1, 0)); // starved from here
    t += 10 * TENTH;
    tcc.on_hint(t, 0.0);
    let u = tcc.status().utilization.unwrap();
    assert!((u - 0.4).abs() < 1e-9, "{u}");
}

#[test]
fn baselines_ignore_the_hint() {
    let mut aimd = Aimd::new(AimdParams::spec(), Bounds::new(4, 1, 64).unwrap()).unwrap();
    assert_eq!(aimd.on_hint(Duration::from_secs(1), 0.1), None);
    assert_eq!(aimd.target(), 4);
}

#[test]
fn the_target_is_validated_and_set_by_spec() {
    for bad in [0.0, 1.0, -0.1, f64::NAN] {
        let e = Tcc::new(TuneParams {
            util: bad,
            ..TuneParams::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("util = "), "{e}");
    }
    assert!(tact_core::tune::policy_from_spec("tcc:util=0.85", 2, 16).is_ok());
    let e = tact_core::tune::policy_from_spec("tcc:util=1.5", 2, 16)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("util"), "{e}");
}

/// A pool on the bending curve whose reports read `before` until its first steady state has
/// held 5 s, and `after` from then on (a competitor arriving on the bottleneck, invisible in the
/// pool's own throughput here). Returns the pool after `k` steady entries.
fn saturating(params: TuneParams, before: f64, after: f64, k: usize) -> Pool {
    let arrived = Rc::new(Cell::new(false));
    let seen = arrived.clone();
    let mut pool =
        Pool::new(params, curve()).with_hint(
            TENTH,
            move |_| {
                if seen.get() {
                    after
                } else {
                    before
                }
            },
        );
    assert!(pool.until_steady(1, MAX));
    // 5 s in: the reference window (n* batches, under a second here) has read `before`.
    let from = pool.tcc.busy();
    assert!(pool.run_until(MAX, |p| p.tcc.busy() >= from + Duration::from_secs(5)));
    assert_eq!(pool.tcc.phase(), Phase::Steady);
    arrived.set(true);
    assert!(pool.until_steady(k, MAX));
    pool
}

/// The transition that ended the first steady state, and how long (busy time) that state held.
fn first_steady_end(pool: &Pool) -> (&Transition, Duration) {
    let (entry, end) = pool.first_steady();
    (end, end.busy - entry.busy)
}

#[test]
fn a_bottleneck_that_becomes_saturated_ends_the_steady_state_early() {
    // 0.92: at or above util, so the hint takes no step and the run is the paper's until then.
    let params = paper(4);
    let timeout = params.steady_max;
    let plain = settle(Pool::new(params.clone(), curve()), 2);
    let mut run = saturating(params.clone(), 0.92, 0.99, 2);
    assert_eq!(run.exploration(), plain.exploration());
    let (end, held) = first_steady_end(&run);
    assert_eq!(
        (end.to, end.reason, end.hinted),
        (Phase::Base, Reason::Shift, true),
        "{:?}",
        run.moves()
    );
    assert!(held < timeout, "{held:?}");
    assert!(end.target_to < end.target_from);
    assert_eq!(run.tcc.status().hinted, 1);
    assert!(run.tcc.drain_decisions().iter().all(|d| !d.hinted));
    let (plain_end, _) = first_steady_end(&plain);
    assert_eq!(plain_end.reason, Reason::Timeout);
}

#[test]
fn the_steady_rule_needs_a_reference_with_room_and_a_window_above_saturated() {
    let params = paper(4);
    let timeout = params.steady_max;
    // 0.96 is not above 0.97; a reference at 0.95 is past the midpoint of 0.9 and 0.97 (it
    // already ran near saturation); and with `saturated` = 1 nothing is above it.
    for (p, before, after) in [
        (params.clone(), 0.92, 0.96),
        (params.clone(), 0.95, 1.0),
        (
            TuneParams {
                saturated: 1.0,
                ..params.clone()
            },
            0.92,
            1.0,
        ),
    ] {
        let run = saturating(p, before, after, 2);
        let (end, held) = first_steady_end(&run);
        assert_eq!(
            (end.reason, end.hinted),
            (Reason::Timeout, false),
            "{before} -> {after}"
        );
        assert!(held >= timeout);
        assert_eq!(run.tcc.status().hinted, 0);
    }
}

#[test]
fn saturated_is_validated_and_set_by_spec() {
    for bad in [0.9, 0.5, 1.01, f64::NAN] {
        let e = Tcc::new(TuneParams {
            saturated: bad,
            ..TuneParams::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("saturated = ") && e.contains("(util, 1]"),
            "{e}"
        );
    }
    assert!(tact_core::tune::policy_from_spec("tcc:util=0.8,saturated=0.95", 2, 16).is_ok());
    let e = tact_core::tune::policy_from_spec("tcc:saturated=0.5", 2, 16)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("saturated"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Hints of any value at any time never take the count out of [n_min, n_max], and a hinted
    /// step is one of the steps the paper's rule takes (a p step up, or a restored removal).
    #[test]
    fn hints_keep_the_bounds_and_the_steps(
        n_min in 1usize..4,
        span in 1usize..30,
        seed in any::<u64>(),
        events in proptest::collection::vec(
            (0u64..200_000, 0usize..40, 0usize..3, prop_oneof![
                Just(f64::NAN), Just(-1.0), Just(2.0), 0.0f64..1.0,
            ], any::<bool>()),
            1..600,
        ),
    ) {
        let params = sparse(n_min, span, Duration::from_secs(1), seed);
        let mut tcc = Tcc::new(params.clone()).unwrap();
        let mut t = Duration::ZERO;
        for (dt_us, in_flight, queued, u, hint) in events {
            t += Duration::from_micros(dt_us);
            call_checked(&mut tcc, |tcc| if hint {
                tcc.on_hint(t, u)
            } else {
                tcc.on_event(Event::Complete { at: t, load: Load::new(in_flight, queued), latency: None })
            });
            for tr in tcc.drain_trace().iter().filter(|tr| tr.hinted) {
                match tr.reason {
                    Reason::Better => prop_assert!(
                        tr.target_to == params.add_step(tr.target_from)
                            || tr.target_to == params.grow(tr.target_from, 1.0),
                        "{:?}", tr
                    ),
                    Reason::Ceiling => prop_assert_eq!(tr.target_to, tr.target_from),
                    Reason::Lost => prop_assert!(tr.target_to > tr.target_from, "{:?}", tr),
                    // The steady rule: a new cycle, from the base cut.
                    Reason::Shift => prop_assert!(
                        tr.from == Phase::Steady && tr.target_to <= tr.target_from,
                        "{:?}", tr
                    ),
                    _ => prop_assert!(false, "the hint decided {:?}", tr),
                }
            }
        }
    }
}
