//! Per-testpoint noise on the background's progress: real progress counts are stochastic (the
//! paper's Figure 8), and the sign test exists because of it.

use serde::Serialize;

use crate::rng::SimRng;

/// A multiplier on one testpoint's progress. Every variant has mean 1, so noise never changes the
/// job's mean rate and "the uncontended target" is a single well-defined number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Noise {
    None,
    /// exp(N(−σ²/2, σ²)): skewed, median below the mean (spec section 7's 56% example).
    LogNormal {
        sigma: f64,
    },
    /// 1 + σ·N(0, 1), floored at 1%: symmetric, so mean and median agree and a job calibrated
    /// on it sits exactly at target (P(poor) = ½) as equation 3 assumes.
    Normal {
        sigma: f64,
    },
}

impl Noise {
    pub fn sample(&self, rng: &mut SimRng) -> f64 {
        match *self {
            Noise::None => 1.0,
            Noise::LogNormal { sigma } => (sigma * rng.normal() - sigma * sigma / 2.0).exp(),
            Noise::Normal { sigma } => (1.0 + sigma * rng.normal()).max(0.01),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_mean_one() {
        for noise in [
            Noise::None,
            Noise::LogNormal { sigma: 0.3 },
            Noise::Normal { sigma: 0.2 },
        ] {
            let mut rng = SimRng::new(3);
            let n = 200_000;
            let mean = (0..n).map(|_| noise.sample(&mut rng)).sum::<f64>() / n as f64;
            assert!((mean - 1.0).abs() < 0.005, "{noise:?}: {mean}");
        }
    }

    #[test]
    fn lognormal_puts_more_than_half_below_the_mean() {
        let mut rng = SimRng::new(4);
        let noise = Noise::LogNormal { sigma: 0.3 };
        let n = 100_000;
        let below = (0..n).filter(|_| noise.sample(&mut rng) < 1.0).count() as f64 / n as f64;
        assert!((below - 0.56).abs() < 0.01, "{below}");
    }
}
