//! Kernel-assisted network priority for the idle engine (spec idletime §6, "Network"): an htb
//! qdisc whose background class sits strictly below the foreground, built as data
//! ([`HtbPlan`] → [`TcCommand`]s) and applied by running `tc` ([`Tc`]), which needs
//! CAP_NET_ADMIN in the interface's network namespace.
//!
//! ```text
//! 1:    htb, unclassified traffic to 1:10
//! └─ 1:1   rate = ceil = R (just under line rate, so the queue forms here, not in the NIC ring)
//!    ├─ 1:10  foreground: rate R, prio 0
//!    └─ 1:20  background: rate 8 kbit, ceil R, prio 7   ← u32 filters: DSCP and/or fwmark
//! ```
//!
//! Under someone else's tbf (the one foreign root tact does not leave alone, [`Graft`]), the same
//! tree is grafted as tbf's child, in place of the bfifo the kernel gave it, and that bfifo is put
//! back at the end: tbf keeps setting the rate, the tree only orders tbf's queue.
//!
//! ```text
//! 8001:  tbf (the user's: rate, burst, limit unchanged)
//! └─ 8001:1 ── 1:  htb, as above, its rate twice tbf's so that it never holds a packet back
//! ```
//!
//! That is a priority queue: a queued background packet goes only when the foreground class is
//! empty, so a foreground burst waits for at most the one frame on the wire. The tree is never
//! changed while it stands: the preemption interval is the gate's hold (SIGSTOP) of the job. A
//! ceil clamped to the floor during the hold (`tc class change`, as tact once did) charged each
//! frame htb let out under it at 8 kbit, 1.44 s of debt in the class's ctokens that reopening
//! does not clear, and the class starved. The background class counters are the job's own
//! transmitted traffic, every protocol, which the network probe cannot get otherwise: the idle
//! gate reads them at every probe over rtnetlink ([`crate::probe::htb_class`]), tests also
//! with `tc` ([`Tc::class_stats`]).
//!
//! Classification. DSCP is a per-socket setting (IP_TOS / IPV6_TCLASS) that only the socket's
//! owner can set, so a job either marks its own sockets (default LE = DSCP 1, RFC 8622) or is
//! marked from outside: by DSCP from an nftables rule on its cgroup ([`super::nft`], what
//! `tact run --idle net` does as root), or by firewall mark (SO_MARK, or a mangle rule, both
//! root). Both are matched with `u32`: it is the one classifier the test machine has (no `fw`,
//! no `cgroup` for net_cls classids, no `flower`, no ematch), and there its mark match is not
//! built either, which [`Tc::apply`] detects. So on that machine DSCP is the way.

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::probe::caps::{has_capability, Capability};
use crate::probe::proc::{ProcId, ProcReader};

/// The foreground class: where unclassified traffic goes.
pub const FG_CLASS: &str = "1:10";
/// The background class.
pub const BG_CLASS: &str = "1:20";
/// The background's guaranteed rate (htb needs a rate above zero); it borrows the rest up to the
/// full rate whenever the foreground leaves it.
pub const BG_FLOOR_BITS: u64 = 8_000;
/// DSCP LE (lower effort, RFC 8622), TOS byte 0x04: the default background mark.
pub const DSCP_LE: u8 = 1;
/// The htb quantum: one Ethernet frame. Without it htb derives quanta from the rates, too big for
/// the foreground and too small for the background, and warns about both.
const QUANTUM: u32 = 1514;

/// What puts a packet into the background class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgMatch {
    /// IPv4 DSCP (TOS >> 2) and IPv6 traffic class with that DSCP; ECN bits ignored.
    Dscp(u8),
    /// The packet's firewall mark (SO_MARK or a mangle rule).
    Mark(u32),
}

/// One `tc` invocation, as its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcCommand(pub Vec<String>);

impl fmt::Display for TcCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tc {}", self.0.join(" "))
    }
}

/// Where a grafted tree sits: the only class of someone's root tbf, and the bfifo that was there
/// before, put back when the tree goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graft {
    /// tbf's class, the tree's parent: `8001:1`.
    pub parent: String,
    /// The limit of the bfifo to put back, in bytes.
    pub bfifo_limit: u64,
}

/// The htb setup for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtbPlan {
    pub dev: String,
    /// The shaping rate in bits/s: just under the link's (e.g. 95% of
    /// [`crate::probe::netstats::NetReader::speed_bits`]), or above a tbf's it is grafted under.
    pub rate_bits: u64,
    pub bg: Vec<BgMatch>,
    /// `Some`: the tree goes under a tbf instead of at the root.
    pub graft: Option<Graft>,
}

