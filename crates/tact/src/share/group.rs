//! The jobs of a `tact share` group as the edge sees them: each a process tree (started with
//! `sh -c` or adopted) or every process of a user, the CPU clock and stat file of each member
//! kept open, and the CPU time each has used since tact took charge of it.

use std::collections::{BTreeMap, HashSet};
use std::io::ErrorKind;
use std::process::{Child, ExitStatus};

use anyhow::{Context, Result};
use tact_core::share::{EntityId, Event, MemberId, Reading};
use tact_linux::gate::{held_shell, Gate};
use tact_linux::probe::cpu::{Activity, ProcWatch};
use tact_linux::probe::members::MemberScan;
use tact_linux::{Error as LinuxError, JobTree, ProcId, ProcReader};

use super::spec::{JobSpec, What};
use crate::jobs::events::unblock_signals_in_child;

/// One process of a job.
struct Member {
    mid: MemberId,
    watch: ProcWatch,
    /// CPU time when tact first saw it, and at its latest read.
    baseline: u64,
    last: u64,
    activity: Activity,
    threads: u32,
    /// The CPU time read just before a stat read that found the member runnable (`R`). Only the
    /// process itself can block (or stop on a signal, or exit), and being descheduled brings its
    /// CPU clock up to date: while the clock still reads this much, it has not blocked, and the
    /// stat read (the costly part of a read) is saved. (It may be running: another process's
    /// clock moves only at ticks.) Spinners sharing a CPU wait in `R` for several quanta at a
    /// time.
    runnable_at: Option<u64>,
}

/// One job: an entity of the engine.
pub struct Job {
    pub id: EntityId,
    pub spec: JobSpec,
    tree: JobTree,
    /// The `sh -c` process tact started, until it is reaped.
    child: Option<Child>,
    /// What holds that process back until `let_go`.
    gate: Option<Gate>,
    pub exit: Option<ExitStatus>,
    members: BTreeMap<ProcId, Member>,
    /// CPU time of members that have left.
    left_ns: u64,
    /// [`Job::consumed_ns`] as of the latest tree scan: while it has not moved, no member has
    /// run, so none can have forked a child the scan did not see.
    scanned_ns: u64,
    /// Charge new members from their birth (baseline 0) rather than from when tact found them:
    /// every process of a command tact started, and every process of an adopted job forked
    /// after tact took charge. Then all of a job's CPU since tact took charge is counted, and
    /// tact's cycles start where an observer counting from the commands' start puts them.
    from_birth: bool,
    /// How a user principal finds its members; `None` for a process tree.
    user: Option<UserScan>,
    /// Departed from the engine: no member left (a user principal arrives again when its user
    /// starts a process).
    pub gone: bool,
    /// The weight the engine last ran it on: its share, or its feasible share φ in conserving
    /// mode.
    pub weight: Option<f64>,
}

/// How a user principal finds its members: every process of the uid that [`MemberScan`] lists
/// (never tact, its ancestors, PID 1, kernel threads or zombies), except tact's descendants: its
/// watchdog, which must never stop, and the commands it started, which are entities of their own.
struct UserScan {
    uid: u32,
    scan: MemberScan,
    reader: ProcReader,
}

impl UserScan {
    fn pids(&self) -> Result<Vec<i32>> {
        let pids = self.scan.uid(self.uid)?;
        let ours: HashSet<i32> = self
            .reader
            .descendants_of(&[std::process::id() as i32])?
            .into_iter()
            .collect();
        Ok(pids.into_iter().filter(|p| !ours.contains(p)).collect())
    }
}

/// Whether the run is over: every job and adopted process has departed. User principals do not
/// count (their processes come and go): with only those, the run lasts until it is interrupted.
pub fn all_ended(jobs: &[Job]) -> bool {
    jobs.iter().filter(|j| !j.is_user()).all(|j| j.gone)
        && (jobs.is_empty() || jobs.iter().any(|j| !j.is_user()))
}

/// Member ids unique over the whole group.
#[derive(Default)]
pub struct MemberIds(MemberId);

impl MemberIds {
    fn next(&mut self) -> MemberId {
        self.0 += 1;
        self.0
    }
}

