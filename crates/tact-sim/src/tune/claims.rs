//! The paper's analysis (§3.2–3.3, spec §4) as functions returning their measured figures:
//! Figure 5 against the closed models with 8-CPU stations, the share against a constant
//! competitor (equation 6), and Theorem 1's alternation of two instances. Noise-free runs
//! (deterministic spacing) are the paper's method; seeded runs (exponential spacing) add
//! measurement noise. The tests assert on these; `examples/tune_claims.rs` prints them. The
//! spec's experiments (§5) are in [`super::experiments`].

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tact_core::tune::{Phase, TuneParams};

use super::driver::{run, PoolRun, Scenario, Spacing};
use super::model::{Closed, Pair, ProportionalShare, ThroughputModel, Topology};
use super::mva::Shared;

/// CPUs per station in the paper's models (§3.2).
pub const CPUS: usize = 8;
/// The engine's demand in the Figure 5 models: 8 ms on 8 CPUs, 1,000 tasks/s at saturation,
/// about the paper's experimental rates.
pub const ENGINE_DEMAND: f64 = 0.008;
/// Populations solved for the models.
pub const N_SOLVED: usize = 512;
/// The r values of the Figure 5 reproduction.
pub const R_GRID: [f64; 11] = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.5, 2.0, 4.0, 10.0];
pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The paper's reproduction parameters (fixed 50 s steady state) from `n_init` workers.
pub fn paper_params(n_init: usize, seed: u64) -> TuneParams {
    TuneParams {
        n_init,
        n_max: N_SOLVED,
        seed,
        ..TuneParams::paper()
    }
}

pub(crate) fn steady_counts(pool: &PoolRun) -> Vec<usize> {
    pool.steady_counts().iter().map(|c| c.1).collect()
}

/// Median of a non-empty list (the lower middle for an even length).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

// ---------------------------------------------------------------------------------------------
// Figure 5: utilization against the closed models.

/// One point of Figure 5: TCC against one closed model.
#[derive(Debug, Clone, Serialize)]
pub struct Fig5Point {
    pub topology: Topology,
    pub r: f64,
    pub seed: u64,
    /// Count at each entry into Steady.
    pub steady_counts: Vec<usize>,
    /// Bottleneck utilization at each of those counts (the model's, exact).
    pub steady_utilizations: Vec<f64>,
    /// Time-weighted bottleneck utilization over the Steady periods.
    pub utilization: f64,
    /// The best count with bottleneck utilization ≤ 95% (the spec's X*_95) and the steady
    /// periods' throughput relative to it.
    pub best95_count: usize,
    pub throughput_vs_best95: f64,
    pub forced_decisions: u64,
}

/// How an analysis run (Figure 5, §3.3 shares) is done.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Protocol {
    pub spacing: Spacing,
    pub seed: u64,
    /// Simulated time, unless `cycles` ends the run first.
    pub duration: Duration,
    /// Stop at the entry into Steady number `cycles` (the last steady period is then empty).
    pub cycles: Option<usize>,
    /// Steady-state length (fixed, no jitter).
    pub steady: Duration,
}

impl Protocol {
    /// The paper's method: throughput from the model without noise. Decisions then do not
    /// depend on how long Steady lasts, so it lasts 5 s, and the run covers 8 full cycles
    /// after the first (every pattern of period 1, 2, 4 or 8 is weighted evenly).
    pub fn noise_free() -> Self {
        Protocol {
            spacing: Spacing::Deterministic,
            seed: 1,
            duration: secs(3600),
            cycles: Some(9),
            steady: secs(5),
        }
    }

    /// Exponential spacing (σ/μ = 1 per completion), the paper's 50 s steady state, 10 minutes.
    pub fn noisy(seed: u64) -> Self {
        Protocol {
            spacing: Spacing::Exponential,
            seed,
            duration: secs(600),
            cycles: None,
            steady: secs(50),
        }
    }

    /// [`Protocol::noisy`] for 30 minutes: against a large competitor the first climb from 8
    /// workers takes most of 10 minutes when every step runs to its 30 s dwell cap.
    pub fn noisy_long(seed: u64) -> Self {
        Protocol {
            duration: secs(1800),
            ..Protocol::noisy(seed)
        }
    }
}

