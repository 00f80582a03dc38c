//! A thread pool whose number of running tasks follows a [`Policy`].
//!
//! All state (queue, counters, the controller) sits under one mutex, so every event the policy
//! sees carries the occupancy exactly as it was, and times read under the lock never run
//! backwards. The host hands each task to a specific worker (an idle one, or a thread spawned
//! for it), so "in flight" is exact at every event. A worker that finishes takes the next queued
//! task itself when the target allows, and that task is part of the completion's load.
//!
//! Overhead, measured once in a release build on the two shared cores this was written on
//! (200,000 empty tasks submitted from one thread, queue of 1,024, until shutdown returned):
//! 0.5–0.7 µs per task with one worker, 3–3.5 µs with eight (eight threads and the submitter
//! contend for one lock and two cores), 1.5–3.4 µs with eight under TCC, so the policy call is
//! within the noise of the hand-off. A [`Limiter`](super::Limiter) acquire and release without
//! contention took 0.12 µs. Tasks that do real work amortize all of it.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tact_core::tune::{Event, Load, Policy, Status, Tcc, Transition, TuneParams};
use tact_linux::probe::psi::PsiReader;

use super::controller::{Controller, Engine};
use super::hint::{self, Hint};
use super::turns::{TurnEvent, TurnStats, Turns};

/// Threads a builder allows when not told: spawned lazily, so only what the policy asks for
/// ever exists.
pub const DEFAULT_MAX_WORKERS: usize = 256;
/// How often the policy hears that time passed, so time-based rules fire while completions are
/// rare.
pub const DEFAULT_TICK: Duration = Duration::from_millis(100);

type Job = Box<dyn Task>;

/// A submitted closure in two steps, so that the pool counts a task before its handle can see
/// the result (a caller who waited for every handle reads complete stats).
trait Task: Send {
    /// Runs the closure, catching a panic; true when it returned.
    fn run(&mut self) -> bool;
    /// Hands the result to the task's handle.
    fn deliver(self: Box<Self>);
}

struct Packaged<F, R> {
    f: Option<F>,
    result: Option<Result<R, TaskError>>,
    tx: SyncSender<Result<R, TaskError>>,
}

impl<F, R> Task for Packaged<F, R>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    fn run(&mut self) -> bool {
        let f = self.f.take().expect("a task runs once");
        let result = panic::catch_unwind(AssertUnwindSafe(f))
            .map_err(|payload| TaskError::Panicked(panic_message(payload)));
        let returned = result.is_ok();
        self.result = Some(result);
        returned
    }

    fn deliver(self: Box<Self>) {
        let result = self.result.expect("delivered after running");
        // The handle may be gone: nobody wants the result then.
        let _ = self.tx.send(result);
    }
}

/// The queue was full ([`Pool::try_submit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the pool's queue is full")]
pub struct Full;

/// Why a task gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The task panicked; the panic's message (or a placeholder for a non-string payload).
    #[error("the task panicked: {0}")]
    Panicked(String),
}

/// The result of one submitted task.
#[derive(Debug)]
pub struct TaskHandle<R> {
    rx: Receiver<Result<R, TaskError>>,
}

impl<R> TaskHandle<R> {
    /// Blocks until the task has run.
    pub fn wait(self) -> Result<R, TaskError> {
        self.rx
            .recv()
            .expect("a pool runs every task it accepted before its workers exit")
    }
}

/// A snapshot of the pool.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PoolStats {
    /// Tasks the pool runs at most at once now.
    pub target: usize,
    /// Worker threads alive (busy or parked); surplus workers park rather than exit, so a later
    /// grow does not pay for a thread.
    pub workers: usize,
    pub in_flight: usize,
    pub queued: usize,
    /// Tasks that returned.
    pub completed: u64,
    /// Tasks that panicked (not counted in `completed`, nor reported to the policy as
    /// completions).
    pub panicked: u64,
    /// The controller's state when it is TCC ([`PoolBuilder::tcc`]).
    pub status: Option<Status>,
}

/// Settings for a [`Pool`].
pub struct PoolBuilder {
    engine: Option<Engine>,
    max_workers: usize,
    queue_capacity: Option<usize>,
    tick: Duration,
    name: String,
    bottleneck: Option<hint::Source>,
    psi: Option<PsiReader>,
    turns: Option<Turns>,
    key: Option<String>,
    key_dir: Option<PathBuf>,
}

