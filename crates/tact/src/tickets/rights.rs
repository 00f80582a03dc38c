//! The tickets model as a run sees it: which jobs are active for each resource now, their rights
//! `R(job,r)`, those rights compiled to a backend's integer weights
//! (`tickets::compile::quantize`), and the record of each interval (the JSON log, the
//! time-averaged expected shares).
//!
//! Activity follows spec §2.3: CPU while runnable, disk while I/O is outstanding, memory while
//! the job holds memory tickets, which in a run is from its start until it is gone (blocking
//! does not deactivate them).

use std::time::{Duration, Instant};

use anyhow::Result;
use tact_core::tickets::compile::{quantize, Compiled, WeightRange};
use tact_core::tickets::{CurrencyId, Kind, Model, PerResource, Resource};

use super::report::{Average, Held, Interval, JobInterval, Res};
use super::setup::Setup;
use crate::share::group::Job;
use crate::trace::JsonLines;

pub struct Rights<'a> {
    setup: &'a Setup,
    model: Model,
    /// Each job's client currency, in job order.
    ids: Vec<CurrencyId>,
    /// Whether each job holds tickets of the resource (CPU: every job, whatever it holds).
    holds: PerResource<Vec<bool>>,
    /// Which resources besides the CPU the backend applies (and the log records).
    applied: PerResource<bool>,
    active: PerResource<Vec<bool>>,
    /// Time-averaged: the expected share for CPU and disk, `R` in bytes for memory.
    pub average: PerResource<Average>,
    /// What the backend held and measured at the end of the last interval.
    pub last: Held,
    /// Mean memory use of each job's cgroup over the intervals: (sum, count).
    mem_used: Vec<(f64, u32)>,
    log: Option<&'a mut JsonLines>,
    start: Instant,
    last_at: Instant,
}

