//! The group form of `--idle cpu` (spec idletime §6, "CPU"): the job in `tact-<PID>-idle`, a
//! child of tact's own cpu cgroup with `cpu.idle = 1`. SCHED_IDLE on each thread is idle only
//! against the other tasks of its own cgroup; an idle group is idle as a whole against its
//! siblings (tact's own cgroup's other children, tact included), and covers every process that
//! ends up in it without a per-thread write.
//!
//! With `--cgroup-parent DIR` the group is DIR's child instead: under the hierarchy's root it is
//! idle against every service and session, where under tact's own cgroup it is idle only
//! against tact's neighbours there (on cgroup v2 a session's scope, whose share against a
//! service's cgroup the job would take).
//!
//! The group is made before the job starts ([`IdleCgroup::prepare`]) and the job joins it between
//! fork and exec ([`IdleCgroup::join_before_exec`]), so that the job runs there from its first
//! instruction, and on cgroup v2 every socket it opens carries the group (what `--idle net`'s
//! marking matches). It needs write access to tact's own cgroup (root or a delegated one), and
//! on cgroup v2 a cpu controller tact may enable there, which the kernel refuses while that
//! cgroup holds processes (tact itself) unless it is the root: the caller falls back to
//! SCHED_IDLE alone, saying why.

use std::path::{Path, PathBuf};
use std::process::Command;

use tact_linux::actuate::cgroup2::level_of;
use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuGroups, CpuHierarchy, EntityId};
use tact_linux::actuate::cgroup_join::JoinCheck;
use tact_linux::actuate::cpu_idle::CpuIdle;
use tact_linux::ProcId;

/// The job's idle cgroup; dropping it moves the processes back and removes it.
pub struct IdleCgroup {
    /// `BASE/tact-<PID>-idle` (idle) and, below it, the entity the job lives in: on v2 a cgroup
    /// that enables a controller for its children cannot hold processes itself.
    groups: CpuGroups,
    job: EntityId,
}

impl IdleCgroup {
    /// Creates the group under `parent` (`--cgroup-parent`, a directory of the cpu hierarchy)
    /// or tact's own cgroup, empty, for a job about to start. `Err` says, for the job's log, why
    /// it cannot be used; nothing is left behind then.
    pub fn prepare(parent: Option<&Path>) -> Result<IdleCgroup, String> {
        let hier = CpuHierarchy::detect().map_err(|e| format!("no cpu cgroup hierarchy: {e}"))?;
        let name = format!("tact-{}-idle", std::process::id());
        let mut groups = CpuGroups::create(hier, &name, parent).map_err(|e| e.to_string())?;
        // From here on, an early return drops `groups`, which removes what was made.
        let (job, _) = groups.add_entity("job", 1).map_err(|e| e.to_string())?;
        CpuIdle::open(groups.hierarchy(), groups.dir())
            .and_then(|idle| idle.set(true))
            .map_err(|e| e.to_string())?;
        Ok(IdleCgroup { groups, job })
    }

    /// Makes the job that `command` starts join the job subgroup (on v1 with a separate cpuacct
    /// hierarchy, its mirror there too) before it execs. A join that fails in the child fails
    /// the start: once the group is made, tact has promised the job runs in it, and a job
    /// running outside would also open sockets `--idle net` cannot mark. After a failed spawn,
    /// [`JoinCheck::failure`] tells whether the join is why.
    pub fn join_before_exec(&self, command: &mut Command) -> tact_linux::Result<JoinCheck> {
        self.groups.join_before_exec(self.job, command)
    }

    /// The idle group's directory and its level, when it is on cgroup v2: the job's sockets
    /// carry it, so `--idle net`'s marking can match it instead of moving the job out of it.
    pub fn v2_placement(&self) -> Option<(PathBuf, usize)> {
        let hier = self.groups.hierarchy();
        if hier.version != CgroupVersion::V2 {
            return None;
        }
        let dir = self.groups.dir();
        level_of(&hier.cpu, dir).map(|level| (dir.to_path_buf(), level))
    }

    /// The idle group's directory.
    pub fn dir(&self) -> &Path {
        self.groups.dir()
    }

    /// Moves the members that are not in the group yet (adopted into the tree, or moved out by
    /// someone); the job's root and the children forked inside are there already
    /// ([`CpuGroups::cover`]).
    pub fn cover(&mut self, members: &[ProcId]) -> tact_linux::Result<()> {
        self.groups.cover(self.job, members).map(drop)
    }

    /// Moves every process back to where it came from (tact's cgroup for the job's root and
    /// those forked inside) and removes the group.
    pub fn remove(mut self) -> tact_linux::Result<()> {
        self.groups.teardown()
    }
}
