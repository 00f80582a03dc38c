//! The two readings of CLOCK_MONOTONIC the library uses.
//!
//! The supervisor keeps time as a `Duration` since boot (`now`); that is also the regulator's
//! origin. The fast path compares a due time with [`coarse_ns`] when the testpoint period is long
//! enough: the vDSO answers it from the last timer tick without reading the hardware clock, in a
//! few nanoseconds (against about 20 for the precise clock, and a system call on virtual machines
//! whose clock source has no vDSO support). The coarse clock lags the precise one by at most one
//! tick (1–10 ms) and never runs ahead of it, so a due testpoint is noticed at most a tick late
//! and never early; `coarse_enough` says whether that lateness is negligible for a period.
//! Bindings that keep their own fast path (tact-py batches calls under the GIL) read the same
//! clocks.

use std::time::Duration;

/// Precise monotonic time since boot.
pub(crate) fn now() -> Duration {
    read(libc::CLOCK_MONOTONIC)
}

/// Monotonic time since boot in nanoseconds, as of the last timer tick.
#[inline]
pub fn coarse_ns() -> u64 {
    nanos(read(libc::CLOCK_MONOTONIC_COARSE))
}

/// Precise monotonic time since boot in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    nanos(now())
}

/// Whether [`coarse_ns`] is fine enough for testpoints every `period`: its tick is at most a
/// twentieth of the period (a 4 ms tick serves periods from 80 ms, the default 200 ms included).
pub(crate) fn coarse_enough(period: Duration) -> bool {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable timespec.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } == 0;
    ok && Duration::new(res.tv_sec as u64, res.tv_nsec as u32) * 20 <= period
}

/// A time of [`now`] in the nanoseconds of [`coarse_ns`] and [`now_ns`].
pub(crate) fn nanos(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}

#[inline]
fn read(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. Both clocks exist on every Linux since 2.6.32,
    // so the call cannot fail; were it to, `ts` stays zero and every testpoint takes the slow
    // path, which is correct, only slower.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_never_runs_ahead() {
        for _ in 0..1000 {
            let coarse = coarse_ns();
            assert!(coarse <= now_ns());
        }
    }

    #[test]
    fn the_coarse_clock_serves_long_periods_only() {
        assert!(coarse_enough(Duration::from_secs(1)));
        assert!(!coarse_enough(Duration::from_micros(100)));
    }
}
