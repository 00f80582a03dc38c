//! Turns: several TCC instances on one bottleneck explore one at a time, or together at shared
//! epochs (spec §6 item 4; `docs/tune.md` "Several instances on one bottleneck").
//!
//! Theorem 1 bounds a cycle's gain against other tasks that hold their count while it explores.
//! Two instances that explore at once break that premise: each reads the other's cut as room and
//! its rise as a decline, and the counts drift apart or escalate. So once the host coordinates
//! ([`Policy::coordinate`](super::Policy::coordinate)), a cycle starts only when the host grants
//! a turn; until then the controller holds its count and keeps measuring.
//!
//! This module only keeps the bookkeeping; [`Tcc`](super::Tcc) decides when a start is due and
//! what a grant does.

use super::policy::{Phase, Reason};

/// A cycle start from Steady, with what decided it (for its transition and the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Start {
    /// `Timeout` or `Shift` start from the base cut of the count; `Room` from the count itself.
    pub reason: Reason,
    pub hinted: bool,
    pub psi: bool,
    /// The hint's crowding rule started it ([`Turns::long`]): the count it is taken from is
    /// kept, so the rule does not start again from there (see `Tcc::crowded`).
    pub crowded: bool,
}

impl Start {
    pub fn new(reason: Reason) -> Self {
        Start {
            reason,
            hinted: false,
            psi: false,
            crowded: false,
        }
    }

    pub fn hinted(reason: Reason) -> Self {
        Start {
            hinted: true,
            ..Start::new(reason)
        }
    }

    pub fn psi(reason: Reason) -> Self {
        Start {
            psi: true,
            ..Start::new(reason)
        }
    }

    /// The hint's crowding rule: a `Shift` from the base cut, as its saturation rule's.
    pub fn crowded() -> Self {
        Start {
            crowded: true,
            ..Start::hinted(Reason::Shift)
        }
    }
}

/// One configuration's samples while the turn is held, by whose completion ended them: the
/// instance's own, or its peers'. Their ratio is the instance's share of the key's completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Share {
    own: u64,
    peer: u64,
}

impl Share {
    pub fn add(&mut self, peer: bool) {
        if peer {
            self.peer += 1;
        } else {
            self.own += 1;
        }
    }

    /// `n` of the peers' completions at once (a host's batch).
    pub fn add_peers(&mut self, n: u32) {
        self.peer += u64::from(n);
    }

    pub fn merge(&self, other: &Share) -> Share {
        Share {
            own: self.own + other.own,
            peer: self.peer + other.peer,
        }
    }

    /// The samples counted since `mark`, an earlier value of the same running count.
    pub fn since(&self, mark: &Share) -> Share {
        Share {
            own: self.own - mark.own,
            peer: self.peer - mark.peer,
        }
    }

    /// The peers' completions in workers of the instance's own, for `n` of them: what the
    /// others run, if their workers complete tasks as fast as its own do.
    pub fn others(&self, n: usize) -> f64 {
        if self.own == 0 {
            f64::INFINITY
        } else {
            n as f64 * self.peer as f64 / self.own as f64
        }
    }

    /// The own completions' fraction of all (1 without peers' completions).
    fn fraction(&self) -> f64 {
        let all = self.own + self.peer;
        if all == 0 {
            1.0
        } else {
            self.own as f64 / all as f64
        }
    }
}

/// Coordination state: off until the host calls `coordinate()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Turns {
    on: bool,
    /// Live instances on the key, this one included, as the host last said (0 and 1: alone).
    instances: usize,
    /// The first cycle waits for the first grant (the controller holds its initial count).
    first: bool,
    /// A start from Steady that waits for a grant.
    due: Option<Start>,
    /// More instances came while the turn was held: the cycle ends at the next event.
    joined: bool,
    /// More instances came since the last cycle began: the steady state judges its count
    /// against the new fair share once ([`Turns::take_rejudge`]).
    rejudge: bool,
}

impl Turns {
    /// Coordination from now on. `fresh`: no event came yet, so the first cycle waits too.
    pub fn coordinate(&mut self, fresh: bool) {
        self.on = true;
        self.first = fresh;
    }

    pub fn on(&self) -> bool {
        self.on
    }

    /// `k` live instances from now on. More than before (0 and 1 both mean alone) while
    /// `holding` the turn, coordinated: a newcomer's completions now enter the holder's samples
    /// partway through a configuration, and it waits for the rest of the cycle, so the cycle is
    /// to end ([`Turns::take_joined`]). Fewer end nothing: nobody waits for the turn, and
    /// the completions that leave T can at worst make the step under way look worse, which
    /// errs towards fewer workers.
    ///
    /// More, coordinated, also changes every instance's fair share, whatever the phase: the
    /// steady count this instance holds (or will hold, when a held cycle ends at the join) was
    /// judged against the old one, so its steady state judges it once more
    /// ([`Turns::take_rejudge`]), unless a cycle begins first and judges it with the new k.
    pub fn set_instances(&mut self, k: usize, holding: bool) {
        let more = self.on && k.max(1) > self.instances.max(1);
        self.joined |= more && holding;
        self.rejudge |= more;
        self.instances = k;
    }

