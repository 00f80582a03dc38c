//! State files (spec 5.3): if the regulator and its guard both die, a later `tact recover`
//! resumes what they left stopped. Before each stop the regulator records its own identity and
//! its stopped members' identities (pid + start time), one file per job; `recover` resumes the
//! members of records whose regulator is dead, after checking that each pid still names the
//! same process.

use std::fs::{self, DirBuilder, File};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::actuate::pidfd::PidFd;
use crate::actuate::tree::JobTree;
use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// What a state file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    regulator: ProcId,
    members: Vec<ProcId>,
}

/// The directory of state files of one regulator process.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    me: ProcId,
}

impl StateDir {
    /// `/run/tact` for root, `$XDG_RUNTIME_DIR/tact` for others (both are private to the user
    /// and cleared at boot, when no process can be stopped any more), and without a login session
    /// (cron, a bare ssh) a private `tact-<uid>` directory in the temporary directory.
    pub fn default_dir() -> Result<PathBuf> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            return Ok(PathBuf::from("/run/tact"));
        }
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) if !dir.is_empty() => Ok(Path::new(&dir).join("tact")),
            _ => private_dir_in(&std::env::temp_dir()),
        }
    }

    /// Uses (and creates, mode 0700) `dir` for this process's records.
    pub fn new(dir: impl Into<PathBuf>) -> Result<StateDir> {
        let dir = dir.into();
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(&dir, e))?;
        let me = ProcReader::new().stat(std::process::id() as i32)?.id();
        Ok(StateDir { dir, me })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Records the members of `tree` that tact has stopped, atomically (a crash leaves either
    /// the old record or the new one, never half of one). Call it before each stop.
    pub fn record(&self, tree: &JobTree) -> Result<()> {
        self.write(tree, tree.stopped_by_tact().map(|(id, _)| id).collect())
    }

    /// Records every member of `tree`, stopped or not, for a regulator that stops and resumes
    /// too often to write a record each time (`tact share`): call it whenever membership changes.
    /// Recovery then also continues members that were running, which is harmless.
    pub fn record_all(&self, tree: &JobTree) -> Result<()> {
        self.write(tree, tree.all_members().map(|(id, _)| id).collect())
    }

    fn write(&self, tree: &JobTree, members: Vec<ProcId>) -> Result<()> {
        let record = Record {
            regulator: self.me,
            members,
        };
        let path = self.record_path(tree);
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(&record).expect("a record always serializes");
        let write = || -> std::io::Result<()> {
            let mut file = File::create(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()
        };
        write().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        // The rename itself is only durable once the directory is synced.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(&self.dir, e))
    }

    /// Removes the record of `tree` (clean exit, after resuming it). A missing record is fine.
    pub fn remove(&self, tree: &JobTree) -> Result<()> {
        let path = self.record_path(tree);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// One file per (regulator, job); start times in the name so that a recycled pid never
    /// overwrites a dead regulator's record.
    fn record_path(&self, tree: &JobTree) -> PathBuf {
        let root = tree.root();
        self.dir.join(format!(
            "{}-{}-{}-{}.json",
            self.me.pid, self.me.start_time, root.pid, root.start_time
        ))
    }
}

/// `base/tact-<euid>`, created mode 0700. `base` is shared (the temporary directory), so a
/// directory of that name that another user owns, or that others may write, is refused.
fn private_dir_in(base: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = base.join(format!("tact-{uid}"));
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(&dir, e)),
    }
    let meta = fs::symlink_metadata(&dir).map_err(|e| Error::io(&dir, e))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(Error::NotPrivate {
            path: dir,
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(dir)
}

/// What [`recover`] did.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Processes sent SIGCONT.
    pub resumed: Vec<ProcId>,
    /// Records of dead regulators, now removed.
    pub removed: Vec<PathBuf>,
    /// Records of live regulators, left alone.
    pub live: Vec<PathBuf>,
    /// Files that could not be read or parsed, with why; left in place for a human to look at.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Resumes the members of every record in `dir` whose regulator is dead (its pid is gone or now
/// names a process with another start time), checking each member's start time before
/// signalling it, and removes those records. A missing `dir` means nothing to recover.
pub fn recover(dir: &Path) -> Result<Recovery> {
    let reader = ProcReader::new();
    let mut report = Recovery::default();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        // `.tmp` files are half-written records; the regulator that wrote them renames or
        // rewrites them.
        if path.extension().is_some_and(|ext| ext == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    for path in paths {
        let record: Record = match fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        {
            Ok(record) => record,
            Err(why) => {
                report.unreadable.push((path, why));
                continue;
            }
        };
        if is_alive(&reader, record.regulator) {
            report.live.push(path);
            continue;
        }
        for member in record.members {
            if resume_if_same(&reader, member) {
                report.resumed.push(member);
            }
        }
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
            _ => report.removed.push(path),
        }
    }
    Ok(report)
}

fn is_alive(reader: &ProcReader, id: ProcId) -> bool {
    matches!(reader.stat(id.pid), Ok(s) if s.start_time == id.start_time && !s.is_dead())
}

/// SIGCONT through a pidfd, if `id.pid` still names the process that started at `id.start_time`
/// (checked after opening the pidfd, so the pidfd names that very process).
fn resume_if_same(reader: &ProcReader, id: ProcId) -> bool {
    let Ok(fd) = PidFd::open(id.pid) else {
        return false;
    };
    is_alive(reader, id) && fd.send_signal(libc::SIGCONT).is_ok()
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_fallback_runtime_dir_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let dir = private_dir_in(base.path()).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Reused as it is on the next call.
        assert_eq!(private_dir_in(base.path()).unwrap(), dir);
        // Opened up by someone: refused, with a way out named.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir_in(base.path()).unwrap_err().to_string();
        assert!(
            e.contains("not a private directory") && e.contains("XDG_RUNTIME_DIR"),
            "{e}"
        );
    }

    use super::*;
    use std::process::{Child, Command};

    fn sleeper() -> (Child, ProcId) {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let id = ProcReader::new().stat(child.id() as i32).unwrap().id();
        (child, id)
    }

    fn wait_state(pid: i32, want_stopped: bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if ProcReader::new().stat(pid).unwrap().is_stopped() == want_stopped {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    fn write_record(dir: &Path, name: &str, record: &Record) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, serde_json::to_vec(record).unwrap()).unwrap();
        path
    }

    #[test]
    fn dead_regulator_by_start_time_is_recovered_and_recycled_members_are_not_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, a_id) = sleeper();
        let (mut b, b_id) = sleeper();
        let fds = [
            PidFd::open(a_id.pid).unwrap(),
            PidFd::open(b_id.pid).unwrap(),
        ];
        for fd in &fds {
            fd.send_signal(libc::SIGSTOP).unwrap();
        }
        assert!(wait_state(a_id.pid, true) && wait_state(b_id.pid, true));
        // Our own pid with a wrong start time: a dead regulator whose pid was recycled. Member b
        // is recorded with another start time: its pid now names another process.
        let me = ProcReader::new()
            .stat(std::process::id() as i32)
            .unwrap()
            .id();
        let dead = ProcId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        let stale_b = ProcId {
            pid: b_id.pid,
            start_time: b_id.start_time + 1,
        };
        let path = write_record(
            dir.path(),
            "x.json",
            &Record {
                regulator: dead,
                members: vec![a_id, stale_b],
            },
        );
        fs::write(dir.path().join("junk.json"), "{not json").unwrap();

        let report = recover(dir.path()).unwrap();
        assert_eq!(report.resumed, vec![a_id]);
        assert_eq!(report.removed, vec![path.clone()]);
        assert_eq!(report.unreadable.len(), 1);
        assert!(!path.exists());
        assert!(wait_state(a_id.pid, false));
        assert!(ProcReader::new().stat(b_id.pid).unwrap().is_stopped());
        for (fd, child) in fds.iter().zip([&mut a, &mut b]) {
            fd.send_signal(libc::SIGKILL).unwrap();
            child.wait().unwrap();
        }
    }

    #[test]
    fn live_regulator_record_is_left_alone_and_missing_dir_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let me = ProcReader::new()
            .stat(std::process::id() as i32)
            .unwrap()
            .id();
        let (mut a, a_id) = sleeper();
        let path = write_record(
            dir.path(),
            "y.json",
            &Record {
                regulator: me,
                members: vec![a_id],
            },
        );
        let report = recover(dir.path()).unwrap();
        assert!(report.resumed.is_empty() && report.removed.is_empty());
        assert_eq!(report.live, vec![path.clone()]);
        assert!(path.exists());
        let report = recover(&dir.path().join("absent")).unwrap();
        assert!(report.live.is_empty() && report.resumed.is_empty());
        a.kill().unwrap();
        a.wait().unwrap();
    }
}
