//! `tact run --idle net` with the kernel's help (root only): the htb tree on the watched link, the
//! job's packets marked DSCP LE by nftables from its cgroup v2 directory, the job's class quiet
//! while foreground traffic flows (the gate holds the job) and sending again at once after each
//! burst, and all of it gone when tact ends (normal exit and SIGTERM). tact runs in a network
//! namespace the test creates, sending through a veth pair to a second one; the test mounts the
//! cgroup2 hierarchy inside `ip netns exec`'s private mount namespace (which hides the host's),
//! at a path other than the host's, so tact must find it from mountinfo. Also: a SIGKILLed
//! tact's table and tree swept by the next tact (and a tree that is not certainly tact's left
//! alone), the job in its cgroup from its first instruction, `tact status` showing the tree
//! and the marking, and an unmodified job in a namespace of its own whose forwarded packets tact
//! marks at its veth's ingress. Skipped, saying why, without root, `tc` or `nft`.

mod common;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use tact_linux::actuate::htb::{self, Tc};
use tact_linux::probe::htb_class::TcClasses;

const PATIENCE: Duration = Duration::from_secs(60);

/// Two network namespaces joined by a veth pair, deleted on drop: tact and the job in `outer`,
/// their traffic leaving through `link` toward `inner` (10.97.N.2).
struct Rig {
    outer: String,
    inner: String,
    link: String,
    peer: String,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let id = std::process::id();
        let rig = Rig {
            outer: format!("tact-test-netk-{tag}o-{id}"),
            inner: format!("tact-test-netk-{tag}i-{id}"),
            link: format!("tk{tag}o{}", id % 100_000),
            peer: format!("tk{tag}i{}", id % 100_000),
        };
        let net = tag.as_bytes()[0] - b'a' + 1;
        ip(&["netns", "add", &rig.outer]);
        ip(&["netns", "add", &rig.inner]);
        ip(&[
            "-n", &rig.outer, "link", "add", &rig.link, "type", "veth", "peer", "name", &rig.peer,
            "netns", &rig.inner,
        ]);
        let (o, i) = (format!("10.97.{net}.1/24"), format!("10.97.{net}.2/24"));
        ip(&["-n", &rig.outer, "addr", "add", &o, "dev", &rig.link]);
        ip(&["-n", &rig.inner, "addr", "add", &i, "dev", &rig.peer]);
        ip(&["-n", &rig.outer, "link", "set", &rig.link, "up"]);
        ip(&["-n", &rig.inner, "link", "set", &rig.peer, "up"]);
        rig
    }

    fn sink(&self) -> String {
        let net = self.link.as_bytes()[2] - b'a' + 1;
        format!("10.97.{net}.2")
    }

    /// `CMD...` in the outer namespace.
    fn outer(&self, cmd: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.outer])
            .args(cmd)
            .output()
            .unwrap()
    }

    fn tc(&self) -> Tc {
        Tc::in_netns(&self.outer)
    }

    /// Bytes sent by the foreground and the background class.
    fn classes(&self) -> (u64, u64) {
        let stats = self.tc().class_stats(&self.link).unwrap();
        let bytes = |id| {
            stats
                .iter()
                .find(|c| c.classid == id)
                .map_or(0, |c| c.bytes)
        };
        (bytes(htb::FG_CLASS), bytes(htb::BG_CLASS))
    }

    /// A reader of the link's classes over rtnetlink: a dump takes microseconds where `tc` takes
    /// a process or two, which a loaded machine delays by tens of milliseconds, so a [`Sample`]
    /// knows when it was read. The socket is made in `outer` by a thread that enters it and
    /// ends (a socket stays in the namespace it was made in).
    fn class_reader(&self) -> TcClasses {
        let (ns, link) = (format!("/run/netns/{}", self.outer), self.link.clone());
        std::thread::spawn(move || {
            let file = std::fs::File::open(&ns).unwrap();
            // SAFETY: `file` is an open namespace file; only this thread, which ends here, enters.
            let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(entered, 0, "{ns}: {}", std::io::Error::last_os_error());
            TcClasses::new(&link).unwrap()
        })
        .join()
        .unwrap()
    }

    fn root_qdisc(&self) -> String {
        let out = self.outer(&["tc", "qdisc", "show", "dev", &self.link]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `nft list tables`. Under load the listing once came back empty, which read as "no
    /// tables" (whether nft failed was not kept): a failed listing is tried again, and one that
    /// keeps failing fails the test with what nft said, rather than pass a check of absence.
    fn nft_tables(&self) -> String {
        let mut out = self.outer(&["nft", "list", "tables"]);
        for _ in 0..4 {
            if out.status.success() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            out = self.outer(&["nft", "list", "tables"]);
        }
        assert!(out.status.success(), "nft list tables failed: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// UDP datagrams of 1400 bytes to the sink, one for every millisecond of `secs`, from
    /// `outer`, with nothing to do with tact: the foreground ([`steady_sender`]).
    fn foreground(&self, secs: f64) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.outer, "python3", "-c"])
            .arg(steady_sender(&self.sink(), secs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for ns in [&self.outer, &self.inner] {
            Command::new("ip").args(["netns", "del", ns]).output().ok();
        }
    }
}

/// A python program that sends 1400-byte datagrams to `sink` port 9 every millisecond for
/// `secs` (the sink is closed: ICMP errors fail some sends, which is fine).
fn sender(sink: &str, secs: f64) -> String {
    format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         end = time.monotonic() + {secs}\n\
         while time.monotonic() < end:\n\
         \x20   try: s.sendto(b'x' * 1400, ('{sink}', 9))\n\
         \x20   except OSError: pass\n\
         \x20   time.sleep(0.001)\n"
    )
}

/// A python program that sends 1400-byte datagrams to `sink` port 9 for `secs`, as many as
/// milliseconds have passed: a sender run late sends what it owes at once. A loaded machine runs
/// a [`sender`] every few milliseconds, which slows it below the θ (4 KiB a 5 ms probe) at which
/// the gate sees a foreground, and the gate rightly releases the job while it still sends;
/// this one the gate sees unless it is not run at all for most of a PI.
fn steady_sender(sink: &str, secs: f64) -> String {
    format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         start = time.monotonic()\n\
         sent = 0\n\
         while time.monotonic() < start + {secs}:\n\
         \x20   while sent < (time.monotonic() - start) * 1000:\n\
         \x20       try: s.sendto(b'x' * 1400, ('{sink}', 9))\n\
         \x20       except OSError: pass\n\
         \x20       sent += 1\n\
         \x20   time.sleep(0.001)\n"
    )
}

/// A tact that a failing test leaves running gets SIGTERM (it passes it on to its job and cleans
/// up) and is waited for.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            kill(self.0.id() as i32, Signal::SIGTERM);
            let _ = self.0.wait();
        }
    }
}

/// `tact run --idle net:LINK --net-rate 100mbit` in the rig's outer namespace, with the cgroup2
/// hierarchy mounted at /sys/fs/cgroup there; `job` is a shell script.
fn start_tact(rig: &Rig, dir: &Path, job: &str) -> (Running, PathBuf) {
    start_tact_with(rig, dir, &[], job)
}

/// [`start_tact`] with more options.
fn start_tact_with(rig: &Rig, dir: &Path, extra: &[&str], job: &str) -> (Running, PathBuf) {
    let mut args = vec!["--net-rate", "100mbit"];
    args.extend(extra);
    spawn_tact(rig, dir, &args, job)
}

/// `tact run --idle net:LINK --preempt 50ms ARGS` in the rig's outer namespace (ARGS may give
/// another `--preempt`), with the cgroup2 hierarchy mounted at /sys/fs/cgroup there; `job` is a
/// shell script.
fn spawn_tact(rig: &Rig, dir: &Path, args: &[&str], job: &str) -> (Running, PathBuf) {
    tact_in_outer(rig, dir, true, "run", args, &["--", "sh", "-c", job])
}

