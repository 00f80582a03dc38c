//! The TCC controller (spec §2.5): a pure state machine over completion events.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use super::decide::{look_z, n1_hat, verdict, Outcome};
use super::gaps::GapRule;
use super::params::{q_scaled, ParamError, TuneParams, SLOW_START};
use super::policy::{Event, Load, Phase, Policy, Pressure, Reason, Transition};
use super::samples::{SampleSet, Summary};
use super::turns::{Share, Start, Turns};
use crate::stats::normal_quantile;

/// A measured configuration, kept after the controller has moved on (C₁, or the cycle's best).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Config {
    n: usize,
    s: Summary,
    /// Busy time from the change to this count until it held n* batches (or its whole busy time
    /// if it never did).
    to_nstar: Duration,
    /// Its own and its peers' samples (coordinated, while the turn is held).
    share: Share,
}

/// Where the settling after a change stands (spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Completions are ignored until the number in flight equals the target.
    InFlight,
    /// Then this many more.
    Skip(usize),
    Done,
}

/// Bottleneck utilization reported by the host ([`Policy::on_hint`]) over a configuration's
/// measured busy time: time-weighted, so reports of any period add up.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Util {
    /// Busy seconds the reports covered, and the sum of utilization × seconds.
    covered: f64,
    sum: f64,
    /// Measured busy seconds they could have covered (earlier visits, in fast mode).
    measured: f64,
}

impl Util {
    fn merge(&self, other: &Util) -> Util {
        Util {
            covered: self.covered + other.covered,
            sum: self.sum + other.sum,
            measured: self.measured + other.measured,
        }
    }

    /// The mean, when reports covered at least half the measured time: a host that stopped
    /// reporting (or reports too rarely for this configuration) turns the hint off.
    fn mean(&self) -> Option<f64> {
        (self.covered > 0.0 && self.covered >= 0.5 * self.measured).then(|| self.sum / self.covered)
    }
}

/// What the hint's crowding rule and the join rule judge a coordinated steady state by (see
/// [`Tcc::crowded`], [`Tcc::outgrown`]):
/// the bottleneck's utilization and the instance's share of the key's completions over its
/// change-detection windows since the later of the steady state's start and the last change
/// in the number of instances.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Crowd {
    util: Util,
    share: Share,
    windows: u32,
    /// The number of instances changed during the window under way: it is left out.
    skip: bool,
}

/// How long a steady state ignores PSI readings that did not rise (host time from its start):
/// avg10 is an exponential average with a 10 s time constant, so the stalls of the counts
/// explored just before (a revoked, stalling add step) still show in it; after 20 s they have
/// decayed to e⁻² ≈ 14% of what they were. Without this, the stalls that ended one cycle could
/// start the next. A reading that rose is not carry (see [`Tcc::steady_stalls`]).
const PSI_SETTLE: Duration = Duration::from_secs(20);

/// The kernel's avg10: an exponential average with this time constant (seconds)...
const PSI_TAU: f64 = 10.0;

/// ...updated this often: two readings closer than this may straddle no update at all, so an
/// unchanged figure says nothing about the time between them.
const PSI_UPDATE: Duration = Duration::from_secs(2);

/// The readings a steady state's memory `some` must rise above to show the steady count's own
/// stalls (see [`Tcc::steady_stalls`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct SteadyLow {
    /// Host time of the steady state's first reading after settling.
    first: Option<Duration>,
    /// The lowest memory `some` among the readings [`PSI_UPDATE`] or more after it. Not the ones
    /// before: the kernel's first update after settling covers up to that much of the time
    /// before it, when the counts being retired may still have stalled.
    low: Option<f64>,
}

impl SteadyLow {
    fn take(&mut self, at: Duration, some: f64) {
        let first = *self.first.get_or_insert(at);
        if at >= first + PSI_UPDATE {
            self.low = Some(self.low.map_or(some, |low| low.min(some)));
        }
    }

    /// `some` is strictly above the lowest reading: avg10 rose since, and an unchanged figure
    /// (which may straddle no update) does not count.
    fn rose_to(&self, some: f64) -> bool {
        self.low.is_some_and(|low| some > low)
    }
}

/// The latest PSI reading, and the busy clock and host time it came at.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    pressure: Pressure,
    busy: Duration,
    at: Duration,
}

/// Fast mode's progress through one comparison (C₂ against C₁; spec §6 item 1).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Comparison {
    /// C₂'s statistics and busy time from its earlier visits (the current one is `cur`).
    cand: Summary,
    cand_busy: Duration,
    cand_nstar: Option<Duration>,
    /// C₂'s bottleneck utilization and share over its earlier visits.
    cand_util: Util,
    cand_share: Share,
    /// Busy time spent running C₁ again: the dwell cap bounds the whole comparison.
    c1_busy: Duration,
    /// The look the test is at: k = 0 at C₂'s n* batches, then every doubling of n₁ + n₂.
    look: u32,
    look_at: u32,
    /// C₂'s count, to return to after a revisit.
    cand_n: usize,
    /// Some(t) while the pool runs C₁'s count again to bring C₁ to t batches.
    revisit: Option<u32>,
}

impl Comparison {
    fn new() -> Self {
        Comparison {
            cand: Summary::default(),
            cand_busy: Duration::ZERO,
            cand_nstar: None,
            cand_util: Util::default(),
            cand_share: Share::default(),
            c1_busy: Duration::ZERO,
            look: 0,
            look_at: 0,
            cand_n: 0,
            revisit: None,
        }
    }
}

/// One verdict of the test and what it cost, for telemetry and for measuring the controller
/// against the truth in the simulator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub at: Duration,
    pub busy: Duration,
    pub cycle: u64,
    /// Add (C₁ is the count before the step) or Remove (C₁ is the cycle's best).
    pub phase: Phase,
    pub reason: Reason,
    /// Counts of C₁ and C₂.
    pub c1: usize,
    pub c2: usize,
    /// The gain tested (q_eff of the step; −δ for removals).
    pub q: f64,
    /// Whether C₂ was judged better (a thrashing-guard trip is "not better").
    pub better: bool,
    pub forced: bool,
    /// The bottleneck hint decided it (see [`Transition::hinted`]).
    pub hinted: bool,
    /// PSI decided it (see [`Transition::psi`]).
    pub psi: bool,
    /// The fair-share rule decided it (coordinated, `docs/tune.md` "Several instances on one
    /// bottleneck"): an add step accepted because it took the instance's share up towards 1/k,
    /// or a removal undone because it took the share below 1/k.
    pub fair: bool,
    /// Samples measured since the previous decision (both configurations, revisits
    /// included), and the batch size b they were grouped by.
    pub samples: u64,
    pub batch_size: usize,
}

/// What a host or a CLI can show about the controller.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub phase: Phase,
    pub target: usize,
    pub cycle: u64,
    /// Batch size b of the current cycle.
    pub batch_size: usize,
    /// Raw samples and complete batches of the configuration being measured.
    pub samples: usize,
    pub batches: u32,
    /// Trimmed throughput of the configuration being measured (completions per busy second).
    pub throughput: Option<f64>,
    /// The cycle's best configuration so far: count and trimmed throughput.
    pub best: Option<(usize, f64)>,
    /// Busy time since the origin: time the pool was saturated.
    pub busy: Duration,
    pub saturated: bool,
    pub settling: bool,
    /// Decisions taken at a dwell cap from the point estimate.
    pub forced_decisions: u64,
    /// Events whose time was earlier than the one before (treated as simultaneous).
    pub clock_regressions: u64,
    /// Transitions and decisions dropped from full trace buffers.
    pub trace_dropped: u64,
    /// The count of the last entry into Steady: what a host keeps per workload key to warm-start
    /// the next run (`TuneParams::warm`).
    pub steady_count: Option<usize>,
    /// Slow start is in force (a cold first cycle before its first failed step).
    pub slow_start: bool,
    /// Fast mode is measuring C₁ again (the target is C₁'s count for now).
    pub revisiting: bool,
    /// The bottleneck's mean utilization over the configuration being measured (after its
    /// settling), when the host reports one ([`Policy::on_hint`]) for at least half that time.
    pub utilization: Option<f64>,
    /// Steps the bottleneck hint decided: add steps it accepted, removals it undid and steady
    /// states it ended (their transitions say `hinted`).
    pub hinted: u64,
    /// The latest pressure reading ([`Policy::on_pressure`]), sanitized, whether or not
    /// `TuneParams::psi` lets it act.
    pub pressure: Option<Pressure>,
    /// Steps PSI decided: add steps it revoked and steady states it ended (their transitions
    /// say `psi`).
    pub psi: u64,
}

