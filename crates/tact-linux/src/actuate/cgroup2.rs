//! A job's own directory in the cgroup v2 hierarchy, with no controller: a name the kernel
//! attaches to every socket the job creates, which is what nftables' `socket cgroupv2` matches
//! ([`super::nft`]). It needs no controller, so it works on hybrid machines whose cgroup2 mount
//! has none, as well as on pure v2 ones.
//!
//! [`JobCgroup2::create`] finds the cgroup2 mount in `/proc/self/mountinfo` (never an assumed
//! path) and makes `OWN/NAME` below this process's own cgroup2 cgroup (`0::PATH` of
//! `/proc/self/cgroup`), sweeping what a SIGKILLed tact left there first;
//! [`JobCgroup2::join_before_exec`] makes a command's child join it between fork and exec, so
//! that every socket the program opens is created there;
//! [`JobCgroup2::cover`] moves processes in, remembering where each came from;
//! [`JobCgroup2::remove`] (also run on drop) moves every process back (tact's cgroup for those
//! forked inside) and removes the directory. Every error names the file.

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::actuate::cgroup_cpu::{
    cgroup_mounts, check_name, is_busy, mkdir, move_to, proc_cgroup_dir, read_procs, write_pid,
    CgroupMount, CgroupVersion, TEARDOWN_PATIENCE,
};
use crate::actuate::stale;
use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// The first cgroup2 mount in the mountinfo file `mountinfo`, its mount point under `fs_root`.
pub fn cgroup2_mount(mountinfo: &Path, fs_root: &Path) -> Result<CgroupMount> {
    cgroup_mounts(mountinfo, fs_root)?
        .into_iter()
        .find(|m| m.version == CgroupVersion::V2)
        .map(|m| m.mount)
        .ok_or_else(|| {
            Error::io(
                mountinfo,
                io::Error::new(io::ErrorKind::NotFound, "no cgroup2 hierarchy is mounted"),
            )
        })
}

/// The depth of `dir` in the hierarchy mounted as `mount` (its root cgroup is level 0).
pub fn level_of(mount: &CgroupMount, dir: &Path) -> Option<usize> {
    let below = dir.strip_prefix(&mount.dir).ok()?;
    let above = Path::new(&mount.root)
        .components()
        .count()
        .saturating_sub(1);
    Some(above + below.components().count())
}

/// A tact-owned cgroup v2 directory holding a job. Dropping it removes it.
#[derive(Debug)]
pub struct JobCgroup2 {
    mount: CgroupMount,
    reader: ProcReader,
    /// This process's own cgroup2 directory, where the new one is made.
    base: PathBuf,
    dir: PathBuf,
    level: usize,
    /// Where each moved process came from.
    origins: HashMap<i32, PathBuf>,
    removed: bool,
}

impl JobCgroup2 {
    /// Creates `OWN/name` on this machine (`name`: one component, `tact-<PID>-...`).
    pub fn create(name: &str) -> Result<JobCgroup2> {
        let mount = cgroup2_mount(Path::new("/proc/self/mountinfo"), Path::new("/"))?;
        Self::create_in(mount, ProcReader::new(), name)
    }

