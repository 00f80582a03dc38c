//! The paired-sample sign test of MS Manners (§4.2, §6.1), with thresholds computed exactly.
//!
//! Under the null hypothesis (progress exactly on target) the number c of poor samples among n is
//! Binomial(n, ½). A window is judged *poor* when the upper tail P(C ≥ c) is at most α, *good* when the
//! lower tail P(C ≤ c) is at most β, and *indeterminate* otherwise. The tails are summed with exact
//! `u128` binomial coefficients, so the thresholds match the printed binomial tables bit for bit; a
//! float approximation would put a boundary case on the wrong side.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The largest window the exact tables support: C(n, k) and 2ⁿ both fit in a `u128` up to here.
pub const MAX_WINDOW: u32 = 120;

/// Outcome of one sign test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Significantly many samples were below target: contention.
    Poor,
    /// Significantly few samples were below target: progress is fine.
    Good,
    /// Not enough evidence either way yet.
    Indeterminate,
}

#[derive(Debug, Error, PartialEq)]
pub enum SignTestError {
    #[error("alpha must be in (0, 1), got {0}")]
    Alpha(f64),
    #[error("beta must be in (0, 1), got {0}")]
    Beta(f64),
    #[error("alpha ({alpha}) must be below beta ({beta}): otherwise suspensions grow without bound (spec 2.3)")]
    Unstable { alpha: f64, beta: f64 },
    #[error("the window cap must be between {min} (the smallest window that can judge poor) and {MAX_WINDOW}, got {got}")]
    Window { got: u32, min: u32 },
}

/// Precomputed thresholds for one (α, β) pair, for windows of 0..=n_max samples.
#[derive(Debug, Clone)]
pub struct SignTest {
    alpha: f64,
    beta: f64,
    /// `poor_at[n]`: the smallest c judged poor with n samples, if any.
    poor_at: Vec<Option<u32>>,
    /// `good_up_to[n]`: the largest c judged good with n samples, if any.
    good_up_to: Vec<Option<u32>>,
}

impl SignTest {
    pub fn new(alpha: f64, beta: f64, n_max: u32) -> Result<Self, SignTestError> {
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(SignTestError::Alpha(alpha));
        }
        if !(beta > 0.0 && beta < 1.0) {
            return Err(SignTestError::Beta(beta));
        }
        if alpha >= beta {
            return Err(SignTestError::Unstable { alpha, beta });
        }
        let min = min_window(alpha);
        if n_max < min || n_max > MAX_WINDOW {
            return Err(SignTestError::Window { got: n_max, min });
        }
        let mut poor_at = Vec::with_capacity(n_max as usize + 1);
        let mut good_up_to = Vec::with_capacity(n_max as usize + 1);
        for n in 0..=n_max {
            let (poor, good) = thresholds(n, alpha, beta);
            poor_at.push(poor);
            good_up_to.push(good);
        }
        Ok(SignTest {
            alpha,
            beta,
            poor_at,
            good_up_to,
        })
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// The largest window this test was built for.
    pub fn n_max(&self) -> u32 {
        self.poor_at.len() as u32 - 1
    }

    /// m = ⌈−log₂ α⌉: the fewest samples that can ever give a poor verdict (equation 1).
    pub fn min_poor_window(&self) -> u32 {
        min_window(self.alpha)
    }

    /// Smallest number of poor samples judged poor in a window of `n` (None: cannot be poor yet).
    pub fn poor_threshold(&self, n: u32) -> Option<u32> {
        self.poor_at.get(n as usize).copied().flatten()
    }

    /// Largest number of poor samples judged good in a window of `n` (None: cannot be good yet).
    pub fn good_threshold(&self, n: u32) -> Option<u32> {
        self.good_up_to.get(n as usize).copied().flatten()
    }

    /// Judge a window of `n` samples of which `c` were poor. Windows beyond `n_max` are
    /// indeterminate: the caller clears its window at `n_max` (spec section 4).
    pub fn verdict(&self, n: u32, c: u32) -> Verdict {
        debug_assert!(c <= n);
        if self.poor_threshold(n).is_some_and(|k| c >= k) {
            Verdict::Poor
        } else if self.good_threshold(n).is_some_and(|k| c <= k) {
            Verdict::Good
        } else {
            Verdict::Indeterminate
        }
    }

    /// Mean fraction of time suspended when progress is on target (equation 3):
    /// q = αβ / (αβ + m(β − α)).
    pub fn expected_suspended_fraction(&self) -> f64 {
        let (a, b, m) = (self.alpha, self.beta, self.min_poor_window() as f64);
        a * b / (a * b + m * (b - a))
    }
}

fn min_window(alpha: f64) -> u32 {
    (-alpha.log2()).ceil().max(1.0) as u32
}

fn binomial(n: u32, k: u32) -> u128 {
    let k = k.min(n - k);
    // Multiply before dividing: each partial product C(n, i+1) is an integer.
    (0..k).fold(1u128, |acc, i| acc * (n - i) as u128 / (i + 1) as u128)
}

