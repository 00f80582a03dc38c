//! State files (spec 5.3): if the regulator and its guard both die, a later `tact recover`
//! resumes what they left stopped. Before each stop the regulator records its own identity and
//! its stopped members' identities (pid + start time), one file per job; `recover` resumes the
//! members of records whose regulator is dead, after checking that each pid still names the
//! same process. A record also holds the original CPU masks of the members whose affinity tact
//! changed (`tact share`'s conserving mode), written before each change: recovery, and the
//! watchdog through [`undo_record`], put them back.

use std::fs::{self, DirBuilder, File};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::actuate::affinity::SavedAffinity;
use crate::actuate::pidfd::PidFd;
use crate::actuate::tree::JobTree;
use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// What a state file holds.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Record {
    regulator: ProcId,
    members: Vec<ProcId>,
    /// Original masks of the members whose affinity tact changed. Absent from records of older
    /// tacts and of regulators that never change masks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    affinity: Vec<SavedAffinity>,
}

/// The directory of state files of one regulator process.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    me: ProcId,
}

/// Creates `dir` and its missing parents, the last one private to this user (mode 0700): state
/// and record directories name processes tact may signal.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
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
        create_private_dir(&dir)?;
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
        self.write(
            tree,
            tree.stopped_by_tact().map(|(id, _)| id).collect(),
            &[],
        )
    }

    /// Records every member of `tree`, stopped or not, for a regulator that stops and resumes
    /// too often to write a record each time (`tact share`): call it whenever membership changes.
    /// Recovery then also continues members that were running, which is harmless. `affinity`:
    /// the original masks of the members whose affinity tact changed; call it again, before
    /// each change, with the masks about to be changed added.
    pub fn record_all(&self, tree: &JobTree, affinity: &[SavedAffinity]) -> Result<()> {
        self.write(
            tree,
            tree.all_members().map(|(id, _)| id).collect(),
            affinity,
        )
    }

    fn write(
        &self,
        tree: &JobTree,
        members: Vec<ProcId>,
        affinity: &[SavedAffinity],
    ) -> Result<()> {
        let record = Record {
            regulator: self.me,
            members,
            affinity: affinity.to_vec(),
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

    /// Where the record of `tree` is (whether or not it has been written yet): one file per
    /// (regulator, job); start times in the name so that a recycled pid never overwrites a dead
    /// regulator's record.
    pub fn record_path(&self, tree: &JobTree) -> PathBuf {
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
    /// Processes whose CPU masks were put back.
    pub restored: Vec<ProcId>,
    /// Processes whose CPU masks could not be put back, with why.
    pub unrestored: Vec<(ProcId, String)>,
    /// Records of dead regulators, now removed.
    pub removed: Vec<PathBuf>,
    /// Records of live regulators, left alone.
    pub live: Vec<PathBuf>,
    /// Files that could not be read or parsed, with why; left in place for a human to look at.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Resumes the members of every record in `dir` whose regulator is dead (its pid is gone or now
/// names a process with another start time), checking each member's start time before
/// signalling it, then puts back the masks it holds (checked the same way), and removes those
/// records. A missing `dir` means nothing to recover.
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
        let record = match read_record(&path) {
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
        let undone = undo(&reader, &record);
        report.resumed.extend(undone.resumed);
        report.restored.extend(undone.restored);
        report.unrestored.extend(undone.unrestored);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
            _ => report.removed.push(path),
        }
    }
    Ok(report)
}

/// What [`undo_record`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Undone {
    /// Processes sent SIGCONT.
    pub resumed: Vec<ProcId>,
    /// Processes whose CPU masks were put back.
    pub restored: Vec<ProcId>,
    /// Processes whose CPU masks could not be put back, with why.
    pub unrestored: Vec<(ProcId, String)>,
}

/// Undoes the record at `path` whatever the state of its regulator (the watchdog's part, when
/// the regulator it guards is gone or hung): resumes its members, then puts back the masks it
/// holds, each after checking that its pid still names the recorded process. Leaves the file in
/// place. A missing file (the regulator removed it, or never wrote it) means nothing to undo.
pub fn undo_record(path: &Path) -> Result<Undone> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Undone::default()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let record: Record =
        serde_json::from_slice(&bytes).map_err(|e| Error::parse(path, e.line(), e.to_string()))?;
    Ok(undo(&ProcReader::new(), &record))
}

