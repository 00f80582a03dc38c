//! The group form of SCHED_IDLE (spec idletime §6, "CPU"): `cpu.idle = 1` on a job's cgroup makes
//! the whole group an idle entity, on cgroup v2 and (from kernel 5.15) v1 alike. Unlike per-thread
//! SCHED_IDLE it covers every process moved into the group, and undoing it needs no CAP_SYS_NICE,
//! only the write access to the cgroup that setting it needed (root or a delegated cgroup).
//!
//! [`CpuIdle::open`] is the detection: it finds the file in a cgroup of the detected
//! [`CpuHierarchy`] (which takes its roots, so v2 is tested on fixture trees) and explains what is
//! missing when it cannot be used.

use std::fs;
use std::path::{Path, PathBuf};

use crate::actuate::cgroup_cpu::{writable, CgroupVersion, CpuHierarchy};
use crate::error::{Error, Result};

/// The `cpu.idle` file of one cgroup.
#[derive(Debug, Clone)]
pub struct CpuIdle {
    file: PathBuf,
}

impl CpuIdle {
    /// The `cpu.idle` of cgroup directory `dir` in `hier`'s cpu hierarchy, checked to exist and be
    /// writable. Refuses the hierarchy's root (the kernel keeps the root group normal) and
    /// directories outside the hierarchy.
    pub fn open(hier: &CpuHierarchy, dir: &Path) -> Result<CpuIdle> {
        let what = || format!("cpu.idle in {}", dir.display());
        let unavailable = |reason: String| Error::Unavailable {
            what: what(),
            reason,
        };
        let mount = &hier.cpu.dir;
        if !dir.starts_with(mount) {
            return Err(unavailable(format!(
                "it is not inside the cpu hierarchy mounted at {}",
                mount.display()
            )));
        }
        if dir == mount.as_path() {
            return Err(unavailable(
                "the root cgroup cannot be made idle; use a child cgroup of the job".into(),
            ));
        }
        if !dir.is_dir() {
            return Err(unavailable("no such cgroup directory".into()));
        }
        let file = dir.join("cpu.idle");
        if !file.exists() {
            let reason = match hier.version {
                CgroupVersion::V2 => {
                    let control = dir.parent().unwrap_or(dir).join("cgroup.subtree_control");
                    let enabled = fs::read_to_string(&control)
                        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"));
                    if enabled {
                        "the kernel is older than 5.15 (no cpu.idle)".to_string()
                    } else {
                        format!("the cpu controller is not enabled in {}", control.display())
                    }
                }
                CgroupVersion::V1 => "the kernel is older than 5.15 (no cpu.idle)".to_string(),
            };
            return Err(unavailable(reason));
        }
        if !writable(&file) {
            return Err(unavailable(format!(
                "{} is not writable by this user: it needs root or a delegated cgroup",
                file.display()
            )));
        }
        Ok(CpuIdle { file })
    }

    /// The file this writes.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether the group is idle now.
    pub fn get(&self) -> Result<bool> {
        let text = fs::read_to_string(&self.file).map_err(|e| Error::io(&self.file, e))?;
        match text.trim() {
            "0" => Ok(false),
            "1" => Ok(true),
            other => Err(Error::parse(
                &self.file,
                1,
                format!("expected 0 or 1, found `{other}`"),
            )),
        }
    }

    /// Makes the group idle (or normal again), and checks that it took.
    pub fn set(&self, idle: bool) -> Result<()> {
        fs::write(&self.file, if idle { "1" } else { "0" })
            .map_err(|e| Error::io(&self.file, e))?;
        if self.get()? != idle {
            return Err(Error::io(
                &self.file,
                std::io::Error::other(format!("wrote {} but it reads back otherwise", idle as u8)),
            ));
        }
        Ok(())
    }
}
