//! The idletime engine ([`tact_core::idle`]) on a simulated non-preemptive device (spec
//! `idletime.md` section 7, the exact rig).
//!
//! - [`device`]: one server with a fixed service time, the thesis's cyclic fg load generator,
//!   greedy bg, and the gate (fixed p or the tuner), checked against the model's axioms.
//! - [`claims`]: the disk experiment's grid with the model beside it, the stall boundaries, and
//!   the tuner against the best fixed p.

pub mod claims;
pub mod device;

pub use claims::{Grid, Perf, Point, Sweep, SweepPoint, Tuning};
pub use device::{run, Outcome, Preempt, Rig, Setup};
