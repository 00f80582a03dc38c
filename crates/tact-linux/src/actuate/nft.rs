//! DSCP marking of a cgroup's traffic from outside (spec idletime §6, "Marking"): a tact-owned
//! nftables table whose output-hook rule sets IPv4 DSCP and the IPv6 traffic class's DSCP on
//! every packet of a socket created in a given cgroup v2 directory, so that an unmodified
//! program's packets reach the htb background class ([`super::htb`]) that matches on DSCP.
//!
//! ```text
//! table inet tact-<PID> {
//!     chain output {
//!         type route hook output priority mangle; policy accept;
//!         socket cgroupv2 level L "PATH" ip dscp set 1
//!         socket cgroupv2 level L "PATH" ip6 dscp set 1
//!     }
//! }
//! ```
//!
//! Why this form. Only a socket's owner can set IP_TOS, so marking from outside needs the
//! firewall (CAP_NET_ADMIN). `meta cgroup` matches net_cls classids, a cgroup v1 controller that
//! is rarely mounted; `socket cgroupv2` matches the cgroup v2 directory the socket was created in
//! (or any descendant, by `level`), with no controller needed. A `route` chain, as iptables'
//! mangle OUTPUT, re-routes a packet whose marking changed. The DSCP write keeps the ECN bits.
//!
//! A SIGKILLed tact leaves its table; [`Nft::sweep_stale`] deletes the `tact-<PID>` tables whose
//! PID is dead.
//!
//! Limits the caller must say: the match is on the cgroup the *socket* was created in, so
//! sockets a process opened before it was moved into the cgroup stay unmarked; and nft resolves
//! the path below its built-in `/sys/fs/cgroup` ([`NFT_CGROUP_ROOT`]), so a cgroup2 mounted
//! elsewhere cannot be named.
//!
//! Packets of a process in another network namespace that this one forwards never pass this
//! namespace's output hook (their socket is in the other namespace). They enter through the
//! local end of a veth ([`crate::probe::veth_peer`]), and an [`IngressMark`] marks them there, a
//! chain of the same table on that interface's ingress hook (the `inet` family's, Linux 5.10):
//!
//! ```text
//! table inet tact-<PID> {
//!     chain from-<IFINDEX> {
//!         type filter hook ingress device "VETH" priority filter; policy accept;
//!         ip dscp set 1
//!         ip6 dscp set 1
//!     }
//! }
//! ```
//!
//! Ingress rather than prerouting with `iif`: it runs before both routing and bridging, so a
//! veth that is a bridge's port (where prerouting sees the bridge as the input interface, and
//! with it every other port's packets) is matched as well as a routed one. A table without a
//! cgroup to match ([`Nft::create_table`]) holds such chains only.

use std::io::Write;
use std::path::{Component, Path};
use std::process::{Command, Stdio};

use super::stale;
use crate::error::{Error, Result};
use crate::probe::caps::{has_capability, Capability};

/// The directory nft (1.0) prepends to a `socket cgroupv2` path before it looks the cgroup up.
pub const NFT_CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The marking of one cgroup's traffic, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DscpMark {
    /// The nftables table (family `inet`) that holds the rule: tact's alone.
    pub table: String,
    /// The cgroup as nft names it: its directory relative to [`NFT_CGROUP_ROOT`].
    pub cgroup: String,
    /// The cgroup's depth in its hierarchy (the hierarchy's root is level 0).
    pub level: usize,
    pub dscp: u8,
}

impl DscpMark {
    /// Marks traffic of sockets created in `cgroup_dir` (a cgroup v2 directory at depth `level`
    /// of its hierarchy) with `dscp`, in table `table` (letters, digits, `-`, `_`).
    pub fn new(table: &str, cgroup_dir: &Path, level: usize, dscp: u8) -> Result<DscpMark> {
        let invalid = |reason: String| Error::Unavailable {
            what: format!("DSCP marking of {} by nftables", cgroup_dir.display()),
            reason,
        };
        check_table_and_dscp(table, dscp).map_err(invalid)?;
        if level == 0 {
            return Err(invalid(
                "the hierarchy's root holds every process; mark a cgroup below it".into(),
            ));
        }
        let cgroup = nft_cgroup_path(cgroup_dir).map_err(invalid)?;
        Ok(DscpMark {
            table: table.to_string(),
            cgroup,
            level,
            dscp,
        })
    }

