//! `tact._tact.IdleGate`: tact-lib's cooperative idle gate for Python programs that issue their
//! own background I/O (spec idletime §6, "Library mode").
//!
//! Waiting releases the GIL, in slices of [`SLICE`] between which pending signals are handled,
//! so Ctrl-C interrupts a wait that could otherwise last as long as the foreground.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use tact_lib::idle::{Counters, IdleError, Permit, Preempt, State, DEFAULT_THRESHOLD};

use crate::settings;

/// Longest stretch of waiting without a look at Python's signal handlers.
const SLICE: Duration = Duration::from_millis(100);

/// A cooperative idle gate for one disk or network interface: enter ``with gate:`` before each
/// background request (one request per block), and optionally report its byte count with
/// ``gate.done(nbytes)`` inside the block. Entering waits until the foreground has left the
/// resource idle for a full preemption interval, so background requests never queue in front of
/// foreground ones. The GIL is released while waiting.
///
/// device: a kernel block device name ("sda", "vda1"), a /dev path, or any path (the disk under
///     its mount). Or interface: a network interface ("eth0", "lo"). Exactly one of the two.
/// preempt: the preemption interval: "auto" (the default: tuned from the gate's counters),
///     a duration string ("50ms"), seconds, or a timedelta. 0 is plain priority.
/// threshold: foreground bytes per look below which the resource counts as idle (default 4096).
///
/// Raises ValueError on an unknown device or interface (naming it and listing those that exist),
/// a negative or malformed preempt, or no resource.
#[pyclass(frozen, module = "tact._tact")]
pub(crate) struct IdleGate {
    gate: tact_lib::idle::IdleGate,
    /// The permit of the request of the current ``with`` block (or ``acquire()``).
    permit: Mutex<Option<Permit>>,
}

const _: () = assert!(
    DEFAULT_THRESHOLD == 4096,
    "IdleGate's signature states 4096"
);

#[pymethods]
impl IdleGate {
    #[new]
    // The default written out, so that help() shows it (a constant shows as `...`).
    #[pyo3(signature = (device = None, *, interface = None, preempt = None, threshold = 4096))]
    fn new(
        device: Option<PathBuf>,
        interface: Option<String>,
        preempt: Option<&Bound<'_, PyAny>>,
        threshold: i64,
    ) -> PyResult<Self> {
        if device.is_none() && interface.is_none() {
            return Err(PyValueError::new_err(
                "an idle gate needs a resource to watch: device= (a block device, or a path on \
                 one) or interface= (a network interface)",
            ));
        }
        let threshold = crate::convert::count("threshold", threshold)?;
        let mut builder = tact_lib::idle::IdleGate::builder().threshold(threshold);
        if let Some(device) = device {
            let Some(device) = device.to_str() else {
                return Err(PyValueError::new_err(format!(
                    "device {device:?} is not valid UTF-8"
                )));
            };
            builder = builder.device(device);
        }
        if let Some(iface) = interface {
            builder = builder.interface(iface);
        }
        builder = builder.preempt(preempt.map(parse_preempt).transpose()?.unwrap_or_default());
        Ok(IdleGate {
            gate: builder.build().map_err(error)?,
            permit: Mutex::new(None),
        })
    }