    /// Creates `OWN/name` in the hierarchy mounted as `mount`, processes' cgroups read through
    /// `reader`.
    pub fn create_in(mount: CgroupMount, reader: ProcReader, name: &str) -> Result<JobCgroup2> {
        let me = std::process::id() as i32;
        let base = proc_cgroup_dir(reader.root(), "self", me, &mount, CgroupVersion::V2, "")?;
        check_name(&base, name)?;
        stale::sweep(&base);
        let dir = base.join(name);
        let level = level_of(&mount, &dir).ok_or_else(|| {
            Error::io(
                &dir,
                io::Error::new(io::ErrorKind::InvalidInput, "not below the cgroup2 mount"),
            )
        })?;
        mkdir(&dir)?;
        Ok(JobCgroup2 {
            mount,
            reader,
            base,
            dir,
            level,
            origins: HashMap::new(),
            removed: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory's depth in its hierarchy, as `socket cgroupv2 level` wants it.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Makes the child that `command` spawns join the directory before it execs (it writes `0`,
    /// "myself", to `cgroup.procs`), so the program runs here from its first instruction. The
    /// file is opened now, so an error names it here; in the child a failed write is not fatal
    /// (the program runs where it was, and [`JobCgroup2::cover`] moves it later): check with
    /// [`JobCgroup2::holds`] after the spawn. The child forked from this process, whose cgroup
    /// is the directory's parent, so [`JobCgroup2::remove`] moves it back to where it came from.
    pub fn join_before_exec(&self, command: &mut Command) -> Result<()> {
        let path = self.dir.join("cgroup.procs");
        // O_CLOEXEC (std's default): the program itself never sees the descriptor.
        let procs = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        // SAFETY: write(2) is async-signal-safe, and the closure allocates nothing.
        unsafe {
            command.pre_exec(move || {
                libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1);
                Ok(())
            });
        }
        Ok(())
    }

    /// Whether process `pid` is in the directory now.
    pub fn holds(&self, pid: i32) -> Result<bool> {
        Ok(read_procs(&self.dir)?.contains(&pid))
    }

    /// Moves the members that are not in the directory yet; members that exited are skipped.
    /// Children forked inside are there already and are not moved again (their origin would be
    /// recorded as the directory itself).
    pub fn cover(&mut self, members: &[ProcId]) -> Result<()> {
        let inside: HashSet<i32> = read_procs(&self.dir)?.into_iter().collect();
        for id in members.iter().filter(|id| !inside.contains(&id.pid)) {
            match self.move_in(*id) {
                Ok(()) | Err(Error::NoProcess { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn move_in(&mut self, id: ProcId) -> Result<()> {
        let stat = self.reader.stat(id.pid)?;
        if stat.start_time != id.start_time || stat.is_dead() {
            return Err(Error::NoProcess { pid: id.pid });
        }
        if !self.origins.contains_key(&id.pid) {
            let origin = proc_cgroup_dir(
                self.reader.root(),
                &id.pid.to_string(),
                id.pid,
                &self.mount,
                CgroupVersion::V2,
                "",
            )?;
            self.origins.insert(id.pid, origin);
        }
        write_pid(&self.dir, id.pid)
    }

    /// Moves every process back to where it came from (tact's own cgroup for those forked
    /// inside, or when the origin is gone) and removes the directory, retrying while processes
    /// are still leaving. Running it again does nothing.
    pub fn remove(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        let deadline = Instant::now() + TEARDOWN_PATIENCE;
        loop {
            let pids = match read_procs(&self.dir) {
                Ok(pids) => pids,
                Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    Vec::new()
                }
                Err(e) => return Err(e),
            };
            for pid in pids {
                let origin = self.origins.remove(&pid);
                move_to(
                    origin.as_deref().into_iter().chain([self.base.as_path()]),
                    pid,
                )?;
            }
            match fs::remove_dir(&self.dir) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if Instant::now() < deadline && is_busy(&e) => {
                    thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(Error::io(&self.dir, e)),
            }
        }
        self.removed = true;
        Ok(())
    }
}

impl Drop for JobCgroup2 {
    fn drop(&mut self) {
        // The last resort of an early return; callers that can report call `remove` first.
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_count_from_the_hierarchys_root() {
        let mount = CgroupMount {
            dir: PathBuf::from("/sys/fs/cgroup/unified"),
            root: "/".into(),
        };
        let at = |d: &str| level_of(&mount, Path::new(d));
        assert_eq!(at("/sys/fs/cgroup/unified/tact-1-net"), Some(1));
        assert_eq!(at("/sys/fs/cgroup/unified/a/b/tact-1-net"), Some(3));
        assert_eq!(at("/sys/fs/cgroup/cpu/x"), None);
        // A container's mount of a subtree: levels still count from the hierarchy's root.
        let sub = CgroupMount {
            dir: PathBuf::from("/sys/fs/cgroup"),
            root: "/machine.slice/c1".into(),
        };
        assert_eq!(
            level_of(&sub, Path::new("/sys/fs/cgroup/tact-1-net")),
            Some(3)
        );
    }

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo_not_assumed() {
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path().join("mountinfo");
        fs::write(
            &info,
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
        let m = cgroup2_mount(&info, Path::new("/")).unwrap();
        assert_eq!(m.dir, PathBuf::from("/sys/fs/cgroup/unified"));
        fs::write(
            &info,
            "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n",
        )
        .unwrap();
        let e = cgroup2_mount(&info, Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mountinfo") && e.contains("no cgroup2"), "{e}");
    }
}
