//! External-mode regulation (BeNice, spec 2.7): poll the job's progress counters, feed them to the
//! polite regulator, and stop or continue the job's process tree as it decides.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tact_core::polite::{
    Decision, Obs, Phase, PoliteConfig, PollInterval, PollPolicy, Regulator, SampleKind,
};
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::state::StateDir;
use tact_linux::{
    target_key, Guard, JobTree, ProcReader, ProgressMeter, ProgressSource, PsiReader, StallMeter,
    TargetStore,
};
use tact_proto::{Report, ReportState};

use super::events::{Event, Events, Received};
use super::guarded;
use super::job::shown_name;
use super::turn::Turn;
use crate::cli::{Peek, PoliteArgs};
use crate::trace::JsonLog;

/// How often calibrated targets are saved while a job runs (and again at exit).
const SAVE_EVERY: Duration = Duration::from_secs(300);
/// A bootstrap during which every resource's PSI `some avg10` stayed below this percentage ran on
/// a quiet machine, so its target needs no probation (spec 2.8).
const QUIET_PSI_PERCENT: f64 = 5.0;
/// A poll whose progress at the target rate accounts for less than this fraction of its time
/// counts as one that saw no change (see `PoliteJob::negligible`).
const NEGLIGIBLE_PROGRESS: f64 = 0.1;
/// How long the first reading of the progress may keep failing before tact gives up on it.
const BASELINE_PATIENCE: Duration = Duration::from_secs(1);
/// Extra time the guard grants beyond the longest suspension before it presumes tact hung: more
/// than tact may spend between two renewals while the job runs, a poll (at most 5 s) and the
/// daemon's calls of a testpoint (a report, and a rejoin: `turn::TIMEOUTS`, 8 s at most).
const LEASE_SLACK: Duration = Duration::from_secs(15);
/// How often a stopped job's regulator hears the machine's pressure: often enough that the end
/// of the foreground's work shows within a fraction of the regulator's one-second calm period.
const PRESSURE_TICK: Duration = Duration::from_millis(250);
/// How long a job waits for the daemon's turn before tact stops it until the turn comes: a
/// turn that is free comes back within a round trip.
const QUICK_TURN: Duration = Duration::from_millis(5);
/// How often a job stopped while it waits for its turn checks for signals and its own exit.
const TURN_POLL: Duration = Duration::from_millis(100);

pub fn setup_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if verbose { "info" } else { "warn" };
    let filter = EnvFilter::try_from_env("TACT_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .without_time()
        .with_writer(std::io::stderr)
        .init();
}

/// Everything decided from the command line before the job starts, so bad input fails before
/// anything runs.
pub struct Settings {
    pub cfg: PoliteConfig,
    pub sources: Vec<ProgressSource>,
    pub state_dir: PathBuf,
    pub name: Option<String>,
    pub json_log: Option<JsonLog>,
    /// Opened before the job starts: a tact that cannot record what it stops must not stop it.
    pub crash_records: StateDir,
    pub verbose: bool,
    /// No --progress was given: say which source tact chose once the job is under regulation.
    pub default_progress: bool,
    /// The daemon to take turns through (`None`: `$TACT_SOCKET` or the default, if one runs).
    pub socket: Option<PathBuf>,
    pub priority: i32,
}

