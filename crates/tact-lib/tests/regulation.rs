//! Regulation through the library: suspension when the progress rate drops, phased and
//! concurrent metrics, bad input, and targets that persist between runs.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::config;
use tact_lib::{Config, Decision, Error, ObsError, Phase, Polite, Supervisor};

/// Runs `per_step` work until the unit's regulator has finished its bootstrap.
fn bootstrap(unit: &mut Polite, per_step: &[f64]) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && !matches!(unit.stats().map(|s| s.phase), Some(Phase::Regulated))
    {
        run(unit, 0, per_step, 25);
    }
    assert_eq!(unit.stats().unwrap().phase, Phase::Regulated);
}

/// `steps` steps of work that each make `per_step` units of progress in 2 ms: a rate that does
/// not depend much on how loaded the machine is, since it sleeps rather than computes, and a
/// length of at least `steps` × 2 ms however slowly the test runs. Returns the time spent in
/// testpoints.
fn run(unit: &mut Polite, index: u32, per_step: &[f64], steps: u32) -> Duration {
    let mut blocked = Duration::ZERO;
    for _ in 0..steps {
        thread::sleep(Duration::from_millis(2));
        let asked = Instant::now();
        unit.testpoint(index, per_step).unwrap();
        blocked += asked.elapsed();
    }
    blocked
}

#[test]
fn a_dropping_rate_gets_suspended() {
    let sup = Supervisor::with_config(config(10)).unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    bootstrap(&mut unit, &[10.0]);
    let calibrated = unit.stats().unwrap();
    // Contention: the same work now makes a fifth of the progress.
    let until = Instant::now() + Duration::from_secs(5);
    let mut blocked = Duration::ZERO;
    while Instant::now() < until && unit.stats().unwrap().suspensions < calibrated.suspensions + 2 {
        blocked += run(&mut unit, 0, &[2.0], 50);
    }
    let slowed = unit.stats().unwrap();
    assert!(
        slowed.suspensions >= calibrated.suspensions + 2,
        "{calibrated:?} then {slowed:?}"
    );
    assert!(slowed.suspended > calibrated.suspended);
    assert!(blocked >= slowed.suspended - calibrated.suspended);
}

#[test]
fn phased_and_concurrent_metrics_get_their_own_targets() {
    let dir = tempfile::tempdir().unwrap();
    let sup = Supervisor::with_config(Config {
        name: Some("phases".into()),
        state_dir: Some(dir.path().into()),
        ..config(10)
    })
    .unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    for _ in 0..4 {
        // A scanning phase (bytes) and an indexing phase (files, bytes), six periods each.
        run(&mut unit, 0, &[4096.0], 60);
        run(&mut unit, 1, &[1.0, 512.0], 60);
    }
    // A phase change inside a period makes one sample of both phases.
    for _ in 0..20 {
        unit.testpoint(0, &[4096.0]).unwrap();
        unit.testpoint(1, &[1.0, 512.0]).unwrap();
        thread::sleep(Duration::from_millis(2));
    }
    assert!(unit.stats().unwrap().testpoints > 10);
    sup.flush().unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sup.targets_path().unwrap()).unwrap())
            .unwrap();
    let targets = &saved["targets"]["targets"];
    assert_eq!(targets["0"]["kind"], "single", "{saved}");
    assert!(targets["0"]["rate"].as_f64().unwrap() > 0.0);
    assert_eq!(targets["1"]["kind"], "multi");
}

#[test]
fn phases_within_a_period_make_one_sample() {
    let sup = Supervisor::with_config(config(1000)).unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    // At least 15 periods, each with all three phases.
    for _ in 0..100 {
        for index in 0..3 {
            unit.testpoint(index, &[1.0]).unwrap();
            thread::sleep(Duration::from_millis(1));
        }
    }
    let stats = unit.stats().unwrap();
    assert!(stats.testpoints >= 3, "{stats:?}");
    // Every due testpoint was one evaluation, whatever the number of indices it covered.
    assert!(
        matches!(stats.phase, Phase::Bootstrap { done, .. } if done as u64 == stats.testpoints),
        "{stats:?}"
    );
}

#[test]
fn bad_progress_is_refused_and_leaves_no_trace() {
    let sup = Supervisor::with_config(config(10)).unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let e = unit.testpoint(0, &[bad]).unwrap_err();
        assert!(
            matches!(e, Error::Progress(ObsError::BadMetric { .. })),
            "{e}"
        );
        assert!(e.to_string().contains("finite number >= 0"), "{e}");
    }
    assert!(matches!(
        unit.testpoint(0, &[]),
        Err(Error::Progress(ObsError::NoMetrics { index: 0 }))
    ));
    unit.testpoint(0, &[1.0]).unwrap();
    let e = unit.testpoint(0, &[1.0, 2.0]).unwrap_err();
    assert_eq!(e.to_string(), "index 0 was given 2 metrics, but earlier 1");
    // The count of an index holds for the whole process, whichever unit reports it.
    let mut other = Polite::with_supervisor(&sup);
    other.testpoint(1, &[1.0, 1.0]).unwrap();
    drop(other);
    assert!(unit.testpoint(1, &[1.0]).is_err());
    // And the unit goes on.
    run(&mut unit, 0, &[1.0], 50);
    assert!(unit.stats().unwrap().testpoints > 0);
}

#[test]
fn a_second_run_starts_calibrated() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Config {
        name: Some("persist".into()),
        state_dir: Some(dir.path().into()),
        ..config(5)
    };
    {
        let sup = Supervisor::with_config(settings.clone()).unwrap();
        let mut unit = Polite::with_supervisor(&sup);
        assert!(matches!(
            unit.testpoint(0, &[1.0])
                .map(|_| unit.stats().unwrap().phase),
            Ok(Phase::Bootstrap { .. })
        ));
        bootstrap(&mut unit, &[10.0]);
        // Dropping the last handle on the supervisor saves.
    }
    let path = dir.path().join("polite/persist.json");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["progress"], serde_json::json!(["testpoint"]));
    assert!(saved["program"].as_str().is_some());

    let sup = Supervisor::with_config(settings).unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    unit.testpoint(0, &[1.0]).unwrap();
    assert_eq!(
        unit.stats().unwrap().phase,
        Phase::Regulated,
        "no bootstrap"
    );
    run(&mut unit, 0, &[10.0], 50);
    let stats = unit.stats().unwrap();
    assert_eq!(stats.phase, Phase::Regulated);
    assert_ne!(stats.last, None);
    assert!(matches!(
        stats.last,
        Some(Decision::Run | Decision::Indeterminate | Decision::Suspend(_))
    ));
}
