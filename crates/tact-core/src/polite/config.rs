//! Parameters of the polite engine, with the defaults of spec section 2.8.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::stats::{SignTest, SignTestError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoliteConfig {
    /// Testpoint period P: calls sooner than this only accumulate progress.
    pub period: Duration,
    /// Sign-test false-poor level α.
    pub alpha: f64,
    /// Sign-test false-good level β.
    pub beta: f64,
    /// First suspension s₀ after a good verdict.
    pub initial_suspension: Duration,
    /// Suspension cap S_max.
    pub max_suspension: Duration,
    /// Averaging count n_avg of the calibration, ξ = (n_avg − 1)/n_avg.
    pub n_avg: f64,
    /// Evaluated testpoints of unregulated running that seed the target (B).
    pub bootstrap: u32,
    /// Probation after the bootstrap: `None` lets the regulator decide (10 min unless the
    /// bootstrap ran on a quiet machine); `Some(0)` disables it.
    pub probation: Option<Duration>,
    /// Probation length used when `probation` is `None` and the bootstrap was not known to be quiet.
    pub auto_probation: Duration,
    /// Duty cap φ during probation: after each evaluated testpoint of length d, rest d(1−φ)/φ.
    pub duty_cap: f64,
    /// Window cap N_max of the sign test.
    pub window_cap: u32,
    /// Ridge factor ν.
    pub ridge: f64,
    /// Hung threshold H: a sample whose active time exceeds it is discarded.
    pub hung: Duration,
}

impl Default for PoliteConfig {
    fn default() -> Self {
        let period = Duration::from_millis(200);
        PoliteConfig {
            period,
            alpha: 0.05,
            beta: 0.2,
            initial_suspension: period,
            max_suspension: Duration::from_secs(60),
            n_avg: 10_000.0,
            bootstrap: 100,
            probation: None,
            auto_probation: Duration::from_secs(600),
            duty_cap: 0.25,
            window_cap: 32,
            ridge: 1e-11,
            hung: hung_threshold(period),
        }
    }
}

/// H = max(10 s, 50·P) (spec 2.8).
pub fn hung_threshold(period: Duration) -> Duration {
    (period * 50).max(Duration::from_secs(10))
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("{name} must be greater than zero")]
    ZeroDuration { name: &'static str },
    #[error("initial suspension ({initial:?}) must not exceed the suspension cap ({max:?})")]
    SuspensionOrder { initial: Duration, max: Duration },
    #[error("n_avg must be a finite number of at least 1, got {0}")]
    NAvg(f64),
    #[error("bootstrap must be at least 1 testpoint")]
    Bootstrap,
    #[error("duty cap must be in (0, 1], got {0}")]
    DutyCap(f64),
    #[error("ridge factor must be finite and non-negative, got {0}")]
    Ridge(f64),
    #[error(transparent)]
    SignTest(#[from] SignTestError),
}

impl PoliteConfig {
    /// Same defaults with another testpoint period (s₀ = P and H = max(10 s, 50·P) follow it).
    pub fn with_period(period: Duration) -> Self {
        PoliteConfig {
            period,
            initial_suspension: period,
            hung: hung_threshold(period),
            ..PoliteConfig::default()
        }
    }

    /// Check every field and build the sign-test tables.
    pub fn validate(&self) -> Result<SignTest, ConfigError> {
        for (name, d) in [
            ("testpoint period", self.period),
            ("initial suspension", self.initial_suspension),
            ("suspension cap", self.max_suspension),
            ("hung threshold", self.hung),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration { name });
            }
        }
        if self.initial_suspension > self.max_suspension {
            return Err(ConfigError::SuspensionOrder {
                initial: self.initial_suspension,
                max: self.max_suspension,
            });
        }
        if !(self.n_avg.is_finite() && self.n_avg >= 1.0) {
            return Err(ConfigError::NAvg(self.n_avg));
        }
        if self.bootstrap == 0 {
            return Err(ConfigError::Bootstrap);
        }
        if !(self.duty_cap > 0.0 && self.duty_cap <= 1.0) {
            return Err(ConfigError::DutyCap(self.duty_cap));
        }
        if !(self.ridge.is_finite() && self.ridge >= 0.0) {
            return Err(ConfigError::Ridge(self.ridge));
        }
        Ok(SignTest::new(self.alpha, self.beta, self.window_cap)?)
    }

    /// ξ = (n_avg − 1)/n_avg.
    pub fn xi(&self) -> f64 {
        (self.n_avg - 1.0) / self.n_avg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_specs() {
        let c = PoliteConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(c.period, Duration::from_millis(200));
        assert_eq!(c.hung, Duration::from_secs(10));
        assert_eq!(
            PoliteConfig::with_period(Duration::from_millis(500)).hung,
            Duration::from_secs(25)
        );
        assert!((c.xi() - 0.9999).abs() < 1e-12);
    }

    #[test]
    fn bad_values_are_named() {
        let c = PoliteConfig {
            period: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "testpoint period must be greater than zero"
        );
        let c = PoliteConfig {
            max_suspension: Duration::from_millis(10),
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::SuspensionOrder { .. })
        ));
        let c = PoliteConfig {
            duty_cap: 0.0,
            ..Default::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::DutyCap(v)) if v == 0.0));
        let c = PoliteConfig {
            alpha: 0.5,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("alpha"));
    }
}
