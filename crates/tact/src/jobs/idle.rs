//! `tact run --idle` / `tact attach --idle`: idletime scheduling of an unmodified program (spec
//! idletime §6). What the user asked for, checked before the job starts: the resources, the
//! preemption interval, the device and interface behind them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tact_linux::actuate::cgroup_join::JoinCheck;
use tact_linux::probe::block_device::{BlockDevice, BlockResolver};
use tact_linux::probe::netstats::NetReader;
use tact_linux::state::StateDir;

use super::idle_cgroup::IdleCgroup;
use super::idle_log::NetKernel;
use super::idle_net::{shaper_for, Marking, NetOptions, Shaper};
use super::idle_watch::default_route_interface;
use crate::cli::{IdleArgs, PoliteArgs, UsageError};
use crate::trace::JsonLines;

/// A resource named after `--idle`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    /// `disk[:DEVICE]`: a device name, `/dev` path or any path on the disk.
    Disk(Option<String>),
    /// `net[:INTERFACE]`.
    Net(Option<String>),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Cpu => f.write_str("cpu"),
            Resource::Disk(None) => f.write_str("disk"),
            Resource::Disk(Some(d)) => write!(f, "disk:{d}"),
            Resource::Net(None) => f.write_str("net"),
            Resource::Net(Some(i)) => write!(f, "net:{i}"),
        }
    }
}

/// Parses one `--idle` item.
pub fn parse_resource(s: &str) -> Result<Resource, String> {
    let s = s.trim();
    let (kind, arg) = match s.split_once(':') {
        Some((k, a)) => (k, Some(a)),
        None => (s, None),
    };
    let arg = match arg {
        Some("") => return Err(format!("`{s}`: name a device after the colon, or drop it")),
        a => a.map(str::to_string),
    };
    match (kind, arg) {
        ("cpu", None) => Ok(Resource::Cpu),
        ("cpu", Some(_)) => Err(format!("`{s}`: cpu takes no argument")),
        ("disk", a) => Ok(Resource::Disk(a)),
        ("net", a) => Ok(Resource::Net(a)),
        _ => Err(format!(
            "unknown resource `{s}`: use cpu, disk[:DEVICE] or net[:INTERFACE]"
        )),
    }
}

/// `--preempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempt {
    /// A fixed PI; zero is a plain two-level priority queue.
    Fixed(Duration),
    /// Tuned from the gate's counters (`tact_core::idle::Tuner`).
    Auto,
}

pub fn parse_preempt(s: &str) -> Result<Preempt, String> {
    let s = s.trim();
    if s == "auto" {
        return Ok(Preempt::Auto);
    }
    if s.starts_with('-') {
        return Err(format!(
            "`{s}`: a preemption interval cannot be negative (0ms is a plain priority queue)"
        ));
    }
    crate::cli::duration(s)
        .map(Preempt::Fixed)
        .map_err(|e| format!("{e}, or `auto`"))
}

/// A resource whose use is gated: a device or an interface, resolved.
#[derive(Debug, Clone)]
pub enum Gated {
    Disk(BlockDevice),
    Net(String),
}

impl Gated {
    /// `disk:vda`, `net:eth0`: how logs and `tact status` name it.
    pub fn label(&self) -> String {
        match self {
            Gated::Disk(d) => format!("disk:{}", d.name),
            Gated::Net(i) => format!("net:{i}"),
        }
    }
}

