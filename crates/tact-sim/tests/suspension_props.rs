//! Invariants of §4.1 / spec 2.3 over random loads and seeds: a suspension never exceeds S_max,
//! it doubles on consecutive poor verdicts and returns to s₀ on a good one; and a job whose rate
//! never drops is never suspended.

use std::time::Duration;

use proptest::prelude::*;
use tact_core::polite::{Decision, PoliteConfig};
use tact_core::stats::Verdict;
use tact_sim::{Contention, LoadPattern, Noise, PoliteSim, Scenario, SingleMetric, TracePoint};

const RUN: Duration = Duration::from_secs(20 * 60);

/// Random busy/idle segments of 1–180 s, starting idle long enough for the bootstrap.
fn script() -> impl Strategy<Value = LoadPattern> {
    (
        prop::collection::vec((any::<bool>(), 1u64..180), 1..30),
        any::<bool>(),
    )
        .prop_map(|(segs, then_busy)| {
            let mut segments = vec![(false, Duration::from_secs(30))];
            segments.extend(segs.into_iter().map(|(b, s)| (b, Duration::from_secs(s))));
            LoadPattern::Script {
                segments,
                then_busy,
            }
        })
}

/// Suspensions served whole: with peeks, a long suspension is handed out in pieces, which hides
/// the doubling these tests check (the pieces are tested in tact-core's regulator tests).
fn config(max_suspension: Duration) -> PoliteConfig {
    PoliteConfig {
        probation: Some(Duration::ZERO),
        max_suspension,
        peek_every: None,
        ..PoliteConfig::default()
    }
}

/// Checks the suspension schedule of a trace; returns the longest run of consecutive poor verdicts.
fn check_schedule(trace: &[TracePoint], cfg: &PoliteConfig) -> Result<u32, TestCaseError> {
    let mut expected = cfg.initial_suspension;
    let (mut streak, mut longest) = (0, 0);
    for p in trace {
        if let Decision::Suspend(s) = p.decision {
            prop_assert!(
                s <= cfg.max_suspension,
                "suspension {s:?} above the cap at {:?}",
                p.t
            );
        }
        match p.verdict {
            Some(Verdict::Poor) => {
                prop_assert_eq!(p.decision, Decision::Suspend(expected), "at {:?}", p.t);
                expected = (expected * 2).min(cfg.max_suspension);
                streak += 1;
                longest = longest.max(streak);
            }
            Some(Verdict::Good) => {
                prop_assert_eq!(p.decision, Decision::Run);
                expected = cfg.initial_suspension;
                streak = 0;
            }
            Some(Verdict::Indeterminate) => prop_assert_eq!(p.decision, Decision::Indeterminate),
            None => prop_assert!(!p.suspended(), "suspended without a verdict at {:?}", p.t),
        }
    }
    Ok(longest)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn suspensions_double_up_to_the_cap(
        load in script(),
        seed in any::<u64>(),
        cap_periods in prop::sample::select(vec![8u32, 32, 300]),
        factor in 1.5f64..5.0,
        sigma in 0.0f64..0.3,
    ) {
        let cfg = config(Duration::from_millis(200) * cap_periods);
        let mut scenario = Scenario::new(cfg.clone(), load, Contention::symmetric(factor));
        scenario.noise = Noise::LogNormal { sigma };
        scenario.seed = seed;
        scenario.trace = true;
        let mut sim = PoliteSim::new(scenario, SingleMetric::new(100.0)).unwrap();
        sim.run_until(RUN);
        check_schedule(sim.trace(), &cfg)?;
    }

    #[test]
    fn a_job_whose_rate_never_drops_is_never_suspended(
        load in script(),
        seed in any::<u64>(),
        steps in prop::collection::vec((1u64..1200, 1.0f64..1.5), 0..6),
    ) {
        // Rate multipliers that only grow, at random times; the foreground does not slow the job.
        let mut schedule: Vec<(Duration, f64)> = steps.iter().map(|&(t, _)| (Duration::from_secs(t), 1.0)).collect();
        schedule.sort_by_key(|&(t, _)| t);
        let mut m = 1.0;
        for ((_, mult), (_, up)) in schedule.iter_mut().zip(&steps) {
            m *= up;
            *mult = m;
        }
        let cfg = config(Duration::from_secs(60));
        let mut scenario = Scenario::new(cfg, load, Contention::none());
        scenario.seed = seed;
        scenario.trace = true;
        let mut sim = PoliteSim::new(scenario, SingleMetric { rate: 100.0, schedule }).unwrap();
        sim.run_until(RUN);
        let s = sim.summary();
        prop_assert!(s.judged > 1000, "too few judged samples: {}", s.judged);
        prop_assert_eq!(s.suspensions, 0);
        prop_assert_eq!(s.poor_verdicts, 0);
        prop_assert!(sim.trace().iter().all(|p| !p.suspended()));
    }
}

/// The schedule check above is not vacuous: under constant contention the suspensions run
/// s₀, 2s₀, 4s₀, … up to the cap and stay there.
#[test]
fn constant_contention_walks_the_whole_doubling_ladder() {
    let cfg = config(Duration::from_secs(60));
    let load = LoadPattern::Script {
        segments: vec![(false, Duration::from_secs(30))],
        then_busy: true,
    };
    let mut scenario = Scenario::new(cfg.clone(), load, Contention::symmetric(3.0));
    scenario.trace = true;
    let mut sim = PoliteSim::new(scenario, SingleMetric::new(100.0)).unwrap();
    sim.run_until(Duration::from_secs(30 * 60));
    let longest = check_schedule(sim.trace(), &cfg).unwrap();
    let suspensions: Vec<Duration> = sim
        .trace()
        .iter()
        .filter_map(|p| match p.decision {
            Decision::Suspend(s) => Some(s),
            _ => None,
        })
        .collect();
    let ladder: Vec<Duration> = (0..9)
        .map(|k| Duration::from_millis(200) * (1 << k))
        .collect();
    assert_eq!(
        &suspensions[..9],
        &ladder[..],
        "first suspensions {:?}",
        &suspensions[..9]
    );
    assert!(suspensions[9..].iter().all(|&s| s == cfg.max_suspension));
    assert!(longest >= 20, "longest poor streak {longest}");
}
