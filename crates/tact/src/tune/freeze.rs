//! `--freeze`: the count reaches a program with a fixed pool of long-lived workers (a Python
//! `multiprocessing.Pool`, `gunicorn -w N`, a prefork daemon) by stopping its surplus workers
//! with SIGSTOP and continuing them with SIGCONT (spec concurrency.md §6, "Freezing surplus
//! workers"). Frozen work is delayed, never lost: a worker is stopped whole, with the task it
//! holds, if any, and goes on with it when continued.
//!
//! **Which processes are workers.** The processes at one depth below the command's process. By
//! default that depth is found once the pool has started: tact goes down from the command's
//! process while it has exactly one child (a wrapper: `sh -c`, `timeout`, `uv run`), and the
//! workers are the children of the first process with several (or none). `--freeze-depth N`
//! says it instead (1: the command's children; 2: their children, e.g. Python's forkserver
//! pools, whose workers are children of the forkserver). The pool has started when that set
//! has been the same size for [`SETTLE`](tact_core::tune::freeze::SETTLE); its size then is the most workers the count can ask.
//! A worker's own children (a task's subprocess) are stopped and continued with it.
//!
//! **Which to freeze.** [`tact_core::tune::freeze`] decides, from the workers' CPU clocks and
//! states read here: surplus workers between tasks first, busy ones after `--freeze-wait`, and
//! swaps when a frozen worker may hold work the pool waits for (its module doc tells how). This
//! module only reads `/proc` and sends the signals.
//!
//! **Safety.** Each worker is a [`JobTree`], stopped through `stop_with`, which records it in
//! the crash state directory and hands its pidfds to the guard before the signal: if tact
//! dies, the guard continues them within its lease, and `tact recover` does what both left.
//! A signal tact passes on to the command first continues every frozen worker and ends
//! freezing; any exit path continues them (dropping a tree resumes it). A frozen worker that
//! someone signals to end (SIGTERM, SIGINT, SIGHUP, SIGQUIT pending) is continued and never
//! frozen again, so that a pool shutting down its workers is not held up; one that someone
//! else continued counts as thawed; one that exits is forgotten.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
pub use tact_core::tune::freeze::Frozen;
use tact_core::tune::freeze::{Actuate, FrozenLook, Pool, Reading, Settle};
use tact_core::tune::Load;
use tact_linux::probe::cpu::{Activity, ProcWatch};
use tact_linux::probe::proc::SignalMasks;
use tact_linux::state::StateDir;
use tact_linux::{Guard, JobTree, ProcReader};

use super::completions::Counting;

/// The guard continues everything if tact has not renewed its lease for this long (tact hung).
const LEASE: Duration = Duration::from_secs(10);
/// How often the lease is renewed.
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// Signals that ask a process to end: a frozen worker with one pending is continued to take it.
const ENDING: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The workers of the command's process `root`: its descendants `depth` levels down.
fn workers_at(reader: &ProcReader, root: i32, depth: usize) -> Result<Vec<i32>> {
    let mut level = vec![root];
    for _ in 0..depth {
        let mut next = Vec::new();
        for pid in level {
            match reader.children(pid) {
                Ok(kids) => next.extend(kids),
                Err(tact_linux::Error::NoProcess { .. }) => {}
                Err(e) => return Err(e).context("--freeze: cannot list the command's processes"),
            }
        }
        level = next;
    }
    Ok(level)
}

/// The depth of the workers when none is given: below the chain of processes with one child.
fn found_depth(reader: &ProcReader, root: i32) -> Result<usize> {
    let (mut pid, mut depth) = (root, 1);
    loop {
        match reader.children(pid) {
            Ok(kids) if kids.len() == 1 => {
                pid = kids[0];
                depth += 1;
            }
            Ok(_) | Err(tact_linux::Error::NoProcess { .. }) => return Ok(depth),
            Err(e) => return Err(e).context("--freeze: cannot list the command's processes"),
        }
    }
}

/// Watches the command start its pool, until the workers' set has settled ([`Settle`]).
pub struct Discovery {
    reader: ProcReader,
    root: i32,
    /// `--freeze-depth`.
    given: Option<usize>,
    settle: Settle,
    /// The first look: the time [`Settle`] counts from.
    origin: Option<Instant>,
}

impl Discovery {
    pub fn new(root: i32, given: Option<usize>) -> Self {
        Discovery {
            reader: ProcReader::new(),
            root,
            given,
            settle: Settle::default(),
            origin: None,
        }
    }

    /// The workers' depth and count once the pool has settled.
    pub fn look(&mut self, now: Instant) -> Result<Option<(usize, usize)>> {
        let depth = match self.given {
            Some(depth) => depth,
            None => found_depth(&self.reader, self.root)?,
        };
        let count = workers_at(&self.reader, self.root, depth)?.len();
        let origin = *self.origin.get_or_insert(now);
        Ok(self
            .settle
            .look(depth, count, now.saturating_duration_since(origin)))
    }
}