/// The setters both builders share, written once: the controller, how often it ticks, what
/// it reads besides the time, and its workload key. A builder that expands it has the fields
/// `engine`, `tick`, `bottleneck`, `psi`, `turns`, `key` and `key_dir`.
macro_rules! controller_setters {
    () => {
        /// The controller. Without one (and without [`tcc`](Self::tcc)) the host runs TCC with
        /// its defaults, starting at the number of online CPUs.
        pub fn policy(mut self, policy: Box<dyn Policy + Send>) -> Self {
            self.engine = Some(Engine::Other(policy));
            self
        }

        /// TCC as the controller, kept by type so that the host shows its state
        /// ([`PoolStats::status`](crate::tune::PoolStats::status),
        /// [`Limiter::status`](crate::tune::Limiter::status)).
        pub fn tcc(mut self, tcc: Tcc) -> Self {
            self.engine = Some(Engine::Tcc(Box::new(tcc)));
            self
        }

        /// How often the policy gets [`Event::Tick`] (default
        /// [`DEFAULT_TICK`](crate::tune::DEFAULT_TICK); zero: never).
        pub fn tick(mut self, every: Duration) -> Self {
            self.tick = every;
            self
        }

        /// A source of the bottleneck's utilization in [0, 1] since its previous call (None: no
        /// reading this time), for TCC's bottleneck hint (`TuneParams::util`; `docs/tune.md`,
        /// "The bottleneck hint"). The ticker thread calls it, outside the host's lock, on
        /// ticks at least [`HINT_PERIOD`](crate::tune::HINT_PERIOD) apart, and passes the value
        /// to [`Policy::on_hint`]. Name the resource the work saturates (e.g.
        /// `tact_linux::probe::bottleneck::Bottleneck`, or `probe::busy::CpuBusy` over the
        /// service's CPUs): one that never saturates makes TCC climb as long as throughput rises
        /// at all. Needs ticks.
        pub fn bottleneck(mut self, source: impl FnMut() -> Option<f64> + Send + 'static) -> Self {
            self.bottleneck = Some(Box::new(source));
            self
        }

        /// Where the host reads pressure stall information when its controller is TCC with
        /// `TuneParams::psi` on (default [`PsiReader::new`], the machine's `/proc/pressure`;
        /// e.g. [`PsiReader::cgroup`] for the cgroup the work saturates). The ticker thread
        /// reads it, outside the host's lock, at most every
        /// [`PSI_PERIOD`](tact_linux::probe::psi::PSI_PERIOD) and passes it to
        /// [`Policy::on_pressure`] (`docs/tune.md`, "PSI as a saturation hint"). Files that
        /// cannot be read, at the start or later, turn PSI off with one warning (`tracing`):
        /// the host then runs by throughput alone. Needs ticks.
        pub fn psi_reader(mut self, reader: PsiReader) -> Self {
            self.psi = Some(reader);
            self
        }

        /// Coordinates the controller with other instances (pools, limiters, `tact tune`) that
        /// share its bottleneck under the same key (`docs/tune.md`, "Several instances on one
        /// bottleneck"): TCC then starts a new cycle of measuring only when it has the turn
        /// (turns mode: one instance at a time; epoch mode: at shared epochs), and while it has
        /// it counts the others' completions as its samples (shared through `KEY.done`, see
        /// [`Turns::peers`](crate::tune::Turns::peers)). The ticker checks the turn on every tick, so this needs ticks: `build` panics with a zero
        /// [`tick`](Self::tick), with which TCC would wait for its first turn for ever.
        /// Policies that do not measure in cycles (every baseline) never ask for a turn.
        ///
        /// ```no_run
        /// use tact_lib::tune::{CoordinateMode, Turns, Pool};
        /// let turns = Turns::new("db-5432", CoordinateMode::Turns)?;
        /// let pool = Pool::builder().coordinate(turns).build();
        /// # Ok::<(), tact_lib::tune::CoordinateError>(())
        /// ```
        pub fn coordinate(mut self, turns: crate::tune::Turns) -> Self {
            self.turns = Some(turns);
            self
        }

        /// Warm start per workload key, shared with `tact tune --key` and the Python executors
        /// (`docs/tune.md`, "Pools in Rust"): at `build`, a count recorded under `key` becomes
        /// TCC's warm start (`TuneParams::warm`: its first cycle starts at that count's cut,
        /// without slow start), lowered to the host's ceiling; each entry into Steady records
        /// TCC's count under the key. A key is a file name in the key directory
        /// ([`key_dir`](Self::key_dir)): letters, digits, `.`, `_` and `-`, at most 200, not
        /// starting with `.`; anything else is a [`KeyError`](crate::tune::KeyError). It names
        /// the workload, not the program: two workloads that settle on different counts need
        /// two keys.
        ///
        /// A record that cannot be read, and a write that fails, are one warning each
        /// (`tracing`): the host starts cold, or goes on unrecorded; neither fails it. A
        /// `warm` in the TCC given to [`tcc`](Self::tcc) wins over the record.
        ///
        /// # Panics
        ///
        /// `build` panics when the key comes with a [`policy`](Self::policy): a boxed policy,
        /// TCC included, has no steady count the host can see. Give TCC with
        /// [`tcc`](Self::tcc) (built anew with the warm start, so give it fresh), or no policy.
        ///
        /// ```
        /// use tact_lib::tune::Pool;
        /// let dir = tempfile::tempdir()?;
        /// let pool = Pool::builder().key("thumbnails")?.key_dir(dir.path()).build();
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn key(mut self, key: &str) -> Result<Self, crate::tune::KeyError> {
            crate::tune::warm::check_key(key)?;
            self.key = Some(key.to_owned());
            Ok(self)
        }

        /// Where [`key`](Self::key)'s records are kept (default
        /// [`warm::default_dir`](crate::tune::warm::default_dir), as `tact tune --key`'s:
        /// `$XDG_STATE_HOME/tact/tune`, root's `/var/lib/tact/tune`, else
        /// `~/.local/state/tact/tune`).
        pub fn key_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
            self.key_dir = Some(dir.into());
            self
        }
    };
}
pub(super) use controller_setters;

