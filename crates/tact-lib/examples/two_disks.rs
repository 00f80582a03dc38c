//! Figure 9 of MS Manners (Douceur & Bolosky, SOSP 1999, §9.5) on this machine: two regulated
//! threads of one program, each reading its own disk, one with a higher priority. Only one of
//! them runs at a time (time-multiplex isolation, §4.5); each has its own regulator, so a thread
//! whose disk is busy with more important work backs off while the other keeps going.
//!
//! ```text
//! cargo run --release -p tact-lib --example two_disks -- DISK_A DISK_B \
//!     --duration 150s --priorities 1,0 --out trace.jsonl [--testpoint 100ms] [--bootstrap 50]
//!     [--probation 0s] [--chunk 1MiB] [--nice 19] [--passes 1] [--warmup 1s] [--unregulated]
//! ```
//!
//! Each thread reads its device with O_DIRECT in `--chunk` blocks from start to end and over
//! again, folds every block into a checksum (`--passes` times: the CPU work of a scanner that
//! computes signatures, like the paper's Groveler) and calls `tact_lib::testpoint(index, &[bytes])`
//! after each block (`index` 0 for thread A, 1 for B). Each thread is a unit of its own, with its
//! own regulator; distinct indices also keep their calibrated targets apart in the saved state
//! (§7.1: "by calling the testpoint function with a distinct metric index, each thread isolates
//! its progress from other threads"), since a unit that registers seeds its targets from the
//! process's, index by index. Threads run at CPU nice `--nice` (the Groveler's CPU
//! priority was low too).
//!
//! Priorities: with the strict priorities of the arbiter, the low-priority thread would never run
//! (and never calibrate) while the high one is eligible. So the two bootstrap one after the other,
//! each running alone, before their priorities apply (see [`Staging`]); `--priorities-now` sets
//! them from the start instead. With equal priorities they share the token by decay usage.
//!
//! `--unregulated`: the same threads without any testpoint, both reading at once.
//!
//! Output, one JSON object per line, times in seconds of CLOCK_MONOTONIC (Python's
//! `time.monotonic()`):
//! - `{"kind":"start", ...}` the settings;
//! - `{"kind":"chunk","thread":"A","t_start":..,"t_end":..,"bytes":..}` for every block: the
//!   thread was executing (holding the run token) from `t_start` to `t_end`;
//! - `{"kind":"wait","thread":"A","t_start":..,"t_end":..,"suspended":..,"waited":..}` for every
//!   testpoint that blocked for 1 ms or more, with the seconds of it spent suspended (its own
//!   progress was poor) and waiting for the other thread's turn;
//! - `{"kind":"calibrated","thread":"A","t":..}` when a thread's bootstrap is over;
//! - `{"kind":"priority","thread":"A","t":..,"priority":..,"final":..}` when a thread sets its
//!   priority (temporary ones during the staged calibration, then its own: `final`);
//! - `{"kind":"summary","thread":"A", ...}` the unit's counters at the end.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tact_lib::{Config, Phase, PoliteConfig, UnitStats};

const ALIGN: usize = 4096;

struct Args {
    disks: [PathBuf; 2],
    duration: Duration,
    priorities: [i32; 2],
    out: PathBuf,
    testpoint: Option<Duration>,
    bootstrap: u32,
    probation: Duration,
    chunk: usize,
    nice: i32,
    passes: u32,
    unregulated: bool,
    priorities_now: bool,
    warmup: Duration,
}

