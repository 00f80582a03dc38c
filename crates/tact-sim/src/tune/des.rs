//! DES mode (spec concurrency.md §4, item 2): the same controllers as [`super::driver`], but
//! against a discrete-event simulation of the closed network instead of its MVA curve.
//!
//! Each pool's workers take tasks from a backlog (endless, or arriving in blocks) and every task
//! visits the stations its class has a demand at, in order: FCFS queues with c servers,
//! processor-sharing servers (n tasks on c servers each progress at min(1, c/n)), and delays.
//! Completions are therefore what the network makes them (correlated, bunched behind a slow
//! task), not a renewal process. Competitor classes are fixed populations of tasks that cycle
//! through the same stations without a controller. Targets apply at task boundaries, as in
//! `tact_lib`'s `Pool`: a grow starts tasks at once, a shrink retires workers as their tasks
//! complete, nothing is cancelled. The policy gets what that pool reports: `Complete` (with the
//! task's response time) and its load after the worker took its next task, `Start` when tasks
//! start outside a completion, `Load` when input arrives to an empty backlog without starting
//! anything, and a tick every `tick` (with the bottleneck's busy share when the pool asks for
//! the hint). Saturation and starvation reach it only through those loads, as from the pool.
//!
//! Time is integer nanoseconds, events are ordered by (time, sequence), and every station draws
//! its service times from its own seeded stream: a run is a pure function of its [`Des`].
//! The result is the driver's [`Run`], whose segments carry the *measured* operating point over
//! each segment (completions per second, busy share of the bottleneck), plus every station's
//! busy time per class.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::time::Duration;

use tact_core::tune::{Event, Load};

use super::driver::{Controller, Input, PoolRun, PoolSpec, Run, Segment, Spacing, ENDLESS};
use super::model::Operating;
use crate::rng::SimRng;

/// How a station serves the tasks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// `servers` identical servers in front of one FCFS queue.
    Fcfs { servers: usize },
    /// Processor sharing over `servers` servers: n tasks each progress at min(1, servers/n).
    Ps { servers: usize },
    /// Infinite servers: a task's visit lasts its service time, whatever the others do.
    Delay,
}

impl Discipline {
    /// Servers a utilization is relative to (1 for a delay: its mean busy count, as
    /// [`super::mva::Network::utilization`]).
    pub fn servers(self) -> usize {
        match self {
            Discipline::Fcfs { servers } | Discipline::Ps { servers } => servers.max(1),
            Discipline::Delay => 1,
        }
    }
}

/// A pool: a controller (TCC, or `spec.policy`) and its tasks' mean service time per visit at
/// each station, in seconds (0: the tasks skip the station).
#[derive(Debug, Clone)]
pub struct DesPool {
    pub spec: PoolSpec,
    pub demands: Vec<f64>,
}

/// A fixed population of uncontrolled tasks cycling through the stations from time 0.
#[derive(Debug, Clone)]
pub struct Competitor {
    pub tasks: usize,
    pub demands: Vec<f64>,
}

/// A scripted change at a set time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Script {
    /// Services that begin at `station` from `at` on last `factor` × their mean (every class).
    Service {
        at: Duration,
        station: usize,
        factor: f64,
    },
    /// Competitor `class` holds `tasks` tasks from `at` on: new ones start at once, surplus ones
    /// leave as they finish a cycle.
    Population {
        at: Duration,
        class: usize,
        tasks: usize,
    },
}

