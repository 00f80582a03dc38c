//! The kernel-backed share backend (spec proportional-share §4, "Kernel-backed alternatives"):
//! one child cgroup per entity under a tact-owned directory, with CPU weights that keep the share
//! ratios: cgroup v2 `cpu.weight` (1–10000) or v1 `cpu.shares` (2–262144). The kernel then does
//! the sharing, work conserving and multicore-aware, with no user-level overhead, and counts
//! short-lived children (they inherit the cgroup). Unlike ALPS, the tact directory competes with
//! the rest of the system as one entity, and weights matter only under contention.
//!
//! * [`CpuHierarchy::detect`] finds the hierarchy with the `cpu` controller in
//!   `/proc/self/mountinfo` (v2: a `cgroup2` mount whose `cgroup.controllers` lists `cpu`; v1: a
//!   `cgroup` mount with the `cpu` option, noting where `cpuacct` is). The mountinfo file, the
//!   filesystem root and the procfs root are all injectable, so tests run on fixture trees.
//! * [`CpuGroups::create`] makes `BASE/NAME` (BASE: the caller's own cgroup in that hierarchy,
//!   or a given directory), [`CpuGroups::add_entity`] one child per entity, [`CpuGroups::move_pid`]
//!   writes `cgroup.procs` ([`CpuGroups::join_before_exec`]: a starting command's child writes
//!   it itself, before it execs), [`CpuGroups::usage_ns`] reads v2 `cpu.stat usage_usec` or v1
//!   `cpuacct.usage` (when cpuacct is a separate hierarchy, from a mirror directory tact keeps
//!   there), and [`CpuGroups::teardown`] (also run on drop) moves every process back to the cgroup
//!   it came from and removes the directories.
//! * [`can_use`] tells `--backend auto` whether this process may do all that, and why not.
//!
//! Every error names the file it failed on.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::actuate::affinity;
use crate::actuate::cgroup_join::{self, JoinCheck};
use crate::actuate::stale;
use crate::actuate::tree::JobTree;
use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// How long teardown keeps moving processes out of a child and retrying `rmdir` (a process that
/// is exiting, or forking, can keep a cgroup busy for a moment).
pub(crate) const TEARDOWN_PATIENCE: Duration = Duration::from_secs(2);

/// Which cgroup interface a controller is on (the weight methods are the `cpu` controller's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// The weight file of a child cgroup.
    pub fn weight_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cpu.shares",
            CgroupVersion::V2 => "cpu.weight",
        }
    }

    /// The smallest and largest weight the kernel accepts.
    pub fn weight_range(self) -> (u64, u64) {
        match self {
            CgroupVersion::V1 => (2, 262_144),
            CgroupVersion::V2 => (1, 10_000),
        }
    }
}

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// Where it is mounted, under the filesystem root given to detection.
    pub dir: PathBuf,
    /// The cgroup that is mounted there (mountinfo field 4): `/` unless in a container.
    pub root: String,
}

impl CgroupMount {
    /// The directory of a cgroup path as `/proc/PID/cgroup` writes it.
    pub fn dir_of(&self, cgroup: &str) -> Option<PathBuf> {
        let cgroup = cgroup.strip_suffix(" (deleted)").unwrap_or(cgroup);
        let rel = if self.root == "/" {
            cgroup
        } else {
            let rest = cgroup.strip_prefix(self.root.as_str())?;
            if !rest.is_empty() && !rest.starts_with('/') {
                return None;
            }
            rest
        };
        Some(self.dir.join(rel.trim_start_matches('/')))
    }
}

/// Where the `cpu` controller lives.
#[derive(Debug, Clone)]
pub struct CpuHierarchy {
    pub version: CgroupVersion,
    /// The hierarchy with the `cpu` controller.
    pub cpu: CgroupMount,
    /// v1: the hierarchy with `cpuacct` (usage counters), if mounted; equal to `cpu` when the two
    /// are co-mounted. v2: `None` (usage is in `cpu.stat`).
    pub cpuacct: Option<CgroupMount>,
    /// The procfs the pids' cgroups are read from.
    reader: ProcReader,
}

impl CpuHierarchy {
    /// Detects from `/proc/self/mountinfo` on this machine.
    pub fn detect() -> Result<CpuHierarchy> {
        Self::detect_in(
            Path::new("/proc/self/mountinfo"),
            Path::new("/"),
            ProcReader::new(),
        )
    }

