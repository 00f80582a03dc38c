//! The per-process supervisor of §7.1: time-multiplex isolation of the regulated units (spec 2.6).
//!
//! Only the unit holding the run token executes. It keeps the token until its next due
//! testpoint, where its regulator judges the progress made since the last one; then it gives the
//! token back and the arbiter hands it to the eligible unit (not serving a suspension) of highest
//! priority, then lowest decayed usage: possibly the same one. A unit told to suspend sleeps
//! without the token for the decision's length. There is no supervisor thread: every unit waits
//! on its own condition variable inside its testpoint, and whoever frees the token grants it.
//! Waiting units also watch the holder: one that has not reached a due testpoint within the hung
//! threshold H loses the token (§7.1), and its next sample, longer than H, is discarded by the
//! regulator, which discards every sample whose active time exceeds H.

mod state;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tact_core::polite::{check_progress, Decision, Obs, ObsError, Phase, Regulator};
use tact_linux::{target_key, PsiReader, TargetStore};

use crate::coordinator::{Coordinator, ReleaseReason, UnitReport};
use crate::local::Local;
use crate::{clock, Config, Error};
use state::{State, Status, Token, Unit};

/// A unit's id inside its process.
pub(crate) type UnitId = u64;

/// A bootstrap during which every resource's PSI `some avg10` stayed below this percentage ran on
/// a quiet machine, so its target needs no probation (spec 2.8; the `tact` binary's threshold).
const QUIET_PSI_PERCENT: f64 = 5.0;

type Guard<'a> = MutexGuard<'a, State>;

/// Regulates the units of one process, one at a time. The process-wide one behind
/// [`testpoint`](crate::testpoint) starts itself; build others with [`Supervisor::with_config`]
/// and regulate through [`Polite`](crate::Polite) handles.
pub struct Supervisor {
    config: Config,
    store: Option<TargetStore>,
    state: Mutex<State>,
    coordinator: Mutex<Option<Box<dyn Coordinator>>>,
    /// Serialises saves: they share a temporary file name.
    saving: Mutex<()>,
    psi: PsiReader,
    /// The fast path may use the coarse clock at this period.
    coarse: bool,
}

/// What a regulated unit has been through, for reports and tests.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitStats {
    /// Where its regulator is: bootstrap, probation or regulated.
    pub phase: Phase,
    /// Its priority among the units of its supervisor.
    pub priority: i32,
    /// Due testpoints: those its regulator saw.
    pub testpoints: u64,
    /// Suspensions imposed, and the time spent serving them.
    pub suspensions: u64,
    pub suspended: Duration,
    /// Time spent waiting for the run token (and for the coordinator).
    pub waited: Duration,
    /// Times it lost the token for not reaching a due testpoint within the hung threshold.
    pub hung: u64,
    /// The decision of its last due testpoint.
    pub last: Option<Decision>,
}

impl Supervisor {
    /// A supervisor with its own units and token. Targets persist under `config.state_dir`, if
    /// set, under the key `config.name` or one derived from the executable.
    pub fn with_config(config: Config) -> Result<Arc<Self>, Error> {
        config.polite.validate()?;
        let store = config
            .state_dir
            .as_deref()
            .map(|dir| store_for(dir, config.name.as_deref(), &executable()));
        Ok(Arc::new(Supervisor {
            state: Mutex::new(State::new(config.half_life, clock::now())),
            coarse: clock::coarse_enough(config.polite.period),
            config,
            store,
            coordinator: Mutex::new(None),
            saving: Mutex::new(()),
            psi: PsiReader::new(),
        }))
    }

    /// The settings it was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The file targets persist in, if they do.
    pub fn targets_path(&self) -> Option<&Path> {
        self.store.as_ref().map(TargetStore::path)
    }

    /// Number of registered units.
    pub fn units(&self) -> usize {
        self.lock().units.len()
    }

