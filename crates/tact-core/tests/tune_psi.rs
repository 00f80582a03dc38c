//! PSI as a saturation hint (`TuneParams::psi`, `Policy::on_pressure`; spec §6 item 3): memory
//! or I/O `full` stalls fail an add step the throughput test passed, revoke one that stalls on
//! its own before any verdict, and start a new cycle from Max or Remove; memory `some` stalls
//! end the steady state early; the stalls a reading still carries from the counts before judge
//! nothing; no reading ever raises the count, and with the switch off the readings change
//! nothing.

#[path = "tune_harness.rs"]
mod harness;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use harness::{call_checked, paper, settle, sparse, Pool};
use proptest::prelude::*;
use tact_core::tune::{
    policy_from_spec, Aimd, AimdParams, Bounds, Decision, Event, Load, Phase, Policy, Pressure,
    Reason, Tcc, Transition, TuneParams,
};

const TENTH: Duration = Duration::from_millis(100);
const SECOND: Duration = Duration::from_secs(1);
/// Above this many tasks in flight the stalls begin.
const KNEE: usize = 6;

/// Throughput proportional to the count: every add step gains its full p, far above q.
fn linear() -> impl FnMut(usize, u64) -> f64 {
    |n, _| 100.0 * n as f64
}

/// A gradually saturating curve, as in `tune_hint.rs`: the paper's rule settles on it.
fn bending() -> impl FnMut(usize, u64) -> f64 {
    |n, _| 1000.0 * (1.0 - (-(n as f64) / 8.0).exp())
}

fn params() -> [TuneParams; 2] {
    let n_max = 40;
    [
        TuneParams { n_max, ..paper(4) },
        TuneParams {
            n_init: 4,
            n_max,
            ..TuneParams::default()
        },
    ]
}

fn psi(p: TuneParams) -> TuneParams {
    TuneParams { psi: true, ..p }
}

/// Stalls of `level` on one resource above the knee, none below.
fn above_knee(resource: &'static str, level: f64) -> impl FnMut(usize, Duration) -> Pressure {
    move |n, _| {
        let x = if n > KNEE { level } else { 0.0 };
        match resource {
            "io_full" => Pressure {
                io_full: x,
                ..Pressure::default()
            },
            "memory_full" => Pressure {
                memory_full: x,
                ..Pressure::default()
            },
            _ => Pressure {
                memory_some: x,
                ..Pressure::default()
            },
        }
    }
}

#[test]
fn full_stalls_turn_a_better_add_step_into_a_revoked_one() {
    for p in params() {
        let mut plain = settle(Pool::new(p.clone(), linear()), 1);
        let climbed = plain.tcc.target();
        assert!(climbed > KNEE, "without PSI the count climbs: {climbed}");
        let plain_decisions = plain.tcc.drain_decisions();
        assert!(plain_decisions
            .iter()
            .all(|d| d.phase != Phase::Add || d.better));

        for resource in ["io_full", "memory_full"] {
            let mut run = settle(
                Pool::new(psi(p.clone()), linear())
                    .with_pressure(TENTH, above_knee(resource, 0.06)),
                1,
            );
            let n = run.tcc.target();
            assert!(n <= KNEE, "{resource}: steady at {n}: {:?}", run.moves());
            let decisions = run.tcc.drain_decisions();
            let stalled: Vec<&Decision> = decisions.iter().filter(|d| d.psi).collect();
            assert!(!stalled.is_empty(), "{resource}: {decisions:?}");
            // Each one judged a count above the knee whose gain on this noise-free line is well
            // above the q it was tested for: the throughput test alone says better.
            for d in &stalled {
                assert!(!d.better && d.c2 > KNEE && d.c1 <= KNEE, "{d:?}");
                assert_eq!(d.phase, Phase::Add);
                let gain = d.c2 as f64 / d.c1 as f64 - 1.0;
                assert!(gain > d.q + 0.1, "{d:?}");
            }
            let status = run.tcc.status();
            assert_eq!(status.psi, stalled.len() as u64);
            let marked: Vec<_> = run.trace.iter().filter(|t| t.psi).collect();
            assert_eq!(marked.len(), stalled.len(), "{:?}", run.moves());
            for t in marked {
                assert!(
                    matches!(t.reason, Reason::Decline | Reason::Overshoot),
                    "{t:?}"
                );
                assert!(t.target_to < t.target_from, "{t:?}");
            }
            assert!(status.pressure.is_some());
        }
    }
}