/// (poor_at, good_up_to) for a window of n, from exact tail sums compared with α·2ⁿ and β·2ⁿ.
fn thresholds(n: u32, alpha: f64, beta: f64) -> (Option<u32>, Option<u32>) {
    let total = 2f64.powi(n as i32);
    let coeffs: Vec<u128> = (0..=n).map(|i| binomial(n, i)).collect();
    // Upper tail: walk down from c = n while P(C ≥ c) ≤ α.
    let mut poor = None;
    let mut tail: u128 = 0;
    for c in (0..=n).rev() {
        tail += coeffs[c as usize];
        if tail as f64 <= alpha * total {
            poor = Some(c);
        } else {
            break;
        }
    }
    // Lower tail: walk up from c = 0 while P(C ≤ c) ≤ β.
    let mut good = None;
    let mut tail: u128 = 0;
    for c in 0..=n {
        tail += coeffs[c as usize];
        if tail as f64 <= beta * total {
            good = Some(c);
        } else {
            break;
        }
    }
    (poor, good)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_match_the_specs_binomial_table() {
        // spec 2.2, alpha = 0.05, beta = 0.2
        let t = SignTest::new(0.05, 0.2, 32).unwrap();
        let table: &[(u32, Option<u32>, Option<u32>)] = &[
            (3, None, Some(0)),
            (4, None, Some(0)),
            (5, Some(5), Some(1)),
            (6, Some(6), Some(1)),
            (7, Some(7), Some(1)),
            (8, Some(7), Some(2)),
            (10, Some(9), Some(3)),
            (12, Some(10), Some(4)),
            (16, Some(12), Some(5)),
            (20, Some(15), Some(7)),
            (24, Some(17), Some(9)),
            (32, Some(22), Some(13)),
        ];
        for &(n, poor, good) in table {
            assert_eq!(t.poor_threshold(n), poor, "poor threshold at n = {n}");
            assert_eq!(t.good_threshold(n), good, "good threshold at n = {n}");
        }
        assert_eq!(t.min_poor_window(), 5);
    }

    #[test]
    fn first_poor_window_is_m() {
        for (alpha, m) in [(0.05, 5), (0.1, 4), (0.01, 7), (0.25, 2)] {
            let t = SignTest::new(alpha, 0.3, 40).unwrap();
            assert_eq!(t.min_poor_window(), m);
            assert_eq!(t.poor_threshold(m - 1), None, "alpha {alpha}");
            assert_eq!(t.poor_threshold(m), Some(m), "alpha {alpha}");
        }
    }

    #[test]
    fn verdicts() {
        let t = SignTest::new(0.05, 0.2, 32).unwrap();
        assert_eq!(t.verdict(3, 0), Verdict::Good);
        assert_eq!(t.verdict(3, 3), Verdict::Indeterminate);
        assert_eq!(t.verdict(5, 5), Verdict::Poor);
        assert_eq!(t.verdict(5, 4), Verdict::Indeterminate);
        assert_eq!(t.verdict(5, 1), Verdict::Good);
        assert_eq!(
            t.verdict(33, 33),
            Verdict::Indeterminate,
            "beyond the table"
        );
    }

    #[test]
    fn exact_boundary_is_inclusive() {
        // alpha = 1/32 exactly: five poor of five has tail probability exactly alpha.
        let t = SignTest::new(1.0 / 32.0, 0.2, 10).unwrap();
        assert_eq!(t.poor_threshold(5), Some(5));
    }

    #[test]
    fn binomials_are_exact_at_the_largest_window() {
        assert_eq!(
            binomial(120, 60),
            96_614_908_840_363_322_603_893_139_521_372_656u128
        );
        assert_eq!(binomial(10, 3), 120);
        assert_eq!(binomial(32, 16), 601_080_390);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_eq!(
            SignTest::new(0.0, 0.2, 32).unwrap_err(),
            SignTestError::Alpha(0.0)
        );
        assert_eq!(
            SignTest::new(0.05, 1.0, 32).unwrap_err(),
            SignTestError::Beta(1.0)
        );
        assert!(matches!(
            SignTest::new(0.3, 0.2, 32),
            Err(SignTestError::Unstable { .. })
        ));
        assert!(matches!(
            SignTest::new(0.05, 0.2, 4),
            Err(SignTestError::Window { min: 5, .. })
        ));
        assert!(SignTest::new(0.05, 0.2, 121).is_err());
        assert!(SignTest::new(f64::NAN, 0.2, 32).is_err());
    }

    #[test]
    fn expected_duty_loss_is_about_one_percent() {
        let q = SignTest::new(0.05, 0.2, 32)
            .unwrap()
            .expected_suspended_fraction();
        assert!((q - 0.01 / 0.76).abs() < 1e-12, "q = {q}");
    }

    #[test]
    fn regions_never_overlap() {
        for (a, b) in [(0.05, 0.2), (0.01, 0.5), (0.2, 0.7), (0.1, 0.15)] {
            let t = SignTest::new(a, b, 60).unwrap();
            for n in 0..=60 {
                if let (Some(p), Some(g)) = (t.poor_threshold(n), t.good_threshold(n)) {
                    assert!(g < p, "n={n} a={a} b={b}");
                }
            }
        }
    }
}
