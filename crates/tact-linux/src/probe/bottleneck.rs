//! What TCC's bottleneck hint reads (`docs/tune.md`, "The bottleneck hint"), written the same
//! way wherever a host takes it (`tact tune --bottleneck`, bench/tune's driver):
//!
//! | form | reads |
//! | --- | --- |
//! | `cpu:LIST` | the busy fraction of those CPUs (`/proc/stat`) |
//! | `psi:cpu\|io\|memory` | the fraction of time some task waited for it (`/proc/pressure`) |
//! | `disk:DEV` | the device's busy time, io_ticks over wall time (`/proc/diskstats`) |
//! | `disk:DEV@iops=N` | its completed reads and writes per second over N (`riops=N`: reads, `wiops=N`: writes) |
//! | `net:IF@RATE` | the bits IF sends per second over RATE (`/sys/class/net/IF/statistics`) |
//! | `net:IF@RATE,rx` | the bits it receives |
//!
//! Parsing checks the syntax only; [`Bottleneck::open`] checks that the CPUs, the PSI file, the
//! device or the interface exist, so a wrong name fails before anything runs.

use std::fmt;
use std::str::FromStr;

use crate::error::Result;
use crate::probe::block_device::BlockResolver;
use crate::probe::busy::{
    CpuBusy, CpuStat, Direction, DiskBusy, DiskIops, IoOps, LinkUse, Pressure,
};
use crate::probe::diskstats::DiskstatsReader;
use crate::probe::netstats::NetReader;
use crate::probe::psi::{PsiReader, RESOURCES};
use crate::rate::{fmt_rate, parse_rate};

/// Every form, for error messages.
pub const FORMS: &str = "cpu:LIST (cpu:1, cpu:0,2-3), psi:cpu|io|memory, disk:DEV \
                         (disk:vda, disk:/dev/nvme0n1p2), disk:DEV@iops=N (or riops=N, wiops=N), \
                         net:IF@RATE (net:eth0@1gbit), net:IF@RATE,rx";

/// A parsed bottleneck source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BottleneckSpec {
    /// CPU numbers, sorted and deduplicated.
    Cpus(Vec<usize>),
    /// A PSI resource: cpu, io or memory.
    Psi(String),
    /// A block device as the user named it (a kernel name, `/dev/...` or a path on it), with
    /// its IOPS cap when the cap is the bottleneck.
    Disk {
        device: String,
        cap: Option<(IoOps, u64)>,
    },
    /// An interface, the link's rate in bits per second, and which way counts.
    Net {
        iface: String,
        rate_bits: u64,
        direction: Direction,
    },
}

/// A `--bottleneck` value that is not one of [`FORMS`]; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSpec(String);

impl FromStr for BottleneckSpec {
    type Err = BadSpec;

    fn from_str(s: &str) -> Result<Self, BadSpec> {
        let bad = |msg: String| BadSpec(msg);
        match s.split_once(':') {
            Some(("cpu", list)) => parse_cpu_list(list).map(BottleneckSpec::Cpus).map_err(bad),
            Some(("psi", r)) if RESOURCES.contains(&r) => Ok(BottleneckSpec::Psi(r.to_string())),
            Some(("psi", r)) => Err(bad(format!(
                "unknown PSI resource {r:?}; use psi:cpu, psi:io or psi:memory"
            ))),
            Some(("disk", rest)) => parse_disk(rest).map_err(bad),
            Some(("net", rest)) => parse_net(rest).map_err(bad),
            _ => Err(bad(format!("{s:?} is none of {FORMS}"))),
        }
    }
}

impl fmt::Display for BottleneckSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BottleneckSpec::Cpus(cpus) => {
                let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
                write!(f, "cpu:{}", list.join(","))
            }
            BottleneckSpec::Psi(r) => write!(f, "psi:{r}"),
            BottleneckSpec::Disk { device, cap } => {
                write!(f, "disk:{device}")?;
                match cap {
                    Some((ops, n)) => write!(f, "@{}={n}", ops.key()),
                    None => Ok(()),
                }
            }
            BottleneckSpec::Net {
                iface,
                rate_bits,
                direction,
            } => {
                write!(f, "net:{iface}@{}", fmt_rate(*rate_bits))?;
                match direction {
                    Direction::Egress => Ok(()),
                    Direction::Ingress => write!(f, ",rx"),
                }
            }
        }
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

