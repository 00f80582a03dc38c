//! Applying a per-thread kernel setting (scheduling policy, I/O priority) to every thread of a
//! process and putting it back. The kernel sets these one thread at a time, so the threads are
//! listed from `/proc/PID/task` and re-listed until no new one appears (a thread created meanwhile
//! inherits its creator's setting, as does a child process).
//!
//! Threads are addressed by tid, which the kernel may reuse after the thread exits: restore checks
//! the process's start time first, and only touches threads of that process.

use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// How often a process that keeps creating threads is re-listed.
const MAX_PASSES: usize = 10;

/// The setting of every thread of a process as it was before tact changed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SavedThreads<T> {
    pub id: ProcId,
    /// `(tid, setting)`.
    pub threads: Vec<(i32, T)>,
}

/// Saves each thread's setting with `get`, then changes it with `set`. A thread that exits
/// meanwhile is skipped; a process that has exited (or whose pid now names another) gives
/// `NoProcess`. If `set` fails, the threads already changed are put back before the error is
/// returned.
pub(crate) fn apply<T>(
    reader: &ProcReader,
    id: ProcId,
    get: impl Fn(i32) -> Result<T>,
    set: impl Fn(i32) -> Result<()>,
    put_back: impl Fn(i32, &T) -> Result<()>,
) -> Result<SavedThreads<T>> {
    let mut saved = SavedThreads {
        id,
        threads: Vec::new(),
    };
    let result = (|| {
        if !alive(reader, id)? {
            return Err(Error::NoProcess { pid: id.pid });
        }
        for _ in 0..MAX_PASSES {
            let tids = reader.threads(id.pid)?;
            let mut new = 0;
            for tid in tids {
                if saved.threads.iter().any(|(t, _)| *t == tid) {
                    continue;
                }
                let before = match get(tid) {
                    Ok(before) => before,
                    Err(Error::NoProcess { .. }) => continue,
                    Err(e) => return Err(e),
                };
                saved.threads.push((tid, before));
                match set(tid) {
                    Ok(()) | Err(Error::NoProcess { .. }) => new += 1,
                    Err(e) => return Err(e),
                }
            }
            if new == 0 {
                break;
            }
        }
        // The pid must still name the process whose threads were listed.
        match alive(reader, id)? {
            true => Ok(()),
            false => Err(Error::NoProcess { pid: id.pid }),
        }
    })();
    match result {
        Ok(()) => Ok(saved),
        Err(e) => {
            let _ = restore(reader, &saved, put_back);
            Err(e)
        }
    }
}

impl<T> SavedThreads<T> {
    /// The process-wide setting: the leader's, or the first thread's when the leader was gone.
    pub fn process_value(&self) -> Option<&T> {
        self.threads
            .iter()
            .find(|(t, _)| *t == self.id.pid)
            .or(self.threads.first())
            .map(|(_, v)| v)
    }
}

/// Applies [`apply`] to every member of a job and returns what it replaced. Members that have
/// exited are skipped. On failure, what was already changed is put back first.
pub(crate) fn apply_job<T>(
    reader: &ProcReader,
    members: &[ProcId],
    get: impl Fn(i32) -> Result<T>,
    set: impl Fn(i32) -> Result<()>,
    put_back: impl Fn(i32, &T) -> Result<()>,
) -> Result<Vec<SavedThreads<T>>> {
    let mut saved = Vec::new();
    for &id in members {
        match apply(reader, id, &get, &set, &put_back) {
            Ok(s) => saved.push(s),
            Err(Error::NoProcess { .. }) => {}
            Err(e) => {
                let _ = restore_job(reader, &saved, &[], &put_back);
                return Err(e);
            }
        }
    }
    Ok(saved)
}

/// Puts every thread's setting back with `put_back`; threads created since [`apply`] get the
/// process-wide old setting. A process that has exited, or whose pid now names another process,
/// is left alone. Tries every thread, then returns the first failure.
pub(crate) fn restore<T>(
    reader: &ProcReader,
    saved: &SavedThreads<T>,
    put_back: impl Fn(i32, &T) -> Result<()>,
) -> Result<()> {
    let Some(default) = saved.process_value() else {
        return Ok(());
    };
    restore_threads(reader, saved.id, |tid| {
        let value = saved
            .threads
            .iter()
            .find(|(t, _)| *t == tid)
            .map_or(default, |(_, v)| v);
        put_back(tid, value)
    })
}

/// Restores a whole job: each saved process as [`restore`] does, and each of `members` that was
/// not saved (it appeared after [`apply`] and inherited the new setting) to the first saved
/// process's old setting. Tries everything, then returns the first failure.
pub(crate) fn restore_job<T>(
    reader: &ProcReader,
    saved: &[SavedThreads<T>],
    members: &[ProcId],
    put_back: impl Fn(i32, &T) -> Result<()>,
) -> Result<()> {
    let mut first_error = None;
    for s in saved {
        if let Err(e) = restore(reader, s, &put_back) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(default) = saved.first().and_then(|s| s.process_value()) {
        for &id in members.iter().filter(|m| saved.iter().all(|s| s.id != **m)) {
            if let Err(e) = restore_threads(reader, id, |tid| put_back(tid, default)) {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Calls `put_back` for every thread of `id` if it still runs. Tries every thread, then returns
/// the first failure.
fn restore_threads(
    reader: &ProcReader,
    id: ProcId,
    put_back: impl Fn(i32) -> Result<()>,
) -> Result<()> {
    if !alive(reader, id)? {
        return Ok(());
    }
    let tids = match reader.threads(id.pid) {
        Ok(tids) => tids,
        Err(Error::NoProcess { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut first_error = None;
    for tid in tids {
        match put_back(tid) {
            Ok(()) | Err(Error::NoProcess { .. }) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Whether `id` still runs (same start time, not a zombie).
fn alive(reader: &ProcReader, id: ProcId) -> Result<bool> {
    match reader.stat(id.pid) {
        Ok(s) => Ok(s.start_time == id.start_time && !s.is_dead()),
        Err(Error::NoProcess { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The error of a per-thread system call: ESRCH means the thread is gone.
pub(crate) fn syscall_error(op: &'static str, tid: i32, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ESRCH) {
        Error::NoProcess { pid: tid }
    } else {
        Error::Syscall {
            op,
            pid: tid,
            source: e,
        }
    }
}
