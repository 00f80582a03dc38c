//! The cooperative idle gate: tact-core's [`Gate`] driven by lazy polling inside `acquire`.
//!
//! **Why lazy polling rather than a watcher thread.** The gate only has to know about
//! foreground activity when the program asks for a turn, and the counters it reads are
//! cumulative, so nothing is lost between looks: only *when* within the interval it happened.
//! The gate dates such activity at the look that finds it, which can only lengthen the wait
//! (a full PI from that look), never shorten it, so safety holds. While a program waits, it polls
//! every δ (the effective PI lies in [p, p + δ]); while it works or sleeps the gate costs
//! nothing: no thread, no reads of `/proc/diskstats` every millisecond for hours.
//!
//! **One request at a time.** A gate admits one background request until it is done, as the
//! thesis's bg ran at queue depth 1: a foreground arrival then waits for at most one bg
//! request, and the device growth over the request less its reported bytes is exactly the
//! foreground's (with several requests in flight, one finishing could not be told from another
//! still running). Other threads' `acquire` wait their turn.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, ThreadId};
use std::time::Duration;

use tact_core::idle::{poll_interval, Counters, Gate, GateParams, State, Tuner};

use super::builder::Builder;
use super::clock::Clock;
use super::sampler::Sampler;
use super::IdleError;

/// Shortest interval between looks: reading `/proc/diskstats` costs tens of microseconds, and
/// disk service times are milliseconds, so polling faster buys nothing.
const MIN_POLL: Duration = Duration::from_millis(1);

/// Longest a thread waiting for another's request sleeps before checking its own deadline.
const SLOT_CHECK: Duration = Duration::from_millis(50);

/// δ for a PI p: the engine's rule (p/10, spec idletime §6) with [`MIN_POLL`] as its floor and
/// no ceiling: a waiting thread also wakes for its own deadline ([`SLOT_CHECK`]).
fn poll_every(pi: Duration) -> Duration {
    poll_interval(pi, MIN_POLL, Duration::MAX)
}

/// A cooperative idle gate for one resource: call [`acquire`](IdleGate::acquire) before each
/// background request and report it done with its byte count ([`Permit::done`] or
/// [`IdleGate::done`]). Background requests then start only after the foreground has left the
/// resource idle for a full preemption interval, so they never queue in front of foreground
/// ones. Clones share the gate.
#[derive(Clone)]
pub struct IdleGate {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    /// Signalled when a request is done and the next may be admitted.
    freed: Condvar,
}

struct Inner {
    gate: Gate,
    sampler: Box<dyn Sampler>,
    tuner: Option<Tuner>,
    threshold: u64,
    /// The counter at the last look, and when that was.
    last_bytes: u64,
    last_at: Duration,
    /// The request admitted and not yet done.
    outstanding: Option<Outstanding>,
    next_id: u64,
    /// The gate's counters right after start, which counts one f (see `IdleGate::start`).
    base: Counters,
    acquired: u64,
    waited: Duration,
    busy: Duration,
    own_bytes: u64,
    fg_bytes: u64,
}

#[derive(Clone, Copy)]
struct Outstanding {
    id: u64,
    started: Duration,
    /// Who acquired it: the same thread acquiring again would wait for itself forever.
    thread: ThreadId,
}

/// The right to issue one background request; end it with [`Permit::done`] and the request's
/// byte count. Dropping it ends the request with no bytes reported, so any I/O it did counts as
/// foreground (the safe side: the gate waits a PI more).
#[must_use = "issue one background request, then call done(bytes)"]
pub struct Permit {
    shared: Arc<Shared>,
    id: u64,
}

