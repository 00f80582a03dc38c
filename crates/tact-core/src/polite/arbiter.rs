//! The isolation arbiter of spec section 2.6: `pick(now, units)`.
//!
//! Concurrent regulated units slow each other down, so only one unit per isolation domain runs at a
//! time. The arbiter chooses which: among the eligible units (those not serving a suspension), the
//! highest priority wins, then the lowest *decayed usage* (decay-usage scheduling, §7.1 of the
//! paper), then the earliest arrival. Usage halves every half-life h:
//! `usage ← usage·2^(−Δt/h) + run time`.
//!
//! It is generic over the unit id so the same code arbitrates threads inside one process
//! (`tact-lib`'s supervisor) and processes on one machine (the daemon). Time is an argument, as
//! everywhere in tact-core.

use std::collections::BTreeMap;
use std::time::Duration;

/// Default decay-usage half-life h (spec 2.8).
pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Unit {
    priority: i32,
    /// Decayed usage in seconds, as of `at`.
    usage: f64,
    at: Duration,
    /// Order of arrival: the last tie-breaker, so picks never depend on map order or float noise.
    arrival: u64,
}

/// Chooses which unit runs next: strict priority, then lowest decayed usage, then arrival.
#[derive(Debug, Clone)]
pub struct Arbiter<Id> {
    half_life: Duration,
    units: BTreeMap<Id, Unit>,
    arrivals: u64,
}

impl<Id: Ord + Copy> Arbiter<Id> {
    /// An arbiter whose usage halves every `half_life`. A zero half-life keeps no memory: usage
    /// is then only what was charged at the current instant.
    pub fn new(half_life: Duration) -> Self {
        Arbiter {
            half_life,
            units: BTreeMap::new(),
            arrivals: 0,
        }
    }

    /// The decay-usage half-life h.
    pub fn half_life(&self) -> Duration {
        self.half_life
    }

    /// Adds a unit at `now`; false (and nothing changes) if `id` is already known.
    ///
    /// A newcomer starts at the lowest current usage of the units of its priority, as CFS places
    /// a new task at the minimum vruntime: starting at zero would let a process that reconnects
    /// to the daemon over and over run ahead of everyone, and starting high would starve it.
    pub fn add(&mut self, id: Id, priority: i32, now: Duration) -> bool {
        if self.units.contains_key(&id) {
            return false;
        }
        let usage = self
            .units
            .values()
            .filter(|u| u.priority == priority)
            .map(|u| self.decayed(u, now))
            .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.min(u))))
            .unwrap_or(0.0);
        self.units.insert(
            id,
            Unit {
                priority,
                usage,
                at: now,
                arrival: self.arrivals,
            },
        );
        self.arrivals += 1;
        true
    }

    /// Forgets a unit; false if it was not known.
    pub fn remove(&mut self, id: Id) -> bool {
        self.units.remove(&id).is_some()
    }

    /// Changes a unit's priority (its usage is kept); false if it is not known.
    pub fn set_priority(&mut self, id: Id, priority: i32) -> bool {
        match self.units.get_mut(&id) {
            Some(u) => {
                u.priority = priority;
                true
            }
            None => false,
        }
    }

    /// A unit's priority, if it is known.
    pub fn priority(&self, id: Id) -> Option<i32> {
        self.units.get(&id).map(|u| u.priority)
    }

    /// Records that `id` ran for `ran`, ending at `now`; false if it is not known.
    pub fn charge(&mut self, id: Id, now: Duration, ran: Duration) -> bool {
        let factor = |u: &Unit| decay_factor(now.saturating_sub(u.at), self.half_life);
        match self.units.get(&id).map(factor) {
            Some(f) => {
                let u = self.units.get_mut(&id).expect("checked above");
                u.usage = u.usage * f + ran.as_secs_f64();
                // Never move a unit's clock backwards if the caller's times are out of order.
                u.at = u.at.max(now);
                true
            }
            None => false,
        }
    }

    /// The decayed usage of `id` at `now`.
    pub fn usage(&self, id: Id, now: Duration) -> Option<Duration> {
        self.units
            .get(&id)
            .map(|u| Duration::from_secs_f64(self.decayed(u, now)))
    }

    /// The unit that should run at `now` among those for which `eligible` holds: the highest
    /// priority, then the lowest decayed usage, then the earliest arrival. None if no known unit
    /// is eligible.
    pub fn pick(&self, now: Duration, eligible: impl Fn(Id) -> bool) -> Option<Id> {
        self.units
            .iter()
            .filter(|(id, _)| eligible(**id))
            .map(|(id, u)| (*id, u.priority, self.decayed(u, now), u.arrival))
            .min_by(|a, b| b.1.cmp(&a.1).then(a.2.total_cmp(&b.2)).then(a.3.cmp(&b.3)))
            .map(|(id, ..)| id)
    }

    /// Number of known units.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether no unit is known.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Whether `id` is known.
    pub fn contains(&self, id: Id) -> bool {
        self.units.contains_key(&id)
    }

    fn decayed(&self, u: &Unit, now: Duration) -> f64 {
        u.usage * decay_factor(now.saturating_sub(u.at), self.half_life)
    }
}

