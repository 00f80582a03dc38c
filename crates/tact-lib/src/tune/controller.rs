//! The policy as a host holds it: clock origin, clamping, and the record of targets.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tact_core::tune::{Event, Policy, Status, Tcc, Transition};

use super::hint::Tick;
use super::turns::{TurnEvent, TurnStats, Turns};
use super::warm::{self, Keyed, WarmStore};

/// How many target changes a host keeps for [`Pool::targets`](super::Pool::targets); older ones
/// are dropped first. Baselines such as AIMD move the target on most completions, so an
/// unbounded record would grow with the run.
pub const TARGET_HISTORY: usize = 1 << 17;

/// The policy a host runs. TCC is kept by type so that hosts can show its [`Status`]; any other
/// policy is opaque.
pub enum Engine {
    Tcc(Box<Tcc>),
    Other(Box<dyn Policy + Send>),
}

impl Engine {
    fn policy(&mut self) -> &mut dyn Policy {
        match self {
            Engine::Tcc(tcc) => tcc.as_mut(),
            Engine::Other(policy) => policy.as_mut(),
        }
    }

    /// Whether the controller takes pressure readings: TCC with `TuneParams::psi` on.
    pub fn wants_psi(&self) -> bool {
        matches!(self, Engine::Tcc(tcc) if tcc.params().psi)
    }

    /// With a builder's workload key: TCC warm-started from the key's record (in `dir`, default
    /// [`warm::default_dir`]; lowered to the host's `max`), and the record that keeps its
    /// steady counts. A record that cannot be used is a warning and a cold start.
    ///
    /// Panics when the key comes with a policy other than TCC kept by type: only TCC has a
    /// steady count to record.
    pub fn keyed(
        self,
        key: Option<&str>,
        dir: Option<PathBuf>,
        max: usize,
    ) -> (Engine, Option<Keyed>) {
        let Some(key) = key else {
            return (self, None);
        };
        let Engine::Tcc(tcc) = self else {
            panic!(
                "key({key}): warm start is TCC's, and a policy given by policy() has no steady \
                 count to record: give TCC with tcc(), or no policy"
            );
        };
        let dir = dir.unwrap_or_else(warm::default_dir);
        let store = WarmStore::for_this_process(&dir, key).expect("key() checked the key");
        let mut params = tcc.params().clone();
        let (keyed, unusable) = Keyed::start(store, &mut params, max);
        if let Some(why) = unusable {
            tracing::warn!("{why}");
        }
        let tcc = if params.warm == tcc.params().warm {
            tcc
        } else {
            // Built anew with the warm start: the TCC a host is given has seen no event yet.
            Box::new(Tcc::new(params).expect("a warm start in n_min..=n_max is a valid one"))
        };
        (Engine::Tcc(tcc), Some(keyed))
    }

    /// TCC's warm start (`TuneParams::warm`), from a key's record or given.
    pub fn warm(&self) -> Option<usize> {
        match self {
            Engine::Tcc(tcc) => tcc.params().warm,
            Engine::Other(_) => None,
        }
    }
}

/// One policy with the host-side rules around it: time is measured from the host's start, and
/// whatever the policy answers is clamped to [1, max].
pub struct Controller {
    engine: Engine,
    origin: Instant,
    max: usize,
    target: usize,
    history: VecDeque<(Duration, usize)>,
    /// Turns with other instances on the same bottleneck, checked on every tick; they also
    /// share completions with those instances on every event.
    turns: Option<Turns>,
    /// Where TCC's steady counts go ([`Engine::keyed`]); a failed write is warned about once.
    keyed: Option<Keyed>,
}

impl Controller {
    pub fn new(mut engine: Engine, max: usize, keyed: Option<Keyed>) -> Self {
        let max = max.max(1);
        let target = engine.policy().target().clamp(1, max);
        Controller {
            engine,
            origin: Instant::now(),
            max,
            target,
            history: VecDeque::from([(Duration::ZERO, target)]),
            turns: None,
            keyed,
        }
    }

