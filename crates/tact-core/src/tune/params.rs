//! Parameters of the TCC controller (spec concurrency.md §2.1 and §3), and their validation
//! against Theorem 1's friendliness conditions.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// φ(x) = x(x+1)/(x+2): condition (1) reads q > φ(p).
pub fn phi(x: f64) -> f64 {
    x * (x + 1.0) / (x + 2.0)
}

/// The smallest base cut w that condition (2) allows for (p, q): 1 − (p/q − 1)².
pub fn min_cut(p: f64, q: f64) -> f64 {
    1.0 - (p / q - 1.0).powi(2)
}

/// One (p, q, w) row, as fractions (0.25 is 25%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Friendly {
    pub p: f64,
    pub q: f64,
    pub w: f64,
}

/// As the user types them: fractions, in `tcc:p=0.25,q=0.139,w=0.39` and as Python keywords.
impl fmt::Display for Friendly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p={},q={},w={}",
            on_grid(self.p),
            on_grid(self.q),
            on_grid(self.w)
        )
    }
}

/// `x` rounded to the suggestions' grid, so that 0.139 does not print as 0.13900000000000001.
fn on_grid(x: f64) -> f64 {
    (x * GRID).round() / GRID
}

/// Table 1 of the paper exactly as printed, (p, q, w) in percent. The row p = 20% violates
/// condition (2) (erratum E2).
pub const TABLE_1_PRINTED: [(f64, f64, f64); 9] = [
    (10.0, 5.4, 28.0),
    (15.0, 8.2, 32.0),
    (20.0, 11.5, 33.0),
    (25.0, 14.0, 39.0),
    (30.0, 17.0, 42.0),
    (35.0, 20.5, 50.0),
    (40.0, 24.0, 56.0),
    (45.0, 27.0, 56.0),
    (50.0, 31.0, 63.0),
];

/// Table 1 as tact ships it: the printed rows with E2 corrected, p = 20% has w = 46% (condition
/// (2) needs w ≥ 45.4% at q = 11.5%). Every row satisfies (1) and (2).
pub const TABLE_1: [(f64, f64, f64); 9] = {
    let mut rows = TABLE_1_PRINTED;
    rows[2].2 = 46.0; // E2: printed as 33%
    rows
};

/// Slow start's add step p = 100% and gain q = 68%: the smallest q on a 1% grid that condition
/// (1) allows for p = 100% (φ(1) = 66.7%). No w goes with them: slow start runs only in a first
/// cycle, which starts without the cut.
pub const SLOW_START: (f64, f64) = (1.0, 0.68);

