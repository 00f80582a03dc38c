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

/// Issue 5's floor for fg: 90% of its throughput alone.
pub const FG_FLOOR: f64 = 0.9;
/// Issue 5's target for bg at the best PI: 70% of the capacity fg leaves idle.
pub const BG_TARGET: f64 = 0.7;
/// Below this share of r_max left idle by fg, bg's share of the idle capacity is noise (the
/// bench's rule too): at i = 0.9 on the 20 ms disk fg alone already does r_max.
pub const MIN_IDLE: f64 = 0.05;

/// fg and bg performance of one run, normalized as in the grid, plus bg's share of the capacity
/// fg leaves idle (issue 5's measure).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Perf {
    pub fg_n: f64,
    pub bg_n: f64,
    /// bg / (r_max − r(i)). Above 1 bg took capacity fg would have used.
    pub bg_idle: f64,
    pub latency_x: f64,
}

impl Perf {
    /// Whether fg kept `floor` of its performance alone: of its throughput, and of its mean
    /// response time. Throughput alone is blind where the generator's busy window is shorter
    /// than a service (i = 0.1 on the 20 ms disk: one request per cycle, however long it waits),
    /// and there every fg request waiting half a bg service is what a PI is meant to prevent.
    pub fn keeps_fg(&self, floor: f64) -> bool {
        self.fg_n >= floor && self.latency_x <= 1.0 / floor
    }

    /// bg's share of the idle capacity, counting none of what it took from fg.
    pub fn harvest(&self) -> f64 {
        self.bg_idle.min(1.0)
    }
}

/// One (τ, i) cell: fixed PIs against the model, and where the best of them lies.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub intensity: f64,
    pub tau_ms: f64,
    pub anchor: Anchor,
    /// (r_max − r(i)) / r_max.
    pub idle: f64,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SweepPoint {
    pub pi_ms: f64,
    pub sim: Perf,
    /// The model's f_n and bg / (r_max − r(i)).
    pub model_fg_n: f64,
    pub model_bg_idle: f64,
}

/// The fixed p of a sweep: every τ/8 or every millisecond, whichever is finer, up to 6τ (the
/// ledges on the 20 ms disk are a couple of ms wide), then 7τ–10τ, and 15τ to 75τ (past t_max
/// on every rig).
pub fn sweep_pis(tau: Duration) -> Vec<Duration> {
    let step = (tau / 8).min(Duration::from_millis(1));
    let fine = (0..)
        .map(move |k| step * k)
        .take_while(move |&p| p <= tau * 6);
    let coarse = [7.0, 8.0, 10.0, 15.0, 20.0, 40.0, 75.0].map(|k| tau.mul_f64(k));
    fine.chain(coarse).collect()
}

fn perf(o: &Outcome, base: &Outcome, r_max: u64) -> Perf {
    let idle = r_max.saturating_sub(base.fg_done).max(1) as f64;
    Perf {
        fg_n: o.fg_done as f64 / base.fg_done as f64,
        bg_n: o.bg_done as f64 / r_max as f64,
        bg_idle: o.bg_done as f64 / idle,
        latency_x: o.fg_latency.as_secs_f64() / base.fg_latency.as_secs_f64(),
    }
}

/// Runs the fixed p given at intensity `i`, with the model beside each.
pub fn sweep(rig: &Rig, anchor: Anchor, i: f64, pis: &[Duration]) -> Sweep {
    let base = baseline(rig, i);
    let r_max = baseline(rig, 1.0).fg_done;
    let m = model(rig, anchor, r_max);
    let a = r_max.saturating_sub(base.fg_done) as f64;
    let points = pis
        .iter()
        .map(|&pi| {
            let o = run(rig, &Setup::gated(i, anchor, pi));
            let pred = m
                .predict(i, base.fg_done as f64, pi)
                .expect("sweep inputs are in range");
            SweepPoint {
                pi_ms: pi.as_secs_f64() * 1e3,
                sim: perf(&o, &base, r_max),
                model_fg_n: pred.f_n,
                model_bg_idle: if a > 0.0 { pred.b / a } else { 0.0 },
            }
        })
        .collect();
    Sweep {
        intensity: i,
        tau_ms: rig.tau.as_secs_f64() * 1e3,
        anchor,
        idle: a / r_max as f64,
        points,
    }
}

impl Sweep {
    /// The best fixed PI of the simulation: the most bg (of the idle capacity, see
    /// [`Perf::harvest`]) among the p that keep fg at `floor` of its performance
    /// ([`Perf::keeps_fg`]).
    pub fn best(&self, floor: f64) -> Option<&SweepPoint> {
        self.points.iter().filter(|p| p.sim.keeps_fg(floor)).fold(
            None,
            |best: Option<&SweepPoint>, p| match best {
                Some(b) if b.sim.harvest() >= p.sim.harvest() => Some(b),
                _ => Some(p),
            },
        )
    }

    /// The same for the model.
    pub fn model_best(&self, floor: f64) -> Option<&SweepPoint> {
        self.points.iter().filter(|p| p.model_fg_n >= floor).fold(
            None,
            |best: Option<&SweepPoint>, p| match best {
                Some(b) if b.model_bg_idle.min(1.0) >= p.model_bg_idle.min(1.0) => Some(b),
                _ => Some(p),
            },
        )
    }

