//! The idletime gate: the thesis's four-state scheduler (spec idletime.md section 3) for one
//! resource, fed classified events with the caller's time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the resource is doing, as the gate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    /// Nothing in service and no PI running: bg may start.
    Idle,
    /// Foreground in service (or queued behind a bg request that is finishing).
    Fg,
    /// Background in service.
    Bg,
    /// A preemption interval: idle, bg held until the deadline.
    Pi,
}

impl State {
    pub const ALL: [State; 4] = [State::Idle, State::Fg, State::Bg, State::Pi];

    fn index(self) -> usize {
        self as usize
    }
}

/// The thesis's events, classified at a decision point (arrival, completion, timer, poll).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// f: a foreground request is at the head of the queue.
    Fg,
    /// b: a background request is at the head and no foreground is queued.
    Bg,
    /// t: the PI timer expired.
    Timer,
    /// i: the queue is empty.
    Empty,
}

impl Event {
    pub const ALL: [Event; 4] = [Event::Fg, Event::Bg, Event::Timer, Event::Empty];

    /// The event a queue head makes: fg first (priority queuing puts it there), then bg.
    pub fn classify(fg_waiting: bool, bg_waiting: bool) -> Event {
        match (fg_waiting, bg_waiting) {
            (true, _) => Event::Fg,
            (false, true) => Event::Bg,
            (false, false) => Event::Empty,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the driver must do after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    DispatchFg,
    /// Start (or release) background work.
    DispatchBg,
    /// Stop background work in service; on a non-preemptible device, let it finish first.
    PreemptBg,
    /// Keep background work waiting.
    HoldBg,
    /// Call [`Gate::step`] with [`Event::Timer`] at this time.
    ArmTimer(Duration),
    CancelTimer,
}

/// Where a PI is measured from (spec section 3, "Anchoring").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Anchor {
    /// The thesis's prototype (T§5.5): the deadline is the latest fg start + p, so a p below the
    /// service time has expired before the fg request ends and the gate is a priority queue.
    Start,
    /// The thesis's model (T§4.2.3), tact's default: the deadline is the last fg completion + p.
    #[default]
    End,
}

/// The four machines the thesis's constraints leave (spec section 3): what state B does on b
/// (another bg request) and on i (bg queue ran dry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// B stays B on b, goes to I on i: one PI per fg→bg switch (the thesis's implementation).
    #[default]
    V1,
    /// B on b, P on i: an extra PI between bg bursts.
    V2,
    /// P on b, I on i: a PI before every bg request.
    V3,
    /// P on b and on i.
    V4,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Variant::V1, Variant::V2, Variant::V3, Variant::V4];

    fn pi_between_bg_requests(self) -> bool {
        matches!(self, Variant::V3 | Variant::V4)
    }

    fn pi_after_bg_burst(self) -> bool {
        matches!(self, Variant::V2 | Variant::V4)
    }
}

/// The polling driver's interval δ for a gate whose shortest PI is `pi` (spec section 3,
/// "Drivers"): the effective PI lies in \[p, p + δ\], so δ = p/10, within the driver's bounds
/// (`floor`: what a probe costs; `ceiling`: how late a hold may come). p = 0 gets the floor like
/// any short p: a priority queue resumes bg at the first quiet probe window, so its effective PI
/// is δ to 2δ, and a longer δ than p = 1 ms's would resume bg later than p = 1 ms does. Panics
/// if `floor > ceiling`.
pub fn poll_interval(pi: Duration, floor: Duration, ceiling: Duration) -> Duration {
    (pi / 10).clamp(floor, ceiling)
}

/// Parameters of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateParams {
    /// The preemption interval p. `Duration::MAX` is p = ∞ (no bg after the first fg).
    pub pi: Duration,
    pub anchor: Anchor,
    pub variant: Variant,
}

impl GateParams {
    /// The defaults (end-anchored, variant 1) with this PI.
    pub fn new(pi: Duration) -> Self {
        GateParams {
            pi,
            anchor: Anchor::End,
            variant: Variant::V1,
        }
    }
}

/// The event counters X\[s\]\[e\] of T§7.2.2: one count per (state, event) pair seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Indexed `[State as usize][Event as usize]` in the order of [`State::ALL`], [`Event::ALL`].
    pub x: [[u64; 4]; 4],
}

impl Counters {
    pub fn get(&self, s: State, e: Event) -> u64 {
        self.x[s.index()][e.index()]
    }

    /// B\[f\]: fg requests that found bg in service and paid a preemption.
    pub fn preempted(&self) -> u64 {
        self.get(State::Bg, Event::Fg)
    }

    /// P\[f\]: fg requests a PI shielded (they found the resource idle because bg was held).
    pub fn shielded(&self) -> u64 {
        self.get(State::Pi, Event::Fg)
    }

    /// I\[f\]: fg requests that found the resource idle with no PI running.
    pub fn found_idle(&self) -> u64 {
        self.get(State::Idle, Event::Fg)
    }

    /// P\[t\]: expired PIs, i.e. bg opportunities.
    pub fn expired_pis(&self) -> u64 {
        self.get(State::Pi, Event::Timer)
    }

    /// Σ_s X\[s\]\[f\]: every fg request seen.
    pub fn fg_total(&self) -> u64 {
        State::ALL.iter().map(|&s| self.get(s, Event::Fg)).sum()
    }