/// `tact SUBCOMMAND --idle net:LINK --preempt 50ms ARGS --json-log DIR/idle.jsonl REST` in the
/// rig's outer namespace (ARGS may give another `--preempt`); with `cgroup2`, the cgroup2
/// hierarchy mounted at /sys/fs/cgroup there first (`ip netns exec` hides the host's, as it does
/// for the bench's tbf rig).
fn tact_in_outer(
    rig: &Rig,
    dir: &Path,
    cgroup2: bool,
    subcommand: &str,
    args: &[&str],
    rest: &[&str],
) -> (Running, PathBuf) {
    let log = dir.join("idle.jsonl");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &rig.outer]);
    if cgroup2 {
        cmd.args([
            "sh",
            "-c",
            "mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec \"$@\"",
            "sh",
        ]);
    }
    let child = cmd
        .arg(env!("CARGO_BIN_EXE_tact"))
        .env_remove("TACT_LOG")
        .env("TACT_RUNTIME_DIR", dir.join("runtime"))
        .env("TACT_SOCKET", dir.join("no-daemon.sock"))
        .current_dir(dir)
        .args([subcommand, "--idle"])
        .arg(format!("net:{}", rig.link))
        .args(if args.contains(&"--preempt") {
            &[][..]
        } else {
            &["--preempt", "50ms"][..]
        })
        .args(args)
        .arg("--json-log")
        .arg(&log)
        .args(rest)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (Running(child), log)
}

fn start_record(log: &Path) -> Option<serde_json::Value> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "start")
}

/// Waits for tact's start record and checks that the htb tree and the marking are in place:
/// the class tree on the link, the nftables table, the job's cgroup directory.
fn started(rig: &Rig, tact: &Child, log: &Path) -> PathBuf {
    wait_for(PATIENCE, "tact's start record", || {
        start_record(log).is_some()
    });
    let start = start_record(log).unwrap();
    let kernel = &start["gates"][0]["kernel"];
    assert_eq!(kernel["htb_rate_bits"], 100_000_000, "{start}");
    assert_eq!(kernel["marking"], true, "{start}");
    assert!(
        rig.root_qdisc().contains("qdisc htb 1: root"),
        "{}",
        rig.root_qdisc()
    );
    let table = format!("table inet tact-{}", tact.id());
    assert!(rig.nft_tables().contains(&table), "{}", rig.nft_tables());
    let cgroup = cgroup2_dir()
        .unwrap()
        .join(format!("tact-{}-net", tact.id()));
    assert!(cgroup.is_dir(), "{} is missing", cgroup.display());
    cgroup
}

/// After tact: the link has its default root qdisc again, and the table and cgroup are gone.
fn cleaned_up(rig: &Rig, tact_pid: u32, cgroup: &Path) {
    let qdisc = rig.root_qdisc();
    assert!(!qdisc.contains("htb"), "{qdisc}");
    assert!(qdisc.contains(" 0: root"), "{qdisc}");
    let tables = rig.nft_tables();
    assert!(!tables.contains(&format!("tact-{tact_pid}")), "{tables}");
    assert!(!cgroup.exists(), "{} is left", cgroup.display());
}

/// A python program that sends 1400-byte datagrams to `sink` port 9 as fast as its socket
/// takes them (the tree paces it: a UDP socket blocks while its buffer is queued) until `until`
/// exists.
fn flood(sink: &str, until: &Path) -> String {
    format!(
        "import os, socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         while not os.path.exists('{}'):\n\
         \x20   for _ in range(100):\n\
         \x20       try: s.sendto(b'x' * 1400, ('{sink}', 9))\n\
         \x20       except OSError: pass\n",
        until.display()
    )
}

/// The classes' byte counters as one rtnetlink dump read them, at a moment between `from` and
/// `to`.
#[derive(Debug, Clone, Copy)]
struct Sample {
    from: Instant,
    to: Instant,
    fg: u64,
    bg: u64,
}

fn sample(reader: &mut TcClasses) -> Sample {
    let from = Instant::now();
    let stats = reader.dump().unwrap();
    let to = Instant::now();
    let bytes = |id| {
        let class = stats.iter().find(|c| c.classid == id);
        class
            .unwrap_or_else(|| panic!("no class {id} in the dump: {stats:?}"))
            .bytes
    };
    Sample {
        from,
        to,
        fg: bytes(htb::FG_CLASS),
        bg: bytes(htb::BG_CLASS),
    }
}

/// How often a burst's classes are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// The longest the foreground's datagrams may have been apart, as far as the samples tell (from
/// the start of one interval the class grew in to the end of the next one it grew in), for the
/// gate to be certain to hold the job: it releases it a PI (50 ms) after the last probe that saw
/// θ (4 KiB) or more, which can come a probe interval (5 ms) before the last datagram; 30 ms
/// also leaves room for a clump of the sender's split across two probes.
const LONGEST_GAP: Duration = Duration::from_millis(30);
/// A foreground datagram on the wire (1400 bytes, UDP, IP and Ethernet headers): the class
/// growing by less carried a stray frame (ARP, neighbour discovery), not the foreground.
const DATAGRAM: u64 = 1442;
/// How long the foreground must have flowed before the job's class is judged: the gate holds the
/// job within a few probes (5 ms each) of the burst's first bytes, later on a loaded machine,
/// and the tree then sends the backlog the job queued before, beside the foreground: up to the
/// class's queue, 1000 frames (txqueuelen) of a job in a namespace of its own, whose datagrams
/// no socket buffer holds back, 130 ms at 100 Mbit/s.
const SETTLE: Duration = Duration::from_millis(200);
/// The judged time a burst must give; one whose sender was starved too long to give it is run
/// again, [`TRIES`] times in all.
const ENOUGH: Duration = Duration::from_millis(100);
const TRIES: u32 = 5;
/// A burst's length: [`SETTLE`], then as long again and more to judge.
const BURST_SECS: f64 = 0.5;

/// The job's class over the sampling intervals in which the foreground certainly kept the gate
/// holding the job: those it flowed before and after with no gap over [`LONGEST_GAP`], for
/// [`SETTLE`] or more before.
#[derive(Debug, Default, PartialEq)]
struct Judged {
    bytes: u64,
    /// The intervals' time, each counted from the end of the read that opened it to the start of
    /// the one that closed it (the least it can have been: the rate the most).
    time: Duration,
    /// Their indices (interval `k` from sample `k` to the next).
    intervals: Vec<usize>,
}

impl Judged {
    /// The job's class's bytes per second.
    fn rate(&self) -> f64 {
        self.bytes as f64 / self.time.as_secs_f64()
    }
}

/// Judges `samples` (taken in order) as [`Judged`] says: a window that straddles the end of the
/// flow, or a gap in it (a starved sender), in which the gate rightly releases the job, and the
/// [`SETTLE`] after each start of the flow are left out.
fn judge(samples: &[Sample]) -> Judged {
    let grew: Vec<usize> = (0..samples.len().saturating_sub(1))
        .filter(|&k| samples[k + 1].fg >= samples[k].fg + DATAGRAM)
        .collect();
    let mut judged = Judged::default();
    // The latest the flow can have begun: the end of its first interval.
    let mut since = None;
    for pair in grew.windows(2) {
        let (k0, k1) = (pair[0], pair[1]);
        if samples[k1 + 1].to - samples[k0].from > LONGEST_GAP {
            since = None;
            continue;
        }
        let began = *since.get_or_insert(samples[k0 + 1].to);
        // k0 up to k1, which begins before the datagrams that come in it: the flow went on.
        for k in (k0..k1).filter(|&k| samples[k].from >= began + SETTLE) {
            judged.bytes += samples[k + 1].bg - samples[k].bg;
            judged.time += samples[k + 1].from - samples[k].to;
            judged.intervals.push(k);
        }
    }
    judged
}

