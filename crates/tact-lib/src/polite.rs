//! An explicit regulated unit, for programs that prefer a handle to a per-thread one: a task
//! that moves between threads, or several kinds of work that should be judged apart.

use std::sync::Arc;

use crate::local::Local;
use crate::{global, Error, Supervisor, UnitStats};

/// A regulated unit of its own. It competes for its supervisor's run token like a thread's
/// unit, and leaves (freeing the token) when dropped.
///
/// A thread runs one unit at a time: when a thread enters a due testpoint of one unit while
/// another of its units holds the token, that other unit gives it back. The active time of each
/// then counts the time the thread spent on the other.
#[derive(Debug)]
pub struct Polite {
    sup: Option<Arc<Supervisor>>,
    local: Local,
}

impl Default for Polite {
    fn default() -> Self {
        Self::new()
    }
}

impl Polite {
    /// A unit of the process-wide supervisor (a no-op one when regulation is disabled).
    pub fn new() -> Self {
        let mut local = Local::new();
        let sup = global::supervisor().cloned();
        local.off = sup.is_none();
        Polite { sup, local }
    }

    /// A unit of the given supervisor.
    pub fn with_supervisor(sup: &Arc<Supervisor>) -> Self {
        Polite {
            sup: Some(sup.clone()),
            local: Local::new(),
        }
    }

    /// As [`testpoint`](crate::testpoint), for this unit.
    pub fn testpoint(&mut self, index: u32, metrics: &[f64]) -> Result<(), Error> {
        if let Some(done) = self.local.fast(index, metrics) {
            return done.map_err(Error::from);
        }
        match &self.sup {
            Some(sup) => sup.testpoint(&mut self.local, index, metrics),
            None => Ok(()),
        }
    }

    /// As [`set_priority`](crate::set_priority), for this unit (a priority outside
    /// [`PRIORITY_RANGE`](crate::PRIORITY_RANGE) is refused and changes nothing).
    pub fn set_priority(&mut self, priority: i32) -> Result<(), Error> {
        global::check_priority(priority)?;
        match &self.sup {
            Some(sup) => sup.set_priority(&mut self.local, priority),
            None => self.local.priority = priority,
        }
        Ok(())
    }

    pub fn priority(&self) -> i32 {
        self.local.priority
    }

    /// What this unit has been through; None before its first testpoint.
    pub fn stats(&self) -> Option<UnitStats> {
        self.sup.as_ref()?.stats(&self.local)
    }
}

impl Drop for Polite {
    fn drop(&mut self) {
        if let Some(sup) = &self.sup {
            sup.leave(&mut self.local);
        }
    }
}
