//! fork() after the first testpoint: the child must not use its parent's daemon connection (the
//! two would read each other's replies, and the child would take turns as its parent's job). It
//! registers a job of its own, and the parent's connection goes on working.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use common::fake::{Fake, Said, Seen};
use tact_lib::{DaemonCoordinator, Polite, Supervisor};

fn testpoints(unit: &mut Polite, run: Duration) {
    let start = Instant::now();
    while start.elapsed() < run {
        unit.testpoint(0, &[1.0]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits for `child` for a minute at most (then kills it: it is this test's own); its exit code.
fn wait_child(child: libc::pid_t) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut status = 0;
        // SAFETY: polls for the child this test forked.
        match unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } {
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            0 => {
                // SAFETY: the child this test forked, not yet reaped.
                unsafe {
                    libc::kill(child, libc::SIGKILL);
                    libc::waitpid(child, &mut status, 0);
                }
                panic!("the forked child still ran after a minute");
            }
            r => {
                assert_eq!(r, child);
                assert!(libc::WIFEXITED(status), "child status {status:#x}");
                return libc::WEXITSTATUS(status);
            }
        }
    }
}

fn ops_on(seen: &[Seen], conn: usize) -> usize {
    seen.iter()
        .filter(|s| s.conn == conn && matches!(s.said, Said::Op(_)))
        .count()
}

#[test]
fn a_child_forked_after_a_testpoint_registers_a_job_of_its_own() {
    let fake = Fake::start();
    let sup = Supervisor::with_config(common::config(100_000)).unwrap();
    let daemon = DaemonCoordinator::connect(fake.path.clone(), "forks").expect("registered");
    sup.set_coordinator(Some(Box::new(daemon)));
    let mut unit = Polite::with_supervisor(&sup);
    // Registers the unit, and takes the daemon's turn for it.
    unit.testpoint(0, &[1.0]).unwrap();
    let parent_conn = fake.seen()[0].conn;

    // SAFETY: the child runs testpoints of this thread's unit and _exits.
    let child = match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = catch_unwind(AssertUnwindSafe(|| {
                testpoints(&mut unit, Duration::from_millis(500));
                0
            }))
            .unwrap_or(1);
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        child => child,
    };
    assert_eq!(wait_child(child), 0, "the child's testpoints failed");

    let seen = fake.seen();
    let hello = |pid: i32| {
        seen.iter()
            .find(|s| s.pid == pid && matches!(s.said, Said::Hello { .. }))
            .map(|s| s.conn)
    };
    let child_conn = hello(child).unwrap_or_else(|| {
        panic!("the child never registered a job of its own: {seen:#?}");
    });
    assert_ne!(child_conn, parent_conn);
    assert!(ops_on(&seen, child_conn) >= 1, "{seen:#?}");
    let parent_ops = ops_on(&seen, parent_conn);

    // The parent's connection is still its own and still works: its next due testpoint gives
    // the turn back and takes it again there.
    std::thread::sleep(common::P * 2);
    testpoints(&mut unit, common::P * 5);
    let seen = fake.seen();
    assert!(ops_on(&seen, parent_conn) >= parent_ops + 2, "{seen:#?}");
    let hellos = seen
        .iter()
        .filter(|s| matches!(s.said, Said::Hello { .. }))
        .count();
    assert_eq!(hellos, 2, "the parent kept its registration: {seen:#?}");
}

/// In the child, only the forking thread lives on: a unit another thread was waiting in when
/// the process forked must not be handed the token (it would never take it, and the child's
/// testpoints would wait for ever).
#[test]
fn a_child_forked_while_another_thread_waits_for_the_token_runs_on() {
    let sup = Supervisor::with_config(common::config(100_000)).unwrap();
    let mut unit = Polite::with_supervisor(&sup);
    // This thread takes the token; another thread's unit of higher priority then waits for it.
    unit.testpoint(0, &[1.0]).unwrap();
    let mut other = Polite::with_supervisor(&sup);
    other.set_priority(10).unwrap();
    let waiter = std::thread::spawn(move || {
        other.testpoint(0, &[1.0]).unwrap();
        // Leaves (dropped) once it had its turn.
    });
    common::tasks::wait_until("the other unit waits", || sup.units() == 2);

    // SAFETY: the child runs testpoints of this thread's unit and _exits.
    let child = match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = catch_unwind(AssertUnwindSafe(|| {
                testpoints(&mut unit, Duration::from_millis(500));
                match unit.stats() {
                    Some(s) if s.testpoints >= 2 => 0,
                    _ => 2,
                }
            }))
            .unwrap_or(1);
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        child => child,
    };
    assert_eq!(wait_child(child), 0, "the child's testpoints failed");
    // The parent's threads go on as before: the waiter gets its turn and leaves.
    testpoints(&mut unit, common::P * 3);
    waiter.join().unwrap();
    assert_eq!(sup.units(), 1);
}
