//! Jobs: probes, an engine and actuators wired together for one regulated program.

pub mod attach;
pub mod events;
mod polite;
pub mod run;
mod turn;

pub use polite::setup_logging;