impl<'a> Rights<'a> {
    /// Every job competing for the CPU and the disk, and holding its memory tickets: they are
    /// about to start. Every resource counts as applied until the backend says otherwise
    /// ([`Rights::not_applied`]).
    pub fn new(setup: &'a Setup, log: Option<&'a mut JsonLines>) -> Result<Rights<'a>> {
        let mut model = setup.model.clone();
        let ids: Vec<CurrencyId> = setup.jobs.iter().map(|j| j.id).collect();
        let holds = PerResource::from_fn(|r| {
            ids.iter()
                .map(|&id| r == Resource::Cpu || holds_tickets(&setup.model, id, r))
                .collect::<Vec<bool>>()
        });
        for (i, &id) in ids.iter().enumerate() {
            for r in Resource::ALL {
                if holds[r][i] {
                    model.set_active(id, r, true)?;
                }
            }
        }
        let n = ids.len();
        Ok(Rights {
            setup,
            model,
            active: holds.clone(),
            holds,
            applied: PerResource::from_fn(|_| true),
            ids,
            average: PerResource::from_fn(|_| Average::new(n)),
            last: Held::cpu_only(vec![0; n]),
            mem_used: vec![(0.0, 0); n],
            log,
            start: Instant::now(),
            last_at: Instant::now(),
        })
    }

    /// The jobs were let go: intervals count from now.
    pub fn started(&mut self) {
        self.start = Instant::now();
        self.last_at = self.start;
    }

    /// Since the jobs were let go.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The backend does not apply `r` (it is left out of the log and the summary).
    pub fn not_applied(&mut self, r: Resource) {
        if r != Resource::Cpu {
            self.applied[r] = false;
        }
    }

    /// Job `job`'s name.
    pub fn name(&self, job: usize) -> &str {
        &self.setup.jobs[job].name
    }

    /// Whether job `job` holds tickets of `r` (every job does of the CPU, for this run).
    pub fn holds(&self, r: Resource, job: usize) -> bool {
        self.holds[r][job]
    }

    /// Whether any job holds tickets of `r`.
    pub fn any_holds(&self, r: Resource) -> bool {
        self.holds[r].iter().any(|&h| h)
    }

    /// The names of the jobs holding tickets of `r`.
    pub fn holders(&self, r: Resource) -> Vec<&str> {
        self.setup
            .jobs
            .iter()
            .zip(&self.holds[r])
            .filter(|(_, &h)| h)
            .map(|(j, _)| j.name.as_str())
            .collect()
    }

    /// Records which jobs are active for `r` now (in job order); jobs holding no tickets of `r`
    /// are left out of it.
    pub fn set_active(&mut self, r: Resource, active: &[bool]) -> Result<()> {
        for (i, &now) in active.iter().enumerate() {
            if self.holds[r][i] && now != self.active[r][i] {
                self.active[r][i] = now;
                self.model.set_active(self.ids[i], r, now)?;
            }
        }
        Ok(())
    }

    /// Each job's weight for `r` ∝ its rights now, in `range`, as [`compile`] weighs clients.
    /// Jobs holding no tickets of `r` get `range.min` (callers leave their knob alone).
    pub fn weights(&self, r: Resource, range: WeightRange) -> Vec<u64> {
        self.compiled(r, range)
            .into_iter()
            .map(|c| c.weight)
            .collect()
    }

    /// [`Rights::weights`] with what quantizing cost each job (its clamp, its share error).
    pub fn compiled(&self, r: Resource, range: WeightRange) -> Vec<Compiled<usize>> {
        let clients: Vec<(CurrencyId, bool)> = self
            .ids
            .iter()
            .zip(&self.holds[r])
            .map(|(&id, &holds)| (id, holds))
            .collect();
        compile(&self.model, &clients, r, range)
    }

    /// The setup's `[memory] arena`, in bytes.
    pub fn arena(&self) -> Option<u64> {
        self.setup.arena
    }

    /// `R(job,r)` now.
    pub fn rights(&self, job: usize, r: Resource) -> f64 {
        self.model.rights(self.ids[job], r).unwrap_or(0.0)
    }

    /// Whether every funding path of the job for `r` is hard from the base down to it (see
    /// [`hard_all_the_way`]).
    pub fn hard_all_the_way(&self, job: usize, r: Resource) -> bool {
        hard_all_the_way(&self.model, self.ids[job], r)
    }

    /// `R / ΣR` over the jobs active for `r`, per job (0 for the others).
    fn expected(&self, r: Resource) -> Vec<f64> {
        let shares = self.model.shares(r);
        self.ids
            .iter()
            .map(|id| {
                shares
                    .iter()
                    .find(|(c, _)| c == id)
                    .map_or(0.0, |(_, s)| *s)
            })
            .collect()
    }

    /// Each job's value of `r` where the run applies it to the job, else `None`.
    fn per_job<T: Copy>(&self, r: Resource, i: usize, v: T) -> Option<T> {
        (self.applied[r] && self.holds[r][i]).then_some(v)
    }

    /// Closes an interval: the expected shares held since the last one count for its length,
    /// and the log gets a line with what the backend holds. An interval in which no job
    /// competed for a resource does not count for its expected shares (all 0 then, as the jobs'
    /// use of it: counted, a job that slept for most of the run showed 1.2% expected against
    /// 100% achieved when alone), nor one after a job is gone for its memory floor.
    pub fn interval(&mut self, jobs: &[Job], held: Held) -> Result<()> {
        let dt = self.last_at.elapsed();
        self.last_at = Instant::now();
        let expected = PerResource::from_fn(|r| self.expected(r));
        let rights: PerResource<Vec<f64>> =
            PerResource::from_fn(|r| (0..self.ids.len()).map(|i| self.rights(i, r)).collect());
        for r in [Resource::Cpu, Resource::Disk] {
            let competed = expected[r].iter().any(|&e| e > 0.0);
            let values: Vec<Option<f64>> = (0..self.ids.len())
                .map(|i| {
                    competed
                        .then(|| self.per_job(r, i, expected[r][i]))
                        .flatten()
                })
                .collect();
            self.average[r].add(dt, values.into_iter());
        }
        let floors: Vec<Option<f64>> = (0..self.ids.len())
            .map(|i| {
                let floor = self.per_job(Resource::Mem, i, rights[Resource::Mem][i]);
                floor.filter(|_| !jobs[i].gone)
            })
            .collect();
        self.average[Resource::Mem].add(dt, floors.into_iter());
        for (used, now) in self.mem_used.iter_mut().zip(&held.mem_bytes) {
            if let Some(b) = now {
                used.0 += *b as f64;
                used.1 += 1;
            }
        }
        if let Some(log) = self.log.as_deref_mut() {
            let shown = |i: usize| {
                let res = |r: Resource| self.applied[r] && self.holds[r][i];
                (res(Resource::Disk), res(Resource::Mem))
            };
            fn pick<T>(shown: (bool, bool), cpu: T, disk: T, mem: T) -> Res<T> {
                Res {
                    cpu,
                    disk: shown.0.then_some(disk),
                    mem: shown.1.then_some(mem),
                }
            }
            let lines: Vec<JobInterval> = jobs
                .iter()
                .enumerate()
                .map(|(i, job)| JobInterval {
                    name: self.setup.jobs[i].name.clone(),
                    pids: if job.gone {
                        Vec::new()
                    } else {
                        job.tree().members().iter().map(|p| p.pid).collect()
                    },
                    active: pick(
                        shown(i),
                        self.active[Resource::Cpu][i],
                        self.active[Resource::Disk][i],
                        self.active[Resource::Mem][i],
                    ),
                    rights: pick(
                        shown(i),
                        rights[Resource::Cpu][i],
                        rights[Resource::Disk][i],
                        rights[Resource::Mem][i],
                    ),
                    expected: Res {
                        mem: None,
                        ..pick(
                            shown(i),
                            expected[Resource::Cpu][i],
                            expected[Resource::Disk][i],
                            0.0,
                        )
                    },
                    weight: Res {
                        cpu: held.cpu[i],
                        disk: held.disk[i],
                        mem: held.mem[i],
                    },
                    cpu_ns: job.consumed_ns(),
                    disk_bytes: held.disk_bytes[i],
                    mem_bytes: held.mem_bytes[i],
                })
                .collect();
            log.line(&Interval {
                t: self.start.elapsed().as_secs_f64(),
                jobs: &lines,
            })?;
        }
        self.last = held;
        Ok(())
    }

    /// The summary's expected values of job `i`: the time-averaged share of the CPU and the
    /// disk, and the memory floor in bytes.
    pub fn expected_summary(&self, i: usize) -> Res<Option<f64>> {
        let res =
            |r: Resource| (self.applied[r] && self.holds[r][i]).then(|| self.average[r].of(i));
        Res {
            cpu: self.average[Resource::Cpu].of(i),
            disk: res(Resource::Disk),
            mem: res(Resource::Mem),
        }
    }

    /// The summary's achieved disk share of job `i` (of the bytes every job with disk tickets
    /// moved) and its mean memory use in bytes, where applied.
    pub fn achieved_disk_mem(&self, i: usize) -> (Option<Option<f64>>, Option<Option<f64>>) {
        let disk = self.per_job(Resource::Disk, i, ()).map(|()| {
            let total: u64 = self.last.disk_bytes.iter().flatten().sum();
            self.last.disk_bytes[i]
                .filter(|_| total > 0)
                .map(|b| b as f64 / total as f64)
        });
        let mem = self.per_job(Resource::Mem, i, ()).map(|()| {
            let (sum, n) = self.mem_used[i];
            (n > 0).then(|| sum / f64::from(n))
        });
        (disk, mem)
    }
}

