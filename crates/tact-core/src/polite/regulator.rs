//! The regulator state machine of spec section 3: one per regulated unit.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use super::config::{ConfigError, PoliteConfig};
use super::target::TargetSet;
use crate::stats::{SignTest, Verdict};

/// Progress reported at one testpoint.
#[derive(Debug, Clone, Copy)]
pub struct Obs<'a> {
    /// Metric-set index (phased metrics use one index per phase).
    pub index: u32,
    /// Progress increments since the previous call, one per metric of this index.
    pub dp: &'a [f64],
    /// Time the unit actually ran since the previous call: suspensions and waits excluded.
    pub active: Duration,
    /// Whether the machine was quiet (low pressure) over this interval, if the caller knows.
    /// A bootstrap seen quiet throughout needs no probation (spec 2.8).
    pub quiet: Option<bool>,
}

/// What the unit should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", content = "for", rename_all = "lowercase")]
pub enum Decision {
    Run,
    /// Not enough evidence: keep running, suspension length unchanged.
    Indeterminate,
    Suspend(Duration),
}

impl Decision {
    pub fn suspension(&self) -> Duration {
        match self {
            Decision::Suspend(s) => *s,
            _ => Duration::ZERO,
        }
    }
}

/// Where the regulator is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
pub enum Phase {
    /// Running unregulated to seed the target; `quiet` stays true while every sample was quiet.
    Bootstrap {
        done: u32,
        quiet: bool,
    },
    /// Regulated, and execution capped at the duty cap until `until`.
    Probation {
        /// Logged in seconds, as every other time of a `--json-log`.
        #[serde(serialize_with = "seconds")]
        until: Duration,
    },
    Regulated,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What happened to the progress of this call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleKind {
    /// Sooner than the period: progress accumulated for the next evaluation.
    Accumulated,
    /// The unit ran while it should have been suspended: dropped (subsampling, spec 2.4).
    Ignored,
    /// No active time, or more than the hung threshold: discarded, not judged.
    Discarded,
    /// Evaluated during the bootstrap: calibrates, not judged.
    Bootstrap,
    /// Evaluated and judged by the sign test.
    Judged,
    /// One testpoint of running inside a long suspension: compared with the target to see
    /// whether the suspension can end early, neither judged nor calibrated.
    Peek,
    /// A peek slower than the target although the machine had calmed down after being busy:
    /// the target moves towards it (`calm_weight`) and the suspension ends.
    Recalibrated,
}

/// The figures of one evaluated testpoint, for traces and `--json-log`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Active seconds the sample covers.
    pub d: f64,
    /// Progress by index.
    pub dp: BTreeMap<u32, Vec<f64>>,
    /// Target duration in seconds (None while no target can judge this sample).
    pub dstar: Option<f64>,
    /// Whether the sample counted as poor (d > D*).
    pub poor: Option<bool>,
    /// The sign test's verdict, when the sample was judged.
    pub verdict: Option<Verdict>,
    /// Sign-test window after this sample (before a verdict clears it).
    pub n: u32,
    pub c: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub decision: Decision,
    pub kind: SampleKind,
    pub eval: Option<Evaluation>,
}

#[derive(Debug, Error, PartialEq)]
pub enum ObsError {
    #[error("metric {metric} of index {index} is {value}: progress must be a finite number >= 0")]
    BadMetric {
        index: u32,
        metric: usize,
        value: f64,
    },
    #[error("index {index} was given {got} metrics, but earlier {expected}")]
    MetricCount {
        index: u32,
        expected: usize,
        got: usize,
    },
    #[error("index {index} was given no metrics")]
    NoMetrics { index: u32 },
}

/// Relative slack on d > D*: a job at exactly its target rate must not read as poor through
/// rounding in the averaged target.
const POOR_SLACK: f64 = 1e-9;

