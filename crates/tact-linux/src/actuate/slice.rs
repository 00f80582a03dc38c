//! A short EEVDF slice for tact's own control thread (Linux ≥ 6.12: `sched_attr.sched_runtime` of a
//! SCHED_OTHER thread is its slice, 0.1–100 ms, settable without privileges).
//!
//! Why: `tact share` pinned with its group on one CPU (the paper's uniprocessor setup) wakes every
//! quantum and between quanta, and each wake-up has to displace a spinner. With the default slice
//! (1.4 ms on a 2-CPU machine) the running spinner is protected until its slice or the next
//! scheduler tick: 20 spinners at HZ = 250 delayed tact's wake-ups by 3.4 ms at the 90th percentile
//! (`perf sched timehist`, 26 Nov). A thread that asks for a shorter slice gets an earlier virtual
//! deadline and may preempt at wake-up; with 0.1 ms the 90th percentile fell to 0.01 ms. Its share
//! of the CPU does not change: the slice decides how often, not how much.

use std::time::Duration;

use crate::error::{Error, Result};

/// `struct sched_attr` up to `sched_period` (`SCHED_ATTR_SIZE_VER0`), all the kernel needs here.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

const VER0: u32 = std::mem::size_of::<SchedAttr>() as u32;

fn own_error(op: &'static str) -> Error {
    Error::Syscall {
        op,
        pid: nix::unistd::gettid().as_raw(),
        source: std::io::Error::last_os_error(),
    }
}

fn get_own() -> Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: the kernel writes at most `VER0` bytes into `attr`, which is that large; tid 0 is
    // the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            VER0,
            0,
        )
    };
    if rc != 0 {
        return Err(own_error("sched_getattr"));
    }
    Ok(attr)
}

/// Asks for `slice` as the calling thread's EEVDF slice, keeping its policy and nice value.
/// Returns the slice now in force, or `None` where the kernel has no custom slices (before 6.12 a
/// fair thread's `sched_runtime` reads back as 0) or the thread is not SCHED_OTHER/SCHED_BATCH.
pub fn shorten_own_slice(slice: Duration) -> Result<Option<Duration>> {
    let mut attr = get_own()?;
    let policy = attr.sched_policy as i32;
    if (policy != libc::SCHED_OTHER && policy != libc::SCHED_BATCH) || attr.sched_runtime == 0 {
        return Ok(None);
    }
    attr.size = VER0;
    attr.sched_flags = 0;
    attr.sched_runtime = slice.as_nanos().min(u128::from(u64::MAX)) as u64;
    // SAFETY: `attr` is a valid, initialised VER0 sched_attr; tid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc != 0 {
        return Err(own_error("sched_setattr"));
    }
    Ok(Some(Duration::from_nanos(get_own()?.sched_runtime)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_gets_the_slice_it_asks_for_where_the_kernel_has_custom_slices() {
        // A thread of its own, so the test harness's thread keeps its slice.
        let got = std::thread::spawn(|| {
            let before = get_own().unwrap();
            (
                before.sched_runtime,
                before.sched_nice,
                shorten_own_slice(Duration::from_micros(100)).unwrap(),
                get_own().unwrap(),
            )
        })
        .join()
        .unwrap();
        let (before_runtime, before_nice, result, after) = got;
        if before_runtime == 0 {
            assert_eq!(
                result, None,
                "no custom slices on this kernel: nothing to set"
            );
            return;
        }
        assert_eq!(result, Some(Duration::from_micros(100)));
        assert_eq!(after.sched_runtime, 100_000);
        assert_eq!(after.sched_nice, before_nice, "the nice value is kept");
        assert_eq!(after.sched_policy as i32, libc::SCHED_OTHER);
    }
}
