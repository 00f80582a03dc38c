//! Policies by name, for hosts (pools, `tact tune`, the Python executor, benchmarks) that let the
//! user choose a controller: `tcc`, `tcc:p=0.25,q=0.14,w=0.39`, `tcc:fast=false,warm=12`,
//! `tcc:util=0.9,saturated=0.97,room=0.02`, `tcc:psi=1`, `static:8` (or `fixed:8`), `aimd`, `vegas`, `gradient2`, `envoy`, `hill`,
//! `vegas+`, `vegas++:x1=RATE` (the paper's Vegas revisions, X₁ in tasks per second at one worker).

use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

use super::baselines::{
    Aimd, AimdParams, BaselineError, Bounds, Envoy, EnvoyParams, Fixed, Gradient2, Gradient2Params,
    HillClimbing, HillClimbingParams, Vegas, VegasParams, VegasPlus, VegasPlusParams,
};
use super::params::{ParamError, TuneParams};
use super::policy::Policy;
use super::tcc::Tcc;

/// Every name [`policy_from_spec`] accepts, for help texts.
pub const POLICY_NAMES: &[&str] = &[
    "tcc",
    "static",
    "fixed",
    "aimd",
    "vegas",
    "gradient2",
    "envoy",
    "hill",
    "vegas+",
    "vegas++",
];

/// The TuneParams fields a `tcc:` spec may set (n_init and n_max come from the host).
const TCC_KEYS: &[&str] = &[
    "p",
    "q",
    "w",
    "r",
    "delta",
    "beta",
    "alpha",
    "n_star",
    "batch_min",
    "batch_max",
    "autocorr_max",
    "trim",
    "dwell",
    "max_dwell",
    "steady_factor",
    "steady_min",
    "steady_max",
    "steady_jitter",
    "shift",
    "shift_hard",
    "n_min",
    "remove",
    "slow_start",
    "fast",
    "warm",
    "util",
    "saturated",
    "room",
    "psi",
    "psi_full",
    "psi_some",
    "allow_unfriendly",
    "max_samples",
    "trace_capacity",
    "seed",
];