impl Script {
    fn at(&self) -> Duration {
        match *self {
            Script::Service { at, .. } | Script::Population { at, .. } => at,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Des {
    pub stations: Vec<Discipline>,
    pub pools: Vec<DesPool>,
    pub competitors: Vec<Competitor>,
    /// Applied in time order; a segment's `model` is the number applied so far.
    pub script: Vec<Script>,
    /// The distribution of every service time around its mean.
    pub service: Spacing,
    /// The station whose utilization segments and hints report.
    pub bottleneck: usize,
    pub duration: Duration,
    /// Period of the ticks every controller receives.
    pub tick: Duration,
    pub seed: u64,
}

impl Des {
    /// One pool with `demands` on `stations`, exponential service, ticks every 100 ms, seed 1,
    /// the bottleneck being the queue (FCFS or PS) with the largest demand per server.
    pub fn new(
        stations: Vec<Discipline>,
        demands: Vec<f64>,
        pool: PoolSpec,
        duration: Duration,
    ) -> Self {
        // The queue with the largest demand per server, the first of equals (as
        // `mva::Network::bottleneck`).
        let load = |k: usize| demands[k] / stations[k].servers() as f64;
        let mut bottleneck = 0;
        for k in (0..stations.len()).filter(|&k| stations[k] != Discipline::Delay) {
            if stations[bottleneck] == Discipline::Delay || load(k) > load(bottleneck) {
                bottleneck = k;
            }
        }
        Des {
            stations,
            pools: vec![DesPool {
                spec: pool,
                demands,
            }],
            competitors: Vec::new(),
            script: Vec::new(),
            service: Spacing::Exponential,
            bottleneck,
            duration,
            tick: Duration::from_millis(100),
            seed: 1,
        }
    }
}

/// One class's tasks: pools first, then competitors, as in [`DesRun::busy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub started: u64,
    pub completed: u64,
    /// Tasks still in the network at the end.
    pub in_service: u64,
}

#[derive(Debug, Clone)]
pub struct DesRun {
    /// Segments with measured operating points: `op.rates[i]` pool i's completions per second,
    /// `op.bottleneck` the bottleneck's busy share, `op.shares[i]` pool i's part of it.
    pub run: Run,
    /// busy[station][class]: server-seconds the class kept the station busy (for a delay, task
    /// seconds). Classes: pools, then competitors.
    pub busy: Vec<Vec<f64>>,
    /// Servers per station ([`Discipline::servers`]).
    pub servers: Vec<usize>,
    pub tallies: Vec<Tally>,
}

impl DesRun {
    /// Busy share of the station's servers over the run, by `class` or (None) by everyone.
    pub fn utilization(&self, station: usize, class: Option<usize>) -> f64 {
        let busy: f64 = match class {
            Some(c) => self.busy[station][c],
            None => self.busy[station].iter().sum(),
        };
        busy / (self.servers[station] as f64 * self.run.duration.as_secs_f64())
    }

    /// Completions per second of a class over the run.
    pub fn throughput(&self, class: usize) -> f64 {
        self.tallies[class].completed as f64 / self.run.duration.as_secs_f64()
    }
}

/// A service time around `mean` seconds as the driver spaces completions, in integer
/// nanoseconds, at least 1: every visit takes time.
fn draw_ns(spacing: Spacing, rng: &mut SimRng, mean: f64) -> u64 {
    ((spacing.draw(rng, mean) * 1e9).round() as u64).max(1)
}

fn dur(t: u64) -> Duration {
    Duration::from_nanos(t)
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

// --- The network --------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Task {
    class: usize,
    /// Index into the class's route.
    stage: usize,
    born: u64,
}

/// What a station holds besides its busy accounting.
enum Queue {
    Fcfs {
        servers: usize,
        busy: usize,
        waiting: VecDeque<usize>,
    },
    /// `virt`: service each task has received since the station's origin (ns of work), as of
    /// `since`; `jobs`: (finish in `virt` as f64 bits, sequence, task). Positive f64s order as
    /// their bits, so the set's first entry finishes first.
    Ps {
        servers: usize,
        virt: f64,
        since: u64,
        jobs: BTreeSet<(u64, u64, usize)>,
        /// Bumped at every reschedule; a completion event of an older generation is stale.
        generation: u64,
    },
    Delay,
}

struct Station {
    queue: Queue,
    rng: SimRng,
    factor: f64,
    /// Tasks of each class in service, as servers' worth (PS shares a server).
    weight: Vec<f64>,
    /// Integral of `weight` up to `last`.
    busy: Vec<f64>,
    last: u64,
}

impl Station {
    /// Accrues busy time up to `now`.
    fn touch(&mut self, now: u64) {
        let dt = (now - self.last) as f64 * 1e-9;
        for (b, w) in self.busy.iter_mut().zip(&self.weight) {
            *b += w * dt;
        }
        self.last = now;
    }
}

#[derive(Clone, Copy)]
enum Ev {
    /// A task's visit at a FCFS or delay station ends.
    Done {
        station: usize,
        task: usize,
    },
    /// The first task at a PS station finishes, unless the generation moved on.
    PsDone {
        station: usize,
        generation: u64,
    },
    PoolStart(usize),
    Arrival(usize),
    Script(usize),
    Tick,
}

struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed: the heap's top is the earliest (time, sequence).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The stations, the tasks in them and the event heap.
struct Network {
    stations: Vec<Station>,
    /// routes[class]: (station, mean service in seconds) for each visit.
    routes: Vec<Vec<(usize, f64)>>,
    tasks: Vec<Task>,
    free: Vec<usize>,
    heap: BinaryHeap<Entry>,
    seq: u64,
    spacing: Spacing,
}

impl Network {
    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// A new task of `class` enters its first station.
    fn begin(&mut self, class: usize, now: u64) {
        let task = Task {
            class,
            stage: 0,
            born: now,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.tasks[id] = task;
                id
            }
            None => {
                self.tasks.push(task);
                self.tasks.len() - 1
            }
        };
        self.arrive(id, now);
    }

    /// Draws the service time of a visit that begins now at station k.
    fn service(&mut self, k: usize, mean: f64) -> u64 {
        let st = &mut self.stations[k];
        draw_ns(self.spacing, &mut st.rng, mean * st.factor)
    }

    /// Task `id` arrives at the station of its current stage.
    fn arrive(&mut self, id: usize, now: u64) {
        let Task { class, stage, .. } = self.tasks[id];
        let (k, mean) = self.routes[class][stage];
        self.stations[k].touch(now);
        let serve = match &mut self.stations[k].queue {
            Queue::Fcfs {
                servers,
                busy,
                waiting,
            } => {
                let free = *busy < *servers;
                if free {
                    *busy += 1;
                } else {
                    waiting.push_back(id);
                }
                free
            }
            Queue::Delay => true,
            Queue::Ps { .. } => {
                self.ps_advance(k, now);
                let work = self.service(k, mean) as f64;
                self.seq += 1;
                let seq = self.seq;
                if let Queue::Ps { virt, jobs, .. } = &mut self.stations[k].queue {
                    jobs.insert(((*virt + work).to_bits(), seq, id));
                }
                self.ps_reschedule(k, now);
                return;
            }
        };
        if serve {
            self.serve(k, id, now);
        }
    }

    /// Task `id` takes a server (or the delay) at station k.
    fn serve(&mut self, k: usize, id: usize, now: u64) {
        let Task { class, stage, .. } = self.tasks[id];
        let mean = self.routes[class][stage].1;
        self.stations[k].weight[class] += 1.0;
        let work = self.service(k, mean);
        self.schedule(
            now + work,
            Ev::Done {
                station: k,
                task: id,
            },
        );
    }

    /// A FCFS or delay visit ends: the next waiting task takes the server.
    fn depart(&mut self, k: usize, id: usize, now: u64) {
        let st = &mut self.stations[k];
        st.touch(now);
        st.weight[self.tasks[id].class] -= 1.0;
        let next = match &mut st.queue {
            Queue::Fcfs { busy, waiting, .. } => {
                let next = waiting.pop_front();
                if next.is_none() {
                    *busy -= 1;
                }
                next
            }
            _ => None,
        };
        if let Some(next) = next {
            self.serve(k, next, now);
        }
    }

    /// The first PS task finishes, if `generation` is current. Returns the task.
    fn ps_depart(&mut self, k: usize, generation: u64, now: u64) -> Option<usize> {
        match &self.stations[k].queue {
            Queue::Ps { generation: g, .. } if *g == generation => {}
            _ => return None,
        }
        self.stations[k].touch(now);
        self.ps_advance(k, now);
        let Queue::Ps { virt, jobs, .. } = &mut self.stations[k].queue else {
            unreachable!("checked above")
        };
        let first = jobs.pop_first().expect("a current generation has a task");
        // Rounding to whole nanoseconds may leave a sliver of work: it is done.
        *virt = virt.max(f64::from_bits(first.0));
        self.ps_reschedule(k, now);
        Some(first.2)
    }

    /// Brings the PS station's virtual time to `now` at the rate its current tasks had.
    fn ps_advance(&mut self, k: usize, now: u64) {
        if let Queue::Ps {
            servers,
            virt,
            since,
            jobs,
            ..
        } = &mut self.stations[k].queue
        {
            let n = jobs.len();
            if n > 0 {
                *virt += (now - *since) as f64 * (*servers as f64 / n as f64).min(1.0);
            }
            *since = now;
        }
    }

    /// After a PS station's population changed: new shares, and its next completion.
    fn ps_reschedule(&mut self, k: usize, now: u64) {
        let st = &mut self.stations[k];
        let Queue::Ps {
            servers,
            virt,
            jobs,
            generation,
            ..
        } = &mut st.queue
        else {
            return;
        };
        *generation += 1;
        st.weight.iter_mut().for_each(|w| *w = 0.0);
        let n = jobs.len();
        if n == 0 {
            return;
        }
        let rate = (*servers as f64 / n as f64).min(1.0);
        for &(_, _, id) in jobs.iter() {
            st.weight[self.tasks[id].class] += rate;
        }
        let first = f64::from_bits(jobs.first().expect("n > 0").0);
        let wait = ((first - *virt).max(0.0) / rate).ceil() as u64;
        let generation = *generation;
        self.schedule(
            now + wait,
            Ev::PsDone {
                station: k,
                generation,
            },
        );
    }

    /// Moves a task past its visit: to its next station, or out of the network. Returns the
    /// class and birth time of a task that finished its route.
    fn advance(&mut self, id: usize, now: u64) -> Option<Task> {
        let task = &mut self.tasks[id];
        task.stage += 1;
        if task.stage < self.routes[task.class].len() {
            self.arrive(id, now);
            return None;
        }
        self.free.push(id);
        Some(self.tasks[id])
    }
}

// --- The hosts ----------------------------------------------------------------------------

/// Transitions and decisions since the last call, into the run.
fn drain(ctl: &mut Controller, run: &mut PoolRun) {
    run.transitions.extend(ctl.drain_trace());
    run.decisions.extend(ctl.drain_decisions());
}

struct Pool {
    ctl: Controller,
    spec: PoolSpec,
    active: bool,
    in_flight: usize,
    queued: usize,
    run: PoolRun,
}

impl Pool {
    fn load(&self) -> Load {
        Load::new(self.in_flight, self.queued)
    }
}

struct CompetitorState {
    /// The population it should have, and the tasks it has.
    tasks: usize,
    live: usize,
}

struct Sim<'a> {
    des: &'a Des,
    net: Network,
    pools: Vec<Pool>,
    competitors: Vec<CompetitorState>,
    tallies: Vec<Tally>,
    now: u64,
}