/// `samples` as lines `MS fg+BYTES bg+BYTES`, one an interval from the first sample's time, with
/// `*` at the judged ones: what a failed burst shows.
fn timeline(samples: &[Sample], judged: &Judged) -> String {
    samples
        .windows(2)
        .enumerate()
        .map(|(k, w)| {
            format!(
                "{:7.1} ms fg+{} bg+{}{}\n",
                (w[0].to - samples[0].to).as_secs_f64() * 1e3,
                w[1].fg - w[0].fg,
                w[1].bg - w[0].bg,
                if judged.intervals.contains(&k) {
                    " *"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// The job's class while a foreground burst flows and in the second after it ends.
struct Burst {
    /// The job's class while the foreground flowed.
    during: Judged,
    /// The bytes the job's class sent in the second after the burst ended.
    after: u64,
    /// The bytes the foreground class sent in the burst.
    fg: u64,
    samples: Vec<Sample>,
}

/// Runs an unrelated sender for `secs`, sampling the classes until it exits, and measures the
/// job's class around it.
fn burst(rig: &Rig, secs: f64) -> Burst {
    let mut reader = rig.class_reader();
    let first = sample(&mut reader);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sampling(reader, first, stop.clone());
    let mut foreground = rig.foreground(secs);
    foreground.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (mut reader, samples) = sampler.join().unwrap();
    let end = *samples.last().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    Burst {
        during: judge(&samples),
        after: sample(&mut reader).bg - end.bg,
        fg: end.fg - first.fg,
        samples,
    }
}

/// Samples the classes every [`SAMPLE_EVERY`] after `first`, and once more when `stop` is set,
/// in a thread of its own at real-time priority: a loaded machine runs the test's threads tens
/// of milliseconds late, too late to tell a gap in the foreground from a late read. (Refused
/// it, in a cgroup without real-time time, the thread samples as it can: intervals too long
/// judge nothing, and the burst is run again.)
fn sampling(
    mut reader: TcClasses,
    first: Sample,
    stop: Arc<AtomicBool>,
) -> JoinHandle<(TcClasses, Vec<Sample>)> {
    std::thread::spawn(move || {
        let fifo = libc::sched_param { sched_priority: 1 };
        // SAFETY: sets this thread's (0: the caller's) policy from a valid parameter.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) };
        let mut samples = vec![first];
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(SAMPLE_EVERY);
            samples.push(sample(&mut reader));
        }
        samples.push(sample(&mut reader));
        (reader, samples)
    })
}

/// Burst `n`, run again while its sender was starved too long for [`ENOUGH`] judged time.
fn judged_burst(rig: &Rig, n: u32) -> Burst {
    let mut tries = 1;
    loop {
        let b = burst(rig, BURST_SECS);
        let judged = b.during.time.as_millis();
        if b.during.time >= ENOUGH {
            return b;
        }
        assert!(
            tries < TRIES,
            "burst {n}: the foreground flowed without a gap for {judged} ms only, in each of \
             {TRIES} tries; the last one's samples:\n{}",
            timeline(&b.samples, &b.during)
        );
        eprintln!("burst {n}: the foreground flowed without a gap for {judged} ms only: again");
        tries += 1;
    }
}

/// Over one second the job's class carries its flood (over 1 MiB) and the foreground class next
/// to nothing (under 2% of it).
fn the_jobs_class_carries_the_flood(rig: &Rig, when: &str) {
    let (f0, b0) = rig.classes();
    std::thread::sleep(Duration::from_secs(1));
    let (f1, b1) = rig.classes();
    eprintln!(
        "{when}, one second: the job's class {} kB, the foreground class {} kB",
        (b1 - b0) / 1000,
        (f1 - f0) / 1000
    );
    assert!(b1 - b0 > 1 << 20, "the job's class sent {} bytes", b1 - b0);
    assert!(
        f1 - f0 < (b1 - b0) / 50,
        "the foreground class sent {} bytes beside the job's {}",
        f1 - f0,
        b1 - b0
    );
}

/// Three short foreground bursts, one after the other: while one flows the gate holds the job
/// and the tree serves the foreground first, so the job's class sends only what was queued
/// before; once the burst has ended and a PI has passed, the job runs and its class sends again
/// at once.
fn three_bursts_go_before_the_job(rig: &Rig) {
    for n in 1..=3 {
        let b = judged_burst(rig, n);
        let during = b.during.rate();
        eprintln!(
            "burst {n}: foreground class {} kB; the job's class {:.2} MB/s while it flowed ({} ms \
             judged, {} intervals), {:.2} MB in the second after",
            b.fg / 1000,
            during / 1e6,
            b.during.time.as_millis(),
            b.during.intervals.len(),
            b.after as f64 / 1e6
        );
        assert!(
            b.fg > 100 * 1400,
            "burst {n}: foreground class {} bytes",
            b.fg
        );
        assert!(
            b.after > 1 << 20,
            "burst {n}: the job's class sent {} bytes in the second after the foreground",
            b.after
        );
        assert!(
            during < b.after as f64 / 4.0,
            "burst {n}: the job's class sent {during:.0} B/s while the foreground flowed ({} B in \
             {:?}), {} B in the second after; the samples:\n{}",
            b.during.bytes,
            b.during.time,
            b.after,
            timeline(&b.samples, &b.during)
        );
    }
}

/// A burst sampled every 10 ms (each read instant), the job's class sending 1000 bytes in every
/// interval: the foreground flows from 0 to 700 ms but for a starved sender's gap from 300 to
/// 360 ms (stray frames in it). Judged: the intervals from the end of each flow's first
/// interval plus [`SETTLE`] to the last but one before its gap or end (210–290 ms, 570–690 ms);
/// sampled every 25 ms (two intervals longer than [`LONGEST_GAP`]), nothing.
#[test]
fn a_burst_is_judged_where_the_foreground_flowed_without_a_gap() {
    let t0 = Instant::now();
    let samples = |every: u64| {
        let (mut fg, mut bg) = (0, 0);
        let mut samples = Vec::new();
        for ms in (0..=800).step_by(every as usize) {
            let at = t0 + Duration::from_millis(ms);
            samples.push(Sample {
                from: at,
                to: at,
                fg,
                bg,
            });
            let flows = ms < 300 || (360..700).contains(&ms);
            fg += if flows { every * DATAGRAM / 2 } else { 100 };
            bg += 1000;
        }
        samples
    };
    let judged = Judged {
        bytes: 20_000,
        time: Duration::from_millis(200),
        intervals: (21..=28).chain(57..=68).collect(),
    };
    assert_eq!(judge(&samples(10)), judged);
    assert_eq!(judge(&samples(25)), Judged::default());
}

#[test]
fn the_jobs_packets_go_below_the_foreground_and_everything_goes_at_its_end() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("a");
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    // The job waits for tact to place it (its sockets must be made in its cgroup), then floods
    // until the test lets it end.
    let job = format!("sleep 1; python3 -c \"{}\"", flood(&rig.sink(), &go));
    let (mut tact, log) = start_tact(&rig, dir.path(), &job);
    let cgroup = started(&rig, &tact.0, &log);
    // Its class counts its datagrams (its own traffic, not foreground); the foreground class
    // saw stray frames at most.
    wait_for(PATIENCE, "the job to send", || rig.classes().1 > 1 << 20);
    let (fg, _) = rig.classes();
    assert!(
        fg < 16 << 10,
        "foreground class: {fg} bytes while only the job sent"
    );

    // (A ceil clamped to 8 kbit during the hold left the class 1.44 s in debt per frame it let
    // out, silent for more than a second after each burst.)
    three_bursts_go_before_the_job(&rig);

    std::fs::write(&go, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("marked DSCP LE"), "{err}");
    cleaned_up(&rig, tact.0.id(), &cgroup);
}

#[test]
fn sigterm_of_tact_removes_the_tree_the_table_and_the_cgroup() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("b");
    let dir = tempfile::tempdir().unwrap();
    // `exec`: dash forks for a lone command, and tact passes SIGTERM to the job's root only.
    let (tact, log) = start_tact(&rig, dir.path(), "exec sleep 600");
    let cgroup = started(&rig, &tact.0, &log);
    // The job is in the cgroup the nftables rule names.
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    assert!(!procs.trim().is_empty(), "the job's cgroup is empty");
    terminated(&rig, tact, &cgroup);
}

/// SIGTERM to tact, which passes it on to the job (started with `exec`: dash forks for a lone
/// command) and exits with its status, having removed what it set up.
fn terminated(rig: &Rig, mut tact: Running, cgroup: &Path) {
    kill(tact.0.id() as i32, Signal::SIGTERM);
    let status = tact.0.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "{}",
        stderr_of(&mut tact.0)
    );
    cleaned_up(rig, tact.0.id(), cgroup);
}

/// tact's guard (which resumes the job if tact dies) runs from the start, before any hold: until
/// 27 Nov the first hold started it, a fork and exec of tact that reports back, and under 4 busy
/// loops that once held the job 219 ms after the gate saw the foreground (the later holds: a
/// median 11–12 ms), while the job's class went on sending at 11 MB/s beside it (docs/idle.md,
/// "The first hold").
#[test]
fn the_guard_is_up_before_the_first_hold() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("k");
    let dir = tempfile::tempdir().unwrap();
    let (tact, log) = start_tact(&rig, dir.path(), "exec sleep 600");
    let cgroup = started(&rig, &tact.0, &log);
    let pid = tact.0.id() as i32;
    wait_for(PATIENCE, "tact's guard", || {
        children_matching(pid, "__guard").len() == 1
    });
    // Nothing flowed: the job was never held, so no hold started the guard.
    assert_eq!(records(&log, "held"), Vec::<serde_json::Value>::new());
    terminated(&rig, tact, &cgroup);
}

