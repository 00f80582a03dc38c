//! Vegas, as Netflix concurrency-limits' `VegasLimit`: estimate the queue the limit builds from
//! the ratio of the no-load RTT to the current one, grow while it is small, shrink when it is
//! large (spec §5).
//!
//! Reproduced from Netflix's code, including what its summary leaves out: the first sample and
//! any lower RTT reset RTT_noload without a decision; a queue at or below `threshold` grows by
//! `beta` at once; a pool using less than half its limit never moves it; alpha, beta, threshold
//! and the steps are integers, `max(1, ⌊log10(limit)⌋)` of the integer limit; the probe resets
//! RTT_noload to the current sample every jitter·30·limit samples, jitter uniform in [0.5, 1)
//! (seeded here, `ThreadLocalRandom` there). Netflix's drop branch has no counterpart: a pool
//! never drops work.

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::seeded::SplitMix;
use super::{check_range, timed_completion, BaselineError, Bounds};

#[derive(Debug, Clone, PartialEq)]
pub struct VegasParams {
    /// Weight of the new estimate, in (0, 1] (Netflix: 1.0, no smoothing).
    pub smoothing: f64,
    /// RTT_noload is re-probed every probe_multiplier × limit samples, times jitter (Netflix: 30).
    pub probe_multiplier: u32,
    /// Seed of the probe jitter.
    pub seed: u64,
}

impl Default for VegasParams {
    fn default() -> Self {
        VegasParams {
            smoothing: 1.0,
            probe_multiplier: 30,
            seed: 0,
        }
    }
}

/// Netflix's `Log10RootFunction`: max(1, ⌊log10(n)⌋).
fn log10_step(n: usize) -> usize {
    if n == 0 {
        1
    } else {
        (n.ilog10() as usize).max(1)
    }
}

/// Delay-based limiter after TCP Vegas.
#[derive(Debug, Clone)]
pub struct Vegas {
    smoothing: f64,
    probe_multiplier: f64,
    bounds: Bounds,
    /// The estimated limit, fractional when smoothing is below 1.
    estimate: f64,
    rtt_noload: Option<Duration>,
    probe_count: u64,
    probe_jitter: f64,
    rng: SplitMix,
}

impl Vegas {
    pub fn new(params: VegasParams, bounds: Bounds) -> Result<Self, BaselineError> {
        check_range(
            "smoothing",
            params.smoothing,
            f64::MIN_POSITIVE,
            1.0,
            "the smoothing must be in (0, 1]",
        )?;
        check_range(
            "probe_multiplier",
            params.probe_multiplier as f64,
            1.0,
            f64::MAX,
            "the probe multiplier must be at least 1",
        )?;
        let mut rng = SplitMix::new(params.seed);
        let probe_jitter = rng.between(0.5, 1.0);
        Ok(Vegas {
            smoothing: params.smoothing,
            probe_multiplier: params.probe_multiplier as f64,
            bounds,
            estimate: bounds.n_init() as f64,
            rtt_noload: None,
            probe_count: 0,
            probe_jitter,
            rng,
        })
    }

    /// The RTT the limiter takes for an empty queue.
    pub fn rtt_noload(&self) -> Option<Duration> {
        self.rtt_noload
    }

    /// The queue the current limit builds at `rtt`: ⌈limit·(1 − RTT_noload/RTT)⌉.
    fn queue(&self, rtt_noload: Duration, rtt: Duration) -> i64 {
        let ratio = rtt_noload.as_secs_f64() / rtt.as_secs_f64();
        (self.estimate * (1.0 - ratio)).ceil() as i64
    }

    fn update(&mut self, in_flight: usize, rtt_noload: Duration, rtt: Duration) {
        // Netflix: "prevent upward drift if not close to the limit".
        if ((in_flight * 2) as f64) < self.estimate {
            return;
        }
        let queue = self.queue(rtt_noload, rtt);
        let step = log10_step(self.estimate as usize);
        let (alpha, beta, threshold) = (3 * step, 6 * step, step);
        let next = if queue <= threshold as i64 {
            // No queueing: grow fast.
            self.estimate + beta as f64
        } else if queue < alpha as i64 {
            self.estimate + step as f64
        } else if queue > beta as i64 {
            self.estimate - step as f64
        } else {
            return;
        };
        let next = self.bounds.clamp_f64(next);
        self.estimate = (1.0 - self.smoothing) * self.estimate + self.smoothing * next;
    }
}

impl Policy for Vegas {
    fn target(&self) -> usize {
        self.bounds.count(self.estimate)
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let (_, load, rtt) = timed_completion(event)?;
        if rtt.is_zero() {
            // Netflix rejects rtt <= 0; a zero latency says nothing about queueing.
            return None;
        }
        let before = self.target();
        self.probe_count += 1;
        if self.probe_jitter * self.probe_multiplier * self.estimate <= self.probe_count as f64 {
            self.probe_jitter = self.rng.between(0.5, 1.0);
            self.probe_count = 0;
            self.rtt_noload = Some(rtt);
            return None;
        }
        match self.rtt_noload {
            Some(noload) if rtt >= noload => self.update(load.in_flight, noload, rtt),
            _ => self.rtt_noload = Some(rtt),
        }
        let after = self.target();
        (after != before).then_some(after)
    }
}
