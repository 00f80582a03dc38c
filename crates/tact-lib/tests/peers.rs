//! Coordinated pools share their completions (`docs/tune.md` "Several instances on one
//! bottleneck"): each pool's policy is told every completion of the other pools on its key
//! (`Policy::on_peer_completions`), never its own, and none of a pool on another key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tact_core::tune::{Event, Policy};
use tact_lib::tune::{CoordinateMode, Pool, Turns};

/// A policy at a fixed count that adds up the peers' completions it is told.
struct Counting {
    peers: Arc<AtomicU64>,
}

impl Policy for Counting {
    fn target(&self) -> usize {
        2
    }
    fn on_event(&mut self, _: Event) -> Option<usize> {
        None
    }
    fn on_peer_completions(&mut self, _: Duration, count: u32) -> Option<usize> {
        self.peers.fetch_add(u64::from(count), Ordering::Relaxed);
        None
    }
}

fn pool(dir: &std::path::Path, key: &str) -> (Pool, Arc<AtomicU64>) {
    let peers = Arc::new(AtomicU64::new(0));
    let turns = Turns::new_in(dir, key, CoordinateMode::Turns).unwrap();
    let pool = Pool::builder()
        .policy(Box::new(Counting {
            peers: Arc::clone(&peers),
        }))
        .max_workers(2)
        .tick(Duration::from_millis(10))
        .coordinate(turns)
        .build();
    (pool, peers)
}

/// Runs `n` short tasks on `pool` and waits for them all.
fn run(pool: &Pool, n: usize) {
    let handles: Vec<_> = (0..n)
        .map(|_| pool.submit(|| std::thread::sleep(Duration::from_micros(200))))
        .collect();
    for h in handles {
        h.wait().unwrap();
    }
}

#[test]
fn pools_on_one_key_are_told_each_other_s_completions_exactly() {
    let dir = tempfile::tempdir().unwrap();
    // All three count from before the first task, so every completion is one a peer must see.
    let (a, told_a) = pool(dir.path(), "db");
    let (b, told_b) = pool(dir.path(), "db");
    let (other, told_other) = pool(dir.path(), "web");
    std::thread::scope(|s| {
        s.spawn(|| run(&a, 300));
        s.spawn(|| run(&b, 200));
        s.spawn(|| run(&other, 50));
    });
    // The last completions reach the others on their next event or tick.
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = |p: &Pool| p.turns().unwrap().peer_completions;
    while seen(&a) < 200 || seen(&b) < 300 {
        assert!(
            Instant::now() < deadline,
            "a saw {} of 200, b {} of 300",
            seen(&a),
            seen(&b)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A few more ticks: nothing beyond the others' completions ever comes.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!((seen(&a), seen(&b), seen(&other)), (200, 300, 0));
    let told = |t: &AtomicU64| t.load(Ordering::Relaxed);
    assert_eq!(
        (told(&told_a), told(&told_b), told(&told_other)),
        (200, 300, 0),
        "what the policies were told"
    );
}
