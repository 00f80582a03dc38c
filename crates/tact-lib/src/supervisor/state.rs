//! What the supervisor's lock protects: the registered units, the run token and the arbiter that
//! hands it out, and the targets that persist.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar};
use std::thread::ThreadId;
use std::time::Duration;

use tact_core::polite::{
    Arbiter, Decision, Obs, ObsError, Phase, Regulator, SampleKind, Step, TargetSet,
};

use super::UnitId;

/// Where a unit is with respect to the run token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    /// Holds the token and runs between two testpoints.
    Running,
    /// Chosen by the arbiter: its thread is waking up, or asking the coordinator.
    Granted,
    /// Inside a testpoint, eligible for the token.
    Waiting,
    /// Inside a testpoint, serving a suspension: not eligible.
    Suspended,
    /// Outside a testpoint without the token: presumed hung, or another unit of its thread took
    /// over. Its next due testpoint makes it wait like everyone else.
    Away,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token {
    Free,
    /// `coordinated`: the machine-wide coordinator granted this turn and expects a release.
    Held {
        unit: UnitId,
        coordinated: bool,
    },
    /// The last holder is telling the coordinator it stopped; nobody gets the token meanwhile,
    /// so the coordinator always sees a release before the next acquire.
    Releasing,
}

/// Counters behind [`UnitStats`](crate::UnitStats).
#[derive(Debug, Clone, Default)]
pub(super) struct Counters {
    pub(super) testpoints: u64,
    pub(super) suspensions: u64,
    pub(super) suspended: Duration,
    pub(super) waited: Duration,
    pub(super) hung: u64,
    pub(super) last: Option<Decision>,
}

/// The supervisor's side of one regulated unit.
pub(super) struct Unit {
    pub(super) reg: Regulator,
    pub(super) priority: i32,
    /// Signalled when the unit is granted the token.
    pub(super) cv: Arc<Condvar>,
    pub(super) status: Status,
    /// The thread that last took the token for this unit.
    pub(super) thread: Option<ThreadId>,
    /// When it last started running with the token.
    pub(super) resumed: Duration,
    /// Total time spent waiting for the token. The regulator's clock for this unit is
    /// `now - waited`: it runs through running and suspensions (which it times) and stops during
    /// token waits, so the regulator's period starts where the unit's running does, and
    /// progress of other indices can be handed in at a time when it only accumulates.
    pub(super) waited: Duration,
    /// Regulator-clock time of its last evaluation (any step that did more than accumulate).
    pub(super) last_eval: Duration,
    /// Progress rate (first metric, per second of running) and that metric's target at the last
    /// evaluated testpoint, for `tact status`.
    pub(super) last_rate: Option<(f64, Option<f64>)>,
    pub(super) counters: Counters,
}

impl Unit {
    /// The regulator clock at supervisor time `now`.
    pub(super) fn clock(&self, now: Duration) -> Duration {
        now.saturating_sub(self.waited)
    }

    /// One regulator step, remembering when the regulator last evaluated (its period starts
    /// there), so that steps of other indices can be placed where they only accumulate.
    pub(super) fn step(&mut self, at: Duration, obs: Obs) -> Result<Step, ObsError> {
        let index = obs.index;
        let step = self.reg.step(at, obs)?;
        if step.kind != SampleKind::Accumulated {
            self.last_eval = at;
        }
        if let Some(e) = step.eval.as_ref().filter(|e| e.d > 0.0) {
            if let Some(p) = e.dp.get(&index).and_then(|dp| dp.first()) {
                // A target still in its bootstrap is no calibrated target yet.
                let target = match self.bootstrapping() {
                    true => None,
                    false => self
                        .reg
                        .targets()
                        .get(index)
                        .and_then(|t| t.rates().first().copied()),
                };
                self.last_rate = Some((p / e.d, target));
            }
        }
        Ok(step)
    }

    pub(super) fn bootstrapping(&self) -> bool {
        matches!(self.reg.phase(), Phase::Bootstrap { .. })
    }
}

pub(super) struct State {
    pub(super) units: BTreeMap<UnitId, Unit>,
    pub(super) arbiter: Arbiter<UnitId>,
    pub(super) token: Token,
    next_id: UnitId,
    /// Metric count of every index used in this process.
    counts: BTreeMap<u32, usize>,
    /// Saved targets, loaded at the first registration (None before), merged with those of
    /// units that have left.
    pub(super) saved: Option<TargetSet>,
    pub(super) last_save: Duration,
    /// A coordinator is installed (checked without taking its own lock).
    pub(super) coordinated: bool,
    /// The process the units live in (a forked child has only the thread that forked).
    pid: u32,
}

