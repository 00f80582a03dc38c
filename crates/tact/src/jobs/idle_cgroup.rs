//! The group form of `--idle cpu` (spec idletime §6, "CPU"): the job in `tact-<PID>-idle`, a
//! child of tact's own cpu cgroup with `cpu.idle = 1`. SCHED_IDLE on each thread is idle only
//! against the other tasks of its own cgroup; an idle group is idle as a whole against its
//! siblings (tact's own cgroup's other children, tact included), and covers every process that
//! ends up in it without a per-thread write.
//!
//! It needs write access to tact's own cgroup (root or a delegated one), and on cgroup v2 a cpu
//! controller tact may enable there, which the kernel refuses while that cgroup holds processes
//! (tact itself) unless it is the root: the caller falls back to SCHED_IDLE alone, saying why.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tact_linux::actuate::cgroup2::level_of;
use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuGroups, CpuHierarchy, EntityId};
use tact_linux::actuate::cpu_idle::CpuIdle;
use tact_linux::{JobTree, ProcId};

/// The job's idle cgroup; dropping it moves the processes back and removes it.
pub struct IdleCgroup {
    /// `BASE/tact-<PID>-idle` (idle) and, below it, the entity the job lives in: on v2 a cgroup
    /// that enables a controller for its children cannot hold processes itself.
    groups: CpuGroups,
    job: EntityId,
}

impl IdleCgroup {
    /// Creates the group under tact's own cgroup and moves the job's members into it. `Err`
    /// says, for the job's log, why it cannot be used; nothing is left behind then.
    pub fn create(tree: &JobTree) -> Result<IdleCgroup, String> {
        let hier = CpuHierarchy::detect().map_err(|e| format!("no cpu cgroup hierarchy: {e}"))?;
        let name = format!("tact-{}-idle", std::process::id());
        let mut groups = CpuGroups::create(hier, &name, None).map_err(|e| e.to_string())?;
        // From here on, an early return drops `groups`, which removes what was made.
        let (job, _) = groups.add_entity("job", 1).map_err(|e| e.to_string())?;
        CpuIdle::open(groups.hierarchy(), groups.dir())
            .and_then(|idle| idle.set(true))
            .map_err(|e| e.to_string())?;
        let mut cgroup = IdleCgroup { groups, job };
        cgroup.cover(&tree.members()).map_err(|e| e.to_string())?;
        Ok(cgroup)
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
    /// someone); children forked inside are there already and must not be moved again, or
    /// their origin would be recorded as the group itself.
    pub fn cover(&mut self, members: &[ProcId]) -> tact_linux::Result<()> {
        let inside: HashSet<i32> = self.groups.pids(self.job)?.into_iter().collect();
        for &id in members.iter().filter(|id| !inside.contains(&id.pid)) {
            match self.groups.move_proc(self.job, id) {
                Ok(()) | Err(tact_linux::Error::NoProcess { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Moves every process back to where it came from (tact's cgroup for those forked inside)
    /// and removes the group.
    pub fn remove(mut self) -> tact_linux::Result<()> {
        self.groups.teardown()
    }
}
