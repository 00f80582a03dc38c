//! Coordinated pools share their completions (`docs/tune.md` "Several instances on one
//! bottleneck"): each pool's policy is told every completion of the other pools on its key
//! (`Policy::on_peer_completions`), never its own, and none of a pool on another key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tact_core::tune::{Event, Policy};
use tact_lib::tune::turns::Registry;
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

/// A policy that records the number of instances it is told.
#[derive(Default)]
struct Instances {
    told: Vec<usize>,
}

impl Policy for Instances {
    fn target(&self) -> usize {
        1
    }
    fn on_event(&mut self, _: Event) -> Option<usize> {
        None
    }
    fn set_instances(&mut self, k: usize) {
        self.told.push(k);
    }
}

#[test]
fn the_registry_counts_live_instances_and_removes_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let a = Registry::register_in(dir.path(), "db").unwrap();
    assert_eq!(a.count(), 1);
    let b = Registry::register_in(dir.path(), "db").unwrap();
    let web = Registry::register_in(dir.path(), "web").unwrap();
    assert_eq!((a.count(), b.count(), web.count()), (2, 2, 1));
    // What a crashed instance leaves: its file, with nobody's lock on it.
    let live = dir.path().join("db.live");
    let stale = live.join("4242-1");
    std::fs::write(&stale, b"").unwrap();
    // One being registered (hidden until it holds its lock) is not counted, nor removed.
    let hidden = live.join(".4243-1");
    std::fs::write(&hidden, b"").unwrap();
    assert_eq!(a.count(), 2);
    assert!(!stale.exists(), "a dead instance's file is removed");
    assert!(hidden.exists());
    // A clean exit removes its file at once.
    let b_path = b.path().to_owned();
    drop(b);
    assert!(!b_path.exists());
    assert_eq!(a.count(), 1);
}

#[test]
fn a_killed_instance_stops_counting() {
    let dir = tempfile::tempdir().unwrap();
    let a = Registry::register_in(dir.path(), "db").unwrap();
    // Another process holds a lock on a file of its own in the registry, as an instance does,
    // and is then killed: the kernel drops its lock. Like an instance it locks the file under
    // a hidden name and renames it into place: a count between its open and its flock would
    // take the file for a dead instance's and remove it (under CI load it did).
    let path = dir.path().join("db.live").join("1-1");
    let hidden = dir.path().join("db.live").join(".1-1");
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"exec 9>"$2"; flock -x 9; mv "$2" "$1"; exec sleep 60"#)
        .arg("sh")
        .arg(&path)
        .arg(&hidden)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.count() != 2 {
        assert!(Instant::now() < deadline, "the child never held its lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    // While it lives, counting again and again neither drops it nor removes its file.
    for _ in 0..5 {
        assert_eq!(a.count(), 2);
    }
    assert!(path.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(a.count(), 1);
    assert!(!path.exists());
}

#[test]
fn turns_tell_the_policy_how_many_instances_share_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Turns::new_in(dir.path(), "db", CoordinateMode::Turns).unwrap();
    let mut pa = Instances::default();
    a.start(&mut pa);
    assert_eq!(pa.told, [1]);
    let mut b = Turns::new_in(
        dir.path(),
        "db",
        CoordinateMode::Epoch(Duration::from_secs(60)),
    )
    .unwrap();
    let mut pb = Instances::default();
    b.start(&mut pb);
    assert_eq!((pb.told.as_slice(), b.instances()), (&[2][..], 2));
    // a learns of b at its next check, and only a change is told.
    let t = Duration::from_secs(10);
    a.check(&mut pa, t);
    a.check(&mut pa, t + Duration::from_secs(5));
    assert_eq!(pa.told, [1, 2]);
    drop(b);
    // Counts come at most once a second: a check right after the last count keeps it.
    a.check(&mut pa, t + Duration::from_millis(5500));
    assert_eq!(a.instances(), 2);
    a.check(&mut pa, t + Duration::from_secs(7));
    assert_eq!((pa.told.as_slice(), a.instances()), (&[1, 2, 1][..], 1));
}
