//! Crash safety of `tact share` (DESIGN.md invariant 1): every member of every job is recorded
//! in a state file and handed to the watchdog as soon as tact knows it, before tact may stop it,
//! so that no exit path, SIGKILL included, leaves a job stopped. Jobs tact starts wait at a
//! start gate until then (`tact_linux::gate`, see `group`): blocked, never stopped, and ended
//! unstarted if tact dies first, since nothing can hold a process that stops itself before the
//! watchdog holds its pidfd. The same goes for CPU masks (conserving mode): a member's original
//! mask is in its job's state file before tact first changes it, and the watchdog, or a later
//! tact's recovery, puts it back.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::{Context, Result};
use tact_core::share::EntityId;
use tact_linux::actuate::affinity::SavedAffinity;
use tact_linux::state::StateDir;
use tact_linux::{Guard, ProcId};

use super::group::Job;
use super::spec::JobSpec;

/// The watchdog resumes everything if tact does not renew within this long (it hung).
const LEASE: Duration = Duration::from_secs(5);

pub struct Safety {
    state: StateDir,
    /// Until `release` dismisses it.
    guard: Option<Guard>,
    /// Original masks of the members whose CPU affinity tact changed, by job: part of each job's
    /// state file.
    masks: HashMap<EntityId, Vec<SavedAffinity>>,
}

impl Safety {
    pub fn start() -> Result<Safety> {
        let state = StateDir::new(crate::paths::runtime_dir()?)?;
        let exe =
            std::env::current_exe().context("cannot find tact's own executable for its guard")?;
        let guard = Guard::start(&exe, &["__guard"])?;
        Ok(Safety {
            state,
            guard: Some(guard),
            masks: HashMap::new(),
        })
    }

    /// Starts the commands of `specs` (each held at its gate until let go, entity ids 0, 1, ...) and protects each.
    /// If one cannot start, none has run yet: the ones started are killed, reaped and let go,
    /// and the error is returned.
    pub fn start_jobs(&mut self, specs: impl IntoIterator<Item = JobSpec>) -> Result<Vec<Job>> {
        let mut jobs = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let started = Job::start(i as u64, spec).and_then(|job| {
                self.protect(&job)?;
                Ok(job)
            });
            match started {
                Ok(job) => jobs.push(job),
                Err(e) => {
                    for job in &mut jobs {
                        job.signal_child(nix::sys::signal::Signal::SIGKILL);
                        job.let_go();
                        job.wait_child();
                    }
                    self.release(&mut jobs)?;
                    return Err(e);
                }
            }
        }
        Ok(jobs)
    }

    /// Records the job's members and hands them to the watchdog (call whenever membership
    /// changes).
    pub fn protect(&mut self, job: &Job) -> Result<()> {
        if job.gone {
            return Ok(());
        }
        self.record(job)?;
        if let Some(guard) = &mut self.guard {
            guard.watch_all(job.tree())?;
        }
        Ok(())
    }

    /// Adds `originals`, masks of members of `job` that tact is about to change for the first
    /// time, to the job's state file. Call it before changing them: a mask changed first and
    /// recorded after would stay narrowed for good if tact died in between.
    pub fn save_masks(&mut self, job: &Job, originals: Vec<SavedAffinity>) -> Result<()> {
        self.masks.entry(job.id).or_default().extend(originals);
        self.record(job)
    }

    /// Rewrites the job's state file (its members and the masks tact changed) and makes sure
    /// the watchdog knows where it is.
    fn record(&mut self, job: &Job) -> Result<()> {
        let masks = self.masks.entry(job.id).or_default();
        // A process that left the job has no mask left to put back.
        let members: HashSet<ProcId> = job.tree().members().into_iter().collect();
        masks.retain(|m| members.contains(&m.id));
        self.state.record_all(job.tree(), masks)?;
        if let Some(guard) = &mut self.guard {
            guard.watch_record(&self.state.record_path(job.tree()))?;
        }
        Ok(())
    }

    /// Tells the watchdog tact is alive. Until the first call only tact's death counts; after
    /// it, also `LEASE` without a call (a hung tact).
    pub fn renew(&mut self) -> Result<()> {
        if let Some(guard) = &mut self.guard {
            guard.renew(LEASE)?;
        }
        Ok(())
    }

    /// Resumes every job (and lets go one still at its gate), then dismisses the watchdog and
    /// removes the state files.
    pub fn release(&mut self, jobs: &mut [Job]) -> Result<()> {
        let mut first_error = None;
        for job in jobs.iter_mut() {
            // A command that never got going still waits at its gate.
            job.let_go();
            if let Err(e) = job.resume() {
                first_error.get_or_insert(e);
            }
        }
        // The watchdog goes only once everything runs again: until then it is the safety net.
        if let Some(Err(e)) = self.guard.take().map(Guard::bye) {
            tracing::warn!("watchdog: {e}");
        }
        for job in jobs.iter() {
            if let Err(e) = self.state.remove(job.tree()) {
                tracing::warn!("{e}");
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
