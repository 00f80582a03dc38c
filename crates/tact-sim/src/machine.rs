//! The simulated machine: one shared resource split between the foreground and a background job.
//!
//! This is the seam later engines plug into. The polite driver asks "the background ran over
//! [t0, t1): how much work did it get done, and how much of that time was the foreground busy?";
//! the idle or share engines will ask the same question with other actions. CPU cores, a
//! non-preemptive disk and a network link (DESIGN.md) would replace [`Contention`] with a
//! per-resource model behind the same call.

use std::time::Duration;

use serde::Serialize;

use crate::load::{Foreground, LoadPattern};

/// How much the two sides slow each other while both run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Contention {
    /// The background's rate when contended is its uncontended rate divided by this (≥ 1).
    pub background_factor: f64,
    /// The foreground's throughput while the background runs is divided by this (≥ 1).
    pub foreground_factor: f64,
}

impl Contention {
    /// Both sides slowed by the same factor: the symmetry progress-based regulation assumes.
    pub fn symmetric(factor: f64) -> Self {
        Contention {
            background_factor: factor,
            foreground_factor: factor,
        }
    }

    /// The resource is not shared: neither side notices the other.
    pub fn none() -> Self {
        Contention::symmetric(1.0)
    }
}

/// What the background got out of running over one interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice {
    pub start: Duration,
    pub end: Duration,
    /// Foreground busy time within the interval.
    pub foreground_busy: Duration,
    /// Work done, in seconds of uncontended running (so an uncontended slice does `end − start`).
    pub work: f64,
}

#[derive(Debug, Clone)]
pub struct Machine {
    pub foreground: Foreground,
    pub contention: Contention,
}

impl Machine {
    pub fn new(load: LoadPattern, contention: Contention) -> Self {
        Machine {
            foreground: Foreground::new(load),
            contention,
        }
    }

    /// The background runs over [t0, t1): full speed while the foreground is idle, slowed by the
    /// contention factor while it is busy.
    pub fn run_background(&mut self, t0: Duration, t1: Duration) -> Slice {
        let busy = self.foreground.busy_time(t0, t1);
        let idle = (t1 - t0) - busy;
        let work = idle.as_secs_f64() + busy.as_secs_f64() / self.contention.background_factor;
        Slice {
            start: t0,
            end: t1,
            foreground_busy: busy,
            work,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contended_time_counts_at_the_reduced_rate() {
        let load = LoadPattern::Periodic {
            offset: Duration::from_secs(1),
            busy: Duration::from_secs(2),
            idle: Duration::from_secs(10),
        };
        let mut m = Machine::new(load, Contention::symmetric(4.0));
        let s = m.run_background(Duration::ZERO, Duration::from_secs(4));
        assert_eq!(s.foreground_busy, Duration::from_secs(2));
        assert!((s.work - (2.0 + 0.5)).abs() < 1e-12);
    }
}