#[test]
fn a_root_qdisc_someone_else_added_is_replaced_only_when_asked() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("c");
    // Not a tbf: a tbf gets the tree grafted under it (`the_tree_is_grafted_under_a_tbf...`).
    // pfifo: the one other qdisc the test machine's kernel has.
    let fq = "tc qdisc add dev LINK root pfifo";
    let out = rig.outer(&fq.replace("LINK", &rig.link).split(' ').collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    // --net-rate asks for the tree: with pfifo in the way, tact refuses before the job runs.
    let (mut tact, _) = start_tact(&rig, dir.path(), "sleep 600");
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(125), "{err}");
    assert!(
        err.contains("pfifo") && err.contains("--net-replace-qdisc"),
        "{err}"
    );
    assert!(
        rig.root_qdisc().contains("qdisc pfifo"),
        "{}",
        rig.root_qdisc()
    );
    // Asked to replace it, tact does, and says that it will not put it back.
    let (mut tact, log) = start_tact_with(&rig, dir.path(), &["--net-replace-qdisc"], "sleep 1");
    started(&rig, &tact.0, &log);
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("replaced pfifo"), "{err}");
    assert!(!rig.root_qdisc().contains("pfifo"), "{}", rig.root_qdisc());
}

#[test]
fn the_network_options_need_idle_net_and_a_rate_in_tcs_units() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            &["--idle", "cpu", "--net-rate", "10mbit"][..],
            "--idle net only",
        ),
        (
            &["--idle", "cpu", "--net-replace-qdisc"][..],
            "--idle net only",
        ),
        (&["--idle", "cpu", "--net-leave-tbf"][..], "--idle net only"),
        (
            &["--idle", "net:lo", "--net-leave-tbf", "--net-replace-qdisc"][..],
            "cannot be used with",
        ),
        (&["--idle", "net:lo", "--net-rate", "10mbps"][..], "kbit"),
        (&["--net-rate", "10mbit"][..], "--idle"),
    ] {
        let out = tact()
            .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
            .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
            .arg("run")
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Files below the runtime directory's `htb` records directory.
fn tree_records(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("runtime/htb"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// SIGKILL of tact: its table, tree and record stay (the job, `sleep 2`, ends by itself).
fn kill_tact_mid_job(rig: &Rig, dir: &Path) -> (u32, PathBuf) {
    let (mut tact, log) = start_tact(rig, dir, "sleep 2");
    let cgroup = started(rig, &tact.0, &log);
    let pid = tact.0.id();
    assert_eq!(tree_records(dir), [format!("{pid}-{}.json", rig.link)]);
    kill(pid as i32, Signal::SIGKILL);
    tact.0.wait().unwrap();
    // The next tact's start record must not be mistaken for this one's.
    std::fs::remove_file(&log).unwrap();
    assert!(rig.root_qdisc().contains("qdisc htb 1: root"));
    assert!(rig.nft_tables().contains(&format!("table inet tact-{pid}")));
    // The job leaves its directory empty when it ends.
    wait_for(PATIENCE, "the job to end", || {
        std::fs::read_to_string(cgroup.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
    });
    (pid, cgroup)
}

#[test]
fn a_killed_tacts_table_and_tree_are_swept_by_the_next_one() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("d");
    let dir = tempfile::tempdir().unwrap();
    let (dead, dead_cgroup) = kill_tact_mid_job(&rig, dir.path());
    // The next tact, with --net-rate, would refuse a root qdisc it cannot tell for tact's.
    let go = dir.path().join("go");
    let job = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let (mut tact, log) = start_tact(&rig, dir.path(), &job);
    let cgroup = started(&rig, &tact.0, &log);
    std::fs::write(&go, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("removed tact {dead}'s htb tree on {}", rig.link)),
        "{err}"
    );
    assert!(
        err.contains(&format!("removed the nftables table inet tact-{dead}")),
        "{err}"
    );
    cleaned_up(&rig, tact.0.id(), &cgroup);
    cleaned_up(&rig, dead, &dead_cgroup);
    assert!(
        tree_records(dir.path()).is_empty(),
        "{:?}",
        tree_records(dir.path())
    );
}

#[test]
fn a_tree_not_certainly_tacts_is_left_alone() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("e");
    let dir = tempfile::tempdir().unwrap();
    let (_, dead_cgroup) = kill_tact_mid_job(&rig, dir.path());
    // Someone changed the tree the dead tact left: not tact's layout any more.
    let class = format!(
        "tc class add dev {} parent 1:1 classid 1:30 htb rate 8kbit ceil 1mbit",
        rig.link
    );
    let out = rig.outer(&class.split(' ').collect::<Vec<_>>());
    assert!(out.status.success(), "{out:?}");
    let refused = |why: &str| {
        let (mut tact, _) = start_tact(&rig, dir.path(), "true");
        let status = tact.0.wait().unwrap();
        let err = stderr_of(&mut tact.0);
        assert_eq!(status.code(), Some(125), "{why}: {err}");
        assert!(err.contains("did not make (htb 1:)"), "{why}: {err}");
        assert!(!err.contains("htb tree on"), "{why}: {err}");
        assert!(rig.root_qdisc().contains("qdisc htb 1: root"), "{why}");
    };
    refused("another layout");
    // The record went with the sweep: with the layout tact's again, nothing says it is tact's.
    assert!(
        tree_records(dir.path()).is_empty(),
        "{:?}",
        tree_records(dir.path())
    );
    let del = format!("tc class del dev {} classid 1:30", rig.link);
    let out = rig.outer(&del.split(' ').collect::<Vec<_>>());
    assert!(out.status.success(), "{out:?}");
    refused("no record");
    // No marking was set up, so no tact swept the dead one's empty directory: the test does.
    std::fs::remove_dir(&dead_cgroup).unwrap();
}

#[test]
fn the_job_is_in_its_cgroup_from_its_first_instruction() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("f");
    let dir = tempfile::tempdir().unwrap();
    let (seen, sent, read) = (
        dir.path().join("cgroup"),
        dir.path().join("sent"),
        dir.path().join("read"),
    );
    // The job's first command reads its cgroup, and its first socket is opened at once and used
    // a second later, after anything tact does after the start. It then waits (60 s at most)
    // until the test has read the classes: when it ends, tact removes them.
    let job = format!(
        "cat /proc/self/cgroup > {seen}; python3 -c \"import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         time.sleep(1.5)\n\
         for _ in range(200): s.sendto(b'x' * 1400, ('{sink}', 9)); time.sleep(0.002)\n\"; \
         touch {sent}; i=0; while [ ! -e {read} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
        seen = seen.display(),
        sink = rig.sink(),
        sent = sent.display(),
        read = read.display()
    );
    let (mut tact, log) = start_tact(&rig, dir.path(), &job);
    let cgroup = started(&rig, &tact.0, &log);
    let name = format!("/tact-{}-net", tact.0.id());
    let first = std::fs::read_to_string(&seen).unwrap();
    let v2 = first.lines().find_map(|l| l.strip_prefix("0::"));
    assert!(v2.is_some_and(|p| p.ends_with(&name)), "{first}");
    wait_for(PATIENCE, "the job to send", || sent.exists());
    let (fg, bg) = rig.classes();
    std::fs::write(&read, b"").unwrap();
    assert!(bg > 20 * 1400, "background class: {bg} bytes");
    assert!(fg < 16 << 10, "foreground class: {fg} bytes");
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("placed there before it started"), "{err}");
    let why = start_record(&log).unwrap()["gates"][0]["kernel"]["why"].clone();
    assert!(
        why.to_string().contains("placed there before it started"),
        "{why}"
    );
    cleaned_up(&rig, tact.0.id(), &cgroup);
}

