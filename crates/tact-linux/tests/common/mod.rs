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

/// Two network namespaces joined by a veth pair (`LINK_A` in the first at 10.SUBNET.7.1,
/// `LINK_B` in the second at 10.SUBNET.7.2), named `tact-test-TAG-PID-a/b`; deleted on drop.
pub struct Netns {
    pub a: String,
    pub b: String,
}

impl Netns {
    pub fn create(tag: &str, subnet: u8, link_a: &str, link_b: &str) -> Result<Netns, String> {
        let pid = std::process::id();
        let ns = Netns {
            a: format!("tact-test-{tag}{pid}-a"),
            b: format!("tact-test-{tag}{pid}-b"),
        };
        let ip = |args: &str| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args.split(' '))
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            match out.status.success() {
                true => Ok(()),
                false => Err(format!(
                    "ip {args}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            }
        };
        ip(&format!("netns add {}", ns.a))?;
        ip(&format!("netns add {}", ns.b))?;
        let (a, b) = (&ns.a, &ns.b);
        ip(&format!(
            "link add {link_a} netns {a} type veth peer name {link_b} netns {b}"
        ))?;
        ip(&format!("-n {a} addr add 10.{subnet}.7.1/24 dev {link_a}"))?;
        ip(&format!("-n {b} addr add 10.{subnet}.7.2/24 dev {link_b}"))?;
        ip(&format!("-n {a} link set {link_a} up"))?;
        ip(&format!("-n {b} link set {link_b} up"))?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
