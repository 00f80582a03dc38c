//! The thesis's disk experiment (T§6.1.1, spec idletime.md section 7, claims 3–8) on the exact
//! rig, compared with the model, and the automatic PI against the best fixed PI. The tests
//! assert on these; `examples/idle_claims.rs` prints them.

use std::time::Duration;

use serde::Serialize;
use tact_core::idle::{Anchor, Model, ModelParams, TunerParams};

use super::device::{run, Outcome, Preempt, Rig, Setup};

/// The spec's intensity grid (0.01 and 0.05, then steps of 0.1).
pub const INTENSITIES: [f64; 12] = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
/// The spec's PI grid, in ms.
pub const PIS_MS: [u64; 15] = [0, 5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200];
/// bg below this share of r_max counts as stopped (a stray request per run is not service).
pub const STOPPED: f64 = 0.005;

/// One grid point: the sim and the model.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub intensity: f64,
    pub pi_ms: u64,
    /// fg throughput / r(i), bg throughput / r_max.
    pub fg_n: f64,
    pub bg_n: f64,
    /// Mean fg response time / the baseline's.
    pub latency_x: f64,
    pub harm: f64,
    pub model_fg_n: f64,
    pub model_bg_n: f64,
}

/// The grid for one anchor.
#[derive(Debug, Clone, Serialize)]
pub struct Grid {
    pub anchor: Anchor,
    pub rig: Rig,
    /// fg requests per run alone, at each intensity of the grid, and at i = 1 (r_max).
    pub baseline: Vec<(f64, u64)>,
    pub r_max: u64,
    pub points: Vec<Point>,
}

/// The fg baseline r(i) in requests per run, and its mean latency.
pub fn baseline(rig: &Rig, intensity: f64) -> Outcome {
    run(rig, &Setup::baseline(intensity))
}

/// The model with the rig's constants and the measured r_max (requests per run).
pub fn model(rig: &Rig, anchor: Anchor, r_max: u64) -> Model {
    Model::new(ModelParams {
        tau: rig.tau,
        t_max: rig.t_max,
        r_max: r_max as f64,
        alpha: 1.0,
        anchor,
        think: rig.think,
    })
    .expect("the rig's constants are valid")
}

/// Runs every (intensity, p) of the grids given.
pub fn grid(rig: &Rig, anchor: Anchor, intensities: &[f64], pis_ms: &[u64]) -> Grid {
    let r_max = baseline(rig, 1.0).fg_done;
    let model = model(rig, anchor, r_max);
    let mut base = Vec::new();
    let mut points = Vec::new();
    for &i in intensities {
        let b = baseline(rig, i);
        base.push((i, b.fg_done));
        for &p in pis_ms {
            let pi = Duration::from_millis(p);
            let o = run(rig, &Setup::gated(i, anchor, pi));
            let m = model
                .predict(i, b.fg_done as f64, pi)
                .expect("grid inputs are in range");
            points.push(Point {
                intensity: i,
                pi_ms: p,
                fg_n: o.fg_done as f64 / b.fg_done as f64,
                bg_n: o.bg_done as f64 / r_max as f64,
                latency_x: o.fg_latency.as_secs_f64() / b.fg_latency.as_secs_f64(),
                harm: o.counters.harm(),
                model_fg_n: m.f_n,
                model_bg_n: m.b_n,
            });
        }
    }
    Grid {
        anchor,
        rig: *rig,
        baseline: base,
        r_max,
        points,
    }
}

impl Grid {
    pub fn at(&self, intensity: f64, pi_ms: u64) -> &Point {
        self.points
            .iter()
            .find(|p| p.intensity == intensity && p.pi_ms == pi_ms)
            .expect("a grid point")
    }

    /// The lowest intensity of the grid from which bg stays stopped at every higher one, at
    /// this p; `None` when bg still runs at the grid's highest intensity.
    pub fn stall_boundary(&self, pi_ms: u64) -> Option<f64> {
        let mut row: Vec<&Point> = self.points.iter().filter(|p| p.pi_ms == pi_ms).collect();
        row.sort_by(|a, b| a.intensity.total_cmp(&b.intensity));
        let mut boundary = None;
        for p in row.iter().rev() {
            if p.bg_n < STOPPED {
                boundary = Some(p.intensity);
            } else {
                break;
            }
        }
        boundary
    }
}

