//! Drives a polite [`Regulator`] against the simulated [`Machine`] at accelerated virtual time.
//!
//! The background job behaves like an MS Manners library client: it works for one testpoint
//! period P, calls the testpoint with its progress and active time, and when told to suspend it
//! blocks inside the call (no work, no progress) for that long, then works another period.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use tact_core::polite::{ConfigError, Decision, Obs, Phase, PoliteConfig, Regulator, SampleKind};
use tact_core::stats::Verdict;

use crate::job::Job;
use crate::load::LoadPattern;
use crate::machine::{Contention, Machine, Slice};
use crate::measure::{Counters, Mark, Overshoot, Reaction, Summary};
use crate::noise::Noise;
use crate::rng::SimRng;

/// Everything that defines one simulated run besides the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    #[serde(skip)]
    pub config: PoliteConfig,
    pub load: LoadPattern,
    pub contention: Contention,
    pub noise: Noise,
    /// Seed of the noise stream (the load has its own seed).
    pub seed: u64,
    /// false: run the job unregulated (every decision ignored), the baseline for slowdown claims.
    pub regulate: bool,
    /// Keep one [`TracePoint`] per testpoint (memory grows with the run; off for day-long runs).
    pub trace: bool,
    /// Record the target duration every this often.
    pub target_every: Duration,
}

impl Scenario {
    pub fn new(config: PoliteConfig, load: LoadPattern, contention: Contention) -> Self {
        Scenario {
            config,
            load,
            contention,
            noise: Noise::None,
            seed: 0,
            regulate: true,
            trace: false,
            target_every: Duration::from_secs(600),
        }
    }
}

/// One testpoint as the trace records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TracePoint {
    /// Time of the testpoint call (end of the work period).
    pub t: Duration,
    pub decision: Decision,
    pub verdict: Option<Verdict>,
    pub kind: SampleKind,
    pub phase: Phase,
    /// Target duration of one unit of work, seconds, after this testpoint.
    pub target: Option<f64>,
    /// The foreground was busy at some point of the work period.
    pub foreground_busy: bool,
}

impl TracePoint {
    pub fn suspended(&self) -> bool {
        matches!(self.decision, Decision::Suspend(_))
    }
}

/// The target duration per unit of work at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TargetPoint {
    pub t: Duration,
    /// Seconds per unit of work (None before the bootstrap has seeded it).
    pub target: Option<f64>,
}

/// A regulator, a machine and a job, stepped together.
pub struct PoliteSim<J: Job> {
    scenario: Scenario,
    regulator: Regulator,
    machine: Machine,
    job: J,
    rng: SimRng,
    now: Duration,
    counters: Counters,
    overshoots: Vec<Overshoot>,
    reactions: Vec<Reaction>,
    /// Contention onset being timed: (onset, testpoints since).
    pending_reaction: Option<(Duration, u32)>,
    /// End of the background's latest work period.
    last_run_end: Duration,
    trace: Vec<TracePoint>,
    targets: Vec<TargetPoint>,
    next_target_sample: Duration,
    unit: BTreeMap<u32, Vec<f64>>,
    dp: Vec<f64>,
}

impl<J: Job> PoliteSim<J> {
    /// A run starting at virtual time zero with no saved targets (so it bootstraps).
    pub fn new(scenario: Scenario, job: J) -> Result<Self, ConfigError> {
        let regulator = Regulator::new(scenario.config.clone(), Duration::ZERO, None)?;
        let unit = BTreeMap::from([(job.index(), job.unit())]);
        Ok(PoliteSim {
            machine: Machine::new(scenario.load.clone(), scenario.contention),
            rng: SimRng::stream(scenario.seed, 2),
            regulator,
            job,
            now: Duration::ZERO,
            counters: Counters::default(),
            overshoots: Vec::new(),
            reactions: Vec::new(),
            pending_reaction: None,
            last_run_end: Duration::ZERO,
            trace: Vec::new(),
            targets: Vec::new(),
            next_target_sample: Duration::ZERO,
            unit,
            dp: Vec::new(),
            scenario,
        })
    }

    pub fn now(&self) -> Duration {
        self.now
    }

    pub fn regulator(&self) -> &Regulator {
        &self.regulator
    }

    pub fn job(&self) -> &J {
        &self.job
    }

    pub fn trace(&self) -> &[TracePoint] {
        &self.trace
    }

    pub fn target_series(&self) -> &[TargetPoint] {
        &self.targets
    }

    pub fn overshoots(&self) -> &[Overshoot] {
        &self.overshoots
    }

    pub fn reactions(&self) -> &[Reaction] {
        &self.reactions
    }

    /// The calibrated target as a duration per unit of work, seconds.
    pub fn target_duration(&self) -> Option<f64> {
        self.regulator.targets().duration(&self.unit)
    }

    pub fn mark(&self) -> Mark {
        Mark {
            at: self.now,
            counters: self.counters,
        }
    }

    pub fn summary_since(&self, from: &Mark) -> Summary {
        Summary::new(from, &self.mark(), &self.overshoots, &self.reactions)
    }