#[derive(Debug, Clone)]
pub struct Regulator {
    cfg: PoliteConfig,
    test: SignTest,
    phase: Phase,
    targets: TargetSet,
    acc: BTreeMap<u32, Vec<f64>>,
    acc_active: Duration,
    last_eval: Duration,
    n: u32,
    c: u32,
    next_suspension: Duration,
    /// End of the current piece of suspension: a sample before it ran when it should not have.
    hold_until: Option<Duration>,
    /// End of a suspension served in pieces with peeks between them (`cfg.peek_every`).
    suspended_until: Option<Duration>,
    /// What `hold` has seen of the machine's pressure during the current suspension.
    pressure: Pressure,
    /// The machine was seen busy since the last good verdict: contention that PSI shows.
    episode_busy: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Pressure {
    busy_seen: bool,
    busy_now: bool,
    calm_since: Option<Duration>,
    /// The machine had been calm for `calm_for` when the unit last resumed to peek.
    calm_at_peek: bool,
}

impl Regulator {
    /// A regulator started at `now`. With saved `targets` that finished their warm-up, it skips
    /// the bootstrap and the probation, as the paper's library did with persisted targets.
    pub fn new(
        cfg: PoliteConfig,
        now: Duration,
        targets: Option<TargetSet>,
    ) -> Result<Self, ConfigError> {
        let test = cfg.validate()?;
        let targets = targets.unwrap_or_default();
        let phase = if targets.is_calibrated(cfg.bootstrap) {
            Phase::Regulated
        } else {
            Phase::Bootstrap {
                done: 0,
                quiet: true,
            }
        };
        Ok(Regulator {
            next_suspension: cfg.initial_suspension,
            cfg,
            test,
            phase,
            targets,
            acc: BTreeMap::new(),
            acc_active: Duration::ZERO,
            last_eval: now,
            n: 0,
            c: 0,
            hold_until: None,
            suspended_until: None,
            pressure: Pressure::default(),
            episode_busy: false,
        })
    }

