//! Warm start per workload key in the library's hosts (`PoolBuilder::key`,
//! `LimiterBuilder::key`): a pool that settles records TCC's steady count under its key, the
//! next pool or limiter with the key starts from it, and neither a bad record nor a store that
//! cannot be written fails a host. Every test keeps its keys in a directory of its own
//! (`key_dir`).

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use tact_core::tune::{policy_from_spec, Phase, Tcc, TuneParams};
use tact_lib::tune::warm::{Loaded, WarmStore};
use tact_lib::tune::{Limiter, Pool};

/// Generous for a loaded two-core machine: TCC settles after about 50 completions.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// TCC that goes Base → Max → Steady at `n`, its only count (n_init = n_max, no Remove): a
/// steady count that does not depend on the throughput it measures.
fn settling_at(n: usize) -> Tcc {
    Tcc::new(TuneParams {
        n_init: n,
        n_max: n,
        remove: false,
        n_star: 3,
        batch_min: 1,
        dwell: Duration::from_millis(100),
        max_dwell: Duration::from_millis(100),
        ..TuneParams::default()
    })
    .unwrap()
}

/// Cold TCC from 1 worker, at most `n_max`.
fn cold(n_max: usize) -> Tcc {
    Tcc::new(TuneParams {
        n_init: 1,
        n_max,
        ..TuneParams::default()
    })
    .unwrap()
}

/// Keeps `pool` saturated with 1 ms tasks until TCC is in Steady.
fn run_until_steady(pool: &Pool) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let handles: Vec<_> = (0..20)
            .map(|_| pool.submit(|| thread::sleep(Duration::from_millis(1))))
            .collect();
        for h in handles {
            h.wait().unwrap();
        }
        let status = pool.stats().status.expect("TCC");
        if status.phase == Phase::Steady {
            return;
        }
        assert!(Instant::now() < deadline, "TCC did not settle: {status:?}");
    }
}

fn record(dir: &Path, key: &str) -> Loaded {
    WarmStore::new(dir, key, &[]).unwrap().load()
}

#[test]
fn a_settled_count_is_recorded_and_the_next_pool_and_limiter_start_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::builder()
        .tcc(settling_at(5))
        .max_workers(5)
        .key("thumbs")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(pool.warm_start(), None, "nothing recorded yet");
    run_until_steady(&pool);
    let steady: Vec<usize> = pool
        .drain_trace()
        .iter()
        .filter(|t| t.to == Phase::Steady)
        .map(|t| t.target_to)
        .collect();
    assert_eq!(steady.last(), Some(&5), "the trace is still the caller's");
    assert_eq!(record(dir.path(), "thumbs"), Loaded::Count(5));
    let text = fs::read_to_string(dir.path().join("thumbs.json")).unwrap();
    assert!(
        text.starts_with("{\"steady_count\":5,\"command\":\""),
        "{text}"
    );
    pool.shutdown();

    // The next pool with the key starts TCC's first cycle from 5: Base at its cut (4), not at
    // its own n_init of 1.
    let cut = TuneParams::default().base_count(5);
    assert_eq!(cut, 4);
    let pool = Pool::builder()
        .tcc(cold(8))
        .max_workers(8)
        .key("thumbs")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(pool.warm_start(), Some(5));
    assert_eq!(pool.targets()[0], (Duration::ZERO, cut));
    assert_eq!(pool.stats().status.unwrap().target, cut);
    // A pool of fewer workers lowers the count to its ceiling; one without a policy (TCC with
    // its defaults) warm-starts too; another key starts cold.
    let small = Pool::builder()
        .tcc(cold(8))
        .max_workers(3)
        .key("thumbs")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(small.warm_start(), Some(3));
    let default = Pool::builder()
        .key("thumbs")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(default.warm_start(), Some(5));
    let other = Pool::builder()
        .tcc(cold(8))
        .key("other")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(other.warm_start(), None);
    assert_eq!(other.target(), 1);

    let limiter = Limiter::builder()
        .tcc(cold(64))
        .key("thumbs")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(limiter.warm_start(), Some(5));
    assert_eq!(limiter.limit(), cut);
}

#[test]
fn a_limiter_records_its_steady_count() {
    let dir = tempfile::tempdir().unwrap();
    let limiter = Limiter::builder()
        .tcc(settling_at(3))
        .key("calls")
        .unwrap()
        .key_dir(dir.path())
        .build();
    let deadline = Instant::now() + SETTLE_WITHIN;
    // Six callers for three permits: saturated.
    thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                while limiter.status().unwrap().phase != Phase::Steady {
                    assert!(Instant::now() < deadline, "{:?}", limiter.status());
                    let _permit = limiter.acquire();
                    thread::sleep(Duration::from_millis(1));
                }
            });
        }
    });
    assert_eq!(record(dir.path(), "calls"), Loaded::Count(3));
}

#[test]
fn a_bad_key_and_a_key_with_a_boxed_policy_are_refused() {
    for bad in ["", "../escape", "a/b", ".hidden", "a b"] {
        let e = Pool::builder().key(bad).err().expect(bad);
        assert!(e.to_string().contains("is not a key"), "{e}");
        assert!(Limiter::builder().key(bad).is_err(), "{bad:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let keyed_aimd = || {
        Pool::builder()
            .policy(policy_from_spec("aimd", 2, 8).unwrap())
            .key("k")
            .unwrap()
            .key_dir(dir.path())
            .build()
    };
    let Err(e) = panic::catch_unwind(AssertUnwindSafe(keyed_aimd)) else {
        panic!("a key with AIMD built a pool");
    };
    let msg = e.downcast_ref::<String>().unwrap();
    assert!(msg.contains("warm start is TCC's"), "{msg}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_store_that_fails_never_fails_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    // A record that is not one: a cold start, replaced at the first Steady.
    fs::write(dir.path().join("bad.json"), "seven").unwrap();
    let pool = Pool::builder()
        .tcc(settling_at(2))
        .max_workers(2)
        .key("bad")
        .unwrap()
        .key_dir(dir.path())
        .build();
    assert_eq!(pool.warm_start(), None);
    assert_eq!(pool.target(), 2);
    run_until_steady(&pool);
    assert_eq!(record(dir.path(), "bad"), Loaded::Count(2));

    // A key directory that cannot be made (under a file): the pool runs, settles and goes on.
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let pool = Pool::builder()
        .tcc(settling_at(2))
        .max_workers(2)
        .key("lost")
        .unwrap()
        .key_dir(file.join("tune"))
        .build();
    run_until_steady(&pool);
    let handles: Vec<_> = (0..50u64).map(|i| pool.submit(move || i)).collect();
    let sum: u64 = handles.into_iter().map(|h| h.wait().unwrap()).sum();
    assert_eq!(sum, 1225);
    assert_eq!(fs::read(&file).unwrap(), b"");
}
