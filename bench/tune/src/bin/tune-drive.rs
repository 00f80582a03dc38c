//! tune-drive: runs one controller's `tact_lib::tune::Pool` against tune-service with endless
//! input (the queue never runs dry). Each task spins the front's own Pareto service time in
//! thread CPU time, then makes one request to the service over its worker's kept-alive
//! connection. Records every completion, the target history, TCC's transitions and, every
//! sampling period, the service's and its own CPU time; prints a one-line summary and writes
//! everything as JSON (`--json`).
//!
//! With `--bottleneck SRC` the pool also reports the bottleneck's utilization to the controller
//! every 100 ms, for TCC's bottleneck hint (`tcc:util=0.9`). SRC takes `tact tune --bottleneck`'s
//! forms (`tact_linux::probe::bottleneck`): `cpu:N` (the service's CPU), `disk:DEV@riops=N` (the
//! capped device's reads over the cap), `net:IF@RATE,rx` (the shaped link, seen from the
//! driver's side), and the others.
//!
//! A TCC spec (`tcc`, `tcc:KEY=V,..`) is given to the pool as TCC by type (`PoolBuilder::tcc`),
//! not as an opaque policy, so that with `psi=1` the pool reads pressure stall information for
//! it (docs/tune.md, "PSI as a saturation hint"): the machine's `/proc/pressure`, or a cgroup
//! v2 directory's `*.pressure` files with `--psi-cgroup DIR`. The record says where it read
//! and how many steps PSI decided. Every other policy goes through `policy_from_spec`.
//!
//! With `--coordinate KEY` the pool takes turns with every other pool or `tact tune` on KEY
//! (`tact_lib::tune::turns`; spec concurrency.md §6 item 4): TCC starts a cycle only when it
//! has the turn. The record then has the turns taken and the time waited for them.
//!
//! With `--external workers-file:PATH` or `--external jobserver` the driver runs no controller of
//! its own: it is the command of `tact tune --workers-file PATH` or `tact tune --jobserver`,
//! runs as many tasks at once as tact tells it, and writes its completions into `--done-file`
//! for `tact tune --completions file:PATH` (`tact_bench_tune::external`). With `--tact-log`
//! (tact's `--json-log`) its record has tact's counts and transitions, so that its steady periods
//! are measured as an in-process TCC's are.
//!
//! While it runs, stdout carries event lines for a harness that acts mid-run (run.py starts a
//! competitor once TCC is steady, or switches the service's mode at the count it holds): `started`
//! when the pool's clock starts, then `steady AT TARGET` (s since the pool's start) whenever TCC
//! enters Steady, and `target AT N` whenever a sample finds the target changed (the first
//! sample's included).

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use tact_bench_tune::cputime::{process_cpu, spin};
use tact_bench_tune::external::{self, Mode, Workers};
use tact_bench_tune::pareto::{Pareto, SHAPE};
use tact_bench_tune::protocol::Client;
use tact_bench_tune::summary::{
    first_steady, period, steady_intervals, Completion, History, Period, Sample,
};
use tact_core::tune::select::{policy_from_spec, tcc_params_from_spec, SpecError};
use tact_core::tune::{Phase, Pressure, Tcc, Transition};
use tact_lib::tune::{CoordinateMode, Pool, TurnEvent, TurnStats, Turns};
use tact_linux::probe::bottleneck::{BadSpec, Bottleneck, BottleneckSpec};
use tact_linux::probe::psi::PsiReader;
use tact_sim::SimRng;