impl Sim<'_> {
    /// Starts pool i's tasks up to its target while there is work; how many it started.
    fn fill(&mut self, i: usize) -> usize {
        let mut started = 0;
        loop {
            let p = &mut self.pools[i];
            if p.in_flight >= p.ctl.target() || p.queued == 0 {
                return started;
            }
            p.in_flight += 1;
            if p.queued != ENDLESS {
                p.queued -= 1;
            }
            started += 1;
            self.tallies[i].started += 1;
            self.net.begin(i, self.now);
        }
    }

    /// Follows a controller's answer as the real pool does: record it, start tasks, report the
    /// starts (which may change the target again).
    fn apply(&mut self, i: usize, mut answer: Option<usize>) {
        let at = dur(self.now);
        while let Some(n) = answer {
            self.pools[i].run.targets.push((at, n));
            if self.fill(i) == 0 {
                return;
            }
            let load = self.pools[i].load();
            answer = self.pools[i].ctl.on_start(at, load);
        }
    }

    fn start_pool(&mut self, i: usize) {
        let at = dur(self.now);
        let p = &mut self.pools[i];
        p.active = true;
        let target = p.ctl.target();
        p.run.targets.push((at, target));
        match p.spec.input {
            Input::Endless => p.queued = ENDLESS,
            Input::Blocks { size, every } => {
                p.queued = size;
                self.net
                    .schedule(self.now + ns(every).max(1), Ev::Arrival(i));
            }
        }
        self.fill(i);
        let load = self.pools[i].load();
        let answer = self.pools[i].ctl.on_start(at, load);
        self.apply(i, answer);
    }

    fn arrival(&mut self, i: usize) {
        let Input::Blocks { size, every } = self.pools[i].spec.input else {
            return;
        };
        self.net
            .schedule(self.now + ns(every).max(1), Ev::Arrival(i));
        let was_empty = self.pools[i].queued == 0;
        self.pools[i].queued += size;
        let started = self.fill(i);
        let (at, load) = (dur(self.now), self.pools[i].load());
        // As the pool: a Load only when the backlog turns non-empty without a start.
        let answer = if started > 0 {
            self.pools[i].ctl.on_start(at, load)
        } else if was_empty {
            self.pools[i].ctl.on_load(at, load)
        } else {
            None
        };
        self.apply(i, answer);
    }

    /// A task of `class` left the network.
    fn finished(&mut self, task: Task) {
        let class = task.class;
        self.tallies[class].completed += 1;
        let pools = self.pools.len();
        if class >= pools {
            let c = &mut self.competitors[class - pools];
            if c.live > c.tasks {
                c.live -= 1;
            } else {
                self.tallies[class].started += 1;
                self.net.begin(class, self.now);
            }
            return;
        }
        let i = class;
        self.pools[i].in_flight -= 1;
        self.pools[i].run.completions += 1;
        self.fill(i);
        let at = dur(self.now);
        let event = Event::Complete {
            at,
            load: self.pools[i].load(),
            latency: Some(dur(self.now - task.born)),
        };
        let answer = self.pools[i].ctl.on_event(event);
        self.apply(i, answer);
    }

    fn script(&mut self, s: Script) {
        match s {
            Script::Service {
                station, factor, ..
            } => self.net.stations[station].factor = factor,
            Script::Population { class, tasks, .. } => {
                let c = &mut self.competitors[class];
                c.tasks = tasks;
                let add = tasks.saturating_sub(c.live);
                c.live += add;
                let class = self.pools.len() + class;
                for _ in 0..add {
                    self.tallies[class].started += 1;
                    self.net.begin(class, self.now);
                }
            }
        }
    }

    /// Ticks every active pool, with the bottleneck's busy share since the last tick for those
    /// that ask for the hint.
    fn tick(&mut self, util: f64) {
        let at = dur(self.now);
        for i in 0..self.pools.len() {
            if !self.pools[i].active {
                continue;
            }
            let answer = if self.pools[i].spec.reports(&self.pools[i].run) {
                self.pools[i].ctl.on_hint(at, util)
            } else {
                self.pools[i].ctl.on_tick(at)
            };
            self.apply(i, answer);
        }
    }

    /// Cumulative busy server-seconds of each class at the bottleneck, as of now.
    fn bottleneck_busy(&mut self) -> Vec<f64> {
        let st = &mut self.net.stations[self.des.bottleneck];
        st.touch(self.now);
        st.busy.clone()
    }
}

