//! Automatic PI tuning from the event counters (`--preempt auto`; the thesis's future work,
//! T§7.2.2; spec idletime.md section 8.1).
//!
//! TCP-like, as the thesis suggests: B[f] is the loss signal. Per window the tuner reads the
//! harm h = ΔB[f] / Δ(all f), the share of fg requests that found bg in service. Above the loss
//! budget β it doubles p; otherwise it shrinks p by p_min/2 or p/8, whichever is larger.
//!
//! Two departures from the spec's rule (section 8.1), both found in simulation:
//! - **No dead band.** The spec holds p while β/2 ≤ h ≤ β. But a PI longer than the gaps inside
//!   a fg burst and shorter than the gaps between bursts costs exactly one preemption per burst
//!   (the amortization property), so h does not depend on p anywhere in that range, and a dead
//!   band parks p wherever it entered it (at p₀ = 10τ: 9 points of bg lost at τ = 1 ms, i = 0.3).
//!   Shortening p while the budget holds is the thesis's own suggestion (T§7.2.2: TCP grows its
//!   window while there is no loss).
//! - **Step of at least p/8.** End-anchored p_min is the fg think time, often microseconds;
//!   steps of p_min/2 would take thousands of windows to come down from p₀.
//!
//! The target is
//! that at most a fraction β of fg requests pay a bg residual, with p otherwise as short as the
//! bounds allow, so bg harvests what the budget leaves. A residual is τ/2 on average, so fg
//! loses about β/2 of its throughput and of its response time.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::gate::{Anchor, Counters};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TunerParams {
    /// β, the loss budget: the share of fg requests allowed to pay a preemption.
    pub beta: f64,
    pub p_min: Duration,
    pub p_max: Duration,
    /// p₀, where tuning starts.
    pub initial: Duration,
    /// A window ends after this much time ...
    pub window: Duration,
    /// ... or after this many expired PIs, whichever comes first.
    pub window_pis: u64,
}

impl TunerParams {
    /// The spec's bounds from what the probe measured: p₀ = 10·τ̂; p_min = 1.25·τ̂ start-anchored
    /// (the spec says τ̂, but a start-anchored PI of exactly τ expires as its own request
    /// completes, and a quarter more covers the spread of service times) or the p95 fg think
    /// time end-anchored; p_max = twice the longest fg gap; β = 5%, windows of 1 s or 20
    /// expired PIs.
    pub fn measured(
        tau: Duration,
        anchor: Anchor,
        think_p95: Duration,
        longest_gap: Duration,
    ) -> Self {
        let p_min = match anchor {
            Anchor::Start => tau + tau / 4,
            Anchor::End => think_p95,
        };
        let p_max = longest_gap.saturating_mul(2).max(p_min);
        TunerParams {
            beta: 0.05,
            p_min,
            p_max,
            initial: tau.saturating_mul(10).clamp(p_min, p_max),
            window: Duration::from_secs(1),
            window_pis: 20,
        }
    }

    pub fn validate(&self) -> Result<(), TunerError> {
        if !(self.beta > 0.0 && self.beta < 1.0) {
            return Err(TunerError::Beta(self.beta));
        }
        if self.p_min.is_zero() || self.p_min > self.p_max {
            return Err(TunerError::Bounds(self.p_min, self.p_max));
        }
        if !(self.p_min..=self.p_max).contains(&self.initial) {
            return Err(TunerError::Initial(self.initial));
        }
        if self.window.is_zero() || self.window_pis == 0 {
            return Err(TunerError::Window);
        }
        Ok(())
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum TunerError {
    #[error("beta must be in (0, 1), got {0}")]
    Beta(f64),
    #[error("p_min must be positive and at most p_max, got {0:?} and {1:?}")]
    Bounds(Duration, Duration),
    #[error("initial must lie within [p_min, p_max], got {0:?}")]
    Initial(Duration),
    #[error("window and window_pis must be positive")]
    Window,
}

/// The tuner's state: the current p and the counters at the start of the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuner {
    params: TunerParams,
    pi: Duration,
    window_start: Option<Duration>,
    base: Counters,
}

impl Tuner {
    pub fn new(params: TunerParams) -> Result<Tuner, TunerError> {
        params.validate()?;
        Ok(Tuner {
            params,
            pi: params.initial,
            window_start: None,
            base: Counters::default(),
        })
    }

    /// The p to use now.
    pub fn pi(&self) -> Duration {
        self.pi
    }

    pub fn params(&self) -> &TunerParams {
        &self.params
    }

