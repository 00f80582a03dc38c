//! Crash safety of `tact share` (DESIGN.md invariant 1): every member of every job is recorded
//! in a state file and handed to the watchdog as soon as tact knows it, before tact may stop it,
//! so that no exit path, SIGKILL included, leaves a job stopped. Jobs tact starts wait at a
//! start gate until then (`tact_linux::gate`, see `group`): blocked, never stopped, and ended
//! unstarted if tact dies first, since nothing can hold a process that stops itself before the
//! watchdog holds its pidfd.

use std::time::Duration;

use anyhow::{Context, Result};
use tact_linux::state::StateDir;
use tact_linux::Guard;

use super::group::Job;
use super::spec::JobSpec;

/// The watchdog resumes everything if tact does not renew within this long (it hung).
const LEASE: Duration = Duration::from_secs(5);

pub struct Safety {
    state: StateDir,
    /// Until `release` dismisses it.
    guard: Option<Guard>,
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
        self.state.record_all(job.tree())?;
        if let Some(guard) = &mut self.guard {
            guard.watch_all(job.tree())?;
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