/// 10 tasks/s per worker up to the knee; past it the work goes on 17 times slower (X2's
/// thrashing), so an add step past it is a loss the thrashing guard catches after 5 batches.
fn thrashing() -> impl FnMut(usize, u64) -> f64 {
    |n, _| {
        let x = 10.0 * n as f64;
        if n > KNEE {
            x / 17.0
        } else {
            x
        }
    }
}

/// The readings as they come, (time, memory `full`).
type Log = Rc<RefCell<Vec<(Duration, f64)>>>;

/// Memory `full` as the kernel's avg10 reports it: the share of time `stalled(in flight, now)`
/// enters an exponential average with a 10 s time constant at each reading (so a count's
/// stalls take seconds to show, and seconds more to fade after it). Every reading is logged.
fn avg10(
    mut stalled: impl FnMut(usize, Duration) -> f64 + 'static,
    log: Log,
) -> impl FnMut(usize, Duration) -> Pressure {
    let mut avg = 0.0;
    let mut last: Option<Duration> = None;
    move |n, t| {
        let share = stalled(n, t);
        let dt = last.map_or(0.0, |l| (t - l).as_secs_f64());
        last = Some(t);
        avg = share + (avg - share) * (-dt / 10.0).exp();
        log.borrow_mut().push((t, avg));
        Pressure {
            memory_full: avg,
            ..Pressure::default()
        }
    }
}

/// The tasks stall 16/17 of the time past the knee (all of them at once, X2's model).
fn past_knee(n: usize, _: Duration) -> f64 {
    if n > KNEE {
        16.0 / 17.0
    } else {
        0.0
    }
}

/// The transition that left the state `entered` began, with `entered`'s index.
fn left(trace: &[Transition], entered: usize) -> &Transition {
    &trace[entered + 1]
}

#[test]
fn an_add_step_that_stalls_is_revoked_before_the_guard_and_its_stalls_judge_nothing_after() {
    for p in params() {
        // Without PSI the thrashing guard undoes each step past the knee (shown as slow
        // start's overshoot in the first cycle).
        let mut plain = settle(Pool::new(p.clone(), thrashing()), 1);
        let past: Vec<Decision> = plain
            .tcc
            .drain_decisions()
            .into_iter()
            .filter(|d| d.c2 > KNEE)
            .collect();
        assert!(!past.is_empty());
        for d in &past {
            assert!(
                matches!(d.reason, Reason::GuardSlow | Reason::GuardStalled) && !d.psi,
                "{d:?}"
            );
        }
        let i = plain
            .trace
            .iter()
            .position(|t| t.to == Phase::Add && t.target_to > KNEE)
            .expect("a step past the knee");
        let guard_took = left(&plain.trace, i).at - plain.trace[i].at;

        let log = Log::default();
        let run = settle(
            Pool::new(psi(p.clone()), thrashing())
                .with_pressure(SECOND, avg10(past_knee, log.clone())),
            1,
        );
        // Each step past the knee (slow start's overshoot, then the paper's step) is left by
        // PSI's revocation, before the guard had its 5 batches and in less than half its time.
        let steps: Vec<usize> = (0..run.trace.len())
            .filter(|&i| run.trace[i].to == Phase::Add && run.trace[i].target_to > KNEE)
            .collect();
        assert!(!steps.is_empty());
        for &i in &steps {
            let revoked = left(&run.trace, i);
            assert!(revoked.psi, "{:?}", run.moves());
            assert_eq!(revoked.from, Phase::Add);
            assert!(matches!(
                revoked.reason,
                Reason::Decline | Reason::Overshoot
            ));
            assert!(revoked.target_to <= KNEE);
            assert!(revoked.batches < 5, "{revoked:?}");
            let took = revoked.at - run.trace[i].at;
            assert!(
                took * 2 < guard_took,
                "{took:?} against the guard's {guard_took:?}"
            );
        }
        // Nothing else is PSI's, although avg10 still carried the last step's stalls above
        // psi_full through the removal after it (the count's own stalls are 0 there): the
        // removal is judged by throughput, and the steady count is the guard's.
        let marked: Vec<&Transition> = run.trace.iter().filter(|t| t.psi).collect();
        assert_eq!(marked.len(), steps.len(), "{:?}", run.moves());
        assert_eq!(run.tcc.status().psi, steps.len() as u64);
        let last = steps[steps.len() - 1];
        let (from, to) = (left(&run.trace, last), left(&run.trace, last + 1));
        assert_eq!((from.to, to.from), (Phase::Remove, Phase::Remove));
        let carried = log
            .borrow()
            .iter()
            .filter(|(t, x)| *t > from.at && *t < to.at && *x > p.psi_full)
            .count();
        assert!(carried >= 3, "{:?} {:?}: {:?}", from, to, log.borrow());
        assert_eq!(run.tcc.target(), plain.tcc.target(), "{:?}", run.moves());
    }
}

