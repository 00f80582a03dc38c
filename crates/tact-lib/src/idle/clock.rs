//! The gate's time source, a trait so that tests run the gate in virtual time.

use std::time::Duration;

/// Where an [`IdleGate`](super::IdleGate) reads the time and how it waits. The real one is
/// [`Monotonic`]; a test clock whose `sleep` advances its `now` makes a scripted
/// [`Sampler`](super::Sampler) fully deterministic.
pub trait Clock: Send + Sync {
    /// Time since an origin of the clock's choosing; never goes backwards.
    fn now(&self) -> Duration;
    /// Waits for `d`.
    fn sleep(&self, d: Duration);
}

/// CLOCK_MONOTONIC (time since boot) and a thread sleep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    fn now(&self) -> Duration {
        crate::clock::now()
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}
