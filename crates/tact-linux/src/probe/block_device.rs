//! Resolving the device of `--idle disk:DEVICE` (spec idletime §6, "Disk") under a sysfs root and a
//! mountinfo file you choose, so tests run on fixture trees:
//!
//! * a kernel name (`sda`, `vda1`, `dm-0`) or `/dev/NAME` is looked up in `/sys/class/block`;
//! * another `/dev` path (`/dev/mapper/root`, `/dev/disk/by-id/...`) is a block special file whose
//!   device number is looked up in `/sys/dev/block/MAJOR:MINOR`;
//! * any other absolute path (`/var/lib`) must exist, and is on the mount with the longest matching
//!   mount point in mountinfo, whose `MAJOR:MINOR` is looked up the same way.
//!
//! The result names the device itself (whose `/proc/diskstats` line the gate reads) and the whole
//! physical disks below it: a partition's disk, and for dm/md devices the disks of every
//! `slaves/` entry. Those disks carry the I/O scheduler, which decides whether ioprio's idle
//! class means anything ([`IoScheduler::is_bfq`]).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::actuate::cgroup_cpu::parse_mountinfo_line;
use crate::error::{Error, Result};

/// A resolved block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// The kernel name (`vda1`, `dm-0`), as in `/proc/diskstats`.
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// Whether it is a partition of a whole disk.
    pub partition: bool,
    /// The whole physical disks it lives on (itself when it is one), sorted.
    pub disks: Vec<String>,
}

/// The active I/O scheduler of a disk and the ones it could switch to
/// (`/sys/block/DISK/queue/scheduler`: `none [mq-deadline] kyber bfq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoScheduler {
    pub active: String,
    pub available: Vec<String>,
}

impl IoScheduler {
    /// BFQ is the only Linux scheduler that serves ioprio's idle class strictly after the others.
    pub fn is_bfq(&self) -> bool {
        self.active == "bfq"
    }
}

/// Finds block devices in sysfs.
#[derive(Debug, Clone)]
pub struct BlockResolver {
    sys_root: PathBuf,
    mountinfo: PathBuf,
    /// User paths are on this machine: refuse those that do not exist and resolve symlinks
    /// before matching mount points (real systems only: fixture paths do not exist on the test
    /// machine).
    real_paths: bool,
}

impl Default for BlockResolver {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockResolver {
    /// The machine's `/sys` and `/proc/self/mountinfo`.
    pub fn new() -> Self {
        BlockResolver {
            sys_root: PathBuf::from("/sys"),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            real_paths: true,
        }
    }

    /// A sysfs-shaped tree at `sys_root` and a mountinfo file (fixtures). Paths are matched
    /// against mount points as given, without checking that they exist or following symlinks.
    pub fn with_roots(sys_root: impl Into<PathBuf>, mountinfo: impl Into<PathBuf>) -> Self {
        BlockResolver {
            sys_root: sys_root.into(),
            mountinfo: mountinfo.into(),
            real_paths: false,
        }
    }

