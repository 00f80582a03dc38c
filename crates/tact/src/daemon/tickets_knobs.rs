//! The daemon's enforcement of its tickets model (spec tickets.md §4 "Compiling", the flat
//! layout): a tact-owned [`KnobTree`] (`--tickets-cgroup NAME`, in the daemon's own cgroup of
//! each hierarchy, as `tact tickets run` makes its own) with one leaf per attached client, into
//! which the client's process is moved (the children it forks from then on start there), and
//!
//! - CPU weights ∝ each client's CPU rights (`cpu.shares` or `cpu.weight`), quantized by
//!   [`rights::compile`] as `tact tickets run` does (an idle client weighted as if it competed);
//! - disk weights ∝ disk rights, for clients holding disk tickets, where the kernel has a disk
//!   weight file (`blkio.bfq.weight`, `io.weight`, `io.bfq.weight`), acting only on the disks
//!   [`disk::where_weights_act`] names;
//! - memory protection = memory rights in bytes, for clients holding memory tickets, as
//!   `tact tickets run` writes it (`memory.min`/`memory.low`, v1 soft limits).
//!
//! The knobs are derived state: [`Knobs::sync`] brings the tree in line with the model (leaves
//! for new clients, none for gone ones, the weights of the moment), and runs after every request
//! and on the daemon's activity tick. The tree exists only while some client is attached, so an
//! idle daemon holds no cgroup; a detached or exited client's leaf is removed, its processes
//! moved back where the client came from, and [`Knobs::teardown`] does that for all at exit.
//! A failure to write is said once and leaves the model served: the daemon never stops over it.
//!
//! Without root, [`Knobs::Alps`] holds the state of the share engine that applies the CPU
//! rights instead ([`super::tickets_alps`], which runs in a thread of its own): its shares are
//! the clients' cpu knobs.

use std::collections::BTreeMap;
use std::path::Path;

use tact_core::tickets::compile::{WeightRange, CPU_SHARES_V1, CPU_WEIGHT_V2};
use tact_core::tickets::{CurrencyId, Model, PerResource, Resource, TicketSystem};
use tact_linux::actuate::cgroup_cpu::{read_procs, CgroupVersion, CpuHierarchy};
use tact_linux::actuate::cgroup_knobs::{
    Controller, DiskKnob, Hierarchies, KnobTree, KnobWrite, MemProtection, NodeId,
};
use tact_proto::tickets::Knob;

use super::tickets_alps::Engine;
use crate::tickets::cgroup::parent_cgroup;
use crate::tickets::{disk, rights};

/// Whether and how the daemon applies the model.
pub enum Knobs {
    /// Cgroup knobs per client (boxed: the daemon holds one `Knobs` for its life).
    Cgroup(Box<Enforcer>),
    /// The share engine, for the CPU rights of the daemon's own user's clients (not root).
    Alps(Engine),
    /// The model is served, not applied, for this reason.
    Off(String),
}

impl Knobs {
    /// Cgroups when the daemon may write them (root, a cpu controller, and on v2 a parent that
    /// holds no process), else why not; `name` is the tree's directory, made under `parent` (a
    /// directory of the cpu hierarchy) or the daemon's own cgroup. Nothing is created until a
    /// client is attached. Without root, the share engine (started by the daemon). `Err`: a
    /// `parent` that cannot be the tree's ([`parent_cgroup`]).
    pub fn detect(
        name: &str,
        parent: Option<&Path>,
        root: bool,
        disabled: bool,
    ) -> Result<Knobs, String> {
        if disabled {
            return Ok(Knobs::Off("not enforced (--no-tickets-enforce)".into()));
        }
        if !root {
            return Ok(Knobs::Alps(Engine::new(nix::unistd::geteuid().as_raw())));
        }
        let off = |e: &dyn std::fmt::Display| Ok(Knobs::Off(format!("not enforced: {e}")));
        let hierarchies = match Hierarchies::detect() {
            Ok(h) => h,
            Err(e) => return off(&e),
        };
        let hier = match CpuHierarchy::detect() {
            Ok(h) => h,
            Err(e) => return off(&e),
        };
        let under = parent
            .map(|dir| {
                let others = [Controller::Memory, Controller::Io];
                parent_cgroup(&hier, &hierarchies, dir, &others)
            })
            .transpose()?;
        let base = match parent {
            Some(dir) => dir.to_path_buf(),
            None => match hier.own_cgroup() {
                Ok(dir) => dir,
                Err(e) => return off(&e),
            },
        };
        if let Some(why) = no_internal_processes(&hier, &base) {
            return off(&why);
        }
        Ok(Knobs::Cgroup(Box::new(Enforcer {
            name: name.to_string(),
            under,
            hierarchies,
            cpu_range: match hier.version {
                CgroupVersion::V1 => CPU_SHARES_V1,
                CgroupVersion::V2 => CPU_WEIGHT_V2,
            },
            tree: None,
            failure: None,
            told_disk: false,
            told_mem: false,
        })))
    }