/// Runs TCC against a Figure 4 model (c = 8, n_init = 8 online CPUs) and summarizes its
/// steady states.
pub fn figure5(topology: Topology, r: f64, how: Protocol) -> Fig5Point {
    let model = Closed::topology(topology, CPUS, ENGINE_DEMAND, r, N_SOLVED);
    let params = TuneParams {
        steady_min: how.steady,
        steady_max: how.steady,
        ..paper_params(CPUS, how.seed)
    };
    let scenario = Scenario {
        spacing: how.spacing,
        seed: how.seed,
        stop_after_steady: how.cycles,
        ..Scenario::new(Arc::new(model.clone()), params, how.duration)
    };
    let out = run(&scenario);
    let end = out.duration;
    let pool = &out.pools[0];
    let steady_counts = steady_counts(pool);
    let steady_utilizations = steady_counts
        .iter()
        .map(|&n| model.utilization(n))
        .collect();
    let utilization = out
        .steady_utilization(0, Duration::ZERO, end)
        .unwrap_or(f64::NAN);
    let x = |n: usize| model.network().throughput(n);
    let best95_count = (1..=N_SOLVED)
        .filter(|&n| model.utilization(n) <= 0.95)
        .max_by(|&a, &b| x(a).total_cmp(&x(b)))
        .unwrap_or(1);
    let steady_tput = out
        .mean_over(
            Duration::ZERO,
            end,
            |s| s.phases[0] == Some(Phase::Steady),
            |s| s.op.rates[0],
        )
        .unwrap_or(f64::NAN);
    Fig5Point {
        topology,
        r,
        seed: how.seed,
        steady_counts,
        steady_utilizations,
        utilization,
        best95_count,
        throughput_vs_best95: steady_tput / x(best95_count),
        forced_decisions: pool.status.as_ref().expect("a TCC pool").forced_decisions,
    }
}

/// Figure 5 over [`R_GRID`] for one topology.
pub fn figure5_grid(topology: Topology, how: Protocol) -> Vec<Fig5Point> {
    R_GRID.iter().map(|&r| figure5(topology, r, how)).collect()
}

/// Seeded runs of one Figure 5 point: the median, smallest and largest steady utilization.
#[derive(Debug, Clone, Serialize)]
pub struct Fig5Spread {
    pub topology: Topology,
    pub r: f64,
    pub seeds: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub utilizations: Vec<f64>,
}

pub fn figure5_seeds(topology: Topology, r: f64, seeds: std::ops::Range<u64>) -> Fig5Spread {
    let utilizations: Vec<f64> = seeds
        .map(|seed| figure5(topology, r, Protocol::noisy(seed)).utilization)
        .collect();
    Fig5Spread {
        topology,
        r,
        seeds: utilizations.len(),
        median: median(&utilizations),
        min: utilizations.iter().cloned().fold(f64::INFINITY, f64::min),
        max: utilizations
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max),
        utilizations,
    }
}

// ---------------------------------------------------------------------------------------------
// §3.3: friendliness.

/// One run against the constant competitor of §3.3.
#[derive(Debug, Clone, Serialize)]
pub struct SharePoint {
    pub competitor: f64,
    pub p: f64,
    pub q: f64,
    pub remove: bool,
    pub seed: u64,
    pub steady_counts: Vec<usize>,
    /// The pool's share x/(x + y₀) at each steady count.
    pub shares: Vec<f64>,
    /// Time-weighted share over the steady periods.
    pub share: f64,
    /// Equation (6)'s bounds.
    pub bound_low: f64,
    pub bound_high: f64,
}

/// Equation (6): 1 − q/p < share ≤ (1+p)(p−q)/(p(1+p−q)).
pub fn share_bounds(p: f64, q: f64) -> (f64, f64) {
    (1.0 - q / p, (1.0 + p) * (p - q) / (p * (1.0 + p - q)))
}

/// The share scenario's parameters: paper setting, 8 initial workers, room up to 1,024.
pub fn share_params(q: f64, remove: bool, seed: u64) -> TuneParams {
    TuneParams {
        q,
        remove,
        allow_unfriendly: q <= tact_core::tune::params::phi(0.25),
        n_max: 1024,
        ..paper_params(CPUS, seed)
    }
}

/// TCC against y₀ processor-sharing competitor tasks on a bottleneck of 1,000 tasks/s.
/// `params` gives (p, q, w), `remove` and n_max; the protocol gives spacing, seed, length and
/// the steady state's length.
pub fn share_run(competitor: f64, params: TuneParams, how: Protocol) -> SharePoint {
    share_run_with(competitor, params, how, false)
}

