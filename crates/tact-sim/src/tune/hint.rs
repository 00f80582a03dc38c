//! The bottleneck hint (`TuneParams::util`, beyond the paper; issue 6): the host reports the
//! bottleneck's utilization, and an add step that gains less than q but more than nothing still
//! counts while the bottleneck stays below the target (a removal that leaves it below is undone).
//!
//! Two questions, both on the models the conflict was shown on ([`super::rows`]):
//!
//! - the X1 rig's VM model (front 1 ms, web 1.3 ms, 5 ms delay), where no Table 1 row meets G1
//!   or G2 by throughput alone: does the hint meet both?
//! - Theorem 1's competitor (y₀ processor-sharing tasks) and the VM with an always-runnable
//!   competitor on web's core: is the share the same as without the hint? There the bottleneck
//!   is saturated (the competitor takes whatever the pool leaves), so the rule must be inert.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::claims::{share_params, share_run_with, Protocol, SharePoint, N_SOLVED};
use super::driver::{run, Scenario};
use super::experiments::PARETO;
use super::model::Pair;
use super::rows::{mode_params, row_summary_with, Rig, RowSummary};
use tact_core::tune::Phase;

/// tact's default row.
pub const ROW: (f64, f64, f64) = (25.0, 14.0, 39.0);

/// The VM model of X1 under tact's defaults (slow start, fast mode, 50 s steady states), 12
/// minutes from 2 workers, with or without the hint; medians over `seeds`.
pub fn vm(hint: bool, seeds: &[u64]) -> RowSummary {
    row_summary_with(Rig::Vm, true, ROW, seeds, hint)
}

/// Theorem 1's competitor with and without the hint, same seed and protocol.
#[derive(Debug, Clone, Serialize)]
pub struct Friendliness {
    pub without: SharePoint,
    pub with: SharePoint,
}

/// TCC (defaults, removal off as in the analysis) against `competitor` processor-sharing tasks.
pub fn theorem1(competitor: f64, how: Protocol) -> Friendliness {
    let params = share_params(0.14, false, how.seed);
    Friendliness {
        without: share_run_with(competitor, params.clone(), how, false),
        with: share_run_with(competitor, params, how, true),
    }
}

/// The VM model with `tasks` always-runnable competitor tasks on web's core from the start.
#[derive(Debug, Clone, Serialize)]
pub struct VmCompetitor {
    pub hint: bool,
    pub seed: u64,
    pub counts: Vec<usize>,
    /// tact's share of web's core and web's utilization over the steady periods.
    pub share: f64,
    pub web: f64,
}

pub const VM_COMPETITOR_TASKS: usize = 7;
pub const VM_COMPETITOR_DURATION: Duration = Duration::from_secs(1200);

pub fn vm_competitor(hint: bool, seed: u64) -> VmCompetitor {
    // X1's VM (front 1 ms, web 1.3 ms, 5 ms delay); the competitor's tasks (class 1) only use
    // web, so they are always runnable there, like Theorem 1's.
    let stations = super::experiments::vm_competitor_stations();
    let model = Pair::competitor(
        "X1 VM + competitor",
        &stations,
        1,
        N_SOLVED,
        VM_COMPETITOR_TASKS,
    );
    let mut scenario = Scenario {
        spacing: PARETO,
        seed,
        ..Scenario::new(
            Arc::new(model),
            mode_params(true, ROW, seed),
            VM_COMPETITOR_DURATION,
        )
    };
    scenario.pools[0].hint = hint;
    let out = run(&scenario);
    let steady = |s: &super::driver::Segment| s.phases[0] == Some(Phase::Steady);
    let end = VM_COMPETITOR_DURATION;
    VmCompetitor {
        hint,
        seed,
        counts: out.pools[0].steady_counts().iter().map(|c| c.1).collect(),
        share: out
            .mean_over(Duration::ZERO, end, steady, |s| s.op.shares[0])
            .unwrap_or(f64::NAN),
        web: out
            .mean_over(Duration::ZERO, end, steady, |s| s.op.bottleneck)
            .unwrap_or(f64::NAN),
    }
}
