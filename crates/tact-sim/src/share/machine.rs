//! A deterministic simulated kernel for the share engine, and the driver that runs ALPS instances
//! on it the way `tact share` runs them on Linux.
//!
//! The kernel is event driven: between two events every runnable thread (started, not exited, not
//! sleeping, its process not stopped) runs at a constant rate, and the next event is computed
//! exactly (a burst ending, a sleep ending, a slice ending, a timer expiration, tact finishing its
//! work, a process starting or exiting, a redraw of the noise). CPUs form pools: the shared pool,
//! and one pool per entity the engine pinned ([`Action::Pin`]). How a pool of `c` CPUs is shared
//! among its `n` runnable threads is the [`KernelModel`]: by default each gets `min(1, c/n)` of a
//! CPU (fluid sharing); with [`KernelModel::noise_sigma`] above 0 the shares are weighted by a
//! log-normal factor redrawn every [`KernelModel::noise_period_ns`]; with
//! [`KernelModel::slice_ns`] above 0 the threads with the least virtual runtime run, one per CPU,
//! for a slice each (a CFS-like kernel, lumpy within a quantum, fair over a few slices).
//!
//! Each ALPS instance is a simulated tact process in the shared pool. A timer expires every `Q`
//! from the instance's start; tact wakes after a latency drawn in `[0, jitter]` (plus, rarely, a
//! stall), reads the timer's expiration count (`ticks`), takes the readings [`Alps::due`] asks for
//! from the processes' exact cumulative CPU, calls [`Alps::step`], and then needs the CPU time
//! `T = I + R(r) + ρ·r + S·s + σ(N)` of spec section 3 ([`CostModel`]) before its signals take
//! effect (plus an optional signal delay). While tact works it competes for the CPU like any
//! thread, except that a CFS-like sleeper credit lets it preempt: it accrues its fair share
//! `c/(n+1)` of the time it sleeps (up to [`KernelModel::wakeup_credit_ns`]) and runs at a whole
//! CPU while the credit lasts. If its work outlasts the quantum, expirations pile up and the next
//! step sees `ticks > 1`: the loss of control of spec section 3.
//!
//! The recorder of spec section 5 reads every member's clock at each cycle end an engine reports
//! (its own cost is not charged, as in the spec, where it is subtracted from the overhead).

use serde::Serialize;
use tact_core::share::{Action, Alps, CycleReport, EntityId, Event, Reading, ShareConfig};

use crate::rng::SimRng;

/// Index of a simulated process. It is also the engine's entity id and member id.
pub type ProcId = usize;
/// Index of an ALPS instance.
pub type InstId = usize;

/// Tolerance of time and CPU comparisons, ns: well above the rounding of an `f64` time of a few
/// thousand seconds (about 1e-4 ns), well below anything that matters.
const EPS: f64 = 1e-2;

/// The per-quantum cost model of spec section 3, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostModel {
    /// I: receive a timer event.
    pub timer_us: f64,
    /// R(r) = read_fixed + read_each·r.
    pub read_fixed_us: f64,
    pub read_each_us: f64,
    /// ρ: compute CPU time from one read.
    pub rho_us: f64,
    /// S: send one signal (also charged per affinity change).
    pub signal_us: f64,
    /// σ(N) = sigma_fixed + sigma_each·N.
    pub sigma_fixed_us: f64,
    pub sigma_each_us: f64,
}

impl CostModel {
    /// The paper's constants (FreeBSD 4.8, 2.2 GHz Pentium 4), spec section 3.
    pub fn paper() -> Self {
        CostModel {
            timer_us: 9.02,
            read_fixed_us: 1.1,
            read_each_us: 13.9,
            rho_us: 3.5,
            signal_us: 0.97,
            sigma_fixed_us: 1.48,
            sigma_each_us: 0.142,
        }
    }

    /// tact costs nothing: its decisions take effect at the instant of the step.
    pub fn free() -> Self {
        CostModel {
            timer_us: 0.0,
            read_fixed_us: 0.0,
            read_each_us: 0.0,
            rho_us: 0.0,
            signal_us: 0.0,
            sigma_fixed_us: 0.0,
            sigma_each_us: 0.0,
        }
    }

    /// T in nanoseconds for `reads` reads, `signals` signals and `entities` entities.
    pub fn cost_ns(&self, reads: usize, signals: usize, entities: usize) -> f64 {
        1000.0
            * (self.timer_us
                + self.read_fixed_us
                + (self.read_each_us + self.rho_us) * reads as f64
                + self.signal_us * signals as f64
                + self.sigma_fixed_us
                + self.sigma_each_us * entities as f64)
    }
}