/// Everything decided from the command line before the job starts, so bad input fails before
/// anything runs.
pub struct IdleSettings {
    /// `Some` with `--idle cpu`: its idle cgroup, made before the job starts so that the job
    /// joins it before it execs ([`IdleSettings::join_before_exec`]), or why not (`Err`:
    /// SCHED_IDLE alone then). Boxed, as the marking is.
    pub cpu_cgroup: Option<Box<Result<IdleCgroup, String>>>,
    pub gated: Vec<Gated>,
    pub preempt: Option<Preempt>,
    /// Each gated link's htb tree (where tact may build one) and what the log says about it,
    /// in the order of the `Gated::Net` entries: built before the job starts, so that a tree
    /// the user asked for with `--net-rate` and cannot have stops tact before anything runs.
    pub shapers: Vec<(Option<Shaper>, NetKernel)>,
    /// The marking of the job's packets, set up before the job starts: matching `--idle cpu`'s
    /// cgroup when it is on cgroup v2, else a directory of its own; the job joins either before
    /// it execs ([`IdleSettings::join_before_exec`]); for `tact attach`, the forwarded packets
    /// only ([`Marking::setup_attached`]). `Err`: why not. `None` when there is nothing to mark
    /// into.
    /// Boxed: it is most of the settings' size, and they travel in an enum with the polite ones.
    pub marking: Option<Box<Result<Marking, String>>>,
    pub json_log: Option<JsonLines>,
    /// Opened before the job starts: a tact that cannot record what it stops must not stop it.
    pub crash_records: StateDir,
    pub verbose: bool,
    pub name: Option<String>,
    pub socket: Option<PathBuf>,
    pub priority: i32,
    /// Put the job's scheduling policy and I/O priority back at the end (`tact attach`: the
    /// process lives on).
    pub restore: bool,
}