impl HtbPlan {
    /// Checks the values: an interface name the kernel could have, a rate above the background
    /// floor, DSCP values of 6 bits, at least one match.
    pub fn new(dev: &str, rate_bits: u64, bg: Vec<BgMatch>) -> Result<HtbPlan> {
        let invalid = |reason: String| Error::Unavailable {
            what: format!("an htb plan for `{dev}`"),
            reason,
        };
        if dev.is_empty() || dev.len() > 15 || dev.contains(['/', ' ', ':']) {
            return Err(invalid("not a valid interface name".into()));
        }
        if rate_bits <= BG_FLOOR_BITS {
            return Err(invalid(format!(
                "rate {rate_bits} bit/s must exceed the background floor of {BG_FLOOR_BITS}"
            )));
        }
        if bg.is_empty() {
            return Err(invalid("no background match given".into()));
        }
        if let Some(BgMatch::Dscp(d)) = bg.iter().find(|m| matches!(m, BgMatch::Dscp(d) if *d > 63))
        {
            return Err(invalid(format!("DSCP {d} is above 63")));
        }
        Ok(HtbPlan {
            dev: dev.to_string(),
            rate_bits,
            bg,
            graft: None,
        })
    }

    /// The same tree as tbf `under`'s child, at `rate_bits`, by default twice tbf's rate: htb's
    /// buckets then refill faster than tbf takes packets, so htb never holds one back (tbf alone
    /// sets the rate, as before) and only picks which packet tbf gets next. Fails for a tbf whose
    /// child is not a bfifo: what tact would have to put back is then more than it knows how to.
    pub fn grafted(
        dev: &str,
        under: &TbfRoot,
        rate_bits: Option<u64>,
        bg: Vec<BgMatch>,
    ) -> Result<HtbPlan> {
        let Some(limit) = under.bfifo_limit else {
            return Err(Error::Unavailable {
                what: format!("a tree under tbf {} on `{dev}`", under.handle),
                reason: format!(
                    "tbf's child is {}, not the bfifo tact knows how to put back",
                    under.child.as_deref().unwrap_or("missing")
                ),
            });
        };
        let rate = rate_bits.unwrap_or(under.rate_bits.saturating_mul(2));
        let mut plan = HtbPlan::new(dev, rate, bg)?;
        plan.graft = Some(Graft {
            parent: format!("{}1", under.handle),
            bfifo_limit: limit,
        });
        Ok(plan)
    }

    /// The commands that build the tree, in order.
    pub fn setup(&self) -> Vec<TcCommand> {
        let rate = bits(self.rate_bits);
        let first = match &self.graft {
            None => self.cmd("qdisc add", "root handle 1: htb default 10"),
            // `replace`: in one step, so tbf's class never has no child (a noop qdisc, which
            // drops every packet).
            Some(g) => self.cmd(
                "qdisc replace",
                &format!("parent {} handle 1: htb default 10", g.parent),
            ),
        };
        let mut cmds = vec![
            first,
            self.add_class("1:", "1:1", &rate, &rate, None),
            self.add_class("1:1", FG_CLASS, &rate, &rate, Some(0)),
            self.add_class("1:1", BG_CLASS, &bits(BG_FLOOR_BITS), &rate, Some(7)),
        ];
        // u32 filters of different protocols need priorities of their own.
        let mut prio = 1;
        for m in &self.bg {
            let filters: Vec<(&str, String)> = match *m {
                BgMatch::Dscp(d) => vec![
                    ("ip", format!("match ip dsfield {:#04x} 0xfc", d << 2)),
                    ("ipv6", format!("match ip6 priority {:#04x} 0xfc", d << 2)),
                ],
                BgMatch::Mark(mark) => vec![("all", format!("match mark {mark:#x} 0xffffffff"))],
            };
            for (proto, sel) in filters {
                cmds.push(self.cmd(
                    "filter add",
                    &format!("parent 1: protocol {proto} prio {prio} u32 {sel} flowid {BG_CLASS}"),
                ));
                prio += 1;
            }
        }
        cmds
    }

    /// The command that removes the whole tree (and with it every class and filter): at the
    /// root, the kernel puts its default qdisc back; under a tbf, tbf's bfifo is put back in
    /// the tree's place in one step (a deleted child would leave tbf a noop qdisc that drops
    /// everything). That bfifo has a handle of its own (the kernel's had `0:` and was hidden
    /// from a plain `tc qdisc show`); its limit and behaviour are the same.
    pub fn teardown(&self) -> TcCommand {
        match &self.graft {
            None => self.cmd("qdisc del", "root"),
            Some(g) => restore_bfifo(&self.dev, g),
        }
    }

