//! The request-level driver (spec section 3, "Drivers") of a non-preemptible resource that
//! serves one request at a time (c = 1: a disk, a NIC, tact's emulated device): two queues, fg
//! and bg, in front of a [`Gate`]. The caller reports arrivals, completions and timer expiries
//! with its time and starts whatever the answer names; the simulator, the property tests and the
//! library's device all run this code.

use std::time::Duration;

use super::gate::{Action, Event, Gate};

/// The class of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Fg,
    Bg,
}

/// Requests waiting and the one in service.
#[derive(Debug, Clone)]
pub struct Scheduler {
    gate: Gate,
    fg_queued: u64,
    bg_queued: u64,
    serving: Option<Class>,
}

impl Scheduler {
    pub fn new(gate: Gate) -> Self {
        Scheduler {
            gate,
            fg_queued: 0,
            bg_queued: 0,
            serving: None,
        }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The tuner's knob (see [`Gate::set_pi`]).
    pub fn set_pi(&mut self, pi: Duration) {
        self.gate.set_pi(pi);
    }

    pub fn serving(&self) -> Option<Class> {
        self.serving
    }

    pub fn fg_queued(&self) -> u64 {
        self.fg_queued
    }

    pub fn bg_queued(&self) -> u64 {
        self.bg_queued
    }

    /// When to call [`Scheduler::timer`]: the PI deadline while one runs.
    pub fn wake_at(&self) -> Option<Duration> {
        self.gate.hold_until()
    }

    /// A fg request arrived. Every arrival is an f event (a fg request is at the head: priority
    /// queuing puts it there), so it is counted in the state it found. It starts at once when
    /// the server is free; behind a bg request it waits out that request's residual service,
    /// the non-preemptible cost the PI exists to bound.
    pub fn fg_arrive(&mut self, now: Duration) -> Option<Class> {
        self.fg_queued += 1;
        self.gate.step(Event::Fg, now);
        self.start_next(now)
    }

    /// A bg request arrived (in library mode: a call to the gate before a bg I/O). It can start
    /// only on a free server; otherwise the next completion or expiry decides.
    pub fn bg_arrive(&mut self, now: Duration) -> Option<Class> {
        self.bg_queued += 1;
        self.start_next(now)
    }

    /// The request in service finished.
    pub fn complete(&mut self, now: Duration) -> Option<Class> {
        self.serving = None;
        self.start_next(now)
    }

    /// The PI timer fired. Early and stale calls change nothing.
    pub fn timer(&mut self, now: Duration) -> Option<Class> {
        match self.gate.hold_until() {
            Some(d) if now >= d => self.start_next(now),
            _ => None,
        }
    }

    /// Start a request on a free server: queued fg first (its f was counted on arrival), else
    /// the gate decides on the classified head.
    fn start_next(&mut self, now: Duration) -> Option<Class> {
        if self.serving.is_some() {
            return None;
        }
        if self.fg_queued > 0 {
            self.fg_queued -= 1;
            self.serving = Some(Class::Fg);
            self.gate.fg_started(now);
            return self.serving;
        }
        // In P the head is held until the deadline; at or after it the expiry (t) comes first,
        // and the head is then classified in I.
        if let Some(deadline) = self.gate.hold_until() {
            if now < deadline {
                if self.bg_queued > 0 {
                    self.gate.step(Event::Bg, now);
                }
                return None;
            }
            self.gate.step(Event::Timer, now);
        }
        let head = Event::classify(false, self.bg_queued > 0);
        let actions = self.gate.step(head, now);
        if actions.contains(&Action::DispatchBg) {
            self.bg_queued -= 1;
            self.serving = Some(Class::Bg);
        }
        self.serving
    }
}
