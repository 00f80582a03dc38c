//! The adaptive limiter with real threads and a hand-rolled executor: blocking and async
//! acquires, limit changes (a grow grants waiters, a shrink waits for releases), arrival order,
//! cancel-safety, and which releases the policy hears as completions.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use common::tasks::{wait_until, Gate, Meter};
use tact_core::tune::{Event, Policy};
use tact_lib::tune::Limiter;

type Log = Arc<Mutex<Vec<Event>>>;

/// A policy the test steers: it answers `want` at the next event (the limiter's ticker sends
/// one every 100 ms) and logs every event.
struct Scripted {
    target: usize,
    want: Arc<AtomicUsize>,
    log: Log,
}

fn scripted(target: usize) -> (Limiter, Arc<AtomicUsize>, Log) {
    let want = Arc::new(AtomicUsize::new(target));
    let log = Log::default();
    let policy = Scripted {
        target,
        want: want.clone(),
        log: log.clone(),
    };
    (Limiter::new(Box::new(policy)), want, log)
}

impl Policy for Scripted {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        self.log.lock().unwrap().push(event);
        let want = self.want.load(Ordering::SeqCst);
        (want != self.target).then(|| {
            self.target = want;
            want
        })
    }
}

fn completions(log: &Log) -> Vec<Option<Duration>> {
    log.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match *e {
            Event::Complete { latency, .. } => Some(latency),
            _ => None,
        })
        .collect()
}

/// Wakes the thread that blocks on the future, and counts wakes.
struct Unpark {
    thread: Thread,
    wakes: AtomicUsize,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn waker() -> (Waker, Arc<Unpark>) {
    let unpark = Arc::new(Unpark {
        thread: thread::current(),
        wakes: AtomicUsize::new(0),
    });
    (Waker::from(unpark.clone()), unpark)
}

fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let (waker, _) = waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => thread::park(),
        }
    }
}

#[test]
fn blocking_acquire_follows_the_limit() {
    let (limiter, want, log) = scripted(2);
    let gate = Arc::new(Gate::default());
    let meter = Arc::new(Meter::default());
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (limiter, gate, meter) = (limiter.clone(), gate.clone(), meter.clone());
            thread::spawn(move || {
                let permit = limiter.acquire();
                meter.enter();
                gate.pass();
                meter.leave();
                drop(permit);
            })
        })
        .collect();
    wait_until("2 hold permits and 4 wait", || {
        limiter.in_flight() == 2 && limiter.queued() == 4
    });
    assert!(limiter.try_acquire().is_none(), "nobody may jump the queue");

    want.store(4, Ordering::SeqCst); // the next tick applies it and grants two waiters
    wait_until("4 hold permits", || limiter.in_flight() == 4);
    assert_eq!((limiter.limit(), limiter.queued()), (4, 2));

    want.store(1, Ordering::SeqCst);
    wait_until("the limit drops", || limiter.limit() == 1);
    assert_eq!(limiter.in_flight(), 4, "a shrink takes no permit back");
    gate.tokens(3);
    wait_until("three permits are released", || {
        completions(&log).len() == 3
    });
    // None of the released permits went to a waiter: 4 - 3 = 1 is the new limit.
    assert_eq!((limiter.in_flight(), limiter.queued()), (1, 2));
    gate.open();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(limiter.in_flight(), 0);
    assert!(meter.max() <= 4);
    let done = completions(&log);
    assert_eq!(done.len(), 6);
    assert!(
        done.iter().all(Option::is_some),
        "completions carry hold times"
    );
    let limits: Vec<usize> = limiter.targets().iter().map(|&(_, n)| n).collect();
    assert_eq!(limits, vec![2, 4, 1]);
}

