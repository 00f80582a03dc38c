//! The decisions of `tact tune --freeze` (spec concurrency.md §6, "Freezing surplus workers"):
//! which of a fixed pool's workers to stop so that the controller's target of them runs, and
//! which to continue. The binary (`crates/tact/src/tune/freeze.rs`) reads `/proc`, feeds the
//! readings to a [`Pool`] as plain data (pids, CPU clocks, states) and carries out its freezes
//! and thaws through [`Actuate`]; time is an argument, as everywhere in tact-core.
//!
//! **Between tasks.** A worker waiting for its next task is blocked: not runnable, its CPU
//! clock still. Another process's CPU clock moves only at ticks while it runs, but is brought
//! up to date whenever it blocks, so a clock unchanged since the last look together with a
//! state other than R now means it has not run since. Surplus workers are frozen quietest
//! first, among those quiet for at least [`QUIET`]; if too few are, after the wait
//! (`--freeze-wait`) the quietest running ones are frozen anyway, mid-task, and swapped for the
//! first thawed worker that goes quiet, so that their task goes on soon. A worker blocked
//! inside a task (on I/O, asleep) looks like an idle one, so a quiet frozen worker may hold a
//! task too: when the pool stalls, no task ending for ten mean gaps between completions (spec
//! §6's starvation rule) while every thawed worker is quiet, as at the end of a `Pool.map` that
//! waits for the tasks frozen workers hold, the longest frozen workers are swapped in for the
//! quiet ones.
//!
//! **Whose workers.** A worker someone else stopped is left alone and does not count as
//! running; one tact froze that someone else continued counts as thawed; one asked to end
//! while frozen is continued and never frozen again, so that a pool shutting down is not held
//! up. Once released (a signal went to the command), nothing is frozen again.
//!
//! A freeze may not take (the worker stays in the kernel past the stop's wait, and the binary
//! continues it again), and what follows depends on it: a surplus left over goes on to the
//! mid-task freezes, and a swap thaws only after its freeze took. So the pool acts through
//! [`Actuate`] as it decides, rather than returning a plan the outcome could invalidate.

use std::time::Duration;

use super::gaps::{Gaps, STARVED_GAPS};

/// How long the set of workers must keep its size before it is taken as the pool.
pub const SETTLE: Duration = Duration::from_millis(500);
/// How long a worker must have been blocked, its clock still, to count as between tasks: a few
/// ticks, so that a worker that only paused inside a task is rarely taken for an idle one.
pub const QUIET: Duration = Duration::from_millis(30);
/// How long the pool may go without a completion, before its first gap between completions is
/// known, until frozen workers are swapped in (they may hold the work it waits for).
pub const ROTATE: Duration = Duration::from_secs(1);

/// Watches the command start its pool: the pool has started when the workers' depth and count
/// have stayed the same for [`SETTLE`], and their count then is the pool's size.
#[derive(Debug, Clone, Default)]
pub struct Settle {
    /// The depth and count seen last, and since when.
    seen: Option<(usize, usize, Duration)>,
}

impl Settle {
    /// `count` workers at `depth` now: the depth and count once the pool has settled (never
    /// with no workers).
    pub fn look(&mut self, depth: usize, count: usize, now: Duration) -> Option<(usize, usize)> {
        match self.seen {
            Some((d, n, since)) if d == depth && n == count => {
                (count > 0 && now.saturating_sub(since) >= SETTLE).then_some((depth, count))
            }
            _ => {
                self.seen = Some((depth, count, now));
                None
            }
        }
    }
}

/// What carries out a [`Pool`]'s decisions: the binary signals the worker with its own
/// children; tests record the calls.
pub trait Actuate {
    type Error;
    /// Stops worker `pid`. `Ok(false)`: it did not stop in time and runs on (continued again).
    fn freeze(&mut self, pid: i32) -> Result<bool, Self::Error>;
    /// Continues worker `pid`.
    fn thaw(&mut self, pid: i32) -> Result<(), Self::Error>;
}

