//! `tact tickets run`: starts the setup's jobs, enforces their rights with a backend until the
//! run ends, ends the jobs still running and reports. [`super::cgroup`] applies CPU, disk and
//! memory rights; [`super::signals`] the CPU rights only, and says so when the setup has more.
//!
//! Jobs start held at their gate and under the watchdog, as in `tact share` (whose job handling this
//! reuses), so no exit path leaves one stopped.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nix::sys::signal::Signal;
use tact_core::tickets::compile::{WeightRange, CPU_SHARES_V1, CPU_WEIGHT_V2};
use tact_core::tickets::Resource;
use tact_linux::actuate::affinity;
use tact_linux::actuate::cgroup_cpu::{self, CgroupVersion, CpuHierarchy};

use super::report::{JobSummary, Res, Summary};
use super::rights::Rights;
use super::setup::Setup;
use super::show::{everyone_active, paths_line};
use super::signals::{Signals, ALPS_SHARES};
use crate::cli::{Backend, TicketsRunArgs};
use crate::jobs::events::{Events, Received};
use crate::jobs::pass_on::Reached;
use crate::share::group::{Job, MemberIds};
use crate::share::safety::Safety;
use crate::share::spec::{JobSpec, What};
use crate::share::{alps, default_alps_config, describe, own_cpu, DEFAULT_QUANTUM};
use crate::trace::JsonLines;

/// How long ended jobs get between SIGTERM (or the interrupting signal) and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// Why a run ended.
pub enum End {
    /// Every job exited by itself.
    Exited,
    /// `--duration` passed.
    Duration,
    Interrupted(Received),
}

enum Chosen {
    Cgroup(CpuHierarchy),
    Signals,
}

/// Runs `setup`'s jobs (at least one: the caller refuses a setup without) until they end.
pub fn run(setup: Setup, args: &TicketsRunArgs) -> Result<i32> {
    // A parent that cannot hold the tree is a usage error (as for the daemon), not a reason to
    // fall back to signals, and is found before any job starts.
    if let (Some(dir), false) = (&args.cgroup_parent, args.backend == Backend::Signals) {
        if let Some(why) = super::cgroup::unusable_parent(dir, &setup) {
            eprintln!("tact: {why}");
            return Ok(super::BAD_SETUP);
        }
    }
    let chosen = choose_backend(args)?;
    let cpus = affinity::thread_cpus(std::process::id() as i32)?;
    let (range, backend): (WeightRange, String) = match &chosen {
        Chosen::Cgroup(hier) => (
            match hier.version {
                CgroupVersion::V1 => CPU_SHARES_V1,
                CgroupVersion::V2 => CPU_WEIGHT_V2,
            },
            format!(
                "backend cgroup ({}, flat: one cgroup per job)",
                hier.version.weight_file()
            ),
        ),
        Chosen::Signals => (
            ALPS_SHARES,
            format!(
                "backend signals (ALPS, quantum {}, shares 1-{} ∝ rights, on {} CPU{})",
                humantime::format_duration(DEFAULT_QUANTUM),
                ALPS_SHARES.max,
                cpus.len(),
                if cpus.len() == 1 { "" } else { "s" }
            ),
        ),
    };
    let backend = format!(
        "{backend}, interval {}",
        humantime::format_duration(args.interval)
    );
    let mut log = args
        .json_log
        .as_deref()
        .map(JsonLines::create)
        .transpose()?;
    let mut rights = Rights::new(&setup, log.as_mut())?;
    if matches!(chosen, Chosen::Signals) {
        for r in [Resource::Disk, Resource::Mem] {
            if rights.any_holds(r) {
                eprintln!(
                    "tact: the signals backend enforces CPU rights only: the {r} tickets of {} \
                     are not applied (--backend cgroup applies them, as root)",
                    rights.holders(r).join(", ")
                );
                rights.not_applied(r);
            }
        }
    }
    // Signals are read from a signalfd from before the first job starts, and the watchdog is
    // there before it too.
    let mut events = Events::new()?;
    let mut safety = Safety::start()?;
    let specs = setup
        .jobs
        .iter()
        .zip(rights.weights(Resource::Cpu, range))
        .map(|(j, share)| JobSpec {
            shares: share,
            what: What::Command(j.command.clone()),
            name: Some(j.name.clone()),
        });
    let mut jobs = safety.start_jobs(specs)?;
    eprintln!("tact: {backend}");
    let start = Instant::now();
    let result = match chosen {
        Chosen::Cgroup(hier) => super::cgroup::run(
            &mut jobs,
            hier,
            range,
            args.cgroup_parent.as_deref(),
            &mut rights,
            (args.interval, args.duration),
            &mut safety,
            &mut events,
        ),
        Chosen::Signals => {
            let mut signals = Signals {
                interval: args.interval,
                duration: args.duration,
                shares: rights.weights(Resource::Cpu, range),
                rights: &mut rights,
                timed_out: false,
            };
            let result = default_alps_config(cpus.len())
                .and_then(|cfg| {
                    alps::run(
                        &mut jobs,
                        cfg,
                        &cpus,
                        &mut safety,
                        None,
                        &mut events,
                        Some(&mut signals),
                    )
                })
                .map(|out| match out.interrupted {
                    Some(r) => End::Interrupted(r),
                    None if signals.timed_out => End::Duration,
                    None => End::Exited,
                });
            // Everything runs again before the jobs are ended (a stopped process would take
            // SIGTERM only once continued).
            for job in jobs.iter_mut() {
                if let Err(e) = job.resume() {
                    tracing::warn!("{e:#}");
                }
            }
            end_jobs(&mut jobs, &result, &mut safety);
            result
        }
    };
    let released = safety.release(&mut jobs);
    for job in &mut jobs {
        job.refresh_totals();
        job.wait_child();
    }
    let end = result?;
    released?;
    let wall = start.elapsed();

    let everyone = everyone_active(&setup);
    let total_ns: u64 = jobs.iter().map(Job::consumed_ns).sum();
    let summary = Summary {
        jobs: jobs
            .iter()
            .zip(&setup.jobs)
            .enumerate()
            .map(|(i, (job, s))| JobSummary {
                name: s.name.clone(),
                tickets: everyone
                    .explain_path(s.id, Resource::Cpu)
                    .map_or_else(|e| e.to_string(), |e| paths_line(&everyone, &e)),
                expected: rights.expected_summary(i),
                achieved: {
                    let (disk, mem) = rights.achieved_disk_mem(i);
                    Res {
                        cpu: (total_ns > 0).then(|| job.consumed_ns() as f64 / total_ns as f64),
                        disk,
                        mem,
                    }
                },
                disk_bytes: rights.last.disk_bytes[i],
                cpu_ns: job.consumed_ns(),
                exit: match (&job.exit, job.gone) {
                    (Some(s), _) => describe(*s),
                    (None, true) => "exited".into(),
                    (None, false) => "running".into(),
                },
            })
            .collect(),
        end: match end {
            End::Exited => "every job exited".into(),
            End::Duration => "--duration passed".into(),
            End::Interrupted(r) => format!("interrupted by {}", r.signal),
        },
        wall_s: wall.as_secs_f64(),
        tact_cpu_s: own_cpu().as_secs_f64(),
        backend,
    };
    if let Some(log) = log.as_mut() {
        log.line(&summary.json())?;
    }
    eprint!("{}", summary.table());
    Ok(match end {
        End::Interrupted(r) => 128 + r.signal as i32,
        // The jobs were ended as asked.
        End::Duration => 0,
        End::Exited => i32::from(jobs.iter().any(|j| j.exit.is_some_and(|s| !s.success()))),
    })
}

