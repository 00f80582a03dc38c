//! The cgroup backend of `tact tickets run`, in the flat layout (spec §4 "Compiling": always
//! allowed): one cgroup per job under a tact-owned directory (a [`KnobTree`] over the cpu
//! controller, and the memory and io/blkio ones when some job holds tickets of them), with
//!
//! - CPU weights ∝ the job's CPU rights, rewritten whenever which jobs compete changes. The
//!   kernel counts only runnable siblings too, but a currency's value must flow to its
//!   *competing* jobs, across currencies, which static sibling weights cannot do: hence the flat
//!   layout and the polling;
//! - disk weights ∝ its disk rights, for the jobs holding disk tickets, rewritten as jobs start
//!   and stop having I/O outstanding ([`super::disk`]);
//! - memory protection = its memory rights in bytes, for the jobs holding memory tickets: v2
//!   `memory.min` when every funding path is hard from the base, else `memory.low`; v1
//!   `memory.soft_limit_in_bytes`, which is not a floor (said once). Memory tickets stay active
//!   while held (spec §2.3), so these change only when a job is gone;
//! - with `[memory] arena`, the arena's size as the memory limit of the tree's top and, on v1,
//!   the feedback loop of [`tact_core::tickets::arena`] every interval: when the arena is under
//!   pressure and a job is below its floor, the limits of the jobs above theirs come down by what
//!   it misses, and rise again once there is room. v2 needs no loop: `memory.min`/`memory.low`
//!   are floors inside the arena already.
//!
//! Jobs without tickets of a resource keep the kernel's defaults for it.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tact_core::tickets::arena::{ArenaJob, ArenaRule, ArenaState};
use tact_core::tickets::compile::WeightRange;
use tact_core::tickets::{PerResource, Resource};
use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuHierarchy};
use tact_linux::actuate::cgroup_knobs::{
    Controller, DiskKnob, Hierarchies, KnobTree, KnobWrite, MemProtection, NodeId,
};
use tact_linux::timer::Ticker;
use tact_linux::{JobTree, ProcReader};

use super::disk::{self, DiskActivity};
use super::enforce::{end_jobs, End};
use super::report::Held;
use super::rights::{self, Rights};
use super::setup::Setup;
use crate::jobs::events::{Event, Events};
use crate::share::group::{Job, MemberIds};
use crate::share::safety::Safety;

/// Membership rescan period for jobs that compete (the others are rescanned every interval).
const RESCAN: Duration = Duration::from_secs(1);

/// Creates the cgroups, drives the jobs until the run ends, ends the jobs still running and
/// removes the cgroups, on every path (a cgroup with processes in it cannot be removed).
/// `cpu_range` is the CPU weight range of `hier`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    jobs: &mut [Job],
    hier: CpuHierarchy,
    cpu_range: WeightRange,
    parent: Option<&Path>,
    rights: &mut Rights,
    (interval, duration): (Duration, Option<Duration>),
    safety: &mut Safety,
    events: &mut Events,
) -> Result<End> {
    let name = format!("tact-tickets-{}", std::process::id());
    let mut tree = match create_tree(&hier, parent, &name, rights) {
        Ok(t) => t,
        Err(e) => {
            let e = Err(e).context("--backend cgroup");
            end_jobs(jobs, &e, safety);
            return e;
        }
    };
    let mut drive = Drive {
        tree: &mut tree,
        reader: ProcReader::new(),
        nodes: Vec::new(),
        cpu_range,
        cpu: Vec::new(),
        disk: None,
        mem: Vec::new(),
        arena: None,
        told_clamped: vec![false; jobs.len()],
    };
    let result = drive.drive(jobs, rights, interval, duration, safety, events);
    end_jobs(jobs, &result, safety);
    let teardown = tree.teardown();
    let end = result?;
    teardown.context("cannot remove tact's cgroups")?;
    Ok(end)
}