/// A look at a worker tact has not frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Its CPU clock, in nanoseconds.
    pub cpu_ns: u64,
    /// A thread of it is runnable (R).
    pub runnable: bool,
    /// Someone else stopped it.
    pub stopped: bool,
}

/// A look at a worker tact froze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrozenLook {
    /// Still stopped (or gone: the next look at the set forgets it).
    Stopped,
    /// Someone else continued it.
    Continued,
    /// Stopped with a request to end pending (SIGTERM, SIGINT, SIGHUP, SIGQUIT).
    AskedToEnd,
}

/// What `--json-log` and `-v` tell of the pool whenever it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frozen {
    /// Live workers.
    pub workers: usize,
    /// Of those, frozen by tact.
    pub frozen: usize,
    /// Of the frozen, those stopped mid-task (after the wait).
    pub mid_task: usize,
}

/// A worker tact froze, and how.
#[derive(Debug, Clone, Copy)]
struct Hold {
    since: Duration,
    /// Frozen while it was not quiet: it may hold a task.
    mid_task: bool,
}

#[derive(Debug, Clone)]
struct Worker {
    pid: i32,
    /// Its CPU clock at the last look, and since when it has been blocked with the clock still.
    clock: u64,
    quiet_since: Duration,
    hold: Option<Hold>,
    /// Someone else stopped it: it runs no task, and tact leaves it alone.
    held_by_other: bool,
    /// Someone asked it to end while frozen: never frozen again.
    ending: bool,
}

impl Worker {
    fn quiet_for(&self, now: Duration) -> Duration {
        now.saturating_sub(self.quiet_since)
    }

    fn running(&self) -> bool {
        self.hold.is_none() && !self.held_by_other
    }
}

/// A fixed pool's workers, kept at the target running and the rest frozen.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The most workers the count asks: the pool's size when it settled.
    size: usize,
    /// In the order they were found: the tie-breaker among equally quiet ones.
    workers: Vec<Worker>,
    target: usize,
    /// How long a surplus waits for quiet workers before running ones go.
    wait: Duration,
    surplus_since: Option<Duration>,
    /// The last completion (or rotation, or the start), and the mean gap between completions.
    gaps: Gaps,
    /// A signal was passed on to the command: everything is thawed and stays so.
    released: bool,
    /// The counts last reported.
    reported: Frozen,
}

impl Pool {
    /// A pool of `size` workers (none known yet) that runs `target` of them.
    pub fn new(size: usize, target: usize, wait: Duration, now: Duration) -> Self {
        Pool {
            size,
            workers: Vec::new(),
            target,
            wait,
            surplus_since: None,
            gaps: Gaps::since(now),
            released: false,
            reported: Frozen::default(),
        }
    }

    pub fn set_target(&mut self, target: usize) {
        self.target = target;
    }

