//! Runs TCC controllers against a throughput model in virtual time (spec §4, oracle mode), and
//! other policies by spec string for comparison (spec X7: Vegas+ and Vegas++).
//!
//! Each pool's completions form a renewal process whose rate is the model's throughput for the
//! tasks currently in flight (all pools' counts together), with deterministic, exponential or
//! Pareto spacing drawn from one seeded stream per pool. Targets apply at task boundaries, as in
//! a real pool: a larger target starts tasks at once (when there is work), a smaller one retires
//! workers as their tasks complete. Time is integer nanoseconds; there are no threads and no
//! clock reads, so a run is a pure function of its [`Scenario`].
//!
//! Pools may be coordinated ([`Turns`]): the driver is then the host of spec §6 item 4, holding
//! one lock all pools take turns on, or granting every pool the turn at shared epochs, and
//! telling every pool of the others' completions (`Policy::on_peer_completions`) and, as each
//! pool starts, how many have started (`Policy::set_instances`).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tact_core::tune::{
    policy_from_spec, Decision, Event, Load, Phase, Policy, Pressure, Status, Tcc, Transition,
    TuneParams,
};

use super::model::{Operating, ThroughputModel};
use crate::rng::SimRng;

/// The spacing of one pool's completions around their mean 1/X.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Spacing {
    /// Exactly 1/X: the noise-free runs of the paper's Figure 5.
    Deterministic,
    Exponential,
    /// Pareto with shape k (> 1) and the same mean; k = 2.5 is the paper's service times.
    Pareto {
        k: f64,
    },
}

impl Spacing {
    /// A spacing (or service time) around `mean` seconds; `tune::des` draws its service times
    /// with it too.
    pub(crate) fn draw(&self, rng: &mut SimRng, mean: f64) -> f64 {
        match *self {
            Spacing::Deterministic => mean,
            Spacing::Exponential => -(1.0 - rng.uniform()).ln() * mean,
            Spacing::Pareto { k } => {
                let scale = mean * (k - 1.0) / k;
                scale * (1.0 - rng.uniform()).powf(-1.0 / k)
            }
        }
    }
}

/// Where a pool's tasks come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Input {
    /// The queue never runs dry.
    Endless,
    /// `size` tasks arrive every `every`, the first at the pool's start.
    Blocks { size: usize, every: Duration },
}

/// Rare long pauses (garbage collection): with this probability a completion comes `length`
/// later than drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stall {
    pub probability: f64,
    pub length: Duration,
}

/// Completions carry a latency, for the latency-based baselines (TCC ignores it). By Little's
/// law a task's mean response time is N/X at the counts in force; `fixed` of it is a timer every
/// task waits out (the model's delay station), and the rest (service and queueing) is drawn with
/// the scenario's spacing around its mean, since service times vary from task to task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub fixed: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolSpec {
    pub params: TuneParams,
    /// A policy spec ([`policy_from_spec`]: `vegas+`, `vegas++:x1=35.7`, ...) that runs the pool
    /// instead of TCC; `params` then give only its first target (n_init) and its n_max.
    pub policy: Option<String>,
    pub start: Duration,
    pub input: Input,
    /// The host reports the bottleneck's utilization (everyone's, competitors included) with
    /// every tick, time-weighted over the tick, as `tact tune --bottleneck` does
    /// ([`tact_core::tune::Policy::on_hint`]).
    pub hint: bool,
    /// With `hint`: the reports begin only at the pool's first entry into Steady (a host that
    /// attaches its meter late), which leaves that steady state wherever throughput alone put it.
    pub hint_late: bool,
}

impl PoolSpec {
    pub fn new(params: TuneParams) -> Self {
        PoolSpec {
            params,
            policy: None,
            start: Duration::ZERO,
            input: Input::Endless,
            hint: false,
            hint_late: false,
        }
    }

