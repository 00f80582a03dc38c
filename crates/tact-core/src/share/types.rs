//! What goes into and comes out of [`Alps::step`](super::Alps::step).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::config::MAX_SHARE;

/// An entity (a process or a principal); the driver picks the ids.
pub type EntityId = u64;
/// A member of an entity: one process; the driver picks the ids (a pid, or a pidfd's index).
pub type MemberId = u64;

/// What the driver read of one entity at one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    /// Cumulative CPU nanoseconds of each member (all threads, including exited ones). Members
    /// the engine does not know (see [`Event::MemberJoined`]) are ignored; a member missing from
    /// a reading is charged at the next reading that has it.
    pub cpu_ns: Vec<(MemberId, u64)>,
    /// Every member is blocked (no thread runnable).
    pub blocked: bool,
    /// Threads over all members.
    pub threads: u32,
    /// CPUs this entity may use (affinity ∩ cpuset); 0 means "all the group's".
    pub cpus: u32,
}

impl Reading {
    /// A one-member reading: one process, `threads` threads, on all the group's CPUs.
    pub fn single(member: MemberId, cpu_ns: u64, blocked: bool, threads: u32) -> Self {
        Reading {
            cpu_ns: vec![(member, cpu_ns)],
            blocked,
            threads,
            cpus: 0,
        }
    }
}

/// A change to the group, applied at the step it is passed in (spec section 2, "Arrival,
/// departure and share changes"; "Principals").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A new entity with its baseline reading (at least one member). It is running: it becomes
    /// eligible without a signal and is read at the next step.
    Arrive {
        id: EntityId,
        share: u64,
        baseline: Reading,
    },
    /// The entity leaves (exit, detach). `last` is its final reading if the driver has one
    /// (`wait4` of a child); otherwise the CPU since its last read is reported as `lost_ns`.
    Depart { id: EntityId, last: Option<Reading> },
    /// A new share, effective in the current cycle.
    SetShare { id: EntityId, share: u64 },
    /// A process joined a principal; `cpu_ns` is its baseline. If the entity is stopped the
    /// engine repeats `Stop(id)` so that the driver stops the newcomer too.
    MemberJoined {
        id: EntityId,
        member: MemberId,
        cpu_ns: u64,
    },
    /// A process left a principal, with its final CPU time if known. A principal left with no
    /// members departs.
    MemberLeft {
        id: EntityId,
        member: MemberId,
        last_cpu_ns: Option<u64>,
    },
}

impl Event {
    /// The entity the event is about.
    pub fn id(&self) -> EntityId {
        match self {
            Event::Arrive { id, .. }
            | Event::Depart { id, .. }
            | Event::SetShare { id, .. }
            | Event::MemberJoined { id, .. }
            | Event::MemberLeft { id, .. } => *id,
        }
    }
}

/// What the driver must do. A step's actions come sorted in this order (stops first, so the number
/// of running entities never spikes): `Stop`, `Unfill`, `Unpin`, `Pin`, `Continue`, `Fill`; the
/// derived `Ord` is that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Action {
    /// SIGSTOP every member: the entity became ineligible.
    Stop(EntityId),
    /// SIGSTOP every member: an idle-fill entity goes back to waiting.
    Unfill(EntityId),
    /// Restore the entity's original affinity (it is no longer capped).
    Unpin(EntityId),
    /// Give the entity `cpus` CPUs of its own (conserving core partition). The driver chooses
    /// which; every unpinned entity runs on the CPUs no entity is pinned to.
    Pin { id: EntityId, cpus: u32 },
    /// SIGCONT every member: the entity became eligible.
    Continue(EntityId),
    /// SIGCONT every member of an ineligible entity to use idle CPUs (conserving idle fill).
    /// Its CPU is booked as surplus. If it becomes eligible while filling, no signal follows:
    /// it is already running.
    Fill(EntityId),
}

impl Action {
    /// The entity the action is about.
    pub fn id(&self) -> EntityId {
        match *self {
            Action::Stop(id)
            | Action::Unfill(id)
            | Action::Unpin(id)
            | Action::Pin { id, .. }
            | Action::Continue(id)
            | Action::Fill(id) => id,
        }
    }

    /// Whether the action sends a signal (as opposed to changing affinity).
    pub fn is_signal(&self) -> bool {
        !matches!(self, Action::Pin { .. } | Action::Unpin(_))
    }
}

/// One entity's line in a [`CycleReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityCycle {
    pub id: EntityId,
    pub share: u64,
    /// The weight ALPS ran on at the cycle end: the share, or φ in conserving mode.
    pub weight_used: f64,
    /// CPU charged to the entity's allowance during the cycle (at its reads; surplus excluded).
    pub consumed_ns: u64,
    /// `weight_used/Σweight · Σ consumed_ns`.
    pub entitlement_ns: f64,
    /// `(consumed − entitlement)/entitlement` (0 when both are 0).
    pub rel_err: f64,
    /// CPU booked as idle-fill surplus during the cycle.
    pub surplus_ns: u64,
}