    /// The `nft -f` script that creates the table with its rules.
    pub fn script(&self) -> String {
        let rule = |family: &str| {
            format!(
                "        socket cgroupv2 level {} \"{}\" {family} dscp set {}\n",
                self.level, self.cgroup, self.dscp
            )
        };
        format!(
            "table inet {} {{\n    chain output {{\n        type route hook output priority mangle; policy accept;\n{}{}    }}\n}}\n",
            self.table,
            rule("ip"),
            rule("ip6")
        )
    }
}

/// The marking of every packet that enters this network namespace through one interface (the
/// local end of a veth whose other end is in the job's namespace), as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressMark {
    pub table: String,
    /// `from-<IFINDEX>`: one chain per interface, named by its index, which the name of a
    /// chain can always hold.
    pub chain: String,
    pub device: String,
    pub dscp: u8,
}

impl IngressMark {
    /// Marks what enters through `device` (index `ifindex`) with `dscp`, in table `table`.
    pub fn new(table: &str, device: &str, ifindex: u32, dscp: u8) -> Result<IngressMark> {
        let invalid = |reason: String| Error::Unavailable {
            what: format!("DSCP marking of the packets that enter through {device} by nftables"),
            reason,
        };
        check_table_and_dscp(table, dscp).map_err(invalid)?;
        // The kernel's own rule (dev_valid_name), and nothing that would end nft's quoted string.
        if device.is_empty()
            || device.len() > 15
            || device == "."
            || device == ".."
            || device.contains(['/', ':', '"', '\\'])
            || device.chars().any(char::is_whitespace)
        {
            return Err(invalid(format!(
                "`{device}` is not an interface name nft can quote"
            )));
        }
        Ok(IngressMark {
            table: table.to_string(),
            chain: format!("from-{ifindex}"),
            device: device.to_string(),
            dscp,
        })
    }

    /// The `nft -f` script that adds the chain with its rules to the (existing) table.
    pub fn script(&self) -> String {
        let (t, c) = (&self.table, &self.chain);
        format!(
            "add chain inet {t} {c} {{ type filter hook ingress device \"{}\" priority filter; policy accept; }}\n\
             add rule inet {t} {c} ip dscp set {d}\n\
             add rule inet {t} {c} ip6 dscp set {d}\n",
            self.device,
            d = self.dscp
        )
    }

    /// The arguments of `nft` that delete the chain, rules and all.
    pub fn delete_args(&self) -> Vec<String> {
        ["delete", "chain", "inet", &self.table, &self.chain]
            .map(String::from)
            .to_vec()
    }
}

/// Whether `table` is a name tact gives its tables and `dscp` a DSCP; `Err`: why not.
fn check_table_and_dscp(table: &str, dscp: u8) -> std::result::Result<(), String> {
    if table.is_empty()
        || !table
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!("`{table}` is not a table name tact makes"));
    }
    if dscp > 63 {
        return Err(format!("DSCP {dscp} is above 63"));
    }
    Ok(())
}

/// `dir` as nft's `socket cgroupv2` names it: relative to [`NFT_CGROUP_ROOT`], with no `..`
/// and no character that would end nft's quoted string. `Err`: why it cannot be named.
pub fn nft_cgroup_path(dir: &Path) -> std::result::Result<String, String> {
    let rel = dir.strip_prefix(NFT_CGROUP_ROOT).map_err(|_| {
        format!(
            "nft names cgroups below {NFT_CGROUP_ROOT} only, and {} is not there",
            dir.display()
        )
    })?;
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!("{} is not a plain path", dir.display()));
    }
    let text = rel
        .to_str()
        .filter(|t| !t.is_empty() && !t.contains(['"', '\\', '\n']))
        .ok_or_else(|| format!("nft cannot quote the path {}", dir.display()))?;
    Ok(text.to_string())
}