    /// Whether the rights are applied, and where (or why not), for `show` and `explain`.
    pub fn describe(&self) -> (bool, String) {
        match self {
            Knobs::Off(why) => (false, why.clone()),
            Knobs::Alps(engine) => engine.describe(),
            Knobs::Cgroup(e) => match (&e.failure, &e.tree) {
                (Some(why), _) => (false, format!("not enforced: {why}")),
                (None, Some(t)) => (
                    true,
                    format!(
                        "cgroup knobs, one leaf per client under {}",
                        t.top.display()
                    ),
                ),
                (None, None) => (
                    true,
                    format!(
                        "cgroup knobs, one leaf per client under {}{} (made at the first attach)",
                        e.under.as_ref().map_or(String::new(), |u| format!("{u}/")),
                        e.name
                    ),
                ),
            },
        }
    }

    /// What was written for client `pid`, per resource.
    pub fn written(&self, pid: u32) -> BTreeMap<Resource, Knob> {
        if let Knobs::Alps(engine) = self {
            return engine
                .written(pid)
                .map(|k| (Resource::Cpu, k))
                .into_iter()
                .collect();
        }
        let leaf = match self {
            Knobs::Cgroup(e) if e.failure.is_none() => {
                e.tree.as_ref().and_then(|t| t.leaves.get(&pid))
            }
            _ => None,
        };
        leaf.map_or_else(BTreeMap::new, |l| {
            Resource::ALL
                .into_iter()
                .filter_map(|r| l.written[r].clone().map(|k| (r, k)))
                .collect()
        })
    }

    /// Brings the knobs in line with `system` (see the module); `starts` tells a reused pid
    /// apart. (The share engine follows the model by itself, every tick.)
    pub fn sync(&mut self, system: &TicketSystem, starts: &BTreeMap<u32, u64>) {
        if let Knobs::Cgroup(e) = self {
            if e.failure.is_none() {
                if let Err(why) = e.sync(system, starts) {
                    eprintln!("tact daemon: tickets are no longer enforced: {why}");
                    e.failure = Some(why);
                    e.teardown();
                }
            }
        }
    }

    /// At the daemon's exit: moves every client back where it came from, removes the tree and
    /// makes none again; tells the share engine to resume everyone and end.
    pub fn shutdown(&mut self) {
        match self {
            Knobs::Cgroup(e) => {
                e.teardown();
                // For good: a tick or a request between this and the daemon's exit would make
                // the tree again, and leave it (a v2 VM run of the daemon's tests caught one).
                e.failure = Some("the daemon is stopping".into());
            }
            Knobs::Alps(engine) => engine.stop(),
            Knobs::Off(_) => {}
        }
    }

    /// Whether client `pid` competes for the CPU as the share engine sees it, if the engine
    /// governs it (the engine's stops are not the client's: `/proc` shows them as inactivity).
    pub fn cpu_activity(&self, pid: u32) -> Option<bool> {
        match self {
            Knobs::Alps(engine) => engine.cpu_activity(pid),
            _ => None,
        }
    }
}