/// The engine's own record of a cycle, produced at the step that ends it.
///
/// Consumption is what the engine *charged* during the cycle, at its reads. Optimized ALPS reads
/// some entities rarely, so CPU they used near a cycle end may be charged in the next cycle: the
/// independent recorder of spec section 5 (reading every member at the cycle end) is the reference
/// for accuracy figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleReport {
    /// Cycle index, from 1.
    pub cycle: u64,
    /// Quantum index (`count`) at which it ended.
    pub quantum: u64,
    pub entities: Vec<EntityCycle>,
    /// `sqrt(Σ rel_err²/N)`.
    pub rms: f64,
    /// Idle-fill CPU booked outside the allowances during the cycle.
    pub surplus_ns: u64,
    /// Upper bound of departed entities' CPU the engine could not charge during the cycle.
    pub lost_ns: u64,
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct StepOut {
    /// Ordered: see [`Action`].
    pub actions: Vec<Action>,
    /// Present when this step ended a cycle.
    pub cycle: Option<CycleReport>,
    /// Events that were refused, with the reason; the rest of the step went ahead.
    pub rejected: Vec<Rejected>,
    /// When to call [`Alps::check`](super::Alps::check), in ns since the timer started (tick
    /// `k` at `k·Q`), if before the next tick: arm a one-shot timer for it. A later step or
    /// check replaces it.
    pub wake_at: Option<u64>,
}

/// An event the engine refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rejected {
    pub event: Event,
    #[serde(serialize_with = "display")]
    pub error: EventError,
}

fn display<S: serde::Serializer>(e: &EventError, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(e)
}

/// Cumulative counters of an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Calls of `step`.
    pub steps: u64,
    /// Calls of `check`: wake-ups between ticks.
    pub checks: u64,
    /// Quanta elapsed (Σ ticks).
    pub quanta: u64,
    /// Readings charged (entity reads).
    pub reads: u64,
    /// Stop, Continue, Fill and Unfill actions (each signals every member of its entity).
    pub signals: u64,
    /// Pin and Unpin actions.
    pub affinity_changes: u64,
    /// Completed cycles.
    pub cycles: u64,
    /// Missed quanta: Σ (ticks − 1), the overruns of spec section 4.
    pub overruns: u64,
    /// Quanta let pass with [`Alps::skip`](super::Alps::skip): nothing to do, so no wake-up.
    /// Counted in `quanta`, not in `steps` or `overruns`.
    pub skipped: u64,
    /// Idle-fill CPU booked as surplus.
    pub surplus_ns: u64,
    /// Bound of CPU lost at departures.
    pub lost_ns: u64,
    /// Events refused.
    pub rejected: u64,
}

/// Why an event was refused. Each message starts with the field at fault.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EventError {
    #[error("share: must be between 1 and {MAX_SHARE}, got {share} (entity {id})")]
    Share { id: EntityId, share: u64 },
    #[error("id: no entity {0}")]
    UnknownEntity(EntityId),
    #[error("id: entity {0} already exists")]
    DuplicateEntity(EntityId),
    #[error("baseline.cpu_ns: entity {0} needs at least one member")]
    NoMembers(EntityId),
    #[error("member: {member} is already in entity {id}")]
    DuplicateMember { id: EntityId, member: MemberId },
    #[error("member: {member} is not in entity {id}")]
    UnknownMember { id: EntityId, member: MemberId },
}

/// Why a whole step was refused (the engine is unchanged).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StepError {
    #[error("ticks: must be at least 1")]
    ZeroTicks,
    /// [`Alps::skip`](super::Alps::skip) was asked to let pass more quanta than are idle.
    #[error("ticks: only {idle} quanta are idle, cannot skip {asked}")]
    NotIdle { asked: u64, idle: u64 },
}

/// A read-only view of one entity's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityView {
    pub id: EntityId,
    pub share: u64,
    /// The weight ALPS runs on (share, or φ in conserving mode).
    pub weight: f64,
    /// Remaining allowance in quanta.
    pub allowance: f64,
    pub eligible: bool,
    /// Running as idle fill (conserving mode).
    pub filled: bool,
    /// CPUs of its own (conserving core partition).
    pub pinned: Option<u32>,
    /// CPUs usable at once.
    pub par: u32,
    /// Blocked at its last reading.
    pub blocked: bool,
    /// Stopped early by a check with allowance left, until the cycle ends.
    pub held: bool,
    /// Quantum index of the next read.
    pub update: u64,
    /// Quantum index of the last read (or arrival).
    pub last_read: u64,
    pub members: usize,
}
