//! The kernel-assisted half of `--idle net` (spec idletime §6, "Network"), where tact may
//! (CAP_NET_ADMIN): an htb tree on the interface's egress whose background class sits below the
//! foreground (its queued packets go only when the foreground class is empty), and the job's
//! packets marked DSCP LE from outside so that they land in that class: the job in a cgroup v2
//! directory of its own and an nftables rule on sockets of that cgroup (`tact run` only: an
//! attached process stays in its own cgroup), and, for a job in a network namespace of its own,
//! a rule on the ingress of the veth through which its packets enter tact's namespace (followed
//! as the job moves between namespaces, which the log tells). The tree is built once
//! and not changed while it stands: the PI is the gate's hold of the job (clamping the class's
//! ceil during it left the class in debt, `tact_linux::actuate::htb`).
//!
//! Someone else's root qdisc is left alone (or replaced, `--net-replace-qdisc`), but for a tbf:
//! tbf is one FIFO, and a job stopped by the gate still has its packets queued in it, ahead of
//! every foreground burst. Under a tbf whose child is a bfifo (the kernel gives it one), the
//! tree is grafted as tbf's child instead (tbf still sets the rate, the tree orders its queue),
//! and the bfifo is put back at the end (`--net-leave-tbf`: leave it alone).
//!
//! Each part is set up only where it can be and says why not otherwise; the user-level gate runs
//! either way. Both are undone when dropped, so every exit path that unwinds removes them. What
//! a SIGKILLed tact leaves is swept by the next one's setup: its nftables table (named after its
//! pid) and its htb tree (recognised by its layout and the record tact keeps of it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use tact_linux::actuate::cgroup2::JobCgroup2;
use tact_linux::actuate::htb::{
    self, BgMatch, Graft, HtbPlan, RootQdisc, Tc, TreeRecords, DSCP_LE,
};
use tact_linux::actuate::nft::{DscpMark, IngressMark, Nft};
use tact_linux::probe::htb_class::TcClasses;
use tact_linux::probe::netstats::NetReader;
use tact_linux::probe::veth_peer::{net_namespace, VethEnd, VethPeers};
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
    /// `--net-leave-tbf`: leave a root tbf alone rather than graft the tree under it.
    pub leave_tbf: bool,
}

/// The htb tree on one interface.
pub struct Shaper {
    tc: Tc,
    plan: HtbPlan,
    /// Where the tree is recorded while it stands.
    records: TreeRecords,
    /// The classes' counters, over rtnetlink (no `tc` run for the log's once a second).
    classes: TcClasses,
    /// The rate the tree's queue drains at: the tree's, or under a tbf tbf's when lower.
    drain_bits: u64,
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
        let tc = Tc::new();
        tc.check(iface).map_err(|e| e.to_string())?;
        // A tree tact cannot record is one a SIGKILL would leave unrecognisable.
        let records = TreeRecords::new(records)
            .map_err(|e| format!("cannot keep a record of the tree: {e}"))?;
        for what in records.sweep(&tc) {
            eprintln!("tact: net:{iface}: removed {what}, left by a tact that was killed");
        }
        let bg = vec![BgMatch::Dscp(DSCP_LE)];
        let (plan, how, drain_bits) = match tc.root_qdisc(iface).map_err(|e| e.to_string())? {
            Some(q) if !q.is_default() && !opts.replace_qdisc => {
                if q.kind != "tbf" {
                    return Err(format!(
                        "{iface} has a root qdisc tact did not make ({}); tact leaves it alone \
                         (--net-replace-qdisc replaces it, and it is not put back afterwards)",
                        describe(&q)
                    ));
                }
                if opts.leave_tbf {
                    return Err(format!(
                        "{iface} has a root qdisc tact did not make ({}); --net-leave-tbf: tact \
                         leaves it alone",
                        describe(&q)
                    ));
                }
                graft_plan(&tc, iface, opts, bg)?
            }
            root => {
                let (rate, from) = root_rate(iface, opts)?;
                let plan = HtbPlan::new(iface, rate, bg).map_err(|e| e.to_string())?;
                let mut replaced = String::new();
                if let Some(q) = root.filter(|q| !q.is_default()) {
                    tc.run(&plan.teardown()).map_err(|e| e.to_string())?;
                    replaced = format!(
                        "; replaced {} (--net-replace-qdisc: not put back)",
                        describe(&q)
                    );
                }
                let how = format!(
                    "htb at {} ({from}): foreground {}, the job's class {} below it \
                     (DSCP LE){replaced}",
                    fmt_rate(rate),
                    htb::FG_CLASS,
                    htb::BG_CLASS,
                );
                (plan, how, rate)
            }
        };
        tc.apply(&plan).map_err(|e| e.to_string())?;
        if let Err(e) = records.write(iface, plan.graft.as_ref()) {
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
        Ok((
            Shaper {
                tc,
                plan,
                records,
                classes,
                drain_bits,
                removed: false,
            },
            how,
        ))
    }

