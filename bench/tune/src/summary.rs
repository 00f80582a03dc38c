//! What a driver run reports: throughput, latency and worker-count statistics over the measured
//! window, and the same over TCC's Steady periods within it. Pure functions over the records the
//! driver keeps, so that they can be tested without a service.

use serde::Serialize;
use tact_core::tune::{Phase, Transition};

/// One finished task: when it finished and how long it ran (seconds since the pool's start).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Completion {
    pub at: f64,
    pub latency: f64,
}

/// Cumulative counters read every sampling period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    pub at: f64,
    pub completions: u64,
    /// The service's process CPU time, s.
    pub service_cpu: f64,
    /// The driver's process CPU time, s.
    pub driver_cpu: f64,
    pub target: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
}

/// Time-weighted statistics of the worker count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Count {
    pub mean: f64,
    pub median: usize,
    pub min: usize,
    pub max: usize,
    pub stdev: f64,
}

/// Figures over a set of time intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    pub seconds: f64,
    pub completions: usize,
    /// Completions per second.
    pub throughput: f64,
    /// Service CPU time over wall time (1.0 = one core).
    pub service_util: Option<f64>,
    pub driver_util: Option<f64>,
    pub latency: Option<Latency>,
    pub count: Option<Count>,
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn latency_of(mut lat: Vec<f64>) -> Option<Latency> {
    if lat.is_empty() {
        return None;
    }
    lat.sort_by(f64::total_cmp);
    let ms = 1000.0;
    Some(Latency {
        mean_ms: lat.iter().sum::<f64>() / lat.len() as f64 * ms,
        p50_ms: percentile(&lat, 50.0) * ms,
        p90_ms: percentile(&lat, 90.0) * ms,
        p99_ms: percentile(&lat, 99.0) * ms,
    })
}

/// The worker count over time: `(time, target)` changes, the first at the pool's start.
#[derive(Debug, Clone, PartialEq)]
pub struct History(pub Vec<(f64, usize)>);

impl History {
    /// The target in force at `t`.
    pub fn at(&self, t: f64) -> usize {
        self.0
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .or(self.0.first())
            .map_or(0, |&(_, n)| n)
    }

    /// (count, seconds held) pieces within the intervals.
    fn pieces(&self, intervals: &[(f64, f64)]) -> Vec<(usize, f64)> {
        let mut out = Vec::new();
        for &(a, b) in intervals {
            let mut t = a;
            let mut n = self.at(a);
            for &(at, m) in self.0.iter().filter(|(at, _)| *at > a && *at < b) {
                out.push((n, at - t));
                t = at;
                n = m;
            }
            out.push((n, b - t));
        }
        out.retain(|&(_, d)| d > 0.0);
        out
    }

    pub fn count(&self, intervals: &[(f64, f64)]) -> Option<Count> {
        let mut pieces = self.pieces(intervals);
        let total: f64 = pieces.iter().map(|p| p.1).sum();
        if total <= 0.0 {
            return None;
        }
        let mean = pieces.iter().map(|&(n, d)| n as f64 * d).sum::<f64>() / total;
        let var = pieces
            .iter()
            .map(|&(n, d)| (n as f64 - mean).powi(2) * d)
            .sum::<f64>()
            / total;
        pieces.sort_by_key(|p| p.0);
        let mut acc = 0.0;
        let median = pieces
            .iter()
            .find(|p| {
                acc += p.1;
                acc >= total / 2.0
            })
            .map_or(0, |p| p.0);
        Some(Count {
            mean,
            median,
            min: pieces.first().map_or(0, |p| p.0),
            max: pieces.last().map_or(0, |p| p.0),
            stdev: var.sqrt(),
        })
    }
}

