//! Gradient2, as Netflix concurrency-limits' `Gradient2Limit`: compare the current RTT with a
//! long exponential average of it; shrink by their ratio when the current one is higher, and
//! otherwise grow by a fixed queue allowance, smoothed (spec §5).
//!
//! Reproduced from Netflix's code: the short RTT is the last sample (Netflix's
//! `SingleMeasurement`; a `WindowedLimit` decorator is not applied), the long RTT is an
//! exponential average with factor 2/(window + 1) after a plain mean of the first 10 samples, and
//! it is cut by 10% whenever it exceeds twice the short RTT (recovery after a long overload).
//! A pool using less than half its limit ("app-limited") never moves it.

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::{check_range, timed_completion, BaselineError, Bounds};

/// Samples averaged plainly before the long RTT turns exponential (Netflix's warm-up window).
const WARMUP: u32 = 10;

#[derive(Debug, Clone, PartialEq)]
pub struct Gradient2Params {
    /// Weight of the new estimate, in (0, 1] (Netflix: 0.2).
    pub smoothing: f64,
    /// Growth allowed while RTTs stay flat (Netflix: 4).
    pub queue_size: usize,
    /// Samples of the long RTT's exponential average (Netflix: 600).
    pub long_window: u32,
}

impl Default for Gradient2Params {
    fn default() -> Self {
        Gradient2Params {
            smoothing: 0.2,
            queue_size: 4,
            long_window: 600,
        }
    }
}

/// Netflix's `ExpAvgMeasurement`.
#[derive(Debug, Clone)]
struct ExpAvg {
    factor: f64,
    count: u32,
    sum: f64,
    value: f64,
}

impl ExpAvg {
    fn new(window: u32) -> Self {
        ExpAvg {
            factor: 2.0 / (window as f64 + 1.0),
            count: 0,
            sum: 0.0,
            value: 0.0,
        }
    }

    fn add(&mut self, x: f64) -> f64 {
        if self.count < WARMUP {
            self.count += 1;
            self.sum += x;
            self.value = self.sum / self.count as f64;
        } else {
            self.value = self.value * (1.0 - self.factor) + x * self.factor;
        }
        self.value
    }
}

/// Gradient limiter on long-term versus current RTT.
#[derive(Debug, Clone)]
pub struct Gradient2 {
    smoothing: f64,
    queue_size: f64,
    bounds: Bounds,
    estimate: f64,
    long_rtt: ExpAvg,
}

impl Gradient2 {
    pub fn new(params: Gradient2Params, bounds: Bounds) -> Result<Self, BaselineError> {
        check_range(
            "smoothing",
            params.smoothing,
            f64::MIN_POSITIVE,
            1.0,
            "the smoothing must be in (0, 1]",
        )?;
        check_range(
            "long_window",
            params.long_window as f64,
            1.0,
            f64::MAX,
            "the long window must hold at least one sample",
        )?;
        Ok(Gradient2 {
            smoothing: params.smoothing,
            queue_size: params.queue_size as f64,
            bounds,
            estimate: bounds.n_init() as f64,
            long_rtt: ExpAvg::new(params.long_window),
        })
    }

    /// The long-term RTT (zero before the first sample).
    pub fn long_rtt(&self) -> Duration {
        Duration::from_secs_f64(self.long_rtt.value)
    }

    /// The fractional limit behind [`Policy::target`].
    pub fn estimate(&self) -> f64 {
        self.estimate
    }
}

impl Policy for Gradient2 {
    fn target(&self) -> usize {
        self.bounds.count(self.estimate)
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let (_, load, rtt) = timed_completion(event)?;
        if rtt.is_zero() {
            // A zero latency gives no ratio (Netflix's RTTs are positive nanoseconds).
            return None;
        }
        let short = rtt.as_secs_f64();
        let long = self.long_rtt.add(short);
        if long / short > 2.0 {
            self.long_rtt.value *= 0.9;
        }
        if (load.in_flight as f64) < self.estimate / 2.0 {
            return None;
        }
        let before = self.target();
        // Netflix uses the long RTT from before the cut above.
        let gradient = (long / short).clamp(0.5, 1.0);
        let next = self.estimate * gradient + self.queue_size;
        let next = self.estimate * (1.0 - self.smoothing) + next * self.smoothing;
        self.estimate = self.bounds.clamp_f64(next);
        let after = self.target();
        (after != before).then_some(after)
    }
}
