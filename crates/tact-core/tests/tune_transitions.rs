//! Every state transition of the TCC controller, on deterministic throughput curves, and the
//! measurement rules of spec §2.2 (busy time, settling, trimming, batch means, dwell caps).
//!
//! With deterministic completions every batch mean is the same, so the sequential test decides
//! as soon as a configuration has its n* = 30 batches (2n* in Max), and the expected sequence of
//! counts follows from the curve and the rounding rules alone.

#[path = "tune_harness.rs"]
mod harness;

use std::time::Duration;

use harness::{paper, settle, Lcg, Pool};
use tact_core::tune::{Event, Load, Phase, Policy, Reason, Tcc, TuneParams};

use Phase::*;
use Reason::*;

const MAX: usize = 2_000_000;

/// Throughput grows linearly up to `knee` workers (100 tasks/s each), then stays flat.
fn flat_after(knee: usize) -> impl FnMut(usize, u64) -> f64 {
    move |n, _| 100.0 * n.min(knee) as f64
}

/// Linear up to `knee`, then `after(n)`.
fn linear_then(knee: usize, after: impl Fn(usize) -> f64) -> impl FnMut(usize, u64) -> f64 {
    move |n, _| {
        if n <= knee {
            100.0 * n as f64
        } else {
            after(n)
        }
    }
}

#[test]
fn adds_while_each_step_gains_q_then_holds_a_flat_count_in_max_and_removes() {
    let pool = Pool::new(paper(8), flat_after(10));
    assert_eq!(pool.tcc.phase(), Base);
    assert_eq!(pool.tcc.target(), 8);
    let pool = settle(pool, 1);
    assert_eq!(
        pool.moves(),
        vec![
            (Base, Add, Measured, 8, 10),
            // +25% workers, +25% throughput: at least q = 14%.
            (Add, Add, Better, 10, 13),
            // 10 → 13 gains nothing but loses nothing: the count just reached is held in Max.
            (Add, Max, Flat, 13, 13),
            (Max, Remove, MaxDone, 13, 12),
            (Remove, Remove, Kept, 12, 11),
            (Remove, Remove, Kept, 11, 10),
            (Remove, Remove, Kept, 10, 9),
            // 9 workers deliver 90% of the best: below 95%, restore the last round.
            (Remove, Steady, Lost, 9, 10),
        ]
    );
    assert_eq!(pool.tcc.target(), 10);
    assert_eq!(pool.tcc.phase(), Steady);
    // Noise-free, nothing was forced by a dwell cap.
    assert!(pool.trace.iter().all(|t| !t.forced));
    assert_eq!(pool.tcc.status().forced_decisions, 0);
}

#[test]
fn a_decline_revokes_the_added_workers_and_removes_from_the_previous_count() {
    // Past 10 workers throughput falls by 30%: the thrashing guard's main case.
    let pool = settle(Pool::new(paper(8), linear_then(10, |_| 700.0)), 1);
    assert_eq!(
        pool.moves(),
        vec![
            (Base, Add, Measured, 8, 10),
            (Add, Add, Better, 10, 13),
            // Revoked to 10 (whose samples are reused), then straight to a removal from 10.
            (Add, Remove, Decline, 13, 9),
            (Remove, Steady, Lost, 9, 10),
        ]
    );
}

#[test]
fn the_guard_trips_early_when_the_new_count_runs_below_half() {
    // Thrashing: 17× slower past 10 workers. The guard needs only 5 batches, not n* = 30.
    let pool = settle(
        Pool::new(paper(8), linear_then(10, |n| 100.0 * n as f64 / 17.0)),
        1,
    );
    let moves = pool.moves();
    assert_eq!(moves[2], (Add, Remove, GuardSlow, 13, 9));
    assert_eq!(moves[3], (Remove, Steady, Lost, 9, 10));
    assert_eq!(pool.trace[2].batches, 5);
}