#[derive(Parser, Debug)]
#[command(
    name = "tune-drive",
    about = "Drive tune-service with tact's pool under one controller"
)]
struct Args {
    /// Controller: tcc, tcc:KEY=V,.., static:N, aimd, vegas, gradient2, envoy, hill, vegas+,
    /// vegas++:x1=RATE.
    #[arg(long, required_unless_present = "external")]
    policy: Option<String>,
    /// No controller here: run under `tact tune`, which tells the count through a workers file
    /// (workers-file:PATH, `tact tune --workers-file PATH`) or as make's jobserver (jobserver,
    /// `tact tune --jobserver`).
    #[arg(
        long,
        value_name = "HOW",
        conflicts_with_all = ["policy", "bottleneck", "coordinate", "psi_cgroup"],
        requires = "done_file"
    )]
    external: Option<Mode>,
    /// With --external: keep the count of completed tasks in this file, for `tact tune
    /// --completions file:PATH`.
    #[arg(long, value_name = "PATH", requires = "external")]
    done_file: Option<PathBuf>,
    /// With --external: tact's `--json-log`, read at the end for its counts and transitions.
    #[arg(long, value_name = "PATH", requires = "external")]
    tact_log: Option<PathBuf>,
    /// The service's address (as printed by tune-service).
    #[arg(long)]
    addr: String,
    /// Measured seconds, after the warm-up.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Warm-up seconds (run, not measured).
    #[arg(long, default_value_t = 10.0)]
    warmup: f64,
    /// Mean front service time per task, ms of thread CPU time (Pareto, k = 2.5).
    #[arg(long, default_value_t = 1.0)]
    front_ms: f64,
    /// Most workers the pool may run (the controllers' n_max).
    #[arg(long, default_value_t = 64)]
    max: usize,
    /// The controllers' starting count (default: the online CPUs, as every tact host passes; not
    /// this process's affinity, which is one CPU under `taskset -c 0`).
    #[arg(long)]
    init: Option<usize>,
    /// Seed of the front's service times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sampling period of the CPU clocks and the target, ms.
    #[arg(long, default_value_t = 500)]
    sample_ms: u64,
    /// Write the full record here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Report this source's utilization to the controller (TCC's bottleneck hint), in `tact
    /// tune --bottleneck`'s forms: cpu:LIST, psi:RES, disk:DEV[@iops=N|riops=N|wiops=N],
    /// net:IF@RATE[,rx].
    #[arg(long, value_name = "SRC", value_parser = parse_bottleneck)]
    bottleneck: Option<BottleneckSpec>,
    /// Take turns with the other pools on KEY (turns mode, one explorer at a time; the lock
    /// directory is `tact tune --coordinate`'s).
    #[arg(long, value_name = "KEY")]
    coordinate: Option<String>,
    /// With a TCC policy that reads PSI (`tcc:psi=1`): read it from this cgroup v2 directory's
    /// `memory.pressure` and `io.pressure` instead of the machine's `/proc/pressure`.
    #[arg(long, value_name = "DIR")]
    psi_cgroup: Option<PathBuf>,
}

fn parse_bottleneck(s: &str) -> Result<BottleneckSpec, String> {
    s.parse().map_err(|e: BadSpec| e.to_string())
}

#[derive(Serialize)]
struct Report<'a> {
    policy: &'a str,
    addr: &'a str,
    warmup_s: f64,
    seconds: f64,
    front_ms: f64,
    max: usize,
    init: usize,
    seed: u64,
    /// The source whose utilization the controller was told (`--bottleneck`).
    bottleneck: Option<String>,
    /// The key the pool took turns on (`--coordinate`), the turns it took, and every wait, grant
    /// and release (s since the pool's start).
    coordinate: Option<String>,
    turns: Option<TurnStats>,
    turn_events: Vec<TurnEvent>,
    /// TCC with `psi=1`: where the pool read pressure, the steps PSI decided and its last
    /// reading (none for any other policy).
    psi: Option<PsiRecord>,
    /// The measured window, [warmup, warmup + seconds].
    window: Period,
    /// The window's part that TCC spent in Steady (none for other controllers, or before TCC
    /// reached Steady).
    steady: Option<Period>,
    /// When TCC first entered Steady, s since the pool's start.
    first_steady_s: Option<f64>,
    /// Requests that failed (the service went away or answered an error).
    errors: u64,
    /// (s since the pool's start, target): the initial target, then every change.
    targets: Vec<(f64, usize)>,
    trace: Vec<Transition>,
    samples: Vec<Sample>,
}

#[derive(Serialize)]
struct PsiRecord {
    /// `/proc/pressure (the whole machine's)` or `cgroup DIR`.
    source: String,
    /// Steps PSI decided (`Status::psi`; their transitions say `psi`).
    steps: u64,
    /// The latest reading the controller took, as fractions.
    last: Option<Pressure>,
}

thread_local! {
    /// Each worker thread keeps one connection: a thread per connection on the service's side
    /// then means a thread per in-flight request.
    static CONN: RefCell<Option<Client>> = const { RefCell::new(None) };
}

/// One request over this worker's connection, reconnecting once if it broke.
fn request(addr: &str) -> Result<()> {
    CONN.with(|cell| {
        let mut conn = cell.borrow_mut();
        for attempt in 0..2 {
            if conn.is_none() {
                *conn = Some(Client::connect(addr).with_context(|| format!("connect {addr}"))?);
            }
            match conn.as_mut().map(Client::request) {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) if attempt == 1 => return Err(e.into()),
                _ => *conn = None,
            }
        }
        unreachable!("the second attempt returns")
    })
}

