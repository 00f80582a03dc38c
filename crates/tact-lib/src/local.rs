//! The part of a regulated unit its own thread keeps, so that a testpoint that is not due costs a
//! clock read and a few additions: no lock, no allocation once an index has been seen.

use tact_core::polite::{check_progress, ObsError};

use crate::clock;
use crate::supervisor::UnitId;

/// Fast-path state of one unit (a thread's, or a [`Polite`](crate::Polite) handle's).
#[derive(Debug)]
pub(crate) struct Local {
    /// Registered with the supervisor at its first testpoint.
    pub(crate) unit: Option<UnitId>,
    /// Monotonic time (ns) from which the next testpoint is due. Zero until registered, so the
    /// first call takes the slow path.
    pub(crate) due: u64,
    /// Regulation is disabled: every testpoint returns at once.
    pub(crate) off: bool,
    /// Compare `due` with the coarse clock (the period is long enough for its tick).
    pub(crate) coarse: bool,
    /// Priority to register with, and the current one afterwards.
    pub(crate) priority: i32,
    /// Whether the unit's regulator is still bootstrapping (then it asks PSI whether the machine
    /// is quiet); true until known.
    pub(crate) bootstrap: bool,
    /// Progress accumulated since the last due testpoint, by index.
    pub(crate) pending: Vec<Pending>,
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) index: u32,
    pub(crate) dp: Vec<f64>,
    /// Progress was added since the last due testpoint.
    pub(crate) touched: bool,
}

impl Local {
    pub(crate) const fn new() -> Self {
        Local {
            unit: None,
            due: 0,
            off: false,
            coarse: false,
            priority: 0,
            bootstrap: true,
            pending: Vec::new(),
        }
    }

    /// The fast path: accumulates a call that is not due. None when the supervisor must see it
    /// (due, first call, or an index this unit has not used yet).
    #[inline]
    pub(crate) fn fast(&mut self, index: u32, metrics: &[f64]) -> Option<Result<(), ObsError>> {
        if self.off {
            return Some(Ok(()));
        }
        let now = if self.coarse {
            clock::coarse_ns()
        } else {
            clock::now_ns()
        };
        if now >= self.due {
            return None;
        }
        let pending = self.pending.iter_mut().find(|p| p.index == index)?;
        Some(pending.add(metrics))
    }

    pub(crate) fn pending(&mut self, index: u32) -> Option<&mut Pending> {
        self.pending.iter_mut().find(|p| p.index == index)
    }

    /// Starts accumulating an index whose metric count the supervisor accepted.
    pub(crate) fn add_index(&mut self, index: u32, metrics: usize) -> &mut Pending {
        self.pending.push(Pending {
            index,
            dp: vec![0.0; metrics],
            touched: false,
        });
        self.pending.last_mut().expect("just pushed")
    }

    /// Forgets accumulated progress (after handing it to the regulator), keeping the buffers.
    pub(crate) fn clear(&mut self) {
        for p in &mut self.pending {
            p.dp.iter_mut().for_each(|v| *v = 0.0);
            p.touched = false;
        }
    }
}

impl Pending {
    pub(crate) fn add(&mut self, metrics: &[f64]) -> Result<(), ObsError> {
        check_progress(self.index, metrics)?;
        if metrics.len() != self.dp.len() {
            return Err(ObsError::MetricCount {
                index: self.index,
                expected: self.dp.len(),
                got: metrics.len(),
            });
        }
        for (a, m) in self.dp.iter_mut().zip(metrics) {
            *a += m;
        }
        self.touched = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_until_due_and_checks_every_call() {
        let mut l = Local::new();
        assert!(l.fast(0, &[1.0]).is_none(), "unregistered: slow path");
        l.due = u64::MAX - 1;
        assert!(l.fast(0, &[1.0]).is_none(), "unknown index: slow path");
        l.add_index(0, 2);
        assert_eq!(l.fast(0, &[1.0, 2.0]), Some(Ok(())));
        assert_eq!(l.fast(0, &[1.0, 2.0]), Some(Ok(())));
        assert_eq!(l.pending[0].dp, [2.0, 4.0]);
        assert!(matches!(
            l.fast(0, &[1.0]),
            Some(Err(ObsError::MetricCount {
                expected: 2,
                got: 1,
                ..
            }))
        ));
        assert!(matches!(
            l.fast(0, &[1.0, f64::NAN]),
            Some(Err(ObsError::BadMetric { metric: 1, .. }))
        ));
        assert!(matches!(
            l.fast(0, &[-1.0, 0.0]),
            Some(Err(ObsError::BadMetric { metric: 0, .. }))
        ));
        assert_eq!(l.pending[0].dp, [2.0, 4.0], "bad calls leave no trace");
        l.clear();
        assert_eq!(l.pending[0].dp, [0.0, 0.0]);
        assert!(!l.pending[0].touched);
        l.due = 0;
        assert!(l.fast(0, &[1.0, 2.0]).is_none(), "due: slow path");
        l.off = true;
        assert_eq!(l.fast(7, &[f64::NAN]), Some(Ok(())));
    }
}
