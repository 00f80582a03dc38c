//! tact-core: every algorithm of tact as a pure, deterministic state machine.
//!
//! Nothing here reads a clock, makes a syscall, spawns a thread or draws an unseeded random number:
//! time is always an argument (`now: Duration` since an origin the caller chooses). That is what lets
//! the paper's day-long experiments run in milliseconds in `tact-sim`, and what lets `tact-linux` and
//! the binary stay thin ("decide purely, act at the edge").
//!
//! - [`stats`]: statistics shared by the engines (exact sign test, ridge regression).
//! - [`polite`]: progress-based regulation (MS Manners / BeNice).
//! - [`idle`]: idletime scheduling with preemption intervals (Eggert).
//! - [`share`]: proportional-share CPU scheduling of process groups (ALPS).
//! - [`tickets`]: currencies, hard and soft tickets, brokers and exchanges (Sullivan & Seltzer).
//! - [`tune`]: throughput-centric concurrency control (TCC).

pub mod idle;
pub mod polite;
pub mod share;
pub mod stats;
pub mod tickets;
pub mod tune;