    /// Detects from the mountinfo file `mountinfo`, with the mount points found in it taken under
    /// `fs_root` (`/` on a real system, a fixture tree in tests), and processes' cgroups read from
    /// `reader`'s procfs (`PID/cgroup`, `self/cgroup`).
    pub fn detect_in(mountinfo: &Path, fs_root: &Path, reader: ProcReader) -> Result<CpuHierarchy> {
        let mounts = cgroup_mounts(mountinfo, fs_root)?;
        match (v2_mount_with(&mounts, "cpu"), v1_mount_with(&mounts, "cpu")) {
            (Some(cpu), _) => Ok(CpuHierarchy {
                version: CgroupVersion::V2,
                cpu,
                cpuacct: None,
                reader,
            }),
            (None, Some(cpu)) => Ok(CpuHierarchy {
                version: CgroupVersion::V1,
                cpu,
                cpuacct: v1_mount_with(&mounts, "cpuacct"),
                reader,
            }),
            (None, None) => Err(Error::io(
                mountinfo,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "no cgroup hierarchy with the cpu controller is mounted \
                     (no cgroup2 mount lists cpu in cgroup.controllers, no cgroup v1 mount has cpu)",
                ),
            )),
        }
    }

    /// v1: whether `cpuacct` is mounted together with `cpu` (then usage is read in the same
    /// directories).
    pub fn comounted(&self) -> bool {
        self.cpuacct.as_ref() == Some(&self.cpu)
    }

    /// Whether per-entity usage can be read ([`CpuGroups::usage_ns`]): always on v2, on v1 when
    /// cpuacct is mounted.
    pub fn has_usage(&self) -> bool {
        self.version == CgroupVersion::V2 || self.cpuacct.is_some()
    }

    /// The directory of the cgroup of `pid` (`/proc/PID/cgroup`) in the cpu hierarchy.
    pub fn cgroup_of(&self, pid: i32) -> Result<PathBuf> {
        self.dir_in(&self.cpu, &pid.to_string(), pid)
    }

    /// The directory of this process's own cgroup in the cpu hierarchy (`/proc/self/cgroup`).
    pub fn own_cgroup(&self) -> Result<PathBuf> {
        self.dir_in(&self.cpu, "self", std::process::id() as i32)
    }

    /// The directory of `pid`'s cgroup in the cpuacct hierarchy (v1, when mounted).
    fn acct_cgroup_of(&self, who: &str, pid: i32) -> Result<Option<PathBuf>> {
        match &self.cpuacct {
            Some(acct) => self.dir_in(acct, who, pid).map(Some),
            None => Ok(None),
        }
    }

    /// Looks `who` (a pid or `self`) up in `/proc/WHO/cgroup` and maps its path in `mount`'s
    /// hierarchy to a directory.
    fn dir_in(&self, mount: &CgroupMount, who: &str, pid: i32) -> Result<PathBuf> {
        let controller = if Some(mount) == self.cpuacct.as_ref() && mount != &self.cpu {
            "cpuacct"
        } else {
            "cpu"
        };
        proc_cgroup_dir(
            self.reader.root(),
            who,
            pid,
            mount,
            self.version,
            controller,
        )
    }
}

/// Cumulative CPU nanoseconds used in the cgroup `dir`: v2 `cpu.stat` `usage_usec`, v1
/// `cpuacct.usage` (`dir` then being in a hierarchy with cpuacct).
pub(crate) fn read_usage_ns(dir: &Path, version: CgroupVersion) -> Result<u64> {
    match version {
        CgroupVersion::V2 => {
            let path = dir.join("cpu.stat");
            let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            for (i, line) in text.lines().enumerate() {
                if let Some(v) = line.strip_prefix("usage_usec ") {
                    let us: u64 = v
                        .trim()
                        .parse()
                        .map_err(|_| Error::parse(&path, i + 1, "bad usage_usec"))?;
                    return Ok(us * 1000);
                }
            }
            Err(Error::parse(
                &path,
                text.lines().count(),
                "no usage_usec line",
            ))
        }
        CgroupVersion::V1 => {
            let path = dir.join("cpuacct.usage");
            let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            text.trim()
                .parse()
                .map_err(|_| Error::parse(&path, 1, "expected a number of nanoseconds"))
        }
    }
}

/// A mounted cgroup hierarchy as mountinfo (and, on v2, its root's `cgroup.controllers`) shows it.
pub(crate) struct FoundMount {
    pub(crate) version: CgroupVersion,
    pub(crate) mount: CgroupMount,
    /// v1: the mount's options (its controllers among them); v2: the controllers listed in its
    /// `cgroup.controllers`, empty when that is unreadable (hybrid setups).
    pub(crate) controllers: Vec<String>,
}

/// Every cgroup (v1) and cgroup2 mount in the mountinfo file `mountinfo`, in file order, with
/// mount points taken under `fs_root`.
pub(crate) fn cgroup_mounts(mountinfo: &Path, fs_root: &Path) -> Result<Vec<FoundMount>> {
    let text = fs::read_to_string(mountinfo).map_err(|e| Error::io(mountinfo, e))?;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let m = parse_mountinfo_line(line)
            .ok_or_else(|| Error::parse(mountinfo, i + 1, "malformed mountinfo line"))?;
        let mount = CgroupMount {
            dir: fs_root.join(m.mount_point.trim_start_matches('/')),
            root: m.root,
        };
        let (version, controllers) = match m.fstype.as_str() {
            "cgroup2" => {
                let text = fs::read_to_string(mount.dir.join("cgroup.controllers"));
                let list = text.map(|t| t.split_whitespace().map(str::to_string).collect());
                (CgroupVersion::V2, list.unwrap_or_default())
            }
            "cgroup" => (
                CgroupVersion::V1,
                m.super_options.split(',').map(str::to_string).collect(),
            ),
            _ => continue,
        };
        found.push(FoundMount {
            version,
            mount,
            controllers,
        });
    }
    Ok(found)
}

fn mount_with(
    mounts: &[FoundMount],
    version: CgroupVersion,
    controller: &str,
) -> Option<CgroupMount> {
    mounts
        .iter()
        .find(|m| m.version == version && m.controllers.iter().any(|c| c == controller))
        .map(|m| m.mount.clone())
}

/// The first cgroup2 mount whose `cgroup.controllers` lists `controller`.
pub(crate) fn v2_mount_with(mounts: &[FoundMount], controller: &str) -> Option<CgroupMount> {
    mount_with(mounts, CgroupVersion::V2, controller)
}

/// The first cgroup v1 mount with the `controller` option.
pub(crate) fn v1_mount_with(mounts: &[FoundMount], controller: &str) -> Option<CgroupMount> {
    mount_with(mounts, CgroupVersion::V1, controller)
}

