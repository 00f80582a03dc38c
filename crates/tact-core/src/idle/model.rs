//! The thesis's quantitative model b(i,p), f(i,p) (T§4.4, spec idletime.md section 4) with the
//! spec's clamps: one fg process at intensity i, greedy bg, a non-preemptible device.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::gate::Anchor;

/// Below this the fg gap s(i) counts as zero (i = 1): the middle branch would divide 0 by 0.
const MIN_GAP_SECS: f64 = 1e-9;

/// The model's constants for one resource.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// τ, the measured service time (the thesis's "1/r(i)", see spec section 4).
    pub tau: Duration,
    /// t_max, the load generator's cycle and largest fg gap (100 ms in the thesis).
    pub t_max: Duration,
    /// r_max = r(1), the fg baseline throughput at full intensity, in any unit (bg uses it too).
    pub r_max: f64,
    /// α ∈ [0, 1], the damage bg does through resource state (1: none; not given in the thesis).
    pub alpha: f64,
    /// Start (the thesis's model: the "+τ" term) or end (s(i) − p).
    pub anchor: Anchor,
    /// The fg think time between a completion and its next request. An end-anchored PI no
    /// longer than it shields nothing, so the gate is a priority queue there.
    pub think: Duration,
}

/// One point of the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// bg throughput, in the unit of r.
    pub b: f64,
    /// fg throughput, in the unit of r.
    pub f: f64,
    /// b / r_max.
    pub b_n: f64,
    /// f / r(i) (1 at i = 0, where there is no fg to harm).
    pub f_n: f64,
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("tau must be positive")]
    Tau,
    #[error("t_max must be positive")]
    TMax,
    #[error("r_max must be positive and finite, got {0}")]
    RMax(f64),
    #[error("alpha must be in [0, 1], got {0}")]
    Alpha(f64),
    #[error("intensity must be in [0, 1], got {0}")]
    Intensity(f64),
    #[error("r(i) must be non-negative and finite, got {0}")]
    Baseline(f64),
}

/// The model, its constants checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    params: ModelParams,
}

impl Model {
    pub fn new(params: ModelParams) -> Result<Model, ModelError> {
        if params.tau.is_zero() {
            return Err(ModelError::Tau);
        }
        if params.t_max.is_zero() {
            return Err(ModelError::TMax);
        }
        if !(params.r_max.is_finite() && params.r_max > 0.0) {
            return Err(ModelError::RMax(params.r_max));
        }
        if !(0.0..=1.0).contains(&params.alpha) {
            return Err(ModelError::Alpha(params.alpha));
        }
        Ok(Model { params })
    }

    pub fn params(&self) -> &ModelParams {
        &self.params
    }

    /// b(i,p) and f(i,p) given the measured fg baseline `r_i` = r(i).
    pub fn predict(&self, i: f64, r_i: f64, p: Duration) -> Result<Prediction, ModelError> {
        if !(0.0..=1.0).contains(&i) {
            return Err(ModelError::Intensity(i));
        }
        if !(r_i.is_finite() && r_i >= 0.0) {
            return Err(ModelError::Baseline(r_i));
        }
        let ModelParams {
            tau,
            t_max,
            r_max,
            alpha,
            ..
        } = self.params;
        if i == 0.0 {
            // Outside the thesis's range: no fg, bg takes everything.
            return Ok(Prediction {
                b: r_max,
                f: 0.0,
                b_n: 1.0,
                f_n: 1.0,
            });
        }
        let b = if self.is_priority_queue(p) {
            // Every fg request waits half a bg service on average.
            r_max - r_i / 2.0
        } else if p > t_max {
            0.0
        } else {
            let s = (1.0 - i) * t_max.as_secs_f64();
            if s < MIN_GAP_SECS {
                0.0
            } else {
                let lost = match self.params.anchor {
                    Anchor::Start => p.as_secs_f64() - tau.as_secs_f64(),
                    Anchor::End => p.as_secs_f64(),
                };
                // Clamped: the source applies the middle branch up to t_max, where it goes
                // negative once p exceeds s(i) + τ.
                (r_max - r_i).max(0.0) * ((s - lost) / s).max(0.0)
            }
        };
        let f = (r_max - b).min(r_i) * if b > 0.0 { alpha } else { 1.0 };
        Ok(Prediction {
            b,
            f,
            b_n: b / r_max,
            f_n: if r_i > 0.0 { f / r_i } else { 1.0 },
        })
    }

    /// The intensity above which bg stalls at this p (middle branch reaching 0):
    /// i* = 1 − (p − τ)/t_max start-anchored, 1 − p/t_max end-anchored; 1 where the gate is a
    /// priority queue, 0 once p exceeds t_max.
    pub fn stall_boundary(&self, p: Duration) -> f64 {
        if self.is_priority_queue(p) {
            return 1.0;
        }
        if p > self.params.t_max {
            return 0.0;
        }
        let lost = match self.params.anchor {
            Anchor::Start => p.saturating_sub(self.params.tau),
            Anchor::End => p,
        };
        (1.0 - lost.as_secs_f64() / self.params.t_max.as_secs_f64()).clamp(0.0, 1.0)
    }

