//! What the daemon's clients actually used, for `explain`'s measured shares: next to what a
//! client's rights entitle it to (`R`, its share now, its guaranteed share), what it got. At
//! every refresh of the model (every 100 ms while enforcing, else at each request) the daemon
//! records each client's CPU time (`/proc/PID/task/*/schedstat`, ns) and I/O bytes
//! (`read_bytes + write_bytes` of `/proc/PID/io`); a client's measured share of a resource is
//! its part of what all clients used over the last [`WINDOW`]. Memory has no such rate and is
//! not measured here.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use tact_core::tickets::Resource;
use tact_proto::tickets::Measured;

/// How far back a measured share looks.
pub const WINDOW: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    cpu_ns: u64,
    io_bytes: u64,
}

impl Sample {
    fn counter(&self, r: Resource) -> Option<u64> {
        match r {
            Resource::Cpu => Some(self.cpu_ns),
            Resource::Disk => Some(self.io_bytes),
            Resource::Mem => None,
        }
    }
}

/// Each client's recent counters.
#[derive(Debug, Default)]
pub struct Usage {
    samples: BTreeMap<u32, VecDeque<Sample>>,
}

impl Usage {
    /// Records client `pid`'s counters at `at`, keeping the samples of the last [`WINDOW`] and
    /// the one just before it (so that the window is covered whole).
    pub fn record(&mut self, pid: u32, at: Instant, cpu_ns: u64, io_bytes: u64) {
        let samples = self.samples.entry(pid).or_default();
        samples.push_back(Sample {
            at,
            cpu_ns,
            io_bytes,
        });
        while samples.len() > 2 && at.duration_since(samples[1].at) >= WINDOW {
            samples.pop_front();
        }
    }

    /// Forgets the clients `keep` rejects (gone, detached).
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.samples.retain(|pid, _| keep(*pid));
    }

    /// `pid`'s part of what every client used of `r` over its recorded span (at most about
    /// [`WINDOW`]); `None` for memory, before two samples, or when no client used any.
    pub fn share(&self, pid: u32, r: Resource) -> Option<Measured> {
        let used = |s: &VecDeque<Sample>| -> Option<(u64, Duration)> {
            let (first, last) = (s.front()?, s.back()?);
            // CPU time of exited threads leaves with them: a drop counts as nothing used.
            let used = last.counter(r)?.saturating_sub(first.counter(r)?);
            Some((used, last.at.duration_since(first.at)))
        };
        let (mine, span) = used(self.samples.get(&pid)?)?;
        let total: u64 = self.samples.values().filter_map(used).map(|u| u.0).sum();
        (span > Duration::ZERO && total > 0).then(|| Measured {
            share: mine as f64 / total as f64,
            seconds: span.as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_parts_of_what_all_clients_used_over_the_window() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let mut u = Usage::default();
        assert_eq!(u.share(1, Resource::Cpu), None);
        u.record(1, s(0), 0, 0);
        u.record(2, s(0), 0, 100);
        assert_eq!(
            u.share(1, Resource::Cpu),
            None,
            "one sample each: nothing measured"
        );
        u.record(1, s(1), 300, 0);
        u.record(2, s(1), 100, 100);
        let cpu = u.share(1, Resource::Cpu).unwrap();
        assert_eq!((cpu.share, cpu.seconds), (0.75, 1.0));
        assert_eq!(u.share(2, Resource::Cpu).unwrap().share, 0.25);
        assert_eq!(u.share(1, Resource::Disk), None, "no I/O at all");
        assert_eq!(u.share(1, Resource::Mem), None);
        // Old samples go: after 10 s only the last window (and the sample before it) counts.
        for t in 2..=10 {
            u.record(1, s(t), 300, 0);
            u.record(2, s(t), 100 + 100 * (t - 1), 100);
        }
        let cpu = u.share(2, Resource::Cpu).unwrap();
        assert_eq!(cpu.share, 1.0);
        assert!(cpu.seconds <= 6.0, "{}", cpu.seconds);
        // A counter that drops (threads exited) counts as nothing used, not as a wrap.
        u.record(2, s(11), 5, 100);
        u.retain(|pid| pid == 2);
        assert_eq!(u.share(1, Resource::Cpu), None);
        assert_eq!(u.share(2, Resource::Cpu), None, "nothing left to divide");
    }
}