    /// Installs (or removes) the machine-wide coordinator asked around every turn of the token.
    pub fn set_coordinator(&self, coordinator: Option<Box<dyn Coordinator>>) {
        let installed = coordinator.is_some();
        *self
            .coordinator
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = coordinator;
        self.lock().coordinated = installed;
    }

    /// Saves the targets now (atomically). Without persistence, or before anything was
    /// learnt, there is nothing to do.
    pub fn flush(&self) -> Result<(), Error> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let targets = {
            let st = self.lock();
            if st.saved.is_none() {
                return Ok(());
            }
            st.snapshot()
        };
        let _one_at_a_time = self.saving.lock().unwrap_or_else(PoisonError::into_inner);
        store.save(&targets).map_err(Error::Save)
    }

    /// The slow path of a testpoint: the first call of a unit, an index it has not used yet, or
    /// a due testpoint. Returns once the unit holds the token and may run.
    pub(crate) fn testpoint(
        &self,
        local: &mut Local,
        index: u32,
        metrics: &[f64],
    ) -> Result<(), Error> {
        if self.config.disabled {
            local.off = true;
            return Ok(());
        }
        check_progress(index, metrics)?;
        let due = local.unit.is_some() && clock::now_ns() >= local.due;
        // A few small file reads, outside the lock, at due testpoints of the bootstrap only.
        let quiet = if due && local.bootstrap {
            self.psi.quiet(QUIET_PSI_PERCENT)
        } else {
            None
        };
        let mut st = self.lock();
        if st.forget_other_threads(std::thread::current().id(), local.unit) {
            st.dispatch(clock::now());
        }
        let Some(id) = local.unit.filter(|id| st.units.contains_key(id)) else {
            return self.register(st, local, index, metrics.len());
        };
        let pending = match local.pending(index) {
            Some(p) => p,
            None => {
                st.accept_count(index, metrics.len())?;
                local.add_index(index, metrics.len())
            }
        };
        pending.add(metrics)?;
        if !due {
            return Ok(());
        }
        self.due_testpoint(st, local, id, index, quiet)
    }

    /// A unit's first testpoint: it joins, and waits for the token. Its progress is not
    /// recorded, as there is no interval yet to measure it over.
    fn register<'a>(
        &'a self,
        mut st: Guard<'a>,
        local: &mut Local,
        index: u32,
        metrics: usize,
    ) -> Result<(), Error> {
        if st.saved.is_none() {
            // Targets load at the first testpoint of the process (spec 2.7).
            st.saved = Some(
                self.store
                    .as_ref()
                    .and_then(|store| {
                        store.load().unwrap_or_else(|e| {
                            eprintln!("tact: {e}; calibrating afresh");
                            None
                        })
                    })
                    .unwrap_or_default(),
            );
        }
        st.accept_count(index, metrics)?;
        let now = clock::now();
        let reg = Regulator::new(self.config.polite.clone(), now, Some(st.snapshot()))?;
        let id = st.add(reg, local.priority, now);
        local.unit = Some(id);
        local.coarse = self.coarse;
        local.bootstrap = st.units.get(&id).is_some_and(|u| u.bootstrapping());
        local.pending.clear();
        local.add_index(index, metrics);
        st = self.switch_thread(st, id, now);
        self.take_token(st, local, id, now)
    }

    /// Judge the progress since the last due testpoint, give the token back, serve any
    /// suspension, and wait for the token again.
    fn due_testpoint<'a>(
        &'a self,
        mut st: Guard<'a>,
        local: &mut Local,
        id: UnitId,
        index: u32,
        quiet: Option<bool>,
    ) -> Result<(), Error> {
        let now = clock::now();
        st = self.switch_thread(st, id, now);
        let period = self.config.polite.period;
        let Some(unit) = st.units.get_mut(&id) else {
            return Ok(());
        };
        let at = unit.clock(now);
        // Other indices' progress goes in just before the regulator's period ends (and not
        // before this stretch of running began), when a step only accumulates.
        let before = (unit.last_eval + period)
            .saturating_sub(Duration::from_nanos(1))
            .max(unit.clock(unit.resumed))
            .min(at);
        let active = now.saturating_sub(unit.resumed);
        let judged = judge(unit, local, index, (before, at), active, quiet);
        local.clear();
        local.bootstrap = unit.bootstrapping();
        let decision = judged?;
        unit.counters.testpoints += 1;
        unit.counters.last = Some(decision);
        let reason = match decision {
            Decision::Suspend(s) => {
                unit.counters.suspensions += 1;
                unit.status = Status::Suspended;
                ReleaseReason::Suspended(s)
            }
            Decision::Run | Decision::Indeterminate => {
                // Waiting before the token is handed out: it competes for its own next turn.
                unit.status = Status::Waiting;
                ReleaseReason::Testpoint
            }
        };
        st = self.release(st, id, now, reason);
        st = self.save_if_due(st, now);
        let since = match decision {
            Decision::Suspend(s) => {
                let (guard, woke) = self.sit_out(st, local, id, index, now + s);
                st = guard;
                woke
            }
            Decision::Run | Decision::Indeterminate => now,
        };
        self.take_token(st, local, id, since)
    }

    /// Sleeps without the token until `until`, then tells the regulator the unit is back:
    /// its period restarts here rather than at the verdict, and it may ask for more (the rest of
    /// a suspension it splits into shorter ones). Returns when the unit is eligible again.
    fn sit_out<'a>(
        &'a self,
        mut st: Guard<'a>,
        local: &Local,
        id: UnitId,
        index: u32,
        mut until: Duration,
    ) -> (Guard<'a>, Duration) {
        loop {
            let Some(cv) = st.units.get(&id).map(|u| u.cv.clone()) else {
                return (st, clock::now());
            };
            let slept = clock::now();
            let mut now = slept;
            while now < until {
                st = wait(&cv, st, until - now);
                now = clock::now();
            }
            let Some(unit) = st.units.get_mut(&id) else {
                return (st, now);
            };
            unit.counters.suspended += now.saturating_sub(slept);
            let zeros = local.pending.iter().find(|p| p.index == index);
            let more = zeros.and_then(|p| {
                let obs = Obs {
                    index,
                    dp: &p.dp,
                    active: Duration::ZERO,
                    quiet: None,
                };
                // Cannot fail: the index and its metric count were just accepted.
                unit.step(unit.clock(now), obs).ok()
            });
            match more.map(|s| s.decision) {
                Some(Decision::Suspend(s)) => until = now + s,
                _ => {
                    unit.status = Status::Waiting;
                    return (st, now);
                }
            }
        }
    }

    /// Waits (counted from `since`) until the arbiter grants the unit the token, then asks the
    /// coordinator, if any, and sets the unit's next due time.
    fn take_token<'a>(
        &'a self,
        mut st: Guard<'a>,
        local: &mut Local,
        id: UnitId,
        since: Duration,
    ) -> Result<(), Error> {
        let hung = self.config.polite.hung;
        loop {
            // The token may have been left free (its last holder was presumed hung, then left).
            st.dispatch(clock::now());
            let Some(unit) = st.units.get(&id) else {
                return Ok(());
            };
            if unit.status == Status::Granted {
                break;
            }
            let cv = unit.cv.clone();
            let now = clock::now();
            let timeout = match st.hung_deadline(hung) {
                Some(deadline) if deadline <= now => {
                    st = self.revoke(st, now);
                    continue;
                }
                Some(deadline) => deadline - now,
                // Woken by whoever frees the token; the timeout only guards against surprises.
                None => hung,
            };
            st = wait(&cv, st, timeout);
        }
        let coordinated = st.coordinated && {
            let priority = st.units.get(&id).map_or(0, |u| u.priority);
            drop(st);
            let granted = self.with_coordinator(|c| c.acquire(priority).is_ok());
            st = self.lock();
            granted == Some(true)
        };
        st.token = Token::Held {
            unit: id,
            coordinated,
        };
        let now = clock::now();
        let period = self.config.polite.period;
        let Some(unit) = st.units.get_mut(&id) else {
            return Ok(());
        };
        let waited = now.saturating_sub(since);
        unit.waited += waited;
        unit.counters.waited += waited;
        unit.resumed = now;
        unit.status = Status::Running;
        unit.thread = Some(std::thread::current().id());
        // A period of running from now: the regulator's period restarted at its last
        // evaluation, which was when this unit stopped running (token waits are off its clock),
        // or when it came back from a suspension; a peek needs a period of running too.
        local.due = clock::nanos(now + period);
        Ok(())
    }

    /// The holder has not reached a due testpoint within the hung threshold: it loses the token.
    fn revoke<'a>(&'a self, mut st: Guard<'a>, now: Duration) -> Guard<'a> {
        let Some(holder) = st.holder() else {
            return st;
        };
        if let Some(unit) = st.units.get_mut(&holder) {
            unit.status = Status::Away;
            unit.counters.hung += 1;
        }
        self.release(st, holder, now, ReleaseReason::Hung)
    }

    /// A thread runs one unit at a time: if another unit of this thread holds the token, it is
    /// not running now, so it gives the token back rather than block this one until it is
    /// presumed hung.
    fn switch_thread<'a>(&'a self, st: Guard<'a>, id: UnitId, now: Duration) -> Guard<'a> {
        let this = std::thread::current().id();
        let Some(holder) = st.holder().filter(|&h| h != id) else {
            return st;
        };
        let mut st = st;
        match st.units.get_mut(&holder) {
            Some(u) if u.status == Status::Running && u.thread == Some(this) => {
                u.status = Status::Away;
            }
            _ => return st,
        }
        self.release(st, holder, now, ReleaseReason::Switched)
    }

    /// If `id` holds the token: charges it to the arbiter, tells the coordinator, and hands the
    /// token to the next unit. The caller has already set `id`'s new status.
    fn release<'a>(
        &'a self,
        mut st: Guard<'a>,
        id: UnitId,
        now: Duration,
        reason: ReleaseReason,
    ) -> Guard<'a> {
        let Token::Held { unit, coordinated } = st.token else {
            return st;
        };
        if unit != id {
            return st;
        }
        let ran = st
            .units
            .get(&id)
            .map_or(Duration::ZERO, |u| now.saturating_sub(u.resumed));
        st.arbiter.charge(id, now, ran);
        if coordinated {
            let report = match st.units.get(&id) {
                Some(u) => UnitReport {
                    unit: id,
                    priority: u.priority,
                    reason,
                    calibrating: u.bootstrapping(),
                    rate: u.last_rate.map(|(r, _)| r),
                    target: u.last_rate.and_then(|(_, t)| t),
                    suspended: u.counters.suspended,
                },
                None => UnitReport {
                    unit: id,
                    priority: 0,
                    reason,
                    calibrating: false,
                    rate: None,
                    target: None,
                    suspended: Duration::ZERO,
                },
            };
            st.token = Token::Releasing;
            drop(st);
            self.with_coordinator(|c| c.release(ran, &report));
            st = self.lock();
        }
        st.token = Token::Free;
        st.dispatch(clock::now());
        st
    }

    /// Every `save_every`, saves the targets (outside the lock).
    fn save_if_due<'a>(&'a self, mut st: Guard<'a>, now: Duration) -> Guard<'a> {
        if self.store.is_none() || now.saturating_sub(st.last_save) < self.config.save_every {
            return st;
        }
        st.last_save = now;
        drop(st);
        if let Err(e) = self.flush() {
            eprintln!("tact: {e}");
        }
        self.lock()
    }

    pub(crate) fn set_priority(&self, local: &mut Local, priority: i32) {
        local.priority = priority;
        let Some(id) = local.unit else {
            return;
        };
        let mut st = self.lock();
        if let Some(unit) = st.units.get_mut(&id) {
            unit.priority = priority;
            st.arbiter.set_priority(id, priority);
        }
    }

    pub(crate) fn stats(&self, local: &Local) -> Option<UnitStats> {
        let st = self.lock();
        let unit = st.units.get(&local.unit?)?;
        let c = &unit.counters;
        Some(UnitStats {
            phase: unit.reg.phase(),
            priority: unit.priority,
            testpoints: c.testpoints,
            suspensions: c.suspensions,
            suspended: c.suspended,
            waited: c.waited,
            hung: c.hung,
            last: c.last,
        })
    }

    /// The unit goes (thread exit, handle dropped): it frees the token if it holds it, and what
    /// it learnt stays for the next save.
    pub(crate) fn leave(&self, local: &mut Local) {
        let Some(id) = local.unit.take() else {
            return;
        };
        let mut st = self.lock();
        if let Some(unit) = st.units.get_mut(&id) {
            unit.status = Status::Away;
        }
        st = self.release(st, id, clock::now(), ReleaseReason::Left);
        st.remove(id);
    }

    fn lock(&self) -> Guard<'_> {
        // The state stays consistent between statements; a panic elsewhere must not stop every
        // regulated thread of the program.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the coordinator, if one is installed. A panicking coordinator counts as an
    /// unreachable one (None): it must not leave the token held for ever.
    fn with_coordinator<R>(&self, f: impl FnOnce(&mut dyn Coordinator) -> R) -> Option<R> {
        let mut c = self
            .coordinator
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let c = c.as_deref_mut()?;
        catch_unwind(AssertUnwindSafe(|| f(c))).ok()
    }
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("config", &self.config)
            .field("targets", &self.targets_path())
            .finish_non_exhaustive()
    }
}

