//! In-process polite regulation: the MS Manners library (Douceur & Bolosky, SOSP 1999, §7.1;
//! spec `progress-regulation.md` sections 2.6, 2.7 and 4).
//!
//! A low-importance program calls [`testpoint`] with the progress it made since its previous
//! call. The call returns at once most of the time; when the testpoint is due (every testpoint
//! period P of running, 200 ms by default) the thread's regulator judges its progress rate
//! against a target it calibrated itself, and the call blocks while the program should defer:
//! while the rate is significantly low (contention with more important work), and while another
//! regulated thread of the process has its turn, since regulated threads that run together slow
//! each other down and would all back off (time-multiplex isolation).
//!
//! ```no_run
//! # fn copy_block() -> usize { 0 }
//! loop {
//!     let bytes = copy_block();
//!     tact_lib::testpoint(0, &[bytes as f64])?;
//! }
//! # Ok::<(), tact_lib::Error>(())
//! ```
//!
//! - [`testpoint`], [`set_priority`], [`stats`]: the calling thread is a regulated unit from its
//!   first testpoint until it exits. Threads that never call it are not regulated.
//! - [`Polite`]: an explicit unit, for a task that moves between threads or to judge kinds of
//!   work apart; [`Supervisor::with_config`] gives it a supervisor of its own (tests, embedding).
//! - Persistence: targets load at the first testpoint and are saved every 5 minutes, at exit and
//!   on [`flush`], in `$XDG_STATE_HOME/tact/polite/<key>.json`.
//! - [`Coordinator`]: the hook through which the tact daemon shares execution between processes.
//!   The process-wide supervisor installs the daemon's ([`DaemonCoordinator`]) when a daemon
//!   answers at `$TACT_SOCKET` or the default path; otherwise the process works alone.
//! - Environment: `TACT_TESTPOINT`, `TACT_NAME`, `TACT_STATE_DIR`, `TACT_DISABLE` (see
//!   [`Config::from_env`]).
//! - [`tune`]: adaptive concurrency for Rust programs: a worker [`tune::Pool`] and a
//!   [`tune::Limiter`] whose size a TCC (or baseline) policy sets.

pub mod clock;
mod config;
mod coordinator;
mod daemon;
mod error;
mod global;
pub mod idle;
mod local;
mod polite;
mod supervisor;
pub mod tune;

pub use config::{Config, DEFAULT_SAVE_EVERY, PERIOD_RANGE};
pub use coordinator::{Coordinator, CoordinatorError, ReleaseReason, UnitReport};
pub use daemon::DaemonCoordinator;
pub use error::Error;
pub use global::{flush, init, set_priority, stats, supervisor, testpoint};
pub use polite::Polite;
pub use supervisor::{Supervisor, UnitStats};
/// The priorities [`set_priority`] and [`Polite::set_priority`] accept: the tact daemon's
/// (`tact_proto::PRIORITY_MIN..=PRIORITY_MAX`), since a process's units reach it with theirs.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> =
    tact_proto::PRIORITY_MIN..=tact_proto::PRIORITY_MAX;

pub use tact_core::polite::{check_progress, Decision, ObsError, Phase, PoliteConfig};
