//! Vegas+ and Vegas++, the paper's revisions of TCP Vegas for a thread pool (§4.8, spec X7):
//! D = N − X·B, where N is the concurrency level, X the throughput measured at it and B the
//! baseline seconds per task at one worker; +1 if D < α, −1 if D > β, hold in between, with
//! TCP Vegas's α = 1 and β = 3 (Mo et al., the parameters the paper says it used).
//!
//! - Vegas+ takes B = minRTT, the least task latency seen (TCP Vegas's BaseRTT: the minimum
//!   over the whole run, never re-probed, as in the original). Since service times vary, 1/minRTT
//!   overstates the single-worker throughput, D comes out too large and the pool stays small.
//! - Vegas++ takes B = 1/X₁, with X₁ the single-worker throughput measured offline: the host
//!   passes it in (it is not an online algorithm; the paper uses it to bound Vegas).
//!
//! The paper says only that Vegas+ "adjusts the concurrency level after measuring a stable
//! throughput". Here a measurement is a window of `window` completions while the pool is
//! saturated (default 1,000: X within about ±6% at 95% confidence for exponential or Pareto
//! k = 2.5 gaps). It opens after the first N completions at a new level (the tasks already in
//! flight, about one round trip); X = the window's gaps ÷ its span; one decision per window. A
//! window in which the pool runs out of work (fewer tasks than N and none queued) is dropped: X
//! would measure the input. The length is fixed on purpose: a window that ends once X looks
//! stable ends early when no long gap has come yet, so it overstates X (by 5 points of web CPU
//! with Vegas++ in the simulator's X7).

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::{check_range, BaselineError, Bounds};

