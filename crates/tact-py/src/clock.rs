//! The monotonic clock the batching fast path reads: tact-lib's own readings, which it keeps
//! private. The coarse clock costs a few nanoseconds (the vDSO answers from the last timer tick);
//! it lags the precise one by at most a tick and never runs ahead of it.

/// Monotonic time since boot in nanoseconds, as of the last timer tick.
#[inline]
pub(crate) fn coarse_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE)
}

/// Precise monotonic time since boot in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

#[inline]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. Both clocks exist on every Linux since 2.6.32;
    // were the call to fail, `ts` stays zero and every testpoint takes the slow path: correct,
    // only slower.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}