/// A worker as tact acts on it.
struct Member {
    /// The worker and its own children, stopped and continued together.
    tree: JobTree,
    watch: ProcWatch,
}

/// The workers' process trees, with the crash records and the guard that make freezing them
/// safe: what carries out the pool's freezes and thaws.
struct Trees {
    /// In the pool's order.
    members: Vec<Member>,
    state: StateDir,
    /// Started at the first freeze, with its lease renewed at most every [`RENEW_EVERY`].
    guard: Option<Guard>,
    renewed: Instant,
}

/// The tree of worker `pid`.
fn tree_of(members: &mut [Member], pid: i32) -> &mut JobTree {
    &mut members
        .iter_mut()
        .find(|m| m.tree.root().pid == pid)
        .expect("the pool and the trees know the same workers")
        .tree
}

impl Trees {
    /// Drops a worker's tree, which continues any child of it tact stopped that outlives it.
    fn forget(&mut self, pid: i32) {
        self.members.retain(|m| {
            if m.tree.root().pid != pid {
                return true;
            }
            if let Err(e) = self.state.remove(&m.tree) {
                tracing::warn!("{e}");
            }
            false
        });
    }

    fn renew(&mut self, now: Instant) -> Result<()> {
        if let Some(guard) = &mut self.guard {
            if now.saturating_duration_since(self.renewed) >= RENEW_EVERY {
                guard.renew(LEASE)?;
                self.renewed = now;
            }
        }
        Ok(())
    }
}

impl Actuate for Trees {
    type Error = anyhow::Error;

    /// Stops the worker with its children, the crash record and the guard in place first. One
    /// still running after `JobTree`'s wait (in the kernel for that long) is continued and left
    /// running for now.
    fn freeze(&mut self, pid: i32) -> Result<bool> {
        if self.guard.is_none() {
            let exe = std::env::current_exe()
                .context("cannot find tact's own executable for its guard")?;
            let mut guard = Guard::start(&exe, &["__guard"])?;
            guard.renew(LEASE)?;
            self.guard = Some(guard);
            // The lease runs from its grant: now, a moment after the poll that asked.
            self.renewed = Instant::now();
        }
        let guard = self.guard.as_mut().expect("started above");
        let state = &self.state;
        let tree = tree_of(&mut self.members, pid);
        // Every member goes to the guard, not only the stopped ones: workers are frozen and
        // thawed many times, and a pidfd sent once serves for all (a running process the
        // guard continues is unaffected).
        match tree.stop_with(|t| {
            state.record(t)?;
            guard.watch_all(t)
        }) {
            Ok(()) => Ok(true),
            Err(tact_linux::Error::NotStopped { pids, waited }) => {
                tree.resume().ok();
                tracing::warn!("--freeze: {pids:?} still running {waited:?} after SIGSTOP");
                Ok(false)
            }
            Err(e) => {
                tree.resume().ok();
                Err(e).context("--freeze: cannot freeze a worker")
            }
        }
    }

    fn thaw(&mut self, pid: i32) -> Result<()> {
        tree_of(&mut self.members, pid)
            .resume()
            .context("--freeze: cannot continue a worker")
    }
}

impl Drop for Trees {
    /// Every exit path: the workers are continued (each tree resumes what it stopped), then
    /// the guard leaves and the crash records go.
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Err(e) = m.tree.resume() {
                tracing::warn!("--freeze: {e}");
            }
        }
        if let Some(guard) = self.guard.take() {
            if let Err(e) = guard.bye() {
                tracing::warn!("guard: {e}");
            }
        }
        for m in &self.members {
            if let Err(e) = self.state.remove(&m.tree) {
                tracing::warn!("{e}");
            }
        }
    }
}

/// The actuator: keeps `target` workers running and the rest frozen, as the [`Pool`] decides.
pub struct Freezer {
    reader: ProcReader,
    root: i32,
    depth: usize,
    pool: Pool,
    trees: Trees,
    /// Processes at the workers' depth that tact may not regulate (another user's, say):
    /// left alone, and not asked again while they are there.
    refused: Vec<i32>,
    /// The pool's time zero.
    origin: Instant,
}

impl Freezer {
    /// The pool of the command's process `root`, with its workers `depth` levels down.
    pub fn new(
        root: i32,
        depth: usize,
        size: usize,
        target: usize,
        wait: Duration,
        now: Instant,
    ) -> Result<Self> {
        let state = StateDir::new(crate::paths::runtime_dir()?)
            .context("--freeze: cannot create the crash state directory")?;
        let mut freezer = Freezer {
            reader: ProcReader::new(),
            root,
            depth,
            pool: Pool::new(size, target, wait, Duration::ZERO),
            trees: Trees {
                members: Vec::new(),
                state,
                guard: None,
                renewed: now,
            },
            refused: Vec::new(),
            origin: now,
        };
        freezer.look(now)?;
        Ok(freezer)
    }

