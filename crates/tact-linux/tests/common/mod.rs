//! Helpers shared by the integration tests. Tests only ever signal processes they started,
//! through pidfds opened while those processes were known to be theirs.

#![allow(dead_code)] // each test binary uses a different subset

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tact_linux::actuate::pidfd::PidFd;
use tact_linux::{ProcId, ProcReader};

/// The machine is loaded: waits are long, and only bound how long a failing test takes.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Polls `f` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `sh -c script` with a piped stdin.
pub fn sh(script: &str) -> Child {
    Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether the process is fully stopped (every thread in T); exited counts as not stopped.
pub fn is_stopped(id: ProcId) -> bool {
    let r = ProcReader::new();
    match (r.stat(id.pid), r.thread_states(id.pid)) {
        (Ok(s), Ok(states)) => s.start_time == id.start_time && states.iter().all(|&c| c == 'T'),
        _ => false,
    }
}

/// Whether the process exists with this start time and is not a zombie.
pub fn exists(id: ProcId) -> bool {
    matches!(ProcReader::new().stat(id.pid), Ok(s) if s.start_time == id.start_time && !s.is_dead())
}

/// The identities of the tree below `pid` as /proc shows it now.
pub fn tree_ids(pid: i32) -> Vec<ProcId> {
    let r = ProcReader::new();
    r.descendants(pid)
        .unwrap()
        .into_iter()
        .filter_map(|p| r.stat(p).ok().map(|s| s.id()))
        .collect()
}

/// Pidfds on processes our test started, checked against their start times after opening.
pub struct Killer(Vec<PidFd>);

impl Killer {
    pub fn new(ids: &[ProcId]) -> Killer {
        Killer(
            ids.iter()
                .filter_map(|&id| PidFd::open(id.pid).ok().filter(|_| exists(id)))
                .collect(),
        )
    }
}

impl Drop for Killer {
    /// SIGKILL then SIGCONT, so that stopped processes die too.
    fn drop(&mut self) {
        for fd in &self.0 {
            let _ = fd.send_signal(libc::SIGKILL);
            let _ = fd.send_signal(libc::SIGCONT);
        }
    }
}

/// A child that is killed and reaped when the test ends, passed or failed.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
