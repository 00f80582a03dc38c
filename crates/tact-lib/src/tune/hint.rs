//! The bottleneck source both hosts take (`PoolBuilder::bottleneck`, `LimiterBuilder::bottleneck`)
//! and how their tickers read it: at most every [`HINT_PERIOD`], outside the host's lock, the
//! reading reported as [`Policy::on_hint`](tact_core::tune::Policy::on_hint) and a tick without
//! one as a plain `Tick`.

use std::sync::MutexGuard;
use std::time::Duration;

/// The shortest period at which the bottleneck's utilization is sampled: reading `/proc/stat`
/// more often gains nothing (its counters move in 10 ms ticks) and costs a read per tick.
pub const HINT_PERIOD: Duration = Duration::from_millis(100);

/// A source of the bottleneck's utilization in [0, 1] since its previous call.
pub(super) type Source = Box<dyn FnMut() -> Option<f64> + Send>;

/// A source with the time of its last reading, owned by the host's ticker thread.
pub(super) struct Hint {
    source: Source,
    sampled: Option<Duration>,
}

/// What one tick reports: the time, read under the host's lock, and the reading if one was due
/// and the source gave one.
pub(super) struct Tick {
    pub at: Duration,
    pub utilization: Option<f64>,
}

impl Hint {
    pub(super) fn new(source: Source) -> Hint {
        Hint {
            source,
            sampled: None,
        }
    }
}

/// One tick of a host's ticker, given its lock held at host time `now`. When `hint` is due, the
/// lock is released while the source runs (it may read files, or wait for Python's GIL, and the
/// host's workers need the lock meanwhile) and taken again with `relock`; the time is then read
/// again under it with `clock`, so the host's events stay in time order.
pub(super) fn tick<'a, S>(
    guard: MutexGuard<'a, S>,
    now: Duration,
    hint: Option<&mut Hint>,
    relock: impl FnOnce() -> MutexGuard<'a, S>,
    clock: impl FnOnce(&S) -> Duration,
) -> (MutexGuard<'a, S>, Tick) {
    let due = |h: &&mut Hint| {
        h.sampled
            .is_none_or(|s| now.saturating_sub(s) >= HINT_PERIOD)
    };
    let Some(hint) = hint.filter(due) else {
        let tick = Tick {
            at: now,
            utilization: None,
        };
        return (guard, tick);
    };
    hint.sampled = Some(now);
    drop(guard);
    let utilization = (hint.source)();
    let guard = relock();
    let at = clock(&guard);
    (guard, Tick { at, utilization })
}
