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
//! has been the same size for [`SETTLE`]; its size then is the most workers the count can ask.
//! A worker's own children (a task's subprocess) are stopped and continued with it.
//!
//! **Between tasks.** A worker waiting for its next task is blocked: not runnable, its CPU
//! clock still. Another process's CPU clock moves only at ticks while it runs, but is brought
//! up to date whenever it blocks, so a clock unchanged since the last look together with a
//! state other than R now means it has not run since. Surplus workers are frozen quietest
//! first, among those quiet for at least [`QUIET`]; if too few are, after `--freeze-wait`
//! the quietest running ones are frozen anyway, mid-task, and swapped for the first thawed
//! worker that goes quiet, so that their task goes on soon. A worker blocked inside a task (on
//! I/O, asleep) looks like an idle one, so a quiet frozen worker may hold a task too: when the
//! pool stalls, no task ending for ten mean gaps between completions (spec §6's starvation
//! rule) while every thawed worker is quiet, as at the end of a `Pool.map` that waits for the
//! tasks frozen workers hold, the longest frozen workers are swapped in for the quiet ones.
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
use tact_core::tune::Load;
use tact_linux::probe::cpu::{Activity, ProcWatch};
use tact_linux::state::StateDir;
use tact_linux::{Guard, JobTree, ProcReader};

use super::completions::Counting;

/// How long the set of workers must keep its size before tact takes it as the pool.
const SETTLE: Duration = Duration::from_millis(500);
/// How long a worker must have been blocked, its clock still, to count as between tasks: a few
/// ticks, so that a worker that only paused inside a task is rarely taken for an idle one.
const QUIET: Duration = Duration::from_millis(30);
/// How long the pool may go without a completion, before its first gap between completions is
/// known, until frozen workers are swapped in (they may hold the work it waits for).
const ROTATE: Duration = Duration::from_secs(1);
/// The weight of each new gap in the moving mean of gaps between completions.
const GAP_WEIGHT: f64 = 0.1;
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

/// Watches the command start its pool, until the workers' set has kept its size for
/// [`SETTLE`].
pub struct Discovery {
    reader: ProcReader,
    root: i32,
    /// `--freeze-depth`.
    given: Option<usize>,
    /// The depth and count seen last, and since when.
    seen: Option<(usize, usize, Instant)>,
}

impl Discovery {
    pub fn new(root: i32, given: Option<usize>) -> Self {
        Discovery {
            reader: ProcReader::new(),
            root,
            given,
            seen: None,
        }
    }

    /// The workers' depth and count once the pool has settled.
    pub fn look(&mut self, now: Instant) -> Result<Option<(usize, usize)>> {
        let depth = match self.given {
            Some(depth) => depth,
            None => found_depth(&self.reader, self.root)?,
        };
        let count = workers_at(&self.reader, self.root, depth)?.len();
        match self.seen {
            Some((d, n, since)) if d == depth && n == count => Ok((count > 0
                && now.saturating_duration_since(since) >= SETTLE)
                .then_some((depth, count))),
            _ => {
                self.seen = Some((depth, count, now));
                Ok(None)
            }
        }
    }
}

/// What `--json-log` and `-v` tell of the pool whenever it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frozen {
    /// Live workers.
    pub workers: usize,
    /// Of those, frozen by tact.
    pub frozen: usize,
    /// Of the frozen, those stopped mid-task (after --freeze-wait).
    pub mid_task: usize,
}

/// A worker tact froze, and how.
#[derive(Debug, Clone, Copy)]
struct Hold {
    since: Instant,
    /// Frozen while it was not quiet: it may hold a task.
    mid_task: bool,
}

struct Worker {
    /// The worker and its own children, stopped and continued together.
    tree: JobTree,
    watch: ProcWatch,
    /// Its CPU clock at the last look, and since when it has been blocked with the clock still.
    clock: u64,
    quiet_since: Instant,
    hold: Option<Hold>,
    /// Someone else stopped it: it runs no task, and tact leaves it alone.
    held_by_other: bool,
    /// Someone asked it to end while frozen: never frozen again.
    ending: bool,
}

impl Worker {
    fn quiet_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.quiet_since)
    }

    fn running(&self) -> bool {
        self.hold.is_none() && !self.held_by_other
    }
}