/// Every parameter of the controller. Durations are busy time (time the pool was saturated,
/// spec §2.2), not wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneParams {
    /// Add step p: each add raises the count by this fraction (at least one worker).
    pub p: f64,
    /// Gain q an add step must deliver to count as better.
    pub q: f64,
    /// Cut w at the start of each cycle (Base).
    pub w: f64,
    /// Remove step r.
    pub r: f64,
    /// Remove stopping point δ: removing stops below (1 − δ) × the cycle's best throughput.
    pub delta: f64,
    /// Indifference-zone width β.
    pub beta: f64,
    /// Decision error α; the test uses Z = Φ⁻¹(1 − α).
    pub alpha: f64,
    /// Initial batches n* every configuration measures before any test; also the length of the
    /// steady state's change-detection windows.
    pub n_star: u32,
    /// Smallest batch size b (the cycle starts with b = max(batch_min, n)).
    pub batch_min: u32,
    /// Largest batch size after doubling for autocorrelation.
    pub batch_max: u32,
    /// Lag-1 autocorrelation of the base state's batch means above which b doubles.
    pub autocorr_max: f64,
    /// Fraction of a configuration's raw samples trimmed from the top (the largest ⌊trim·m⌋).
    pub trim: f64,
    /// Dwell cap per configuration: at this much busy time a decision is forced from the point
    /// estimate (the paper has no cap).
    pub dwell: Duration,
    /// Dwell cap of the Max state.
    pub max_dwell: Duration,
    /// Steady timeout = clamp(steady_factor × last cycle's busy length, steady_min, steady_max),
    /// times a seeded jitter in [1 − steady_jitter, 1 + steady_jitter]. steady_min = steady_max
    /// gives a fixed timeout (50 s in reproduction runs).
    pub steady_factor: f64,
    pub steady_min: Duration,
    pub steady_max: Duration,
    pub steady_jitter: f64,
    /// Change detection: a steady window whose throughput ratio to the reference leaves
    /// [1/shift, shift] two windows running starts a cycle (1.25).
    pub shift: f64,
    /// ... or one window leaving [1/shift_hard, shift_hard] (2).
    pub shift_hard: f64,
    /// Count the controller starts with (the host passes the number of online CPUs); the first
    /// cycle starts in Base at this count without the cut.
    pub n_init: usize,
    /// Bounds of the count.
    pub n_min: usize,
    pub n_max: usize,
    /// Whether the Remove state runs (off: Max goes straight to Steady; used by the friendliness
    /// analysis, which ignores it).
    pub remove: bool,
    /// Slow start (beyond the paper): a cold first cycle adds with [`SLOW_START`]'s p and q until
    /// its first failed step, then returns to the last good count and goes on with p and q.
    pub slow_start: bool,
    /// Fast mode (beyond the paper): decide as soon as the sequential test (17) holds on both
    /// configurations' samples so far, instead of first giving C₁ the worst-case n̂₁ (23).
    /// `docs/tune.md`, "Faster convergence", has the design.
    pub fast: bool,
    /// Warm start: the steady count an earlier run of the same workload reached (the host keeps
    /// it per workload key, from [`crate::tune::Status::steady_count`]). The first cycle is
    /// then a normal one from that count (Base at its cut, no slow start); `n_init` is unused.
    pub warm: Option<usize>,
    /// Bottleneck utilization hint (beyond the paper; `docs/tune.md`, "The bottleneck hint"):
    /// when the host reports the bottleneck's utilization ([`crate::tune::Policy::on_hint`]),
    /// an add step that gains less than q but more than nothing still counts as better while
    /// the bottleneck's mean utilization over the step stays below this, and a removal that
    /// leaves it below this is undone. Against a competitor the bottleneck is saturated, so the
    /// rule is inert there and Theorem 1's bound stands. Without reports it does nothing.
    #[serde(default = "default_util")]
    pub util: f64,
    /// The bottleneck hint's steady rule: a steady count whose reference window left the
    /// bottleneck well short of saturation (below the midpoint of `util` and this) but whose
    /// later change-detection window runs it above this starts a cycle early. Something else
    /// now uses the bottleneck, or the load changed, while throughput may have moved too
    /// little for change detection. 1 turns the rule off.
    #[serde(default = "default_saturated")]
    pub saturated: f64,
    /// The bottleneck hint's room rule, its tolerance: a steady state whose windows ran the
    /// bottleneck below `util − room` on average (from its second window on) starts a cycle
    /// from its own count, without the cut, so that the add phase climbs to `util`; at most
    /// once per count until a cycle of another cause. Counts within `room` of the target hold
    /// (window noise of a point or two must not move them). In [0, util]; `util` turns it off.
    #[serde(default = "default_room")]
    pub room: f64,
    /// PSI as a saturation hint (spec §6 item 3; `docs/tune.md`, "PSI as a saturation hint"):
    /// with pressure readings from the host ([`crate::tune::Policy::on_pressure`]), an add step
    /// that runs with memory or I/O `full` stalls above `psi_full` is revoked as a decline (at
    /// its verdict, or before it when the stalls are the count's own), Max or Remove at a count
    /// whose own `full` stalls exceed it start a new cycle from the count's cut, and memory
    /// `some` stalls above `psi_some` end the steady state early. Off by default: PSI is
    /// machine-wide unless the host reads the bottleneck's cgroup, so any other process's
    /// stalls would cut this pool's count; a user who knows the pool is what fills memory or
    /// the disk turns it on. Without readings it does nothing.
    #[serde(default)]
    pub psi: bool,
    /// The `full` stall fraction (memory or I/O) above which an add step fails, and Max or
    /// Remove start a new cycle (0.05).
    #[serde(default = "default_psi_full")]
    pub psi_full: f64,
    /// The memory `some` stall fraction above which the steady state starts a cycle (0.10).
    #[serde(default = "default_psi_some")]
    pub psi_some: f64,
    /// Accept (p, q, w) that break condition (1) or (2) of Theorem 1.
    pub allow_unfriendly: bool,
    /// A configuration holding this many raw samples counts as at its dwell cap (bounds memory
    /// when tasks are very short).
    pub max_samples: usize,
    /// Transitions kept for [`crate::tune::Policy::drain_trace`] before the oldest are dropped.
    pub trace_capacity: usize,
    /// Seed of the steady-timeout jitter.
    pub seed: u64,
}

