//! Stopping a job's tree safely, shared by polite suspensions and idle-gate holds: the crash
//! record and the guard are in place before any SIGSTOP, and a clean exit takes both away.

use std::time::Duration;

use anyhow::{Context, Result};
use tact_linux::state::StateDir;
use tact_linux::{Guard, JobTree};

/// Stops `tree`, starting the guard first if it is not running yet (with a lease of `lease`),
/// recording every member in `state` and handing it to the guard before it is stopped. If that
/// fails, the tree is resumed before the error is returned.
pub fn stop(
    tree: &mut JobTree,
    state: &StateDir,
    guard: &mut Option<Guard>,
    lease: Duration,
) -> Result<()> {
    let guard = start(guard, lease)?;
    let stopped = tree.stop_with(|t| {
        state.record(t)?;
        guard.watch(t)
    });
    if let Err(e) = stopped {
        tree.resume().ok();
        return Err(e.into());
    }
    Ok(())
}

/// Starts the guard with a lease of `lease` unless it is running; returns it. Starting it is a
/// fork and exec of tact that reports back, tens of milliseconds and more on a loaded machine:
/// a caller that must stop the tree at once starts it ahead (`IdleJob`), and [`stop`] only when
/// it was not.
pub fn start(guard: &mut Option<Guard>, lease: Duration) -> Result<&mut Guard> {
    if guard.is_none() {
        let exe =
            std::env::current_exe().context("cannot find tact's own executable for its guard")?;
        let mut started = Guard::start(&exe, &["__guard"])?;
        started.renew(lease)?;
        *guard = Some(started);
    }
    Ok(guard.as_mut().expect("started above"))
}

/// Clean exit: the guard leaves and the crash record goes.
pub fn leave(tree: &JobTree, state: &StateDir, guard: Option<Guard>) {
    if let Some(guard) = guard {
        if let Err(e) = guard.bye() {
            tracing::warn!("guard: {e}");
        }
    }
    if let Err(e) = state.remove(tree) {
        tracing::warn!("{e}");
    }
}