impl Settings {
    pub fn from_args(args: &PoliteArgs, verbose: bool) -> Result<Self> {
        let default_progress = args.progress.is_empty();
        let names: Vec<String> = if default_progress {
            vec!["io".into()]
        } else {
            args.progress.clone()
        };
        let sources = names
            .iter()
            .map(|s| s.parse::<ProgressSource>())
            .collect::<Result<Vec<_>, _>>()?;
        for s in &sources {
            if let ProgressSource::File(path) = s {
                std::fs::read_to_string(path).with_context(|| {
                    format!("cannot read counter file {} for --progress {s} (create it before starting tact)", path.display())
                })?;
            }
        }
        if args.max_suspend < args.testpoint {
            bail!(
                "--max-suspend ({}) must be at least --testpoint ({})",
                humantime::format_duration(args.max_suspend),
                humantime::format_duration(args.testpoint)
            );
        }
        let base = PoliteConfig::with_period(args.testpoint);
        if let Some(socket) = &args.socket {
            // Named on the command line, a daemon that is not there is an error, checked before
            // the command starts rather than found out once it runs.
            if let Err(e) = tact_proto::Client::connect(socket) {
                bail!(
                    "--socket {}: {e} (start one with `tact daemon --socket {}`)",
                    socket.display(),
                    socket.display()
                );
            }
        }
        let cfg = PoliteConfig {
            peek_every: match args.peek {
                Some(Peek::Off) => None,
                Some(Peek::Every(d)) => Some(d),
                None => base.peek_every,
            },
            alpha: args.alpha,
            beta: args.beta,
            max_suspension: args.max_suspend,
            probation: args.probation,
            bootstrap: args.bootstrap,
            ..base
        };
        // A poor verdict needs ⌈−log₂ α⌉ samples in a window of at most window_cap: below
        // 2^−window_cap the test could never say poor (the engine words it as a window cap,
        // which no option sets).
        let floor = 0.5f64.powi(cfg.window_cap as i32);
        if args.alpha > 0.0 && args.alpha < floor {
            bail!(
                "--alpha {} is below {floor:.2e}: a verdict looks at most {} testpoints, too few \
                 to judge poor at that level",
                args.alpha,
                cfg.window_cap
            );
        }
        cfg.validate()
            .map_err(|e| anyhow::anyhow!("{e} (see --alpha, --beta)"))?;
        Ok(Settings {
            cfg,
            sources,
            state_dir: args
                .state_dir
                .clone()
                .unwrap_or_else(crate::paths::state_dir),
            name: args.name.clone(),
            json_log: args.json_log.as_deref().map(JsonLog::create).transpose()?,
            crash_records: StateDir::new(crate::paths::runtime_dir()?)?,
            verbose,
            default_progress,
            socket: args.socket.clone(),
            priority: args.priority,
        })
    }
}

/// Polling follows the testpoint period: it starts there and adapts between half of it and
/// 5 s (spec 2.8's 200 ms, 100 ms and 5 s at the default period).
fn poll_policy(period: Duration) -> PollPolicy {
    PollPolicy {
        start: period,
        floor: period / 2,
        ceiling: period.max(Duration::from_secs(5)),
        ..PollPolicy::default()
    }
}

/// How regulation ended.
pub enum Ended {
    /// The job's root process exited.
    Exited,
    /// tact was asked to stop; the job is running again.
    Interrupted(Received),
}

/// What a user wants to know at the end.
#[derive(Default)]
pub struct Summary {
    pub elapsed: Duration,
    pub suspended: Duration,
    pub suspensions: u32,
    pub longest: Duration,
    /// Of `suspended`, the time spent stopped while another job held the daemon's turn.
    pub waited: Duration,
    pub target: Vec<f64>,
}

pub struct PoliteJob {
    cfg: PoliteConfig,
    sources: Vec<ProgressSource>,
    verbose: bool,
    tree: JobTree,
    root: PidFd,
    meter: ProgressMeter,
    reg: Regulator,
    store: TargetStore,
    log: Option<JsonLog>,
    state: StateDir,
    guard: Option<Guard>,
    poll: PollInterval,
    psi: PsiReader,
    stall: StallMeter,
    turn: Option<Turn>,
    start: Instant,
    summary: Summary,
}

