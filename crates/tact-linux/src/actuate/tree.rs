//! Stopping and resuming a job's whole process tree with SIGSTOP/SIGCONT sent through pidfds
//! (spec 5.2, method 2: for when no cgroup v2 freezer is available, as on cgroup v1 machines).

use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::thread;
use std::time::{Duration, Instant};

use crate::actuate::pidfd::PidFd;
use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// How long `stop` keeps re-walking the tree for members that have not stopped yet. A process in
/// uninterruptible sleep (state D) takes the stop only when its I/O completes.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause between re-walks of `/proc` while waiting for members to stop.
const STOP_POLL: Duration = Duration::from_millis(5);

#[derive(Debug)]
struct Member {
    id: ProcId,
    fd: PidFd,
    /// tact sent it SIGSTOP and has not resumed it yet. Members that someone else stopped are
    /// never marked, so tact does not resume what the user stopped.
    ours: bool,
}

/// The process tree of a job: the root and every descendant found so far, each held through a
/// pidfd opened when it was first found (its start time checked after opening), so that a pid
/// recycled by another process is never signalled.
///
/// Descendants are found through their parents, so a child whose parent exits before tact sees
/// it (a daemonizing double fork between two refreshes) escapes the tree; members already known
/// stay members after reparenting. Dropping a `JobTree` resumes what it stopped.
///
/// A user's set ([`JobTree::of_user`], spec proportional-share §2 `uid:U`) is held, signalled,
/// recorded and watched the same way, but grows only by [`JobTree::add`]: which processes of the
/// user belong to it is the caller's policy.
#[derive(Debug)]
pub struct JobTree {
    reader: ProcReader,
    root: ProcId,
    /// In discovery order, so parents come before their children.
    members: Vec<Member>,
    pids: HashSet<i32>,
    /// The uid of a user's set; `None` for a process tree.
    user: Option<u32>,
}

impl JobTree {
    /// Takes charge of the tree rooted at `pid`. Refuses (spec 5.2): a pid that does not exist,
    /// PID 1, kernel threads, tact's own process and its ancestors, and, unless we are root,
    /// another user's processes.
    pub fn attach(pid: i32) -> Result<JobTree> {
        let reader = ProcReader::new();
        let refuse = |reason: &str| Error::Refused {
            pid,
            reason: reason.to_string(),
        };
        let stat = match reader.stat(pid) {
            Ok(stat) => stat,
            Err(Error::NoProcess { .. }) => return Err(refuse("no such process")),
            Err(e) => return Err(e),
        };
        if pid == 1 {
            return Err(refuse("it is PID 1 (init)"));
        }
        if stat.is_kernel_thread() {
            return Err(refuse("it is a kernel thread"));
        }
        if stat.is_dead() {
            return Err(refuse("it has exited"));
        }
        let mut ancestor = std::process::id() as i32;
        while ancestor > 0 {
            if ancestor == pid {
                return Err(refuse("it is tact itself or one of tact's ancestors"));
            }
            ancestor = match reader.stat(ancestor) {
                Ok(stat) => stat.ppid,
                Err(Error::NoProcess { .. }) => break, // an ancestor exited during the walk
                Err(e) => return Err(e),
            };
        }
        // SAFETY: getuid/geteuid cannot fail.
        let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        if !may_regulate(uid, euid, reader.uid(pid)?) {
            return Err(refuse("it belongs to another user"));
        }
        let fd = PidFd::open(pid).map_err(|_| refuse("no such process"))?;
        let id = stat.id();
        // Checked after opening: the pidfd may name a process that reused the pid meanwhile.
        match reader.stat(pid) {
            Ok(now) if now.start_time == id.start_time => {}
            _ => return Err(refuse("it exited while attaching")),
        }
        let mut tree = JobTree {
            reader,
            root: id,
            members: vec![Member {
                id,
                fd,
                ours: false,
            }],
            pids: HashSet::from([pid]),
            user: None,
        };
        tree.refresh()?;
        Ok(tree)
    }

    /// An empty set of processes of user `uid`, filled by [`JobTree::add`]. It has no root
    /// process: its [`JobTree::root`] is pid 0 with the uid in place of the start time, which no
    /// process tree has, so that its state file is named apart from every tree's.
    pub fn of_user(uid: u32) -> JobTree {
        JobTree {
            reader: ProcReader::new(),
            root: ProcId {
                pid: 0,
                start_time: u64::from(uid),
            },
            members: Vec::new(),
            pids: HashSet::new(),
            user: Some(uid),
        }
    }

