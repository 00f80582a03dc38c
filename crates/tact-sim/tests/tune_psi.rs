//! PSI as a saturation hint in the oracle driver (spec §6 item 3): the host reports the model's
//! memory stalls as PSI's avg10, and the spec's three targets, which the models meet (figures
//! in docs/tune.md).

use std::sync::Arc;
use std::time::Duration;

use tact_core::tune::{Pressure, TuneParams};
use tact_sim::tune::experiments::{self as x, Check, SEEDS};
use tact_sim::tune::{run, Closed, Scenario, Station, Thrash, ThroughputModel};

fn healthy() -> Arc<dyn ThroughputModel> {
    let stations = [
        Station::Queue {
            servers: 8,
            demand: 0.008,
        },
        Station::Delay { demand: 0.05 },
    ];
    Arc::new(Closed::new("healthy", &stations, 64))
}

/// The latest reading TCC got in a minute on `model` (psi off: it keeps readings all the same).
fn last_reading(model: Arc<dyn ThroughputModel>, pressure: bool) -> Option<Pressure> {
    let params = TuneParams {
        n_init: 8,
        n_max: 64,
        ..TuneParams::paper()
    };
    let out = run(&Scenario {
        pressure,
        ..Scenario::new(model, params, Duration::from_secs(60))
    });
    out.pools[0].status.as_ref().expect("a TCC pool").pressure
}

#[test]
fn the_host_reports_the_models_memory_stalls_as_psi() {
    // Always past the threshold: the tasks stall 16/17 of the time, and avg10 rises toward it
    // as 1 − e^(−t/10), within 0.3% of it after the minute's 59 s of readings.
    let thrashing = Arc::new(Thrash {
        inner: healthy(),
        threshold: 0,
        factor: 17.0,
    });
    let p = last_reading(thrashing.clone(), true).expect("readings");
    let expected = (16.0 / 17.0) * (1.0 - (-5.9f64).exp());
    assert!((p.memory_full - expected).abs() < 0.005, "{p:?}");
    assert_eq!(p.memory_some, p.memory_full, "all tasks stall at once");
    assert_eq!(p.io_full, 0.0);
    // A model that never waits on memory reads 0; a host that does not read reports nothing.
    let calm = last_reading(healthy(), true).expect("readings");
    assert_eq!((calm.memory_some, calm.memory_full), (0.0, 0.0));
    assert_eq!(last_reading(thrashing, false), None);
}

fn passes(checks: &[Check], id: &str) -> bool {
    let c = checks.iter().find(|c| c.id == id).expect(id);
    c.pass == Some(true)
}

#[test]
fn psi_cuts_x2s_thrashing_and_leaves_throughput_and_x1_alone() {
    let x2: Vec<_> = SEEDS.iter().map(|&s| x::x2_psi(s)).collect();
    for r in &x2 {
        assert!(r.on.psi_steps >= 1, "{r:#?}");
        assert_eq!(r.off.psi_steps, 0);
        // Max at the pre-switch count ends at the first reading after the switch, and every
        // later add step past the threshold at its first settled readings: no steady state
        // after the switch runs past the threshold, and each seed re-explores past it for at
        // most a fifth of the time it does without PSI.
        assert!(
            r.on.counts_after.iter().all(|&n| n <= r.on.threshold),
            "{r:#?}"
        );
        assert_eq!(r.on.thrashing_after, r.on.thrashing_exploring, "{r:#?}");
        assert!(
            r.on.thrashing_exploring <= 0.2 * r.off.thrashing_exploring,
            "{r:#?}"
        );
    }
    let x1: Vec<_> = SEEDS.iter().map(|&s| x::x1_psi(s)).collect();
    let checks = x::psi_checks(&x2, &x1);
    for id in ["PSI.x2_refaults", "PSI.x2_steady", "PSI.x1_counts"] {
        assert!(passes(&checks, id), "{checks:#?}");
    }
}
