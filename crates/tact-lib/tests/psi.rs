//! PSI as a saturation hint in the library hosts (`PoolBuilder::psi_reader`,
//! `LimiterBuilder::psi_reader`, TCC's `psi`): on tasks whose throughput grows with every worker
//! added, fixture pressure files whose io `full` reads 50% make TCC revoke add steps the
//! throughput test passed; with the files absent the pool runs by throughput alone and climbs. Each
//! task sleeps, so the gains are fixed by the count, not by the machine's speed.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tact_core::tune::{Phase, Pressure, Reason, Status, Tcc, TuneParams};
use tact_lib::tune::{Limiter, Pool};
use tact_linux::probe::psi::PsiReader;

const N_INIT: usize = 2;
const N_MAX: usize = 12;
/// Generous: a loaded machine stretches every sleep.
const DEADLINE: Duration = Duration::from_secs(120);
/// Long enough that a configuration takes over a second to measure (24 samples at 2–3 tasks at
/// once), so a PSI reading (one a second) lands while it is measured.
const TASK: Duration = Duration::from_millis(150);

fn tcc() -> Tcc {
    Tcc::new(TuneParams {
        n_init: N_INIT,
        n_max: N_MAX,
        n_star: 6,
        batch_min: 4,
        dwell: Duration::from_secs(5),
        max_dwell: Duration::from_secs(5),
        psi: true,
        ..TuneParams::default()
    })
    .unwrap()
}

fn pool(psi: &Path) -> Pool {
    Pool::builder()
        .tcc(tcc())
        .max_workers(N_MAX)
        .queue_capacity(2 * N_MAX)
        .psi_reader(PsiReader::with_root(psi))
        .build()
}

/// Pressure files with io `full` at `io_full` percent and no other stalls.
fn fixture(io_full: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let line =
        |kind: &str, avg10: &str| format!("{kind} avg10={avg10} avg60=0.00 avg300=0.00 total=1\n");
    let calm = line("some", "0.00") + &line("full", "0.00");
    fs::write(dir.path().join("cpu"), line("some", "0.00")).unwrap();
    fs::write(dir.path().join("memory"), &calm).unwrap();
    fs::write(
        dir.path().join("io"),
        line("some", io_full) + &line("full", io_full),
    )
    .unwrap();
    dir
}

/// Keeps the pool's queue full of sleeping tasks until dropped.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    fn start(pool: &Arc<Pool>) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let (pool, flag) = (Arc::clone(pool), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                pool.submit(|| thread::sleep(TASK));
            }
        });
        Feeder {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
    }
}

fn status_until(pool: &Pool, what: &str, cond: impl Fn(&Status) -> bool) -> Status {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let status = pool.stats().status.expect("TCC is kept by type");
        if cond(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}: {status:?}, targets {:?}",
            pool.targets()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn io_stalls_revoke_add_steps_the_throughput_would_take() {
    let psi = fixture("50.00");
    let pool = Arc::new(pool(psi.path()));
    let feeder = Feeder::start(&pool);
    let status = status_until(&pool, "PSI revokes a step", |s| s.psi > 0);
    drop(feeder);
    assert_eq!(
        status.pressure,
        Some(Pressure {
            memory_some: 0.0,
            memory_full: 0.0,
            io_full: 0.5
        })
    );
    let trace = pool.drain_trace();
    let revoked: Vec<_> = trace.iter().filter(|t| t.psi).collect();
    assert!(!revoked.is_empty(), "{trace:#?}");
    for t in revoked {
        assert_eq!(t.from, Phase::Add, "{t:?}");
        assert!(
            matches!(t.reason, Reason::Decline | Reason::Overshoot),
            "{t:?}"
        );
        assert!(t.target_to < t.target_from, "{t:?}");
    }
    assert!(pool
        .targets()
        .iter()
        .all(|&(_, n)| (1..=N_MAX).contains(&n)));
}

#[test]
fn without_psi_files_the_pool_runs_by_throughput_alone() {
    let absent = tempfile::tempdir().unwrap();
    let pool = Arc::new(pool(absent.path()));
    let feeder = Feeder::start(&pool);
    // Every worker added gains its full share: the throughput test takes the steps.
    let status = status_until(&pool, "an accepted add step", |s| s.target > N_INIT);
    drop(feeder);
    assert_eq!((status.psi, status.pressure), (0, None));
    assert!(pool.drain_trace().iter().all(|t| !t.psi));
    let stats = pool.stats();
    assert!(stats.completed > 0 && stats.panicked == 0, "{stats:?}");
}

#[test]
fn a_limiter_reads_psi_on_its_ticks() {
    let psi = fixture("50.00");
    let limiter = Limiter::builder()
        .tcc(tcc())
        .psi_reader(PsiReader::with_root(psi.path()))
        .build();
    let deadline = Instant::now() + DEADLINE;
    while limiter.status().unwrap().pressure.is_none() {
        assert!(Instant::now() < deadline, "{:?}", limiter.status());
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(limiter.status().unwrap().pressure.unwrap().io_full, 0.5);
}
