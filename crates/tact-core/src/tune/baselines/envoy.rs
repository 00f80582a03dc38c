//! Envoy's adaptive-concurrency gradient controller (spec §5): every sample interval the limit
//! moves by gradient = (minRTT·(1 + buffer))/sampleRTT, clamped to [0.5, 2], plus √ of the
//! result as burst headroom; minRTT is re-measured periodically by pinning the limit to a small
//! concurrency until enough requests completed.
//!
//! Reproduced from Envoy's `gradient_controller.cc`, with its timers replaced by deadlines that
//! fire at the first event at or after them (hosts send ticks while completions are rare):
//! - The controller starts in a minRTT window; the limit it returns to afterwards is n_init.
//! - A minRTT window pins the limit to `min_concurrency`, throws away earlier samples, ignores
//!   completions of tasks started before it (start = `at − latency`), and ends at the
//!   `request_count`-th sample: minRTT = their percentile, the limit returns to its value before
//!   the window, the next window is due after `min_rtt_interval` plus a jitter uniform in
//!   [0, `jitter`) of it (Envoy adds, it does not spread ±), and the sample timer restarts.
//! - A sample interval ending inside a minRTT window is dropped; one without samples changes
//!   nothing. Otherwise sampleRTT = the percentile of its samples, and the new limit is
//!   ⌊l + √l⌋ with l = limit·gradient (Envoy's headroom is √ of the scaled limit), floored at
//!   `min_concurrency`.
//! - Five sample windows in a row that set the limit to `min_concurrency` start a minRTT window
//!   at once (Envoy's guard against a stale minRTT).
//!
//! Envoy's histogram percentile is approximate; here it is the nearest-rank percentile.

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::seeded::SplitMix;
use super::{check_range, BaselineError, Bounds};

/// Consecutive sample windows at `min_concurrency` that force a new minRTT window.
const STALE_MIN_RTT_WINDOWS: u32 = 5;

#[derive(Debug, Clone, PartialEq)]
pub struct EnvoyParams {
    /// Sample interval (`concurrency_update_interval`; Envoy requires one, 100 ms is usual).
    pub sample_interval: Duration,
    /// Percentile of a window's latencies that stands for it, in (0, 1] (Envoy: 50%).
    pub percentile: f64,
    /// Time between minRTT windows (Envoy: 60 s).
    pub min_rtt_interval: Duration,
    /// Completions a minRTT window collects (Envoy: 50).
    pub request_count: usize,
    /// Added random fraction of the interval, in [0, 1) (Envoy: 15%).
    pub jitter: f64,
    /// Concurrency during a minRTT window, and the limit's floor (Envoy: 3).
    pub min_concurrency: usize,
    /// Fraction of minRTT tolerated as queueing (Envoy: 25%).
    pub buffer: f64,
    /// Seed of the jitter.
    pub seed: u64,
}

impl Default for EnvoyParams {
    fn default() -> Self {
        EnvoyParams {
            sample_interval: Duration::from_millis(100),
            percentile: 0.5,
            min_rtt_interval: Duration::from_secs(60),
            request_count: 50,
            jitter: 0.15,
            min_concurrency: 3,
            buffer: 0.25,
            seed: 0,
        }
    }
}

impl EnvoyParams {
    fn validate(&self) -> Result<(), BaselineError> {
        let positive = |field, d: Duration| {
            if d.is_zero() {
                Err(BaselineError::Range {
                    field,
                    value: 0.0,
                    why: "the interval must be positive",
                })
            } else {
                Ok(())
            }
        };
        positive("sample_interval", self.sample_interval)?;
        positive("min_rtt_interval", self.min_rtt_interval)?;
        check_range(
            "percentile",
            self.percentile,
            f64::MIN_POSITIVE,
            1.0,
            "the percentile must be in (0, 1]",
        )?;
        check_range(
            "request_count",
            self.request_count as f64,
            1.0,
            f64::MAX,
            "a minRTT window needs at least one request",
        )?;
        check_range(
            "jitter",
            self.jitter,
            0.0,
            1.0 - f64::EPSILON,
            "the jitter must be in [0, 1)",
        )?;
        check_range(
            "min_concurrency",
            self.min_concurrency as f64,
            1.0,
            f64::MAX,
            "the minimum concurrency must be at least 1",
        )?;
        check_range(
            "buffer",
            self.buffer,
            0.0,
            f64::MAX,
            "the buffer must be non-negative",
        )
    }
}