/// 2^(−Δt/h), with a zero half-life forgetting everything as soon as any time passes.
fn decay_factor(dt: Duration, half_life: Duration) -> f64 {
    if dt.is_zero() {
        1.0
    } else if half_life.is_zero() {
        0.0
    } else {
        (-(dt.as_secs_f64() / half_life.as_secs_f64())).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn usage_halves_every_half_life() {
        let mut a = Arbiter::new(Duration::from_secs(10));
        a.add(1u32, 0, Duration::ZERO);
        a.charge(1, Duration::ZERO, Duration::from_secs(8));
        let at = |a: &Arbiter<u32>, s| a.usage(1, Duration::from_secs(s)).unwrap().as_secs_f64();
        assert!((at(&a, 10) - 4.0).abs() < 1e-9);
        assert!((at(&a, 20) - 2.0).abs() < 1e-9);
        // Charging decays first, then adds.
        a.charge(1, Duration::from_secs(10), Duration::from_secs(1));
        assert!((at(&a, 10) - 5.0).abs() < 1e-9);
        assert!((at(&a, 20) - 2.5).abs() < 1e-9);
    }

    #[test]
    fn priority_then_usage_then_arrival() {
        let mut a = Arbiter::new(DEFAULT_HALF_LIFE);
        let t = Duration::ZERO;
        for id in [3u32, 1, 2] {
            a.add(id, 0, t);
        }
        // Equal usage: the first to arrive, not the smallest id.
        assert_eq!(a.pick(t, |_| true), Some(3));
        a.charge(3, t, MS);
        assert_eq!(a.pick(t, |_| true), Some(1));
        a.charge(1, t, MS * 2);
        assert_eq!(a.pick(t, |_| true), Some(2));
        a.charge(2, t, MS * 3);
        assert_eq!(a.pick(t, |_| true), Some(3));
        assert_eq!(a.pick(t, |id| id != 3), Some(1));
        // A higher priority wins whatever its usage.
        a.set_priority(2, 5);
        assert_eq!(a.pick(t, |_| true), Some(2));
        assert_eq!(a.pick(t, |id| id != 2), Some(3));
        assert_eq!(a.pick(t, |_| false), None);
        assert!(a.remove(2) && !a.remove(2));
        assert_eq!(a.pick(t, |_| true), Some(3));
        assert!(!a.charge(2, t, MS) && !a.set_priority(2, 1));
    }

    #[test]
    fn a_newcomer_starts_at_the_lowest_usage_of_its_priority() {
        let mut a = Arbiter::new(Duration::from_secs(10));
        let t = Duration::ZERO;
        a.add(1u32, 0, t);
        a.add(2, 0, t);
        a.add(9, 7, t);
        a.charge(1, t, Duration::from_secs(4));
        a.charge(2, t, Duration::from_secs(6));
        a.charge(9, t, Duration::from_secs(1));
        let later = Duration::from_secs(10);
        assert!(a.add(3, 0, later));
        assert!(!a.add(3, 1, later));
        assert!((a.usage(3, later).unwrap().as_secs_f64() - 2.0).abs() < 1e-9);
        // Alone at its priority: zero.
        a.add(4, -1, later);
        assert_eq!(a.usage(4, later), Some(Duration::ZERO));
    }

    #[test]
    fn zero_half_life_forgets_at_once() {
        let mut a = Arbiter::new(Duration::ZERO);
        a.add(1u8, 0, Duration::ZERO);
        a.charge(1, MS, MS * 5);
        assert_eq!(a.usage(1, MS), Some(MS * 5));
        assert_eq!(a.usage(1, MS * 2), Some(Duration::ZERO));
    }

    proptest! {
        /// Equal priorities, random run lengths: every unit's long-run share is 1/N within a
        /// bound. Usages stay within one maximal quantum q of each other, so two units' totals
        /// differ by at most q(1 + T·ln2/h): 0.2 s·(1 + 0.07·T) here, under 0.03 of T.
        #[test]
        fn equal_priorities_share_equally(
            n in 2usize..6,
            quanta in proptest::collection::vec(10u64..200, 2000),
        ) {
            let mut a = Arbiter::new(DEFAULT_HALF_LIFE);
            let mut now = Duration::ZERO;
            for id in 0..n {
                a.add(id, 3, now);
            }
            let mut ran = vec![Duration::ZERO; n];
            for q in quanta {
                let id = a.pick(now, |_| true).unwrap();
                let q = Duration::from_millis(q);
                now += q;
                a.charge(id, now, q);
                ran[id] += q;
            }
            for r in ran {
                let share = r.as_secs_f64() / now.as_secs_f64();
                prop_assert!((share - 1.0 / n as f64).abs() < 0.03, "share {share} of {n}");
            }
        }

        /// Whatever the usages, the pick is an eligible unit of the highest eligible priority, and
        /// the least used among those.
        #[test]
        fn highest_priority_always_wins(
            units in proptest::collection::vec((-3i32..3, 0u64..10_000, any::<bool>()), 1..12),
            elapsed in 0u64..60_000,
        ) {
            let mut a = Arbiter::new(DEFAULT_HALF_LIFE);
            for (id, (p, used, _)) in units.iter().enumerate() {
                a.add(id, *p, Duration::ZERO);
                a.charge(id, Duration::ZERO, Duration::from_millis(*used));
            }
            let now = Duration::from_millis(elapsed);
            let eligible = |id: usize| units[id].2;
            match a.pick(now, eligible) {
                None => prop_assert!(units.iter().all(|u| !u.2)),
                Some(id) => {
                    prop_assert!(eligible(id));
                    for (other, (p, ..)) in units.iter().enumerate().filter(|(i, _)| eligible(*i)) {
                        prop_assert!(*p <= units[id].0);
                        if *p == units[id].0 {
                            prop_assert!(a.usage(id, now) <= a.usage(other, now));
                        }
                    }
                }
            }
        }

        /// After any history, waiting one half-life halves the usage.
        #[test]
        fn decay_halves_after_a_half_life(
            charges in proptest::collection::vec((0u64..5_000, 1u64..1_000), 1..20),
            h in 1u64..30_000,
        ) {
            let h = Duration::from_millis(h);
            let mut a = Arbiter::new(h);
            a.add(0u8, 0, Duration::ZERO);
            let mut now = Duration::ZERO;
            for (gap, ran) in charges {
                now += Duration::from_millis(gap);
                a.charge(0, now, Duration::from_millis(ran));
            }
            let u0 = a.usage(0, now).unwrap().as_secs_f64();
            let u1 = a.usage(0, now + h).unwrap().as_secs_f64();
            prop_assert!((u1 - u0 / 2.0).abs() <= 1e-9 * u0.max(1.0));
        }
    }
}