    /// Waits until the resource has been idle of foreground for a full PI, then admits one
    /// background request; end it with done(nbytes). timeout: seconds, a string or a timedelta;
    /// None waits as long as it takes. Returns False if it timed out.
    #[pyo3(signature = (timeout = None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let timeout = timeout
            .map(|t| settings::duration("timeout", t))
            .transpose()?;
        let mut left = timeout.unwrap_or(Duration::MAX);
        loop {
            let slice = left.min(SLICE);
            let got = py
                .detach(|| self.gate.acquire_timeout(slice))
                .map_err(error)?;
            if let Some(permit) = got {
                // A permit left here by a request already ended with done() is over: dropping
                // it does nothing.
                *self.slot() = Some(permit);
                return Ok(true);
            }
            py.check_signals()?;
            left = left.saturating_sub(slice);
            if left.is_zero() {
                return Ok(false);
            }
        }
    }

    /// The background request completed, having moved nbytes (read plus written, or sent plus
    /// received): they are the program's own and do not count as foreground. Optional: a block
    /// left without it counts its request's I/O as foreground, so the next one waits a PI more.
    /// Raises RuntimeError when no request is outstanding.
    #[pyo3(signature = (nbytes = 0))]
    fn done(&self, py: Python<'_>, nbytes: i64) -> PyResult<()> {
        let bytes = u64::try_from(nbytes)
            .map_err(|_| PyValueError::new_err(format!("nbytes = {nbytes}: must be >= 0")))?;
        py.detach(|| self.gate.done(bytes)).map_err(error)?;
        self.slot().take();
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().acquire(slf.py(), None)?;
        Ok(slf)
    }

    /// Ends the block's request if done() did not.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        let permit = self.slot().take();
        py.detach(|| drop(permit));
        false
    }

    /// A snapshot (tact.IdleStatus): resource, state ("idle", "fg", "bg", "pi"), pi and
    /// pi_left in seconds, auto, outstanding, acquired, waited and busy seconds, own_bytes,
    /// fg_bytes, and the gate's counters.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.gate.status();
        let d = PyDict::new(py);
        d.set_item("resource", &s.resource)?;
        d.set_item("state", state_name(s.state))?;
        d.set_item("pi", s.pi.as_secs_f64())?;
        d.set_item("pi_left", s.pi_left.map(|p| p.as_secs_f64()))?;
        d.set_item("auto", s.auto)?;
        d.set_item("outstanding", s.outstanding)?;
        d.set_item("acquired", s.acquired)?;
        d.set_item("waited", s.waited.as_secs_f64())?;
        d.set_item("busy", s.busy.as_secs_f64())?;
        d.set_item("own_bytes", s.own_bytes)?;
        d.set_item("fg_bytes", s.fg_bytes)?;
        d.set_item("counters", counters(py, &s.counters)?)?;
        Ok(d)
    }
}

impl IdleGate {
    fn slot(&self) -> MutexGuard<'_, Option<Permit>> {
        self.permit.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// "auto" or a duration; a string goes through tact-lib's parser, which names a negative value.
fn parse_preempt(value: &Bound<'_, PyAny>) -> PyResult<Preempt> {
    if let Ok(s) = value.cast::<PyString>() {
        let text: String = s.extract()?;
        return text.parse().map_err(error);
    }
    if value.extract::<f64>().is_ok_and(|x| x < 0.0) {
        return Err(PyValueError::new_err(format!(
            "preempt = {value}: a preemption interval cannot be negative"
        )));
    }
    settings::duration("preempt", value)
        .map(Preempt::Fixed)
        .map_err(|e| {
            if e.is_instance_of::<PyTypeError>(value.py()) {
                PyTypeError::new_err(
                    "preempt must be \"auto\", a duration string such as \"50ms\", seconds, or \
                     a timedelta",
                )
            } else {
                e
            }
        })
}

/// Bad settings and unknown devices are the caller's values (ValueError); unreadable counters
/// are an OSError; misuse of done()/acquire() is a RuntimeError.
fn error(e: IdleError) -> PyErr {
    match &e {
        IdleError::NoResource | IdleError::TwoResources(..) | IdleError::Preempt { .. } => {
            PyValueError::new_err(e.to_string())
        }
        IdleError::Probe(tact_lib::idle::ProbeError::UnknownDevice { .. }) => {
            PyValueError::new_err(e.to_string())
        }
        IdleError::Probe(_) => PyOSError::new_err(e.to_string()),
        IdleError::NotAcquired | IdleError::AlreadyHeld => PyRuntimeError::new_err(e.to_string()),
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Idle => "idle",
        State::Fg => "fg",
        State::Bg => "bg",
        State::Pi => "pi",
    }
}

/// The named counters, and the whole X[s][e] as {"idle": {"f": n, "b": .., "t": .., "i": ..}}.
fn counters<'py>(py: Python<'py>, c: &Counters) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("preempted", c.preempted())?;
    d.set_item("shielded", c.shielded())?;
    d.set_item("found_idle", c.found_idle())?;
    d.set_item("expired_pis", c.expired_pis())?;
    d.set_item("fg_total", c.fg_total())?;
    d.set_item("harm", c.harm())?;
    let x = PyDict::new(py);
    for s in State::ALL {
        let row = PyDict::new(py);
        for (e, name) in tact_lib::idle::Event::ALL
            .into_iter()
            .zip(["f", "b", "t", "i"])
        {
            row.set_item(name, c.get(s, e))?;
        }
        x.set_item(state_name(s), row)?;
    }
    d.set_item("x", x)?;
    Ok(d)
}
