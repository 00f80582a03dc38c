//! The ALPS state machine (spec section 2, with the multicore extension of section 4).

use std::collections::BTreeMap;

use super::checks::{self, Situation};
use super::config::{ConfigError, Mode, ShareConfig, MAX_SHARE};
use super::feasible::{feasible_weights, Demand};
use super::types::{
    Action, Counters, CycleReport, EntityCycle, EntityId, EntityView, Event, EventError, MemberId,
    Reading, Rejected, StepError, StepOut,
};

/// Per-entity state.
#[derive(Debug, Clone)]
struct Entity {
    share: u64,
    /// The weight ALPS runs on: `share`, or φ in conserving mode.
    weight: f64,
    /// Remaining allowance, in quanta.
    allowance: f64,
    eligible: bool,
    /// Running as idle fill (ineligible, continued, CPU booked as surplus).
    filled: bool,
    /// Capped by the feasible-share readjustment.
    capped: bool,
    pinned: Option<u32>,
    par: u32,
    blocked: bool,
    /// Quantum index of the next read (optimized ALPS).
    update: u64,
    /// Quantum index of the last read (or arrival).
    last_read: u64,
    /// Cumulative CPU of each member at its last read.
    members: BTreeMap<MemberId, u64>,
    /// Read at the current step.
    read_now: bool,
    /// Became ineligible at the current step (it is still running until the Stop is sent).
    stopped_now: bool,
    /// Became ineligible without a read: the CPU since its last read was used while eligible, so
    /// its next reading is charged to the allowance even if it is filling by then.
    unsettled: bool,
    /// CPU charged to the allowance in the current cycle.
    consumed_cycle: u64,
    /// CPU booked as surplus in the current cycle.
    surplus_cycle: u64,
    /// Start of the interval the next reading's rate is measured over, ns: the last read, or
    /// the continue that ended a stop.
    rate_from: f64,
    /// CPUs used over the last read interval.
    rate: Option<f64>,
    /// Time of the sub-quantum check armed for it, ns.
    check_at: Option<f64>,
    /// Stopped early by a check with allowance left: ineligible until the cycle ends.
    held: bool,
}

impl Entity {
    fn view(&self, id: EntityId) -> EntityView {
        EntityView {
            id,
            share: self.share,
            weight: self.weight,
            allowance: self.allowance,
            eligible: self.eligible,
            filled: self.filled,
            pinned: self.pinned,
            par: self.par,
            blocked: self.blocked,
            held: self.held,
            update: self.update,
            last_read: self.last_read,
            members: self.members.len(),
        }
    }

    /// Quanta before the entity could exhaust its allowance at `par` CPUs: `ceil(allowance/par)`,
    /// at least 1.
    fn horizon(&self) -> u64 {
        let q = (self.allowance / f64::from(self.par.max(1))).ceil();
        if q >= 1.0 {
            q.min(u64::MAX as f64 / 2.0) as u64
        } else {
            1
        }
    }
}

/// One ALPS instance: a pure state machine driven by [`Alps::due`] and [`Alps::step`].
#[derive(Debug, Clone)]
pub struct Alps {
    cfg: ShareConfig,
    q: f64,
    /// Quanta elapsed.
    count: u64,
    /// Group CPU left in the current cycle, ns (signed).
    t_c: f64,
    entities: BTreeMap<EntityId, Entity>,
    counters: Counters,
    cycle_surplus: u64,
    cycle_lost: u64,
    /// Time of the latest step or check, ns since the timer started (tick k at k·Q).
    now: f64,
    /// A check ran since the latest step: its readings (parallelism, blocked) may change what
    /// the next step decides even without new readings, so that step is not idle.
    checked: bool,
}