/// [`share_run`], with the bottleneck's utilization reported to TCC when `hint` holds
/// ([`super::hint`]).
pub fn share_run_with(
    competitor: f64,
    params: TuneParams,
    how: Protocol,
    hint: bool,
) -> SharePoint {
    let model = ProportionalShare {
        capacity: 1000.0,
        competitor,
    };
    let params = TuneParams {
        steady_min: how.steady,
        steady_max: how.steady,
        seed: how.seed,
        ..params
    };
    let (p, q, remove) = (params.p, params.q, params.remove);
    let mut scenario = Scenario {
        spacing: how.spacing,
        seed: how.seed,
        stop_after_steady: how.cycles,
        ..Scenario::new(Arc::new(model), params, how.duration)
    };
    scenario.pools[0].hint = hint;
    let out = run(&scenario);
    let steady_counts = steady_counts(&out.pools[0]);
    let shares = steady_counts
        .iter()
        .map(|&x| model.at(&[x]).shares[0])
        .collect();
    let share = out
        .steady_share(0, Duration::ZERO, out.duration)
        .unwrap_or(f64::NAN);
    let (bound_low, bound_high) = share_bounds(p, q);
    SharePoint {
        competitor,
        p,
        q,
        remove,
        seed: how.seed,
        steady_counts,
        shares,
        share,
        bound_low,
        bound_high,
    }
}

/// One turn of Theorem 1's alternation: an instance runs one cycle against the other's
/// fixed count.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    pub instance: char,
    /// The other instance's count during this turn.
    pub other: usize,
    /// This instance's count before and after its cycle.
    pub from: usize,
    pub to: usize,
    /// Utilization of the shared bottleneck at the end of the turn.
    pub bottleneck: f64,
    /// This instance's share of the bottleneck at the end of the turn.
    pub share: f64,
}

/// The bottleneck two alternating instances share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shared2 {
    /// The theorem's own model: f(x, y) = x/(x + y)·C, always saturated.
    ProportionalShare,
    /// One server with 1 ms per task; each instance's tasks also spend `think` seconds in a
    /// delay of their own, so saturation ends once the two hold fewer than about
    /// 1 + think/1 ms tasks together.
    WithThink { think: f64 },
}

/// Theorem 1: X and Y take turns, each running one cycle (from its base cut) against the
/// other's count, which stays fixed meanwhile (the turn-taking the theorem assumes). X starts
/// from `x0` against `y0`.
pub fn alternation(
    shared: Shared2,
    x0: usize,
    y0: usize,
    turns: usize,
    spacing: Spacing,
    seed: u64,
) -> Vec<Turn> {
    let (mut mine, mut other) = (x0, y0);
    let mut out = Vec::new();
    for k in 0..turns {
        let model: Arc<dyn ThroughputModel> = match shared {
            Shared2::ProportionalShare => Arc::new(ProportionalShare {
                capacity: 1000.0,
                competitor: other as f64,
            }),
            Shared2::WithThink { think } => Arc::new(Pair::competitor(
                "alternation",
                &[
                    Shared {
                        queue: true,
                        demand: [0.001, 0.001],
                    },
                    Shared {
                        queue: false,
                        demand: [think, 0.0],
                    },
                    Shared {
                        queue: false,
                        demand: [0.0, think],
                    },
                ],
                0,
                1024,
                other,
            )),
        };
        let start = TuneParams::default().base_count(mine);
        let turn_seed = seed.wrapping_add(k as u64);
        let params = TuneParams {
            n_max: 1024,
            ..paper_params(start, turn_seed)
        };
        let scenario = Scenario {
            spacing,
            seed: turn_seed,
            stop_after_steady: Some(1),
            ..Scenario::new(model.clone(), params, secs(3600))
        };
        let res = run(&scenario);
        let to = steady_counts(&res.pools[0])
            .first()
            .copied()
            .unwrap_or(mine);
        let op = model.at(&[to]);
        out.push(Turn {
            instance: if k % 2 == 0 { 'X' } else { 'Y' },
            other,
            from: mine,
            to,
            bottleneck: op.bottleneck,
            share: op.shares[0],
        });
        (mine, other) = (other, to);
    }
    out
}