impl Network {
    /// The stations empty, and every class's route.
    fn new(des: &Des) -> Network {
        let classes = des.pools.len() + des.competitors.len();
        let routes = des
            .pools
            .iter()
            .map(|p| &p.demands)
            .chain(des.competitors.iter().map(|c| &c.demands))
            .map(|d| {
                assert_eq!(d.len(), des.stations.len(), "one demand per station");
                let route: Vec<(usize, f64)> = d
                    .iter()
                    .enumerate()
                    .filter(|(_, &m)| m > 0.0)
                    .map(|(k, &m)| (k, m))
                    .collect();
                assert!(!route.is_empty(), "every class visits a station");
                route
            })
            .collect();
        let stations = des
            .stations
            .iter()
            .enumerate()
            .map(|(k, d)| Station {
                queue: match *d {
                    Discipline::Fcfs { servers } => Queue::Fcfs {
                        servers: servers.max(1),
                        busy: 0,
                        waiting: VecDeque::new(),
                    },
                    Discipline::Ps { servers } => Queue::Ps {
                        servers: servers.max(1),
                        virt: 0.0,
                        since: 0,
                        jobs: BTreeSet::new(),
                        generation: 0,
                    },
                    Discipline::Delay => Queue::Delay,
                },
                rng: SimRng::stream(des.seed, 0xDE5_0000 + k as u64),
                factor: 1.0,
                weight: vec![0.0; classes],
                busy: vec![0.0; classes],
                last: 0,
            })
            .collect();
        Network {
            stations,
            routes,
            tasks: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            spacing: des.service,
        }
    }
}