impl Job {
    /// Starts or adopts the job. A command that cannot start is an error naming it.
    pub fn start(id: EntityId, spec: JobSpec) -> Result<Job> {
        let mut user = None;
        let (tree, child, gate) = match &spec.what {
            What::Command(cmd) => {
                // Held at a gate: the shell waits, blocked, and execs the command once tact has
                // taken charge of it (`let_go`), so no CPU escapes the accounting. If tact dies
                // first, the gate closes and the shell exits: nothing is ever stopped before the
                // watchdog holds it (a shell born stopped, `kill -STOP $$`, was left stopped by
                // a tact SIGKILLed before handing it over).
                let (mut command, gate) = held_shell(cmd)
                    .with_context(|| format!("--job {}={cmd}: cannot start", spec.shares))?;
                unblock_signals_in_child(&mut command);
                let mut child = command
                    .spawn()
                    .map_err(|e| match e.kind() {
                        ErrorKind::NotFound => anyhow::anyhow!("sh: not found"),
                        _ => e.into(),
                    })
                    .with_context(|| format!("{}: cannot start", spec.origin()))?;
                match JobTree::attach(child.id() as i32) {
                    Ok(tree) => (tree, Some(child), Some(gate)),
                    Err(e) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(e).context(spec.origin());
                    }
                }
            }
            What::Pid(pid) => {
                let tree = JobTree::attach(*pid).with_context(|| spec.origin())?;
                (tree, None, None)
            }
            // Members are found at the first rescan (`arrive`).
            What::User { uid, .. } => {
                user = Some(UserScan {
                    uid: *uid,
                    scan: MemberScan::new().with_context(|| spec.origin())?,
                    reader: ProcReader::new(),
                });
                (JobTree::of_user(*uid), None, None)
            }
        };
        let spawned = child.is_some();
        Ok(Job {
            id,
            spec,
            tree,
            child,
            gate,
            exit: None,
            members: BTreeMap::new(),
            left_ns: 0,
            scanned_ns: 0,
            from_birth: spawned,
            user,
            gone: false,
            weight: None,
        })
    }

    pub fn tree(&self) -> &JobTree {
        &self.tree
    }

    /// A user principal (`--user`).
    pub fn is_user(&self) -> bool {
        self.user.is_some()
    }

    /// The `sh -c` process, if tact started one and it has not been reaped.
    pub fn child_pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// The engine's `Arrive` for this job: every member's baseline.
    pub fn arrive(&mut self, ids: &mut MemberIds) -> Result<Option<Event>> {
        self.rescan(ids)?;
        self.from_birth = true;
        if self.members.is_empty() {
            self.gone = true;
            return Ok(None);
        }
        self.gone = false;
        let mut reading = self.reading();
        // The engine charges from the baselines on.
        reading.cpu_ns = self.members.values().map(|m| (m.mid, m.baseline)).collect();
        Ok(Some(Event::Arrive {
            id: self.id,
            share: self.spec.shares,
            baseline: reading,
        }))
    }

    /// Reads every member (the engine found the job due): its reading, and the events of members
    /// found dead (read one last time, then dropped; the job departs when none is left).
    pub fn read(&mut self, events: &mut Vec<Event>) -> Option<Reading> {
        let mut dead = Vec::new();
        for (id, m) in self.members.iter_mut() {
            // A member whose CPU time moved on since its last read is running: the clock alone
            // says so (0.2 µs), without the stat read (4-20 µs) that the blocked heuristic needs
            // for members that did not run. Its thread count is refreshed at the next full read
            // (at the latest at the rescan).
            if let Ok(ns) = m.watch.clock_ns() {
                if ns > m.last {
                    m.last = ns;
                    m.activity = Activity::Runnable;
                    m.runnable_at = None;
                    continue;
                }
                if ns == m.last && m.runnable_at == Some(ns) {
                    m.activity = Activity::Runnable;
                    continue;
                }
            }
            match m.watch.read() {
                Ok(r) => {
                    m.last = m.last.max(r.cpu_ns);
                    m.activity = r.activity;
                    m.threads = r.threads;
                    m.runnable_at = (r.activity == Activity::Runnable).then_some(r.cpu_ns);
                    if r.activity == Activity::Dead {
                        dead.push(*id);
                    }
                }
                Err(_) => dead.push(*id),
            }
        }
        // Only a member's death can mean the `sh -c` process exited: no wait4 per read.
        if !dead.is_empty() {
            for id in dead {
                self.leave(id, events);
            }
            self.reap();
        }
        if self.members.is_empty() {
            return self.depart();
        }
        Some(self.reading())
    }

    /// Finds members forked or exited since the last scan (spec: every second). Returns whether
    /// membership changed. A user principal that departed arrives again once its user has a
    /// process; a departed process tree stays gone.
    pub fn rescan_events(&mut self, ids: &mut MemberIds, events: &mut Vec<Event>) -> Result<bool> {
        if self.gone {
            if !self.is_user() {
                return Ok(false);
            }
            let arrived = self.arrive(ids)?;
            let changed = arrived.is_some();
            events.extend(arrived);
            return Ok(changed);
        }
        // Reads between scans may be clock-only: refresh the thread counts here.
        for m in self.members.values_mut() {
            if let Ok(line) = m.watch.stat() {
                m.threads = line.threads;
            }
        }
        let joined = self.rescan(ids)?;
        let live = self.tree.members();
        let gone: Vec<ProcId> = self
            .members
            .keys()
            .filter(|id| !live.contains(id))
            .copied()
            .collect();
        let changed = !joined.is_empty() || !gone.is_empty();
        for (mid, cpu_ns) in joined {
            events.push(Event::MemberJoined {
                id: self.id,
                member: mid,
                cpu_ns,
            });
        }
        for id in gone {
            if let Some(m) = self.members.get_mut(&id) {
                // A zombie's clock still reads until it is reaped.
                if let Ok(ns) = m.watch.cpu_ns() {
                    m.last = m.last.max(ns);
                }
            }
            self.leave(id, events);
        }
        self.reap();
        if self.members.is_empty() {
            self.depart();
        }
        Ok(changed)
    }

    /// Refreshes the tree and opens watches on new members; their ids and baselines.
    fn rescan(&mut self, ids: &mut MemberIds) -> Result<Vec<(MemberId, u64)>> {
        match self.tree.refresh() {
            Ok(()) => {}
            Err(LinuxError::NoProcess { .. }) => {}
            Err(e) => return Err(e).context("cannot list the job's processes"),
        }
        if let Some(user) = &self.user {
            let origin = || self.spec.origin();
            for pid in user.pids().with_context(origin)? {
                self.tree.add(pid).with_context(origin)?;
            }
        }
        let mut joined = Vec::new();
        for id in self.tree.members() {
            if self.members.contains_key(&id) {
                continue;
            }
            let Ok(mut watch) = ProcWatch::open(id.pid) else {
                continue; // exited meanwhile
            };
            if watch.id() != id {
                continue; // the pid was reused between the walk and the open
            }
            let Ok(r) = watch.read() else { continue };
            let mid = ids.next();
            let baseline = if self.from_birth { 0 } else { r.cpu_ns };
            self.members.insert(
                id,
                Member {
                    mid,
                    watch,
                    baseline,
                    last: r.cpu_ns,
                    activity: r.activity,
                    threads: r.threads,
                    runnable_at: (r.activity == Activity::Runnable).then_some(r.cpu_ns),
                },
            );
            joined.push((mid, baseline));
        }
        self.scanned_ns = self.consumed_ns();
        Ok(joined)
    }

    /// Whether a member has run since the latest tree scan (as of the latest reads), so that it
    /// may have forked a child tact has not seen yet.
    pub fn ran_since_scan(&self) -> bool {
        self.consumed_ns() > self.scanned_ns
    }

    fn leave(&mut self, id: ProcId, events: &mut Vec<Event>) {
        let Some(m) = self.members.remove(&id) else {
            return;
        };
        self.left_ns += m.last - m.baseline;
        // The engine departs a job whose last member leaves.
        events.push(Event::MemberLeft {
            id: self.id,
            member: m.mid,
            last_cpu_ns: Some(m.last),
        });
    }

    /// The last member left: the job is gone (a `MemberLeft` of its last member departs it).
    fn depart(&mut self) -> Option<Reading> {
        self.gone = true;
        None
    }

    /// Reaps the `sh -c` process once it has exited, keeping its status.
    pub fn reap(&mut self) {
        if let Some(child) = &mut self.child {
            if let Ok(Some(status)) = child.try_wait() {
                self.exit = Some(status);
                self.child = None;
            }
        }
    }

    /// The engine's reading of every member as last read.
    fn reading(&self) -> Reading {
        Reading {
            cpu_ns: self.members.values().map(|m| (m.mid, m.last)).collect(),
            blocked: self.members.values().all(|m| m.activity.is_blocked()),
            threads: self.threads(),
            cpus: 0,
        }
    }

    fn threads(&self) -> u32 {
        self.members.values().map(|m| m.threads.max(1)).sum()
    }

    /// CPU time the job has used since tact took charge of it (as of the latest reads).
    pub fn consumed_ns(&self) -> u64 {
        self.left_ns
            + self
                .members
                .values()
                .map(|m| m.last - m.baseline)
                .sum::<u64>()
    }

    /// Reads every member's CPU time now (for the final table and the per-second log).
    pub fn refresh_totals(&mut self) {
        for m in self.members.values_mut() {
            if let Ok(ns) = m.watch.cpu_ns() {
                m.last = m.last.max(ns);
            }
        }
    }

    /// SIGSTOPs every member, except those someone else stopped (seen at their last read).
    pub fn stop(&mut self) -> Result<()> {
        let members = &self.members;
        self.tree
            .stop_now(|id| {
                members
                    .get(id)
                    .is_some_and(|m| m.activity == Activity::Stopped)
            })
            .context("cannot stop a job")?;
        Ok(())
    }

    /// SIGCONTs every member tact stopped.
    pub fn resume(&mut self) -> Result<()> {
        self.tree.resume().context("cannot resume a job")
    }

    /// Starts a command tact started (held at its gate); nothing for an adopted process or a
    /// command already let go.
    pub fn let_go(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.open();
        }
    }

    /// Sends `sig` to the `sh -c` process tact started (to pass an interrupt on).
    pub fn signal_child(&self, sig: nix::sys::signal::Signal) {
        if let Some(pid) = self.child_pid() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    /// Waits for the `sh -c` process tact started.
    pub fn wait_child(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(status) = child.wait() {
                self.exit = Some(status);
            }
        }
    }
}
