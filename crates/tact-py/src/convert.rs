//! Between Python values and tact-lib's: call arguments, errors, statistics.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tact_lib::{Decision, Error, ObsError, Phase, UnitStats};

/// Metrics up to this count are read onto the stack: the fast path allocates nothing.
const INLINE_METRICS: usize = 8;

/// A metric-set index: a Python int in the range of tact-lib's `u32`.
pub(crate) fn index(index: i64) -> PyResult<u32> {
    u32::try_from(index).map_err(|_| {
        PyValueError::new_err(format!(
            "index {index} is out of range: use 0 to {}",
            u32::MAX
        ))
    })
}

/// A count argument `name` (a Python int) that must not be negative: PyO3's own conversion to an
/// unsigned type raises OverflowError naming no argument.
pub(crate) fn count<T: TryFrom<i64>>(name: &str, value: i64) -> PyResult<T> {
    T::try_from(value).map_err(|_| {
        PyValueError::new_err(format!(
            "{name} = {value}: {}",
            if value < 0 {
                "must not be negative"
            } else {
                "too large"
            }
        ))
    })
}

/// Reads the metrics of a call (ints or floats) and runs `f` on them.
#[inline]
pub(crate) fn with_metrics<R>(
    metrics: &Bound<'_, PyTuple>,
    f: impl FnOnce(&[f64]) -> PyResult<R>,
) -> PyResult<R> {
    let n = metrics.len();
    if n <= INLINE_METRICS {
        let mut buf = [0.0; INLINE_METRICS];
        for (i, (slot, item)) in buf.iter_mut().zip(metrics.iter_borrowed()).enumerate() {
            *slot = number(i, item)?;
        }
        f(&buf[..n])
    } else {
        let values = metrics
            .iter_borrowed()
            .enumerate()
            .map(|(i, item)| number(i, item))
            .collect::<PyResult<Vec<f64>>>()?;
        f(&values)
    }
}

fn number(metric: usize, item: Borrowed<'_, '_, PyAny>) -> PyResult<f64> {
    item.extract::<f64>().map_err(|_| {
        let kind = item
            .get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string());
        PyTypeError::new_err(format!(
            "metric {metric} must be a number (progress since the last call), not {kind}"
        ))
    })
}

pub(crate) fn obs_error(e: ObsError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Bad progress and bad settings are the caller's values (ValueError); a failed save is an
/// OSError; a late `configure()` is a RuntimeError.
pub(crate) fn error(e: Error) -> PyErr {
    match e {
        Error::Progress(e) => obs_error(e),
        Error::Config(_) | Error::Priority(_) => PyValueError::new_err(e.to_string()),
        Error::Save(_) => PyOSError::new_err(e.to_string()),
        Error::AlreadyStarted => already_started(),
    }
}

pub(crate) fn already_started() -> PyErr {
    PyRuntimeError::new_err(
        "tact is already running in this process: call configure() before the first \
         testpoint, set_priority() or Regulator",
    )
}

/// A unit's statistics as a dict (durations in seconds), typed as `tact.Stats` in the stubs.
pub(crate) fn stats<'py>(py: Python<'py>, s: &UnitStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (phase, bootstrap_done) = match s.phase {
        Phase::Bootstrap { done, .. } => ("bootstrap", Some(done)),
        Phase::Probation { .. } => ("probation", None),
        Phase::Regulated => ("regulated", None),
    };
    let last = s.last.map(|d| match d {
        Decision::Run => "run",
        Decision::Indeterminate => "indeterminate",
        Decision::Suspend(_) => "suspend",
    });
    d.set_item("phase", phase)?;
    d.set_item("bootstrap_done", bootstrap_done)?;
    d.set_item("priority", s.priority)?;
    d.set_item("testpoints", s.testpoints)?;
    d.set_item("suspensions", s.suspensions)?;
    d.set_item("suspended", s.suspended.as_secs_f64())?;
    d.set_item("waited", s.waited.as_secs_f64())?;
    d.set_item("hung", s.hung)?;
    d.set_item("last", last)?;
    d.set_item(
        "last_suspension",
        s.last.map_or(0.0, |d| d.suspension().as_secs_f64()),
    )?;
    Ok(d)
}