struct Shared {
    origin: Instant,
    addr: String,
    completions: Mutex<Vec<Completion>>,
    /// Tasks completed (shared with `--done-file`'s writer).
    done: Arc<AtomicU64>,
    errors: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn task(&self, front: Duration) {
        let start = Instant::now();
        spin(front);
        match request(&self.addr) {
            Ok(()) => {
                let end = Instant::now();
                self.completions
                    .lock()
                    .expect("completions")
                    .push(Completion {
                        at: (end - self.origin).as_secs_f64(),
                        latency: (end - start).as_secs_f64(),
                    });
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("tune-drive: request failed: {e:#}");
                }
            }
        }
    }
}

/// Prints an event line for each entry into Steady (the module doc's `steady AT TARGET`).
fn announce_steady(fresh: &[Transition]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for t in fresh
        .iter()
        .filter(|t| t.to == Phase::Steady && t.from != Phase::Steady)
    {
        writeln!(out, "steady {:.3} {}", t.at.as_secs_f64(), t.target_to)?;
    }
    out.flush()?;
    Ok(())
}

/// Prints the `target AT N` event line.
fn announce_target(at: f64, target: usize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "target {at:.3} {target}")?;
    out.flush()?;
    Ok(())
}

fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a system setting.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Starts the pool under `policy` and its feeder, which keeps the pool's queue full.
fn start_pool(
    args: &Args,
    policy: &str,
    init: usize,
    shared: &Arc<Shared>,
    mut front: Pareto,
) -> Result<Drive> {
    let bad_policy = |e: &dyn std::fmt::Display| anyhow!("--policy {policy}: {e}");
    let tcc = tcc_params_from_spec(policy, init, args.max).map_err(|e| bad_policy(&e))?;
    let psi = match (&tcc, &args.psi_cgroup) {
        (Some(params), Some(dir)) if params.psi => {
            Some((PsiReader::cgroup(dir), format!("cgroup {}", dir.display())))
        }
        (Some(params), None) if params.psi => Some((
            PsiReader::new(),
            "/proc/pressure (the whole machine's)".to_string(),
        )),
        (_, Some(_)) => bail!("--psi-cgroup needs a TCC policy with psi=1 (tcc:psi=1)"),
        _ => None,
    };
    if let Some((reader, source)) = &psi {
        // The pool would turn PSI off with a warning nobody sees here; a run that was meant to
        // read it must not quietly run without.
        reader
            .tcc_pressure()
            .with_context(|| format!("--policy {policy}: reading PSI from {source}"))?;
    }
    println!("started");
    std::io::stdout().flush()?;
    let builder = match tcc {
        // By type, not as an opaque policy: only then does the pool read PSI for it.
        Some(params) => {
            Pool::builder().tcc(Tcc::new(params).map_err(|e| bad_policy(&SpecError::from(e)))?)
        }
        None => Pool::builder()
            .policy(policy_from_spec(policy, init, args.max).map_err(|e| bad_policy(&e))?),
    };
    let mut builder = builder
        .max_workers(args.max)
        // A queue as long as the largest pool keeps every worker supplied, and is short
        // enough to drain quickly at the end.
        .queue_capacity(args.max)
        .name("tune-drive");
    if let Some(spec) = &args.bottleneck {
        let mut meter = Bottleneck::open(spec).with_context(|| format!("--bottleneck {spec}"))?;
        let spec = spec.clone();
        builder = builder.bottleneck(move || match meter.sample() {
            Ok(u) => u,
            Err(e) => {
                eprintln!("tune-drive: --bottleneck {spec}: {e}");
                None
            }
        });
    }
    if let Some((reader, _)) = &psi {
        builder = builder.psi_reader(reader.clone());
    }
    if let Some(key) = &args.coordinate {
        let turns = Turns::new(key, CoordinateMode::Turns)
            .with_context(|| format!("--coordinate {key}"))?;
        builder = builder.coordinate(turns);
    }
    let pool = Arc::new(builder.build());
    let feeder = {
        let pool = Arc::clone(&pool);
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("feeder".into())
            .spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    let d = front.draw();
                    let s = Arc::clone(&shared);
                    // Endless input: submit blocks while the queue is full. The handle is not
                    // needed: the task records its own completion.
                    drop(pool.submit(move || s.task(d)));
                }
            })?
    };
    Ok(Drive::Pool { pool, feeder, psi })
}

/// What runs the tasks: tact's pool under the driver's own controller, or worker threads that
/// `tact tune` tells how many may run (`--external`).
enum Drive {
    Pool {
        pool: Arc<Pool>,
        feeder: std::thread::JoinHandle<()>,
        psi: Option<(PsiReader, String)>,
    },
    External {
        workers: Workers,
        counter: std::thread::JoinHandle<()>,
        stop_counter: Arc<AtomicBool>,
        tact_log: Option<PathBuf>,
    },
}

