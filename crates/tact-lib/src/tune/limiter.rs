//! A semaphore whose number of permits follows a [`Policy`], for blocking and async callers.
//!
//! Waiters queue in arrival order, blocking and async alike. A freed permit goes straight to
//! the waiter at the head (it is counted in flight from that moment), so a late arrival cannot
//! overtake, and a cancelled async acquire that had already been granted hands its permit on.
//! The async side needs no runtime: it stores the task's [`Waker`] and wakes it on the grant.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use tact_core::tune::{Event, Load, Policy, Status, Tcc, Transition, TuneParams};
use tact_linux::probe::psi::PsiReader;

use super::controller::{Controller, Engine};
use super::hint::{self, Hint};
use super::pool::{self, controller_setters, default_tcc, DEFAULT_TICK};
use super::turns::{TurnEvent, TurnStats, Turns};

/// A concurrency limit set by a [`Policy`] (spec `concurrency.md` §6).
///
/// The policy receives `Complete` when a [`Permit`] is dropped (latency: how long it was held),
/// `Start` when permits are taken outside a completion, `Load` when the first caller starts
/// waiting, the last stops waiting without a permit, or a failed permit frees a slot nobody
/// takes, and `Tick` every 100 ms (the builder's `tick`) from a thread that ends once the last
/// clone of the limiter is gone; with a [`bottleneck`](LimiterBuilder::bottleneck) source that
/// thread also reads it and reports the readings as hints, and with TCC's `psi` on it reads PSI
/// ([`psi_reader`](LimiterBuilder::psi_reader)). `queued` is the number of waiters. A raised
/// limit grants waiters at once; a lowered one takes effect as permits are released (nobody
/// loses a permit). The limit is at least 1; there is no upper bound beyond the policy's own.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
}

struct State {
    controller: Controller,
    in_flight: usize,
    waiters: VecDeque<Waiter>,
}

struct Waiter {
    slot: Arc<Slot>,
    /// The async task to wake on the grant; none for a blocked thread (it waits on the slot).
    waker: Option<Waker>,
}

/// One waiting acquire. `granted` only changes under the limiter's lock (the atomic only makes
/// the slot shareable).
struct Slot {
    granted: AtomicBool,
    cv: Condvar,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            granted: AtomicBool::new(false),
            cv: Condvar::new(),
        })
    }

    fn granted(&self) -> bool {
        self.granted.load(Ordering::Relaxed)
    }
}

impl State {
    fn load(&self) -> Load {
        Load::new(self.in_flight, self.waiters.len())
    }

    /// Hands free permits to the head of the queue; returns the async tasks to wake once the
    /// lock is released.
    fn grant(&mut self, wakers: &mut Vec<Waker>) -> usize {
        let mut granted = 0;
        while self.in_flight < self.controller.target() {
            let Some(waiter) = self.waiters.pop_front() else {
                break;
            };
            self.in_flight += 1;
            granted += 1;
            waiter.slot.granted.store(true, Ordering::Relaxed);
            match waiter.waker {
                Some(waker) => wakers.push(waker),
                None => waiter.slot.cv.notify_one(),
            }
        }
        granted
    }

    /// Feeds an event and, while the limit grows, grants waiters and reports them as `Start`.
    fn feed(&mut self, event: Event, wakers: &mut Vec<Waker>) {
        let changed = self.controller.feed(event);
        self.follow(changed, wakers);
    }

    /// Reports a tick with its readings, then follows a new limit as `feed` does.
    fn tick(&mut self, tick: &hint::Tick, wakers: &mut Vec<Waker>) {
        let changed = self.controller.tick(tick);
        self.follow(changed, wakers);
    }

    fn follow(&mut self, mut changed: bool, wakers: &mut Vec<Waker>) {
        while changed && self.grant(wakers) > 0 {
            let start = Event::Start {
                at: self.controller.now(),
                load: self.load(),
            };
            changed = self.controller.feed(start);
        }
    }

    /// A permit went away without a completion: pass it on, and tell the policy what changed.
    fn release_uncounted(&mut self, wakers: &mut Vec<Waker>) {
        self.in_flight -= 1;
        let granted = self.grant(wakers);
        let at = self.controller.now();
        let load = self.load();
        let event = if granted > 0 {
            Event::Start { at, load }
        } else {
            Event::Load { at, load }
        };
        self.feed(event, wakers);
    }

