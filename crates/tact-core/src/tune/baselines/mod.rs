//! The concurrency limiters people use today, as pure [`Policy`](super::Policy) implementations,
//! so that benchmarks can run them side by side with TCC (spec `concurrency.md` §5, "Modern
//! baselines").
//!
//! - [`Fixed`]: a static pool.
//! - [`Aimd`]: Netflix concurrency-limits `AIMDLimit` (additive increase, multiplicative decrease
//!   on a late completion).
//! - [`Vegas`]: Netflix `VegasLimit` (queue estimate from the no-load RTT).
//! - [`VegasPlus`]: the paper's Vegas+ and Vegas++ (§4.8, spec X7): TCP Vegas's D = N − X·B on
//!   measured throughput, B from the least latency (Vegas+) or an offline single-worker
//!   throughput (Vegas++).
//! - [`Gradient2`]: Netflix `Gradient2Limit` (long-term versus current RTT).
//! - [`Envoy`]: Envoy's adaptive-concurrency gradient controller (min-RTT windows at a pinned
//!   concurrency, p50 sample windows).
//! - [`HillClimbing`]: .NET's thread-pool hill climbing (a square wave on the count, its slope
//!   read from throughput by a Fourier filter).
//!
//! Every limiter takes its parameters (a struct whose `Default` is the published default) and
//! [`Bounds`], keeps its target within them and never at 0, and learns time only from
//! [`Event::at`](super::Event::at) and latency only from `Event::Complete { latency: Some(..) }`:
//! the latency-based ones ignore completions without one. Randomness (probe jitter) comes from a
//! seed in the parameters. A limiter that would "reject" work leaves it queued instead: the host
//! applies a target at task boundaries, so a shrink takes effect as tasks finish.

mod aimd;
mod envoy;
mod fixed;
mod gradient2;
mod hill;
mod seeded;
mod vegas;
mod vegas_plus;

use std::time::Duration;

use thiserror::Error;

use super::policy::{Event, Load};

pub use aimd::{Aimd, AimdParams, AimdTimeout};
pub use envoy::{Envoy, EnvoyParams};
pub use fixed::Fixed;
pub use gradient2::{Gradient2, Gradient2Params};
pub use hill::{HillClimbing, HillClimbingParams};
pub use vegas::{Vegas, VegasParams};
pub use vegas_plus::{VegasBaseline, VegasPlus, VegasPlusParams};

/// A baseline's parameters or bounds are out of range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BaselineError {
    #[error("n_min = {n_min}, n_max = {n_max}: the bounds need 1 <= n_min <= n_max")]
    Bounds { n_min: usize, n_max: usize },
    #[error("{field} = {value}: {why}")]
    Range {
        field: &'static str,
        value: f64,
        why: &'static str,
    },
}

/// The range a limiter's target stays in, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    n_init: usize,
    n_min: usize,
    n_max: usize,
}

impl Bounds {
    /// Checks 1 <= n_min <= n_max; `n_init` is clamped into the range (hosts pass the number of
    /// CPUs, which may exceed a small n_max).
    pub fn new(n_init: usize, n_min: usize, n_max: usize) -> Result<Self, BaselineError> {
        if n_min == 0 || n_min > n_max {
            return Err(BaselineError::Bounds { n_min, n_max });
        }
        Ok(Bounds {
            n_init: n_init.clamp(n_min, n_max),
            n_min,
            n_max,
        })
    }

    pub fn n_init(&self) -> usize {
        self.n_init
    }

    pub fn n_min(&self) -> usize {
        self.n_min
    }

    pub fn n_max(&self) -> usize {
        self.n_max
    }

    pub fn clamp(&self, n: usize) -> usize {
        n.clamp(self.n_min, self.n_max)
    }

    /// A fractional limit (as the Netflix limiters keep it) clamped to the bounds, as a float.
    fn clamp_f64(&self, x: f64) -> f64 {
        x.clamp(self.n_min as f64, self.n_max as f64)
    }

    /// The worker count of a fractional limit: its integer part (Java's `(int)` cast), bounded.
    fn count(&self, x: f64) -> usize {
        self.clamp(x as usize)
    }
}

/// A completion that carries a latency: (its time, the pool's load, the latency). Everything else
/// is invisible to the latency-based limiters.
fn timed_completion(event: Event) -> Option<(Duration, Load, Duration)> {
    match event {
        Event::Complete {
            at,
            load,
            latency: Some(latency),
        } => Some((at, load, latency)),
        _ => None,
    }
}

/// Checks that `value` is finite and within [lo, hi].
fn check_range(
    field: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
    why: &'static str,
) -> Result<(), BaselineError> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(BaselineError::Range { field, value, why })
    }
}