/// Looks `who` (a pid or `self`) up in `PROC_ROOT/WHO/cgroup` and maps its path in `mount`'s
/// hierarchy to a directory: on v2 the `0::PATH` line, on v1 the line listing `controller`.
pub(crate) fn proc_cgroup_dir(
    proc_root: &Path,
    who: &str,
    pid: i32,
    mount: &CgroupMount,
    version: CgroupVersion,
    controller: &str,
) -> Result<PathBuf> {
    let path = proc_root.join(who).join("cgroup");
    let text = fs::read_to_string(&path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
            Error::NoProcess { pid }
        } else {
            Error::io(&path, e)
        }
    })?;
    for (i, line) in text.lines().enumerate() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(cgroup)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::parse(&path, i + 1, "expected ID:CONTROLLERS:PATH"));
        };
        let v2_line = id == "0" && controllers.is_empty();
        let wanted = match version {
            CgroupVersion::V2 => v2_line,
            CgroupVersion::V1 => !v2_line && controllers.split(',').any(|c| c == controller),
        };
        if !wanted {
            continue;
        }
        return mount.dir_of(cgroup).ok_or_else(|| {
            Error::parse(
                &path,
                i + 1,
                format!(
                    "cgroup {cgroup} is outside the mounted part {} of its hierarchy",
                    mount.root
                ),
            )
        });
    }
    Err(Error::parse(
        &path,
        text.lines().count(),
        format!("no line for the {version:?} {controller} hierarchy"),
    ))
}

/// One mountinfo line's fields that detection needs (and, `dev`, that the idle disk probe needs).
pub(crate) struct MountLine {
    /// `MAJOR:MINOR` of the mounted device (field 3).
    pub(crate) dev: String,
    root: String,
    pub(crate) mount_point: String,
    pub(crate) fstype: String,
    super_options: String,
}

/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS`, with octal
/// escapes (`\040` for a space) in the paths.
pub(crate) fn parse_mountinfo_line(line: &str) -> Option<MountLine> {
    let words: Vec<&str> = line.split(' ').collect();
    let sep = words.iter().position(|w| *w == "-")?;
    if sep < 6 || words.len() < sep + 4 {
        return None;
    }
    Some(MountLine {
        dev: words[2].to_string(),
        root: unescape(words[3]),
        mount_point: unescape(words[4]),
        fstype: words[sep + 1].to_string(),
        super_options: words[sep + 3].to_string(),
    })
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An entity of a [`CpuGroups`]: its index, in the order of `add_entity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct EntityId(pub usize);

/// The weight written for one entity.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Weight {
    pub entity: EntityId,
    pub share: u64,
    /// What was written to `cpu.weight` / `cpu.shares`.
    pub weight: u64,
    /// The weight had to be raised to the kernel's minimum, so the ratio is not kept.
    pub clamped: bool,
    /// `(weight/Σweights) / (share/Σshares) − 1`: 0 when the ratio is exact.
    pub ratio_error: f64,
}

/// Integer weights in `[lo, hi]` proportional to `shares` (each ≥ 1), and whether each had to be
/// clamped. When the largest share fits, every share is multiplied by the same integer
/// `⌊hi/max⌋`, so ratios are exact unless a product is below `lo`; otherwise weights are
/// `round(share·hi/max)`, and those that round below `lo` are clamped to it.
pub fn scale_weights(shares: &[u64], (lo, hi): (u64, u64)) -> Vec<(u64, bool)> {
    let Some(&max) = shares.iter().max() else {
        return Vec::new();
    };
    let max = max.max(1);
    shares
        .iter()
        .map(|&s| {
            let w = if max <= hi {
                s * (hi / max)
            } else {
                ((u128::from(s) * u128::from(hi) + u128::from(max) / 2) / u128::from(max)) as u64
            };
            if w < lo {
                (lo, true)
            } else {
                (w.min(hi), false)
            }
        })
        .collect()
}

#[derive(Debug)]
struct Entity {
    name: String,
    share: u64,
    weight: u64,
    clamped: bool,
    dir: PathBuf,
    /// The mirror directory in a separate cpuacct hierarchy (v1).
    acct_dir: Option<PathBuf>,
    /// Where the first process moved in came from: where its children forked inside go back
    /// to, since they were born in its place.
    adopted: Option<Origin>,
}

/// Where a moved process came from, to put it back.
#[derive(Debug, Clone)]
struct Origin {
    cpu: PathBuf,
    acct: Option<PathBuf>,
}

/// A tact-owned cgroup directory with one child per entity. Dropping it tears it down.
#[derive(Debug)]
pub struct CpuGroups {
    hier: CpuHierarchy,
    /// The cgroup the tact directory was created in.
    base: PathBuf,
    /// `BASE/NAME`, owned by tact.
    dir: PathBuf,
    /// The mirror of `dir` in a separate v1 cpuacct hierarchy.
    acct_base: Option<PathBuf>,
    acct_dir: Option<PathBuf>,
    /// v2: tact wrote `+cpu` to `BASE/cgroup.subtree_control`, and takes it back at teardown.
    enabled_in_base: bool,
    /// This process's own cgroups, where a process of unknown origin goes back to: one the job
    /// spawned into an entity forked from here. Not BASE: on v2 a BASE that enables a
    /// controller for its children may hold no process unless it is the root.
    home: Origin,
    entities: Vec<Option<Entity>>,
    origins: HashMap<i32, Origin>,
    torn_down: bool,
}