impl PoolBuilder {
    controller_setters!();

    /// The most tasks that ever run at once (at least 1; default [`DEFAULT_MAX_WORKERS`]).
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = n.max(1);
        self
    }

    /// Tasks that may wait for a worker before [`Pool::submit`] blocks (at least 1; default
    /// twice `max_workers`).
    pub fn queue_capacity(mut self, k: usize) -> Self {
        self.queue_capacity = Some(k.max(1));
        self
    }

    /// The prefix of the worker threads' names (default `tact-pool`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    pub fn build(self) -> Pool {
        let max = self.max_workers;
        let engine = self.engine.unwrap_or_else(|| default_tcc(max));
        let (engine, keyed) = engine.keyed(self.key.as_deref(), self.key_dir, max);
        let mut hint = Hint::new(self.bottleneck, self.psi, &engine);
        let mut controller = Controller::new(engine, max, keyed);
        coordinate(&mut controller, self.turns, self.tick);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                controller,
                queue: VecDeque::new(),
                capacity: self.queue_capacity.unwrap_or(2 * max),
                slots: (0..max).map(|_| None).collect(),
                idle: Vec::new(),
                spawned: 0,
                in_flight: 0,
                completed: 0,
                panicked: 0,
                space_waiters: 0,
                closing: false,
                exit: false,
                handles: Vec::new(),
            }),
            wake: (0..max).map(|_| Condvar::new()).collect(),
            space: Condvar::new(),
            drained: Condvar::new(),
            ticker: Condvar::new(),
            name: self.name,
        });
        let ticker = (!self.tick.is_zero()).then(|| {
            let inner = Arc::clone(&inner);
            let every = self.tick;
            thread::Builder::new()
                .name(format!("{}-tick", inner.name))
                .spawn(move || tick_loop(&inner, every, &mut hint))
                .expect("spawning the pool's ticker thread")
        });
        Pool { inner, ticker }
    }
}