    /// Takes a permit at once when one is free and nobody is ahead.
    fn try_take(&mut self, wakers: &mut Vec<Waker>) -> bool {
        if !self.waiters.is_empty() || self.in_flight >= self.controller.target() {
            return false;
        }
        self.in_flight += 1;
        let start = Event::Start {
            at: self.controller.now(),
            load: self.load(),
        };
        self.feed(start, wakers);
        true
    }

    /// Joins the queue.
    fn enqueue(&mut self, slot: &Arc<Slot>, waker: Option<Waker>, wakers: &mut Vec<Waker>) {
        self.waiters.push_back(Waiter {
            slot: Arc::clone(slot),
            waker,
        });
        if self.waiters.len() == 1 {
            let event = Event::Load {
                at: self.controller.now(),
                load: self.load(),
            };
            self.feed(event, wakers);
        }
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

const POISONED: &str = "limiter state poisoned: a policy panicked";

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect(POISONED)
    }
}

/// Settings for a [`Limiter`], as a [`PoolBuilder`](super::PoolBuilder)'s.
pub struct LimiterBuilder {
    engine: Option<Engine>,
    tick: Duration,
    bottleneck: Option<hint::Source>,
    psi: Option<PsiReader>,
    turns: Option<Turns>,
    key: Option<String>,
    key_dir: Option<PathBuf>,
}

impl LimiterBuilder {
    controller_setters!();

    pub fn build(self) -> Limiter {
        let engine = self
            .engine
            .unwrap_or_else(|| default_tcc(TuneParams::default().n_max));
        let (engine, keyed) = engine.keyed(self.key.as_deref(), self.key_dir, usize::MAX);
        let mut hint = Hint::new(self.bottleneck, self.psi, &engine);
        let mut controller = Controller::new(engine, usize::MAX, keyed);
        pool::coordinate(&mut controller, self.turns, self.tick);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                controller,
                in_flight: 0,
                waiters: VecDeque::new(),
            }),
        });
        if !self.tick.is_zero() {
            let weak = Arc::downgrade(&inner);
            let every = self.tick;
            thread::Builder::new()
                .name("tact-limiter-tick".to_owned())
                .spawn(move || tick_loop(&weak, every, &mut hint))
                .expect("spawning the limiter's ticker thread");
        }
        Limiter { inner }
    }
}

impl Limiter {
    /// A limiter run by `policy`, with the builder's other defaults.
    pub fn new(policy: Box<dyn Policy + Send>) -> Limiter {
        Limiter::builder().policy(policy).build()
    }

    pub fn builder() -> LimiterBuilder {
        LimiterBuilder {
            engine: None,
            tick: DEFAULT_TICK,
            bottleneck: None,
            psi: None,
            turns: None,
            key: None,
            key_dir: None,
        }
    }

    /// Blocks until a permit is free (in arrival order).
    pub fn acquire(&self) -> Permit {
        let mut wakers = Vec::new();
        let mut st = self.inner.lock();
        if !st.try_take(&mut wakers) {
            let slot = Slot::new();
            st.enqueue(&slot, None, &mut wakers);
            while !slot.granted() {
                st = slot.cv.wait(st).expect(POISONED);
            }
        }
        drop(st);
        wake_all(wakers);
        self.permit()
    }

    /// Waits for a permit without blocking the thread; works on any executor. Cancel-safe:
    /// dropping the future before it completes leaves the queue, and a permit granted to it in
    /// the meantime goes to the next waiter.
    pub fn acquire_async(&self) -> Acquire {
        Acquire {
            limiter: self.clone(),
            slot: None,
        }
    }

    /// A permit if one is free now and nobody is waiting for one.
    pub fn try_acquire(&self) -> Option<Permit> {
        let mut wakers = Vec::new();
        let taken = self.inner.lock().try_take(&mut wakers);
        wake_all(wakers);
        taken.then(|| self.permit())
    }

    /// Permits the limiter allows at once now.
    pub fn limit(&self) -> usize {
        self.inner.lock().controller.target()
    }