impl CpuGroups {
    /// Creates `BASE/name`, where BASE is `under` or this process's own cgroup in the cpu
    /// hierarchy. On v2, enables the cpu controller for BASE's children and for the new
    /// directory's (BASE must then hold no processes unless it is the root: the kernel's
    /// no-internal-processes rule). On v1 with a separate cpuacct hierarchy, also creates a mirror
    /// directory there, under this process's own cpuacct cgroup, to count usage.
    ///
    /// `name` must be one path component of letters, digits, `-`, `_`, `.` and `@` that does not
    /// exist yet (callers use `tact-share-<pid>`; tests `tact-test-*`).
    pub fn create(hier: CpuHierarchy, name: &str, under: Option<&Path>) -> Result<CpuGroups> {
        let base = match under {
            Some(dir) => dir.to_path_buf(),
            None => hier.own_cgroup()?,
        };
        // Else a directory outside it would be made, and its knob files written as plain files
        // that keep it from being removed.
        if !base.starts_with(&hier.cpu.dir) {
            return Err(Error::Unavailable {
                what: format!("a cgroup in {}", base.display()),
                reason: format!(
                    "it is not a cgroup of the cpu hierarchy mounted at {}",
                    hier.cpu.dir.display()
                ),
            });
        }
        check_name(&base, name)?;
        let acct_base = match (&hier.cpuacct, hier.comounted()) {
            (Some(_), false) => hier.acct_cgroup_of("self", std::process::id() as i32)?,
            _ => None,
        };
        // What an earlier tact could not remove (it was SIGKILLed) goes before this one adds.
        for dir in std::iter::once(&base).chain(acct_base.as_ref()) {
            stale::sweep(dir);
        }
        let home = Origin {
            cpu: hier.own_cgroup()?,
            acct: acct_base.clone(),
        };
        let mut groups = CpuGroups {
            dir: base.join(name),
            acct_dir: acct_base.as_ref().map(|b| b.join(name)),
            hier,
            base,
            acct_base,
            enabled_in_base: false,
            home,
            entities: Vec::new(),
            origins: HashMap::new(),
            torn_down: true, // nothing to undo until the directory exists
        };
        if groups.hier.version == CgroupVersion::V2 {
            groups.enabled_in_base = enable_cpu(&groups.base)?;
        }
        if let Err(e) = mkdir(&groups.dir) {
            groups.restore_base();
            return Err(e);
        }
        groups.torn_down = false;
        // From here on, an error drops `groups`, which removes what was made.
        if groups.hier.version == CgroupVersion::V2 {
            // Available there by construction: BASE's subtree_control has cpu. Refused when
            // BASE holds processes and took cpu as a threaded controller (see populated_error).
            let path = groups.dir.join("cgroup.subtree_control");
            fs::write(&path, "+cpu").map_err(|e| populated_error(&path, e, libc::EOPNOTSUPP))?;
        }
        if let Some(acct) = &groups.acct_dir {
            mkdir(acct)?;
        }
        Ok(groups)
    }

    /// The hierarchy this works in.
    pub fn hierarchy(&self) -> &CpuHierarchy {
        &self.hier
    }

    /// The tact-owned directory (`BASE/NAME`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cgroup directory of an entity.
    pub fn entity_dir(&self, e: EntityId) -> Result<&Path> {
        Ok(&self.entity(e)?.dir)
    }