impl PoliteJob {
    /// Takes charge of the tree rooted at `pid`, which runs `command`: its whole line names it
    /// for the target store.
    pub fn new(settings: Settings, pid: i32, command: &[String]) -> Result<Self> {
        let Settings {
            cfg,
            sources,
            state_dir,
            name,
            json_log,
            crash_records,
            verbose,
            default_progress,
            socket,
            priority,
        } = settings;
        let tree = JobTree::attach(pid)?;
        let root = PidFd::open(pid)?;
        // The pidfd was opened after attach checked the process: make sure it names the same one.
        if ProcReader::new().stat(pid)?.id() != tree.root() {
            bail!("process {pid} exited while tact was attaching to it");
        }
        let names: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
        let shown = shown_name(name.as_deref(), command);
        let turn = Turn::join(socket.as_deref(), &shown, pid, priority)?;
        if turn.is_some() && verbose {
            eprintln!("tact: taking turns with other jobs through the daemon");
        }
        // The key hashes the full path and the progress sources, so `/usr/bin/tar` on `io` and
        // on `cpu` calibrate apart.
        let program = &command.join(" ");
        let key = target_key(
            name.as_deref(),
            program,
            &format!("{program}\0{}", names.join("\0")),
            "",
        );
        let store = TargetStore::new(&state_dir, &key, program, &names);
        let saved = store.load().unwrap_or_else(|e| {
            tracing::warn!("{e}; calibrating afresh");
            None
        });
        let start = Instant::now();
        let reg = Regulator::new(cfg.clone(), Duration::ZERO, saved.clone())?;
        if saved.is_some() && verbose {
            eprintln!(
                "tact: starting from the target saved in {}",
                store.path().display()
            );
        }
        if default_progress {
            eprintln!(
                "tact: regulating on `io` progress (bytes the job reads and writes); \
                 choose with --progress io|io-read|io-write|io-storage|cpu|file:PATH"
            );
        }
        let meter = ProgressMeter::new(ProcReader::new(), sources.clone());
        let cfg_period = cfg.period;
        Ok(PoliteJob {
            cfg,
            sources,
            verbose,
            tree,
            root,
            meter,
            reg,
            store,
            log: json_log,
            state: crash_records,
            guard: None,
            poll: PollInterval::new(poll_policy(cfg_period)),
            psi: PsiReader::new(),
            stall: StallMeter::new(PsiReader::new()),
            turn,
            start,
            summary: Summary::default(),
        })
    }

    /// Regulates until the root exits or a signal arrives; the job is running when this returns,
    /// whether it returns an error or not.
    pub fn regulate(&mut self, events: &mut Events) -> Result<Ended> {
        let result = self.regulate_inner(events);
        let resumed = self.tree.resume().context("cannot resume the job");
        if let Err(e) = self.store.save(self.reg.targets()) {
            tracing::warn!("cannot save targets: {e}");
        }
        self.summary.elapsed = self.start.elapsed();
        // A target still in its bootstrap is no calibrated target yet.
        self.summary.target = match self.reg.phase() {
            Phase::Bootstrap { .. } => Vec::new(),
            _ => self.target_rates(),
        };
        let ended = result?;
        resumed?;
        Ok(ended)
    }

    fn regulate_inner(&mut self, events: &mut Events) -> Result<Ended> {
        if let Some(ended) = self.take_turn(events, false)? {
            return Ok(ended);
        }
        let mut last = self.baseline()?;
        let mut last_poll = Instant::now();
        let mut last_save = Instant::now();
        loop {
            match events.wait(self.root.as_fd(), self.poll.current())? {
                Event::Ready => return Ok(Ended::Exited),
                Event::Signal(sig) => return Ok(Ended::Interrupted(sig)),
                Event::Timeout => {}
            }
            // At every poll, whatever it reads: one that is skipped renews too.
            self.renew()?;
            self.tree.refresh()?;
            let totals = match self.meter.sample(&self.tree.members()) {
                Ok(t) => t,
                Err(e) => {
                    // A counter file being replaced, say: skip this poll rather than judge on it.
                    tracing::warn!("skipping a testpoint: {e}");
                    continue;
                }
            };
            let dp: Vec<f64> = totals
                .iter()
                .zip(&last)
                .map(|(t, l)| (t - l).max(0.0))
                .collect();
            last = totals;
            let now = Instant::now();
            let active = now - last_poll;
            last_poll = now;
            self.poll.record(!self.negligible(&dp, active));
            let t = now - self.start;
            // Only the bootstrap asks whether the machine is quiet.
            let quiet = match self.reg.phase() {
                Phase::Bootstrap { .. } => self.psi.quiet(QUIET_PSI_PERCENT),
                _ => None,
            };
            let step = self.reg.step(
                t,
                Obs {
                    index: 0,
                    dp: &dp,
                    active,
                    quiet,
                },
            )?;
            self.report(t, &step, &dp)?;
            if let Decision::Suspend(_) = step.decision {
                self.release_turn(&step, &dp);
                if step.kind == SampleKind::Judged {
                    self.summary.suspensions += 1;
                }
                if let Some(ended) = self.suspend(events)? {
                    return Ok(ended);
                }
                last_poll = Instant::now();
            } else if step.kind != SampleKind::Accumulated && self.should_yield(&step, &dp) {
                // Another job waits for the turn: stop first, so the two never run at once.
                let began = Instant::now();
                self.stop()?;
                self.release_turn(&step, &dp);
                let ended = self.take_turn(events, true)?;
                self.tree.resume()?;
                self.summary.suspended += began.elapsed();
                if let Some(ended) = ended {
                    return Ok(ended);
                }
                last_poll = Instant::now();
            }
            if last_save.elapsed() >= SAVE_EVERY {
                self.store
                    .save(self.reg.targets())
                    .context("cannot save targets")?;
                last_save = Instant::now();
            }
        }
    }

