//! Time-multiplex isolation between the regulated units of a process (spec 2.6, §7.1): one runs
//! at a time, by priority then decayed usage, and a hung or departed holder does not block the
//! others.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{config, with_hung};
use tact_lib::{Coordinator, CoordinatorError, Polite, ReleaseReason, Supervisor, UnitReport};

/// Never reached in these tests: the token moves only at testpoints, departures and H.
const NO_REGULATION: u32 = 100_000;

/// Runs `work` between testpoints on a unit until `until` (once at least), counting iterations.
fn work_until(unit: &mut Polite, until: Instant, mut work: impl FnMut()) -> u64 {
    let mut n = 0;
    loop {
        unit.testpoint(0, &[1.0]).unwrap();
        work();
        n += 1;
        if Instant::now() >= until {
            return n;
        }
    }
}

#[test]
fn one_regulated_thread_runs_at_a_time() {
    let sup = Supervisor::with_config(config(NO_REGULATION)).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + Duration::from_millis(800);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (sup, inside, most) = (sup.clone(), inside.clone(), most.clone());
            thread::spawn(move || {
                let mut unit = Polite::with_supervisor(&sup);
                work_until(&mut unit, until, || {
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(500));
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
        })
        .collect();
    let counts: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(most.load(Ordering::SeqCst), 1, "two threads ran at once");
    assert!(
        counts.iter().all(|&n| n > 0),
        "every thread got turns: {counts:?}"
    );
    assert_eq!(sup.units(), 0, "every unit left");
}

#[test]
fn a_higher_priority_runs_whenever_it_is_eligible() {
    let sup = Supervisor::with_config(config(NO_REGULATION)).unwrap();
    let high_active = Arc::new(AtomicBool::new(true));
    let (started, on_start) = mpsc::channel();
    let until = Instant::now() + Duration::from_millis(600);
    let high = {
        let (sup, high_active) = (sup.clone(), high_active.clone());
        thread::spawn(move || {
            let mut unit = Polite::with_supervisor(&sup);
            unit.set_priority(1).unwrap();
            unit.testpoint(0, &[1.0]).unwrap();
            started.send(()).unwrap();
            let n = work_until(&mut unit, until, || thread::sleep(Duration::from_millis(1)));
            // Before leaving: from here on the low one may run.
            high_active.store(false, Ordering::SeqCst);
            n
        })
    };
    on_start.recv().unwrap();
    let low = {
        let (sup, high_active) = (sup.clone(), high_active.clone());
        thread::spawn(move || {
            let mut unit = Polite::with_supervisor(&sup);
            let (mut during, mut after) = (0, 0);
            while Instant::now() < until + Duration::from_millis(200) {
                unit.testpoint(0, &[1.0]).unwrap();
                match high_active.load(Ordering::SeqCst) {
                    true => during += 1,
                    false => after += 1,
                }
                thread::sleep(Duration::from_millis(1));
            }
            (during, after)
        })
    };
    let high = high.join().unwrap();
    let (during, after) = low.join().unwrap();
    assert!(high > 0);
    assert_eq!(
        during, 0,
        "the low priority ran while the high one was eligible"
    );
    assert!(after > 0, "the low priority runs once alone");
}

#[test]
fn equal_priorities_share_by_decayed_usage() {
    let sup = Supervisor::with_config(config(NO_REGULATION)).unwrap();
    let until = Instant::now() + Duration::from_millis(1200);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let sup = sup.clone();
            thread::spawn(move || {
                let mut unit = Polite::with_supervisor(&sup);
                let ran = work_until(&mut unit, until, || thread::sleep(Duration::from_millis(1)));
                (ran, unit.stats().unwrap().waited)
            })
        })
        .collect();
    let results: Vec<(u64, Duration)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let total: u64 = results.iter().map(|r| r.0).sum();
    for (ran, waited) in &results {
        let share = *ran as f64 / total as f64;
        assert!(share > 0.25, "shares {results:?}");
        // Each waited for the other's turns.
        assert!(*waited > Duration::from_millis(100), "{results:?}");
    }
}

#[test]
fn a_hung_holder_loses_the_token_after_the_threshold() {
    let hung = Duration::from_millis(300);
    let sup = Supervisor::with_config(with_hung(NO_REGULATION, hung)).unwrap();
    let (holding, on_holding) = mpsc::channel();
    let sleeper = {
        let sup = sup.clone();
        thread::spawn(move || {
            let mut unit = Polite::with_supervisor(&sup);
            unit.testpoint(0, &[1.0]).unwrap();
            holding.send(Instant::now()).unwrap();
            // Waiting on a user, say: no testpoint for ten times H.
            thread::sleep(hung * 10);
            unit.testpoint(0, &[1.0]).unwrap();
            unit.stats().unwrap()
        })
    };
    let held_since = on_holding.recv().unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    let asked = Instant::now();
    unit.testpoint(0, &[1.0]).unwrap();
    // Not before the holder had it for about H, and long before it came back.
    assert!(
        held_since.elapsed() >= hung / 2,
        "{:?}",
        held_since.elapsed()
    );
    assert!(asked.elapsed() < hung * 8, "waited {:?}", asked.elapsed());
    unit.testpoint(0, &[1.0]).unwrap();
    drop(unit);
    let stats = sleeper.join().unwrap();
    assert_eq!(stats.hung, 1);
}

