//! `tact-linux`: the only crate of tact that touches the operating system.
//!
//! * [`probe`] reads (never writes): [`ProcReader`] parses `/proc/PID/{stat,status,io,schedstat}`
//!   under a root directory you choose (so tests run on fixture trees), and [`ProgressMeter`]
//!   turns per-process counters into cumulative, never-decreasing progress totals of a job's tree
//!   for each [`ProgressSource`] (`io`, `io-read`, `io-write`, `io-storage`, `cpu`, `file:PATH`).
//! * [`actuate`] changes things: [`JobTree`] stops and resumes the whole process tree of a job
//!   through pidfds, so a recycled pid is never signalled.
//! * [`guard`] is the watchdog that resumes the tree if the regulator dies or hangs
//!   ([`Guard`] on the regulator's side, [`guard::serve`] in the watchdog process).
//! * [`gate`] holds a command tact starts until tact has taken charge of it, and ends it
//!   unstarted if tact dies first ([`gate::held_shell`]).
//! * [`state`] writes state files so that a later `tact recover` resumes what a dead regulator and
//!   a dead guard both left stopped ([`state::StateDir`], [`state::recover`]).
//!
//! How the binary uses them, per job (`tact run`/`tact attach`):
//!
//! ```text
//! state::recover(&StateDir::default_dir()?)?;           // at the start of every tact command
//! let mut tree = JobTree::attach(pid)?;
//! let state = StateDir::new(StateDir::default_dir()?)?;
//! let mut guard = Guard::start(&std::env::current_exe()?, &["__guard"])?;
//! guard.renew(lease)?;                                  // lease = S_max + 5 s; renew every tick
//! loop {
//!     tree.refresh()?;
//!     // to suspend:
//!     tree.stop_with(|t| { state.record(t)?; guard.watch(t) })?;
//!     // to continue:
//!     tree.resume()?;
//! }
//! tree.resume()?; guard.bye()?; state.remove(&tree)?;   // clean exit, in this order
//! ```
//!
//! and `tact __guard` does `guard::serve(guard::inherited_socket()?)`.

pub mod actuate;
mod error;
pub mod gate;
pub mod guard;
pub mod probe;
pub mod rate;
pub mod state;
pub mod targets;
pub mod timer;

pub use actuate::tree::JobTree;
pub use error::{Error, Result};
pub use guard::Guard;
pub use probe::proc::{ProcId, ProcReader};
pub use probe::progress::{ProgressMeter, ProgressSource};
pub use probe::psi::{PsiReader, StallMeter};
pub use targets::{target_key, TargetStore};