    /// `tc class add`: the tree's classes are made once and never changed.
    fn add_class(
        &self,
        parent: &str,
        classid: &str,
        rate: &str,
        ceil: &str,
        prio: Option<u8>,
    ) -> TcCommand {
        let prio = prio.map_or(String::new(), |p| format!(" prio {p}"));
        self.cmd(
            "class add",
            &format!(
                "parent {parent} classid {classid} htb rate {rate} ceil {ceil}{prio} quantum {QUANTUM}"
            ),
        )
    }

    /// `tc OBJECT VERB dev DEV REST...`
    fn cmd(&self, object_verb: &str, rest: &str) -> TcCommand {
        let mut args: Vec<String> = object_verb.split(' ').map(String::from).collect();
        args.extend(["dev".to_string(), self.dev.clone()]);
        args.extend(rest.split(' ').map(String::from));
        TcCommand(args)
    }
}

fn bits(n: u64) -> String {
    format!("{n}bit")
}

/// `tc qdisc replace dev DEV parent TBF:1 bfifo limit N`.
fn restore_bfifo(dev: &str, g: &Graft) -> TcCommand {
    TcCommand(
        [
            "qdisc",
            "replace",
            "dev",
            dev,
            "parent",
            &g.parent,
            "bfifo",
            "limit",
            &g.bfifo_limit.to_string(),
        ]
        .map(String::from)
        .to_vec(),
    )
}

/// A root tbf as `tc -j qdisc show dev DEV invisible` lists it (`invisible`: the bfifo the
/// kernel gives tbf is hidden otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TbfRoot {
    /// `8001:`.
    pub handle: String,
    /// tbf's rate in bits/s.
    pub rate_bits: u64,
    /// Its child qdisc, `KIND HANDLE` (`bfifo 0:`), if any is listed.
    pub child: Option<String>,
    /// The child's limit in bytes, when the child is a bfifo.
    pub bfifo_limit: Option<u64>,
}

/// The root tbf in `tc -j qdisc show dev DEV invisible` output, if the root qdisc is a tbf.
pub fn parse_tbf_root(json: &str) -> Option<TbfRoot> {
    let qdiscs: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
    let root = qdiscs
        .iter()
        .find(|q| q["root"] == true && q["kind"] == "tbf")?;
    let handle = root["handle"].as_str()?.to_string();
    // tc -j gives the rate in bytes/s.
    let rate_bits = root["options"]["rate"].as_u64()?.checked_mul(8)?;
    let parent = format!("{handle}1");
    let child = qdiscs
        .iter()
        .find(|q| q["parent"].as_str() == Some(parent.as_str()));
    let name =
        child.and_then(|c| Some(format!("{} {}", c["kind"].as_str()?, c["handle"].as_str()?)));
    let bfifo_limit = child
        .filter(|c| c["kind"] == "bfifo")
        .and_then(|c| c["options"]["limit"].as_u64());
    Some(TbfRoot {
        handle,
        rate_bits,
        child: name,
        bfifo_limit,
    })
}

/// The root qdisc of an interface, as `tc qdisc show` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootQdisc {
    /// `pfifo_fast`, `fq_codel`, `tbf`, ...
    pub kind: String,
    /// `0:` for the one the kernel attaches by itself.
    pub handle: String,
}

impl RootQdisc {
    /// Whether the kernel attached it (handle `0:`: noqueue, pfifo_fast, mq, the default
    /// qdisc): deleting a root qdisc brings such a one back, so replacing it loses nothing.
    /// Any qdisc someone added has a handle of its own (tc picks `8001:` when none is given).
    pub fn is_default(&self) -> bool {
        self.handle == "0:"
    }
}

/// The root qdisc in `tc qdisc show dev DEV` output: the line `qdisc KIND HANDLE root ...`.
pub fn parse_root_qdisc(text: &str) -> Option<RootQdisc> {
    text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() >= 4 && w[0] == "qdisc" && w[3] == "root").then(|| RootQdisc {
            kind: w[1].to_string(),
            handle: w[2].to_string(),
        })
    })
}

/// The counters of one tc class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassStats {
    /// `1:20`.
    pub classid: String,
    pub bytes: u64,
    pub packets: u64,
    pub dropped: u64,
}

/// Runs `tc`, in this network namespace or in a named one (`ip netns exec NAME tc ...`).
#[derive(Debug, Clone, Default)]
pub struct Tc {
    netns: Option<String>,
}

impl Tc {
    /// `tc` in this process's network namespace.
    pub fn new() -> Self {
        Tc { netns: None }
    }

