//! Passing a signal tact received on to the whole of a job it started, the one rule `tact run`,
//! `tact share`, `tact tickets run` and `tact tune` follow when they are interrupted.
//!
//! The signal goes to every member of the job's [`JobTree`] (through the pidfds the tree holds,
//! so a member whose parent exited is still reached, and a recycled pid never is), not only to
//! the command's first process: a shell's `sleep`, or a member that called setsid, must end with
//! it, as they do under `timeout`. A signal from a terminal (Ctrl-C) reached tact's whole process
//! group, so it goes on only to members outside that group. The caller looks at the tree once
//! more when the command has exited, and members that appeared since get the last signal too.

use std::collections::HashSet;

use tact_linux::{JobTree, ProcId, ProcReader};

use super::events::Received;

/// The members a signal was passed on to, or that had it from the terminal, over any number
/// of jobs.
pub(crate) struct Reached {
    members: HashSet<ProcId>,
    reader: ProcReader,
    /// tact's process group: the one a terminal's signal (Ctrl-C) reached, since tact got it.
    group: i32,
}

impl Reached {
    pub fn new() -> Reached {
        Reached {
            members: HashSet::new(),
            reader: ProcReader::new(),
            group: nix::unistd::getpgrp().as_raw(),
        }
    }

    /// Looks for new members of `tree`, then [`Reached::signal`]s it.
    pub fn pass_on(&mut self, tree: &mut JobTree, sig: Received, again: bool) {
        // On failure the members already known still get the signal.
        if let Err(e) = tree.refresh() {
            tracing::warn!("cannot look for new members of the job: {e}");
        }
        self.signal(tree, sig, again);
    }

    /// Sends `sig` to the members of `tree` as last refreshed: to all of them when `again`, else
    /// only to those not reached yet. A signal from a terminal went to tact's whole process
    /// group, the members in it included, so those are skipped (a second SIGINT can mean "quit
    /// now" to a program); members in other groups or sessions (a job that called setsid or runs
    /// its own job control) did not get it and would otherwise survive Ctrl-C.
    pub fn signal(&mut self, tree: &JobTree, sig: Received, again: bool) {
        let sent = tree.signal_where(sig.signal as i32, |id| {
            let first = self.members.insert(*id);
            (first || again) && !(sig.from_terminal && self.in_group(id))
        });
        if let Err(e) = sent {
            tracing::warn!("cannot pass {} on: {e}", sig.signal);
        }
    }

    fn in_group(&self, id: &ProcId) -> bool {
        self.reader
            .stat(id.pid)
            .is_ok_and(|s| s.start_time == id.start_time && s.pgid == self.group)
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use nix::sys::signal::Signal;

    use super::*;

    /// A job of the test's own process group, `sh` with a `sleep 600` in that group and a
    /// `sleep 601` in a session of its own; killed whatever the test's outcome.
    struct ShellJob {
        sh: Child,
        tree: JobTree,
        in_group: ProcId,
        apart: ProcId,
    }

    impl ShellJob {
        fn start() -> ShellJob {
            let sh = Command::new("sh")
                .args(["-c", "setsid sleep 601 & sleep 600; true"])
                .spawn()
                .unwrap();
            let reader = ProcReader::new();
            let find = |cmdline: &str| {
                let start = Instant::now();
                loop {
                    let found = (reader.descendants(sh.id() as i32).unwrap().into_iter())
                        .find(|&p| reader.cmdline(p).is_ok_and(|a| a.join(" ") == cmdline));
                    if let Some(pid) = found {
                        return reader.stat(pid).unwrap().id();
                    }
                    assert!(start.elapsed() < LIMIT, "`{cmdline}` did not start");
                    std::thread::sleep(Duration::from_millis(10));
                }
            };
            let (in_group, apart) = (find("sleep 600"), find("sleep 601"));
            let tree = JobTree::attach(sh.id() as i32).unwrap();
            ShellJob {
                sh,
                tree,
                in_group,
                apart,
            }
        }
    }

    impl Drop for ShellJob {
        fn drop(&mut self) {
            let _ = self.tree.signal_all(libc::SIGKILL);
            let _ = self.sh.kill();
            let _ = self.sh.wait();
        }
    }

    const LIMIT: Duration = Duration::from_secs(60);

    fn ended(id: ProcId) -> bool {
        !ProcReader::new()
            .stat(id.pid)
            .is_ok_and(|s| s.start_time == id.start_time && !s.is_dead())
    }

    /// Running, and no signal waiting for it: nothing was sent to it (a SIGTERM sent and not
    /// yet acted on is pending until the process is gone).
    fn untouched(id: ProcId) -> bool {
        let masks = ProcReader::new().signal_masks(id.pid).unwrap();
        !ended(id) && masks.thread_pending == 0 && masks.shared_pending == 0
    }

    fn wait_until_ended(id: ProcId) {
        let start = Instant::now();
        while !ended(id) {
            assert!(start.elapsed() < LIMIT, "{id:?} is still running");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn received(from_terminal: bool) -> Received {
        Received {
            signal: Signal::SIGTERM,
            from_terminal,
        }
    }

    #[test]
    fn a_terminals_signal_goes_on_only_to_members_outside_its_process_group() {
        let mut job = ShellJob::start();
        let mut reached = Reached::new();
        reached.pass_on(&mut job.tree, received(true), true);
        wait_until_ended(job.apart);
        assert!(untouched(job.in_group), "the terminal reached it already");
        assert_eq!(job.tree.root().pid, job.sh.id() as i32);
        assert!(untouched(job.tree.root()));
    }

    #[test]
    fn a_last_look_reaches_only_members_not_reached_before() {
        let mut job = ShellJob::start();
        let mut reached = Reached::new();
        // The terminal's signal counts as having reached the group's members.
        reached.pass_on(&mut job.tree, received(true), true);
        wait_until_ended(job.apart);
        reached.pass_on(&mut job.tree, received(false), false);
        assert!(untouched(job.in_group));
        // A new signal goes to every member again.
        reached.pass_on(&mut job.tree, received(false), true);
        wait_until_ended(job.in_group);
    }
}
