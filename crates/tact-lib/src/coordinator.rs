//! The hook through which a machine-wide arbiter (the tact daemon, the paper's superintendent)
//! shares execution between processes, as the supervisor shares it between threads.

use std::time::Duration;

/// Asked by the supervisor around every turn of its in-process run token.
///
/// Before a regulated unit of this process runs, the supervisor calls [`acquire`] and waits for
/// it to return; when the unit stops running (its next due testpoint, presumed hung, or gone), it
/// calls [`release`]. Calls alternate, one turn at a time, and never under the supervisor's lock,
/// so they may block on a socket. `acquire` returning `Err` (daemon gone) lets the unit run alone,
/// without a matching `release`: reconnecting later is the implementor's business.
///
/// [`acquire`]: Coordinator::acquire
/// [`release`]: Coordinator::release
pub trait Coordinator: Send {
    /// Blocks until this process may run a unit of the given priority.
    fn acquire(&mut self, priority: i32) -> Result<(), CoordinatorError>;
    /// The unit that acquired the last turn has stopped running after `ran`.
    fn release(&mut self, ran: Duration, report: &UnitReport);
}

/// Whatever went wrong reaching the machine-wide arbiter.
pub type CoordinatorError = Box<dyn std::error::Error + Send + Sync>;

/// Why and how a unit gave back the run token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitReport {
    /// The unit's id inside this process.
    pub unit: u64,
    /// The unit's priority among those of its process.
    pub priority: i32,
    pub reason: ReleaseReason,
    /// Whether the unit is still calibrating its target.
    pub calibrating: bool,
    /// Progress per second of running at its last evaluated testpoint (first metric), and the
    /// calibrated target of that metric (`None` while calibrating).
    pub rate: Option<f64>,
    pub target: Option<f64>,
    /// Total time the unit has spent suspended.
    pub suspended: Duration,
}

/// Why a unit stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReason {
    /// A due testpoint; the unit wants to run on.
    Testpoint,
    /// A due testpoint judged progress poor: the unit will not ask again for this long.
    Suspended(Duration),
    /// No due testpoint within the hung threshold: the token was taken from it.
    Hung,
    /// Another unit of the same thread took over (a thread runs one unit at a time).
    Switched,
    /// The thread exited or the handle was dropped.
    Left,
}
