//! The sequential test with an indifference zone (spec §2.4, equations 10–25).
//!
//! X_i is the inter-completion time under configuration C_i (here: the batch means). C₂ is
//! better than C₁ by a gain of at least q exactly when μ_y = μ₁ − μ₂ ≥ μ′ = q/(1+q)·μ₁ (12).
//! The zone [L, H] around μ′ has width β|μ′| (13–14; |μ′| because the remove test has q < 0,
//! erratum E3). Sampling stops when σ_y·Z ≤ max(H − ȳ, ȳ − L) (17), and the answer is then
//! ȳ ≥ μ′.

use serde::{Deserialize, Serialize};

use super::samples::Summary;
use crate::stats::normal_quantile;

/// Outcome of one evaluation of the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Not enough evidence yet.
    Pending,
    /// Throughput changed by at least q (a gain for q > 0, a loss of at most |q| for q < 0).
    Better,
    NotBetter,
}

/// μ′ = q/(1+q)·μ₁ (12).
pub fn mu_prime(q: f64, mu1: f64) -> f64 {
    q / (1.0 + q) * mu1
}

/// (L, H) = μ′ ∓ β/2·|μ′| (13, 14 with E3).
pub fn zone(q: f64, mu1: f64, beta: f64) -> (f64, f64) {
    let m = mu_prime(q, mu1);
    let half = beta / 2.0 * m.abs();
    (m - half, m + half)
}

/// n̂₁ = 8(σ₁Z/(H − L))² (23), H − L = β|q/(1+q)|μ₁: the batches C₁ needs before C₂ is tried.
/// Infinite when q = 0 or μ₁ = 0 (no zone to resolve).
pub fn n1_hat(sd1: f64, mu1: f64, q: f64, beta: f64, z: f64) -> f64 {
    let width = beta * (q / (1.0 + q)).abs() * mu1;
    if width > 0.0 {
        8.0 * (sd1 * z / width).powi(2)
    } else {
        f64::INFINITY
    }
}

/// The printed equation (24), 2Z²β⁻²(1+1/q)²(σ₁/μ₁)², kept only to document erratum E1: its
/// constant 2 belongs to a zone of ±βμ′; with (13)–(14) it is 8, which is what [`n1_hat`] uses.
pub fn n1_hat_printed(cv1: f64, q: f64, beta: f64, z: f64) -> f64 {
    2.0 * z * z / (beta * beta) * (1.0 + 1.0 / q).powi(2) * cv1 * cv1
}

/// n̂₂ = (σ₂Z)² / (max(H − μ_y, μ_y − L)² − (H − L)²/8) (25): the batches C₂ needs once μ_y is
/// estimated, when C₁ has n̂₁. The denominator is positive because max(H − μ_y, μ_y − L) is at
/// least (H − L)/2.
pub fn n2_hat(sd2: f64, mu_y: f64, lo: f64, hi: f64, z: f64) -> f64 {
    let gap = f64::max(hi - mu_y, mu_y - lo);
    let den = gap * gap - (hi - lo).powi(2) / 8.0;
    if den > 0.0 {
        (sd2 * z).powi(2) / den
    } else {
        f64::INFINITY
    }
}

/// Fast mode's Z at look k (k = 0, 1, …): Φ⁻¹(1 − α/2^(k+1)). Looking at the data again and
/// again with the same Z would compound the error: every look at a zone edge risks α. Spending
/// α/2, α/4, … keeps the sum over all looks below α (a union bound), whatever their number.
pub fn look_z(alpha: f64, k: u32) -> f64 {
    normal_quantile(1.0 - alpha * 0.5f64.powi(k.min(60) as i32 + 1)).unwrap_or(f64::INFINITY)
}

/// The test of C₂ against C₁ for gain q. Pending until C₂ has `n_star` batches; `forced` (a
/// dwell cap) decides from the point estimate once it has them.
pub fn verdict(
    c1: &Summary,
    c2: &Summary,
    q: f64,
    beta: f64,
    z: f64,
    n_star: u32,
    forced: bool,
) -> Outcome {
    if c2.batches < n_star.max(2) || c1.batches < 2 {
        return Outcome::Pending;
    }
    let mp = mu_prime(q, c1.mean);
    let (lo, hi) = zone(q, c1.mean, beta);
    let y = c1.mean - c2.mean;
    let sy = (c1.var / f64::from(c1.batches) + c2.var / f64::from(c2.batches)).sqrt();
    if sy * z <= f64::max(hi - y, y - lo) || forced {
        if y >= mp {
            Outcome::Better
        } else {
            Outcome::NotBetter
        }
    } else {
        Outcome::Pending
    }
}