/// A daemon the test started, stopped with SIGTERM however the test ends.
struct Daemon(Child);

impl Daemon {
    /// A daemon with its runtime directory and socket in `dir`, listening.
    fn start(dir: &Path) -> (Daemon, PathBuf) {
        let socket = dir.join("daemon.sock");
        let daemon = Daemon(
            tact()
                .env("TACT_RUNTIME_DIR", dir.join("daemon"))
                .arg("daemon")
                .arg("--socket")
                .arg(&socket)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for(PATIENCE, "the daemon to listen", || socket.exists());
        (daemon, socket)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        kill(self.0.id() as i32, Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

#[test]
fn tact_status_shows_the_tree_and_the_marking() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("g");
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, socket) = Daemon::start(dir.path());
    let go = dir.path().join("go");
    let job = format!(
        "python3 -c \"{}\"; while [ ! -e {go} ]; do sleep 0.05; done",
        sender(&rig.sink(), 1.0),
        go = go.display()
    );
    let socket_arg = socket.to_str().unwrap();
    let (mut run, log) = start_tact_with(&rig, dir.path(), &["--socket", socket_arg], &job);
    let cgroup = started(&rig, &run.0, &log);
    let status = |json: bool| {
        let mut cmd = tact();
        cmd.arg("status").arg("--socket").arg(&socket);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // Once the job has sent, the report's classes show its bytes in its class.
    let mut kernel = serde_json::Value::Null;
    wait_for(PATIENCE, "the job's bytes in the status", || {
        let v: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
        kernel = v["jobs"][0]["idle"]["gates"][0]["kernel"].clone();
        kernel["classes"]["bg_bytes"].as_u64().unwrap_or(0) > 20 * 1400
    });
    assert_eq!(kernel["htb_rate_bits"], 100_000_000, "{kernel}");
    assert_eq!(kernel["marking"], true, "{kernel}");
    assert!(
        kernel["why"].as_str().unwrap().contains("htb at 100mbit"),
        "{kernel}"
    );
    let text = status(false);
    let line = format!(
        "  net:{} kernel: htb at 100mbit, the job's packets marked DSCP LE, sent: ",
        rig.link
    );
    assert!(text.contains(&line), "{text}");
    std::fs::write(&go, "").unwrap();
    let code = run.0.wait().unwrap();
    let err = stderr_of(&mut run.0);
    assert_eq!(code.code(), Some(0), "{err}");
    cleaned_up(&rig, run.0.id(), &cgroup);
}

/// `tact status --json` of the daemon at `socket`.
fn status_json(socket: &Path) -> serde_json::Value {
    let out = tact()
        .arg("status")
        .arg("--socket")
        .arg(socket)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rate of the tbf the graft tests put at the root: well above the foreground's 11 Mbit/s, so
/// that the job's backlog drains early in each burst, and below what the job's flood sends.
const TBF_RATE_BITS: u64 = 50_000_000;
/// Its bucket: `burst 10kb` in tc's units (KiB).
const TBF_BURST_BYTES: u64 = 10 << 10;

/// Puts a tbf at the root of the rig's link, with the bfifo the kernel gives it.
fn add_tbf(rig: &Rig) {
    add_tbf_with(rig, TBF_RATE_BITS, "10kb");
}

/// A root tbf of `rate_bits` and `burst` (tc's units) on the rig's link, 50 ms of queue.
fn add_tbf_with(rig: &Rig, rate_bits: u64, burst: &str) {
    let rate = format!("{rate_bits}bit");
    let out = rig.outer(&[
        "tc", "qdisc", "add", "dev", &rig.link, "root", "tbf", "rate", &rate, "burst", burst,
        "latency", "50ms",
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// `tc -d qdisc show dev LINK invisible` (`invisible`: tbf's bfifo is hidden otherwise), each
/// qdisc's handle below the root blanked: the kernel's bfifo has `0:`, the one tact puts back a
/// handle of its own.
fn tbf_tree(rig: &Rig) -> Vec<String> {
    let out = rig.outer(&["tc", "-d", "qdisc", "show", "dev", &rig.link, "invisible"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut w: Vec<&str> = l.split_whitespace().collect();
            if w.get(3) == Some(&"parent") {
                w[2] = "H:";
            }
            w.join(" ")
        })
        .collect()
}

/// Whether the rig's link carries packets: the peer receives more than 10 of 100 datagrams sent
/// to the sink.
fn link_carries(rig: &Rig) -> bool {
    let received = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &rig.inner, "cat"])
            .arg(format!("/sys/class/net/{}/statistics/rx_packets", rig.peer))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = received();
    // A hundred datagrams at once (140 kB, within the 312 kB that tbf's 50 ms queue holds at 50
    // Mbit/s), not a timed sender: under load a sender of one a millisecond for 0.1 s managed
    // fewer than the 10 asked for.
    let burst = format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for _ in range(100):\n\
         \x20   try: s.sendto(b'x' * 1400, ('{}', 9))\n\
         \x20   except OSError: pass\n",
        rig.sink()
    );
    let status = rig.outer(&["python3", "-c", &burst]).status;
    assert!(status.success());
    // The last of them leaves tbf 22 ms after the first.
    std::thread::sleep(Duration::from_millis(100));
    received() > before + 10
}

/// Waits for the start of a tact that grafts its tree under the rig's tbf (of [`add_tbf`]): the
/// tree is tbf's child at twice tbf's rate, and the job's packets are marked.
fn grafted(rig: &Rig, log: &Path) {
    grafted_under(rig, log, TBF_RATE_BITS);
}

/// [`grafted`], under a tbf of `tbf_bits`.
fn grafted_under(rig: &Rig, log: &Path, tbf_bits: u64) {
    wait_for(PATIENCE, "tact's start record", || {
        start_record(log).is_some()
    });
    let start = start_record(log).unwrap();
    let kernel = &start["gates"][0]["kernel"];
    assert_eq!(kernel["htb_rate_bits"], 2 * tbf_bits, "{start}");
    assert_eq!(kernel["marking"], true, "{start}");
    assert!(
        kernel["why"].to_string().contains("grafted under tbf"),
        "{start}"
    );
    let tree = tbf_tree(rig);
    assert!(tree[0].starts_with("qdisc tbf "), "{tree:?}");
    assert!(
        tree.iter().any(|l| l.starts_with("qdisc htb H: parent ")),
        "{tree:?}"
    );
}

#[test]
fn the_tree_is_grafted_under_a_tbf_which_keeps_its_rate_and_gets_its_bfifo_back() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("h");
    add_tbf(&rig);
    let before = tbf_tree(&rig);
    assert!(
        before[1].starts_with("qdisc bfifo H: parent "),
        "{before:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let job = format!("sleep 1; python3 -c \"{}\"", flood(&rig.sink(), &go));
    // No --net-rate: the graft is the default under a tbf.
    let (mut tact, log) = spawn_tact(&rig, dir.path(), &[], &job);
    grafted(&rig, &log);
    wait_for(PATIENCE, "the job to send", || rig.classes().1 > 1 << 20);

    // tbf, not the tree (at twice its rate), sets the rate: over a second the tree lets out at
    // most what tbf's bucket allows (and one frame tbf has peeked at).
    let (t0, (f0, b0)) = (Instant::now(), rig.classes());
    std::thread::sleep(Duration::from_secs(1));
    let ((f1, b1), t1) = (rig.classes(), Instant::now());
    let sent = (f1 + b1 - f0 - b0) as f64;
    let cap =
        TBF_RATE_BITS as f64 / 8.0 * (t1 - t0).as_secs_f64() + (TBF_BURST_BYTES + 1514) as f64;
    eprintln!(
        "the tree sent {:.2} MB in {:.2} s under tbf's {} Mbit/s (at most {:.2} MB)",
        sent / 1e6,
        (t1 - t0).as_secs_f64(),
        TBF_RATE_BITS / 1_000_000,
        cap / 1e6
    );
    assert!(sent <= cap, "{sent} bytes in a second, tbf allows {cap}");
    assert!(
        sent > cap / 2.0,
        "{sent} bytes: the job's flood did not fill tbf"
    );

    // The foreground goes first: the job's class is quiet while a burst flows, busy after.
    three_bursts_go_before_the_job(&rig);

    std::fs::write(&go, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("grafted under tbf"), "{err}");
    assert!(err.contains("restored bfifo limit"), "{err}");
    assert_eq!(tbf_tree(&rig), before);
    assert!(link_carries(&rig));
    assert!(tree_records(dir.path()).is_empty());

    // Why tact replaces tbf's child in one step: deleted, tbf is left a noop that drops all.
    let out = rig.outer(&[
        "tc",
        "qdisc",
        "del",
        "dev",
        &rig.link,
        "parent",
        &before_parent(&before),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !link_carries(&rig),
        "tbf without a child still carried packets"
    );
}

/// The parent (`8001:1`) of tbf's child in a [`tbf_tree`].
fn before_parent(tree: &[String]) -> String {
    let w: Vec<&str> = tree[1].split_whitespace().collect();
    w[4].to_string()
}

#[test]
fn sigterm_and_sigkill_of_tact_give_tbf_its_bfifo_back() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("i");
    add_tbf(&rig);
    let before = tbf_tree(&rig);
    let dir = tempfile::tempdir().unwrap();
    let (mut tact, log) = spawn_tact(&rig, dir.path(), &[], "exec sleep 600");
    grafted(&rig, &log);
    kill(tact.0.id() as i32, Signal::SIGTERM);
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("restored bfifo limit"), "{err}");
    assert_eq!(tbf_tree(&rig), before);
    assert!(tree_records(dir.path()).is_empty());

    // SIGKILL leaves the graft and its record; the next tact puts the bfifo back, even one told
    // to leave the tbf alone.
    std::fs::remove_file(&log).unwrap();
    let (mut tact, log) = spawn_tact(&rig, dir.path(), &[], "sleep 2");
    grafted(&rig, &log);
    let dead = tact.0.id();
    kill(dead as i32, Signal::SIGKILL);
    tact.0.wait().unwrap();
    assert_ne!(tbf_tree(&rig), before);
    assert_eq!(tree_records(dir.path()).len(), 1);
    let (mut tact, _) = spawn_tact(&rig, dir.path(), &["--net-leave-tbf"], "sleep 0.5");
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("removed tact {dead}'s htb tree on {}", rig.link)),
        "{err}"
    );
    assert!(
        err.contains("--net-leave-tbf: tact leaves it alone"),
        "{err}"
    );
    assert_eq!(tbf_tree(&rig), before);
    assert!(link_carries(&rig));
    assert!(tree_records(dir.path()).is_empty());
    // The killed tact's nftables table, swept by no tact here (none set a marking up), and
    // its cgroup directory, emptied when its job ended.
    let table = format!("tact-{dead}");
    let out = rig.outer(&["nft", "delete", "table", "inet", &table]);
    assert!(out.status.success(), "{out:?}");
    let cgroup = cgroup2_dir().unwrap().join(format!("tact-{dead}-net"));
    wait_for(PATIENCE, "the killed tact's job to end", || {
        std::fs::remove_dir(&cgroup).is_ok() || !cgroup.exists()
    });
}

