//! The bottleneck hint (`TuneParams::util`, `Policy::on_hint`): with the bottleneck below its
//! utilization target TCC climbs past the paper's stop and keeps the count that holds the
//! target; with the bottleneck saturated, or without reports, it is exactly the paper's rule.

#[path = "tune_harness.rs"]
mod harness;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use harness::{call_checked, paper, settle, sparse, Lcg, Pool};
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

/// The counts the room rule climbed from, in each run of cycles between two cycles of other
/// causes (the first cycle, timeouts, shifts), after checking every climb's transition.
fn climbs(trace: &[Transition]) -> Vec<Vec<usize>> {
    let mut chains = vec![Vec::new()];
    for t in trace.iter().filter(|t| t.to == Phase::Base) {
        if t.reason == Reason::Room {
            assert!(t.hinted && t.from == Phase::Steady, "{t:?}");
            assert_eq!(t.target_to, t.target_from, "{t:?}");
            chains.last_mut().unwrap().push(t.target_from);
        } else {
            chains.push(Vec::new());
        }
    }
    chains
}

/// Between two cycles of other causes, the climbs start from strictly rising counts: a climb
/// that came back to its count (or below) does not start again from there.
fn check_climbs(trace: &[Transition]) {
    for chain in climbs(trace) {
        assert!(chain.windows(2).all(|w| w[0] < w[1]), "{chain:?}");
    }
}

/// A pool on the bending curve run without reports to its first steady state, where the
/// paper's rule stops it (below 80% utilization), and from then on reporting `hint(n)` every
/// `every`; returned after `k` steady entries.
fn late(
    params: TuneParams,
    every: Duration,
    hint: impl FnMut(usize) -> f64 + 'static,
    k: usize,
) -> Pool {
    let mut pool = settle(Pool::new(params, curve()), 1).with_hint(every, hint);
    assert!(pool.until_steady(k, MAX));
    pool
}

/// Index in the trace of each entry into Steady.
fn steady_entries(pool: &Pool) -> Vec<usize> {
    (0..pool.trace.len())
        .filter(|&i| pool.trace[i].to == Phase::Steady)
        .collect()
}

#[test]
fn a_steady_state_below_util_minus_room_climbs_from_its_count_to_the_target() {
    let params = paper(4);
    let (target, room) = (params.util, params.room);
    let run = late(params.clone(), TENTH, util, 3);
    let (end, held) = first_steady_end(&run);
    let stop = end.target_from;
    assert!(util(stop) < target - room, "{}", util(stop));
    // The reports arrived after the exploration: it is the paper's.
    let plain = settle(Pool::new(params.clone(), curve()), 1);
    assert_eq!(run.exploration(), plain.exploration());
    // Its steady state ends early, into a cycle from the same count (no cut) ...
    assert_eq!(
        (end.to, end.reason, end.hinted, end.target_to),
        (Phase::Base, Reason::Room, true, stop),
        "{:?}",
        run.moves()
    );
    assert!(held < params.steady_max, "{held:?}");
    let entries = steady_entries(&run);
    let next = &run.trace[entries[0] + 2];
    assert_eq!(
        (next.from, next.to, next.reason, next.target_to),
        (
            Phase::Base,
            Phase::Add,
            Reason::Measured,
            params.add_step(stop)
        )
    );
    // ... which climbs to the count that holds the bottleneck at the target, and holds it: the
    // steady state there ends at its timeout, and the rule fired once.
    let n = run.trace[entries[1]].target_to;
    assert!(
        util(n) >= target && util(params.remove_step(n)) < target,
        "{n}"
    );
    let after = &run.trace[entries[1] + 1];
    assert_eq!((after.reason, after.hinted), (Reason::Timeout, false));
    assert_eq!(climbs(&run.trace).concat(), vec![stop]);
    let marked = run.trace.iter().filter(|t| t.hinted).count() as u64;
    assert_eq!(marked, run.tcc.status().hinted);
}

#[test]
fn the_room_rule_fires_below_util_minus_room_and_not_within_room() {
    let params = paper(4);
    let stop = settle(Pool::new(params.clone(), curve()), 1).tcc.target();
    let room = params.room;
    // The target set so that the steady count reads util − 1.5·room, then util − room/2.
    for (below, fires) in [(1.5, true), (0.5, false)] {
        let p = TuneParams {
            util: util(stop) + below * room,
            ..params.clone()
        };
        let run = late(p.clone(), TENTH, util, 2);
        let (end, held) = first_steady_end(&run);
        assert_eq!(end.target_from, stop);
        if fires {
            assert_eq!((end.reason, end.hinted), (Reason::Room, true), "{below}");
            assert!(held < p.steady_max);
        } else {
            assert_eq!(
                (end.reason, end.hinted),
                (Reason::Timeout, false),
                "{below}"
            );
            assert!(held >= p.steady_max);
        }
    }
}

