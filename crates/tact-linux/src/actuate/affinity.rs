//! CPU affinity of whole processes (spec proportional-share §4, conserving mode: an entity capped at
//! `par_i/C` gets `par_i` CPUs of its own). `sched_setaffinity` acts on one thread, so a process's
//! mask is set thread by thread, re-listing `/proc/PID/task` until no new thread appears (a thread
//! created meanwhile inherits its creator's mask). It is unprivileged for one's own processes and
//! reversible: [`pin`] returns the masks it replaced, [`SavedAffinity::restore`] puts them back, and
//! `SavedAffinity` serializes for the state file so a watchdog or a later tact can restore them.
//! [`save`] reads the masks without changing them, so that they can be in the state file before
//! [`pin`] changes anything.
//!
//! Threads are addressed by tid, which the kernel may reuse after the thread exits: restore checks
//! the process's start time first, and only touches threads of that process.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// How often `pin` re-lists the threads of a process that keeps creating them.
const MAX_PASSES: usize = 10;

/// The mask of every thread of a process as it was before tact changed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SavedAffinity {
    pub id: ProcId,
    /// `(tid, CPUs)`; the leader (tid = pid) first when it was alive.
    pub threads: Vec<(i32, Vec<usize>)>,
}

/// The CPUs thread (or process leader) `tid` may run on (`sched_getaffinity`).
pub fn thread_cpus(tid: i32) -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(tid))
        .map_err(|e| sched_error("sched_getaffinity", tid, e))?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// Restricts thread `tid` to `cpus` (`sched_setaffinity`). CPUs outside the thread's cpuset make
/// the call fail with EINVAL when none is left.
pub fn set_thread_cpus(tid: i32, cpus: &[usize]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|e| sched_error("sched_setaffinity", tid, e))?;
    }
    sched_setaffinity(Pid::from_raw(tid), &set)
        .map_err(|e| sched_error("sched_setaffinity", tid, e))
}

/// The mask of every thread of `pid`, changing nothing.
pub fn save(pid: i32) -> Result<SavedAffinity> {
    save_with(&ProcReader::new(), pid)
}

/// [`save`] with the threads listed by `reader`.
pub fn save_with(reader: &ProcReader, pid: i32) -> Result<SavedAffinity> {
    let id = reader.stat(pid)?.id();
    let mut threads = Vec::new();
    for tid in reader.threads(pid)? {
        match thread_cpus(tid) {
            Ok(cpus) => threads.push((tid, cpus)),
            Err(Error::NoProcess { .. }) => {} // the thread exited
            Err(e) => return Err(e),
        }
    }
    same_process(reader, id)?;
    Ok(SavedAffinity { id, threads })
}

/// Saves the mask of every thread of `pid`, then restricts all of them to `cpus`. Returns what
/// it replaced, for [`SavedAffinity::restore`]. If setting fails half way, the threads already
/// changed are restored before the error is returned.
pub fn pin(pid: i32, cpus: &[usize]) -> Result<SavedAffinity> {
    pin_with(&ProcReader::new(), pid, cpus)
}

/// [`pin`] with the threads listed by `reader`.
pub fn pin_with(reader: &ProcReader, pid: i32, cpus: &[usize]) -> Result<SavedAffinity> {
    let id = reader.stat(pid)?.id();
    let mut saved = SavedAffinity {
        id,
        threads: Vec::new(),
    };
    let result = (|| {
        for _ in 0..MAX_PASSES {
            let mut new = 0;
            for tid in reader.threads(pid)? {
                if saved.threads.iter().any(|(t, _)| *t == tid) {
                    continue;
                }
                let before = match thread_cpus(tid) {
                    Ok(before) => before,
                    Err(Error::NoProcess { .. }) => continue, // the thread exited
                    Err(e) => return Err(e),
                };
                saved.threads.push((tid, before));
                match set_thread_cpus(tid, cpus) {
                    Ok(()) | Err(Error::NoProcess { .. }) => new += 1,
                    Err(e) => return Err(e),
                }
            }
            if new == 0 {
                break;
            }
        }
        same_process(reader, id)
    })();
    match result {
        Ok(()) => Ok(saved),
        Err(e) => {
            let _ = saved.restore_with(reader);
            Err(e)
        }
    }
}

