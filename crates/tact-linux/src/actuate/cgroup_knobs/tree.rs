//! A tact-owned subtree of cgroups, the same nodes in every hierarchy the tree uses: on v1 one
//! directory per node in each controller's hierarchy (and in cpuacct's, when it is mounted apart
//! from cpu, to count CPU time); on v2 one directory per node in the unified hierarchy.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::hierarchy::{Controller, Hierarchies};
use crate::actuate::cgroup_cpu::{
    check_name, is_busy, mkdir, move_to, proc_cgroup_dir, read_procs, write_pid, CgroupMount,
    CgroupVersion, POPULATED_HINT, TEARDOWN_PATIENCE,
};
use crate::actuate::stale;
use crate::error::{Error, Result};
use crate::probe::proc::ProcReader;

/// Makes v1 blkio count the bytes of every whole disk, which [`KnobTree::disk_bytes`] reads from
/// `blkio.throttle.io_service_bytes_recursive`. Since Linux 6.x blk-throttle sets itself up on a
/// disk (and only then counts its bios per cgroup) the first time some cgroup configures a
/// limit there, so on a disk nobody throttles the file stays at 0 (as a `dd iflag=direct` in a
/// fresh cgroup on 6.18 showed). Writing `MAJ:MIN 0` ("no limit") to `top`'s
/// `blkio.throttle.read_bps_device` sets it up without limiting anything; it stays set up for
/// the disk's life. A disk that refuses (no blk-throttle for it) keeps counting nothing, which
/// is what it did before; a `top` that has no such file (not a blkio cgroup) is left alone.
fn count_disk_bytes_v1(top: &Path) {
    let knob = top.join("blkio.throttle.read_bps_device");
    let (Ok(disks), true) = (fs::read_dir("/sys/block"), knob.exists()) else {
        return;
    };
    for disk in disks.flatten() {
        if let Ok(dev) = fs::read_to_string(disk.path().join("dev")) {
            let _ = fs::write(&knob, format!("{} 0\n", dev.trim()));
        }
    }
}

/// A node of a [`KnobTree`], in the order of creation; [`KnobTree::ROOT`] is `BASE/NAME` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct NodeId(pub usize);

/// One hierarchy the tree has directories in.
#[derive(Debug)]
pub(crate) struct Hier {
    pub(crate) version: CgroupVersion,
    /// The controllers whose knobs are here: several on v2 or when co-mounted on v1, none in a
    /// cpuacct mirror.
    pub(crate) controllers: Vec<Controller>,
    /// CPU usage is read here (v2, or v1 with cpuacct).
    pub(crate) counts_cpu: bool,
    /// v1: the controller named on this hierarchy's line of `/proc/PID/cgroup`.
    proc_name: &'static str,
    mount: CgroupMount,
    /// The cgroup the tree's top directory is made in.
    base: PathBuf,
    /// This process's own cgroup here, where a process of unknown origin goes back to (one a
    /// job spawned into a node forked from here). Not BASE: on v2 a BASE that enables
    /// controllers for its children may hold no process unless it is the root.
    home: PathBuf,
    /// `BASE/NAME`.
    top: PathBuf,
    /// tact made `top` (so teardown may remove it).
    created: bool,
    /// v2: the controllers tact added to BASE's `cgroup.subtree_control`, taken back at teardown.
    enabled_in_base: Vec<&'static str>,
}

impl Hier {
    /// The names `cgroup.subtree_control` takes for this hierarchy's controllers.
    fn v2_names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|c| c.v2_name()).collect()
    }
}

#[derive(Debug)]
struct Node {
    parent: Option<NodeId>,
    /// The path below `BASE/NAME` (empty for the root).
    rel: PathBuf,
    /// v2: its `cgroup.subtree_control` has the tree's controllers (it has had children).
    enabled: bool,
    /// Where the first process moved in came from, per hierarchy: where its children forked
    /// inside go back to, since they were born in its place.
    adopted: Option<Vec<Option<PathBuf>>>,
}

/// A tact-owned cgroup subtree with knobs per node. Dropping it tears it down.
#[derive(Debug)]
pub struct KnobTree {
    pub(crate) hiers: Vec<Hier>,
    nodes: Vec<Option<Node>>,
    /// Per moved pid, the cgroup it came from in each hierarchy (indexed like `hiers`).
    origins: HashMap<i32, Vec<Option<PathBuf>>>,
    reader: ProcReader,
    torn_down: bool,
}

