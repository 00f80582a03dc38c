//! The signals backend of `tact tickets run`: `tact share`'s ALPS engine (SIGSTOP/SIGCONT duty
//! cycles, unprivileged) with integer shares ∝ the jobs' rights, changed live every interval.
//!
//! A job competes while the engine last found one of its processes runnable. The engine reads a
//! job only while it lets it run, so a job tact stopped keeps the activity it had when it was
//! stopped: tact's own stops do not count (spec §2.3). (Its first read comes one quantum after
//! the start, before the first interval ends, so the arrival reading of a job still stopped by
//! its own shell is never used.)

use std::time::Duration;

use anyhow::Result;
use tact_core::share::{Alps, EntityId};
use tact_core::tickets::compile::WeightRange;
use tact_core::tickets::Resource;

use super::report::Held;
use super::rights::Rights;
use crate::share::alps::Retune;
use crate::share::group::Job;

/// ALPS shares. A cycle is Σshares quanta of the group's CPU time, and a share changed
/// mid-cycle is settled within it (a job that ran ahead under a larger share owes the rest), so
/// shares stay small to keep cycles short: a job's share is its rights to within 1/20 of the
/// largest (spec §4 "Compiling", quantized to the engine's integer shares).
pub const ALPS_SHARES: WeightRange = WeightRange {
    min: 1,
    max: 20,
    default: 1,
};

pub struct Signals<'r, 'a> {
    pub rights: &'r mut Rights<'a>,
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// The shares the engine runs on.
    pub shares: Vec<u64>,
    /// Whether `--duration` ended the run.
    pub timed_out: bool,
}

impl Retune for Signals<'_, '_> {
    fn every(&self) -> Duration {
        self.interval
    }

    fn retune(&mut self, alps: &Alps, jobs: &[Job]) -> Result<Option<Vec<(EntityId, u64)>>> {
        if self.duration.is_some_and(|d| self.rights.elapsed() >= d) {
            self.timed_out = true;
            return Ok(None);
        }
        self.rights
            .set_active(Resource::Cpu, &competing(alps, jobs))?;
        let shares = self.rights.weights(Resource::Cpu, ALPS_SHARES);
        let changed = changed_shares(jobs, &shares, &self.shares);
        self.rights.interval(jobs, Held::cpu_only(shares.clone()))?;
        self.shares = shares;
        Ok(Some(changed))
    }
}

/// Whether each job competes for the CPU: the engine last found one of its processes runnable
/// (see the module: tact's own stops do not count).
pub fn competing(alps: &Alps, jobs: &[Job]) -> Vec<bool> {
    jobs.iter()
        .map(|j| !j.gone && alps.entity(j.id).is_some_and(|e| !e.blocked))
        .collect()
}

/// The engine's share changes for the jobs still there: `new` where it differs from `old`.
pub fn changed_shares(jobs: &[Job], new: &[u64], old: &[u64]) -> Vec<(EntityId, u64)> {
    jobs.iter()
        .zip(new.iter().zip(old))
        .filter(|(j, (new, old))| new != old && !j.gone)
        .map(|(j, (new, _))| (j.id, *new))
        .collect()
}