    /// Whether the host (the driver, or `tune::des`) reports the bottleneck's utilization now.
    pub(crate) fn reports(&self, run: &PoolRun) -> bool {
        self.hint && (!self.hint_late || run.transitions.iter().any(|t| t.to == Phase::Steady))
    }
}

/// How the host coordinates the pools' explorations (spec §6 item 4; `Policy::coordinate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Turns {
    /// Independent controllers, as without a host that coordinates.
    Off,
    /// Turn-taking: one exclusive lock. A pool that wants the turn and does not hold it queues
    /// for it; the lock goes to the longest waiting (ties to the lower index) as soon as its
    /// holder no longer wants it, and is granted at once.
    Lock,
    /// Loose synchronization: every started pool is granted the turn at each multiple of
    /// `period` from time 0 (a no-op for a pool with nothing due).
    Epoch { period: Duration },
}

#[derive(Clone)]
pub struct Scenario {
    pub model: Arc<dyn ThroughputModel>,
    /// Model switches: from each time on, the given model holds.
    pub changes: Vec<(Duration, Arc<dyn ThroughputModel>)>,
    pub pools: Vec<PoolSpec>,
    pub spacing: Spacing,
    pub stall: Option<Stall>,
    pub duration: Duration,
    /// Period of the ticks every controller receives.
    pub tick: Duration,
    pub seed: u64,
    /// End the run early once every pool has entered Steady this many times.
    pub stop_after_steady: Option<usize>,
    /// None: completions carry no latency.
    pub latency: Option<Latency>,
    /// Coordination of the pools' controllers.
    pub turns: Turns,
    /// The host reads memory pressure every second on the ticks and reports it to every pool
    /// (`Policy::on_pressure`; TCC acts on it with `TuneParams::psi`), as `tact tune` does: the
    /// model's [`ThroughputModel::memory_stall`] averaged as PSI's `avg10` (`MemoryPsi`).
    pub pressure: bool,
    /// Coordinated, the others' completions reach a pool as `tact_lib`'s host passes them
    /// (`KEY.done` read before each of its own events and on its ticks): those since its last
    /// event, at once. Otherwise each one as it happens.
    pub peers_batched: bool,
}

impl Scenario {
    pub fn new(model: Arc<dyn ThroughputModel>, params: TuneParams, duration: Duration) -> Self {
        Scenario {
            model,
            changes: Vec::new(),
            pools: vec![PoolSpec::new(params)],
            spacing: Spacing::Exponential,
            stall: None,
            duration,
            tick: Duration::from_millis(100),
            seed: 1,
            stop_after_steady: None,
            latency: None,
            turns: Turns::Off,
            pressure: false,
            peers_batched: false,
        }
    }
}

/// A stretch of time with constant counts, targets, states and model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    pub from: Duration,
    pub to: Duration,
    /// Index of the model in force: 0 for `Scenario::model`, k for the k-th change.
    pub model: usize,
    /// Tasks in flight per pool.
    pub counts: Vec<usize>,
    pub targets: Vec<usize>,
    /// None before a pool starts, and for a pool run by another policy than TCC.
    pub phases: Vec<Option<Phase>>,
    pub op: Operating,
}