    /// The harm ratio h = B\[f\] / Σ_s X\[s\]\[f\] (0 before any fg).
    pub fn harm(&self) -> f64 {
        match self.fg_total() {
            0 => 0.0,
            n => self.preempted() as f64 / n as f64,
        }
    }
}

/// One idletime gate: state, PI deadline and counters of one resource. Pure: time is passed in
/// as `now`, a `Duration` since an origin the caller chooses, and never read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    params: GateParams,
    state: State,
    deadline: Option<Duration>,
    counters: Counters,
}

impl Gate {
    pub fn new(params: GateParams) -> Self {
        Gate {
            params,
            state: State::Idle,
            deadline: None,
            counters: Counters::default(),
        }
    }

    pub fn params(&self) -> GateParams {
        self.params
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// When bg may next be considered: the PI deadline while in P, else `None`.
    pub fn hold_until(&self) -> Option<Duration> {
        match self.state {
            State::Pi => self.deadline,
            _ => None,
        }
    }

    /// Change p (the tuner's knob). It applies from the next deadline the gate sets; a running
    /// PI keeps the deadline it was armed with.
    pub fn set_pi(&mut self, pi: Duration) {
        self.params.pi = pi;
    }

    /// A fg request started service at `now`. A start-anchored gate re-anchors its deadline
    /// here (T§5.5: re-armed on each fg dispatch), which matters when the request waited for a
    /// non-preemptible bg request to finish; end-anchored gates ignore it.
    pub fn fg_started(&mut self, now: Duration) {
        if self.params.anchor == Anchor::Start {
            self.deadline = Some(self.after_pi(now));
        }
    }

    /// One transition of the state machine (spec section 3, the pseudo-code), counting the
    /// (state, event) pair first.
    pub fn step(&mut self, event: Event, now: Duration) -> Vec<Action> {
        self.count(self.state, event);
        match (self.state, event) {
            (s, Event::Fg) => {
                let mut out = Vec::with_capacity(2);
                match s {
                    State::Bg => out.push(Action::PreemptBg),
                    State::Pi => out.push(Action::CancelTimer),
                    _ => {}
                }
                if self.params.anchor == Anchor::Start {
                    self.deadline = Some(self.after_pi(now));
                }
                self.state = State::Fg;
                out.push(Action::DispatchFg);
                out
            }
            (State::Fg, Event::Bg | Event::Empty) => {
                // Start-anchored: the latest fg start set the deadline (every f does).
                let deadline = match self.params.anchor {
                    Anchor::End => self.after_pi(now),
                    Anchor::Start => self.deadline.unwrap_or(now),
                };
                self.enter_pi(deadline, event, now)
            }
            (State::Pi, Event::Timer) => match self.deadline {
                Some(d) if now < d => vec![Action::ArmTimer(d)],
                _ => {
                    self.state = State::Idle;
                    self.deadline = None;
                    Vec::new()
                }
            },
            (State::Pi, Event::Bg | Event::Empty) => vec![Action::HoldBg],
            (State::Idle, Event::Bg) => {
                self.state = State::Bg;
                vec![Action::DispatchBg]
            }
            (State::Bg, Event::Bg) if !self.params.variant.pi_between_bg_requests() => {
                vec![Action::DispatchBg]
            }
            (State::Bg, Event::Empty) if !self.params.variant.pi_after_bg_burst() => {
                self.state = State::Idle;
                Vec::new()
            }
            (State::Bg, Event::Bg | Event::Empty) => self.enter_pi(self.after_pi(now), event, now),
            // (I, i) and timers that fire outside P (stale).
            _ => Vec::new(),
        }
    }

    /// The polling driver (spec section 3, "Drivers") for resources tact does not own: every δ,
    /// f if fg was active in the last δ, else t if the deadline passed, else b if bg is
    /// runnable, else i. Returns whether bg may run now (release) or must be held.
    pub fn poll(&mut self, now: Duration, fg_active: bool, bg_runnable: bool) -> bool {
        let expired = self.state == State::Pi && self.deadline.is_some_and(|d| now >= d);
        if fg_active {
            self.step(Event::Fg, now);
        } else if expired {
            self.step(Event::Timer, now);
            // The head is re-classified in the same poll, so an expiry releases bg at once.
            self.step(Event::classify(false, bg_runnable), now);
        } else {
            self.step(Event::classify(false, bg_runnable), now);
        }
        self.state == State::Bg
    }

    fn enter_pi(&mut self, deadline: Duration, event: Event, now: Duration) -> Vec<Action> {
        if deadline <= now {
            // Start-anchored with p below the service time (or p = 0): the PI is over before it
            // begins, counted as an immediate expiry, and the event is taken again in I.
            self.count(State::Pi, Event::Timer);
            self.state = State::Idle;
            self.deadline = None;
            return self.step(event, now);
        }
        self.state = State::Pi;
        self.deadline = Some(deadline);
        vec![Action::HoldBg, Action::ArmTimer(deadline)]
    }

    fn after_pi(&self, now: Duration) -> Duration {
        now.saturating_add(self.params.pi)
    }

    fn count(&mut self, s: State, e: Event) {
        self.counters.x[s.index()][e.index()] += 1;
    }
}