    /// Stops the tree for as long as the regulator holds it, or until the job exits or tact is
    /// signalled. The regulator hears the machine's pressure meanwhile, which may end a long
    /// suspension early or put off a peek.
    fn suspend(&mut self, events: &mut Events) -> Result<Option<Ended>> {
        self.stop()?;
        let began = Instant::now();
        // The first reading only starts the interval: the stall before it includes the job's own.
        self.stall.stall();
        let mut stall = None;
        let mut stall_max = None::<f64>;
        let mut event = loop {
            let Some(wait) = self.reg.hold(self.start.elapsed(), stall) else {
                break None;
            };
            match events.wait(self.root.as_fd(), wait.min(PRESSURE_TICK))? {
                Event::Timeout => {
                    // Probation stretches a suspension by 1/φ, past max_suspension and so past
                    // the lease the stop took: tact is alive, so say so to the guard, which
                    // would otherwise resume the job and leave.
                    self.renew()?;
                    stall = self.stall.stall();
                    stall_max = match (stall_max, stall) {
                        (Some(m), Some(s)) => Some(m.max(s)),
                        (m, s) => m.or(s),
                    };
                }
                Event::Ready => break Some(Ended::Exited),
                Event::Signal(sig) => break Some(Ended::Interrupted(sig)),
            }
        };
        if event.is_none() {
            // Resume only with the turn, if there is a daemon to take turns through.
            event = self.take_turn(events, true)?;
        }
        self.tree.resume()?;
        let took = began.elapsed();
        if let Some(log) = &mut self.log {
            log.resumed(self.start.elapsed(), took, stall_max, stall)?;
        }
        self.summary.suspended += took;
        self.summary.longest = self.summary.longest.max(took);
        Ok(event)
    }

