//! AIMD, as Netflix concurrency-limits' `AIMDLimit`: +1 on a completion that was not late while
//! the pool uses at least half its limit, ×backoff on a late one (spec §5).

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::{check_range, timed_completion, BaselineError, Bounds};

/// When a completion counts as late (Netflix treats it as a drop).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AimdTimeout {
    /// Latency above this is late (Netflix's `timeout`, default 5 s).
    Fixed(Duration),
    /// The spec's rule, "2× the median single-worker latency", learned online: the limiter holds
    /// its initial count (1 for a single-worker measurement) for the first `completions` timed
    /// completions, then fixes the timeout at `factor` × their median.
    Learned { completions: usize, factor: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AimdParams {
    /// Multiplicative decrease on a late completion, in [0.5, 1) (Netflix: 0.9).
    pub backoff_ratio: f64,
    pub timeout: AimdTimeout,
}

impl Default for AimdParams {
    /// Netflix's defaults: backoff 0.9, timeout 5 s.
    fn default() -> Self {
        AimdParams {
            backoff_ratio: 0.9,
            timeout: AimdTimeout::Fixed(Duration::from_secs(5)),
        }
    }
}

impl AimdParams {
    /// The spec's baseline: backoff 0.9, timeout 2× the median latency of the first 50
    /// completions (run them at n_init = 1 to get the single-worker latency).
    pub fn spec() -> Self {
        AimdParams {
            timeout: AimdTimeout::Learned {
                completions: 50,
                factor: 2.0,
            },
            ..AimdParams::default()
        }
    }

    fn validate(&self) -> Result<(), BaselineError> {
        check_range(
            "backoff_ratio",
            self.backoff_ratio,
            0.5,
            1.0 - f64::EPSILON,
            "the backoff ratio must be in [0.5, 1)",
        )?;
        match self.timeout {
            AimdTimeout::Fixed(d) if d.is_zero() => Err(BaselineError::Range {
                field: "timeout",
                value: 0.0,
                why: "the timeout must be positive",
            }),
            AimdTimeout::Learned { completions: 0, .. } => Err(BaselineError::Range {
                field: "completions",
                value: 0.0,
                why: "learning the timeout needs at least one completion",
            }),
            AimdTimeout::Learned { factor, .. } => check_range(
                "factor",
                factor,
                1.0,
                f64::MAX,
                "the timeout factor must be at least 1",
            ),
            AimdTimeout::Fixed(_) => Ok(()),
        }
    }
}

/// Additive-increase, multiplicative-decrease limiter.
#[derive(Debug, Clone)]
pub struct Aimd {
    backoff_ratio: f64,
    bounds: Bounds,
    limit: usize,
    /// `None` while the timeout is still being learned.
    timeout: Option<Duration>,
    learning: Vec<Duration>,
    learn_until: usize,
    learn_factor: f64,
}

impl Aimd {
    pub fn new(params: AimdParams, bounds: Bounds) -> Result<Self, BaselineError> {
        params.validate()?;
        let (timeout, learn_until, learn_factor) = match params.timeout {
            AimdTimeout::Fixed(d) => (Some(d), 0, 1.0),
            AimdTimeout::Learned {
                completions,
                factor,
            } => (None, completions, factor),
        };
        Ok(Aimd {
            backoff_ratio: params.backoff_ratio,
            bounds,
            limit: bounds.n_init(),
            timeout,
            learning: Vec::new(),
            learn_until,
            learn_factor,
        })
    }

    /// The latency above which a completion is late, once known.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl Policy for Aimd {
    fn target(&self) -> usize {
        self.limit
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let (_, load, latency) = timed_completion(event)?;
        let Some(timeout) = self.timeout else {
            // Growing now would measure the median above the initial count; hold still.
            self.learning.push(latency);
            if self.learning.len() >= self.learn_until {
                self.learning.sort_unstable();
                let median = self.learning[(self.learning.len() - 1) / 2];
                self.timeout = Some(median.mul_f64(self.learn_factor));
                self.learning = Vec::new();
            }
            return None;
        };
        let before = self.limit;
        let next = if latency > timeout {
            // Java's `(int)(limit * backoff)`: below 10 this is limit − 1.
            (self.limit as f64 * self.backoff_ratio) as usize
        } else if load.in_flight * 2 >= self.limit {
            self.limit + 1
        } else {
            self.limit
        };
        self.limit = self.bounds.clamp(next);
        (self.limit != before).then_some(self.limit)
    }
}