    /// Resolves what a user wrote after `disk:`.
    pub fn resolve(&self, spec: &str) -> Result<BlockDevice> {
        if spec.is_empty() {
            return Err(self.unknown(spec, "give a device name such as sda or a path"));
        }
        if !spec.contains('/') {
            return self.by_name(spec);
        }
        if let Some(name) = spec.strip_prefix("/dev/") {
            if !name.contains('/') && self.class_dir(name).exists() {
                return self.by_name(name);
            }
            // A directory or file under /dev (`/dev/shm`, a tmpfs) is a path like any other:
            // its mount says which device, or why none.
            if !fs::metadata(spec).is_ok_and(|m| m.is_dir() || m.is_file()) {
                return self.by_special_file(spec);
            }
        }
        if !spec.starts_with('/') {
            return Err(self.unknown(spec, "a path must be absolute"));
        }
        let path = match self.real_paths {
            // A path that is not there (a typo) would otherwise match the mount of `/`.
            true => fs::canonicalize(spec).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => self.unknown(spec, "no such file or directory"),
                io::ErrorKind::NotADirectory => {
                    self.unknown(spec, "a component is not a directory")
                }
                _ => Error::io(spec, e),
            })?,
            false => PathBuf::from(spec),
        };
        let (major, minor) = self.device_of_path(spec, &path)?;
        self.by_number(major, minor)
    }

    /// The device with kernel name `name` (`/sys/class/block/NAME`).
    pub fn by_name(&self, name: &str) -> Result<BlockDevice> {
        let dir = self.class_dir(name);
        if name.contains('/') || !dir.exists() {
            return Err(self.unknown(name, "not in /sys/class/block"));
        }
        self.describe(&dir)
    }

    /// The device with number `major:minor` (`/sys/dev/block/MAJOR:MINOR`).
    pub fn by_number(&self, major: u32, minor: u32) -> Result<BlockDevice> {
        let dir = self
            .sys_root
            .join("dev/block")
            .join(format!("{major}:{minor}"));
        if !dir.exists() {
            return Err(self.unknown(
                &format!("{major}:{minor}"),
                "no such device number in /sys/dev/block",
            ));
        }
        self.describe(&dir)
    }

    /// The I/O scheduler of whole disk `disk`. Partitions have none of their own, and neither do
    /// bio-based devices (zram, some dm targets), which pass I/O on without queueing it.
    pub fn scheduler(&self, disk: &str) -> Result<IoScheduler> {
        let path = self.class_dir(disk).join("queue/scheduler");
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::Unavailable {
                what: format!("the I/O scheduler of {disk}"),
                reason: format!(
                    "{} does not exist: {disk} is a partition or a device without a request queue",
                    path.display()
                ),
            },
            _ => Error::io(&path, e),
        })?;
        let mut active = None;
        let mut available = Vec::new();
        for word in text.split_whitespace() {
            let name = match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                Some(name) => {
                    active = Some(name.to_string());
                    name
                }
                None => word,
            };
            available.push(name.to_string());
        }
        // A queue without a scheduler choice writes just `none`.
        let active = match (active, available.as_slice()) {
            (Some(a), _) => a,
            (None, [only]) => only.clone(),
            _ => {
                return Err(Error::parse(
                    &path,
                    1,
                    "expected the active scheduler in [brackets]",
                ))
            }
        };
        Ok(IoScheduler { active, available })
    }

    /// The kernel names of every block device, sorted (for error messages).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.sys_root.join("class/block"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    fn class_dir(&self, name: &str) -> PathBuf {
        self.sys_root.join("class/block").join(name)
    }

    /// `/dev/...` that is not a plain kernel name: a block special file (symlinks followed).
    fn by_special_file(&self, spec: &str) -> Result<BlockDevice> {
        use std::os::unix::fs::FileTypeExt;
        use std::os::unix::fs::MetadataExt;
        let meta = match fs::metadata(spec) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(self.unknown(spec, "no such file"))
            }
            // `/dev/vda/`: the device is no directory (said once, not as an io error whose
            // source repeats it).
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(self.unknown(spec, "a component is not a directory"))
            }
            Err(e) => return Err(Error::io(spec, e)),
        };
        if !meta.file_type().is_block_device() {
            return Err(self.unknown(spec, "not a block special file"));
        }
        let rdev = meta.rdev();
        self.by_number(libc::major(rdev), libc::minor(rdev))
    }

    /// The device number of the mount holding `path` (the longest mount point that is a
    /// component-wise prefix of it; the later line wins a tie, as it is mounted over the earlier).
    fn device_of_path(&self, spec: &str, path: &Path) -> Result<(u32, u32)> {
        let text =
            fs::read_to_string(&self.mountinfo).map_err(|e| Error::io(&self.mountinfo, e))?;
        let mut best: Option<(usize, usize, String, String)> = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let m = parse_mountinfo_line(line)
                .ok_or_else(|| Error::parse(&self.mountinfo, i + 1, "malformed mountinfo line"))?;
            let mount_point = Path::new(&m.mount_point);
            if !path.starts_with(mount_point) {
                continue;
            }
            let depth = mount_point
                .components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .count();
            if !matches!(&best, Some(b) if depth < b.0) {
                best = Some((depth, i + 1, m.dev, m.fstype));
            }
        }
        let Some((_, line, dev, fstype)) = best else {
            return Err(self.unknown(spec, "no mount in mountinfo holds this path"));
        };
        let parsed = dev
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
        let Some((major, minor)) = parsed else {
            return Err(Error::parse(
                &self.mountinfo,
                line,
                format!("bad MAJOR:MINOR `{dev}`"),
            ));
        };
        if major == 0 {
            return Err(self.unknown(
                spec,
                &format!(
                    "it is on a {fstype} mount (device {dev}, line {line} of {}), which has no \
                     block device; name the disk instead",
                    self.mountinfo.display()
                ),
            ));
        }
        Ok((major, minor))
    }

    /// A device's sysfs directory (a symlink into /sys/devices) described.
    fn describe(&self, link: &Path) -> Result<BlockDevice> {
        let dir = fs::canonicalize(link).map_err(|e| Error::io(link, e))?;
        let name = file_name(&dir, link)?;
        let dev_file = dir.join("dev");
        let text = fs::read_to_string(&dev_file).map_err(|e| Error::io(&dev_file, e))?;
        let (major, minor) = text
            .trim()
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| Error::parse(&dev_file, 1, "expected MAJOR:MINOR"))?;
        let partition = dir.join("partition").exists();
        let disks = if partition {
            let parent = dir.parent().unwrap_or(&dir);
            vec![file_name(parent, link)?]
        } else {
            self.disks_below(&dir, &name)?
        };
        Ok(BlockDevice {
            name,
            major,
            minor,
            partition,
            disks,
        })
    }

    /// A whole device's physical disks: the disks of its `slaves/` (dm, md), or itself.
    fn disks_below(&self, dir: &Path, name: &str) -> Result<Vec<String>> {
        let slaves = dir.join("slaves");
        let entries = match fs::read_dir(&slaves) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![name.to_string()]),
            Err(e) => return Err(Error::io(&slaves, e)),
        };
        let mut disks = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&slaves, e))?;
            let slave = entry.file_name().to_string_lossy().into_owned();
            disks.extend(self.by_name(&slave)?.disks);
        }
        if disks.is_empty() {
            disks.push(name.to_string());
        }
        disks.sort();
        disks.dedup();
        Ok(disks)
    }

    fn unknown(&self, name: &str, why: &str) -> Error {
        Error::UnknownDevice {
            kind: "block device",
            name: name.to_string(),
            hint: format!("{why}; this machine has: {}", self.names().join(", ")),
        }
    }
}