/// A snapshot of a gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// What is watched: `disk vda (/var/lib)`, `interface eth0`, or a sampler's name.
    pub resource: String,
    /// The gate's state (Idle, Fg, Bg, Pi).
    pub state: State,
    /// The current preemption interval.
    pub pi: Duration,
    /// Whether p is tuned automatically.
    pub auto: bool,
    /// Time left of the running PI, when in one.
    pub pi_left: Option<Duration>,
    /// Whether a background request is outstanding.
    pub outstanding: bool,
    /// The gate's event counters X\[s\]\[e\] (see [`Counters`]).
    pub counters: Counters,
    /// Requests admitted.
    pub acquired: u64,
    /// Time spent inside `acquire` (timed-out waits included), and between admissions and
    /// `done`.
    pub waited: Duration,
    pub busy: Duration,
    /// Bytes the program reported, and foreground bytes seen (growth beyond the own bytes).
    pub own_bytes: u64,
    pub fg_bytes: u64,
}

impl IdleGate {
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(super) fn start(
        name: String,
        mut sampler: Box<dyn Sampler>,
        params: GateParams,
        tuner: Option<tact_core::idle::TunerParams>,
        threshold: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<IdleGate, IdleError> {
        let tuner = tuner
            .map(Tuner::new)
            .transpose()
            .map_err(|e| IdleError::Preempt {
                value: "auto".into(),
                reason: e.to_string(),
            })?;
        let now = clock.now();
        let last_bytes = sampler.bytes()?;
        let mut gate = Gate::new(params);
        // What happened before the gate existed is unknown, so it counts as foreground that
        // just ended: the first request, like every other, waits for a full PI of calm.
        gate.poll(now, true, false);
        let base = *gate.counters();
        Ok(IdleGate {
            shared: Arc::new(Shared {
                name,
                clock,
                inner: Mutex::new(Inner {
                    gate,
                    sampler,
                    tuner,
                    threshold,
                    last_bytes,
                    last_at: now,
                    outstanding: None,
                    next_id: 0,
                    base,
                    acquired: 0,
                    waited: Duration::ZERO,
                    busy: Duration::ZERO,
                    own_bytes: 0,
                    fg_bytes: 0,
                }),
                freed: Condvar::new(),
            }),
        })
    }

    /// Waits until the resource has been idle of foreground activity for a full PI (and no
    /// other request of this gate is outstanding), then admits one background request.
    /// Errors with [`IdleError::AlreadyHeld`] when the calling thread's own request is still
    /// outstanding (it would wait for itself).
    pub fn acquire(&self) -> Result<Permit, IdleError> {
        loop {
            // With no deadline (it saturates at `Duration::MAX`) the wait ends only by admission.
            if let Some(p) = self.acquire_timeout(Duration::MAX)? {
                return Ok(p);
            }
        }
    }

    /// [`acquire`](IdleGate::acquire), giving up after `timeout`: `None` if the resource did not
    /// become idle for a PI in time.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Permit>, IdleError> {
        let clock = &self.shared.clock;
        let start = clock.now();
        let deadline = start.saturating_add(timeout);
        let mut inner = self.shared.lock();
        if inner
            .outstanding
            .is_some_and(|o| o.thread == thread::current().id())
        {
            return Err(IdleError::AlreadyHeld);
        }
        loop {
            let now = clock.now();
            if inner.outstanding.is_none() {
                let delta = poll_every(inner.gate.params().pi);
                // Leaving F takes a look spanning at least δ: a look a moment after the last
                // one could not have seen anything.
                let fresh = now.saturating_sub(inner.last_at);
                if inner.gate.state() == State::Fg && fresh < delta && now < deadline {
                    drop(inner);
                    clock.sleep((delta - fresh).min(deadline - now));
                    inner = self.shared.lock();
                    continue;
                }
                let fg = inner.look(now, 0)?;
                let release = inner.gate.poll(now, fg, true);
                inner.tune(now);
                if release {
                    let id = inner.next_id;
                    inner.next_id += 1;
                    inner.outstanding = Some(Outstanding {
                        id,
                        started: now,
                        thread: thread::current().id(),
                    });
                    inner.acquired += 1;
                    inner.waited += now.saturating_sub(start);
                    return Ok(Some(Permit {
                        shared: Arc::clone(&self.shared),
                        id,
                    }));
                }
            }
            if now >= deadline {
                inner.waited += now.saturating_sub(start);
                return Ok(None);
            }
            if inner.outstanding.is_some() {
                // Another thread's request: wait for its done (or our deadline).
                let wait = (deadline - now).min(SLOT_CHECK);
                inner = self
                    .shared
                    .freed
                    .wait_timeout(inner, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
            // Held: look again in δ, or at the PI's end if sooner.
            let mut wake = now.saturating_add(poll_every(inner.gate.params().pi));
            if let Some(until) = inner.gate.hold_until() {
                wake = wake.min(until.max(now + MIN_POLL));
            }
            drop(inner);
            clock.sleep(wake.min(deadline) - now);
            inner = self.shared.lock();
        }
    }

    /// The outstanding background request (of any thread) completed, having moved `bytes`:
    /// they are the program's own and are not counted as foreground. Errors with
    /// [`IdleError::NotAcquired`] when no request is outstanding.
    pub fn done(&self, bytes: u64) -> Result<(), IdleError> {
        let id = self.shared.lock().outstanding.map(|o| o.id);
        match id {
            Some(id) => self.shared.finish(id, bytes),
            None => Err(IdleError::NotAcquired),
        }
    }

    /// The gate's event counters since it started.
    pub fn counters(&self) -> Counters {
        self.shared.lock().counters()
    }

    pub fn status(&self) -> Status {
        let now = self.shared.clock.now();
        let inner = self.shared.lock();
        Status {
            resource: self.shared.name.clone(),
            state: inner.gate.state(),
            pi: inner.gate.params().pi,
            auto: inner.tuner.is_some(),
            pi_left: inner.gate.hold_until().map(|d| d.saturating_sub(now)),
            outstanding: inner.outstanding.is_some(),
            counters: inner.counters(),
            acquired: inner.acquired,
            waited: inner.waited,
            busy: inner.busy,
            own_bytes: inner.own_bytes,
            fg_bytes: inner.fg_bytes,
        }
    }
}

impl std::fmt::Debug for IdleGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleGate")
            .field("resource", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// The request completed, having moved `bytes` (read plus written, or sent plus received).
    /// An error means the counters could not be read; the request is over all the same.
    pub fn done(self, bytes: u64) -> Result<(), IdleError> {
        self.shared.finish(self.id, bytes)
        // Drop then finds the request already over.
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        // Nothing to report an error to; the request is over either way.
        let _ = self.shared.finish(self.id, 0);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would be a bug here; the state is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends request `id` (if it is still the outstanding one) and judges the device's growth
    /// over it less its own bytes: foreground arrived during a background request when the rest
    /// is above the threshold, which the gate counts as B[f] (the preemption the tuner limits).
    fn finish(&self, id: u64, bytes: u64) -> Result<(), IdleError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        let Some(current) = inner.outstanding.filter(|o| o.id == id) else {
            return Ok(());
        };
        inner.outstanding = None;
        inner.busy += now.saturating_sub(current.started);
        inner.own_bytes = inner.own_bytes.saturating_add(bytes);
        self.freed.notify_one();
        if inner.look(now, bytes)? {
            inner.gate.poll(now, true, false);
        }
        inner.tune(now);
        Ok(())
    }
}

impl Inner {
    /// Reads the counter; whether the growth since the last look, less `own` bytes of the
    /// program's request, is foreground.
    fn look(&mut self, now: Duration, own: u64) -> Result<bool, IdleError> {
        let bytes = self.sampler.bytes()?;
        let grown = bytes.saturating_sub(self.last_bytes);
        let fg = grown.saturating_sub(self.sampler.own_share(own));
        self.last_bytes = bytes;
        self.last_at = now;
        let active = fg > self.threshold;
        if active {
            self.fg_bytes = self.fg_bytes.saturating_add(fg);
        }
        Ok(active)
    }

    fn tune(&mut self, now: Duration) {
        if let Some(tuner) = &mut self.tuner {
            if let Some(p) = tuner.observe(now, self.gate.counters()) {
                self.gate.set_pi(p);
            }
        }
    }

    fn counters(&self) -> Counters {
        let mut c = *self.gate.counters();
        for (row, base) in c.x.iter_mut().zip(self.base.x) {
            for (x, b) in row.iter_mut().zip(base) {
                *x -= b;
            }
        }
        c
    }
}