    pub fn config(&self) -> &PoliteConfig {
        &self.cfg
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn targets(&self) -> &TargetSet {
        &self.targets
    }

    /// The suspension the next poor verdict will impose.
    pub fn next_suspension(&self) -> Duration {
        self.next_suspension
    }

    /// Until when the unit is meant to stay suspended, peeks aside, if it is.
    pub fn suspended_until(&self, now: Duration) -> Option<Duration> {
        self.suspended_until
            .max(self.hold_until)
            .filter(|&until| now < until)
    }

    /// While the unit is suspended: how much longer it should stay so, or `None` to resume it
    /// now. `stall` is the machine's stall fraction (PSI `some`, the largest of cpu, io and
    /// memory) since the previous call, when the caller can measure it; the unit is stopped, so
    /// the stall is the other work's. Pressure shapes suspensions served with peeks (spec
    /// section 7): a scheduled peek is skipped while the machine is busy, and once it has been
    /// busy during this suspension, calm for `calm_for` ends the piece at once so the unit peeks
    /// early. Callers poll this every few hundred milliseconds while the unit is stopped.
    pub fn hold(&mut self, now: Duration, stall: Option<f64>) -> Option<Duration> {
        let Some(end) = self.suspended_until.filter(|&e| now < e) else {
            // A suspension served whole (or none): only the clock matters.
            return self.hold_until.filter(|&h| now < h).map(|h| h - now);
        };
        let hold = self.hold_until.unwrap_or(now);
        if let Some(stall) = stall.filter(|s| s.is_finite()) {
            let p = &mut self.pressure;
            if stall >= self.cfg.pressure_busy {
                p.busy_seen = true;
                p.calm_since = None;
            } else if stall < self.cfg.pressure_calm {
                p.calm_since.get_or_insert(now);
            } else {
                p.calm_since = None;
            }
            p.busy_now = stall >= self.cfg.pressure_busy;
            self.episode_busy |= p.busy_now;
            let calm = p.calm_since.is_some_and(|t| now - t >= self.cfg.calm_for);
            p.calm_at_peek = calm;
            if p.busy_seen && calm {
                self.hold_until = Some(now);
                return None;
            }
        } else {
            self.pressure.calm_at_peek = false;
        }
        if now < hold {
            return Some(hold - now);
        }
        if self.pressure.busy_now {
            // The foreground is visibly still at it: a peek would only add to the contention.
            let every = self.cfg.peek_every.expect("pieces only exist with peeks");
            let next = (now + every).min(end);
            self.hold_until = Some(next);
            return Some(next - now);
        }
        None
    }

    /// One testpoint of the unit at time `now`.
    pub fn step(&mut self, now: Duration, obs: Obs) -> Result<Step, ObsError> {
        self.check(&obs)?;
        let acc = self
            .acc
            .entry(obs.index)
            .or_insert_with(|| vec![0.0; obs.dp.len()]);
        for (a, p) in acc.iter_mut().zip(obs.dp) {
            *a += p;
        }
        self.acc_active += obs.active;
        if let Phase::Bootstrap { quiet, .. } = &mut self.phase {
            *quiet &= obs.quiet == Some(true);
        }

        if let Some(until) = self.hold_until.filter(|&u| now < u) {
            // It ran when a compliant unit would have been suspended: never calibrate on that.
            self.take();
            self.last_eval = now;
            return Ok(step(
                Decision::Suspend(until - now),
                SampleKind::Ignored,
                None,
            ));
        }
        self.hold_until = None;
        if let Some(end) = self.suspended_until {
            if now < end {
                return Ok(self.peek(now, end));
            }
            self.suspended_until = None;
        }
        if now.saturating_sub(self.last_eval) < self.cfg.period {
            return Ok(step(Decision::Run, SampleKind::Accumulated, None));
        }

        let (samples, active) = self.take();
        self.last_eval = now;
        if active.is_zero() || active > self.cfg.hung {
            return Ok(step(Decision::Run, SampleKind::Discarded, None));
        }
        let d = active.as_secs_f64();
        // Only a sample of one index calibrates; a mixed one is only compared (spec section 4).
        let single = (samples.len() == 1)
            .then(|| samples.iter().next().expect("one"))
            .map(|(i, dp)| (*i, dp.clone()));

        if let Phase::Bootstrap { done, quiet } = self.phase {
            if let Some((i, dp)) = &single {
                self.calibrate(*i, dp, d);
            }
            self.phase = if done + 1 >= self.cfg.bootstrap {
                let probation = self.cfg.probation.unwrap_or(if quiet {
                    Duration::ZERO
                } else {
                    self.cfg.auto_probation
                });
                if probation.is_zero() {
                    Phase::Regulated
                } else {
                    Phase::Probation {
                        until: now + probation,
                    }
                }
            } else {
                Phase::Bootstrap {
                    done: done + 1,
                    quiet,
                }
            };
            let eval = self.evaluation(d, samples, None, None, None);
            return Ok(step(Decision::Run, SampleKind::Bootstrap, Some(eval)));
        }

        let dstar = self.targets.duration(&samples);
        let poor = dstar.map(|t| d > t * (1.0 + POOR_SLACK));
        if let Some(p) = poor {
            self.n += 1;
            self.c += p as u32;
        }
        if let Some((i, dp)) = &single {
            self.calibrate(*i, dp, d);
        }
        let verdict = self.test.verdict(self.n, self.c);
        let eval = self.evaluation(d, samples, dstar, poor, Some(verdict));
        let mut decision = match verdict {
            Verdict::Poor => {
                let s = self.next_suspension;
                self.next_suspension = (s * 2).min(self.cfg.max_suspension);
                self.clear_window();
                Decision::Suspend(s)
            }
            Verdict::Good => {
                self.next_suspension = self.cfg.initial_suspension;
                self.episode_busy = false;
                self.clear_window();
                Decision::Run
            }
            Verdict::Indeterminate => {
                if self.n >= self.cfg.window_cap {
                    self.clear_window();
                }
                Decision::Indeterminate
            }
        };
        if let Phase::Probation { until } = self.phase {
            if now >= until {
                self.phase = Phase::Regulated;
            } else {
                // Duty cap: rest d(1−φ)/φ after each testpoint; s_next untouched. Regulation's own
                // suspensions stretch by 1/φ as well, so probation is regulation in slow motion:
                // stretching only the quiet periods would leave contended samples 1/φ times
                // over-represented in the calibration, the very bias probation exists to undo.
                let phi = self.cfg.duty_cap;
                let rest = Duration::from_secs_f64(d * (1.0 - phi) / phi);
                decision = Decision::Suspend(rest.max(decision.suspension().div_f64(phi)));
            }
        }
        if let Decision::Suspend(s) = decision {
            let piece = match self.cfg.peek_every {
                // Probation's suspensions are its duty cap, which peeks must not cut short.
                Some(every) if s > every && self.phase == Phase::Regulated => {
                    self.suspended_until = Some(now + s);
                    self.pressure = Pressure::default();
                    every
                }
                _ => s,
            };
            self.hold_until = Some(now + piece);
            decision = Decision::Suspend(piece);
        }
        Ok(step(decision, SampleKind::Judged, Some(eval)))
    }

    /// A sample taken between two pieces of a suspension. One testpoint of running is enough to
    /// tell the end of heavy contention from its middle. A peek that passes ends the suspension
    /// and, like a good verdict, starts the doubling again from one testpoint: after contention,
    /// a job whose target is a little above its pace draws a few short suspensions instead of
    /// the contention's long ones (in the benchmark such verdicts cost 10 s pieces of 30 s gaps).
    /// Peeks do not calibrate: a job that was stopped for seconds often runs slower for a moment
    /// (its pipes and caches refill).
    fn peek(&mut self, now: Duration, end: Duration) -> Step {
        if self.acc_active < self.cfg.period {
            return step(Decision::Run, SampleKind::Accumulated, None);
        }
        let (samples, active) = self.take();
        self.last_eval = now;
        let d = active.as_secs_f64();
        let dstar = self.targets.duration(&samples);
        let pass = dstar
            .map(|t| active <= self.cfg.hung && d * self.cfg.peek_pass <= t * (1.0 + POOR_SLACK));
        let recalibrate = pass == Some(false)
            && self.episode_busy
            && self.pressure.calm_at_peek
            && self.cfg.calm_weight > 0.0;
        let single = (samples.len() == 1)
            .then(|| samples.iter().next().expect("one"))
            .map(|(i, dp)| (*i, dp.clone()));
        let eval = self.evaluation(d, samples, dstar, pass.map(|p| !p), None);
        if pass == Some(true) {
            self.suspended_until = None;
            self.next_suspension = self.cfg.initial_suspension;
            return step(Decision::Run, SampleKind::Peek, Some(eval));
        }
        if recalibrate {
            // The contention that PSI showed is over and the machine stays calm, yet the job is
            // slow: it is slower on its own (other data, a later phase) than its target.
            if let Some((i, dp)) = single {
                self.targets.update(
                    i,
                    &dp,
                    d,
                    self.cfg.bootstrap,
                    1.0 - self.cfg.calm_weight,
                    self.cfg.ridge,
                );
            }
            self.suspended_until = None;
            return step(Decision::Run, SampleKind::Recalibrated, Some(eval));
        }
        let every = self.cfg.peek_every.expect("pieces only exist with peeks");
        let piece = (end - now).min(every);
        self.hold_until = Some(now + piece);
        step(Decision::Suspend(piece), SampleKind::Peek, Some(eval))
    }

    fn check(&self, obs: &Obs) -> Result<(), ObsError> {
        check_progress(obs.index, obs.dp)?;
        let expected = self
            .targets
            .get(obs.index)
            .map(|t| t.metrics())
            .or_else(|| self.acc.get(&obs.index).map(Vec::len));
        match expected {
            Some(expected) if expected != obs.dp.len() => Err(ObsError::MetricCount {
                index: obs.index,
                expected,
                got: obs.dp.len(),
            }),
            _ => Ok(()),
        }
    }

    fn calibrate(&mut self, index: u32, dp: &[f64], d: f64) {
        self.targets.update(
            index,
            dp,
            d,
            self.cfg.bootstrap,
            self.cfg.xi(),
            self.cfg.ridge,
        );
    }

    /// Take the accumulated progress (non-empty indices only) and active time.
    fn take(&mut self) -> (BTreeMap<u32, Vec<f64>>, Duration) {
        let mut samples = std::mem::take(&mut self.acc);
        // Keep every index's metric count known even when it made no progress this time.
        for (i, dp) in &samples {
            self.acc.insert(*i, vec![0.0; dp.len()]);
        }
        samples.retain(|_, dp| dp.iter().any(|&p| p > 0.0));
        if samples.is_empty() {
            // No progress at all is a sample too (the slowest kind); attribute it to the indices seen.
            samples = self.acc.clone();
        }
        (samples, std::mem::take(&mut self.acc_active))
    }

    fn clear_window(&mut self) {
        self.n = 0;
        self.c = 0;
    }

    fn evaluation(
        &self,
        d: f64,
        dp: BTreeMap<u32, Vec<f64>>,
        dstar: Option<f64>,
        poor: Option<bool>,
        verdict: Option<Verdict>,
    ) -> Evaluation {
        Evaluation {
            d,
            dp,
            dstar,
            poor,
            verdict,
            n: self.n,
            c: self.c,
        }
    }
}

/// Progress must be present, finite and not negative: the rule [`Regulator::step`] applies, for
/// callers that batch progress before handing it over and must refuse a bad call at once.
pub fn check_progress(index: u32, dp: &[f64]) -> Result<(), ObsError> {
    if dp.is_empty() {
        return Err(ObsError::NoMetrics { index });
    }
    match dp
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        Some((metric, &value)) => Err(ObsError::BadMetric {
            index,
            metric,
            value,
        }),
        None => Ok(()),
    }
}

fn step(decision: Decision, kind: SampleKind, eval: Option<Evaluation>) -> Step {
    Step {
        decision,
        kind,
        eval,
    }
}