impl Drop for Supervisor {
    /// Targets are saved when the last handle on a supervisor goes (the process-wide one saves
    /// at exit instead).
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            eprintln!("tact: {e}");
        }
    }
}

/// Hands a unit's accumulated progress to its regulator and returns its decision. Other indices'
/// progress goes in at `before`, just before the period ends, so that it only accumulates and
/// the whole interval is judged as one sample at `at` (spec 2.5, phased metrics).
fn judge(
    unit: &mut Unit,
    local: &Local,
    index: u32,
    (before, at): (Duration, Duration),
    active: Duration,
    quiet: Option<bool>,
) -> Result<Decision, ObsError> {
    for p in local
        .pending
        .iter()
        .filter(|p| p.touched && p.index != index)
    {
        let obs = Obs {
            index: p.index,
            dp: &p.dp,
            active: Duration::ZERO,
            quiet,
        };
        unit.step(before, obs)?;
    }
    let Some(p) = local.pending.iter().find(|p| p.index == index) else {
        return Ok(Decision::Run);
    };
    let obs = Obs {
        index,
        dp: &p.dp,
        active,
        quiet,
    };
    Ok(unit.step(at, obs)?.decision)
}

fn wait<'a>(cv: &Condvar, st: Guard<'a>, timeout: Duration) -> Guard<'a> {
    match cv.wait_timeout(st, timeout) {
        Ok((st, _)) => st,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// The running program, for the persistence key.
/// What the library's progress is, in the targets file: metrics reported through testpoints.
const PROGRESS: &str = "testpoint";

/// The targets file of this program: `name` (`TACT_NAME`), or the executable's file name, a
/// hash of its path and `-lib`, so a program regulated both from inside (library) and from
/// outside (`tact run`) keeps two targets: their progress differs.
fn store_for(dir: &Path, name: Option<&str>, exe: &Path) -> TargetStore {
    let program = exe.to_string_lossy();
    let key = target_key(name, &program, &program, "-lib");
    TargetStore::new(dir, &key, &program, &[PROGRESS.to_string()])
}

fn executable() -> PathBuf {
    std::env::current_exe()
        .ok()
        .or_else(|| std::env::args_os().next().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("unknown"))
}
