//! Idletime scheduling with preemption intervals (spec `idletime.md`; L. Eggert, "Background use
//! of idle resource capacity", PhD thesis, USC, 2004).
//!
//! A background (bg) class runs strictly below the foreground (fg) on one resource, and after fg
//! service the resource starts no bg work for a preemption interval (PI) p: fg arriving inside it
//! is served at once, so a fg burst pays at most one non-preemptible bg residual.
//!
//! - [`Gate`]: the thesis's state machine (states I, F, B, P; events f, b, t, i), its four
//!   variants ([`Variant::V1`] by default), start- or end-anchored PIs ([`Anchor::End`] by
//!   default), and the event counters X\[s\]\[e\] ([`Counters`]).
//! - [`Scheduler`]: the request-level driver of a non-preemptible single-server resource
//!   (fg and bg queues in front of a gate): the simulator's device and tact's library device.
//! - [`Model`]: the thesis's b(i,p), f(i,p) with the spec's clamps.
//! - [`Tuner`]: automatic PI from the counters (`--preempt auto`); p = 0 while the resource
//!   preempts the job itself, as a link's priority tree holding the queue does ([`TreeLook`]).
//!
//! # Driving a gate from the OS edge
//!
//! Time is always the caller's `now` (a `Duration` since its origin); nothing here reads a clock.
//!
//! - **Request-level** (a device tact owns: the simulator, the emulated device): feed every
//!   arrival, completion and timer expiry to a [`Scheduler`] and start what it names; arm a
//!   timer at [`Scheduler::wake_at`].
//! - **Watcher** (a device tact does not own; fg seen only as "activity at t" in
//!   `/proc/diskstats` deltas minus the job's own bytes): every δ = [`poll_interval`] call
//!   [`Gate::poll`]`(now, fg_active, bg_runnable)`; `true` releases the bg job (thaw/SIGCONT),
//!   `false` holds it (freeze/SIGSTOP). The effective PI lies in \[p, p + δ\].
//! - **Cooperative library gate** (the bg program asks before each I/O): one call is one b
//!   event: [`Gate::poll`]`(now, fg_seen_since_last_call, true)`; on `false` sleep until
//!   [`Gate::hold_until`] (or δ when fg is active) and ask again.

mod gate;
mod model;
mod scheduler;
mod tuner;

pub use gate::{poll_interval, Action, Anchor, Counters, Event, Gate, GateParams, State, Variant};
pub use model::{Model, ModelError, ModelParams, Prediction};
pub use scheduler::{Class, Scheduler};
pub use tuner::{TreeJudge, TreeLook, TreeVerdict, Tuner, TunerError, TunerParams, DEFAULT_BETA};
