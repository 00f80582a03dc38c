//! ALPS proportional-share scheduling of process groups (spec `proportional-share.md`; Newhouse
//! & Pasquale, "Achieving efficiency and accuracy in the ALPS application-level proportional-share
//! scheduler", 2007).
//!
//! The engine divides the CPU time a group already gets among its entities (processes, or
//! principals made of several processes) in proportion to integer shares. Entities are *eligible*
//! (running) or *ineligible* (stopped). Each entity has an allowance, in quanta, that its CPU use
//! draws down; when it reaches zero the entity is stopped. A cycle ends when the group has consumed
//! `S·Q` of CPU (`t_c` reaches zero), and every allowance then grows by its share. Nothing is ever
//! reset: `t_c` and the allowances carry their remainders, and `t_c == Q·Σ allowance` always.
//!
//! # Driving it
//!
//! ```text
//! let mut alps = Alps::new(ShareConfig::new(20_000_000, 1))?;
//! every timer expiration (ticks = timerfd count, ≥ 1):
//!     let ids = alps.due(ticks);                         // whom to read
//!     let readings = ids.map(|id| (id, read(id)));       // cumulative CPU per member, blocked, threads
//!     let out = alps.step(ticks, &readings, events)?;    // events: arrivals, departures, share changes
//!     for a in out.actions { carry out a }               // Stop/Unfill before Continue/Fill
//!     if let Some(c) = out.cycle { log c }               // one CycleReport per cycle
//!     if let Some(t) = out.wake_at { arm a one-shot timer for t }
//! when it expires (before the next tick; t in ns since the timer started, tick k at k·Q):
//!     let out = alps.check(now_ns, &readings_of(alps.due_checks(now_ns)));  // same handling
//! ```
//!
//! - [`Alps::due`] names the entities to read: every eligible one in basic ALPS (`lazy` off);
//!   in optimized ALPS only those that could have exhausted their allowance, i.e. whose next read
//!   `update = last read + ceil(allowance/par)` falls within the `ticks` quanta just elapsed
//!   (with [`ShareConfig::cycle_bound`], also every eligible one by the quantum at which the cycle
//!   could end); in conserving mode also the entities filling idle CPUs.
//! - [`Alps::step`] applies the [`Event`]s, charges the [`Reading`]s, ends at most one cycle (it
//!   catches up one cycle per step after a stall), and returns a [`StepOut`]: the [`Action`]s,
//!   the [`CycleReport`] of a cycle that ended, and any refused events with their errors
//!   ([`EventError`]; the rest of the step goes ahead). Only `ticks == 0` refuses a whole step
//!   ([`StepError`]). A due entity without a reading stays due; readings of other entities, and
//!   of members the engine was not told about, are ignored.
//! - With [`ShareConfig::checks`] (quantization-aware accounting, spec section 6), an entity that
//!   could run out before the next tick is read again at the earliest time it could
//!   ([`StepOut::wake_at`], [`Alps::due_checks`], [`Alps::check`]) and stopped early when less
//!   than half of what it would use before its next decision is left (it is then *held* until
//!   the cycle ends); the blocked charge is clamped to the allowance left. A cycle also ends
//!   when nobody may run.
//! - [`Alps::counters`] counts steps, quanta, reads, signals, cycles, overruns, surplus and lost
//!   CPU; [`Alps::entity`] and [`Alps::entities`] show the state.
//!
//! # tact's rules where the paper is silent (spec section 2)
//!
//! - **Arrival** with share `s`: `S += s`, `allowance = s`, `t_c += s·Q`; eligible without a
//!   signal (it is running), read at the next step.
//! - **Share change** `s → s'`: `allowance += s'−s`, `t_c += (s'−s)·Q`, in the current cycle; a
//!   cut may leave the allowance negative, repaid in later cycles. A cut also brings the next read
//!   forward so the lazy bound stays sound.
//! - **Departure**: charge the final reading if there is one, then `t_c −= allowance·Q` and remove
//!   the entity, so every other allowance is unchanged. Without a final reading the CPU used since
//!   the last read is unknown; its bound `par·Q·(count − last read)` is reported as `lost_ns`.
//! - **Principals**: consumption is summed over members, a reading is blocked only if all members
//!   are, `par = min(Σ threads, cpus)`. A member that joins a stopped principal is stopped at once
//!   (the engine repeats `Stop`); a principal left with no members departs.
//! - Shares are integers from 1 to [`MAX_SHARE`]; 0 is refused.
//!
//! # Several CPUs (spec section 4)
//!
//! `par_i = max(1, min(threads, usable CPUs))` divides the lazy bound. [`Mode::Strict`] keeps the
//! paper's semantics (cores may idle). [`Mode::Conserving`] (the default from 2 CPUs on, see
//! [`Mode::default_for`]) adds:
//!
//! 1. *Feasible shares* φ ([`feasible_weights`]): an entity whose `share_i/S` exceeds `par_i/C` is
//!    capped at `par_i/C` and the rest is redistributed by share, repeatedly. ALPS runs on φ; a
//!    change of φ is applied like a share change.
//! 2. *Core partition*: capped entities get `par_i` CPUs of their own ([`Action::Pin`]); the
//!    driver picks them and keeps every other entity on the remaining CPUs.
//! 3. *Idle fill*: when the eligible, non-blocked entities of a pool of CPUs use fewer CPUs than
//!    it has, ineligible entities of that pool are continued ([`Action::Fill`]), least surplus per
//!    unit of weight this cycle first (so fill rotates and spreads in proportion to weight), then
//!    least overdrawn. They are read every quantum and their CPU is booked as surplus, outside
//!    the allowances and `t_c`; [`Action::Unfill`] stops them once eligible parallelism
//!    recovers. A pinned entity's pool is its own CPUs, which it fills itself.

mod checks;
mod config;
mod engine;
mod feasible;
mod types;

pub use config::{
    ConfigError, Mode, ShareConfig, MAX_CPUS, MAX_QUANTUM_NS, MAX_SHARE, MIN_QUANTUM_NS,
};
pub use engine::Alps;
pub use feasible::{feasible_weights, Demand, Feasible};
pub use types::{
    Action, Counters, CycleReport, EntityCycle, EntityId, EntityView, Event, EventError, MemberId,
    Reading, Rejected, StepError, StepOut,
};