/// Why the tree cannot be made under `base` (a directory of the cpu hierarchy), if the kernel's
/// rule says so: on cgroup v2 a cgroup other than the root that holds processes gives its
/// children no controllers (the kernel refuses memory and io in its `cgroup.subtree_control`,
/// and cpu one level further down). Said at the start, rather than at the first attach.
///
/// Only the true root is exempt. A container's cgroup root (a cgroup namespace's, or a subtree
/// mounted at /sys/fs/cgroup) is not: the kernel gives every cgroup but the true root a
/// `cgroup.type` file, so that tells them apart where the mount point cannot.
fn no_internal_processes(hier: &CpuHierarchy, base: &Path) -> Option<String> {
    let true_root = base == hier.cpu.dir && !base.join("cgroup.type").exists();
    if hier.version != CgroupVersion::V2 || true_root {
        return None;
    }
    let procs = read_procs(base).ok()?;
    let n = procs.len();
    (n > 0).then(|| {
        format!(
            "{} holds {n} process(es){}, and on cgroup v2 the children of a cgroup with \
             processes get no controllers (only the root's may): give the daemon --cgroup-parent \
             DIR, an empty cgroup (docs/tickets.md, \"Running the daemon\")",
            base.display(),
            if procs.contains(&(std::process::id() as i32)) {
                " (the daemon among them)"
            } else {
                ""
            }
        )
    })
}

/// The cgroup side.
pub struct Enforcer {
    name: String,
    /// The tree's parent as a cgroup path (`--cgroup-parent`); `None`: the daemon's own cgroup.
    under: Option<String>,
    hierarchies: Hierarchies,
    cpu_range: WeightRange,
    tree: Option<Tree>,
    /// Why enforcement stopped (the tree could not be made, or a knob not written).
    failure: Option<String>,
    told_disk: bool,
    told_mem: bool,
}

struct Tree {
    knobs: KnobTree,
    /// Its directory in the cpu hierarchy, for messages.
    top: std::path::PathBuf,
    /// The disk weight file and range, once a client's leaf showed which (or that none exists).
    disk: Option<Option<(DiskKnob, WeightRange)>>,
    leaves: BTreeMap<u32, Leaf>,
}

struct Leaf {
    node: NodeId,
    /// The start time of the process moved in.
    start: u64,
    written: PerResource<Option<Knob>>,
}

impl Enforcer {
    fn sync(&mut self, system: &TicketSystem, starts: &BTreeMap<u32, u64>) -> Result<(), String> {
        let clients: Vec<(u32, CurrencyId, u64)> = system
            .processes()
            .filter_map(|p| starts.get(&p.pid).map(|s| (p.pid, p.currency, *s)))
            .collect();
        if let Some(tree) = self.tree.as_mut() {
            let gone: Vec<u32> = tree
                .leaves
                .iter()
                .filter(|(pid, leaf)| !clients.iter().any(|c| c.0 == **pid && c.2 == leaf.start))
                .map(|(pid, _)| *pid)
                .collect();
            for pid in gone {
                let leaf = tree.leaves.remove(&pid).expect("listed above");
                tree.knobs
                    .remove_node(leaf.node)
                    .map_err(|e| format!("cannot remove the cgroup of process {pid}: {e}"))?;
            }
        }
        if clients.is_empty() {
            self.teardown();
            return Ok(());
        }
        if self.tree.is_none() {
            self.tree = Some(self.create()?);
        }
        let tree = self.tree.as_mut().expect("made above");
        for &(pid, _, start) in &clients {
            if tree.leaves.contains_key(&pid) {
                continue;
            }
            let node = tree
                .knobs
                .add_node(KnobTree::ROOT, &format!("pid{pid}"))
                .map_err(|e| format!("cannot make a cgroup for process {pid}: {e}"))?;
            if let Err(e) = tree.knobs.move_pid(node, pid as i32) {
                // It exited since the model last looked: the next refresh records that.
                tracing::warn!("cannot move process {pid} into its cgroup: {e}");
                let _ = tree.knobs.remove_node(node);
                continue;
            }
            tree.leaves.insert(
                pid,
                Leaf {
                    node,
                    start,
                    written: PerResource::from_fn(|_| None),
                },
            );
        }
        self.write(system.model(), &clients)
    }

