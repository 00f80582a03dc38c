//! The process-wide supervisor and the calling thread's unit: the MS Manners interface, where a
//! thread's first testpoint registers it and nothing needs initialising.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use crate::local::Local;
use crate::{Config, DaemonCoordinator, Error, Supervisor, UnitStats};

/// Started by the first testpoint (or [`init`]); None when regulation is disabled.
static GLOBAL: OnceLock<Option<Arc<Supervisor>>> = OnceLock::new();

/// The calling thread's unit. Its destructor runs when the thread exits, which frees the token
/// if the thread held it.
struct ThreadUnit {
    local: Local,
}

impl Drop for ThreadUnit {
    fn drop(&mut self) {
        if let Some(Some(sup)) = GLOBAL.get() {
            sup.leave(&mut self.local);
        }
    }
}

thread_local! {
    static UNIT: RefCell<ThreadUnit> = const { RefCell::new(ThreadUnit { local: Local::new() }) };
}

/// Reports progress and returns when the calling thread may go on: at once when the testpoint
/// is not due (sooner than the period since the last due one), otherwise after the thread's
/// turn of the run token comes, and after a suspension if its progress rate dropped.
///
/// `metrics` are progress *increments* since the previous call, one per metric of metric-set
/// `index` (several indices for phases, several metrics per index for concurrent progress). The
/// first call of a thread registers it: its progress is not recorded, as there is no interval
/// to measure it over. A bad call (NaN, negative or infinite progress, no metrics, or a metric
/// count other than the index had before) returns `Err` and records nothing.
///
/// Configured from the environment at the first call of the process (see [`Config::from_env`]),
/// unless [`init`] came first.
pub fn testpoint(index: u32, metrics: &[f64]) -> Result<(), Error> {
    UNIT.try_with(|cell| match cell.try_borrow_mut() {
        Ok(mut unit) => {
            let local = &mut unit.local;
            if let Some(done) = local.fast(index, metrics) {
                return done.map_err(Error::from);
            }
            match supervisor() {
                Some(sup) => sup.testpoint(local, index, metrics),
                None => {
                    local.off = true;
                    Ok(())
                }
            }
        }
        // Re-entered from a signal handler that interrupted a testpoint: let it through.
        Err(_) => Ok(()),
    })
    // The thread is exiting (a testpoint from another thread-local's destructor): nothing left
    // to regulate.
    .unwrap_or(Ok(()))
}

/// Sets the calling thread's priority among the regulated units of the process: a higher one
/// always runs first when eligible. The default is 0. A priority outside
/// [`PRIORITY_RANGE`](crate::PRIORITY_RANGE) (the tact daemon's, -100 to 100) is refused with
/// [`Error::Priority`] and changes nothing.
pub fn set_priority(priority: i32) -> Result<(), Error> {
    check_priority(priority)?;
    // Outside of a thread's life (its destructors), there is nothing to set.
    let _ = UNIT.try_with(|cell| {
        if let Ok(mut unit) = cell.try_borrow_mut() {
            match supervisor() {
                Some(sup) => sup.set_priority(&mut unit.local, priority),
                None => unit.local.priority = priority,
            }
        }
    });
    Ok(())
}

/// Priorities range as the daemon's protocol allows: the process's units reach the daemon with
/// theirs.
pub(crate) fn check_priority(priority: i32) -> Result<(), Error> {
    if crate::PRIORITY_RANGE.contains(&priority) {
        Ok(())
    } else {
        Err(Error::Priority(priority))
    }
}

/// What the calling thread's unit has been through; None before its first testpoint.
pub fn stats() -> Option<UnitStats> {
    let sup = GLOBAL.get()?.as_ref()?;
    UNIT.try_with(|cell| sup.stats(&cell.try_borrow().ok()?.local))
        .ok()
        .flatten()
}

/// Saves the calibrated targets now. They are also saved every 5 minutes and at exit.
pub fn flush() -> Result<(), Error> {
    match GLOBAL.get() {
        Some(Some(sup)) => sup.flush(),
        _ => Ok(()),
    }
}

/// The process-wide supervisor (started from the environment if need be), to install a
/// coordinator or read its settings; None when regulation is disabled.
pub fn supervisor() -> Option<&'static Arc<Supervisor>> {
    GLOBAL.get_or_init(|| start(Config::from_env())).as_ref()
}

/// Sets up the process-wide supervisor with `config` instead of the environment. Must come
/// before anything that starts it from the environment: the first testpoint, [`set_priority`],
/// [`supervisor`] or a [`crate::Polite`] unit; afterwards it returns [`Error::AlreadyStarted`].
pub fn init(config: Config) -> Result<(), Error> {
    config.polite.validate()?;
    let mut started = false;
    GLOBAL.get_or_init(|| {
        started = true;
        start(config)
    });
    if started {
        Ok(())
    } else {
        Err(Error::AlreadyStarted)
    }
}

fn start(config: Config) -> Option<Arc<Supervisor>> {
    if config.disabled {
        return None;
    }
    let name = config.name.clone().unwrap_or_else(program_name);
    match Supervisor::with_config(config) {
        Ok(sup) => {
            if let Some(daemon) = DaemonCoordinator::find(&name) {
                sup.set_coordinator(Some(Box::new(daemon)));
            }
            // SAFETY: registers a function without preconditions that never unwinds.
            unsafe { libc::atexit(save_at_exit) };
            Some(sup)
        }
        Err(e) => {
            eprintln!("tact: {e}; running unregulated");
            None
        }
    }
}

/// What `tact status` calls this process: its executable's file name.
fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "library".into())
}

/// Targets are saved at exit (spec 2.7). Runs in `exit()`: it must not unwind into libc.
extern "C" fn save_at_exit() {
    let saved = std::panic::catch_unwind(flush);
    if let Ok(Err(e)) = saved {
        eprintln!("tact: {e}");
    }
}
