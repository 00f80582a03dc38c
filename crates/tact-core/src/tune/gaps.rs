//! Gaps between completions: the moving mean that `tact tune --freeze` watches for stalls
//! ([`super::freeze`]), and spec §6's starvation rule for hosts that cannot see saturation: "a
//! gap longer than 10× the mean inter-completion time counts as starvation" ([`GapRule`], which
//! [`super::Tcc`] applies once the host calls [`super::Policy::saturation_unseen`]).

use std::time::Duration;

/// A gap longer than this many mean gaps is starvation (spec §6).
pub const STARVED_GAPS: u32 = 10;
/// The weight of each new instant's gap in the moving mean: some ten instants with completions.
const WEIGHT: f64 = 0.1;

/// The moving mean of the gaps between completions, and the instant of the latest ones.
///
/// Completions reported at one instant share the gap since the instant before: n of them after
/// a gap g enter the mean as one gap of g/n. A host that polls sees several at once, and
/// counting them as gaps of zero would pull the mean far below the real spacing (eight at a
/// time every 40 ms would read as a mean of 3.4 ms, not 5, and every 40 ms gap as starvation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gaps {
    /// The instant of the latest completions (or of the origin), and how many ended then.
    last: Option<Duration>,
    ended: u32,
    /// The gap that ended at `last` as it enters the mean (capped; none for the first
    /// completions without an origin), and the mean before it.
    gap: Option<Duration>,
    before: Option<Duration>,
    mean: Option<Duration>,
}

impl Gaps {
    /// Gaps counted from `origin`, as if tasks had ended then (a pool that just started).
    pub fn since(origin: Duration) -> Self {
        Gaps {
            last: Some(origin),
            ..Gaps::default()
        }
    }

    /// The moving mean of the gaps between completions, once one gap is known.
    pub fn mean(&self) -> Option<Duration> {
        self.mean
    }

    /// The instant of the latest completions, or of the origin or the latest restart.
    pub fn last(&self) -> Option<Duration> {
        self.last
    }

    /// `n` tasks ended at `at`. The gap since the latest instant enters the mean, capped at
    /// `cap` (a starved gap moves the mean by no more than the bound it broke, so that one long
    /// pause does not hide the next, while a pool that really slowed down is soon judged by its
    /// new pace). The first completions without an origin only start the chain.
    pub fn completed(&mut self, n: u32, at: Duration, cap: Option<Duration>) {
        if n == 0 {
            return;
        }
        match self.last {
            // More at the same instant: the same gap, shared by more tasks.
            Some(last) if last == at && self.ended > 0 => self.ended += n,
            Some(last) => {
                let gap = at.saturating_sub(last);
                self.gap = Some(cap.map_or(gap, |c| gap.min(c)));
                self.before = self.mean;
                self.ended = n;
            }
            None => self.ended = n,
        }
        self.last = Some(at);
        let Some(gap) = self.gap else {
            return;
        };
        let gap = gap / self.ended;
        self.mean = Some(match self.before {
            Some(mean) => mean.mul_f64(1.0 - WEIGHT) + gap.mul_f64(WEIGHT),
            None => gap,
        });
    }

    /// The next gap counts from `at`, the mean unchanged (a pool whose frozen workers were just
    /// swapped in starts a new wait).
    pub fn restart(&mut self, at: Duration) {
        self.last = Some(at);
        self.ended = 0;
    }
}

/// Spec §6's starvation rule for a host that cannot see saturation (it reports a guess, or
/// "all busy", as its load): a gap between completions longer than [`STARVED_GAPS`] mean gaps
/// is starvation, whatever the host says. Busy time since the last completion is held back
/// until the next one: credited when the gap ends within the bound, dropped when it outgrows it
/// (the whole gap is starved, not only its part past the bound), so that no busy time and no
/// sample spans a pause in the input, as with a host that reports its queue running dry.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GapRule {
    gaps: Gaps,
    /// Busy time by the host's load since the last completion, not credited yet.
    pending: Duration,
    /// The gap in progress has outgrown the bound.
    starved: bool,
}

impl GapRule {
    /// The longest gap that is not starvation while `workers` run: [`STARVED_GAPS`] mean gaps,
    /// and at least two rounds of the pool (2·workers mean gaps). A pool whose tasks end
    /// together (CPU-bound workers sharing fewer cores finish their rounds together) completes
    /// n tasks at a time, a round of n mean gaps apart; by the spec's 10× alone, every gap
    /// between rounds of more than ten workers would count as starvation and nothing would be
    /// measured. None until a gap is known.
    pub fn bound(&self, workers: usize) -> Option<Duration> {
        let times = (STARVED_GAPS as usize).max(2 * workers);
        let times = u32::try_from(times).unwrap_or(u32::MAX);
        self.gaps.mean().map(|m| m.saturating_mul(times))
    }

    /// Whether the gap in progress has outgrown the bound, as of the latest event (a completion
    /// starts a new one).
    pub fn starved(&self) -> bool {
        self.starved
    }