/// The time and count of the first transition into `phase` of a PSI run without stalls (the
/// same as one with stalls until they begin: the pool is deterministic).
fn first(p: &TuneParams, rate: fn(usize, u64) -> f64, phase: Phase) -> (Duration, usize) {
    let mut pool =
        Pool::new(psi(p.clone()), rate).with_pressure(SECOND, |_, _| Pressure::default());
    assert!(pool.run_until(SETTLE, |pool| pool.tcc.phase() == phase));
    let t = pool.trace.last().expect("a transition");
    (t.at, t.target_to)
}

/// The bending curve at a tenth of the rate, so that Max and each removal hold for seconds.
fn slow_bending(n: usize, _: u64) -> f64 {
    100.0 * (1.0 - (-(n as f64) / 8.0).exp())
}

const SETTLE: usize = 1_000_000;

#[test]
fn stalls_in_max_start_a_new_cycle_from_the_cut() {
    stalls_start_a_new_cycle_from_the_cut(Phase::Max);
}

#[test]
fn stalls_in_remove_start_a_new_cycle_from_the_cut() {
    stalls_start_a_new_cycle_from_the_cut(Phase::Remove);
}

/// Stalls that begin in `phase` (at its count and above) end it at the first reading above
/// psi_full with a new cycle from the count's base cut.
fn stalls_start_a_new_cycle_from_the_cut(phase: Phase) {
    let p = TuneParams {
        n_max: 40,
        ..paper(4)
    };
    let (entered, n) = first(&p, slow_bending, phase);
    // From a second into that state on, counts at or above it stall all the time.
    let from = entered + SECOND;
    let log = Log::default();
    let stalled = move |k: usize, t: Duration| if t >= from && k >= n { 1.0 } else { 0.0 };
    let mut run =
        Pool::new(psi(p.clone()), slow_bending).with_pressure(SECOND, avg10(stalled, log.clone()));
    assert!(run.run_until(SETTLE, |pool| pool.trace.iter().any(|t| t.psi)));
    let t = run.trace.last().unwrap();
    assert_eq!(
        (t.from, t.to, t.reason, t.psi),
        (phase, Phase::Base, Reason::Shift, true),
        "{:?}",
        run.moves()
    );
    assert_eq!((t.target_from, t.target_to), (n, p.base_count(n)));
    // At the first reading above psi_full (the first stalled second reads 1 − e^(−0.1)).
    let over = log
        .borrow()
        .iter()
        .find(|(_, x)| *x > p.psi_full)
        .map(|r| r.0)
        .unwrap();
    assert_eq!(t.at, over, "{:?}", log.borrow());
    assert!(t.at - from <= SECOND);
    // No verdict: the cycle's best was measured before the stalls began.
    assert!(run.tcc.drain_decisions().iter().all(|d| !d.psi));
    assert_eq!(run.tcc.status().psi, 1);
}

