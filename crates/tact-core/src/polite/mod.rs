//! Progress-based regulation of low-importance jobs (MS Manners / BeNice), spec
//! `progress-regulation.md` sections 2 and 3.
//!
//! A job reports progress at testpoints; [`Regulator::step`] compares its rate with a target it
//! calibrates itself and answers run, or suspend for a while. The caller (library or `tact run`)
//! carries out the answer; this module only decides.

pub mod arbiter;
mod config;
mod poll;
mod regulator;
mod target;

pub use arbiter::{Arbiter, DEFAULT_HALF_LIFE};
pub use config::{ConfigError, PoliteConfig};
pub use poll::{PollInterval, PollPolicy};
pub use regulator::{
    check_progress, Decision, Evaluation, Obs, ObsError, Phase, Regulator, SampleKind, Step,
};
pub use target::{Target, TargetSet, TARGETS_VERSION};