    pub fn rate_bits(&self) -> u64 {
        self.plan.rate_bits
    }

    /// The rate the tree's queue drains at, in bits/s: the tree's own, or under a tbf tbf's
    /// when that is lower (at twice tbf's rate by default, the tree sends what tbf lets out).
    pub fn drain_bits(&self) -> u64 {
        self.drain_bits
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

    /// Removes the tree (at the root the kernel puts its default qdisc back; under a tbf, tbf's
    /// bfifo is put back and read back), then its record; a tree that could not be removed keeps
    /// its record, so a later tact can sweep it. What was put back under a tbf, for the user.
    pub fn remove(&mut self) -> tact_linux::Result<Option<String>> {
        if self.removed {
            return Ok(None);
        }
        self.removed = true;
        self.tc.remove(&self.plan)?;
        let restored = match &self.plan.graft {
            None => None,
            Some(g) => Some(self.check_restored(g)?),
        };
        self.records.remove(&self.plan.dev)?;
        Ok(restored)
    }

    /// Reads tbf's child back after the tree went: a bfifo of the limit it had.
    fn check_restored(&self, g: &Graft) -> tact_linux::Result<String> {
        let dev = &self.plan.dev;
        let tbf = self.tc.tbf_root(dev)?;
        match tbf.filter(|t| format!("{}1", t.handle) == g.parent) {
            Some(t) if t.bfifo_limit == Some(g.bfifo_limit) => Ok(format!(
                "restored bfifo limit {} under tbf {} at exit (read back: {})",
                g.bfifo_limit,
                t.handle,
                t.child.as_deref().unwrap_or("?")
            )),
            found => Err(tact_linux::Error::Unavailable {
                what: format!("tbf's bfifo on {dev}"),
                reason: format!(
                    "after `{}`, tbf class {} has {} instead of a bfifo of limit {}",
                    self.plan.teardown(),
                    g.parent,
                    found
                        .and_then(|t| t.child)
                        .unwrap_or_else(|| "no tbf".into()),
                    g.bfifo_limit
                ),
            }),
        }
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        // The last resort of an early return; the job's end calls `remove` and reports.
        let _ = self.remove();
    }
}

/// The rate of a tree at the root: `--net-rate`, or just under the link's speed.
fn root_rate(iface: &str, opts: NetOptions) -> Result<(u64, String), String> {
    if let Some(r) = opts.rate_bits {
        return Ok((r, "--net-rate".to_string()));
    }
    match NetReader::new().speed_bits(iface) {
        Ok(Some(link)) => Ok((
            (link as f64 * RATE_OF_LINK) as u64,
            format!("95% of the link's {}", fmt_rate(link)),
        )),
        Ok(None) => Err(format!(
            "the link speed of {iface} is unknown (/sys/class/net/{iface}/speed); give it with \
             --net-rate RATE"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The tree grafted under the root tbf on `iface`, what it is for the user, and the rate its
/// queue drains at (the lower of tbf's and its own).
fn graft_plan(
    tc: &Tc,
    iface: &str,
    opts: NetOptions,
    bg: Vec<BgMatch>,
) -> Result<(HtbPlan, String, u64), String> {
    let tbf = tc
        .tbf_root(iface)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the root tbf on {iface} went while tact looked at it"))?;
    let plan = HtbPlan::grafted(iface, &tbf, opts.rate_bits, bg)
        .map_err(|e| format!("{e}; tact leaves the tbf alone (--net-replace-qdisc replaces it)"))?;
    let graft = plan.graft.as_ref().expect("a grafted plan");
    let from = match opts.rate_bits {
        Some(_) => "--net-rate".to_string(),
        None => "twice tbf's, so that tbf alone sets the rate".to_string(),
    };
    let how = format!(
        "grafted under tbf {} on {iface} (tbf's rate {} kept): htb at {} ({from}), foreground \
         {}, the job's class {} below it (DSCP LE); tbf's bfifo (limit {} bytes) is put back at \
         exit (--net-leave-tbf: leave the tbf alone)",
        tbf.handle,
        fmt_rate(tbf.rate_bits),
        fmt_rate(plan.rate_bits),
        htb::FG_CLASS,
        htb::BG_CLASS,
        graft.bfifo_limit,
    );
    let drain = tbf.rate_bits.min(plan.rate_bits);
    Ok((plan, how, drain))
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

/// The job's packets marked DSCP LE by tact's nftables table `inet tact-<PID>`: those of sockets
/// created in the job's cgroup v2 directory (tact's namespace), and those that enter tact's
/// namespace through the veth of a network namespace the job or a member of its tree is in (an
/// unmodified program in a namespace of its own, whose packets tact's host forwards out of the
/// watched interface: they have no socket here for the cgroup rule to match).
pub struct Marking {
    nft: Nft,
    table: String,
    /// The rule on the job's sockets, or why there is none (no cgroup2 where nft looks, as under
    /// `ip netns exec`, which remounts /sys): the table then marks forwarded packets only.
    sockets: Result<Sockets, String>,
    forwarded: Forwarded,
    removed: bool,
}

/// Why `tact attach` marks no sockets.
const ATTACHED: &str = "tact attach leaves the process in its own cgroup";

/// The marking of the packets forwarded from the job's namespaces beginning or ending after
/// the start.
#[derive(Debug)]
pub struct MarkingChange {
    /// Whether some of the job's packets are marked now (the start's `kernel.marking` from here
    /// on): the forwarded ones, or its sockets'.
    pub marked: bool,
    /// Which veths and chains, for the user.
    pub why: String,
}

/// The directory whose sockets the table's output chain marks.
struct Sockets {
    /// The directory tact made for the marking; `None` when the job is in `--idle cpu`'s
    /// cgroup on the same hierarchy, which the rule matches instead.
    cgroup: Option<JobCgroup2>,
    /// The directory the rule names.
    dir: PathBuf,
}

impl Marking {
    /// Sets the marking up for a job that joins `placed` (a tact cgroup v2 directory and its
    /// level) before it execs, or else a directory of its own made here; the job is not
    /// moved yet ([`Marking::join_before_exec`], [`Marking::cover_job`]). Sweeps the tables of
    /// killed tacts first. `Err`: why not (no nftables).
    pub fn setup(placed: Option<(PathBuf, usize)>) -> Result<Marking, String> {
        Marking::new(|nft, table, me| mark_sockets(nft, table, placed, me))
    }

    /// Sets the marking up for `tact attach`: the table without the rule on sockets, since the
    /// process stays in its own cgroup (moving it would take it out of its service's, and the
    /// sockets it has open would stay unmarked anyway), so only what enters tact's namespace
    /// from the namespaces of its tree is marked.
    pub fn setup_attached() -> Result<Marking, String> {
        Marking::new(|_, _, _| Err(ATTACHED.to_string()))
    }

    /// The table `inet tact-<PID>` with the rule on the job's sockets that `sockets` applies,
    /// or without one when it says why not; killed tacts' tables swept first.
    fn new(
        sockets: impl FnOnce(&Nft, &str, u32) -> Result<Sockets, String>,
    ) -> Result<Marking, String> {
        let me = std::process::id();
        let table = format!("tact-{me}");
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
        let sockets = match sockets(&nft, &table, me) {
            Ok(s) => Ok(s),
            Err(why) => {
                nft.create_table(&table).map_err(|e| e.to_string())?;
                Err(why)
            }
        };
        let forwarded = Forwarded::new(&table)?;
        Ok(Marking {
            nft,
            table,
            sockets,
            forwarded,
            removed: false,
        })
    }

    /// Makes the job that `command` starts join the marking's own directory before it execs,
    /// so that no socket of its escapes the rule (a directory `placed` at setup is not ours to
    /// do this with).
    pub fn join_before_exec(&self, command: &mut Command) -> tact_linux::Result<()> {
        match &self.sockets {
            Ok(Sockets {
                cgroup: Some(cg), ..
            }) => cg.join_before_exec(command),
            _ => Ok(()),
        }
    }

    /// Moves the job's root `root` and its other `members` in and marks what enters from
    /// their namespaces; what the marking does, for the user, saying whether the job's first
    /// sockets are marked too.
    pub fn cover_job(&mut self, root: i32, members: &[ProcId]) -> String {
        let early = match &self.sockets {
            Ok(Sockets {
                cgroup: Some(cg), ..
            }) => cg.holds(root).map_err(|e| e.to_string()),
            // `--idle cpu`'s cgroup, which the job joined before it execed or it did not start.
            Ok(Sockets { cgroup: None, .. }) => Ok(true),
            Err(_) => Ok(false),
        };
        let moved = early.and_then(|early| {
            self.cover(members)
                .map(|()| early)
                .map_err(|e| format!("cannot move the job into the marked cgroup: {e}"))
        });
        if let Err(why) = &moved {
            // The rule stays with the table; the directory goes, the job's members back out.
            if let Ok(Sockets {
                cgroup: Some(cg), ..
            }) = &mut self.sockets
            {
                if let Err(e) = cg.remove() {
                    eprintln!("tact: {e}");
                }
            }
            self.sockets = Err(why.clone());
        }
        // Before the start record, which says what is marked now: not a change.
        let _ = self.follow(members);
        let table = &self.table;
        let sockets = match (&self.sockets, &moved) {
            (Ok(s), Ok(early)) => format!(
                "the job's packets marked DSCP LE by nftables table inet {table} (sockets created \
                 in {}; {})",
                s.dir.display(),
                if *early {
                    "the job was placed there before it started, so every socket it opens is marked"
                } else {
                    "sockets it opened before tact moved it there are not marked"
                }
            ),
            (Err(why), _) | (_, Err(why)) => format!(
                "the job's sockets in tact's network namespace are not marked ({why}): only \
                 traffic marked DSCP LE already (sockets of tact's library gate) goes to the \
                 job's class from there"
            ),
        };
        format!(
            "{sockets}; packets that enter tact's namespace through a veth from a network \
             namespace the job is in are marked DSCP LE there (table inet {table}, an ingress \
             chain per veth{})",
            self.forwarded.describe()
        )
    }

    /// Whether the job's sockets in tact's network namespace are marked (its htb class then
    /// counts what it sends from here).
    pub fn marks_sockets(&self) -> bool {
        self.sockets.is_ok()
    }

    /// Whether some of the job's packets are marked now: its sockets', or those forwarded from
    /// its namespace.
    pub fn marks_any(&self) -> bool {
        self.marks_sockets() || self.forwarded.marking()
    }

    /// Moves members found since the last look into the job's directory (of `tact run`).
    pub fn cover(&mut self, members: &[ProcId]) -> tact_linux::Result<()> {
        match &mut self.sockets {
            Ok(Sockets {
                cgroup: Some(cg), ..
            }) => cg.cover(members),
            _ => Ok(()),
        }
    }

    /// Marks what enters tact's namespace from the namespaces `members` are in now (their
    /// veths' ingress), and no longer what enters from those they left. Says on stderr what
    /// changed, and once for each namespace with no veth here. When the table went from no
    /// ingress chain to some, or back, that change comes back (the log's `marking`).
    pub fn follow(&mut self, members: &[ProcId]) -> Option<MarkingChange> {
        let before = self.forwarded.veths();
        self.forwarded.follow(&self.nft, members);
        if before.is_empty() == self.forwarded.chains.is_empty() {
            return None;
        }
        let why = if before.is_empty() {
            let chains: Vec<String> = self
                .forwarded
                .chains
                .iter()
                .map(|(end, mark)| format!("veth {}, chain {}", end.name, mark.chain))
                .collect();
            format!(
                "packets that enter tact's namespace from the job's network namespace are marked \
                 DSCP LE from now on (table inet {}: {})",
                self.table,
                chains.join("; ")
            )
        } else {
            format!(
                "packets from the job's network namespace are no longer marked: no member of the \
                 job is behind veth {} any more ({})",
                before.join(", "),
                if self.marks_sockets() {
                    "its sockets in tact's namespace still are"
                } else {
                    "none of its packets are marked now"
                }
            )
        };
        Some(MarkingChange {
            marked: self.marks_any(),
            why,
        })
    }

    /// Deletes the table (its ingress chains with it), then moves the job back and removes its
    /// directory; every step runs and the errors come back.
    pub fn remove(&mut self) -> Vec<String> {
        if self.removed {
            return Vec::new();
        }
        self.removed = true;
        let mut errors = Vec::new();
        if let Err(e) = self.nft.delete_table(&self.table) {
            errors.push(e.to_string());
        }
        if let Ok(Sockets {
            cgroup: Some(cg), ..
        }) = &mut self.sockets
        {
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

/// Makes the job's cgroup v2 directory (unless it joins `placed`) and the table `table` with its
/// rule on the directory's sockets; `Err`: why not, with nothing left behind.
fn mark_sockets(
    nft: &Nft,
    table: &str,
    placed: Option<(PathBuf, usize)>,
    me: u32,
) -> Result<Sockets, String> {
    let (mut cgroup, dir, level) = match placed {
        Some((dir, level)) => (None, dir, level),
        None => {
            let cg = JobCgroup2::create(&format!("tact-{me}-net"))
                .map_err(|e| format!("cannot make the job's cgroup v2 directory: {e}"))?;
            let (dir, level) = (cg.dir().to_path_buf(), cg.level());
            (Some(cg), dir, level)
        }
    };
    let applied = DscpMark::new(table, &dir, level, DSCP_LE)
        .and_then(|mark| nft.apply(&mark))
        .map_err(|e| e.to_string());
    if let Err(why) = applied {
        if let Some(cg) = &mut cgroup {
            if let Err(e) = cg.remove() {
                eprintln!("tact: {e}");
            }
        }
        return Err(why);
    }
    Ok(Sockets { cgroup, dir })
}

/// The ingress chains of the table: one per veth through which a namespace of the job's
/// members enters tact's.
struct Forwarded {
    table: String,
    /// tact's network namespace (the inode of `/proc/self/ns/net`).
    here: u64,
    peers: VethPeers,
    /// The namespaces the members were in at the last look, with the veths found for each.
    namespaces: BTreeMap<u64, Vec<VethEnd>>,
    /// The chains in the table now.
    chains: BTreeMap<VethEnd, IngressMark>,
    /// Veths whose chain nft refused (said once; not tried again).
    refused: BTreeSet<VethEnd>,
}

impl Forwarded {
    fn new(table: &str) -> Result<Forwarded, String> {
        let here = net_namespace(None).map_err(|e| e.to_string())?;
        let peers = VethPeers::new().map_err(|e| e.to_string())?;
        Ok(Forwarded {
            table: table.to_string(),
            here,
            peers,
            namespaces: BTreeMap::new(),
            chains: BTreeMap::new(),
            refused: BTreeSet::new(),
        })
    }

    fn marking(&self) -> bool {
        !self.chains.is_empty()
    }

    /// The names of the veths marked now.
    fn veths(&self) -> Vec<String> {
        self.chains.keys().map(|e| e.name.clone()).collect()
    }

    /// The veths marked now, for the user.
    fn describe(&self) -> String {
        if self.chains.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.chains.keys().map(|e| e.name.as_str()).collect();
        format!("; now {}", names.join(", "))
    }

    fn follow(&mut self, nft: &Nft, members: &[ProcId]) {
        // Each namespace the members are in, other than tact's, with one member to ask about it.
        let mut now: BTreeMap<u64, i32> = BTreeMap::new();
        for m in members {
            // A member that exited is no longer in any namespace.
            if let Ok(ns) = net_namespace(Some(m.pid)) {
                if ns != self.here {
                    now.entry(ns).or_insert(m.pid);
                }
            }
        }
        let mut namespaces = BTreeMap::new();
        for (ns, pid) in now {
            let known = self.namespaces.get(&ns);
            let ends = match known {
                Some(ends) if !ends.is_empty() => ends.clone(),
                // New, or none found yet: a veth may be added after the job entered.
                _ => match self.peers.of(pid) {
                    Ok(ends) => {
                        if ends.is_empty() && known.is_none() {
                            eprintln!(
                                "tact: the job is in network namespace net:[{ns}], which has no \
                                 veth into tact's (a macvlan, or routed through another \
                                 namespace): its packets forwarded here are not marked, and land \
                                 in the foreground class"
                            );
                        }
                        ends
                    }
                    Err(e) => {
                        if known.is_none() {
                            eprintln!(
                                "tact: cannot find the veth of network namespace net:[{ns}]: {e}"
                            );
                        }
                        Vec::new()
                    }
                },
            };
            namespaces.insert(ns, ends);
        }
        let wanted: BTreeSet<&VethEnd> = namespaces.values().flatten().collect();
        let gone: Vec<VethEnd> = self
            .chains
            .keys()
            .filter(|e| !wanted.contains(e))
            .cloned()
            .collect();
        for end in gone {
            let mark = self.chains.remove(&end).expect("a chain");
            match nft.remove_ingress(&mark) {
                Ok(()) => eprintln!(
                    "tact: the job left the network namespace behind {}: its packets are no \
                     longer marked there",
                    end.name
                ),
                Err(e) => eprintln!(
                    "tact: cannot stop marking the packets from {}: {e}",
                    end.name
                ),
            }
        }
        for end in wanted {
            if self.chains.contains_key(end) || self.refused.contains(end) {
                continue;
            }
            let added = IngressMark::new(&self.table, &end.name, end.index, DSCP_LE)
                .and_then(|mark| nft.add_ingress(&mark).map(|()| mark));
            match added {
                Ok(mark) => {
                    eprintln!(
                        "tact: the job's network namespace enters tact's through veth {}: its \
                         packets are marked DSCP LE there (table inet {}, chain {})",
                        end.name, mark.table, mark.chain
                    );
                    self.chains.insert(end.clone(), mark);
                }
                Err(e) => {
                    eprintln!(
                        "tact: cannot mark the packets that enter through {}: {e}",
                        end.name
                    );
                    self.refused.insert(end.clone());
                }
            }
        }
        self.namespaces = namespaces;
    }
}

fn describe(q: &RootQdisc) -> String {
    format!("{} {}", q.kind, q.handle)
}
