//! `tact share`: divide the CPU a group of jobs gets in proportion to integer shares (ALPS,
//! spec proportional-share.md), through SIGSTOP/SIGCONT at user level or cgroup weights. A job is
//! a command's process tree, an adopted process's, or every process of a user.

pub(crate) mod alps;
mod cgroup;
// Starting jobs held at their gate, reading their trees and the watchdog are shared with `tact tickets`.
pub(crate) mod group;
mod report;
pub(crate) mod safety;
pub(crate) mod spec;

use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tact_core::share::{Mode, ShareConfig};
use tact_linux::actuate::affinity;
use tact_linux::actuate::cgroup_cpu::{self, CpuHierarchy};
use tact_linux::actuate::pidfd::PidFd;

use crate::cli::{Backend, ShareArgs, ShareMode};
use crate::jobs::events::{Events, Received};
use crate::jobs::pass_on::Reached;
use group::{Job, MemberIds};
use report::{CycleLog, Row};
use spec::{JobSpec, What};

/// The default quantum (spec section 2).
pub(crate) const DEFAULT_QUANTUM: Duration = Duration::from_millis(20);
/// How long an interrupted tact waits for the commands it started after passing the signal on.
const GRACE: Duration = Duration::from_secs(10);

pub fn run(args: &ShareArgs) -> Result<i32> {
    let specs = spec::parse(&args.jobs, &args.pids, &args.users)?;
    check_users(&specs)?;
    check_nested_pids(&specs)?;
    let users = specs.iter().any(JobSpec::is_user);
    let cpus = affinity::thread_cpus(std::process::id() as i32)
        .context("cannot read tact's own CPU affinity")?;
    let mode = match args.mode {
        Some(ShareMode::Strict) => Mode::Strict,
        Some(ShareMode::Conserving) => Mode::Conserving,
        None => Mode::default_for(cpus.len() as u32),
    };
    let quantum = args.quantum.unwrap_or(DEFAULT_QUANTUM);
    let cfg = alps_config(
        quantum,
        args.basic,
        args.quantized,
        args.no_io,
        mode,
        cpus.len(),
    )?;
    let backend = choose_backend(args, users)?;
    let mut log = args.json_log.as_deref().map(CycleLog::create).transpose()?;

    // Signals are blocked (and read from a signalfd) before any job starts, and the watchdog
    // is there before the first job.
    let mut events = Events::new()?;
    let mut safety = safety::Safety::start()?;
    let mut jobs = safety.start_jobs(specs)?;

    let start = Instant::now();
    // The cgroup backend's teardown, reported once the commands have had their signal.
    let mut teardown = Ok(());
    let (interrupted, usage, footer) = match backend {
        Chosen::Signals => {
            eprintln!(
                "tact: backend signals: {} ALPS, quantum {}, {} on {} CPU{}",
                if cfg.lazy { "optimized" } else { "basic" },
                humantime::format_duration(quantum),
                match mode {
                    Mode::Strict => "strict",
                    Mode::Conserving => "conserving",
                },
                cpus.len(),
                if cpus.len() == 1 { "" } else { "s" }
            );
            if args.cgroup_parent.is_some() {
                eprintln!(
                    "tact: --cgroup-parent is not used: the signals backend makes no cgroups"
                );
            }
            let out = alps::run(
                &mut jobs,
                cfg,
                &cpus,
                &mut safety,
                log.as_mut(),
                &mut events,
                None,
            );
            safety.release(&mut jobs)?;
            let out = out?;
            let c = out.counters;
            let footer = format!(
                "{} cycles, {} quanta ({} missed), {} checks between ticks, {} idle quanta slept \
                 through, {:.2} reads and {:.3} signals per quantum",
                c.cycles,
                c.quanta,
                c.overruns,
                c.checks,
                c.skipped,
                c.reads as f64 / c.quanta.max(1) as f64,
                c.signals as f64 / c.quanta.max(1) as f64,
            );
            (out.interrupted, None, footer)
        }
        Chosen::Cgroup(hier) => {
            eprintln!("tact: backend cgroup ({})", hier.version.weight_file());
            let parent = args.cgroup_parent.as_deref();
            let out = cgroup::run(&mut jobs, hier, parent, log.as_mut(), &mut events);
            safety.release(&mut jobs)?;
            let out = out?;
            teardown = out.teardown;
            (out.interrupted, Some(out.usage_ns), out.weights)
        }
    };
    let wall = start.elapsed();
    // Interrupted: the signal goes on, and tact waits for the commands it started with signals
    // still read (waiting with them blocked lost a second Ctrl-C for as long as a command that
    // ignored the first ran on): each one that comes goes on too.
    let mut next = interrupted;
    while let Some(sig) = next {
        pass_on(&mut jobs, sig);
        next = started_exit_or_signal(&mut jobs, &mut events)?;
    }
    for job in &mut jobs {
        job.refresh_totals();
        job.wait_child();
    }
    let rows: Vec<Row> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| Row {
            label: j.spec.label(),
            shares: j.spec.shares,
            feasible: j.weight,
            cpu_ns: usage
                .as_ref()
                .and_then(|u| u[i])
                .unwrap_or_else(|| j.consumed_ns()),
            exit: match (&j.exit, j.gone) {
                (_, true) if j.is_user() => "no processes".into(),
                (_, false) if j.is_user() => "running".into(),
                (Some(s), _) => describe(*s),
                (None, true) => "exited".into(),
                (None, false) => "running".into(),
            },
        })
        .collect();
    let own = own_cpu();
    report::table(
        &rows,
        &[
            format!("tact: {footer}"),
            format!(
                "tact: own CPU {:.3} s over {:.1} s: {:.2}% of one CPU",
                own.as_secs_f64(),
                wall.as_secs_f64(),
                100.0 * own.as_secs_f64() / wall.as_secs_f64().max(1e-9)
            ),
        ],
    );
    teardown?;
    if let Some(sig) = interrupted {
        return Ok(128 + sig.signal as i32);
    }
    let failed = jobs.iter().any(|j| j.exit.is_some_and(|s| !s.success()));
    Ok(if failed { 1 } else { 0 })
}

