//! The adaptive pool with real threads: targets bound concurrency, grow and shrink at task
//! boundaries, every task runs exactly once, panics are contained, backpressure, shutdown, and
//! the events the policy receives. Tasks wait on gates the test opens, so the assertions are
//! about states, never about how fast a loaded machine runs.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::tasks::{wait_until, Gate, Meter, OpenOnDrop};
use tact_core::tune::{Event, Policy, Tcc, TuneParams};
use tact_lib::tune::{Full, Pool, TaskError, HINT_PERIOD};

/// A policy the test steers: it answers `want` at the next event (ticks included), optionally
/// switching `want` itself after a number of completions, and logs every event with the target
/// it had when the event arrived.
struct Scripted {
    target: usize,
    want: Arc<AtomicUsize>,
    /// (completions, new want): applied when the count is reached.
    after: Vec<(usize, usize)>,
    completions: usize,
    log: Log,
}

type Log = Arc<Mutex<Vec<(Event, usize)>>>;

impl Scripted {
    fn new(target: usize) -> (Scripted, Arc<AtomicUsize>, Log) {
        let want = Arc::new(AtomicUsize::new(target));
        let log = Log::default();
        let policy = Scripted {
            target,
            want: Arc::clone(&want),
            after: Vec::new(),
            completions: 0,
            log: Arc::clone(&log),
        };
        (policy, want, log)
    }
}

impl Policy for Scripted {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        self.log.lock().unwrap().push((event, self.target));
        if let Event::Complete { .. } = event {
            self.completions += 1;
            if let Some(&(_, want)) = self.after.iter().find(|(k, _)| *k == self.completions) {
                self.want.store(want, Ordering::SeqCst);
            }
        }
        let want = self.want.load(Ordering::SeqCst);
        (want != self.target).then(|| {
            self.target = want;
            want
        })
    }
}

/// Logs what a real policy receives.
struct Recorder<P> {
    inner: P,
    log: Log,
}

impl<P: Policy> Policy for Recorder<P> {
    fn target(&self) -> usize {
        self.inner.target()
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        self.log.lock().unwrap().push((event, self.inner.target()));
        self.inner.on_event(event)
    }
}

/// Checks the contract on a log: times never go back; every completion has a latency; a load
/// is within the target at the event, except while a shrink drains, when each completion
/// lowers the count by one and nothing starts.
fn check_events(log: &[(Event, usize)], max: usize) {
    let mut last_at = Duration::ZERO;
    let mut prev_in_flight = 0;
    for (i, &(event, target)) in log.iter().enumerate() {
        assert!(
            event.at() >= last_at,
            "event {i} went back in time: {log:?}"
        );
        last_at = event.at();
        assert!((1..=max).contains(&target));
        let Some(load) = event.load() else { continue };
        match event {
            Event::Complete { latency, .. } => {
                assert!(latency.is_some(), "completion {i} without latency");
                assert!(
                    load.in_flight <= target || load.in_flight + 1 == prev_in_flight,
                    "completion {i}: {load:?} above target {target} outside a drain"
                );
            }
            Event::Start { .. } => assert!(load.in_flight <= target, "start {i}: {load:?}"),
            _ => {}
        }
        prev_in_flight = load.in_flight;
    }
}

fn completions(log: &Log) -> usize {
    let log = log.lock().unwrap();
    log.iter()
        .filter(|(e, _)| matches!(e, Event::Complete { .. }))
        .count()
}