#[test]
fn the_guard_trips_when_the_new_count_yields_samples_too_slowly() {
    // Past 10 workers completions almost stop: the new count never finishes settling. The
    // guard trips once it has used 4× the busy time 10 workers needed for n* batches.
    let pool = settle(Pool::new(paper(8), linear_then(10, |_| 0.5)), 1);
    let moves = pool.moves();
    assert_eq!(moves[2], (Add, Remove, GuardStalled, 13, 9));
    let entered = pool.trace[1].busy;
    let c1_time = entered - pool.trace[0].busy;
    let tripped = pool.trace[2].busy - entered;
    assert!(
        tripped > c1_time * 4 && tripped < c1_time * 4 + Duration::from_secs(2),
        "tripped after {tripped:?}, C1 took {c1_time:?}"
    );
    assert_eq!(pool.trace[2].batches, 0);
}

#[test]
fn ticks_let_the_stall_guard_trip_without_completions() {
    let mut tcc = Tcc::new(paper(8)).unwrap();
    let load = Load::new(8, 1000);
    let mut t = Duration::ZERO;
    tcc.on_start(t, load);
    // 8 workers, 800 completions/s, until the controller adds.
    let mut now_target = 8;
    while now_target == 8 {
        t += Duration::from_micros(1250);
        if let Some(n) = tcc.on_complete(t, load) {
            now_target = n;
        }
    }
    assert_eq!(now_target, 10);
    let load = Load::new(10, 1000);
    tcc.on_start(t, load);
    // No completion ever again; ticks every 100 ms.
    let mut answer = None;
    for _ in 0..100 {
        t += Duration::from_millis(100);
        answer = tcc.on_tick(t);
        if answer.is_some() {
            break;
        }
    }
    assert_eq!(answer, Some(7), "revoked to 8, then removed to 7");
    let last = tcc.drain_trace().pop().unwrap();
    assert_eq!(
        (last.from, last.to, last.reason),
        (Add, Remove, GuardStalled)
    );
}

#[test]
fn the_count_stops_at_n_max() {
    let params = TuneParams {
        n_max: 12,
        ..paper(8)
    };
    let pool = settle(Pool::new(params, flat_after(1000)), 1);
    assert_eq!(
        pool.moves(),
        vec![
            (Base, Add, Measured, 8, 10),
            // up(10) = 13 is cut to 12; the shorter step needs a smaller gain (q_eff).
            (Add, Add, Better, 10, 12),
            (Add, Max, Ceiling, 12, 12),
            (Max, Remove, MaxDone, 12, 11),
            (Remove, Steady, Lost, 11, 12),
        ]
    );
}

#[test]
fn removal_stops_at_n_min() {
    // Throughput does not depend on the count at all.
    let pool = settle(Pool::new(paper(3), |_, _| 1000.0), 1);
    assert_eq!(
        pool.moves(),
        vec![
            (Base, Add, Measured, 3, 4),
            (Add, Max, Flat, 4, 4),
            (Max, Remove, MaxDone, 4, 3),
            (Remove, Remove, Kept, 3, 2),
            (Remove, Remove, Kept, 2, 1),
            (Remove, Steady, Floor, 1, 1),
        ]
    );
}

#[test]
fn without_the_remove_state_max_goes_to_steady() {
    let params = TuneParams {
        remove: false,
        ..paper(8)
    };
    let pool = settle(Pool::new(params, flat_after(10)), 1);
    assert_eq!(
        pool.moves(),
        vec![
            (Base, Add, Measured, 8, 10),
            (Add, Add, Better, 10, 13),
            (Add, Max, Flat, 13, 13),
            (Max, Steady, Floor, 13, 13),
        ]
    );
}

#[test]
fn steady_times_out_into_a_new_cycle_with_the_base_cut() {
    let mut pool = settle(Pool::new(paper(8), flat_after(10)), 1);
    let entered = pool.trace.last().unwrap().busy;
    assert_eq!(pool.tcc.steady_timeout(), Duration::from_secs(50));
    assert!(pool.run_until(MAX, |p| p.tcc.phase() != Steady));
    let t = pool.trace.last().unwrap();
    assert_eq!((t.from, t.to, t.reason), (Steady, Base, Timeout));
    // base(10) = max(1, min(9, ⌈10 × 0.61⌉)) = 7.
    assert_eq!((t.target_from, t.target_to), (10, 7));
    assert_eq!(t.cycle, 1);
    let waited = t.busy - entered;
    assert!(
        waited >= Duration::from_secs(50) && waited < Duration::from_millis(50_020),
        "{waited:?}"
    );
    // The second cycle converges to the same count.
    assert!(pool.until_steady(2, MAX));
    assert_eq!(pool.tcc.target(), 10);
}