/// The engine's configuration on `cpus` CPUs: optimized ALPS with tact's refinements, unless
/// `basic` (the paper's basic ALPS) or `quantized` (the paper's accounting) is asked for.
pub(crate) fn alps_config(
    quantum: Duration,
    basic: bool,
    quantized: bool,
    no_io: bool,
    mode: Mode,
    cpus: usize,
) -> Result<ShareConfig> {
    let cfg = ShareConfig {
        quantum_ns: quantum.as_nanos().min(u64::MAX as u128) as u64,
        lazy: !basic,
        // tact's refinement of optimized ALPS (docs/share.md): the cycle end is not noticed late.
        cycle_bound: !basic,
        // Quantization-aware accounting (docs/share.md), unless the paper's rules are asked for.
        checks: !basic && !quantized,
        io: !no_io,
        mode,
        ..ShareConfig::new(0, cpus as u32)
    };
    cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(cfg)
}

/// [`alps_config`] with `tact share`'s defaults (optimized ALPS with tact's refinements, the
/// default quantum, the mode for `cpus` CPUs), for the engines `tact tickets` and the daemon run.
pub(crate) fn default_alps_config(cpus: usize) -> Result<ShareConfig> {
    let mode = Mode::default_for(cpus as u32);
    alps_config(DEFAULT_QUANTUM, false, false, false, mode, cpus)
}

/// `--pid`: a process in the tree of another one given is refused, or it would be in two jobs
/// (counted in both, and a split neither could reach). A job's tree is its root and its
/// descendants, so two trees overlap exactly when one root descends from the other.
fn check_nested_pids(specs: &[JobSpec]) -> Result<()> {
    let procs = tact_linux::ProcReader::new();
    let given = |pid: i32| {
        specs
            .iter()
            .find(|s| s.what == What::Pid(pid))
            .map(JobSpec::origin)
    };
    for s in specs {
        let What::Pid(pid) = s.what else { continue };
        let mut up = pid;
        // A pid that cannot be read is for `Job::start` to report; the walk ends at init.
        while let Ok(stat) = procs.stat(up) {
            up = stat.ppid;
            if up <= 1 {
                break;
            }
            if let Some(other) = given(up) {
                bail!(
                    "{}: process {pid} descends from process {up}, whose tree {other} already \
                     shares: it would be in two jobs",
                    s.origin()
                );
            }
        }
    }
    Ok(())
}

/// `--user`: only root names another user (DESIGN.md invariant 3); an adopted `--pid` must not
/// be a process of a user shared as a whole too, or its processes would be in two entities.
fn check_users(specs: &[JobSpec]) -> Result<()> {
    let (me, euid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::geteuid().as_raw(),
    );
    let procs = tact_linux::ProcReader::new();
    for s in specs {
        match &s.what {
            What::User { uid, .. } if !spec::may_name_user(me, euid, *uid) => bail!(
                "{}: only root may share another user's processes (tact runs as uid {me})",
                s.origin()
            ),
            What::Pid(pid) => {
                // A pid that cannot be read is for `Job::start` to report.
                let Ok(owner) = procs.uid(*pid) else { continue };
                let shared = specs
                    .iter()
                    .find(|u| matches!(u.what, What::User { uid, .. } if uid == owner));
                if let Some(u) = shared {
                    bail!(
                        "{}: process {pid} belongs to the user whose every process {} already \
                         shares",
                        s.origin(),
                        u.origin()
                    );
                }
            }
            _ => {}
        }
    }
    Ok(())
}