/// The tree over the cpu controller and, where some job holds tickets of them and the kernel
/// has them, the memory and io controllers. A missing one is said, and its resource left out.
fn create_tree(
    hier: &CpuHierarchy,
    parent: Option<&Path>,
    name: &str,
    rights: &mut Rights,
) -> Result<KnobTree> {
    let hierarchies = Hierarchies::detect()?;
    let mut controllers = vec![Controller::Cpu];
    for (r, c) in [
        (Resource::Mem, Controller::Memory),
        (Resource::Disk, Controller::Io),
    ] {
        // An arena is a memory limit on the tree, whoever holds memory tickets.
        let arena = r == Resource::Mem && rights.arena().is_some();
        if !rights.any_holds(r) && !arena {
            continue;
        }
        match hierarchies.get(c) {
            Ok(_) => controllers.push(c),
            Err(e) => {
                eprintln!(
                    "tact: the {r} tickets of {} are not applied: {e}",
                    rights.holders(r).join(", ")
                );
                rights.not_applied(r);
            }
        }
    }
    let under = parent.map(|dir| cgroup_path(hier, dir)).transpose()?;
    Ok(KnobTree::create(
        &hierarchies,
        &controllers,
        name,
        under.as_deref(),
    )?)
}

/// The cgroup path (as `/proc/PID/cgroup` writes it) of `dir`, a directory of the cpu
/// hierarchy: the same path is the parent in the memory and io hierarchies too (on v2 it is the
/// same directory).
pub(crate) fn cgroup_path(hier: &CpuHierarchy, dir: &Path) -> Result<String> {
    let rel = dir.strip_prefix(&hier.cpu.dir).map_err(|_| {
        anyhow!(
            "--cgroup-parent {}: not under the cpu hierarchy mounted at {}",
            dir.display(),
            hier.cpu.dir.display()
        )
    })?;
    let root = hier.cpu.root.trim_end_matches('/');
    Ok(format!("{root}/{}", rel.display()))
}

/// The cgroup path of `--cgroup-parent DIR`, or why DIR cannot be the tree's parent: not a
/// cgroup, outside the cpu hierarchy, or (v1, where each controller has its own tree) missing
/// from the cpuacct hierarchy (when mounted apart) or from the hierarchy of one of `others` the
/// tree uses (controllers not mounted are left out). The daemon's check, and `run`'s before its
/// jobs start.
pub(crate) fn parent_cgroup(
    hier: &CpuHierarchy,
    all: &Hierarchies,
    dir: &Path,
    others: &[Controller],
) -> Result<String, String> {
    if !dir.join("cgroup.procs").is_file() {
        return Err(format!(
            "--cgroup-parent {}: not a cgroup directory (it has no cgroup.procs)",
            dir.display()
        ));
    }
    let path = cgroup_path(hier, dir).map_err(|e| e.to_string())?;
    let mounts = others
        .iter()
        .filter_map(|&c| all.get(c).ok().map(|m| &m.mount));
    for mount in mounts.chain(all.cpuacct.as_ref()) {
        if !mount.dir_of(&path).is_some_and(|d| d.is_dir()) {
            return Err(format!(
                "--cgroup-parent: no cgroup {path} in the hierarchy mounted at {} (on cgroup v1 \
                 each controller has its own tree: make it there too)",
                mount.dir.display()
            ));
        }
    }
    Ok(path)
}

/// Why `run` cannot make its tree under `--cgroup-parent DIR`, if it cannot ([`parent_cgroup`]
/// over the hierarchies the setup's tree needs: memory with memory tickets or an arena, io/blkio
/// with disk tickets), said before the jobs start. `None` too when the hierarchies cannot be
/// read: the backend's own check says why then.
pub(crate) fn unusable_parent(dir: &Path, setup: &Setup) -> Option<String> {
    let hier = CpuHierarchy::detect().ok()?;
    let all = Hierarchies::detect().ok()?;
    let holds = |r| (setup.jobs.iter()).any(|j| rights::holds_tickets(&setup.model, j.id, r));
    let mut others = Vec::new();
    if holds(Resource::Mem) || setup.arena.is_some() {
        others.push(Controller::Memory);
    }
    if holds(Resource::Disk) {
        others.push(Controller::Io);
    }
    parent_cgroup(&hier, &all, dir, &others).err()
}

/// The disk side: its knob file, and what each job's holds.
struct DiskKnobs {
    knob: DiskKnob,
    range: WeightRange,
    activity: DiskActivity,
    written: Vec<Option<u64>>,
}

struct Drive<'t> {
    tree: &'t mut KnobTree,
    reader: ProcReader,
    /// Each job's cgroup.
    nodes: Vec<NodeId>,
    cpu_range: WeightRange,
    /// What each job's cgroup holds.
    cpu: Vec<u64>,
    disk: Option<DiskKnobs>,
    /// The memory protection written, per job holding memory tickets.
    mem: Vec<Option<u64>>,
    arena: Option<Arena>,
    /// Per job: its disk weight was clamped, and the user was told.
    told_clamped: Vec<bool>,
}