/// What D's baseline B (seconds per task at one worker) comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VegasBaseline {
    /// Vegas+: B = the least latency of any completion (`Event::Complete { latency: Some }`).
    MinRtt,
    /// Vegas++: B = 1/x1, with x1 tasks per second at one worker, measured offline.
    Offline { x1: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct VegasPlusParams {
    pub baseline: VegasBaseline,
    /// Grow when D is below this (TCP Vegas: 1).
    pub alpha: f64,
    /// Shrink when D is above this (TCP Vegas: 3).
    pub beta: f64,
    /// Gaps between completions per measurement (default 1,000).
    pub window: u64,
}

impl VegasPlusParams {
    /// Vegas+ with TCP Vegas's thresholds.
    pub fn plus() -> Self {
        VegasPlusParams {
            baseline: VegasBaseline::MinRtt,
            alpha: 1.0,
            beta: 3.0,
            window: 1000,
        }
    }

    /// Vegas++ with TCP Vegas's thresholds and `x1` tasks per second at one worker.
    pub fn plus_plus(x1: f64) -> Self {
        VegasPlusParams {
            baseline: VegasBaseline::Offline { x1 },
            ..VegasPlusParams::plus()
        }
    }

    fn validate(&self) -> Result<(), BaselineError> {
        if let VegasBaseline::Offline { x1 } = self.baseline {
            check_range(
                "x1",
                x1,
                f64::MIN_POSITIVE,
                f64::MAX,
                "the single-worker throughput must be positive",
            )?;
        }
        check_range("alpha", self.alpha, 0.0, f64::MAX, "alpha must be >= 0")?;
        check_range(
            "beta",
            self.beta,
            self.alpha,
            f64::MAX,
            "beta must be at least alpha",
        )?;
        check_range(
            "window",
            self.window as f64,
            1.0,
            f64::MAX,
            "a window needs at least one gap",
        )
    }
}

/// A measurement: the first completion and the gaps since.
#[derive(Debug, Clone, Copy)]
struct Window {
    first: Duration,
    last: Duration,
    gaps: u64,
}

impl Window {
    fn add(&mut self, at: Duration) {
        // A clock that steps back counts as simultaneous.
        self.last = at.max(self.last);
        self.gaps += 1;
    }

    fn span(&self) -> f64 {
        (self.last - self.first).as_secs_f64()
    }
}

/// Throughput-based Vegas with a per-window decision.
#[derive(Debug, Clone)]
pub struct VegasPlus {
    params: VegasPlusParams,
    bounds: Bounds,
    limit: usize,
    min_rtt: Option<Duration>,
    /// Completions still to pass before the next window opens.
    skip: usize,
    window: Option<Window>,
    last_d: Option<f64>,
}

impl VegasPlus {
    pub fn new(params: VegasPlusParams, bounds: Bounds) -> Result<Self, BaselineError> {
        params.validate()?;
        Ok(VegasPlus {
            params,
            bounds,
            limit: bounds.n_init(),
            min_rtt: None,
            skip: bounds.n_init(),
            window: None,
            last_d: None,
        })
    }

    /// The least task latency seen (Vegas+'s baseline), if any completion carried one.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// D of the last window that reached a decision.
    pub fn last_d(&self) -> Option<f64> {
        self.last_d
    }

    /// Seconds per task at one worker, once known.
    fn baseline(&self) -> Option<f64> {
        match self.params.baseline {
            VegasBaseline::MinRtt => self.min_rtt.map(|d| d.as_secs_f64()),
            VegasBaseline::Offline { x1 } => Some(1.0 / x1),
        }
    }

    /// Ends a window with its throughput; the new limit.
    fn decide(&mut self, throughput: f64) -> usize {
        let Some(b) = self.baseline() else {
            return self.limit;
        };
        let d = self.limit as f64 - throughput * b;
        self.last_d = Some(d);
        if d < self.params.alpha {
            self.bounds.clamp(self.limit + 1)
        } else if d > self.params.beta {
            self.bounds.clamp(self.limit.saturating_sub(1))
        } else {
            self.limit
        }
    }
}

impl Policy for VegasPlus {
    fn target(&self) -> usize {
        self.limit
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        if let Event::Complete {
            latency: Some(l), ..
        } = event
        {
            if !l.is_zero() {
                self.min_rtt = Some(self.min_rtt.map_or(l, |m| m.min(l)));
            }
        }
        let load = event.load()?;
        if !load.saturated(self.limit) {
            self.window = None;
            return None;
        }
        let Event::Complete { at, .. } = event else {
            return None;
        };
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        let Some(window) = self.window.as_mut() else {
            self.window = Some(Window {
                first: at,
                last: at,
                gaps: 0,
            });
            return None;
        };
        window.add(at);
        let w = *window;
        if w.gaps < self.params.window || w.span() <= 0.0 {
            return None;
        }
        self.window = None;
        let next = self.decide(w.gaps as f64 / w.span());
        if next == self.limit {
            return None;
        }
        self.limit = next;
        // The tasks in flight started at the old level: let them pass.
        self.skip = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::Load;

    fn ms(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1000.0)
    }

    /// Feeds saturated completions `gap_ms` apart, each with latency `latency_ms`, until the
    /// target changes or `max` completions; returns the answer and the completions used.
    fn feed(
        v: &mut VegasPlus,
        clock: &mut f64,
        gap_ms: f64,
        latency_ms: Option<f64>,
        max: usize,
    ) -> (Option<usize>, usize) {
        for i in 1..=max {
            *clock += gap_ms;
            let answer = v.on_event(Event::Complete {
                at: ms(*clock),
                load: Load::new(v.target(), 1),
                latency: latency_ms.map(ms),
            });
            if answer.is_some() {
                return (answer, i);
            }
        }
        (None, max)
    }

    fn plus_plus(x1: f64, n: usize) -> VegasPlus {
        let b = Bounds::new(n, 1, 64).unwrap();
        VegasPlus::new(VegasPlusParams::plus_plus(x1), b).unwrap()
    }

    #[test]
    fn vegas_plus_plus_grows_below_alpha_shrinks_above_beta_and_holds_between() {
        // N = 10, X₁ = 100/s: D = 10 − X/100. 1 ms gaps: X = 1000, D = 0 → grow.
        for (gap, want) in [(1.0, Some(11)), (1.0 / 0.91, Some(11)), (2.0, Some(9))] {
            let mut v = plus_plus(100.0, 10);
            let (answer, _) = feed(&mut v, &mut 0.0, gap, None, 5000);
            assert_eq!(answer, want, "gap {gap} ms, D = {:?}", v.last_d());
        }
        // D = 1.1 (X = 890) and D = 2.9 (X = 710): hold, window after window.
        for x in [890.0, 710.0] {
            let mut v = plus_plus(100.0, 10);
            let (answer, _) = feed(&mut v, &mut 0.0, 1000.0 / x, None, 5000);
            assert_eq!(answer, None, "X = {x}");
            let d = v.last_d().expect("windows ended");
            assert!((1.0..=3.0).contains(&d), "{d}");
        }
        // D = 3.1 (X = 690): shrink.
        let mut v = plus_plus(100.0, 10);
        assert_eq!(
            feed(&mut v, &mut 0.0, 1000.0 / 690.0, None, 5000).0,
            Some(9)
        );
    }

    #[test]
    fn vegas_plus_uses_the_least_latency_and_waits_for_one() {
        // N = 10, minRTT = 5 ms: D = 10 − X·0.005. X = 1000 → D = 5 → shrink.
        let b = Bounds::new(10, 1, 64).unwrap();
        let mut v = VegasPlus::new(VegasPlusParams::plus(), b).unwrap();
        // Without latencies there is no baseline: no decision.
        let mut clock = 0.0;
        assert_eq!(feed(&mut v, &mut clock, 1.0, None, 3000).0, None);
        let (answer, _) = feed(&mut v, &mut clock, 1.0, Some(5.0), 5000);
        assert_eq!(answer, Some(9));
        assert_eq!(v.min_rtt(), Some(ms(5.0)));
        // A longer latency leaves minRTT; a shorter one lowers it, for good.
        feed(&mut v, &mut clock, 1.0, Some(50.0), 5);
        assert_eq!(v.min_rtt(), Some(ms(5.0)));
        // minRTT = 0.5 ms: D = 9 − 1000·0.0005 = 8.5 → shrink again.
        let (answer, _) = feed(&mut v, &mut clock, 1.0, Some(0.5), 5000);
        assert_eq!(answer, Some(8));
    }

    #[test]
    fn a_window_skips_the_tasks_in_flight_and_holds_window_gaps() {
        // The first decision comes after N skipped completions, one to open the window and
        // `window` gaps. D = N − 20 < 1.
        let mut v = plus_plus(50.0, 10);
        let (answer, used) = feed(&mut v, &mut 0.0, 1.0, None, 5000);
        assert_eq!((answer, used), (Some(11), 10 + 1 + 1000));
        let (answer, used) = feed(&mut v, &mut 2000.0, 1.0, None, 5000);
        assert_eq!((answer, used), (Some(12), 11 + 1 + 1000));
    }

    #[test]
    fn x_is_the_mean_rate_over_the_window_however_uneven() {
        // Gaps alternating 0.2 and 1.8 ms: X = 1000/s, D = 10 − 1000/125 = 2: hold. Gaps of
        // 1.1 and 0.1 ms (X = 1667, D = −3): grow, after the same count of completions.
        for (a, b, want) in [(0.2, 1.8, None), (1.1, 0.1, Some(11))] {
            let mut v = plus_plus(125.0, 10);
            let mut clock = 0.0;
            let mut answer = None;
            for i in 0..(10 + 1 + 1000) {
                clock += if i % 2 == 0 { a } else { b };
                answer = v.on_event(Event::Complete {
                    at: ms(clock),
                    load: Load::new(10, 1),
                    latency: None,
                });
            }
            assert_eq!(answer, want, "{a}/{b} ms");
            assert!(v.last_d().is_some(), "{a}/{b} ms: no decision");
        }
    }

    #[test]
    fn running_out_of_work_drops_the_window() {
        let mut v = plus_plus(100.0, 10);
        let mut clock = 0.0;
        // Skip the first 10, then 20 gaps, then the pool runs dry.
        feed(&mut v, &mut clock, 1.0, None, 30);
        v.on_event(Event::Load {
            at: ms(clock),
            load: Load::new(3, 0),
        });
        // A fresh window: 1 + 1000 more completions before the decision.
        let (answer, used) = feed(&mut v, &mut clock, 1.0, None, 5000);
        assert_eq!((answer, used), (Some(11), 1001));
    }

    #[test]
    fn stays_within_bounds() {
        let b = Bounds::new(3, 2, 3).unwrap();
        let mut up = VegasPlus::new(VegasPlusParams::plus_plus(100.0), b).unwrap();
        assert_eq!(feed(&mut up, &mut 0.0, 0.1, None, 10_000).0, None);
        assert_eq!(up.target(), 3);
        assert!(up.last_d().unwrap() < 1.0);
        // D ≤ N, so shrinking needs N > β: at n_min = 4 with X/X₁ ≈ 0, D ≈ 4.
        let b = Bounds::new(4, 4, 6).unwrap();
        let mut down = VegasPlus::new(VegasPlusParams::plus_plus(1e6), b).unwrap();
        assert_eq!(feed(&mut down, &mut 0.0, 1.0, None, 10_000).0, None);
        assert_eq!(down.target(), 4);
        assert!(down.last_d().unwrap() > 3.0);
    }

    #[test]
    fn parameters_are_validated() {
        let b = Bounds::new(2, 1, 8).unwrap();
        let bad = |p: VegasPlusParams| VegasPlus::new(p, b).unwrap_err().to_string();
        assert!(bad(VegasPlusParams::plus_plus(0.0)).contains("x1"));
        assert!(bad(VegasPlusParams::plus_plus(f64::NAN)).contains("x1"));
        let inverted = VegasPlusParams {
            alpha: 3.0,
            beta: 1.0,
            ..VegasPlusParams::plus()
        };
        assert!(bad(inverted).contains("beta"));
        let empty = VegasPlusParams {
            window: 0,
            ..VegasPlusParams::plus()
        };
        assert!(bad(empty).contains("window"));
    }
}