    /// Whether an instance joined while the turn was held, since the last call.
    pub fn take_joined(&mut self) -> bool {
        std::mem::take(&mut self.joined)
    }

    /// Whether an instance joined since the last cycle began (and since the last call): once
    /// per join, the steady state's count is judged against the new fair share.
    pub fn take_rejudge(&mut self) -> bool {
        std::mem::take(&mut self.rejudge)
    }

    /// A cycle begins: it judges its counts with the k in force, so no steady count waits to
    /// be judged against it.
    pub fn cycle_begins(&mut self) {
        self.rejudge = false;
    }

    /// The fair-share rule applies to a configuration of `n` workers with `share`: coordinated,
    /// with peers (k ≥ 2, and some of their completions among its samples), and its own
    /// fraction of the key's completions below its fair share 1/k by more than one of its
    /// workers' part (fraction × (n + 1)/n < 1/k). Counts are whole: at 1–3 workers a front
    /// one worker short is as fair as the counts allow (3 and 2 split 60/40), and holding
    /// every instance to 1/k exactly would make each refuse any removal and the total climb.
    pub fn short(&self, n: usize, share: Share) -> bool {
        let n = n.max(1) as f64;
        self.on
            && self.instances >= 2
            && share.peer > 0
            && share.fraction() * (n + 1.0) / n * (self.instances as f64) < 1.0
    }

    /// The mirror of [`Turns::short`], for the hint's crowding rule: coordinated, with peers
    /// (k ≥ 2, and some of their completions counted), and giving one of its `n` workers back
    /// would still leave the instance above its fair share 1/k, its workers counted as alike:
    /// fraction × (n − 1)/(n − fraction) > 1/k (the exact share after the removal, where
    /// `short`'s (n + 1)/n leaves out the added worker's place in the total, erring towards
    /// fair). So 5 workers beside 3 (62.5%) are long, 5 beside 4 (55.6%, 50% after one) and
    /// 2 beside 1 are not.
    pub fn long(&self, n: usize, share: Share) -> bool {
        let (f, k) = (share.fraction(), self.instances as f64);
        let n = n as f64;
        self.on
            && self.instances >= 2
            && share.peer > 0
            && n >= 2.0
            && f * (n - 1.0) / (n - f) * k > 1.0
    }

    /// Coordinated, with peers, and at or above the fair share 1/k: what the instance holds
    /// beyond it, the others below theirs can use (the hint's remove rule yields to them).
    pub fn fair_or_above(&self, share: Share) -> bool {
        self.on
            && self.instances >= 2
            && share.peer > 0
            && share.fraction() * self.instances as f64 >= 1.0
    }

    /// Live instances on the key as the host last said (0 and 1: alone).
    pub fn instances(&self) -> usize {
        self.instances
    }

    /// What the fair-share rule judges a configuration by: the bottleneck's throughput `total`
    /// (its samples' throughput while the turn is held) times min(k × own fraction, 1). At or
    /// above the fair share that is the bottleneck's throughput; below it, the instance's own
    /// throughput × k, so taking share up to 1/k counts as a gain and giving share back below
    /// it as a loss, while beyond 1/k only the bottleneck's gains count.
    pub fn fair_value(&self, total: f64, share: Share) -> f64 {
        let k = self.instances.max(1) as f64;
        total * (k * share.fraction()).min(1.0)
    }

    /// The first cycle has not had its turn yet.
    pub fn first_waits(&self) -> bool {
        self.first
    }

    /// The instance holds the turn: coordinated, its first cycle granted, and exploring.
    pub fn holds(&self, phase: Phase) -> bool {
        self.on && !self.first && phase != Phase::Steady
    }

    /// A start from Steady waits.
    pub fn due(&self) -> bool {
        self.due.is_some()
    }

    /// Whether `start` must wait (it is then kept, unless one is kept already). The first start
    /// that came is the one a grant makes, with one exception: a start from the base cut
    /// replaces a waiting `Room`, since only `Room` skips the cut and a later timeout or shift
    /// says the count's room may be gone.
    pub fn defer(&mut self, start: Start) -> bool {
        if !self.on {
            return false;
        }
        match self.due {
            Some(d) if !(d.reason == Reason::Room && start.reason != Reason::Room) => {}
            _ => self.due = Some(start),
        }
        true
    }

    /// The grant: the first cycle's wait ends (true), or the waiting start is handed out.
    pub fn grant_first(&mut self) -> bool {
        std::mem::take(&mut self.first)
    }

    pub fn take_due(&mut self) -> Option<Start> {
        self.due.take()
    }
}
