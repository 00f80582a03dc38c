//! The kernel-assisted half of `--idle net` (spec idletime §6, "Network"), where tact may
//! (CAP_NET_ADMIN): an htb tree on the interface's egress whose background class sits below the
//! foreground (its queued packets go only when the foreground class is empty), and the job's
//! packets marked DSCP LE from outside so that they land in that class: the job in a cgroup v2
//! directory of its own and an nftables rule on sockets of that cgroup. The tree is built once
//! and not changed while it stands: the PI is the gate's hold of the job (clamping the class's
//! ceil during it left the class in debt, `tact_linux::actuate::htb`).
//!
//! Each part is set up only where it can be and says why not otherwise; the user-level gate runs
//! either way. Both are undone when dropped, so every exit path that unwinds removes them. What
//! a SIGKILLed tact leaves is swept by the next one's setup: its nftables table (named after its
//! pid) and its htb tree (recognised by its layout and the record tact keeps of it).

use std::path::{Path, PathBuf};
use std::process::Command;

use tact_linux::actuate::cgroup2::JobCgroup2;
use tact_linux::actuate::htb::{self, BgMatch, HtbPlan, RootQdisc, Tc, TreeRecords, DSCP_LE};
use tact_linux::actuate::nft::{DscpMark, Nft};
use tact_linux::probe::htb_class::TcClasses;
use tact_linux::probe::netstats::NetReader;
use tact_linux::rate::fmt_rate;
use tact_linux::ProcId;

use super::idle_log::{ClassBytes, NetKernel};

/// The htb rate as a share of the link's speed: just under it, so that the queue forms in htb,
/// where the foreground goes first, and not in the NIC's ring, which is one FIFO.
const RATE_OF_LINK: f64 = 0.95;

/// How the user asked for the kernel-assisted mode.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetOptions {
    /// `--net-rate`: the htb rate; when given, a failure to set htb up is an error.
    pub rate_bits: Option<u64>,
    /// `--net-replace-qdisc`: replace a root qdisc someone else added (not restored).
    pub replace_qdisc: bool,
}

/// The htb tree on one interface.
pub struct Shaper {
    tc: Tc,
    plan: HtbPlan,
    /// Where the tree is recorded while it stands.
    records: TreeRecords,
    /// The classes' counters, over rtnetlink (no `tc` run for the log's once a second).
    classes: TcClasses,
    removed: bool,
}

impl Shaper {
    /// Builds the tree on `iface` and records it in `records` (a directory), or says why not.
    /// What it applied, for the user, comes with it.
    pub fn setup(
        iface: &str,
        opts: NetOptions,
        records: &Path,
    ) -> Result<(Shaper, String), String> {
        let (rate, from) = match opts.rate_bits {
            Some(r) => (r, "--net-rate".to_string()),
            None => match NetReader::new().speed_bits(iface) {
                Ok(Some(link)) => (
                    (link as f64 * RATE_OF_LINK) as u64,
                    format!("95% of the link's {}", fmt_rate(link)),
                ),
                Ok(None) => {
                    return Err(format!(
                        "the link speed of {iface} is unknown (/sys/class/net/{iface}/speed); \
                         give it with --net-rate RATE"
                    ))
                }
                Err(e) => return Err(e.to_string()),
            },
        };
        let tc = Tc::new();
        tc.check(iface).map_err(|e| e.to_string())?;
        // A tree tact cannot record is one a SIGKILL would leave unrecognisable.
        let records = TreeRecords::new(records)
            .map_err(|e| format!("cannot keep a record of the tree: {e}"))?;
        for what in records.sweep(&tc) {
            eprintln!("tact: net:{iface}: removed {what}, left by a tact that was killed");
        }
        let plan =
            HtbPlan::new(iface, rate, vec![BgMatch::Dscp(DSCP_LE)]).map_err(|e| e.to_string())?;
        let mut replaced = String::new();
        if let Some(q) = tc.root_qdisc(iface).map_err(|e| e.to_string())? {
            if !q.is_default() {
                if !opts.replace_qdisc {
                    return Err(format!(
                        "{iface} has a root qdisc tact did not make ({}); tact leaves it alone \
                         (--net-replace-qdisc replaces it, and it is not put back afterwards)",
                        describe(&q)
                    ));
                }
                tc.run(&plan.teardown()).map_err(|e| e.to_string())?;
                replaced = format!(
                    "; replaced {} (--net-replace-qdisc: not put back)",
                    describe(&q)
                );
            }
        }
        tc.apply(&plan).map_err(|e| e.to_string())?;
        if let Err(e) = records.write(iface) {
            let _ = tc.remove(&plan);
            return Err(format!("cannot record the tree: {e}"));
        }
        let classes = match TcClasses::new(iface) {
            Ok(c) => c,
            Err(e) => {
                let _ = tc.remove(&plan);
                let _ = records.remove(iface);
                return Err(format!("cannot read the tree's classes: {e}"));
            }
        };
        let how = format!(
            "htb at {} ({from}): foreground {}, the job's class {} below it (DSCP LE){replaced}",
            fmt_rate(rate),
            htb::FG_CLASS,
            htb::BG_CLASS,
        );
        Ok((
            Shaper {
                tc,
                plan,
                records,
                classes,
                removed: false,
            },
            how,
        ))
    }

