//! Quantization-aware accounting (spec section 6, first row): when to look at an entity between
//! two quantum ticks, and when to stop it before its allowance is gone.
//!
//! At a tick ALPS stops an entity only once it has overdrawn, so an entity overshoots by up to a
//! quantum of its use each cycle: for a one-share entity that is up to 100% of its entitlement,
//! the skewed workloads' error. An entity that could run out before the next tick is therefore
//! checked again at the earliest time it could, its allowance at full parallelism after the read.
//! Should it have run flat out it is caught at exhaustion; if not, the check is re-armed from
//! what is left. At a check, an entity whose allowance left is below half of what it would use
//! before its next decision, at its rate over the last interval, is stopped at once: the error is
//! then at most half of that use either way, instead of up to all of it, always over.

/// Least time between a read and the check it arms, and between a check and the next tick: at
/// least 1 ms (spec), and a tenth of the quantum, which keeps the wake-ups near two per quantum
/// at long quanta (simulation, docs/share.md) while a 1 ms floor costs up to three.
pub(crate) fn gap(q: f64) -> f64 {
    (q / 10.0).max(1_000_000.0)
}

/// What to do about one eligible entity just read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    /// Stop it now, with what is left of its allowance, until the cycle ends.
    pub hold: bool,
    /// Read it again at this time (ns), before the next tick.
    pub check_at: Option<f64>,
}

/// One entity's situation at a read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Situation {
    /// Allowance left, in quanta (> 0).
    pub allowance: f64,
    /// CPUs it can use at once.
    pub par: u32,
    /// CPUs it used over its last read interval, if known.
    pub rate: Option<f64>,
    /// This read's time and the next tick's, ns.
    pub now: f64,
    pub next_tick: f64,
    /// The read is a check (between ticks), not a tick: only checks stop early. (Stopping
    /// early at ticks as well, without the checks, was tried: worse on the time-slice kernel.)
    pub at_check: bool,
}

/// Decide for one entity (`q`: the quantum, ns).
pub(crate) fn plan(s: Situation, q: f64) -> Plan {
    let p = f64::from(s.par.max(1));
    // Unknown rate (first read, or first since a continue): assume it runs flat out.
    let r = s.rate.unwrap_or(p).clamp(0.0, p);
    let gap = gap(q);
    let at = (s.now + s.allowance * q / p).max(s.now + gap);
    // Closer to the tick than the gap: the tick decides.
    let check = at < s.next_tick - gap;
    let next = if check { at } else { s.next_tick };
    let hold = s.at_check && s.allowance < 0.5 * r * (next - s.now) / q;
    Plan {
        hold,
        check_at: (check && !hold).then_some(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: f64 = 10_000_000.0;

    fn at(allowance: f64, rate: Option<f64>, now: f64, at_check: bool) -> Plan {
        plan(
            Situation {
                allowance,
                par: 1,
                rate,
                now,
                next_tick: Q,
                at_check,
            },
            Q,
        )
    }

    #[test]
    fn checks_at_the_earliest_exhaustion() {
        // 0.4 quanta left at the tick: it could be gone 4 ms later.
        assert_eq!(
            at(0.4, Some(0.2), 0.0, false),
            Plan {
                hold: false,
                check_at: Some(4_000_000.0)
            }
        );
        // Two CPUs: twice as soon.
        let two = plan(
            Situation {
                allowance: 0.4,
                par: 2,
                rate: None,
                now: 0.0,
                next_tick: Q,
                at_check: false,
            },
            Q,
        );
        assert_eq!(two.check_at, Some(2_000_000.0));
    }

    #[test]
    fn the_tick_decides_near_it() {
        // Exhaustion within 1 ms of the tick, or a whole quantum away: no check.
        assert_eq!(at(0.95, Some(1.0), 0.0, false).check_at, None);
        assert_eq!(at(0.85, Some(1.0), 0.0, false).check_at, Some(8_500_000.0));
        assert_eq!(at(1.5, Some(1.0), 0.0, false).check_at, None);
        // The gap: never sooner than 1 ms after the read.
        assert_eq!(at(0.01, Some(0.0), 0.0, false).check_at, Some(1_000_000.0));
        // A tenth of a 40 ms quantum.
        let long = plan(
            Situation {
                allowance: 0.01,
                par: 1,
                rate: Some(0.0),
                now: 0.0,
                next_tick: 4.0 * Q,
                at_check: false,
            },
            4.0 * Q,
        );
        assert_eq!(long.check_at, Some(4_000_000.0));
    }

    #[test]
    fn a_check_stops_when_less_than_half_would_be_left() {
        // 0.4 ms left, running flat out, next decision 1 ms away: stop now (0.4 under, not 0.6
        // over).
        assert_eq!(
            at(0.04, Some(1.0), 5_000_000.0, true),
            Plan {
                hold: true,
                check_at: None
            }
        );
        // 0.6 ms left: go on to the next check (0.4 over at most).
        let p = at(0.06, Some(1.0), 5_000_000.0, true);
        assert!(!p.hold);
        assert_eq!(p.check_at, Some(6_000_000.0));
        // Not running: nothing to overshoot.
        assert!(!at(0.04, Some(0.0), 5_000_000.0, true).hold);
        // The same reading at a tick never stops early.
        assert!(!at(0.04, Some(1.0), 0.0, false).hold);
    }
}