    pub fn set_target(&mut self, target: usize, now: Instant) -> Result<()> {
        self.pool.set_target(target);
        self.catch_up(now)
    }

    /// Looks at the workers and freezes or thaws what the target asks.
    pub fn catch_up(&mut self, now: Instant) -> Result<()> {
        self.look(now)?;
        let at = self.at(now);
        self.pool.balance(at, &mut self.trees)?;
        self.trees.renew(now)
    }

    /// Thawed workers are the jobs in flight; the queue is the program's, unseen, so the pool
    /// counts as saturated when the running workers reach the target.
    pub fn load(&self) -> Load {
        Load::new(self.pool.running(), 0)
    }

    /// The counts, when they changed since the last call.
    pub fn changed(&mut self) -> Option<Frozen> {
        self.pool.changed()
    }

    /// A signal goes to the command: every frozen worker is continued first, to take it, and
    /// none is frozen again.
    pub fn release(&mut self) -> Result<()> {
        self.pool.release(&mut self.trees)
    }

    /// `n` tasks ended since the last call.
    pub fn completed(&mut self, n: usize, now: Instant) {
        self.pool.completed(n, self.at(now));
    }

    fn at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.origin)
    }

    /// Finds new workers, forgets those that exited, and tells the pool how the others run.
    fn look(&mut self, now: Instant) -> Result<()> {
        let at = self.at(now);
        let pids = workers_at(&self.reader, self.root, self.depth)?;
        let mut gone = Vec::new();
        for m in &mut self.trees.members {
            let pid = m.tree.root().pid;
            if !m.tree.is_alive() || !pids.contains(&pid) {
                gone.push(pid);
                continue;
            }
            if self.pool.is_frozen(pid) {
                let look = frozen_look(&self.reader, &m.tree)?;
                if self.pool.frozen_seen(pid, look, at) {
                    m.tree.resume().ok();
                }
                continue;
            }
            match m.watch.read() {
                Ok(r) => {
                    let reading = Reading {
                        cpu_ns: r.cpu_ns,
                        runnable: r.activity == Activity::Runnable,
                        stopped: r.activity == Activity::Stopped,
                    };
                    self.pool.seen(pid, reading, at);
                }
                Err(tact_linux::Error::NoProcess { .. }) => gone.push(pid),
                Err(e) => return Err(e).context("--freeze: cannot read a worker"),
            }
        }
        for pid in gone {
            self.pool.forget(pid);
            self.trees.forget(pid);
        }
        self.refused.retain(|pid| pids.contains(pid));
        for pid in pids {
            if self.refused.contains(&pid) || self.pool.knows(pid) {
                continue;
            }
            if let Some((member, clock)) = self.adopt(pid)? {
                self.trees.members.push(member);
                self.pool.adopt(pid, clock, at);
            }
        }
        Ok(())
    }

    /// A new worker and its CPU clock, or none if it is gone or tact may not regulate it (then
    /// it is never frozen: the refusal is logged).
    fn adopt(&mut self, pid: i32) -> Result<Option<(Member, u64)>> {
        let tree = match JobTree::attach(pid) {
            Ok(tree) => tree,
            // One that exited (a zombie its pool has not reaped yet) is refused too: not for
            // long.
            Err(tact_linux::Error::Refused { reason, .. })
                if !reason.contains("exited") && reason != "no such process" =>
            {
                tracing::warn!("--freeze: leaving worker {pid} alone: {reason}");
                self.refused.push(pid);
                return Ok(None);
            }
            Err(tact_linux::Error::Refused { .. } | tact_linux::Error::NoProcess { .. }) => {
                return Ok(None)
            }
            Err(e) => return Err(e).context("--freeze: cannot follow a worker"),
        };
        let mut watch = match ProcWatch::open(pid) {
            Ok(watch) if watch.id() == tree.root() => watch,
            // Exited (and maybe replaced) meanwhile: the next look sees what is there.
            Ok(_) | Err(tact_linux::Error::NoProcess { .. }) => return Ok(None),
            Err(e) => return Err(e).context("--freeze: cannot watch a worker"),
        };
        let clock = match watch.cpu_ns() {
            Ok(ns) => ns,
            Err(tact_linux::Error::NoProcess { .. }) => return Ok(None),
            Err(e) => return Err(e).context("--freeze: cannot read a worker"),
        };
        Ok(Some((Member { tree, watch }, clock)))
    }
}