impl Pool {
    fn new(spec: &PoolSpec) -> Pool {
        let ctl = Controller::new(spec);
        let status = ctl.status();
        Pool {
            ctl,
            spec: spec.clone(),
            active: false,
            in_flight: 0,
            queued: 0,
            run: PoolRun {
                targets: Vec::new(),
                transitions: Vec::new(),
                decisions: Vec::new(),
                grants: Vec::new(),
                completions: 0,
                status,
            },
        }
    }
}

/// Runs the network with its controllers to the end of `des.duration`.
pub fn run(des: &Des) -> DesRun {
    let pools = des.pools.len();
    let mut sim = Sim {
        des,
        net: Network::new(des),
        pools: des.pools.iter().map(|p| Pool::new(&p.spec)).collect(),
        competitors: Vec::new(),
        tallies: vec![Tally::default(); pools + des.competitors.len()],
        now: 0,
    };
    for c in &des.competitors {
        sim.competitors.push(CompetitorState { tasks: 0, live: 0 });
        let class = sim.competitors.len() - 1;
        sim.script(Script::Population {
            at: Duration::ZERO,
            class,
            tasks: c.tasks,
        });
    }
    for (i, p) in des.pools.iter().enumerate() {
        sim.net.schedule(ns(p.spec.start), Ev::PoolStart(i));
    }
    let mut script = des.script.clone();
    // Stable: changes at the same time apply in the order given.
    script.sort_by_key(|s| s.at());
    for (k, s) in script.iter().enumerate() {
        sim.net.schedule(ns(s.at()), Ev::Script(k));
    }
    let tick = ns(des.tick).max(1);
    sim.net.schedule(tick, Ev::Tick);
    let servers = des.stations[des.bottleneck].servers() as f64;
    let end = ns(des.duration);
    // The bottleneck's busy server-seconds at the last tick.
    let mut last_tick = (0u64, 0.0f64);
    let mut segments = Segments::new(&mut sim);
    while let Some(Entry { at, ev, .. }) = sim.net.heap.pop() {
        if at >= end {
            break;
        }
        sim.now = at;
        let task = match ev {
            Ev::Done { station, task } => {
                sim.net.depart(station, task, at);
                Some(task)
            }
            Ev::PsDone {
                station,
                generation,
            } => sim.net.ps_depart(station, generation, at),
            Ev::PoolStart(i) => {
                sim.start_pool(i);
                None
            }
            Ev::Arrival(i) => {
                sim.arrival(i);
                None
            }
            Ev::Script(k) => {
                sim.script(script[k]);
                segments.model = k + 1;
                None
            }
            Ev::Tick => {
                sim.net.schedule(at + tick, Ev::Tick);
                let busy: f64 = sim.bottleneck_busy().iter().sum();
                let dt = (at - last_tick.0) as f64 * 1e-9;
                let util = (busy - last_tick.1) / (servers * dt);
                last_tick = (at, busy);
                sim.tick(util);
                None
            }
        };
        if let Some(t) = task.and_then(|id| sim.net.advance(id, at)) {
            sim.finished(t);
        }
        for p in &mut sim.pools {
            drain(&mut p.ctl, &mut p.run);
        }
        segments.track(&mut sim);
    }
    sim.now = end.max(sim.now);
    segments.close(&mut sim);
    sim.finish(segments.list)
}