/// Throughput-guided concurrency control.
#[derive(Debug, Clone)]
pub struct Tcc {
    params: TuneParams,
    z: f64,
    phase: Phase,
    target: usize,
    prev: usize,
    cycle: u64,

    // Busy clock (spec §2.2, Figure 6).
    last_at: Option<Duration>,
    load: Load,
    saturated: bool,
    busy: Duration,
    /// Busy clock at the last completion, while no starved period has followed it.
    mark: Option<Duration>,
    /// Spec §6's gap rule, for a host that cannot see saturation.
    gap_rule: Option<GapRule>,

    // Bottleneck hint: busy clock at the last report, at the end of the current
    // configuration's settling, and the reports over its measured time since.
    hint_at: Option<Duration>,
    measure_from: Option<Duration>,
    util: Util,
    hinted: u64,
    /// The decision being recorded is the hint's (marks its Decision and Transition).
    hint_decides: bool,

    // PSI: the latest reading, steps it decided, and whether it decides the one being recorded.
    reading: Option<Reading>,
    /// The reading the current configuration's own stalls are measured from: the last one
    /// taken after the change and before settling, or the first one after.
    psi_base: Option<Reading>,
    psi: u64,
    psi_decides: bool,

    // The configuration being measured.
    b: usize,
    cur: SampleSet,
    config_start: Duration,
    to_nstar: Option<Duration>,
    settle: Settle,
    autocorr_next: u32,
    reference: Option<Config>,
    best: Option<Config>,
    /// Slow start in force.
    slow: bool,
    cmp: Comparison,

    // Steady state.
    steady_ref: Option<Summary>,
    /// The bottleneck's mean utilization over the reference window, when reported.
    steady_util: Option<f64>,
    /// The utilization reports up to the end of the last change-detection window.
    window_mark: Util,
    /// The count the room rule last climbed from, since the last cycle it did not start (see
    /// [`Tcc::has_room`]).
    climbed_from: Option<usize>,
    /// Coordinated: the steady state's windows for the hint's crowding rule, the running
    /// share count at the end of the last window, and the count the rule last started a cycle
    /// from with the others' workers it saw then ([`Share::others`]), since the last cycle of
    /// another cause or change in the number of instances (see [`Tcc::crowded`]).
    crowd: Crowd,
    share_mark: Share,
    shed_from: Option<(usize, f64)>,
    strikes: u32,
    steady_timeout: Duration,
    cycle_start: Duration,
    /// Host time the steady state began (PSI readings count from [`PSI_SETTLE`] after it).
    steady_at: Duration,
    /// What a steady state's memory `some` readings must rise above (`psi` on).
    steady_low: SteadyLow,
    rng: u64,
    /// Coordination with other instances on the bottleneck ([`Policy::coordinate`]).
    turns: Turns,
    /// Own and peers' samples of the configuration being measured (this visit).
    share: Share,
    /// The decision being recorded is the fair-share rule's.
    fair_decides: bool,
    /// The highest [`Turns::fair_value`] among the cycle's judged configurations: what a
    /// removal below the fair share must keep (the cycle's best is chosen by the bottleneck's
    /// throughput, which counts that differ only in share tie on).
    fair_best: f64,

    trace: VecDeque<Transition>,
    trace_dropped: u64,
    decisions: VecDeque<Decision>,
    /// Samples measured since the last decision.
    explored: u64,
    steady_count: Option<usize>,
    forced: u64,
    clock_regressions: u64,
}

impl Tcc {
    /// A controller in the first cycle's Base state, after validating the parameters: at
    /// `n_init` without the cut, or with `warm` at that count's cut.
    pub fn new(params: TuneParams) -> Result<Self, ParamError> {
        params.validate()?;
        let z = normal_quantile(1.0 - params.alpha).expect("alpha validated in (0, 0.5)");
        let n = match params.warm {
            Some(warm) => params.base_count(warm),
            None => params.n_init,
        };
        let b = batch_for(&params, n);
        Ok(Tcc {
            z,
            phase: Phase::Base,
            target: n,
            prev: n,
            cycle: 0,
            last_at: None,
            load: Load::default(),
            saturated: false,
            busy: Duration::ZERO,
            mark: None,
            gap_rule: None,
            hint_at: None,
            measure_from: None,
            util: Util::default(),
            hinted: 0,
            hint_decides: false,
            reading: None,
            psi_base: None,
            psi: 0,
            psi_decides: false,
            b,
            cur: SampleSet::new(b, params.trim),
            config_start: Duration::ZERO,
            to_nstar: None,
            settle: Settle::InFlight,
            autocorr_next: params.n_star,
            reference: None,
            best: None,
            slow: params.slow_start && params.warm.is_none(),
            cmp: Comparison::new(),
            steady_ref: None,
            steady_util: None,
            window_mark: Util::default(),
            climbed_from: None,
            crowd: Crowd::default(),
            share_mark: Share::default(),
            shed_from: None,
            strikes: 0,
            steady_timeout: params.steady_max,
            cycle_start: Duration::ZERO,
            steady_at: Duration::ZERO,
            steady_low: SteadyLow::default(),
            rng: params.seed,
            turns: Turns::default(),
            share: Share::default(),
            fair_decides: false,
            fair_best: 0.0,
            trace: VecDeque::new(),
            trace_dropped: 0,
            decisions: VecDeque::new(),
            explored: 0,
            steady_count: None,
            forced: 0,
            clock_regressions: 0,
            params,
        })
    }

