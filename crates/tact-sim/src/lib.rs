//! tact-sim: a simulated machine that drives tact-core engines at accelerated virtual time.
//!
//! - [`rng`]: seeded randomness; [`noise`]: per-testpoint noise on progress.
//! - [`load`]: the foreground's busy/idle timeline (none, constant, periodic, bursty, scripted).
//! - [`machine`]: the shared resource and how contention slows each side.
//! - [`job`]: background jobs and the progress they report.
//! - [`measure`]: the measures of spec section 7 (efficiency, interference, overshoot, ...).
//! - [`polite`]: the driver that runs a polite `Regulator` against the machine.
//! - [`claims`]: the paper's experiments as functions, shared by the tests and the example.
//! - [`idle`]: a non-preemptive device with a fixed service time behind the idletime gate, the
//!   thesis's disk experiment and the automatic PI.
//! - [`share`]: a simulated multicore kernel that runs the ALPS engine (proportional share).
//! - [`tune`]: closed queueing models (mean value analysis) that drive the TCC controller.

pub mod claims;
pub mod idle;
pub mod job;
pub mod load;
pub mod machine;
pub mod measure;
pub mod noise;
pub mod polite;
pub mod rng;
pub mod share;
pub mod tune;

pub use job::{Concurrent, Job, SingleMetric};
pub use load::{Bursty, Foreground, LoadPattern, Segment};
pub use machine::{Contention, Machine, Slice};
pub use measure::{Mark, Overshoot, Reaction, Spread, Summary};
pub use noise::Noise;
pub use polite::{PoliteSim, Scenario, TargetPoint, TracePoint};
pub use rng::SimRng;