#[test]
fn the_default_steady_timeout_is_ten_cycles_clamped_and_jittered() {
    let steady = |seed| {
        let params = TuneParams {
            n_init: 8,
            seed,
            ..TuneParams::default()
        };
        settle(Pool::new(params, flat_after(10)), 1)
    };
    for seed in 0..20 {
        let pool = steady(seed);
        // The first cycle takes about 4.4 busy seconds: 10× that is below 60 s, so the
        // timeout is 60 s ± 10%.
        let cycle = pool.trace.last().unwrap().busy;
        assert!(cycle < Duration::from_secs(6), "{cycle:?}");
        let t = pool.tcc.steady_timeout().as_secs_f64();
        assert!((54.0..=66.0).contains(&t), "seed {seed}: {t}");
    }
    // Different seeds give different timeouts.
    let timeouts: Vec<Duration> = (0..4)
        .map(|seed| steady(seed).tcc.steady_timeout())
        .collect();
    assert!(timeouts.windows(2).any(|w| w[0] != w[1]));
}

/// A pool on the flat-after-10 curve whose throughput can be scaled while it runs, brought to
/// the end of its first steady window (the reference; windows are n* = 30 batches).
fn steady_with_scale() -> (Pool, std::rc::Rc<std::cell::Cell<f64>>) {
    let scale = std::rc::Rc::new(std::cell::Cell::new(1.0));
    let s = scale.clone();
    let mut pool = settle(
        Pool::new(paper(8), move |n, _| 100.0 * n.min(10) as f64 * s.get()),
        1,
    );
    next_window(&mut pool);
    (pool, scale)
}

/// Steps until the steady state closes a window (its sample set starts over).
fn next_window(pool: &mut Pool) {
    assert!(pool.run_until(MAX, |p| p.tcc.status().samples > 0));
    assert!(pool.run_until(MAX, |p| p.tcc.status().samples == 0
        || p.tcc.phase() != Steady));
}

#[test]
fn a_large_throughput_shift_starts_a_cycle_after_one_window() {
    let (mut pool, scale) = steady_with_scale();
    scale.set(1.0 / 3.0);
    next_window(&mut pool);
    let t = pool.trace.last().unwrap();
    assert_eq!((t.from, t.to, t.reason), (Steady, Base, Shift));
}

#[test]
fn a_moderate_shift_needs_two_windows_in_a_row() {
    // One window at 70%: outside [0.8, 1.25] but inside [0.5, 2]. No cycle yet.
    let (mut pool, scale) = steady_with_scale();
    scale.set(0.7);
    next_window(&mut pool);
    assert_eq!(pool.tcc.phase(), Steady);
    // A second one in a row starts a cycle.
    next_window(&mut pool);
    let t = pool.trace.last().unwrap();
    assert_eq!((t.from, t.to, t.reason), (Steady, Base, Shift));

    // One window at 70% followed by a normal one: the strikes reset, and the steady state
    // lasts until its timeout.
    let (mut pool, scale) = steady_with_scale();
    scale.set(0.7);
    next_window(&mut pool);
    scale.set(1.0);
    next_window(&mut pool);
    scale.set(0.7);
    next_window(&mut pool);
    scale.set(1.0);
    assert!(pool.run_until(MAX, |p| p.tcc.phase() != Steady));
    assert_eq!(pool.trace.last().unwrap().reason, Timeout);

    // A shift inside the band never counts.
    let (mut pool, scale) = steady_with_scale();
    scale.set(0.85);
    assert!(pool.run_until(MAX, |p| p.tcc.phase() != Steady));
    assert_eq!(pool.trace.last().unwrap().reason, Timeout);
}