impl Drive<'_> {
    fn drive(
        &mut self,
        jobs: &mut [Job],
        rights: &mut Rights,
        interval: Duration,
        duration: Option<Duration>,
        safety: &mut Safety,
        events: &mut Events,
    ) -> Result<End> {
        let mut members = MemberIds::default();
        for (i, job) in jobs.iter_mut().enumerate() {
            // Named by index: job names are the user's text, cgroup names path components.
            let node = self.tree.add_node(KnobTree::ROOT, &format!("job{i}"))?;
            self.nodes.push(node);
            job.arrive(&mut members)?;
            safety.protect(job)?;
            self.move_tree(node, job.tree())?;
        }
        self.setup_disk(rights)?;
        self.mem = vec![None; jobs.len()];
        self.write(rights)?;
        self.setup_arena(rights)?;
        for job in jobs.iter_mut() {
            job.let_go();
        }
        rights.started();
        let mut ticker = Ticker::new(interval)?;
        let mut last_scan = Instant::now();
        let mut ignored = Vec::new();
        let mut active = PerResource::from_fn(|_| vec![true; jobs.len()]);
        loop {
            if jobs.iter().all(|j| j.gone) {
                return Ok(End::Exited);
            }
            let left = match duration {
                Some(d) if rights.elapsed() >= d => return Ok(End::Duration),
                Some(d) => d - rights.elapsed(),
                None => Duration::from_secs(3600),
            };
            match events.wait(ticker.as_fd(), left)? {
                Event::Ready => {
                    ticker.take()?;
                }
                Event::Signal(sig) => return Ok(End::Interrupted(sig)),
                Event::Timeout => continue,
            }
            let scan_all = last_scan.elapsed() >= RESCAN;
            if scan_all {
                last_scan = Instant::now();
            }
            for (i, job) in jobs.iter_mut().enumerate() {
                let mut now = competes(job, &mut ignored);
                // A job with nothing runnable is looked at again at once for processes it
                // started since the last scan (a shell's command, `timeout`'s child): else its
                // minimum weight would hide a newcomer that spins. The others every second.
                if (scan_all || !now) && !job.gone {
                    let changed = job.rescan_events(&mut members, &mut ignored)?;
                    if changed {
                        safety.protect(job)?;
                        now = now || competes(job, &mut ignored);
                    }
                    if !job.gone && (changed || scan_all) {
                        // Children inherit the cgroup, but one forked while its parent was
                        // being moved may have stayed behind.
                        self.move_tree(self.nodes[i], job.tree())?;
                    }
                }
                active[Resource::Cpu][i] = now;
                if let Some(d) = self
                    .disk
                    .as_mut()
                    .filter(|_| rights.holds(Resource::Disk, i))
                {
                    active[Resource::Disk][i] = d.activity.active(i, job);
                }
                // Memory tickets are held until the job is gone.
                active[Resource::Mem][i] = !job.gone;
            }
            ignored.clear();
            for r in Resource::ALL {
                rights.set_active(r, &active[r])?;
            }
            self.write(rights)?;
            self.arena_step(rights)?;
            let held = self.held(rights);
            rights.interval(jobs, held)?;
        }
    }

    /// Finds the disk weight file and tells where it acts; without one, the disk tickets are
    /// not applied, and the user is told why.
    fn setup_disk(&mut self, rights: &mut Rights) -> Result<()> {
        if self.tree.version(Controller::Io).is_err() {
            return Ok(());
        }
        let Some(first) = (0..self.nodes.len()).find(|&i| rights.holds(Resource::Disk, i)) else {
            return Ok(());
        };
        match self.tree.disk_knob(self.nodes[first]) {
            Ok(knob) => {
                eprintln!(
                    "tact: disk: {}",
                    disk::where_weights_act(knob, &disk::disks(Path::new("/sys/block")))
                );
                self.disk = Some(DiskKnobs {
                    knob,
                    range: disk::weight_range(knob),
                    activity: DiskActivity::new(self.nodes.len()),
                    written: vec![None; self.nodes.len()],
                });
            }
            Err(e) => {
                eprintln!(
                    "tact: the disk tickets of {} are not applied: {e}",
                    rights.holders(Resource::Disk).join(", ")
                );
                rights.not_applied(Resource::Disk);
            }
        }
        Ok(())
    }

    /// Writes the knobs that changed: CPU weights for every job, disk weights and memory
    /// protections for the jobs holding tickets of them.
    fn write(&mut self, rights: &Rights) -> Result<()> {
        let cpu = rights.weights(Resource::Cpu, self.cpu_range);
        for (i, &w) in cpu.iter().enumerate() {
            if self.cpu.get(i) != Some(&w) {
                self.tree.set_cpu_weight(self.nodes[i], w)?;
            }
        }
        self.cpu = cpu;
        if let Some(d) = self.disk.as_mut() {
            let compiled = rights.compiled(Resource::Disk, d.range);
            for (i, c) in compiled.iter().enumerate() {
                if !rights.holds(Resource::Disk, i) || d.written[i] == Some(c.weight) {
                    continue;
                }
                self.tree.set_disk_weight(self.nodes[i], c.weight)?;
                d.written[i] = Some(c.weight);
                if c.clamped && !self.told_clamped[i] {
                    self.told_clamped[i] = true;
                    eprintln!(
                        "tact: {}'s disk rights are below the range of {} ({}-{}) next to the \
                         largest: its weight is clamped to {}, more than its share",
                        rights.name(i),
                        d.knob.file(),
                        d.range.min,
                        d.range.max,
                        c.weight
                    );
                }
            }
        }
        if self.tree.version(Controller::Memory).is_ok() {
            for i in 0..self.nodes.len() {
                if !rights.holds(Resource::Mem, i) {
                    continue;
                }
                let bytes = rights.rights(i, Resource::Mem).round().max(0.0) as u64;
                if self.mem[i] == Some(bytes) {
                    continue;
                }
                let p = if bytes == 0 {
                    MemProtection::None
                } else if rights.hard_all_the_way(i, Resource::Mem) {
                    MemProtection::Hard(bytes)
                } else {
                    MemProtection::Soft(bytes)
                };
                let writes = self.tree.set_mem_protection(self.nodes[i], p)?;
                let first = self.mem.iter().all(Option::is_none);
                self.mem[i] = Some(bytes);
                if first {
                    tell_mem(&writes);
                }
            }
        }
        Ok(())
    }

    /// Writes the arena's size as the memory limit of the tree's top, and says what keeps the
    /// floors inside it.
    fn setup_arena(&mut self, rights: &Rights) -> Result<()> {
        let Some(limit) = rights.arena() else {
            return Ok(());
        };
        let Ok(version) = self.tree.version(Controller::Memory) else {
            eprintln!("tact: memory: no memory controller: the arena is not applied");
            return Ok(());
        };
        let w = self.tree.set_mem_limit(KnobTree::ROOT, Some(limit))?;
        let feedback = version == CgroupVersion::V1;
        eprintln!(
            "tact: memory: arena of {limit} bytes ({} pages) in {}{}",
            limit / super::this_machine().map_or(4096, |m| m.page_size),
            w.file.display(),
            if feedback {
                "; a feedback loop lowers memory.limit_in_bytes of the jobs above their floors \
                 while one below its floor is short: it is not work-conserving (memory held for \
                 a floor stays unused while its job does not fill it)"
            } else {
                "; memory.min/memory.low hold the floors inside it"
            }
        );
        self.arena = Some(Arena {
            rule: ArenaRule::for_limit(limit),
            limit,
            feedback,
            hits: self.tree.mem_limit_hits(KnobTree::ROOT)?,
            limits: vec![None; self.nodes.len()],
            refused: vec![0; self.nodes.len()],
            told_busy: false,
        });
        Ok(())
    }

    /// One step of the v1 arena loop: reads the arena's and each job's use, and writes the
    /// limits the rule gives. A limit the kernel cannot reclaim down to (a job's own memory,
    /// without swap, or its kernel memory) is refused with EBUSY: the old one stays, the loop
    /// does not go that low for that job again, and the user is told once.
    fn arena_step(&mut self, rights: &Rights) -> Result<()> {
        let Some(a) = self.arena.as_mut().filter(|a| a.feedback) else {
            return Ok(());
        };
        let hits = self.tree.mem_limit_hits(KnobTree::ROOT)?;
        let state = ArenaState {
            limit: a.limit,
            usage: self.tree.mem_usage_bytes(KnobTree::ROOT)?,
            hit_limit: hits > a.hits,
        };
        a.hits = hits;
        let jobs = (0..self.nodes.len())
            .map(|i| {
                Ok(ArenaJob {
                    usage: self.tree.mem_usage_bytes(self.nodes[i])?,
                    floor: self.mem.get(i).copied().flatten().unwrap_or(0),
                    limit: a.limits[i],
                    pinned: self.tree.mem_pinned_bytes(self.nodes[i])?.max(a.refused[i]),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for (i, next) in a.rule.next_limits(&state, &jobs).into_iter().enumerate() {
            if next == a.limits[i] {
                continue;
            }
            match self.tree.set_mem_limit(self.nodes[i], next) {
                Ok(_) => a.limits[i] = next,
                Err(tact_linux::Error::Io { source, .. })
                    if source.raw_os_error() == Some(libc::EBUSY) =>
                {
                    // Kernel memory and the like count too: not asked again.
                    a.refused[i] = a.refused[i].max(next.map_or(0, |l| l + 1));
                    if !a.told_busy {
                        a.told_busy = true;
                        eprintln!(
                            "tact: memory: the kernel could not reclaim {} down to {} bytes (its \
                             own or kernel memory, no swap): its limit stays",
                            rights.name(i),
                            next.unwrap_or(0)
                        );
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// What the knobs hold now, and each job's disk bytes and memory use.
    fn held(&self, rights: &Rights) -> Held {
        let mut held = Held::cpu_only(self.cpu.clone());
        for (i, &node) in self.nodes.iter().enumerate() {
            if let Some(d) = &self.disk {
                held.disk[i] = d.written[i];
                if d.written[i].is_some() {
                    held.disk_bytes[i] =
                        self.tree.disk_bytes(node).map(|b| b.read + b.written).ok();
                }
            }
            if rights.holds(Resource::Mem, i) {
                held.mem[i] = self.mem[i];
                if self.mem[i].is_some() {
                    held.mem_bytes[i] = self.tree.mem_usage_bytes(node).ok();
                }
            }
        }
        held
    }

    /// Moves the live members of a job's tree that are not in `node` yet into it. Members
    /// already there are left alone, so a child forked inside is never remembered as coming
    /// from there (teardown moves it to where the node's first process came from).
    fn move_tree(&mut self, node: NodeId, tree: &JobTree) -> Result<()> {
        let inside = self.tree.pids(node)?;
        for id in tree.members() {
            if inside.contains(&id.pid) {
                continue;
            }
            let alive = |r: &ProcReader| {
                r.stat(id.pid)
                    .is_ok_and(|s| s.start_time == id.start_time && !s.is_dead())
            };
            if !alive(&self.reader) {
                continue;
            }
            match self.tree.move_pid(node, id.pid) {
                Ok(()) => {}
                // It exited between the check and the move.
                Err(_) if !alive(&self.reader) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// The memory arena of a run (`[memory] arena`).
struct Arena {
    rule: ArenaRule,
    /// Its size, the limit of the tree's top.
    limit: u64,
    /// v1: the loop runs (v2's protections are floors already).
    feedback: bool,
    /// The top's limit hits (`memory.failcnt`) at the last step.
    hits: u64,
    /// The limit written on each job's cgroup.
    limits: Vec<Option<u64>>,
    /// Per job, just above the lowest limit the kernel refused (EBUSY): it cannot reclaim the
    /// job that far, and the loop does not ask again.
    refused: Vec<u64>,
    /// The user was told of a limit the kernel refused.
    told_busy: bool,
}

/// Says once which memory knob holds the floors, and what it does not do.
fn tell_mem(writes: &[KnobWrite]) {
    let files: Vec<String> = writes
        .iter()
        .filter_map(|w| w.file.file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    eprintln!(
        "tact: memory: rights in bytes written to {}",
        files.join(" and ")
    );
    if let Some(caveat) = writes.iter().find_map(|w| w.caveat.as_deref()) {
        eprintln!("tact: memory: {caveat}");
    }
}

/// Whether one of the job's processes is runnable. tact stops none of them in this backend, so a
/// stopped process was stopped by someone else and does not compete.
fn competes(job: &mut Job, ignored: &mut Vec<tact_core::share::Event>) -> bool {
    !job.gone && job.read(ignored).is_some_and(|r| !r.blocked)
}
