//! The library with a tact daemon (a fake one, `common::fake`, that checks requests as the real
//! one does): what it sends, and what it does when the daemon is gone or stuck.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::fake::{Fake, Said};
use tact_lib::{Coordinator, DaemonCoordinator, Polite, ReleaseReason, Supervisor, UnitReport};

/// A supervisor of 20 ms testpoints (no regulation in the way) that takes turns with the
/// daemon at `fake`.
fn coordinated(fake: &Fake, name: &str) -> std::sync::Arc<Supervisor> {
    let sup = Supervisor::with_config(common::config(100_000)).unwrap();
    let daemon = DaemonCoordinator::connect(fake.path.clone(), name).expect("registered");
    sup.set_coordinator(Some(Box::new(daemon)));
    sup
}

/// Testpoints for `run`, often enough that many are due.
fn testpoints(unit: &mut Polite, run: Duration) {
    let start = Instant::now();
    while start.elapsed() < run {
        unit.testpoint(0, &[1.0]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn hellos(seen: &[common::fake::Seen]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| match &s.said {
            Said::Hello { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn refused(seen: &[common::fake::Seen]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| match &s.said {
            Said::Refused(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// A daemon that stops answering (stopped, stuck) holds a testpoint for a few of its leases at
/// most: then the program runs alone.
#[test]
fn a_daemon_that_never_grants_the_turn_holds_a_testpoint_for_a_few_leases_at_most() {
    // Grants the first turn (with a 100 ms lease), then never answers an acquire.
    let fake = Fake::start_granting(1);
    let sup = coordinated(&fake, "stuck");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut unit = Polite::with_supervisor(&sup);
        testpoints(&mut unit, Duration::from_secs(1));
        tx.send(unit.stats().unwrap()).unwrap();
    });
    let stats = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a testpoint still waits for the stuck daemon after a minute");
    assert!(stats.testpoints >= 2, "{stats:?}");
    let acquires = fake
        .seen()
        .iter()
        .filter(|s| s.said == Said::Op("acquire"))
        .count();
    assert!(acquires >= 2, "{:?}", fake.seen());
}

/// The protocol limits a name to 128 bytes without control characters; the library cuts and
/// cleans a name (`TACT_NAME`, the executable's) rather than be refused and run alone.
#[test]
fn a_name_the_daemon_would_refuse_is_made_fit() {
    let fake = Fake::start();
    let long = "é".repeat(100); // 200 bytes
    assert!(DaemonCoordinator::connect(fake.path.clone(), &long).is_some());
    assert!(DaemonCoordinator::connect(fake.path.clone(), "nightly\tbackup\n").is_some());
    let seen = fake.seen();
    assert_eq!(refused(&seen), Vec::<String>::new());
    assert_eq!(
        hellos(&seen),
        ["é".repeat(64), "nightly backup ".to_string()],
        "cut at 128 bytes, on a character's boundary; control characters made spaces"
    );
}

/// A priority outside the daemon's range is refused by the library at once, rather than
/// accepted and then refused by the daemon, which cost the process its turn.
#[test]
fn a_priority_the_daemon_would_refuse_is_refused_at_once() {
    let fake = Fake::start();
    let sup = coordinated(&fake, "priority");
    let mut unit = Polite::with_supervisor(&sup);
    unit.testpoint(0, &[1.0]).unwrap();
    // (Debug-printed so that this test also builds against a set_priority that returned
    // nothing.)
    #[allow(clippy::let_unit_value)]
    let too_high = unit.set_priority(1000);
    let too_high = format!("{too_high:?}");
    assert!(too_high.contains("Priority(1000)"), "{too_high}");
    assert_eq!(unit.priority(), 0, "nothing changed");
    let ok = format!("{:?}", unit.set_priority(100));
    assert!(!ok.contains("Err"), "{ok}");
    testpoints(&mut unit, Duration::from_millis(300));
    let seen = fake.seen();
    assert_eq!(refused(&seen), Vec::<String>::new());
    assert_eq!(hellos(&seen).len(), 1, "never dropped and registered again");
    assert!(seen.iter().any(|s| s.said == Said::Op("set_priority")));
    assert_eq!(
        format!("{:?}", tact_lib::set_priority(-101)),
        "Err(Priority(-101))"
    );
}

fn report() -> UnitReport {
    UnitReport {
        unit: 1,
        priority: 0,
        reason: ReleaseReason::Testpoint,
        calibrating: true,
        rate: None,
        target: None,
        suspended: Duration::ZERO,
    }
}

/// The process that `warns_once_while_the_daemon_is_gone_and_once_when_it_is_back` runs: its
/// daemon goes away for 11.5 s (two rejoin attempts) and comes back.
fn lose_and_find_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("daemon.sock");
    let fake = Fake::start_at(&path, usize::MAX);
    let mut c = DaemonCoordinator::connect(path.clone(), "warns").unwrap();
    c.acquire(0).unwrap();
    c.release(Duration::from_millis(1), &report());
    fake.stop();
    eprintln!("scenario: the daemon is gone");
    let gone = Instant::now();
    while gone.elapsed() < Duration::from_millis(11_500) {
        if c.acquire(0).is_ok() {
            panic!("acquired from a daemon that is gone");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("scenario: the daemon is back");
    let _back = Fake::start_at(&path, usize::MAX);
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.acquire(0).is_err() {
        assert!(Instant::now() < deadline, "never rejoined");
        std::thread::sleep(Duration::from_millis(50));
    }
    c.release(Duration::from_millis(1), &report());
    for _ in 0..3 {
        c.acquire(0).unwrap();
        c.release(Duration::from_millis(1), &report());
    }
    eprintln!("scenario: done");
}

const SCENARIO_ENV: &str = "TACT_LIB_TEST_SCENARIO";

/// Without its daemon, a process says so once (not at every attempt to rejoin, every 5 s, for
/// the rest of its run), and once when it has rejoined.
#[test]
fn warns_once_while_the_daemon_is_gone_and_once_when_it_is_back() {
    if std::env::var_os(SCENARIO_ENV).is_some() {
        return lose_and_find_the_daemon();
    }
    // The scenario runs in a process of its own, whose stderr is the library's.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "warns_once_while_the_daemon_is_gone_and_once_when_it_is_back",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    let lines: Vec<&str> = stderr.lines().collect();
    let at = |marker: &str| {
        lines
            .iter()
            .position(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no {marker:?} in\n{stderr}"))
    };
    let (gone, back, done) = (
        at("scenario: the daemon is gone"),
        at("scenario: the daemon is back"),
        at("scenario: done"),
    );
    let tact = |from: usize, to: usize| -> Vec<&str> {
        lines[from..to]
            .iter()
            .copied()
            .filter(|l| l.starts_with("tact:"))
            .collect()
    };
    assert_eq!(tact(0, gone), Vec::<&str>::new(), "{stderr}");
    let while_gone = tact(gone, back);
    assert_eq!(while_gone.len(), 1, "{stderr}");
    assert!(while_gone[0].contains("running alone"), "{stderr}");
    let after = tact(back, done);
    assert_eq!(after.len(), 1, "{stderr}");
    assert!(after[0].contains("rejoined"), "{stderr}");
}