/// The tuner against a sweep of fixed p at one intensity.
#[derive(Debug, Clone, Serialize)]
pub struct Tuning {
    pub intensity: f64,
    pub tau_ms: f64,
    pub beta: f64,
    /// The best fixed p: most bg among those that keep fg's performance (see [`keeps_fg`]).
    pub best_pi_ms: f64,
    pub best: Perf,
    pub auto: Perf,
    pub auto_mean_pi_ms: f64,
    pub auto_final_pi_ms: f64,
}

/// fg and bg performance of one run, normalized as in the grid.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Perf {
    pub fg_n: f64,
    pub bg_n: f64,
    pub latency_x: f64,
}

/// The criterion of the tuner comparison (spec section 8.1, A1 with the tuner's budget): fg
/// keeps 1 − β/2 of its baseline performance, in throughput and in mean response time. β bounds
/// the share of fg requests that wait for bg, and a wait is τ/2 on average, so a tuner that holds
/// its budget loses about β/2.
pub fn keeps_fg(p: &Perf, beta: f64) -> bool {
    let floor = 1.0 - beta / 2.0;
    p.fg_n >= floor && p.latency_x <= 1.0 / floor
}

/// The fixed p swept for the tuner comparison, as multiples of τ (0.5τ to 10τ and beyond).
pub const SWEEP_TAUS: [f64; 16] = [
    0.5, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 40.0, 100.0,
];

/// Sweeps fixed p and runs the tuner with the measured bounds of [`TunerParams::measured`]
/// (p_max from the fg gap (1 − i)·t_max) and budget `beta` at intensity `i`.
pub fn tuning(rig: &Rig, anchor: Anchor, i: f64, beta: f64) -> Tuning {
    let b = baseline(rig, i);
    let r_max = baseline(rig, 1.0).fg_done as f64;
    let perf = |o: &Outcome| Perf {
        fg_n: o.fg_done as f64 / b.fg_done as f64,
        bg_n: o.bg_done as f64 / r_max,
        latency_x: o.fg_latency.as_secs_f64() / b.fg_latency.as_secs_f64(),
    };
    let mut best: Option<(f64, Perf)> = None;
    for k in SWEEP_TAUS {
        let pi = rig.tau.mul_f64(k);
        let p = perf(&run(rig, &Setup::gated(i, anchor, pi)));
        if keeps_fg(&p, beta) && !best.is_some_and(|(_, b)| p.bg_n <= b.bg_n) {
            best = Some((pi.as_secs_f64() * 1e3, p));
        }
    }
    let (best_pi_ms, best) = best.expect("the longest p keeps fg");
    let gap = rig.t_max.mul_f64(1.0 - i).max(rig.tau);
    let params = TunerParams {
        beta,
        ..TunerParams::measured(rig.tau, anchor, rig.think, gap)
    };
    let o = run(
        rig,
        &Setup {
            preempt: Preempt::Auto(params),
            ..Setup::gated(i, anchor, Duration::ZERO)
        },
    );
    Tuning {
        intensity: i,
        tau_ms: rig.tau.as_secs_f64() * 1e3,
        beta,
        best_pi_ms,
        best,
        auto: perf(&o),
        auto_mean_pi_ms: o.mean_pi.as_secs_f64() * 1e3,
        auto_final_pi_ms: o.final_pi.as_secs_f64() * 1e3,
    }
}

/// The PI regions of the model (spec section 4, with tact's reading of p = τ): p ≤ τ,
/// τ < p ≤ t_max, p > t_max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Region {
    BelowTau,
    Middle,
    AboveTMax,
}

impl Region {
    pub const ALL: [Region; 3] = [Region::BelowTau, Region::Middle, Region::AboveTMax];

    pub fn of(rig: &Rig, pi_ms: u64) -> Region {
        let p = Duration::from_millis(pi_ms);
        if p <= rig.tau {
            Region::BelowTau
        } else if p <= rig.t_max {
            Region::Middle
        } else {
            Region::AboveTMax
        }
    }
}

/// The largest |sim − model| of fg_n and bg_n over one region, at intensities ≥ `min_i`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ModelError {
    pub region: Region,
    pub min_intensity: f64,
    pub fg: f64,
    pub bg: f64,
}

impl Grid {
    pub fn model_error(&self, region: Region, min_intensity: f64) -> ModelError {
        let (mut fg, mut bg) = (0f64, 0f64);
        for p in self
            .points
            .iter()
            .filter(|p| Region::of(&self.rig, p.pi_ms) == region && p.intensity >= min_intensity)
        {
            fg = fg.max((p.fg_n - p.model_fg_n).abs());
            bg = bg.max((p.bg_n - p.model_bg_n).abs());
        }
        ModelError {
            region,
            min_intensity,
            fg,
            bg,
        }
    }
}