/// The log's records of `kind`.
fn records(log: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == kind)
        .collect()
}

/// The PI of the log's last `counters` record, once it is at least `after` seconds in.
fn pi_after(log: &Path, after: f64) -> Option<f64> {
    let last = records(log, "counters").pop()?;
    (last["t"].as_f64()? >= after).then(|| last["gates"][0]["pi"].as_f64().unwrap())
}

/// `--preempt auto` with tact's tree grafted under a tbf: the tree's presence reaches the tuner,
/// which starts at p = 0 and keeps it while the job's flood fills the tree at tbf's rate (the
/// tree holds the queue); a job that sends a fifth of tbf's rate leaves the tree without a queue
/// to reorder, and the tuner takes the PI back from p₀; with `--net-leave-tbf` (no tree) the
/// tuner starts at p₀ as it always did.
#[test]
fn auto_pi_is_0_while_the_grafted_tree_holds_the_jobs_queue() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("j");
    // Not the other tests' 50 Mbit/s with a 10 kB burst: under load (this binary's tests in
    // parallel beside four busy loops on two cores) that link carried 68-85% of its rate,
    // second after second, with the flood queued in the tree (also with the flood at nice -10),
    // and the verdict went (the tree holds a queue when it sends at least 90%): 3 runs of 3
    // failed. Likely a loaded kernel dequeues late, and 10 kB is only 1.6 ms of tokens. At 20
    // Mbit/s with 32 kB (13 ms of tokens, 40% of the packets) 6 runs of 6 passed.
    add_tbf_with(&rig, 20_000_000, "32kb");
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let auto = ["--preempt", "auto"];

    // The flood: tbf's rate, all of it through the job's class.
    let job = format!("python3 -c \"{}\"", flood(&rig.sink(), &go));
    let (mut tact, log) = spawn_tact(&rig, dir.path(), &auto, &job);
    grafted_under(&rig, &log, 20_000_000);
    let gate = &start_record(&log).unwrap()["gates"][0];
    assert_eq!(gate["auto"], true, "{gate}");
    assert_eq!(gate["pi"], 0.0, "{gate}");
    let why = gate["why"].as_str().unwrap();
    assert!(
        why.contains("0ms while tact's priority tree preempts"),
        "{why}"
    );
    // Looks at the tree come a second apart, and one judges only when the job sent in the one
    // before (the second it starts in reads short of the rate), so by 4.5 s two verdicts have
    // been made on the job's flood (a second with less than 1% of the tree's rate from it
    // proves nothing).
    wait_for(PATIENCE, "the job to send", || rig.classes().1 > 1 << 20);
    let pi = wait_for_some(PATIENCE, "4.5 s of counters", || pi_after(&log, 4.5));
    assert_eq!(
        pi,
        0.0,
        "{:?}\n{:#?}",
        records(&log, "pi"),
        records(&log, "counters")
    );
    assert!(records(&log, "pi").is_empty(), "{:?}", records(&log, "pi"));
    std::fs::write(&go, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("preemption interval 0ms, tuned"), "{err}");

    // 1400 bytes a millisecond, 11 of tbf's 20 Mbit/s: no queue in the tree.
    std::fs::remove_file(&log).unwrap();
    let job = format!("python3 -c \"{}\"", sender(&rig.sink(), 6.0));
    let (mut tact, log) = spawn_tact(&rig, dir.path(), &auto, &job);
    let back = wait_for_some(PATIENCE, "the tuner to take the PI back", || {
        records(&log, "pi").into_iter().next()
    });
    let why = back["why"].as_str().unwrap();
    assert_eq!(back["pi"], 0.002, "p₀ = 2·τ̂: {back}");
    assert!(why.contains("the queue is not in the tree"), "{why}");
    let status = tact.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut tact.0));

    // No tree: the tuner as it always was, from p₀ = 2 ms.
    std::fs::remove_file(&log).unwrap();
    let (mut tact, log) = spawn_tact(
        &rig,
        dir.path(),
        &["--preempt", "auto", "--net-leave-tbf"],
        "sleep 0.5",
    );
    let status = tact.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut tact.0));
    let gate = &start_record(&log).unwrap()["gates"][0];
    assert_eq!(gate["pi"], 0.002, "{gate}");
    assert!(!gate["why"].as_str().unwrap().contains("tree"), "{gate}");
}