impl Default for TuneParams {
    fn default() -> Self {
        TuneParams {
            p: 0.25,
            q: 0.14,
            w: 0.39,
            r: 0.10,
            delta: 0.05,
            beta: 0.1,
            alpha: 0.05,
            n_star: 30,
            batch_min: 16,
            batch_max: 4096,
            autocorr_max: 0.2,
            trim: 0.01,
            dwell: Duration::from_secs(30),
            max_dwell: Duration::from_secs(60),
            steady_factor: 10.0,
            steady_min: Duration::from_secs(60),
            steady_max: Duration::from_secs(900),
            steady_jitter: 0.1,
            shift: 1.25,
            shift_hard: 2.0,
            n_init: 1,
            n_min: 1,
            n_max: 1024,
            remove: true,
            slow_start: true,
            fast: true,
            warm: None,
            util: default_util(),
            saturated: default_saturated(),
            room: default_room(),
            psi: false,
            psi_full: default_psi_full(),
            psi_some: default_psi_some(),
            allow_unfriendly: false,
            max_samples: 1 << 20,
            trace_capacity: 1024,
            seed: 0,
        }
    }
}

/// The bottleneck hint's utilization target: inside G2's 85–95% band, low enough that a
/// saturated bottleneck (a competitor's, ≈ 100%) never passes for an idle one under measurement
/// noise.
fn default_util() -> f64 {
    0.90
}

/// A bottleneck this busy is saturated for the hint's steady rule: the spec's "~0.97", above
/// G2's 95% so that a count held inside the band never reads as saturated.
fn default_saturated() -> f64 {
    0.97
}

/// Room below `util` a steady count may leave before the hint climbs from it. A window's mean
/// utilization moves by a point or two with noise, and the rule judges the mean over two or more
/// windows: 2 points keeps a count at `util − room/2` from climbing on noise, and is small
/// enough that the X1 bench's 87.6% at 8 workers (below 88%) climbs.
fn default_room() -> f64 {
    0.02
}

/// Spec §6 item 3: memory or io `full` avg10 above 5% fails an add step.
fn default_psi_full() -> f64 {
    0.05
}

/// Spec §6 item 3: memory `some` avg10 above 10% starts a cycle.
fn default_psi_some() -> f64 {
    0.10
}

impl TuneParams {
    /// The paper's reproduction setting: defaults with a fixed 50 s steady state, no jitter, and
    /// none of the extensions beyond the paper (slow start, fast mode, warm start).
    pub fn paper() -> Self {
        TuneParams {
            steady_min: Duration::from_secs(50),
            steady_max: Duration::from_secs(50),
            steady_jitter: 0.0,
            slow_start: false,
            fast: false,
            warm: None,
            ..TuneParams::default()
        }
    }

    /// These parameters with (p, q, w) taken from a row of percentages such as [`TABLE_1`].
    pub fn with_row(self, (p, q, w): (f64, f64, f64)) -> Self {
        TuneParams {
            p: p / 100.0,
            q: q / 100.0,
            w: w / 100.0,
            ..self
        }
    }

    /// up(n) = min(n_max, max(n+1, ⌈n(1+p)⌉)): the count after an add step.
    pub fn add_step(&self, n: usize) -> usize {
        self.grow(n, self.p)
    }

    /// The count after an add step of `p` (slow start's is [`SLOW_START`]'s).
    pub fn grow(&self, n: usize, p: f64) -> usize {
        let grown = (n as f64 * (1.0 + p) - 1e-9).ceil() as usize;
        grown.max(n + 1).min(self.n_max)
    }

