//! Background jobs: what progress a job reports for a given amount of work.

use std::time::Duration;

use serde::Serialize;

use crate::rng::SimRng;

/// A background job as the regulator sees it: a metric-set index and progress increments.
pub trait Job {
    /// Metric-set index of the next testpoint.
    fn index(&self) -> u32;
    /// Progress for `work` seconds of uncontended-equivalent running ending at `at`, before noise.
    fn progress(&mut self, at: Duration, work: f64, out: &mut Vec<f64>);
    /// Progress of one "unit of work", used to express the calibrated target as a duration per
    /// unit (the paper's Figure 10 plots a target duration, not a rate).
    fn unit(&self) -> Vec<f64>;
}

/// One progress metric at a fixed uncontended rate, optionally changing at given times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SingleMetric {
    /// Units of progress per second of uncontended running.
    pub rate: f64,
    /// (from, multiplier) steps, sorted by time: the rate is `rate × multiplier` from `from` on.
    pub schedule: Vec<(Duration, f64)>,
}

impl SingleMetric {
    pub fn new(rate: f64) -> Self {
        SingleMetric {
            rate,
            schedule: Vec::new(),
        }
    }

    /// A job whose unit of work takes `d` uncontended: its ideal target duration is `d`.
    pub fn with_unit_duration(d: Duration) -> Self {
        SingleMetric::new(1.0 / d.as_secs_f64())
    }

    pub fn rate_at(&self, at: Duration) -> f64 {
        let m = self
            .schedule
            .iter()
            .take_while(|(from, _)| *from <= at)
            .last()
            .map_or(1.0, |(_, m)| *m);
        self.rate * m
    }
}

impl Job for SingleMetric {
    fn index(&self) -> u32 {
        0
    }

    fn progress(&mut self, at: Duration, work: f64, out: &mut Vec<f64>) {
        out.clear();
        out.push(self.rate_at(at) * work);
    }

    fn unit(&self) -> Vec<f64> {
        vec![1.0]
    }
}

/// Several metrics whose per-unit costs add (§4.4, "concurrent" progress): each testpoint the job
/// spends a random share of its time on each kind of work, so the metrics vary independently and
/// the regression can separate them.
#[derive(Debug, Clone)]
pub struct Concurrent {
    /// Uncontended rate of each metric when the job does only that kind of work.
    pub rates: Vec<f64>,
    /// Each share is drawn uniform in [1 − spread, 1 + spread] before normalising (0 ≤ spread < 1).
    pub spread: f64,
    rng: SimRng,
}

impl Concurrent {
    pub fn new(rates: Vec<f64>, spread: f64, seed: u64) -> Self {
        Concurrent {
            rates,
            spread,
            rng: SimRng::stream(seed, 3),
        }
    }

    /// The paper's example: 750 kB/s scanned and 120 index operations/s.
    pub fn paper_example(seed: u64) -> Self {
        Concurrent::new(vec![750_000.0, 120.0], 0.8, seed)
    }
}

impl Job for Concurrent {
    fn index(&self) -> u32 {
        0
    }

    fn progress(&mut self, _at: Duration, work: f64, out: &mut Vec<f64>) {
        let (lo, hi) = (1.0 - self.spread, 1.0 + self.spread);
        let shares: Vec<f64> = self
            .rates
            .iter()
            .map(|_| self.rng.between(lo, hi))
            .collect();
        let total: f64 = shares.iter().sum();
        out.clear();
        out.extend(
            self.rates
                .iter()
                .zip(&shares)
                .map(|(r, s)| r * work * s / total),
        );
    }

    /// One second of work split evenly: its ideal target duration is 1 s.
    fn unit(&self) -> Vec<f64> {
        let k = self.rates.len() as f64;
        self.rates.iter().map(|r| r / k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_progress_costs_exactly_the_work_time() {
        let mut job = Concurrent::paper_example(1);
        let mut dp = Vec::new();
        for _ in 0..100 {
            job.progress(Duration::ZERO, 0.2, &mut dp);
            let cost: f64 = dp.iter().zip(&job.rates).map(|(p, r)| p / r).sum();
            assert!((cost - 0.2).abs() < 1e-12);
        }
    }

    #[test]
    fn a_schedule_changes_the_rate_from_its_time_on() {
        let job = SingleMetric {
            rate: 10.0,
            schedule: vec![(Duration::from_secs(5), 2.0)],
        };
        assert_eq!(job.rate_at(Duration::from_secs(4)), 10.0);
        assert_eq!(job.rate_at(Duration::from_secs(5)), 20.0);
    }
}