    pub fn rate_bits(&self) -> u64 {
        self.plan.rate_bits
    }

    /// The bytes each class has sent since the tree was built; `None` when the interface has
    /// not both classes any more (someone removed or replaced the tree).
    pub fn class_bytes(&mut self) -> tact_linux::Result<Option<ClassBytes>> {
        let stats = self.classes.dump()?;
        let bytes = |id: &str| stats.iter().find(|c| c.classid == id).map(|c| c.bytes);
        Ok(match (bytes(htb::FG_CLASS), bytes(htb::BG_CLASS)) {
            (Some(fg_bytes), Some(bg_bytes)) => Some(ClassBytes { fg_bytes, bg_bytes }),
            _ => None,
        })
    }

    /// Lets go of a tree someone else removed: no `tc` runs (the root qdisc there now is not
    /// tact's), and its record goes.
    pub fn forget(mut self) -> tact_linux::Result<()> {
        self.removed = true;
        self.records.remove(&self.plan.dev)
    }

    /// Removes the tree (the kernel puts its default root qdisc back), then its record; a tree
    /// that could not be removed keeps its record, so a later tact can sweep it.
    pub fn remove(&mut self) -> tact_linux::Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        self.tc.remove(&self.plan)?;
        self.records.remove(&self.plan.dev)
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        // The last resort of an early return; the job's end calls `remove` and reports.
        let _ = self.remove();
    }
}

/// The htb tree on a gated link, where tact may build it, and what the log says about it. With
/// `--net-rate` the user asked for it, so a failure is an error; otherwise tact says why not
/// and the gate runs alone.
pub fn shaper_for(
    iface: &str,
    net: NetOptions,
    records: &Path,
) -> anyhow::Result<(Option<Shaper>, NetKernel)> {
    match Shaper::setup(iface, net, records) {
        Ok((shaper, how)) => {
            let kernel = NetKernel {
                htb_rate_bits: Some(shaper.rate_bits()),
                marking: false,
                why: how,
            };
            Ok((Some(shaper), kernel))
        }
        Err(why) if net.rate_bits.is_some() => {
            anyhow::bail!("--net-rate: no htb on {iface}: {why}")
        }
        Err(why) => {
            eprintln!("tact: net:{iface}: no htb tree, the gate alone holds the job: {why}");
            Ok((
                None,
                NetKernel {
                    htb_rate_bits: None,
                    marking: false,
                    why: format!("no htb: {why}"),
                },
            ))
        }
    }
}

/// The job's packets marked DSCP LE: the job in a cgroup v2 directory and an nftables table
/// that marks sockets created there.
pub struct Marking {
    nft: Nft,
    mark: DscpMark,
    /// The directory tact made for the marking; `None` when the job is in `--idle cpu`'s
    /// cgroup on the same hierarchy, which the rule matches instead.
    cgroup: Option<JobCgroup2>,
    /// The directory the rule names.
    dir: PathBuf,
    removed: bool,
}

