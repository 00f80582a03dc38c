//! The idletime properties of spec idletime.md section 2, as property tests over random arrival
//! streams on a non-preemptible single server driven by [`Scheduler`]: prioritization, zero
//! added delay in I and P, safety (a full PI after the last fg anchor), amortization (at most one
//! preemption per fg burst), the limits p = 0 and p = ∞, and liveness. Times are whole
//! milliseconds so that arrivals, completions and deadlines often coincide.

use std::time::Duration;

use proptest::prelude::*;
use tact_core::idle::{Anchor, Class, Gate, GateParams, Scheduler, State, Variant};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// A device under test: the gate's scheduler, or the reference priority queue.
trait Device {
    fn fg_arrive(&mut self, now: Duration) -> Option<Class>;
    fn bg_arrive(&mut self, now: Duration) -> Option<Class>;
    fn complete(&mut self, now: Duration) -> Option<Class>;
    fn timer(&mut self, now: Duration) -> Option<Class>;
    fn wake_at(&self) -> Option<Duration>;
    fn state(&self) -> Option<State>;
}

impl Device for Scheduler {
    fn fg_arrive(&mut self, now: Duration) -> Option<Class> {
        Scheduler::fg_arrive(self, now)
    }
    fn bg_arrive(&mut self, now: Duration) -> Option<Class> {
        Scheduler::bg_arrive(self, now)
    }
    fn complete(&mut self, now: Duration) -> Option<Class> {
        Scheduler::complete(self, now)
    }
    fn timer(&mut self, now: Duration) -> Option<Class> {
        Scheduler::timer(self, now)
    }
    fn wake_at(&self) -> Option<Duration> {
        Scheduler::wake_at(self)
    }
    fn state(&self) -> Option<State> {
        Some(self.gate().state())
    }
}

/// A non-preemptive two-level priority queue: what p = 0 must be, step for step.
#[derive(Default)]
struct PriorityQueue {
    fg: u64,
    bg: u64,
    busy: bool,
}

impl PriorityQueue {
    fn next(&mut self) -> Option<Class> {
        if self.busy {
            return None;
        }
        let class = if self.fg > 0 {
            self.fg -= 1;
            Class::Fg
        } else if self.bg > 0 {
            self.bg -= 1;
            Class::Bg
        } else {
            return None;
        };
        self.busy = true;
        Some(class)
    }
}

impl Device for PriorityQueue {
    fn fg_arrive(&mut self, _: Duration) -> Option<Class> {
        self.fg += 1;
        self.next()
    }
    fn bg_arrive(&mut self, _: Duration) -> Option<Class> {
        self.bg += 1;
        self.next()
    }
    fn complete(&mut self, _: Duration) -> Option<Class> {
        self.busy = false;
        self.next()
    }
    fn timer(&mut self, _: Duration) -> Option<Class> {
        None
    }
    fn wake_at(&self) -> Option<Duration> {
        None
    }
    fn state(&self) -> Option<State> {
        None
    }
}

#[derive(Debug, Clone)]
struct Workload {
    /// (arrival, service) of each fg request, arrivals non-decreasing.
    fg: Vec<(Duration, Duration)>,
    bg: Vec<(Duration, Duration)>,
}

#[derive(Debug, Clone, Copy)]
struct FgRecord {
    arrival: Duration,
    start: Duration,
    end: Duration,
    /// The gate's state when the request arrived.
    found: Option<State>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Start {
    class: Class,
    at: Duration,
    /// fg requests arrived and not yet started, at this start (after it).
    fg_waiting: usize,
}

#[derive(Debug, Default)]
struct Trace {
    fg: Vec<FgRecord>,
    starts: Vec<Start>,
    bg_done: usize,
}

/// Runs the workload to the end (every request served, or only an infinite PI left).
fn run(dev: &mut dyn Device, w: &Workload) -> Trace {
    let mut trace = Trace::default();
    let (mut next_fg, mut next_bg) = (0, 0);
    let (mut fg_started, mut bg_started) = (0, 0);
    let mut in_service: Option<(Duration, Class, usize)> = None;
    loop {
        // Ties: completions, then timers, then fg arrivals, then bg arrivals.
        let candidates = [
            in_service.map(|s| s.0),
            dev.wake_at().filter(|&d| d != Duration::MAX),
            w.fg.get(next_fg).map(|r| r.0),
            w.bg.get(next_bg).map(|r| r.0),
        ];
        let Some((kind, now)) = candidates
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|t| (k, t)))
            .min_by_key(|&(k, t)| (t, k))
        else {
            break;
        };
        let started = match kind {
            0 => {
                let (_, class, idx) = in_service.take().unwrap();
                match class {
                    Class::Fg => trace.fg[idx].end = now,
                    Class::Bg => trace.bg_done += 1,
                }
                dev.complete(now)
            }
            1 => dev.timer(now),
            2 => {
                trace.fg.push(FgRecord {
                    arrival: now,
                    start: Duration::MAX,
                    end: Duration::MAX,
                    found: dev.state(),
                });
                next_fg += 1;
                dev.fg_arrive(now)
            }
            _ => {
                next_bg += 1;
                dev.bg_arrive(now)
            }
        };
        if let Some(class) = started {
            assert!(in_service.is_none(), "two requests in service at {now:?}");
            let (idx, service) = match class {
                Class::Fg => {
                    fg_started += 1;
                    (fg_started - 1, w.fg[fg_started - 1].1)
                }
                Class::Bg => {
                    bg_started += 1;
                    (bg_started - 1, w.bg[bg_started - 1].1)
                }
            };
            if class == Class::Fg {
                trace.fg[idx].start = now;
            }
            in_service = Some((now + service, class, idx));
            trace.starts.push(Start {
                class,
                at: now,
                fg_waiting: next_fg - fg_started,
            });
        }
    }
    trace
}

