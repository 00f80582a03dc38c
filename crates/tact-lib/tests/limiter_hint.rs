//! The limiter's bottleneck hint (`LimiterBuilder::bottleneck`), on client threads calling a
//! fake service through it: below the utilization target TCC takes add steps that gain less
//! than q (the paper would stop) and counts them as hinted; a saturated bottleneck leaves the
//! paper's rule alone. The service's throughput is a function of the calls in flight, so the
//! steps' gains are fixed by the curve, not by the machine's speed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tact_core::tune::{Phase, Reason, Status, Tcc, TuneParams};
use tact_lib::tune::{Limiter, HINT_PERIOD};

const N_MAX: usize = 24;
/// Generous: a loaded machine stretches every sleep.
const DEADLINE: Duration = Duration::from_secs(120);

/// Calls per second with n in flight, X(n) = 500 (1 − e^(−n/8)): a 25% step gains less than
/// q = 14% from about 8 calls on, while each call still lasts 17–50 ms (so sleep jitter stays
/// small beside it).
fn service_time(n: usize) -> Duration {
    let n = n.max(1) as f64;
    Duration::from_secs_f64(n / (500.0 * (1.0 - (-n / 8.0).exp())))
}

/// TCC with short measurements: a decision in well under a second of calls.
fn tcc() -> Tcc {
    Tcc::new(TuneParams {
        n_init: 4,
        n_max: N_MAX,
        n_star: 5,
        batch_min: 4,
        dwell: Duration::from_secs(2),
        max_dwell: Duration::from_secs(2),
        ..TuneParams::default()
    })
    .unwrap()
}

/// A limiter whose source always reads `u`, and how many times it was read.
fn limiter(u: f64) -> (Limiter, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reads);
    let limiter = Limiter::builder()
        .tcc(tcc())
        .bottleneck(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Some(u)
        })
        .build();
    (limiter, reads)
}

/// More clients than the limit can ever be, so the limiter always has waiters.
struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Clients {
    fn start(limiter: &Limiter) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..N_MAX + 4)
            .map(|_| {
                let (limiter, stop) = (limiter.clone(), Arc::clone(&stop));
                thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let _permit = limiter.acquire();
                        thread::sleep(service_time(limiter.in_flight()));
                    }
                })
            })
            .collect();
        Clients { stop, threads }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

fn status_until(limiter: &Limiter, what: &str, cond: impl Fn(&Status) -> bool) -> Status {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let status = limiter.status().expect("TCC is kept by type");
        if cond(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}: {status:?}, limits {:?}",
            limiter.targets()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_bottleneck_below_the_target_takes_steps_that_gain_less_than_q() {
    let started = Instant::now();
    let (limiter, reads) = limiter(0.5);
    let clients = Clients::start(&limiter);
    status_until(&limiter, "the mean utilization shows", |s| {
        s.utilization == Some(0.5)
    });
    let status = status_until(&limiter, "a hinted step", |s| s.hinted > 0);
    drop(clients);
    let trace = limiter.drain_trace();
    let hinted: Vec<_> = trace.iter().filter(|t| t.hinted).collect();
    assert!(
        hinted.len() as u64 >= status.hinted && !hinted.is_empty(),
        "{trace:#?}"
    );
    // A hinted add is a Better step (the paper's test said it gained less than q) that raised
    // the limit; a hinted removal is undone (Lost).
    assert!(
        hinted.iter().all(|t| match t.reason {
            Reason::Better | Reason::Ceiling => t.target_to > t.target_from,
            Reason::Lost => t.from == Phase::Remove,
            // A steady state below the target climbs again from its count.
            Reason::Room => t.from == Phase::Steady && t.target_to == t.target_from,
            _ => false,
        }),
        "{hinted:#?}"
    );
    assert!(limiter
        .targets()
        .iter()
        .all(|&(_, n)| (1..=N_MAX).contains(&n)));
    // Readings come from ticks at least HINT_PERIOD apart.
    let reads = reads.load(Ordering::SeqCst);
    let elapsed = started.elapsed();
    let bound = (elapsed.as_secs_f64() / HINT_PERIOD.as_secs_f64()).floor() as usize + 1;
    assert!(reads <= bound, "{reads} reads in {elapsed:?}");
}

#[test]
fn a_saturated_bottleneck_leaves_the_papers_rule() {
    let (limiter, reads) = limiter(1.0);
    let clients = Clients::start(&limiter);
    let status = status_until(&limiter, "the first steady state", |s| {
        s.phase == Phase::Steady
    });
    drop(clients);
    assert_eq!(status.hinted, 0);
    let trace = limiter.drain_trace();
    assert!(trace.iter().all(|t| !t.hinted), "{trace:#?}");
    assert!(reads.load(Ordering::SeqCst) > 0);
}