fn read_record(path: &Path) -> std::result::Result<Record, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// Resumes first: a process must run again even if its mask cannot be put back.
fn undo(reader: &ProcReader, record: &Record) -> Undone {
    let mut undone = Undone::default();
    for &member in &record.members {
        if resume_if_same(reader, member) {
            undone.resumed.push(member);
        }
    }
    for saved in &record.affinity {
        if !is_alive(reader, saved.id) {
            continue;
        }
        // `restore_with` checks the start time again, right before it sets anything.
        match saved.restore_with(reader) {
            Ok(()) => undone.restored.push(saved.id),
            Err(e) => undone.unrestored.push((saved.id, e.to_string())),
        }
    }
    undone
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
                affinity: Vec::new(),
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

    fn mask(pid: i32, start_time: u64, cpus: Vec<usize>) -> SavedAffinity {
        SavedAffinity {
            id: ProcId { pid, start_time },
            threads: vec![(pid, cpus)],
        }
    }

    #[test]
    fn records_keep_masks_and_old_records_without_them_still_read() {
        let regulator = ProcId {
            pid: 10,
            start_time: 100,
        };
        let member = ProcId {
            pid: 11,
            start_time: 110,
        };
        let without = Record {
            regulator,
            members: vec![member],
            affinity: Vec::new(),
        };
        let json = serde_json::to_string(&without).unwrap();
        // No masks: the file reads as it did before masks were recorded.
        assert!(!json.contains("affinity"), "{json}");
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), without);
        // A record written by a tact that knew nothing of masks.
        let old =
            r#"{"regulator":{"pid":10,"start_time":100},"members":[{"pid":11,"start_time":110}]}"#;
        assert_eq!(serde_json::from_str::<Record>(old).unwrap(), without);

        let with = Record {
            affinity: vec![mask(11, 110, vec![0, 1])],
            ..without
        };
        let json = serde_json::to_string(&with).unwrap();
        assert!(json.contains("affinity"), "{json}");
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), with);
    }

    #[test]
    fn recovery_and_undo_put_back_masks_of_the_recorded_process_only() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, a_id) = sleeper();
        let original = crate::actuate::affinity::tests::change_mask(a_id.pid);
        let changed = crate::actuate::affinity::thread_cpus(a_id.pid).unwrap();
        let dead = ProcId {
            pid: a_id.pid,
            start_time: a_id.start_time + 1,
        };
        // The same pid recorded with another start time: another process, never touched.
        let stale = mask(a_id.pid, a_id.start_time + 1, vec![0]);
        let record = Record {
            regulator: dead,
            members: vec![a_id],
            affinity: vec![stale.clone()],
        };
        let path = write_record(dir.path(), "s.json", &record);
        let undone = undo_record(&path).unwrap();
        assert_eq!(undone.resumed, vec![a_id]);
        assert!(undone.restored.is_empty() && undone.unrestored.is_empty());
        assert_eq!(
            crate::actuate::affinity::thread_cpus(a_id.pid).unwrap(),
            changed
        );
        // The watchdog's part leaves the file to whoever called it.
        assert!(path.exists());

        write_record(
            dir.path(),
            "s.json",
            &Record {
                affinity: vec![stale, original.clone()],
                ..record
            },
        );
        let report = recover(dir.path()).unwrap();
        assert_eq!(report.restored, vec![a_id]);
        assert!(report.unrestored.is_empty());
        assert_eq!(report.removed, vec![path.clone()]);
        assert_eq!(
            crate::actuate::affinity::thread_cpus(a_id.pid).unwrap(),
            original.process_cpus().unwrap()
        );
        assert_eq!(
            undo_record(&path).unwrap(),
            Undone::default(),
            "a missing file is nothing to undo"
        );
        a.kill().unwrap();
        a.wait().unwrap();
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
                affinity: Vec::new(),
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
