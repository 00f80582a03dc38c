//! Link activity for the idle engine's network gate (spec idletime §6, "Network"):
//! `/sys/class/net/IFACE/statistics/{rx,tx}_{bytes,packets}` under a sysfs root you choose, so
//! tests run on fixture trees. Both directions count: an ACK-clocked foreground TCP flow shows up
//! as receive traffic.
//!
//! # The job's own traffic
//!
//! Linux keeps no per-process network counters: `/proc/PID/net/dev` is the table of the
//! process's network *namespace*, shared by every process in it, and `/proc/PID/io`
//! `rchar`/`wchar` count every read and write (files, pipes, sockets alike). So the gate takes the
//! job's own traffic from one of two sources, and without either counts it as foreground:
//!
//! 1. **The job has a network namespace of its own** (behind a veth, spec §7's rig): then
//!    `/proc/PID/net/dev` counts exactly the job's traffic. [`NetReader::own_namespace`] tells
//!    whether the job is in a namespace other than tact's, and [`NetReader::job_counters`] sums
//!    that table over its interfaces other than `lo`.
//! 2. **The job shares tact's namespace**: its TCP sockets' byte and segment counters, from
//!    sock_diag, with the headers estimated ([`crate::probe::sockets`]). Other protocols have no
//!    such counters. (The htb class counters of kernel-assisted mode would count the job's
//!    transmitted traffic too, but each read is a `tc` run: they are logged once a second.)
//!
//! (Library mode counts its own sends and needs neither.) Foreground activity over an interval is
//! then the interface's delta less the job's; judging it is the engine's business.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::probe::proc::ProcReader;

/// Counters of one interface (or of a namespace's interfaces summed), since they were created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
}

impl NetCounters {
    /// What happened since `earlier`. Differences saturate at 0 (an interface that was deleted and
    /// created again restarts its counters).
    pub fn since(&self, earlier: &NetCounters) -> NetCounters {
        NetCounters {
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
        }
    }

    /// Bytes either way.
    pub fn bytes(&self) -> u64 {
        self.rx_bytes + self.tx_bytes
    }

    /// Packets either way.
    pub fn packets(&self) -> u64 {
        self.rx_packets + self.tx_packets
    }

    fn add(&mut self, other: &NetCounters) {
        self.rx_bytes += other.rx_bytes;
        self.tx_bytes += other.tx_bytes;
        self.rx_packets += other.rx_packets;
        self.tx_packets += other.tx_packets;
    }
}

/// Reads interface counters from a sysfs root and namespaces from a procfs.
#[derive(Debug, Clone)]
pub struct NetReader {
    sys_root: PathBuf,
    procs: ProcReader,
}

impl Default for NetReader {
    fn default() -> Self {
        Self::new()
    }
}

impl NetReader {
    /// The machine's `/sys` and `/proc` (interfaces of the namespace sysfs was mounted in).
    pub fn new() -> Self {
        Self::with_roots("/sys", ProcReader::new())
    }

    /// A sysfs-shaped tree and a procfs reader (fixtures).
    pub fn with_roots(sys_root: impl Into<PathBuf>, procs: ProcReader) -> Self {
        NetReader {
            sys_root: sys_root.into(),
            procs,
        }
    }

    /// The interface names, sorted.
    pub fn interfaces(&self) -> Result<Vec<String>> {
        let dir = self.sys_root.join("class/net");
        let mut names: Vec<String> = fs::read_dir(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Checks that `iface` exists (for `--idle net:IFACE`).
    pub fn check_interface(&self, iface: &str) -> Result<()> {
        if !iface.is_empty() && !iface.contains('/') && self.iface_dir(iface).exists() {
            return Ok(());
        }
        Err(Error::UnknownDevice {
            kind: "network interface",
            name: iface.to_string(),
            hint: format!("this machine has: {}", self.interfaces()?.join(", ")),
        })
    }

    /// The counters of `iface`.
    pub fn counters(&self, iface: &str) -> Result<NetCounters> {
        self.check_interface(iface)?;
        let stats = self.iface_dir(iface).join("statistics");
        Ok(NetCounters {
            rx_bytes: read_counter(&stats.join("rx_bytes"))?,
            tx_bytes: read_counter(&stats.join("tx_bytes"))?,
            rx_packets: read_counter(&stats.join("rx_packets"))?,
            tx_packets: read_counter(&stats.join("tx_packets"))?,
        })
    }

    /// The link speed of `iface` in bits per second (`speed`, in Mb/s), or None when the driver
    /// does not know it (virtual devices, links that are down).
    pub fn speed_bits(&self, iface: &str) -> Result<Option<u64>> {
        self.check_interface(iface)?;
        let path = self.iface_dir(iface).join("speed");
        match fs::read_to_string(&path) {
            // -1 when unknown; reading fails with EINVAL when the link is down.
            Ok(text) => Ok(text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|&mbps| mbps > 0)
                .map(|mbps| mbps as u64 * 1_000_000)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Whether `pid` is in a network namespace other than this process's (the target of
    /// `/proc/PID/ns/net` differs from `/proc/self/ns/net`).
    pub fn own_namespace(&self, pid: i32) -> Result<bool> {
        let ns = |who: &str| -> Result<PathBuf> {
            let path = self.procs.root().join(who).join("ns/net");
            fs::read_link(&path).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::NoProcess { pid },
                _ => Error::io(&path, e),
            })
        };
        Ok(ns(&pid.to_string())? != ns("self")?)
    }

    /// The traffic of `pid`'s network namespace: `/proc/PID/net/dev` summed over its interfaces
    /// except `lo`. The job's own traffic exactly when [`NetReader::own_namespace`] holds.
    pub fn job_counters(&self, pid: i32) -> Result<NetCounters> {
        let path = self.procs.root().join(pid.to_string()).join("net/dev");
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::NoProcess { pid },
            _ => Error::io(&path, e),
        })?;
        let mut total = NetCounters::default();
        for (iface, counters) in parse_net_dev(&path, &text)? {
            if iface != "lo" {
                total.add(&counters);
            }
        }
        Ok(total)
    }

    fn iface_dir(&self, iface: &str) -> PathBuf {
        self.sys_root.join("class/net").join(iface)
    }
}

/// `/proc/net/dev`: two header lines, then `IFACE: rx_bytes rx_packets errs drop fifo frame
/// compressed multicast tx_bytes tx_packets ...` (16 numbers).
pub fn parse_net_dev(path: &Path, text: &str) -> Result<Vec<(String, NetCounters)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(2) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |msg: &str| Error::parse(path, i + 1, msg);
        let (iface, rest) = line
            .split_once(':')
            .ok_or_else(|| bad("expected `IFACE: counters`"))?;
        let nums: Vec<u64> = rest
            .split_whitespace()
            .map(|w| w.parse().map_err(|_| bad(&format!("bad counter `{w}`"))))
            .collect::<Result<_>>()?;
        if nums.len() < 16 {
            return Err(bad(&format!("expected 16 counters, found {}", nums.len())));
        }
        out.push((
            iface.trim().to_string(),
            NetCounters {
                rx_bytes: nums[0],
                rx_packets: nums[1],
                tx_bytes: nums[8],
                tx_packets: nums[9],
            },
        ));
    }
    Ok(out)
}

fn read_counter(path: &Path) -> Result<u64> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.trim().parse().map_err(|_| {
        Error::parse(
            path,
            1,
            format!("expected a counter, found `{}`", text.trim()),
        )
    })
}