/// The intervals TCC spent in Steady, clipped to `[from, to]`, from its transitions.
pub fn steady_intervals(trace: &[Transition], from: f64, to: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut start = None;
    for tr in trace {
        let at = tr.at.as_secs_f64();
        if tr.to == Phase::Steady && tr.from != Phase::Steady && start.is_none() {
            start = Some(at);
        } else if tr.from == Phase::Steady && tr.to != Phase::Steady {
            if let Some(s) = start.take() {
                out.push((s, at));
            }
        }
    }
    if let Some(s) = start {
        out.push((s, to));
    }
    out.into_iter()
        .map(|(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| b > a)
        .collect()
}

/// When TCC first entered Steady, if it did.
pub fn first_steady(trace: &[Transition]) -> Option<f64> {
    trace
        .iter()
        .find(|t| t.to == Phase::Steady)
        .map(|t| t.at.as_secs_f64())
}

/// A cumulative counter at `t`, interpolated between the samples around it.
fn counter_at(samples: &[Sample], t: f64, f: impl Fn(&Sample) -> f64) -> Option<f64> {
    let i = samples.partition_point(|s| s.at < t);
    let (lo, hi) = match (i.checked_sub(1).map(|j| &samples[j]), samples.get(i)) {
        (Some(lo), Some(hi)) => (lo, hi),
        (None, Some(hi)) if hi.at == t => (hi, hi),
        _ => return None,
    };
    if hi.at <= lo.at {
        return Some(f(hi));
    }
    let w = (t - lo.at) / (hi.at - lo.at);
    Some(f(lo) + w * (f(hi) - f(lo)))
}

fn util(samples: &[Sample], intervals: &[(f64, f64)], f: impl Fn(&Sample) -> f64) -> Option<f64> {
    let mut used = 0.0;
    let mut wall = 0.0;
    for &(a, b) in intervals {
        used += counter_at(samples, b, &f)? - counter_at(samples, a, &f)?;
        wall += b - a;
    }
    (wall > 0.0).then(|| used / wall)
}

/// Figures over `intervals` (disjoint, sorted).
pub fn period(
    intervals: &[(f64, f64)],
    completions: &[Completion],
    samples: &[Sample],
    history: &History,
) -> Period {
    let inside = |t: f64| intervals.iter().any(|&(a, b)| t >= a && t < b);
    let lat: Vec<f64> = completions
        .iter()
        .filter(|c| inside(c.at))
        .map(|c| c.latency)
        .collect();
    let seconds: f64 = intervals.iter().map(|(a, b)| b - a).sum();
    Period {
        seconds,
        completions: lat.len(),
        throughput: if seconds > 0.0 {
            lat.len() as f64 / seconds
        } else {
            0.0
        },
        service_util: util(samples, intervals, |s| s.service_cpu),
        driver_util: util(samples, intervals, |s| s.driver_cpu),
        latency: latency_of(lat),
        count: history.count(intervals),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tact_core::tune::Reason;

    fn tr(at: f64, from: Phase, to: Phase) -> Transition {
        Transition {
            at: Duration::from_secs_f64(at),
            busy: Duration::ZERO,
            cycle: 0,
            from,
            to,
            reason: Reason::Kept,
            target_from: 1,
            target_to: 1,
            throughput: None,
            batches: 0,
            forced: false,
            hinted: false,
            psi: false,
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn counts_are_time_weighted() {
        // 2 workers for 1 s, 10 for 3 s, 4 for 1 s within [0, 5].
        let h = History(vec![(0.0, 2), (1.0, 10), (4.0, 4), (9.0, 1)]);
        let c = h.count(&[(0.0, 5.0)]).unwrap();
        assert!((c.mean - (2.0 + 30.0 + 4.0) / 5.0).abs() < 1e-12);
        assert_eq!((c.min, c.median, c.max), (2, 10, 10));
        // Only from 2 s to 3 s: all 10.
        let c = h.count(&[(2.0, 3.0)]).unwrap();
        assert_eq!((c.min, c.max, c.stdev), (10, 10, 0.0));
        assert_eq!(h.at(0.5), 2);
        assert_eq!(h.at(100.0), 1);
    }

    #[test]
    fn steady_intervals_follow_the_trace_and_clip() {
        let trace = [
            tr(10.0, Phase::Remove, Phase::Steady),
            tr(20.0, Phase::Steady, Phase::Base),
            tr(30.0, Phase::Remove, Phase::Steady),
        ];
        assert_eq!(
            steady_intervals(&trace, 15.0, 40.0),
            vec![(15.0, 20.0), (30.0, 40.0)]
        );
        assert_eq!(steady_intervals(&trace[..1], 0.0, 5.0), vec![]);
        assert_eq!(first_steady(&trace), Some(10.0));
        assert_eq!(first_steady(&[]), None);
    }

    #[test]
    fn period_counts_completions_and_interpolates_cpu() {
        let completions: Vec<Completion> = (0..100)
            .map(|i| Completion {
                at: i as f64 * 0.1,
                latency: 0.001 * (i % 10 + 1) as f64,
            })
            .collect();
        // The service burns 0.9 s of CPU per second, the driver 0.5.
        let samples: Vec<Sample> = (0..=20)
            .map(|i| Sample {
                at: i as f64 * 0.5,
                completions: 0,
                service_cpu: i as f64 * 0.45,
                driver_cpu: i as f64 * 0.25,
                target: 3,
            })
            .collect();
        let h = History(vec![(0.0, 3)]);
        let p = period(&[(2.0, 4.0), (5.0, 6.0)], &completions, &samples, &h);
        assert_eq!(p.completions, 30);
        assert!((p.throughput - 10.0).abs() < 1e-9);
        assert!((p.service_util.unwrap() - 0.9).abs() < 1e-9);
        assert!((p.driver_util.unwrap() - 0.5).abs() < 1e-9);
        let lat = p.latency.unwrap();
        assert!((lat.p99_ms - 10.0).abs() < 1e-9 && (lat.p50_ms - 5.0).abs() < 1e-9);
        assert_eq!(p.count.unwrap().mean, 3.0);
        // Past the last sample the utilization is unknown, not made up.
        assert_eq!(
            period(&[(9.0, 12.0)], &completions, &samples, &h).service_util,
            None
        );
    }
}
