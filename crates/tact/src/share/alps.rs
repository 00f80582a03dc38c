//! The `signals` backend: ALPS at user level. Every quantum a timerfd wakes tact, which reads the
//! CPU clocks of the jobs the engine names, steps the engine, and sends the SIGSTOPs and SIGCONTs
//! (and, in conserving mode, the affinity changes) it decides. Between ticks a one-shot timerfd
//! wakes it for the checks the engine asks for (quantization-aware accounting). Ticks at which
//! the engine has nothing to do are slept through (`Alps::idle_quanta`, `Ticker::skip`): with lazy
//! reads, often most of them. Membership is rescanned every second (a user principal's too: the
//! user's new processes join), and a process tree's at once when it reads blocked after running
//! (`Edge::read_due`); newcomers are handed to [`Safety`] before they can be stopped. A
//! [`Retune`] (`tact tickets`) may change the shares while it runs.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::Result;
use tact_core::share::{Action, Alps, Counters, EntityId, Reading, ShareConfig, StepOut};
use tact_linux::actuate::affinity::{self, SavedAffinity};
use tact_linux::actuate::slice;
use tact_linux::timer::{Alarm, Ticker};
use tact_linux::ProcId;

use super::group::{self, Job, MemberIds};
use super::report::CycleLog;
use super::safety::Safety;
use crate::jobs::events::{Event, Events, Received};

/// Membership rescan period (spec section 2, `rescan`).
const RESCAN: Duration = Duration::from_secs(1);
const RENEW_EVERY: Duration = Duration::from_millis(500);
/// The EEVDF slice tact asks for its control thread: the kernel's least (0.1 ms). Measured
/// side by side on one pinned CPU (26 Nov, two runs each, against the default 1.4 ms): mean RMS
/// linear-5 at 10 ms 3.8/3.3% → 1.8/1.2%, linear-20 3.4/4.7% → 0.3/1.4%, skewed-20's 1-share
/// processes 14.3/17.0% → 12.0/6.6%; tact's own CPU about the same (linear-20 0.41–0.46% →
/// 0.47%).
const OWN_SLICE: Duration = Duration::from_micros(100);

/// Changes the shares while ALPS runs: every `every()`, it sees the engine and the jobs and
/// answers with new shares, or with the end of the run (the caller then ends the jobs).
pub trait Retune {
    fn every(&self) -> Duration;
    /// New shares of some jobs (by entity id), or `None` to end the run now.
    fn retune(&mut self, alps: &Alps, jobs: &[Job]) -> Result<Option<Vec<(EntityId, u64)>>>;
}

/// What the run came to.
pub struct Outcome {
    pub counters: Counters,
    /// The signal that interrupted it, if one did.
    pub interrupted: Option<Received>,
}