    /// The known workers, in the order they were found.
    pub fn pids(&self) -> impl Iterator<Item = i32> + '_ {
        self.workers.iter().map(|w| w.pid)
    }

    pub fn knows(&self, pid: i32) -> bool {
        self.workers.iter().any(|w| w.pid == pid)
    }

    /// Whether tact holds `pid` frozen.
    pub fn is_frozen(&self, pid: i32) -> bool {
        self.workers
            .iter()
            .any(|w| w.pid == pid && w.hold.is_some())
    }

    /// A new worker, running, its CPU clock at `cpu_ns`.
    pub fn adopt(&mut self, pid: i32, cpu_ns: u64, now: Duration) {
        debug_assert!(!self.knows(pid), "worker {pid} adopted twice");
        self.workers.push(Worker {
            pid,
            clock: cpu_ns,
            quiet_since: now,
            hold: None,
            held_by_other: false,
            ending: false,
        });
    }

    /// A worker that exited or left the workers' depth.
    pub fn forget(&mut self, pid: i32) {
        self.workers.retain(|w| w.pid != pid);
    }

    /// A look at a running worker: a moved clock or a runnable thread means it is not quiet.
    pub fn seen(&mut self, pid: i32, r: Reading, now: Duration) {
        let Some(w) = self.workers.iter_mut().find(|w| w.pid == pid) else {
            return;
        };
        w.held_by_other = r.stopped;
        if r.cpu_ns != w.clock || r.runnable {
            w.clock = r.cpu_ns;
            w.quiet_since = now;
        }
    }

    /// A look at a worker tact froze. True when it is thawed now, someone else having
    /// continued it or asked it to end: the caller continues it (and its children) too.
    pub fn frozen_seen(&mut self, pid: i32, look: FrozenLook, now: Duration) -> bool {
        let Some(w) = self
            .workers
            .iter_mut()
            .find(|w| w.pid == pid && w.hold.is_some())
        else {
            return false;
        };
        match look {
            FrozenLook::Stopped => return false,
            FrozenLook::Continued => {}
            FrozenLook::AskedToEnd => w.ending = true,
        }
        w.hold = None;
        w.quiet_since = now;
        true
    }

    /// Running workers: the jobs in flight.
    pub fn running(&self) -> usize {
        self.workers.iter().filter(|w| w.running()).count()
    }

    /// The counts now.
    pub fn counts(&self) -> Frozen {
        Frozen {
            workers: self.workers.len(),
            frozen: self.workers.iter().filter(|w| w.hold.is_some()).count(),
            mid_task: self
                .workers
                .iter()
                .filter(|w| w.hold.is_some_and(|h| h.mid_task))
                .count(),
        }
    }

    /// The counts, when they changed since the last call.
    pub fn changed(&mut self) -> Option<Frozen> {
        let now = self.counts();
        (now != self.reported).then(|| {
            self.reported = now;
            now
        })
    }

    /// A signal goes to the command: every frozen worker is continued first, to take it, and
    /// none is frozen again. Continues them all whatever fails; the first error is returned.
    pub fn release<A: Actuate>(&mut self, act: &mut A) -> Result<(), A::Error> {
        self.released = true;
        let mut first_error = None;
        for w in self.workers.iter_mut().filter(|w| w.hold.is_some()) {
            if let Err(e) = act.thaw(w.pid) {
                first_error.get_or_insert(e);
            }
            w.hold = None;
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `n` tasks ended since the last call: the mean gap between completions follows.
    pub fn completed(&mut self, n: usize, now: Duration) {
        self.gaps
            .completed(u32::try_from(n).unwrap_or(u32::MAX), now, None);
    }

    /// Freezes the surplus (quiet workers first, running ones after the wait), thaws what the
    /// target lacks (mid-task ones first), and swaps a quiet worker for a frozen one that may
    /// hold work. Nothing once released.
    pub fn balance<A: Actuate>(&mut self, now: Duration, act: &mut A) -> Result<(), A::Error> {
        if self.released {
            return Ok(());
        }
        let target = self.target.min(self.size);
        let running = self.running();
        if running <= target {
            self.surplus_since = None;
        }
        if running > target {
            let mut surplus = running - target;
            let quiet = self.candidates(now, QUIET);
            for &i in quiet.iter().take(surplus) {
                surplus -= usize::from(self.freeze(i, false, now, act)?);
            }
            if surplus == 0 {
                self.surplus_since = None;
                return Ok(());
            }
            let since = *self.surplus_since.get_or_insert(now);
            if now.saturating_sub(since) >= self.wait {
                for i in self
                    .candidates(now, Duration::ZERO)
                    .into_iter()
                    .take(surplus)
                {
                    self.freeze(i, true, now, act)?;
                }
                self.surplus_since = None;
            }
            return Ok(());
        }
        if running < target {
            for i in self.thaw_order().into_iter().take(target - running) {
                self.thaw(i, now, act)?;
            }
            return Ok(());
        }
        self.swap(now, act)
    }

    /// Running workers that may be frozen, quiet for at least `quiet`, quietest first.
    fn candidates(&self, now: Duration, quiet: Duration) -> Vec<usize> {
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
    /// stalled (see [`Pool::stalled`]) with every thawed worker quiet, as many quiet workers as
    /// there are make way for the longest frozen ones.
    fn swap<A: Actuate>(&mut self, now: Duration, act: &mut A) -> Result<(), A::Error> {
        let order = self.thaw_order();
        let Some(&first) = order.first() else {
            return Ok(());
        };
        if self.workers[first].hold.is_some_and(|h| h.mid_task) {
            if let Some(&quiet) = self.candidates(now, QUIET).first() {
                if self.freeze(quiet, false, now, act)? {
                    self.thaw(first, now, act)?;
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
            if self.freeze(q, false, now, act)? {
                self.thaw(f, now, act)?;
            }
        }
        // The next rotation waits for another stall.
        self.gaps.restart(now);
        Ok(())
    }

    /// Whether no task has ended for ten mean gaps between completions (spec §6's starvation
    /// rule; [`ROTATE`] before the first gap is known), counting from the last completion or
    /// rotation.
    fn stalled(&self, now: Duration) -> bool {
        let bound = self
            .gaps
            .mean()
            .map_or(ROTATE, |g| (g * STARVED_GAPS).max(QUIET));
        let progress = self.gaps.last().expect("counted from the pool's start");
        now.saturating_sub(progress) >= bound
    }

    /// Whether worker `i` is frozen now.
    fn freeze<A: Actuate>(
        &mut self,
        i: usize,
        mid_task: bool,
        now: Duration,
        act: &mut A,
    ) -> Result<bool, A::Error> {
        let w = &mut self.workers[i];
        let frozen = act.freeze(w.pid)?;
        if frozen {
            w.hold = Some(Hold {
                since: now,
                mid_task,
            });
        }
        Ok(frozen)
    }

    fn thaw<A: Actuate>(&mut self, i: usize, now: Duration, act: &mut A) -> Result<(), A::Error> {
        let w = &mut self.workers[i];
        act.thaw(w.pid)?;
        w.hold = None;
        // It was not running while frozen: quiet from now on, not from before.
        w.quiet_since = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const MS: Duration = Duration::from_millis(1);

    /// Records the calls and keeps which pids are stopped; refuses to stop those in `stuck`.
    #[derive(Default)]
    struct Hands {
        calls: Vec<(char, i32)>,
        stopped: BTreeSet<i32>,
        stuck: BTreeSet<i32>,
    }

    impl Actuate for Hands {
        type Error = String;
        fn freeze(&mut self, pid: i32) -> Result<bool, String> {
            self.calls.push(('F', pid));
            if !self.stopped.insert(pid) {
                return Err(format!("{pid} frozen twice"));
            }
            if self.stuck.contains(&pid) {
                self.stopped.remove(&pid);
                return Ok(false);
            }
            Ok(true)
        }
        fn thaw(&mut self, pid: i32) -> Result<(), String> {
            self.calls.push(('T', pid));
            if self.stopped.remove(&pid) {
                Ok(())
            } else {
                Err(format!("{pid} thawed while running"))
            }
        }
    }

    impl Hands {
        fn take(&mut self) -> Vec<(char, i32)> {
            std::mem::take(&mut self.calls)
        }
    }

    fn blocked(cpu_ns: u64) -> Reading {
        Reading {
            cpu_ns,
            runnable: false,
            stopped: false,
        }
    }

    fn busy(cpu_ns: u64) -> Reading {
        Reading {
            cpu_ns,
            runnable: true,
            stopped: false,
        }
    }

    /// A pool of workers 1..=n adopted at 0 with their clocks at 0.
    fn pool(n: i32, target: usize, wait: Duration) -> Pool {
        let mut p = Pool::new(n as usize, target, wait, Duration::ZERO);
        for pid in 1..=n {
            p.adopt(pid, 0, Duration::ZERO);
        }
        p
    }

    #[test]
    fn the_pool_settles_once_its_depth_and_count_hold_still() {
        let mut s = Settle::default();
        assert_eq!(s.look(1, 2, Duration::ZERO), None);
        assert_eq!(s.look(1, 3, MS * 100), None, "a new count starts over");
        assert_eq!(s.look(1, 3, MS * 599), None);
        assert_eq!(s.look(1, 3, MS * 600), Some((1, 3)));
        assert_eq!(s.look(2, 3, MS * 700), None, "a new depth starts over");
        assert_eq!(s.look(2, 3, MS * 1200), Some((2, 3)));
        let mut none = Settle::default();
        none.look(1, 0, Duration::ZERO);
        assert_eq!(
            none.look(1, 0, Duration::from_secs(9)),
            None,
            "no workers, no pool"
        );
    }

    #[test]
    fn the_quietest_are_frozen_first_and_busy_ones_only_after_the_wait() {
        let mut p = pool(4, 1, MS * 200);
        let mut h = Hands::default();
        // 1 and 2 run; 3 went quiet at 0, 4 at 10 ms (its clock moved then).
        p.seen(4, blocked(5), MS * 10);
        let t = MS * 40;
        p.seen(1, busy(9), t);
        p.seen(2, busy(9), t);
        p.balance(t, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 3), ('F', 4)], "quietest first");
        assert_eq!(p.running(), 2);
        // Still one too many, and none quiet: the wait runs from here.
        for (ms, clock) in [(100, 10), (239, 20)] {
            p.seen(1, busy(clock), MS * ms);
            p.seen(2, busy(clock + 1), MS * ms);
            p.balance(MS * ms, &mut h).unwrap();
            assert!(h.take().is_empty(), "the wait is not over at {ms} ms");
        }
        // Over: the quietest running one goes, mid-task (2 has been blocked since 239 ms).
        p.seen(1, busy(22), MS * 240);
        p.seen(2, blocked(21), MS * 240);
        p.balance(MS * 240, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 2)]);
        assert_eq!(
            p.counts(),
            Frozen {
                workers: 4,
                frozen: 3,
                mid_task: 1
            }
        );
    }

    #[test]
    fn a_rise_thaws_mid_task_workers_first_then_the_longest_frozen() {
        let mut p = pool(4, 0, Duration::ZERO);
        let mut h = Hands::default();
        p.seen(1, busy(1), MS * 20);
        p.balance(MS * 40, &mut h).unwrap();
        // 2, 3, 4 quiet since 0 (frozen at 40 ms), then 1 mid-task (the wait is zero).
        assert_eq!(h.take(), [('F', 2), ('F', 3), ('F', 4), ('F', 1)]);
        p.set_target(2);
        p.balance(MS * 50, &mut h).unwrap();
        assert_eq!(h.take(), [('T', 1), ('T', 2)]);
        // Beyond the pool's size the target counts as the size.
        p.set_target(9);
        p.balance(MS * 60, &mut h).unwrap();
        assert_eq!(h.take(), [('T', 3), ('T', 4)]);
        assert_eq!(p.running(), 4);
    }

    /// Two busy workers at 10 ms, target 1, no wait: 1 (found first) is frozen mid-task.
    fn one_frozen_mid_task() -> (Pool, Hands) {
        let mut p = pool(2, 1, Duration::ZERO);
        let mut h = Hands::default();
        p.seen(1, busy(1), MS * 10);
        p.seen(2, busy(1), MS * 10);
        p.balance(MS * 10, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        assert_eq!(p.counts().mid_task, 1);
        (p, h)
    }

    #[test]
    fn a_worker_frozen_mid_task_is_swapped_for_the_first_that_goes_quiet() {
        let (mut p, mut h) = one_frozen_mid_task();
        p.seen(2, blocked(2), MS * 20);
        p.balance(MS * 49, &mut h).unwrap();
        assert!(h.take().is_empty(), "2 not quiet for 30 ms yet");
        p.balance(MS * 50, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 2), ('T', 1)]);
        assert_eq!(p.counts().mid_task, 0);
    }

    #[test]
    fn a_swap_thaws_nothing_when_its_freeze_does_not_take() {
        let (mut p, mut h) = one_frozen_mid_task();
        h.stuck.insert(2);
        p.balance(MS * 50, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 2)]);
        assert!(p.is_frozen(1) && !p.is_frozen(2));
    }

    #[test]
    fn a_quiet_freeze_that_does_not_take_leaves_the_surplus_to_the_wait() {
        let mut p = pool(2, 1, MS * 100);
        let mut h = Hands::default();
        h.stuck.insert(1);
        p.seen(2, busy(1), MS * 50);
        p.balance(MS * 50, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        p.seen(2, busy(2), MS * 150);
        p.balance(MS * 150, &mut h).unwrap();
        // 1 is still the quietest: tried again as a quiet one, then, the wait over, mid-task.
        assert_eq!(h.take(), [('F', 1), ('F', 1)]);
        h.stuck.clear();
        p.seen(2, busy(3), MS * 160);
        p.balance(MS * 160, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        assert_eq!(p.running(), 1);
    }

    #[test]
    fn a_stalled_pool_swaps_its_longest_frozen_workers_in() {
        let mut p = pool(3, 1, Duration::ZERO);
        let mut h = Hands::default();
        p.seen(3, busy(1), MS * 20);
        p.balance(MS * 40, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1), ('F', 2)]);
        p.seen(3, blocked(1), MS * 100);
        // No completion for ROTATE, and the running one quiet: 3 makes way for 1.
        p.balance(ROTATE - MS, &mut h).unwrap();
        assert!(h.take().is_empty());
        p.balance(ROTATE, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 3), ('T', 1)]);
        // The next rotation counts from this one; with a gap known, from ten gaps.
        p.completed(2, ROTATE + MS * 100);
        assert_eq!(p.gaps.mean(), Some(MS * 50));
        p.completed(1, ROTATE + MS * 200);
        let mean = p.gaps.mean().unwrap().as_secs_f64();
        assert!((mean - 0.055).abs() < 1e-6, "{mean}");
        // Due ten gaps (550 ms) after the last completion.
        p.balance(ROTATE + MS * 740, &mut h).unwrap();
        assert!(h.take().is_empty());
        p.balance(ROTATE + MS * 760, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1), ('T', 2)]);
    }

    #[test]
    fn no_rotation_while_a_thawed_worker_runs() {
        let mut p = pool(2, 1, Duration::ZERO);
        let mut h = Hands::default();
        p.seen(2, busy(1), MS * 10);
        p.balance(MS * 40, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        p.seen(2, busy(2), Duration::from_secs(5));
        p.balance(Duration::from_secs(5), &mut h).unwrap();
        assert!(h.take().is_empty());
    }

    #[test]
    fn whose_workers_are_whose() {
        let mut p = pool(3, 1, Duration::ZERO);
        let mut h = Hands::default();
        // 3 is stopped by someone else: not running, never frozen.
        p.seen(
            3,
            Reading {
                stopped: true,
                ..blocked(0)
            },
            MS * 40,
        );
        p.seen(2, busy(1), MS * 40);
        p.balance(MS * 40, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        assert_eq!(p.running(), 1);
        assert!(!p.frozen_seen(1, FrozenLook::Stopped, MS * 50));
        // Someone continued 1: it runs again, and the surplus is frozen again once quiet.
        assert!(p.frozen_seen(1, FrozenLook::Continued, MS * 50));
        h.stopped.remove(&1);
        assert_eq!(p.running(), 2);
        p.seen(2, busy(2), MS * 80);
        p.balance(MS * 80, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 1)]);
        // Asked to end while frozen: continued, and never frozen again, even mid-task.
        assert!(p.frozen_seen(1, FrozenLook::AskedToEnd, MS * 90));
        h.stopped.remove(&1);
        p.seen(2, busy(3), MS * 200);
        p.balance(MS * 200, &mut h).unwrap();
        assert_eq!(h.take(), [('F', 2)]);
        assert!(
            !p.frozen_seen(9, FrozenLook::Continued, MS * 200),
            "unknown"
        );
    }

    #[test]
    fn release_thaws_all_and_freezes_no_more() {
        let mut p = pool(3, 0, Duration::ZERO);
        let mut h = Hands::default();
        p.balance(MS * 40, &mut h).unwrap();
        assert_eq!(p.counts().frozen, 3);
        h.take();
        h.stopped.remove(&2); // thawing 2 fails; the others are thawed all the same
        assert!(p.release(&mut h).is_err());
        assert_eq!(h.take(), [('T', 1), ('T', 2), ('T', 3)]);
        assert_eq!(p.counts().frozen, 0);
        p.balance(Duration::from_secs(9), &mut h).unwrap();
        assert!(h.take().is_empty());
    }

    #[test]
    fn counts_are_reported_when_they_change() {
        let mut p = pool(2, 1, Duration::ZERO);
        let mut h = Hands::default();
        assert_eq!(
            p.changed(),
            Some(Frozen {
                workers: 2,
                frozen: 0,
                mid_task: 0
            })
        );
        assert_eq!(p.changed(), None);
        p.balance(MS * 40, &mut h).unwrap();
        assert_eq!(p.changed().map(|f| f.frozen), Some(1));
        p.forget(1);
        assert_eq!(p.changed().map(|f| (f.workers, f.frozen)), Some((1, 0)));
    }

    /// One thing that happens to the pool between balances.
    #[derive(Debug, Clone)]
    enum Event {
        Target(usize),
        /// Worker `.0 % known` is read: clock step, runnable, stopped by someone else.
        Read(usize, u64, bool, bool),
        /// A frozen worker `.0 % frozen` is continued by someone else, or asked to end.
        Continued(usize, bool),
        Adopt,
        Forget(usize),
        Completed(usize),
        /// Worker `.0 % known` will not stop (or will again).
        Stuck(usize, bool),
        Later(u64),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0usize..8).prop_map(Event::Target),
            (0usize..8, 0u64..3, any::<bool>(), prop::bool::weighted(0.1))
                .prop_map(|(i, c, r, s)| Event::Read(i, c, r, s)),
            (0usize..8, any::<bool>()).prop_map(|(i, e)| Event::Continued(i, e)),
            Just(Event::Adopt),
            (0usize..8).prop_map(Event::Forget),
            (0usize..4).prop_map(Event::Completed),
            (0usize..8, prop::bool::weighted(0.2)).prop_map(|(i, s)| Event::Stuck(i, s)),
            (0u64..400).prop_map(Event::Later),
        ]
    }

    proptest! {
        /// Whatever the pool sees, tact signals only workers it knows, freezes only running
        /// ones not asked to end and thaws only its own; its frozen set is exactly what it
        /// stopped; a balance with freezes that take and no wait leaves at most the target
        /// running, or the workers it may not freeze; a deficit thaws all it can; at the target
        /// a balance keeps the running count; and once released, all is thawed and stays so.
        #[test]
        fn decisions_keep_the_pool_s_invariants(
            size in 1usize..7,
            wait_ms in prop_oneof![Just(0u64), 0u64..500],
            events in prop::collection::vec(event(), 1..120),
        ) {
            let wait = MS * wait_ms as u32;
            let mut p = Pool::new(size, size, wait, Duration::ZERO);
            let mut h = Hands::default();
            let mut now = Duration::ZERO;
            let mut next_pid = 1;
            let mut clocks = std::collections::BTreeMap::new();
            for _ in 0..size {
                p.adopt(next_pid, 0, now);
                clocks.insert(next_pid, 0);
                next_pid += 1;
            }
            for e in events {
                let known: Vec<i32> = p.pids().collect();
                let frozen: Vec<i32> = known.iter().copied().filter(|&q| p.is_frozen(q)).collect();
                match e {
                    Event::Target(t) => p.set_target(t),
                    Event::Read(i, step, runnable, stopped) if !known.is_empty() => {
                        let pid = known[i % known.len()];
                        if !p.is_frozen(pid) {
                            let c = clocks.get_mut(&pid).unwrap();
                            *c += step;
                            p.seen(pid, Reading { cpu_ns: *c, runnable, stopped }, now);
                        }
                    }
                    Event::Continued(i, ending) if !frozen.is_empty() => {
                        let pid = frozen[i % frozen.len()];
                        let look = if ending { FrozenLook::AskedToEnd } else { FrozenLook::Continued };
                        prop_assert!(p.frozen_seen(pid, look, now));
                        h.stopped.remove(&pid);
                    }
                    Event::Adopt => {
                        p.adopt(next_pid, 0, now);
                        clocks.insert(next_pid, 0);
                        next_pid += 1;
                    }
                    Event::Forget(i) if !known.is_empty() => {
                        let pid = known[i % known.len()];
                        p.forget(pid);
                        h.stopped.remove(&pid);
                    }
                    Event::Completed(n) => p.completed(n, now),
                    Event::Stuck(i, stuck) if !known.is_empty() => {
                        let pid = known[i % known.len()];
                        if stuck { h.stuck.insert(pid); } else { h.stuck.remove(&pid); }
                    }
                    Event::Later(ms) => now += MS * ms as u32,
                    _ => {}
                }
                let before: Vec<(i32, bool, bool)> = p
                    .workers
                    .iter()
                    .map(|w| (w.pid, w.running() && !w.ending, w.hold.is_some()))
                    .collect();
                let running_before = p.running();
                let frozen_before = p.counts().frozen;
                let had_stuck = p.pids().any(|q| h.stuck.contains(&q));
                h.take();
                p.balance(now, &mut h).map_err(TestCaseError::fail)?;
                for (what, pid) in h.take() {
                    let was = before.iter().find(|b| b.0 == pid);
                    prop_assert!(was.is_some(), "signalled {} unknown", pid);
                    let (_, may_freeze, held) = *was.unwrap();
                    match what {
                        'F' => prop_assert!(may_freeze, "froze {}", pid),
                        _ => prop_assert!(held, "thawed {} it did not freeze", pid),
                    }
                }
                let held: BTreeSet<i32> = p.pids().filter(|&q| p.is_frozen(q)).collect();
                prop_assert_eq!(&held, &h.stopped);
                let target = p.target.min(size);
                let running = p.running();
                let unfreezable = p.workers.iter().filter(|w| w.running() && w.ending).count();
                if wait.is_zero() && !had_stuck && running_before > target {
                    prop_assert_eq!(running, target.max(unfreezable));
                }
                if running_before < target && !had_stuck {
                    prop_assert_eq!(running, target.min(running_before + frozen_before));
                }
                if running_before == target {
                    prop_assert_eq!(running, target);
                }
            }
            p.release(&mut h).map_err(TestCaseError::fail)?;
            prop_assert!(h.stopped.is_empty());
            p.set_target(0);
            p.balance(now + Duration::from_secs(60), &mut h).map_err(TestCaseError::fail)?;
            prop_assert!(h.stopped.is_empty());
        }
    }
}