    /// The most fg of the simulation among the p that give bg `bg` of the idle capacity.
    pub fn best_fg_with_bg(&self, bg: f64) -> Option<&SweepPoint> {
        self.points.iter().filter(|p| p.sim.bg_idle >= bg).fold(
            None,
            |best: Option<&SweepPoint>, p| match best {
                Some(b) if b.sim.fg_n >= p.sim.fg_n => Some(b),
                _ => Some(p),
            },
        )
    }
}

/// The tuner against the best fixed PI at one intensity.
#[derive(Debug, Clone, Serialize)]
pub struct Tuning {
    pub intensity: f64,
    pub tau_ms: f64,
    pub anchor: Anchor,
    pub beta: f64,
    /// (r_max − r(i)) / r_max.
    pub idle: f64,
    /// The best fixed p at fg ≥ [`FG_FLOOR`] in throughput and response time ([`Sweep::best`]).
    pub best_pi_ms: f64,
    pub best: Perf,
    /// The tuner from its start value over the whole run, its transient included.
    pub auto: Perf,
    pub auto_mean_pi_ms: f64,
    pub auto_final_pi_ms: f64,
}

impl Tuning {
    /// How far the tuner's bg falls short of the best fixed PI's, in points of the idle
    /// capacity (negative: it harvests more).
    pub fn shortfall(&self) -> f64 {
        self.best.harvest() - self.auto.harvest()
    }
}

/// The tuner's parameters on the rig: [`TunerParams::measured`] with the rig's τ and think
/// time, p_max from the fg gap (1 − i)·t_max, and budget `beta`.
pub fn tuner_params(rig: &Rig, anchor: Anchor, i: f64, beta: f64) -> TunerParams {
    let gap = rig.t_max.mul_f64(1.0 - i).max(rig.tau);
    TunerParams {
        beta,
        ..TunerParams::measured(rig.tau, anchor, rig.think, gap)
    }
}

/// Sweeps fixed p ([`sweep_pis`]) and runs the tuner ([`tuner_params`]) at intensity `i`.
pub fn tuning(rig: &Rig, anchor: Anchor, i: f64, beta: f64) -> Tuning {
    let s = sweep(rig, anchor, i, &sweep_pis(rig.tau));
    let best = *s.best(FG_FLOOR).expect("the longest p keeps fg");
    let base = baseline(rig, i);
    let r_max = baseline(rig, 1.0).fg_done;
    let o = run(
        rig,
        &Setup {
            preempt: Preempt::Auto(tuner_params(rig, anchor, i, beta)),
            ..Setup::gated(i, anchor, Duration::ZERO)
        },
    );
    Tuning {
        intensity: i,
        tau_ms: s.tau_ms,
        anchor,
        beta,
        idle: s.idle,
        best_pi_ms: best.pi_ms,
        best: best.sim,
        auto: perf(&o, &base, r_max),
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

/// What bg could have on the exact rig from a gate that knew when every fg burst begins, if it
/// kept bg's requests off the bursts (an upper bound for any gate that does; docs/idle.md,
/// "Issue 5's disk target"): the whole service times that fit between a burst's last
/// completion and the next burst.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Oracle {
    pub intensity: f64,
    /// fg requests per cycle alone: those that start within the busy window.
    pub fg_requests: u32,
    /// From fg's last completion to the next cycle.
    pub gap: Duration,
    /// bg requests that fit in the gap.
    pub bg_requests: u32,
    /// The capacity fg leaves idle, in requests per cycle (r_max − r(i)).
    pub idle_requests: f64,
    /// bg_requests / idle_requests.
    pub bg_idle: f64,
    /// How far one more bg request would reach into the next burst ...
    pub overlap: Duration,
    /// ... against the wait the burst absorbs and still starts all its requests in its window.
    pub slack: Duration,
}

/// [`Oracle`] at intensity `i` on `rig` (its service time exact: the jitter is ignored).
pub fn oracle(rig: &Rig, i: f64) -> Oracle {
    let cycle = rig.tau + rig.think;
    let busy = rig.t_max.mul_f64(i);
    let fg_requests = (busy.as_secs_f64() / cycle.as_secs_f64()).ceil() as u32;
    let fg_end = cycle * fg_requests - rig.think;
    let gap = rig.t_max.saturating_sub(fg_end);
    let bg_requests = (gap.as_secs_f64() / rig.tau.as_secs_f64()).floor() as u32;
    let idle_requests = rig.t_max.as_secs_f64() / cycle.as_secs_f64() - fg_requests as f64;
    Oracle {
        intensity: i,
        fg_requests,
        gap,
        bg_requests,
        idle_requests,
        bg_idle: bg_requests as f64 / idle_requests,
        overlap: (fg_end + rig.tau * (bg_requests + 1)).saturating_sub(rig.t_max),
        slack: busy.saturating_sub(cycle * fg_requests.saturating_sub(1)),
    }
}