    /// `tc` inside the named namespace of `ip netns` (`/run/netns/NAME`).
    pub fn in_netns(name: &str) -> Self {
        Tc {
            netns: Some(name.to_string()),
        }
    }

    /// What applying a plan on `dev` needs: CAP_NET_ADMIN, a working `tc`, and the interface in
    /// the namespace tc runs in.
    pub fn check(&self, dev: &str) -> Result<()> {
        if !has_capability(Capability::NetAdmin)? {
            return Err(Error::Unavailable {
                what: "tc (kernel-assisted network priority)".into(),
                reason: "it needs CAP_NET_ADMIN; use the user-space network gate instead".into(),
            });
        }
        self.run(&TcCommand(vec!["-V".into()]))?;
        self.run(&TcCommand(
            ["qdisc", "show", "dev", dev].map(String::from).to_vec(),
        ))?;
        Ok(())
    }

    /// Runs one command; its standard output, or an error with the command line and tc's message.
    pub fn run(&self, cmd: &TcCommand) -> Result<String> {
        let (program, mut args) = match &self.netns {
            Some(ns) => (
                "ip",
                vec!["netns".to_string(), "exec".into(), ns.clone(), "tc".into()],
            ),
            None => ("tc", Vec::new()),
        };
        args.extend(cmd.0.iter().cloned());
        let command = match &self.netns {
            Some(ns) => format!("ip netns exec {ns} {cmd}"),
            None => cmd.to_string(),
        };
        let out = Command::new(program)
            .args(&args)
            .output()
            .map_err(|e| Error::Command {
                command: command.clone(),
                msg: format!("cannot run {program}: {e} (is iproute2 installed?)"),
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(Error::Command {
                command,
                msg: format!("{}: {}", out.status, stderr.trim()),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Builds the plan's tree. If a step fails, removes what was built, then returns the error
    /// of the step (a root qdisc that already exists is never replaced: that fails here; a
    /// graft replaces tbf's child, which the removal puts back).
    ///
    /// Mark matches are then checked to have taken: a kernel built without
    /// `CONFIG_CLS_U32_MARK` accepts `match mark` and silently drops it, which leaves a filter
    /// that sends *all* traffic to the background. Such a tree is removed again.
    pub fn apply(&self, plan: &HtbPlan) -> Result<()> {
        for (i, cmd) in plan.setup().iter().enumerate() {
            if let Err(e) = self.run(cmd) {
                if i > 0 {
                    let _ = self.run(&plan.teardown());
                }
                return Err(e);
            }
        }
        let marks = plan
            .bg
            .iter()
            .filter(|m| matches!(m, BgMatch::Mark(_)))
            .count();
        if marks > 0 {
            let show = TcCommand(
                ["filter", "show", "dev", &plan.dev, "parent", "1:"]
                    .map(String::from)
                    .to_vec(),
            );
            let listed = match self.run(&show) {
                Ok(text) => text
                    .lines()
                    .filter(|l| l.trim_start().starts_with("mark "))
                    .count(),
                Err(e) => {
                    let _ = self.run(&plan.teardown());
                    return Err(e);
                }
            };
            if listed < marks {
                let _ = self.run(&plan.teardown());
                return Err(Error::Unavailable {
                    what: format!("firewall-mark classification on {}", plan.dev),
                    reason: format!(
                        "`{show}` lists no mark match: this kernel's u32 classifier ignores marks \
                         (CONFIG_CLS_U32_MARK is not set) and would put all traffic in the \
                         background; classify by DSCP instead"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Removes the plan's tree.
    pub fn remove(&self, plan: &HtbPlan) -> Result<()> {
        self.run(&plan.teardown()).map(|_| ())
    }

    /// The root qdisc on `dev` now, if it has one.
    pub fn root_qdisc(&self, dev: &str) -> Result<Option<RootQdisc>> {
        let cmd = TcCommand(["qdisc", "show", "dev", dev].map(String::from).to_vec());
        Ok(parse_root_qdisc(&self.run(&cmd)?))
    }

    /// The root tbf on `dev`, with its child, when the root qdisc is a tbf.
    pub fn tbf_root(&self, dev: &str) -> Result<Option<TbfRoot>> {
        let cmd = TcCommand(
            ["-j", "qdisc", "show", "dev", dev, "invisible"]
                .map(String::from)
                .to_vec(),
        );
        Ok(parse_tbf_root(&self.run(&cmd)?))
    }

    /// The counters of every class on `dev` (`tc -s class show dev DEV`).
    pub fn class_stats(&self, dev: &str) -> Result<Vec<ClassStats>> {
        let cmd = TcCommand(
            ["-s", "class", "show", "dev", dev]
                .map(String::from)
                .to_vec(),
        );
        let text = self.run(&cmd)?;
        parse_class_stats(&cmd.to_string(), &text)
    }
}

/// Whether `tc qdisc show dev DEV` and `tc class show dev DEV` describe exactly the tree an
/// [`HtbPlan`] builds: htb `1:` with default class 10 at the root, or as the child of tbf class
/// `graft` (`8001:1`) under a root tbf, and the classes `1:1` (htb's root), `1:10` (prio 0) and
/// `1:20` (prio 7) below it, nothing else (but tbf's class). Half of how a tree a killed tact
/// left is told from someone else's (the other half is the [`TreeRecords`] record).
pub fn is_tact_tree(qdiscs: &str, classes: &str, graft: Option<&str>) -> bool {
    let lines: Vec<Vec<&str>> = qdiscs
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| w.len() >= 4 && w[0] == "qdisc")
        .collect();
    let Some(root) = lines.iter().find(|w| w[3] == "root") else {
        return false;
    };
    let htb = match graft {
        None => root,
        Some(parent) => {
            let tbf_class = format!("{}1", root[2]);
            if root[1] != "tbf" || parent != tbf_class {
                return false;
            }
            let Some(htb) = lines
                .iter()
                .find(|w| w.len() >= 5 && w[3] == "parent" && w[4] == parent)
            else {
                return false;
            };
            htb
        }
    };
    let default_10 = htb.windows(2).any(|p| p == ["default", "0x10"]);
    if htb[1] != "htb" || htb[2] != "1:" || !default_10 {
        return false;
    }
    let mut found: Vec<(String, String, Option<String>)> = classes
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.first() != Some(&"class") || graft.is_some_and(|g| w.get(2) == Some(&g)) {
                return None;
            }
            let after = |key: &str| w.windows(2).find(|p| p[0] == key).map(|p| p[1].to_string());
            let parent = if w.get(3) == Some(&"root") {
                "root".to_string()
            } else {
                after("parent").unwrap_or_default()
            };
            Some((w.get(2)?.to_string(), parent, after("prio")))
        })
        .collect();
    found.sort();
    let want = |id: &str, parent: &str, prio: Option<&str>| {
        (id.to_string(), parent.to_string(), prio.map(String::from))
    };
    found
        == [
            want("1:1", "root", None),
            want(FG_CLASS, "1:1", Some("0")),
            want(BG_CLASS, "1:1", Some("7")),
        ]
}

/// The record of a tree tact built: whose it is, and which interface of which network namespace
/// it is on. Interface names are per namespace and can be reused, so the record names the
/// namespace (the device and inode of `/proc/self/ns/net`) and the interface's index too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeRecord {
    pub owner: ProcId,
    pub netns: (u64, u64),
    pub dev: String,
    pub ifindex: u32,
    /// Where the tree is grafted, when it is not at the root (absent in records of older tacts).
    #[serde(default)]
    pub graft: Option<Graft>,
}

/// The records of the htb trees tact built, one file per (tact, interface) in a directory
/// (below the runtime directory, cleared at boot along with every tree): written once a tree
/// is up, removed with it. A SIGKILLed tact leaves both; [`TreeRecords::sweep`] removes such a
/// tree (putting tbf's bfifo back under a grafted one) only when the record's owner is dead, it
/// names this network namespace and the same interface, and the qdiscs there are still exactly
/// tact's layout ([`is_tact_tree`]).
#[derive(Debug, Clone)]
pub struct TreeRecords {
    dir: PathBuf,
}

impl TreeRecords {
    /// Uses (and creates, mode 0700) `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Result<TreeRecords> {
        let dir = dir.into();
        crate::state::create_private_dir(&dir)?;
        Ok(TreeRecords { dir })
    }

    /// Records that this process built a tree on `dev` (in its own network namespace), at the
    /// root or grafted.
    pub fn write(&self, dev: &str, graft: Option<&Graft>) -> Result<()> {
        let me = ProcReader::new().stat(std::process::id() as i32)?.id();
        let record = TreeRecord {
            owner: me,
            netns: own_netns()?,
            dev: dev.to_string(),
            ifindex: ifindex(dev)?,
            graft: graft.cloned(),
        };
        let path = self.path(me.pid, dev);
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(&record).expect("a record always serializes");
        // Whole or absent: a half-written record is never read as one.
        fs::write(&tmp, json).map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    /// Removes this process's record of `dev`; a missing one is fine.
    pub fn remove(&self, dev: &str) -> Result<()> {
        let path = self.path(std::process::id() as i32, dev);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// Removes the trees dead tacts left in this network namespace, and their records; returns
    /// what it removed (`tact PID's htb tree on DEV`). A record whose interface is gone or has
    /// another index (the tree went with it), or whose tree is no longer tact's layout (someone
    /// replaced it), is removed and its qdisc left alone. Records of live tacts and of other
    /// namespaces stay. Errors are swallowed: a sweep is housekeeping.
    pub fn sweep(&self, tc: &Tc) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let Ok(here) = own_netns() else {
            return Vec::new();
        };
        let reader = ProcReader::new();
        let mut removed = Vec::new();
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Some(record) = fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<TreeRecord>(&b).ok())
            else {
                continue;
            };
            let alive = reader
                .stat(record.owner.pid)
                .is_ok_and(|s| s.start_time == record.owner.start_time && !s.is_dead());
            if alive || record.netns != here {
                continue;
            }
            let graft = record.graft.as_ref();
            if ifindex(&record.dev).ok() == Some(record.ifindex)
                && self.is_tacts(tc, &record.dev, graft)
            {
                let del = match graft {
                    None => TcCommand(
                        ["qdisc", "del", "dev", &record.dev, "root"]
                            .map(String::from)
                            .to_vec(),
                    ),
                    Some(g) => restore_bfifo(&record.dev, g),
                };
                if tc.run(&del).is_err() {
                    continue;
                }
                let put_back = graft.map_or(String::new(), |g| {
                    format!(
                        " (under tbf class {}: its bfifo, limit {} bytes, put back)",
                        g.parent, g.bfifo_limit
                    )
                });
                removed.push(format!(
                    "tact {}'s htb tree on {}{put_back}",
                    record.owner.pid, record.dev
                ));
            }
            let _ = fs::remove_file(&path);
        }
        removed
    }

    fn is_tacts(&self, tc: &Tc, dev: &str, graft: Option<&Graft>) -> bool {
        let show = |object: &str| {
            tc.run(&TcCommand(
                [object, "show", "dev", dev].map(String::from).to_vec(),
            ))
        };
        match (show("qdisc"), show("class")) {
            (Ok(q), Ok(c)) => is_tact_tree(&q, &c, graft.map(|g| g.parent.as_str())),
            _ => false,
        }
    }

    fn path(&self, pid: i32, dev: &str) -> PathBuf {
        self.dir.join(format!("{pid}-{dev}.json"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// This process's network namespace: the device and inode of `/proc/self/ns/net`.
fn own_netns() -> Result<(u64, u64)> {
    let path = Path::new("/proc/self/ns/net");
    let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok((meta.dev(), meta.ino()))
}

/// The index of interface `dev` in this process's network namespace (`/sys/class/net` shows
/// the namespace sysfs was mounted in, which need not be this one).
fn ifindex(dev: &str) -> Result<u32> {
    let missing = || Error::Unavailable {
        what: format!("the interface {dev}"),
        reason: "it does not exist in this network namespace".into(),
    };
    let name = CString::new(dev).map_err(|_| missing())?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(missing()),
        i => Ok(i),
    }
}

/// Parses `tc -s class show`: each `class KIND ID ...` line is followed by
/// ` Sent B bytes P pkt (dropped D, ...)`, but a tbf's class, which is left out. `source` names
/// the command in errors.
pub fn parse_class_stats(source: &str, text: &str) -> Result<Vec<ClassStats>> {
    let mut out: Vec<ClassStats> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"class") => {
                if let Some((at, id)) = pending.take() {
                    return Err(Error::parse(
                        source,
                        at,
                        format!("class {id} has no Sent line"),
                    ));
                }
                let id = words
                    .get(2)
                    .ok_or_else(|| Error::parse(source, i + 1, "expected `class KIND ID`"))?;
                // tbf's one class (the parent of a grafted tree) has no counters to show.
                if words.get(1) != Some(&"tbf") {
                    pending = Some((i + 1, id.to_string()));
                }
            }
            Some(&"Sent") => {
                let Some((_, classid)) = pending.take() else {
                    return Err(Error::parse(source, i + 1, "Sent line outside a class"));
                };
                let num = |at: usize, what: &str| -> Result<u64> {
                    words
                        .get(at)
                        .map(|w| w.trim_end_matches(','))
                        .and_then(|w| w.parse().ok())
                        .ok_or_else(|| Error::parse(source, i + 1, format!("bad {what} count")))
                };
                // Sent B bytes P pkt (dropped D, overlimits O requeues R)
                if words.get(2) != Some(&"bytes") || words.get(5) != Some(&"(dropped") {
                    return Err(Error::parse(
                        source,
                        i + 1,
                        "expected `Sent B bytes P pkt (dropped D, ...`",
                    ));
                }
                out.push(ClassStats {
                    classid,
                    bytes: num(1, "byte")?,
                    packets: num(3, "packet")?,
                    dropped: num(6, "dropped")?,
                });
            }
            _ => {}
        }
    }
    if let Some((at, id)) = pending {
        return Err(Error::parse(
            source,
            at,
            format!("class {id} has no Sent line"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_qdisc_is_found_and_the_kernels_own_is_told_apart() {
        let q = parse_root_qdisc(
            "qdisc mq 0: root \nqdisc fq_codel 0: parent :1 limit 10240p flows 1024\n",
        )
        .unwrap();
        assert_eq!((q.kind.as_str(), q.is_default()), ("mq", true));
        let q = parse_root_qdisc("qdisc noqueue 0: root refcnt 2 \n").unwrap();
        assert!(q.is_default());
        let q =
            parse_root_qdisc("qdisc tbf 8001: root refcnt 2 rate 100Mbit burst 12500b lat 50ms \n")
                .unwrap();
        assert_eq!((q.kind.as_str(), q.handle.as_str()), ("tbf", "8001:"));
        assert!(!q.is_default());
        assert_eq!(parse_root_qdisc("qdisc fq_codel 0: parent :1 \n"), None);
        assert_eq!(parse_root_qdisc(""), None);
    }

    const QDISC: &str =
        "qdisc htb 1: root refcnt 3 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n";
    const CLASSES: &str =
        "class htb 1:10 parent 1:1 prio 0 rate 95Mbit ceil 95Mbit burst 1579b cburst 1579b \n\
         class htb 1:1 root rate 95Mbit ceil 95Mbit burst 1579b cburst 1579b \n\
         class htb 1:20 parent 1:1 prio 7 rate 8Kbit ceil 95Mbit burst 1600b cburst 1579b \n";

    #[test]
    fn only_the_layout_tact_builds_is_recognised_as_its_tree() {
        assert!(is_tact_tree(QDISC, CLASSES, None));
        // Someone else's htb: another handle, another default, another class or prio.
        assert!(!is_tact_tree(
            &QDISC.replace("htb 1:", "htb 2:"),
            CLASSES,
            None
        ));
        assert!(!is_tact_tree(&QDISC.replace("0x10", "0x20"), CLASSES, None));
        assert!(!is_tact_tree(
            QDISC,
            &format!("{CLASSES}class htb 1:30 parent 1:1 prio 7 rate 8Kbit ceil 95Mbit\n"),
            None
        ));
        assert!(!is_tact_tree(
            QDISC,
            &CLASSES.replace("prio 7", "prio 3"),
            None
        ));
        assert!(!is_tact_tree(
            QDISC,
            &CLASSES.replace("1:20 parent 1:1", "1:20 parent 1:10"),
            None
        ));
        assert!(!is_tact_tree(QDISC, "", None));
        assert!(!is_tact_tree(
            "qdisc tbf 8001: root refcnt 2 rate 1Mbit\n",
            CLASSES,
            None
        ));
        assert!(!is_tact_tree("", CLASSES, None));
    }

    /// `tc -j qdisc show dev tg0 invisible` on this machine (iproute2 6.1) for
    /// `tc qdisc add dev tg0 root tbf rate 100mbit burst 5kb latency 50ms`.
    const TBF_JSON: &str = r#"[{"kind":"tbf","handle":"804a:","root":true,"refcnt":3,"options":{"rate":12500000,"burst":5112,"lat":50000}},{"kind":"bfifo","handle":"0:","parent":"804a:1","options":{"limit":630120}}]"#;

    #[test]
    fn a_root_tbf_is_read_with_the_limit_of_its_bfifo() {
        let tbf = parse_tbf_root(TBF_JSON).unwrap();
        assert_eq!(
            tbf,
            TbfRoot {
                handle: "804a:".into(),
                rate_bits: 100_000_000,
                child: Some("bfifo 0:".into()),
                bfifo_limit: Some(630_120),
            }
        );
        // Another child: no limit to put back.
        let fq = TBF_JSON.replace(
            r#""kind":"bfifo","handle":"0:""#,
            r#""kind":"fq_codel","handle":"10:""#,
        );
        let tbf = parse_tbf_root(&fq).unwrap();
        assert_eq!(
            (tbf.child.as_deref(), tbf.bfifo_limit),
            (Some("fq_codel 10:"), None)
        );
        // Not a tbf at the root, or nothing: none.
        assert_eq!(
            parse_tbf_root(
                r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]"#
            ),
            None
        );
        assert_eq!(parse_tbf_root(""), None);
    }

    #[test]
    fn a_graft_replaces_tbfs_child_and_puts_its_bfifo_back() {
        let tbf = parse_tbf_root(TBF_JSON).unwrap();
        let plan = HtbPlan::grafted("tg0", &tbf, None, vec![BgMatch::Dscp(DSCP_LE)]).unwrap();
        assert_eq!(plan.rate_bits, 200_000_000, "twice tbf's rate");
        let setup: Vec<String> = plan.setup().iter().map(|c| c.to_string()).collect();
        assert_eq!(
            setup[..4],
            [
                "tc qdisc replace dev tg0 parent 804a:1 handle 1: htb default 10",
                "tc class add dev tg0 parent 1: classid 1:1 htb rate 200000000bit ceil 200000000bit quantum 1514",
                "tc class add dev tg0 parent 1:1 classid 1:10 htb rate 200000000bit ceil 200000000bit prio 0 quantum 1514",
                "tc class add dev tg0 parent 1:1 classid 1:20 htb rate 8000bit ceil 200000000bit prio 7 quantum 1514",
            ]
        );
        assert!(setup[4..]
            .iter()
            .all(|c| c.starts_with("tc filter add dev tg0 parent 1: ")));
        // Never `qdisc del`: that would leave tbf a noop child.
        assert_eq!(
            plan.teardown().to_string(),
            "tc qdisc replace dev tg0 parent 804a:1 bfifo limit 630120"
        );
        let mut fq = tbf.clone();
        fq.bfifo_limit = None;
        fq.child = Some("fq_codel 10:".into());
        let err = HtbPlan::grafted("tg0", &fq, None, vec![BgMatch::Dscp(DSCP_LE)]).unwrap_err();
        assert!(err.to_string().contains("fq_codel 10:"), "{err}");
    }

    #[test]
    fn a_grafted_tree_is_recognised_under_its_tbf_only() {
        let qdiscs = "qdisc tbf 804a: root refcnt 3 rate 100Mbit burst 5Kb lat 50ms \n\
             qdisc htb 1: parent 804a:1 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n";
        let classes = format!("class tbf 804a:1 parent 804a: leaf 1: \n{CLASSES}");
        assert!(is_tact_tree(qdiscs, &classes, Some("804a:1")));
        // Not at the root, and not under another tbf's class.
        assert!(!is_tact_tree(qdiscs, &classes, None));
        assert!(!is_tact_tree(qdiscs, &classes, Some("804b:1")));
        // tbf's bfifo back (the tree is gone), or someone's htb of another layout there.
        let bfifo = "qdisc tbf 804a: root refcnt 3 rate 100Mbit \n\
                     qdisc bfifo 804b: parent 804a:1 limit 630120b\n";
        assert!(!is_tact_tree(
            bfifo,
            "class tbf 804a:1 parent 804a: leaf 804b: \n",
            Some("804a:1")
        ));
        assert!(!is_tact_tree(
            &qdiscs.replace("0x10", "0x20"),
            &classes,
            Some("804a:1")
        ));
    }

    #[test]
    fn records_are_written_removed_and_kept_when_their_owner_lives() {
        let dir = tempfile::tempdir().unwrap();
        let records = TreeRecords::new(dir.path().join("htb")).unwrap();
        records.write("lo", None).unwrap();
        let path = dir
            .path()
            .join(format!("htb/{}-lo.json", std::process::id()));
        let r: TreeRecord = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!((r.dev.as_str(), r.ifindex), ("lo", ifindex("lo").unwrap()));
        assert_eq!(r.owner.pid, std::process::id() as i32);
        // Its owner (this test) lives: the sweep leaves it, and never runs tc for it.
        assert!(records.sweep(&Tc::in_netns("tact-test-none")).is_empty());
        assert!(path.exists());
        records.remove("lo").unwrap();
        assert!(!path.exists());
        records.remove("lo").unwrap();
        assert!(ifindex("tact-test-nope").is_err());

        // A dead owner (a pid above Linux's limit is never alive): a record of this namespace
        // whose interface is gone goes; one of another namespace stays.
        let dead = ProcId {
            pid: 1 << 23,
            start_time: 1,
        };
        let put = |name: &str, netns: (u64, u64)| {
            let r = TreeRecord {
                owner: dead,
                netns,
                dev: "tact-test-gone".into(),
                ifindex: 7,
                graft: None,
            };
            let p = dir.path().join("htb").join(name);
            fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
            p
        };
        let here = put("1-a.json", own_netns().unwrap());
        let there = put("2-a.json", (0, 0));
        assert!(records.sweep(&Tc::in_netns("tact-test-none")).is_empty());
        assert!(!here.exists());
        assert!(there.exists());
    }
}