impl Segment {
    pub fn length(&self) -> f64 {
        (self.to - self.from).as_secs_f64()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolRun {
    /// The target over time: the initial one at the pool's start, then every change.
    pub targets: Vec<(Duration, usize)>,
    pub transitions: Vec<Transition>,
    /// Every verdict of the test, with the counts it compared and the samples it cost.
    pub decisions: Vec<Decision>,
    /// With [`Turns`]: when the host's grant started a cycle (the first, or one due in Steady).
    pub grants: Vec<Duration>,
    pub completions: u64,
    /// TCC's status at the end; None for another policy.
    pub status: Option<Status>,
}

impl PoolRun {
    /// (time, count) at every entry into Steady.
    pub fn steady_counts(&self) -> Vec<(Duration, usize)> {
        self.transitions
            .iter()
            .filter(|t| t.to == Phase::Steady)
            .map(|t| (t.at, t.target_to))
            .collect()
    }

    /// FNV-1a over the (t, target) sequence: one number that changes with any decision.
    pub fn target_hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (t, n) in &self.targets {
            for byte in (t.as_nanos() as u64)
                .to_le_bytes()
                .into_iter()
                .chain((*n as u64).to_le_bytes())
            {
                h ^= u64::from(byte);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Simulated time covered: the scenario's duration, or less if it stopped early.
    pub duration: Duration,
    pub pools: Vec<PoolRun>,
    pub segments: Vec<Segment>,
}

impl Run {
    /// Time-weighted mean of `f` over the segments in [from, to) that `keep` selects.
    pub fn mean_over(
        &self,
        from: Duration,
        to: Duration,
        keep: impl Fn(&Segment) -> bool,
        f: impl Fn(&Segment) -> f64,
    ) -> Option<f64> {
        let (mut w, mut sum) = (0.0, 0.0);
        for s in &self.segments {
            let a = s.from.max(from);
            let b = s.to.min(to);
            if b <= a || !keep(s) {
                continue;
            }
            let dt = (b - a).as_secs_f64();
            w += dt;
            sum += dt * f(s);
        }
        (w > 0.0).then(|| sum / w)
    }

    /// Bottleneck utilization averaged over the time `pool` spent in Steady within [from, to).
    pub fn steady_utilization(&self, pool: usize, from: Duration, to: Duration) -> Option<f64> {
        self.mean_over(
            from,
            to,
            |s| s.phases[pool] == Some(Phase::Steady),
            |s| s.op.bottleneck,
        )
    }

    /// The pool's own share of the bottleneck, averaged over its Steady time within [from, to).
    pub fn steady_share(&self, pool: usize, from: Duration, to: Duration) -> Option<f64> {
        self.mean_over(
            from,
            to,
            |s| s.phases[pool] == Some(Phase::Steady),
            |s| s.op.shares[pool],
        )
    }

    /// The pool's model throughput averaged over [from, to) (all states).
    pub fn throughput(&self, pool: usize, from: Duration, to: Duration) -> Option<f64> {
        self.mean_over(from, to, |_| true, |s| s.op.rates[pool])
    }
}

/// A large number standing for "more work than any pool can take" (here and in `tune::des`).
pub(crate) const ENDLESS: usize = 1 << 30;

/// What runs a pool: TCC, or another policy, which has no states and no verdicts to record
/// (the driver's and `tune::des`'s pools).
pub(crate) enum Controller {
    Tcc(Box<Tcc>),
    Other(Box<dyn Policy + Send>),
}

impl Controller {
    pub(crate) fn new(spec: &PoolSpec) -> Self {
        let p = &spec.params;
        match &spec.policy {
            None => Controller::Tcc(Box::new(Tcc::new(p.clone()).expect("valid parameters"))),
            Some(s) => {
                Controller::Other(policy_from_spec(s, p.n_init, p.n_max).expect("valid spec"))
            }
        }
    }

    pub(crate) fn phase(&self) -> Option<Phase> {
        match self {
            Controller::Tcc(t) => Some(t.phase()),
            Controller::Other(_) => None,
        }
    }

    pub(crate) fn status(&self) -> Option<Status> {
        match self {
            Controller::Tcc(t) => Some(t.status()),
            Controller::Other(_) => None,
        }
    }

    pub(crate) fn drain_decisions(&mut self) -> Vec<Decision> {
        match self {
            Controller::Tcc(t) => t.drain_decisions(),
            Controller::Other(_) => Vec::new(),
        }
    }
}

impl Deref for Controller {
    type Target = dyn Policy + Send;

    fn deref(&self) -> &Self::Target {
        match self {
            Controller::Tcc(t) => t.as_ref(),
            Controller::Other(p) => p.as_ref(),
        }
    }
}

impl DerefMut for Controller {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Controller::Tcc(t) => t.as_mut(),
            Controller::Other(p) => p.as_mut(),
        }
    }
}

struct Pool {
    policy: Controller,
    spec: PoolSpec,
    active: bool,
    in_flight: usize,
    queued: usize,
    next: Option<u64>,
    next_arrival: Option<u64>,
    rng: SimRng,
    /// Draws latencies, apart from `rng` so that completions are the same with or without.
    latency_rng: SimRng,
    run: PoolRun,
    /// The others' completions not yet passed on ([`Scenario::peers_batched`]).
    peers: u32,
}

impl Pool {
    fn load(&self) -> Load {
        Load::new(self.in_flight, self.queued)
    }

    /// Passes on the others' completions held back since the pool's last event.
    fn pass_peers(&mut self, at: Duration) {
        if self.peers > 0 {
            let answer = self
                .policy
                .on_peer_completions(at, std::mem::take(&mut self.peers));
            self.apply(at, answer);
        }
    }

    /// Grants the turn, and records it when it starts a cycle: the first grant starts the first
    /// cycle, a later one the cycle due in Steady (a grant during a cycle is a no-op).
    fn grant(&mut self, at: Duration) {
        let starts = self.policy.wants_turn()
            && (self.run.grants.is_empty() || self.policy.phase() == Some(Phase::Steady));
        let answer = self.policy.grant_turn(at);
        if starts {
            self.run.grants.push(at);
        }
        self.apply(at, answer);
    }

    /// Starts tasks up to the target while there is work; whether any started.
    fn fill(&mut self) -> bool {
        let mut started = false;
        while self.in_flight < self.policy.target() && self.queued > 0 {
            self.in_flight += 1;
            if self.queued != ENDLESS {
                self.queued -= 1;
            }
            started = true;
        }
        started
    }

    /// The latency of a task completing now, at throughput `rate` with the current count.
    fn latency(&mut self, l: Latency, rate: f64, spacing: Spacing) -> Duration {
        let fixed = l.fixed.as_secs_f64();
        let rest = (self.in_flight as f64 / rate - fixed).max(0.0);
        Duration::from_secs_f64(fixed + spacing.draw(&mut self.latency_rng, rest))
    }

    /// Applies a controller answer: record it, start tasks, report the starts (which may
    /// change the target again).
    fn apply(&mut self, now: Duration, mut answer: Option<usize>) {
        for _ in 0..4 {
            let Some(n) = answer else { return };
            self.run.targets.push((now, n));
            if !self.fill() {
                return;
            }
            let load = self.load();
            answer = self.policy.on_start(now, load);
        }
    }
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

fn dur(t: u64) -> Duration {
    Duration::from_nanos(t)
}

/// Runs the scenario to its end.
pub fn run(sc: &Scenario) -> Run {
    let mut pools: Vec<Pool> = sc
        .pools
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mut policy = Controller::new(spec);
            if sc.turns != Turns::Off {
                policy.coordinate();
            }
            new_pool(policy, spec, i, sc.seed)
        })
        .collect();
    let mut model: Arc<dyn ThroughputModel> = sc.model.clone();
    let mut model_idx = 0usize;
    let mut changes: Vec<(u64, Arc<dyn ThroughputModel>)> = sc
        .changes
        .iter()
        .map(|(t, m)| (ns(*t), m.clone()))
        .collect();
    changes.sort_by_key(|(t, _)| *t);
    let mut change_next = 0usize;
    let end = ns(sc.duration);
    let tick = ns(sc.tick).max(1);
    let mut next_tick = tick;
    let mut lock = Lock {
        holder: None,
        asked: vec![None; pools.len()],
    };
    // The first epoch is at 0: a pool that starts then is granted its first cycle at once.
    let mut next_epoch: u64 = 0;
    let mut stall_rng = SimRng::stream(sc.seed, 0x57A1);
    let mut segments: Vec<Segment> = Vec::new();
    let mut now: u64 = 0;
    let mut op = model.at(&counts(&pools));
    let mut stall = model.memory_stall(&counts(&pools));
    let mut psi = MemoryPsi::default();
    let mut stopped = false;
    // The bottleneck's utilization integrated since the last tick, for the pools with a hint.
    let (mut util_sum, mut util_time) = (0.0f64, 0.0f64);
    track(&mut segments, Duration::ZERO, 0, &pools, &op);

    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Kind {
        Change,
        Start(usize),
        Arrival(usize),
        Completion(usize),
        Tick,
        Epoch,
    }

    loop {
        let mut best: Option<(u64, Kind)> = None;
        let mut offer = |t: u64, k: Kind| match best {
            Some(b) if b <= (t, k) => {}
            _ => best = Some((t, k)),
        };
        if let Some((t, _)) = changes.get(change_next) {
            offer(*t, Kind::Change);
        }
        for (i, p) in pools.iter().enumerate() {
            if !p.active {
                offer(ns(p.spec.start), Kind::Start(i));
                continue;
            }
            if let Some(t) = p.next_arrival {
                offer(t, Kind::Arrival(i));
            }
            if let Some(t) = p.next {
                offer(t, Kind::Completion(i));
            }
        }
        offer(next_tick, Kind::Tick);
        if let Turns::Epoch { .. } = sc.turns {
            offer(next_epoch, Kind::Epoch);
        }
        let (t, kind) = best.expect("the tick is always offered");
        if t >= end {
            break;
        }
        let dt = (t - now) as f64 * 1e-9;
        util_sum += op.bottleneck * dt;
        util_time += dt;
        psi.accrue(stall, dt);
        now = t;
        let at = dur(now);
        let before = counts(&pools);
        let mut redraw: Option<usize> = None;
        match kind {
            Kind::Change => {
                model = changes[change_next].1.clone();
                change_next += 1;
                model_idx = change_next;
            }
            Kind::Start(i) => {
                let p = &mut pools[i];
                p.active = true;
                p.run.targets.push((at, p.policy.target()));
                match p.spec.input {
                    Input::Endless => p.queued = ENDLESS,
                    Input::Blocks { size, every } => {
                        p.queued = size;
                        p.next_arrival = Some(now + ns(every).max(1));
                    }
                }
                p.fill();
                let load = p.load();
                let answer = p.policy.on_start(at, load);
                p.apply(at, answer);
                // Coordinated, every pool learns how many share the key (pools never stop here).
                if sc.turns != Turns::Off {
                    let k = pools.iter().filter(|p| p.active).count();
                    for p in pools.iter_mut().filter(|p| p.active) {
                        p.policy.set_instances(k);
                    }
                }
            }
            Kind::Arrival(i) => {
                let p = &mut pools[i];
                if let Input::Blocks { size, every } = p.spec.input {
                    p.queued += size;
                    p.next_arrival = Some(now + ns(every).max(1));
                }
                let started = p.fill();
                let load = p.load();
                let answer = if started {
                    p.policy.on_start(at, load)
                } else {
                    p.policy.on_load(at, load)
                };
                p.apply(at, answer);
            }
            Kind::Completion(i) => {
                let p = &mut pools[i];
                p.pass_peers(at);
                let latency = sc.latency.map(|l| p.latency(l, op.rates[i], sc.spacing));
                p.in_flight -= 1;
                p.run.completions += 1;
                p.fill();
                let load = p.load();
                let answer = p.policy.on_event(Event::Complete { at, load, latency });
                p.apply(at, answer);
                p.next = None;
                redraw = Some(i);
                // Coordinated, a pool exploring judges the bottleneck's throughput: all of them.
                if sc.turns != Turns::Off {
                    for (j, peer) in pools.iter_mut().enumerate() {
                        if j == i || !peer.active {
                            continue;
                        }
                        if sc.peers_batched {
                            peer.peers += 1;
                        } else {
                            let answer = peer.policy.on_peer_completions(at, 1);
                            peer.apply(at, answer);
                        }
                    }
                }
            }
            Kind::Tick => {
                next_tick += tick;
                let util = (util_time > 0.0).then(|| util_sum / util_time);
                (util_sum, util_time) = (0.0, 0.0);
                let pressure = if sc.pressure { psi.read(now) } else { None };
                for p in pools.iter_mut().filter(|p| p.active) {
                    let answer = match util {
                        Some(u) if p.spec.reports(&p.run) => p.policy.on_hint(at, u),
                        _ => p.policy.on_tick(at),
                    };
                    p.apply(at, answer);
                    // After the tick's own event, as the library hosts report it.
                    if let Some(reading) = pressure {
                        let answer = p.policy.on_pressure(at, reading);
                        p.apply(at, answer);
                    }
                    p.pass_peers(at);
                }
            }
            Kind::Epoch => {
                if let Turns::Epoch { period } = sc.turns {
                    next_epoch += ns(period).max(1);
                }
                for p in pools.iter_mut().filter(|p| p.active) {
                    p.grant(at);
                }
            }
        }
        if sc.turns == Turns::Lock {
            lock.pass(&mut pools, now);
        }
        let after = counts(&pools);
        let changed = after != before || kind == Kind::Change;
        if changed {
            op = model.at(&after);
            stall = model.memory_stall(&after);
        }
        for (i, p) in pools.iter_mut().enumerate() {
            if !p.active {
                continue;
            }
            if changed || redraw == Some(i) || p.next.is_none() {
                p.next = next_completion(p, op.rates[i], now, sc, &mut stall_rng);
            }
            p.run.transitions.extend(p.policy.drain_trace());
            p.run.decisions.extend(p.policy.drain_decisions());
        }
        track(&mut segments, at, model_idx, &pools, &op);
        if let Some(k) = sc.stop_after_steady {
            let steadies = |p: &Pool| {
                p.run
                    .transitions
                    .iter()
                    .filter(|t| t.to == Phase::Steady)
                    .count()
            };
            if pools.iter().all(|p| steadies(p) >= k) {
                stopped = true;
                break;
            }
        }
    }
    let end_d = if stopped { dur(now) } else { dur(end.max(now)) };
    if let Some(last) = segments.last_mut() {
        last.to = end_d;
    }
    Run {
        duration: end_d,
        pools: pools
            .into_iter()
            .map(|mut p| {
                p.run.transitions.extend(p.policy.drain_trace());
                p.run.decisions.extend(p.policy.drain_decisions());
                p.run.status = p.policy.status();
                p.run
            })
            .collect(),
        segments,
    }
}

/// The lock of [`Turns::Lock`]: its holder, and since when each other pool waits for it.
struct Lock {
    holder: Option<usize>,
    asked: Vec<Option<u64>>,
}

impl Lock {
    /// After an event: the holder gives the lock up once it no longer wants the turn, waiting
    /// pools queue, and a free lock goes to the longest waiting, granted at once.
    fn pass(&mut self, pools: &mut [Pool], now: u64) {
        if self.holder.is_some_and(|h| !pools[h].policy.wants_turn()) {
            self.holder = None;
        }
        for (i, p) in pools.iter().enumerate() {
            let waits = p.active && self.holder != Some(i) && p.policy.wants_turn();
            self.asked[i] = if waits {
                self.asked[i].or(Some(now))
            } else {
                None
            };
        }
        if self.holder.is_some() {
            return;
        }
        let next = (0..pools.len())
            .filter_map(|i| self.asked[i].map(|t| (t, i)))
            .min();
        if let Some((_, i)) = next {
            self.asked[i] = None;
            self.holder = Some(i);
            pools[i].grant(dur(now));
        }
    }
}

/// PSI's memory figures as the host of [`Scenario::pressure`] reads them: every second, the
/// share of the time since the last read that the tasks stalled on memory enters an exponential
/// average with a 10 s time constant, as the kernel's `avg10` (which updates every 2 s), reported
/// as both `some` and `full` (the model's stalls are all tasks at once); io is 0, no model here
/// waits on a disk for memory.
#[derive(Debug, Default)]
struct MemoryPsi {
    /// Stalled seconds and seconds since the last read.
    stalled: f64,
    time: f64,
    avg10: f64,
    /// Nanoseconds of the next read.
    next: u64,
}

impl MemoryPsi {
    const PERIOD: Duration = Duration::from_secs(1);
    const WINDOW: f64 = 10.0;