/// How a worker tact froze is: still stopped, continued by someone else, or stopped with a
/// request to end pending.
fn frozen_look(reader: &ProcReader, tree: &JobTree) -> Result<FrozenLook> {
    let stat = match reader.stat(tree.root().pid) {
        Ok(s) if s.start_time == tree.root().start_time => s,
        // Gone: the next look forgets it.
        Ok(_) | Err(tact_linux::Error::NoProcess { .. }) => return Ok(FrozenLook::Stopped),
        Err(e) => return Err(e).context("--freeze: cannot read a worker"),
    };
    if matches!(stat.state, 'R' | 'S') {
        return Ok(FrozenLook::Continued);
    }
    let masks = match reader.signal_masks(stat.pid) {
        Ok(m) => m,
        Err(tact_linux::Error::NoProcess { .. }) => return Ok(FrozenLook::Stopped),
        Err(e) => return Err(e).context("--freeze: cannot read a worker"),
    };
    let pending = masks.thread_pending | masks.shared_pending;
    if ENDING.iter().any(|&s| SignalMasks::has(pending, s)) {
        return Ok(FrozenLook::AskedToEnd);
    }
    Ok(FrozenLook::Stopped)
}

/// Refuses what cannot work with `--freeze`, before the command starts.
pub fn check(completions: &Counting) -> Result<()> {
    if *completions == Counting::Children {
        bail!(
            "--freeze: a pool's workers live on from task to task, so their exits count no \
             tasks; count them with --completions file:PATH (a counter the program keeps), \
             tree (when each task is a process of its own) or wrap (tasks run through tact \
             exec-wrap)"
        );
    }
    Ok(())
}

/// `--init` and `--max` for a pool of `size` workers: the count never exceeds the pool, and
/// both default to its size (tact starts where the program would run and trims from there).
pub fn counts(init: Option<u32>, max: Option<u32>, size: usize) -> (usize, usize) {
    let max = max.map_or(size, |m| (m as usize).min(size));
    let init = init.map_or(max, |n| (n as usize).min(max));
    (init, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    #[test]
    fn the_count_defaults_to_the_pool_and_never_exceeds_it() {
        assert_eq!(counts(None, None, 6), (6, 6));
        assert_eq!(counts(Some(2), None, 6), (2, 6));
        assert_eq!(counts(None, Some(4), 6), (4, 4));
        assert_eq!(counts(Some(9), Some(12), 6), (6, 6));
        assert_eq!(counts(Some(3), Some(12), 6), (3, 6));
    }

    #[test]
    fn only_a_counter_or_the_tree_counts_a_pool_s_tasks() {
        let e = check(&Counting::Children).unwrap_err().to_string();
        assert!(e.contains("--completions file:PATH"), "{e}");
        assert!(check(&Counting::Tree).is_ok());
        assert!(check(&Counting::File("n".into())).is_ok());
    }

    /// A shell with three sleeping children, run by a shell directly (`wrapper` empty) or
    /// after `wrapper` (`exec`: the same process; `true;`: a child of the outer shell).
    fn pool_behind(wrapper: &str) -> Child {
        let pool = "sleep 30 & sleep 30 & sleep 30 & wait";
        let script = match wrapper {
            "" => pool.to_string(),
            w => format!("{w} sh -c '{pool}'; exit"),
        };
        Command::new("sh").args(["-c", &script]).spawn().unwrap()
    }

    fn settled(root: i32, given: Option<usize>) -> (usize, usize) {
        let mut d = Discovery::new(root, given);
        let start = Instant::now();
        loop {
            let now = Instant::now();
            if let Some(found) = d.look(now).unwrap() {
                return found;
            }
            assert!(now - start < Duration::from_secs(30), "never settled");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn end(mut child: Child) {
        let reader = ProcReader::new();
        // The outer shell first, so that no shell is left to report its child's death.
        for pid in reader.descendants(child.id() as i32).unwrap_or_default() {
            // SAFETY: plain kill(2) of a process this test started (its tree, read just now).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        child.wait().unwrap();
    }

    #[test]
    fn workers_are_found_below_wrappers_or_at_the_depth_given() {
        let direct = pool_behind("");
        assert_eq!(settled(direct.id() as i32, None), (1, 3));
        end(direct);
        let behind = pool_behind("exec");
        assert_eq!(
            settled(behind.id() as i32, None),
            (1, 3),
            "exec leaves no wrapper"
        );
        end(behind);
        // sh -> sh -> three sleepers: two levels down.
        let nested = pool_behind("true;");
        assert_eq!(settled(nested.id() as i32, None), (2, 3));
        // Given, the depth is taken as it is: one level down is the inner shell alone.
        assert_eq!(settled(nested.id() as i32, Some(1)), (1, 1));
        end(nested);
    }
}