/// `DEV` or `DEV@KEY=N` with KEY one of io.max's iops, riops, wiops.
fn parse_disk(rest: &str) -> Result<BottleneckSpec, String> {
    let (device, cap) = match rest.rsplit_once('@') {
        None => (rest, None),
        Some((device, cap)) => {
            let (key, n) = cap.split_once('=').ok_or_else(|| {
                format!("{cap:?} after disk:{device}@ is not iops=N, riops=N or wiops=N")
            })?;
            let ops = [IoOps::All, IoOps::Reads, IoOps::Writes]
                .into_iter()
                .find(|o| o.key() == key)
                .ok_or_else(|| {
                    format!("unknown cap {key:?} in disk:{rest}; use iops, riops or wiops")
                })?;
            let n = n
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{key}={n:?} in disk:{rest}: the cap is a whole number of requests per second, at least 1"))?;
            (device, Some((ops, n)))
        }
    };
    if device.is_empty() {
        return Err(
            "disk: needs a device, e.g. disk:vda, disk:/dev/nvme0n1 or disk:sda@iops=3000".into(),
        );
    }
    Ok(BottleneckSpec::Disk {
        device: device.to_string(),
        cap,
    })
}

/// `IF@RATE` or `IF@RATE,rx`.
fn parse_net(rest: &str) -> Result<BottleneckSpec, String> {
    let Some((iface, rate)) = rest.split_once('@') else {
        return Err(format!(
            "net:{rest} needs the link's rate: net:IF@RATE, e.g. net:eth0@1gbit (what the \
             interface sends) or net:eth0@1gbit,rx (what it receives)"
        ));
    };
    if iface.is_empty() || iface.contains('/') {
        return Err(format!("{iface:?} in net:{rest} is not an interface name"));
    }
    let (rate, direction) = match rate.split_once(',') {
        None => (rate, Direction::Egress),
        Some((rate, "rx")) => (rate, Direction::Ingress),
        Some((_, other)) => {
            return Err(format!(
                "{other:?} after the rate in net:{rest}: only ,rx (count what the interface receives) may follow"
            ))
        }
    };
    Ok(BottleneckSpec::Net {
        iface: iface.to_string(),
        rate_bits: parse_rate(rate).map_err(|e| format!("net:{rest}: {e}"))?,
        direction,
    })
}

/// An open bottleneck meter.
#[derive(Debug, Clone)]
pub enum Bottleneck {
    Cpus(CpuBusy),
    Psi(Pressure),
    DiskBusy(DiskBusy),
    DiskIops(DiskIops),
    Link(LinkUse),
}

impl Bottleneck {
    /// Opens the meter on this machine (`/proc`, `/sys`); fails naming what is missing: a CPU,
    /// the PSI file, the device (with the ones there are) or the interface (likewise).
    pub fn open(spec: &BottleneckSpec) -> Result<Self> {
        Ok(match spec {
            BottleneckSpec::Cpus(cpus) => {
                Bottleneck::Cpus(CpuBusy::new(CpuStat::new(), cpus.clone())?)
            }
            BottleneckSpec::Psi(r) => Bottleneck::Psi(Pressure::new(PsiReader::new(), r)?),
            BottleneckSpec::Disk { device, cap } => {
                // The diskstats name of what the user wrote: `/dev/vda1` and a path on it
                // name `vda1`.
                let name = BlockResolver::new().resolve(device)?.name;
                let reader = DiskstatsReader::new();
                match cap {
                    None => Bottleneck::DiskBusy(DiskBusy::new(reader, &name)?),
                    Some((ops, n)) => Bottleneck::DiskIops(DiskIops::new(reader, &name, *ops, *n)?),
                }
            }
            BottleneckSpec::Net {
                iface,
                rate_bits,
                direction,
            } => Bottleneck::Link(LinkUse::new(
                NetReader::new(),
                iface,
                *direction,
                *rate_bits,
            )?),
        })
    }