#[test]
fn concurrency_follows_the_target_up_and_down() {
    let (policy, want, log) = Scripted::new(2);
    let pool = Pool::builder()
        .policy(Box::new(policy))
        .max_workers(8)
        .queue_capacity(30)
        .build();
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(gate.clone());
    let meter = Arc::new(Meter::default());
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..30).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..30)
        .map(|i| {
            let (gate, meter, runs) = (gate.clone(), meter.clone(), runs.clone());
            pool.submit(move || {
                meter.enter();
                gate.pass();
                runs[i].fetch_add(1, Ordering::SeqCst);
                meter.leave();
                i
            })
        })
        .collect();

    wait_until("2 tasks run", || meter.running() == 2);
    let stats = pool.stats();
    assert_eq!((stats.target, stats.in_flight, stats.queued), (2, 2, 28));
    thread::sleep(Duration::from_millis(300));
    assert_eq!(meter.max(), 2, "more than the target ran");

    want.store(5, Ordering::SeqCst); // applied at the next tick
    wait_until("5 tasks run", || meter.running() == 5);
    assert_eq!(pool.target(), 5);
    assert_eq!(
        pool.stats().workers,
        5,
        "threads are spawned only as needed"
    );
    thread::sleep(Duration::from_millis(300));
    assert_eq!(meter.max(), 5);

    want.store(1, Ordering::SeqCst);
    wait_until("the target drops", || pool.target() == 1);
    assert_eq!(meter.running(), 5, "a shrink cancels nothing");
    gate.tokens(4);
    // A task leaves the meter a moment before its worker reports the completion to the pool.
    wait_until("the pool drains to 1", || {
        meter.running() == 1 && pool.stats().in_flight == 1
    });
    meter.reset_max();
    gate.tokens(10);
    wait_until("10 more finish", || {
        runs.iter().map(|r| r.load(Ordering::SeqCst)).sum::<usize>() == 14
    });
    assert_eq!(meter.max(), 1, "more than the shrunk target ran");
    assert_eq!(pool.stats().workers, 5, "surplus workers park");

    gate.open();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait(), Ok(i));
    }
    assert!(runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));
    let stats = pool.stats();
    assert_eq!(
        (stats.completed, stats.panicked, stats.in_flight),
        (30, 0, 0)
    );
    assert_eq!(stats.status, None);
    let targets: Vec<usize> = pool.targets().iter().map(|&(_, n)| n).collect();
    assert_eq!(targets, vec![2, 5, 1]);
    pool.shutdown();
    check_events(&log.lock().unwrap(), 8);
    assert_eq!(completions(&log), 30);
}

#[test]
fn every_task_runs_once_when_the_target_drops_to_one_mid_run() {
    let (mut policy, _want, log) = Scripted::new(8);
    policy.after = vec![(100, 1), (200, 6), (300, 1)];
    // No ticks: every change comes from a completion, in the middle of the run.
    let pool = Pool::builder()
        .policy(Box::new(policy))
        .max_workers(8)
        .queue_capacity(1_000)
        .tick(Duration::ZERO)
        .build();
    let meter = Arc::new(Meter::default());
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..600).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..600)
        .map(|i| {
            let (meter, runs) = (meter.clone(), runs.clone());
            pool.submit(move || {
                meter.enter();
                runs[i].fetch_add(1, Ordering::SeqCst);
                thread::sleep(Duration::from_micros(200));
                meter.leave();
            })
        })
        .collect();
    for handle in handles {
        handle.wait().unwrap();
    }
    assert!(runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));
    assert!(meter.max() <= 8);
    assert_eq!(pool.target(), 1);
    assert_eq!(pool.stats().completed, 600);
    let targets: Vec<usize> = pool.targets().iter().map(|&(_, n)| n).collect();
    assert_eq!(targets, vec![8, 1, 6, 1]);
    drop(pool);
    let log = log.lock().unwrap();
    check_events(&log, 8);
    // From the last drop on, the count only falls until it is 1, then stays there.
    let switch = 1 + log
        .windows(2)
        .rposition(|w| w[0].1 == 6 && w[1].1 == 1)
        .expect("the last drop to 1");
    let drained = switch
        + log[switch..]
            .iter()
            .position(|(e, _)| e.load().is_some_and(|l| l.in_flight <= 1))
            .expect("the pool drains to the new target");
    for &(event, _) in &log[drained..] {
        if let Some(load) = event.load() {
            assert!(load.in_flight <= 1, "{event:?} after draining to 1");
        }
    }
}