#[test]
fn async_acquire_waits_for_a_release_and_is_woken() {
    let (limiter, _want, _log) = scripted(1);
    let held = limiter.try_acquire().expect("a free permit");
    assert!(limiter.try_acquire().is_none());

    let (waker, wakes) = waker();
    let mut cx = Context::from_waker(&waker);
    let mut acquire = pin!(limiter.acquire_async());
    assert!(acquire.as_mut().poll(&mut cx).is_pending());
    assert!(acquire.as_mut().poll(&mut cx).is_pending(), "polled again");
    assert_eq!(limiter.queued(), 1);
    assert_eq!(wakes.wakes.load(Ordering::SeqCst), 0);

    drop(held);
    assert_eq!(
        wakes.wakes.load(Ordering::SeqCst),
        1,
        "the release wakes the waiter"
    );
    assert_eq!(
        (limiter.in_flight(), limiter.queued()),
        (1, 0),
        "granted on release"
    );
    let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) else {
        panic!("a granted acquire is ready");
    };
    assert!(limiter.try_acquire().is_none());
    drop(permit);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn async_callers_on_many_threads_stay_within_the_limit() {
    let (limiter, _want, log) = scripted(3);
    let meter = Arc::new(Meter::default());
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (limiter, meter) = (limiter.clone(), meter.clone());
            thread::spawn(move || {
                for _ in 0..25 {
                    let permit = block_on(limiter.acquire_async());
                    meter.enter();
                    thread::sleep(Duration::from_micros(200));
                    meter.leave();
                    drop(permit);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(meter.max() <= 3);
    assert_eq!(completions(&log).len(), 200);
    assert_eq!((limiter.in_flight(), limiter.queued()), (0, 0));
}

#[test]
fn dropping_a_pending_acquire_leaks_no_permit() {
    let (limiter, _want, log) = scripted(1);
    let (waker, _) = waker();
    let mut cx = Context::from_waker(&waker);

    // Cancelled while waiting: it leaves the queue.
    let held = limiter.acquire();
    let mut first = Box::pin(limiter.acquire_async());
    let mut second = Box::pin(limiter.acquire_async());
    assert!(first.as_mut().poll(&mut cx).is_pending());
    assert!(second.as_mut().poll(&mut cx).is_pending());
    assert_eq!(limiter.queued(), 2);
    drop(first);
    assert_eq!(limiter.queued(), 1);
    drop(held);
    assert_eq!(
        (limiter.in_flight(), limiter.queued()),
        (1, 0),
        "the second got it"
    );

    // Cancelled after the grant, before it was polled again: the permit goes on.
    let mut third = Box::pin(limiter.acquire_async());
    assert!(third.as_mut().poll(&mut cx).is_pending());
    let Poll::Ready(permit) = second.as_mut().poll(&mut cx) else {
        panic!("the second acquire was granted");
    };
    drop(permit);
    assert_eq!(
        (limiter.in_flight(), limiter.queued()),
        (1, 0),
        "granted to the third"
    );
    drop(third);
    assert_eq!(limiter.in_flight(), 0, "the cancelled grant came back");
    let again = limiter.try_acquire().expect("the permit is free again");
    drop(again);

    // A never-polled future holds nothing.
    drop(limiter.acquire_async());
    assert_eq!((limiter.in_flight(), limiter.queued()), (0, 0));
    // Completions: the held permit, the second's, and `again`; no cancelled one.
    assert_eq!(completions(&log).len(), 3);
}

#[test]
fn a_failed_permit_is_no_completion() {
    let (limiter, _want, log) = scripted(1);
    let permit = limiter.acquire();
    let waiting = {
        let limiter = limiter.clone();
        thread::spawn(move || drop(limiter.acquire()))
    };
    wait_until("a waiter queues", || limiter.queued() == 1);
    permit.forget_failed();
    waiting.join().unwrap();
    assert_eq!(limiter.in_flight(), 0);
    // Only the waiter's permit completed.
    assert_eq!(completions(&log).len(), 1);
    let seen: Vec<(&str, usize, usize)> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let kind = match e {
                Event::Complete { .. } => "complete",
                Event::Start { .. } => "start",
                Event::Load { .. } => "load",
                Event::Tick { .. } => return None,
            };
            e.load().map(|l| (kind, l.in_flight, l.queued))
        })
        .collect();
    // Taken, a waiter queues, the failed permit passes to it as a start, the waiter completes.
    assert_eq!(
        seen,
        vec![
            ("start", 1, 0),
            ("load", 1, 1),
            ("start", 1, 0),
            ("complete", 0, 0)
        ]
    );
}