    /// Adds `pid` to a user's set if it is a live process of that user (real uid), not PID 1 or
    /// a kernel thread; whether it was added (not when already a member or gone). Refuses, unless
    /// we are root, a user other than our own (spec 5.2), and a process tree, which grows by
    /// itself in [`JobTree::refresh`].
    pub fn add(&mut self, pid: i32) -> Result<bool> {
        let refuse = |reason: &str| Error::Refused {
            pid,
            reason: reason.to_string(),
        };
        let Some(uid) = self.user else {
            return Err(refuse(
                "a process tree takes its members from its root's descendants",
            ));
        };
        // SAFETY: getuid/geteuid cannot fail.
        let (me, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        if !may_regulate(me, euid, uid) {
            return Err(refuse("it belongs to another user"));
        }
        if pid == 1 || self.pids.contains(&pid) {
            return Ok(false);
        }
        let fd = match PidFd::open(pid) {
            Ok(fd) => fd,
            Err(Error::NoProcess { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        // Read after opening the pidfd, as in `refresh`.
        let stat = match self.reader.stat(pid) {
            Ok(stat) => stat,
            Err(Error::NoProcess { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        if stat.is_dead() || stat.is_kernel_thread() {
            return Ok(false);
        }
        match self.reader.uid(pid) {
            Ok(u) if u == uid => {}
            Ok(_) | Err(Error::NoProcess { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.members.push(Member {
            id: stat.id(),
            fd,
            ours: false,
        });
        self.pids.insert(pid);
        Ok(true)
    }

    /// The root process of the job (for a user's set, see [`JobTree::of_user`]).
    pub fn root(&self) -> ProcId {
        self.root
    }

    /// The current members, parents before their children.
    pub fn members(&self) -> Vec<ProcId> {
        self.members.iter().map(|m| m.id).collect()
    }

    /// Whether the root process (of a user's set: any member) is still running (not exited,
    /// not a zombie).
    pub fn is_alive(&self) -> bool {
        let alive = |id: &ProcId| {
            matches!(self.reader.stat(id.pid),
                     Ok(s) if s.start_time == id.start_time && !s.is_dead())
        };
        match self.user {
            Some(_) => self.members.iter().any(|m| alive(&m.id)),
            None => alive(&self.root),
        }
    }

    /// Drops members that exited and adds descendants created since the last call (a user's set
    /// only drops).
    pub fn refresh(&mut self) -> Result<()> {
        let mut dead = HashSet::new();
        for m in &self.members {
            match self.reader.stat(m.id.pid) {
                Ok(s) if s.start_time == m.id.start_time && !s.is_dead() => {}
                Ok(_) | Err(Error::NoProcess { .. }) => {
                    dead.insert(m.id.pid);
                }
                Err(e) => return Err(e),
            }
        }
        self.members.retain(|m| !dead.contains(&m.id.pid));
        self.pids.retain(|pid| !dead.contains(pid));
        if self.user.is_some() {
            return Ok(());
        }

        let known: Vec<i32> = self.members.iter().map(|m| m.id.pid).collect();
        for pid in self.reader.descendants_of(&known)? {
            if self.pids.contains(&pid) {
                continue;
            }
            let fd = match PidFd::open(pid) {
                Ok(fd) => fd,
                Err(Error::NoProcess { .. }) => continue,
                Err(e) => return Err(e),
            };
            let stat = match self.reader.stat(pid) {
                Ok(stat) => stat,
                Err(Error::NoProcess { .. }) => continue,
                Err(e) => return Err(e),
            };
            // Read after opening the pidfd: if the pid was recycled between the walk and the
            // open, the new process's parent is not a member and it is left out. Parents are
            // walked before children, so a new member's parent is already in `pids`.
            if stat.is_dead() || !self.pids.contains(&stat.ppid) {
                continue;
            }
            self.members.push(Member {
                id: stat.id(),
                fd,
                ours: false,
            });
            self.pids.insert(pid);
        }
        Ok(())
    }

    /// Stops every member with SIGSTOP. See [`JobTree::stop_with`].
    pub fn stop(&mut self) -> Result<()> {
        self.stop_with(|_| Ok(()))
    }

    /// Stops every member with SIGSTOP, re-walking `/proc` until no member tact stopped can run
    /// user code any more (all threads stopped, or blocked in the kernel with the stop on its
    /// way, like a parent in `vfork`) and no new member appeared (a member may fork until it takes
    /// the stop), for at most a few seconds. Members found already stopped (state T) by someone
    /// else are left alone, and `resume` will not continue them.
    ///
    /// `before_signal(tree)` runs before each batch of first-time SIGSTOPs, once the members
    /// about to be stopped count as stopped by tact: that is where the caller records state
    /// files and hands pidfds to the guard, so that a crash right after the signal is covered.
    /// If it fails, nothing more is signalled and the error is returned (call `resume`).
    pub fn stop_with(
        &mut self,
        mut before_signal: impl FnMut(&JobTree) -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            // Checked before the walk: a member stopped now cannot fork after it, so a child
            // it created is already visible to the walk below.
            let running = self.running_members()?;
            self.refresh()?;
            let mut new = Vec::new();
            for m in self.members.iter_mut().filter(|m| !m.ours) {
                match self.reader.stat(m.id.pid) {
                    Ok(s) if s.is_stopped() => {} // stopped by someone else: leave it alone
                    Ok(_) => {
                        m.ours = true;
                        new.push(m.id.pid);
                    }
                    Err(Error::NoProcess { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            if !new.is_empty() {
                before_signal(self)?;
            }
            // Re-sending to the still running ones is harmless and undoes a SIGCONT that
            // someone else sent meanwhile.
            for m in self
                .members
                .iter()
                .filter(|m| new.contains(&m.id.pid) || running.contains(&m.id.pid))
            {
                match m.fd.send_signal(libc::SIGSTOP) {
                    Ok(()) | Err(Error::NoProcess { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            if running.is_empty() && new.is_empty() {
                return Ok(());
            }
            if start.elapsed() > STOP_TIMEOUT {
                let mut pids = running;
                pids.extend(new);
                return Err(Error::NotStopped {
                    pids,
                    waited: start.elapsed(),
                });
            }
            thread::sleep(STOP_POLL);
        }
    }

    /// Sends SIGSTOP to every member at once, without walking `/proc` again or waiting for the
    /// stops to take effect: for a scheduler that stops and resumes a tree many times a second
    /// (`tact share`), whose periodic `refresh` finds members forked meanwhile. Members for which
    /// `skip` is true (the caller saw someone else stop them) are left alone, and `resume` will
    /// not continue them. Unlike `stop_with`, nothing is recorded here: such a caller records
    /// and hands over every member when membership changes ([`crate::state::StateDir::record_all`],
    /// [`crate::Guard::watch_all`]).
    pub fn stop_now(&mut self, skip: impl Fn(&ProcId) -> bool) -> Result<()> {
        for m in self.members.iter_mut().filter(|m| !m.ours && !skip(&m.id)) {
            match m.fd.send_signal(libc::SIGSTOP) {
                Ok(()) => m.ours = true,
                Err(Error::NoProcess { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends `sig` to every member found so far (through their pidfds: a recycled pid is never
    /// signalled), e.g. SIGTERM to end a job. Members that exited are skipped; tries them all,
    /// then returns the first failure.
    pub fn signal_all(&self, sig: libc::c_int) -> Result<()> {
        self.signal_where(sig, |_| true)
    }

    /// [`JobTree::signal_all`] to the members for which `pick` is true (asked once per member,
    /// in discovery order): for a caller that knows some members have the signal already.
    pub fn signal_where(
        &self,
        sig: libc::c_int,
        mut pick: impl FnMut(&ProcId) -> bool,
    ) -> Result<()> {
        let mut first_error = None;
        for m in self.members.iter().filter(|m| pick(&m.id)) {
            match m.fd.send_signal(sig) {
                Ok(()) | Err(Error::NoProcess { .. }) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Every member with its pidfd, stopped or not.
    pub(crate) fn all_members(&self) -> impl Iterator<Item = (ProcId, BorrowedFd<'_>)> {
        self.members.iter().map(|m| (m.id, m.fd.as_fd()))
    }

    /// Sends SIGCONT to every member tact stopped. Tries them all even if one fails, then
    /// returns the first failure.
    pub fn resume(&mut self) -> Result<()> {
        let mut first_error = None;
        for m in self.members.iter_mut().filter(|m| m.ours) {
            match m.fd.send_signal(libc::SIGCONT) {
                Ok(()) | Err(Error::NoProcess { .. }) => m.ours = false,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Members tact has stopped (and not resumed), with their pidfds.
    pub(crate) fn stopped_by_tact(&self) -> impl Iterator<Item = (ProcId, BorrowedFd<'_>)> {
        self.members
            .iter()
            .filter(|m| m.ours)
            .map(|m| (m.id, m.fd.as_fd()))
    }

    /// Whether `id` is a current member.
    pub(crate) fn contains(&self, id: &ProcId) -> bool {
        self.pids.contains(&id.pid) && self.members.iter().any(|m| m.id == *id)
    }

    /// Pids of members tact stopped that may still run user code (see
    /// [`ProcReader::stop_settled`]).
    fn running_members(&self) -> Result<Vec<i32>> {
        let mut running = Vec::new();
        for m in self.members.iter().filter(|m| m.ours) {
            match self.reader.stop_settled(m.id.pid) {
                Ok(true) | Err(Error::NoProcess { .. }) => {}
                Ok(false) => running.push(m.id.pid),
                Err(e) => return Err(e),
            }
        }
        Ok(running)
    }
}

impl Drop for JobTree {
    /// Every exit path thaws (spec 5.3), including errors and panics that unwind past the tree.
    fn drop(&mut self) {
        let _ = self.resume();
    }
}

/// Whether a process owned by `target_uid` may be regulated by a process with these ids: root
/// may regulate anyone, others only their own processes.
fn may_regulate(uid: u32, euid: u32, target_uid: u32) -> bool {
    euid == 0 || target_uid == uid || target_uid == euid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_may_regulate_other_users() {
        assert!(may_regulate(0, 0, 1000));
        assert!(may_regulate(1000, 1000, 1000));
        assert!(!may_regulate(1000, 1000, 1001));
        assert!(!may_regulate(1000, 1000, 0));
    }
}