    /// Permits held (or granted and about to be taken).
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight
    }

    /// Callers waiting for a permit.
    pub fn queued(&self) -> usize {
        self.inner.lock().waiters.len()
    }

    /// The controller's state when it is TCC ([`LimiterBuilder::tcc`]).
    pub fn status(&self) -> Option<Status> {
        self.inner.lock().controller.status()
    }

    /// The policy's state transitions since the last call, oldest first.
    pub fn drain_trace(&self) -> Vec<Transition> {
        self.inner.lock().controller.drain_trace()
    }

    /// The count TCC warm-started from, as [`Pool::warm_start`](super::Pool::warm_start).
    pub fn warm_start(&self) -> Option<usize> {
        self.inner.lock().controller.warm()
    }

    /// The turns taken with other instances ([`LimiterBuilder::coordinate`]; none without).
    pub fn turns(&self) -> Option<TurnStats> {
        self.inner.lock().controller.turns()
    }

    /// The turn's changes since the last call, oldest first (waits, grants, releases).
    pub fn drain_turns(&self) -> Vec<TurnEvent> {
        self.inner.lock().controller.drain_turns()
    }

    /// Every limit so far as (time since the limiter was made, limit), as
    /// [`Pool::targets`](super::Pool::targets).
    pub fn targets(&self) -> Vec<(Duration, usize)> {
        self.inner.lock().controller.targets()
    }

    fn permit(&self) -> Permit {
        Permit {
            inner: Arc::clone(&self.inner),
            since: Instant::now(),
            failed: false,
        }
    }
}

fn tick_loop(limiter: &Weak<Inner>, every: Duration, hint: &mut Hint) {
    loop {
        thread::sleep(every);
        let Some(inner) = limiter.upgrade() else {
            return;
        };
        let mut wakers = Vec::new();
        let st = inner.lock();
        let now = st.controller.now();
        let (mut st, tick) = hint::tick(st, now, hint, || inner.lock(), |st| st.controller.now());
        st.tick(&tick, &mut wakers);
        drop(st);
        wake_all(wakers);
    }
}

/// The future of [`Limiter::acquire_async`].
pub struct Acquire {
    limiter: Limiter,
    /// Set once the future has joined the queue.
    slot: Option<Arc<Slot>>,
}

impl Future for Acquire {
    type Output = Permit;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit> {
        let this = self.get_mut();
        let mut wakers = Vec::new();
        let mut st = this.limiter.inner.lock();
        let ready = match &this.slot {
            None => {
                if st.try_take(&mut wakers) {
                    true
                } else {
                    let slot = Slot::new();
                    st.enqueue(&slot, Some(cx.waker().clone()), &mut wakers);
                    // The Load event may have raised the limit and granted this very slot.
                    let granted = slot.granted();
                    this.slot = Some(slot);
                    granted
                }
            }
            Some(slot) if slot.granted() => true,
            Some(slot) => {
                // Polled again before the grant, maybe by another task: keep its waker.
                if let Some(waiter) = st.waiters.iter_mut().find(|w| Arc::ptr_eq(&w.slot, slot)) {
                    match &mut waiter.waker {
                        Some(waker) if waker.will_wake(cx.waker()) => {}
                        waker => *waker = Some(cx.waker().clone()),
                    }
                }
                false
            }
        };
        drop(st);
        wake_all(wakers);
        if ready {
            this.slot = None;
            Poll::Ready(this.limiter.permit())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let mut wakers = Vec::new();
        let mut st = self.limiter.inner.lock();
        if slot.granted() {
            st.release_uncounted(&mut wakers);
        } else {
            st.waiters.retain(|w| !Arc::ptr_eq(&w.slot, &slot));
            if st.waiters.is_empty() {
                let event = Event::Load {
                    at: st.controller.now(),
                    load: st.load(),
                };
                st.feed(event, &mut wakers);
            }
        }
        drop(st);
        wake_all(wakers);
    }
}

/// The right to run one task under a [`Limiter`]. Dropping it counts as a completion whose
/// latency is the time it was held; [`Permit::forget_failed`] releases it without one.
pub struct Permit {
    inner: Arc<Inner>,
    since: Instant,
    failed: bool,
}

impl Permit {
    /// Releases the permit for a task that failed: the slot is freed (and passed on) but the
    /// policy sees no completion, since failed work is not throughput and its latency would
    /// mislead latency-based policies.
    pub fn forget_failed(mut self) {
        self.failed = true;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let held = self.since.elapsed();
        let mut wakers = Vec::new();
        let mut st = self.inner.lock();
        if self.failed {
            st.release_uncounted(&mut wakers);
        } else {
            st.in_flight -= 1;
            st.grant(&mut wakers);
            let event = Event::Complete {
                at: st.controller.now(),
                load: st.load(),
                latency: Some(held),
            };
            st.feed(event, &mut wakers);
        }
        drop(st);
        wake_all(wakers);
    }
}