#[test]
fn settling_ignores_completions_until_in_flight_reaches_the_target_and_b_more() {
    let mut pool = Pool::new(paper(8), flat_after(10));
    // The first completion only starts the sample chain; the next max(n, b) = 16 are ignored.
    pool.run_until(MAX, |p| p.completions == 17);
    let s = pool.tcc.status();
    assert_eq!((s.samples, s.settling), (0, false));
    pool.step();
    assert_eq!(pool.tcc.status().samples, 1);

    // A decrease: while more tasks are in flight than the target (surplus workers retiring
    // after their task), completions are ignored.
    let mut t = Duration::ZERO;
    let mut small = Tcc::new(paper(4)).unwrap();
    small.on_start(t, Load::new(6, 100));
    for _ in 0..40 {
        t += Duration::from_millis(1);
        small.on_complete(t, Load::new(6, 100));
    }
    assert_eq!(
        small.status().samples,
        0,
        "6 in flight is not the target of 4"
    );
    assert!(small.status().settling);
    t += Duration::from_millis(1);
    small.on_complete(t, Load::new(4, 100));
    for _ in 0..16 {
        t += Duration::from_millis(1);
        small.on_complete(t, Load::new(4, 100));
    }
    assert_eq!(small.status().samples, 0);
    t += Duration::from_millis(1);
    small.on_complete(t, Load::new(4, 100));
    assert_eq!(small.status().samples, 1);
}

#[test]
fn idle_time_between_input_blocks_does_not_change_decisions() {
    // 1,000 tasks every 5 s; at most 1,000 tasks/s, so the pool idles 4 s or more per block.
    let endless = settle(Pool::new(paper(8), flat_after(10)), 1);
    let blocks = settle(
        Pool::with_input(
            paper(8),
            flat_after(10),
            Some((1000, Duration::from_secs(5))),
        ),
        1,
    );
    assert_eq!(blocks.moves(), endless.moves());
    // Wall time is much longer with blocks; busy time is not.
    assert!(
        blocks.now > endless.now * 3,
        "{:?} vs {:?}",
        blocks.now,
        endless.now
    );
    let busy_blocks = blocks.tcc.busy().as_secs_f64();
    let busy_endless = endless.tcc.busy().as_secs_f64();
    assert!(
        busy_blocks < blocks.now.as_secs_f64() / 3.0,
        "busy {busy_blocks} of {:?}",
        blocks.now
    );
    // Busy periods end when the queue runs dry, before the drain: slightly less busy time than
    // completions would suggest, but the same order as the endless run.
    assert!(
        (busy_blocks / busy_endless - 1.0).abs() < 0.5,
        "{busy_blocks} vs {busy_endless}"
    );
}

#[test]
fn a_starved_pool_freezes_the_controller() {
    let mut tcc = Tcc::new(paper(8)).unwrap();
    let mut t = Duration::ZERO;
    tcc.on_start(t, Load::new(8, 5));
    for _ in 0..100 {
        t += Duration::from_millis(2);
        tcc.on_complete(t, Load::new(8, 5));
    }
    let busy = tcc.busy();
    let samples = tcc.status().samples;
    // The queue runs dry: fewer tasks than workers.
    t += Duration::from_millis(2);
    tcc.on_load(t, Load::new(7, 0));
    let busy_at_starve = tcc.busy();
    assert_eq!(busy_at_starve, busy + Duration::from_millis(2));
    for _ in 0..10_000 {
        t += Duration::from_secs(1);
        assert_eq!(tcc.on_tick(t), None);
    }
    // Completions while starved are not samples either.
    for k in (1..7).rev() {
        t += Duration::from_millis(3);
        assert_eq!(tcc.on_complete(t, Load::new(k, 0)), None);
    }
    let s = tcc.status();
    assert_eq!(tcc.busy(), busy_at_starve);
    assert_eq!(s.samples, samples);
    assert!(!s.saturated);
    assert_eq!(s.phase, Base);
    assert!(tcc.drain_trace().is_empty());
    // Work arrives again: the first completion after the starved period starts a new chain.
    t += Duration::from_secs(1);
    tcc.on_start(t, Load::new(8, 100));
    t += Duration::from_millis(2);
    tcc.on_complete(t, Load::new(8, 100));
    assert_eq!(tcc.status().samples, samples);
    t += Duration::from_millis(2);
    tcc.on_complete(t, Load::new(8, 100));
    assert_eq!(tcc.status().samples, samples + 1);
    assert_eq!(tcc.busy(), busy_at_starve + Duration::from_millis(4));
}