fn workload() -> impl Strategy<Value = Workload> {
    let stream = |n: usize, max_gap: u64| {
        prop::collection::vec((0..max_gap, 1..30u64), 0..n).prop_map(|v| {
            let mut t = 0;
            v.into_iter()
                .map(|(gap, service)| {
                    t += gap;
                    (ms(t), ms(service))
                })
                .collect::<Vec<_>>()
        })
    };
    (stream(40, 60), stream(30, 40)).prop_map(|(fg, bg)| Workload { fg, bg })
}

fn params() -> impl Strategy<Value = GateParams> {
    (
        prop_oneof![Just(0u64), 1..120u64],
        prop_oneof![Just(Anchor::End), Just(Anchor::Start)],
        prop::sample::select(Variant::ALL.to_vec()),
    )
        .prop_map(|(pi, anchor, variant)| GateParams {
            pi: ms(pi),
            anchor,
            variant,
        })
}

/// The anchor of a served fg request: its completion (end) or its start (start).
fn anchor_of(r: &FgRecord, anchor: Anchor) -> Duration {
    match anchor {
        Anchor::End => r.end,
        Anchor::Start => r.start,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Prioritization: no bg starts while a fg request waits.
    #[test]
    fn no_bg_dispatch_while_fg_is_queued(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(p)), &w);
        for s in t.starts.iter().filter(|s| s.class == Class::Bg) {
            prop_assert_eq!(s.fg_waiting, 0, "bg started at {:?} with fg waiting", s.at);
        }
    }

    /// Zero added delay for fg arriving in I or P: it starts at its arrival.
    #[test]
    fn fg_arriving_in_idle_or_pi_starts_at_once(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(p)), &w);
        for r in &t.fg {
            if matches!(r.found, Some(State::Idle | State::Pi)) {
                prop_assert_eq!(r.start, r.arrival, "{:?}", r);
            }
        }
    }

    /// Safety: every bg start is at least one PI after the last fg anchor before it.
    #[test]
    fn bg_starts_a_full_pi_after_the_last_fg_anchor(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(p)), &w);
        for s in t.starts.iter().filter(|s| s.class == Class::Bg) {
            let last = t.fg.iter().rfind(|r| r.start < s.at || r.end <= s.at);
            if let Some(r) = last {
                prop_assert!(r.end <= s.at, "bg at {:?} during fg {:?}", s.at, r);
                let earliest = anchor_of(r, p.anchor).saturating_add(p.pi);
                prop_assert!(s.at >= earliest, "bg at {:?} before {:?} ({:?})", s.at, earliest, r);
            }
        }
    }

    /// Amortization: a fg request arriving inside the previous request's PI never finds bg in
    /// service, so a burst pays at most one preemption (its first request's).
    #[test]
    fn at_most_one_preemption_per_fg_burst(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(p)), &w);
        for pair in t.fg.windows(2) {
            let inside = pair[1].arrival < anchor_of(&pair[0], p.anchor).saturating_add(p.pi);
            if inside {
                prop_assert_ne!(pair[1].found, Some(State::Bg), "{:?}", pair);
            }
        }
        // A burst's first request pays at most one bg residual: the longest bg service.
        let longest = w.bg.iter().map(|r| r.1).max().unwrap_or_default();
        for r in t.fg.iter().filter(|r| r.found == Some(State::Bg)) {
            prop_assert!(r.start - r.arrival <= longest, "{:?}", r);
        }
    }

    /// p = 0 is a non-preemptive priority queue, start for start, in every variant and anchor.
    #[test]
    fn zero_pi_is_a_priority_queue(w in workload(), p in params()) {
        let gated = run(&mut Scheduler::new(Gate::new(GateParams { pi: Duration::ZERO, ..p })), &w);
        let reference = run(&mut PriorityQueue::default(), &w);
        prop_assert_eq!(gated.starts, reference.starts);
    }

    /// p = ∞ starts no bg after the first fg arrival.
    #[test]
    fn infinite_pi_starts_no_bg_after_the_first_fg(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(GateParams { pi: Duration::MAX, ..p })), &w);
        if let Some(first) = t.fg.first() {
            for s in t.starts.iter().filter(|s| s.class == Class::Bg) {
                prop_assert!(s.at <= first.arrival, "bg at {:?}", s.at);
            }
        }
    }

    /// Liveness: every request is served, and once fg has stopped, bg waiting at the last fg
    /// completion T starts by max(T, last anchor + p).
    #[test]
    fn all_bg_is_served_within_a_pi_of_the_last_fg(w in workload(), p in params()) {
        let t = run(&mut Scheduler::new(Gate::new(p)), &w);
        prop_assert!(t.fg.iter().all(|r| r.end != Duration::MAX));
        prop_assert_eq!(t.bg_done, w.bg.len());
        if let Some(last) = t.fg.last() {
            let bound = last.end.max(anchor_of(last, p.anchor) + p.pi);
            let waiting = w.bg.iter().filter(|r| r.0 <= last.end).count();
            let before = t.starts.iter().filter(|s| s.class == Class::Bg && s.at < last.end).count();
            if waiting > before {
                let next = t.starts.iter().find(|s| s.class == Class::Bg && s.at >= last.end).unwrap();
                prop_assert!(next.at <= bound, "bg at {:?}, bound {:?}", next.at, bound);
            }
        }
    }
}