    /// base(n) = max(n_min, min(n−1, ⌈n(1−w)⌉)): the count at the start of a cycle (107 → 66).
    pub fn base_count(&self, n: usize) -> usize {
        let cut = (n as f64 * (1.0 - self.w) - 1e-9).ceil() as usize;
        cut.min(n.saturating_sub(1)).max(self.n_min)
    }

    /// down(n) = max(n_min, min(n−1, round(n(1−r)))): the count after a remove step.
    pub fn remove_step(&self, n: usize) -> usize {
        let cut = (n as f64 * (1.0 - self.r)).round() as usize;
        cut.min(n.saturating_sub(1)).max(self.n_min)
    }

    /// The gain an add step from `from` to `to` workers must deliver: q·φ(to/from − 1)/φ(p).
    /// Rounding up to whole workers enlarges small steps; scaling q with φ keeps condition (1)
    /// for the step actually taken (1 → 2 workers needs 67% at the defaults). A step cut short
    /// by n_max needs proportionally less.
    pub fn q_eff(&self, from: usize, to: usize) -> f64 {
        q_scaled(from, to, self.p, self.q)
    }

    /// Checks every field; (p, q, w) also against Theorem 1 unless `allow_unfriendly`.
    pub fn validate(&self) -> Result<(), ParamError> {
        let frac = |field: &'static str, v: f64, lo: f64, hi: f64, why: &'static str| {
            if v.is_finite() && v > lo && v < hi {
                Ok(())
            } else {
                Err(ParamError::Range {
                    field,
                    value: v,
                    why,
                })
            }
        };
        frac("p", self.p, 0.0, 4.0, "the add step must be in (0, 4)")?;
        frac("q", self.q, 0.0, 4.0, "the required gain must be in (0, 4)")?;
        if !(self.w.is_finite() && self.w >= 0.0 && self.w < 1.0) {
            return Err(ParamError::Range {
                field: "w",
                value: self.w,
                why: "the base cut must be in [0, 1)",
            });
        }
        frac("r", self.r, 0.0, 1.0, "the remove step must be in (0, 1)")?;
        frac(
            "delta",
            self.delta,
            0.0,
            1.0,
            "the remove stop must be in (0, 1)",
        )?;
        frac(
            "beta",
            self.beta,
            0.0,
            2.0,
            "the indifference zone must be in (0, 2)",
        )?;
        frac(
            "alpha",
            self.alpha,
            0.0,
            0.5,
            "the decision error must be in (0, 0.5)",
        )?;
        frac(
            "trim",
            self.trim,
            -f64::MIN_POSITIVE,
            0.5,
            "the trimmed fraction must be in [0, 0.5)",
        )?;
        frac(
            "util",
            self.util,
            0.0,
            1.0,
            "the bottleneck utilization target must be in (0, 1)",
        )?;
        if !(self.saturated.is_finite() && self.saturated > self.util && self.saturated <= 1.0) {
            return Err(ParamError::Range {
                field: "saturated",
                value: self.saturated,
                why: "must be in (util, 1]",
            });
        }
        if !(self.room.is_finite() && self.room >= 0.0 && self.room <= self.util) {
            return Err(ParamError::Range {
                field: "room",
                value: self.room,
                why: "must be in [0, util]",
            });
        }
        for (field, v) in [("psi_full", self.psi_full), ("psi_some", self.psi_some)] {
            // 1 is allowed: a threshold no reading can pass keeps that rule off.
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err(ParamError::Range {
                    field,
                    value: v,
                    why: "the stall fraction must be in (0, 1]",
                });
            }
        }
        frac(
            "autocorr_max",
            self.autocorr_max,
            0.0,
            1.0,
            "the autocorrelation limit must be in (0, 1)",
        )?;
        if !(self.steady_factor.is_finite() && self.steady_factor >= 0.0) {
            return Err(ParamError::Range {
                field: "steady_factor",
                value: self.steady_factor,
                why: "must be a finite number >= 0",
            });
        }
        if !(self.steady_jitter.is_finite() && (0.0..1.0).contains(&self.steady_jitter)) {
            return Err(ParamError::Range {
                field: "steady_jitter",
                value: self.steady_jitter,
                why: "must be in [0, 1)",
            });
        }
        if !(self.shift.is_finite() && self.shift > 1.0) {
            return Err(ParamError::Range {
                field: "shift",
                value: self.shift,
                why: "the change-detection ratio must be a finite number > 1",
            });
        }
        if !(self.shift_hard.is_finite() && self.shift_hard >= self.shift) {
            return Err(ParamError::Range {
                field: "shift_hard",
                value: self.shift_hard,
                why: "must be a finite number >= shift",
            });
        }
        let count = |field: &'static str, v: u64, lo: u64, why: &'static str| {
            if v >= lo {
                Ok(())
            } else {
                Err(ParamError::Range {
                    field,
                    value: v as f64,
                    why,
                })
            }
        };
        count(
            "n_star",
            self.n_star.into(),
            3,
            "at least 3 batches are needed for a variance and an autocorrelation",
        )?;
        count("batch_min", self.batch_min.into(), 1, "must be at least 1")?;
        if self.batch_max < self.batch_min {
            return Err(ParamError::Range {
                field: "batch_max",
                value: self.batch_max.into(),
                why: "must be at least batch_min",
            });
        }
        count("n_min", self.n_min as u64, 1, "at least one worker")?;
        if self.n_max < self.n_min {
            return Err(ParamError::Range {
                field: "n_max",
                value: self.n_max as f64,
                why: "must be at least n_min",
            });
        }
        for (field, n) in [("n_init", Some(self.n_init)), ("warm", self.warm)] {
            match n {
                Some(n) if !(self.n_min..=self.n_max).contains(&n) => {
                    return Err(ParamError::Outside {
                        field,
                        value: n,
                        n_min: self.n_min,
                        n_max: self.n_max,
                    });
                }
                _ => {}
            }
        }
        count(
            "max_samples",
            self.max_samples as u64,
            2,
            "must be at least 2",
        )?;
        for (field, d) in [("dwell", self.dwell), ("max_dwell", self.max_dwell)] {
            if d.is_zero() {
                return Err(ParamError::Range {
                    field,
                    value: 0.0,
                    why: "must be longer than zero",
                });
            }
        }
        if self.steady_max < self.steady_min || self.steady_max.is_zero() {
            return Err(ParamError::Range {
                field: "steady_max",
                value: self.steady_max.as_secs_f64(),
                why: "must be longer than zero and at least steady_min",
            });
        }
        if self.allow_unfriendly {
            Ok(())
        } else {
            check_friendly(self.p, self.q, self.w)
        }
    }
}

