//! `tact run` ends the whole job when it is interrupted, not just the command's first process:
//! SIGTERM reaches every process of the tree (forked children, a member in its own session,
//! while the regulator holds the job stopped), and Ctrl-C reaches the members the terminal's
//! signal missed.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::pty::Pty;
use common::started::{alive, Started, LIMIT};
use common::*;
use nix::sys::signal::Signal;
use tact_linux::{ProcId, ProcReader};

fn assert_ended(ids: &[ProcId], what: &str) {
    wait_for(LIMIT, what, || ids.iter().all(|&id| !alive(id)));
}

fn run(runtime: &Path, args: &[&str]) -> Command {
    let mut c = tact();
    c.env("TACT_RUNTIME_DIR", runtime)
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

#[test]
fn sigterm_ends_the_commands_children_too() {
    let dir = tempfile::tempdir().unwrap();
    // `; true` keeps sh from exec'ing sleep: sleep is sh's child, not the root.
    let mut t = Started::spawn(&mut run(
        dir.path(),
        &["--progress", "cpu", "--", "sh", "-c", "sleep 600; true"],
    ));
    let sh = t.member("sh -c sleep 600; true");
    let sleep = t.member("sleep 600");
    kill(t.pid(), Signal::SIGTERM);
    assert_eq!(t.wait(), 128 + 15, "the shell's status: killed by SIGTERM");
    assert_ended(&[sh, sleep], "the shell's sleep to end");
}

#[test]
fn sigterm_reaches_a_member_in_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let script = "setsid sleep 601 & sleep 600; true";
    let mut t = Started::spawn(&mut run(
        dir.path(),
        &["--progress", "cpu", "--", "sh", "-c", script],
    ));
    let apart = t.member("sleep 601");
    let sleep = t.member("sleep 600");
    let stat = ProcReader::new().stat(apart.pid).unwrap();
    assert_eq!(stat.session, apart.pid, "setsid made its own session");
    kill(t.pid(), Signal::SIGTERM);
    assert_eq!(t.wait(), 128 + 15);
    assert_ended(&[apart, sleep], "both sleeps to end");
}

#[test]
fn sigterm_ends_the_tree_the_regulator_holds_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // The stalling job of tests/common, with its last sleep kept a child of the shell.
    let (counter, cmd) = stalling_job(dir.path());
    let script = cmd[2].replace("sleep 120", "sleep 600; true");
    let progress = format!("file:{}", counter.display());
    let state = dir.path().join("state");
    let mut args: Vec<&str> = FAST_REGULATION.to_vec();
    args.extend(["--max-suspend", "60s", "--progress", &progress]);
    args.extend([
        "--state-dir",
        state.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let mut t = Started::spawn(&mut run(dir.path(), &args));
    let sleep = t.member("sleep 600");
    let sh = t.member(&format!("sh -c {script}"));
    wait_for(LIMIT, "the regulator to stop the stalled job", || {
        any_stopped(&[sh.pid, sleep.pid])
    });
    kill(t.pid(), Signal::SIGTERM);
    assert_eq!(t.wait(), 128 + 15);
    assert_ended(&[sh, sleep], "the stopped job to end");
}

#[test]
fn ctrl_c_reaches_a_member_outside_the_terminals_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pty = Pty::open();
    // Not `setsid sleep 601 &`: a shell without job control starts `&` commands with SIGINT
    // ignored. `; true` keeps sh from exec'ing the pipeline's last command.
    let script = "sleep 600 | setsid sleep 601; true";
    let mut command = run(dir.path(), &["--progress", "cpu", "--", "sh", "-c", script]);
    pty.controlling(&mut command);
    let mut t = Started::spawn(&mut command);
    let sh = t.member(&format!("sh -c {script}"));
    let apart = t.member("sleep 601");
    let sleep = t.member("sleep 600");
    let r = ProcReader::new();
    assert_eq!(r.stat(sleep.pid).unwrap().pgid, t.pid(), "in tact's group");
    assert_eq!(r.stat(apart.pid).unwrap().session, apart.pid);
    pty.ctrl_c();
    assert_eq!(t.wait(), 128 + 2, "the shell's status: killed by SIGINT");
    assert_ended(&[sh, sleep, apart], "the whole job to end");
}
