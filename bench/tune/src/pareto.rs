//! Pareto-distributed durations with a given mean (the paper's service times use shape 2.5).

use std::time::Duration;

use tact_sim::SimRng;

/// The paper's shape for service times.
pub const SHAPE: f64 = 2.5;

/// Draws Pareto(k) durations with mean `mean` from a seeded stream.
#[derive(Debug, Clone)]
pub struct Pareto {
    scale: f64,
    shape: f64,
    rng: SimRng,
}

impl Pareto {
    /// `mean` zero gives zero durations (a stage that is switched off). `shape` must exceed 1
    /// for the mean to exist.
    pub fn new(mean: Duration, shape: f64, rng: SimRng) -> Self {
        assert!(shape > 1.0, "Pareto shape {shape} has no mean");
        Pareto {
            scale: mean.as_secs_f64() * (shape - 1.0) / shape,
            shape,
            rng,
        }
    }

    pub fn draw(&mut self) -> Duration {
        if self.scale == 0.0 {
            return Duration::ZERO;
        }
        // Inverse CDF; 1 − u is in (0, 1], so the power is finite.
        let x = self.scale * (1.0 - self.rng.uniform()).powf(-1.0 / self.shape);
        Duration::from_secs_f64(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_have_the_mean_and_the_floor() {
        let mean = Duration::from_millis(2);
        let mut p = Pareto::new(mean, SHAPE, SimRng::new(7));
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| p.draw().as_secs_f64()).collect();
        let avg = draws.iter().sum::<f64>() / n as f64;
        assert!((avg / 0.002 - 1.0).abs() < 0.03, "mean {avg}");
        // The minimum of a Pareto is its scale, mean (k − 1)/k.
        let min = draws.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!((0.0012 - 1e-12..0.00121).contains(&min), "min {min}");
    }

    #[test]
    fn zero_mean_is_zero() {
        let mut p = Pareto::new(Duration::ZERO, SHAPE, SimRng::new(1));
        assert_eq!(p.draw(), Duration::ZERO);
    }
}
