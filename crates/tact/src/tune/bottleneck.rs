//! `tact tune --bottleneck`: what the bottleneck hint reads (`docs/tune.md`, "The bottleneck
//! hint"). The forms and their meters are `tact_linux::probe::bottleneck`'s, shared with the
//! benchmark's driver: `cpu:LIST`, `psi:RESOURCE`, `disk:DEV[@iops=N]`, `net:IF@RATE[,rx]`.
//! This side names the option in errors and watches for a cap that cannot be right.

use anyhow::{Context, Result};
use tact_linux::probe::bottleneck::{self as probe, BadSpec};

pub use tact_linux::probe::bottleneck::BottleneckSpec;

/// Readings in a row above [`OVER_CAP`] before `tact tune` says the cap is wrong: a second of
/// them at the 100 ms hint period, longer than any burst a shaper or throttle lets through.
const OVER_CAP_READINGS: u32 = 10;
/// A rate this far above the cap given is more than counter noise.
const OVER_CAP: f64 = 1.2;

/// Parses a `--bottleneck` value (clap's value parser).
pub fn parse_bottleneck(s: &str) -> Result<BottleneckSpec, String> {
    s.parse().map_err(|e: BadSpec| e.to_string())
}

/// The open meter.
pub struct Bottleneck {
    spec: BottleneckSpec,
    meter: probe::Bottleneck,
    over_cap: OverCap,
}

impl Bottleneck {
    /// Opens the meter; fails naming the option and what is missing (a CPU, a PSI file, a
    /// device or an interface, with the ones this machine has).
    pub fn open(spec: &BottleneckSpec) -> Result<Self> {
        let meter =
            probe::Bottleneck::open(spec).with_context(|| format!("--bottleneck {spec}"))?;
        Ok(Bottleneck {
            spec: spec.clone(),
            meter,
            over_cap: OverCap::default(),
        })
    }

    pub fn spec(&self) -> &BottleneckSpec {
        &self.spec
    }

    /// The utilization since the previous call; None when nothing can be said yet. Says once
    /// when a rate against a cap stays well above it: the hint then reads "saturated" all the
    /// time and TCC runs as without it.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        let u = self.meter.sample()?;
        if let Some(u) = u.filter(|_| self.meter.against_a_cap()) {
            if self.over_cap.observe(u) {
                eprintln!(
                    "tact: tune: --bottleneck {}: the rate has been {:.0}% of the cap given for \
                     a second; the cap is below what the device or link does, so the hint reads \
                     it as saturated",
                    self.spec,
                    u * 100.0
                );
            }
        }
        Ok(u)
    }
}

/// Counts readings in a row above a cap, to say once that the cap is wrong.
#[derive(Debug, Default)]
struct OverCap {
    in_a_row: u32,
    said: bool,
}

impl OverCap {
    /// Whether to say it now.
    fn observe(&mut self, u: f64) -> bool {
        self.in_a_row = if u > OVER_CAP { self.in_a_row + 1 } else { 0 };
        if self.said || self.in_a_row < OVER_CAP_READINGS {
            return false;
        }
        self.said = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_parser_takes_every_form() {
        for s in [
            "cpu:0,2-3",
            "psi:io",
            "disk:vda",
            "disk:/dev/vda1@riops=300",
            "net:lo@50mbit",
            "net:eth0@1gbit,rx",
        ] {
            assert!(parse_bottleneck(s).is_ok(), "{s}");
        }
        let e = parse_bottleneck("gpu:0").unwrap_err();
        assert!(e.contains("disk:DEV") && e.contains("net:IF@RATE"), "{e}");
    }

    #[test]
    fn a_cap_is_called_wrong_once_after_a_second_above_it() {
        let mut o = OverCap::default();
        // Bursts above the cap, broken by a reading within it, never count as a second.
        for _ in 0..5 {
            assert!((0..OVER_CAP_READINGS - 1).all(|_| !o.observe(3.0)));
            assert!(!o.observe(1.1));
        }
        let said: Vec<bool> = (0..3 * OVER_CAP_READINGS).map(|_| o.observe(2.0)).collect();
        assert_eq!(said.iter().filter(|&&s| s).count(), 1, "{said:?}");
        assert!(said[OVER_CAP_READINGS as usize - 1]);
    }

    #[test]
    fn a_cpu_or_device_the_machine_lacks_is_refused_at_the_start() {
        let msg = |spec: &str| {
            let e = Bottleneck::open(&parse_bottleneck(spec).unwrap())
                .err()
                .unwrap();
            format!("{e:#}")
        };
        let m = msg("cpu:100000");
        assert!(
            m.contains("--bottleneck cpu:100000") && m.contains("no line for cpu100000"),
            "{m}"
        );
        let m = msg("disk:/dev/no-such-disk-tact@iops=5");
        assert!(
            m.starts_with("--bottleneck disk:/dev/no-such-disk-tact@iops=5: ")
                && m.contains("this machine has:"),
            "{m}"
        );
        let m = msg("net:no-such-if@1gbit,rx");
        assert!(
            m.starts_with("--bottleneck net:no-such-if@1gbit,rx: ") && m.contains("lo"),
            "{m}"
        );
    }
}
