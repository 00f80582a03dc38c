//! What the hosts' tickers read besides the time, and how: the bottleneck source both hosts take
//! (`PoolBuilder::bottleneck`, `LimiterBuilder::bottleneck`) at most every [`HINT_PERIOD`],
//! reported as [`Policy::on_hint`](tact_core::tune::Policy::on_hint), and, when the controller
//! is TCC with `TuneParams::psi` on, the pressure stall readings at most every [`PSI_PERIOD`],
//! reported as [`Policy::on_pressure`](tact_core::tune::Policy::on_pressure). Both are read
//! outside the host's lock; a tick without a utilization reading is a plain `Tick`.

use std::sync::MutexGuard;
use std::time::Duration;

use tact_core::tune::Pressure;
use tact_linux::probe::psi::{PsiReader, PSI_PERIOD};

use super::controller::Engine;

/// The shortest period at which the bottleneck's utilization is sampled: reading `/proc/stat`
/// more often gains nothing (its counters move in 10 ms ticks) and costs a read per tick.
pub const HINT_PERIOD: Duration = Duration::from_millis(100);

/// A source of the bottleneck's utilization in [0, 1] since its previous call.
pub(super) type Source = Box<dyn FnMut() -> Option<f64> + Send>;

/// The sources a host's ticker thread owns, each with the host time of its last reading.
pub(super) struct Hint {
    source: Option<Source>,
    sampled: Option<Duration>,
    psi: Option<PsiReader>,
    pressed: Option<Duration>,
}

/// What one tick reports: the time, read under the host's lock, and the readings that were due
/// and came.
pub struct Tick {
    pub at: Duration,
    pub utilization: Option<f64>,
    pub pressure: Option<Pressure>,
}

impl Hint {
    /// A host's sources: `source`, and PSI through `psi` (default `/proc/pressure`) when
    /// `engine` takes it. PSI that cannot be read turns the rules off, with one warning: the host
    /// runs as without them.
    pub(super) fn new(source: Option<Source>, psi: Option<PsiReader>, engine: &Engine) -> Hint {
        let psi = engine
            .wants_psi()
            .then(|| psi.unwrap_or_default())
            .filter(|reader| match reader.tcc_pressure() {
                Ok(_) => true,
                Err(e) => {
                    off(&e);
                    false
                }
            });
        Hint {
            source,
            sampled: None,
            psi,
            pressed: None,
        }
    }

    /// The pressure readings; one that fails turns PSI off for the rest of the run.
    fn pressure(&mut self) -> Option<Pressure> {
        match self.psi.as_ref()?.tcc_pressure() {
            Ok(p) => Some(p),
            Err(e) => {
                off(&e);
                self.psi = None;
                None
            }
        }
    }
}

/// The one warning a host gives about PSI: its `psi` reader is dropped after it.
fn off(e: &tact_linux::Error) {
    tracing::warn!("TCC psi: cannot read PSI ({e}); PSI is off, TCC judges by throughput alone");
}

/// One tick of a host's ticker, given its lock held at host time `now`. When a reading is due,
/// the lock is released while the sources run (they may read files, or wait for Python's GIL,
/// and the host's workers need the lock meanwhile) and taken again with `relock`; the time is
/// then read again under it with `clock`, so the host's events stay in time order.
pub(super) fn tick<'a, S>(
    guard: MutexGuard<'a, S>,
    now: Duration,
    hint: &mut Hint,
    relock: impl FnOnce() -> MutexGuard<'a, S>,
    clock: impl FnOnce(&S) -> Duration,
) -> (MutexGuard<'a, S>, Tick) {
    let due = |last: Option<Duration>, period| last.is_none_or(|s| now.saturating_sub(s) >= period);
    let sample = hint.source.is_some() && due(hint.sampled, HINT_PERIOD);
    let press = hint.psi.is_some() && due(hint.pressed, PSI_PERIOD);
    if !sample && !press {
        let tick = Tick {
            at: now,
            utilization: None,
            pressure: None,
        };
        return (guard, tick);
    }
    drop(guard);
    let mut utilization = None;
    if sample {
        hint.sampled = Some(now);
        utilization = hint.source.as_mut().and_then(|source| source());
    }
    let mut pressure = None;
    if press {
        hint.pressed = Some(now);
        pressure = hint.pressure();
    }
    let guard = relock();
    let at = clock(&guard);
    let tick = Tick {
        at,
        utilization,
        pressure,
    };
    (guard, tick)
}