/// How the simulated kernel shares CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelModel {
    /// Log-normal spread of each thread's weight (0: exact fair sharing).
    pub noise_sigma: f64,
    /// How often the weights are redrawn.
    pub noise_period_ns: u64,
    /// Cap of tact's sleeper credit (0: tact is an ordinary thread).
    pub wakeup_credit_ns: u64,
    /// Time slices instead of fluid sharing (0: fluid). The noise is then unused.
    pub slice_ns: u64,
}

impl KernelModel {
    /// Exact processor sharing, tact preempting with CFS's 3 ms sleeper credit.
    pub fn fluid() -> Self {
        KernelModel {
            noise_sigma: 0.0,
            noise_period_ns: 4_000_000,
            wakeup_credit_ns: 3_000_000,
            slice_ns: 0,
        }
    }

    /// Time slices of 3 ms given in order of least virtual runtime, one thread per CPU: fair
    /// over a few slices, lumpy within a 10 ms quantum (about Linux CFS/EEVDF with a tick of
    /// 4 ms and a base slice of 0.75–3 ms).
    pub fn slices() -> Self {
        KernelModel {
            slice_ns: 3_000_000,
            ..KernelModel::fluid()
        }
    }

    /// Fair on average, uneven over a few milliseconds: weights spread by σ = 0.3, redrawn every
    /// 4 ms (about a CFS scheduling period with a handful of runnable threads).
    pub fn noisy() -> Self {
        KernelModel {
            noise_sigma: 0.3,
            ..KernelModel::fluid()
        }
    }
}

/// When tact wakes after its timer expires.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimerModel {
    /// Wake latency, uniform in [0, jitter].
    pub jitter_ns: u64,
    /// Probability per wake of a stall (tact not scheduled).
    pub stall_probability: f64,
    /// Length of a stall.
    pub stall_ns: u64,
}

impl TimerModel {
    pub fn exact() -> Self {
        TimerModel {
            jitter_ns: 0,
            stall_probability: 0.0,
            stall_ns: 0,
        }
    }

    /// Up to 100 µs of wake latency, no stalls.
    pub fn jittery() -> Self {
        TimerModel {
            jitter_ns: 100_000,
            ..TimerModel::exact()
        }
    }
}

/// The simulated machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimConfig {
    /// CPUs (1 is the paper's pinned condition, `taskset -c 1`).
    pub cores: u32,
    pub kernel: KernelModel,
    pub timer: TimerModel,
    pub cost: CostModel,
    /// Extra delay between tact sending a signal and its effect.
    pub signal_delay_ns: u64,
    pub seed: u64,
}

impl SimConfig {
    /// The default machine of the claims: exact processor sharing, a timer waking tact up to
    /// 100 µs late, the paper's costs.
    pub fn new(cores: u32, seed: u64) -> Self {
        SimConfig {
            cores,
            kernel: KernelModel::fluid(),
            timer: TimerModel::jittery(),
            cost: CostModel::paper(),
            signal_delay_ns: 0,
            seed,
        }
    }
}

/// What a thread does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Behavior {
    /// CPU-bound spinner.
    Spin,
    /// Spins until `from_ns`, then repeatedly uses `run_ns` of CPU and sleeps `sleep_ns`.
    RunSleep {
        run_ns: u64,
        sleep_ns: u64,
        from_ns: u64,
    },
}

/// A process to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProcSpec {
    pub share: u64,
    pub threads: u32,
    pub behavior: Behavior,
    pub start_ns: u64,
    pub exit_ns: Option<u64>,
}