impl Alps {
    /// A new, empty group. Fails if the configuration does not validate.
    pub fn new(cfg: ShareConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Alps {
            q: cfg.quantum_ns as f64,
            cfg,
            count: 0,
            t_c: 0.0,
            entities: BTreeMap::new(),
            counters: Counters::default(),
            cycle_surplus: 0,
            cycle_lost: 0,
            now: 0.0,
            checked: false,
        })
    }

    pub fn config(&self) -> &ShareConfig {
        &self.cfg
    }

    /// Quanta elapsed (`count`).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Group CPU left in the current cycle, ns (`t_c`).
    pub fn t_c_ns(&self) -> f64 {
        self.t_c
    }

    /// Σ weight: total shares `S` (or Σφ in conserving mode).
    pub fn total_weight(&self) -> f64 {
        self.entities.values().map(|e| e.weight).sum()
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// One entity's state.
    pub fn entity(&self, id: EntityId) -> Option<EntityView> {
        self.entities.get(&id).map(|e| e.view(id))
    }

    /// Every entity's state, by id.
    pub fn entities(&self) -> impl Iterator<Item = EntityView> + '_ {
        self.entities.iter().map(|(&id, e)| e.view(id))
    }

    /// The entities the driver must read before calling [`Alps::step`] with the same `ticks`:
    /// eligible ones (all of them in basic ALPS; in optimized ALPS those whose next read falls
    /// within the `ticks` quanta that passed) and idle-fill ones. Sorted by id.
    pub fn due(&self, ticks: u64) -> Vec<EntityId> {
        let horizon = self.count.saturating_add(ticks);
        self.entities
            .iter()
            .filter(|(_, e)| (e.eligible && (!self.cfg.lazy || e.update <= horizon)) || e.filled)
            .map(|(&id, _)| id)
            .collect()
    }

    /// One timer expiration (or `ticks` of them, if some were missed): apply `events`, charge the
    /// `readings` of the entities [`Alps::due`] named, end the cycle if the group has consumed
    /// it, and say whom to stop and continue. Readings of entities that were not due are ignored;
    /// a due entity without a reading stays due. Refused events are listed in the result and do
    /// not stop the step.
    pub fn step(
        &mut self,
        ticks: u64,
        readings: &[(EntityId, Reading)],
        events: Vec<Event>,
    ) -> Result<StepOut, StepError> {
        if ticks == 0 {
            return Err(StepError::ZeroTicks);
        }
        let due = self.due(ticks);
        let mut reads: BTreeMap<EntityId, &Reading> = BTreeMap::new();
        for (id, r) in readings {
            if due.binary_search(id).is_ok() {
                reads.entry(*id).or_insert(r);
            }
        }
        self.count += ticks;
        self.now = self.now.max(self.count as f64 * self.q);
        self.counters.steps += 1;
        self.counters.quanta += ticks;
        self.counters.overruns += ticks - 1;
        self.checked = false;
        self.clear_step_flags();

        let mut out = StepOut::default();
        for ev in events {
            if let Err(error) = self.apply(&ev, &mut reads, &mut out.actions) {
                self.counters.rejected += 1;
                out.rejected.push(Rejected { event: ev, error });
            }
        }

        for (id, r) in reads {
            if let Some(e) = self.entities.get_mut(&id) {
                self.cycle_surplus += Self::charge(
                    e,
                    r,
                    true,
                    &self.cfg,
                    (self.count, self.now),
                    &mut self.t_c,
                    &mut self.counters,
                );
            }
        }

        self.reweigh();
        self.decide(false, &mut out);
        if self.entities.is_empty() {
            self.t_c = 0.0;
        }
        if self.cfg.lazy && self.cfg.cycle_bound {
            self.cycle_bound();
        }
        if self.cfg.mode == Mode::Conserving {
            self.partition(&mut out.actions);
            self.fill(&mut out.actions);
        }

        self.finish(&mut out);
        Ok(out)
    }

    /// How many quanta can pass with nothing to do: the steps of the next `idle_quanta()`
    /// ticks, without readings or events, would read nobody, end no cycle, send nothing and ask
    /// for no check. A driver may let them pass without waking (see [`Alps::skip`]). 0 when the
    /// next step may act: someone is due at it, a check is armed or ran since the last step, an
    /// entity is filling, or the cycle would end (also in basic ALPS, which reads every
    /// eligible entity every quantum).
    pub fn idle_quanta(&self) -> u64 {
        if !self.cfg.lazy || self.checked || self.entities.is_empty() || self.t_c <= 0.0 {
            return 0;
        }
        let mut may_run = false;
        let mut held = false;
        let mut busy = false;
        let mut next_read = u64::MAX;
        for e in self.entities.values() {
            if e.filled || e.check_at.is_some() {
                return 0;
            }
            may_run |= e.allowance > 0.0 && !e.held;
            held |= e.held;
            busy |= e.allowance > 0.0 && !e.held && !e.blocked;
            if e.eligible {
                next_read = next_read.min(e.update);
            }
        }
        // What `decide` would do without readings: end the cycle when nobody may run, and
        // (`keep_busy`) release or end on holds when everyone left with allowance is blocked.
        if !may_run || (self.cfg.checks && held && !busy) {
            return 0;
        }
        // The first step with someone due is the one at quantum `next_read`.
        next_read.saturating_sub(self.count).saturating_sub(1)
    }

    /// Lets `quanta` idle quanta pass without a step: the same, decisions and state, as that
    /// many steps of one tick with no readings and no events (property-tested), without their
    /// wake-ups. Counted in `quanta` and `skipped`. Refused, with the engine unchanged, beyond
    /// [`Alps::idle_quanta`].
    pub fn skip(&mut self, quanta: u64) -> Result<(), StepError> {
        if quanta == 0 {
            return Ok(());
        }
        let idle = self.idle_quanta();
        if quanta > idle {
            return Err(StepError::NotIdle {
                asked: quanta,
                idle,
            });
        }
        self.count += quanta;
        self.now = self.now.max(self.count as f64 * self.q);
        self.counters.quanta += quanta;
        self.counters.skipped += quanta;
        self.clear_step_flags();
        Ok(())
    }

    /// What a step starts from: nobody read or stopped at it yet, no check armed.
    fn clear_step_flags(&mut self) {
        for e in self.entities.values_mut() {
            e.read_now = false;
            e.stopped_now = false;
            e.check_at = None;
        }
    }

    /// The entities whose sub-quantum check is due at `now_ns` (ns since the timer started, tick
    /// `k` at `k·Q`): the driver reads them and calls [`Alps::check`]. Checks that fall within
    /// half the least gap between checks are taken together. Sorted by id.
    pub fn due_checks(&self, now_ns: u64) -> Vec<EntityId> {
        let now = now_ns as f64 + checks::gap(self.q) / 2.0;
        self.entities
            .iter()
            .filter(|(_, e)| e.eligible && e.check_at.is_some_and(|t| t <= now))
            .map(|(&id, _)| id)
            .collect()
    }

    /// A sub-quantum check at `now_ns` (ns since the timer started; [`StepOut::wake_at`] said
    /// when): charge the readings of the entities [`Alps::due_checks`] named, stop those that
    /// have run out or would overshoot by more than they would undershoot, and end the cycle
    /// if the group has consumed it. No quantum passes and no blocked charge is made (that is
    /// one quantum per tick's observation); fill and the core partition wait for the next tick.
    pub fn check(&mut self, now_ns: u64, readings: &[(EntityId, Reading)]) -> StepOut {
        let next_tick = (self.count + 1) as f64 * self.q;
        self.now = (now_ns as f64).clamp(self.now, next_tick);
        let due = self.due_checks(now_ns);
        self.counters.checks += 1;
        self.checked = true;
        for e in self.entities.values_mut() {
            e.read_now = false;
            e.stopped_now = false;
        }
        for &id in &due {
            let e = self.entities.get_mut(&id).expect("due entity");
            e.check_at = None;
            let Some((_, r)) = readings.iter().find(|(rid, _)| *rid == id) else {
                continue;
            };
            self.cycle_surplus += Self::charge(
                e,
                r,
                false,
                &self.cfg,
                (self.count, self.now),
                &mut self.t_c,
                &mut self.counters,
            );
        }
        let mut out = StepOut::default();
        self.decide(true, &mut out);
        self.finish(&mut out);
        out
    }

    /// After the readings: end the cycle if the group has consumed it, stop or check again the
    /// entities just read (quantization-aware accounting), and emit the state changes.
    fn decide(&mut self, at_check: bool, out: &mut StepOut) {
        // The cycle ends when the group has consumed it, or when nobody may run: without the
        // second rule, allowances that are all exactly 0 (a clamped blocked charge) with `t_c`
        // a rounding error above 0 would leave the group stopped for good.
        let may_run = self.entities.values().any(|e| e.allowance > 0.0 && !e.held);
        if !self.entities.is_empty() && (self.t_c <= 0.0 || !may_run) {
            out.cycle = Some(self.end_cycle());
        }
        if self.cfg.checks {
            self.plan(at_check);
            self.keep_busy(at_check, out);
        }
        self.transitions(&mut out.actions);
    }

    /// Sort the actions, count them, and say when the next check is due.
    fn finish(&mut self, out: &mut StepOut) {
        out.actions.sort();
        out.actions.dedup();
        for a in &out.actions {
            if a.is_signal() {
                self.counters.signals += 1;
            } else {
                self.counters.affinity_changes += 1;
            }
        }
        out.wake_at = self
            .entities
            .values()
            .filter(|e| e.eligible)
            .filter_map(|e| e.check_at)
            .min_by(f64::total_cmp)
            .map(|t| t.ceil() as u64);
    }

    /// Quantization-aware accounting for the entities read at this step or check.
    fn plan(&mut self, at_check: bool) {
        let (q, now) = (self.q, self.now);
        let next_tick = (self.count + 1) as f64 * q;
        for e in self.entities.values_mut().filter(|e| e.read_now) {
            e.check_at = None;
            if e.held || e.filled || e.allowance <= 0.0 {
                continue;
            }
            let p = checks::plan(
                Situation {
                    allowance: e.allowance,
                    par: e.par,
                    rate: e.rate,
                    now,
                    next_tick,
                    at_check,
                },
                q,
            );
            e.held = p.hold;
            e.check_at = p.check_at;
        }
    }

    /// Holds must not idle the group. If every entity with allowance left is held, nobody
    /// would consume the rest of the cycle: it ends now (the held remainders carry over, as any
    /// remainder does). If those not held are all blocked, the held ones run again until the
    /// next tick (a sleeper's share goes to the others, as the blocked heuristic wants).
    fn keep_busy(&mut self, at_check: bool, out: &mut StepOut) {
        let entities = || self.entities.values();
        if !entities().any(|e| e.held)
            || entities().any(|e| e.allowance > 0.0 && !e.held && !e.blocked)
        {
            return;
        }
        if out.cycle.is_none() && !entities().any(|e| e.allowance > 0.0 && !e.held) {
            out.cycle = Some(self.end_cycle());
            // The replenished entities are planned afresh (the read ones at their new allowance).
            self.plan(at_check);
        } else {
            for e in self.entities.values_mut() {
                e.held = false;
            }
        }
    }

    /// Apply one event. Readings of a departing entity are consumed here.
    fn apply(
        &mut self,
        ev: &Event,
        reads: &mut BTreeMap<EntityId, &Reading>,
        actions: &mut Vec<Action>,
    ) -> Result<(), EventError> {
        match ev {
            Event::Arrive {
                id,
                share,
                baseline,
            } => {
                check_share(*id, *share)?;
                if self.entities.contains_key(id) {
                    return Err(EventError::DuplicateEntity(*id));
                }
                if baseline.cpu_ns.is_empty() {
                    return Err(EventError::NoMembers(*id));
                }
                let w = *share as f64;
                self.t_c += w * self.q;
                self.entities.insert(
                    *id,
                    Entity {
                        share: *share,
                        weight: w,
                        allowance: w,
                        eligible: true,
                        filled: false,
                        capped: false,
                        pinned: None,
                        par: self.par_of(baseline),
                        blocked: baseline.blocked,
                        update: self.count + 1,
                        last_read: self.count,
                        members: baseline.cpu_ns.iter().copied().collect(),
                        read_now: false,
                        stopped_now: false,
                        unsettled: false,
                        consumed_cycle: 0,
                        surplus_cycle: 0,
                        rate_from: self.now,
                        rate: None,
                        check_at: None,
                        held: false,
                    },
                );
                Ok(())
            }
            Event::Depart { id, last } => {
                if !self.entities.contains_key(id) {
                    return Err(EventError::UnknownEntity(*id));
                }
                let polled = reads.remove(id);
                self.depart(*id, last.as_ref().or(polled));
                Ok(())
            }
            Event::SetShare { id, share } => {
                check_share(*id, *share)?;
                let strict = self.cfg.mode == Mode::Strict;
                let (q, count) = (self.q, self.count);
                let e = self
                    .entities
                    .get_mut(id)
                    .ok_or(EventError::UnknownEntity(*id))?;
                let delta = *share as f64 - e.share as f64;
                e.share = *share;
                if strict {
                    adjust_weight(e, delta, q, count, &mut self.t_c);
                }
                // Conserving: `reweigh` turns the new share into a new φ later in the step.
                Ok(())
            }
            Event::MemberJoined { id, member, cpu_ns } => {
                let e = self
                    .entities
                    .get_mut(id)
                    .ok_or(EventError::UnknownEntity(*id))?;
                if e.members.contains_key(member) {
                    return Err(EventError::DuplicateMember {
                        id: *id,
                        member: *member,
                    });
                }
                e.members.insert(*member, *cpu_ns);
                if !e.eligible && !e.filled {
                    actions.push(Action::Stop(*id));
                }
                if let Some(cpus) = e.pinned {
                    actions.push(Action::Pin { id: *id, cpus });
                }
                Ok(())
            }
            Event::MemberLeft {
                id,
                member,
                last_cpu_ns,
            } => {
                let (q, count) = (self.q, self.count);
                let e = self
                    .entities
                    .get_mut(id)
                    .ok_or(EventError::UnknownEntity(*id))?;
                let Some(prev) = e.members.remove(member) else {
                    return Err(EventError::UnknownMember {
                        id: *id,
                        member: *member,
                    });
                };
                let polled = reads
                    .get(id)
                    .and_then(|r| r.cpu_ns.iter().find(|(m, _)| m == member))
                    .map(|&(_, v)| v);
                match last_cpu_ns.or(polled) {
                    Some(v) => {
                        let consumed = v.saturating_sub(prev);
                        let surplus = book(e, consumed, q, &mut self.t_c);
                        self.cycle_surplus += surplus;
                        self.counters.surplus_ns += surplus;
                    }
                    None => {
                        if e.eligible || e.filled {
                            let lost = lost_bound(e, q, count);
                            self.cycle_lost += lost;
                            self.counters.lost_ns += lost;
                        }
                    }
                }
                if e.members.is_empty() {
                    reads.remove(id);
                    self.remove(*id);
                }
                Ok(())
            }
        }
    }

    /// Departure: charge the final reading if there is one (else report the bound of what could
    /// not be charged), then `t_c −= allowance·Q` and remove the entity.
    fn depart(&mut self, id: EntityId, last: Option<&Reading>) {
        let Some(e) = self.entities.get_mut(&id) else {
            return;
        };
        match last {
            Some(r) => {
                self.cycle_surplus += Self::charge(
                    e,
                    r,
                    false,
                    &self.cfg,
                    (self.count, self.now),
                    &mut self.t_c,
                    &mut self.counters,
                );
            }
            None => {
                if e.eligible || e.filled {
                    let lost = lost_bound(e, self.q, self.count);
                    self.cycle_lost += lost;
                    self.counters.lost_ns += lost;
                }
            }
        }
        self.remove(id);
    }

    fn remove(&mut self, id: EntityId) {
        if let Some(e) = self.entities.remove(&id) {
            self.t_c -= e.allowance * self.q;
        }
    }

    fn par_of(&self, r: &Reading) -> u32 {
        let cpus = if r.cpus == 0 {
            self.cfg.cpus
        } else {
            r.cpus.min(self.cfg.cpus)
        };
        r.threads.min(cpus).max(1)
    }

    /// Charge one reading: consumption since the last read against the allowance and `t_c` (or
    /// as surplus while filling), the blocked heuristic, and the new parallelism. Returns the
    /// surplus booked.
    fn charge(
        e: &mut Entity,
        r: &Reading,
        blocked_charge: bool,
        cfg: &ShareConfig,
        (count, now): (u64, f64),
        t_c: &mut f64,
        counters: &mut Counters,
    ) -> u64 {
        let q = cfg.quantum_ns as f64;
        let mut consumed: u64 = 0;
        // Members the engine was not told about (by `Arrive` or `MemberJoined`), or that have
        // left, are ignored.
        for &(m, v) in &r.cpu_ns {
            if let Some(last) = e.members.get_mut(&m) {
                consumed = consumed.saturating_add(v.saturating_sub(*last));
                *last = (*last).max(v);
            }
        }
        let surplus = book(e, consumed, q, t_c);
        counters.surplus_ns += surplus;
        e.unsettled = false;
        let span = now - e.rate_from;
        if span > 0.0 {
            e.rate = Some(consumed as f64 / span);
        }
        e.rate_from = now;
        if blocked_charge && cfg.io && r.blocked && !e.filled {
            // A sleeper is assumed to have sat out the quantum. With checks, never more than
            // its allowance left: the heuristic is there to end the cycle, not to fine sleepers.
            let charge = if cfg.checks {
                e.allowance.clamp(0.0, 1.0)
            } else {
                1.0
            };
            e.allowance -= charge;
            *t_c -= charge * q;
        }
        e.blocked = r.blocked;
        let cpus = if r.cpus == 0 {
            cfg.cpus
        } else {
            r.cpus.min(cfg.cpus)
        };
        e.par = r.threads.min(cpus).max(1);
        e.last_read = count;
        e.read_now = true;
        counters.reads += 1;
        surplus
    }

    /// Conserving mode: recompute φ from shares and parallelism; a change in φ is applied like a
    /// share change.
    fn reweigh(&mut self) {
        if self.cfg.mode != Mode::Conserving || self.entities.is_empty() {
            return;
        }
        let demands: Vec<Demand> = self
            .entities
            .values()
            .map(|e| Demand {
                share: e.share as f64,
                par: e.par,
            })
            .collect();
        let feasible = feasible_weights(&demands, self.cfg.cpus);
        let (q, count) = (self.q, self.count);
        for (e, f) in self.entities.values_mut().zip(feasible) {
            e.capped = f.capped;
            let delta = f.weight - e.weight;
            if delta.abs() > 1e-12 * e.weight.max(1.0) {
                adjust_weight(e, delta, q, count, &mut self.t_c);
            }
        }
    }

    /// The cycle is over: report it, then `t_c += S·Q` and every allowance `+= share`.
    fn end_cycle(&mut self) -> CycleReport {
        self.counters.cycles += 1;
        let total_w: f64 = self.total_weight();
        let total_c: f64 = self
            .entities
            .values()
            .map(|e| e.consumed_cycle as f64)
            .sum();
        let mut entities = Vec::with_capacity(self.entities.len());
        let mut sq = 0.0;
        for (&id, e) in self.entities.iter_mut() {
            let entitlement = if total_w > 0.0 {
                e.weight / total_w * total_c
            } else {
                0.0
            };
            let rel_err = if entitlement > 0.0 {
                (e.consumed_cycle as f64 - entitlement) / entitlement
            } else {
                0.0
            };
            sq += rel_err * rel_err;
            entities.push(EntityCycle {
                id,
                share: e.share,
                weight_used: e.weight,
                consumed_ns: e.consumed_cycle,
                entitlement_ns: entitlement,
                rel_err,
                surplus_ns: e.surplus_cycle,
            });
            e.consumed_cycle = 0;
            e.surplus_cycle = 0;
            e.allowance += e.weight;
            e.held = false;
        }
        self.t_c += total_w * self.q;
        let report = CycleReport {
            cycle: self.counters.cycles,
            quantum: self.count,
            rms: (sq / entities.len().max(1) as f64).sqrt(),
            entities,
            surplus_ns: self.cycle_surplus,
            lost_ns: self.cycle_lost,
        };
        self.cycle_surplus = 0;
        self.cycle_lost = 0;
        report
    }

    /// Eligibility from the allowances, with the signals for every change, and the next read.
    fn transitions(&mut self, actions: &mut Vec<Action>) {
        let (count, lazy, now) = (self.count, self.cfg.lazy, self.now);
        for (&id, e) in self.entities.iter_mut() {
            let eligible = e.allowance > 0.0 && !e.held;
            if eligible != e.eligible {
                e.eligible = eligible;
                let mut running = false;
                if eligible {
                    if e.filled {
                        e.filled = false;
                        running = true;
                    } else {
                        actions.push(Action::Continue(id));
                        // Its rate is measured from now: it did not run while stopped.
                        e.rate_from = now;
                        e.rate = None;
                    }
                } else {
                    actions.push(Action::Stop(id));
                    e.stopped_now = true;
                    e.check_at = None;
                    if !e.read_now {
                        e.unsettled = true;
                    }
                }
                if eligible {
                    // A stopped entity starts from nothing now. A fill entity has been running
                    // since its last read, and an unsettled one ran for an unknown time after
                    // it: unless read at this step, they are read at the next.
                    e.update = if (running || e.unsettled) && !e.read_now {
                        count + 1
                    } else {
                        count + if lazy { e.horizon() } else { 1 }
                    };
                }
            } else if eligible && e.read_now {
                e.update = count + if lazy { e.horizon() } else { 1 };
            }
        }
    }

    /// The cycle cannot end before the group, using at most `min(C, Σ par)` CPUs, has consumed
    /// `t_c`: read every eligible entity no later than that quantum.
    fn cycle_bound(&mut self) {
        let par: u32 = self
            .entities
            .values()
            .filter(|e| e.eligible)
            .map(|e| e.par)
            .sum();
        let p = f64::from(par.min(self.cfg.cpus));
        if p <= 0.0 {
            return;
        }
        let k = (self.t_c / (self.q * p)).ceil();
        let k = if k >= 1.0 {
            k.min(u64::MAX as f64 / 2.0) as u64
        } else {
            1
        };
        let at = self.count + k;
        for e in self.entities.values_mut().filter(|e| e.eligible) {
            e.update = e.update.min(at);
        }
    }

    /// Conserving core partition: capped entities get `par` CPUs of their own.
    fn partition(&mut self, actions: &mut Vec<Action>) {
        let cpus = self.cfg.cpus;
        let capped_par: u32 = self
            .entities
            .values()
            .filter(|e| e.capped)
            .map(|e| e.par)
            .sum();
        let any_uncapped = self.entities.values().any(|e| !e.capped);
        let room = cpus >= 2 && (capped_par < cpus || !any_uncapped) && capped_par <= cpus;
        for (&id, e) in self.entities.iter_mut() {
            let want = if e.capped && room { Some(e.par) } else { None };
            if want != e.pinned {
                actions.push(match want {
                    Some(cpus) => Action::Pin { id, cpus },
                    None => Action::Unpin(id),
                });
                e.pinned = want;
            }
        }
    }

    /// Conserving idle fill: when the eligible, non-blocked entities of a CPU pool use fewer CPUs
    /// than it has, continue ineligible ones of that pool until the idle CPUs are covered. First
    /// those whose surplus this cycle, after one more quantum of fill, is smallest relative to
    /// their weight (so fill rotates, and a quantum of surplus goes where it is the smallest
    /// relative error); then the least overdrawn.
    fn fill(&mut self, actions: &mut Vec<Action>) {
        let pinned: u32 = self.entities.values().filter_map(|e| e.pinned).sum();
        let shared = self.cfg.cpus.saturating_sub(pinned);
        let mut chosen: Vec<EntityId> = Vec::new();
        // Each pinned entity is its own pool: it fills its CPUs itself when it is ineligible.
        for (&id, e) in &self.entities {
            if e.pinned.is_some() && !e.eligible {
                chosen.push(id);
            }
        }
        let busy: u32 = self
            .entities
            .values()
            .filter(|e| e.pinned.is_none() && e.eligible && !e.blocked)
            .map(|e| e.par)
            .sum();
        if busy < shared {
            let mut candidates: Vec<(EntityId, &Entity)> = self
                .entities
                .iter()
                .filter(|(_, e)| e.pinned.is_none() && !e.eligible)
                .map(|(&id, e)| (id, e))
                .collect();
            // Relative surplus this cycle after one more quantum of fill.
            let q = self.q;
            let key = |e: &Entity| (e.surplus_cycle as f64 + q * f64::from(e.par)) / e.weight;
            candidates.sort_by(|(ia, a), (ib, b)| {
                a.blocked
                    .cmp(&b.blocked)
                    .then(key(a).total_cmp(&key(b)))
                    .then(b.allowance.total_cmp(&a.allowance))
                    .then(ia.cmp(ib))
            });
            let mut covered = busy;
            for (id, e) in candidates {
                if covered >= shared {
                    break;
                }
                chosen.push(id);
                if !e.blocked {
                    covered += e.par;
                }
            }
        }
        chosen.sort_unstable();
        for (&id, e) in self.entities.iter_mut() {
            let want = chosen.binary_search(&id).is_ok();
            if want != e.filled {
                e.filled = want;
                if want && e.stopped_now {
                    // It was running until this step: it goes on running as fill, unsignalled.
                    actions.retain(|a| *a != Action::Stop(id));
                } else {
                    actions.push(if want {
                        Action::Fill(id)
                    } else {
                        Action::Unfill(id)
                    });
                }
            }
        }
    }
}

