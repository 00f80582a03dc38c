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
    /// Peek interval (spec section 7, "less overshoot"): a regulated suspension longer than this
    /// is served in pieces of this length, each followed by a one-testpoint peek; a peek that
    /// passes ends the suspension early. `None` serves suspensions whole, as the paper did.
    pub peek_every: Option<Duration>,
    /// A peek passes when its rate is at least this fraction of the target (d ≤ D*/pass).
    /// A single sample at target is below it half the time, so a pass level of 1 would need two
    /// peeks on average to notice that contention ended.
    pub peek_pass: f64,
    /// Stall fraction of the machine's other work (PSI `some`, seen while the unit is stopped) at
    /// or above which the foreground counts as busy: scheduled peeks are skipped (spec 5.5's θ).
    pub pressure_busy: f64,
    /// Stall fraction below which the machine counts as calm again.
    pub pressure_calm: f64,
    /// How long pressure must stay calm, after being busy during a suspension, before the unit
    /// peeks early (spec section 7, "early wake when foreground PSI drops").
    pub calm_for: Duration,
    /// Weight in the target of a peek that is slow although the machine has calmed down after
    /// being busy (0 turns this off). Such a peek says the job is slower on its own than its
    /// target, not that anyone contends with it: the target moves this far towards the peek's
    /// rate and the suspension ends (spec section 7, "weight samples by system quietness").
    pub calm_weight: f64,
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
            peek_every: Some(peek_interval(period)),
            peek_pass: 0.8,
            pressure_busy: 0.10,
            pressure_calm: 0.05,
            calm_for: Duration::from_secs(1),
            calm_weight: 0.25,
        }
    }
}

/// Default peek interval: 100 testpoint periods. A peek costs one period of running under what
/// may still be contention; in the simulator's cyclic load, peeks every 25 periods raise the
/// interference share from 5.0% to 8.6%, every 100 to 5.8% (spec section 7 allows 6%), while
/// the median overshoot past the end of contention falls from 13 s to 7 s. Where PSI shows the
/// contention, pressure skips the peeks and ends the suspension early instead.
pub fn peek_interval(period: Duration) -> Duration {
    period * 100
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
    #[error("peek pass level must be in (0, 1], got {0}")]
    PeekPass(f64),
    #[error("calm weight must be in [0, 1), got {0}")]
    CalmWeight(f64),
    #[error("pressure levels must satisfy 0 <= calm ({calm}) <= busy ({busy}) <= 1")]
    Pressure { calm: f64, busy: f64 },
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
            peek_every: Some(peek_interval(period)),
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
            ("peek interval", self.peek_every.unwrap_or(Duration::MAX)),
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
        if !(self.peek_pass > 0.0 && self.peek_pass <= 1.0) {
            return Err(ConfigError::PeekPass(self.peek_pass));
        }
        if !(0.0..1.0).contains(&self.calm_weight) {
            return Err(ConfigError::CalmWeight(self.calm_weight));
        }
        if !(0.0 <= self.pressure_calm
            && self.pressure_calm <= self.pressure_busy
            && self.pressure_busy <= 1.0)
        {
            return Err(ConfigError::Pressure {
                calm: self.pressure_calm,
                busy: self.pressure_busy,
            });
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