/// Each client's weight for `r` ∝ its rights now, in `range` (`tickets::compile::quantize`);
/// `clients` are (currency, whether it holds tickets of `r`), and the result is in their order.
///
/// A client that is not active is weighted as it would be if it were: the kernel (for the CPU
/// and for BFQ), and ALPS's rule for blocked jobs, leave it out while it is idle, so the others
/// still divide the resource ∝ their rights, and the client gets its rights the moment it wakes
/// rather than an interval later (with the range's minimum, ALPS would also stop it after one
/// quantum until its cycle ends, and it would not be seen waking up for that long). Clients
/// holding no tickets of `r` get `range.min`.
pub(crate) fn compile(
    model: &Model,
    clients: &[(CurrencyId, bool)],
    r: Resource,
    range: WeightRange,
) -> Vec<Compiled<usize>> {
    let rights: Vec<(usize, f64)> = clients
        .iter()
        .enumerate()
        .map(|(i, &(id, holds))| {
            let competing = model.currency(id).is_ok_and(|c| c.competing[r]);
            let right = if !holds {
                0.0
            } else if competing {
                model.rights(id, r).unwrap_or(0.0)
            } else {
                rights_if_active(model, id, r)
            };
            (i, right)
        })
        .collect();
    quantize(&rights, range)
}

/// What client `id`'s rights to `r` would be were it active now, the others as they are.
fn rights_if_active(model: &Model, id: CurrencyId, r: Resource) -> f64 {
    let mut model = model.clone();
    match model.set_active(id, r, true) {
        Ok(()) => model.rights(id, r).unwrap_or(0.0),
        Err(_) => 0.0,
    }
}

/// Whether every funding path of client `id` for `r` is hard from the base down to it: its
/// memory rights are then a reservation (v2 `memory.min`), else an entitlement (`memory.low`),
/// spec §4.
pub(crate) fn hard_all_the_way(model: &Model, id: CurrencyId, r: Resource) -> bool {
    model.explain_path(id, r).is_ok_and(|e| {
        !e.paths.is_empty()
            && e.paths.iter().all(|p| {
                // The last hop is the client's own self ticket, soft by construction.
                p.hops.split_last().is_some_and(|(_, funding)| {
                    !funding.is_empty() && funding.iter().all(|h| h.kind == Kind::Hard)
                })
            })
    })
}

/// Whether `job` is funded with tickets of `r`.
pub(crate) fn holds_tickets(model: &Model, job: CurrencyId, r: Resource) -> bool {
    model
        .explain_path(job, r)
        .is_ok_and(|e| !e.paths.is_empty())
}