/// Hands a builder's turns to its controller; the ticker checks them, so there must be ticks.
pub(super) fn coordinate(controller: &mut Controller, turns: Option<Turns>, tick: Duration) {
    if let Some(turns) = turns {
        assert!(
            !tick.is_zero(),
            "coordinate({}) needs ticks: the ticker checks the turn",
            turns.key()
        );
        controller.coordinate(turns);
    }
}

/// TCC with its defaults for at most `max` tasks at once, starting at the number of online CPUs:
/// a host's policy when it is given none.
pub(super) fn default_tcc(max: usize) -> Engine {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let params = TuneParams {
        n_init: cpus.min(max),
        n_max: max,
        ..TuneParams::default()
    };
    Engine::Tcc(Box::new(
        Tcc::new(params).expect("TCC's defaults with 1 <= n_init <= n_max are valid"),
    ))
}

/// A pool of worker threads running at most `target` tasks at once, the target set by a
/// [`Policy`] fed with every completion (spec `concurrency.md` §6).
///
/// Targets apply at task boundaries: a grow hands queued tasks to parked workers or spawns
/// threads (up to `max_workers`, lazily); a shrink lets running tasks finish and gives their
/// workers nothing new until the count is below the target. No task is ever cancelled.
/// The policy receives `Complete` (with the task's run time as latency) per returned task,
/// `Start` when tasks start outside a completion (a submit to an idle pool, a grow), `Load`
/// when a submit fills an empty queue without starting anything (the moment the pool turns
/// saturated; later submits to a non-empty queue change nothing the policy uses and are not
/// reported), and `Tick` every tick. A panicking task is caught, its handle gets
/// [`TaskError::Panicked`], its worker carries on, and it counts as `panicked`: failed work is
/// not throughput, so the policy sees a `Start` or `Load` instead of a completion.
///
/// Dropping the pool runs every queued task, then joins the workers (as [`Pool::shutdown`]).
/// Do not drop the last handle to a pool from one of its own tasks: it would wait for itself.
pub struct Pool {
    inner: Arc<Inner>,
    ticker: Option<JoinHandle<()>>,
}

struct Inner {
    state: Mutex<State>,
    /// One per worker slot: the host wakes exactly the worker it gave a task.
    wake: Vec<Condvar>,
    /// Submitters waiting for room in the queue.
    space: Condvar,
    /// Shutdown waiting for the queue to drain.
    drained: Condvar,
    ticker: Condvar,
    name: String,
}

struct State {
    controller: Controller,
    queue: VecDeque<Job>,
    capacity: usize,
    /// The task handed to each worker, until it takes it.
    slots: Vec<Option<Job>>,
    /// Parked workers, most recently parked last (reused first: its cache is warm).
    idle: Vec<usize>,
    spawned: usize,
    in_flight: usize,
    completed: u64,
    panicked: u64,
    space_waiters: usize,
    closing: bool,
    exit: bool,
    handles: Vec<JoinHandle<()>>,
}

impl State {
    fn load(&self) -> Load {
        Load::new(self.in_flight, self.queue.len())
    }

    /// Takes the next queued task if the target allows one more in flight.
    fn take(&mut self, inner: &Inner) -> Option<Job> {
        if self.in_flight >= self.controller.target() {
            return None;
        }
        let job = self.queue.pop_front()?;
        self.in_flight += 1;
        if self.space_waiters > 0 {
            inner.space.notify_one();
        }
        Some(job)
    }

    /// Starts queued tasks on parked or new workers up to the target; how many it started.
    fn dispatch(&mut self, inner: &Arc<Inner>) -> usize {
        let mut started = 0;
        while let Some(job) = self.take(inner) {
            if let Some(id) = self.idle.pop() {
                self.slots[id] = Some(job);
                inner.wake[id].notify_one();
            } else if let Err(job) = self.spawn(inner, job) {
                // No thread to run it: put it back and stop growing past the threads we have.
                self.in_flight -= 1;
                self.queue.push_front(job);
                let at = self.controller.now();
                self.controller.cap(self.spawned, at);
                break;
            }
            started += 1;
        }
        started
    }