impl SavedAffinity {
    /// The process-wide mask: the leader's, or the first thread's when the leader was gone.
    pub fn process_cpus(&self) -> Option<&[usize]> {
        self.threads
            .iter()
            .find(|(t, _)| *t == self.id.pid)
            .or(self.threads.first())
            .map(|(_, c)| c.as_slice())
    }

    /// Puts every thread's mask back. Threads created since [`pin`] get the process-wide mask.
    /// A process that has exited (or whose pid now names another process) is left alone. Tries
    /// every thread even if one fails, then returns the first failure.
    pub fn restore(&self) -> Result<()> {
        self.restore_with(&ProcReader::new())
    }

    /// [`SavedAffinity::restore`] with the threads listed by `reader`.
    pub fn restore_with(&self, reader: &ProcReader) -> Result<()> {
        let pid = self.id.pid;
        let Some(default) = self.process_cpus() else {
            return Ok(());
        };
        match reader.stat(pid) {
            Ok(s) if s.start_time == self.id.start_time && !s.is_dead() => {}
            Ok(_) | Err(Error::NoProcess { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
        let tids = match reader.threads(pid) {
            Ok(tids) => tids,
            Err(Error::NoProcess { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut first_error = None;
        for tid in tids {
            let cpus = self
                .threads
                .iter()
                .find(|(t, _)| *t == tid)
                .map_or(default, |(_, c)| c.as_slice());
            match set_thread_cpus(tid, cpus) {
                Ok(()) | Err(Error::NoProcess { .. }) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The pid must still name the process whose threads were listed.
fn same_process(reader: &ProcReader, id: ProcId) -> Result<()> {
    match reader.stat(id.pid) {
        Ok(s) if s.start_time == id.start_time => Ok(()),
        Ok(_) | Err(Error::NoProcess { .. }) => Err(Error::NoProcess { pid: id.pid }),
        Err(e) => Err(e),
    }
}

fn sched_error(op: &'static str, tid: i32, e: nix::errno::Errno) -> Error {
    if e == nix::errno::Errno::ESRCH {
        Error::NoProcess { pid: tid }
    } else {
        Error::Syscall {
            op,
            pid: tid,
            source: e.into(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Gives `pid` another mask (narrower when it may use several CPUs, else wider, which needs a
    /// second CPU online), returning what it had.
    pub(crate) fn change_mask(pid: i32) -> SavedAffinity {
        let before = save(pid).unwrap();
        let cpus = before.process_cpus().unwrap().to_vec();
        let other: Vec<usize> = if cpus.len() > 1 {
            vec![cpus[0]]
        } else {
            // SAFETY: sysconf has no preconditions.
            let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            assert!(online > 1, "this test needs two CPUs online");
            (0..online as usize).collect()
        };
        pin(pid, &other).unwrap();
        assert_ne!(thread_cpus(pid).unwrap(), cpus);
        before
    }

    #[test]
    fn pin_and_restore_a_child() {
        let mine = thread_cpus(std::process::id() as i32).unwrap();
        assert!(!mine.is_empty());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let target = [*mine.last().unwrap()];
        let before = save(pid).unwrap();
        assert_eq!(before.process_cpus().unwrap(), mine.as_slice());
        let saved = pin(pid, &target).unwrap();
        assert_eq!(saved, before);
        assert_eq!(saved.id.pid, pid);
        assert_eq!(saved.process_cpus().unwrap(), mine.as_slice());
        assert_eq!(thread_cpus(pid).unwrap(), target);
        let json = serde_json::to_string(&saved).unwrap();
        let back: SavedAffinity = serde_json::from_str(&json).unwrap();
        back.restore().unwrap();
        assert_eq!(thread_cpus(pid).unwrap(), mine);
        // A CPU that does not exist leaves nothing changed.
        assert!(pin(pid, &[CpuSet::count() - 1]).is_err());
        assert_eq!(thread_cpus(pid).unwrap(), mine);
        child.kill().unwrap();
        child.wait().unwrap();
        back.restore().unwrap(); // gone: nothing to do
        assert!(matches!(pin(pid, &target), Err(Error::NoProcess { .. })));
    }
}