    pub fn params(&self) -> &TuneParams {
        &self.params
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Z = Φ⁻¹(1 − α).
    pub fn z(&self) -> f64 {
        self.z
    }

    /// Busy time since the origin.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// The steady state's timeout in force (busy time).
    pub fn steady_timeout(&self) -> Duration {
        self.steady_timeout
    }

    pub fn status(&self) -> Status {
        let s = self.cur.summary();
        Status {
            phase: self.phase,
            target: self.target,
            cycle: self.cycle,
            batch_size: self.b,
            samples: self.cur.len(),
            batches: s.batches,
            throughput: (s.batches > 0).then(|| s.throughput()),
            best: self.best.map(|c| (c.n, c.s.throughput())),
            busy: self.busy,
            saturated: self.saturated,
            settling: self.settle != Settle::Done,
            forced_decisions: self.forced,
            clock_regressions: self.clock_regressions,
            trace_dropped: self.trace_dropped,
            steady_count: self.steady_count,
            slow_start: self.slow,
            revisiting: self.cmp.revisit.is_some(),
            utilization: self.judged_util().mean(),
            hinted: self.hinted,
            pressure: self.reading.map(|r| r.pressure),
            psi: self.psi,
        }
    }

    /// The verdicts since the last call, oldest first (bounded like the trace).
    pub fn drain_decisions(&mut self) -> Vec<Decision> {
        self.decisions.drain(..).collect()
    }

    /// Feeds one event, with the bottleneck's utilization when it is a hint, or the pressure
    /// readings.
    fn handle(&mut self, event: Event, hint: Option<f64>, pressure: Option<Pressure>) {
        let complete = matches!(event, Event::Complete { .. });
        let (at, advanced) = self.advance(event.at(), complete);
        self.end_if_joined(at);
        let sampled = complete && self.sample(false);
        if let Some(load) = event.load() {
            self.load = load;
        }
        self.refresh_load();
        if let Some(u) = hint {
            self.take_hint(u);
        }
        if let Some(pressure) = pressure {
            let reading = Reading {
                pressure: pressure.sanitized(),
                busy: self.busy,
                at,
            };
            if self.settle != Settle::Done || self.psi_base.is_none() {
                self.psi_base = Some(reading);
            }
            self.reading = Some(reading);
            if self.phase == Phase::Steady {
                self.track_steady_low();
            }
        }
        if sampled || advanced {
            self.step(at);
        }
    }

    /// Time moves to `at` (never back): busy time grows by the span while saturated. The time
    /// used, and whether busy time grew.
    fn advance(&mut self, mut at: Duration, complete: bool) -> (Duration, bool) {
        if let Some(last) = self.last_at {
            if at < last {
                self.clock_regressions += 1;
                at = last;
            }
        }
        let span = match self.last_at {
            Some(last) if self.saturated => at - last,
            _ => Duration::ZERO,
        };
        let credit = match &mut self.gap_rule {
            Some(rule) => rule.credit(span, at, complete, self.target),
            None => Some(span),
        };
        match credit {
            Some(d) => self.busy += d,
            None => self.mark = None,
        }
        self.last_at = Some(at);
        (at, credit.is_some_and(|d| d > Duration::ZERO))
    }

    /// Completions of the other coordinated instances. While this one holds the turn (a cycle
    /// under way) they are samples as its own are: the others hold their counts, so the
    /// throughput its tests compare is the bottleneck's, and a step that only takes share from
    /// them gains nothing. Outside the turn they are no samples: the steady state watches the
    /// instance's own throughput, and other instances explore then; with others on the key
    /// (k ≥ 2) Steady counts them for the share its crowding and join rules judge
    /// ([`Tcc::crowded`], [`Tcc::outgrown`]).
    fn handle_peers(&mut self, now: Duration, count: u32) {
        // A join ends the cycle at any event, a peer's completion included (often the
        // newcomer's first).
        let at = self.last_at.map_or(now, |last| now.max(last));
        self.end_if_joined(at);
        // Starved, the instance takes no samples of its own either.
        if !self.saturated || count == 0 {
            return;
        }
        if self.phase == Phase::Steady && self.turns.instances() >= 2 && self.turns.on() {
            // Not samples, but the steady state's share of the key's completions, for the
            // hint's crowding rule: counted as its own completions are, once settled.
            if self.settle == Settle::Done {
                self.share.add_peers(count);
            }
            return;
        }
        if !self.turns.holds(self.phase) {
            return;
        }
        let (at, advanced) = self.advance(now, false);
        let sampled = self.sample_peers(count);
        if sampled || advanced {
            self.step(at);
        }
    }

    /// Coordinated, an instance joined the key since the last event while this one held the
    /// turn ([`Turns::set_instances`]): the cycle ends now, at the count the step under way
    /// was taken from (`prev`: in Base the count the cycle started from, for cycle 0 the count
    /// the controller was built with; in Add the step's C₁; in Max the C₁ of the step that led
    /// there; in Remove the last count kept). The configurations judged before the join were
    /// judged soundly; the one under way is not (the newcomer's completions entered T partway
    /// through it), so it is undone as a failed step would be, and no removals follow, since
    /// they would be judged the same way and the newcomer would wait for them. Steady then
    /// gives the turn up; its timeout comes from the cycle's length as ever (`steady_min` for
    /// one cut short early), and the next cycle is judged with the newcomer's share counted.
    fn end_if_joined(&mut self, at: Duration) {
        if self.turns.take_joined() && self.turns.holds(self.phase) {
            let back = self.prev;
            self.go_steady(at, back, Reason::Joined, false);
        }
    }

    /// One completion, the instance's own or (`peer`) another's: the busy time since the
    /// previous one is a sample once the configuration has settled. Whether a sample was taken.
    fn sample(&mut self, peer: bool) -> bool {
        let sampled = match self.mark {
            Some(mark) => self.take((self.busy - mark).as_secs_f64(), peer),
            None => false,
        };
        self.mark = Some(self.busy);
        sampled
    }

    /// `count` completions of the others, read at once: the busy time since the previous
    /// sample is shared equally among them, as [`Gaps`](super::gaps::Gaps) shares a polled
    /// gap. They ended somewhere in that span, and one sample carrying all of it beside
    /// count − 1 of zero would make the largest samples, which trimming drops, hold far more
    /// than their part of the time: on the real rig (a host reading `KEY.done` before each of
    /// its own events, a few peers' completions at a time) that read a latecomer's
    /// configurations 7–29% above the bottleneck's throughput, the more the fewer its own
    /// workers, so its add steps looked like losses. With no sample before them (the chain
    /// broken: starved, or a gap the gap rule did not credit) they only start the chain, as
    /// a single completion does: their span is unknown. Whether a sample was taken.
    fn sample_peers(&mut self, count: u32) -> bool {
        let mut sampled = false;
        if let Some(mark) = self.mark {
            let x = (self.busy - mark).as_secs_f64() / f64::from(count.max(1));
            for _ in 0..count {
                sampled |= self.take(x, true);
            }
        }
        self.mark = Some(self.busy);
        sampled
    }

    /// A sample `x` of a completion (`peer`: another instance's) while the chain runs:
    /// counted once the configuration has settled, else a step of settling. Whether it was
    /// counted.
    fn take(&mut self, x: f64, peer: bool) -> bool {
        match self.settle {
            Settle::Done => {
                self.cur.push(x);
                self.share.add(peer);
                if self.phase != Phase::Steady {
                    self.explored += 1;
                }
                if self.to_nstar.is_none() && self.cur.summary().batches >= self.params.n_star {
                    self.to_nstar = Some(self.busy - self.config_start);
                }
                true
            }
            Settle::Skip(k) => {
                self.settle = if k <= 1 {
                    self.measure_from = Some(self.busy);
                    Settle::Done
                } else {
                    Settle::Skip(k - 1)
                };
                false
            }
            Settle::InFlight => false,
        }
    }

    /// A utilization report covers the busy time since the previous one; only its part after
    /// the current configuration settled counts (settling is a transient, like its samples).
    /// The first report only starts the chain.
    fn take_hint(&mut self, u: f64) {
        let last = self.hint_at.replace(self.busy);
        if !u.is_finite() {
            return;
        }
        let (Some(last), Some(from)) = (last, self.measure_from) else {
            return;
        };
        let span = self.busy.saturating_sub(last.max(from)).as_secs_f64();
        self.util.covered += span;
        self.util.sum += span * u.clamp(0.0, 1.0);
    }

    /// The bottleneck utilization over the configuration being judged: earlier visits (fast
    /// mode) and this one since it settled.
    fn judged_util(&self) -> Util {
        let measured = self
            .measure_from
            .map_or(0.0, |m| self.busy.saturating_sub(m).as_secs_f64());
        self.cmp.cand_util.merge(&Util {
            measured,
            ..self.util
        })
    }

    /// The bottleneck's utilization reports over the change-detection window just completed
    /// (those since the previous window's end), and the mark moved to now.
    fn window_reports(&mut self) -> Util {
        let measured = self
            .measure_from
            .map_or(0.0, |m| self.busy.saturating_sub(m).as_secs_f64());
        let now = Util {
            measured,
            ..self.util
        };
        let mark = std::mem::replace(&mut self.window_mark, now);
        Util {
            covered: now.covered - mark.covered,
            sum: now.sum - mark.sum,
            measured: now.measured - mark.measured,
        }
    }

    /// The window's mean utilization, from [`Tcc::window_reports`].
    fn window_util(reports: &Util) -> Option<f64> {
        reports
            .mean()
            // Differences of running sums round: a bottleneck reported at 1 throughout must
            // not read above it (`saturated` = 1 turns the rule off).
            .map(|u| u.min(1.0))
    }

    /// Coordinated with peers, the window just completed joins the crowding rule's (its
    /// utilization `reports`, and the share counted since the previous window's end), unless
    /// the number of instances changed during it.
    fn count_crowd(&mut self, reports: Util) {
        let share = self.share.since(&self.share_mark);
        self.share_mark = self.share;
        if !self.turns.on() || self.turns.instances() < 2 {
            return;
        }
        if std::mem::take(&mut self.crowd.skip) {
            return;
        }
        let c = &mut self.crowd;
        c.util = c.util.merge(&reports);
        c.share = c.share.merge(&share);
        c.windows += 1;
    }

    /// The hint's crowding rule (coordinated): over the steady state's windows since it began
    /// or the number of instances last changed (two at least), the bottleneck ran above `util`
    /// and the instance held more than its fair share, by more than one of its workers
    /// ([`Turns::long`]). Its cycle, from the base cut, judges the count afresh beside the
    /// others: above the fair share the bottleneck's throughput judges, so the removals give
    /// back what the others can use. Nothing else would: the steady state watches only its
    /// own throughput, which holds while a latecomer sits below its share, and its timeout may
    /// be minutes away.
    ///
    /// Once per count and load, as the room rule is once per count: a crowding cycle that
    /// comes back to its count or above (its removals cost the bottleneck more than δ: the
    /// others did not take up what they left) does not start again from there until the
    /// others run at least half a worker more than they did at its start (they took share at
    /// a cycle of theirs), a cycle of another cause starts, or the number of instances
    /// changes.
    fn crowded(&self) -> bool {
        let c = &self.crowd;
        let others = c.share.others(self.target);
        c.windows >= 2
            && c.util.mean().is_some_and(|u| u > self.params.util)
            && self.turns.long(self.target, c.share)
            && !matches!(self.shed_from, Some((n, seen)) if n <= self.target && others < seen + 0.5)
    }

    /// The join rule (coordinated, without the hint; `docs/tune.md` "A newcomer beside a
    /// steady instance"): the number of instances rose since the last cycle began, so the
    /// steady count was judged against a larger fair share than it now has. At the first
    /// change-detection window that counts the newcomer's completions (the window under way
    /// at the change is left out, as the crowding rule leaves it out), the count is judged
    /// once: if giving one of its workers back would still leave the instance above its new
    /// fair share ([`Turns::long`]), a cycle starts from its base cut (a `Shift`, waiting for
    /// the turn as every start does), judged beside the newcomer. Not long then, nothing more
    /// happens until the next join. Nothing else would make it give back: its own throughput,
    /// which change detection watches, holds while the newcomer sits below its share, and its
    /// timeout may be minutes away. With the hint's reports the crowding rule judges instead
    /// (it also needs the bottleneck above `util`).
    fn outgrown(&mut self) -> bool {
        if self.crowd.windows == 0 || !self.turns.take_rejudge() {
            return false;
        }
        let c = &self.crowd;
        c.util.mean().is_none() && self.turns.long(self.target, c.share)
    }

    /// The hint's steady rule: the reference window left the bottleneck well short of
    /// saturation, and this window saturates it. The midpoint of `util` and `saturated` keeps
    /// a margin on both sides: the hint's own steady counts sit at or just above `util` (it adds
    /// until the bottleneck reaches it), and one that already ran near saturation must not
    /// start a cycle on every noisy window.
    fn newly_saturated(&self, window: Option<f64>) -> bool {
        let p = &self.params;
        let room = 0.5 * (p.util + p.saturated);
        self.steady_util.is_some_and(|r| r < room) && window.is_some_and(|u| u > p.saturated)
    }

    /// The hint's room rule: the steady state's windows so far (the reference and at least one
    /// more; called after [`Tcc::window_reports`] moved the mark to the end of this one) ran the
    /// bottleneck below `util − room` on average. The mean over all of them rather than the
    /// last window's: its noise shrinks as the state holds, so a count inside the tolerance
    /// does not fire on a stray low window however long it is held.
    ///
    /// Once per count: a climb that comes back to a count at or below the one it started from
    /// (the step beyond it declined, or the named resource is not what limits throughput) does
    /// not start again from there until a cycle of another cause. So the climbs between two such
    /// cycles start from strictly rising counts, and cannot flip-flop.
    fn has_room(&self) -> bool {
        let p = &self.params;
        !matches!(self.climbed_from, Some(n) if n >= self.target)
            && self.window_mark.mean().is_some_and(|u| u < p.util - p.room)
    }

    /// The hint says the bottleneck stayed below its target while this configuration ran.
    fn unsaturated(&self) -> bool {
        self.judged_util()
            .mean()
            .is_some_and(|u| u < self.params.util)
    }

    /// The latest PSI reading, when `psi` is on and it came after the configuration being
    /// measured settled (one from before judges the count before, and a host that stopped
    /// reading leaves none). The latest rather than the highest over the configuration's time:
    /// avg10 is already a 10 s average weighted toward the present, and the early readings of a
    /// configuration still carry the stalls of the counts before it.
    fn fresh_reading(&self) -> Option<Pressure> {
        let r = self.reading.filter(|_| self.params.psi)?;
        let from = self.measure_from?;
        (r.busy >= from).then_some(r.pressure)
    }

    /// PSI says the count being judged makes memory or I/O stall, at the test's verdict (spec
    /// §6 item 3, in Add): the latest reading after settling is above `psi_full`, unless it
    /// fell since the baseline reading and what the fall leaves for the count's own stalls is
    /// not (the stalls of the counts before it decaying; see [`own_share_above`]).
    fn stalls_at_verdict(&self) -> bool {
        self.stalls(true)
    }

    /// PSI says the configuration being measured stalls on its own, whatever the latest reading
    /// still carries from the counts before it: the rules that act without a verdict (Add
    /// before it, Max, Remove). A reading that held since the baseline says nothing here: the
    /// kernel may not have updated it.
    fn stalls_on_its_own(&self) -> bool {
        self.stalls(false)
    }

    /// Memory or I/O `full` stalls of the configuration being measured above `psi_full`, from
    /// the baseline reading (`psi_base`: the last one after the change and before settling,
    /// or the first one after) and the latest one, which must have come after settling (one
    /// from before judges the count before; a host that stopped reading leaves none).
    /// `held`: whether a figure that held since the baseline counts (it does at a verdict).
    fn stalls(&self, held: bool) -> bool {
        let (Some(base), Some(now), Some(from)) = (self.psi_base, self.reading, self.measure_from)
        else {
            return false;
        };
        if !self.params.psi || now.busy < from {
            return false;
        }
        let span = now.at.saturating_sub(base.at).as_secs_f64();
        let limit = self.params.psi_full;
        let (b, n) = (base.pressure, now.pressure);
        own_share_above(b.memory_full, n.memory_full, span, limit, held)
            || own_share_above(b.io_full, n.io_full, span, limit, held)
    }

    /// PSI says the steady count now makes memory stall (spec §6 item 3, in Steady): the latest
    /// reading after settling has memory `some` above `psi_some`, and it rose above the lowest
    /// one of the steady state ([`SteadyLow`]) or [`PSI_SETTLE`] has passed since the steady
    /// state began. avg10 moves toward the stall share of the time between readings (x₁ = x₀·d +
    /// share·(1 − d)), so a figure that rose did so toward a share above it: stalls of the
    /// steady count, not the carry of the counts before, which only decays. A figure that held
    /// or fell may be carry, and waits for [`PSI_SETTLE`].
    fn steady_stalls(&self) -> bool {
        let Some(some) = self.fresh_reading().map(|p| p.memory_some) else {
            return false;
        };
        let settled = self
            .reading
            .is_some_and(|r| r.at >= self.steady_at + PSI_SETTLE);
        some > self.params.psi_some && (settled || self.steady_low.rose_to(some))
    }

    /// Takes the latest reading into [`SteadyLow`], when it is one the steady rule may use
    /// (after settling).
    fn track_steady_low(&mut self) {
        if let (Some(p), Some(r)) = (self.fresh_reading(), self.reading) {
            self.steady_low.take(r.at, p.memory_some);
        }
    }

    /// Saturation and settling after the load or the target changed.
    fn refresh_load(&mut self) {
        let gap_starved = self.gap_rule.is_some_and(|r| r.starved());
        self.saturated = self.load.saturated(self.target) && !gap_starved;
        if !self.saturated {
            self.mark = None;
        }
        if self.settle == Settle::InFlight && self.load.in_flight == self.target {
            self.settle = Settle::Skip(self.target.max(self.b));
        }
    }

    fn here(&self) -> Duration {
        self.busy - self.config_start
    }

    /// Busy time of the configuration being judged: its earlier visits (fast mode) and this one.
    fn judged_busy(&self) -> Duration {
        self.cmp.cand_busy + self.here()
    }

    /// The statistics of the configuration being judged: earlier visits merged with this one.
    fn judged(&self) -> Summary {
        self.cmp.cand.merge(&self.cur.summary())
    }

    fn at_cap(&self, cap: Duration) -> bool {
        self.judged_busy() + self.cmp.c1_busy >= cap || self.cur.len() >= self.params.max_samples
    }

    fn config(&self) -> Config {
        Config {
            n: self.target,
            s: self.judged(),
            to_nstar: self
                .cmp
                .cand_nstar
                .or(self.to_nstar)
                .unwrap_or(self.judged_busy()),
            share: self.judged_share(),
        }
    }

    /// Own and peers' samples of the configuration being judged: earlier visits and this one.
    fn judged_share(&self) -> Share {
        self.cmp.cand_share.merge(&self.share)
    }

    /// What the fair-share rule judges a configuration with statistics `s` and `share` by
    /// ([`Turns::fair_value`]).
    fn fair_value(&self, s: &Summary, share: Share) -> f64 {
        self.turns.fair_value(s.throughput(), share)
    }

    fn keep_best(&mut self, c: Config) {
        if c.s.batches < 2 {
            // Too few batches to judge anything by (a count the thrashing guard left early).
            return;
        }
        self.fair_best = self.fair_best.max(self.fair_value(&c.s, c.share));
        match self.best {
            Some(b) if c.s.throughput() <= b.s.throughput() => {}
            _ => self.best = Some(c),
        }
    }

    /// Batches a configuration needs before it can serve as C₁ for gain `q`.
    fn n1(&self, s: &Summary, q: f64) -> f64 {
        let n = n1_hat(s.sd(), s.mean, q, self.params.beta, self.z);
        n.max(f64::from(self.params.n_star))
    }

    /// The count after an add step from `n`: slow start's step while it is in force.
    fn up(&self, n: usize) -> usize {
        if self.slow {
            self.params.grow(n, SLOW_START.0)
        } else {
            self.params.add_step(n)
        }
    }

    /// The gain the add step from `from` to `to` must deliver, for the step size in force.
    fn step_q(&self, from: usize, to: usize) -> f64 {
        let (p, q) = if self.slow {
            SLOW_START
        } else {
            (self.params.p, self.params.q)
        };
        q_scaled(from, to, p, q)
    }

    fn step(&mut self, at: Duration) {
        if self.turns.first_waits() {
            // Coordinated, before the first grant: the initial count runs, nothing is judged.
            return;
        }
        match self.phase {
            Phase::Base => self.step_base(at),
            Phase::Add => self.step_add(at),
            Phase::Max => self.step_max(at),
            Phase::Remove => self.step_remove(at),
            Phase::Steady => self.step_steady(at),
        }
    }

    fn step_base(&mut self, at: Duration) {
        if self.settle != Settle::Done {
            return;
        }
        let mut s = self.cur.summary();
        if s.batches >= self.autocorr_next && self.b < self.params.batch_max as usize {
            // Batch means equal to a part in a million need no wider batches (and their
            // autocorrelation is rounding noise).
            let constant = s.sd() <= 1e-6 * s.mean;
            if !constant && self.cur.autocorrelation() > self.params.autocorr_max {
                self.cur.double_batch();
                self.b = self.cur.batch_size();
                self.autocorr_next = self.params.n_star;
                self.to_nstar = None;
                s = self.cur.summary();
                if s.batches >= self.params.n_star {
                    self.to_nstar = Some(self.here());
                }
            } else {
                self.autocorr_next = s.batches.saturating_mul(2);
            }
        }
        let n = self.target;
        let up = self.up(n);
        // Fast mode gives C₁ only n* batches here: the comparison measures it again if the
        // test needs more.
        let need = if up == n || self.params.fast {
            f64::from(self.params.n_star)
        } else {
            self.n1(&s, self.step_q(n, up))
        };
        let ready = f64::from(s.batches) >= need;
        let forced = !ready && self.at_cap(self.params.dwell) && s.batches >= 2;
        if !(ready || forced) {
            return;
        }
        self.forced += u64::from(forced);
        let c = self.config();
        self.reference = Some(c);
        self.best = Some(c);
        if up == n {
            self.enter(at, Phase::Max, Reason::Ceiling, forced);
        } else {
            self.go(at, Phase::Add, up, self.target, Reason::Measured, forced);
        }
    }

    fn step_add(&mut self, at: Duration) {
        if self.cmp.revisit.is_some() {
            return self.step_revisit();
        }
        let p = &self.params;
        let (n_star, dwell, fast) = (p.n_star, p.dwell, p.fast);
        let r = self.reference.expect("Add always has a reference");
        let s = self.judged();
        // The thrashing guard's early trips (spec §2.3); the second runs during settling too,
        // since a thrashing count may not even finish settling.
        if s.batches >= 5 && s.throughput() < 0.5 * r.s.throughput() {
            return self.fail_add(at, Reason::GuardSlow, false);
        }
        if self.judged_busy() > r.to_nstar * 4 && s.batches < n_star / 2 {
            return self.fail_add(at, Reason::GuardStalled, false);
        }
        if self.settle != Settle::Done {
            return;
        }
        let forced = self.at_cap(dwell);
        if self.stalls_on_its_own() {
            // The step stalls on its own: revoked before the test (or the thrashing guard,
            // which needs 5 batches at the stalled rate) has its samples.
            return self.stalled_add(at, forced);
        }
        let q = self.step_q(self.prev, self.target);
        if self.fair_gain(&r, &s, q) {
            return self.fair_add(at, r.n, q, forced);
        }
        match self.test(&r.s, &s, q, forced) {
            Outcome::Pending => self.next_look(r.s, s, r.n),
            Outcome::Better if self.stalls_at_verdict() => self.stalled_add(at, forced),
            Outcome::Better => {
                let c = self.config();
                self.keep_best(c);
                let n = self.target;
                let up = self.up(n);
                if up == n {
                    self.forced += u64::from(forced);
                    self.decided(at, r.n, q, true, Reason::Ceiling, forced);
                    self.enter(at, Phase::Max, Reason::Ceiling, forced);
                } else if fast || forced || f64::from(s.batches) >= self.n1(&s, self.step_q(n, up))
                {
                    self.forced += u64::from(forced);
                    self.reference = Some(c);
                    self.decided(at, r.n, q, true, Reason::Better, forced);
                    self.go(at, Phase::Add, up, n, Reason::Better, forced);
                }
                // Otherwise keep measuring this count until it can serve as C₁ (paper mode).
            }
            // A decline is revoked by the paper's rule already: PSI decides only the others.
            Outcome::NotBetter
                if self.stalls_at_verdict() && s.throughput() >= r.s.throughput() =>
            {
                self.stalled_add(at, forced)
            }
            Outcome::NotBetter => {
                self.forced += u64::from(forced);
                if s.throughput() > r.s.throughput() && self.unsaturated() {
                    // The paper would stop, but the bottleneck is demonstrably not saturated:
                    // the added workers cannot be taking it from anyone.
                    return self.hinted_add(at, r.n, q, forced);
                }
                let reason = if s.throughput() < r.s.throughput() {
                    Reason::Decline
                } else {
                    Reason::Flat
                };
                self.fail_add(at, reason, forced);
            }
        }
    }

    /// PSI failed an add step: its count made memory or I/O stall. The spec counts it as "not
    /// better"; tact revokes it as it does a decline rather than holding it in Max as a flat
    /// step, since Max would keep the very count that stalls for up to `max_dwell` and start the
    /// removals from it. The thrashing guard's way back is what stalls call for, and it never
    /// raises the count.
    fn stalled_add(&mut self, at: Duration, forced: bool) {
        self.forced += u64::from(forced);
        self.psi += 1;
        self.psi_decides = true;
        self.fail_add(at, Reason::Decline, forced);
        self.psi_decides = false;
    }

    /// Whether a new cycle would start below the count (it does, above `n_min`).
    fn can_cut(&self) -> bool {
        self.params.base_count(self.target) < self.target
    }

    /// PSI in Max or Remove: the count stalls on its own, so the cycle's measurements (its
    /// best, taken before the stalls began) describe a workload that is gone, and each removal
    /// step would hold a stalling count until its test has the samples, to compare it with a
    /// best that no longer holds (and, judged a loss, restore a higher count). A new cycle
    /// starts from the count's base cut, as change detection does in Steady.
    fn stalled_cycle(&mut self, at: Duration) {
        self.psi += 1;
        self.psi_decides = true;
        self.begin_cycle(at, Reason::Shift);
        self.psi_decides = false;
    }

    /// The fair-share rule (coordinated; `docs/tune.md` "Several instances on one bottleneck"):
    /// C₁ ran below the instance's fair share 1/k of the key's completions ([`Turns::short`]), the step gained at
    /// least q in [`Turns::fair_value`] (own throughput × k, up to the bottleneck's), and it
    /// cost the bottleneck less than δ. A point estimate over at least n* batches, as the
    /// hint's rule is: the share is a ratio of counts over hundreds of completions, and a
    /// step below 1/k moves it by far more than its noise.
    fn fair_gain(&self, r: &Config, s: &Summary, q: f64) -> bool {
        if s.batches < self.params.n_star || !self.turns.short(r.n, r.share) {
            return false;
        }
        let (total, base) = (s.throughput(), r.s.throughput());
        let gain = self.fair_value(s, self.judged_share()) / self.fair_value(&r.s, r.share);
        gain >= 1.0 + q && total >= (1.0 - self.params.delta) * base
    }

    /// The fair-share rule's side of a removal: the count being judged runs below the fair
    /// share ([`Turns::short`]) and lost more than δ in [`Turns::fair_value`] against the
    /// highest value of the cycle's configurations (point estimates over at least n* batches,
    /// as in [`Tcc::fair_gain`]).
    fn fair_loss(&self, s: &Summary) -> bool {
        let share = self.judged_share();
        if s.batches < self.params.n_star || !self.turns.short(self.target, share) {
            return false;
        }
        self.fair_value(s, share) < (1.0 - self.params.delta) * self.fair_best
    }

    /// The fair-share rule accepted an add step (before or against the test's verdict).
    fn fair_add(&mut self, at: Duration, c1: usize, q: f64, forced: bool) {
        self.forced += u64::from(forced);
        self.fair_decides = true;
        self.accept_add(at, c1, q, forced);
        self.fair_decides = false;
    }

    /// The bottleneck hint accepted an add step the test judged flat.
    fn hinted_add(&mut self, at: Duration, c1: usize, q: f64, forced: bool) {
        self.hinted += 1;
        self.hint_decides = true;
        self.accept_add(at, c1, q, forced);
        self.hint_decides = false;
    }

    /// A rule beside the test accepted the add step: it becomes C₁ at once (its test is over)
    /// and the count rises again.
    fn accept_add(&mut self, at: Duration, c1: usize, q: f64, forced: bool) {
        let c = self.config();
        self.keep_best(c);
        let n = self.target;
        let up = self.up(n);
        if up == n {
            self.decided(at, c1, q, true, Reason::Ceiling, forced);
            self.enter(at, Phase::Max, Reason::Ceiling, forced);
        } else {
            self.decided(at, c1, q, true, Reason::Better, forced);
            self.reference = Some(c);
            self.go(at, Phase::Add, up, n, Reason::Better, forced);
        }
    }

    /// An add step failed: no gain of q (`Flat`), a decline, or a thrashing-guard trip.
    fn fail_add(&mut self, at: Duration, reason: Reason, forced: bool) {
        let r = self.reference.expect("Add always has a reference");
        let q = self.step_q(self.prev, self.target);
        self.decided(at, r.n, q, false, reason, forced);
        let back = self.prev;
        if self.slow {
            // Slow start ends at its first failed step.
            self.slow = false;
            let up = self.params.add_step(back);
            if up < self.target {
                // It overshot: return to the last good count (C₁, whose samples stay the
                // reference) and go on with normal steps from there. The overshot count does
                // not compete for the cycle's best: removals would compare against (and
                // revisit) a count the cycle never holds.
                return self.go(at, Phase::Add, up, back, Reason::Overshoot, forced);
            }
            // A normal step would be no smaller than the one that failed (1 → 2 workers): the
            // paper's rule applies as it stands.
        }
        if reason == Reason::Flat {
            self.enter(at, Phase::Max, Reason::Flat, forced);
        } else {
            self.revoke(at, reason);
        }
    }

    /// The thrashing guard: back to the count before the add (its samples are C₁'s), then remove.
    fn revoke(&mut self, at: Duration, reason: Reason) {
        let r = self.reference.expect("Add always has a reference");
        self.keep_best(r);
        let back = self.prev;
        if !self.params.remove || back <= self.params.n_min {
            self.go_steady(at, back, reason, false);
        } else {
            let down = self.params.remove_step(back);
            self.go(at, Phase::Remove, down, back, reason, false);
        }
    }

    /// The test of C₂ against C₁ for gain `q`: in paper mode after every batch with Z; in fast
    /// mode only at its looks, with that look's Z (see [`look_z`]). A forced test decides from
    /// the point estimate.
    fn test(&self, c1: &Summary, c2: &Summary, q: f64, forced: bool) -> Outcome {
        let p = &self.params;
        if !p.fast {
            return verdict(c1, c2, q, p.beta, self.z, p.n_star, forced);
        }
        if !(forced || self.look_due(c1, c2)) {
            return Outcome::Pending;
        }
        let z = look_z(p.alpha, self.cmp.look);
        verdict(c1, c2, q, p.beta, z, p.n_star, forced)
    }

    fn look_due(&self, c1: &Summary, c2: &Summary) -> bool {
        c2.batches >= self.params.n_star && c1.batches + c2.batches >= self.cmp.look_at
    }

    /// Fast mode, after a look without a verdict: the next look comes when n₁ + n₂ has doubled,
    /// split as (21) does, n₁/n₂ = σ₁/σ₂ (the split that minimises n₁ + n₂ for a given σ_y).
    /// If C₁ is short of its part, the pool runs C₁'s count again first (interleaving).
    fn next_look(&mut self, c1: Summary, c2: Summary, c1_n: usize) {
        if !self.params.fast || !self.look_due(&c1, &c2) {
            return;
        }
        let total = c1.batches + c2.batches;
        self.cmp.look += 1;
        self.cmp.look_at = total.saturating_mul(2);
        let (a, b) = (c1.sd(), c2.sd());
        let share = if a + b > 0.0 { a / (a + b) } else { 0.5 };
        let want = (f64::from(self.cmp.look_at) * share).ceil() as u32;
        if want > c1.batches && c1_n != self.target {
            self.cmp.cand = c2;
            self.cmp.cand_busy = self.judged_busy();
            self.cmp.cand_nstar = self.cmp.cand_nstar.or(self.to_nstar);
            self.cmp.cand_util = self.judged_util();
            self.cmp.cand_share = self.judged_share();
            self.cmp.cand_n = self.target;
            self.cmp.revisit = Some(want);
            self.switch(c1_n);
        }
    }

    /// C₁ of the comparison under way: the count before the add, or the cycle's best.
    fn c1(&self) -> Config {
        match self.phase {
            Phase::Remove => self.best.expect("Remove always has a best"),
            _ => self.reference.expect("Add always has a reference"),
        }
    }

    /// Fast mode, running C₁'s count again: when C₁ has the batches the next look wants (or
    /// this visit reaches a dwell cap), its statistics take in this visit's and the pool goes
    /// back to C₂'s count, whose samples were kept.
    fn step_revisit(&mut self) {
        let Some(want) = self.cmp.revisit else {
            return;
        };
        let spent = self.cmp.cand_busy + self.cmp.c1_busy + self.here();
        let capped = spent >= self.params.dwell || self.cur.len() >= self.params.max_samples;
        if self.settle != Settle::Done && !capped {
            return;
        }
        let c1 = self.c1();
        let merged = c1.s.merge(&self.cur.summary());
        if merged.batches < want && !capped {
            return;
        }
        // The cycle's best and the reference are the same configuration when their counts are.
        let share = c1.share.merge(&self.share);
        for c in [&mut self.reference, &mut self.best].into_iter().flatten() {
            if c.n == c1.n {
                c.s = merged;
                c.share = share;
            }
        }
        self.cmp.revisit = None;
        self.cmp.c1_busy += self.here();
        let back = self.cmp.cand_n;
        self.switch(back);
    }

    fn step_max(&mut self, at: Duration) {
        if self.settle != Settle::Done {
            return;
        }
        if self.stalls_on_its_own() && self.can_cut() {
            return self.stalled_cycle(at);
        }
        let p = &self.params;
        let s = self.cur.summary();
        // Fast mode: the removals measure the best again when their test needs it, so Max
        // needs only the floor.
        let floor = 2.0 * f64::from(p.n_star);
        let need = if p.fast {
            floor
        } else {
            n1_hat(s.sd(), s.mean, -p.delta, p.beta, self.z).max(floor)
        };
        let ready = f64::from(s.batches) >= need;
        let forced = !ready && self.at_cap(p.max_dwell) && s.batches >= 2;
        if !(ready || forced) {
            return;
        }
        self.forced += u64::from(forced);
        let c = self.config();
        self.keep_best(c);
        let n = self.target;
        if !self.params.remove || n <= self.params.n_min {
            self.go_steady(at, n, Reason::Floor, forced);
        } else {
            let down = self.params.remove_step(n);
            self.go(at, Phase::Remove, down, n, Reason::MaxDone, forced);
        }
    }

    fn step_remove(&mut self, at: Duration) {
        if self.cmp.revisit.is_some() {
            return self.step_revisit();
        }
        if self.settle != Settle::Done {
            return;
        }
        if self.stalls_on_its_own() && self.can_cut() {
            return self.stalled_cycle(at);
        }
        let (dwell, delta, n_min) = (self.params.dwell, self.params.delta, self.params.n_min);
        let best = self.best.expect("Remove always has a best");
        let s = self.judged();
        let forced = self.at_cap(dwell);
        let q = -delta;
        if self.fair_loss(&s) {
            // The removal took the instance below its fair share, and its own throughput with
            // it: restore, as for a loss of the bottleneck's.
            self.forced += u64::from(forced);
            self.fair_decides = true;
            self.decided(at, best.n, q, false, Reason::Lost, forced);
            self.go_steady(at, self.prev, Reason::Lost, forced);
            self.fair_decides = false;
            return;
        }
        match self.test(&best.s, &s, q, forced) {
            Outcome::Pending => self.next_look(best.s, s, best.n),
            Outcome::Better => {
                self.forced += u64::from(forced);
                if s.throughput() <= best.s.throughput()
                    && self.unsaturated()
                    && !self.turns.fair_or_above(self.judged_share())
                {
                    // Throughput held, but the bottleneck fell below its target: the removed
                    // workers were using it, and nobody else wanted it. Restore them. (Not
                    // when coordinated at or above the fair share: the others below theirs
                    // want it, and take it at their next cycle.)
                    self.hinted += 1;
                    self.hint_decides = true;
                    self.decided(at, best.n, q, false, Reason::Lost, forced);
                    self.go_steady(at, self.prev, Reason::Lost, forced);
                    self.hint_decides = false;
                    return;
                }
                let c = self.config();
                self.keep_best(c);
                let n = self.target;
                if n <= n_min {
                    self.decided(at, best.n, q, true, Reason::Floor, forced);
                    self.go_steady(at, n, Reason::Floor, forced);
                } else {
                    self.decided(at, best.n, q, true, Reason::Kept, forced);
                    let down = self.params.remove_step(n);
                    self.go(at, Phase::Remove, down, n, Reason::Kept, forced);
                }
            }
            Outcome::NotBetter => {
                self.forced += u64::from(forced);
                self.decided(at, best.n, q, false, Reason::Lost, forced);
                self.go_steady(at, self.prev, Reason::Lost, forced);
            }
        }
    }

    /// Whether the steady state's first window `s` ran a factor of `shift_hard` from the
    /// cycle's best throughput: the load changed after the count was measured, and the window
    /// must not become the reference change detection holds it to. Every count a cycle settles
    /// on was judged within δ of its best (the best itself, a removal kept against it, or the
    /// count a lost removal or a declined step restores). On the rig (X2), a memory switch
    /// during a removal step had the removal judged lost against the count's throughput before
    /// the switch: the count came back, thrashing at 5% of that throughput, and that window
    /// became the reference, so nothing moved until the steady timeout. Not coordinated: the
    /// cycle then judged the key's completions, the steady state its own.
    fn changed_since_measured(&self, s: &Summary) -> bool {
        let hard = self.params.shift_hard;
        self.best
            .filter(|_| !self.turns.on())
            .map(|b| b.s.throughput())
            .is_some_and(|e| e > 0.0 && !(1.0 / hard..=hard).contains(&(s.throughput() / e)))
    }

    fn step_steady(&mut self, at: Duration) {
        if self.here() >= self.steady_timeout && self.request(at, Start::new(Reason::Timeout)) {
            return;
        }
        // As change detection does: the count that was right no longer is.
        if self.steady_stalls() && self.request(at, Start::psi(Reason::Shift)) {
            return;
        }
        let s = self.cur.summary();
        if s.batches < self.params.n_star {
            return;
        }
        let reports = self.window_reports();
        let u = Self::window_util(&reports);
        self.count_crowd(reports);
        let outgrown = self.outgrown();
        match self.steady_ref {
            None => {
                self.steady_ref = Some(s);
                self.steady_util = u;
                // A steady state that began at or just before a join: its first window may be
                // the first to count the newcomer.
                if (outgrown || self.changed_since_measured(&s))
                    && self.request(at, Start::new(Reason::Shift))
                {
                    return;
                }
            }
            Some(r) => {
                let ratio = s.throughput() / r.throughput();
                let outside = |k: f64| !(1.0 / k..=k).contains(&ratio);
                let mild = outside(self.params.shift);
                let start = if outside(self.params.shift_hard) || (mild && self.strikes >= 1) {
                    Some(Start::new(Reason::Shift))
                } else if self.newly_saturated(u) {
                    // Something else now uses the bottleneck, or the load changed, though
                    // throughput moved too little for the test above.
                    Some(Start::hinted(Reason::Shift))
                } else if self.has_room() {
                    // The count holds the bottleneck short of its target: climb from it.
                    Some(Start::hinted(Reason::Room))
                } else if self.crowded() {
                    // Above its fair share of a bottleneck above its target: judge the count
                    // again beside the others.
                    Some(Start::crowded())
                } else if outgrown {
                    // A newcomer's fair share came out of a count judged without it.
                    Some(Start::new(Reason::Shift))
                } else {
                    None
                };
                if start.is_some_and(|start| self.request(at, start)) {
                    return;
                }
                self.strikes = if mild { self.strikes + 1 } else { 0 };
            }
        }
        // The next window (the sample chain continues: no settling).
        self.cur = SampleSet::new(self.b, self.params.trim);
    }

    /// A cycle is due: it starts now (true), or, coordinated, waits for the host's grant while
    /// the steady state goes on measuring (false).
    fn request(&mut self, at: Duration, start: Start) -> bool {
        if self.turns.defer(start) {
            return false;
        }
        self.launch(at, start);
        true
    }

    /// Starts the cycle `start` calls for: from the count's base cut, or for `Room` from the
    /// count itself.
    fn launch(&mut self, at: Duration, start: Start) {
        self.hinted += u64::from(start.hinted);
        self.psi += u64::from(start.psi);
        self.hint_decides = start.hinted;
        self.psi_decides = start.psi;
        if start.reason == Reason::Room {
            self.climbed_from = Some(self.target);
            let n = self.target;
            self.new_cycle(at, n, Reason::Room);
        } else {
            let from = self.target;
            self.begin_cycle(at, start.reason);
            if start.crowded {
                self.shed_from = Some((from, self.crowd.share.others(from)));
            }
        }
        self.hint_decides = false;
        self.psi_decides = false;
    }

    /// A new cycle from the base cut of the count: the room and crowding rules may start
    /// cycles again.
    fn begin_cycle(&mut self, at: Duration, reason: Reason) {
        self.climbed_from = None;
        self.shed_from = None;
        let base = self.params.base_count(self.target);
        self.new_cycle(at, base, reason);
    }

    /// A new cycle whose Base state measures `base`.
    fn new_cycle(&mut self, at: Duration, base: usize, reason: Reason) {
        self.turns.cycle_begins();
        self.cycle += 1;
        self.cycle_start = self.busy;
        self.slow = false;
        self.b = batch_for(&self.params, base);
        self.autocorr_next = self.params.n_star;
        self.reference = None;
        self.best = None;
        self.fair_best = 0.0;
        let n = self.target;
        self.go(at, Phase::Base, base, n, reason, false);
    }

    fn go_steady(&mut self, at: Duration, n: usize, reason: Reason, forced: bool) {
        let len = (self.busy - self.cycle_start).as_secs_f64();
        let u = self.uniform();
        let p = &self.params;
        let t =
            (p.steady_factor * len).clamp(p.steady_min.as_secs_f64(), p.steady_max.as_secs_f64());
        let jitter = 1.0 + p.steady_jitter * (2.0 * u - 1.0);
        self.steady_timeout = Duration::from_secs_f64(t * jitter);
        self.steady_ref = None;
        self.steady_util = None;
        self.crowd = Crowd::default();
        self.strikes = 0;
        self.slow = false;
        self.steady_at = at;
        self.steady_low = SteadyLow::default();
        let prev = self.target;
        self.go(at, Phase::Steady, n, prev, reason, forced);
        self.steady_count = Some(self.target);
    }

    /// Changes state and count: a new configuration starts measuring after settling. `prev` is
    /// the count an add is compared against, or a failed removal restores.
    fn go(
        &mut self,
        at: Duration,
        phase: Phase,
        n: usize,
        prev: usize,
        reason: Reason,
        forced: bool,
    ) {
        self.record(at, phase, n, reason, forced);
        self.phase = phase;
        self.prev = prev;
        self.cmp = Comparison::new();
        self.switch(n);
    }

    /// Changes the count and starts measuring it afresh after settling, state unchanged.
    fn switch(&mut self, n: usize) {
        self.target = n.clamp(self.params.n_min, self.params.n_max);
        self.cur = SampleSet::new(self.b, self.params.trim);
        self.config_start = self.busy;
        self.to_nstar = None;
        self.settle = Settle::InFlight;
        self.measure_from = None;
        self.psi_base = None;
        self.util = Util::default();
        self.share = Share::default();
        self.share_mark = Share::default();
        self.window_mark = Util::default();
        self.refresh_load();
    }

    /// Changes state only, keeping the count and its samples.
    fn enter(&mut self, at: Duration, phase: Phase, reason: Reason, forced: bool) {
        self.record(at, phase, self.target, reason, forced);
        self.phase = phase;
    }

    /// Records a verdict on C₂ (the count being judged) against the count `c1`.
    fn decided(
        &mut self,
        at: Duration,
        c1: usize,
        q: f64,
        better: bool,
        reason: Reason,
        forced: bool,
    ) {
        let d = Decision {
            at,
            busy: self.busy,
            cycle: self.cycle,
            phase: self.phase,
            reason,
            c1,
            c2: self.target,
            q,
            better,
            forced,
            samples: self.explored,
            batch_size: self.b,
            hinted: self.hint_decides,
            psi: self.psi_decides,
            fair: self.fair_decides,
        };
        self.explored = 0;
        self.decisions.push_back(d);
        while self.decisions.len() > self.params.trace_capacity {
            self.decisions.pop_front();
            self.trace_dropped += 1;
        }
    }

    fn record(&mut self, at: Duration, to: Phase, n: usize, reason: Reason, forced: bool) {
        let s = self.cur.summary();
        let t = Transition {
            at,
            busy: self.busy,
            cycle: self.cycle,
            from: self.phase,
            to,
            reason,
            target_from: self.target,
            target_to: n,
            throughput: (s.batches > 0).then(|| s.throughput()),
            batches: s.batches,
            forced,
            hinted: self.hint_decides,
            psi: self.psi_decides,
        };
        self.trace.push_back(t);
        while self.trace.len() > self.params.trace_capacity {
            self.trace.pop_front();
            self.trace_dropped += 1;
        }
    }

    /// Uniform in [0, 1) from a SplitMix64 stream seeded by `params.seed`.
    fn uniform(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Whether a resource's stalls since the baseline reading `x0` were above `limit`, from the
/// reading `x1` taken `span` seconds later (the same reading when `span` is 0). avg10 moves
/// toward the stall share of the time between (x1 = x0·d + share·(1 − d), d the decay over the
/// updates between), so
/// - a figure that rose did so toward a share above it, whatever d: above `limit` if x1 is;
/// - one that held is the share, or was not updated: it counts when `held` says so;
/// - one that fell (or held) carries x0's past: the share is at least (x1 − x0·d)/(1 − d) for
///   the least decay the span allows, one update period short of it (none within that period).
fn own_share_above(x0: f64, x1: f64, span: f64, limit: f64, held: bool) -> bool {
    if x1 <= limit {
        return false;
    }
    if x1 > x0 || (held && x1 == x0) {
        return true;
    }
    let decayed = span - PSI_UPDATE.as_secs_f64();
    if decayed <= 0.0 {
        return false;
    }
    let d = (-decayed / PSI_TAU).exp();
    (x1 - x0 * d) / (1.0 - d) > limit
}

/// b = max(batch_min, n), at most batch_max.
fn batch_for(p: &TuneParams, n: usize) -> usize {
    n.max(p.batch_min as usize).min(p.batch_max as usize)
}

impl Policy for Tcc {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let before = self.target;
        self.handle(event, None, None);
        (self.target != before).then_some(self.target)
    }

    /// Time passes as with a tick; the report then joins the configuration being measured.
    fn on_hint(&mut self, now: Duration, utilization: f64) -> Option<usize> {
        let before = self.target;
        self.handle(Event::Tick { at: now }, Some(utilization), None);
        (self.target != before).then_some(self.target)
    }

    /// Time passes as with a tick; the reading then replaces the previous one.
    fn on_pressure(&mut self, now: Duration, pressure: Pressure) -> Option<usize> {
        let before = self.target;
        self.handle(Event::Tick { at: now }, None, Some(pressure));
        (self.target != before).then_some(self.target)
    }

    fn saturation_unseen(&mut self) {
        self.gap_rule.get_or_insert_with(GapRule::default);
    }

    /// Called before the first event, the first cycle waits for a turn too: an instance that
    /// starts while another explores would otherwise explore alongside it. Until its grant it
    /// runs the count it was built with (`n_init`, or with `warm` that count's cut) and judges
    /// nothing; the grant starts cycle 0's Base from there, measured afresh. Called later, only
    /// the cycles after the one under way wait.
    fn coordinate(&mut self) {
        let fresh = self.last_at.is_none();
        self.turns.coordinate(fresh);
    }

    /// Coordinated: waiting for the first turn, exploring (a cycle holds the turn from Base back
    /// to Steady), or in Steady with a cycle due.
    fn wants_turn(&self) -> bool {
        self.turns.on()
            && (self.turns.first_waits() || self.phase != Phase::Steady || self.turns.due())
    }

    /// Starts what waits for the turn: the first cycle, or the cycle due in Steady, with the
    /// reason it was due for (its transition is recorded at `now`). Anything else is a no-op:
    /// an epoch host grants every instance, due or not.
    fn grant_turn(&mut self, now: Duration) -> Option<usize> {
        let before = self.target;
        let at = self.last_at.map_or(now, |last| now.max(last));
        if self.turns.grant_first() {
            self.turns.cycle_begins();
            // Cycle 0 measures from here: samples taken while waiting ran beside another
            // instance's exploration, and the cycle's length (which sets the next steady
            // timeout) starts now.
            self.cycle_start = self.busy;
            let n = self.target;
            self.switch(n);
        } else if self.phase == Phase::Steady {
            if let Some(start) = self.turns.take_due() {
                self.launch(at, start);
            }
        }
        (self.target != before).then_some(self.target)
    }

    /// k live instances on the key: the fair share is 1/k (see [`Turns::short`]). A larger k
    /// while the turn is held ends the cycle at the next event ([`Reason::Joined`]): this call
    /// has no time and returns no target.
    fn set_instances(&mut self, k: usize) {
        let holding = self.turns.holds(self.phase);
        if self.turns.on() && k.max(1) != self.turns.instances().max(1) {
            // The fair share moved: the crowding rule judges from the next window on, and may
            // start again from a count it started from.
            self.crowd = Crowd {
                skip: true,
                ..Crowd::default()
            };
            self.shed_from = None;
        }
        self.turns.set_instances(k, holding);
    }

    fn on_peer_completions(&mut self, now: Duration, count: u32) -> Option<usize> {
        let before = self.target;
        self.handle_peers(now, count);
        (self.target != before).then_some(self.target)
    }

    fn drain_trace(&mut self) -> Vec<Transition> {
        self.trace.drain(..).collect()
    }
}
