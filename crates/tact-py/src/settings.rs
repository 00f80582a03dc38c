//! Starting the process-wide supervisor: from `configure()`, or from the environment at the first
//! testpoint, with a persistence key named after the Python script.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use tact_lib::Config;

use crate::convert;

/// Set once the process-wide supervisor runs: its testpoint period, None when regulation is
/// disabled.
static STARTED: OnceLock<Option<Duration>> = OnceLock::new();

/// The running supervisor's testpoint period (starting it from the environment if need be);
/// None when regulation is disabled.
pub(crate) fn period(py: Python<'_>) -> Option<Duration> {
    *STARTED.get_or_init(|| {
        // Fails only when Rust code of the program started tact-lib first: its settings apply.
        let _ = tact_lib::init(from_env(py));
        running_period()
    })
}

fn running_period() -> Option<Duration> {
    tact_lib::supervisor().map(|s| s.config().polite.period)
}

/// Sets up regulation for this process. Must come before the first testpoint, set_priority() or
/// Regulator (RuntimeError otherwise); without it, the environment sets everything up.
///
/// testpoint: testpoint period ("200ms", seconds or a timedelta), 1 ms to 60 s; the first
///     suspension and the hung threshold follow it. Default: TACT_TESTPOINT, else 200 ms.
/// name: persistence key. Default: TACT_NAME, else the script's file name and path.
/// state_dir: targets persist in <state_dir>/polite/<name>.json. Default: TACT_STATE_DIR, else
///     $XDG_STATE_HOME/tact.
/// bootstrap: testpoints of unregulated running that calibrate a first target (default 100).
/// probation: after a first bootstrap, how long execution is capped at a 25% duty cycle in case
///     the target was learnt under load; 0 disables it. Default: none if the bootstrap ran on a
///     quiet machine, else 10 minutes.
/// max_suspension: longest suspension, at least the testpoint period (default 60 s).
/// disabled: make every testpoint return at once, unregulated; its arguments are still checked
///     (a negative progress raises ValueError) (default: TACT_DISABLE).
///
/// Arguments left None keep the environment's setting or the default.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (
    testpoint = None,
    *,
    name = None,
    state_dir = None,
    bootstrap = None,
    probation = None,
    max_suspension = None,
    disabled = None,
))]
pub(crate) fn configure(
    py: Python<'_>,
    testpoint: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    state_dir: Option<PathBuf>,
    bootstrap: Option<i64>,
    probation: Option<&Bound<'_, PyAny>>,
    max_suspension: Option<&Bound<'_, PyAny>>,
    disabled: Option<bool>,
) -> PyResult<()> {
    let mut config = from_env(py);
    if let Some(p) = testpoint {
        let period = duration("testpoint", p)?;
        let (lo, hi) = tact_lib::PERIOD_RANGE;
        // 0 is validate()'s to refuse ("must be greater than zero").
        if !period.is_zero() && (period < lo || period > hi) {
            return Err(PyValueError::new_err(format!(
                "testpoint = {}: outside 1ms..60s (as TACT_TESTPOINT)",
                humantime::format_duration(period)
            )));
        }
        // The initial suspension and the hung threshold follow the period.
        config.polite = tact_lib::PoliteConfig::with_period(period);
    }
    if let Some(n) = name {
        config.name = Some(n);
    }
    if let Some(dir) = state_dir {
        config.state_dir = Some(dir);
    }
    if let Some(b) = bootstrap {
        config.polite.bootstrap = match convert::count("bootstrap", b)? {
            0 => return Err(PyValueError::new_err("bootstrap = 0: must be at least 1")),
            b => b,
        };
    }
    if let Some(p) = probation {
        config.polite.probation = Some(duration("probation", p)?);
    }
    if let Some(s) = max_suspension {
        let cap = duration("max_suspension", s)?;
        // Suspensions start at one testpoint period and double up to the cap.
        if cap < config.polite.period {
            return Err(PyValueError::new_err(format!(
                "max_suspension = {}: must be at least the testpoint period ({})",
                humantime::format_duration(cap),
                humantime::format_duration(config.polite.period)
            )));
        }
        config.polite.max_suspension = cap;
    }
    if let Some(d) = disabled {
        config.disabled = d;
    }
    config
        .polite
        .validate()
        .map_err(|e| convert::error(e.into()))?;
    let mut started = Err(convert::already_started());
    STARTED.get_or_init(|| {
        started = tact_lib::init(config).map_err(convert::error);
        running_period()
    });
    started
}

/// [`Config::from_env`], keyed by the script when `TACT_NAME` is not set.
fn from_env(py: Python<'_>) -> Config {
    let mut config = Config::from_env();
    if config.name.is_none() {
        config.name = script_key(py);
    }
    config
}

/// Every Python program runs as the same executable, so the key tact-lib derives from the
/// executable would mix the targets of all of them: the script names the program instead, as
/// `<file name>-<hash of its full path>-py`. None for `python -c` and the interactive prompt.
fn script_key(py: Python<'_>) -> Option<String> {
    let argv0: String = py
        .import("sys")
        .and_then(|sys| sys.getattr("argv"))
        .and_then(|argv| argv.get_item(0))
        .and_then(|a| a.extract())
        .ok()?;
    if argv0.is_empty() || argv0 == "-c" || argv0 == "-" {
        return None;
    }
    let path = std::fs::canonicalize(&argv0).ok()?;
    let file = path.file_name()?.to_string_lossy().into_owned();
    Some(format!(
        "{file}-{:016x}-py",
        fnv1a(path.as_os_str().as_bytes())
    ))
}

/// FNV-1a: a hash that stays the same across Rust versions, so keys do too.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A duration given as a string (`"200ms"`), a number of seconds or a `datetime.timedelta`.
pub(crate) fn duration(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    if let Ok(s) = value.cast::<PyString>() {
        let text: String = s.extract()?;
        return humantime::parse_duration(text.trim()).map_err(|e| {
            PyValueError::new_err(format!("{name}={text:?} is not a duration ({e})"))
        });
    }
    let seconds: f64 = if value.hasattr("total_seconds")? {
        value.call_method0("total_seconds")?.extract()?
    } else {
        value.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{name} must be a duration: a string such as \"200ms\", seconds, or a timedelta"
            ))
        })?
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        PyValueError::new_err(format!(
            "{name} must be a finite number of seconds >= 0, got {seconds}"
        ))
    })
}
