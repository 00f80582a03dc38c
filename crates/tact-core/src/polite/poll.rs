//! Adaptive poll interval of external (BeNice) mode, spec 2.7 and 2.8.
//!
//! Counters of an unmodified program move in steps (a file rewritten now and then, an exporter that
//! refreshes every few seconds). Polling faster than they move gives zero-progress samples that read
//! as contention, so the interval grows while many polls see no change and shrinks while almost
//! all do.

use std::collections::VecDeque;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct PollPolicy {
    pub start: Duration,
    pub floor: Duration,
    pub ceiling: Duration,
    /// Polls remembered.
    pub window: usize,
    /// Grow ×2 when more than this fraction of the window saw no change.
    pub grow_above: f64,
    /// Shrink ×0.8 when fewer than this fraction saw no change.
    pub shrink_below: f64,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            start: Duration::from_millis(200),
            floor: Duration::from_millis(100),
            ceiling: Duration::from_secs(5),
            window: 20,
            grow_above: 0.3,
            shrink_below: 0.1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PollInterval {
    policy: PollPolicy,
    current: Duration,
    unchanged: VecDeque<bool>,
}

impl PollInterval {
    /// Starts at `policy.start`, clamped to [floor, ceiling].
    pub fn new(policy: PollPolicy) -> Self {
        let current = policy.start.clamp(policy.floor, policy.ceiling);
        PollInterval {
            policy,
            current,
            unchanged: VecDeque::new(),
        }
    }

    pub fn current(&self) -> Duration {
        self.current
    }

    /// Record whether the last poll saw any counter change; returns the next interval.
    /// After a change of interval the window starts afresh, so each adjustment is judged on
    /// polls taken at the new pace.
    pub fn record(&mut self, changed: bool) -> Duration {
        self.unchanged.push_back(!changed);
        if self.unchanged.len() < self.policy.window {
            return self.current;
        }
        let idle =
            self.unchanged.iter().filter(|&&u| u).count() as f64 / self.unchanged.len() as f64;
        let next = if idle > self.policy.grow_above {
            self.current * 2
        } else if idle < self.policy.shrink_below {
            self.current.mul_f64(0.8)
        } else {
            self.current
        }
        .clamp(self.policy.floor, self.policy.ceiling);
        if next != self.current {
            self.current = next;
            self.unchanged.clear();
        } else {
            self.unchanged.pop_front();
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn grows_while_counters_rarely_move_up_to_the_ceiling() {
        let mut p = PollInterval::new(PollPolicy::default());
        // A counter that changes on one poll in four: 75% of polls see nothing.
        let seen: Vec<Duration> = (0..200).map(|i| p.record(i % 4 == 0)).collect();
        assert_eq!(seen[18], MS(200), "no change before a full window");
        assert_eq!(seen[19], MS(400));
        assert_eq!(*seen.last().unwrap(), Duration::from_secs(5));
    }

    #[test]
    fn shrinks_while_every_poll_sees_change_down_to_the_floor() {
        let mut p = PollInterval::new(PollPolicy {
            start: Duration::from_secs(1),
            ..Default::default()
        });
        let last = (0..500).map(|_| p.record(true)).last().unwrap();
        assert_eq!(last, MS(100));
    }

    #[test]
    fn holds_in_between() {
        let mut p = PollInterval::new(PollPolicy::default());
        // 20% unchanged: neither above 30% nor below 10%.
        let last = (0..100).map(|i| p.record(i % 5 != 0)).last().unwrap();
        assert_eq!(last, MS(200));
    }
}
