//! The contract every concurrency controller fulfils, in the manner of Netflix's
//! concurrency-limits: the host reports what its pool did, the policy answers with a target.
//!
//! A host (a Rust pool, a Python executor, `tact run`'s actuators, the simulator) calls
//! [`Policy::on_complete`] when a task finishes, [`Policy::on_start`] when workers take tasks
//! outside a completion (after a target increase, when input arrives), [`Policy::on_load`] when
//! only its queue changed, and [`Policy::on_tick`] now and then so that time-based rules can fire
//! while completions are rare. Every call passes the host's monotonic time and returns the new
//! target when it changed. The host applies a target at task boundaries: it starts workers to
//! grow and retires them after their current task to shrink; it never cancels a task.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The pool's occupancy after the host has handled an event (including any task it started
/// because of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Load {
    /// Tasks held by workers.
    pub in_flight: usize,
    /// Tasks waiting for a worker (any positive number will do for "more than enough").
    pub queued: usize,
}

impl Load {
    pub fn new(in_flight: usize, queued: usize) -> Self {
        Load { in_flight, queued }
    }

    /// Saturated (spec §2.2): all `target` workers hold a task, or work is waiting.
    pub fn saturated(&self, target: usize) -> bool {
        self.in_flight >= target || self.queued > 0
    }
}

/// Pressure stall information as fractions of time (a PSI file's `avg10` / 100): how much of
/// the last ten seconds some task (`some`) or every non-idle task (`full`) waited for memory or
/// I/O. A resource the host cannot read is 0: the rules only ever act on high values. A
/// non-finite value counts as 0 and anything else is clamped to [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Pressure {
    pub memory_some: f64,
    pub memory_full: f64,
    pub io_full: f64,
}

impl Pressure {
    /// The readings made safe to compare: non-finite values as 0, the rest in [0, 1].
    pub fn sanitized(self) -> Pressure {
        let f = |x: f64| {
            if x.is_finite() {
                x.clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        Pressure {
            memory_some: f(self.memory_some),
            memory_full: f(self.memory_full),
            io_full: f(self.io_full),
        }
    }
}

/// What happened in the pool. `at` is the host's monotonic time since an origin it chooses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// A task finished. `latency` is its response time when the host knows it (TCC ignores it;
    /// latency-based baselines need it).
    Complete {
        at: Duration,
        load: Load,
        latency: Option<Duration>,
    },
    /// Workers took tasks outside a completion.
    Start { at: Duration, load: Load },
    /// Only the queue changed (input arrived, or ran out).
    Load { at: Duration, load: Load },
    /// Time passed.
    Tick { at: Duration },
}

impl Event {
    pub fn at(&self) -> Duration {
        match *self {
            Event::Complete { at, .. }
            | Event::Start { at, .. }
            | Event::Load { at, .. }
            | Event::Tick { at } => at,
        }
    }

    pub fn load(&self) -> Option<Load> {
        match *self {
            Event::Complete { load, .. } | Event::Start { load, .. } | Event::Load { load, .. } => {
                Some(load)
            }
            Event::Tick { .. } => None,
        }
    }
}

/// One concurrency controller. The event methods are conveniences over [`Policy::on_event`].
pub trait Policy {
    /// The number of workers the pool should run now.
    fn target(&self) -> usize;

    /// Feeds one event; returns the new target when it changed.
    fn on_event(&mut self, event: Event) -> Option<usize>;

    fn on_complete(&mut self, now: Duration, load: Load) -> Option<usize> {
        self.on_event(Event::Complete {
            at: now,
            load,
            latency: None,
        })
    }

    fn on_start(&mut self, now: Duration, load: Load) -> Option<usize> {
        self.on_event(Event::Start { at: now, load })
    }

    fn on_load(&mut self, now: Duration, load: Load) -> Option<usize> {
        self.on_event(Event::Load { at: now, load })
    }

    fn on_tick(&mut self, now: Duration) -> Option<usize> {
        self.on_event(Event::Tick { at: now })
    }

    /// The bottleneck's mean utilization in [0, 1] since the previous report, from a host that
    /// can see the resource the pool saturates (CPU busy time, `docs/tune.md` "The bottleneck
    /// hint"). A method rather than an [`Event`] variant so that hosts' event logs and matches
    /// stay as they are. Policies that have no use for it (every baseline) ignore it.
    fn on_hint(&mut self, now: Duration, utilization: f64) -> Option<usize> {
        let _ = (now, utilization);
        None
    }

    /// The latest pressure stall readings of the machine or the bottleneck's cgroup (PSI,
    /// `docs/tune.md` "PSI as a saturation hint"), from a host that reads them now and then
    /// (`tact tune` every second). A method rather than an [`Event`] variant for the same reason
    /// as [`Policy::on_hint`]. TCC uses them only with `TuneParams::psi` on, and only ever to
    /// stop a rise, start a cycle early or cut a stalling count to a new cycle; every baseline
    /// ignores them.
    fn on_pressure(&mut self, now: Duration, pressure: Pressure) -> Option<usize> {
        let _ = (now, pressure);
        None
    }

    /// The host cannot see whether its pool is saturated: the loads it reports are a guess
    /// (`tact tune` with a counter file or `--freeze`). TCC then also counts a gap between
    /// completions longer than ten mean gaps as starvation (spec §6; `gaps::GapRule`). Call it
    /// once, before the first event. Policies without a busy clock (every baseline) ignore it.
    fn saturation_unseen(&mut self) {}

