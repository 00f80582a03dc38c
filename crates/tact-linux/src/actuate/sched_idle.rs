//! SCHED_IDLE for a job's threads (spec idletime §6, "CPU"): the CPU form of the idle engine, where
//! preemption costs microseconds and priority alone suffices (p = 0). A SCHED_IDLE thread runs
//! only when nothing else wants the CPU (weight 3 against 1024, so about 0.3% of a contended CPU),
//! and a waking foreground thread preempts it at once.
//!
//! Entering SCHED_IDLE is unprivileged for one's own threads and is inherited by every thread and
//! child created later, so a tree set once stays idle. Leaving it is not free: the kernel lets a
//! thread back to SCHED_OTHER only if its RLIMIT_NICE allows its nice value, or the caller holds
//! CAP_SYS_NICE ([`check_leave`] tells which, before tact commits to restoring).

use crate::actuate::per_thread::{self, syscall_error, SavedThreads};
use crate::error::{Error, Result};
use crate::probe::caps::{has_capability, Capability};
use crate::probe::proc::{ProcId, ProcReader};

/// A thread's scheduling policy and its real-time priority (0 for the normal policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchedPolicy {
    /// `SCHED_OTHER`, `SCHED_IDLE`, ..., with `SCHED_RESET_ON_FORK` or-ed in when it was set.
    pub policy: i32,
    pub priority: i32,
}

impl SchedPolicy {
    /// SCHED_IDLE, without reset-on-fork so that children inherit it.
    pub const IDLE: SchedPolicy = SchedPolicy {
        policy: libc::SCHED_IDLE,
        priority: 0,
    };

    /// Whether this is SCHED_IDLE (whatever the reset-on-fork flag).
    pub fn is_idle(&self) -> bool {
        self.policy & !libc::SCHED_RESET_ON_FORK == libc::SCHED_IDLE
    }
}

/// The policies of one process's threads before [`make_idle`].
pub type SavedPolicies = SavedThreads<SchedPolicy>;

/// The policy of thread `tid` (`sched_getscheduler`, `sched_getparam`).
pub fn thread_policy(tid: i32) -> Result<SchedPolicy> {
    // SAFETY: plain syscalls on a tid; `param` is a valid out-pointer.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    if policy < 0 {
        return Err(syscall_error(
            "sched_getscheduler",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    if unsafe { libc::sched_getparam(tid, &mut param) } < 0 {
        return Err(syscall_error(
            "sched_getparam",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(SchedPolicy {
        policy,
        priority: param.sched_priority,
    })
}

/// Sets the policy of thread `tid` (`sched_setscheduler`).
pub fn set_thread_policy(tid: i32, policy: SchedPolicy) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: policy.priority,
    };
    // SAFETY: a syscall on a tid with a valid param pointer.
    if unsafe { libc::sched_setscheduler(tid, policy.policy, &param) } < 0 {
        return Err(syscall_error(
            "sched_setscheduler",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Puts every thread of every member into SCHED_IDLE and returns what it replaced. Members that
/// have exited are skipped. On failure, what was already changed is put back first.
pub fn make_idle(reader: &ProcReader, members: &[ProcId]) -> Result<Vec<SavedPolicies>> {
    per_thread::apply_job(
        reader,
        members,
        thread_policy,
        |tid| set_thread_policy(tid, SchedPolicy::IDLE),
        |tid, p| set_thread_policy(tid, *p),
    )
}

/// Puts the saved policies back: threads created since get their process's old value, and
/// `members` that appeared since (the job's tree now; they inherited the idle setting) get the
/// first saved process's. Tries everything, then returns the first failure. EPERM here means
/// [`check_leave`] did not hold.
pub fn restore(reader: &ProcReader, saved: &[SavedPolicies], members: &[ProcId]) -> Result<()> {
    per_thread::restore_job(reader, saved, members, |tid, v| set_thread_policy(tid, *v))
}

/// Whether this process may take `pid` out of SCHED_IDLE again: it holds CAP_SYS_NICE, or `pid`'s
/// RLIMIT_NICE allows its nice value (`20 - nice <= RLIMIT_NICE`). The error says which is missing.
pub fn check_leave(pid: i32) -> Result<()> {
    if has_capability(Capability::SysNice)? {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads a limit of a process into a valid struct.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_NICE, std::ptr::null(), &mut limit) } < 0 {
        return Err(syscall_error(
            "prlimit(RLIMIT_NICE)",
            pid,
            std::io::Error::last_os_error(),
        ));
    }
    // getpriority returns the nice value, and -1 is both a valid nice and the error value.
    // SAFETY: plain syscalls; errno is reset first to tell the two apart.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t)
    };
    let err = std::io::Error::last_os_error();
    if nice == -1 && err.raw_os_error() != Some(0) {
        return Err(syscall_error("getpriority", pid, err));
    }
    let needed = (20 - nice) as u64;
    if limit.rlim_cur >= needed {
        return Ok(());
    }
    Err(Error::Unavailable {
        what: format!("leaving SCHED_IDLE for process {pid}"),
        reason: format!(
            "it needs CAP_SYS_NICE or RLIMIT_NICE >= {needed} for nice {nice} (the limit is {}); \
             run tact with CAP_SYS_NICE, raise the limit (ulimit -e {needed}), or let the job \
             stay idle until it exits",
            limit.rlim_cur
        ),
    })
}
