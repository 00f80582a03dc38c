//! The cooperative idle gate: its waits in virtual time against scripted foreground activity
//! (exact orderings), then on this machine's root disk and loopback interface.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tact_lib::idle::{Clock, IdleError, IdleGate, Preempt, Sampler, State};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// Time that moves only when the gate sleeps.
#[derive(Default)]
struct VirtualClock {
    now: Mutex<Duration>,
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap()
    }

    fn sleep(&self, d: Duration) {
        *self.now.lock().unwrap() += d;
    }
}

/// Foreground moves 64 bytes per µs (64 KiB per ms) through each busy interval of the script;
/// `own` is what the test's own requests moved, added by hand.
struct Script {
    clock: Arc<VirtualClock>,
    busy: Vec<(Duration, Duration)>,
    own: Arc<AtomicU64>,
}

impl Sampler for Script {
    fn bytes(&mut self) -> Result<u64, IdleError> {
        let now = self.clock.now();
        let fg: u128 = self
            .busy
            .iter()
            .map(|&(from, to)| to.min(now).saturating_sub(from).as_micros() * 64)
            .sum();
        Ok(fg as u64 + self.own.load(Ordering::SeqCst))
    }
}

struct Rig {
    clock: Arc<VirtualClock>,
    own: Arc<AtomicU64>,
    gate: IdleGate,
}

/// A gate at virtual time 0 over a script of foreground intervals (in ms).
fn rig(busy: &[(u64, u64)], preempt: impl Into<Preempt>) -> Rig {
    let clock = Arc::new(VirtualClock::default());
    let own = Arc::new(AtomicU64::new(0));
    let script = Script {
        clock: Arc::clone(&clock),
        busy: busy.iter().map(|&(a, b)| (ms(a), ms(b))).collect(),
        own: Arc::clone(&own),
    };
    let gate = IdleGate::builder()
        .sampler(Box::new(script), "script")
        .preempt(preempt)
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .build()
        .unwrap();
    Rig { clock, own, gate }
}

impl Rig {
    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// One background request of `bytes` taking `service`, reported with `reported` bytes.
    fn request(&self, bytes: u64, service: Duration, reported: u64) {
        let permit = self.gate.acquire().unwrap();
        self.own.fetch_add(bytes, Ordering::SeqCst);
        self.clock.sleep(service);
        permit.done(reported).unwrap();
    }
}

#[test]
fn acquire_waits_out_the_foreground_and_then_a_full_pi() {
    let r = rig(&[(0, 1000)], ms(100));
    assert!(
        r.gate.acquire_timeout(ms(1050)).unwrap().is_none(),
        "still held 50 ms after the foreground ended"
    );
    let permit = r.gate.acquire().unwrap();
    let t = r.now();
    // δ = p/10 = 10 ms: the PI ends between p and p + δ after the last foreground seen.
    assert!(t >= ms(1100) && t <= ms(1110), "admitted at {t:?}");
    drop(permit);
    let s = r.gate.status();
    assert_eq!(s.acquired, 1);
    assert_eq!(s.waited, t, "the timed-out wait and the successful one");
    assert!(s.fg_bytes >= 1000 * 64 * 1000 - 64 * 1000, "{s:?}");
    let c = r.gate.counters();
    assert!(c.fg_total() >= 100, "one f per look while busy: {c:?}");
    assert_eq!(c.expired_pis(), 1);
    assert_eq!(c.preempted(), 0);
}

#[test]
fn foreground_inside_the_pi_starts_it_again() {
    let r = rig(&[(0, 500), (550, 600)], ms(100));
    let _permit = r.gate.acquire().unwrap();
    let t = r.now();
    assert!(t >= ms(700) && t <= ms(710), "admitted at {t:?}");
    assert!(
        r.gate.counters().shielded() >= 1,
        "P[f]: fg arrived in the PI"
    );
}

#[test]
fn the_first_acquire_waits_a_pi_and_later_ones_follow_back_to_back() {
    let r = rig(&[], ms(50));
    r.request(1 << 20, ms(5), 1 << 20);
    let first = r.now();
    assert!(first >= ms(55) && first <= ms(60), "{first:?}");
    for _ in 0..10 {
        r.request(1 << 20, ms(5), 1 << 20);
    }
    assert_eq!(
        r.now(),
        first + ms(50),
        "no waiting between requests whose own bytes were reported"
    );
    let s = r.gate.status();
    assert_eq!((s.state, s.own_bytes, s.fg_bytes), (State::Bg, 11 << 20, 0));
    assert_eq!(s.busy, ms(55));
    assert_eq!(r.gate.counters().fg_total(), 0);
}