impl State {
    pub(super) fn new(half_life: Duration, now: Duration) -> Self {
        State {
            units: BTreeMap::new(),
            arbiter: Arbiter::new(half_life),
            token: Token::Free,
            next_id: 1,
            counts: BTreeMap::new(),
            saved: None,
            last_save: now,
            coordinated: false,
            pid: std::process::id(),
        }
    }

    /// In a child forked from the process the units lived in, only the forking thread, `this`,
    /// goes on: the units other threads ran or waited in are removed (one of them would be
    /// granted the token and never take it), and a token they held, or that was being handed
    /// back to the coordinator, is free. `keep`: the unit of the calling testpoint. True if the
    /// process had forked; the caller dispatches then.
    pub(super) fn forget_other_threads(&mut self, this: ThreadId, keep: Option<UnitId>) -> bool {
        let pid = std::process::id();
        if pid == self.pid {
            return false;
        }
        self.pid = pid;
        let gone: Vec<UnitId> = self
            .units
            .iter()
            .filter(|(&id, u)| Some(id) != keep && u.thread != Some(this))
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.remove(id);
        }
        match self.token {
            Token::Held { unit, .. } if !self.units.contains_key(&unit) => self.token = Token::Free,
            Token::Releasing => self.token = Token::Free,
            _ => {}
        }
        true
    }

    /// Adds a unit that wants the token.
    pub(super) fn add(&mut self, reg: Regulator, priority: i32, now: Duration) -> UnitId {
        let id = self.next_id;
        self.next_id += 1;
        self.arbiter.add(id, priority, now);
        self.units.insert(
            id,
            Unit {
                reg,
                priority,
                cv: Arc::new(Condvar::new()),
                status: Status::Waiting,
                thread: None,
                resumed: now,
                waited: Duration::ZERO,
                last_eval: now,
                last_rate: None,
                counters: Counters::default(),
            },
        );
        id
    }

    /// Removes a unit, keeping what it learnt for the next save.
    pub(super) fn remove(&mut self, id: UnitId) {
        if let Some(unit) = self.units.remove(&id) {
            self.arbiter.remove(id);
            merge(
                self.saved.get_or_insert_with(TargetSet::new),
                unit.reg.targets(),
            );
        }
    }

    /// The unit holding the token, if any.
    pub(super) fn holder(&self) -> Option<UnitId> {
        match self.token {
            Token::Held { unit, .. } => Some(unit),
            _ => None,
        }
    }

    /// If the token is free, grants it to the unit the arbiter picks among those waiting, and
    /// wakes that unit's thread.
    pub(super) fn dispatch(&mut self, now: Duration) {
        if self.token != Token::Free {
            return;
        }
        let units = &self.units;
        let waiting = |id| units.get(&id).map(|u| u.status) == Some(Status::Waiting);
        if let Some(id) = self.arbiter.pick(now, waiting) {
            self.token = Token::Held {
                unit: id,
                coordinated: false,
            };
            if let Some(unit) = self.units.get_mut(&id) {
                unit.status = Status::Granted;
                unit.cv.notify_one();
            }
        }
    }

    /// When the running holder will be presumed hung.
    pub(super) fn hung_deadline(&self, hung: Duration) -> Option<Duration> {
        let unit = self.units.get(&self.holder()?)?;
        (unit.status == Status::Running).then_some(unit.resumed + hung)
    }

    /// Accepts the metric count of an index, or says how it differs from the count used before
    /// in this process. A saved target of another count (the program changed) is dropped.
    pub(super) fn accept_count(&mut self, index: u32, metrics: usize) -> Result<(), ObsError> {
        match self.counts.get(&index) {
            Some(&expected) if expected != metrics => Err(ObsError::MetricCount {
                index,
                expected,
                got: metrics,
            }),
            Some(_) => Ok(()),
            None => {
                if let Some(saved) = &mut self.saved {
                    if saved.get(index).is_some_and(|t| t.metrics() != metrics) {
                        eprintln!(
                            "tact: the saved target of index {index} has another number of \
                             metrics; calibrating it afresh"
                        );
                        saved.targets.remove(&index);
                    }
                }
                self.counts.insert(index, metrics);
                Ok(())
            }
        }
    }

    /// The targets worth saving, or seeding a new unit with: for each index, the most trained
    /// of the saved one and those of the live units.
    pub(super) fn snapshot(&self) -> TargetSet {
        let mut all = self.saved.clone().unwrap_or_default();
        for unit in self.units.values() {
            merge(&mut all, unit.reg.targets());
        }
        all
    }
}

/// Keeps, for each index, the target with the most updates.
fn merge(into: &mut TargetSet, from: &TargetSet) {
    for (index, target) in &from.targets {
        match into.targets.get(index) {
            Some(t) if t.updates() >= target.updates() => {}
            _ => {
                into.targets.insert(*index, target.clone());
            }
        }
    }
}
