//! The TCC controller (spec §2.5): a pure state machine over completion events.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use super::decide::{n1_hat, verdict, Outcome};
use super::params::{ParamError, TuneParams};
use super::policy::{Event, Load, Phase, Policy, Reason, Transition};
use super::samples::{SampleSet, Summary};
use crate::stats::normal_quantile;

/// A measured configuration, kept after the controller has moved on (C₁, or the cycle's best).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Config {
    n: usize,
    s: Summary,
    /// Busy time from the change to this count until it held n* batches (or its whole busy time
    /// if it never did).
    to_nstar: Duration,
}

/// Where the settling after a change stands (spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Completions are ignored until the number in flight equals the target.
    InFlight,
    /// Then this many more.
    Skip(usize),
    Done,
}

/// What a host or a CLI can show about the controller.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub phase: Phase,
    pub target: usize,
    pub cycle: u64,
    /// Batch size b of the current cycle.
    pub batch_size: usize,
    /// Raw samples and complete batches of the configuration being measured.
    pub samples: usize,
    pub batches: u32,
    /// Trimmed throughput of the configuration being measured (completions per busy second).
    pub throughput: Option<f64>,
    /// The cycle's best configuration so far: count and trimmed throughput.
    pub best: Option<(usize, f64)>,
    /// Busy time since the origin: time the pool was saturated.
    pub busy: Duration,
    pub saturated: bool,
    pub settling: bool,
    /// Decisions taken at a dwell cap from the point estimate.
    pub forced_decisions: u64,
    /// Events whose time was earlier than the one before (treated as simultaneous).
    pub clock_regressions: u64,
    /// Transitions dropped from a full trace buffer.
    pub trace_dropped: u64,
}

/// Throughput-guided concurrency control.
#[derive(Debug, Clone)]
pub struct Tcc {
    params: TuneParams,
    z: f64,
    phase: Phase,
    target: usize,
    prev: usize,
    cycle: u64,

    // Busy clock (spec §2.2, Figure 6).
    last_at: Option<Duration>,
    load: Load,
    saturated: bool,
    busy: Duration,
    /// Busy clock at the last completion, while no starved period has followed it.
    mark: Option<Duration>,

    // The configuration being measured.
    b: usize,
    cur: SampleSet,
    config_start: Duration,
    to_nstar: Option<Duration>,
    settle: Settle,
    autocorr_next: u32,
    reference: Option<Config>,
    best: Option<Config>,

    // Steady state.
    steady_ref: Option<Summary>,
    strikes: u32,
    steady_timeout: Duration,
    cycle_start: Duration,
    rng: u64,

    trace: VecDeque<Transition>,
    trace_dropped: u64,
    forced: u64,
    clock_regressions: u64,
}

impl Tcc {
    /// A controller in the first cycle's Base state at `n_init` (no cut), after validating the
    /// parameters.
    pub fn new(params: TuneParams) -> Result<Self, ParamError> {
        params.validate()?;
        let z = normal_quantile(1.0 - params.alpha).expect("alpha validated in (0, 0.5)");
        let n = params.n_init;
        let b = batch_for(&params, n);
        Ok(Tcc {
            z,
            phase: Phase::Base,
            target: n,
            prev: n,
            cycle: 0,
            last_at: None,
            load: Load::default(),
            saturated: false,
            busy: Duration::ZERO,
            mark: None,
            b,
            cur: SampleSet::new(b, params.trim),
            config_start: Duration::ZERO,
            to_nstar: None,
            settle: Settle::InFlight,
            autocorr_next: params.n_star,
            reference: None,
            best: None,
            steady_ref: None,
            strikes: 0,
            steady_timeout: params.steady_max,
            cycle_start: Duration::ZERO,
            rng: params.seed,
            trace: VecDeque::new(),
            trace_dropped: 0,
            forced: 0,
            clock_regressions: 0,
            params,
        })
    }