    /// Coordinates the policy with other instances through `turns`: tells the policy now, before
    /// its first event, and from then on checks the turn on every tick.
    pub fn coordinate(&mut self, mut turns: Turns) {
        turns.start(self.engine.policy());
        self.turns = Some(turns);
    }

    /// Time since the host started. Hosts read it under the lock that orders their events, so
    /// the policy sees a monotonic clock.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    pub fn target(&self) -> usize {
        self.target
    }

    /// Lowers the ceiling (a host that could not start a thread); the target follows.
    pub fn cap(&mut self, max: usize, at: Duration) {
        self.max = max.max(1);
        if self.target > self.max {
            self.set(self.max, at);
        }
    }

    /// Feeds one event; true when the (clamped) target changed. Coordinated, the other
    /// instances' completions since the last event come first, and a completion is added to
    /// the count they see.
    pub fn feed(&mut self, event: Event) -> bool {
        let at = event.at();
        let mut changed = false;
        if let Some(turns) = &mut self.turns {
            let asked = turns.peers(self.engine.policy(), at);
            if matches!(event, Event::Complete { .. }) {
                turns.completed(1);
            }
            changed = self.answer(asked, at);
        }
        let asked = self.engine.policy().on_event(event);
        self.answer(asked, at) || changed
    }

    /// Time passed: the bottleneck's utilization ([`Policy::on_hint`]) when the tick read one,
    /// else a plain [`Event::Tick`], then the pressure readings ([`Policy::on_pressure`]) when it
    /// read them. True when the target changed.
    pub fn tick(&mut self, tick: &Tick) -> bool {
        let at = tick.at;
        let asked = match tick.utilization {
            Some(u) => self.engine.policy().on_hint(at, u),
            None => self.engine.policy().on_event(Event::Tick { at }),
        };
        let mut changed = self.answer(asked, at);
        if let Some(p) = tick.pressure {
            let asked = self.engine.policy().on_pressure(at, p);
            changed |= self.answer(asked, at);
        }
        if let Some(turns) = &mut self.turns {
            let asked = turns.check(self.engine.policy(), at);
            changed |= self.answer(asked, at);
        }
        changed
    }

    /// Follows one call into the policy: records an entry into Steady under the key, then
    /// applies the (clamped) target asked for, if any; true when the target changed.
    fn answer(&mut self, asked: Option<usize>, at: Duration) -> bool {
        if let (Some(keyed), Engine::Tcc(tcc)) = (&mut self.keyed, &self.engine) {
            if let Some(e) = keyed.watch(tcc) {
                tracing::warn!("{e}; going on without recording");
            }
        }
        let Some(asked) = asked else {
            return false;
        };
        let target = asked.clamp(1, self.max);
        if target == self.target {
            return false;
        }
        self.set(target, at);
        true
    }

    fn set(&mut self, target: usize, at: Duration) {
        self.target = target;
        if self.history.len() == TARGET_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((at, target));
    }

    pub fn warm(&self) -> Option<usize> {
        self.engine.warm()
    }

    pub fn status(&self) -> Option<Status> {
        match &self.engine {
            Engine::Tcc(tcc) => Some(tcc.status()),
            Engine::Other(_) => None,
        }
    }

    pub fn drain_trace(&mut self) -> Vec<Transition> {
        self.engine.policy().drain_trace()
    }

    /// The turns taken so far (none without [`Controller::coordinate`]).
    pub fn turns(&self) -> Option<TurnStats> {
        Some(self.turns.as_ref()?.stats(self.now()))
    }

    /// The turn's changes since the last call (none without coordination).
    pub fn drain_turns(&mut self) -> Vec<TurnEvent> {
        self.turns
            .as_mut()
            .map_or_else(Vec::new, Turns::drain_events)
    }

    pub fn targets(&self) -> Vec<(Duration, usize)> {
        self.history.iter().copied().collect()
    }
}