    /// The utilization since the previous call; None when nothing can be said yet.
    pub fn sample(&mut self) -> Result<Option<f64>> {
        match self {
            Bottleneck::Cpus(m) => m.sample(),
            Bottleneck::Psi(m) => m.sample(),
            Bottleneck::DiskBusy(m) => m.sample(),
            Bottleneck::DiskIops(m) => m.sample(),
            Bottleneck::Link(m) => m.sample(),
        }
    }

    /// Whether the reading is a rate against a cap the user gave (IOPS, a link's rate): one
    /// well above 1 then means the cap is wrong rather than the resource overfull.
    pub fn against_a_cap(&self) -> bool {
        matches!(self, Bottleneck::DiskIops(_) | Bottleneck::Link(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<BottleneckSpec, String> {
        s.parse().map_err(|e: BadSpec| e.to_string())
    }

    #[test]
    fn every_form_parses_and_prints_back() {
        assert_eq!(
            parse("cpu:3,0-1,1"),
            Ok(BottleneckSpec::Cpus(vec![0, 1, 3]))
        );
        assert_eq!(parse("psi:io"), Ok(BottleneckSpec::Psi("io".into())));
        assert_eq!(
            parse("disk:/dev/vda1"),
            Ok(BottleneckSpec::Disk {
                device: "/dev/vda1".into(),
                cap: None
            })
        );
        assert_eq!(
            parse("disk:nvme0n1@riops=300"),
            Ok(BottleneckSpec::Disk {
                device: "nvme0n1".into(),
                cap: Some((IoOps::Reads, 300))
            })
        );
        assert_eq!(
            parse("net:eth0@1.5Gbit,rx"),
            Ok(BottleneckSpec::Net {
                iface: "eth0".into(),
                rate_bits: 1_500_000_000,
                direction: Direction::Ingress
            })
        );
        for (given, printed) in [
            ("cpu:0,2-3", "cpu:0,2,3"),
            ("psi:memory", "psi:memory"),
            ("disk:vda", "disk:vda"),
            ("disk:sda@iops=3000", "disk:sda@iops=3000"),
            ("disk:sda@wiops=20", "disk:sda@wiops=20"),
            ("net:veth1@50mbit", "net:veth1@50mbit"),
            ("net:lo@1000000000", "net:lo@1gbit"),
            ("net:lo@800kbit,rx", "net:lo@800kbit,rx"),
            ("net:lo@1234bit", "net:lo@1.234kbit"),
            ("net:lo@2.5mbit", "net:lo@2.5mbit"),
        ] {
            let spec = parse(given).unwrap();
            assert_eq!(spec.to_string(), printed);
            assert_eq!(
                parse(printed),
                Ok(spec),
                "{printed} parses back to the same"
            );
        }
    }

    #[test]
    fn a_bad_form_says_what_is_wrong_and_what_would_do() {
        for (bad, says) in [
            ("cpu:", "is not a CPU number"),
            ("cpu:3-1", "runs backwards"),
            ("psi:net", "psi:cpu, psi:io or psi:memory"),
            ("gpu:0", "is none of cpu:LIST"),
            ("1", "net:IF@RATE"),
            ("disk:", "disk: needs a device"),
            ("disk:vda@300", "is not iops=N, riops=N or wiops=N"),
            ("disk:vda@bps=300", "use iops, riops or wiops"),
            ("disk:vda@iops=0", "at least 1"),
            ("disk:vda@iops=many", "whole number"),
            ("net:eth0", "needs the link's rate"),
            ("net:@1gbit", "not an interface name"),
            ("net:eth0@fast", "not a number with bit, kbit, mbit or gbit"),
            ("net:eth0@50mbps", "not a number with bit"),
            ("net:eth0@0bit", "out of range"),
            ("net:eth0@1gbit,tx", "only ,rx"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn opening_checks_the_names_on_this_machine() {
        let e = Bottleneck::open(&parse("disk:no-such-disk-tact").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown block device `no-such-disk-tact`"),
            "{e}"
        );
        let e = Bottleneck::open(&parse("net:no-such-if@1gbit").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown network interface `no-such-if`") && e.contains("lo"),
            "{e}"
        );
        let mut lo = Bottleneck::open(&parse("net:lo@1gbit").unwrap()).unwrap();
        assert!(lo.against_a_cap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(lo.sample().unwrap().is_some_and(|u| u >= 0.0));
    }
}
