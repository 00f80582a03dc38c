//! The idle I/O priority class for a job's threads (spec idletime §6, "Disk"):
//! `ioprio_set(IOPRIO_WHO_PROCESS, tid, IOPRIO_CLASS_IDLE)`, unprivileged for one's own threads
//! and inherited by threads and children created later. Going back to best-effort is unprivileged
//! too.
//!
//! Only BFQ serves the idle class after everything else (and even BFQ forces it a turn after
//! 200 ms without service); mq-deadline ages it within 10 s, and none and kyber ignore it. So the
//! class is worth setting only under BFQ, and [`check_idle_class`] says whether that holds for a
//! device; the user-space gate of the idle engine does the real holding either way. tact never
//! switches a machine's scheduler itself.

use crate::actuate::per_thread::{self, syscall_error, SavedThreads};
use crate::error::{Error, Result};
use crate::probe::block_device::{BlockDevice, BlockResolver};
use crate::probe::proc::{ProcId, ProcReader};

/// `IOPRIO_WHO_PROCESS` from `include/uapi/linux/ioprio.h`: the `who` argument is a tid.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// The class lives in the bits above 13; the level in the low 3 (hints in between, kept raw).
const IOPRIO_CLASS_SHIFT: u32 = 13;

/// The scheduling classes of `ioprio_set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IoClass {
    /// No class set: the thread follows its CPU nice value (best-effort).
    None = 0,
    RealTime = 1,
    BestEffort = 2,
    Idle = 3,
}

/// A raw I/O priority value as the kernel takes and returns it (class, hints and level), so that
/// restoring puts back exactly what was there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoPrio(pub u16);

impl IoPrio {
    /// The idle class (its level is ignored by the kernel).
    pub const IDLE: IoPrio = IoPrio((IoClass::Idle as u16) << IOPRIO_CLASS_SHIFT);

    /// The class of this value.
    pub fn class(self) -> IoClass {
        match self.0 >> IOPRIO_CLASS_SHIFT {
            1 => IoClass::RealTime,
            2 => IoClass::BestEffort,
            3 => IoClass::Idle,
            _ => IoClass::None,
        }
    }

    /// The level within the class (0 highest, 7 lowest).
    pub fn level(self) -> u8 {
        (self.0 & 7) as u8
    }
}

/// The I/O priorities of one process's threads before [`make_idle`].
pub type SavedIoPrios = SavedThreads<IoPrio>;

/// The I/O priority of thread `tid` (`ioprio_get`).
pub fn thread_ioprio(tid: i32) -> Result<IoPrio> {
    // SAFETY: a syscall with integer arguments.
    let v = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if v < 0 {
        return Err(syscall_error(
            "ioprio_get",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(IoPrio(v as u16))
}

/// Sets the I/O priority of thread `tid` (`ioprio_set`).
pub fn set_thread_ioprio(tid: i32, prio: IoPrio) -> Result<()> {
    // SAFETY: a syscall with integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid,
            libc::c_int::from(prio.0),
        )
    };
    if r < 0 {
        return Err(syscall_error(
            "ioprio_set",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Puts every thread of every member into the idle class and returns what it replaced. Members
/// that have exited are skipped. On failure, what was already changed is put back first.
pub fn make_idle(reader: &ProcReader, members: &[ProcId]) -> Result<Vec<SavedIoPrios>> {
    per_thread::apply_job(
        reader,
        members,
        thread_ioprio,
        |tid| set_thread_ioprio(tid, IoPrio::IDLE),
        |tid, p| set_thread_ioprio(tid, *p),
    )
}

/// Puts the saved priorities back: threads created since get their process's old value, and
/// `members` that appeared since (the job's tree now; they inherited the idle setting) get the
/// first saved process's. Tries everything, then returns the first failure.
pub fn restore(reader: &ProcReader, saved: &[SavedIoPrios], members: &[ProcId]) -> Result<()> {
    per_thread::restore_job(reader, saved, members, |tid, v| set_thread_ioprio(tid, *v))
}

/// Whether the idle class means anything for `device`: every disk below it runs BFQ. The error
/// names the scheduler file and the scheduler that is active instead.
pub fn check_idle_class(resolver: &BlockResolver, device: &BlockDevice) -> Result<()> {
    for disk in &device.disks {
        let sched = resolver.scheduler(disk)?;
        if !sched.is_bfq() {
            let offer = if sched.available.iter().any(|s| s == "bfq") {
                format!("an administrator can switch with `echo bfq > /sys/block/{disk}/queue/scheduler`")
            } else {
                "this kernel offers no bfq for it".to_string()
            };
            return Err(Error::Unavailable {
                what: format!("the idle I/O class on {}", device.name),
                reason: format!(
                    "disk {disk} uses the {} scheduler, which does not hold idle-class I/O \
                     behind other I/O (only bfq does); {offer}",
                    sched.active
                ),
            });
        }
    }
    Ok(())
}
