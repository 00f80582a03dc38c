//! Duty cycle: the fraction of the last minute a job held the run turn.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The window a duty cycle is measured over.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Bound on remembered spans (a job releasing every few ms); older spans merge away.
const MAX_SPANS: usize = 4096;

/// The spans in which a job held the turn, as far back as the window reaches.
#[derive(Debug, Default)]
pub struct Duty {
    spans: VecDeque<(Instant, Instant)>,
    open: Option<Instant>,
}

impl Duty {
    /// The job got the turn.
    pub fn start(&mut self, now: Instant) {
        self.open.get_or_insert(now);
    }

    /// The job gave up (or lost) the turn.
    pub fn stop(&mut self, now: Instant) {
        if let Some(start) = self.open.take() {
            self.spans.push_back((start, now));
            self.trim(now);
        }
    }

    /// Fraction of the window before `now` (or of the time since `born`, if shorter) in which
    /// the job held the turn, in 0..=1.
    pub fn fraction(&self, born: Instant, now: Instant) -> f64 {
        let from = now.checked_sub(WINDOW).map_or(born, |t| t.max(born));
        let length = now.saturating_duration_since(from);
        if length.is_zero() {
            return 0.0;
        }
        let open = self.open.map(|start| (start, now));
        let held: Duration = self
            .spans
            .iter()
            .copied()
            .chain(open)
            .map(|(a, b)| b.saturating_duration_since(a.max(from)))
            .sum();
        (held.as_secs_f64() / length.as_secs_f64()).clamp(0.0, 1.0)
    }

    fn trim(&mut self, now: Instant) {
        if let Some(from) = now.checked_sub(WINDOW) {
            while self.spans.front().is_some_and(|&(_, end)| end <= from) {
                self.spans.pop_front();
            }
        }
        // Many tiny spans: merge the two oldest, which overstates the oldest part of the window
        // a little but keeps memory bounded whatever a client does.
        while self.spans.len() > MAX_SPANS {
            let (a, _) = self.spans.pop_front().expect("more than MAX_SPANS");
            let (_, b) = self.spans.pop_front().expect("more than MAX_SPANS");
            self.spans.push_front((a, b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn fraction_of_the_last_minute_or_of_a_shorter_life() {
        let t0 = Instant::now();
        let mut d = Duty::default();
        assert_eq!(d.fraction(t0, t0), 0.0);
        d.start(t0);
        d.stop(t0 + s(10));
        // 10 s held of a 20 s life.
        assert!((d.fraction(t0, t0 + s(20)) - 0.5).abs() < 1e-9);
        // Later on, of the last 60 s.
        d.start(t0 + s(100));
        assert!((d.fraction(t0, t0 + s(130)) - 0.5).abs() < 1e-9);
        d.stop(t0 + s(130));
        // The first span has left the window; the second (30 s) is in it.
        assert!((d.fraction(t0, t0 + s(150)) - 0.5).abs() < 1e-9);
        assert_eq!(d.fraction(t0, t0 + s(300)), 0.0);
    }

    #[test]
    fn memory_stays_bounded() {
        let t0 = Instant::now();
        let mut d = Duty::default();
        for i in 0..10_000u64 {
            let t = t0 + Duration::from_micros(i * 3);
            d.start(t);
            d.stop(t + Duration::from_micros(1));
        }
        assert!(d.spans.len() <= MAX_SPANS);
        let f = d.fraction(t0, t0 + Duration::from_millis(30));
        assert!(f > 0.0 && f <= 1.0, "{f}");
    }
}
