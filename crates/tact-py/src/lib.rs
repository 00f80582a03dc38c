//! `tact._tact`, the native module of the Python package `tact` (python/): tact-lib's in-process
//! polite regulation (MS Manners, spec `progress-regulation.md` sections 2.6 and 2.7) for Python
//! programs. The pure-Python `tact/__init__.py` re-exports it; `_tact.pyi` types it.
//!
//! A testpoint that may block releases the GIL, so the program's other threads (unregulated, or
//! regulated and holding the run token) go on meanwhile; one that cannot block keeps it and costs
//! little more than a Python call (see the `batch` module).

mod batch;
mod convert;
mod idle;
mod regulator;
mod settings;
mod tune;

use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use batch::Batch;

thread_local! {
    /// The calling thread's calls not yet handed to tact-lib's unit of the same thread.
    static THREAD: RefCell<Batch> = const { RefCell::new(Batch::new()) };
}

/// Reports the progress made since the calling thread's previous testpoint, and returns when
/// the thread may go on.
///
/// Most calls return at once. Once per testpoint period the thread's regulator compares its
/// progress rate with a target calibrated on this machine, and the call blocks while the program
/// should defer: while the rate is significantly low (contention with more important work), and
/// while another regulated thread of the program has its turn. The GIL is released meanwhile.
/// A thread's first call makes it a regulated unit until it exits.
///
/// index: the metric set, 0 for most programs (one per phase of work, each with its target).
/// metrics: progress increments since the previous call (bytes, items...), ints or floats >= 0,
///     as many as the index had before.
///
/// Raises ValueError on NaN, infinite or negative progress, no metric, or a changed metric count.
#[pyfunction]
#[pyo3(signature = (index, *metrics))]
fn testpoint(py: Python<'_>, index: i64, metrics: &Bound<'_, PyTuple>) -> PyResult<()> {
    let index = convert::index(index)?;
    convert::with_metrics(metrics, |m| {
        // Neither path runs Python code while the batch is borrowed, so it is never re-entered.
        let kept = THREAD.with(|b| b.borrow_mut().keep(index, m));
        if kept.map_err(convert::obs_error)? {
            return Ok(());
        }
        let Some(period) = settings::period(py) else {
            return Ok(());
        };
        py.detach(|| {
            THREAD.with(|b| {
                b.borrow_mut()
                    .testpoint(index, m, period, tact_lib::testpoint)
            })
        })
        .map_err(convert::error)
    })
}

/// Sets the calling thread's priority among the program's regulated units: a higher one always
/// runs first when eligible. The default is 0; it may be set before the first testpoint.
/// A priority outside -100..100 (the tact daemon's range) raises ValueError.
#[pyfunction]
fn set_priority(py: Python<'_>, priority: i32) -> PyResult<()> {
    settings::period(py);
    tact_lib::set_priority(priority).map_err(convert::error)
}

/// What the calling thread's unit has been through, as a dict (tact.Stats): phase, testpoints,
/// suspensions, suspended and waited seconds, and the last decision. None before the thread's
/// first testpoint.
#[pyfunction]
fn stats(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    tact_lib::stats()
        .map(|s| convert::stats(py, &s))
        .transpose()
}

/// Saves the calibrated targets now (they are also saved every 5 minutes and at exit).
#[pyfunction]
fn flush(py: Python<'_>) -> PyResult<()> {
    py.detach(tact_lib::flush).map_err(convert::error)
}

#[pymodule]
fn _tact(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(testpoint, m)?)?;
    m.add_function(wrap_pyfunction!(set_priority, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(settings::configure, m)?)?;
    m.add_class::<regulator::Regulator>()?;
    m.add_class::<tune::Controller>()?;
    m.add_class::<tune::Bottleneck>()?;
    m.add_class::<idle::IdleGate>()?;
    Ok(())
}