    /// `dt` seconds passed with the tasks stalled `stall` of the time.
    fn accrue(&mut self, stall: f64, dt: f64) {
        self.stalled += stall * dt;
        self.time += dt;
    }

    /// The reading at `now` (nanoseconds), once a period has passed since the last one.
    fn read(&mut self, now: u64) -> Option<Pressure> {
        if now < self.next || self.time <= 0.0 {
            return None;
        }
        self.next = now + ns(Self::PERIOD);
        let share = self.stalled / self.time;
        let decay = (-self.time / Self::WINDOW).exp();
        self.avg10 = share + (self.avg10 - share) * decay;
        (self.stalled, self.time) = (0.0, 0.0);
        Some(Pressure {
            memory_some: self.avg10,
            memory_full: self.avg10,
            io_full: 0.0,
        })
    }
}

fn new_pool(policy: Controller, spec: &PoolSpec, i: usize, seed: u64) -> Pool {
    let status = policy.status();
    Pool {
        policy,
        spec: spec.clone(),
        active: false,
        in_flight: 0,
        queued: 0,
        next: None,
        next_arrival: None,
        rng: SimRng::stream(seed, 1 + i as u64),
        latency_rng: SimRng::stream(seed, 0x1A7E_0000 + i as u64),
        run: PoolRun {
            targets: Vec::new(),
            transitions: Vec::new(),
            decisions: Vec::new(),
            grants: Vec::new(),
            completions: 0,
            status,
        },
        peers: 0,
    }
}

fn counts(pools: &[Pool]) -> Vec<usize> {
    pools.iter().map(|p| p.in_flight).collect()
}

fn next_completion(
    p: &mut Pool,
    rate: f64,
    now: u64,
    sc: &Scenario,
    stall_rng: &mut SimRng,
) -> Option<u64> {
    if p.in_flight == 0 || !(rate > 0.0 && rate.is_finite()) {
        return None;
    }
    let mut gap = sc.spacing.draw(&mut p.rng, 1.0 / rate);
    if let Some(stall) = sc.stall {
        if stall_rng.uniform() < stall.probability {
            gap += stall.length.as_secs_f64();
        }
    }
    Some(now + ((gap * 1e9).round() as u64).max(1))
}

fn track(segments: &mut Vec<Segment>, at: Duration, model: usize, pools: &[Pool], op: &Operating) {
    let same = segments.last().is_some_and(|s| {
        s.model == model
            && s.op == *op
            && pools.iter().enumerate().all(|(i, p)| {
                s.counts[i] == p.in_flight
                    && s.targets[i] == p.policy.target()
                    && s.phases[i] == p.active.then(|| p.policy.phase()).flatten()
            })
    });
    if same {
        return;
    }
    if let Some(last) = segments.last_mut() {
        last.to = at;
    }
    segments.push(Segment {
        from: at,
        to: at,
        model,
        counts: pools.iter().map(|p| p.in_flight).collect(),
        targets: pools.iter().map(|p| p.policy.target()).collect(),
        phases: pools
            .iter()
            .map(|p| p.active.then(|| p.policy.phase()).flatten())
            .collect(),
        op: op.clone(),
    });
}
