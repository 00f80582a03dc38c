//! `tact share`, `tact tickets run` and `tact tune` end the whole of the commands they started
//! when they are interrupted, as `tact run` does (tests/run_signals.rs): SIGTERM reaches a
//! shell's children, and a user's Ctrl-C the members that the terminal's signal missed, those
//! outside tact's process group.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::pty::Pty;
use common::started::{alive, Started, LIMIT};
use common::*;
use nix::sys::signal::Signal;
use tact_linux::ProcReader;

/// A job whose pipeline puts a `sleep 600` in tact's process group and a shell in a session of
/// its own, which touches `flag` when SIGINT reaches it (and only then: SIGKILL, tact's last
/// resort, leaves no trace). Not `setsid ... &`: a shell without job control starts `&`
/// commands with SIGINT ignored. `; true` keeps sh from exec'ing the pipeline's last command.
fn split_job(flag: &Path) -> (String, String) {
    let apart = format!(
        "trap \"touch {}; exit 0\" INT; while :; do sleep 1; done",
        flag.display()
    );
    let script = format!("sleep 600 | setsid sh -c '{apart}'; true");
    (script, format!("sh -c {apart}"))
}

/// Starts `command` (a tact running [`split_job`]) on a terminal, presses Ctrl-C once the job
/// runs, and checks that tact exits as the job's shell did (killed by SIGINT) and that the
/// member outside tact's process group got the SIGINT too.
fn ctrl_c_reaches_the_member_apart(mut command: Command, script: &str, apart: &str, flag: &Path) {
    let pty = Pty::open();
    command.stdout(Stdio::null()).stderr(Stdio::null());
    pty.controlling(&mut command);
    let mut t = Started::spawn(&mut command);
    let sh = t.member(&format!("sh -c {script}"));
    let sleep = t.member("sleep 600");
    let apart = t.member(apart);
    // Its trap is set once its loop runs.
    wait_for(LIMIT, "the shell apart to loop", || {
        children_matching(apart.pid, "sleep 1").len() == 1
    });
    let r = ProcReader::new();
    assert_eq!(r.stat(sleep.pid).unwrap().pgid, t.tact.id() as i32);
    assert_eq!(r.stat(apart.pid).unwrap().session, apart.pid);
    pty.ctrl_c();
    assert_eq!(t.wait(), 128 + 2, "interrupted by SIGINT");
    wait_for(LIMIT, "the whole job to end", || {
        [sh, sleep, apart].iter().all(|&id| !alive(id))
    });
    assert!(flag.exists(), "the member apart ended without the SIGINT");
}

#[test]
fn share_passes_ctrl_c_on_to_a_member_outside_the_terminals_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("interrupted");
    let (script, apart) = split_job(&flag);
    let mut command = tact();
    command
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["share", "--backend", "signals", "--job"])
        .arg(format!("1={script}"));
    ctrl_c_reaches_the_member_apart(command, &script, &apart, &flag);
}

#[test]
fn tickets_run_passes_ctrl_c_on_to_a_member_outside_the_terminals_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("interrupted");
    let (script, apart) = split_job(&flag);
    let setup = dir.path().join("setup.toml");
    // A literal string: the script holds both kinds of quotes.
    std::fs::write(
        &setup,
        format!(
            r#"
[[currency]]
name = "A"
funding = [{{ from = "base", cpu = 1000 }}]

[[job]]
name = "x"
command = '''{script}'''
funding = [{{ from = "A", cpu = 100 }}]
"#
        ),
    )
    .unwrap();
    let mut command = tact();
    command
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["tickets", "run"])
        .arg(&setup)
        .args(["--backend", "signals"]);
    ctrl_c_reaches_the_member_apart(command, &script, &apart, &flag);
}

/// `tact tune` with a workers file (the jobserver is for make) on `sh -c script`.
fn tune(dir: &Path, script: &str) -> Command {
    let mut c = tact();
    c.env("TACT_RUNTIME_DIR", dir).current_dir(dir).args([
        "tune",
        "--workers-file",
        "workers",
        "--",
        "sh",
        "-c",
        script,
    ]);
    c
}

#[test]
fn tune_passes_sigterm_on_to_the_commands_children() {
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 600; true";
    let mut command = tune(dir.path(), script);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut t = Started::spawn(&mut command);
    let sh = t.member(&format!("sh -c {script}"));
    let sleep = t.member("sleep 600");
    kill(t.tact.id() as i32, Signal::SIGTERM);
    assert_eq!(t.wait(), 128 + 15, "the shell's status: killed by SIGTERM");
    wait_for(LIMIT, "the shell's sleep to end", || {
        !alive(sh) && !alive(sleep)
    });
}

#[test]
fn tune_passes_ctrl_c_on_to_a_member_outside_the_terminals_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("interrupted");
    let (script, apart) = split_job(&flag);
    let command = tune(dir.path(), &script);
    ctrl_c_reaches_the_member_apart(command, &script, &apart, &flag);
}