impl Sim<'_> {
    /// The result, at the end.
    fn finish(mut self, segments: Vec<Segment>) -> DesRun {
        for st in &mut self.net.stations {
            st.touch(self.now);
        }
        let pools = self.pools.len();
        for (i, p) in self.pools.iter().enumerate() {
            self.tallies[i].in_service = p.in_flight as u64;
        }
        for (j, c) in self.competitors.iter().enumerate() {
            self.tallies[pools + j].in_service = c.live as u64;
        }
        DesRun {
            run: Run {
                duration: dur(self.now),
                pools: self
                    .pools
                    .into_iter()
                    .map(|mut p| {
                        drain(&mut p.ctl, &mut p.run);
                        p.run.status = p.ctl.status();
                        p.run
                    })
                    .collect(),
                segments,
            },
            busy: self.net.stations.iter().map(|s| s.busy.clone()).collect(),
            servers: self.des.stations.iter().map(|d| d.servers()).collect(),
            tallies: self.tallies,
        }
    }
}

/// The segments so far; the last is open until counts, targets, phases or the script move on.
struct Segments {
    list: Vec<Segment>,
    /// Scripted changes applied so far.
    model: usize,
    /// The bottleneck's busy time per class and each pool's completions when the last segment
    /// opened, to measure its operating point when it closes.
    busy: Vec<f64>,
    completions: Vec<u64>,
}

