//! A non-preemptive single-server resource with a fixed service time (the thesis's disk), the
//! thesis's load generator, and the idletime [`Scheduler`] in front of it, in integer-nanosecond
//! virtual time.
//!
//! The fg generator runs a cycle of t_max on absolute deadlines: busy for i·t_max with
//! closed-loop requests (one outstanding, the next issued a think time after each completion
//! while the busy window lasts), then idle until the next cycle. Bg is greedy with one request
//! outstanding: its next request is queued before its previous one completes, so the gate sees
//! a b event at every bg completion, as with the thesis's queue of bg reads.

use std::time::Duration;

use serde::Serialize;
use tact_core::idle::{
    Anchor, Class, Counters, Gate, GateParams, Scheduler, Tuner, TunerParams, Variant,
};

use crate::rng::SimRng;

/// The machine and the generator's constants.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rig {
    /// τ, the service time of every request.
    pub tau: Duration,
    /// fg think time between a completion and the next request.
    pub think: Duration,
    /// The generator's cycle, t_max.
    pub t_max: Duration,
    /// Cycles simulated.
    pub cycles: u32,
    /// Service times vary uniformly within τ·(1 ± jitter); 0 is the exact rig.
    pub jitter: f64,
    pub seed: u64,
}

impl Rig {
    /// The spec's exact rig for the thesis's disk: τ = 20 ms, 10 µs think time, t_max = 100 ms,
    /// 300 cycles (30 s, one of the thesis's runs per point).
    pub fn disk() -> Rig {
        Rig {
            tau: Duration::from_millis(20),
            think: Duration::from_micros(10),
            t_max: Duration::from_millis(100),
            cycles: 300,
            jitter: 0.0,
            seed: 1,
        }
    }

    pub fn horizon(&self) -> Duration {
        self.t_max * self.cycles
    }

    /// The first time at or after `t` inside a busy window of intensity `i`.
    fn next_busy(&self, t: Duration, i: f64) -> Duration {
        let period = self.t_max.as_nanos();
        let busy = (i * period as f64).round() as u128;
        let t_ns = t.as_nanos();
        let phase = t_ns % period;
        let at = if phase < busy {
            t_ns
        } else {
            t_ns - phase + period
        };
        Duration::from_nanos(at as u64)
    }
}

/// How p is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Preempt {
    Fixed(Duration),
    /// `--preempt auto`: the tuner sets p from the gate's counters.
    Auto(TunerParams),
}

/// One run: the fg intensity, whether greedy bg competes, and the gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Setup {
    pub intensity: f64,
    pub bg: bool,
    pub anchor: Anchor,
    pub variant: Variant,
    pub preempt: Preempt,
}

impl Setup {
    /// The fg alone: the baseline r(i).
    pub fn baseline(intensity: f64) -> Setup {
        Setup {
            intensity,
            bg: false,
            anchor: Anchor::Start,
            variant: Variant::V1,
            preempt: Preempt::Fixed(Duration::ZERO),
        }
    }

    /// Greedy bg against the fg behind a fixed-p gate, variant 1.
    pub fn gated(intensity: f64, anchor: Anchor, pi: Duration) -> Setup {
        Setup {
            intensity,
            bg: true,
            anchor,
            variant: Variant::V1,
            preempt: Preempt::Fixed(pi),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Requests completed within the horizon.
    pub fg_done: u64,
    pub bg_done: u64,
    /// Mean fg response time (arrival to completion).
    pub fg_latency: Duration,
    pub counters: Counters,
    /// p at the end, and p averaged over time (they equal the fixed p without the tuner).
    pub final_pi: Duration,
    pub mean_pi: Duration,
}

/// Runs one setup on the rig. Checks the model's axioms for c = 1 at every step: at most one
/// request in service (A4), and the server never idle while a fg request waits (A6 for fg).
pub fn run(rig: &Rig, setup: &Setup) -> Outcome {
    assert!(
        (0.0..=1.0).contains(&setup.intensity),
        "intensity {}",
        setup.intensity
    );
    let horizon = rig.horizon();
    let (initial_pi, mut tuner) = match setup.preempt {
        Preempt::Fixed(p) => (p, None),
        Preempt::Auto(params) => {
            let t = Tuner::new(params).expect("valid tuner parameters");
            (t.pi(), Some(t))
        }
    };
    let mut sched = Scheduler::new(Gate::new(GateParams {
        pi: initial_pi,
        anchor: setup.anchor,
        variant: setup.variant,
    }));
    let mut rng = SimRng::stream(rig.seed, 1);
    let mut service = || {
        if rig.jitter == 0.0 {
            rig.tau
        } else {
            rig.tau
                .mul_f64(rng.between(1.0 - rig.jitter, 1.0 + rig.jitter))
        }
    };

    let mut fg_next = (setup.intensity > 0.0).then_some(Duration::ZERO);
    // The fg request issued and not yet started (one outstanding), and its arrival.
    let mut fg_arrival = Duration::ZERO;
    let mut in_service: Option<(Duration, Class)> = None;
    let (mut fg_done, mut bg_done) = (0u64, 0u64);
    let mut latency_sum = Duration::ZERO;
    let (mut pi_area, mut pi_since, mut pi_now) = (0f64, Duration::ZERO, initial_pi);

    let mut start = |class: Option<Class>, now: Duration, in_service: &mut Option<_>| {
        if let Some(class) = class {
            assert!(
                in_service.is_none(),
                "A4: two requests in service at {now:?}"
            );
            *in_service = Some((now + service(), class));
        }
    };
    if setup.bg {
        let c = sched.bg_arrive(Duration::ZERO);
        start(c, Duration::ZERO, &mut in_service);
    }
    loop {
        // Ties: completions, then timers, then fg arrivals.
        let candidates = [in_service.map(|s| s.0), sched.wake_at(), fg_next];
        let Some((kind, now)) = candidates
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|t| (k, t)))
            .min_by_key(|&(k, t)| (t, k))
        else {
            break;
        };
        if now > horizon {
            break;
        }
        let started = match kind {
            0 => {
                let (_, class) = in_service.take().expect("a request in service");
                match class {
                    Class::Fg => {
                        fg_done += 1;
                        latency_sum += now - fg_arrival;
                        fg_next = Some(rig.next_busy(now + rig.think, setup.intensity));
                    }
                    Class::Bg => {
                        bg_done += 1;
                        // Greedy: the next bg request is already waiting.
                        sched.bg_arrive(now);
                    }
                }
                sched.complete(now)
            }
            1 => sched.timer(now),
            _ => {
                fg_next = None;
                fg_arrival = now;
                sched.fg_arrive(now)
            }
        };
        start(started, now, &mut in_service);
        assert!(
            in_service.is_some() || sched.fg_queued() == 0,
            "A6: fg waits on an idle server at {now:?}"
        );
        if let Some(t) = tuner.as_mut() {
            if let Some(p) = t.observe(now, sched.gate().counters()) {
                pi_area += pi_now.as_secs_f64() * (now - pi_since).as_secs_f64();
                pi_since = now;
                pi_now = p;
                sched.set_pi(p);
            }
        }
    }
    pi_area += pi_now.as_secs_f64() * horizon.saturating_sub(pi_since).as_secs_f64();
    Outcome {
        fg_done,
        bg_done,
        fg_latency: if fg_done == 0 {
            Duration::ZERO
        } else {
            latency_sum / fg_done as u32
        },
        counters: *sched.gate().counters(),
        final_pi: pi_now,
        mean_pi: Duration::from_secs_f64(pi_area / horizon.as_secs_f64()),
    }
}