/// Nearest-rank percentile of unsorted, non-empty samples.
fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let rank = (p * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// Envoy's gradient controller.
#[derive(Debug, Clone)]
pub struct Envoy {
    params: EnvoyParams,
    bounds: Bounds,
    /// `min_concurrency` within the bounds: the pinned count and the floor.
    floor: usize,
    limit: usize,
    /// The limit to return to, while a minRTT window runs (Envoy's `deferred_limit_value_`).
    deferred: Option<usize>,
    min_rtt: Duration,
    /// Start of the current (or last) minRTT window.
    epoch: Duration,
    samples: Vec<Duration>,
    /// Deadlines of Envoy's two timers; `None` while disarmed (the sample timer before the first
    /// event and during a minRTT window, the minRTT timer during one).
    next_sample: Option<Duration>,
    next_min_rtt: Option<Duration>,
    at_floor: u32,
    started: bool,
    rng: SplitMix,
}

impl Envoy {
    pub fn new(params: EnvoyParams, bounds: Bounds) -> Result<Self, BaselineError> {
        params.validate()?;
        let floor = bounds.clamp(params.min_concurrency);
        Ok(Envoy {
            rng: SplitMix::new(params.seed),
            params,
            bounds,
            floor,
            limit: floor,
            deferred: Some(bounds.n_init()),
            min_rtt: Duration::ZERO,
            epoch: Duration::ZERO,
            samples: Vec::new(),
            next_sample: None,
            next_min_rtt: None,
            at_floor: 0,
            started: false,
        })
    }

    /// Whether a minRTT window is running (the target is pinned).
    pub fn measuring_min_rtt(&self) -> bool {
        self.deferred.is_some()
    }

    /// The last measured minRTT (zero before the first window ends).
    pub fn min_rtt(&self) -> Duration {
        self.min_rtt
    }

    fn set_limit(&mut self, limit: usize) {
        let old = self.limit;
        self.limit = self.bounds.clamp(limit);
        if self.deferred.is_none() && old == self.floor && self.limit == self.floor {
            self.at_floor += 1;
        } else {
            self.at_floor = 0;
        }
        if self.at_floor >= STALE_MIN_RTT_WINDOWS {
            // Envoy arms the minRTT timer at 0 ms: due at once.
            self.at_floor = 0;
            self.next_min_rtt = Some(Duration::ZERO);
        }
    }

    fn enter_min_rtt_window(&mut self, now: Duration) {
        if self.deferred.is_some() {
            return;
        }
        self.deferred = Some(self.limit);
        self.set_limit(self.floor);
        self.samples.clear();
        self.epoch = now;
    }

    fn end_min_rtt_window(&mut self, now: Duration) {
        self.min_rtt = percentile(&mut self.samples, self.params.percentile);
        self.samples.clear();
        let back = self.deferred.unwrap_or(self.limit);
        self.set_limit(back);
        self.deferred = None;
        let jitter = self
            .params
            .min_rtt_interval
            .mul_f64(self.rng.uniform() * self.params.jitter);
        self.next_min_rtt = Some(now + self.params.min_rtt_interval + jitter);
        self.next_sample = Some(now + self.params.sample_interval);
    }

    fn end_sample_window(&mut self, now: Duration) {
        if self.deferred.is_some() {
            // Re-armed when the minRTT window ends.
            self.next_sample = None;
            return;
        }
        self.next_sample = Some(now + self.params.sample_interval);
        if self.samples.is_empty() {
            return;
        }
        let sample_rtt = percentile(&mut self.samples, self.params.percentile);
        self.samples.clear();
        let buffered = self.min_rtt.as_secs_f64() * (1.0 + self.params.buffer);
        let gradient = (buffered / sample_rtt.as_secs_f64().max(f64::MIN_POSITIVE)).clamp(0.5, 2.0);
        let scaled = self.limit as f64 * gradient;
        let next = (scaled + scaled.sqrt()) as usize;
        self.set_limit(next.max(self.floor));
    }

    /// Fires the timers due at `now`, earliest first.
    fn fire_timers(&mut self, now: Duration) {
        loop {
            let sample_due = self.next_sample.filter(|&t| t <= now);
            let min_rtt_due = self.next_min_rtt.filter(|&t| t <= now);
            match (sample_due, min_rtt_due) {
                (Some(s), Some(m)) if s < m => self.end_sample_window(now),
                (_, Some(_)) => {
                    self.next_min_rtt = None;
                    self.enter_min_rtt_window(now);
                }
                (Some(_), None) => self.end_sample_window(now),
                (None, None) => return,
            }
        }
    }
}

impl Policy for Envoy {
    fn target(&self) -> usize {
        self.limit
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let before = self.limit;
        let now = event.at();
        if !self.started {
            self.started = true;
            self.next_sample = Some(now + self.params.sample_interval);
        }
        self.fire_timers(now);
        if let Event::Complete {
            latency: Some(latency),
            ..
        } = event
        {
            // Envoy disregards requests sent before the current minRTT window began.
            if now.saturating_sub(latency) >= self.epoch {
                self.samples.push(latency);
                if self.deferred.is_some() && self.samples.len() >= self.params.request_count {
                    self.end_min_rtt_window(now);
                }
            }
        }
        (self.limit != before).then_some(self.limit)
    }
}