const USAGE: &str =
    "usage: two_disks DISK_A DISK_B --duration 150s --priorities 1,0 --out FILE.jsonl \
[--testpoint 100ms] [--bootstrap 50] [--probation 0s] [--chunk 1MiB] [--nice 19] [--passes 1] \
[--warmup 1s] [--unregulated] [--priorities-now]";

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let n: usize = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let m = match mult.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        _ => return Err(format!("bad size unit in {s:?} (use KiB or MiB)")),
    };
    Ok(n * m)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("bad duration {s:?}: {e}"))
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut disks = Vec::new();
    let mut duration = None;
    let mut priorities = [1, 0];
    let mut out = None;
    let mut testpoint = None;
    let mut bootstrap = 50;
    let mut probation = Duration::ZERO;
    let mut chunk = 1 << 20;
    let mut nice = 19;
    let mut passes = 1;
    let mut unregulated = false;
    let mut priorities_now = false;
    let mut warmup = Duration::ZERO;
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--duration" => duration = Some(parse_duration(&value("--duration")?)?),
            "--priorities" => {
                let v = value("--priorities")?;
                let p: Vec<i32> = v
                    .split(',')
                    .map(|x| x.trim().parse::<i32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("--priorities takes two integers A,B, got {v:?}"))?;
                if p.len() != 2 {
                    return Err(format!("--priorities takes two integers A,B, got {v:?}"));
                }
                priorities = [p[0], p[1]];
            }
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--testpoint" => testpoint = Some(parse_duration(&value("--testpoint")?)?),
            "--bootstrap" => {
                let v = value("--bootstrap")?;
                bootstrap = v
                    .parse()
                    .ok()
                    .filter(|&b| b >= 1)
                    .ok_or_else(|| format!("--bootstrap takes a count >= 1, got {v:?}"))?;
            }
            "--probation" => probation = parse_duration(&value("--probation")?)?,
            "--chunk" => {
                chunk = parse_size(&value("--chunk")?)?;
                if chunk == 0 || chunk % ALIGN != 0 {
                    return Err(format!("--chunk must be a multiple of {ALIGN} bytes"));
                }
            }
            "--nice" => {
                let v = value("--nice")?;
                nice = v
                    .parse()
                    .ok()
                    .filter(|n| (-20..=19).contains(n))
                    .ok_or_else(|| format!("--nice takes -20..19, got {v:?}"))?;
            }
            "--passes" => {
                let v = value("--passes")?;
                passes = v
                    .parse()
                    .map_err(|_| format!("--passes takes a count, got {v:?}"))?;
            }
            "--warmup" => warmup = parse_duration(&value("--warmup")?)?,
            "--unregulated" => unregulated = true,
            "--priorities-now" => priorities_now = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
            _ => disks.push(PathBuf::from(arg)),
        }
    }
    let [a, b]: [PathBuf; 2] = disks
        .try_into()
        .map_err(|_| format!("two device paths expected\n{USAGE}"))?;
    Ok(Args {
        disks: [a, b],
        duration: duration.ok_or_else(|| format!("--duration is required\n{USAGE}"))?,
        priorities,
        out: out.ok_or_else(|| format!("--out is required\n{USAGE}"))?,
        testpoint,
        bootstrap,
        probation,
        chunk,
        nice,
        passes,
        unregulated,
        priorities_now,
        warmup,
    })
}

/// Whether the threads calibrate one after the other before their priorities apply.
fn regulated_staging(args: &Args) -> bool {
    !args.unregulated && !args.priorities_now && args.priorities[0] != args.priorities[1]
}

/// CLOCK_MONOTONIC in seconds, the clock of Python's `time.monotonic()`.
fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What one thread reports to the main thread.
#[derive(Default)]
struct Shared {
    records: Vec<Value>,
    stats: Option<UnitStats>,
    bytes: u64,
    chunks: u64,
    /// Wall time spent checksumming (the CPU work).
    checksum_s: f64,
}

struct Reader {
    name: &'static str,
    file: File,
    size: u64,
    chunk: usize,
}

impl Reader {
    fn open(name: &'static str, path: &PathBuf, chunk: usize) -> Result<Self, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| format!("{}: cannot open with O_DIRECT: {e}", path.display()))?;
        let size = file
            .seek(SeekFrom::End(0))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let usable = size / ALIGN as u64 * ALIGN as u64;
        if usable < chunk as u64 {
            return Err(format!(
                "{}: {size} bytes, smaller than one chunk ({chunk})",
                path.display()
            ));
        }
        Ok(Reader {
            name,
            file,
            size: usable,
            chunk,
        })
    }
}