#[test]
fn unreported_own_bytes_count_as_foreground() {
    let r = rig(&[], ms(50));
    r.request(1 << 20, ms(5), 1 << 20);
    r.request(1 << 20, ms(5), 0);
    let before = r.now();
    r.request(4096, ms(1), 4096);
    let waited = r.now() - before - ms(1);
    assert!(
        waited >= ms(50),
        "a PI after the unreported request: {waited:?}"
    );
    let s = r.gate.status();
    assert_eq!(s.fg_bytes, 1 << 20);
    assert_eq!(
        r.gate.counters().preempted(),
        1,
        "B[f]: during a bg request"
    );
}

#[test]
fn dropping_a_permit_ends_its_request_and_gate_done_ends_it_too() {
    let r = rig(&[], ms(20));
    let permit = r.gate.acquire().unwrap();
    assert!(r.gate.status().outstanding);
    r.gate.done(0).unwrap();
    assert!(!r.gate.status().outstanding);
    drop(permit); // already over: no second look
    assert!(matches!(r.gate.done(0), Err(IdleError::NotAcquired)));
    let permit = r.gate.acquire().unwrap();
    drop(permit);
    assert!(!r.gate.status().outstanding);
    assert_eq!(r.gate.status().acquired, 2);
    let _held = r.gate.acquire().unwrap();
    assert!(matches!(r.gate.acquire(), Err(IdleError::AlreadyHeld)));
}

#[test]
fn pi_zero_admits_as_soon_as_the_foreground_stops() {
    let r = rig(&[(0, 1000)], Duration::ZERO);
    let _permit = r.gate.acquire().unwrap();
    let t = r.now();
    // δ = 1 ms: the first look that sees no foreground.
    assert!(t >= ms(1000) && t <= ms(1002), "admitted at {t:?}");
    assert_eq!(r.gate.counters().expired_pis(), 1);
}

#[test]
fn acquire_timeout_gives_up_while_the_foreground_lasts() {
    let r = rig(&[(0, 10_000)], ms(100));
    assert!(r.gate.acquire_timeout(ms(2000)).unwrap().is_none());
    assert_eq!(r.now(), ms(2000));
    let s = r.gate.status();
    assert_eq!((s.acquired, s.waited), (0, ms(2000)));
    assert_eq!(s.state, State::Fg);
}

#[test]
fn auto_preempt_lengthens_p_while_background_keeps_getting_in_the_way() {
    let r = rig(&[], Preempt::Auto);
    assert_eq!(r.gate.status().pi, ms(100));
    assert!(r.gate.status().auto);
    // Foreground arrives during every bg request (its bytes are beyond the reported ones):
    // every f is a preemption, far over the budget.
    for _ in 0..20 {
        let permit = r.gate.acquire().unwrap();
        r.own.fetch_add(1 << 20, Ordering::SeqCst);
        r.clock.sleep(ms(20));
        permit.done(0).unwrap();
    }
    let p = r.gate.status().pi;
    assert!(p > ms(100) && p <= Duration::from_secs(2), "p = {p:?}");
}

#[test]
fn concurrent_threads_are_admitted_one_request_at_a_time() {
    let r = rig(&[], Duration::ZERO);
    let gate = r.gate.clone();
    let in_use = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let gate = gate.clone();
            let in_use = Arc::clone(&in_use);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let permit = gate.acquire().unwrap();
                    assert!(!in_use.swap(true, Ordering::SeqCst), "two requests at once");
                    std::thread::yield_now();
                    in_use.store(false, Ordering::SeqCst);
                    permit.done(0).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(gate.status().acquired, 200);
}

#[test]
fn bad_settings_are_named() {
    let err = |b: tact_lib::idle::Builder| b.build().unwrap_err().to_string();
    let e = err(IdleGate::builder().device("nosuchdisk0"));
    assert!(
        e.contains("nosuchdisk0") && e.contains("block device"),
        "{e}"
    );
    let e = err(IdleGate::builder().interface("nosuchif0"));
    assert!(e.contains("nosuchif0") && e.contains("lo"), "{e}");
    let e = err(IdleGate::builder().device("/proc/self"));
    assert!(e.contains("/proc/self") && e.contains("proc"), "{e}");
    assert!(err(IdleGate::builder()).contains("resource to watch"));
    let e = err(IdleGate::builder().device("vda").interface("lo"));
    assert!(e.contains("vda") && e.contains("lo"), "{e}");

    assert_eq!("auto".parse::<Preempt>().unwrap(), Preempt::Auto);
    assert_eq!(" 50ms".parse::<Preempt>().unwrap(), Preempt::Fixed(ms(50)));
    assert_eq!("0".parse::<Preempt>().unwrap(), Preempt::Fixed(ms(0)));
    let e = "-50ms".parse::<Preempt>().unwrap_err().to_string();
    assert!(e.contains("-50ms") && e.contains("negative"), "{e}");
    let e = "soon".parse::<Preempt>().unwrap_err().to_string();
    assert!(e.contains("soon") && e.contains("auto"), "{e}");
}