/// The actuator: keeps `target` workers running and the rest frozen.
pub struct Freezer {
    reader: ProcReader,
    root: i32,
    depth: usize,
    /// The most workers the count asks: the pool's size when it settled.
    size: usize,
    workers: Vec<Worker>,
    /// Processes at the workers' depth that tact may not regulate (another user's, say):
    /// left alone, and not asked again while they are there.
    refused: Vec<i32>,
    target: usize,
    /// `--freeze-wait`: how long a surplus waits for quiet workers before running ones go.
    wait: Duration,
    surplus_since: Option<Instant>,
    /// The last completion (or rotation, or the start), and the mean gap between completions.
    progress: Instant,
    gap: Option<Duration>,
    state: StateDir,
    /// Started at the first freeze, with its lease renewed at most every [`RENEW_EVERY`].
    guard: Option<Guard>,
    renewed: Instant,
    /// A signal was passed on to the command: everything is thawed and stays so.
    released: bool,
    /// The counts last reported.
    reported: Frozen,
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
            size,
            workers: Vec::new(),
            refused: Vec::new(),
            target,
            wait,
            surplus_since: None,
            progress: now,
            gap: None,
            state,
            guard: None,
            renewed: now,
            released: false,
            reported: Frozen::default(),
        };
        freezer.look(now)?;
        Ok(freezer)
    }

    pub fn set_target(&mut self, target: usize, now: Instant) -> Result<()> {
        self.target = target;
        self.catch_up(now)
    }

    /// Looks at the workers and freezes or thaws what the target asks.
    pub fn catch_up(&mut self, now: Instant) -> Result<()> {
        self.look(now)?;
        if !self.released {
            self.balance(now)?;
        }
        self.renew(now)
    }

    /// Thawed workers are the jobs in flight; the queue is the program's, unseen, so the pool
    /// counts as saturated when the running workers reach the target.
    pub fn load(&self) -> Load {
        Load::new(self.workers.iter().filter(|w| w.running()).count(), 0)
    }

    /// The counts, when they changed since the last call.
    pub fn changed(&mut self) -> Option<Frozen> {
        let now = Frozen {
            workers: self.workers.len(),
            frozen: self.workers.iter().filter(|w| w.hold.is_some()).count(),
            mid_task: self
                .workers
                .iter()
                .filter(|w| w.hold.is_some_and(|h| h.mid_task))
                .count(),
        };
        (now != self.reported).then(|| {
            self.reported = now;
            now
        })
    }

    /// A signal goes to the command: every frozen worker is continued first, to take it, and
    /// none is frozen again.
    pub fn release(&mut self) -> Result<()> {
        self.released = true;
        let mut first_error = None;
        for w in self.workers.iter_mut().filter(|w| w.hold.is_some()) {
            if let Err(e) = w.tree.resume() {
                first_error.get_or_insert(e);
            }
            w.hold = None;
        }
        first_error.map_or(Ok(()), |e| {
            Err(e).context("--freeze: cannot continue a worker")
        })
    }

    /// Finds new workers, forgets those that exited, and reads how the others run.
    fn look(&mut self, now: Instant) -> Result<()> {
        let pids = workers_at(&self.reader, self.root, self.depth)?;
        let mut gone = Vec::new();
        for (i, w) in self.workers.iter_mut().enumerate() {
            if !w.tree.is_alive() || !pids.contains(&w.tree.root().pid) {
                gone.push(i);
                continue;
            }
            if w.hold.is_some() {
                if !still_frozen(&self.reader, w)? {
                    w.tree.resume().ok();
                    w.hold = None;
                    w.quiet_since = now;
                }
                continue;
            }
            match w.watch.read() {
                Ok(r) => {
                    w.held_by_other = r.activity == Activity::Stopped;
                    if r.cpu_ns != w.clock || r.activity == Activity::Runnable {
                        w.clock = r.cpu_ns;
                        w.quiet_since = now;
                    }
                }
                Err(tact_linux::Error::NoProcess { .. }) => gone.push(i),
                Err(e) => return Err(e).context("--freeze: cannot read a worker"),
            }
        }
        for i in gone.into_iter().rev() {
            // Dropping the tree continues any child of it tact stopped that outlives it.
            let w = self.workers.remove(i);
            if let Err(e) = self.state.remove(&w.tree) {
                tracing::warn!("{e}");
            }
        }
        self.refused.retain(|pid| pids.contains(pid));
        for pid in pids {
            if self.refused.contains(&pid) || self.workers.iter().any(|w| w.tree.root().pid == pid)
            {
                continue;
            }
            if let Some(w) = self.adopt(pid, now)? {
                self.workers.push(w);
            }
        }
        Ok(())
    }

    /// A new worker, or none if it is gone or tact may not regulate it (then it is never
    /// frozen: the refusal is logged).
    fn adopt(&mut self, pid: i32, now: Instant) -> Result<Option<Worker>> {
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
        Ok(Some(Worker {
            tree,
            watch,
            clock,
            quiet_since: now,
            hold: None,
            held_by_other: false,
            ending: false,
        }))
    }

    /// Freezes the surplus (quiet workers first, running ones after `--freeze-wait`), thaws
    /// what the target lacks (mid-task ones first), and swaps a quiet worker for a frozen one
    /// that may hold work.
    fn balance(&mut self, now: Instant) -> Result<()> {
        let target = self.target.min(self.size);
        let running = self.workers.iter().filter(|w| w.running()).count();
        if running <= target {
            self.surplus_since = None;
        }
        if running > target {
            let mut surplus = running - target;
            let quiet = self.candidates(now, QUIET);
            for &i in quiet.iter().take(surplus) {
                surplus -= usize::from(self.freeze(i, false, now)?);
            }
            if surplus == 0 {
                self.surplus_since = None;
                return Ok(());
            }
            let since = *self.surplus_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= self.wait {
                for i in self
                    .candidates(now, Duration::ZERO)
                    .into_iter()
                    .take(surplus)
                {
                    self.freeze(i, true, now)?;
                }
                self.surplus_since = None;
            }
            return Ok(());
        }
        if running < target {
            for i in self.thaw_order().into_iter().take(target - running) {
                self.thaw(i, now)?;
            }
            return Ok(());
        }
        self.swap(now)
    }

    /// Running workers that may be frozen, quiet for at least `quiet`, quietest first.
    fn candidates(&self, now: Instant, quiet: Duration) -> Vec<usize> {
        let mut c: Vec<usize> = (0..self.workers.len())
            .filter(|&i| {
                let w = &self.workers[i];
                w.running() && !w.ending && w.quiet_for(now) >= quiet
            })
            .collect();
        c.sort_by_key(|&i| self.workers[i].quiet_since);
        c
    }

    /// Frozen workers, mid-task ones first, then the longest frozen.
    fn thaw_order(&self) -> Vec<usize> {
        let mut c: Vec<usize> = (0..self.workers.len())
            .filter(|&i| self.workers[i].hold.is_some())
            .collect();
        c.sort_by_key(|&i| {
            let h = self.workers[i].hold.expect("frozen");
            (!h.mid_task, h.since)
        });
        c
    }

    /// At the target: a quiet worker makes way for one frozen mid-task; and when the pool has
    /// stalled (see [`Freezer::stalled`]) with every thawed worker quiet, as many quiet workers
    /// as there are make way for the longest frozen ones.
    fn swap(&mut self, now: Instant) -> Result<()> {
        let order = self.thaw_order();
        let Some(&first) = order.first() else {
            return Ok(());
        };
        if self.workers[first].hold.is_some_and(|h| h.mid_task) {
            if let Some(&quiet) = self.candidates(now, QUIET).first() {
                if self.freeze(quiet, false, now)? {
                    self.thaw(first, now)?;
                }
            }
            return Ok(());
        }
        let all_quiet = self
            .workers
            .iter()
            .filter(|w| w.running())
            .all(|w| w.quiet_for(now) >= QUIET);
        if !all_quiet || !self.stalled(now) {
            return Ok(());
        }
        let quiet = self.candidates(now, QUIET);
        for (&q, &f) in quiet.iter().zip(&order) {
            if self.freeze(q, false, now)? {
                self.thaw(f, now)?;
            }
        }
        // The next rotation waits for another stall.
        self.progress = now;
        Ok(())
    }

    /// Whether no task has ended for ten mean gaps between completions (spec §6's starvation
    /// rule; [`ROTATE`] before the first gap is known), counting from the last completion or
    /// rotation.
    fn stalled(&self, now: Instant) -> bool {
        let bound = self.gap.map_or(ROTATE, |g| (g * 10).max(QUIET));
        now.saturating_duration_since(self.progress) >= bound
    }

    /// `n` tasks ended since the last call: the mean gap between completions follows.
    pub fn completed(&mut self, n: usize, now: Instant) {
        if n == 0 {
            return;
        }
        let gap = now.saturating_duration_since(self.progress) / n as u32;
        self.gap = Some(match self.gap {
            // A moving mean over some ten polls with completions.
            Some(mean) => mean.mul_f64(1.0 - GAP_WEIGHT) + gap.mul_f64(GAP_WEIGHT),
            None => gap,
        });
        self.progress = now;
    }

    /// Stops worker `i` with its children, the crash record and the guard in place first.
    /// Whether it is frozen now: one still running after `JobTree`'s wait (in the kernel for
    /// that long) is continued and left running for now.
    fn freeze(&mut self, i: usize, mid_task: bool, now: Instant) -> Result<bool> {
        if self.guard.is_none() {
            let exe = std::env::current_exe()
                .context("cannot find tact's own executable for its guard")?;
            let mut guard = Guard::start(&exe, &["__guard"])?;
            guard.renew(LEASE)?;
            self.guard = Some(guard);
            self.renewed = now;
        }
        let guard = self.guard.as_mut().expect("started above");
        let state = &self.state;
        let w = &mut self.workers[i];
        // Every member goes to the guard, not only the stopped ones: workers are frozen and
        // thawed many times, and a pidfd sent once serves for all (a running process the
        // guard continues is unaffected).
        match w.tree.stop_with(|t| {
            state.record(t)?;
            guard.watch_all(t)
        }) {
            Ok(()) => {
                w.hold = Some(Hold {
                    since: now,
                    mid_task,
                });
                Ok(true)
            }
            Err(tact_linux::Error::NotStopped { pids, waited }) => {
                w.tree.resume().ok();
                tracing::warn!("--freeze: {pids:?} still running {waited:?} after SIGSTOP");
                Ok(false)
            }
            Err(e) => {
                w.tree.resume().ok();
                Err(e).context("--freeze: cannot freeze a worker")
            }
        }
    }

    fn thaw(&mut self, i: usize, now: Instant) -> Result<()> {
        let w = &mut self.workers[i];
        w.tree
            .resume()
            .context("--freeze: cannot continue a worker")?;
        w.hold = None;
        // It was not running while frozen: quiet from now on, not from before.
        w.quiet_since = now;
        Ok(())
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

/// Whether a worker tact froze is still stopped. One that someone else continued is not;
/// one with a request to end pending is continued now and never frozen again.
fn still_frozen(reader: &ProcReader, w: &mut Worker) -> Result<bool> {
    let stat = match reader.stat(w.tree.root().pid) {
        Ok(s) if s.start_time == w.tree.root().start_time => s,
        // Gone: the next look forgets it.
        Ok(_) | Err(tact_linux::Error::NoProcess { .. }) => return Ok(true),
        Err(e) => return Err(e).context("--freeze: cannot read a worker"),
    };
    if matches!(stat.state, 'R' | 'S') {
        return Ok(false);
    }
    let masks = match reader.signal_masks(stat.pid) {
        Ok(m) => m,
        Err(tact_linux::Error::NoProcess { .. }) => return Ok(true),
        Err(e) => return Err(e).context("--freeze: cannot read a worker"),
    };
    let pending = masks.thread_pending | masks.shared_pending;
    if ENDING.iter().any(|&s| pending & (1 << (s - 1)) != 0) {
        w.ending = true;
        return Ok(false);
    }
    Ok(true)
}

impl Drop for Freezer {
    /// Every exit path: the workers are continued (each tree resumes what it stopped), then
    /// the guard leaves and the crash records go.
    fn drop(&mut self) {
        for w in &mut self.workers {
            if let Err(e) = w.tree.resume() {
                tracing::warn!("--freeze: {e}");
            }
        }
        if let Some(guard) = self.guard.take() {
            if let Err(e) = guard.bye() {
                tracing::warn!("guard: {e}");
            }
        }
        for w in &self.workers {
            if let Err(e) = self.state.remove(&w.tree) {
                tracing::warn!("{e}");
            }
        }
    }
}

/// Refuses what cannot work with `--freeze`, before the command starts.
pub fn check(completions: &Counting) -> Result<()> {
    if *completions == Counting::Children {
        bail!(
            "--freeze: a pool's workers live on from task to task, so their exits count no \
             tasks; count them with --completions file:PATH (a counter the program keeps) or \
             tree (when each task is a process of its own)"
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