#[test]
fn a_held_reading_judges_a_count_only_after_an_update_period() {
    let p = TuneParams {
        n_max: 40,
        ..paper(4)
    };
    // From the removal on, every reading is 30% (stalls of some other program, at any count):
    // no reading rises, and the kernel updates avg10 only every 2 s, so one that held may not
    // have been updated. Readings more than 2 s apart that held show the count's own stalls.
    let (entered, n) = first(&p, slow_bending, Phase::Remove);
    let log = Log::default();
    let logged = log.clone();
    let held = move |_: usize, t: Duration| {
        let x = if t >= entered { 0.3 } else { 0.0 };
        logged.borrow_mut().push((t, x));
        Pressure {
            io_full: x,
            ..Pressure::default()
        }
    };
    let mut run = Pool::new(psi(p.clone()), slow_bending).with_pressure(SECOND, held);
    assert!(run.run_until(SETTLE, |pool| pool.trace.iter().any(|t| t.psi)));
    let t = run.trace.last().unwrap();
    assert_eq!(
        (t.from, t.to, t.reason, t.target_from),
        (Phase::Remove, Phase::Base, Reason::Shift, n),
        "{:?}",
        run.moves()
    );
    let readings = log.borrow();
    let first = readings.iter().find(|r| r.0 >= entered).unwrap().0;
    let ignored = readings
        .iter()
        .filter(|r| r.0 > first && r.0 < t.at)
        .count();
    assert!(t.at - first > Duration::from_secs(2), "{readings:?}");
    assert!(t.at - first < Duration::from_secs(4), "{readings:?}");
    assert!(ignored >= 1, "{readings:?}");
}

#[test]
fn stalls_at_or_below_the_threshold_change_nothing() {
    for p in params() {
        let plain = settle(Pool::new(p.clone(), linear()), 2);
        // 4% < 5%, and 5% itself: the rule is "above".
        for level in [0.04, 0.05] {
            let mut run = settle(
                Pool::new(psi(p.clone()), linear())
                    .with_pressure(TENTH, above_knee("io_full", level)),
                2,
            );
            assert_eq!(run.moves(), plain.moves(), "{level}");
            assert_eq!(run.tcc.status().psi, 0);
            assert!(run.tcc.drain_decisions().iter().all(|d| !d.psi));
        }
    }
}

#[test]
fn memory_stalls_start_a_cycle_before_the_timeout() {
    let p = paper(4);
    let timeout = p.steady_max;
    // Memory stalls all along: only the steady rule reads `some`, so the exploration is the
    // paper's, and the steady state ends at the first reading 20 s in.
    let stalls = |level: f64| {
        move |_: usize, _: Duration| Pressure {
            memory_some: level,
            ..Pressure::default()
        }
    };
    let plain = settle(Pool::new(p.clone(), bending()), 2);
    let run = settle(
        Pool::new(psi(p.clone()), bending()).with_pressure(TENTH, stalls(0.11)),
        2,
    );
    let (entry, end) = run.first_steady();
    assert_eq!(
        (end.to, end.reason, end.psi),
        (Phase::Base, Reason::Shift, true),
        "{:?}",
        run.moves()
    );
    let held = end.at - entry.at;
    assert!(
        held >= Duration::from_secs(20) && held < Duration::from_secs(21),
        "{held:?}"
    );
    assert!(held < timeout);
    assert!(end.target_to < end.target_from);
    assert_eq!(plain.first_steady().1.reason, Reason::Timeout);
    // Everything up to the steady state is the paper's.
    assert_eq!(run.exploration(), plain.exploration());
    assert_eq!(run.tcc.status().psi, 1);

    // 10% is not above 10%: the steady state runs to its timeout.
    let calm = settle(
        Pool::new(psi(p), bending()).with_pressure(TENTH, stalls(0.10)),
        2,
    );
    let (entry, end) = calm.first_steady();
    assert_eq!((end.reason, end.psi), (Reason::Timeout, false));
    assert!(end.busy >= timeout && end.at - entry.at >= timeout);
}