pub fn run(
    jobs: &mut [Job],
    cfg: ShareConfig,
    cpus: &[usize],
    safety: &mut Safety,
    log: Option<&mut CycleLog>,
    events: &mut Events,
    retune: Option<&mut dyn Retune>,
) -> Result<Outcome> {
    let mut alps = Alps::new(cfg.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    safety.renew()?;
    let mut edge = Edge {
        safety,
        partition: Partition::new(cpus.to_vec()),
        retune,
    };
    let result = edge.drive(
        jobs,
        &mut alps,
        Duration::from_nanos(cfg.quantum_ns),
        log,
        events,
    );
    // Whatever happened, nothing stays pinned (the caller resumes everything).
    edge.partition.restore();
    let interrupted = result?;
    Ok(Outcome {
        counters: alps.counters(),
        interrupted,
    })
}

struct Edge<'a, 'r> {
    safety: &'a mut Safety,
    partition: Partition,
    retune: Option<&'r mut dyn Retune>,
}

impl Edge<'_, '_> {
    fn drive(
        &mut self,
        jobs: &mut [Job],
        alps: &mut Alps,
        quantum: Duration,
        mut log: Option<&mut CycleLog>,
        events: &mut Events,
    ) -> Result<Option<Received>> {
        let mut ids = MemberIds::default();
        let mut pending = Vec::new();
        for job in jobs.iter_mut() {
            if let Some(ev) = job.arrive(&mut ids)? {
                pending.push(ev);
            } else if job.is_user() {
                eprintln!(
                    "tact: {} has no processes yet: it joins when one starts",
                    job.spec.label()
                );
            }
            self.safety.protect(job)?;
        }
        // Every job is accounted for from here: let them all go at once.
        for job in jobs.iter_mut() {
            job.let_go();
        }
        // Wake-ups that displace a running member at once instead of after its slice: pinned
        // with its group, the difference between a check on time and one 3 ms late (slice.rs).
        // Where the kernel has no custom slices, or refuses, tact runs as before.
        if let Err(e) = slice::shorten_own_slice(OWN_SLICE) {
            tracing::debug!("own EEVDF slice unchanged: {e}");
        }
        // The engine's clock: tick k at k·Q from here.
        let start = Instant::now();
        let mut ticker = Ticker::new(quantum)?;
        let mut alarm = Alarm::new()?;
        // The engine asked for a check before the next tick (setting the alarm again resets it).
        let mut armed = false;
        // Ticks the ticker lets pass without a wake-up: quanta the engine said are idle.
        let mut skipping = 0;
        let (mut last_scan, mut last_renew) = (Instant::now(), Instant::now());
        let mut last_retune = Instant::now();
        loop {
            if group::all_ended(jobs) {
                return Ok(None);
            }
            let fd = if armed { alarm.as_fd() } else { ticker.as_fd() };
            // Woken for the watchdog's renewal as well as by the clock: a quantum may be longer
            // than the lease (`--quantum` up to 60 s; at 8 s the watchdog took tact for hung).
            let until_renew = (last_renew + RENEW_EVERY).saturating_duration_since(Instant::now());
            if let Event::Signal(sig) = events.wait(fd, until_renew)? {
                return Ok(Some(sig));
            }
            if last_renew.elapsed() >= RENEW_EVERY {
                last_renew = Instant::now();
                self.safety.renew()?;
            }
            // A tick that passed meanwhile supersedes the check: it reads whoever is due.
            let ticks = ticker.take()?;
            if ticks == 0 {
                if armed && alarm.take()? {
                    let now = start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
                    let mut readings = Vec::new();
                    for id in alps.due_checks(now) {
                        if let Some(r) = jobs[id as usize].read(&mut pending) {
                            readings.push((id, r));
                        }
                    }
                    let out = alps.check(now, &readings);
                    tracing::trace!(reads = readings.len(), actions = ?out.actions, "check");
                    armed = self.arm(&mut alarm, &out, start)?;
                    self.carry_out(jobs, alps, &out, start, log.as_deref_mut())?;
                }
                continue;
            }
            // The idle quanta slept through pass as the steps they saved would have: without
            // a decision (a late wake-up past them still counts as an overrun).
            let idle = std::mem::take(&mut skipping).min(ticks - 1);
            alps.skip(idle)
                .map_err(|e| anyhow::anyhow!("share engine: {e}"))?;
            let ticks = ticks - idle;
            let mut readings = Vec::new();
            for id in alps.due(ticks) {
                if let Some(r) = self.read_due(&mut jobs[id as usize], &mut ids, &mut pending)? {
                    readings.push((id, r));
                }
            }
            if last_scan.elapsed() >= RESCAN {
                last_scan = Instant::now();
                // A departed user principal is looked for too: its user may have started a process.
                for job in jobs.iter_mut().filter(|j| !j.gone || j.is_user()) {
                    if job.rescan_events(&mut ids, &mut pending)? {
                        self.safety.protect(job)?;
                        // A newcomer inherits its parent's mask, which may be the old one.
                        self.partition.apply_to(job, self.safety)?;
                    }
                }
            }
            let out = alps
                .step(ticks, &readings, std::mem::take(&mut pending))
                .expect("ticks > 0");
            for r in &out.rejected {
                tracing::warn!("share engine refused {:?}: {}", r.event, r.error);
            }
            tracing::trace!(ticks, reads = readings.len(), actions = ?out.actions, "step");
            armed = self.arm(&mut alarm, &out, start)?;
            self.carry_out(jobs, alps, &out, start, log.as_deref_mut())?;
            if let Some(retune) = self.retune.as_deref_mut() {
                if last_retune.elapsed() >= retune.every() {
                    last_retune = Instant::now();
                    // The activity a retune sees must not wait for the rescan: a job found
                    // blocked may have started what runs (a shell's command) since the last.
                    for job in jobs
                        .iter_mut()
                        .filter(|j| !j.gone && alps.entity(j.id).is_some_and(|e| e.blocked))
                    {
                        if job.rescan_events(&mut ids, &mut pending)? {
                            self.safety.protect(job)?;
                            self.partition.apply_to(job, self.safety)?;
                        }
                    }
                    match retune.retune(alps, jobs)? {
                        // Effective in the current cycle, at the next step.
                        Some(shares) => pending.extend(
                            shares
                                .into_iter()
                                .map(|(id, share)| tact_core::share::Event::SetShare { id, share }),
                        ),
                        None => return Ok(None),
                    }
                }
            }
            if !armed {
                // Sleep through the quanta in which the engine has nothing to do (most of them
                // when every job has a few quanta of allowance left), but wake for the next
                // rescan and retune (the renewal wakes tact on its own).
                let mut next_chore = last_scan + RESCAN;
                if let Some(retune) = self.retune.as_deref() {
                    next_chore = next_chore.min(last_retune + retune.every());
                }
                let chore_tick = next_chore
                    .saturating_duration_since(start)
                    .as_nanos()
                    .div_ceil(quantum.as_nanos());
                let before_chore = u64::try_from(chore_tick)
                    .unwrap_or(u64::MAX)
                    .saturating_sub(alps.count() + 1);
                skipping = alps.idle_quanta().min(before_chore);
                ticker.skip(skipping)?;
            }
        }
    }

    /// Reads a job the engine named due at a step. Known members that all sleep may be waiting
    /// for a child tact has not seen yet: the shell or `timeout` of a command that has just
    /// started, `make`. Judged blocked, such a job is charged as a sleeper while its child runs
    /// unchecked until the next rescan, which then charges the child's CPU as one late debt:
    /// `timeout 3 <spinner>` jobs ran their first second at the kernel's even split, and the
    /// 1:9 split of a 3 s run came out 17/83 (27.5/72.5 under load). Only a member that ran can
    /// have forked, so a process tree that reads blocked after running since its latest scan is
    /// rescanned before it is charged. A user principal waits for the periodic rescan, which
    /// walks all of `/proc`.
    fn read_due(
        &mut self,
        job: &mut Job,
        ids: &mut MemberIds,
        pending: &mut Vec<tact_core::share::Event>,
    ) -> Result<Option<Reading>> {
        let reading = job.read(pending);
        let suspect = reading.as_ref().is_some_and(|r| r.blocked);
        if !suspect || job.is_user() || !job.ran_since_scan() {
            return Ok(reading);
        }
        if !job.rescan_events(ids, pending)? {
            return Ok(reading);
        }
        self.safety.protect(job)?;
        self.partition.apply_to(job, self.safety)?;
        Ok(job.read(pending))
    }

    /// Sets the alarm for the check the engine asked for, if any (`start`: the engine's clock's
    /// origin); whether it did.
    fn arm(&self, alarm: &mut Alarm, out: &StepOut, start: Instant) -> Result<bool> {
        let Some(at) = out.wake_at.map(Duration::from_nanos) else {
            return Ok(false);
        };
        alarm.set(at.saturating_sub(start.elapsed()))?;
        Ok(true)
    }

    /// Acts on a step's or a check's result: signals and affinity, the weights shown at the
    /// end, the cycle log.
    fn carry_out(
        &mut self,
        jobs: &mut [Job],
        alps: &Alps,
        out: &StepOut,
        start: Instant,
        log: Option<&mut CycleLog>,
    ) -> Result<()> {
        if out.cycle.is_some() || out.actions.iter().any(|a| !a.is_signal()) {
            for e in alps.entities() {
                jobs[e.id as usize].weight = Some(e.weight);
            }
        }
        self.act(jobs, &out.actions)?;
        if let (Some(log), Some(cycle)) = (log, &out.cycle) {
            log.cycle(start.elapsed(), cycle, jobs)?;
        }
        Ok(())
    }

    /// Carries out the engine's actions, stops first (they come sorted).
    fn act(&mut self, jobs: &mut [Job], actions: &[Action]) -> Result<()> {
        let mut repartition = false;
        for a in actions {
            let job = &mut jobs[a.id() as usize];
            if job.gone {
                continue;
            }
            match *a {
                Action::Stop(_) | Action::Unfill(_) => job.stop()?,
                Action::Continue(_) | Action::Fill(_) => job.resume()?,
                Action::Pin { id, cpus } => repartition |= self.partition.pin(id, cpus),
                Action::Unpin(id) => repartition |= self.partition.unpin(id),
            }
        }
        if repartition {
            for job in jobs.iter_mut().filter(|j| !j.gone) {
                self.partition.apply_to(job, self.safety)?;
            }
        }
        Ok(())
    }
}

/// Conserving mode's core partition: which of the group's CPUs each capped job owns; every
/// other job runs on the rest. Original masks are saved the first time tact changes a process,
/// in the state file before the change (so that the watchdog restores them if tact is killed),
/// and restored at the end.
struct Partition {
    cpus: Vec<usize>,
    owned: BTreeMap<EntityId, Vec<usize>>,
    saved: BTreeMap<ProcId, SavedAffinity>,
}

impl Partition {
    fn new(cpus: Vec<usize>) -> Self {
        Partition {
            cpus,
            owned: BTreeMap::new(),
            saved: BTreeMap::new(),
        }
    }

    /// Gives `id` `n` CPUs of its own, from the top of the group's list; whether that changed
    /// anything.
    fn pin(&mut self, id: EntityId, n: u32) -> bool {
        self.owned.remove(&id);
        let taken: Vec<usize> = self.owned.values().flatten().copied().collect();
        let mine: Vec<usize> = self
            .cpus
            .iter()
            .rev()
            .filter(|c| !taken.contains(c))
            .take(n as usize)
            .copied()
            .collect();
        // Never leave the unpinned jobs without a CPU.
        if mine.is_empty() || taken.len() + mine.len() >= self.cpus.len() {
            return false;
        }
        self.owned.insert(id, mine);
        true
    }

    fn unpin(&mut self, id: EntityId) -> bool {
        self.owned.remove(&id).is_some()
    }

    /// The CPUs job `id` should run on.
    fn cpus_of(&self, id: EntityId) -> Vec<usize> {
        if let Some(mine) = self.owned.get(&id) {
            return mine.clone();
        }
        let taken: Vec<usize> = self.owned.values().flatten().copied().collect();
        self.cpus
            .iter()
            .filter(|c| !taken.contains(c))
            .copied()
            .collect()
    }

    /// Sets every member of `job` to its CPUs (only once the partition has been used).
    fn apply_to(&mut self, job: &Job, safety: &mut Safety) -> Result<()> {
        if self.owned.is_empty() && self.saved.is_empty() {
            return Ok(());
        }
        let cpus = self.cpus_of(job.id);
        let members = job.tree().members();
        let mut originals = Vec::new();
        for &id in members.iter().filter(|id| !self.saved.contains_key(id)) {
            match affinity::save(id.pid) {
                Ok(saved) if saved.id == id => originals.push(saved),
                Ok(_) => {} // the pid names another process now
                Err(e) => tracing::debug!("affinity of {}: {e}", id.pid),
            }
        }
        if !originals.is_empty() {
            safety.save_masks(job, originals.clone())?;
            self.saved
                .extend(originals.into_iter().map(|saved| (saved.id, saved)));
        }
        // Only processes whose original mask is saved: what could not be read is left alone.
        for id in members.iter().filter(|id| self.saved.contains_key(id)) {
            if let Err(e) = affinity::pin(id.pid, &cpus) {
                tracing::debug!("affinity of {}: {e}", id.pid);
            }
        }
        Ok(())
    }

    fn restore(&mut self) {
        for saved in std::mem::take(&mut self.saved).into_values() {
            if let Err(e) = saved.restore() {
                tracing::debug!("restoring the affinity of {}: {e}", saved.id.pid);
            }
        }
        self.owned.clear();
    }
}