    pub fn params(&self) -> &TuneParams {
        &self.params
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Z = Φ⁻¹(1 − α).
    pub fn z(&self) -> f64 {
        self.z
    }

    /// Busy time since the origin.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// The steady state's timeout in force (busy time).
    pub fn steady_timeout(&self) -> Duration {
        self.steady_timeout
    }

    pub fn status(&self) -> Status {
        let s = self.cur.summary();
        Status {
            phase: self.phase,
            target: self.target,
            cycle: self.cycle,
            batch_size: self.b,
            samples: self.cur.len(),
            batches: s.batches,
            throughput: (s.batches > 0).then(|| s.throughput()),
            best: self.best.map(|c| (c.n, c.s.throughput())),
            busy: self.busy,
            saturated: self.saturated,
            settling: self.settle != Settle::Done,
            forced_decisions: self.forced,
            clock_regressions: self.clock_regressions,
            trace_dropped: self.trace_dropped,
        }
    }

    fn handle(&mut self, event: Event) {
        let mut at = event.at();
        if let Some(last) = self.last_at {
            if at < last {
                self.clock_regressions += 1;
                at = last;
            }
            if self.saturated {
                self.busy += at - last;
            }
        }
        let advanced = self.last_at.is_some_and(|last| self.saturated && at > last);
        self.last_at = Some(at);

        let mut sampled = false;
        if let Event::Complete { .. } = event {
            if let Some(mark) = self.mark {
                let x = (self.busy - mark).as_secs_f64();
                match self.settle {
                    Settle::Done => {
                        self.cur.push(x);
                        sampled = true;
                        if self.to_nstar.is_none()
                            && self.cur.summary().batches >= self.params.n_star
                        {
                            self.to_nstar = Some(self.busy - self.config_start);
                        }
                    }
                    Settle::Skip(k) => {
                        self.settle = if k <= 1 {
                            Settle::Done
                        } else {
                            Settle::Skip(k - 1)
                        };
                    }
                    Settle::InFlight => {}
                }
            }
            self.mark = Some(self.busy);
        }
        if let Some(load) = event.load() {
            self.load = load;
        }
        self.refresh_load();
        if sampled || advanced {
            self.step(at);
        }
    }

    /// Saturation and settling after the load or the target changed.
    fn refresh_load(&mut self) {
        self.saturated = self.load.saturated(self.target);
        if !self.saturated {
            self.mark = None;
        }
        if self.settle == Settle::InFlight && self.load.in_flight == self.target {
            self.settle = Settle::Skip(self.target.max(self.b));
        }
    }

    fn here(&self) -> Duration {
        self.busy - self.config_start
    }

    fn at_cap(&self, cap: Duration) -> bool {
        self.here() >= cap || self.cur.len() >= self.params.max_samples
    }

    fn config(&self) -> Config {
        Config {
            n: self.target,
            s: self.cur.summary(),
            to_nstar: self.to_nstar.unwrap_or(self.here()),
        }
    }

    fn keep_best(&mut self, c: Config) {
        match self.best {
            Some(b) if c.s.throughput() <= b.s.throughput() => {}
            _ => self.best = Some(c),
        }
    }

    /// Batches a configuration needs before it can serve as C₁ for gain `q`.
    fn n1(&self, s: &Summary, q: f64) -> f64 {
        let n = n1_hat(s.sd(), s.mean, q, self.params.beta, self.z);
        n.max(f64::from(self.params.n_star))
    }

    fn step(&mut self, at: Duration) {
        match self.phase {
            Phase::Base => self.step_base(at),
            Phase::Add => self.step_add(at),
            Phase::Max => self.step_max(at),
            Phase::Remove => self.step_remove(at),
            Phase::Steady => self.step_steady(at),
        }
    }

    fn step_base(&mut self, at: Duration) {
        if self.settle != Settle::Done {
            return;
        }
        let mut s = self.cur.summary();
        if s.batches >= self.autocorr_next && self.b < self.params.batch_max as usize {
            // Batch means equal to a part in a million need no wider batches (and their
            // autocorrelation is rounding noise).
            let constant = s.sd() <= 1e-6 * s.mean;
            if !constant && self.cur.autocorrelation() > self.params.autocorr_max {
                self.cur.double_batch();
                self.b = self.cur.batch_size();
                self.autocorr_next = self.params.n_star;
                self.to_nstar = None;
                s = self.cur.summary();
                if s.batches >= self.params.n_star {
                    self.to_nstar = Some(self.here());
                }
            } else {
                self.autocorr_next = s.batches.saturating_mul(2);
            }
        }
        let p = &self.params;
        let n = self.target;
        let up = p.add_step(n);
        let need = if up == n {
            f64::from(p.n_star)
        } else {
            self.n1(&s, p.q_eff(n, up))
        };
        let ready = f64::from(s.batches) >= need;
        let forced = !ready && self.at_cap(p.dwell) && s.batches >= 2;
        if !(ready || forced) {
            return;
        }
        self.forced += u64::from(forced);
        let c = self.config();
        self.reference = Some(c);
        self.best = Some(c);
        if up == n {
            self.enter(at, Phase::Max, Reason::Ceiling, forced);
        } else {
            self.go(at, Phase::Add, up, self.target, Reason::Measured, forced);
        }
    }

    fn step_add(&mut self, at: Duration) {
        let p = self.params.clone();
        let r = self.reference.expect("Add always has a reference");
        let s = self.cur.summary();
        // The thrashing guard's early trips (spec §2.3); the second runs during settling too,
        // since a thrashing count may not even finish settling.
        if s.batches >= 5 && s.throughput() < 0.5 * r.s.throughput() {
            return self.revoke(at, Reason::GuardSlow);
        }
        if self.here() > r.to_nstar * 4 && s.batches < p.n_star / 2 {
            return self.revoke(at, Reason::GuardStalled);
        }
        if self.settle != Settle::Done {
            return;
        }
        let forced = self.at_cap(p.dwell);
        let q = p.q_eff(self.prev, self.target);
        match verdict(&r.s, &s, q, p.beta, self.z, p.n_star, forced) {
            Outcome::Pending => {}
            Outcome::Better => {
                let c = self.config();
                self.keep_best(c);
                let n = self.target;
                let up = p.add_step(n);
                if up == n {
                    self.forced += u64::from(forced);
                    self.enter(at, Phase::Max, Reason::Ceiling, forced);
                } else if f64::from(s.batches) >= self.n1(&s, p.q_eff(n, up)) || forced {
                    self.forced += u64::from(forced);
                    self.reference = Some(c);
                    self.go(at, Phase::Add, up, n, Reason::Better, forced);
                }
                // Otherwise keep measuring this count until it can serve as C₁.
            }
            Outcome::NotBetter => {
                self.forced += u64::from(forced);
                if s.throughput() < r.s.throughput() {
                    self.revoke(at, Reason::Decline);
                } else {
                    self.enter(at, Phase::Max, Reason::Flat, forced);
                }
            }
        }
    }

    /// The thrashing guard: back to the count before the add (its samples are C₁'s), then remove.
    fn revoke(&mut self, at: Duration, reason: Reason) {
        let r = self.reference.expect("Add always has a reference");
        self.keep_best(r);
        let back = self.prev;
        if !self.params.remove || back <= self.params.n_min {
            self.go_steady(at, back, reason, false);
        } else {
            let down = self.params.remove_step(back);
            self.go(at, Phase::Remove, down, back, reason, false);
        }
    }

    fn step_max(&mut self, at: Duration) {
        if self.settle != Settle::Done {
            return;
        }
        let p = &self.params;
        let s = self.cur.summary();
        let need = n1_hat(s.sd(), s.mean, -p.delta, p.beta, self.z).max(2.0 * f64::from(p.n_star));
        let ready = f64::from(s.batches) >= need;
        let forced = !ready && self.at_cap(p.max_dwell) && s.batches >= 2;
        if !(ready || forced) {
            return;
        }
        self.forced += u64::from(forced);
        let c = self.config();
        self.keep_best(c);
        let n = self.target;
        if !self.params.remove || n <= self.params.n_min {
            self.go_steady(at, n, Reason::Floor, forced);
        } else {
            let down = self.params.remove_step(n);
            self.go(at, Phase::Remove, down, n, Reason::MaxDone, forced);
        }
    }

    fn step_remove(&mut self, at: Duration) {
        if self.settle != Settle::Done {
            return;
        }
        let p = &self.params;
        let best = self.best.expect("Remove always has a best");
        let s = self.cur.summary();
        let forced = self.at_cap(p.dwell);
        match verdict(&best.s, &s, -p.delta, p.beta, self.z, p.n_star, forced) {
            Outcome::Pending => {}
            Outcome::Better => {
                self.forced += u64::from(forced);
                let c = self.config();
                self.keep_best(c);
                let n = self.target;
                if n <= self.params.n_min {
                    self.go_steady(at, n, Reason::Floor, forced);
                } else {
                    let down = self.params.remove_step(n);
                    self.go(at, Phase::Remove, down, n, Reason::Kept, forced);
                }
            }
            Outcome::NotBetter => {
                self.forced += u64::from(forced);
                self.go_steady(at, self.prev, Reason::Lost, forced);
            }
        }
    }

    fn step_steady(&mut self, at: Duration) {
        if self.here() >= self.steady_timeout {
            return self.begin_cycle(at, Reason::Timeout);
        }
        let s = self.cur.summary();
        if s.batches < self.params.n_star {
            return;
        }
        match self.steady_ref {
            None => self.steady_ref = Some(s),
            Some(r) => {
                let ratio = s.throughput() / r.throughput();
                let outside = |k: f64| !(1.0 / k..=k).contains(&ratio);
                let mild = outside(self.params.shift);
                if outside(self.params.shift_hard) || (mild && self.strikes >= 1) {
                    return self.begin_cycle(at, Reason::Shift);
                }
                self.strikes = if mild { self.strikes + 1 } else { 0 };
            }
        }
        // The next window (the sample chain continues: no settling).
        self.cur = SampleSet::new(self.b, self.params.trim);
    }

    fn begin_cycle(&mut self, at: Duration, reason: Reason) {
        self.cycle += 1;
        self.cycle_start = self.busy;
        let base = self.params.base_count(self.target);
        self.b = batch_for(&self.params, base);
        self.autocorr_next = self.params.n_star;
        self.reference = None;
        self.best = None;
        let n = self.target;
        self.go(at, Phase::Base, base, n, reason, false);
    }

    fn go_steady(&mut self, at: Duration, n: usize, reason: Reason, forced: bool) {
        let len = (self.busy - self.cycle_start).as_secs_f64();
        let u = self.uniform();
        let p = &self.params;
        let t =
            (p.steady_factor * len).clamp(p.steady_min.as_secs_f64(), p.steady_max.as_secs_f64());
        let jitter = 1.0 + p.steady_jitter * (2.0 * u - 1.0);
        self.steady_timeout = Duration::from_secs_f64(t * jitter);
        self.steady_ref = None;
        self.strikes = 0;
        let prev = self.target;
        self.go(at, Phase::Steady, n, prev, reason, forced);
    }

    /// Changes state and count: a new configuration starts measuring after settling. `prev` is
    /// the count an add is compared against, or a failed removal restores.
    fn go(
        &mut self,
        at: Duration,
        phase: Phase,
        n: usize,
        prev: usize,
        reason: Reason,
        forced: bool,
    ) {
        self.record(at, phase, n, reason, forced);
        self.phase = phase;
        self.prev = prev;
        self.target = n.clamp(self.params.n_min, self.params.n_max);
        self.cur = SampleSet::new(self.b, self.params.trim);
        self.config_start = self.busy;
        self.to_nstar = None;
        self.settle = Settle::InFlight;
        self.refresh_load();
    }

    /// Changes state only, keeping the count and its samples.
    fn enter(&mut self, at: Duration, phase: Phase, reason: Reason, forced: bool) {
        self.record(at, phase, self.target, reason, forced);
        self.phase = phase;
    }

    fn record(&mut self, at: Duration, to: Phase, n: usize, reason: Reason, forced: bool) {
        let s = self.cur.summary();
        let t = Transition {
            at,
            busy: self.busy,
            cycle: self.cycle,
            from: self.phase,
            to,
            reason,
            target_from: self.target,
            target_to: n,
            throughput: (s.batches > 0).then(|| s.throughput()),
            batches: s.batches,
            forced,
        };
        self.trace.push_back(t);
        while self.trace.len() > self.params.trace_capacity {
            self.trace.pop_front();
            self.trace_dropped += 1;
        }
    }

    /// Uniform in [0, 1) from a SplitMix64 stream seeded by `params.seed`.
    fn uniform(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// b = max(batch_min, n), at most batch_max.
fn batch_for(p: &TuneParams, n: usize) -> usize {
    n.max(p.batch_min as usize).min(p.batch_max as usize)
}

impl Policy for Tcc {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let before = self.target;
        self.handle(event);
        (self.target != before).then_some(self.target)
    }

    fn drain_trace(&mut self) -> Vec<Transition> {
        self.trace.drain(..).collect()
    }
}
