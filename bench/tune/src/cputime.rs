//! CPU clocks. Service times are spun in *thread* CPU time, so that a spinning thread that the
//! scheduler preempts still does its full amount of work: the work per task stays fixed however
//! many threads share the core, which is what gives the service its throughput knee.

use std::time::Duration;

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used here exist on every Linux.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({id}) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (every thread, live and exited).
pub fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Burns `amount` of the calling thread's CPU time.
pub fn spin(amount: Duration) {
    let end = thread_cpu() + amount;
    let mut x = 0u64;
    while thread_cpu() < end {
        // A little arithmetic between clock reads, so the loop is not all system calls.
        for i in 0..64u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_burns_at_least_the_amount_of_thread_cpu() {
        let before = thread_cpu();
        spin(Duration::from_millis(20));
        let used = thread_cpu() - before;
        assert!(used >= Duration::from_millis(20), "used {used:?}");
        assert!(process_cpu() >= used);
    }
}
