//! Jobs: probes, an engine and actuators wired together for one regulated program.

pub mod attach;
pub mod events;
mod guarded;
pub mod idle;
mod idle_cgroup;
mod idle_job;
mod idle_log;
pub(crate) mod idle_net;
mod idle_watch;
mod job;
pub(crate) mod pass_on;
mod polite;
pub mod run;
mod turn;

pub use polite::setup_logging;
