//! Faster convergence (spec §6, "Beyond the paper", item 1): slow start, fast mode and warm start
//! against the paper's mode on the same models, seeds and noise, with the spec's targets:
//! time to first steady ≤ 50% of paper mode with steady utilization within ±2 points, batches
//! per decision ≤ 30% of paper mode, and wrong decisions ≤ 2α. A decision is wrong when the true
//! μ_y (from the model's exact throughputs) lies outside the indifference zone [L, H] and the
//! verdict says the opposite; decisions with the truth inside the zone are right either way.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tact_core::tune::decide::{mu_prime, zone};
use tact_core::tune::{Decision, Phase, TuneParams};

use super::claims::{median, paper_params, CPUS, ENGINE_DEMAND, N_SOLVED};
use super::driver::{run, Scenario};
use super::experiments::{escalation_vm, PARETO};
use super::model::{Closed, ThroughputModel, Topology};

/// Which of the extensions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mode {
    pub name: &'static str,
    pub slow_start: bool,
    pub fast: bool,
    /// Warm start from the paper mode's median first steady count on the same workload.
    pub warm: bool,
}

pub const PAPER: Mode = Mode {
    name: "paper",
    slow_start: false,
    fast: false,
    warm: false,
};
pub const MODES: [Mode; 5] = [
    PAPER,
    Mode {
        name: "slow start",
        slow_start: true,
        ..PAPER
    },
    Mode {
        name: "fast",
        fast: true,
        ..PAPER
    },
    Mode {
        name: "slow start + fast",
        slow_start: true,
        fast: true,
        warm: false,
    },
    Mode {
        name: "warm + fast",
        fast: true,
        warm: true,
        ..PAPER
    },
];

/// The workloads: the spec's X1 (one core per side, 2 initial workers) and the paper's event
/// escalation at r = 1 (8 CPUs per station) climbing from a single worker, both with Pareto
/// (k = 2.5, σ/μ ≈ 0.9) completions: the realistic noise under which every paper-mode
/// configuration runs to its dwell cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Workload {
    X1,
    Escalation,
}

pub const WORKLOADS: [Workload; 2] = [Workload::X1, Workload::Escalation];

impl Workload {
    fn model(self) -> Closed {
        match self {
            Workload::X1 => Closed::new("X1", &escalation_vm(0.001, 0.0013, 0.005), N_SOLVED),
            Workload::Escalation => Closed::topology(
                Topology::EventEscalation,
                CPUS,
                ENGINE_DEMAND,
                1.0,
                N_SOLVED,
            ),
        }
    }

    fn n_init(self) -> usize {
        match self {
            Workload::X1 => 2,
            Workload::Escalation => 1,
        }
    }
}

/// Simulated time per run: paper mode's first cycle on the escalation model takes up to about
/// 20 minutes.
pub const DURATION: Duration = Duration::from_secs(2400);

/// One run of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ConvergenceRun {
    pub workload: Workload,
    pub mode: Mode,
    pub seed: u64,
    /// Simulated time to the first entry into Steady (the run's length if none).
    pub first_steady: Duration,
    pub first_count: Option<usize>,
    pub steady_counts: Vec<usize>,
    /// Bottleneck utilization over the steady periods.
    pub utilization: f64,
    pub decisions: usize,
    /// Mean batches measured per decision (both configurations, revisits included).
    pub batches_per_decision: f64,
    /// Decisions whose true μ_y lies outside [L, H], and the wrong ones among them.
    pub judged: usize,
    pub wrong: usize,
    pub forced: usize,
}

/// Paper mode's parameters with the mode's extensions switched on; 50 s steady states in every
/// mode, so that utilization compares like with like.
pub fn params(mode: Mode, n_init: usize, warm: Option<usize>, seed: u64) -> TuneParams {
    TuneParams {
        slow_start: mode.slow_start,
        fast: mode.fast,
        warm: warm.filter(|_| mode.warm),
        ..paper_params(n_init, seed)
    }
}

/// Whether a decision contradicts the truth outside the indifference zone: Some(wrong), or
/// None when the true μ_y is inside [L, H] (either verdict is acceptable there).
pub fn wrong(d: &Decision, model: &dyn ThroughputModel, beta: f64) -> Option<bool> {
    let mu = |n: usize| 1.0 / model.at(&[n]).rates[0];
    let (mu1, mu2) = (mu(d.c1), mu(d.c2));
    let y = mu1 - mu2;
    let (lo, hi) = zone(d.q, mu1, beta);
    debug_assert!(lo <= mu_prime(d.q, mu1) && mu_prime(d.q, mu1) <= hi);
    if y > hi {
        Some(!d.better)
    } else if y < lo {
        Some(d.better)
    } else {
        None
    }
}