impl KnobTree {
    /// The top directory, `BASE/NAME`.
    pub const ROOT: NodeId = NodeId(0);

    /// Creates `BASE/name` in the hierarchy of each of `controllers`, BASE being the cgroup
    /// `under` (a path as `/proc/PID/cgroup` writes it, e.g. `/` or `/tact.slice`) or, by
    /// default, this process's own cgroup there. On v2, enables the controllers in BASE's
    /// `cgroup.subtree_control` (the error names each one that failed). With `cpu` on v1 and
    /// cpuacct mounted apart, it also mirrors the tree there to count CPU time.
    ///
    /// `name` must be one path component of letters, digits, `-`, `_`, `.` and `@` that does not
    /// exist yet (e.g. `tact-tickets`; tests use `tact-test-*`).
    pub fn create(
        hierarchies: &Hierarchies,
        controllers: &[Controller],
        name: &str,
        under: Option<&str>,
    ) -> Result<KnobTree> {
        let mut tree = KnobTree {
            hiers: plan(hierarchies, controllers)?,
            nodes: vec![Some(Node {
                parent: None,
                rel: PathBuf::new(),
                enabled: false,
                adopted: None,
            })],
            origins: HashMap::new(),
            reader: hierarchies.reader().clone(),
            torn_down: false,
        };
        for h in &mut tree.hiers {
            h.home = proc_cgroup_dir(
                tree.reader.root(),
                "self",
                std::process::id() as i32,
                &h.mount,
                h.version,
                h.proc_name,
            )?;
            h.base = match under {
                Some(cgroup) => h.mount.dir_of(cgroup).ok_or_else(|| {
                    Error::io(
                        &h.mount.dir,
                        io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "cgroup {cgroup} is outside the mounted part {} of this hierarchy",
                                h.mount.root
                            ),
                        ),
                    )
                })?,
                None => h.home.clone(),
            };
            // What an earlier tact could not remove (it was SIGKILLed) goes before this one adds.
            stale::sweep(&h.base);
            check_name(&h.base, name)?;
            h.top = h.base.join(name);
        }
        // From here on an error drops `tree`, which undoes what was done.
        for h in &mut tree.hiers {
            if h.version == CgroupVersion::V2 {
                let (added, result) = enable_controllers(&h.base, &h.v2_names());
                h.enabled_in_base = added;
                result?;
            }
            mkdir(&h.top)?;
            h.created = true;
            if h.version == CgroupVersion::V1 && h.controllers.contains(&Controller::Io) {
                count_disk_bytes_v1(&h.top);
            }
        }
        Ok(tree)
    }

    /// Adds the child `name` of `parent` (a flat leaf when `parent` is [`KnobTree::ROOT`]) in
    /// every hierarchy. On v2, first enables the tree's controllers in the parent's
    /// `cgroup.subtree_control`, which the kernel refuses while the parent holds processes.
    pub fn add_node(&mut self, parent: NodeId, name: &str) -> Result<NodeId> {
        check_name(&self.dir_in(0, parent)?, name)?;
        let rel = self.node(parent)?.rel.join(name);
        if self.nodes.iter().flatten().any(|n| n.rel == rel) {
            return Err(Error::io(
                self.hiers[0].top.join(&rel),
                io::Error::new(io::ErrorKind::AlreadyExists, "a node of this name exists"),
            ));
        }
        if !self.node(parent)?.enabled {
            for h in self.hiers.iter().filter(|h| h.version == CgroupVersion::V2) {
                enable_controllers(&join_rel(&h.top, &self.node(parent)?.rel), &h.v2_names()).1?;
            }
            self.node_mut(parent)?.enabled = true;
        }
        let mut made = Vec::new();
        for h in &self.hiers {
            let dir = h.top.join(&rel);
            if let Err(e) = mkdir(&dir) {
                for d in made {
                    let _ = fs::remove_dir(d);
                }
                return Err(e);
            }
            made.push(dir);
        }
        self.nodes.push(Some(Node {
            parent: Some(parent),
            rel,
            enabled: false,
            adopted: None,
        }));
        Ok(NodeId(self.nodes.len() - 1))
    }

    /// The directory of `node` in the hierarchy of controller `c`.
    pub fn node_dir(&self, node: NodeId, c: Controller) -> Result<PathBuf> {
        self.dir_in(self.hier_of(c)?, node)
    }

    /// Which cgroup interface controller `c` is on in this tree.
    pub fn version(&self, c: Controller) -> Result<CgroupVersion> {
        Ok(self.hiers[self.hier_of(c)?].version)
    }

    /// Moves process `pid` (all its threads) into `node` in every hierarchy (`cgroup.procs`).
    /// Its children forked from now on start there too. Where it came from is remembered, to
    /// move it back, unless that is the tree itself (a child forked inside, moved again) or a
    /// dead tact's tree. On v2 only nodes without children may hold processes.
    pub fn move_pid(&mut self, node: NodeId, pid: i32) -> Result<()> {
        self.node(node)?;
        let mut stale = false;
        if !self.origins.contains_key(&pid) {
            let origin = self
                .hiers
                .iter()
                .map(|h| {
                    let who = pid.to_string();
                    let dir = proc_cgroup_dir(
                        self.reader.root(),
                        &who,
                        pid,
                        &h.mount,
                        h.version,
                        h.proc_name,
                    )?;
                    Ok(Some(dir))
                })
                .collect::<Result<Vec<_>>>()?;
            let first = origin[0].as_deref();
            let inside = first.is_some_and(|o| o.starts_with(&self.hiers[0].top));
            // A dead tact's tree (a restarted daemon adopting its clients) is no origin either:
            // it is swept once they have left it.
            stale = first.is_some_and(|o| stale::is_inside(&self.hiers[0].base, o));
            if !inside && !stale {
                self.node_mut(node)?
                    .adopted
                    .get_or_insert_with(|| origin.clone());
                self.origins.insert(pid, origin);
            }
        }
        for i in 0..self.hiers.len() {
            write_pid(&self.dir_in(i, node)?, pid)?;
        }
        if stale {
            for h in &self.hiers {
                stale::sweep(&h.base);
            }
        }
        Ok(())
    }

    /// Moves `pid` back to the cgroup it came from in every hierarchy (or this process's if
    /// that is gone).
    pub fn release_pid(&mut self, pid: i32) -> Result<()> {
        let origin = self.origins.remove(&pid);
        for (i, h) in self.hiers.iter().enumerate() {
            let target = origin.as_ref().and_then(|o| o[i].as_deref());
            move_to(target.into_iter().chain([h.home.as_path()]), pid)?;
        }
        Ok(())
    }

    /// The processes in `node` now (its `cgroup.procs` in the tree's first hierarchy), including
    /// children forked there.
    pub fn pids(&self, node: NodeId) -> Result<Vec<i32>> {
        read_procs(&self.dir_in(0, node)?)
    }

    /// Removes `node` and every node below it, deepest first, moving their processes back to
    /// where they came from.
    pub fn remove_node(&mut self, node: NodeId) -> Result<()> {
        if node == Self::ROOT {
            return self.teardown();
        }
        self.node(node)?;
        // A child is always created after its parent, so descending ids put children first.
        let doomed: Vec<usize> = (node.0..self.nodes.len())
            .rev()
            .filter(|&i| self.is_under(NodeId(i), node))
            .collect();
        for i in doomed {
            self.empty_and_remove(NodeId(i))?;
            self.nodes[i] = None;
        }
        Ok(())
    }

    /// Moves every process back where it came from, removes every node deepest first and then
    /// `BASE/NAME`, and on v2 takes back the controllers it enabled in BASE. Goes on after an
    /// error and returns the first one. Running it again does nothing.
    pub fn teardown(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        let mut first_error = None;
        for i in (0..self.nodes.len()).rev() {
            if self.nodes[i].is_some() {
                if let Err(e) = self.empty_and_remove(NodeId(i)) {
                    first_error.get_or_insert(e);
                }
                self.nodes[i] = None;
            }
        }
        for h in &mut self.hiers {
            // Best effort: the kernel refuses while another child of BASE still uses one.
            for c in h.enabled_in_base.drain(..).rev() {
                let _ = write_control(&h.base, &format!("-{c}"));
            }
        }
        self.torn_down = true;
        first_error.map_or(Ok(()), Err)
    }

    /// Empties `node`'s directory in every hierarchy tact made it in, then removes it, retrying
    /// while processes are still leaving.
    fn empty_and_remove(&mut self, node: NodeId) -> Result<()> {
        let deadline = Instant::now() + TEARDOWN_PATIENCE;
        let mut moved = Vec::new();
        for i in 0..self.hiers.len() {
            if !self.hiers[i].created {
                continue;
            }
            let dir = self.dir_in(i, node)?;
            loop {
                let pids = match read_procs(&dir) {
                    Ok(pids) => pids,
                    Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                };
                // Unknown origin (forked inside): where the node's first process came from,
                // then this process's cgroup.
                let adopted = self
                    .node(node)?
                    .adopted
                    .as_ref()
                    .and_then(|a| a[i].as_deref());
                for &pid in &pids {
                    let target = self.origins.get(&pid).and_then(|o| o[i].as_deref());
                    let places = target.into_iter().chain(adopted);
                    move_to(places.chain([self.hiers[i].home.as_path()]), pid)?;
                }
                moved.extend(pids);
                match fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() < deadline && is_busy(&e) => {
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => return Err(Error::io(&dir, e)),
                }
            }
        }
        for pid in moved {
            self.origins.remove(&pid);
        }
        Ok(())
    }

    /// The nodes above `node`, nearest first, [`KnobTree::ROOT`] last.
    pub(crate) fn ancestors(&self, node: NodeId) -> Result<Vec<NodeId>> {
        let mut up = Vec::new();
        let mut n = self.node(node)?;
        while let Some(p) = n.parent {
            up.push(p);
            n = self.node(p)?;
        }
        Ok(up)
    }

    /// The nodes whose parent is `node`.
    pub(crate) fn children(&self, node: NodeId) -> Vec<NodeId> {
        (0..self.nodes.len())
            .map(NodeId)
            .filter(|&i| {
                self.nodes[i.0]
                    .as_ref()
                    .is_some_and(|n| n.parent == Some(node))
            })
            .collect()
    }

    /// The cgroup the tree's top directory is made in, in hierarchy `i`.
    pub(crate) fn base_in(&self, i: usize) -> &Path {
        &self.hiers[i].base
    }

    /// Where hierarchy `i` is mounted.
    pub(crate) fn mount_in(&self, i: usize) -> &Path {
        &self.hiers[i].mount.dir
    }

    /// The index in `hiers` of the hierarchy with controller `c`.
    pub(crate) fn hier_of(&self, c: Controller) -> Result<usize> {
        self.hiers
            .iter()
            .position(|h| h.controllers.contains(&c))
            .ok_or_else(|| Error::Unavailable {
                what: format!(
                    "the {} knobs of {}",
                    c.v2_name(),
                    self.hiers[0].top.display()
                ),
                reason: format!(
                    "the tree was created without the {} controller; create it with it",
                    c.v2_name()
                ),
            })
    }

    /// The directory of `node` in hierarchy `i`.
    pub(crate) fn dir_in(&self, i: usize, node: NodeId) -> Result<PathBuf> {
        Ok(join_rel(&self.hiers[i].top, &self.node(node)?.rel))
    }

    fn is_under(&self, mut n: NodeId, ancestor: NodeId) -> bool {
        loop {
            if n == ancestor {
                return true;
            }
            match self.nodes.get(n.0).and_then(Option::as_ref) {
                Some(Node {
                    parent: Some(p), ..
                }) => n = *p,
                _ => return false,
            }
        }
    }

    fn node(&self, n: NodeId) -> Result<&Node> {
        self.nodes
            .get(n.0)
            .and_then(Option::as_ref)
            .ok_or_else(|| no_node(&self.hiers[0].top, n))
    }

    fn node_mut(&mut self, n: NodeId) -> Result<&mut Node> {
        let top = self.hiers[0].top.clone();
        self.nodes
            .get_mut(n.0)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_node(&top, n))
    }
}