    /// An event at `at` (a completion when `complete`), with `busy` more busy time by the host's
    /// load since the previous event: the busy time to credit now, or None when the gap in
    /// progress is starved (it credits nothing, and a completion that ends it is no sample).
    pub fn credit(
        &mut self,
        busy: Duration,
        at: Duration,
        complete: bool,
        workers: usize,
    ) -> Option<Duration> {
        let bound = self.bound(workers);
        let since = self.gaps.last().map(|last| at.saturating_sub(last));
        let starved = matches!((since, bound), (Some(s), Some(b)) if s > b);
        if starved {
            self.pending = Duration::ZERO;
        } else {
            self.pending += busy;
        }
        self.starved = starved && !complete;
        if complete {
            self.gaps.completed(1, at, bound);
        }
        match (starved, complete) {
            (true, _) => None,
            (false, true) => Some(std::mem::take(&mut self.pending)),
            (false, false) => Some(Duration::ZERO),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn completions_at_one_instant_share_its_gap() {
        let mut g = Gaps::default();
        g.completed(1, MS * 100, None);
        g.completed(2, MS * 100, None);
        assert_eq!(g.mean(), None, "the first completions only start the chain");
        // Four at once, 40 ms later: four gaps of 10 ms, one after the other or in one call.
        for _ in 0..4 {
            g.completed(1, MS * 140, None);
        }
        assert_eq!(g.mean(), Some(MS * 10));
        let mut h = Gaps::default();
        h.completed(3, MS * 100, None);
        h.completed(4, MS * 140, None);
        assert_eq!(g, h);
        // The mean moves by a tenth of each new instant's gap.
        g.completed(1, MS * 160, None);
        assert_eq!(g.mean(), Some(MS * 11));
        g.completed(0, MS * 900, None);
        assert_eq!(g.last(), Some(MS * 160), "no completion, nothing changes");
    }

    #[test]
    fn a_capped_gap_moves_the_mean_by_the_cap() {
        let mut g = Gaps::since(Duration::ZERO);
        g.completed(1, MS * 10, None);
        assert_eq!(g.mean(), Some(MS * 10));
        g.completed(1, MS * 1010, Some(MS * 100));
        assert_eq!(g.mean(), Some(MS * 19));
        // A restart moves the instant only.
        g.restart(MS * 2000);
        g.completed(1, MS * 2019, None);
        assert_eq!(g.mean(), Some(MS * 19));
        assert_eq!(g.last(), Some(MS * 2019));
    }

    /// Completions every 10 ms, then one after `gap`: the busy time credited by the last.
    fn after_gap(gap: Duration, workers: usize) -> Option<Duration> {
        let mut rule = GapRule::default();
        let mut t = Duration::ZERO;
        assert_eq!(
            rule.credit(Duration::ZERO, t, true, workers),
            Some(Duration::ZERO)
        );
        for _ in 0..20 {
            t += MS * 10;
            assert_eq!(rule.credit(MS * 10, t, true, workers), Some(MS * 10));
        }
        t += gap;
        let credited = rule.credit(gap, t, true, workers);
        assert!(!rule.starved(), "a completion starts the next gap");
        credited
    }

    #[test]
    fn eleven_mean_gaps_are_starvation_and_nine_are_not() {
        assert_eq!(after_gap(MS * 110, 1), None);
        assert_eq!(after_gap(MS * 90, 1), Some(MS * 90));
        // Two rounds of 8 workers are 16 mean gaps: 110 ms is one round and a bit.
        assert_eq!(after_gap(MS * 110, 8), Some(MS * 110));
        assert_eq!(after_gap(MS * 170, 8), None);
    }

    #[test]
    fn busy_time_waits_for_the_gap_to_end() {
        let mut rule = GapRule::default();
        let zero = Some(Duration::ZERO);
        assert_eq!(rule.credit(Duration::ZERO, Duration::ZERO, true, 1), zero);
        assert_eq!(rule.bound(1), None, "no rule before a gap is known");
        assert_eq!(rule.credit(MS * 10, MS * 10, true, 1), Some(MS * 10));
        // Within the bound: held back, then credited whole with the completion.
        assert_eq!(rule.credit(MS * 50, MS * 60, false, 1), zero);
        assert!(!rule.starved());
        assert_eq!(rule.credit(MS * 40, MS * 100, true, 1), Some(MS * 90));
        // Past the bound (mean 18 ms, 180 ms): the part already held back goes too.
        assert_eq!(rule.bound(1), Some(MS * 180));
        assert_eq!(rule.credit(MS * 150, MS * 250, false, 1), zero);
        assert!(!rule.starved());
        assert_eq!(rule.credit(MS * 50, MS * 300, false, 1), None);
        assert!(rule.starved());
        assert_eq!(rule.credit(MS * 5, MS * 305, true, 1), None);
        assert!(!rule.starved(), "a completion starts the next gap");
        // The starved gap entered the mean capped at the bound: 0.9·18 + 0.1·180 ms.
        assert_eq!(rule.bound(1), Some(Duration::from_micros(34_200) * 10));
        assert_eq!(rule.credit(MS * 20, MS * 325, true, 1), Some(MS * 20));
    }
}