/// A policy spec that does not parse or whose values are out of range. Each message names the
/// part at fault.
#[derive(Debug, Error)]
pub enum SpecError {
    #[error("unknown policy {name:?}; valid policies: {}", POLICY_NAMES.join(", "))]
    UnknownPolicy { name: String },
    #[error("policy {policy} takes no options, got {options:?}")]
    UnexpectedOptions { policy: String, options: String },
    #[error("{policy}: unknown option {key:?}; valid options: {}", TCC_KEYS.join(", "))]
    UnknownKey { policy: String, key: String },
    #[error("{policy}: option {key} = {value:?}: {why}")]
    BadValue {
        policy: String,
        key: String,
        value: String,
        why: String,
    },
    #[error("tcc: {0}")]
    Tcc(#[from] ParamError),
    #[error("{policy}: {source}")]
    Baseline {
        policy: String,
        source: BaselineError,
    },
}

/// Builds the policy `spec` names, starting at `n_init` workers (clamped into range) and never
/// above `n_max`.
pub fn policy_from_spec(
    spec: &str,
    n_init: usize,
    n_max: usize,
) -> Result<Box<dyn Policy + Send>, SpecError> {
    let spec = spec.trim();
    let (name, options) = match spec.split_once(':') {
        Some((name, options)) => (name.trim(), Some(options.trim())),
        None => (spec, None),
    };
    let baseline = |source| SpecError::Baseline {
        policy: name.to_string(),
        source,
    };
    let no_options = || match options {
        Some(options) => Err(SpecError::UnexpectedOptions {
            policy: name.to_string(),
            options: options.to_string(),
        }),
        None => Ok(()),
    };
    let bounds = || Bounds::new(n_init, 1, n_max).map_err(baseline);
    Ok(match name {
        "tcc" => Box::new(Tcc::new(tcc_params(options.unwrap_or(""), n_init, n_max)?)?),
        "static" | "fixed" => Box::new(fixed(name, options, n_max)?),
        "aimd" => {
            no_options()?;
            Box::new(Aimd::new(AimdParams::spec(), bounds()?).map_err(baseline)?)
        }
        "vegas" => {
            no_options()?;
            Box::new(Vegas::new(VegasParams::default(), bounds()?).map_err(baseline)?)
        }
        "gradient2" => {
            no_options()?;
            Box::new(Gradient2::new(Gradient2Params::default(), bounds()?).map_err(baseline)?)
        }
        "envoy" => {
            no_options()?;
            Box::new(Envoy::new(EnvoyParams::default(), bounds()?).map_err(baseline)?)
        }
        "hill" => {
            no_options()?;
            let params = HillClimbingParams::default();
            Box::new(HillClimbing::new(params, bounds()?).map_err(baseline)?)
        }
        "vegas+" => {
            no_options()?;
            Box::new(VegasPlus::new(VegasPlusParams::plus(), bounds()?).map_err(baseline)?)
        }
        "vegas++" => {
            let params = VegasPlusParams::plus_plus(vegas_x1(options)?);
            Box::new(VegasPlus::new(params, bounds()?).map_err(baseline)?)
        }
        _ => {
            return Err(SpecError::UnknownPolicy {
                name: name.to_string(),
            })
        }
    })
}

fn fixed(name: &str, size: Option<&str>, n_max: usize) -> Result<Fixed, SpecError> {
    let bad = |value: &str, why: String| SpecError::BadValue {
        policy: name.to_string(),
        key: "size".to_string(),
        value: value.to_string(),
        why,
    };
    let size = size.ok_or_else(|| bad("", format!("needs a worker count, e.g. {name}:8")))?;
    let n: usize = size
        .parse()
        .map_err(|_| bad(size, "not a whole number of workers".to_string()))?;
    if n > n_max {
        return Err(bad(size, format!("exceeds the host's maximum of {n_max}")));
    }
    Fixed::new(n).map_err(|source| SpecError::Baseline {
        policy: name.to_string(),
        source,
    })
}

/// Vegas++'s single-worker throughput from `x1=RATE`: it is measured offline, so the host must
/// give it. Its range is checked by [`VegasPlus::new`].
fn vegas_x1(options: Option<&str>) -> Result<f64, SpecError> {
    let bad = |value: &str, why: &str| SpecError::BadValue {
        policy: "vegas++".to_string(),
        key: "x1".to_string(),
        value: value.to_string(),
        why: why.to_string(),
    };
    let needs = "needs the single-worker throughput measured offline, e.g. vegas++:x1=35.7";
    let value = match options.map(|o| o.split_once('=')) {
        Some(Some((key, value))) if key.trim() == "x1" => value.trim(),
        Some(_) => return Err(bad(options.unwrap_or(""), needs)),
        None => return Err(bad("", needs)),
    };
    value
        .parse()
        .map_err(|_| bad(value, "not a number of tasks per second"))
}

/// The parameters of a `tcc` spec, for hosts that act on some of them (`tact tune` reads PSI
/// only with `psi` on); None for any other policy. Checks the keys and values but not the
/// parameters as a whole ([`policy_from_spec`] does).
pub fn tcc_params_from_spec(
    spec: &str,
    n_init: usize,
    n_max: usize,
) -> Result<Option<TuneParams>, SpecError> {
    match spec.trim().split_once(':') {
        Some((name, options)) if name.trim() == "tcc" => {
            tcc_params(options.trim(), n_init, n_max).map(Some)
        }
        None if spec.trim() == "tcc" => tcc_params("", n_init, n_max).map(Some),
        _ => Ok(None),
    }
}

/// The defaults of [`TuneParams`], overridden by `key=value` pairs separated by commas.
fn tcc_params(options: &str, n_init: usize, n_max: usize) -> Result<TuneParams, SpecError> {
    let mut params = TuneParams {
        n_max,
        ..TuneParams::default()
    };
    for pair in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| SpecError::BadValue {
            policy: "tcc".to_string(),
            key: pair.to_string(),
            value: String::new(),
            why: "expected key=value".to_string(),
        })?;
        set_tcc_field(&mut params, key.trim(), value.trim())?;
    }
    // Not `clamp`: it panics on an n_min above n_max, which validation refuses with its own
    // message (`tcc:n_min=9` beside `--max 8`).
    params.n_init = n_init.max(params.n_min.max(1)).min(params.n_max.max(1));
    Ok(params)
}