    /// Whether this p leaves the gate a plain priority queue: up to τ start-anchored (the PI
    /// expires during its own fg request; at p = τ exactly it expires as the request completes,
    /// and the gate falls through P, so tact's reading puts p = τ here, where the source's
    /// "p < 1/r(i)" does not), up to the think time end-anchored.
    fn is_priority_queue(&self, p: Duration) -> bool {
        match self.params.anchor {
            Anchor::Start => p <= self.params.tau,
            Anchor::End => p <= self.params.think,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// The thesis's disk: τ = 20 ms, t_max = 100 ms, r(i) = i·r_max with r_max = 50 per second.
    fn disk(anchor: Anchor) -> Model {
        Model::new(ModelParams {
            tau: ms(20),
            t_max: ms(100),
            r_max: 50.0,
            alpha: 1.0,
            anchor,
            think: Duration::ZERO,
        })
        .unwrap()
    }

    fn at(m: &Model, i: f64, p: u64) -> Prediction {
        m.predict(i, i * m.params().r_max, ms(p)).unwrap()
    }

    #[test]
    fn below_tau_is_a_priority_queue() {
        // i = 0.4, p = 10: b = 50 − 20/2 = 40, f = min(10, 20) = 10 → f_n 0.5, b_n 0.8.
        let p = at(&disk(Anchor::Start), 0.4, 10);
        assert!((p.b - 40.0).abs() < 1e-9 && (p.f - 10.0).abs() < 1e-9);
        assert!((p.f_n - 0.5).abs() < 1e-9 && (p.b_n - 0.8).abs() < 1e-9);
    }

    #[test]
    fn middle_branch_by_hand() {
        // i = 0.2, p = 40 start-anchored: s = 80, (80 − 40 + 20)/80 = 0.75, a = 40 → b = 30;
        // f = min(50 − 30, 10) = 10 → f_n = 1.
        let p = at(&disk(Anchor::Start), 0.2, 40);
        assert!((p.b - 30.0).abs() < 1e-9, "{p:?}");
        assert!((p.f_n - 1.0).abs() < 1e-9);
        // End-anchored: (80 − 40)/80 = 0.5 → b = 20.
        let p = at(&disk(Anchor::End), 0.2, 40);
        assert!((p.b - 20.0).abs() < 1e-9, "{p:?}");
        // f_n jumps from α/2 to α just above p = τ.
        let m = Model::new(ModelParams {
            alpha: 0.9,
            ..*disk(Anchor::Start).params()
        })
        .unwrap();
        assert!((at(&m, 0.5, 20).f_n - 0.45).abs() < 1e-9);
        assert!((at(&m, 0.5, 21).f_n - 0.9).abs() < 1e-9);
    }

    #[test]
    fn negative_middle_is_clamped_and_gives_the_stall_boundaries() {
        let m = disk(Anchor::Start);
        // p = 80, i = 0.7: s = 30, numerator 30 − 80 + 20 < 0 → 0, not negative.
        assert_eq!(at(&m, 0.7, 80).b, 0.0);
        assert!((m.stall_boundary(ms(40)) - 0.8).abs() < 1e-12);
        assert!((m.stall_boundary(ms(80)) - 0.4).abs() < 1e-12);
        assert!(at(&m, 0.79, 40).b > 0.0 && at(&m, 0.81, 40).b == 0.0);
        assert!(at(&m, 0.39, 80).b > 0.0 && at(&m, 0.41, 80).b == 0.0);
        assert_eq!(m.stall_boundary(ms(10)), 1.0);
        assert_eq!(m.stall_boundary(ms(120)), 0.0);
        assert!((disk(Anchor::End).stall_boundary(ms(40)) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn full_intensity_and_zero_intensity() {
        let m = disk(Anchor::Start);
        // i = 1: s = 0; a(1) = 0, so b = 0 above τ with no 0/0.
        let p = at(&m, 1.0, 40);
        assert_eq!(p.b, 0.0);
        assert_eq!(p.f_n, 1.0);
        // Below τ the priority-queue branch still holds: fg and bg halve the device.
        let p = at(&m, 1.0, 0);
        assert!((p.b_n - 0.5).abs() < 1e-9 && (p.f_n - 0.5).abs() < 1e-9);
        // i = 0: bg gets everything, fg is unharmed.
        let p = at(&m, 0.0, 40);
        assert_eq!((p.b_n, p.f_n), (1.0, 1.0));
    }

    #[test]
    fn above_t_max_bg_starves() {
        let p = at(&disk(Anchor::Start), 0.05, 120);
        assert_eq!(p.b, 0.0);
        assert_eq!(p.f_n, 1.0);
    }

    #[test]
    fn end_anchored_priority_queue_is_up_to_the_think_time() {
        let m = Model::new(ModelParams {
            think: Duration::from_micros(10),
            ..*disk(Anchor::End).params()
        })
        .unwrap();
        assert!((at(&m, 0.5, 0).f_n - 0.5).abs() < 1e-9);
        assert!((at(&m, 0.5, 1).f_n - 1.0).abs() < 1e-9);
    }

    #[test]
    fn bad_inputs_are_named() {
        let good = *disk(Anchor::Start).params();
        let bad = |p: ModelParams| Model::new(p).unwrap_err();
        assert_eq!(
            bad(ModelParams {
                tau: Duration::ZERO,
                ..good
            }),
            ModelError::Tau
        );
        assert_eq!(
            bad(ModelParams {
                r_max: f64::NAN,
                ..good
            })
            .to_string(),
            "r_max must be positive and finite, got NaN"
        );
        assert_eq!(
            bad(ModelParams { alpha: 1.5, ..good }),
            ModelError::Alpha(1.5)
        );
        let m = disk(Anchor::Start);
        assert_eq!(
            m.predict(1.2, 1.0, ms(1)).unwrap_err(),
            ModelError::Intensity(1.2)
        );
        assert_eq!(
            m.predict(0.5, -1.0, ms(1)).unwrap_err(),
            ModelError::Baseline(-1.0)
        );
    }
}
