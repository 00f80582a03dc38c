//! What can go wrong in a testpoint.

use tact_core::polite::{ConfigError, ObsError};

/// What can go wrong in a testpoint, a save, or setting up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad progress: NaN, negative or infinite, no metrics, or a metric count that changed for
    /// an index. Nothing of the call was recorded.
    #[error(transparent)]
    Progress(#[from] ObsError),
    /// A [`Config`](crate::Config) whose regulator parameters are inconsistent.
    #[error("invalid regulation settings: {0}")]
    Config(#[from] ConfigError),
    /// The targets file could not be written (the error names it).
    #[error("cannot save targets: {0}")]
    Save(tact_linux::Error),
    /// A priority outside [`PRIORITY_RANGE`](crate::PRIORITY_RANGE), which the tact daemon
    /// would refuse. Nothing was changed.
    #[error("priority must be an integer from {} to {}, not {0}", crate::PRIORITY_RANGE.start(), crate::PRIORITY_RANGE.end())]
    Priority(i32),
    /// [`init`](crate::init) came after the process-wide supervisor had started.
    #[error("tact is already set up in this process: call init() before the first testpoint, set_priority(), supervisor() or Polite::new()")]
    AlreadyStarted,
}