impl ProcSpec {
    /// A single-threaded spinner present from the start.
    pub fn spinner(share: u64) -> Self {
        ProcSpec {
            share,
            threads: 1,
            behavior: Behavior::Spin,
            start_ns: 0,
            exit_ns: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Thread {
    /// CPU left in the current burst (RunSleep after `from_ns`).
    burst_left: f64,
    sleep_until: Option<f64>,
    weight: f64,
    rate: f64,
    /// Virtual runtime (slice mode): CPU used, moved up on waking.
    vruntime: f64,
    /// End of the current slice while it holds a CPU (slice mode).
    running_until: Option<f64>,
    was_runnable: bool,
}

#[derive(Debug, Clone)]
struct Proc {
    inst: InstId,
    spec: ProcSpec,
    threads: Vec<Thread>,
    cpu: f64,
    /// Wall time during which every thread slept.
    asleep_ns: f64,
    stopped: bool,
    started: bool,
    exited: bool,
    /// Registered with its instance (arrival sent).
    arrived: bool,
    /// CPUs of its own (pinned), if any.
    pinned: Option<u32>,
    patterned: bool,
}

impl Proc {
    fn runnable_threads(&self) -> impl Iterator<Item = usize> + '_ {
        let alive = self.started && !self.exited && !self.stopped;
        self.threads
            .iter()
            .enumerate()
            .filter(move |(_, t)| alive && t.sleep_until.is_none())
            .map(|(i, _)| i)
    }

    fn blocked(&self) -> bool {
        self.threads.iter().all(|t| t.sleep_until.is_some())
    }

    fn reading(&self, id: ProcId) -> Reading {
        Reading {
            cpu_ns: vec![(id as u64, self.cpu as u64)],
            blocked: self.blocked(),
            threads: self.threads.len() as u32,
            cpus: 0,
        }
    }
}

#[derive(Debug, Clone)]
enum TactState {
    /// Waiting for the timer; wakes at `wake_at`.
    Idle { wake_at: f64 },
    /// Working off the cost of a step; the actions take effect when `left` reaches 0.
    Working { left: f64, actions: Vec<Action> },
    /// Not started yet (instance start time in the future).
    Pending { start: f64 },
}

/// The recorder's snapshot at one cycle end (spec section 5).
#[derive(Debug, Clone, Serialize)]
pub struct CycleSnapshot {
    /// Simulated time, ns.
    pub t_ns: f64,
    /// The engine's report of the cycle.
    pub report: CycleReport,
    /// (entity, cumulative CPU ns, cumulative all-threads-asleep ns) of every entity in the report.
    pub clocks: Vec<(EntityId, f64, f64)>,
}

/// One ALPS instance and its tact process.
#[derive(Debug, Clone)]
struct Instance {
    alps: Alps,
    q: f64,
    start: f64,
    next_exp: f64,
    state: TactState,
    credit: f64,
    rate: f64,
    priority: bool,
    cpu: f64,
    events: Vec<Event>,
    scheduled: Vec<(f64, Event)>,
    snapshots: Vec<CycleSnapshot>,
    /// Clock of each entity at its arrival (for the first cycle it takes part in).
    arrival_cpu: Vec<(EntityId, f64)>,
    max_ticks: u64,
    /// The sub-quantum check the engine asked for (simulated time), if any.
    check: Option<f64>,
}

/// Figures of one instance at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InstanceStats {
    pub counters: tact_core::share::Counters,
    /// tact's own CPU time, ns.
    pub tact_cpu_ns: f64,
    /// Wall time since the instance started, ns.
    pub wall_ns: f64,
    /// Largest `ticks` seen.
    pub max_ticks: u64,
}

/// A run of the simulated machine with its ALPS instances.
#[derive(Debug, Clone)]
pub struct ShareSim {
    cfg: SimConfig,
    now: f64,
    procs: Vec<Proc>,
    insts: Vec<Instance>,
    rng: SimRng,
    next_noise: f64,
    /// Signals in flight: (time, action).
    in_flight: Vec<(f64, Action)>,
    rates_valid: bool,
    scratch: Vec<(usize, usize)>,
}

impl ShareSim {
    pub fn new(cfg: SimConfig) -> Self {
        ShareSim {
            cfg,
            now: 0.0,
            procs: Vec::new(),
            insts: Vec::new(),
            rng: SimRng::stream(cfg.seed, 0x5_4a7e),
            next_noise: if cfg.kernel.noise_sigma > 0.0 {
                0.0
            } else {
                f64::INFINITY
            },
            in_flight: Vec::new(),
            rates_valid: false,
            scratch: Vec::new(),
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Simulated time, ns.
    pub fn now_ns(&self) -> f64 {
        self.now
    }

    /// An ALPS instance whose timer starts at `start_ns`.
    pub fn add_instance(&mut self, cfg: ShareConfig, start_ns: u64) -> InstId {
        let q = cfg.quantum_ns as f64;
        let alps = Alps::new(cfg).expect("valid share config");
        self.insts.push(Instance {
            alps,
            q,
            start: start_ns as f64,
            next_exp: start_ns as f64 + q,
            state: TactState::Pending {
                start: start_ns as f64,
            },
            credit: 0.0,
            rate: 0.0,
            priority: false,
            cpu: 0.0,
            events: Vec::new(),
            scheduled: Vec::new(),
            snapshots: Vec::new(),
            arrival_cpu: Vec::new(),
            max_ticks: 0,
            check: None,
        });
        self.insts.len() - 1
    }

    /// A process of instance `inst`; it arrives at the instance's first step after it starts.
    pub fn add_process(&mut self, inst: InstId, spec: ProcSpec) -> ProcId {
        let threads = (0..spec.threads.max(1))
            .map(|_| Thread {
                burst_left: 0.0,
                sleep_until: None,
                weight: 1.0,
                rate: 0.0,
                vruntime: 0.0,
                running_until: None,
                was_runnable: false,
            })
            .collect();
        self.procs.push(Proc {
            inst,
            spec,
            threads,
            cpu: 0.0,
            asleep_ns: 0.0,
            stopped: false,
            started: false,
            exited: false,
            arrived: false,
            pinned: None,
            patterned: false,
        });
        self.rates_valid = false;
        self.procs.len() - 1
    }

    /// Deliver `event` to instance `inst` at its first step at or after `t_ns`.
    pub fn schedule(&mut self, t_ns: u64, inst: InstId, event: Event) {
        self.insts[inst].scheduled.push((t_ns as f64, event));
    }

    /// Cumulative CPU of a process, ns.
    pub fn cpu_ns(&self, p: ProcId) -> f64 {
        self.procs[p].cpu
    }

    /// Whether a process is stopped (SIGSTOP) right now.
    pub fn is_stopped(&self, p: ProcId) -> bool {
        self.procs[p].stopped
    }

    /// CPUs a process has of its own (conserving core partition).
    pub fn pinned(&self, p: ProcId) -> Option<u32> {
        self.procs[p].pinned
    }

    /// The engine of an instance.
    pub fn alps(&self, inst: InstId) -> &Alps {
        &self.insts[inst].alps
    }

    /// The recorder's snapshots of an instance, one per cycle.
    pub fn snapshots(&self, inst: InstId) -> &[CycleSnapshot] {
        &self.insts[inst].snapshots
    }

    /// Each entity's clock when it arrived at its instance.
    pub fn arrival_cpu(&self, inst: InstId) -> &[(EntityId, f64)] {
        &self.insts[inst].arrival_cpu
    }

    pub fn stats(&self, inst: InstId) -> InstanceStats {
        let i = &self.insts[inst];
        InstanceStats {
            counters: i.alps.counters(),
            tact_cpu_ns: i.cpu,
            wall_ns: self.now - i.start,
            max_ticks: i.max_ticks,
        }
    }

    /// Run until simulated time `t_ns`.
    pub fn run_until(&mut self, t_ns: f64) {
        while self.now < t_ns - EPS {
            self.advance(t_ns);
        }
    }

    /// Run until instance `inst` has completed `cycles` cycles (or `limit_ns` passes).
    pub fn run_cycles(&mut self, inst: InstId, cycles: usize, limit_ns: f64) {
        while self.insts[inst].snapshots.len() < cycles && self.now < limit_ns - EPS {
            self.advance(limit_ns);
        }
    }

    /// One event: compute rates, jump to the next event (at most `horizon`), handle it.
    fn advance(&mut self, horizon: f64) {
        if !self.rates_valid {
            self.compute_rates();
        }
        let next = self.next_event().min(horizon);
        let dt = (next - self.now).max(0.0);
        if dt > 0.0 {
            self.progress(dt);
        }
        self.now = next;
        self.handle();
    }

    fn shared_cores(&self) -> u32 {
        let pinned: u32 = self.procs.iter().filter_map(|p| p.pinned).sum();
        self.cfg.cores.saturating_sub(pinned)
    }

    fn compute_rates(&mut self) {
        for p in &mut self.procs {
            for t in &mut p.threads {
                t.rate = 0.0;
            }
        }
        // tact: with sleeper credit it preempts (a whole CPU); without, it is one more thread.
        let c = f64::from(self.shared_cores());
        let mut prio = Vec::new();
        let mut normal_tacts = Vec::new();
        for (ii, inst) in self.insts.iter_mut().enumerate() {
            inst.rate = 0.0;
            inst.priority = false;
            if let TactState::Working { .. } = inst.state {
                if inst.credit > EPS {
                    prio.push(ii);
                } else {
                    normal_tacts.push(ii);
                }
            }
        }
        let mut left = c;
        if !prio.is_empty() {
            let r = if c > 0.0 {
                (c / prio.len() as f64).min(1.0)
            } else {
                1.0
            };
            for &ii in &prio {
                self.insts[ii].rate = r;
                self.insts[ii].priority = true;
            }
            left = (c - r * prio.len() as f64).max(0.0);
        }
        // Pools: the shared one (unpinned processes and tact), then one per pinned process.
        let mut shared = std::mem::take(&mut self.scratch);
        shared.clear();
        for (pi, p) in self.procs.iter().enumerate() {
            if p.pinned.is_none() {
                shared.extend(p.runnable_threads().map(|ti| (pi, ti)));
            }
        }
        let mut shared_cap = left;
        if !normal_tacts.is_empty() {
            // Ordinary tacts take their fair part of the shared pool off the top.
            let n = shared.len() + normal_tacts.len();
            let r = if c > 0.0 {
                (left / n as f64).min(1.0)
            } else {
                1.0
            };
            for &ii in &normal_tacts {
                self.insts[ii].rate = r;
            }
            shared_cap = (left - r * normal_tacts.len() as f64).max(0.0);
        }
        self.share_pool(shared_cap, &shared);
        for pi in 0..self.procs.len() {
            if let Some(k) = self.procs[pi].pinned {
                shared.clear();
                shared.extend(self.procs[pi].runnable_threads().map(|ti| (pi, ti)));
                self.share_pool(f64::from(k), &shared);
            }
        }
        self.scratch = shared;
        for p in &mut self.procs {
            let alive = p.started && !p.exited && !p.stopped;
            for t in &mut p.threads {
                t.was_runnable = alive && t.sleep_until.is_none();
                if !t.was_runnable {
                    t.running_until = None;
                }
            }
        }
        self.rates_valid = true;
    }

    /// Share `cap` CPUs among `threads` (runnable, in one pool).
    fn share_pool(&mut self, cap: f64, threads: &[(usize, usize)]) {
        let slice = self.cfg.kernel.slice_ns as f64;
        if slice > 0.0 {
            self.slice_pool(cap, threads, slice);
        } else if self.cfg.kernel.noise_sigma > 0.0 {
            let weights: Vec<f64> = threads
                .iter()
                .map(|&(pi, ti)| self.procs[pi].threads[ti].weight)
                .collect();
            for (&(pi, ti), r) in threads.iter().zip(water_fill(cap, &weights)) {
                self.procs[pi].threads[ti].rate = r;
            }
        } else if !threads.is_empty() {
            let r = (cap / threads.len() as f64).min(1.0);
            for &(pi, ti) in threads {
                self.procs[pi].threads[ti].rate = r;
            }
        }
    }

    /// Time-slice sharing of one pool: the runnable threads with the least virtual runtime run,
    /// one per CPU, for a slice each; a thread that becomes runnable is placed no further than
    /// one slice behind the least virtual runtime of the pool (a CFS-like sleeper credit).
    fn slice_pool(&mut self, cap: f64, threads: &[(usize, usize)], slice: f64) {
        let now = self.now;
        let settled = threads
            .iter()
            .filter(|&&(pi, ti)| self.procs[pi].threads[ti].was_runnable)
            .map(|&(pi, ti)| self.procs[pi].threads[ti].vruntime)
            .fold(f64::INFINITY, f64::min);
        let floor = if settled.is_finite() {
            settled - slice
        } else {
            threads
                .iter()
                .map(|&(pi, ti)| self.procs[pi].threads[ti].vruntime)
                .fold(f64::INFINITY, f64::min)
        };
        for &(pi, ti) in threads {
            let t = &mut self.procs[pi].threads[ti];
            if !t.was_runnable {
                t.vruntime = t.vruntime.max(floor);
                t.running_until = None;
            }
            if matches!(t.running_until, Some(u) if u <= now + EPS) {
                t.running_until = None;
            }
        }
        let slots = (cap.ceil() as usize).min(threads.len());
        let key = |s: &Self, &(pi, ti): &(usize, usize)| (s.procs[pi].threads[ti].vruntime, pi, ti);
        let mut running: Vec<(usize, usize)> = threads
            .iter()
            .copied()
            .filter(|&(pi, ti)| self.procs[pi].threads[ti].running_until.is_some())
            .collect();
        if running.len() > slots {
            running.sort_by(|a, b| key(self, a).partial_cmp(&key(self, b)).unwrap());
            for &(pi, ti) in &running[slots..] {
                self.procs[pi].threads[ti].running_until = None;
            }
            running.truncate(slots);
        }
        if running.len() < slots {
            let mut waiting: Vec<(usize, usize)> = threads
                .iter()
                .copied()
                .filter(|&(pi, ti)| self.procs[pi].threads[ti].running_until.is_none())
                .collect();
            waiting.sort_by(|a, b| key(self, a).partial_cmp(&key(self, b)).unwrap());
            for &(pi, ti) in waiting.iter().take(slots - running.len()) {
                self.procs[pi].threads[ti].running_until = Some(now + slice);
                running.push((pi, ti));
            }
        }
        let rate = if running.is_empty() {
            0.0
        } else {
            (cap / running.len() as f64).min(1.0)
        };
        for (pi, ti) in running {
            self.procs[pi].threads[ti].rate = rate;
        }
    }

    fn next_event(&self) -> f64 {
        let mut next = self.next_noise;
        for p in &self.procs {
            if !p.started {
                next = next.min(p.spec.start_ns as f64);
                continue;
            }
            if p.exited {
                continue;
            }
            if let Some(x) = p.spec.exit_ns {
                next = next.min(x as f64);
            }
            if let Behavior::RunSleep { from_ns, .. } = p.spec.behavior {
                if !p.patterned {
                    next = next.min(from_ns as f64);
                }
            }
            for t in &p.threads {
                if let Some(u) = t.running_until {
                    next = next.min(u);
                }
                if let Some(u) = t.sleep_until {
                    next = next.min(u);
                } else if p.patterned && t.rate > 0.0 {
                    next = next.min(self.now + t.burst_left / t.rate);
                }
            }
        }
        for i in &self.insts {
            match &i.state {
                TactState::Pending { start } => next = next.min(*start),
                TactState::Idle { wake_at } => next = next.min(*wake_at),
                TactState::Working { left, .. } => {
                    if i.rate > 0.0 {
                        next = next.min(self.now + left / i.rate);
                        if i.priority {
                            next = next.min(self.now + i.credit / i.rate);
                        }
                    }
                }
            }
        }
        for (t, _) in &self.in_flight {
            next = next.min(*t);
        }
        next.max(self.now)
    }

    fn progress(&mut self, dt: f64) {
        for p in &mut self.procs {
            if !p.started || p.exited {
                continue;
            }
            let mut all_asleep = true;
            for t in &mut p.threads {
                if t.sleep_until.is_none() {
                    all_asleep = false;
                }
                if t.rate > 0.0 {
                    let used = t.rate * dt;
                    p.cpu += used;
                    t.vruntime += used;
                    if p.patterned {
                        t.burst_left -= used;
                    }
                }
            }
            if all_asleep {
                p.asleep_ns += dt;
            }
        }
        let c = f64::from(self.shared_cores().max(1));
        let runnable = self
            .procs
            .iter()
            .filter(|p| p.pinned.is_none())
            .map(|p| p.runnable_threads().count())
            .sum::<usize>() as f64;
        let cap = self.cfg.kernel.wakeup_credit_ns as f64;
        for i in &mut self.insts {
            match &mut i.state {
                TactState::Working { left, .. } => {
                    let used = i.rate * dt;
                    *left -= used;
                    i.cpu += used;
                    if i.priority {
                        i.credit = (i.credit - used).max(0.0);
                    }
                }
                TactState::Idle { .. } => {
                    i.credit = (i.credit + dt * (c / (runnable + 1.0)).min(1.0)).min(cap);
                }
                TactState::Pending { .. } => {}
            }
        }
    }

    /// Handle everything due at `now`.
    fn handle(&mut self) {
        let now = self.now;
        // The kernel's noise.
        if self.next_noise <= now + EPS {
            let sigma = self.cfg.kernel.noise_sigma;
            for p in &mut self.procs {
                for t in &mut p.threads {
                    t.weight = (sigma * self.rng.normal() - sigma * sigma / 2.0).exp();
                }
            }
            self.next_noise = now + self.cfg.kernel.noise_period_ns as f64;
            self.rates_valid = false;
        }
        // Processes start, exit, burst and sleep; slices end.
        for (pid, p) in self.procs.iter_mut().enumerate() {
            if p.threads
                .iter()
                .any(|t| matches!(t.running_until, Some(u) if u <= now + EPS))
            {
                self.rates_valid = false;
            }
            if !p.started && p.spec.start_ns as f64 <= now + EPS {
                p.started = true;
                self.rates_valid = false;
            }
            if !p.started || p.exited {
                continue;
            }
            if let Some(x) = p.spec.exit_ns {
                if x as f64 <= now + EPS {
                    p.exited = true;
                    self.rates_valid = false;
                    if p.arrived {
                        let last = p.reading(pid);
                        self.insts[p.inst].events.push(Event::Depart {
                            id: pid as u64,
                            last: Some(last),
                        });
                    }
                    continue;
                }
            }
            if let Behavior::RunSleep {
                run_ns,
                sleep_ns,
                from_ns,
            } = p.spec.behavior
            {
                if !p.patterned && from_ns as f64 <= now + EPS {
                    p.patterned = true;
                    for t in &mut p.threads {
                        t.burst_left = run_ns as f64;
                    }
                    self.rates_valid = false;
                }
                if p.patterned {
                    for t in &mut p.threads {
                        match t.sleep_until {
                            Some(u) if u <= now + EPS => {
                                t.sleep_until = None;
                                t.burst_left = run_ns as f64;
                                self.rates_valid = false;
                            }
                            None if t.burst_left <= EPS => {
                                t.sleep_until = Some(now + sleep_ns as f64);
                                self.rates_valid = false;
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        // Signals in flight arrive.
        if self.in_flight.iter().any(|(t, _)| *t <= now + EPS) {
            let (due, later): (Vec<_>, Vec<_>) =
                self.in_flight.drain(..).partition(|(t, _)| *t <= now + EPS);
            self.in_flight = later;
            for (_, a) in due {
                self.apply(a);
            }
        }
        // tact instances: finish work, wake, step.
        for ii in 0..self.insts.len() {
            let inst = &self.insts[ii];
            match inst.state {
                TactState::Pending { start } if start <= now + EPS => {
                    let wake = self.wake_time(ii);
                    self.insts[ii].state = TactState::Idle { wake_at: wake };
                    self.rates_valid = false;
                }
                TactState::Working { left, .. } if left <= EPS => {
                    let TactState::Working { actions, .. } = std::mem::replace(
                        &mut self.insts[ii].state,
                        TactState::Idle {
                            wake_at: f64::INFINITY,
                        },
                    ) else {
                        unreachable!()
                    };
                    let delay = self.cfg.signal_delay_ns as f64;
                    for a in actions {
                        if delay > 0.0 {
                            self.in_flight.push((now + delay, a));
                        } else {
                            self.apply(a);
                        }
                    }
                    self.rates_valid = false;
                    if self.insts[ii].next_exp <= now + EPS {
                        self.step(ii);
                    } else {
                        let wake = self.wake_time(ii);
                        self.insts[ii].state = TactState::Idle { wake_at: wake };
                    }
                }
                TactState::Working { .. } if inst.priority && inst.credit <= EPS => {
                    self.rates_valid = false;
                }
                TactState::Idle { wake_at } if wake_at <= now + EPS => {
                    self.step(ii);
                }
                _ => {}
            }
        }
    }

    /// When tact wakes for its next expiration, or for a check the engine asked for before it:
    /// that time plus latency (and maybe a stall).
    fn wake_time(&mut self, ii: InstId) -> f64 {
        let t = self.cfg.timer;
        let inst = &self.insts[ii];
        let at = inst.check.map_or(inst.next_exp, |c| c.min(inst.next_exp));
        let mut w = at + t.jitter_ns as f64 * self.rng.uniform();
        if t.stall_probability > 0.0 && self.rng.uniform() < t.stall_probability {
            w += t.stall_ns as f64;
        }
        w
    }

    fn apply(&mut self, a: Action) {
        let p = a.id() as usize;
        let Some(proc) = self.procs.get_mut(p) else {
            return;
        };
        if proc.exited {
            return;
        }
        match a {
            Action::Stop(_) | Action::Unfill(_) => proc.stopped = true,
            Action::Continue(_) | Action::Fill(_) => proc.stopped = false,
            Action::Pin { cpus, .. } => proc.pinned = Some(cpus),
            Action::Unpin(_) => proc.pinned = None,
        }
        self.rates_valid = false;
    }

    /// One engine step of instance `ii` at `now`, or a check if no expiration has passed.
    fn step(&mut self, ii: InstId) {
        let now = self.now;
        if self.insts[ii].next_exp > now + EPS {
            self.check(ii);
            return;
        }
        let inst = &mut self.insts[ii];
        let mut ticks = 0;
        while inst.next_exp <= now + EPS {
            ticks += 1;
            inst.next_exp += inst.q;
        }
        let ticks = ticks.max(1);
        inst.max_ticks = inst.max_ticks.max(ticks);
        // Arrivals of processes that started since the last step.
        for (pid, p) in self.procs.iter_mut().enumerate() {
            if p.inst == ii && p.started && !p.exited && !p.arrived {
                p.arrived = true;
                let baseline = p.reading(pid);
                inst.arrival_cpu.push((pid as u64, p.cpu));
                inst.events.push(Event::Arrive {
                    id: pid as u64,
                    share: p.spec.share,
                    baseline,
                });
            }
        }
        let mut events = std::mem::take(&mut inst.events);
        let (due_events, later): (Vec<_>, Vec<_>) = std::mem::take(&mut inst.scheduled)
            .into_iter()
            .partition(|(t, _)| *t <= now + EPS);
        inst.scheduled = later;
        events.extend(due_events.into_iter().map(|(_, e)| e));
        let due = inst.alps.due(ticks);
        let readings: Vec<(u64, Reading)> = due
            .iter()
            .filter_map(|&id| {
                let p = self.procs.get(id as usize)?;
                (!p.exited).then(|| (id, p.reading(id as usize)))
            })
            .collect();
        let out = inst
            .alps
            .step(ticks, &readings, events)
            .expect("ticks >= 1");
        self.act(ii, readings.len(), out);
    }

    /// A sub-quantum check of instance `ii` at `now`.
    fn check(&mut self, ii: InstId) {
        let inst = &mut self.insts[ii];
        let at = (self.now - inst.start).max(0.0) as u64;
        let readings: Vec<(u64, Reading)> = inst
            .alps
            .due_checks(at)
            .into_iter()
            .filter_map(|id| {
                let p = self.procs.get(id as usize)?;
                (!p.exited).then(|| (id, p.reading(id as usize)))
            })
            .collect();
        let out = inst.alps.check(at, &readings);
        self.act(ii, readings.len(), out);
    }

    /// After a step or check: record a cycle end, arm the next check, and make tact work off
    /// the cost before its actions take effect.
    fn act(&mut self, ii: InstId, reads: usize, out: tact_core::share::StepOut) {
        let now = self.now;
        let inst = &mut self.insts[ii];
        inst.check = out.wake_at.map(|t| inst.start + t as f64);
        let signals = out.actions.len();
        let cost = self
            .cfg
            .cost
            .cost_ns(reads, signals, inst.alps.entities().count());
        if let Some(report) = out.cycle {
            let clocks = report
                .entities
                .iter()
                .map(|e| {
                    let p = &self.procs[e.id as usize];
                    (e.id, p.cpu, p.asleep_ns)
                })
                .collect();
            inst.snapshots.push(CycleSnapshot {
                t_ns: now,
                report,
                clocks,
            });
        }
        inst.state = TactState::Working {
            left: cost,
            actions: out.actions,
        };
        self.rates_valid = false;
        if cost <= EPS {
            // A free tact acts at once.
            self.handle_tact_done(ii);
        }
    }

    fn handle_tact_done(&mut self, ii: InstId) {
        if let TactState::Working { actions, .. } =
            std::mem::replace(&mut self.insts[ii].state, TactState::Idle { wake_at: 0.0 })
        {
            for a in actions {
                self.apply(a);
            }
        }
        let wake = self.wake_time(ii);
        self.insts[ii].state = TactState::Idle { wake_at: wake };
    }
}

/// Share `capacity` CPUs among threads by weight, none above one CPU.
fn water_fill(capacity: f64, weights: &[f64]) -> Vec<f64> {
    let mut rates = vec![0.0; weights.len()];
    if capacity <= 0.0 || weights.is_empty() {
        return rates;
    }
    let mut open: Vec<usize> = (0..weights.len()).collect();
    let mut left = capacity;
    loop {
        let total: f64 = open.iter().map(|&i| weights[i]).sum();
        if total <= 0.0 {
            break;
        }
        let mut capped = false;
        for &i in &open {
            if left * weights[i] / total >= 1.0 {
                rates[i] = 1.0;
                capped = true;
            }
        }
        if !capped {
            for &i in &open {
                rates[i] = left * weights[i] / total;
            }
            break;
        }
        open.retain(|&i| rates[i] < 1.0);
        left = capacity - rates.iter().sum::<f64>();
        if open.is_empty() || left <= 0.0 {
            break;
        }
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_fill_caps_at_one_cpu() {
        assert_eq!(water_fill(2.0, &[1.0, 1.0, 1.0, 1.0]), vec![0.5; 4]);
        assert_eq!(water_fill(2.0, &[1.0]), vec![1.0]);
        let r = water_fill(2.0, &[10.0, 1.0, 1.0]);
        assert_eq!(r, vec![1.0, 0.5, 0.5]);
        assert_eq!(water_fill(1.0, &[1.0, 3.0]), vec![0.25, 0.75]);
    }

    #[test]
    fn paper_cost_model() {
        let c = CostModel::paper();
        // 5 reads, 1 signal, 5 entities: 9.02 + 1.1 + 5·17.4 + 0.97 + 1.48 + 0.71 = 100.28 µs.
        assert!((c.cost_ns(5, 1, 5) - 100_280.0).abs() < 1e-6);
        assert_eq!(CostModel::free().cost_ns(5, 1, 5), 0.0);
    }
}
