//! The TCC controller against closed queueing models (spec concurrency.md §4, oracle mode).
//!
//! - [`mva`]: exact solutions of closed product-form networks (one class with c-server stations
//!   by convolution, checked against the MVA recursion and Seidmann's approximation; two classes
//!   with single servers by exact MVA).
//! - [`model`]: throughput models built on it: the paper's machine-repairman, event-escalation
//!   and event-enrichment networks, the proportional-sharing competitor, two pools on one
//!   network, memory thrashing and a disk with a queue-depth knee.
//! - [`driver`]: runs controllers against a model in virtual time with seeded completions.
//! - [`claims`]: the paper's analysis (Figure 5, equation 6, Theorem 1) as functions, shared by
//!   the tests and `examples/tune_claims.rs`.
//! - [`experiments`]: the spec's experiments X1–X7 as oracle models, with their pass criteria.
//! - [`coord`]: X6 with 2–4 fronts, independent, taking turns or synchronized at epochs (spec §6
//!   item 4).
//! - [`convergence`]: slow start, fast mode and warm start against paper mode (spec §6, item 1).
//! - [`rows`]: where each Table 1 row settles on the X1 rig's curve, against G1–G2 and the
//!   fair share a count implies (issue 6).
//! - [`hint`]: the bottleneck-utilization hint on that curve (G1 and G2 met) and against
//!   Theorem 1's competitor (share unchanged).

pub mod claims;
pub mod convergence;
pub mod coord;
pub mod des;
pub mod driver;
pub mod experiments;
pub mod hint;
pub mod model;
pub mod mva;
pub mod rows;

pub use driver::{run, Input, PoolRun, PoolSpec, Run, Scenario, Segment, Spacing, Stall};
pub use model::{
    Closed, Knee, Operating, Pair, ProportionalShare, Thrash, ThroughputModel, Topology,
};
pub use mva::{Network, Shared, Station, TwoClass};