    /// The first reading of the progress sources. A counter file the job rewrites in place can
    /// be caught empty (`echo $n > FILE` truncates first): read again for a moment before taking
    /// that for a file without a number, which ended the run.
    fn baseline(&mut self) -> Result<Vec<f64>> {
        let deadline = Instant::now() + BASELINE_PATIENCE;
        loop {
            match self.meter.sample(&self.tree.members()) {
                Ok(totals) => return Ok(totals),
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("first reading of the progress: {e}; reading again");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Tells the guard, once there is one (at the first stop), that tact is alive.
    fn renew(&mut self) -> Result<()> {
        match &mut self.guard {
            Some(guard) => Ok(guard.renew(self.cfg.max_suspension + LEASE_SLACK)?),
            None => Ok(()),
        }
    }

    /// Stops the job's tree, with the guard and the crash record in place first.
    fn stop(&mut self) -> Result<()> {
        let lease = self.cfg.max_suspension + LEASE_SLACK;
        guarded::stop(&mut self.tree, &self.state, &mut self.guard, lease)
    }

    /// Waits for the daemon's turn, if there is a daemon: at once when the turn is free,
    /// otherwise with the job stopped (`stopped`: it already is) until the turn comes, the job
    /// exits or tact is signalled.
    fn take_turn(&mut self, events: &mut Events, stopped: bool) -> Result<Option<Ended>> {
        let Some(turn) = self.turn.as_mut() else {
            return Ok(None);
        };
        if turn.request(QUICK_TURN) != Some(false) {
            return Ok(None);
        }
        if !stopped {
            self.stop()?;
        }
        let began = Instant::now();
        let ended = loop {
            self.renew()?;
            let turn = self.turn.as_mut().expect("checked above");
            if turn.granted(TURN_POLL) != Some(false) {
                break None;
            }
            match events.wait(self.root.as_fd(), Duration::ZERO)? {
                Event::Timeout => {}
                Event::Ready => break Some(Ended::Exited),
                Event::Signal(sig) => break Some(Ended::Interrupted(sig)),
            }
        };
        self.summary.waited += began.elapsed();
        if !stopped {
            self.tree.resume()?;
            // Within a suspension the wait counts there already.
            self.summary.suspended += began.elapsed();
        }
        Ok(ended)
    }

    /// Gives the daemon's turn back at an evaluated testpoint.
    fn release_turn(&mut self, step: &tact_core::polite::Step, dp: &[f64]) {
        let report = self.turn_report(step, dp);
        if let Some(turn) = self.turn.as_mut() {
            turn.release(report);
        }
    }

    /// At an evaluated testpoint of a job that runs on: whether to give the daemon's turn to a
    /// job that waits for it.
    fn should_yield(&mut self, step: &tact_core::polite::Step, dp: &[f64]) -> bool {
        let report = self.turn_report(step, dp);
        self.turn.as_mut().is_some_and(|t| t.should_yield(report))
    }

    /// The figures of `tact status` at this testpoint.
    fn turn_report(&self, step: &tact_core::polite::Step, dp: &[f64]) -> Report {
        let state = match (self.reg.phase(), step.decision) {
            (_, Decision::Suspend(_)) => ReportState::Suspended,
            (Phase::Bootstrap { .. }, _) => ReportState::Calibrating,
            (Phase::Probation { .. }, _) => ReportState::Probation,
            (Phase::Regulated, _) => ReportState::Running,
        };
        let first = |v: &[f64]| v.first().copied().filter(|r| r.is_finite() && *r >= 0.0);
        // The progress the evaluation judged over its active time: it can cover several polls,
        // and the last poll's alone over the whole time read half the rate once polls came
        // twice per testpoint (as `report` and the library do).
        let rate = step
            .eval
            .as_ref()
            .filter(|e| e.d > 0.0)
            .and_then(|e| first(e.dp.get(&0).map_or(dp, |v| v.as_slice())).map(|p| p / e.d));
        // No target while calibrating: the one in the making is not yet the job's.
        let calibrating = matches!(self.reg.phase(), Phase::Bootstrap { .. });
        Report {
            state,
            rate,
            target: first(&self.target_rates()).filter(|&r| r > 0.0 && !calibrating),
            unit: self.sources.first().map(|s| format!("{s}/s")),
            suspended_ms: self.summary.suspended.as_millis() as u64,
            suspend_for_ms: step.decision.suspension().as_millis() as u64,
            idle: None,
        }
    }

    /// Whether a poll's progress is worth less than a tenth of the time it covers at the target
    /// rate. Counters of buffered programs move in lumps (zstd -T2 reads a chunk at 400 MB/s,
    /// then compresses it for a second while the counter crawls at 4 MB/s): polled faster than
    /// the lumps, most samples are far below a target that is their mean, and an idle machine
    /// reads as contended. Counting such polls as "no change" lets the poll interval grow until
    /// each sample spans whole lumps (spec 2.7).
    fn negligible(&self, dp: &[f64], active: Duration) -> bool {
        match self.reg.targets().get(0).and_then(|t| t.duration(dp)) {
            Some(dstar) => dstar < NEGLIGIBLE_PROGRESS * active.as_secs_f64(),
            None => dp.iter().all(|&p| p == 0.0),
        }
    }

    /// The current target rate of each metric (external mode has the one metric set, index 0).
    fn target_rates(&self) -> Vec<f64> {
        self.reg
            .targets()
            .get(0)
            .map(|t| t.rates())
            .unwrap_or_default()
    }

    fn report(&mut self, t: Duration, step: &tact_core::polite::Step, dp: &[f64]) -> Result<()> {
        if step.kind == SampleKind::Accumulated {
            return Ok(());
        }
        // An evaluation can cover several polls (one that came a hair before the testpoint period
        // only accumulates): report the progress it judged, not just the last poll's.
        let dp = step
            .eval
            .as_ref()
            .and_then(|e| e.dp.get(&0))
            .map_or(dp, |v| v.as_slice());
        let target = self.target_rates();
        if self.verbose {
            let e = step.eval.as_ref();
            eprintln!(
                "tact: t={:.1}s {:?} rate={} target={} verdict={} {}",
                t.as_secs_f64(),
                step.kind,
                e.filter(|e| e.d > 0.0)
                    .map(|e| fmt_rates(&dp.iter().map(|p| p / e.d).collect::<Vec<_>>()))
                    .unwrap_or("-".into()),
                fmt_rates(&target),
                e.and_then(|e| e.verdict)
                    .map(|v| format!("{v:?}").to_lowercase())
                    .unwrap_or("-".into()),
                match step.decision {
                    Decision::Suspend(s) =>
                        format!("suspend {}", humantime::format_duration(round_ms(s))),
                    _ => String::new(),
                }
            );
        }
        if let Some(log) = &mut self.log {
            log.write(
                t,
                self.reg.phase(),
                step,
                dp,
                target,
                self.reg.next_suspension(),
            )?;
        }
        Ok(())
    }

    /// Clean exit: the guard leaves, and the crash record goes. Call after `regulate`.
    pub fn finish(mut self) -> Summary {
        guarded::leave(&self.tree, &self.state, self.guard.take());
        std::mem::take(&mut self.summary)
    }

    /// The job's root process, to wait for its exit.
    pub fn root(&self) -> &PidFd {
        &self.root
    }

    /// The job's process tree, to pass signals on to.
    pub fn tree(&mut self) -> &mut JobTree {
        &mut self.tree
    }

    pub fn sources(&self) -> Vec<String> {
        self.sources.iter().map(|s| s.to_string()).collect()
    }
}

impl Summary {
    /// One line for stderr at the end of a job.
    pub fn line(&self, sources: &[String]) -> String {
        let ran = if self.elapsed.is_zero() {
            100.0
        } else {
            100.0 * (1.0 - self.suspended.as_secs_f64() / self.elapsed.as_secs_f64())
        };
        let target: Vec<String> = self
            .target
            .iter()
            .zip(sources)
            .map(|(r, s)| format!("{} {s}", fmt_rate(*r)))
            .collect();
        let waited = if self.waited.is_zero() {
            String::new()
        } else {
            format!(
                "; waited {} for other jobs' turns",
                humantime::format_duration(Duration::from_secs(self.waited.as_secs()))
            )
        };
        format!(
            "tact: job ran {ran:.0}% of {}; suspended {} times (longest stop {}){waited}; target {}",
            humantime::format_duration(Duration::from_secs(self.elapsed.as_secs())),
            self.suspensions,
            humantime::format_duration(round_ms(self.longest)),
            if target.is_empty() {
                "not calibrated yet".into()
            } else {
                target.join(", ")
            }
        )
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

fn fmt_rates(r: &[f64]) -> String {
    r.iter().map(|&v| fmt_rate(v)).collect::<Vec<_>>().join("+")
}

/// 12.3M/s style, for counters of any unit.
fn fmt_rate(v: f64) -> String {
    let (scaled, unit) = match v {
        v if v >= 1e9 => (v / 1e9, "G"),
        v if v >= 1e6 => (v / 1e6, "M"),
        v if v >= 1e3 => (v / 1e3, "k"),
        v => (v, ""),
    };
    format!("{scaled:.1}{unit}/s")
}