#[test]
fn a_panicking_task_is_reported_and_the_pool_goes_on() {
    let (policy, _want, log) = Scripted::new(2);
    let pool = Pool::new(Box::new(policy), 2);
    let boom = pool.submit(|| -> u32 { panic!("boom") });
    assert_eq!(boom.wait(), Err(TaskError::Panicked("boom".to_owned())));
    let formatted = pool.submit(|| -> u32 { panic!("code {}", 7) });
    assert_eq!(
        formatted.wait(),
        Err(TaskError::Panicked("code 7".to_owned()))
    );
    let later: Vec<_> = (0..10u32).map(|i| pool.submit(move || i * 2)).collect();
    for (i, handle) in later.into_iter().enumerate() {
        assert_eq!(handle.wait(), Ok(i as u32 * 2));
    }
    let stats = pool.stats();
    assert_eq!((stats.completed, stats.panicked), (10, 2));
    assert!(stats.workers <= 2);
    pool.shutdown();
    // Panicked tasks are not completions.
    assert_eq!(completions(&log), 10);
    check_events(&log.lock().unwrap(), 2);
}

#[test]
fn submit_blocks_while_the_queue_is_full() {
    let (policy, _want, _log) = Scripted::new(1);
    let pool = Arc::new(
        Pool::builder()
            .policy(Box::new(policy))
            .max_workers(1)
            .queue_capacity(2)
            .build(),
    );
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(gate.clone());
    let meter = Arc::new(Meter::default());
    let task = |gate: Arc<Gate>, meter: Arc<Meter>| {
        move || {
            meter.enter();
            gate.pass();
            meter.leave();
        }
    };
    let first = pool.submit(task(gate.clone(), meter.clone()));
    wait_until("the first task runs", || meter.running() == 1);
    let queued: Vec<_> = (0..2)
        .map(|_| pool.submit(task(gate.clone(), meter.clone())))
        .collect();
    assert_eq!(pool.stats().queued, 2);
    assert_eq!(
        pool.try_submit(task(gate.clone(), meter.clone())).err(),
        Some(Full)
    );

    let returned = Arc::new(AtomicBool::new(false));
    let blocked = {
        let (pool, gate, meter, returned) =
            (pool.clone(), gate.clone(), meter.clone(), returned.clone());
        thread::spawn(move || {
            let handle = pool.submit(task(gate, meter));
            returned.store(true, Ordering::SeqCst);
            handle.wait()
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(
        !returned.load(Ordering::SeqCst),
        "submit returned on a full queue"
    );
    assert_eq!(pool.stats().queued, 2);

    gate.tokens(1);
    wait_until("the blocked submit returns", || {
        returned.load(Ordering::SeqCst)
    });
    assert_eq!(pool.stats().queued, 2);
    gate.open();
    first.wait().unwrap();
    for handle in queued {
        handle.wait().unwrap();
    }
    blocked.join().unwrap().unwrap();
    assert_eq!(pool.stats().completed, 4);
    assert_eq!(meter.max(), 1);
}

#[test]
fn shutdown_and_drop_run_every_queued_task() {
    for by_drop in [false, true] {
        let (policy, _want, _log) = Scripted::new(2);
        let pool = Pool::builder()
            .policy(Box::new(policy))
            .max_workers(2)
            .queue_capacity(100)
            .build();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let done = done.clone();
            // Handles dropped at once: the pool runs the tasks anyway.
            pool.submit(move || {
                thread::sleep(Duration::from_micros(500));
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        if by_drop {
            drop(pool);
        } else {
            pool.shutdown();
        }
        assert_eq!(done.load(Ordering::SeqCst), 100, "by drop: {by_drop}");
    }
}

#[test]
fn tcc_runs_two_thousand_short_tasks_within_its_bounds() {
    let log = Log::default();
    let params = TuneParams {
        n_init: 4,
        n_max: 8,
        ..TuneParams::default()
    };
    let tcc = Recorder {
        inner: Tcc::new(params.clone()).unwrap(),
        log: log.clone(),
    };
    let pool = Pool::builder()
        .policy(Box::new(tcc))
        .max_workers(8)
        .queue_capacity(64)
        .build();
    let meter = Arc::new(Meter::default());
    let handles: Vec<_> = (0..2_000)
        .map(|i| {
            let meter = meter.clone();
            pool.submit(move || {
                meter.enter();
                let spin = Instant::now();
                while spin.elapsed() < Duration::from_micros(50) {}
                meter.leave();
                i
            })
        })
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait(), Ok(i));
    }
    assert!(meter.max() <= 8);
    let targets = pool.targets();
    assert_eq!(targets[0], (Duration::ZERO, 4));
    assert!(targets.iter().all(|&(_, n)| (1..=8).contains(&n)));
    assert!(targets.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(pool.stats().completed, 2_000);
    drop(pool);
    check_events(&log.lock().unwrap(), 8);
    assert_eq!(completions(&log), 2_000);

    // Kept by type, TCC shows its state.
    let pool = Pool::builder()
        .tcc(Tcc::new(params).unwrap())
        .max_workers(8)
        .build();
    for handle in (0..50).map(|i| pool.submit(move || i)).collect::<Vec<_>>() {
        handle.wait().unwrap();
    }
    let status = pool.stats().status.expect("TCC status");
    assert_eq!(status.target, pool.target());
}

/// Logs the bottleneck reports it receives and grows to 2 workers at the first one.
struct HintLog {
    target: usize,
    hints: Arc<Mutex<Vec<(Duration, f64)>>>,
}

impl Policy for HintLog {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, _: Event) -> Option<usize> {
        None
    }

    fn on_hint(&mut self, now: Duration, utilization: f64) -> Option<usize> {
        self.hints.lock().unwrap().push((now, utilization));
        (self.target != 2).then(|| {
            self.target = 2;
            2
        })
    }
}

#[test]
fn the_bottleneck_source_is_sampled_from_ticks_and_reported_as_hints() {
    let hints = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let pool = {
        let calls = Arc::clone(&calls);
        Pool::builder()
            .policy(Box::new(HintLog {
                target: 1,
                hints: Arc::clone(&hints),
            }))
            .max_workers(4)
            // Ticks every 5 ms; the source is still read at most every 100 ms.
            .tick(Duration::from_millis(5))
            .bottleneck(move || {
                // The first reading only starts an interval, as CpuBusy's does.
                (calls.fetch_add(1, Ordering::SeqCst) > 0).then_some(0.25)
            })
            .build()
    };
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(Arc::clone(&gate));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let gate = Arc::clone(&gate);
            pool.submit(move || gate.pass())
        })
        .collect();
    // The first hint grows the pool to 2: both gated tasks run at once.
    wait_until("two tasks in flight after a hint", || {
        pool.stats().in_flight == 2
    });
    wait_until("three hints", || hints.lock().unwrap().len() >= 3);
    gate.open();
    for h in handles {
        h.wait().unwrap();
    }
    pool.shutdown();
    let elapsed = started.elapsed();
    let hints = hints.lock().unwrap();
    assert!(hints.iter().all(|&(_, u)| u == 0.25), "{hints:?}");
    assert!(hints.windows(2).all(|w| w[0].0 <= w[1].0), "{hints:?}");
    // Sampling moments are at least HINT_PERIOD apart.
    let bound = (elapsed.as_secs_f64() / HINT_PERIOD.as_secs_f64()).floor() as usize + 1;
    assert!(
        calls.load(Ordering::SeqCst) <= bound,
        "{} calls in {elapsed:?}",
        calls.load(Ordering::SeqCst)
    );
}
