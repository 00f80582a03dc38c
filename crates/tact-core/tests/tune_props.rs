//! Property tests of the TCC controller's invariants: the count stays in [n_min, n_max] on any
//! input, moves only by the defined steps, never settles in a thrashing region, freezes while
//! the pool is starved, and is a deterministic function of its input; the incremental trimmed
//! batch statistics equal a recount.

#[path = "tune_harness.rs"]
mod harness;

use std::time::Duration;

use harness::{call_checked, Lcg, Pool};
use proptest::prelude::*;
use tact_core::tune::{
    Event, Load, Phase, Policy, Reason, SampleSet, Tcc, Transition, TuneParams, TABLE_1,
};

/// Short steady states so that a property run covers several cycles.
fn quick(n_init: usize, n_min: usize, n_max: usize, row: usize, seed: u64) -> TuneParams {
    TuneParams {
        n_init,
        n_min,
        n_max,
        steady_min: Duration::from_secs(3),
        steady_max: Duration::from_secs(3),
        seed,
        ..TuneParams::default().with_row(TABLE_1[row])
    }
}

fn arb_params() -> impl Strategy<Value = TuneParams> {
    (1usize..6, 1usize..40, 0usize..9, any::<u64>()).prop_flat_map(|(n_min, span, row, seed)| {
        let n_max = n_min + span;
        (n_min..=n_max).prop_map(move |n_init| quick(n_init, n_min, n_max, row, seed))
    })
}

#[derive(Debug, Clone)]
enum Ev {
    Complete {
        dt_us: u64,
        in_flight: usize,
        queued: usize,
    },
    Start {
        dt_us: u64,
        in_flight: usize,
        queued: usize,
    },
    Load {
        dt_us: u64,
        in_flight: usize,
        queued: usize,
    },
    Tick {
        dt_us: u64,
    },
    /// A time earlier than the last one.
    Back {
        us: u64,
    },
}

fn arb_event() -> impl Strategy<Value = Ev> {
    let dt = prop_oneof![Just(0u64), 1u64..5_000, 5_000u64..5_000_000];
    let load = (
        0usize..80,
        prop_oneof![Just(0usize), 1usize..10, Just(usize::MAX)],
    );
    prop_oneof![
        6 => (dt.clone(), load.clone()).prop_map(|(dt_us, (in_flight, queued))| Ev::Complete { dt_us, in_flight, queued }),
        1 => (dt.clone(), load.clone()).prop_map(|(dt_us, (in_flight, queued))| Ev::Start { dt_us, in_flight, queued }),
        1 => (dt.clone(), load).prop_map(|(dt_us, (in_flight, queued))| Ev::Load { dt_us, in_flight, queued }),
        1 => dt.prop_map(|dt_us| Ev::Tick { dt_us }),
        1 => (0u64..1_000_000).prop_map(|us| Ev::Back { us }),
    ]
}

/// Feeds raw events; checks the answer contract on each; returns the trace.
fn feed(params: TuneParams, events: &[Ev]) -> (Vec<Transition>, Vec<usize>) {
    let mut tcc = Tcc::new(params).unwrap();
    let mut t = Duration::ZERO;
    let mut targets = vec![tcc.target()];
    let mut trace = Vec::new();
    for ev in events {
        let event = match *ev {
            Ev::Complete {
                dt_us,
                in_flight,
                queued,
            } => {
                t += Duration::from_micros(dt_us);
                Event::Complete {
                    at: t,
                    load: Load::new(in_flight, queued),
                    latency: None,
                }
            }
            Ev::Start {
                dt_us,
                in_flight,
                queued,
            } => {
                t += Duration::from_micros(dt_us);
                Event::Start {
                    at: t,
                    load: Load::new(in_flight, queued),
                }
            }
            Ev::Load {
                dt_us,
                in_flight,
                queued,
            } => {
                t += Duration::from_micros(dt_us);
                Event::Load {
                    at: t,
                    load: Load::new(in_flight, queued),
                }
            }
            Ev::Tick { dt_us } => {
                t += Duration::from_micros(dt_us);
                Event::Tick { at: t }
            }
            Ev::Back { us } => Event::Tick {
                at: t.saturating_sub(Duration::from_micros(us)),
            },
        };
        call_checked(&mut tcc, |tcc| tcc.on_event(event));
        targets.push(tcc.target());
        trace.extend(tcc.drain_trace());
        assert!(
            tcc.busy() <= t,
            "busy {:?} beyond the clock {t:?}",
            tcc.busy()
        );
    }
    (trace, targets)
}

