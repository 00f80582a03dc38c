//! The oracle driver and the throughput models: completions follow the model's rates,
//! targets apply at task boundaries, idle input is idle, runs are reproducible.

use std::sync::Arc;
use std::time::Duration;

use tact_core::tune::{Phase, TuneParams};
use tact_sim::tune::{
    run, Closed, Input, Knee, Pair, ProportionalShare, Scenario, Shared, Spacing, Station, Thrash,
    ThroughputModel, Topology,
};

fn escalation() -> Arc<dyn ThroughputModel> {
    Arc::new(Closed::topology(
        Topology::EventEscalation,
        8,
        0.008,
        1.0,
        256,
    ))
}

fn params(seed: u64) -> TuneParams {
    TuneParams {
        n_init: 8,
        n_max: 256,
        seed,
        ..TuneParams::paper()
    }
}

#[test]
fn runs_are_reproducible_and_seeds_matter() {
    let sc = |seed| Scenario {
        seed,
        ..Scenario::new(escalation(), params(seed), Duration::from_secs(300))
    };
    let a = run(&sc(4));
    let b = run(&sc(4));
    let c = run(&sc(5));
    assert_eq!(a.pools[0].targets, b.pools[0].targets);
    assert_eq!(a.pools[0].transitions, b.pools[0].transitions);
    assert_eq!(a.pools[0].target_hash(), b.pools[0].target_hash());
    assert_ne!(a.pools[0].target_hash(), c.pools[0].target_hash());
}

#[test]
fn completions_follow_the_models_rates() {
    for spacing in [
        Spacing::Deterministic,
        Spacing::Exponential,
        Spacing::Pareto { k: 2.5 },
    ] {
        let out = run(&Scenario {
            spacing,
            ..Scenario::new(escalation(), params(2), Duration::from_secs(300))
        });
        // The expected number of completions: the rate integrated over time.
        let expected: f64 = out
            .segments
            .iter()
            .map(|s| s.op.rates[0] * s.length())
            .sum();
        let got = out.pools[0].completions as f64;
        // Deterministic spacing loses at most one gap per rate change; random spacing is a
        // renewal process (the Pareto's variance is 0.8 of the exponential's).
        let tolerance = match spacing {
            Spacing::Deterministic => out.segments.len() as f64 + 1.0,
            _ => 4.0 * expected.sqrt() + out.segments.len() as f64,
        };
        assert!(
            (got - expected).abs() <= tolerance,
            "{spacing:?}: {got} completions, {expected} expected"
        );
    }
}

#[test]
fn smaller_targets_retire_workers_as_tasks_finish() {
    let out = run(&Scenario::new(
        escalation(),
        params(3),
        Duration::from_secs(300),
    ));
    // In-flight counts never exceed the target except while the surplus drains, and never
    // fall below it with endless input.
    let mut draining = false;
    for s in out.segments.iter().filter(|s| s.length() > 0.0) {
        let (n, t) = (s.counts[0], s.targets[0]);
        if n > t {
            draining = true;
        }
        assert!(n >= t, "endless input keeps every worker busy: {s:?}");
    }
    assert!(draining, "some decrease happened");
}

#[test]
fn block_input_idles_the_pool_and_the_busy_clock_with_it() {
    let mut sc = Scenario::new(escalation(), params(1), Duration::from_secs(1200));
    sc.pools[0].input = Input::Blocks {
        size: 1500,
        every: Duration::from_secs(5),
    };
    let out = run(&sc);
    let idle: f64 = out
        .segments
        .iter()
        .filter(|s| s.counts[0] < s.targets[0])
        .map(|s| s.length())
        .sum();
    assert!(idle > 200.0, "the pool idled {idle} s");
    let busy = out.pools[0].status.as_ref().unwrap().busy.as_secs_f64();
    // Busy time is the time the pool was saturated: everything but the idle stretches.
    assert!(
        (busy - (1200.0 - idle)).abs() < 1.0,
        "busy {busy} s, idle {idle} s"
    );
    assert!(out.pools[0].steady_counts().len() >= 2);
}

#[test]
fn a_run_can_stop_at_a_steady_state() {
    let out = run(&Scenario {
        stop_after_steady: Some(2),
        ..Scenario::new(escalation(), params(1), Duration::from_secs(3600))
    });
    let steadies = out.pools[0].steady_counts();
    assert_eq!(steadies.len(), 2);
    assert_eq!(out.duration, steadies[1].0);
    assert_eq!(out.pools[0].status.as_ref().unwrap().phase, Phase::Steady);
}

#[test]
fn the_second_pool_starts_late_and_shares_the_network() {
    let stations = [
        Shared {
            queue: true,
            demand: [0.001, 0.001],
        },
        Shared {
            queue: true,
            demand: [0.0015, 0.0015],
        },
    ];
    let model = Pair::two_pools("two", &stations, 1, 64);
    let mut sc = Scenario::new(Arc::new(model), params(1), Duration::from_secs(400));
    let mut second = tact_sim::tune::PoolSpec::new(params(2));
    second.start = Duration::from_secs(200);
    sc.pools.push(second);
    let out = run(&sc);
    assert!(out.pools[1].targets[0].0 == Duration::from_secs(200));
    for s in &out.segments {
        if s.to <= Duration::from_secs(200) {
            assert_eq!((s.counts[1], s.phases[1]), (0, None));
        }
        // Web is shared: the two shares add up to web's utilization.
        assert!((s.op.shares[0] + s.op.shares[1] - s.op.bottleneck).abs() < 1e-9);
    }
}

#[test]
fn models() {
    // Proportional share: x/(x + y0) of the capacity.
    let ps = ProportionalShare {
        capacity: 1000.0,
        competitor: 50.0,
    };
    let op = ps.at(&[50]);
    assert_eq!(
        (op.rates[0], op.shares[0], op.bottleneck),
        (500.0, 0.5, 1.0)
    );
    // Thrashing divides everything past the threshold.
    let t = Thrash {
        inner: Arc::new(ps),
        threshold: 40,
        factor: 17.0,
    };
    assert_eq!(t.at(&[40]).rates[0], ps.at(&[40]).rates[0]);
    assert!((t.at(&[41]).rates[0] * 17.0 - ps.at(&[41]).rates[0]).abs() < 1e-9);
    // The knee: rising with depth, falling past the knee.
    let k = Knee {
        capacity: 100.0,
        half: 1.0,
        knee: 50.0,
        power: 2.0,
    };
    assert!(k.throughput(10) > k.throughput(2) && k.throughput(10) > k.throughput(100));
    // A pair with an empty second class is the single-class network.
    let single = Closed::new(
        "one",
        &[
            Station::Queue {
                servers: 1,
                demand: 0.001,
            },
            Station::Delay { demand: 0.004 },
        ],
        32,
    );
    let pair = Pair::competitor(
        "pair",
        &[
            Shared {
                queue: true,
                demand: [0.001, 0.001],
            },
            Shared {
                queue: false,
                demand: [0.004, 0.0],
            },
        ],
        0,
        32,
        0,
    );
    for n in [1, 5, 20] {
        assert!((pair.at(&[n]).rates[0] - single.at(&[n]).rates[0]).abs() < 1e-9);
    }
}
