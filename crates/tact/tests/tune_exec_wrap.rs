//! `tact tune --completions wrap` with jobs run through `tact exec-wrap`: make running it as its
//! SHELL and xargs running it as the command count every job, however short; statuses and
//! signals pass through the wrapper, a signal to the whole of the job; outside tact the wrapper
//! just runs its program.

mod common;

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::pty::Pty;
use common::started::{alive, Started, LIMIT};
use common::*;
use nix::sys::signal::Signal;
use nix::sys::socket::{
    bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use tact_linux::{ProcId, ProcReader};

const TACT: &str = env!("CARGO_BIN_EXE_tact");

/// `tact tune ARGS` in `dir`, with `dir/tmp` as its TMPDIR (where its socket's directory goes).
fn tune(dir: &Path, args: &[&str]) -> Output {
    fs::create_dir_all(dir.join("tmp")).unwrap();
    tact()
        .env("TACT_RUNTIME_DIR", dir)
        .env("TMPDIR", dir.join("tmp"))
        .current_dir(dir)
        .arg("tune")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The run's `end` record, and checks that tact left nothing in its TMPDIR.
fn end_of_run(dir: &Path) -> serde_json::Value {
    let left: Vec<_> = fs::read_dir(dir.join("tmp")).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    let log = json_log(&dir.join("tune.jsonl"));
    let end = of_kind(&log, "end");
    assert_eq!(end.len(), 1, "{log:?}");
    end[0].clone()
}

/// A Makefile of `n` independent targets whose recipe is one line that finishes at once.
fn quick_makefile(dir: &Path, n: usize) {
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let rules = format!("all: {}\n\nt%:\n\t@echo $@ >> built\n", names.join(" "));
    fs::write(dir.join("M"), rules).unwrap();
}

#[test]
fn make_with_exec_wrap_as_its_shell_counts_every_short_job() {
    let dir = tempfile::tempdir().unwrap();
    quick_makefile(dir.path(), 120);
    let shell = format!("SHELL={TACT} exec-wrap /bin/sh");
    let out = tune(
        dir.path(),
        &[
            "--completions",
            "wrap",
            "--policy",
            "static:3",
            "--json-log",
            "tune.jsonl",
            "--",
            "make",
            "-s",
            "-f",
            "M",
            &shell,
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let built = fs::read_to_string(dir.path().join("built")).unwrap();
    assert_eq!(built.lines().count(), 120, "every recipe ran");
    // Each job lasts about a millisecond, less than tact's poll period: all of them count.
    let end = end_of_run(dir.path());
    assert_eq!(end["completions"], 120, "{end}");
    assert!(err.contains("tact: tune: 120 jobs finished"), "{err}");
    assert!(!err.contains("wrapped jobs"), "no job failed: {err}");
}

/// `n` lines for xargs to read, one command each.
fn xargs_input(dir: &Path, n: usize) {
    let lines: String = (0..n).map(|i| format!("{i}\n")).collect();
    fs::write(dir.join("list"), lines).unwrap();
}

/// `tact tune --completions wrap --signals POLICY -- xargs -a list -P 1 -n 1 tact exec-wrap --
/// sh -c SCRIPT` (the line is the script's $0).
fn tune_xargs(dir: &Path, policy: &str, script: &str) -> Output {
    let args = [
        "--completions",
        "wrap",
        "--signals",
        "--policy",
        policy,
        "--max",
        "6",
        "--json-log",
        "tune.jsonl",
        "--",
        "xargs",
        "-a",
        "list",
        "-P",
        "1",
        "-n",
        "1",
        TACT,
        "exec-wrap",
        "--",
        "sh",
        "-c",
        script,
    ];
    tune(dir, &args)
}

#[test]
fn xargs_running_exec_wrap_counts_every_job_and_its_failures() {
    let dir = tempfile::tempdir().unwrap();
    xargs_input(dir.path(), 150);
    // One job in ten fails (xargs goes on, and exits 123 at the end).
    let out = tune_xargs(
        dir.path(),
        "static:4",
        "echo $0 >> done; [ $(($0 % 10)) -ne 0 ]",
    );
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(123),
        "xargs's status is tact's: {err}"
    );
    let done = fs::read_to_string(dir.path().join("done")).unwrap();
    assert_eq!(done.lines().count(), 150, "every line ran once");
    let end = end_of_run(dir.path());
    assert_eq!(end["completions"], 150, "{end}");
    assert_eq!(end["status"], 123, "{end}");
    assert!(
        err.contains("tact: tune: of 150 wrapped jobs, 15 exited with a non-zero status"),
        "{err}"
    );
}

#[test]
fn the_jobs_in_flight_are_the_wrapped_ones_started_and_not_ended() {
    let dir = tempfile::tempdir().unwrap();
    xargs_input(dir.path(), 60);
    let tcc = "tcc:n_star=3,batch_min=1,dwell=300ms,max_dwell=300ms";
    // Jobs of 150 ms: tact, reading every 2 ms, sees each in flight even on a loaded machine
    // (in flight is what a read finds, a drop held off for a lane's restart; see docs/tune.md),
    // so TCC's busy clock runs.
    let out = tune_xargs(dir.path(), tcc, "sleep 0.15");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let end = end_of_run(dir.path());
    assert_eq!(end["completions"], 60, "{end}");
    // TCC's busy clock runs only while the pool is saturated (jobs in flight reach the
    // count): with no jobs seen in flight it never measures, and never moves the count. Each
    // change records the jobs in flight then (none at a change between two jobs), never more
    // than 6 (--max).
    let log = json_log(&dir.path().join("tune.jsonl"));
    let changes: Vec<u64> = of_kind(&log, "target")
        .iter()
        .skip(1)
        .map(|t| t["in_flight"].as_u64().unwrap())
        .collect();
    assert!(!changes.is_empty(), "TCC moved the count: {log:?}");
    assert!(changes.iter().all(|&n| n <= 6), "{changes:?}");
}

#[test]
fn statuses_and_signals_pass_through_the_wrapper_under_tact() {
    let dir = tempfile::tempdir().unwrap();
    // The command runs three wrapped jobs one after the other and records their statuses: an
    // exit, a death by SIGKILL, and one that takes the SIGTERM sent to its wrapper (the job
    // writes its parent's pid, the wrapper's, then waits).
    let script = format!(
        "{TACT} exec-wrap -- sh -c 'exit 7'; echo $? > exit; \
         {TACT} exec-wrap -- sh -c 'kill -KILL $$'; echo $? > killed; \
         {TACT} exec-wrap -- sh -c 'trap \"exit 9\" TERM; echo $PPID > wrapper; \
         while :; do sleep 0.05; done'; echo $? > termed"
    );
    fs::create_dir_all(dir.path().join("tmp")).unwrap();
    let mut t = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .env("TMPDIR", dir.path().join("tmp"))
        .current_dir(dir.path())
        .args(["tune", "--completions", "wrap", "--policy", "static:2"])
        .args(["--json-log", "tune.jsonl", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wrapper = dir.path().join("wrapper");
    wait_for(Duration::from_secs(30), "the third job", || {
        fs::read_to_string(&wrapper).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid: i32 = fs::read_to_string(&wrapper)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "tact", "the job's parent is the wrapper");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = t.wait().unwrap();
    let err = stderr_of(&mut t);
    assert_eq!(status.code(), Some(0), "{err}");
    let read = |name: &str| fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(read("exit").trim(), "7");
    assert_eq!(
        read("killed").trim(),
        "137",
        "128 + SIGKILL, as a shell says"
    );
    assert_eq!(read("termed").trim(), "9", "the job took the SIGTERM");
    let end = end_of_run(dir.path());
    assert_eq!(end["completions"], 3, "{end}");
    assert!(
        err.contains("of 3 wrapped jobs, 3 exited with a non-zero status"),
        "{err}"
    );
}

#[test]
fn outside_tact_exec_wrap_runs_the_program_itself() {
    let dir = tempfile::tempdir().unwrap();
    let run = |socket: Option<&str>, args: &[&str]| {
        let mut c = tact();
        c.env_remove("TACT_TUNE_SOCKET");
        if let Some(s) = socket {
            c.env("TACT_TUNE_SOCKET", s);
        }
        c.current_dir(dir.path()).args(args).output().unwrap()
    };
    // No socket named: exec, so the program is the process tact's was (same pid).
    let out = run(
        None,
        &["exec-wrap", "--", "sh", "-c", "echo $$ > pid; exit 5"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "silent without -v: {}", stderr(&out));
    // A socket named but gone (tact exited): the same.
    let out = run(
        Some("/nonexistent/socket"),
        &["-v", "exec-wrap", "/bin/sh", "-c", "kill -TERM $$"],
    );
    assert_eq!(out.status.code(), None, "the program itself was killed");
    assert!(
        stderr(&out).contains("cannot reach tact"),
        "{}",
        stderr(&out)
    );
    let out = run(None, &["-v", "exec-wrap", "--", "no-such-program-here"]);
    assert_eq!(out.status.code(), Some(127));
    let err = stderr(&out);
    assert!(err.contains("is not set"), "{err}");
    assert!(
        err.contains("no-such-program-here: command not found"),
        "{err}"
    );

    // The pid check: the program ran as the wrapper's own process.
    let child = Command::new(TACT)
        .env_remove("TACT_TUNE_SOCKET")
        .current_dir(dir.path())
        .args(["exec-wrap", "--", "sh", "-c", "echo $$ > pid"])
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait_with_output().unwrap().status.success());
    let written = fs::read_to_string(dir.path().join("pid")).unwrap();
    assert_eq!(written.trim(), pid.to_string(), "exec, not a child");
}

#[test]
fn wrap_counts_nothing_it_is_not_told_and_refuses_to_wrap_the_command() {
    let dir = tempfile::tempdir().unwrap();
    // No job goes through exec-wrap: tact runs the command and says how to wrap its jobs.
    let out = tune(
        dir.path(),
        &[
            "--completions",
            "wrap",
            "--policy",
            "static:2",
            "--json-log",
            "tune.jsonl",
            "--",
            "sh",
            "-c",
            "true; true",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("no job reported"), "{err}");
    assert!(err.contains("SHELL='tact exec-wrap /bin/sh'"), "{err}");
    assert_eq!(end_of_run(dir.path())["completions"], 0);

    // The command itself wrapped would be one job: refused before anything runs.
    let out = tune(
        dir.path(),
        &[
            "--completions",
            "wrap",
            "--",
            TACT,
            "exec-wrap",
            "--",
            "touch",
            "ran",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("whole run as one job"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.path().join("ran").exists());
}

/// A socket listening where `tact tune` names its own, so that an exec-wrap started with it
/// runs its job as a child instead of exec'ing it. Nothing accepts: the wrapper's connection
/// waits in the backlog, and its reports are dropped, as they may be under tact.
fn stand_in_for_tact(dir: &Path) -> (OwnedFd, std::path::PathBuf) {
    let path = dir.join("socket");
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
    listen(&fd, Backlog::new(8).unwrap()).unwrap();
    (fd, path)
}

/// `tact exec-wrap -- sh -c SCRIPT` below the stand-in for tact.
fn exec_wrap(socket: &Path, script: &str) -> Command {
    let mut c = tact();
    c.env("TACT_TUNE_SOCKET", socket)
        .args(["exec-wrap", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn assert_ended(ids: &[ProcId], what: &str) {
    wait_for(LIMIT, what, || ids.iter().all(|&id| !alive(id)));
}

#[test]
fn sigterm_to_the_wrapper_ends_the_whole_job() {
    let dir = tempfile::tempdir().unwrap();
    let (_listening, socket) = stand_in_for_tact(dir.path());
    // `; true` keeps sh from exec'ing its last sleep: both sleeps are the shell's children, one
    // in a session of its own, which no signal to the shell's process group reaches.
    let script = "setsid sleep 601 & sleep 600; true";
    let mut t = Started::spawn(&mut exec_wrap(&socket, script));
    let sh = t.member(&format!("sh -c {script}"));
    let apart = t.member("sleep 601");
    let sleep = t.member("sleep 600");
    assert_eq!(
        ProcReader::new().stat(apart.pid).unwrap().session,
        apart.pid
    );
    kill(t.pid(), Signal::SIGTERM);
    assert_eq!(t.wait(), 128 + 15, "the shell's status: killed by SIGTERM");
    assert_ended(&[sh, sleep, apart], "the whole job to end");
}

#[test]
fn ctrl_c_reaches_the_members_outside_the_terminals_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let (_listening, socket) = stand_in_for_tact(dir.path());
    let pty = Pty::open();
    // Not `setsid sleep 601 &`: a shell without job control starts `&` commands with SIGINT
    // ignored.
    let script = "sleep 600 | setsid sleep 601; true";
    let mut command = exec_wrap(&socket, script);
    pty.controlling(&mut command);
    let mut t = Started::spawn(&mut command);
    let sh = t.member(&format!("sh -c {script}"));
    let apart = t.member("sleep 601");
    let sleep = t.member("sleep 600");
    let r = ProcReader::new();
    assert_eq!(
        r.stat(sleep.pid).unwrap().pgid,
        t.pid(),
        "in the wrapper's group"
    );
    assert_eq!(r.stat(apart.pid).unwrap().session, apart.pid);
    pty.ctrl_c();
    assert_eq!(t.wait(), 128 + 2, "the shell's status: killed by SIGINT");
    assert_ended(&[sh, sleep, apart], "the whole job to end");
}