    /// The tree over the cpu controller and, where the kernel has them, the memory and
    /// io/blkio ones (a missing one is said once: its tickets are not applied).
    fn create(&mut self) -> Result<Tree, String> {
        let mut controllers = vec![Controller::Cpu];
        for (r, c) in [
            (Resource::Mem, Controller::Memory),
            (Resource::Disk, Controller::Io),
        ] {
            match self.hierarchies.get(c) {
                Ok(_) => controllers.push(c),
                Err(e) => eprintln!("tact daemon: {r} tickets are not applied: {e}"),
            }
        }
        let knobs = KnobTree::create(
            &self.hierarchies,
            &controllers,
            &self.name,
            self.under.as_deref(),
        )
        .map_err(|e| format!("cannot make the cgroup tree {}: {e}", self.name))?;
        let top = knobs
            .node_dir(KnobTree::ROOT, Controller::Cpu)
            .map_err(|e| e.to_string())?;
        eprintln!(
            "tact daemon: tickets enforced in {} (one cgroup per client)",
            top.display()
        );
        Ok(Tree {
            knobs,
            top,
            disk: None,
            leaves: BTreeMap::new(),
        })
    }

    /// Writes the knobs that changed, for `clients` (pid, currency, start) in model order.
    fn write(&mut self, model: &Model, clients: &[(u32, CurrencyId, u64)]) -> Result<(), String> {
        let tree = self.tree.as_mut().expect("called with a tree");
        let leaves: Vec<(usize, u32)> = clients
            .iter()
            .enumerate()
            .filter(|(_, c)| tree.leaves.contains_key(&c.0))
            .map(|(i, c)| (i, c.0))
            .collect();
        let holding = |r: Resource| -> Vec<(CurrencyId, bool)> {
            clients
                .iter()
                .map(|&(_, id, _)| (id, rights::holds_tickets(model, id, r)))
                .collect()
        };
        let cpu = rights::compile(
            model,
            &holding(Resource::Cpu),
            Resource::Cpu,
            self.cpu_range,
        );
        for &(i, pid) in &leaves {
            let leaf = &tree.leaves[&pid];
            if leaf.written[Resource::Cpu].as_ref().map(|k| k.value) == Some(cpu[i].weight) {
                continue;
            }
            let w = tree
                .knobs
                .set_cpu_weight(leaf.node, cpu[i].weight)
                .map_err(|e| e.to_string())?;
            record(tree, pid, Resource::Cpu, &w, cpu[i].weight);
        }
        let disk_holders = holding(Resource::Disk);
        if disk_holders.iter().any(|h| h.1) {
            if tree.disk.is_none() {
                tree.disk = Some(find_disk_knob(tree, &leaves, &mut self.told_disk));
            }
            if let Some(Some((knob, range))) = tree.disk {
                let compiled = rights::compile(model, &disk_holders, Resource::Disk, range);
                if !self.told_disk {
                    self.told_disk = true;
                    let disks = disk::disks(Path::new("/sys/block"));
                    eprintln!(
                        "tact daemon: disk: {}",
                        disk::where_weights_act(knob, &disks)
                    );
                }
                for &(i, pid) in leaves.iter().filter(|(i, _)| disk_holders[*i].1) {
                    let leaf = &tree.leaves[&pid];
                    let weight = compiled[i].weight;
                    if leaf.written[Resource::Disk].as_ref().map(|k| k.value) == Some(weight) {
                        continue;
                    }
                    let w = tree
                        .knobs
                        .set_disk_weight(leaf.node, weight)
                        .map_err(|e| e.to_string())?;
                    record(tree, pid, Resource::Disk, &w, weight);
                }
            }
        }
        if tree.knobs.version(Controller::Memory).is_ok() {
            for &(i, pid) in &leaves {
                let id = clients[i].1;
                if !rights::holds_tickets(model, id, Resource::Mem) {
                    continue;
                }
                let bytes = model
                    .rights(id, Resource::Mem)
                    .unwrap_or(0.0)
                    .round()
                    .max(0.0) as u64;
                let leaf = &tree.leaves[&pid];
                if leaf.written[Resource::Mem].as_ref().map(|k| k.value) == Some(bytes) {
                    continue;
                }
                let p = if bytes == 0 {
                    MemProtection::None
                } else if rights::hard_all_the_way(model, id, Resource::Mem) {
                    MemProtection::Hard(bytes)
                } else {
                    MemProtection::Soft(bytes)
                };
                let writes = tree
                    .knobs
                    .set_mem_protection(leaf.node, p)
                    .map_err(|e| e.to_string())?;
                // Said once, by the first write that carries it: the first write of a new
                // client (its rights still 0, no protection) carries none.
                if !self.told_mem {
                    if let Some(caveat) = writes.iter().find_map(|w| w.caveat.as_deref()) {
                        self.told_mem = true;
                        eprintln!("tact daemon: memory: {caveat}");
                    }
                }
                // v2 writes min and low: the one holding the bytes is what is enforced.
                let main = writes
                    .iter()
                    .find(|w| w.written == bytes.to_string())
                    .unwrap_or(&writes[0]);
                record(tree, pid, Resource::Mem, main, bytes);
            }
        }
        Ok(())
    }

