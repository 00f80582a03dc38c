//! The cooperative idle gate (spec idletime §6, "Library mode"; L. Eggert's idletime
//! scheduling): a program that issues its own background I/O asks the gate before each
//! request, so background requests never queue in front of foreground ones.
//!
//! ```no_run
//! use std::time::Duration;
//! use tact_lib::idle::IdleGate;
//! # fn read_block() -> std::io::Result<usize> { Ok(0) }
//!
//! let gate = IdleGate::builder()
//!     .device("/var/lib/backup") // or "sda", or .interface("eth0")
//!     .preempt(Duration::from_millis(50)) // or Preempt::Auto, the default
//!     .build()?;
//! loop {
//!     let permit = gate.acquire()?; // blocks until the disk was idle of foreground for 50 ms
//!     let n = read_block()?; // one background request, O_DIRECT
//!     permit.done(n as u64)?; // its own bytes do not count as foreground
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Foreground activity is the resource's growth in bytes between two looks (`/proc/diskstats`
//! for the whole disks under a device or path, `/sys/class/net/IFACE/statistics` for a link)
//! less the program's own reported bytes, above a threshold (4 KiB by default). One `acquire`
//! is one b event of tact-core's [`Gate`](tact_core::idle::Gate) (end-anchored, variant 1): it
//! returns at once while background has the resource and no foreground appeared; otherwise it
//! waits until a full preemption interval p has passed without foreground. p = 0 is plain
//! priority. [`Preempt::Auto`] tunes p with tact-core's `Tuner`.
//!
//! Own bytes are exact only when the request's I/O happens between `acquire` and `done`: read
//! and write with O_DIRECT (or `fdatasync` each written chunk), and keep read-ahead out with
//! `POSIX_FADV_RANDOM`; otherwise the kernel's later writeback and read-ahead look like
//! foreground and the program defers to itself.

mod builder;
mod clock;
mod error;
mod gate;
mod sampler;

pub use builder::{Builder, Preempt, DEFAULT_THRESHOLD};
pub use clock::{Clock, Monotonic};
pub use error::IdleError;
pub use gate::{IdleGate, Permit, Status};
pub use sampler::{DiskSampler, NetSampler, Sampler};
pub use tact_core::idle::{Counters, Event, State};
/// What a probe reports (an unknown device or interface, an unreadable counter).
pub use tact_linux::Error as ProbeError;