/// The gain a step from `from` to `to` workers must deliver when the nominal step is p with gain
/// q: q·φ(to/from − 1)/φ(p) (see [`TuneParams::q_eff`]).
pub fn q_scaled(from: usize, to: usize, p: f64, q: f64) -> f64 {
    let step = to as f64 / from.max(1) as f64 - 1.0;
    q * phi(step) / phi(p)
}

/// Why parameters were refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ParamError {
    #[error("{field} = {value}: {why}")]
    Range {
        field: &'static str,
        value: f64,
        why: &'static str,
    },
    /// A count outside the bounds, which the message shows (the user may not have set them).
    #[error("{field} = {value}: must lie in [n_min, n_max] = [{n_min}, {n_max}]")]
    Outside {
        field: &'static str,
        value: usize,
        n_min: usize,
        n_max: usize,
    },
    #[error(
        "condition (1) of Theorem 1 fails: q = {q} must exceed p(p+1)/(p+2) = {bound:.4} for p = {p}, \
         or tact can take more than its fair share of a shared bottleneck; nearest valid: {} \
         (set allow_unfriendly to run anyway)",
        join(.nearest)
    )]
    Condition1 {
        p: f64,
        q: f64,
        bound: f64,
        nearest: Vec<Friendly>,
    },
    #[error(
        "condition (2) of Theorem 1 fails: w = {w} must be at least 1 - (p/q - 1)^2 = {bound:.4} for \
         p = {p}, q = {q}, or the base state can start above the fair count; nearest valid: {} \
         (set allow_unfriendly to run anyway)",
        join(.nearest)
    )]
    Condition2 {
        p: f64,
        q: f64,
        w: f64,
        bound: f64,
        nearest: Vec<Friendly>,
    },
}