/// The kernel updates avg10 this often.
const KERNEL_UPDATE: Duration = Duration::from_secs(2);

/// Memory `some` as the kernel reports avg10, updates and all: every 2 s of host time (at
/// `phase` modulo 2 s) the share of that period the tasks stalled (`stalled(in flight, t)` over
/// the time since the previous reading, in 10 ms steps) enters an exponential average with a
/// 10 s time constant, and a reading returns the figure of the last update. So a reading holds
/// between updates, and an update covers up to 2 s before it. Every reading is logged.
fn kernel_some(
    mut stalled: impl FnMut(usize, Duration) -> f64 + 'static,
    phase: Duration,
    log: Log,
) -> impl FnMut(usize, Duration) -> Pressure {
    const STEP: Duration = Duration::from_millis(10);
    let period = KERNEL_UPDATE.as_secs_f64();
    let decay = (-period / 10.0).exp();
    let mut avg = 0.0;
    // Stalled seconds in the update period under way.
    let mut stall = 0.0;
    let mut last = Duration::ZERO;
    let mut update = Duration::from_nanos((phase.as_nanos() % KERNEL_UPDATE.as_nanos()) as u64);
    if update.is_zero() {
        update = KERNEL_UPDATE;
    }
    move |n, t| {
        let mut at = last;
        while at < t {
            let to = (at + STEP).min(t).min(update);
            stall += stalled(n, at) * (to - at).as_secs_f64();
            at = to;
            if at == update {
                avg = avg * decay + stall / period * (1.0 - decay);
                stall = 0.0;
                update += KERNEL_UPDATE;
            }
        }
        last = t;
        log.borrow_mut().push((t, avg));
        Pressure {
            memory_some: avg,
            ..Pressure::default()
        }
    }
}

#[test]
fn memory_stalls_that_begin_in_steady_start_a_cycle_within_seconds() {
    let p = TuneParams {
        n_max: 40,
        ..paper(4)
    };
    let (entered, n) = first(&p, slow_bending, Phase::Steady);
    // From 5 s into the steady state on, the tasks stall 16/17 of the time (X2's thrashing).
    let from = entered + Duration::from_secs(5);
    let log = Log::default();
    let stalled = move |_: usize, t: Duration| if t >= from { 16.0 / 17.0 } else { 0.0 };
    let mut run = Pool::new(psi(p.clone()), slow_bending)
        .with_pressure(SECOND, kernel_some(stalled, Duration::ZERO, log.clone()));
    assert!(run.run_until(SETTLE, |pool| pool.trace.iter().any(|t| t.psi)));
    let (entry, end) = run.first_steady();
    assert_eq!(entry.at, entered);
    assert_eq!(
        (end.to, end.reason, end.psi, end.target_from),
        (Phase::Base, Reason::Shift, true, n),
        "{:?}",
        run.moves()
    );
    // At the first reading that rose above psi_some, a few seconds after the stalls began
    // (the kernel's next update), not 20 s into the steady state.
    let over = log
        .borrow()
        .iter()
        .find(|(t, x)| *t > from && *x > p.psi_some)
        .map(|r| r.0)
        .unwrap();
    assert_eq!(end.at, over, "{:?}", log.borrow());
    assert!(
        end.at - from <= Duration::from_secs(4),
        "{:?}",
        end.at - from
    );
    assert_eq!(run.tcc.status().psi, 1);
}

