//! A tact a test started, and the job processes it saw: killed whatever the test's outcome.

use std::process::{Child, Command};
use std::time::Duration;

use tact_linux::actuate::pidfd::PidFd;
use tact_linux::{ProcId, ProcReader};

use super::{tree, wait_for};

/// Generous: the machine may be heavily loaded.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A tact the test started and the job processes it saw: whatever is left of them when the test
/// ends, passed or failed, is killed (through a pidfd, checked against its start time).
pub struct Started {
    pub tact: Child,
    seen: Vec<ProcId>,
}

impl Started {
    pub fn spawn(command: &mut Command) -> Started {
        Started {
            tact: command.spawn().unwrap(),
            seen: Vec::new(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.tact.id() as i32
    }

    /// Waits until tact's tree has a process whose command line is exactly `cmdline`;
    /// remembers it.
    pub fn member(&mut self, cmdline: &str) -> ProcId {
        let r = ProcReader::new();
        let mut found = None;
        wait_for(LIMIT, &format!("`{cmdline}` to start"), || {
            found = tree(self.pid())
                .into_iter()
                .find(|&p| r.cmdline(p).is_ok_and(|a| a.join(" ") == cmdline));
            found.is_some()
        });
        let id = r.stat(found.unwrap()).unwrap().id();
        self.seen.push(id);
        id
    }

    /// tact's exit code.
    pub fn wait(&mut self) -> i32 {
        let mut status = None;
        wait_for(LIMIT, "tact to exit", || {
            status = self.tact.try_wait().unwrap();
            status.is_some()
        });
        status
            .unwrap()
            .code()
            .expect("tact exits, it is not killed")
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        for id in &self.seen {
            if let Ok(fd) = PidFd::open(id.pid) {
                // Opened first, checked after: the pidfd then names the process we saw or none.
                if alive(*id) {
                    let _ = fd.send_signal(libc::SIGKILL);
                }
            }
        }
        let _ = self.tact.kill();
        let _ = self.tact.wait();
    }
}

/// Whether `id` still names a running process (not exited, not a zombie waiting for a reaper).
pub fn alive(id: ProcId) -> bool {
    ProcReader::new()
        .stat(id.pid)
        .is_ok_and(|s| s.start_time == id.start_time && !s.is_dead())
}