    pub fn summary(&self) -> Summary {
        self.summary_since(&Mark {
            at: Duration::ZERO,
            counters: Counters::default(),
        })
    }

    /// Run until the clock reaches `end` (a suspension in progress at `end` is served in full).
    pub fn run_until(&mut self, end: Duration) {
        while self.now < end {
            self.testpoint();
        }
    }

    /// One work period and its testpoint, then the suspension it orders, if any.
    fn testpoint(&mut self) {
        let period = self.scenario.config.period;
        let t0 = self.now;
        self.machine.foreground.forget_before(t0);
        let slice = self.machine.run_background(t0, t0 + period);
        self.account_running(&slice);

        let noise = self.scenario.noise.sample(&mut self.rng);
        self.job.progress(slice.end, slice.work, &mut self.dp);
        self.dp.iter_mut().for_each(|p| *p *= noise);
        self.now = slice.end;

        let obs = Obs {
            index: self.job.index(),
            dp: &self.dp,
            active: period,
            quiet: Some(slice.foreground_busy.is_zero()),
        };
        let step = self
            .regulator
            .step(self.now, obs)
            .expect("the simulated job reports valid progress");
        let decision = if self.scenario.regulate {
            step.decision
        } else {
            Decision::Run
        };

        self.counters.testpoints += 1;
        if let Some(eval) = &step.eval {
            if let Some(poor) = eval.poor {
                self.counters.judged += 1;
                self.counters.poor_samples += poor as u64;
            }
            match eval.verdict {
                Some(Verdict::Poor) => self.counters.poor_verdicts += 1,
                Some(Verdict::Good) => self.counters.good_verdicts += 1,
                _ => {}
            }
        }
        self.time_reaction(&slice, decision);

        if self.scenario.trace {
            self.trace.push(TracePoint {
                t: self.now,
                decision,
                verdict: step.eval.as_ref().and_then(|e| e.verdict),
                kind: step.kind,
                phase: self.regulator.phase(),
                target: self.target_duration(),
                foreground_busy: !slice.foreground_busy.is_zero(),
            });
        }
        self.sample_target();

        if let Decision::Suspend(s) = decision {
            self.counters.suspensions += 1;
            self.suspend(s);
            // The target does not move while suspended: sample the instants the suspension spans.
            self.sample_target();
        }
    }

    fn sample_target(&mut self) {
        while self.next_target_sample <= self.now {
            self.targets.push(TargetPoint {
                t: self.next_target_sample,
                target: self.target_duration(),
            });
            self.next_target_sample += self.scenario.target_every;
        }
    }

    fn account_running(&mut self, slice: &Slice) {
        let len = slice.end - slice.start;
        let c = &mut self.counters;
        c.elapsed += len;
        c.bg_running += len;
        c.bg_running_contended += slice.foreground_busy;
        c.fg_busy += slice.foreground_busy;
        let f = self.machine.contention.foreground_factor;
        c.fg_lost += slice.foreground_busy.as_secs_f64() * (1.0 - 1.0 / f);
        // A burst that began while the background was suspended: contention starts as it resumes.
        let current = self.machine.foreground.segment_at(slice.start);
        if current.busy && current.start >= self.last_run_end && current.start < slice.start {
            self.pending_reaction.get_or_insert((slice.start, 0));
        }
        self.last_run_end = slice.end;
        for seg in self.machine.foreground.transitions(slice.start, slice.end) {
            if seg.busy {
                // Contention onset while the background runs: time the reaction from here.
                self.pending_reaction.get_or_insert((seg.start, 0));
            } else {
                // The foreground went idle while the background was running: no overshoot.
                self.overshoots.push(Overshoot {
                    at: seg.start,
                    overshoot: Duration::ZERO,
                });
            }
        }
    }

    /// Count testpoints from a contention onset to the first suspension; the testpoint whose
    /// period contains the onset is the first.
    fn time_reaction(&mut self, slice: &Slice, decision: Decision) {
        let Some((at, n)) = self.pending_reaction.as_mut() else {
            return;
        };
        *n += 1;
        if matches!(decision, Decision::Suspend(_)) {
            self.reactions.push(Reaction {
                at: *at,
                testpoints: Some(*n),
            });
            self.pending_reaction = None;
        } else if !self.machine.foreground.busy_at(slice.end) {
            // The burst ended before the regulator reacted.
            self.reactions.push(Reaction {
                at: *at,
                testpoints: None,
            });
            self.pending_reaction = None;
        }
    }

    fn suspend(&mut self, s: Duration) {
        let (a, b) = (self.now, self.now + s);
        let busy = self.machine.foreground.busy_time(a, b);
        let c = &mut self.counters;
        c.elapsed += s;
        c.bg_suspended += s;
        c.fg_busy += busy;
        // A busy→idle transition inside the suspension wastes idle time until the background
        // resumes, or the whole idle period if the foreground comes back first.
        for seg in self.machine.foreground.transitions(a, b) {
            if !seg.busy {
                self.overshoots.push(Overshoot {
                    at: seg.start,
                    overshoot: seg.end.min(b) - seg.start,
                });
            }
        }
        self.now = b;
    }
}