fn check_share(id: EntityId, share: u64) -> Result<(), EventError> {
    if (1..=MAX_SHARE).contains(&share) {
        Ok(())
    } else {
        Err(EventError::Share { id, share })
    }
}

/// Book `consumed` ns: as surplus while filling (returned), else against the allowance and `t_c`.
fn book(e: &mut Entity, consumed: u64, q: f64, t_c: &mut f64) -> u64 {
    if e.filled && !e.unsettled {
        e.surplus_cycle += consumed;
        consumed
    } else {
        e.allowance -= consumed as f64 / q;
        *t_c -= consumed as f64;
        e.consumed_cycle += consumed;
        0
    }
}

/// Change an entity's weight by `delta`, keeping `t_c == Q·Σ allowance`; a cut also brings its
/// next read forward so that the lazy bound stays sound.
fn adjust_weight(e: &mut Entity, delta: f64, q: f64, count: u64, t_c: &mut f64) {
    e.weight += delta;
    e.allowance += delta;
    *t_c += delta * q;
    if delta < 0.0 && e.eligible {
        let earliest = e.last_read.saturating_add(e.horizon()).max(count + 1);
        e.update = e.update.min(earliest);
    }
}

/// CPU an entity may have used since its last read: `par·Q·(count − last read)`.
fn lost_bound(e: &Entity, q: f64, count: u64) -> u64 {
    (f64::from(e.par) * q * count.saturating_sub(e.last_read) as f64) as u64
}
