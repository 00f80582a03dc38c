//! The bottleneck hint (`TuneParams::util`, beyond the paper; issue 6): the host reports the
//! bottleneck's utilization, and an add step that gains less than q but more than nothing still
//! counts while the bottleneck stays below the target (a removal that leaves it below is undone).
//!
//! Three questions, on the models the conflict was shown on ([`super::rows`]):
//!
//! - the X1 rig's VM model (front 1 ms, web 1.3 ms, 5 ms delay), where no Table 1 row meets G1
//!   or G2 by throughput alone: does the hint meet both?
//! - the same model held in a steady state below `util − room` (the reports begin only there):
//!   does the room rule climb to the count where the bottleneck reaches `util`, and hold it?
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
use super::rows::{mode_params, row_summary_with, Rig, RowSummary, DURATION};
use tact_core::tune::{Phase, Reason};

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

/// The room rule on the VM model: the host's reports begin at the first steady state, where
/// throughput alone put the count (7 workers, 83.7%, below `util − room` = 88%).
#[derive(Debug, Clone, Serialize)]
pub struct Room {
    pub seed: u64,
    /// The first steady state's count and the model's bottleneck utilization there.
    pub before: usize,
    pub before_util: f64,
    /// When the room rule started a climb, and from which count; how long the first steady
    /// state had held then.
    pub climbs: Vec<(Duration, usize)>,
    pub held: Duration,
    /// The smallest count whose bottleneck utilization reaches `util` on the model.
    pub target: usize,
    /// From the first climb on: the count of every entry into Steady, and over the steady
    /// periods the count's time-weighted standard deviation and the bottleneck's utilization.
    pub counts: Vec<usize>,
    pub count_sd: f64,
    pub utilization: f64,
    /// Cycles begun from the first climb on, that climb included (timeouts, shifts, climbs).
    pub cycles: usize,
}

/// 12 minutes of the VM model from 2 workers under tact's defaults (as [`vm`]), the hint's
/// reports beginning at the first entry into Steady.
pub fn vm_room(seed: u64) -> Room {
    let model = Rig::Vm.model();
    let params = mode_params(true, ROW, seed);
    let util = params.util;
    let mut scenario = Scenario {
        spacing: PARETO,
        seed,
        ..Scenario::new(Arc::new(model.clone()), params, DURATION)
    };
    scenario.pools[0].hint = true;
    scenario.pools[0].hint_late = true;
    let out = run(&scenario);
    let pool = &out.pools[0];
    let (entered, before) = pool.steady_counts().first().copied().unwrap_or_default();
    let climbs: Vec<(Duration, usize)> = pool
        .transitions
        .iter()
        .filter(|t| t.reason == Reason::Room)
        .map(|t| (t.at, t.target_from))
        .collect();
    let from = climbs.first().map_or(out.duration, |c| c.0);
    let steady = |s: &super::driver::Segment| s.phases[0] == Some(Phase::Steady);
    let mean = |f: &dyn Fn(&super::driver::Segment) -> f64| {
        out.mean_over(from, out.duration, steady, f)
            .unwrap_or(f64::NAN)
    };
    let count = mean(&|s| s.targets[0] as f64);
    Room {
        seed,
        before,
        before_util: model.utilization(before),
        target: (1..=N_SOLVED)
            .find(|&n| model.utilization(n) >= util)
            .unwrap_or(0),
        counts: pool
            .steady_counts()
            .iter()
            .filter(|c| c.0 >= from)
            .map(|c| c.1)
            .collect(),
        count_sd: mean(&|s| (s.targets[0] as f64 - count).powi(2)).sqrt(),
        utilization: mean(&|s| s.op.bottleneck),
        cycles: pool
            .transitions
            .iter()
            .filter(|t| t.at >= from && t.to == Phase::Base)
            .count(),
        held: from.saturating_sub(entered),
        climbs,
    }
}