/// What a run leaves for its record, once it stopped.
struct Ended {
    targets: Vec<(f64, usize)>,
    trace: Vec<Transition>,
    turn_events: Vec<TurnEvent>,
    turns: Option<TurnStats>,
    psi: Option<PsiRecord>,
}

impl Drive {
    /// The pool's target, or the count tact last told.
    fn target(&self) -> usize {
        match self {
            Drive::Pool { pool, .. } => pool.target(),
            Drive::External { workers, .. } => workers.count(),
        }
    }

    /// Transitions and turn events since the last call (the driver's own controller only).
    fn drain(&self) -> (Vec<Transition>, Vec<TurnEvent>) {
        match self {
            Drive::Pool { pool, .. } => (pool.drain_trace(), pool.drain_turns()),
            Drive::External { .. } => (Vec::new(), Vec::new()),
        }
    }

    fn end(self, shared: &Shared, samples: &[Sample]) -> Result<Ended> {
        shared.stop.store(true, Ordering::Relaxed);
        match self {
            Drive::Pool { pool, feeder, psi } => {
                feeder
                    .join()
                    .map_err(|_| anyhow!("the feeder thread panicked"))?;
                let pool =
                    Arc::into_inner(pool).ok_or_else(|| anyhow!("the pool is still shared"))?;
                let trace = pool.drain_trace();
                let turn_events = pool.drain_turns();
                let turns = pool.turns();
                let status = pool.stats().status;
                let psi = psi.map(|(_, source)| PsiRecord {
                    source,
                    steps: status.as_ref().map_or(0, |s| s.psi),
                    last: status.and_then(|s| s.pressure),
                });
                // The pool's history starts with the initial target at zero.
                let targets = pool
                    .targets()
                    .into_iter()
                    .map(|(at, n)| (at.as_secs_f64(), n))
                    .collect();
                pool.shutdown();
                Ok(Ended {
                    targets,
                    trace,
                    turn_events,
                    turns,
                    psi,
                })
            }
            Drive::External {
                workers,
                counter,
                stop_counter,
                tact_log,
            } => {
                let seen = workers.seen();
                workers.stop();
                stop_counter.store(true, Ordering::Relaxed);
                counter
                    .join()
                    .map_err(|_| anyhow!("the done-file thread panicked"))?;
                let external::TactLog { targets, trace } = match &tact_log {
                    // tact's clock starts as it starts the command, a few ms before the
                    // driver's: its times are taken as the driver's.
                    Some(path) => external::tact_log(
                        &std::fs::read_to_string(path)
                            .with_context(|| format!("--tact-log {}", path.display()))?,
                    )
                    .with_context(|| format!("--tact-log {}", path.display()))?,
                    // Without tact's log, the counts as the driver saw them: the workers file's
                    // changes, or the tasks running at each sample (jobserver).
                    None if !seen.is_empty() => external::TactLog {
                        targets: seen,
                        trace: Vec::new(),
                    },
                    None => external::TactLog {
                        targets: samples.iter().map(|s| (s.at, s.target)).collect(),
                        trace: Vec::new(),
                    },
                };
                Ok(Ended {
                    targets,
                    trace,
                    turn_events: Vec::new(),
                    turns: None,
                    psi: None,
                })
            }
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(args.seconds > 0.0 && args.warmup >= 0.0 && args.front_ms >= 0.0) {
        bail!("--seconds must be positive, --warmup and --front-ms non-negative");
    }
    if args.max == 0 || args.sample_ms == 0 {
        bail!("--max and --sample-ms must be positive");
    }
    let init = args.init.unwrap_or_else(online_cpus).clamp(1, args.max);
    let mut control = Client::connect(&args.addr)
        .with_context(|| format!("connect to the service at {}", args.addr))?;
    control.stats().context("the service's stats")?;
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        addr: args.addr.clone(),
        completions: Mutex::new(Vec::new()),
        done: Arc::new(AtomicU64::new(0)),
        errors: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let front = Pareto::new(
        Duration::from_secs_f64(args.front_ms / 1000.0),
        SHAPE,
        SimRng::new(args.seed),
    );
    let (policy, drive) = match (&args.policy, &args.external) {
        (Some(policy), _) => (
            policy.clone(),
            start_pool(&args, policy, init, &shared, front)?,
        ),
        (None, Some(mode)) => {
            let how = match mode {
                Mode::WorkersFile(path) => format!("tact tune --workers-file {}", path.display()),
                Mode::Jobserver => "tact tune --jobserver".to_string(),
            };
            let path = args.done_file.clone().expect("clap requires --done-file");
            let stop_counter = Arc::new(AtomicBool::new(false));
            let counter =
                external::keep_counter(path, Arc::clone(&shared.done), Arc::clone(&stop_counter))?;
            let task = {
                let shared = Arc::clone(&shared);
                // One stream of front times for all workers, as the in-process feeder draws it.
                let front = Mutex::new(front);
                Arc::new(move || {
                    let d = front.lock().expect("front").draw();
                    shared.task(d);
                })
            };
            println!("started");
            std::io::stdout().flush()?;
            let workers = Workers::start(mode, args.max, shared.origin, task)?;
            let drive = Drive::External {
                workers,
                counter,
                stop_counter,
                tact_log: args.tact_log.clone(),
            };
            (how, drive)
        }
        (None, None) => unreachable!("clap requires --policy or --external"),
    };

    let end = args.warmup + args.seconds;
    let period_s = Duration::from_millis(args.sample_ms);
    let mut samples = Vec::new();
    let mut trace = Vec::new();
    let mut turn_events = Vec::new();
    let mut next_report = 10.0;
    let mut announced = None;
    loop {
        let stats = control.stats().context("the service's stats")?;
        let at = shared.origin.elapsed().as_secs_f64();
        let target = drive.target();
        samples.push(Sample {
            at,
            completions: shared.done.load(Ordering::Relaxed),
            service_cpu: stats.cpu.as_secs_f64(),
            driver_cpu: process_cpu().as_secs_f64(),
            target,
        });
        if announced != Some(target) {
            announce_target(at, target)?;
            announced = Some(target);
        }
        // Drained as the run goes, so the policy's bounded trace buffer never drops any.
        let (fresh, turned) = drive.drain();
        announce_steady(&fresh)?;
        trace.extend(fresh);
        turn_events.extend(turned);
        if at >= end {
            break;
        }
        if at >= next_report {
            eprintln!(
                "tune-drive {policy}: {at:.0}/{end:.0} s, target {target}, {} done",
                shared.done.load(Ordering::Relaxed)
            );
            next_report += 10.0;
        }
        std::thread::sleep(period_s.min(Duration::from_secs_f64((end - at).max(0.001))));
    }
    let ended = drive.end(&shared, &samples)?;
    trace.extend(ended.trace);
    turn_events.extend(ended.turn_events);
    let targets = ended.targets;

    let completions = std::mem::take(&mut *shared.completions.lock().expect("completions"));
    let history = History(targets.clone());
    let window = period(&[(args.warmup, end)], &completions, &samples, &history);
    let steady_iv = steady_intervals(&trace, args.warmup, end);
    let steady =
        (!steady_iv.is_empty()).then(|| period(&steady_iv, &completions, &samples, &history));
    let report = Report {
        policy: &policy,
        addr: &args.addr,
        warmup_s: args.warmup,
        seconds: args.seconds,
        front_ms: args.front_ms,
        max: args.max,
        init,
        seed: args.seed,
        bottleneck: args.bottleneck.as_ref().map(ToString::to_string),
        coordinate: args.coordinate.clone(),
        turns: ended.turns,
        turn_events,
        psi: ended.psi,
        window,
        steady,
        first_steady_s: first_steady(&trace),
        errors: shared.errors.load(Ordering::Relaxed),
        targets,
        trace,
        samples,
    };
    let w = &report.window;
    // One line (run.py logs the driver's last): the turns, when coordinated, at its end.
    let turns = report.turns.map_or(String::new(), |t| {
        format!(
            ", turns {} ({:.1} s waited, {:.1} s held)",
            t.turns,
            t.waited.as_secs_f64(),
            t.held.as_secs_f64()
        )
    });
    let psi = report.psi.as_ref().map_or(String::new(), |p| {
        format!(", psi from {} ({} steps)", p.source, p.steps)
    });
    println!(
        "{}: {:.1}/s, service CPU {}, count {}, p99 {}, errors {}{turns}{psi}",
        policy,
        w.throughput,
        w.service_util
            .map_or("?".into(), |u| format!("{:.1}%", u * 100.0)),
        w.count.map_or("?".into(), |c| format!(
            "{:.1} [{}-{}]",
            c.mean, c.min, c.max
        )),
        w.latency
            .map_or("?".into(), |l| format!("{:.1} ms", l.p99_ms)),
        report.errors
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string(&report)?;
        std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
    }
    if report.window.completions == 0 {
        bail!("no task completed in the measured window");
    }
    Ok(())
}