impl Drop for KnobTree {
    /// Every exit path moves the processes back and removes what was created.
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The hierarchies a tree over `controllers` needs: one per distinct mount (v2 controllers share
/// one; co-mounted v1 controllers share one), plus a cpuacct mirror when `cpu` is on v1 and
/// cpuacct is mounted apart. Bases are filled in by `create`.
fn plan(hierarchies: &Hierarchies, controllers: &[Controller]) -> Result<Vec<Hier>> {
    if controllers.is_empty() {
        return Err(Error::Unavailable {
            what: "a cgroup knob tree".into(),
            reason: "no controller was asked for".into(),
        });
    }
    let mut hiers: Vec<Hier> = Vec::new();
    let new_hier = |version, controllers, counts_cpu, proc_name, mount| Hier {
        version,
        controllers,
        counts_cpu,
        proc_name,
        mount,
        base: PathBuf::new(),
        home: PathBuf::new(),
        top: PathBuf::new(),
        created: false,
        enabled_in_base: Vec::new(),
    };
    for &c in Controller::ALL.iter().filter(|c| controllers.contains(c)) {
        let m = hierarchies.get(c)?;
        let counts_cpu = c == Controller::Cpu
            && (m.version == CgroupVersion::V2 || hierarchies.cpuacct.as_ref() == Some(&m.mount));
        match hiers.iter_mut().find(|h| h.mount == m.mount) {
            Some(h) => {
                h.controllers.push(c);
                h.counts_cpu |= counts_cpu;
            }
            None => hiers.push(new_hier(
                m.version,
                vec![c],
                counts_cpu,
                c.v1_name(),
                m.mount.clone(),
            )),
        }
        if c == Controller::Cpu && m.version == CgroupVersion::V1 {
            if let Some(acct) = hierarchies.cpuacct.as_ref().filter(|a| **a != m.mount) {
                hiers.push(new_hier(
                    CgroupVersion::V1,
                    Vec::new(),
                    true,
                    "cpuacct",
                    acct.clone(),
                ));
            }
        }
    }
    Ok(hiers)
}

/// `top/rel`, without the trailing `/` that joining an empty `rel` would add.
fn join_rel(top: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        top.to_path_buf()
    } else {
        top.join(rel)
    }
}

/// v2: adds each of `wanted` to `dir/cgroup.subtree_control` unless it is there, one write per
/// controller so that the error can say which failed and why. Returns those added, and an error
/// listing the failures.
fn enable_controllers(dir: &Path, wanted: &[&'static str]) -> (Vec<&'static str>, Result<()>) {
    let mut added = Vec::new();
    let read_list = |file: &str| -> Result<Vec<String>> {
        let path = dir.join(file);
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        Ok(text.split_whitespace().map(str::to_string).collect())
    };
    let (available, enabled) = match (
        read_list("cgroup.controllers"),
        read_list("cgroup.subtree_control"),
    ) {
        (Ok(a), Ok(e)) => (a, e),
        (Err(e), _) | (_, Err(e)) => return (added, Err(e)),
    };
    let control = dir.join("cgroup.subtree_control");
    let mut failed = Vec::new();
    for &c in wanted {
        if enabled.iter().any(|e| e == c) {
            continue;
        }
        if !available.iter().any(|a| a == c) {
            failed.push(format!(
                "{c}: not in {}/cgroup.controllers (the parent's cgroup.subtree_control lacks it)",
                dir.display()
            ));
            continue;
        }
        match write_control(dir, &format!("+{c}")) {
            Ok(()) => added.push(c),
            // EBUSY for the first controller; once a threaded one (cpu, pids) is in, which the
            // kernel takes in a cgroup with processes, a domain one (memory, io) gets EOPNOTSUPP
            // instead (a cgroup v2 VM on 6.1, a daemon in a populated session.scope).
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    || (e.raw_os_error() == Some(libc::EOPNOTSUPP)
                        && read_procs(dir).is_ok_and(|p| !p.is_empty())) =>
            {
                failed.push(format!("{c}: {e} ({POPULATED_HINT})"))
            }
            Err(e) => failed.push(format!("{c}: {e}")),
        }
    }
    if failed.is_empty() {
        return (added, Ok(()));
    }
    let result = Err(Error::Unavailable {
        what: format!("enabling controllers in {}", control.display()),
        reason: failed.join("; "),
    });
    (added, result)
}

/// Writes one `+CONTROLLER` or `-CONTROLLER` to `dir/cgroup.subtree_control`. Appending, like
/// `echo +cpu >> cgroup.subtree_control`, is the same to the kernel, and lets a fixture tree keep
/// every write for tests to check.
fn write_control(dir: &Path, change: &str) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join("cgroup.subtree_control"))?;
    f.write_all(format!("{change}\n").as_bytes())
}

fn no_node(top: &Path, n: NodeId) -> Error {
    Error::io(
        top,
        io::Error::new(io::ErrorKind::NotFound, format!("no node #{}", n.0)),
    )
}