#[test]
fn carry_that_decays_starts_no_cycle() {
    let p = TuneParams {
        n_max: 40,
        ..paper(4)
    };
    let (entered, n) = first(&p, slow_bending, Phase::Steady);
    // The counts explored just before stalled 16/17 of the time for 6 s, up to the steady
    // state (only the steady rule reads `some`, so the exploration is unchanged, and so are the
    // reading times while no rule fires): it begins with avg10 near 40%, which only decays.
    let times = Log::default();
    let mut calm = Pool::new(psi(p.clone()), slow_bending).with_pressure(
        SECOND,
        kernel_some(|_, _| 0.0, Duration::ZERO, times.clone()),
    );
    assert!(calm.run_until(SETTLE, |pool| pool.now > entered + SECOND));
    let first_read = times.borrow().iter().find(|r| r.0 > entered).unwrap().0;
    let log = Log::default();
    let stalled = move |_: usize, t: Duration| {
        if t < entered && t + Duration::from_secs(6) >= entered {
            16.0 / 17.0
        } else {
            0.0
        }
    };
    // The kernel updates just after the steady state's first reading (settled by then), over a
    // period that is mostly the last stalled seconds, and rises: up to 2 s after settling, a
    // figure that rose may still report the stalls of the time before.
    let phase = first_read + Duration::from_millis(100);
    let mut run = Pool::new(psi(p.clone()), slow_bending)
        .with_pressure(SECOND, kernel_some(stalled, phase, log.clone()));
    assert!(run.run_until(SETTLE, |pool| {
        pool.trace
            .iter()
            .filter(|t| t.from == Phase::Steady)
            .count()
            >= 1
    }));
    let (entry, end) = run.first_steady();
    assert_eq!((entry.at, entry.target_to), (entered, n));
    assert_eq!(
        (end.reason, end.psi),
        (Reason::Timeout, false),
        "{:?}",
        run.moves()
    );
    assert!(end.at - entry.at >= p.steady_max);
    assert_eq!(run.tcc.status().psi, 0);
    // The rule had readings to decline: above psi_some in the steady state's first seconds,
    // one that rose after its first reading, figures held between updates; below it from 20 s
    // in.
    let readings = log.borrow();
    let steady: Vec<(Duration, f64)> = readings
        .iter()
        .copied()
        .filter(|r| r.0 >= entered && r.0 < end.at)
        .collect();
    assert!(steady[0].1 > 0.3, "{steady:?}");
    assert!(steady[1].1 > steady[0].1, "{steady:?}");
    let held = steady
        .windows(2)
        .filter(|w| w[1].1 == w[0].1 && w[1].1 > p.psi_some)
        .count();
    assert!(held >= 3, "{steady:?}");
    assert!(
        steady
            .iter()
            .filter(|r| r.0 >= entered + Duration::from_secs(20))
            .all(|r| r.1 < p.psi_some),
        "{steady:?}"
    );
}

#[test]
fn with_the_switch_off_readings_change_nothing() {
    for p in params() {
        let mut zero = settle(
            Pool::new(psi(p.clone()), linear()).with_pressure(TENTH, |_, _| Pressure::default()),
            3,
        );
        let mut off = settle(
            Pool::new(p.clone(), linear()).with_pressure(TENTH, |_, _| Pressure {
                memory_some: 1.0,
                memory_full: 1.0,
                io_full: 1.0,
            }),
            3,
        );
        assert_eq!(off.moves(), zero.moves());
        assert_eq!(off.targets, zero.targets);
        assert_eq!(off.tcc.drain_decisions(), zero.tcc.drain_decisions());
        assert_eq!(off.tcc.status().psi, 0);
        assert_eq!(
            off.tcc.status().pressure,
            Some(Pressure {
                memory_some: 1.0,
                memory_full: 1.0,
                io_full: 1.0
            })
        );
    }
}