    /// Adds a child cgroup `DIR/name` with the given share, and rescales every weight so that
    /// the ratios are kept. Returns the new entity and every entity's weight.
    pub fn add_entity(&mut self, name: &str, share: u64) -> Result<(EntityId, Vec<Weight>)> {
        check_name(&self.dir, name)?;
        check_share(&self.dir.join(name), share)?;
        if self.entities.iter().flatten().any(|e| e.name == name) {
            return Err(Error::io(
                self.dir.join(name),
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "an entity of this name exists",
                ),
            ));
        }
        let dir = self.dir.join(name);
        mkdir(&dir)?;
        let acct_dir = self.acct_dir.as_ref().map(|a| a.join(name));
        if let Some(acct) = &acct_dir {
            if let Err(e) = mkdir(acct) {
                let _ = fs::remove_dir(&dir);
                return Err(e);
            }
        }
        let id = EntityId(self.entities.len());
        self.entities.push(Some(Entity {
            name: name.to_string(),
            share,
            weight: 0, // written below
            clamped: false,
            dir,
            acct_dir,
            adopted: None,
        }));
        let weights = self.write_weights()?;
        Ok((id, weights))
    }

    /// Changes an entity's share live; every weight is rescaled and the changed ones rewritten.
    pub fn set_share(&mut self, e: EntityId, share: u64) -> Result<Vec<Weight>> {
        let dir = self.entity(e)?.dir.clone();
        check_share(&dir, share)?;
        self.entity_mut(e)?.share = share;
        self.write_weights()
    }

    /// Every entity's share and weight as last written.
    pub fn weights(&self) -> Vec<Weight> {
        let live: Vec<(EntityId, &Entity)> = self
            .entities
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (EntityId(i), e)))
            .collect();
        let total_share: u64 = live.iter().map(|(_, e)| e.share).sum();
        let total_weight: u64 = live.iter().map(|(_, e)| e.weight).sum();
        live.iter()
            .map(|&(id, e)| {
                let target = e.share as f64 / total_share.max(1) as f64;
                let got = e.weight as f64 / total_weight.max(1) as f64;
                Weight {
                    entity: id,
                    share: e.share,
                    weight: e.weight,
                    clamped: e.clamped,
                    ratio_error: got / target - 1.0,
                }
            })
            .collect()
    }

    /// Moves process `pid` (all its threads) into entity `e` (`cgroup.procs`). Its children
    /// forked from now on start there too. Where it came from is remembered, to move it back,
    /// unless that is one of tact's own directories (a child forked inside, moved again).
    pub fn move_pid(&mut self, e: EntityId, pid: i32) -> Result<()> {
        let (dir, acct_dir) = {
            let ent = self.entity(e)?;
            (ent.dir.clone(), ent.acct_dir.clone())
        };
        if !self.origins.contains_key(&pid) {
            let cpu = self.hier.cgroup_of(pid)?;
            if !cpu.starts_with(&self.dir) {
                let origin = Origin {
                    cpu,
                    acct: self.hier.acct_cgroup_of(&pid.to_string(), pid)?,
                };
                self.entity_mut(e)?.adopted.get_or_insert(origin.clone());
                self.origins.insert(pid, origin);
            }
        }
        write_pid(&dir, pid)?;
        if let Some(acct) = acct_dir {
            write_pid(&acct, pid)?;
        }
        Ok(())
    }

    /// Makes the child that `command` spawns join entity `e` (and its cpuacct mirror) between
    /// fork and exec, so it runs there from its first instruction; a failed join fails the spawn
    /// ([`cgroup_join`]). The child has no recorded origin: teardown moves it to this process's
    /// cgroup, which it forked from.
    pub fn join_before_exec(&self, e: EntityId, command: &mut Command) -> Result<JoinCheck> {
        let ent = self.entity(e)?;
        let dirs: Vec<&Path> = std::iter::once(ent.dir.as_path())
            .chain(ent.acct_dir.as_deref())
            .collect();
        cgroup_join::join_before_exec(command, &dirs)
    }

    /// Moves the process `id` into entity `e` after checking that its pid still names it.
    pub fn move_proc(&mut self, e: EntityId, id: ProcId) -> Result<()> {
        match self.hier.reader.stat(id.pid) {
            Ok(s) if s.start_time == id.start_time && !s.is_dead() => self.move_pid(e, id.pid),
            Ok(_) => Err(Error::NoProcess { pid: id.pid }),
            Err(e) => Err(e),
        }
    }

    /// Moves every current member of a process tree into entity `e`; members that exited
    /// meanwhile are skipped. Returns how many were moved.
    pub fn move_tree(&mut self, e: EntityId, tree: &JobTree) -> Result<usize> {
        self.cover(e, &tree.members())
    }

    /// Moves the `members` that are not in entity `e` yet; members that exited meanwhile are
    /// skipped. Returns how many were moved. Those inside are left alone, and so is a child
    /// whose parent is inside: caught mid-fork, it is not listed in its parent's cgroup yet
    /// and reads as in the hierarchy's root (the kernel links it to its parent's cgroups
    /// last), which would be recorded as its origin; it lands inside by itself.
    pub fn cover(&mut self, e: EntityId, members: &[ProcId]) -> Result<usize> {
        let inside: HashSet<i32> = self.pids(e)?.into_iter().collect();
        let mut moved = 0;
        for &id in members.iter().filter(|id| !inside.contains(&id.pid)) {
            if matches!(self.hier.reader.stat(id.pid), Ok(s) if inside.contains(&s.ppid)) {
                continue;
            }
            match self.move_proc(e, id) {
                Ok(()) => moved += 1,
                Err(Error::NoProcess { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(moved)
    }

    /// The processes in entity `e` now (its `cgroup.procs`), including children that were
    /// forked there.
    pub fn pids(&self, e: EntityId) -> Result<Vec<i32>> {
        read_procs(&self.entity(e)?.dir)
    }

    /// Cumulative CPU nanoseconds used in entity `e` since it was created: v2 `cpu.stat`
    /// `usage_usec`, v1 `cpuacct.usage`. `None` on v1 when cpuacct is not mounted.
    pub fn usage_ns(&self, e: EntityId) -> Result<Option<u64>> {
        let ent = self.entity(e)?;
        let dir = match (self.hier.version, &ent.acct_dir, self.hier.comounted()) {
            (CgroupVersion::V2, _, _) | (CgroupVersion::V1, None, true) => &ent.dir,
            (CgroupVersion::V1, Some(acct), _) => acct,
            (CgroupVersion::V1, None, false) => return Ok(None),
        };
        read_usage_ns(dir, self.hier.version).map(Some)
    }

    /// Moves `pid` back to the cgroup it came from (or this process's if that is gone).
    pub fn release_pid(&mut self, pid: i32) -> Result<()> {
        let origin = self.origins.remove(&pid);
        self.move_back(pid, origin.as_ref(), None, None)
    }

    /// Moves entity `e`'s processes back to where they came from and removes its directory.
    pub fn remove_entity(&mut self, e: EntityId) -> Result<()> {
        let ent = self.entity(e)?;
        let (dir, acct, adopted) = (ent.dir.clone(), ent.acct_dir.clone(), ent.adopted.clone());
        self.empty_and_remove(&dir, acct.as_deref(), adopted.as_ref())?;
        self.entities[e.0] = None;
        self.write_weights().map(drop)
    }

    /// Moves every process back where it came from, removes the entity directories and the tact
    /// directory, and on v2 takes back the `+cpu` it wrote to BASE. Goes on after an error and
    /// returns the first one. Running it again does nothing.
    pub fn teardown(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        let mut first_error = None;
        let dirs: Vec<(PathBuf, Option<PathBuf>, Option<Origin>)> = self
            .entities
            .iter()
            .flatten()
            .map(|e| (e.dir.clone(), e.acct_dir.clone(), e.adopted.clone()))
            .collect();
        for (dir, acct, adopted) in dirs {
            if let Err(e) = self.empty_and_remove(&dir, acct.as_deref(), adopted.as_ref()) {
                first_error.get_or_insert(e);
            }
        }
        self.entities.clear();
        let (dir, acct) = (self.dir.clone(), self.acct_dir.clone());
        if let Err(e) = self.empty_and_remove(&dir, acct.as_deref(), None) {
            first_error.get_or_insert(e);
        }
        self.restore_base();
        self.torn_down = true;
        first_error.map_or(Ok(()), Err)
    }

    fn restore_base(&mut self) {
        if self.enabled_in_base {
            // Best effort: the kernel refuses while another child of BASE still uses cpu.
            let _ = fs::write(self.base.join("cgroup.subtree_control"), "-cpu");
            self.enabled_in_base = false;
        }
    }

    /// Moves every process in `dir` (and its cpuacct mirror) back, then removes both, retrying
    /// while processes are still leaving. `adopted`: where the processes of unknown origin in
    /// `dir` go first (see [`Entity::adopted`]).
    fn empty_and_remove(
        &mut self,
        dir: &Path,
        acct: Option<&Path>,
        adopted: Option<&Origin>,
    ) -> Result<()> {
        let deadline = Instant::now() + TEARDOWN_PATIENCE;
        let mut moved = Vec::new();
        for (d, cpu) in [(Some(dir), true), (acct, false)] {
            let Some(d) = d else { continue };
            loop {
                let pids = match read_procs(d) {
                    Ok(pids) => pids,
                    Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                };
                for &pid in &pids {
                    let origin = self.origins.get(&pid).cloned();
                    self.move_back(pid, origin.as_ref(), adopted, Some(cpu))?;
                }
                moved.extend(pids);
                match fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() < deadline && is_busy(&e) => {
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => return Err(Error::io(d, e)),
                }
            }
        }
        for pid in moved {
            self.origins.remove(&pid);
        }
        Ok(())
    }

    /// Writes `pid` to its origin's `cgroup.procs`; when the origin is unknown (a child forked
    /// inside) or refuses it, to `adopted`'s, then to this process's own cgroup. `only`:
    /// Some(true) moves in the cpu hierarchy only, Some(false) in the cpuacct mirror only, None
    /// in both.
    fn move_back(
        &self,
        pid: i32,
        origin: Option<&Origin>,
        adopted: Option<&Origin>,
        only: Option<bool>,
    ) -> Result<()> {
        let places = [origin, adopted, Some(&self.home)];
        if only != Some(false) {
            move_to(places.iter().flatten().map(|o| o.cpu.as_path()), pid)?;
        }
        if only != Some(true) && self.acct_base.is_some() {
            move_to(
                places.iter().flatten().filter_map(|o| o.acct.as_deref()),
                pid,
            )?;
        }
        Ok(())
    }

    /// Computes every weight from the shares and writes those that changed.
    fn write_weights(&mut self) -> Result<Vec<Weight>> {
        let version = self.hier.version;
        let shares: Vec<u64> = self.entities.iter().flatten().map(|e| e.share).collect();
        let scaled = scale_weights(&shares, version.weight_range());
        for (ent, (w, clamped)) in self.entities.iter_mut().flatten().zip(scaled) {
            ent.clamped = clamped;
            if ent.weight != w {
                let path = ent.dir.join(version.weight_file());
                fs::write(&path, w.to_string()).map_err(|e| Error::io(&path, e))?;
                ent.weight = w;
            }
        }
        Ok(self.weights())
    }

    fn entity(&self, e: EntityId) -> Result<&Entity> {
        self.entities
            .get(e.0)
            .and_then(Option::as_ref)
            .ok_or_else(|| no_entity(&self.dir, e))
    }

    fn entity_mut(&mut self, e: EntityId) -> Result<&mut Entity> {
        let dir = self.dir.clone();
        self.entities
            .get_mut(e.0)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_entity(&dir, e))
    }
}

impl Drop for CpuGroups {
    /// Every exit path moves the processes back and removes what was created.
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

fn no_entity(dir: &Path, e: EntityId) -> Error {
    Error::io(
        dir,
        io::Error::new(io::ErrorKind::NotFound, format!("no entity #{}", e.0)),
    )
}

/// `name` must be one harmless path component.
pub(crate) fn check_name(dir: &Path, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        && Path::new(name).components().count() == 1
        && matches!(
            Path::new(name).components().next(),
            Some(Component::Normal(_))
        );
    if ok {
        Ok(())
    } else {
        Err(Error::io(
            dir.join(name),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cgroup name is one path component of letters, digits, '-', '_', '.', '@' \
                 not starting with '.'",
            ),
        ))
    }
}

fn check_share(dir: &Path, share: u64) -> Result<()> {
    if share == 0 || share > 1 << 40 {
        return Err(Error::io(
            dir,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("share {share} out of range (1..=2^40)"),
            ),
        ));
    }
    Ok(())
}

pub(crate) fn mkdir(dir: &Path) -> Result<()> {
    fs::create_dir(dir).map_err(|e| Error::io(dir, e))
}

/// v2: adds `cpu` to `dir/cgroup.subtree_control` unless it is there; true if tact added it.
fn enable_cpu(dir: &Path) -> Result<bool> {
    let controllers = dir.join("cgroup.controllers");
    let available = fs::read_to_string(&controllers).map_err(|e| Error::io(&controllers, e))?;
    if !available.split_whitespace().any(|c| c == "cpu") {
        return Err(Error::io(
            &controllers,
            io::Error::new(
                io::ErrorKind::Unsupported,
                "the cpu controller is not available here (its parent's cgroup.subtree_control \
                 lacks cpu)",
            ),
        ));
    }
    let path = dir.join("cgroup.subtree_control");
    let enabled = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    if enabled.split_whitespace().any(|c| c == "cpu") {
        return Ok(false);
    }
    fs::write(&path, "+cpu").map_err(|e| populated_error(&path, e, libc::EBUSY))?;
    Ok(true)
}

/// Why the kernel refused a controller to the children of a cgroup, when that cgroup holds
/// processes, and what to do: for the cpu groups here and the knob trees alike.
pub(crate) const POPULATED_HINT: &str = "a cgroup that holds processes cannot enable \
    controllers for its children (cgroup v2 keeps processes out of inner cgroups): give tact an \
    empty parent cgroup (--cgroup-parent DIR), or run it in a delegated subtree (systemd-run \
    --user --scope -p Delegate=yes) with its own process in a leaf";

/// The error of writing `+cpu` to `path`, explained when its errno is `populated`: the kernel's
/// refusal to give the children of a cgroup that holds processes a controller. For BASE's own
/// `subtree_control` that is EBUSY; `cpu` being a threaded controller, the kernel may instead
/// take it there and refuse it one level down, in the new child's (then an invalid domain),
/// with EOPNOTSUPP (a cgroup v2 VM on 6.1, tact in a populated `session.scope`: the bare
/// "Operation not supported" said nothing of why).
fn populated_error(path: &Path, e: io::Error, populated: i32) -> Error {
    if e.raw_os_error() != Some(populated) {
        return Error::io(path, e);
    }
    Error::io(
        path,
        io::Error::new(e.kind(), format!("{e}: {POPULATED_HINT}")),
    )
}

/// Writes one pid to `dir/cgroup.procs`; ESRCH means it exited. The process keeps its threads'
/// CPU masks: before Linux 6.2, a move into a cgroup with another cpuset (on cgroup v2, any
/// child of a parent with `cpuset` in its `subtree_control`) reset them to that cpuset's CPUs
/// and undid a `taskset` the job had (a cgroup v2 VM on Debian 12's 6.1: `taskset -c 1 tact
/// share --backend cgroup` split two CPUs 1:1, not one 1:3; kernel commit da019032819a, "sched:
/// Enforce user requested affinity", ended that). A mask the new cpuset does not allow at all is
/// left as the kernel set it.
pub(crate) fn write_pid(dir: &Path, pid: i32) -> Result<()> {
    let masks = affinity::save(pid).ok();
    let path = dir.join("cgroup.procs");
    fs::write(&path, pid.to_string()).map_err(|e| {
        if e.raw_os_error() == Some(libc::ESRCH) {
            Error::NoProcess { pid }
        } else {
            Error::io(&path, e)
        }
    })?;
    if let Some(masks) = masks {
        // Best effort, as above: EINVAL (no CPU of the mask in the new cpuset) or a thread gone.
        let _ = masks.restore();
    }
    Ok(())
}

/// Moves `pid` to the first of `places` that takes it: one may be gone, or refuse processes
/// now (on v2, a cgroup that enabled a controller for its children since). A process that
/// exited is fine. The error is the first place's.
pub(crate) fn move_to<'a>(places: impl IntoIterator<Item = &'a Path>, pid: i32) -> Result<()> {
    let mut first_error = None;
    for place in places {
        match write_pid(place, pid) {
            Ok(()) | Err(Error::NoProcess { .. }) => return Ok(()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The pids in `dir/cgroup.procs`.
pub fn read_procs(dir: &Path) -> Result<Vec<i32>> {
    let path = dir.join("cgroup.procs");
    let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            l.trim()
                .parse()
                .map_err(|_| Error::parse(&path, i + 1, format!("bad pid `{l}`")))
        })
        .collect()
}

pub(crate) fn is_busy(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::ENOTEMPTY))
}

