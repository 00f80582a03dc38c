//! Settings of a supervisor, and how the environment sets them for the process-wide one.

use std::path::PathBuf;
use std::time::Duration;

use tact_core::polite::{PoliteConfig, DEFAULT_HALF_LIFE};

/// How often calibrated targets are saved while the program runs (and again at exit).
pub const DEFAULT_SAVE_EVERY: Duration = Duration::from_secs(300);

/// Shortest and longest testpoint period `TACT_TESTPOINT` (or Python's `configure(testpoint=)`)
/// may ask for: below a millisecond the coarse clock of the fast path cannot tell periods apart;
/// above a minute regulation is too slow to react to anything.
pub const PERIOD_RANGE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(60));

/// Everything a [`Supervisor`](crate::Supervisor) needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The regulator's parameters (testpoint period, sign test, bootstrap, hung threshold...).
    pub polite: PoliteConfig,
    /// Persistence key (`TACT_NAME`); None derives it from the executable.
    pub name: Option<String>,
    /// Where targets persist (`<dir>/polite/<key>.json`); None keeps them in memory only.
    pub state_dir: Option<PathBuf>,
    /// Decay-usage half-life h of the arbiter between regulated units.
    pub half_life: Duration,
    /// Interval between saves of the targets while the program runs.
    pub save_every: Duration,
    /// Turn testpoints into no-ops (`TACT_DISABLE=1`).
    pub disabled: bool,
}

impl Default for Config {
    /// The spec's defaults, without persistence.
    fn default() -> Self {
        Config {
            polite: PoliteConfig::default(),
            name: None,
            state_dir: None,
            half_life: DEFAULT_HALF_LIFE,
            save_every: DEFAULT_SAVE_EVERY,
            disabled: false,
        }
    }
}

impl Config {
    /// The defaults with another testpoint period (the suspension s₀ and the hung threshold
    /// follow it, as in [`PoliteConfig::with_period`]).
    pub fn with_period(period: Duration) -> Self {
        Config {
            polite: PoliteConfig::with_period(period),
            ..Config::default()
        }
    }

    /// Settings from the environment, with persistence under the XDG state directory:
    ///
    /// | variable | meaning | default |
    /// | --- | --- | --- |
    /// | `TACT_TESTPOINT` | testpoint period, e.g. `100ms` (1 ms to 60 s) | `200ms` |
    /// | `TACT_NAME` | persistence key | executable name and path hash |
    /// | `TACT_STATE_DIR` | directory of `polite/<key>.json` | `$XDG_STATE_HOME/tact`, else `~/.local/state/tact` |
    /// | `TACT_DISABLE` | `1` makes every testpoint a no-op | `0` |
    ///
    /// A bad value is reported on stderr and replaced by its default: a background program must
    /// not fail to start over a typo in its regulation settings.
    pub fn from_env() -> Self {
        let (config, warnings) = Self::from_vars(|name| std::env::var_os(name));
        for w in warnings {
            eprintln!("tact: {w}");
        }
        config
    }

    /// [`Config::from_env`] over any variable lookup; returns the warnings instead of printing them.
    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> (Self, Vec<String>) {
        let mut warnings = Vec::new();
        let text = |name: &str, warnings: &mut Vec<String>| -> Option<String> {
            let value = var(name)?;
            match value.into_string() {
                Ok(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
                Ok(_) => None,
                Err(_) => {
                    warnings.push(format!("{name} is not valid UTF-8; ignoring it"));
                    None
                }
            }
        };
        let mut config = Config::default();
        if let Some(s) = text("TACT_TESTPOINT", &mut warnings) {
            match humantime::parse_duration(&s) {
                Ok(p) if p >= PERIOD_RANGE.0 && p <= PERIOD_RANGE.1 => {
                    config.polite = PoliteConfig::with_period(p);
                }
                Ok(_) => warnings.push(format!(
                    "TACT_TESTPOINT={s} is outside 1ms..60s; using {}",
                    humantime::format_duration(config.polite.period)
                )),
                Err(e) => warnings.push(format!(
                    "TACT_TESTPOINT={s} is not a duration ({e}); using {}",
                    humantime::format_duration(config.polite.period)
                )),
            }
        }
        if let Some(s) = text("TACT_DISABLE", &mut warnings) {
            match s.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => config.disabled = true,
                "0" | "false" | "no" | "off" => {}
                _ => warnings.push(format!(
                    "TACT_DISABLE={s} is neither 1 nor 0; regulating as usual"
                )),
            }
        }
        config.name = text("TACT_NAME", &mut warnings);
        config.state_dir = Some(match var("TACT_STATE_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => xdg_state_dir(&var),
        });
        (config, warnings)
    }
}

/// `$XDG_STATE_HOME/tact`, else `~/.local/state/tact` (as the `tact` binary does).
fn xdg_state_dir(var: &impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    match var("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("tact"),
        None => {
            let home = var("HOME").unwrap_or_else(|| "/".into());
            PathBuf::from(home).join(".local/state/tact")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(|name| map.get(name).map(Into::into))
    }

    #[test]
    fn defaults_without_variables() {
        let (c, w) = from(&[("HOME", "/home/u")]);
        assert!(w.is_empty());
        assert_eq!(c.polite, PoliteConfig::default());
        assert_eq!(
            c.state_dir,
            Some(PathBuf::from("/home/u/.local/state/tact"))
        );
        assert!(!c.disabled && c.name.is_none());
    }

    #[test]
    fn variables_are_read() {
        let (c, w) = from(&[
            ("TACT_TESTPOINT", "100ms"),
            ("TACT_NAME", "nightly"),
            ("TACT_DISABLE", "1"),
            ("XDG_STATE_HOME", "/x"),
        ]);
        assert!(w.is_empty());
        assert_eq!(c.polite.period, Duration::from_millis(100));
        assert_eq!(c.polite.initial_suspension, Duration::from_millis(100));
        assert_eq!(c.name.as_deref(), Some("nightly"));
        assert!(c.disabled);
        assert_eq!(c.state_dir, Some(PathBuf::from("/x/tact")));
        let (c, _) = from(&[("TACT_STATE_DIR", "/s"), ("XDG_STATE_HOME", "/x")]);
        assert_eq!(c.state_dir, Some(PathBuf::from("/s")));
    }

    #[test]
    fn bad_values_warn_and_keep_the_default() {
        let (c, w) = from(&[
            ("TACT_TESTPOINT", "fast"),
            ("TACT_DISABLE", "maybe"),
            ("TACT_NAME", "  "),
        ]);
        assert_eq!(c.polite.period, Duration::from_millis(200));
        assert!(!c.disabled && c.name.is_none());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("TACT_TESTPOINT=fast") && w[1].contains("TACT_DISABLE=maybe"));
        let (c, w) = from(&[("TACT_TESTPOINT", "2h")]);
        assert_eq!(c.polite.period, Duration::from_millis(200));
        assert!(w[0].contains("outside"));
    }
}