    fn teardown(&mut self) {
        if let Some(mut tree) = self.tree.take() {
            if let Err(e) = tree.knobs.teardown() {
                eprintln!(
                    "tact daemon: cannot remove the tickets cgroups {}: {e}",
                    tree.top.display()
                );
            }
        }
    }
}

/// The disk weight file of the tree's leaves (all alike), or `None`, said once, without one.
fn find_disk_knob(
    tree: &Tree,
    leaves: &[(usize, u32)],
    told: &mut bool,
) -> Option<(DiskKnob, WeightRange)> {
    if let Err(e) = tree.knobs.version(Controller::Io) {
        tracing::debug!("no disk knobs: {e}");
        return None;
    }
    let leaf = &tree.leaves[&leaves.first()?.1];
    match tree.knobs.disk_knob(leaf.node) {
        Ok(knob) => Some((knob, disk::weight_range(knob))),
        Err(e) => {
            *told = true;
            eprintln!("tact daemon: disk tickets are not applied: {e}");
            None
        }
    }
}

fn record(tree: &mut Tree, pid: u32, r: Resource, w: &KnobWrite, value: u64) {
    if let Some(leaf) = tree.leaves.get_mut(&pid) {
        leaf.written[r] = Some(Knob {
            file: w.file.display().to_string(),
            value,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_linux::ProcReader;

    /// A container's view of cgroup v2: the mount at /sys/fs/cgroup is the cgroup
    /// /docker/0123abcd, whose processes keep its children from getting controllers. Only a
    /// directory without `cgroup.type` is the true root.
    #[test]
    fn only_the_true_root_may_hold_processes_beside_the_tree() {
        let fs_root = tempfile::tempdir().unwrap();
        let proc_root = tempfile::tempdir().unwrap();
        let cg = fs_root.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("cgroup.controllers"), "cpu memory io\n").unwrap();
        std::fs::write(cg.join("cgroup.procs"), "1\n7\n").unwrap();
        let mountinfo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tact-linux/tests/fixtures/cgroup-container/mountinfo");
        let reader = ProcReader::with_root(proc_root.path());
        let hier = CpuHierarchy::detect_in(&mountinfo, fs_root.path(), reader).unwrap();
        assert_eq!(hier.cpu.dir, cg);
        // The container's root is a cgroup like any other.
        std::fs::write(cg.join("cgroup.type"), "domain\n").unwrap();
        let why = no_internal_processes(&hier, &cg).expect("refused");
        assert!(why.contains("holds 2 process(es)"), "{why}");
        // The true root has no cgroup.type, and may.
        std::fs::remove_file(cg.join("cgroup.type")).unwrap();
        assert_eq!(no_internal_processes(&hier, &cg), None);
    }
}