pub fn convergence_run(
    workload: Workload,
    mode: Mode,
    warm: Option<usize>,
    seed: u64,
) -> ConvergenceRun {
    let model = workload.model();
    let p = params(mode, workload.n_init(), warm, seed);
    let beta = p.beta;
    let scenario = Scenario {
        spacing: PARETO,
        seed,
        ..Scenario::new(Arc::new(model.clone()), p, DURATION)
    };
    let out = run(&scenario);
    let pool = &out.pools[0];
    let steady = pool.steady_counts();
    let verdicts: Vec<Option<bool>> = pool
        .decisions
        .iter()
        .map(|d| wrong(d, &model, beta))
        .collect();
    let batches: Vec<f64> = pool
        .decisions
        .iter()
        .map(|d| d.samples as f64 / d.batch_size as f64)
        .collect();
    ConvergenceRun {
        workload,
        mode,
        seed,
        first_steady: steady.first().map_or(out.duration, |s| s.0),
        first_count: steady.first().map(|s| s.1),
        steady_counts: steady.iter().map(|s| s.1).collect(),
        utilization: out
            .mean_over(
                Duration::ZERO,
                out.duration,
                |s| s.phases[0] == Some(Phase::Steady),
                |s| s.op.bottleneck,
            )
            .unwrap_or(f64::NAN),
        decisions: pool.decisions.len(),
        batches_per_decision: batches.iter().sum::<f64>() / batches.len().max(1) as f64,
        judged: verdicts.iter().flatten().count(),
        wrong: verdicts.iter().flatten().filter(|w| **w).count(),
        forced: pool.decisions.iter().filter(|d| d.forced).count(),
    }
}

/// One mode's runs over the seeds, against paper mode's on the same workload and seeds.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSummary {
    pub workload: Workload,
    pub mode: Mode,
    pub seeds: usize,
    /// Medians over the seeds.
    pub first_steady_s: f64,
    pub first_count: f64,
    pub utilization: f64,
    pub batches_per_decision: f64,
    /// Wrong decisions over all the seeds' decisions with the truth outside [L, H].
    pub wrong: usize,
    pub judged: usize,
    pub forced_share: f64,
    /// The targets, relative to paper mode (1 for paper mode itself).
    pub time_ratio: f64,
    pub utilization_diff: f64,
    pub batches_ratio: f64,
    pub wrong_rate: f64,
    pub runs: Vec<ConvergenceRun>,
}

impl ModeSummary {
    /// The spec's targets: time ≤ 50%, utilization ±2 points, batches ≤ 30% of paper mode,
    /// wrong decisions ≤ 2α.
    pub fn meets_targets(&self, alpha: f64) -> bool {
        self.time_ratio <= 0.5
            && self.utilization_diff.abs() <= 0.02
            && self.batches_ratio <= 0.3
            && self.wrong_rate <= 2.0 * alpha
    }
}

fn summarize(
    workload: Workload,
    mode: Mode,
    runs: Vec<ConvergenceRun>,
    paper: Option<&ModeSummary>,
) -> ModeSummary {
    let med = |f: &dyn Fn(&ConvergenceRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let first_steady_s = med(&|r| r.first_steady.as_secs_f64());
    let utilization = med(&|r| r.utilization);
    let batches_per_decision = med(&|r| r.batches_per_decision);
    let judged: usize = runs.iter().map(|r| r.judged).sum();
    let wrong: usize = runs.iter().map(|r| r.wrong).sum();
    let decisions: usize = runs.iter().map(|r| r.decisions).sum();
    let forced: usize = runs.iter().map(|r| r.forced).sum();
    let (t0, u0, b0) = paper.map_or((first_steady_s, utilization, batches_per_decision), |p| {
        (p.first_steady_s, p.utilization, p.batches_per_decision)
    });
    ModeSummary {
        workload,
        mode,
        seeds: runs.len(),
        first_steady_s,
        first_count: med(&|r| r.first_count.map_or(f64::NAN, |c| c as f64)),
        utilization,
        batches_per_decision,
        wrong,
        judged,
        forced_share: forced as f64 / decisions.max(1) as f64,
        time_ratio: first_steady_s / t0,
        utilization_diff: utilization - u0,
        batches_ratio: batches_per_decision / b0,
        wrong_rate: wrong as f64 / judged.max(1) as f64,
        runs,
    }
}

/// Every mode of [`MODES`] on one workload over `seeds`; the first entry is paper mode. Warm
/// start uses the paper runs' median first steady count as the count a host would have kept.
pub fn compare(workload: Workload, modes: &[Mode], seeds: &[u64]) -> Vec<ModeSummary> {
    let runs = |mode: Mode, warm: Option<usize>| {
        seeds
            .iter()
            .map(|&seed| convergence_run(workload, mode, warm, seed))
            .collect::<Vec<_>>()
    };
    let paper = summarize(workload, PAPER, runs(PAPER, None), None);
    let warm = (paper.first_count.is_finite()).then(|| paper.first_count.round() as usize);
    let mut out = vec![paper];
    for &mode in modes.iter().filter(|m| **m != PAPER) {
        let s = summarize(workload, mode, runs(mode, warm), Some(&out[0]));
        out.push(s);
    }
    out
}
