//! `tact.Regulator`: an explicit regulated unit ([`tact_lib::Polite`]), closed by a `with` block.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tact_lib::{Error, Polite};

use crate::batch::Batch;
use crate::{convert, settings};

/// A regulated unit of its own, for work that moves between threads or kinds of work that should
/// be judged apart. It takes turns with the program's other regulated threads and units. Leaving
/// a `with` block (or close()) ends its regulation and frees its turn at once:
///
///     with tact.Regulator(priority=1) as r:
///         for item in work:
///             process(item)
///             r.testpoint(0, 1)
#[pyclass(frozen, module = "tact._tact")]
pub(crate) struct Regulator {
    /// None when regulation is disabled: calls are only checked.
    period: Option<Duration>,
    /// Locked without the GIL whenever a testpoint may block, so that another thread using the
    /// same regulator waits without stopping the program.
    inner: Mutex<Inner>,
}

struct Inner {
    /// None once closed.
    unit: Option<Polite>,
    batch: Batch,
}

/// Hand-overs without the GIL cannot build Python errors.
enum Slow {
    Closed,
    Failed(Error),
}

#[pymethods]
impl Regulator {
    #[new]
    #[pyo3(signature = (priority = 0))]
    fn new(py: Python<'_>, priority: i32) -> PyResult<Self> {
        let period = settings::period(py);
        let mut unit = Polite::new();
        unit.set_priority(priority).map_err(convert::error)?;
        Ok(Regulator {
            period,
            inner: Mutex::new(Inner {
                unit: Some(unit),
                batch: Batch::new(),
            }),
        })
    }

    /// As tact.testpoint(), for this unit.
    #[pyo3(signature = (index, *metrics))]
    fn testpoint(&self, py: Python<'_>, index: i64, metrics: &Bound<'_, PyTuple>) -> PyResult<()> {
        let index = convert::index(index)?;
        convert::with_metrics(metrics, |m| {
            // The fast path holds the GIL; it gives way to a thread inside a hand-over.
            if let Ok(mut inner) = self.inner.try_lock() {
                if inner.unit.is_none() {
                    return Err(closed());
                }
                if inner.batch.keep(index, m).map_err(convert::obs_error)? {
                    return Ok(());
                }
            }
            let Some(period) = self.period else {
                return Ok(());
            };
            let slow = py.detach(|| {
                let mut inner = self.lock();
                let Inner { unit, batch } = &mut *inner;
                let unit = unit.as_mut().ok_or(Slow::Closed)?;
                batch
                    .testpoint(index, m, period, |i, dp| unit.testpoint(i, dp))
                    .map_err(Slow::Failed)
            });
            slow.map_err(|e| match e {
                Slow::Closed => closed(),
                Slow::Failed(e) => convert::error(e),
            })
        })
    }

    /// Sets this unit's priority: a higher one always runs first when eligible.
    fn set_priority(&self, py: Python<'_>, priority: i32) -> PyResult<()> {
        self.with_unit(py, |u| u.set_priority(priority))?
            .map_err(convert::error)
    }

    #[getter]
    fn priority(&self, py: Python<'_>) -> PyResult<i32> {
        self.with_unit(py, |u| u.priority())
    }

    /// What this unit has been through (see tact.stats()); None before its first testpoint.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match self.with_unit(py, |u| u.stats())? {
            Some(s) => convert::stats(py, &s).map(Some),
            None => Ok(None),
        }
    }

    /// Leaves regulation, freeing the run token if this unit holds it. Idempotent.
    fn close(&self, py: Python<'_>) {
        // Leaving may wait for the machine-wide coordinator; a hand-over may hold the lock.
        let unit = py.detach(|| self.lock().unit.take());
        drop(unit);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}

impl Regulator {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic in a hand-over leaves the batch consistent: keep regulating.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open unit. `f` takes the supervisor's lock only briefly, so it keeps the
    /// GIL, unless a hand-over of another thread holds this regulator.
    fn with_unit<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Polite) -> R + Send,
    ) -> PyResult<R> {
        let run = |inner: &mut Inner| inner.unit.as_mut().map(f);
        let done = match self.inner.try_lock() {
            Ok(mut inner) => run(&mut inner),
            Err(TryLockError::Poisoned(p)) => run(&mut p.into_inner()),
            Err(TryLockError::WouldBlock) => py.detach(|| run(&mut self.lock())),
        };
        done.ok_or_else(closed)
    }
}

fn closed() -> PyErr {
    PyRuntimeError::new_err("this Regulator is closed")
}