/// Folds a block into a running checksum, `passes` times (FNV-1a over 64-bit words).
fn checksum(mut h: u64, block: &[u8], passes: u32) -> u64 {
    for _ in 0..passes {
        for w in block.chunks_exact(8) {
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn set_thread_nice(nice: i32) {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id only changes it.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) != 0 {
            eprintln!(
                "two_disks: cannot set nice {nice}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Calibration before the priorities apply (when they differ and `--priorities-now` is not
/// given): the high-priority thread H bootstraps first, running alone; then it steps below the low
/// one L, which bootstraps alone in turn; then L steps below H's place so that H gets the token
/// back and sets its own priority, after which L restores its own. Each target is thus learnt
/// from continuous running, as the thread will run once calibrated: learnt while the two take
/// turns, it would be learnt from reads that start on a bandwidth limiter that has been idle
/// for a turn, which lets a short burst through (blk-throttle grants a slice's worth of bytes at
/// once), and would be too high for continuous running.
const H_BOOT: u8 = 0;
const L_BOOT: u8 = 1;
const H_FINAL: u8 = 2;
const DONE: u8 = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    High,
    Low,
    /// No staging: the priority is set before the first testpoint.
    Fixed,
}

struct Plan {
    index: u32,
    priority: i32,
    /// The other thread's priority (for the staging's temporary priorities).
    other: i32,
    role: Role,
    regulated: bool,
    nice: i32,
    passes: u32,
    warmup: Duration,
    bootstrap: u64,
}

/// Where a thread is in the staged calibration, and what it does next.
struct Staging {
    role: Role,
    stage: Arc<AtomicU8>,
    calibrated: bool,
    final_set: bool,
}

impl Staging {
    /// A priority to set now, if any, and whether it is the thread's final one. `calibrated`:
    /// the thread's regulator has left its bootstrap.
    fn step(&mut self, calibrated: bool, plan: &Plan) -> Option<(i32, bool)> {
        let low = plan.priority.min(plan.other);
        let stage = self.stage.load(Ordering::SeqCst);
        let newly = calibrated && !self.calibrated;
        self.calibrated |= calibrated;
        match self.role {
            Role::Fixed => None,
            Role::High if newly && stage == H_BOOT => {
                self.stage.store(L_BOOT, Ordering::SeqCst);
                Some((low - 1, false))
            }
            Role::High if stage == H_FINAL && !self.final_set => {
                self.final_set = true;
                self.stage.store(DONE, Ordering::SeqCst);
                Some((plan.priority, true))
            }
            Role::Low if self.calibrated && stage == L_BOOT => {
                self.stage.store(H_FINAL, Ordering::SeqCst);
                Some((low - 2, false))
            }
            Role::Low if stage == DONE && !self.final_set => {
                self.final_set = true;
                Some((plan.priority, true))
            }
            _ => None,
        }
    }
}

fn run(
    reader: Reader,
    plan: Plan,
    shared: Arc<Mutex<Shared>>,
    stage: Arc<AtomicU8>,
) -> Result<(), String> {
    set_thread_nice(plan.nice);
    // A buffer aligned for O_DIRECT, without unsafe code: over-allocate and slice.
    let mut raw = vec![0u8; reader.chunk + ALIGN];
    let off = raw.as_ptr().align_offset(ALIGN);
    let buf = &mut raw[off..off + reader.chunk];
    let name = reader.name;
    let mut pos = 0u64;
    let mut sum = 0xcbf2_9ce4_8422_2325u64;
    let mut staging = Staging {
        role: plan.role,
        stage,
        calibrated: false,
        final_set: false,
    };
    let mut checked = 0.0;
    let mut last = UnitStats {
        phase: Phase::Regulated,
        priority: 0,
        testpoints: 0,
        suspensions: 0,
        suspended: Duration::ZERO,
        waited: Duration::ZERO,
        hung: 0,
        last: None,
    };
    if plan.regulated {
        // Warm-up: the emulated disks (a cgroup read limit) let a burst through when a read
        // follows a pause, which raises the target a bootstrap learns on its first samples above
        // the sustained rate. Both threads read unregulated for `warmup` before they register
        // (both still register before anything is calibrated, so both bootstrap). This helps
        // the thread that bootstraps first; the other one's bootstrap follows the first one's.
        let warm_until = mono() + plan.warmup.as_secs_f64();
        while mono() < warm_until {
            if pos + reader.chunk as u64 > reader.size {
                pos = 0;
            }
            let n = reader
                .file
                .read_at(buf, pos)
                .map_err(|e| format!("thread {name}: read at {pos}: {e}"))?;
            pos = if n == 0 { 0 } else { pos + n as u64 };
            sum = checksum(sum, &buf[..n], plan.passes);
        }
        shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .records
            .push(json!({"kind": "registered", "thread": name, "t": mono()}));
        // The staging starts from the final priorities too: H runs first.
        tact_lib::set_priority(plan.priority).expect("a priority within -100..=100");
        // Registers the thread; its first call waits for the token like any other.
        tact_lib::testpoint(plan.index, &[0.0]).map_err(|e| format!("testpoint: {e}"))?;
    }
    loop {
        let t_start = mono();
        if pos + reader.chunk as u64 > reader.size {
            pos = 0;
        }
        let n = reader
            .file
            .read_at(buf, pos)
            .map_err(|e| format!("thread {name}: read at {pos}: {e}"))?;
        if n == 0 {
            pos = 0;
            continue;
        }
        pos += n as u64;
        let t_read = mono();
        sum = checksum(sum, &buf[..n], plan.passes);
        let t_end = mono();
        {
            let mut sh = shared.lock().unwrap_or_else(|p| p.into_inner());
            sh.bytes += n as u64;
            sh.chunks += 1;
            sh.checksum_s += t_end - t_read;
            sh.records.push(json!({
                "kind": "chunk", "thread": name, "t_start": t_start, "t_end": t_end, "bytes": n,
            }));
        }
        if !plan.regulated {
            std::hint::black_box(sum);
            continue;
        }
        let tp0 = mono();
        tact_lib::testpoint(plan.index, &[n as f64]).map_err(|e| format!("testpoint: {e}"))?;
        let tp1 = mono();
        let blocked = tp1 - tp0 >= 1e-3;
        // Look at the unit's counters after a testpoint that blocked, and every 100 ms
        // otherwise (for the staging and the final summary).
        if !blocked && tp1 - checked < 0.1 {
            continue;
        }
        checked = tp1;
        let Some(now) = tact_lib::stats() else {
            continue;
        };
        let mut rec = Vec::new();
        if blocked {
            // A suspension, a turn of the other thread, or both.
            let suspended = now.suspended.saturating_sub(last.suspended).as_secs_f64();
            let waited = now.waited.saturating_sub(last.waited).as_secs_f64();
            rec.push(json!({
                "kind": "wait", "thread": name, "t_start": tp0, "t_end": tp1,
                "suspended": suspended, "waited": waited,
                "decision": now.last.as_ref().map(|d| format!("{d:?}")),
            }));
            last = now.clone();
        }
        // A unit that registers once the process has calibrated targets starts regulated even
        // for an index new to the process (whose target then warms up on its first samples
        // while they are already judged): count its own due testpoints as well.
        let calibrated =
            !matches!(now.phase, Phase::Bootstrap { .. }) && now.testpoints >= plan.bootstrap;
        if calibrated && !staging.calibrated {
            rec.push(json!({"kind": "calibrated", "thread": name, "t": tp1}));
        }
        if let Some((priority, is_final)) = staging.step(calibrated, &plan) {
            tact_lib::set_priority(priority).expect("a priority within -100..=100");
            rec.push(json!({
                "kind": "priority", "thread": name, "t": mono(), "priority": priority,
                "final": is_final,
            }));
        }
        let mut sh = shared.lock().unwrap_or_else(|p| p.into_inner());
        sh.records.extend(rec);
        sh.stats = Some(now);
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // A fresh supervisor from the environment (TACT_STATE_DIR, TACT_NAME...), with this run's
    // testpoint period, bootstrap length and probation.
    let mut config = Config::from_env();
    if let Some(p) = args.testpoint {
        config.polite = PoliteConfig::with_period(p);
    }
    config.polite.bootstrap = args.bootstrap;
    config.polite.probation = Some(args.probation);
    let period = config.polite.period;
    if !args.unregulated {
        if let Err(e) = tact_lib::init(config) {
            eprintln!("two_disks: {e}");
            std::process::exit(1);
        }
    }
    let mut readers = Vec::new();
    for (name, path) in ["A", "B"].into_iter().zip(&args.disks) {
        match Reader::open(name, path, args.chunk) {
            Ok(r) => readers.push(r),
            Err(e) => {
                eprintln!("two_disks: {e}");
                std::process::exit(1);
            }
        }
    }
    let out = match File::create(&args.out) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("two_disks: {}: {e}", args.out.display());
            std::process::exit(1);
        }
    };
    let t0 = mono();
    let start = json!({
        "kind": "start", "t": t0, "pid": std::process::id(),
        "disks": args.disks.iter().map(|d| d.display().to_string()).collect::<Vec<_>>(),
        "duration": args.duration.as_secs_f64(), "priorities": args.priorities,
        "regulated": !args.unregulated, "testpoint": period.as_secs_f64(),
        "bootstrap": args.bootstrap, "probation": args.probation.as_secs_f64(),
        "chunk": args.chunk, "nice": args.nice, "passes": args.passes,
        "priorities_now": args.priorities_now, "warmup": args.warmup.as_secs_f64(), "staged_calibration": regulated_staging(&args),
    });
    let [pa, pb] = args.priorities;
    let staged = regulated_staging(&args);
    let stage = Arc::new(AtomicU8::new(H_BOOT));
    let mut shared = Vec::new();
    for (index, (reader, &priority)) in readers.into_iter().zip(&args.priorities).enumerate() {
        let sh = Arc::new(Mutex::new(Shared::default()));
        shared.push((reader.name, sh.clone()));
        let other = if index == 0 { pb } else { pa };
        let role = match (staged, priority.cmp(&other)) {
            (false, _) | (_, std::cmp::Ordering::Equal) => Role::Fixed,
            (true, std::cmp::Ordering::Greater) => Role::High,
            (true, std::cmp::Ordering::Less) => Role::Low,
        };
        let plan = Plan {
            index: index as u32,
            priority,
            other,
            role,
            regulated: !args.unregulated,
            nice: args.nice,
            passes: args.passes,
            warmup: args.warmup,
            bootstrap: u64::from(args.bootstrap),
        };
        let stage = stage.clone();
        let name = reader.name;
        std::thread::Builder::new()
            .name(format!("disk-{name}"))
            .spawn(move || {
                if let Err(e) = run(reader, plan, sh, stage) {
                    eprintln!("two_disks: {e}");
                    std::process::exit(1);
                }
            })
            .expect("spawn a reader thread");
    }
    std::thread::sleep(args.duration);
    // The threads may be inside a long suspension: take what they logged and exit without
    // joining them.
    let t_end = mono();
    let mut w = BufWriter::new(out);
    let mut lines = vec![start];
    let mut summaries = Vec::new();
    for (name, sh) in &shared {
        let sh = sh.lock().unwrap_or_else(|p| p.into_inner());
        lines.extend(sh.records.iter().cloned());
        let elapsed = t_end - t0;
        let mut summary = json!({
            "kind": "summary", "thread": name, "t": t_end, "bytes": sh.bytes,
            "mb_per_s": sh.bytes as f64 / elapsed / 1e6, "chunks": sh.chunks,
            "checksum_ms_per_chunk": sh.checksum_s * 1e3 / sh.chunks.max(1) as f64,
        });
        if let Some(s) = &sh.stats {
            summary["phase"] = json!(format!("{:?}", s.phase));
            summary["priority"] = json!(s.priority);
            summary["testpoints"] = json!(s.testpoints);
            summary["suspensions"] = json!(s.suspensions);
            summary["suspended"] = json!(s.suspended.as_secs_f64());
            summary["waited"] = json!(s.waited.as_secs_f64());
            summary["hung"] = json!(s.hung);
        }
        summaries.push(summary.clone());
        lines.push(summary);
    }
    for line in &lines {
        if let Err(e) = writeln!(w, "{line}") {
            eprintln!("two_disks: {}: {e}", args.out.display());
            std::process::exit(1);
        }
    }
    if let Err(e) = w.flush() {
        eprintln!("two_disks: {}: {e}", args.out.display());
        std::process::exit(1);
    }
    for s in summaries {
        eprintln!("two_disks: {s}");
    }
    // exit() runs the library's atexit hook, which saves the calibrated targets.
    std::process::exit(0);
}