#[test]
fn without_reports_or_with_room_at_util_a_steady_state_below_the_target_holds() {
    let params = paper(4);
    let plain = settle(Pool::new(params.clone(), curve()), 2);
    let (end, held) = first_steady_end(&plain);
    assert!(util(end.target_from) < params.util - params.room);
    assert_eq!(end.reason, Reason::Timeout);
    assert!(held >= params.steady_max);
    // Reports too rare to cover the steady state are no reports.
    let rare = late(params.clone(), Duration::from_secs(1000), util, 2);
    assert_eq!(rare.moves(), plain.moves());
    // room = util turns the rule off: nothing reads below 0.
    let off = TuneParams {
        room: params.util,
        ..params.clone()
    };
    let run = late(off, TENTH, util, 2);
    let (end, held) = first_steady_end(&run);
    assert_eq!((end.reason, end.hinted), (Reason::Timeout, false));
    assert!(held >= params.steady_max);
}

/// Throughput that rises linearly to 10 workers and falls steeply past them.
fn peaked(n: usize, _: u64) -> f64 {
    let n = n as f64;
    if n <= 10.0 {
        100.0 * n
    } else {
        1000.0 * (10.0 / n).powi(2)
    }
}

#[test]
fn a_climb_that_comes_back_to_its_count_is_not_retried_until_another_cycle() {
    // A resource that never fills (reads 50% throughout) next to a curve that declines past 10
    // workers: each steady state reads room, but the step past it declines and the climb comes
    // back. The rule climbs once per cycle, and the steady state it comes back to holds until
    // its timeout.
    let params = paper(4);
    let mut pool = settle(Pool::new(params.clone(), peaked), 1).with_hint(TENTH, |_| 0.5);
    assert!(pool.until_steady(6, MAX));
    let entries = steady_entries(&pool);
    let ends: Vec<&Transition> = entries[..5].iter().map(|&i| &pool.trace[i + 1]).collect();
    let reasons: Vec<Reason> = ends.iter().map(|t| t.reason).collect();
    assert_eq!(
        reasons,
        [
            Reason::Room,
            Reason::Timeout,
            Reason::Room,
            Reason::Timeout,
            Reason::Room
        ],
        "{:?}",
        pool.moves()
    );
    for (i, end) in ends
        .iter()
        .enumerate()
        .filter(|(_, t)| t.reason == Reason::Timeout)
    {
        // Back where the climb started, at most.
        assert!(
            end.target_from <= ends[i - 1].target_from,
            "{:?}",
            pool.moves()
        );
    }
    assert!(climbs(&pool.trace).iter().all(|c| c.len() <= 1));
}

#[test]
fn room_is_validated_and_set_by_spec() {
    for bad in [-0.01, 0.91, f64::NAN, f64::INFINITY] {
        let e = Tcc::new(TuneParams {
            room: bad,
            ..TuneParams::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("room = ") && e.contains("[0, util]"), "{e}");
    }
    for good in [0.0, 0.9] {
        assert!(Tcc::new(TuneParams {
            room: good,
            ..TuneParams::default()
        })
        .is_ok());
    }
    assert!(tact_core::tune::policy_from_spec("tcc:util=0.85,room=0.03", 2, 16).is_ok());
    let e = tact_core::tune::policy_from_spec("tcc:room=0.95", 2, 16)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("room"), "{e}");
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
        let mut trace = Vec::new();
        for (dt_us, in_flight, queued, u, hint) in events {
            t += Duration::from_micros(dt_us);
            call_checked(&mut tcc, |tcc| if hint {
                tcc.on_hint(t, u)
            } else {
                tcc.on_event(Event::Complete { at: t, load: Load::new(in_flight, queued), latency: None })
            });
            let drained = tcc.drain_trace();
            for tr in drained.iter().filter(|tr| tr.hinted) {
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
                    // The room rule: a new cycle, from the steady count.
                    Reason::Room => prop_assert!(
                        tr.from == Phase::Steady && tr.to == Phase::Base
                            && tr.target_to == tr.target_from,
                        "{:?}", tr
                    ),
                    _ => prop_assert!(false, "the hint decided {:?}", tr),
                }
            }
            trace.extend(drained);
        }
        check_climbs(&trace);
    }
}

proptest! {
    // Each case runs eight steady states on a pool: fewer cases.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// No flip-flop: on a rising curve or one that falls past a peak, with reports of the true
    /// utilization or of a resource that never fills (a level), plus noise of up to ±5 points
    /// per report (about ±2 per window), the room rule's climbs between two cycles of other
    /// causes start from strictly rising counts, and every steady state it leaves is one where
    /// the reports read below `util − room`.
    #[test]
    fn noisy_hints_do_not_make_the_room_rule_flip_flop(
        scale in 4.0f64..16.0,
        peak in prop::option::of(6usize..20),
        level in prop::option::of(0.3f64..0.95),
        noise in 0.0f64..0.05,
        target in 0.8f64..0.95,
        room in 0.0f64..0.05,
        fast in any::<bool>(),
        late in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let case = FlipFlop { scale, peak, level, noise, target, room, fast, late, seed };
        no_flip_flop(&case)?;
    }
}