enum Chosen {
    Signals,
    Cgroup(CpuHierarchy),
}

/// `auto` takes cgroups when tact may create them, unless an option only ALPS has was given or
/// `users` (a `--user` principal) are shared.
fn choose_backend(args: &ShareArgs, users: bool) -> Result<Chosen> {
    let probe = format!("tact-share-{}-probe", std::process::id());
    let alps_only =
        args.basic || args.no_io || args.quantized || args.mode.is_some() || args.quantum.is_some();
    let parent = args.cgroup_parent.as_deref();
    match args.backend {
        Backend::Signals => Ok(Chosen::Signals),
        Backend::Cgroup => {
            if users {
                // Moving them would take a user's processes out of the cgroups of their own
                // sessions and services (their limits and accounting), for as long as tact runs.
                bail!(
                    "--backend cgroup: --user needs the signals backend (moving every process of \
                     a user into tact's cgroup would take them out of their own sessions' and \
                     services' cgroups)"
                );
            }
            if alps_only {
                bail!(
                    "--backend cgroup: --quantum, --basic, --quantized, --no-io and --mode only \
                     apply to the signals backend"
                );
            }
            match cgroup_cpu::can_use(parent, &probe) {
                Ok(h) => Ok(Chosen::Cgroup(h)),
                Err(why) => bail!("--backend cgroup: {why} (--backend signals needs no privilege)"),
            }
        }
        Backend::Auto if alps_only || users => Ok(Chosen::Signals),
        Backend::Auto => match cgroup_cpu::can_use(parent, &probe) {
            Ok(h) => Ok(Chosen::Cgroup(h)),
            Err(why) => {
                eprintln!("tact: cannot use cgroups ({why}); using signals");
                Ok(Chosen::Signals)
            }
        },
    }
}

/// Interrupted: everything runs again; pass the signal on to every process of the commands tact
/// started ([`crate::jobs::pass_on`]'s rule: a terminal's signal reached the members in tact's
/// process group already) and give them a moment to exit, then look at each tree once more:
/// members that appeared meanwhile get the signal too. Adopted processes (`--pid`) and users'
/// (`--user`) are left running: tact did not start them.
fn pass_on(jobs: &mut [Job], sig: Received) {
    let mut reached = Reached::new();
    let mut started: Vec<&mut Job> = jobs
        .iter_mut()
        .filter(|j| matches!(j.spec.what, What::Command(_)))
        .collect();
    for job in started.iter_mut() {
        refresh(job);
        reached.signal(job.tree(), sig, true);
    }
    let deadline = Instant::now() + GRACE;
    for job in started {
        while job.child_pid().is_some() && Instant::now() < deadline {
            job.reap();
            std::thread::sleep(Duration::from_millis(20));
        }
        refresh(job);
        reached.signal(job.tree(), sig, false);
    }
}

/// Waits until every command tact started has exited (`None`), or a signal comes (`Some`).
fn started_exit_or_signal(jobs: &mut [Job], events: &mut Events) -> Result<Option<Received>> {
    for pid in jobs.iter().filter_map(Job::child_pid) {
        // Not reaped yet, so the pid still names that process.
        let Ok(fd) = PidFd::open(pid) else {
            continue;
        };
        if let Some(sig) = events.ready_or_signal(fd.as_fd())? {
            return Ok(Some(sig));
        }
    }
    Ok(None)
}

/// Brings the job's tree up to date (the engine's own view of it is over).
fn refresh(job: &mut Job) {
    if let Err(e) = job.rescan_events(&mut MemberIds::default(), &mut Vec::new()) {
        // The members already known still get the signal.
        tracing::warn!("{}: {e:#}", job.spec.origin());
    }
}

pub(crate) fn describe(s: std::process::ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(0), _) => "0".into(),
        (Some(c), _) => format!("{c}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "?".into(),
    }
}

/// tact's own CPU time (all its threads; the watchdog is another process and idles).
pub(crate) fn own_cpu() -> Duration {
    tact_linux::probe::cpu::CpuClock::this_process()
        .read_ns()
        .map_or(Duration::ZERO, Duration::from_nanos)
}