fn set_tcc_field(params: &mut TuneParams, key: &str, value: &str) -> Result<(), SpecError> {
    let bad = |why: String| SpecError::BadValue {
        policy: "tcc".to_string(),
        key: key.to_string(),
        value: value.to_string(),
        why,
    };
    fn num<T: FromStr>(value: &str) -> Result<T, String> {
        value
            .parse()
            .map_err(|_| format!("not a valid {}", std::any::type_name::<T>()))
    }
    // Switches read as people write them on a command line.
    let flag = |value: &str| -> Result<bool, String> {
        match value {
            "true" | "1" | "on" | "yes" => Ok(true),
            "false" | "0" | "off" | "no" => Ok(false),
            _ => Err("not a switch (true or false, 1 or 0, on or off)".to_string()),
        }
    };
    let dur = |value: &str| -> Result<Duration, String> {
        humantime::parse_duration(value).map_err(|e| format!("not a duration ({e})"))
    };
    let p = params;
    let set = match key {
        "p" => num(value).map(|v| p.p = v),
        "q" => num(value).map(|v| p.q = v),
        "w" => num(value).map(|v| p.w = v),
        "r" => num(value).map(|v| p.r = v),
        "delta" => num(value).map(|v| p.delta = v),
        "beta" => num(value).map(|v| p.beta = v),
        "alpha" => num(value).map(|v| p.alpha = v),
        "n_star" => num(value).map(|v| p.n_star = v),
        "batch_min" => num(value).map(|v| p.batch_min = v),
        "batch_max" => num(value).map(|v| p.batch_max = v),
        "autocorr_max" => num(value).map(|v| p.autocorr_max = v),
        "trim" => num(value).map(|v| p.trim = v),
        "dwell" => dur(value).map(|v| p.dwell = v),
        "max_dwell" => dur(value).map(|v| p.max_dwell = v),
        "steady_factor" => num(value).map(|v| p.steady_factor = v),
        "steady_min" => dur(value).map(|v| p.steady_min = v),
        "steady_max" => dur(value).map(|v| p.steady_max = v),
        "steady_jitter" => num(value).map(|v| p.steady_jitter = v),
        "shift" => num(value).map(|v| p.shift = v),
        "shift_hard" => num(value).map(|v| p.shift_hard = v),
        "n_min" => num(value).map(|v| p.n_min = v),
        "remove" => flag(value).map(|v| p.remove = v),
        "slow_start" => flag(value).map(|v| p.slow_start = v),
        "fast" => flag(value).map(|v| p.fast = v),
        // A count, or "none" for a cold start.
        "warm" => match value {
            "none" => {
                p.warm = None;
                Ok(())
            }
            _ => num(value).map(|v| p.warm = Some(v)),
        },
        // The bottleneck hint's target; it acts only when the host reports a utilization.
        "util" => num(value).map(|v| p.util = v),
        "saturated" => num(value).map(|v| p.saturated = v),
        "room" => num(value).map(|v| p.room = v),
        // PSI as a saturation hint; it acts only when the host reads pressure.
        "psi" => flag(value).map(|v| p.psi = v),
        "psi_full" => num(value).map(|v| p.psi_full = v),
        "psi_some" => num(value).map(|v| p.psi_some = v),
        "allow_unfriendly" => flag(value).map(|v| p.allow_unfriendly = v),
        "max_samples" => num(value).map(|v| p.max_samples = v),
        "trace_capacity" => num(value).map(|v| p.trace_capacity = v),
        "seed" => num(value).map(|v| p.seed = v),
        _ => {
            return Err(SpecError::UnknownKey {
                policy: "tcc".to_string(),
                key: key.to_string(),
            })
        }
    };
    set.map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tcc_key_is_settable() {
        for key in TCC_KEYS {
            let value = match *key {
                "dwell" | "max_dwell" | "steady_min" | "steady_max" => "1s",
                "remove" | "allow_unfriendly" | "slow_start" | "fast" | "psi" => "true",
                _ => "1",
            };
            let mut params = TuneParams::default();
            assert!(
                set_tcc_field(&mut params, key, value).is_ok(),
                "{key} is listed but not settable"
            );
        }
    }

    #[test]
    fn switches_take_words_and_digits() {
        for (value, on) in [("1", true), ("on", true), ("true", true), ("0", false)] {
            let params = tcc_params_from_spec(&format!("tcc:psi={value}"), 2, 8)
                .unwrap()
                .unwrap();
            assert_eq!(params.psi, on, "{value}");
        }
        let e = tcc_params_from_spec("tcc:psi=2", 2, 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("psi") && e.contains("not a switch"), "{e}");
        assert!(tcc_params_from_spec("static:3", 2, 8).unwrap().is_none());
        assert!(!tcc_params_from_spec(" tcc ", 2, 8).unwrap().unwrap().psi);
    }

    #[test]
    fn an_n_min_above_n_max_is_refused_not_a_panic() {
        let e = policy_from_spec("tcc:n_min=9", 2, 8)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("n_max = 8: must be at least n_min"), "{e}");
    }
}
