//! The `cgroup` backend: one child cgroup per job under a tact-owned directory, with weights
//! (v1 `cpu.shares`, v2 `cpu.weight`) in the ratio of the shares. The kernel enforces them with
//! no user-level overhead and is work conserving, but weights act only under contention. tact
//! moves each job's processes in (children forked later inherit the cgroup), reads each cgroup's
//! CPU usage every second, and removes everything at the end.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_linux::actuate::cgroup_cpu::{CpuGroups, CpuHierarchy, EntityId};
use tact_linux::timer::Ticker;

use super::group::{Job, MemberIds};
use super::report::CycleLog;
use crate::jobs::events::{Event, Events, Received};

const TICK: Duration = Duration::from_secs(1);

pub struct Outcome {
    /// CPU each job's cgroup used, when the kernel counts it (cpuacct or v2 cpu.stat).
    pub usage_ns: Vec<Option<u64>>,
    pub interrupted: Option<Received>,
    /// What the weights came to, for the footer.
    pub weights: String,
    /// Whether tact's cgroups were removed. Reported after the signal went on and the table was
    /// printed: a failure here must not keep an interrupt from reaching the commands.
    pub teardown: Result<()>,
}

pub fn run(
    jobs: &mut [Job],
    hier: CpuHierarchy,
    parent: Option<&Path>,
    log: Option<&mut CycleLog>,
    events: &mut Events,
) -> Result<Outcome> {
    let name = format!("tact-share-{}", std::process::id());
    let mut groups = CpuGroups::create(hier, &name, parent).context("--backend cgroup")?;
    let mut ids = Vec::new();
    let mut weights = Vec::new();
    for job in jobs.iter() {
        let (id, w) = groups.add_entity(&format!("job{}", job.id), job.spec.shares)?;
        ids.push(id);
        weights = w;
    }
    let file = groups.hierarchy().version.weight_file();
    let shown: Vec<String> = weights
        .iter()
        .map(|w| format!("{}{}", w.weight, if w.clamped { " (clamped)" } else { "" }))
        .collect();
    let summary = format!(
        "{file} {} under {}",
        shown.join(":"),
        groups.dir().display()
    );
    let result = drive(jobs, &mut groups, &ids, log, events);
    let usage_ns = ids
        .iter()
        .map(|&id| groups.usage_ns(id).ok().flatten())
        .collect();
    let teardown = groups.teardown().context("cannot remove tact's cgroups");
    let interrupted = result?;
    Ok(Outcome {
        usage_ns,
        interrupted,
        weights: summary,
        teardown,
    })
}

fn drive(
    jobs: &mut [Job],
    groups: &mut CpuGroups,
    ids: &[EntityId],
    mut log: Option<&mut CycleLog>,
    events: &mut Events,
) -> Result<Option<Received>> {
    let mut members = MemberIds::default();
    for (job, &id) in jobs.iter_mut().zip(ids) {
        job.arrive(&mut members)?;
        groups.move_tree(id, job.tree())?;
        job.let_go();
    }
    let start = Instant::now();
    let mut ticker = Ticker::new(TICK)?;
    let mut last: Vec<u64> = ids
        .iter()
        .map(|&id| groups.usage_ns(id).ok().flatten().unwrap_or(0))
        .collect();
    loop {
        if jobs.iter().all(|j| j.gone) {
            return Ok(None);
        }
        match events.wait(ticker.as_fd(), Duration::from_secs(3600))? {
            Event::Ready => {
                ticker.take()?;
            }
            Event::Signal(sig) => return Ok(Some(sig)),
            Event::Timeout => continue,
        }
        let mut ignored = Vec::new();
        for (job, &id) in jobs.iter_mut().zip(ids).filter(|(j, _)| !j.gone) {
            job.rescan_events(&mut members, &mut ignored)?;
            if !job.gone {
                // Children forked later inherit the cgroup, but one forked while its parent was
                // being moved may have stayed behind: moving a member again is harmless.
                groups.move_tree(id, job.tree())?;
            }
            job.refresh_totals();
        }
        if let Some(log) = log.as_deref_mut() {
            let mut used = Vec::new();
            for (i, &id) in ids.iter().enumerate() {
                let now = groups.usage_ns(id).ok().flatten().unwrap_or(last[i]);
                used.push((i, jobs[i].spec.shares, now.saturating_sub(last[i])));
                last[i] = now;
            }
            log.second(start.elapsed(), &used, jobs)?;
        }
    }
}
