//! Foreground load: when the important work is busy, as a timeline of busy and idle segments.
//!
//! The foreground is open-loop: its busy periods are fixed in time and do not stretch when the
//! background slows them (the slowdown is measured as lost throughput instead, see
//! [`crate::measure`]). That keeps one seed = one load, whatever the regulator does, so two
//! regulators (or regulated vs unregulated) can be compared on exactly the same load.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::rng::SimRng;

/// How the foreground behaves over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LoadPattern {
    /// No foreground at all: an idle machine.
    None,
    /// Busy all the time.
    Constant,
    /// Idle for `offset`, then `busy` and `idle` alternating for ever.
    Periodic {
        offset: Duration,
        busy: Duration,
        idle: Duration,
    },
    /// Random bursts (the paper's calibration load).
    Bursty(Bursty),
    /// The given (busy, length) segments in order, then `then_busy` for ever.
    Script {
        segments: Vec<(bool, Duration)>,
        then_busy: bool,
    },
}

/// Bursts of random length separated by idle periods of random length, with a mean load that may
/// follow a daily sine (§9.6: "burst times fluctuated between 10 seconds and 15 minutes, separated
/// by similarly fluctuating idle periods. The mean load varied in a sinusoidal pattern").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bursty {
    pub seed: u64,
    /// Burst lengths are log-uniform in [min, max].
    pub min: Duration,
    pub max: Duration,
    /// Mean busy fraction around which the diurnal sine swings.
    pub mean_load: f64,
    /// Amplitude of the sine (0 for a stationary load).
    pub diurnal_amplitude: f64,
    pub diurnal_period: Duration,
    /// Phase of the sine at time 0, in radians (π/2 starts at the daily peak).
    pub diurnal_phase: f64,
    /// A first segment forced on the timeline: (busy, length). `Some((true, 15 min))` starts the
    /// run inside a long burst, the paper's worst case; `Some((false, 60 s))` leaves room for an
    /// idle calibration first.
    pub lead_in: Option<(bool, Duration)>,
}

impl Bursty {
    /// The load of the paper's calibration test: bursts 10 s–15 min, idle periods alike, mean 50%
    /// swinging ±30% over a day, starting at the daily peak inside a 15-minute burst.
    pub fn paper_calibration(seed: u64) -> Self {
        Bursty {
            seed,
            min: Duration::from_secs(10),
            max: Duration::from_secs(15 * 60),
            mean_load: 0.5,
            diurnal_amplitude: 0.3,
            diurnal_period: Duration::from_secs(24 * 3600),
            diurnal_phase: std::f64::consts::FRAC_PI_2,
            lead_in: Some((true, Duration::from_secs(15 * 60))),
        }
    }

    /// Mean busy fraction at time `t`, kept within [5%, 95%] so both kinds of period exist.
    pub fn mean_at(&self, t: Duration) -> f64 {
        let angle = std::f64::consts::TAU * t.as_secs_f64() / self.diurnal_period.as_secs_f64();
        (self.mean_load + self.diurnal_amplitude * (angle + self.diurnal_phase).sin())
            .clamp(0.05, 0.95)
    }
}

/// One stretch of constant foreground state, [start, end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start: Duration,
    pub end: Duration,
    pub busy: bool,
}

impl Segment {
    /// The part of this segment inside [t0, t1), if any.
    pub fn clip(&self, t0: Duration, t1: Duration) -> Option<Segment> {
        let (start, end) = (self.start.max(t0), self.end.min(t1));
        (start < end).then_some(Segment {
            start,
            end,
            busy: self.busy,
        })
    }
}

/// The foreground's timeline, generated lazily and forgotten behind the simulation's clock.
#[derive(Debug, Clone)]
pub struct Foreground {
    pattern: LoadPattern,
    rng: SimRng,
    /// Index into a `Script` or the alternation state of a pattern.
    cursor: usize,
    segments: VecDeque<Segment>,
    /// Everything before `horizon` is generated.
    horizon: Duration,
}

/// Lengths for patterns that never change state: long, so the deque stays short.
const STEADY_CHUNK: Duration = Duration::from_secs(3600);

impl Foreground {
    pub fn new(pattern: LoadPattern) -> Self {
        let seed = match &pattern {
            LoadPattern::Bursty(b) => b.seed,
            _ => 0,
        };
        Foreground {
            pattern,
            rng: SimRng::stream(seed, 1),
            cursor: 0,
            segments: VecDeque::new(),
            horizon: Duration::ZERO,
        }
    }

    pub fn pattern(&self) -> &LoadPattern {
        &self.pattern
    }

    /// Whether the foreground is busy at instant `t`.
    pub fn busy_at(&mut self, t: Duration) -> bool {
        self.segment_at(t).busy
    }

    /// The (unclipped) segment containing instant `t`.
    pub fn segment_at(&mut self, t: Duration) -> Segment {
        self.generate_past(t);
        *self
            .segments
            .iter()
            .find(|s| s.start <= t && t < s.end)
            .expect("the timeline covers every instant")
    }

    /// The segments overlapping [t0, t1), clipped to it.
    pub fn segments(&mut self, t0: Duration, t1: Duration) -> Vec<Segment> {
        self.generate_past(t1);
        self.segments
            .iter()
            .filter_map(|s| s.clip(t0, t1))
            .collect()
    }