#[test]
fn trimming_keeps_a_20_second_stall_out_of_the_decisions() {
    let stall = |k: u64| {
        if k == 200 {
            Duration::from_secs(20)
        } else {
            Duration::ZERO
        }
    };
    let clean = settle(Pool::new(paper(8), flat_after(10)), 1);
    let trimmed = {
        let mut p = Pool::new(paper(8), flat_after(10));
        p.extra = Box::new(stall);
        settle(p, 1)
    };
    assert_eq!(trimmed.moves(), clean.moves());
    assert!(trimmed.trace.iter().all(|t| !t.forced));
    // Without trimming the stall inflates the base state's variance: n̂₁ becomes huge and the
    // base state runs to its 30 s dwell cap.
    let untrimmed = {
        let mut p = Pool::new(
            TuneParams {
                trim: 0.0,
                ..paper(8)
            },
            flat_after(10),
        );
        p.extra = Box::new(stall);
        settle(p, 1)
    };
    let base = &untrimmed.trace[0];
    assert_eq!((base.from, base.to), (Base, Add));
    assert!(base.forced);
    assert!(base.busy >= Duration::from_secs(30));
}

#[test]
fn correlated_batch_means_double_the_batch_size_in_base() {
    // Throughput alternates between two levels every 128 completions. With b = 16 the batch
    // means come in runs of 8 alike (lag-1 autocorrelation near 0.75); each doubling halves the
    // runs, and at b = 64 they come in pairs, whose lag-1 autocorrelation is about zero.
    let mut pool = Pool::new(
        paper(8),
        |_, k| if (k / 128) % 2 == 0 { 700.0 } else { 900.0 },
    );
    assert_eq!(pool.tcc.status().batch_size, 16);
    assert!(pool.run_until(MAX, |p| p.tcc.phase() != Base));
    assert_eq!(pool.tcc.status().batch_size, 64);
    // Independent samples leave b alone.
    let mut noise = Lcg(9);
    let mut iid = Pool::new(paper(8), move |_, _| 800.0 * (0.5 + noise.uniform()));
    assert!(iid.run_until(MAX, |p| p.tcc.phase() != Base));
    assert_eq!(iid.tcc.status().batch_size, 16);
}

#[test]
fn noisy_configurations_are_decided_at_the_dwell_cap() {
    // Inter-completion times spread ±90% around the mean: n̂₁ is about 10⁴ batches, far more
    // than 30 s can give, so Base ends at its cap and says so.
    let mut noise = Lcg(3);
    let mut pool = Pool::new(paper(8), move |n, _| {
        100.0 * n.min(10) as f64 / (0.1 + 1.8 * noise.uniform())
    });
    assert!(pool.run_until(MAX, |p| p.tcc.phase() != Base));
    let t = &pool.trace[0];
    assert!(t.forced);
    assert!(t.busy >= Duration::from_secs(30) && t.busy < Duration::from_millis(30_100));
    assert_eq!(pool.tcc.status().forced_decisions, 1);
}

#[test]
fn a_one_worker_step_needs_the_rounded_gain() {
    // From 1 to 2 workers is a 100% step: q_eff = 0.14·φ(1)/φ(0.25) = 67.2%.
    let params = paper(1);
    assert!((params.q_eff(1, 2) - 0.14 * (2.0 / 3.0) / (0.25 * 1.25 / 2.25)).abs() < 1e-12);
    // Doubling throughput passes...
    let mut pool = Pool::new(paper(1), flat_after(100));
    assert!(pool.run_until(MAX, |p| p.trace.len() >= 2));
    assert_eq!(pool.moves()[1], (Add, Add, Better, 2, 3));
    // ...a 50% gain does not (it would at the unscaled q = 14%).
    let mut pool = Pool::new(paper(1), |n, _| if n == 1 { 100.0 } else { 150.0 });
    assert!(pool.run_until(MAX, |p| p.trace.len() >= 2));
    assert_eq!(pool.moves()[1], (Add, Max, Flat, 2, 2));
}

#[test]
fn count_rounding() {
    let p = TuneParams::default();
    // up(n) = min(n_max, max(n+1, ⌈1.25n⌉))
    assert_eq!(
        [1, 2, 3, 4, 8, 10, 13, 17, 1023, 1024].map(|n| p.add_step(n)),
        [2, 3, 4, 5, 10, 13, 17, 22, 1024, 1024]
    );
    // base(n) = max(1, min(n−1, ⌈0.61n⌉)): 107 → 66 as in the paper.
    assert_eq!(
        [1, 2, 3, 10, 107].map(|n| p.base_count(n)),
        [1, 1, 2, 7, 66]
    );
    // down(n) = max(1, min(n−1, round(0.9n)))
    assert_eq!(
        [1, 2, 5, 10, 13, 66].map(|n| p.remove_step(n)),
        [1, 1, 4, 9, 12, 59]
    );
}