/// A third namespace behind the rig's outer one, as a container's: a veth from `outer`
/// (`host_end` there) to `ns`, whose default route goes through `outer` to the sink; deleted on
/// drop (its veth with it).
struct JobNs {
    ns: String,
    host_end: String,
}

impl JobNs {
    fn new(rig: &Rig, tag: &str) -> JobNs {
        let id = std::process::id();
        let job = JobNs {
            ns: format!("tact-test-netk-{tag}j-{id}"),
            host_end: format!("tk{tag}h{}", id % 100_000),
        };
        let inside = format!("tk{tag}j{}", id % 100_000);
        let net = tag.as_bytes()[0] - b'a' + 1;
        let (host, addr) = (format!("10.98.{net}.1"), format!("10.98.{net}.2/24"));
        ip(&["netns", "add", &job.ns]);
        ip(&[
            "-n",
            &rig.outer,
            "link",
            "add",
            &job.host_end,
            "type",
            "veth",
            "peer",
            "name",
            &inside,
            "netns",
            &job.ns,
        ]);
        ip(&[
            "-n",
            &rig.outer,
            "addr",
            "add",
            &format!("{host}/24"),
            "dev",
            &job.host_end,
        ]);
        ip(&["-n", &job.ns, "addr", "add", &addr, "dev", &inside]);
        ip(&["-n", &rig.outer, "link", "set", &job.host_end, "up"]);
        ip(&["-n", &job.ns, "link", "set", &inside, "up"]);
        ip(&["-n", &job.ns, "route", "add", "default", "via", &host]);
        let back = format!("10.98.{net}.0/24");
        let via = format!("10.97.{net}.1");
        ip(&["-n", &rig.inner, "route", "add", &back, "via", &via]);
        let out = rig.outer(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
        assert!(out.status.success(), "{out:?}");
        job
    }
}

impl Drop for JobNs {
    fn drop(&mut self) {
        Command::new("ip")
            .args(["netns", "del", &self.ns])
            .output()
            .ok();
    }
}

/// An unmodified job in a network namespace of its own (a member of the job's tree: the root
/// stays in tact's), whose packets tact's namespace forwards out of the watched link: tact marks
/// them at the ingress of the veth they enter through, so they land in the job's class and the
/// foreground goes first; when the member leaves, the marking goes, and all of it at the end.
/// Without the ingress chain the job's packets would be the foreground class's (the flood sets
/// no DSCP), and the wait for the job's class below would time out.
#[test]
fn packets_forwarded_from_the_jobs_own_namespace_are_marked_into_its_class() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("w");
    let ns = JobNs::new(&rig, "w");
    let dir = tempfile::tempdir().unwrap();
    let (go, done) = (dir.path().join("go"), dir.path().join("done"));
    let job = format!(
        "ip netns exec {} python3 -c \"{}\"; while [ ! -e {} ]; do sleep 0.1; done",
        ns.ns,
        flood(&rig.sink(), &go),
        done.display()
    );
    let (mut tact, log) = start_tact(&rig, dir.path(), &job);
    let cgroup = started(&rig, &tact.0, &log);
    let table = format!("tact-{}", tact.0.id());
    let chains = || {
        let out = rig.outer(&["nft", "list", "table", "inet", &table]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for(PATIENCE, "the ingress chain on the job's veth", || {
        chains().contains(&format!("device \"{}\"", ns.host_end))
    });
    wait_for(PATIENCE, "the job's class to carry its flood", || {
        rig.classes().1 > 1 << 20
    });
    // The flood alone: all of it in the job's class, the foreground class quiet.
    the_jobs_class_carries_the_flood(&rig, "the job alone");
    three_bursts_go_before_the_job(&rig);

    // The member that was in the namespace exits: its chain goes within a second or so.
    std::fs::write(&go, "").unwrap();
    wait_for(
        PATIENCE,
        "the ingress chain to go with the job's member",
        || !chains().contains("chain from-"),
    );
    std::fs::write(&done, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("enters tact's through veth {}", ns.host_end)),
        "{err}"
    );
    assert!(err.contains("no longer marked"), "{err}");
    cleaned_up(&rig, tact.0.id(), &cgroup);
}

/// The rules of table `inet tact-PID` in the rig's outer namespace (empty when it is gone).
fn table_of(rig: &Rig, pid: u32) -> String {
    let out = rig.outer(&["nft", "list", "table", "inet", &format!("tact-{pid}")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tact attach --idle net:LINK --net-rate 100mbit PID` in the rig's outer namespace.
fn attach(rig: &Rig, dir: &Path, pid: u32) -> (Running, PathBuf) {
    let pid = pid.to_string();
    tact_in_outer(
        rig,
        dir,
        true,
        "attach",
        &["--net-rate", "100mbit"],
        &[&pid],
    )
}

/// Waits for an attached tact's start: its tree up, and the packets forwarded from the
/// process's namespace marked at `veth` from the start (the process was in it already), its
/// sockets not (it stays in its own cgroup: no directory made for it).
fn attached(rig: &Rig, tact: &Child, log: &Path, veth: &str) {
    wait_for(PATIENCE, "tact's start record", || {
        start_record(log).is_some()
    });
    let start = start_record(log).unwrap();
    let kernel = &start["gates"][0]["kernel"];
    assert_eq!(kernel["htb_rate_bits"], 100_000_000, "{start}");
    assert_eq!(kernel["marking"], true, "{start}");
    let why = kernel["why"].as_str().unwrap();
    assert!(
        why.contains("tact attach leaves the process in its own cgroup") && why.contains(veth),
        "{why}"
    );
    assert!(
        table_of(rig, tact.id()).contains(&format!("device \"{veth}\"")),
        "{}",
        table_of(rig, tact.id())
    );
    let cgroup = cgroup2_dir()
        .unwrap()
        .join(format!("tact-{}-net", tact.id()));
    assert!(!cgroup.exists(), "{} was made", cgroup.display());
}

/// After a tact that made no cgroup directory: the link has its default root qdisc again and
/// the table is gone.
fn tree_and_table_gone(rig: &Rig, tact_pid: u32) {
    let qdisc = rig.root_qdisc();
    assert!(
        qdisc.contains(" 0: root") && !qdisc.contains("htb"),
        "{qdisc}"
    );
    let tables = rig.nft_tables();
    assert!(!tables.contains(&format!("tact-{tact_pid}")), "{tables}");
}

/// `tact attach --idle net` on a running, unmodified UDP flood in a network namespace of its
/// own (a container's): its packets forwarded into tact's namespace are marked at the veth's
/// ingress, so its class carries them and the foreground class stays quiet; the chain and the
/// table go when tact exits (SIGTERM, leaving the flood running; the flood's exit), and those of
/// a SIGKILLed attach are swept by the next one. (Until 26 Nov an attached process got no
/// marking at all: no chain, and the flood in the foreground class.)
#[test]
fn an_attached_process_in_its_own_namespace_has_its_forwarded_packets_marked() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("x");
    let ns = JobNs::new(&rig, "x");
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let mut flood_job = Running(
        Command::new("ip")
            .args(["netns", "exec", &ns.ns, "python3", "-c"])
            .arg(flood(&rig.sink(), &go))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = flood_job.0.id();

    // Attached: everything the flood sends goes to the job's class.
    let (mut tact, log) = attach(&rig, dir.path(), pid);
    attached(&rig, &tact.0, &log, &ns.host_end);
    wait_for(PATIENCE, "the job's class to carry the flood", || {
        rig.classes().1 > 1 << 20
    });
    the_jobs_class_carries_the_flood(&rig, "attached");
    // SIGTERM: tact stops regulating, the process runs on, the chain and table go.
    kill(tact.0.id() as i32, Signal::SIGTERM);
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(
        err.contains(&format!("enters tact's through veth {}", ns.host_end)),
        "{err}"
    );
    tree_and_table_gone(&rig, tact.0.id());
    assert!(
        flood_job.0.try_wait().unwrap().is_none(),
        "the flood ended with tact"
    );

    // SIGKILL leaves the table (its chain) and the tree; the next attach sweeps both.
    std::fs::remove_file(&log).unwrap();
    let (mut tact, log) = attach(&rig, dir.path(), pid);
    attached(&rig, &tact.0, &log, &ns.host_end);
    let dead = tact.0.id();
    kill(dead as i32, Signal::SIGKILL);
    tact.0.wait().unwrap();
    assert!(table_of(&rig, dead).contains("chain from-"));
    std::fs::remove_file(&log).unwrap();
    let (mut tact, log) = attach(&rig, dir.path(), pid);
    attached(&rig, &tact.0, &log, &ns.host_end);
    assert_eq!(table_of(&rig, dead), "", "the killed tact's table is left");

    // The flood's exit ends tact, which removes its own.
    std::fs::write(&go, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("removed the nftables table inet tact-{dead}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("removed tact {dead}'s htb tree on {}", rig.link)),
        "{err}"
    );
    tree_and_table_gone(&rig, tact.0.id());
    assert!(tree_records(dir.path()).is_empty());
    flood_job.0.wait().unwrap();
}

/// A job whose member enters a network namespace of its own only after tact's start (as the
/// bench's bg sender does through `ip netns exec`), with no cgroup2 for the socket rule (as in
/// the bench's tbf rig): the start says its packets are not marked, and a `marking` record,
/// naming the veth and its chain, says when they are (and one more when the member has left);
/// `tact status` follows. (Until 26 Nov the log and the status kept the start's `marking:
/// false` while the chain marked the flood.)
#[test]
fn a_job_that_enters_its_namespace_after_the_start_gets_a_marking_record() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let rig = Rig::new("y");
    let ns = JobNs::new(&rig, "y");
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, socket) = Daemon::start(dir.path());
    let log = dir.path().join("idle.jsonl");
    let (go, done) = (dir.path().join("go"), dir.path().join("done"));
    // The member enters the namespace once the start record is written.
    let job = format!(
        "until grep -q '\"start\"' {log}; do sleep 0.05; done; ip netns exec {ns} python3 -c \
         \"{flood}\"; while [ ! -e {done} ]; do sleep 0.1; done",
        log = log.display(),
        ns = ns.ns,
        flood = flood(&rig.sink(), &go),
        done = done.display()
    );
    let (mut tact, log) = tact_in_outer(
        &rig,
        dir.path(),
        false,
        "run",
        &[
            "--net-rate",
            "100mbit",
            "--socket",
            socket.to_str().unwrap(),
        ],
        &["--", "sh", "-c", &job],
    );
    wait_for(PATIENCE, "tact's start record", || {
        start_record(&log).is_some()
    });
    let start = start_record(&log).unwrap();
    let kernel = &start["gates"][0]["kernel"];
    assert_eq!(kernel["htb_rate_bits"], 100_000_000, "{start}");
    assert_eq!(kernel["marking"], false, "{start}");

    let label = format!("net:{}", rig.link);
    let began = wait_for_some(PATIENCE, "a marking record", || {
        records(&log, "marking").into_iter().next()
    });
    assert_eq!(began["resource"], label.as_str(), "{began}");
    assert_eq!(began["marked"], true, "{began}");
    let why = began["why"].as_str().unwrap();
    assert!(
        why.contains(&format!("veth {}, chain from-", ns.host_end)),
        "{why}"
    );
    wait_for(PATIENCE, "the job's class to carry its flood", || {
        rig.classes().1 > 1 << 20
    });
    let kernel = wait_for_some(PATIENCE, "the status to show the marking", || {
        let kernel = status_json(&socket)["jobs"][0]["idle"]["gates"][0]["kernel"].clone();
        (kernel["marking"] == true).then_some(kernel)
    });
    let why = kernel["why"].as_str().unwrap();
    assert!(
        why.contains("since t=") && why.contains(&ns.host_end),
        "{kernel}"
    );

    std::fs::write(&go, "").unwrap();
    let ended = wait_for_some(PATIENCE, "a second marking record", || {
        records(&log, "marking").into_iter().nth(1)
    });
    assert_eq!(ended["marked"], false, "{ended}");
    assert!(
        ended["why"].as_str().unwrap().contains(&ns.host_end),
        "{ended}"
    );
    assert!(ended["t"].as_f64() > began["t"].as_f64(), "{began} {ended}");
    wait_for(PATIENCE, "the status to show the marking gone", || {
        status_json(&socket)["jobs"][0]["idle"]["gates"][0]["kernel"]["marking"] == false
    });
    std::fs::write(&done, "").unwrap();
    let status = tact.0.wait().unwrap();
    let err = stderr_of(&mut tact.0);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("are marked DSCP LE from now on"), "{err}");
    assert_eq!(records(&log, "marking").len(), 2, "{err}");
    tree_and_table_gone(&rig, tact.0.id());
}
