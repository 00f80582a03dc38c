//! Tasks the tune tests hold and measure: a gate they wait on, a meter of how many run at once,
//! and waiting on a condition with a generous deadline (the machine may be loaded).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Tasks pass one at a time per token, or all once open.
#[derive(Default)]
pub struct Gate {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Gate {
    pub fn pass(&self) {
        let mut st = self.state.lock().unwrap();
        while st.0 == 0 && !st.1 {
            st = self.cv.wait(st).unwrap();
        }
        if !st.1 {
            st.0 -= 1;
        }
    }

    pub fn tokens(&self, n: usize) {
        self.state.lock().unwrap().0 += n;
        self.cv.notify_all();
    }

    pub fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

/// Opens a gate when dropped: a failing assertion must not leave tasks blocked and the pool's
/// drop waiting for them forever.
pub struct OpenOnDrop(pub Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Concurrency seen from inside the tasks.
#[derive(Default)]
pub struct Meter {
    running: AtomicUsize,
    max: AtomicUsize,
}

impl Meter {
    pub fn enter(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    pub fn leave(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// The most that ran at once since the start or the last `reset_max`.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    pub fn reset_max(&self) {
        self.max.store(self.running(), Ordering::SeqCst);
    }
}

const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds; fails the test after a minute.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(2));
    }
}