#[test]
fn readings_are_sanitized_and_baselines_ignore_them() {
    let mut tcc = Tcc::new(psi(paper(2))).unwrap();
    tcc.on_pressure(
        Duration::from_secs(1),
        Pressure {
            memory_some: f64::NAN,
            memory_full: -3.0,
            io_full: 7.0,
        },
    );
    assert_eq!(
        tcc.status().pressure,
        Some(Pressure {
            memory_some: 0.0,
            memory_full: 0.0,
            io_full: 1.0
        })
    );
    let mut aimd = Aimd::new(AimdParams::spec(), Bounds::new(4, 1, 64).unwrap()).unwrap();
    let full = Pressure {
        memory_some: 1.0,
        memory_full: 1.0,
        io_full: 1.0,
    };
    assert_eq!(aimd.on_pressure(Duration::from_secs(1), full), None);
    assert_eq!(aimd.target(), 4);
}

#[test]
fn thresholds_are_validated_and_set_by_spec() {
    for field in ["psi_full", "psi_some"] {
        for bad in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
            let mut p = TuneParams::default();
            match field {
                "psi_full" => p.psi_full = bad,
                _ => p.psi_some = bad,
            }
            let e = Tcc::new(p).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{field} = ")) && e.contains("(0, 1]"),
                "{e}"
            );
        }
    }
    let p = TuneParams {
        psi: true,
        psi_full: 1.0,
        psi_some: 1e-3,
        ..TuneParams::default()
    };
    assert!(Tcc::new(p).is_ok());
    assert!(policy_from_spec("tcc:psi=1,psi_full=0.1,psi_some=0.2", 2, 16).is_ok());
    for bad in ["tcc:psi_full=0", "tcc:psi_some=1.5", "tcc:psi=maybe"] {
        let e = policy_from_spec(bad, 2, 16).err().unwrap().to_string();
        assert!(e.contains("psi"), "{bad}: {e}");
    }
    assert!(!TuneParams::default().psi, "an extension, off by default");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Readings of any value at any time never raise the count: every step PSI decides (an add
    /// step revoked at its verdict or before it, a cycle begun from Steady, Max or Remove)
    /// lowers it (or holds n_min), each is counted once, and the count stays in [n_min, n_max].
    #[test]
    fn psi_never_raises_the_count(
        n_min in 1usize..4,
        span in 1usize..30,
        seed in any::<u64>(),
        fast in any::<bool>(),
        events in proptest::collection::vec(
            (0u64..300_000, 0usize..40, 0usize..3, (0.0f64..0.2, 0.0f64..0.2, 0.0f64..0.2), any::<bool>()),
            1..600,
        ),
    ) {
        let params = TuneParams {
            fast,
            psi: true,
            ..sparse(n_min, span, Duration::from_secs(30), seed)
        };
        let mut tcc = Tcc::new(params.clone()).unwrap();
        let mut t = Duration::ZERO;
        let mut decided = 0u64;
        for (dt_us, in_flight, queued, (some, mem, io), reading) in events {
            t += Duration::from_micros(dt_us);
            call_checked(&mut tcc, |tcc| if reading {
                tcc.on_pressure(t, Pressure { memory_some: some, memory_full: mem, io_full: io })
            } else {
                tcc.on_event(Event::Complete { at: t, load: Load::new(in_flight, queued), latency: None })
            });
            for tr in tcc.drain_trace().iter().filter(|tr| tr.psi) {
                decided += 1;
                // A cycle begun in Steady at n_min cannot cut: the count stays. Max and Remove
                // start one only when it cuts.
                prop_assert!(
                    tr.target_to < tr.target_from
                        || (tr.from == Phase::Steady && tr.target_to == params.n_min),
                    "{:?}", tr
                );
                prop_assert!(
                    matches!((tr.from, tr.to, tr.reason),
                        (Phase::Add, Phase::Add | Phase::Remove | Phase::Steady,
                            Reason::Decline | Reason::Overshoot)
                        | (Phase::Steady | Phase::Max | Phase::Remove, Phase::Base, Reason::Shift)),
                    "{:?}", tr
                );
            }
        }
        prop_assert_eq!(tcc.status().psi, decided);
    }
}
