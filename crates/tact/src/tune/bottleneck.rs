//! `tact tune --bottleneck`: what the bottleneck hint reads (`docs/tune.md`, "The bottleneck
//! hint"). `cpu:LIST` is the busy fraction of those CPUs from `/proc/stat`; `psi:RESOURCE` the
//! fraction of time some task waited for it (`/proc/pressure/RESOURCE`).

use std::fmt;

use anyhow::{Context, Result};
use tact_linux::probe::busy::{CpuBusy, CpuStat, Pressure};
use tact_linux::probe::psi::PsiReader;

/// A `--bottleneck` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BottleneckSpec {
    Cpus(Vec<usize>),
    Psi(String),
}

impl fmt::Display for BottleneckSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BottleneckSpec::Cpus(cpus) => {
                let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
                write!(f, "cpu:{}", list.join(","))
            }
            BottleneckSpec::Psi(r) => write!(f, "psi:{r}"),
        }
    }
}

/// Parses `cpu:LIST` (`cpu:1`, `cpu:0,2-3`) or `psi:cpu|io|memory` (clap's value parser).
pub fn parse_bottleneck(s: &str) -> Result<BottleneckSpec, String> {
    match s.split_once(':') {
        Some(("cpu", list)) => parse_cpu_list(list).map(BottleneckSpec::Cpus),
        Some(("psi", r)) if tact_linux::probe::psi::RESOURCES.contains(&r) => {
            Ok(BottleneckSpec::Psi(r.to_string()))
        }
        Some(("psi", r)) => Err(format!(
            "unknown PSI resource {r:?}; use psi:cpu, psi:io or psi:memory"
        )),
        _ => Err("expected cpu:LIST (e.g. cpu:1 or cpu:0,2-3) or psi:cpu|io|memory".into()),
    }
}

/// A kernel-style CPU list: numbers and ranges separated by commas, sorted and deduplicated.
fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let num = |s: &str| {
        s.trim()
            .parse::<usize>()
            .map_err(|_| format!("{s:?} in the CPU list {list:?} is not a CPU number"))
    };
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("the range {part:?} runs backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The open meter.
pub enum Bottleneck {
    Cpus(CpuBusy),
    Psi(Pressure),
}

impl Bottleneck {
    /// Opens the meter; fails with the file at fault when a CPU or PSI is missing.
    pub fn open(spec: &BottleneckSpec) -> Result<Self> {
        let what = || format!("--bottleneck {spec}");
        Ok(match spec {
            BottleneckSpec::Cpus(cpus) => {
                Bottleneck::Cpus(CpuBusy::new(CpuStat::new(), cpus.clone()).with_context(what)?)
            }
            BottleneckSpec::Psi(r) => {
                Bottleneck::Psi(Pressure::new(PsiReader::new(), r).with_context(what)?)
            }
        })
    }

    /// The utilization since the previous call; None when nothing can be said yet.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        Ok(match self {
            Bottleneck::Cpus(m) => m.sample()?,
            Bottleneck::Psi(m) => m.sample()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists_and_psi_resources() {
        assert_eq!(
            parse_bottleneck("cpu:3,0-1,1"),
            Ok(BottleneckSpec::Cpus(vec![0, 1, 3]))
        );
        assert_eq!(
            parse_bottleneck("psi:cpu"),
            Ok(BottleneckSpec::Psi("cpu".into()))
        );
        assert_eq!(
            parse_bottleneck("cpu:0,2-3").unwrap().to_string(),
            "cpu:0,2,3"
        );
        for bad in ["cpu:", "cpu:x", "cpu:3-1", "psi:net", "gpu:0", "1"] {
            assert!(parse_bottleneck(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_refused_at_the_start() {
        let e = Bottleneck::open(&BottleneckSpec::Cpus(vec![100_000]))
            .err()
            .unwrap();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("--bottleneck cpu:100000") && msg.contains("no line for cpu100000"),
            "{msg}"
        );
    }
}