// ---- the real machine ----

/// A directory on the disk under the build tree (not a tmpfs), removed on drop.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn root_disk_without_foreground_of_ours_admits_promptly() {
    let dir = disk_dir();
    // Plain priority: the disk is shared with other programs, some of which may keep it busy
    // for minutes (another test's background reader ran at 20 MB/s with no 10 ms gap), but not
    // without millisecond gaps.
    let gate = IdleGate::builder()
        .device(dir.path().to_str().unwrap())
        .preempt(Duration::ZERO)
        .build()
        .unwrap();
    assert!(
        gate.status().resource.starts_with("disk "),
        "{:?}",
        gate.status()
    );
    let permit = gate.acquire_timeout(Duration::from_secs(60)).unwrap();
    assert!(permit.is_some(), "{:?}", gate.status());
    permit.unwrap().done(0).unwrap();
}

/// A foreground writer: dd with O_DIRECT rewriting 16 MiB over and over, in a process group of
/// its own so the test can stop the shell and its dd together.
struct Writer {
    child: Child,
}

impl Writer {
    fn start(file: &std::path::Path) -> Writer {
        let script = format!(
            "while :; do dd if=/dev/zero of='{}' bs=64k count=256 oflag=direct conv=notrunc \
             status=none || exit 1; done",
            file.display()
        );
        let child = Command::new("sh")
            .args(["-c", &script])
            .process_group(0)
            .spawn()
            .unwrap();
        Writer { child }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The group is the shell's pid (process_group(0)): only processes this test started.
        let pgid = self.child.id() as i32;
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

#[test]
fn a_direct_writer_on_the_same_disk_keeps_acquire_waiting() {
    let dir = disk_dir();
    let file = dir.path().join("fg");
    let mut writer = Writer::start(&file);
    let started = Instant::now();
    while std::fs::metadata(&file).map_or(0, |m| m.len()) < 1 << 20 {
        assert!(writer.running(), "dd failed");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "dd wrote nothing"
        );
        std::thread::sleep(ms(10));
    }
    let gate = IdleGate::builder()
        .device(dir.path().to_str().unwrap())
        .preempt(Duration::from_secs(2))
        .build()
        .unwrap();
    let permit = gate.acquire_timeout(Duration::from_secs(4)).unwrap();
    assert!(writer.running(), "the writer must outlive the wait");
    assert!(
        permit.is_none(),
        "admitted while dd wrote: {:?}",
        gate.status()
    );
    let s = gate.status();
    assert!(s.fg_bytes > 1 << 20, "{s:?}");
    assert_eq!(s.acquired, 0);
}

#[test]
fn loopback_without_foreground_of_ours_admits_promptly() {
    let gate = IdleGate::builder()
        .interface("lo")
        .preempt(ms(10))
        .build()
        .unwrap();
    let permit = gate.acquire_timeout(Duration::from_secs(60)).unwrap();
    assert!(permit.is_some(), "{:?}", gate.status());
}

#[test]
fn a_udp_flood_on_loopback_keeps_acquire_waiting() {
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let out = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let buf = [0u8; 8192];
            while !stop.load(Ordering::SeqCst) {
                // The sink never reads: once its buffer is full the kernel drops the datagrams,
                // but lo has counted them.
                let _ = out.send_to(&buf, to);
                // 8 MB/s: every look sees it, and the test leaves the CPU to others.
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let gate = IdleGate::builder()
        .interface("lo")
        .preempt(Duration::from_secs(2))
        .build()
        .unwrap();
    let permit = gate.acquire_timeout(Duration::from_secs(4)).unwrap();
    let flooding = !flood.is_finished();
    stop.store(true, Ordering::SeqCst);
    flood.join().unwrap();
    assert!(flooding);
    assert!(
        permit.is_none(),
        "admitted during the flood: {:?}",
        gate.status()
    );
    drop(sink);
}
