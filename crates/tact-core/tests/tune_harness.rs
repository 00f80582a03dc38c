//! A small deterministic pool for the TCC tests (included by `tune_transitions.rs` and
//! `tune_props.rs` with `#[path]`; as its own test target it holds no tests).
//!
//! Completions come one at a time, 1/rate after the previous one, where `rate` is a function of
//! the tasks in flight and the completion's index; `extra` adds a delay to chosen completions
//! (a stall). Input is endless or arrives in blocks. Targets apply at task boundaries: a larger
//! target starts tasks at once when there is work, a smaller one retires workers as they finish.
#![allow(dead_code)]

use std::time::Duration;

use tact_core::tune::{Load, Phase, Policy, Pressure, Reason, Tcc, Transition, TuneParams};

pub const ENDLESS: usize = usize::MAX / 4;

/// Events a pool may take to reach a steady state in [`settle`] before the test fails.
pub const SETTLE_EVENTS: usize = 4_000_000;

/// (from, to, reason, target before, target after) of a transition.
pub type Move = (Phase, Phase, Reason, usize, usize);

type Rate = Box<dyn FnMut(usize, u64) -> f64>;
type Extra = Box<dyn FnMut(u64) -> Duration>;
type Utilization = Box<dyn FnMut(usize) -> f64>;
type Stalls = Box<dyn FnMut(usize, Duration) -> Pressure>;

/// A host's PSI reader: the readings as a function of the tasks in flight and the time,
/// reported at the first event after each period ends.
pub struct Psi {
    pub every: Duration,
    pub stalls: Stalls,
    next: Duration,
}

/// A host's bottleneck sampler: the utilization as a function of the tasks in flight,
/// time-weighted over each period and reported at the first event after the period ends.
pub struct Hint {
    pub every: Duration,
    pub util: Utilization,
    next: Duration,
    sum: f64,
    time: f64,
}

pub struct Pool {
    pub tcc: Tcc,
    pub now: Duration,
    pub in_flight: usize,
    pub queued: usize,
    pub completions: u64,
    pub rate: Rate,
    pub extra: Extra,
    /// Blocks of input: (size, period); the next arrival time.
    pub blocks: Option<(usize, Duration)>,
    pub next_arrival: Option<Duration>,
    next_completion: Option<Duration>,
    pub trace: Vec<Transition>,
    pub targets: Vec<(Duration, usize)>,
    pub hint: Option<Hint>,
    pub psi: Option<Psi>,
}

/// The paper's reproduction parameters (fixed 50 s steady state) from `n_init` workers.
pub fn paper(n_init: usize) -> TuneParams {
    TuneParams {
        n_init,
        ..TuneParams::paper()
    }
}

/// Parameters for property runs over raw events, from `n_min` to `n_min + span` workers: three
/// initial batches and a fixed steady state of `steady`, so that a few hundred events reach
/// every state.
pub fn sparse(n_min: usize, span: usize, steady: Duration, seed: u64) -> TuneParams {
    TuneParams {
        n_min,
        n_max: n_min + span,
        n_init: n_min,
        n_star: 3,
        steady_min: steady,
        steady_max: steady,
        seed,
        ..TuneParams::default()
    }
}

/// Makes one call into `tcc` and checks the contract every answer keeps: the target stays in
/// [n_min, n_max], and an answer comes exactly when the target changed, naming the new one.
pub fn call_checked(tcc: &mut Tcc, call: impl FnOnce(&mut Tcc) -> Option<usize>) {
    let before = tcc.target();
    let answer = call(tcc);
    let after = tcc.target();
    let (lo, hi) = (tcc.params().n_min, tcc.params().n_max);
    assert!(
        (lo..=hi).contains(&after),
        "target {after} outside [{lo}, {hi}]"
    );
    match answer {
        Some(n) => assert!(n == after && n != before, "answer {n}, {before} → {after}"),
        None => assert_eq!(after, before),
    }
}

/// `pool` run until it has entered Steady `k` times (where it is then).
pub fn settle(mut pool: Pool, k: usize) -> Pool {
    assert!(pool.until_steady(k, SETTLE_EVENTS), "no steady state");
    assert_eq!(pool.tcc.phase(), Phase::Steady);
    pool
}

impl Pool {
    pub fn new(params: TuneParams, rate: impl FnMut(usize, u64) -> f64 + 'static) -> Pool {
        Pool::with_input(params, rate, None)
    }

    pub fn with_input(
        params: TuneParams,
        rate: impl FnMut(usize, u64) -> f64 + 'static,
        blocks: Option<(usize, Duration)>,
    ) -> Pool {
        let tcc = Tcc::new(params).expect("valid parameters");
        let mut pool = Pool {
            tcc,
            now: Duration::ZERO,
            in_flight: 0,
            queued: blocks.map_or(ENDLESS, |b| b.0),
            completions: 0,
            rate: Box::new(rate),
            extra: Box::new(|_| Duration::ZERO),
            blocks,
            next_arrival: blocks.map(|b| b.1),
            next_completion: None,
            trace: Vec::new(),
            targets: Vec::new(),
            hint: None,
            psi: None,
        };
        pool.targets.push((Duration::ZERO, pool.tcc.target()));
        pool.fill();
        let answer = pool.tcc.on_start(Duration::ZERO, pool.load());
        pool.apply(answer);
        pool.schedule();
        pool
    }

    /// Reports the bottleneck's utilization `util(in flight)` every `every` from now on.
    pub fn with_hint(mut self, every: Duration, util: impl FnMut(usize) -> f64 + 'static) -> Pool {
        self.hint = Some(Hint {
            every,
            util: Box::new(util),
            next: self.now + every,
            sum: 0.0,
            time: 0.0,
        });
        self
    }

