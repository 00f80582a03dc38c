//! A simulated multicore kernel that runs the ALPS engine ([`tact_core::share`]), and the paper's
//! experiments on it (spec `proportional-share.md` section 5).
//!
//! - [`machine`]: the kernel (fluid processor sharing in CPU pools, optional noise, run/sleep
//!   threads, SIGSTOP/SIGCONT, affinity pins), the timer, tact's own CPU cost (spec section 3)
//!   and the recorder's snapshots at each cycle end.
//! - [`record`]: the per-cycle metrics `E_p`, `AbsErr`, `RelErr`, `RMS` and the summaries.
//! - [`claims`]: the 27 configurations, the I/O test, three concurrent instances, two cores in
//!   strict and conserving mode, and share changes, arrivals and departures.

pub mod claims;
pub mod machine;
pub mod record;

pub use claims::{ConfigRun, Dist};
pub use machine::{
    Behavior, CostModel, CycleSnapshot, InstId, InstanceStats, KernelModel, ProcId, ProcSpec,
    ShareSim, SimConfig, TimerModel,
};
pub use record::{accuracy, cycle_metrics, Accuracy, CycleMetrics, EntityAccuracy, Target};
