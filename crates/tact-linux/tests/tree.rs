//! `JobTree` against real processes.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::{Error, JobTree, ProcReader};

fn refused(pid: i32) -> String {
    match JobTree::attach(pid) {
        Err(e @ Error::Refused { .. }) => e.to_string(),
        other => panic!("attach({pid}) was not refused: {other:?}"),
    }
}

#[test]
fn attach_refuses_what_tact_must_not_touch() {
    let pid_max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(refused(pid_max + 1).contains("no such process"));
    assert!(refused(1).contains("PID 1"));
    assert!(
        ProcReader::new().stat(2).unwrap().is_kernel_thread(),
        "pid 2 is kthreadd"
    );
    assert!(refused(2).contains("kernel thread"));
    assert!(refused(std::process::id() as i32).contains("ancestors"));
    assert!(refused(std::os::unix::process::parent_id() as i32).contains("ancestors"));
}

#[test]
fn stop_and_resume_a_whole_tree() {
    let child = Reaped(sh(
        "sleep 60 & sleep 60 & sh -c 'while :; do :; done' & wait",
    ));
    let root = child.0.id() as i32;
    let _killer = Killer::new(&tree_ids(root));
    let mut tree = JobTree::attach(root).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 4
    }));
    let _killer = Killer::new(&tree.members());
    assert_eq!(tree.members()[0], tree.root());
    assert!(tree.is_alive());

    tree.stop().unwrap();
    for id in tree.members() {
        assert!(is_stopped(id), "{id:?} not stopped");
    }
    tree.resume().unwrap();
    assert!(wait_until(PATIENCE, || tree
        .members()
        .iter()
        .all(|&id| !is_stopped(id))));
    // Again, to check that a second cycle works the same.
    tree.stop().unwrap();
    assert!(tree.members().iter().all(|&id| is_stopped(id)));
    tree.resume().unwrap();
    assert!(wait_until(PATIENCE, || tree
        .members()
        .iter()
        .all(|&id| !is_stopped(id))));
}

#[test]
fn children_forked_after_attach_are_stopped_even_by_a_fork_loop() {
    // The inner shell forks `true` as fast as it can: stop has to win the fork race.
    let mut child = Reaped(sh(
        "read x; sleep 60 & sh -c 'while :; do /bin/true; done' & wait",
    ));
    let root = child.0.id() as i32;
    let mut tree = JobTree::attach(root).unwrap();
    assert_eq!(tree.members().len(), 1);
    writeln!(child.0.stdin.as_mut().unwrap(), "go").unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() >= 3
    }));
    let _killer = Killer::new(&tree.members());
    for _ in 0..5 {
        tree.stop().unwrap();
        // Walk /proc afresh: nothing below the root may be running.
        let now = tree_ids(root);
        assert!(now.len() >= 3);
        // dash runs `/bin/true` through vfork: its parent sits in D until the stopped child
        // execs, which is settled too. Zombies (exited `true`s) cannot run either.
        let r = ProcReader::new();
        for id in now.iter().filter(|id| exists(**id)) {
            assert!(r.stop_settled(id.pid).unwrap(), "{id:?} escaped the stop");
            assert!(tree.members().contains(id), "{id:?} is not a member");
        }
        tree.resume().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn members_stopped_by_someone_else_are_left_alone() {
    let child = Reaped(sh("sleep 60 & sleep 60 & wait"));
    let root = child.0.id() as i32;
    let mut tree = JobTree::attach(root).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 3
    }));
    let _killer = Killer::new(&tree.members());
    let user_stopped = tree.members()[2];
    PidFd::open(user_stopped.pid)
        .unwrap()
        .send_signal(libc::SIGSTOP)
        .unwrap();
    assert!(wait_until(PATIENCE, || is_stopped(user_stopped)));

    tree.stop().unwrap();
    assert!(tree.members().iter().all(|&id| is_stopped(id)));
    tree.resume().unwrap();
    let others: Vec<_> = tree
        .members()
        .into_iter()
        .filter(|&id| id != user_stopped)
        .collect();
    assert!(wait_until(PATIENCE, || others
        .iter()
        .all(|&id| !is_stopped(id))));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        is_stopped(user_stopped),
        "tact resumed what the user stopped"
    );
}

#[test]
fn after_the_root_exits_known_members_stay_and_nothing_else_is_hit() {
    let mut child = Reaped(sh("sleep 60 & sleep 60 & read x"));
    let root = child.0.id() as i32;
    let mut tree = JobTree::attach(root).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 3
    }));
    let orphans: Vec<_> = tree.members()[1..].to_vec();
    let _killer = Killer::new(&orphans);
    // The root exits and we reap it: its pid is free for anyone now.
    drop(child.0.stdin.take());
    child.0.wait().unwrap();
    assert!(!tree.is_alive());
    // Bystanders, started after the root was reaped (one of them may even reuse its pid).
    let bystanders: Vec<_> = (0..3).map(|_| Reaped(sh("sleep 60"))).collect();
    let bystander_ids: Vec<_> = bystanders
        .iter()
        .map(|b| ProcReader::new().stat(b.0.id() as i32).unwrap().id())
        .collect();

    tree.stop().unwrap();
    assert_eq!(
        tree.members(),
        orphans,
        "the dead root is dropped, its orphans kept"
    );
    assert!(orphans.iter().all(|&id| is_stopped(id)));
    assert!(bystander_ids.iter().all(|&id| !is_stopped(id)));
    tree.resume().unwrap();
    assert!(wait_until(PATIENCE, || orphans
        .iter()
        .all(|&id| !is_stopped(id))));
}

#[test]
fn dropping_a_stopped_tree_resumes_it() {
    let child = Reaped(sh("sleep 60 & wait"));
    let root = child.0.id() as i32;
    let mut tree = JobTree::attach(root).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 2
    }));
    let members = tree.members();
    let _killer = Killer::new(&members);
    tree.stop().unwrap();
    assert!(members.iter().all(|&id| is_stopped(id)));
    drop(tree);
    assert!(wait_until(PATIENCE, || members
        .iter()
        .all(|&id| !is_stopped(id))));
}