fn join(rows: &[Friendly]) -> String {
    if rows.is_empty() {
        return "none near these values".to_string();
    }
    rows.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(" or ")
}

impl ParamError {
    /// The valid rows suggested by a Theorem 1 error (empty for range errors).
    pub fn nearest(&self) -> &[Friendly] {
        match self {
            ParamError::Condition1 { nearest, .. } | ParamError::Condition2 { nearest, .. } => {
                nearest
            }
            ParamError::Range { .. } | ParamError::Outside { .. } => &[],
        }
    }
}

/// Grid of the suggestions: 0.1 percentage point.
const GRID: f64 = 1000.0;

fn up_grid(x: f64) -> f64 {
    (x * GRID - 1e-9).ceil() / GRID
}

fn down_grid(x: f64) -> f64 {
    (x * GRID + 1e-9).floor() / GRID
}

/// Whether a row is usable: in range and friendly.
pub fn satisfies(row: Friendly) -> bool {
    let Friendly { p, q, w } = row;
    p > 0.0 && q > 0.0 && (0.0..1.0).contains(&w) && q > phi(p) && w >= min_cut(p, q)
}

/// The suggestions that are themselves valid, without repeats.
fn valid(rows: [Friendly; 2]) -> Vec<Friendly> {
    let mut out: Vec<Friendly> = Vec::new();
    for row in rows {
        if satisfies(row) && !out.contains(&row) {
            out.push(row);
        }
    }
    out
}

/// The smallest q on the 0.1% grid that condition (1) allows for p.
fn smallest_q(p: f64) -> f64 {
    let mut q = up_grid(phi(p));
    while q <= phi(p) {
        q += 1.0 / GRID;
    }
    q
}

/// The smallest w on the 0.1% grid that is at least `w` and that condition (2) allows.
fn smallest_w(p: f64, q: f64, w: f64) -> f64 {
    let mut v = up_grid(min_cut(p, q)).max(w);
    while v < min_cut(p, q) {
        v += 1.0 / GRID;
    }
    v
}

/// The largest p on the 0.1% grid that condition (1) allows for q: the root of p² + (1−q)p − 2q.
fn largest_p(q: f64) -> f64 {
    let root = (-(1.0 - q) + ((1.0 - q).powi(2) + 8.0 * q).sqrt()) / 2.0;
    let mut p = down_grid(root);
    while phi(p) >= q && p > 1.0 / GRID {
        p -= 1.0 / GRID;
    }
    p
}

/// Checks (p, q, w) against conditions (1) and (2). The error suggests two valid rows close to
/// the given one, on a 0.1-point grid.
pub fn check_friendly(p: f64, q: f64, w: f64) -> Result<(), ParamError> {
    let bound1 = phi(p);
    if q <= bound1 {
        // Keep p: Table 1's rule (smallest q, then smallest w). Keep q: the largest p it allows.
        let q1 = smallest_q(p);
        let keep_p = Friendly {
            p,
            q: q1,
            w: smallest_w(p, q1, w),
        };
        let p2 = largest_p(q);
        let keep_q = Friendly {
            p: p2,
            q,
            w: smallest_w(p2, q, w),
        };
        return Err(ParamError::Condition1 {
            p,
            q,
            bound: bound1,
            nearest: valid([keep_p, keep_q]),
        });
    }
    let bound2 = min_cut(p, q);
    if w < bound2 {
        // Keep p and q: raise w. Keep p: Table 1's rule (smallest q, then the smallest w).
        let raise_w = Friendly {
            p,
            q,
            w: smallest_w(p, q, w),
        };
        let q1 = smallest_q(p);
        let rule = Friendly {
            p,
            q: q1,
            w: smallest_w(p, q1, 0.0),
        };
        return Err(ParamError::Condition2 {
            p,
            q,
            w,
            bound: bound2,
            nearest: valid([raise_w, rule]),
        });
    }
    Ok(())
}