impl Marking {
    /// Sets the marking up for a job that joins `placed` (a tact cgroup v2 directory and its
    /// level) before it execs, or else a directory of its own made here; the job is not
    /// moved yet ([`Marking::join_before_exec`], [`Marking::cover`]). Sweeps the tables of
    /// killed tacts first. `Err`: why not.
    pub fn setup(placed: Option<(PathBuf, usize)>) -> Result<Marking, String> {
        let me = std::process::id();
        // The directory first: without a cgroup2 mount (as under `ip netns exec`, which
        // remounts /sys) tact runs no nft at all.
        let (cgroup, dir, level) = match placed {
            Some((dir, level)) => (None, dir, level),
            None => {
                let cg = JobCgroup2::create(&format!("tact-{me}-net"))
                    .map_err(|e| format!("cannot make the job's cgroup v2 directory: {e}"))?;
                let (dir, level) = (cg.dir().to_path_buf(), cg.level());
                (Some(cg), dir, level)
            }
        };
        let nft = Nft;
        nft.check().map_err(|e| e.to_string())?;
        match nft.sweep_stale() {
            Ok(tables) => {
                for t in tables {
                    eprintln!(
                        "tact: removed the nftables table inet {t}, left by a tact that was killed"
                    );
                }
            }
            Err(e) => tracing::warn!("cannot sweep the tables of killed tacts: {e}"),
        }
        let mark = DscpMark::new(&format!("tact-{me}"), &dir, level, DSCP_LE)
            .map_err(|e| e.to_string())?;
        nft.apply(&mark).map_err(|e| e.to_string())?;
        Ok(Marking {
            nft,
            mark,
            cgroup,
            dir,
            removed: false,
        })
    }

    /// Makes the job that `command` starts join the marking's own directory before it execs,
    /// so that no socket of its escapes the rule (a directory `placed` at setup is not ours to
    /// do this with).
    pub fn join_before_exec(&self, command: &mut Command) -> tact_linux::Result<()> {
        match &self.cgroup {
            Some(cg) => cg.join_before_exec(command),
            None => Ok(()),
        }
    }

    /// Moves the job's root `root` and its other `members` in; what the marking does, for the
    /// user, saying whether the job's first sockets are marked too.
    pub fn cover_job(&mut self, root: i32, members: &[ProcId]) -> Result<String, String> {
        let early = match &self.cgroup {
            Some(cg) => cg.holds(root).map_err(|e| e.to_string())?,
            // `--idle cpu`'s cgroup, which the job joined before it execed or it did not start.
            None => true,
        };
        self.cover(members)
            .map_err(|e| format!("cannot move the job into the marked cgroup: {e}"))?;
        let sockets = if early {
            "the job was placed there before it started, so every socket it opens is marked"
        } else {
            "sockets it opened before tact moved it there are not marked"
        };
        Ok(format!(
            "the job's packets marked DSCP LE by nftables table inet {} (sockets created in \
             {}; {sockets})",
            self.mark.table,
            self.dir.display()
        ))
    }

    /// Moves members found since the last look into the job's directory.
    pub fn cover(&mut self, members: &[ProcId]) -> tact_linux::Result<()> {
        match &mut self.cgroup {
            Some(cg) => cg.cover(members),
            None => Ok(()),
        }
    }

    /// Deletes the table, then moves the job back and removes its directory; every step runs
    /// and the errors come back.
    pub fn remove(&mut self) -> Vec<String> {
        if self.removed {
            return Vec::new();
        }
        self.removed = true;
        let mut errors = Vec::new();
        if let Err(e) = self.nft.remove(&self.mark) {
            errors.push(e.to_string());
        }
        if let Some(cg) = &mut self.cgroup {
            if let Err(e) = cg.remove() {
                errors.push(e.to_string());
            }
        }
        errors
    }
}

impl Drop for Marking {
    fn drop(&mut self) {
        // The last resort of an early return; the job's end calls `remove` and reports.
        let _ = self.remove();
    }
}

fn describe(q: &RootQdisc) -> String {
    format!("{} {}", q.kind, q.handle)
}