/// Every transition moves the count by one of the defined steps for its reason.
fn check_steps(params: &TuneParams, trace: &[Transition]) {
    let mut prev_count: Option<usize> = None; // the count before the last change
    for t in trace {
        let (from, to) = (t.target_from, t.target_to);
        match t.reason {
            // Slow start's doubling steps in a cold first cycle, else p.
            Reason::Measured | Reason::Better => assert!(
                to == params.add_step(from)
                    || (params.slow_start && t.cycle == 0 && to == params.grow(from, 1.0)),
                "{t:?}"
            ),
            Reason::Overshoot => {
                // Back to the last good count and one normal step from it.
                let back = prev_count.expect("an add came before");
                assert!(params.slow_start && t.cycle == 0, "{t:?}");
                assert!(
                    back < from && to == params.add_step(back) && to < from,
                    "{t:?}"
                );
                prev_count = Some(back);
                continue;
            }
            Reason::Timeout | Reason::Shift => assert_eq!(to, params.base_count(from), "{t:?}"),
            Reason::MaxDone | Reason::Kept => assert_eq!(to, params.remove_step(from), "{t:?}"),
            Reason::Flat | Reason::Ceiling => assert_eq!(to, from, "{t:?}"),
            Reason::Decline | Reason::GuardSlow | Reason::GuardStalled => {
                // Back to the count before the add, then one removal from it (or held there).
                let back = prev_count.expect("an add came before");
                assert!(back < from, "{t:?}");
                assert!(to == params.remove_step(back) || to == back, "{t:?}");
                // A failed removal restores `back`, not the revoked count.
                prev_count = Some(back);
                continue;
            }
            Reason::Lost => {
                assert_eq!(Some(to), prev_count, "{t:?}");
                assert!(to > from, "{t:?}");
            }
            Reason::Floor => assert!(to == from || Some(to) == prev_count, "{t:?}"),
            // The hint's room rule (no hints here): a cycle from the steady count itself.
            Reason::Room => assert_eq!(to, from, "{t:?}"),
            // Only coordinated controllers told of a newcomer end a cycle this way.
            Reason::Joined => panic!("not coordinated: {t:?}"),
        }
        if to != from {
            prev_count = Some(from);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_input_keeps_the_count_in_bounds(
        params in arb_params(),
        events in prop::collection::vec(arb_event(), 0..400),
    ) {
        let (trace, _) = feed(params.clone(), &events);
        check_steps(&params, &trace);
    }

    #[test]
    fn the_controller_is_a_function_of_its_input(
        params in arb_params(),
        events in prop::collection::vec(arb_event(), 0..300),
    ) {
        let a = feed(params.clone(), &events);
        let b = feed(params, &events);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn a_starved_pool_never_moves(
        params in arb_params(),
        gaps in prop::collection::vec(0u64..10_000_000, 1..300),
    ) {
        // Fewer tasks than workers and nothing queued, whatever happens.
        let mut tcc = Tcc::new(params.clone()).unwrap();
        let n = tcc.target();
        let mut t = Duration::ZERO;
        for (i, g) in gaps.iter().enumerate() {
            t += Duration::from_micros(*g);
            let load = Load::new(i % n, 0);
            let answer = if i % 3 == 0 { tcc.on_tick(t) } else { tcc.on_complete(t, load) };
            prop_assert_eq!(answer, None);
        }
        prop_assert_eq!(tcc.busy(), Duration::ZERO);
        prop_assert_eq!(tcc.status().samples, 0);
        prop_assert!(tcc.drain_trace().is_empty());
    }

    #[test]
    fn rounding_always_moves_and_stays_in_bounds(params in arb_params(), n in 1usize..2000) {
        let n = n.clamp(params.n_min, params.n_max);
        let up = params.add_step(n);
        let base = params.base_count(n);
        let down = params.remove_step(n);
        for m in [up, base, down] {
            prop_assert!((params.n_min..=params.n_max).contains(&m));
        }
        if n < params.n_max { prop_assert!(up > n); } else { prop_assert_eq!(up, n); }
        if n > params.n_min {
            prop_assert!(base < n && down < n);
        } else {
            prop_assert_eq!((base, down), (n, n));
        }
        // q_eff keeps condition (1) for the step actually taken.
        if up > n {
            let step = up as f64 / n as f64 - 1.0;
            prop_assert!(params.q_eff(n, up) > step * (step + 1.0) / (step + 2.0));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The thrashing guard: with throughput collapsing past `limit` workers, no steady state
    /// ever holds more than `limit`, over several cycles, with noisy completions.
    #[test]
    fn the_count_never_settles_in_thrashing(
        limit in 4usize..40,
        start in 1usize..40,
        collapse in 3.0f64..50.0,
        noise in 0.0f64..0.6,
        row in 0usize..9,
        seed in any::<u64>(),
    ) {
        let params = quick(start.min(limit), 1, 200, row, seed);
        let mut lcg = Lcg(seed);
        let mut pool = Pool::new(params.clone(), move |n, _| {
            let x = 50.0 * n.min(limit) as f64 + 20.0;
            let x = if n > limit { x / collapse } else { x };
            x * (1.0 - noise / 2.0 + noise * lcg.uniform())
        });
        prop_assert!(pool.until_steady(4, 3_000_000));
        check_steps(&params, &pool.trace);
        for t in pool.trace.iter().filter(|t| t.to == Phase::Steady) {
            prop_assert!(t.target_to <= limit, "steady at {} past the limit {}", t.target_to, limit);
        }
    }

    /// On a curve that is linear up to a knee and flat after it, without noise: every steady
    /// count delivers at least 95% of the knee's throughput and lies at most two add steps past
    /// the knee, and no decision is forced (at 100 tasks/s per worker, every configuration has
    /// its n* batches long before the 30 s dwell cap).
    #[test]
    fn noise_free_cycles_stop_where_the_gain_falls_below_q(
        knee in 5usize..60,
        start in 1usize..30,
        seed in any::<u64>(),
    ) {
        let params = quick(start, 1, 400, 3, seed);
        let mut pool = Pool::new(params.clone(), move |n, _| 100.0 * n.min(knee) as f64);
        prop_assert!(pool.until_steady(3, 3_000_000));
        check_steps(&params, &pool.trace);
        prop_assert!(pool.trace.iter().all(|t| !t.forced));
        // A flat curve past the knee: removal stops at the first count below 95% of the best,
        // so every steady count reaches at least 95% of the knee's throughput.
        for t in pool.trace.iter().filter(|t| t.to == Phase::Steady) {
            prop_assert!(t.target_to as f64 >= 0.95 * knee as f64, "{} for a knee at {}", t.target_to, knee);
            prop_assert!(t.target_to <= params.add_step(params.add_step(knee)));
        }
    }
}

/// Reference statistics: trimmed set by sorting, batch means over raw positions.
fn recount(xs: &[f64], b: usize, trim: f64) -> (u32, f64, f64) {
    let k = (trim * xs.len() as f64).floor() as usize;
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&i, &j| xs[j].total_cmp(&xs[i]).then(j.cmp(&i)));
    let mut cut = vec![false; xs.len()];
    for &i in order.iter().take(k) {
        cut[i] = true;
    }
    let means: Vec<f64> = (0..xs.len() / b)
        .filter_map(|j| {
            let kept: Vec<f64> = (j * b..(j + 1) * b)
                .filter(|&i| !cut[i])
                .map(|i| xs[i])
                .collect();
            (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
        })
        .collect();
    let n = means.len() as f64;
    if means.is_empty() {
        return (0, 0.0, 0.0);
    }
    let mean = means.iter().sum::<f64>() / n;
    let var = if means.len() > 1 {
        means.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (means.len() as u32, mean, var)
}

/// `set`'s statistics against a recount of `xs` in batches of `b`: the variance within 1e-9 of
/// itself and never more than 1e-12 off.
fn assert_recount(set: &SampleSet, xs: &[f64], b: usize, trim: f64) {
    let got = set.summary();
    let (batches, mean, var) = recount(xs, b, trim);
    assert_eq!(got.batches, batches, "after {} samples", xs.len());
    assert!(
        (got.mean - mean).abs() < 1e-12,
        "after {} samples",
        xs.len()
    );
    assert!(
        (got.var - var).abs() < (1e-9 * var.max(1e-12)).min(1e-12),
        "after {} samples",
        xs.len()
    );
}

#[test]
fn incremental_statistics_match_a_recount() {
    let mut noise = Lcg(7);
    let xs: Vec<f64> = (0..3000)
        .map(|i| {
            // Exponential samples with a rare 2000× stall.
            let x = -(1.0 - noise.uniform()).ln() * 0.01;
            if i % 397 == 11 {
                x + 20.0
            } else {
                x
            }
        })
        .collect();
    let mut set = SampleSet::new(16, 0.01);
    for (i, &x) in xs.iter().enumerate() {
        set.push(x);
        if (i + 1) % 250 == 0 {
            assert_recount(&set, &xs[..=i], 16, 0.01);
        }
    }
    // The stalls were all trimmed: the mean is the exponential's.
    assert!((set.summary().mean - 0.01).abs() < 0.002);
}

#[test]
fn doubling_merges_pairs() {
    let mut noise = Lcg(3);
    let mut xs: Vec<f64> = (0..999).map(|_| noise.uniform()).collect();
    let mut set = SampleSet::new(8, 0.01);
    for &x in &xs {
        set.push(x);
    }
    set.double_batch();
    assert_recount(&set, &xs, 16, 0.01);
    // Pushing after the doubling keeps matching.
    for _ in 0..77 {
        let x = noise.uniform();
        xs.push(x);
        set.push(x);
    }
    assert_recount(&set, &xs, 16, 0.01);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn trimmed_batch_statistics_equal_a_recount(
        xs in prop::collection::vec(prop_oneof![9 => 0.001f64..0.01, 1 => 1.0f64..30.0], 1..1500),
        b in 1usize..40,
        trim in prop_oneof![Just(0.0), Just(0.01), 0.0f64..0.2],
        double_at in prop::option::of(0usize..1500),
    ) {
        let mut set = SampleSet::new(b, trim);
        let mut batch = b;
        for (i, &x) in xs.iter().enumerate() {
            if double_at == Some(i) {
                set.double_batch();
                batch *= 2;
            }
            set.push(x);
        }
        let s = set.summary();
        let (n, mean, var) = recount(&xs, batch, trim);
        prop_assert_eq!(s.batches, n);
        prop_assert!((s.mean - mean).abs() <= 1e-9 * mean.abs().max(1e-3), "{} vs {}", s.mean, mean);
        // The set keeps running sums and takes a batch mean out again when trimming changes it,
        // so a large mean that came and went leaves a rounding residue of order eps * mean^2
        // (the largest sample bounds every batch mean); 64 such residues is a generous count.
        let largest = xs.iter().fold(0.0f64, |a, &x| a.max(x));
        let residue = 64.0 * f64::EPSILON * largest * largest;
        prop_assert!(
            (s.var - var).abs() <= 1e-7 * var.max(1e-6) + residue,
            "{} vs {}",
            s.var,
            var
        );
    }
}
