//! The tickets model as a run sees it: which jobs compete now, their rights `R(job,cpu)`, those
//! rights compiled to a backend's integer weights (`tickets::compile::quantize`), and the record
//! of each interval (the JSON log, the time-averaged expected share).

use std::time::{Duration, Instant};

use anyhow::Result;
use tact_core::tickets::compile::{quantize, WeightRange};
use tact_core::tickets::{CurrencyId, Model, Resource};

use super::report::{Average, Cpu, Interval, JobInterval};
use super::setup::Setup;
use crate::share::group::Job;
use crate::trace::JsonLines;

pub struct Rights<'a> {
    setup: &'a Setup,
    model: Model,
    /// Each job's client currency, in job order.
    ids: Vec<CurrencyId>,
    active: Vec<bool>,
    range: WeightRange,
    pub average: Average,
    log: Option<&'a mut JsonLines>,
    start: Instant,
    last: Instant,
}

impl<'a> Rights<'a> {
    /// Every job competing: they are about to start.
    pub fn new(
        setup: &'a Setup,
        range: WeightRange,
        log: Option<&'a mut JsonLines>,
    ) -> Result<Rights<'a>> {
        let mut model = setup.model.clone();
        let ids: Vec<CurrencyId> = setup.jobs.iter().map(|j| j.id).collect();
        for &id in &ids {
            model.set_active(id, Resource::Cpu, true)?;
        }
        Ok(Rights {
            setup,
            model,
            active: vec![true; ids.len()],
            ids,
            range,
            average: Average::new(setup.jobs.len()),
            log,
            start: Instant::now(),
            last: Instant::now(),
        })
    }

    /// The jobs were let go: intervals count from now.
    pub fn started(&mut self) {
        self.start = Instant::now();
        self.last = self.start;
    }

    /// Since the jobs were let go.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Records which jobs compete now (in job order).
    pub fn set_active(&mut self, active: &[bool]) -> Result<()> {
        for (i, (&now, was)) in active.iter().zip(self.active.iter_mut()).enumerate() {
            if now != *was {
                *was = now;
                self.model.set_active(self.ids[i], Resource::Cpu, now)?;
            }
        }
        Ok(())
    }

    /// Each job's weight ∝ its rights now, in the backend's range. A job that does not compete
    /// is weighted as it would be if it did: the kernel, and ALPS's rule for blocked jobs, leave
    /// it out while it sleeps, so the others still divide the CPU ∝ their rights, and the job
    /// gets its rights the moment it wakes rather than an interval later (with the range's
    /// minimum, ALPS would also stop it after one quantum until its cycle ends, and it would
    /// not be seen waking up for that long).
    pub fn weights(&self) -> Vec<u64> {
        let rights: Vec<(usize, f64)> = (0..self.ids.len())
            .map(|i| {
                let r = if self.active[i] {
                    self.rights(i)
                } else {
                    self.rights_if_competing(i)
                };
                (i, r)
            })
            .collect();
        quantize(&rights, self.range)
            .into_iter()
            .map(|c| c.weight)
            .collect()
    }

    fn rights(&self, job: usize) -> f64 {
        self.model
            .rights(self.ids[job], Resource::Cpu)
            .unwrap_or(0.0)
    }

    /// What the job's rights would be were it to compete now, the others as they are.
    fn rights_if_competing(&self, job: usize) -> f64 {
        let mut model = self.model.clone();
        match model.set_active(self.ids[job], Resource::Cpu, true) {
            Ok(()) => model.rights(self.ids[job], Resource::Cpu).unwrap_or(0.0),
            Err(_) => 0.0,
        }
    }

    /// `R / ΣR` over the competing jobs, per job (0 for the others).
    fn expected(&self) -> Vec<f64> {
        let shares = self.model.shares(Resource::Cpu);
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

    /// Closes an interval: the expected shares held since the last one count for its length,
    /// and the log gets a line with `weights` as the backend holds them.
    pub fn interval(&mut self, jobs: &[Job], weights: &[u64]) -> Result<()> {
        let expected = self.expected();
        self.average
            .add(self.last.elapsed(), expected.iter().copied());
        self.last = Instant::now();
        let Some(log) = self.log.as_deref_mut() else {
            return Ok(());
        };
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
                active: Cpu {
                    cpu: self.active[i],
                },
                rights: Cpu {
                    cpu: self.model.rights(self.ids[i], Resource::Cpu).unwrap_or(0.0),
                },
                expected: Cpu { cpu: expected[i] },
                weight: Cpu { cpu: weights[i] },
                cpu_ns: job.consumed_ns(),
            })
            .collect();
        log.line(&Interval {
            t: self.start.elapsed().as_secs_f64(),
            jobs: &lines,
        })
    }
}