fn file_name(dir: &Path, link: &Path) -> Result<String> {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            Error::io(
                link,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "resolves to a path without a name",
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A resolver on a one-disk fixture (`sda1`, 8:1, mounted on `/`) that checks user paths on
    /// this machine, as [`BlockResolver::new`] does.
    fn root_on_sda1(dir: &Path) -> BlockResolver {
        let part = dir.join("sys/devices/sda/sda1");
        fs::create_dir_all(&part).unwrap();
        fs::write(part.join("dev"), "8:1\n").unwrap();
        fs::write(part.join("partition"), "1\n").unwrap();
        for link in ["sys/class/block/sda1", "sys/dev/block/8:1"] {
            let link = dir.join(link);
            fs::create_dir_all(link.parent().unwrap()).unwrap();
            symlink(&part, link).unwrap();
        }
        let mountinfo = dir.join("mountinfo");
        fs::write(
            &mountinfo,
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
        )
        .unwrap();
        BlockResolver {
            real_paths: true,
            ..BlockResolver::with_roots(dir.join("sys"), mountinfo)
        }
    }

    #[test]
    fn a_path_that_does_not_exist_is_refused_not_taken_for_the_root_disk() {
        let dir = tempfile::tempdir().unwrap();
        let r = root_on_sda1(dir.path());
        // A path that exists is on the mount of `/`.
        assert_eq!(
            r.resolve(dir.path().to_str().unwrap()).unwrap().name,
            "sda1"
        );

        let typo = dir.path().join("no-such-dir/f");
        let err = r.resolve(typo.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, Error::UnknownDevice { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("`{}`", typo.display()))
                && msg.contains("no such file or directory"),
            "{msg}"
        );
        let file = dir.path().join("mountinfo");
        let msg = r
            .resolve(file.join("x").to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not a directory"), "{msg}");
    }
}