/// Options that do not go together: tact exits with 2, the command never started.
fn usage(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

impl IdleSettings {
    /// `cwd`: the job's working directory, whose disk `--idle disk` means.
    pub fn from_args(
        args: &IdleArgs,
        polite: &PoliteArgs,
        cwd: &Path,
        restore: bool,
        verbose: bool,
    ) -> Result<Self> {
        let mut cpu = false;
        let mut gated: Vec<Gated> = Vec::new();
        for r in &args.resources {
            let g = match r {
                Resource::Cpu => {
                    if cpu {
                        return Err(usage("--idle names cpu twice".into()));
                    }
                    cpu = true;
                    continue;
                }
                Resource::Disk(spec) => Gated::Disk(resolve_disk(spec.as_deref(), cwd)?),
                Resource::Net(iface) => {
                    let iface = match iface {
                        Some(i) => i.clone(),
                        None => default_route_interface()?,
                    };
                    NetReader::new()
                        .check_interface(&iface)
                        .with_context(|| format!("--idle net:{iface}"))?;
                    Gated::Net(iface)
                }
            };
            if gated.iter().any(|o| o.label() == g.label()) {
                return Err(usage(format!("--idle names {} twice", g.label())));
            }
            gated.push(g);
        }
        if let Some(dir) = &args.cgroup_parent {
            if !cpu {
                return Err(usage(
                    "--cgroup-parent applies to --idle cpu: it places the job's idle group".into(),
                ));
            }
            if restore {
                return Err(usage(format!(
                    "--cgroup-parent {}: tact attach leaves the process in its own cgroup (moving \
                     it would take it out of its service's limits); the idle group is tact run's",
                    dir.display()
                )));
            }
        }
        if gated.is_empty() && args.preempt.is_some() {
            return Err(usage(
                "--preempt applies to disk and net only: the CPU needs no preemption interval"
                    .into(),
            ));
        }
        let net = NetOptions {
            rate_bits: args.net_rate,
            replace_qdisc: args.net_replace_qdisc,
            leave_tbf: args.net_leave_tbf,
        };
        let links: Vec<&str> = gated
            .iter()
            .filter_map(|g| match g {
                Gated::Net(iface) => Some(iface.as_str()),
                Gated::Disk(_) => None,
            })
            .collect();
        if links.is_empty() && (net.rate_bits.is_some() || net.replace_qdisc || net.leave_tbf) {
            return Err(usage(
                "--net-rate, --net-replace-qdisc and --net-leave-tbf apply to --idle net only"
                    .into(),
            ));
        }
        let runtime = crate::paths::runtime_dir()?;
        let shapers = links
            .into_iter()
            .map(|iface| shaper_for(iface, net, &runtime.join("htb")))
            .collect::<Result<Vec<_>>>()?;
        let cpu_cgroup = cpu.then(|| {
            Box::new(if restore {
                // An attached process stays in its own cgroup: moving it would take it out of
                // the limits of the service it belongs to.
                Err("tact attach leaves the process in its own cgroup".to_string())
            } else {
                IdleCgroup::prepare(args.cgroup_parent.as_deref())
            })
        });
        if let (Some(dir), Some(Err(e))) = (&args.cgroup_parent, cpu_cgroup.as_deref()) {
            bail!(
                "--cgroup-parent {}: no idle group there: {e}",
                dir.display()
            );
        }
        // On cgroup v2 the job's sockets carry the idle cgroup: the rule matches it, so the job
        // joins one directory, not two.
        let placed = match cpu_cgroup.as_deref() {
            Some(Ok(g)) => g.v2_placement(),
            _ => None,
        };
        let marking = shapers.iter().any(|(s, _)| s.is_some()).then(|| {
            Box::new(if restore {
                // The process stays in its own cgroup, as for `--idle cpu`: only its packets
                // forwarded from a namespace of its own are marked.
                Marking::setup_attached()
            } else {
                Marking::setup(placed)
            })
        });
        if let Some(socket) = &polite.socket {
            if let Err(e) = tact_proto::Client::connect(socket) {
                bail!("--socket {}: {e}", socket.display());
            }
        }
        Ok(IdleSettings {
            cpu_cgroup,
            gated,
            preempt: args.preempt,
            shapers,
            marking,
            json_log: polite
                .json_log
                .as_deref()
                .map(JsonLines::create)
                .transpose()?,
            crash_records: StateDir::new(runtime)?,
            verbose,
            name: polite.name.clone(),
            socket: polite.socket.clone(),
            priority: polite.priority,
            restore,
        })
    }
}

impl IdleSettings {
    /// Makes the job that `command` starts join the cgroups made for it before it execs: the
    /// idle cgroup, so that it is idle from its first instruction, and the marking's own
    /// directory, so that its first sockets are marked too. The idle cgroup's join, when there
    /// is one, comes back: a failed spawn may be its failure ([`IdleCgroup::join_before_exec`]).
    pub fn join_before_exec(&self, command: &mut Command) -> Result<Option<JoinCheck>> {
        let joined = match self.cpu_cgroup.as_deref() {
            Some(Ok(g)) => Some(
                g.join_before_exec(command)
                    .with_context(|| format!("cannot place the job in {}", g.dir().display()))?,
            ),
            _ => None,
        };
        if let Some(Ok(m)) = self.marking.as_deref() {
            m.join_before_exec(command)
                .context("cannot place the job in its cgroup v2 directory")?;
        }
        Ok(joined)
    }
}

/// The device of `--idle disk[:SPEC]`: SPEC as the user named it, or the disk under `cwd`.
fn resolve_disk(spec: Option<&str>, cwd: &Path) -> Result<BlockDevice> {
    let resolver = BlockResolver::new();
    match spec {
        Some(s) => resolver
            .resolve(s)
            .with_context(|| format!("--idle disk:{s}")),
        None => {
            let dir = cwd.to_string_lossy();
            resolver.resolve(&dir).with_context(|| {
                format!(
                    "--idle disk: cannot find the disk under the working directory {dir}; \
                     name it with --idle disk:DEVICE"
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_parse() {
        assert_eq!(parse_resource("cpu"), Ok(Resource::Cpu));
        assert_eq!(parse_resource("disk"), Ok(Resource::Disk(None)));
        assert_eq!(
            parse_resource("disk:/dev/sda"),
            Ok(Resource::Disk(Some("/dev/sda".into())))
        );
        assert_eq!(
            parse_resource("net:lo"),
            Ok(Resource::Net(Some("lo".into())))
        );
        assert!(parse_resource("gpu")
            .unwrap_err()
            .contains("unknown resource `gpu`"));
        assert!(parse_resource("cpu:0").is_err());
        assert!(parse_resource("disk:").is_err());
        assert_eq!(Resource::Net(Some("lo".into())).to_string(), "net:lo");
    }

    #[test]
    fn preemption_intervals_parse() {
        assert_eq!(parse_preempt("0ms"), Ok(Preempt::Fixed(Duration::ZERO)));
        assert_eq!(
            parse_preempt("50ms"),
            Ok(Preempt::Fixed(Duration::from_millis(50)))
        );
        assert_eq!(parse_preempt("auto"), Ok(Preempt::Auto));
        assert!(parse_preempt("-5ms").unwrap_err().contains("negative"));
        assert!(parse_preempt("soon").unwrap_err().contains("auto"));
    }
}