#[test]
fn non_monotonic_time_is_counted_and_treated_as_simultaneous() {
    let mut tcc = Tcc::new(paper(2)).unwrap();
    let load = Load::new(2, 10);
    tcc.on_start(Duration::from_secs(10), load);
    tcc.on_complete(Duration::from_secs(11), load);
    let busy = tcc.busy();
    tcc.on_complete(Duration::from_secs(5), load);
    assert_eq!(tcc.busy(), busy);
    assert_eq!(tcc.status().clock_regressions, 1);
    tcc.on_complete(Duration::from_secs(12), load);
    assert_eq!(tcc.busy(), busy + Duration::from_secs(1));
}

#[test]
fn events_carry_their_time_and_load() {
    let load = Load::new(3, 0);
    let e = Event::Complete {
        at: Duration::from_secs(2),
        load,
        latency: Some(Duration::from_millis(5)),
    };
    assert_eq!((e.at(), e.load()), (Duration::from_secs(2), Some(load)));
    assert_eq!(Event::Tick { at: Duration::ZERO }.load(), None);
    assert!(load.saturated(3) && !load.saturated(4) && Load::new(1, 1).saturated(4));
}

#[test]
fn the_trace_is_bounded_and_counts_what_it_dropped() {
    let params = TuneParams {
        trace_capacity: 3,
        ..paper(8)
    };
    let mut tcc = Tcc::new(params).unwrap();
    let mut t = Duration::ZERO;
    tcc.on_start(t, Load::new(8, 1 << 20));
    let mut n = 8;
    let mut changes = 0;
    while changes < 6 {
        t += Duration::from_secs_f64(1.0 / (100.0 * n.min(10) as f64));
        if let Some(m) = tcc.on_complete(t, Load::new(n, 1 << 20)) {
            n = m;
            changes += 1;
            tcc.on_start(t, Load::new(n, 1 << 20));
        }
    }
    let trace = tcc.drain_trace();
    assert_eq!(trace.len(), 3);
    assert!(tcc.status().trace_dropped >= 3);
    assert!(tcc.drain_trace().is_empty());
    // The newest transitions were kept, in order.
    assert!(trace.windows(2).all(|w| w[0].busy <= w[1].busy));
    assert_eq!(trace.last().unwrap().target_to, n);
}

/// The load changes while a removal step measures (X2's memory switch on the rig): from then on
/// every count of `down` workers or more thrashes at a twentieth of its throughput. The removal
/// is judged lost against the count's throughput before the change, so the count comes back,
/// thrashing. The steady state's first window, a twentieth of what the cycle measured at that
/// count, starts a new cycle from the base cut rather than becoming the reference change
/// detection holds the count to (before, the steady state ran on to its 50 s timeout).
#[test]
fn a_count_restored_after_the_load_changed_starts_a_cycle_at_its_first_steady_window() {
    let p = paper(8);
    let mut plain = Pool::new(p.clone(), flat_after(10));
    assert!(plain.run_until(MAX, |pool| pool.tcc.phase() == Remove));
    let entered = plain.trace.last().unwrap();
    let (switch, n, down) = (plain.completions, entered.target_from, entered.target_to);
    let mut run = Pool::new(p.clone(), move |k, done| {
        let rate = 100.0 * k.min(10) as f64;
        if done >= switch && k >= down {
            rate / 20.0
        } else {
            rate
        }
    });
    assert!(run.run_until(MAX, |pool| pool.trace.iter().any(|t| t.from == Steady)));
    let (entry, end) = run.first_steady();
    assert_eq!(
        (entry.from, entry.reason, entry.target_from, entry.target_to),
        (Remove, Lost, down, n),
        "{:?}",
        run.moves()
    );
    assert_eq!(
        (end.to, end.reason, end.target_to),
        (Base, Shift, p.base_count(n)),
        "{:?}",
        run.moves()
    );
    assert!(
        end.at - entry.at < Duration::from_secs(10),
        "{:?} after the steady state began",
        end.at - entry.at
    );
}