/// `auto` takes cgroups when tact may create them, else signals, and says why.
fn choose_backend(args: &TicketsRunArgs) -> Result<Chosen> {
    let probe = format!("tact-tickets-{}-probe", std::process::id());
    let parent = args.cgroup_parent.as_deref();
    match args.backend {
        Backend::Signals => Ok(Chosen::Signals),
        Backend::Cgroup => match cgroup_cpu::can_use(parent, &probe) {
            Ok(h) => Ok(Chosen::Cgroup(h)),
            Err(why) => bail!("--backend cgroup: {why} (--backend signals needs no privilege)"),
        },
        Backend::Auto => match cgroup_cpu::can_use(parent, &probe) {
            Ok(h) => Ok(Chosen::Cgroup(h)),
            Err(why) => {
                eprintln!("tact: cannot use cgroups ({why}); using signals");
                Ok(Chosen::Signals)
            }
        },
    }
}

/// Ends the jobs still running, as the run's end asks: SIGTERM at `--duration` and after an
/// error, the interrupting signal passed on ([`crate::jobs::pass_on`]'s rule: a terminal's
/// signal reached the members in tact's process group already, not those in other groups or
/// sessions), then SIGKILL after [`GRACE`]. Nothing when every job exited. The watchdog's lease
/// is renewed meanwhile: the grace is as long as it.
pub fn end_jobs(jobs: &mut [Job], end: &Result<End>, safety: &mut Safety) {
    let sig = match end {
        Ok(End::Exited) => return,
        Ok(End::Interrupted(r)) => *r,
        Ok(End::Duration) | Err(_) => from_tact(Signal::SIGTERM),
    };
    signal_trees(jobs, sig);
    wait_or_kill(jobs, safety);
}

/// A signal tact sends of its own accord.
fn from_tact(signal: Signal) -> Received {
    Received {
        signal,
        from_terminal: false,
    }
}

/// Sends `sig` to every process of every job still running (found afresh), then, as shells and
/// systemd do, SIGCONT to each of them: a process stopped by someone else (`kill -STOP $$` in
/// the job) would otherwise handle the terminating signal only when SIGKILLed at the end of
/// the grace. Through the pidfds of the jobs' own processes, never by name.
fn signal_trees(jobs: &mut [Job], sig: Received) {
    let mut members = MemberIds::default();
    let mut ignored = Vec::new();
    let mut reached = Reached::new();
    for job in jobs.iter_mut().filter(|j| !j.gone) {
        let _ = job.rescan_events(&mut members, &mut ignored);
        reached.signal(job.tree(), sig, true);
        if sig.signal != Signal::SIGKILL {
            if let Err(e) = job.tree().signal_all(libc::SIGCONT) {
                tracing::warn!(
                    "cannot continue the job's processes after {}: {e}",
                    sig.signal
                );
            }
        }
        // A job still at its gate gets the signal in its waiting shell; opening the gate is harmless.
        job.let_go();
    }
}

/// Waits up to [`GRACE`] for every job to be gone, then SIGKILLs the rest.
fn wait_or_kill(jobs: &mut [Job], safety: &mut Safety) {
    let mut members = MemberIds::default();
    let mut ignored = Vec::new();
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if let Err(e) = safety.renew() {
            tracing::warn!("watchdog: {e}");
        }
        for job in jobs.iter_mut().filter(|j| !j.gone) {
            let _ = job.rescan_events(&mut members, &mut ignored);
        }
        if jobs.iter().all(|j| j.gone) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_trees(jobs, from_tact(Signal::SIGKILL));
}