/// The pid in the name of a table tact makes for its marking, `tact-<PID>`.
pub fn table_owner(name: &str) -> Option<i32> {
    let pid = name.strip_prefix("tact-")?;
    if !pid.bytes().all(|b| b.is_ascii_digit()) || pid.starts_with('0') {
        return None;
    }
    pid.parse().ok()
}

/// Runs `nft` in this process's network namespace.
#[derive(Debug, Clone, Default)]
pub struct Nft;

impl Nft {
    /// What marking needs: CAP_NET_ADMIN, and an `nft` that talks to a kernel with nf_tables
    /// (`nft list tables` fails without it).
    pub fn check(&self) -> Result<()> {
        if !has_capability(Capability::NetAdmin)? {
            return Err(Error::Unavailable {
                what: "nftables (DSCP marking of the job's packets)".into(),
                reason: "it needs CAP_NET_ADMIN".into(),
            });
        }
        self.run(&["list", "tables"], None).map(drop)
    }

    /// Creates the marking's table. A table of that name that exists already is an error, not
    /// reused: it is not this run's.
    pub fn apply(&self, mark: &DscpMark) -> Result<()> {
        self.refuse_existing(&mark.table)?;
        self.run(&["-f", "-"], Some(&mark.script())).map(drop)
    }

    /// Creates table `inet TABLE` with no chain, for [`IngressMark`]s alone (no cgroup to
    /// match); an existing one is an error, as with [`Nft::apply`].
    pub fn create_table(&self, table: &str) -> Result<()> {
        self.refuse_existing(table)?;
        self.run(&["add", "table", "inet", table], None).map(drop)
    }

    /// Deletes the marking's table.
    pub fn remove(&self, mark: &DscpMark) -> Result<()> {
        self.delete_table(&mark.table)
    }

    /// Deletes table `inet TABLE`, chains and all.
    pub fn delete_table(&self, table: &str) -> Result<()> {
        self.run(&["delete", "table", "inet", table], None)
            .map(drop)
    }

    /// Adds an ingress chain to its table (which exists: [`Nft::apply`], [`Nft::create_table`]).
    pub fn add_ingress(&self, mark: &IngressMark) -> Result<()> {
        self.run(&["-f", "-"], Some(&mark.script())).map(drop)
    }

    /// Deletes an ingress chain. One that is gone already is no error: the kernel may drop a
    /// base chain whose device was deleted (the job's namespace went, and its veth with it).
    pub fn remove_ingress(&self, mark: &IngressMark) -> Result<()> {
        let args = mark.delete_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match self.run(&args, None) {
            Ok(_) => Ok(()),
            Err(e) => {
                let listed = self.run(&["list", "table", "inet", &mark.table], None)?;
                let chain = format!("chain {} {{", mark.chain);
                if listed.lines().any(|l| l.trim() == chain) {
                    Err(e)
                } else {
                    Ok(())
                }
            }
        }
    }

    fn refuse_existing(&self, table: &str) -> Result<()> {
        if self.exists(table)? {
            return Err(Error::Unavailable {
                what: format!("the nftables table inet {table}"),
                reason: "it exists already; tact makes its own and does not touch another's".into(),
            });
        }
        Ok(())
    }

    /// Whether table `inet NAME` exists.
    pub fn exists(&self, table: &str) -> Result<bool> {
        Ok(self.inet_tables()?.iter().any(|t| t == table))
    }

