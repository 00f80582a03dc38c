//! What can go wrong in building or using an idle gate.

/// Errors of [`IdleGate`](super::IdleGate) and its [`Builder`](super::Builder).
#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    /// `build()` without `device(..)`, `interface(..)` or `sampler(..)`.
    #[error("an idle gate needs a resource to watch: call device(..) or interface(..)")]
    NoResource,
    /// More than one resource was named: a gate watches one (gate each resource separately).
    #[error("an idle gate watches one resource, but both {0} and {1} were given")]
    TwoResources(String, String),
    /// A preemption interval that is neither a duration nor `auto`.
    #[error("preempt `{value}`: {reason}")]
    Preempt { value: String, reason: String },
    /// The device or interface does not exist, or its counters could not be read (the error
    /// names the device and lists the ones that exist, or names the file).
    #[error(transparent)]
    Probe(#[from] tact_linux::Error),
    /// `acquire` by a thread whose own request is still outstanding.
    #[error(
        "this thread's background request is still outstanding: call done() before acquiring again"
    )]
    AlreadyHeld,
    /// `done()` while no background request of this gate was outstanding.
    #[error("no background request is outstanding: call done() after acquire()")]
    NotAcquired,
}