    /// The host coordinates this instance with others that share its bottleneck (spec §6 item
    /// 4, `docs/tune.md` "Several instances on one bottleneck"): from now on the policy starts
    /// an exploration only when the host grants it a turn ([`Policy::grant_turn`]). Call it once,
    /// before the first event. Policies that do not explore in cycles (every baseline) ignore it.
    fn coordinate(&mut self) {}

    /// With [`Policy::coordinate`]: the policy is exploring, or has an exploration due that
    /// waits for a turn. A host that holds the turn keeps it while this is true and gives it up
    /// once it is false; a host without the turn asks for it while this is true.
    fn wants_turn(&self) -> bool {
        false
    }

    /// The host grants the turn: an exploration that waits starts now. Returns the new target
    /// when it changed.
    fn grant_turn(&mut self, now: Duration) -> Option<usize> {
        let _ = now;
        None
    }

    /// With [`Policy::coordinate`]: `count` tasks of the other instances on the same bottleneck
    /// completed at `now`. Policies that do not judge the bottleneck's throughput ignore it.
    fn on_peer_completions(&mut self, now: Duration, count: u32) -> Option<usize> {
        let _ = (now, count);
        None
    }

    /// With [`Policy::coordinate`]: `k` live instances share the bottleneck key, this one
    /// included (`docs/tune.md` "Several instances on one bottleneck", the fair share). The host
    /// calls it whenever the number changes; until then the policy assumes it is alone (k = 1),
    /// which turns the fair-share rule off. A larger k while TCC holds the turn ends its cycle
    /// at its next event (any, a tick included; [`Reason::Joined`]), so a host sees the new
    /// target and `wants_turn()` false there. Policies that do not judge shares ignore it.
    fn set_instances(&mut self, k: usize) {
        let _ = k;
    }

    /// The state transitions since the last call, oldest first (hosts expose them as JSON
    /// traces). Policies without states return none.
    fn drain_trace(&mut self) -> Vec<Transition> {
        Vec::new()
    }
}

/// The states of TCC (spec §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Steady,
    Base,
    Add,
    Max,
    Remove,
}

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The steady state timed out: a new cycle.
    Timeout,
    /// The steady state saw its throughput move (§3 change detection); with `hinted` set on the
    /// transition, its bottleneck saturate (`TuneParams::saturated`); with `psi` set, memory
    /// stalls above `TuneParams::psi_some` (from Steady) or stalls the count causes above
    /// `TuneParams::psi_full` (from Max or Remove): a new cycle.
    Shift,
    /// The base configuration has its samples: add.
    Measured,
    /// The add step gained at least q: add again.
    Better,
    /// The add step gained less than q without a decline: hold the count in Max.
    Flat,
    /// The add step lowered throughput, or with `psi` set on the transition, ran with memory or
    /// I/O stalls above `TuneParams::psi_full`: revoke it and remove (the thrashing guard).
    Decline,
    /// Thrashing guard, early: the new count ran below half the old throughput.
    GuardSlow,
    /// Thrashing guard, early: the new count yields samples far too slowly.
    GuardStalled,
    /// The count reached n_max while adding.
    Ceiling,
    /// Slow start's first failed step: back to the last good count and one normal add step
    /// from it (beyond the paper).
    Overshoot,
    /// Max has its extra samples: remove.
    MaxDone,
    /// The removal kept throughput at or above (1 − δ) × best: remove again.
    Kept,
    /// The removal lost more than δ: restore the last round and hold.
    Lost,
    /// Nothing left to remove (n_min), or removal disabled: hold.
    Floor,
    /// The bottleneck hint's room rule (`TuneParams::room`; always with `hinted`): the steady
    /// count ran the bottleneck below `util − room`, so a new cycle starts from that count (Base
    /// without the cut) and adds from it.
    Room,
    /// Coordinated: another instance joined the key (`Policy::set_instances` with a larger k)
    /// while this one held the turn. The newcomer's completions entered the samples of the
    /// configuration under way partway through, so its comparison is void: the step is undone
    /// (back to the count it was taken from) and the cycle ends in Steady, which gives the turn
    /// up for the newcomer's first cycle.
    Joined,
}

/// One state transition of a policy, for traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Host time of the event that caused it.
    pub at: Duration,
    /// The controller's busy clock at that moment.
    pub busy: Duration,
    /// Exploration cycle (0 is the first, which starts at n_init without the cut).
    pub cycle: u64,
    pub from: Phase,
    pub to: Phase,
    pub reason: Reason,
    /// Target before and after (equal when only the state changed).
    pub target_from: usize,
    pub target_to: usize,
    /// Trimmed throughput (completions per busy second) of the configuration the decision judged,
    /// when it has one.
    pub throughput: Option<f64>,
    /// Batches that configuration held.
    pub batches: u32,
    /// The decision was forced at a dwell cap, from the point estimate.
    pub forced: bool,
    /// The bottleneck hint decided it (`TuneParams::util`): an add step that gained less than q
    /// counted as `Better` because the bottleneck stayed below its utilization target, a
    /// removal that kept throughput counted as `Lost` because it left the bottleneck below it,
    /// or a steady state ended because its bottleneck became saturated (`Shift`) or had room
    /// below the target (`Room`), or, coordinated, because it held more than its fair share of
    /// a bottleneck above the target (`Shift`).
    #[serde(default)]
    pub hinted: bool,
    /// PSI decided it (`TuneParams::psi`): an add step revoked for memory or I/O stalls
    /// (`Decline`), a steady state ended early by memory stalls, or a stalling count in Max or
    /// Remove cut to a new cycle (`Shift`).
    #[serde(default)]
    pub psi: bool,
}