    /// The state changes within [t0, t1), as the (unclipped) segments they start.
    /// Adjacent segments never share a state, so every segment start after time zero is one.
    pub fn transitions(&mut self, t0: Duration, t1: Duration) -> Vec<Segment> {
        self.generate_past(t1);
        self.segments
            .iter()
            .filter(|s| s.start >= t0 && s.start < t1 && !s.start.is_zero())
            .copied()
            .collect()
    }

    /// Busy time within [t0, t1).
    pub fn busy_time(&mut self, t0: Duration, t1: Duration) -> Duration {
        self.segments(t0, t1)
            .iter()
            .filter(|s| s.busy)
            .map(|s| s.end - s.start)
            .sum()
    }

    /// Drop segments that end before `t`: the simulation never looks back past its clock.
    pub fn forget_before(&mut self, t: Duration) {
        while self.segments.front().is_some_and(|s| s.end <= t) {
            self.segments.pop_front();
        }
    }

    fn generate_past(&mut self, t: Duration) {
        while self.horizon <= t {
            let (busy, len) = self.next_segment();
            let start = self.horizon;
            self.horizon += len;
            if len.is_zero() {
                continue;
            }
            match self.segments.back_mut() {
                // Adjacent segments of one state merge, so every segment boundary is a transition.
                Some(last) if last.busy == busy => last.end = self.horizon,
                _ => self.segments.push_back(Segment {
                    start,
                    end: self.horizon,
                    busy,
                }),
            }
        }
    }

    fn next_segment(&mut self) -> (bool, Duration) {
        let at = self.horizon;
        let i = self.cursor;
        self.cursor += 1;
        match &self.pattern {
            LoadPattern::None => (false, STEADY_CHUNK),
            LoadPattern::Constant => (true, STEADY_CHUNK),
            LoadPattern::Periodic { offset, busy, idle } => match i {
                0 => (false, *offset),
                i if i % 2 == 1 => (true, *busy),
                _ => (false, *idle),
            },
            LoadPattern::Script {
                segments,
                then_busy,
            } => segments
                .get(i)
                .copied()
                .unwrap_or((*then_busy, STEADY_CHUNK)),
            LoadPattern::Bursty(b) => {
                if let (0, Some(lead)) = (i, b.lead_in) {
                    return lead;
                }
                // Alternate after the lead-in; without one, start idle.
                let first_busy = b.lead_in.is_some_and(|(busy, _)| busy);
                let busy = first_busy != (i % 2 == 1);
                let len = self
                    .rng
                    .log_uniform(b.min.as_secs_f64(), b.max.as_secs_f64());
                // Idle periods are drawn from the same law, scaled so that the expected busy
                // fraction is the diurnal mean at this moment.
                let m = b.mean_at(at);
                let len = if busy { len } else { len * (1.0 - m) / m };
                (busy, Duration::from_secs_f64(len))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn periodic_load_alternates_after_its_offset() {
        let mut fg = Foreground::new(LoadPattern::Periodic {
            offset: secs(5),
            busy: secs(2),
            idle: secs(3),
        });
        assert!(!fg.busy_at(secs(4)));
        assert!(fg.busy_at(secs(5)) && fg.busy_at(secs(6)));
        assert!(!fg.busy_at(secs(7)));
        assert!(fg.busy_at(secs(10)));
        // Busy over [5, 7) and [10, 12).
        assert_eq!(fg.busy_time(secs(0), secs(15)), secs(4));
    }

    #[test]
    fn scripts_merge_equal_neighbours() {
        let segments = vec![(true, secs(1)), (true, secs(2)), (false, secs(1))];
        let mut fg = Foreground::new(LoadPattern::Script {
            segments,
            then_busy: true,
        });
        let s = fg.segments(secs(0), secs(10));
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].end, s[1].busy, s[2].start), (secs(3), false, secs(4)));
    }

    #[test]
    fn bursty_load_starts_in_its_lead_in_and_tracks_its_mean() {
        let b = Bursty {
            diurnal_amplitude: 0.0,
            ..Bursty::paper_calibration(11)
        };
        let mut fg = Foreground::new(LoadPattern::Bursty(b.clone()));
        assert!(fg.busy_at(secs(0)) && fg.busy_at(secs(899)));
        let day = secs(24 * 3600);
        let busy = fg.busy_time(Duration::ZERO, day * 20).as_secs_f64() / (day * 20).as_secs_f64();
        assert!((busy - 0.5).abs() < 0.05, "busy fraction {busy}");
        let s = fg.segments(day, day * 2);
        let bursts: Vec<f64> = s[1..s.len() - 1]
            .iter()
            .filter(|s| s.busy)
            .map(|s| (s.end - s.start).as_secs_f64())
            .collect();
        assert!(bursts.iter().all(|&l| (10.0..=900.0).contains(&l)));
    }

    #[test]
    fn a_diurnal_load_is_heavier_at_its_peak() {
        let b = Bursty {
            lead_in: None,
            ..Bursty::paper_calibration(5)
        };
        let mut fg = Foreground::new(LoadPattern::Bursty(b));
        let h = secs(3600);
        // Phase π/2: the peak is at 0 h (and 24 h), the trough at 12 h.
        let peak = fg.busy_time(h * 20, h * 28).as_secs_f64();
        let trough = fg.busy_time(h * 8, h * 16).as_secs_f64();
        assert!(peak > 1.5 * trough, "peak {peak} trough {trough}");
    }
}