#[test]
fn a_departing_holder_frees_the_token_at_once() {
    let sup = Supervisor::with_config(with_hung(NO_REGULATION, Duration::from_secs(60))).unwrap();
    let (holding, on_holding) = mpsc::channel();
    let (go, on_go) = mpsc::channel::<()>();
    let holder = {
        let sup = sup.clone();
        thread::spawn(move || {
            let mut unit = Polite::with_supervisor(&sup);
            unit.testpoint(0, &[1.0]).unwrap();
            holding.send(()).unwrap();
            on_go.recv().unwrap();
            thread::sleep(Duration::from_millis(100));
            drop(unit);
        })
    };
    on_holding.recv().unwrap();
    go.send(()).unwrap();
    let asked = Instant::now();
    let mut unit = Polite::with_supervisor(&sup);
    unit.testpoint(0, &[1.0]).unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    holder.join().unwrap();
}

#[test]
fn units_of_one_thread_hand_over_instead_of_deadlocking() {
    let sup = Supervisor::with_config(with_hung(NO_REGULATION, Duration::from_secs(60))).unwrap();
    let (mut a, mut b) = (Polite::with_supervisor(&sup), Polite::with_supervisor(&sup));
    let started = Instant::now();
    for _ in 0..10 {
        a.testpoint(0, &[1.0]).unwrap();
        thread::sleep(common::P);
        b.testpoint(0, &[1.0]).unwrap();
        thread::sleep(common::P);
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(a.stats().unwrap().testpoints > 0 && b.stats().unwrap().testpoints > 0);
}

/// Records the order of calls: an acquire must always follow a release (or come first).
#[derive(Default)]
struct Recorder {
    held: bool,
    acquires: u64,
    releases: Vec<ReleaseReason>,
    out_of_order: bool,
}

struct Shared(Arc<Mutex<Recorder>>);

impl Coordinator for Shared {
    fn acquire(&mut self, _priority: i32) -> Result<(), CoordinatorError> {
        let mut r = self.0.lock().unwrap();
        r.out_of_order |= r.held;
        r.held = true;
        r.acquires += 1;
        Ok(())
    }

    fn release(&mut self, _ran: Duration, report: &UnitReport) {
        let mut r = self.0.lock().unwrap();
        r.out_of_order |= !r.held;
        r.held = false;
        r.releases.push(report.reason);
    }
}

#[test]
fn the_coordinator_is_asked_around_every_turn() {
    let sup = Supervisor::with_config(config(NO_REGULATION)).unwrap();
    let record = Arc::new(Mutex::new(Recorder::default()));
    sup.set_coordinator(Some(Box::new(Shared(record.clone()))));
    let until = Instant::now() + Duration::from_millis(400);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let sup = sup.clone();
            thread::spawn(move || {
                let mut unit = Polite::with_supervisor(&sup);
                work_until(&mut unit, until, || thread::sleep(Duration::from_millis(1)))
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let r = record.lock().unwrap();
    assert!(!r.out_of_order);
    assert!(r.acquires >= 4, "{} turns", r.acquires);
    assert_eq!(r.releases.len() as u64, r.acquires, "every turn ended");
    assert!(r.releases.contains(&ReleaseReason::Testpoint));
    assert!(r.releases.contains(&ReleaseReason::Left));
}

struct Unreachable {
    tries: Arc<AtomicU64>,
    released: Arc<AtomicBool>,
}

impl Coordinator for Unreachable {
    fn acquire(&mut self, _priority: i32) -> Result<(), CoordinatorError> {
        self.tries.fetch_add(1, Ordering::SeqCst);
        Err("daemon gone".into())
    }

    fn release(&mut self, _ran: Duration, _report: &UnitReport) {
        self.released.store(true, Ordering::SeqCst);
    }
}

#[test]
fn an_unreachable_coordinator_leaves_the_process_working_alone() {
    let sup = Supervisor::with_config(config(NO_REGULATION)).unwrap();
    let tries = Arc::new(AtomicU64::new(0));
    let released = Arc::new(AtomicBool::new(false));
    sup.set_coordinator(Some(Box::new(Unreachable {
        tries: tries.clone(),
        released: released.clone(),
    })));
    let mut unit = Polite::with_supervisor(&sup);
    // At least five periods.
    for _ in 0..100 {
        unit.testpoint(0, &[1.0]).unwrap();
        thread::sleep(Duration::from_millis(1));
    }
    assert!(
        tries.load(Ordering::SeqCst) >= 2,
        "asked again at every turn"
    );
    drop(unit);
    assert!(
        !released.load(Ordering::SeqCst),
        "released a turn never acquired"
    );
}