    /// Deletes the tables `inet tact-<PID>` whose tact is gone (a SIGKILL of tact leaves its
    /// table), and returns their names. Only that exact form is tact's; a table of a live pid
    /// stays (a reused pid only delays its sweep).
    pub fn sweep_stale(&self) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for table in self.inet_tables()? {
            if table_owner(&table).is_some_and(|pid| !stale::alive(pid)) {
                self.run(&["delete", "table", "inet", &table], None)?;
                removed.push(table);
            }
        }
        Ok(removed)
    }

    /// The names of the `inet` tables in this network namespace.
    fn inet_tables(&self) -> Result<Vec<String>> {
        let listed = self.run(&["list", "tables", "inet"], None)?;
        Ok(listed
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                ["table", "inet", name] => Some(name.to_string()),
                _ => None,
            })
            .collect())
    }

    /// Runs `nft ARGS` with `stdin`; its standard output, or an error with the command line and
    /// nft's message.
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let command = format!("nft {}", args.join(" "));
        let fail = |msg: String| Error::Command {
            command: command.clone(),
            msg,
        };
        let mut child = Command::new("nft")
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot run nft: {e} (is nftables installed?)")))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .map_err(|e| fail(format!("cannot write nft's input: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| fail(format!("cannot wait for nft: {e}")))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(fail(format!("{}: {}", out.status, stderr.trim())));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_marks_both_families_of_one_cgroup() {
        let m = DscpMark::new(
            "tact-42",
            Path::new("/sys/fs/cgroup/unified/tact-42-net"),
            1,
            1,
        )
        .unwrap();
        assert_eq!(m.cgroup, "unified/tact-42-net");
        let s = m.script();
        assert!(s.starts_with("table inet tact-42 {\n"), "{s}");
        assert!(
            s.contains("type route hook output priority mangle; policy accept;"),
            "{s}"
        );
        assert!(
            s.contains("socket cgroupv2 level 1 \"unified/tact-42-net\" ip dscp set 1\n"),
            "{s}"
        );
        assert!(
            s.contains("socket cgroupv2 level 1 \"unified/tact-42-net\" ip6 dscp set 1\n"),
            "{s}"
        );
    }

    #[test]
    fn cgroups_nft_cannot_name_are_refused() {
        let p = |s: &str| nft_cgroup_path(Path::new(s));
        assert_eq!(p("/sys/fs/cgroup/a/b").unwrap(), "a/b");
        assert!(p("/mnt/cg2/tact-1-net").unwrap_err().contains("below"));
        assert!(p("/sys/fs/cgroup").is_err());
        assert!(p("/sys/fs/cgroup/a/../b").is_err());
        assert!(p("/sys/fs/cgroup/a\"b").is_err());
        let dir = Path::new("/sys/fs/cgroup/x");
        assert!(DscpMark::new("tact 1", dir, 1, 1).is_err());
        assert!(DscpMark::new("t", dir, 1, 64).is_err());
        assert!(DscpMark::new("t", dir, 0, 1).is_err());
    }

    #[test]
    fn an_ingress_mark_marks_both_families_entering_through_one_device() {
        let m = IngressMark::new("tact-42", "veth-job0", 17, 1).unwrap();
        assert_eq!(m.chain, "from-17");
        assert_eq!(
            m.script(),
            "add chain inet tact-42 from-17 { type filter hook ingress device \"veth-job0\" \
             priority filter; policy accept; }\n\
             add rule inet tact-42 from-17 ip dscp set 1\n\
             add rule inet tact-42 from-17 ip6 dscp set 1\n"
        );
        assert_eq!(
            m.delete_args(),
            ["delete", "chain", "inet", "tact-42", "from-17"]
        );
    }

    #[test]
    fn devices_nft_cannot_quote_are_refused() {
        for bad in [
            "",
            "a\"b",
            "a b",
            "a/b",
            "a:1",
            "..",
            "sixteen-chars-xx",
            "a\\b",
        ] {
            assert!(IngressMark::new("t", bad, 1, 1).is_err(), "{bad:?}");
        }
        assert!(IngressMark::new("t", "fifteen-chars-x", 1, 1).is_ok());
        assert!(IngressMark::new("tact 1", "v", 1, 1).is_err());
        assert!(IngressMark::new("t", "v", 1, 64).is_err());
    }

    #[test]
    fn only_tables_named_as_tact_names_them_have_an_owner() {
        assert_eq!(table_owner("tact-4242"), Some(4242));
        assert_eq!(table_owner("tact-test-4242"), None);
        assert_eq!(table_owner("tact-4242-net"), None);
        assert_eq!(table_owner("tact-"), None);
        assert_eq!(table_owner("tact-0"), None);
        assert_eq!(table_owner("tact-+42"), None);
        assert_eq!(table_owner("filter"), None);
        assert_eq!(table_owner("tact-99999999999999999999"), None);
    }
}
