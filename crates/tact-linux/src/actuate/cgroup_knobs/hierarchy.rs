//! Where each controller tact sets knobs of is mounted: v2 when a `cgroup2` mount lists it in its
//! `cgroup.controllers`, else v1 when a `cgroup` mount has it as an option (the same rule as
//! [`CpuHierarchy`](crate::actuate::cgroup_cpu::CpuHierarchy), whose mountinfo parsing this
//! shares).

use std::path::{Path, PathBuf};

use crate::actuate::cgroup_cpu::{
    cgroup_mounts, proc_cgroup_dir, v1_mount_with, v2_mount_with, CgroupMount, CgroupVersion,
};
use crate::error::{Error, Result};
use crate::probe::proc::ProcReader;

/// A cgroup controller the tickets model compiles into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Controller {
    Cpu,
    Memory,
    /// `io` on v2, `blkio` on v1.
    Io,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Cpu, Controller::Memory, Controller::Io];

    /// Its name in a v2 `cgroup.controllers` and `cgroup.subtree_control`.
    pub fn v2_name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Memory => "memory",
            Controller::Io => "io",
        }
    }

    /// Its name as a v1 mount option and in `/proc/PID/cgroup`.
    pub fn v1_name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Memory => "memory",
            Controller::Io => "blkio",
        }
    }

    /// What tact falls back to without it, for error messages.
    pub fn fallback(self) -> &'static str {
        match self {
            Controller::Cpu => {
                "fallback: the user-level share engine (SIGSTOP/SIGCONT duty cycles, the \
                 caller's own processes only)"
            }
            Controller::Memory => {
                "fallback: none in the kernel; memory entitlements are computed and shown but \
                 not enforced"
            }
            Controller::Io => {
                "fallback: the user-level disk gate (per-client bytes from /proc/PID/io, clients \
                 ahead of their share are stopped)"
            }
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The hierarchy one controller is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerMount {
    pub version: CgroupVersion,
    pub mount: CgroupMount,
}

/// Where `cpu`, `memory` and `io`/`blkio` are, each possibly missing.
#[derive(Debug, Clone)]
pub struct Hierarchies {
    mounts: [Option<ControllerMount>; 3],
    /// v1: the hierarchy with `cpuacct` (CPU usage counters), when `cpu` is on v1 and cpuacct is
    /// mounted; equal to the cpu mount when co-mounted.
    pub cpuacct: Option<CgroupMount>,
    /// The mountinfo file they were found in, named by errors about a missing controller.
    mountinfo: PathBuf,
    reader: ProcReader,
}

impl Hierarchies {
    /// Detects from `/proc/self/mountinfo` on this machine.
    pub fn detect() -> Result<Hierarchies> {
        Self::detect_in(
            Path::new("/proc/self/mountinfo"),
            Path::new("/"),
            ProcReader::new(),
        )
    }

    /// Detects from the mountinfo file `mountinfo`, with mount points taken under `fs_root` and
    /// processes' cgroups read from `reader`'s procfs. Fails only on an unreadable or malformed
    /// mountinfo; a missing controller is reported by [`Hierarchies::get`].
    pub fn detect_in(mountinfo: &Path, fs_root: &Path, reader: ProcReader) -> Result<Hierarchies> {
        let found = cgroup_mounts(mountinfo, fs_root)?;
        let mounts = Controller::ALL.map(|c| {
            let v2 = v2_mount_with(&found, c.v2_name()).map(|mount| ControllerMount {
                version: CgroupVersion::V2,
                mount,
            });
            v2.or_else(|| {
                v1_mount_with(&found, c.v1_name()).map(|mount| ControllerMount {
                    version: CgroupVersion::V1,
                    mount,
                })
            })
        });
        let cpu_on_v1 = matches!(&mounts[0], Some(m) if m.version == CgroupVersion::V1);
        Ok(Hierarchies {
            cpuacct: cpu_on_v1
                .then(|| v1_mount_with(&found, "cpuacct"))
                .flatten(),
            mounts,
            mountinfo: mountinfo.to_path_buf(),
            reader,
        })
    }

    /// Where controller `c` is, or an error naming it, what was looked for, and the fallback.
    pub fn get(&self, c: Controller) -> Result<&ControllerMount> {
        self.mounts[c.index()]
            .as_ref()
            .ok_or_else(|| Error::Unavailable {
                what: format!("the {} cgroup controller", c.v2_name()),
                reason: format!(
                    "no cgroup2 mount lists {} in its cgroup.controllers and no cgroup v1 mount \
                     has the {} option (in {}); {}",
                    c.v2_name(),
                    c.v1_name(),
                    self.mountinfo.display(),
                    c.fallback()
                ),
            })
    }

    /// The procfs processes' cgroups are read from.
    pub(crate) fn reader(&self) -> &ProcReader {
        &self.reader
    }

    /// The directory of `pid`'s cgroup (`/proc/PID/cgroup`) in controller `c`'s hierarchy.
    pub fn cgroup_of(&self, c: Controller, pid: i32) -> Result<PathBuf> {
        let m = self.get(c)?;
        proc_cgroup_dir(
            self.reader.root(),
            &pid.to_string(),
            pid,
            &m.mount,
            m.version,
            c.v1_name(),
        )
    }

    /// The directory of this process's own cgroup in controller `c`'s hierarchy.
    pub fn own_cgroup(&self, c: Controller) -> Result<PathBuf> {
        let m = self.get(c)?;
        proc_cgroup_dir(
            self.reader.root(),
            "self",
            std::process::id() as i32,
            &m.mount,
            m.version,
            c.v1_name(),
        )
    }
}