    /// Look at the gate's counters at `now`; at the end of a window, returns the new p (which
    /// may equal the old one) for [`super::Gate::set_pi`]. Call it at any pace: after every
    /// step, or every δ.
    pub fn observe(&mut self, now: Duration, counters: &Counters) -> Option<Duration> {
        let start = *self.window_start.get_or_insert(now);
        let pis = counters.expired_pis() - self.base.expired_pis();
        if now.saturating_sub(start) < self.params.window && pis < self.params.window_pis {
            return None;
        }
        let fg = counters.fg_total() - self.base.fg_total();
        let preempted = counters.preempted() - self.base.preempted();
        let harm = if fg == 0 {
            0.0
        } else {
            preempted as f64 / fg as f64
        };
        let p = self.params;
        if harm > p.beta {
            self.pi = self.pi.saturating_mul(2).min(p.p_max);
        } else {
            let step = (p.p_min / 2).max(self.pi / 8);
            self.pi = self.pi.saturating_sub(step).max(p.p_min);
        }
        self.window_start = Some(now);
        self.base = *counters;
        Some(self.pi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::gate::{Event, State};

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn counters(fg_idle: u64, fg_preempted: u64, pis: u64) -> Counters {
        let mut c = Counters::default();
        c.x[State::Idle as usize][Event::Fg as usize] = fg_idle;
        c.x[State::Bg as usize][Event::Fg as usize] = fg_preempted;
        c.x[State::Pi as usize][Event::Timer as usize] = pis;
        c
    }

    fn tuner() -> Tuner {
        Tuner::new(TunerParams::measured(ms(20), Anchor::Start, ms(0), ms(90))).unwrap()
    }

    #[test]
    fn measured_bounds_are_the_specs() {
        let t = tuner();
        assert_eq!(t.pi(), ms(180), "10·τ clamped to p_max = 2·90 ms");
        assert_eq!(t.params().p_min, ms(25));
        let end = TunerParams::measured(ms(1), Anchor::End, Duration::from_micros(10), ms(50));
        assert_eq!(end.p_min, Duration::from_micros(10));
        assert_eq!(end.initial, ms(10));
    }

    #[test]
    fn harm_over_budget_doubles_otherwise_shrinks() {
        let mut t = Tuner::new(TunerParams {
            beta: 0.05,
            p_min: ms(20),
            p_max: ms(180),
            initial: ms(40),
            window: ms(1000),
            window_pis: 20,
        })
        .unwrap();
        assert_eq!(t.observe(ms(0), &counters(0, 0, 0)), None);
        assert_eq!(t.observe(ms(500), &counters(10, 5, 3)), None, "mid-window");
        // 5 of 15 fg requests preempted (33% > 5%): double.
        assert_eq!(t.observe(ms(1000), &counters(10, 5, 3)), Some(ms(80)));
        // 2 of 40 more (exactly 5%): within budget, shrink by p/8 = p_min/2 = 10 ms.
        assert_eq!(t.observe(ms(2000), &counters(48, 7, 5)), Some(ms(70)));
        // 0 of 40, and the window ends early on 20 expired PIs: shrink by p_min/2.
        assert_eq!(t.observe(ms(2100), &counters(88, 7, 25)), Some(ms(60)));
        // Doubling stops at p_max, shrinking at p_min.
        assert_eq!(t.observe(ms(3100), &counters(88, 60, 25)), Some(ms(120)));
        assert_eq!(t.observe(ms(4100), &counters(88, 120, 25)), Some(ms(180)));
        for k in 0..20 {
            t.observe(ms(5100 + 1000 * k), &counters(88 + 10 * k, 120, 25));
        }
        assert_eq!(t.pi(), ms(20));
        // Far above p_min the step is p/8: 160 → 140.
        let mut t = Tuner::new(TunerParams {
            initial: ms(160),
            ..t.params
        })
        .unwrap();
        t.observe(ms(0), &counters(0, 0, 0));
        assert_eq!(t.observe(ms(1000), &counters(100, 0, 0)), Some(ms(140)));
    }

    #[test]
    fn bad_params_are_named() {
        let good = tuner().params;
        let err = |p: TunerParams| Tuner::new(p).unwrap_err();
        assert_eq!(
            err(TunerParams { beta: 0.0, ..good }),
            TunerError::Beta(0.0)
        );
        assert_eq!(
            err(TunerParams {
                p_min: ms(0),
                ..good
            }),
            TunerError::Bounds(ms(0), ms(180))
        );
        assert_eq!(
            err(TunerParams {
                initial: ms(500),
                ..good
            }),
            TunerError::Initial(ms(500))
        );
        assert_eq!(
            err(TunerParams {
                window_pis: 0,
                ..good
            }),
            TunerError::Window
        );
    }
}