    /// Reports `stalls(in flight, now)` every `every` from now on.
    pub fn with_pressure(
        mut self,
        every: Duration,
        stalls: impl FnMut(usize, Duration) -> Pressure + 'static,
    ) -> Pool {
        self.psi = Some(Psi {
            every,
            stalls: Box::new(stalls),
            next: self.now + every,
        });
        self
    }

    /// Reports the pressure once a period has ended.
    fn sample_pressure(&mut self, to: Duration) {
        let in_flight = self.in_flight;
        let Some(psi) = self.psi.as_mut() else {
            return;
        };
        if to < psi.next {
            return;
        }
        psi.next = to + psi.every;
        let reading = (psi.stalls)(in_flight, to);
        self.now = to;
        let answer = self.tcc.on_pressure(to, reading);
        self.apply(answer);
    }

    /// Integrates the utilization up to `to`, and reports it once a period has ended.
    fn sample_hint(&mut self, to: Duration) {
        let in_flight = self.in_flight;
        let Some(h) = self.hint.as_mut() else {
            return;
        };
        let dt = (to - self.now).as_secs_f64();
        h.sum += (h.util)(in_flight) * dt;
        h.time += dt;
        if to < h.next || h.time <= 0.0 {
            return;
        }
        let u = h.sum / h.time;
        (h.sum, h.time) = (0.0, 0.0);
        h.next = to + h.every;
        self.now = to;
        let answer = self.tcc.on_hint(to, u);
        self.apply(answer);
    }

    pub fn load(&self) -> Load {
        Load::new(self.in_flight, self.queued)
    }

    fn fill(&mut self) -> bool {
        let mut started = false;
        while self.in_flight < self.tcc.target() && self.queued > 0 {
            self.in_flight += 1;
            if self.queued != ENDLESS {
                self.queued -= 1;
            }
            started = true;
        }
        started
    }

    fn apply(&mut self, mut answer: Option<usize>) {
        while let Some(n) = answer {
            self.targets.push((self.now, n));
            answer = if self.fill() {
                self.tcc.on_start(self.now, self.load())
            } else {
                None
            };
        }
        self.trace.extend(self.tcc.drain_trace());
    }

    fn schedule(&mut self) {
        self.next_completion = (self.in_flight > 0).then(|| {
            let r = (self.rate)(self.in_flight, self.completions);
            self.now + Duration::from_secs_f64(1.0 / r) + (self.extra)(self.completions)
        });
    }

    /// Handles the next event (a completion or an arrival); false when nothing can happen.
    pub fn step(&mut self) -> bool {
        let arrival_first = match (self.next_arrival, self.next_completion) {
            (Some(a), Some(c)) => a <= c,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return false,
        };
        let at = if arrival_first {
            self.next_arrival.unwrap()
        } else {
            self.next_completion.unwrap()
        };
        if self.hint.is_some() {
            let before = self.in_flight;
            self.sample_hint(at);
            if self.in_flight != before {
                // The report grew the target: the started tasks change the next completion.
                self.schedule();
                return true;
            }
        }
        if self.psi.is_some() {
            let before = self.in_flight;
            self.sample_pressure(at);
            if self.in_flight != before {
                self.schedule();
                return true;
            }
        }
        if arrival_first {
            let (size, every) = self.blocks.expect("arrivals come from blocks");
            self.now = self.next_arrival.unwrap();
            self.next_arrival = Some(self.now + every);
            self.queued += size;
            let before = self.in_flight;
            let answer = if self.fill() {
                self.tcc.on_start(self.now, self.load())
            } else {
                self.tcc.on_load(self.now, self.load())
            };
            self.apply(answer);
            if before == 0 || self.in_flight != before {
                self.schedule();
            }
        } else {
            self.now = self.next_completion.unwrap();
            self.in_flight -= 1;
            self.completions += 1;
            self.fill();
            let answer = self.tcc.on_complete(self.now, self.load());
            self.apply(answer);
            self.schedule();
        }
        true
    }

    /// Steps until `done` holds (true) or `max` events passed (false).
    pub fn run_until(&mut self, max: usize, mut done: impl FnMut(&Pool) -> bool) -> bool {
        for _ in 0..max {
            if done(self) {
                return true;
            }
            if !self.step() {
                return false;
            }
        }
        done(self)
    }

    /// Runs until the controller has entered Steady `k` times.
    pub fn until_steady(&mut self, k: usize, max: usize) -> bool {
        self.run_until(max, |p| {
            p.trace.iter().filter(|t| t.to == Phase::Steady).count() >= k
        })
    }

    /// The trace as moves.
    pub fn moves(&self) -> Vec<Move> {
        self.trace
            .iter()
            .map(|t| (t.from, t.to, t.reason, t.target_from, t.target_to))
            .collect()
    }

    /// The moves up to the first entry into Steady, that entry included: the exploration.
    pub fn exploration(&self) -> Vec<Move> {
        self.moves()[..=self.steady_entry()].to_vec()
    }

    /// The first steady state: the transition that entered it and the one that ended it.
    pub fn first_steady(&self) -> (&Transition, &Transition) {
        let entry = self.steady_entry();
        let end = &self.trace[entry + 1];
        assert_eq!(end.from, Phase::Steady);
        (&self.trace[entry], end)
    }

    fn steady_entry(&self) -> usize {
        self.trace
            .iter()
            .position(|t| t.to == Phase::Steady)
            .expect("a steady state")
    }
}

/// A tiny deterministic generator for noisy rates.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}
