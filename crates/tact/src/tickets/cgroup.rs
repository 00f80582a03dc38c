//! The cgroup backend of `tact tickets run`, in the flat layout (spec §4 "Compiling": always
//! allowed): one cgroup per job under a tact-owned directory, weighted ∝ the job's rights and
//! rewritten whenever which jobs compete changes. The kernel counts only runnable siblings too,
//! but a currency's value must flow to its *competing* jobs, across currencies, which static
//! sibling weights cannot do: hence the flat layout and the polling.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_linux::actuate::cgroup_cpu::{CpuGroups, CpuHierarchy, EntityId};
use tact_linux::timer::Ticker;

use super::enforce::{end_jobs, End};
use super::rights::Rights;
use crate::jobs::events::{Event, Events};
use crate::share::group::{Job, MemberIds};
use crate::share::safety::Safety;

/// Membership rescan period for jobs that compete (the others are rescanned every interval).
const RESCAN: Duration = Duration::from_secs(1);

/// Creates the cgroups, drives the jobs until the run ends, ends the jobs still running and
/// removes the cgroups, on every path (a cgroup with processes in it cannot be removed).
pub fn run(
    jobs: &mut [Job],
    hier: CpuHierarchy,
    parent: Option<&Path>,
    rights: &mut Rights,
    (interval, duration): (Duration, Option<Duration>),
    safety: &mut Safety,
    events: &mut Events,
) -> Result<End> {
    let name = format!("tact-tickets-{}", std::process::id());
    let mut groups = match CpuGroups::create(hier, &name, parent) {
        Ok(g) => g,
        Err(e) => {
            let e = Err(e).context("--backend cgroup");
            end_jobs(jobs, &e);
            return e;
        }
    };
    let mut drive = Drive {
        groups: &mut groups,
        entities: Vec::new(),
        weights: Vec::new(),
    };
    let result = drive.drive(jobs, rights, interval, duration, safety, events);
    end_jobs(jobs, &result);
    let teardown = groups.teardown();
    let end = result?;
    teardown.context("cannot remove tact's cgroups")?;
    Ok(end)
}

struct Drive<'g> {
    groups: &'g mut CpuGroups,
    /// Each job's cgroup.
    entities: Vec<EntityId>,
    /// What each job's cgroup holds.
    weights: Vec<u64>,
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
            let (e, _) = self.groups.add_entity(&format!("job{i}"), 1)?;
            self.entities.push(e);
            job.arrive(&mut members)?;
            safety.protect(job)?;
            self.groups.move_tree(e, job.tree())?;
        }
        self.write(rights.weights())?;
        for job in jobs.iter_mut() {
            job.let_go();
        }
        rights.started();
        let mut ticker = Ticker::new(interval)?;
        let mut last_scan = Instant::now();
        let mut ignored = Vec::new();
        let mut active = vec![true; jobs.len()];
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
                        self.groups.move_tree(self.entities[i], job.tree())?;
                    }
                }
                active[i] = now;
            }
            ignored.clear();
            rights.set_active(&active)?;
            self.write(rights.weights())?;
            rights.interval(jobs, &self.weights)?;
        }
    }

    /// Writes the weights that changed.
    fn write(&mut self, weights: Vec<u64>) -> Result<()> {
        for (i, &w) in weights.iter().enumerate() {
            if self.weights.get(i) != Some(&w) {
                // The quantized weights span the range (the largest right is at its top), so
                // the share scaling of `CpuGroups` writes them unchanged.
                self.groups.set_share(self.entities[i], w)?;
            }
        }
        let written = self.groups.weights();
        self.weights = self
            .entities
            .iter()
            .map(|e| {
                written
                    .iter()
                    .find(|w| w.entity == *e)
                    .map_or(0, |w| w.weight)
            })
            .collect();
        Ok(())
    }
}

/// Whether one of the job's processes is runnable. tact stops none of them in this backend, so a
/// stopped process was stopped by someone else and does not compete.
fn competes(job: &mut Job, ignored: &mut Vec<tact_core::share::Event>) -> bool {
    !job.gone && job.read(ignored).is_some_and(|r| !r.blocked)
}