    /// Spawns a worker for `job`; gives the job back when the system has no thread for it.
    fn spawn(&mut self, inner: &Arc<Inner>, job: Job) -> Result<(), Job> {
        let id = self.spawned;
        // Busy workers equal in_flight, which is below a target of at most max: a slot is free.
        self.slots[id] = Some(job);
        let worker = Arc::clone(inner);
        let spawned = thread::Builder::new()
            .name(format!("{}-{id}", inner.name))
            .spawn(move || work(&worker, id));
        match spawned {
            Ok(handle) => {
                self.handles.push(handle);
                self.spawned += 1;
                Ok(())
            }
            Err(err) if self.spawned == 0 => panic!("cannot spawn the pool's first worker: {err}"),
            Err(_) => Err(self.slots[id].take().expect("the slot was just filled")),
        }
    }

    /// Feeds an event and, while the target grows, starts tasks and reports them as `Start`.
    fn feed(&mut self, inner: &Arc<Inner>, event: Event) {
        let changed = self.controller.feed(event);
        self.follow(inner, changed);
    }

    /// Reports a tick with its readings, then follows a new target as `feed` does.
    fn tick(&mut self, inner: &Arc<Inner>, tick: &hint::Tick) {
        let changed = self.controller.tick(tick);
        self.follow(inner, changed);
    }

    fn follow(&mut self, inner: &Arc<Inner>, mut changed: bool) {
        while changed {
            if self.dispatch(inner) == 0 {
                break;
            }
            let start = Event::Start {
                at: self.controller.now(),
                load: self.load(),
            };
            changed = self.controller.feed(start);
        }
        self.notify_drained(inner);
    }

    fn notify_drained(&self, inner: &Inner) {
        if self.closing && self.in_flight == 0 && self.queue.is_empty() {
            inner.drained.notify_all();
        }
    }
}

impl Pool {
    /// A pool run by `policy`, with at most `max_workers` tasks at once and the builder's other
    /// defaults.
    pub fn new(policy: Box<dyn Policy + Send>, max_workers: usize) -> Pool {
        Pool::builder()
            .policy(policy)
            .max_workers(max_workers)
            .build()
    }

    pub fn builder() -> PoolBuilder {
        PoolBuilder {
            engine: None,
            max_workers: DEFAULT_MAX_WORKERS,
            queue_capacity: None,
            tick: DEFAULT_TICK,
            name: "tact-pool".to_owned(),
            bottleneck: None,
            psi: None,
            turns: None,
            key: None,
            key_dir: None,
        }
    }

    /// Queues a task, blocking while the queue is full (backpressure).
    pub fn submit<R, F>(&self, f: F) -> TaskHandle<R>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (job, handle) = package(f);
        let mut st = self.inner.lock();
        while st.queue.len() >= st.capacity {
            st.space_waiters += 1;
            st = self.inner.space.wait(st).expect(POISONED);
            st.space_waiters -= 1;
        }
        self.enqueue(st, job);
        handle
    }

    /// Queues a task unless the queue is full.
    pub fn try_submit<R, F>(&self, f: F) -> Result<TaskHandle<R>, Full>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let st = self.inner.lock();
        if st.queue.len() >= st.capacity {
            return Err(Full);
        }
        let (job, handle) = package(f);
        self.enqueue(st, job);
        Ok(handle)
    }

    fn enqueue(&self, mut st: MutexGuard<'_, State>, job: Job) {
        let was_empty = st.queue.is_empty();
        st.queue.push_back(job);
        let started = st.dispatch(&self.inner);
        let at = st.controller.now();
        let load = st.load();
        let event = if started > 0 {
            Event::Start { at, load }
        } else if was_empty {
            Event::Load { at, load }
        } else {
            return;
        };
        st.feed(&self.inner, event);
    }

    /// Tasks the pool runs at most at once now.
    pub fn target(&self) -> usize {
        self.inner.lock().controller.target()
    }

    pub fn stats(&self) -> PoolStats {
        let st = self.inner.lock();
        PoolStats {
            target: st.controller.target(),
            workers: st.spawned,
            in_flight: st.in_flight,
            queued: st.queue.len(),
            completed: st.completed,
            panicked: st.panicked,
            status: st.controller.status(),
        }
    }

    /// The policy's state transitions since the last call, oldest first.
    pub fn drain_trace(&self) -> Vec<Transition> {
        self.inner.lock().controller.drain_trace()
    }

    /// The count TCC warm-started from: its [`key`](PoolBuilder::key)'s record, or the
    /// `TuneParams::warm` it was given; None for a cold start or another policy.
    pub fn warm_start(&self) -> Option<usize> {
        self.inner.lock().controller.warm()
    }

    /// The turns taken with other instances ([`PoolBuilder::coordinate`]; none without).
    pub fn turns(&self) -> Option<TurnStats> {
        self.inner.lock().controller.turns()
    }

    /// The turn's changes since the last call, oldest first (waits, grants, releases).
    pub fn drain_turns(&self) -> Vec<TurnEvent> {
        self.inner.lock().controller.drain_turns()
    }

    /// Every target the pool ran, as (time since the pool was built, target): the first entry
    /// is the initial target at zero, then one per change (the last
    /// [`TARGET_HISTORY`](super::TARGET_HISTORY) changes are kept).
    pub fn targets(&self) -> Vec<(Duration, usize)> {
        self.inner.lock().controller.targets()
    }

    /// Runs every queued task, then stops the workers (dropping the pool does the same).
    pub fn shutdown(mut self) {
        self.close();
    }

    fn close(&mut self) {
        let mut st = self.inner.lock();
        if !st.exit {
            st.closing = true;
            while st.in_flight > 0 || !st.queue.is_empty() {
                st = self.inner.drained.wait(st).expect(POISONED);
            }
            st.exit = true;
            for wake in &self.inner.wake {
                wake.notify_one();
            }
            self.inner.ticker.notify_all();
        }
        let handles = std::mem::take(&mut st.handles);
        drop(st);
        // A worker only dies of a panicking policy, which already poisoned the state; there is
        // nothing left to report at shutdown.
        for handle in handles.into_iter().chain(self.ticker.take()) {
            let _ = handle.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.close();
    }
}

