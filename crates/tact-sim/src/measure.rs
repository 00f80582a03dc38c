//! The measures of spec section 7, accumulated as the simulation runs.
//!
//! Counters only ever add up, so the measures over any stretch of a run are the difference of two
//! snapshots ([`Mark`]); events (overshoots, reactions) carry their time and are filtered the same
//! way. Time-based measures use time, not progress: noise has mean 1, so background progress in
//! idle time is proportional to running time in idle time.

use std::ops::Sub;
use std::time::Duration;

use serde::Serialize;

/// Additive counters, all since the start of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub elapsed: Duration,
    /// Background running time, and the part of it during which the foreground was busy.
    pub bg_running: Duration,
    pub bg_running_contended: Duration,
    pub bg_suspended: Duration,
    pub fg_busy: Duration,
    /// Foreground work lost to the background, in seconds of foreground time.
    pub fg_lost: f64,
    /// Testpoint calls, and those the sign test judged (and how many samples were poor).
    pub testpoints: u64,
    pub judged: u64,
    pub poor_samples: u64,
    pub poor_verdicts: u64,
    pub good_verdicts: u64,
    /// Suspensions ordered (by the sign test or the probation duty cap).
    pub suspensions: u64,
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            elapsed: self.elapsed - o.elapsed,
            bg_running: self.bg_running - o.bg_running,
            bg_running_contended: self.bg_running_contended - o.bg_running_contended,
            bg_suspended: self.bg_suspended - o.bg_suspended,
            fg_busy: self.fg_busy - o.fg_busy,
            fg_lost: self.fg_lost - o.fg_lost,
            testpoints: self.testpoints - o.testpoints,
            judged: self.judged - o.judged,
            poor_samples: self.poor_samples - o.poor_samples,
            poor_verdicts: self.poor_verdicts - o.poor_verdicts,
            good_verdicts: self.good_verdicts - o.good_verdicts,
            suspensions: self.suspensions - o.suspensions,
        }
    }
}

/// The foreground went idle at `at`; the background resumed `overshoot` later (zero if it was
/// running; if the foreground came back first, the whole idle period).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overshoot {
    pub at: Duration,
    pub overshoot: Duration,
}

/// Contention began at `at`: the foreground became busy while the background ran, or the
/// background resumed into a burst that began while it was suspended. The background was
/// suspended at its `testpoints`-th testpoint from then (`None`: the burst ended first).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Reaction {
    pub at: Duration,
    pub testpoints: Option<u32>,
}

/// A point in a run from which measures can be taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub at: Duration,
    pub counters: Counters,
}

/// Order statistics of a list of durations, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub count: usize,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
    pub mean: f64,
}

impl Spread {
    pub fn of(mut xs: Vec<f64>) -> Spread {
        if xs.is_empty() {
            return Spread::default();
        }
        xs.sort_by(f64::total_cmp);
        let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
        Spread {
            count: xs.len(),
            median: at(0.5),
            p90: at(0.9),
            max: xs[xs.len() - 1],
            mean: xs.iter().sum::<f64>() / xs.len() as f64,
        }
    }
}

/// The measures over one stretch of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub from_s: f64,
    pub to_s: f64,
    /// Fraction of the time the background was suspended.
    pub suspended_fraction: f64,
    /// Fraction of the time the background ran.
    pub active_fraction: f64,
    /// Fraction of the time the foreground was busy.
    pub foreground_busy_fraction: f64,
    /// E: background running during foreground idle time ÷ foreground idle time.
    pub efficiency: f64,
    /// Fraction of background running that overlapped foreground activity.
    pub interference_share: f64,
    /// Foreground busy time ÷ foreground work done − 1: how much longer its work took.
    pub foreground_slowdown: f64,
    /// Overshoot after each foreground busy→idle transition, seconds.
    pub overshoot: Spread,
    /// Testpoints from contention onset to the first suspension, over the onsets that got one.
    pub reaction_testpoints: Spread,
    /// Onsets whose burst ended before any suspension.
    pub reactions_missed: usize,
    pub testpoints: u64,
    pub judged: u64,
    /// Fraction of judged samples that were poor (d > D*).
    pub poor_sample_fraction: f64,
    pub poor_verdicts: u64,
    pub good_verdicts: u64,
    pub suspensions: u64,
}

impl Summary {
    pub fn new(
        from: &Mark,
        to: &Mark,
        overshoots: &[Overshoot],
        reactions: &[Reaction],
    ) -> Summary {
        let c = to.counters - from.counters;
        let window = |t: Duration| from.at <= t && t < to.at;
        let secs = |d: Duration| d.as_secs_f64();
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let elapsed = secs(c.elapsed);
        let fg_idle = elapsed - secs(c.fg_busy);
        let in_window: Vec<&Reaction> = reactions.iter().filter(|r| window(r.at)).collect();
        Summary {
            from_s: secs(from.at),
            to_s: secs(to.at),
            suspended_fraction: ratio(secs(c.bg_suspended), elapsed),
            active_fraction: ratio(secs(c.bg_running), elapsed),
            foreground_busy_fraction: ratio(secs(c.fg_busy), elapsed),
            efficiency: ratio(secs(c.bg_running - c.bg_running_contended), fg_idle),
            interference_share: ratio(secs(c.bg_running_contended), secs(c.bg_running)),
            foreground_slowdown: ratio(secs(c.fg_busy), secs(c.fg_busy) - c.fg_lost).max(1.0) - 1.0,
            overshoot: Spread::of(
                overshoots
                    .iter()
                    .filter(|o| window(o.at))
                    .map(|o| o.overshoot.as_secs_f64())
                    .collect(),
            ),
            reaction_testpoints: Spread::of(
                in_window
                    .iter()
                    .filter_map(|r| r.testpoints)
                    .map(f64::from)
                    .collect(),
            ),
            reactions_missed: in_window.iter().filter(|r| r.testpoints.is_none()).count(),
            testpoints: c.testpoints,
            judged: c.judged,
            poor_sample_fraction: ratio(c.poor_samples as f64, c.judged as f64),
            poor_verdicts: c.poor_verdicts,
            good_verdicts: c.good_verdicts,
            suspensions: c.suspensions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_picks_order_statistics() {
        let s = Spread::of((1..=11).map(f64::from).collect());
        assert_eq!(
            (s.count, s.median, s.p90, s.max, s.mean),
            (11, 6.0, 10.0, 11.0, 6.0)
        );
        assert_eq!(Spread::of(vec![]).count, 0);
    }
}