/// Whether this process may use the cgroup backend (for `--backend auto`): detects the
/// hierarchy, then checks in BASE (`under`, or this process's own cgroup) what [`CpuGroups`]
/// needs, by creating and removing `BASE/name` with one weighted child (pass the name the real
/// run will use, e.g. `tact-share-<pid>`). `Err` carries a reason fit for the user.
pub fn can_use(under: Option<&Path>, name: &str) -> std::result::Result<CpuHierarchy, String> {
    let hier = CpuHierarchy::detect().map_err(|e| format!("no usable cpu cgroup: {e}"))?;
    check(&hier, under, name)?;
    Ok(hier)
}

/// The checks of [`can_use`] on a given hierarchy.
pub fn check(
    hier: &CpuHierarchy,
    under: Option<&Path>,
    name: &str,
) -> std::result::Result<(), String> {
    let base = match under {
        Some(dir) => dir.to_path_buf(),
        None => hier
            .own_cgroup()
            .map_err(|e| format!("cannot find this process's cpu cgroup: {e}"))?,
    };
    // A directory elsewhere (`/tmp`) is not a cgroup: say so, rather than that its (missing)
    // cgroup.procs is not writable.
    if !base.join("cgroup.procs").is_file() {
        return Err(format!(
            "{} is not a cgroup directory (it has no cgroup.procs)",
            base.display()
        ));
    }
    if !base.starts_with(&hier.cpu.dir) {
        return Err(format!(
            "{} is not a cgroup directory of the cpu hierarchy (mounted at {})",
            base.display(),
            hier.cpu.dir.display()
        ));
    }
    // Moving a process needs write access to cgroup.procs of the common ancestor of its old and
    // new cgroup (v2 delegation rules; v1 needs it on the destination).
    let procs = base.join("cgroup.procs");
    if !writable(&procs) {
        return Err(format!(
            "{} is not writable by this user: the cgroup backend needs root or a delegated \
             subtree (systemd-run --user --scope -p Delegate=yes)",
            procs.display()
        ));
    }
    let mut groups = CpuGroups::create(hier.clone(), name, Some(&base))
        .map_err(|e| format!("cannot create a cgroup in {}: {e}", base.display()))?;
    let probe = groups
        .add_entity("probe", 1)
        .map_err(|e| format!("cannot create a weighted child cgroup: {e}"));
    let result = probe.and_then(|(id, _)| {
        let dir = groups.entity_dir(id).map_err(|e| e.to_string())?;
        let procs = dir.join("cgroup.procs");
        if writable(&procs) {
            Ok(())
        } else {
            Err(format!("{} is not writable by this user", procs.display()))
        }
    });
    groups
        .teardown()
        .map_err(|e| format!("cannot remove the probe cgroup: {e}"))?;
    result
}