const POISONED: &str = "pool state poisoned: a policy panicked";

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect(POISONED)
    }
}

/// A worker: runs what the host hands it, reports each end, parks when given nothing. The
/// result goes to the task's handle after the lock is released, but only once the end was
/// counted.
fn work(inner: &Arc<Inner>, id: usize) {
    let mut next = None;
    loop {
        let mut job = match next.take() {
            Some(job) => job,
            None => {
                let mut st = inner.lock();
                loop {
                    if let Some(job) = st.slots[id].take() {
                        break job;
                    }
                    if st.exit {
                        return;
                    }
                    st = inner.wake[id].wait(st).expect(POISONED);
                }
            }
        };
        let began = Instant::now();
        let returned = job.run();
        let ran = began.elapsed();
        let mut st = inner.lock();
        st.in_flight -= 1;
        if returned {
            st.completed += 1;
        } else {
            st.panicked += 1;
        }
        let took = st.take(inner);
        let at = st.controller.now();
        let load = st.load();
        let event = if returned {
            Event::Complete {
                at,
                load,
                latency: Some(ran),
            }
        } else if took.is_some() {
            Event::Start { at, load }
        } else {
            Event::Load { at, load }
        };
        match took {
            Some(job) => st.slots[id] = Some(job),
            None => st.idle.push(id),
        }
        st.feed(inner, event);
        // Given a task (its own pick, or by a grow while it was parking): run it next.
        next = st.slots[id].take();
        drop(st);
        job.deliver();
    }
}

fn tick_loop(inner: &Arc<Inner>, every: Duration, hint: &mut Hint) {
    let mut st = inner.lock();
    let mut due = st.controller.now() + every;
    while !st.exit {
        let now = st.controller.now();
        if now >= due {
            let tick;
            (st, tick) = hint::tick(st, now, hint, || inner.lock(), |st| st.controller.now());
            st.tick(inner, &tick);
            // From now, not from the missed due time: a late ticker does not fire in bursts.
            due = now + every;
        } else {
            st = inner.ticker.wait_timeout(st, due - now).expect(POISONED).0;
        }
    }
}

fn package<R, F>(f: F) -> (Job, TaskHandle<R>)
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    let job = Box::new(Packaged {
        f: Some(f),
        result: None,
        tx,
    });
    (job, TaskHandle { rx })
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "a panic without a message".to_owned(),
        },
    }
}