impl Segments {
    /// Opens the first segment.
    fn new(sim: &mut Sim) -> Segments {
        let mut s = Segments {
            list: Vec::new(),
            model: 0,
            busy: Vec::new(),
            completions: Vec::new(),
        };
        s.track(sim);
        s
    }

    /// Opens a new segment when counts, targets, phases or the script moved on.
    fn track(&mut self, sim: &mut Sim) {
        let phase = |p: &Pool| p.active.then(|| p.ctl.phase()).flatten();
        let model = self.model;
        let same = self.list.last().is_some_and(|s| {
            s.model == model
                && sim.pools.iter().enumerate().all(|(i, p)| {
                    s.counts[i] == p.in_flight
                        && s.targets[i] == p.ctl.target()
                        && s.phases[i] == phase(p)
                })
        });
        if same {
            return;
        }
        self.close(sim);
        let at = dur(sim.now);
        self.busy = sim.bottleneck_busy();
        self.completions = sim.pools.iter().map(|p| p.run.completions).collect();
        self.list.push(Segment {
            from: at,
            to: at,
            model,
            counts: sim.pools.iter().map(|p| p.in_flight).collect(),
            targets: sim.pools.iter().map(|p| p.ctl.target()).collect(),
            phases: sim.pools.iter().map(phase).collect(),
            op: Operating {
                rates: vec![0.0; sim.pools.len()],
                bottleneck: 0.0,
                shares: vec![0.0; sim.pools.len()],
            },
        });
    }

    /// Ends the last segment now, with the operating point measured over it.
    fn close(&mut self, sim: &mut Sim) {
        let Some(s) = self.list.last_mut() else {
            return;
        };
        s.to = dur(sim.now);
        let len = s.length();
        if len <= 0.0 {
            return;
        }
        let busy = sim.bottleneck_busy();
        let servers = sim.des.stations[sim.des.bottleneck].servers() as f64;
        let part = |c: usize| (busy[c] - self.busy[c]) / (servers * len);
        s.op = Operating {
            rates: (0..sim.pools.len())
                .map(|i| (sim.pools[i].run.completions - self.completions[i]) as f64 / len)
                .collect(),
            bottleneck: (0..busy.len()).map(part).sum(),
            shares: (0..sim.pools.len()).map(part).collect(),
        };
    }
}