pub(crate) fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_for_a_populated_cgroup_says_why_and_others_pass_through() {
        let path = Path::new("/sys/fs/cgroup/s.scope/tact-share-1/cgroup.subtree_control");
        let refusal = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        let msg = populated_error(path, refusal, libc::EOPNOTSUPP).to_string();
        for want in [
            "tact-share-1/cgroup.subtree_control",
            "holds processes",
            "--cgroup-parent",
        ] {
            assert!(msg.contains(want), "{want}: {msg}");
        }
        let other = io::Error::from_raw_os_error(libc::EACCES);
        let msg = populated_error(path, other, libc::EOPNOTSUPP).to_string();
        assert!(!msg.contains("holds processes"), "{msg}");
        assert!(msg.contains("Permission denied"), "{msg}");
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// The hierarchy a fixture `mountinfo` describes under the temporary root `fs`, with this
    /// process's cgroups (`/proc/self/cgroup`) given as `own`.
    fn fixture_hierarchy(mountinfo: &str, fs: &Path, own: &str) -> CpuHierarchy {
        let info = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(mountinfo)
            .join("mountinfo");
        write(&fs.join("proc/self/cgroup"), own);
        CpuHierarchy::detect_in(&info, fs, ProcReader::with_root(fs.join("proc"))).unwrap()
    }

    /// Makes `BASE/tact-test-join/job` and has a child join it before it execs `true`; the
    /// `cgroup.procs` files the kernel would make in `job` (and its cpuacct mirror) are made
    /// here. `forget`: a fixture's directories hold plain files, which teardown cannot rmdir.
    fn join_on_fixture(hier: CpuHierarchy, kernel_files: &[PathBuf]) {
        let mut groups = CpuGroups::create(hier, "tact-test-join", None).unwrap();
        let (job, _) = groups.add_entity("job", 1).unwrap();
        for f in kernel_files {
            write(f, "");
        }
        let mut command = Command::new("true");
        let check = groups.join_before_exec(job, &mut command).unwrap();
        assert!(command.status().unwrap().success());
        assert!(check.failure().is_none());
        std::mem::forget(groups);
    }

    #[test]
    fn on_v2_the_job_joins_its_subgroup_in_the_unified_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("sys/fs/cgroup");
        write(&cg.join("cgroup.controllers"), "cpu memory\n");
        let base = cg.join("work");
        write(&base.join("cgroup.controllers"), "cpu memory\n");
        write(&base.join("cgroup.subtree_control"), "");
        write(&base.join("cgroup.procs"), "");
        let hier = fixture_hierarchy("cgroup-v2", tmp.path(), "0::/work\n");
        assert_eq!(hier.version, CgroupVersion::V2);
        let job = base.join("tact-test-join/job/cgroup.procs");
        join_on_fixture(hier, std::slice::from_ref(&job));
        assert_eq!(fs::read_to_string(job).unwrap(), "0");
        assert_eq!(fs::read_to_string(base.join("cgroup.procs")).unwrap(), "");
        // The idle group itself enables cpu for its child and holds no process.
        assert!(!base.join("tact-test-join/cgroup.procs").exists());
    }

    #[test]
    fn on_a_hybrid_machine_the_job_joins_the_v1_cpu_and_cpuacct_subgroups() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("sys/fs/cgroup");
        // The cgroup2 mount has no controllers here (no cgroup.controllers): v1 has cpu.
        write(&cg.join("unified/cgroup.procs"), "");
        fs::create_dir_all(cg.join("cpu/work")).unwrap();
        fs::create_dir_all(cg.join("cpuacct/work")).unwrap();
        let own = "2:cpuacct:/work\n1:cpu:/work\n0::/\n";
        let hier = fixture_hierarchy("cgroup-hybrid", tmp.path(), own);
        assert_eq!(hier.version, CgroupVersion::V1);
        let files = [
            cg.join("cpu/work/tact-test-join/job/cgroup.procs"),
            cg.join("cpuacct/work/tact-test-join/job/cgroup.procs"),
        ];
        join_on_fixture(hier, &files);
        for f in &files {
            assert_eq!(fs::read_to_string(f).unwrap(), "0", "{}", f.display());
        }
        assert_eq!(
            fs::read_to_string(cg.join("unified/cgroup.procs")).unwrap(),
            ""
        );
    }

    #[test]
    fn weights_keep_ratios() {
        let v2 = CgroupVersion::V2.weight_range();
        let v1 = CgroupVersion::V1.weight_range();
        assert_eq!(
            scale_weights(&[1, 3], v2),
            vec![(3333, false), (9999, false)]
        );
        assert_eq!(
            scale_weights(&[1, 1, 1, 1, 21], v2)
                .iter()
                .map(|w| w.0)
                .collect::<Vec<_>>(),
            vec![476, 476, 476, 476, 9996]
        );
        // 381:1 fits v1 exactly; on v2 the small ones round to 26.
        assert_eq!(
            scale_weights(&[381, 1], v1),
            vec![(381 * 688, false), (688, false)]
        );
        assert_eq!(
            scale_weights(&[381, 1], v2),
            vec![(9906, false), (26, false)]
        );
        // A ratio beyond the range clamps the small one.
        assert_eq!(
            scale_weights(&[100_000, 1], v2),
            vec![(10_000, false), (1, true)]
        );
        assert_eq!(
            scale_weights(&[1_000_000, 1], v1),
            vec![(262_144, false), (2, true)]
        );
        assert!(scale_weights(&[], v2).is_empty());
    }

    #[test]
    fn mountinfo_lines_and_escapes() {
        let m = parse_mountinfo_line(
            "41 31 0:38 / /sys/fs/cgroup/my\\040dir rw,relatime shared:9 - cgroup2 cgroup2 rw",
        )
        .unwrap();
        assert_eq!(m.mount_point, "/sys/fs/cgroup/my dir");
        assert_eq!(
            (m.fstype.as_str(), m.super_options.as_str()),
            ("cgroup2", "rw")
        );
        assert!(parse_mountinfo_line("garbage").is_none());
        let mount = CgroupMount {
            dir: "/c".into(),
            root: "/docker/abc".into(),
        };
        assert_eq!(mount.dir_of("/docker/abc/x"), Some(PathBuf::from("/c/x")));
        assert_eq!(mount.dir_of("/docker/abc"), Some(PathBuf::from("/c/")));
        assert_eq!(mount.dir_of("/docker/abcd"), None);
        assert_eq!(mount.dir_of("/other"), None);
    }
}
