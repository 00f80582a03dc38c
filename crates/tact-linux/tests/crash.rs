//! Crash safety (spec 5.3) with real processes: the guard resumes a tree when its regulator is
//! SIGKILLed or hangs, and `state::recover` resumes it when no guard is left.
//!
//! The regulator and the guard are this test binary run again with `--exact role_...` and a
//! marker argument; without the marker the role tests do nothing.

mod common;

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use tact_linux::guard::{self, Guard, GuardExit};
use tact_linux::state::{recover, StateDir};
use tact_linux::{JobTree, ProcId};

const GUARD_MARKER: &str = "TACT_ROLE_GUARD";
const REGULATOR_MARKER: &str = "TACT_ROLE_REGULATOR";

fn has_marker(marker: &str) -> bool {
    std::env::args().any(|a| a == marker)
}

fn start_guard() -> Guard {
    let exe = std::env::current_exe().unwrap();
    Guard::start(
        &exe,
        &["--exact", "role_guard", "--nocapture", GUARD_MARKER],
    )
    .unwrap()
}

/// A job: two sleepers and a busy loop under a shell.
fn start_job() -> (Reaped, JobTree) {
    let child = Reaped(sh(
        "sleep 60 & sleep 60 & sh -c 'while :; do :; done' & wait",
    ));
    let mut tree = JobTree::attach(child.0.id() as i32).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 4
    }));
    (child, tree)
}

#[test]
fn role_guard() {
    if has_marker(GUARD_MARKER) {
        let exit = guard::serve(guard::inherited_socket().unwrap());
        std::process::exit(if exit.is_ok() { 0 } else { 1 });
    }
}

/// Stops a job, records it in `$TACT_TEST_STATE_DIR`, hands it to a guard if
/// `$TACT_TEST_GUARD` is 1, prints the members, then waits to be killed.
#[test]
fn role_regulator() {
    if !has_marker(REGULATOR_MARKER) {
        return;
    }
    let (child, mut tree) = start_job();
    let state = StateDir::new(std::env::var_os("TACT_TEST_STATE_DIR").unwrap()).unwrap();
    let mut guard = (std::env::var("TACT_TEST_GUARD").unwrap() == "1").then(start_guard);
    if let Some(g) = guard.as_mut() {
        g.renew(Duration::from_secs(60)).unwrap();
    }
    tree.stop_with(|t| {
        state.record(t)?;
        guard.as_mut().map_or(Ok(()), |g| g.watch(t))
    })
    .unwrap();
    let ids: Vec<String> = tree
        .members()
        .iter()
        .map(|id| format!("{}:{}", id.pid, id.start_time))
        .collect();
    println!("TACT-PIDS {}", ids.join(" "));
    std::thread::sleep(Duration::from_secs(120));
    drop(child);
}

/// Runs a regulator process and returns it with the members it stopped.
fn run_regulator(state_dir: &Path, with_guard: bool) -> (Reaped, Vec<ProcId>) {
    let mut reg = Reaped(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "role_regulator", "--nocapture", REGULATOR_MARKER])
            .env("TACT_TEST_STATE_DIR", state_dir)
            .env("TACT_TEST_GUARD", if with_guard { "1" } else { "0" })
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = BufReader::new(reg.0.stdout.take().unwrap());
    // Where the harness runs tests one at a time (one CPU), libtest prints "test role_regulator
    // ... " before the test's own output, on the same line.
    let line = out
        .lines()
        .map(|l| l.unwrap())
        .find_map(|l| l.split_once("TACT-PIDS ").map(|(_, ids)| ids.to_string()))
        .expect("the regulator reports its members");
    let ids = line
        .split_whitespace()
        .map(|w| {
            let (pid, start) = w.split_once(':').unwrap();
            ProcId {
                pid: pid.parse().unwrap(),
                start_time: start.parse().unwrap(),
            }
        })
        .collect();
    (reg, ids)
}

#[test]
fn guard_resumes_the_tree_when_the_regulator_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let (mut reg, members) = run_regulator(dir.path(), true);
    let _killer = Killer::new(&members);
    assert_eq!(members.len(), 4);
    assert!(members.iter().all(|&id| is_stopped(id)));

    reg.0.kill().unwrap(); // SIGKILL
    reg.0.wait().unwrap();
    // The guard reacts to end of file at once; the margin is for a loaded machine.
    assert!(wait_until(Duration::from_secs(5), || members
        .iter()
        .all(|&id| !is_stopped(id))));
}

#[test]
fn recover_resumes_what_a_dead_regulator_left_without_a_guard() {
    let dir = tempfile::tempdir().unwrap();
    let (mut reg, members) = run_regulator(dir.path(), false);
    let _killer = Killer::new(&members);
    assert!(members.iter().all(|&id| is_stopped(id)));
    // While the regulator lives, its record is left alone.
    let report = recover(dir.path()).unwrap();
    assert_eq!((report.live.len(), report.resumed.len()), (1, 0));

    reg.0.kill().unwrap();
    reg.0.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        members.iter().all(|&id| is_stopped(id)),
        "nobody else resumes them"
    );

    let report = recover(dir.path()).unwrap();
    let mut resumed = report.resumed.clone();
    resumed.sort();
    let mut expected = members.clone();
    expected.sort();
    assert_eq!(resumed, expected);
    assert_eq!(report.removed.len(), 1);
    assert!(wait_until(PATIENCE, || members
        .iter()
        .all(|&id| !is_stopped(id))));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn guard_bye_leaves_everything_alone() {
    let (_child, mut tree) = start_job();
    let members = tree.members();
    let _killer = Killer::new(&members);
    let mut guard = start_guard();
    guard.renew(Duration::from_secs(60)).unwrap();
    tree.stop_with(|t| guard.watch(t)).unwrap();
    guard.bye().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(members.iter().all(|&id| is_stopped(id)));
    tree.resume().unwrap();
    assert!(wait_until(PATIENCE, || members
        .iter()
        .all(|&id| !is_stopped(id))));
}

#[test]
fn guard_resumes_when_the_lease_is_not_renewed() {
    let (_child, mut tree) = start_job();
    let members = tree.members();
    let _killer = Killer::new(&members);
    let mut guard = start_guard();
    let guard_pid = guard.pid() as i32;
    guard.renew(Duration::from_millis(300)).unwrap();
    tree.stop_with(|t| guard.watch(t)).unwrap();
    assert!(wait_until(PATIENCE, || members
        .iter()
        .all(|&id| !is_stopped(id))));
    // Its job done, the guard exited (it is our child until reaped: a zombie).
    assert!(wait_until(PATIENCE, || {
        tact_linux::ProcReader::new()
            .stat(guard_pid)
            .map_or(true, |s| s.is_dead())
    }));
}

#[test]
fn serve_reports_why_it_returned() {
    use nix::sys::socket::{recv, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .unwrap();
    let server = std::thread::spawn(move || guard::serve(theirs).unwrap());
    let mut buf = [0u8; 4];
    assert_eq!(
        recv(ours.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap(),
        1
    );
    drop(ours);
    assert_eq!(
        server.join().unwrap(),
        GuardExit::RegulatorGone { resumed: 0 }
    );
}