/// A case of the flip-flop property.
struct FlipFlop {
    /// The curve's scale: x(n) = C·(1 − e^(−n/scale)), falling as (peak/n)² past `peak`.
    scale: f64,
    peak: Option<usize>,
    /// Reports of a resource that never fills, instead of the true utilization.
    level: Option<f64>,
    /// Up to ± this on each report.
    noise: f64,
    target: f64,
    room: f64,
    fast: bool,
    /// The hint starts after a first steady state.
    late: bool,
    seed: u64,
}

/// Runs `c` for eight steady states and checks it (the property's doc); the trace.
fn no_flip_flop(c: &FlipFlop) -> Result<Vec<Transition>, TestCaseError> {
    let params = TuneParams {
        util: c.target,
        room: c.room,
        steady_min: Duration::from_secs(5),
        steady_max: Duration::from_secs(5),
        steady_jitter: 0.0,
        fast: c.fast,
        slow_start: c.fast,
        n_max: 64,
        ..paper(4)
    };
    let (scale, peak, level, noise) = (c.scale, c.peak, c.level, c.noise);
    let rate = move |n: usize| {
        let x = CAPACITY * (1.0 - (-(n as f64) / scale).exp());
        match peak {
            Some(k) if n > k => x * (k as f64 / n as f64).powi(2),
            _ => x,
        }
    };
    let truth = move |n: usize| level.unwrap_or(rate(n) / CAPACITY);
    let mut lcg = Lcg(c.seed);
    let hint = move |n: usize| truth(n) + noise * (2.0 * lcg.uniform() - 1.0);
    let mut pool = if c.late {
        settle(Pool::new(params.clone(), move |n, _| rate(n)), 1).with_hint(TENTH, hint)
    } else {
        Pool::new(params.clone(), move |n, _| rate(n)).with_hint(TENTH, hint)
    };
    prop_assert!(pool.until_steady(8, MAX), "{:?}", pool.moves());
    check_climbs(&pool.trace);
    check_room_reads(&pool.trace, truth, c.target, c.room, c.noise)?;
    Ok(pool.trace)
}

/// Every climb of the room rule left a steady state whose reports read below `util − room`:
/// the truth at its count is within the noise's reach of that (the mean over at least two
/// windows), give or take the one report that straddles the steady state's entry. A host
/// reports the mean over its period, and the controller credits it to the period's part after
/// the count settled (`Tcc::take_hint`), so up to one period (`TENTH`) of the counts held just
/// before the entry reads into the steady state's mean, weighted by that period over the time
/// the state held.
fn check_room_reads(
    trace: &[Transition],
    truth: impl Fn(usize) -> f64,
    target: f64,
    room: f64,
    noise: f64,
) -> Result<(), TestCaseError> {
    let period = TENTH.as_secs_f64();
    for (i, t) in trace
        .iter()
        .enumerate()
        .filter(|(_, t)| t.reason == Reason::Room)
    {
        let Some(e) = trace[..i].iter().rposition(|e| e.to == Phase::Steady) else {
            return Err(TestCaseError::fail(format!(
                "a room climb from no steady state: {t:?}"
            )));
        };
        let entry = trace[e].at;
        let before = trace[..=e]
            .iter()
            .rev()
            .take_while(|b| b.at + TENTH >= entry)
            .map(|b| (truth(b.target_from) - truth(t.target_from)).abs())
            .fold(0.0, f64::max);
        let held = (t.at - entry).as_secs_f64();
        let leak = if held > 2.0 * period {
            before * period / (held - period)
        } else {
            before
        };
        prop_assert!(
            truth(t.target_from) < target - room + noise + leak,
            "{:?} (leak {})",
            t,
            leak
        );
    }
    Ok(())
}

/// The flip-flop property's rare failure (2 cases in about 138,000, ~0.1% of CI runs; this one
/// seed 0, no noise): the steady state at 9 that a removal's `Lost` restored from 8 climbed by
/// the room rule 1.2 s in, though 9 reads 0.7851, 0.0005 above `util − room`. Its first report
/// covered 8's 0.7451 too, and the mean of its windows came out below the threshold: the room
/// rule did as documented with the reports it was given, and the check allows the straddling
/// report.
#[test]
fn the_report_across_a_steady_entry_reads_the_count_before_into_the_room_rule() {
    let case = FlipFlop {
        scale: 5.853198038760938,
        peak: Some(10),
        level: None,
        noise: 0.0,
        target: 0.8067667803021115,
        room: 0.02215740810131772,
        fast: false,
        late: false,
        seed: 0,
    };
    let trace = no_flip_flop(&case).unwrap();
    let climbs: Vec<_> = trace.iter().filter(|t| t.reason == Reason::Room).collect();
    assert_eq!(climbs.len(), 1, "{climbs:?}");
    assert_eq!(climbs[0].target_from, 9);
    let truth_at_9 = 1.0 - (-9.0 / case.scale).exp();
    assert!(truth_at_9 > case.target - case.room, "{truth_at_9}");
}
