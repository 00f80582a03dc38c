//! Hosts that run a concurrency controller for real, in-process (spec `concurrency.md` §6,
//! `docs/tune.md` "Pools in Rust"): [`Pool`], a thread pool that runs at most the policy's
//! target of tasks at once, and [`Limiter`], a semaphore whose permit count the policy sets,
//! for blocking and async callers.
//!
//! Both feed a [`Policy`](tact_core::tune::Policy) (TCC, or any baseline) with the host's time
//! since it started, clamp what it answers to at least 1 (and at most the pool's
//! `max_workers`), and apply a new target at task boundaries: a grow starts waiting work at
//! once, a shrink waits for running tasks to end. Nothing is ever cancelled. With a workload
//! key ([`PoolBuilder::key`]) TCC starts from the count an earlier run with the key settled on
//! ([`warm`], the store `tact tune --key` uses).
//!
//! ```
//! use tact_core::tune::{policy_from_spec, Tcc, TuneParams};
//! use tact_lib::tune::{Limiter, Pool};
//!
//! // A pool run by TCC: 4 workers to start with, never more than 64.
//! let tcc = Tcc::new(TuneParams { n_init: 4, n_max: 64, ..TuneParams::default() })?;
//! let pool = Pool::builder().tcc(tcc).max_workers(64).queue_capacity(128).build();
//! let handles: Vec<_> = (0..100u64).map(|i| pool.submit(move || i * i)).collect();
//! let sum: u64 = handles.into_iter().map(|h| h.wait().unwrap()).sum();
//! assert_eq!(sum, 328_350);
//! let stats = pool.stats();
//! assert_eq!(stats.completed, 100);
//! println!("target {}, TCC in {:?}", stats.target, stats.status.map(|s| s.phase));
//! for (at, target) in pool.targets() {
//!     println!("{at:?}: {target}");
//! }
//! pool.shutdown(); // runs what is queued, joins the workers
//!
//! // A limiter for calls into a shared service, here run by AIMD.
//! let limiter = Limiter::new(policy_from_spec("aimd", 4, 256)?);
//! {
//!     let _permit = limiter.acquire(); // blocks while `limit()` permits are out
//!     // ... call the service ...
//! } // dropping the permit reports a completion, latency = the time it was held
//! async fn call(limiter: &Limiter) {
//!     let permit = limiter.acquire_async().await; // any executor; cancel-safe
//!     // ... a request that failed: no completion, the slot is passed on
//!     permit.forget_failed();
//! }
//! # drop(call(&limiter));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod controller;
mod hint;
mod limiter;
mod pool;
pub mod turns;
pub mod warm;

pub use controller::TARGET_HISTORY;
pub use hint::HINT_PERIOD;
pub use limiter::{Acquire, Limiter, LimiterBuilder, Permit};
pub use pool::{
    Full, Pool, PoolBuilder, PoolStats, TaskError, TaskHandle, DEFAULT_MAX_WORKERS, DEFAULT_TICK,
};
pub use turns::{
    CoordinateError, CoordinateMode, TurnEvent, TurnKind, TurnStats, Turns, DEFAULT_EPOCH,
};
pub use warm::KeyError;
