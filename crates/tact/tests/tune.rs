//! `tact tune` on real programs: GNU make under tact's jobserver, a program reading a workers
//! file, exit statuses, signals and bad input.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::tune_output as tune;
use common::*;
use nix::sys::signal::Signal;
use serde_json::Value;

/// A Makefile of `n` independent targets; each recipe appends `S` to `log` when it starts and
/// `E` when it ends (single small appends, so the file holds the real order of events), sleeps
/// `secs`, records its name in `built` and creates its file.
fn makefile(dir: &Path, n: usize, secs: f64) {
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    fs::write(
        dir.join("M"),
        format!(
            "all: {}\n\nt%:\n\t@echo S >> log; sleep {secs}; echo E >> log; echo $@ >> built; \
             touch $@\n",
            names.join(" ")
        ),
    )
    .unwrap();
}

/// The most recipes that ran at once, from the S/E log.
fn max_concurrent(dir: &Path) -> usize {
    let (mut now, mut max) = (0i64, 0i64);
    for line in fs::read_to_string(dir.join("log")).unwrap().lines() {
        now += if line == "S" { 1 } else { -1 };
        max = max.max(now);
    }
    max as usize
}

#[test]
fn make_builds_every_target_once_and_its_jobs_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    makefile(dir.path(), 60, 0.1);
    let out = tune(
        dir.path(),
        &["--json-log", "tune.jsonl", "--", "make", "-f", "M", "all"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut built: Vec<String> = fs::read_to_string(dir.path().join("built"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    built.sort();
    let mut expected: Vec<String> = (0..60).map(|i| format!("t{i}")).collect();
    expected.sort();
    assert_eq!(built, expected, "every target exactly once");

    let log = json_log(&dir.path().join("tune.jsonl"));
    let targets = of_kind(&log, "target");
    assert!(!targets.is_empty(), "the initial target is logged");
    for t in &targets {
        let n = t["target"].as_u64().unwrap();
        assert!(n >= 1, "{t}");
    }
    let end = of_kind(&log, "end");
    assert_eq!(end.len(), 1);
    // Each recipe is one child of make, seen at most once: never more than 60. A recipe lives
    // at least 100 ms and tact looks every 2 ms, so missing half of them would take tact being
    // kept off the CPU for 100 ms thirty times over.
    let done = end[0]["completions"].as_u64().unwrap();
    assert!((30..=60).contains(&done), "{done} completions counted");
    assert_eq!(end[0]["status"], 0);
    let summary = stderr(&out);
    assert!(
        summary.contains(&format!("tact: tune: {done} jobs finished")),
        "{summary}"
    );
}

#[test]
fn make_never_runs_more_jobs_than_the_target_in_force() {
    let dir = tempfile::tempdir().unwrap();
    makefile(dir.path(), 40, 0.05);
    let out = tune(
        dir.path(),
        &[
            "--max",
            "3",
            "--json-log",
            "tune.jsonl",
            "--",
            "make",
            "-f",
            "M",
            "all",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = json_log(&dir.path().join("tune.jsonl"));
    let max_target = of_kind(&log, "target")
        .iter()
        .map(|t| t["target"].as_u64().unwrap() as usize)
        .max()
        .unwrap();
    assert!(max_target <= 3, "{max_target}");
    let used = max_concurrent(dir.path());
    assert!(
        used <= max_target,
        "make ran {used} jobs at once; the target never exceeded {max_target}"
    );
}

#[test]
fn the_jobserver_sets_how_many_jobs_make_runs() {
    // A fixed count: without tact's tokens make would run 1 job (no jobserver) or all of them
    // (a bare -j), so exactly 3 at most and more than 1 shows the tokens at work.
    let dir = tempfile::tempdir().unwrap();
    makefile(dir.path(), 30, 0.2);
    let out = tune(
        dir.path(),
        &["--policy", "static:3", "--", "make", "-f", "M", "all"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let used = max_concurrent(dir.path());
    assert!((2..=3).contains(&used), "make ran {used} jobs at once");

    let dir = tempfile::tempdir().unwrap();
    makefile(dir.path(), 10, 0.05);
    let out = tune(
        dir.path(),
        &["--policy", "static:1", "--", "make", "-f", "M", "all"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(max_concurrent(dir.path()), 1);
}

/// A jobserver client that runs its jobs in threads, as a program with a thread pool would:
/// thread 0 holds the implicit slot, every other takes a token from MAKEFLAGS' pipe per job
/// and gives it back after. Each job sleeps 10 ms; the jobs done are kept in `n`, written
/// whole (replaced), until `argv[1]` of them are done.
const THREADED_CLIENT: &str = r#"
import os, sys, threading, time
auth = [w for w in os.environ["MAKEFLAGS"].split() if w.startswith("--jobserver-auth=")]
r, w = (int(x) for x in auth[-1].partition("=")[2].split(","))
total, done, lock = int(sys.argv[1]), [0], threading.Lock()
def job():
    time.sleep(0.01)
    with lock:
        done[0] += 1
        with open("n.tmp", "w") as f:
            f.write("done %d\n" % done[0])
        os.replace("n.tmp", "n")
def worker(implicit):
    while done[0] < total:
        token = None if implicit else os.read(r, 1)
        job()
        if token:
            os.write(w, token)
for i in range(8):
    threading.Thread(target=worker, args=(i == 0,), daemon=True).start()
while done[0] < total:
    time.sleep(0.01)
"#;

#[test]
fn a_jobserver_client_with_a_counter_file_holds_its_implicit_slot() {
    // Its jobs are threads, not children: counting the implicit slot only while the command had
    // a child, tact saw one job fewer than the target, never a saturated pool, and TCC never
    // took a step. With a counter file the slot counts as held while the command runs.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("client.py"), THREADED_CLIENT).unwrap();
    let out = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL")
        .env_remove("MFLAGS")
        .current_dir(dir.path())
        .args([
            "tune",
            "--jobserver",
            "--completions",
            "file:n",
            "--init",
            "2",
            "--max",
            "8",
            "--policy",
            "tcc:n_star=3,batch_min=2",
            "--json-log",
            "tune.jsonl",
            "--",
            "python3",
            "client.py",
            "300",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = json_log(&dir.path().join("tune.jsonl"));
    let steps = of_kind(&log, "transition");
    assert!(!steps.is_empty(), "TCC took no step: {log:?}");
    assert!(of_kind(&log, "end")[0]["completions"].as_u64().unwrap() >= 300);
}

#[test]
fn the_users_makeflags_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("M"),
        "all:\n\t@echo \"$(MAKEFLAGS)\" > flags\n",
    )
    .unwrap();
    let out = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .env("MAKEFLAGS", "k -j9 -- GREETING=hello")
        // Under `make test` the outer make's level would make this one add -w (print directory).
        .env_remove("MAKELEVEL")
        .env_remove("MFLAGS")
        .current_dir(dir.path())
        .args(["tune", "--", "make", "-f", "M"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let flags = fs::read_to_string(dir.path().join("flags")).unwrap();
    assert!(flags.contains("--jobserver-auth="), "{flags}");
    assert!(
        flags.starts_with("k ") && flags.contains(" -- GREETING=hello"),
        "{flags}"
    );
    assert!(!flags.contains("-j9"), "{flags}");
}

#[test]
fn a_workers_file_holds_the_count_while_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    // Shell builtins only, apart from the three `sleep`s: those are the shell's only children.
    let script = "read n < jobs; echo $n > seen; for i in 1 2 3; do sleep 0.05 & wait; done; \
                  read n < jobs; echo $n >> seen";
    let out = tune(
        dir.path(),
        &[
            "--workers-file",
            "jobs",
            "--init",
            "2",
            "--json-log",
            "tune.jsonl",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = fs::read_to_string(dir.path().join("seen")).unwrap();
    let counts: Vec<u64> = seen.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(counts.len(), 2, "{seen:?}");
    assert_eq!(counts[0], 2, "the initial count, written before the start");
    assert!(counts[1] >= 1, "{seen:?}");
    // Each `sleep` lives 50 ms and is one child of the shell, seen at most once.
    let end = &of_kind(&json_log(&dir.path().join("tune.jsonl")), "end")[0].clone();
    assert!(end["completions"].as_u64().unwrap() <= 3, "{end}");
}

#[test]
fn a_counter_file_counts_completions() {
    let dir = tempfile::tempdir().unwrap();
    let counted = |script: &str| {
        let out = tune(
            dir.path(),
            &[
                "--workers-file",
                "jobs",
                "--completions",
                "file:n",
                "--json-log",
                "tune.jsonl",
                "--",
                "sh",
                "-c",
                script,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let log = json_log(&dir.path().join("tune.jsonl"));
        of_kind(&log, "end")[0]["completions"].clone()
    };
    // Created during the run: all of it counts (the last poll follows the exit).
    let script = "for i in 1 2 3 4 5; do echo \"done $i\" > n; sleep 0.02; done";
    assert_eq!(counted(script), 5);
    // Already there: only the rise counts, however soon the command writes.
    fs::write(dir.path().join("n"), "done 10\n").unwrap();
    let script = "for i in 11 12 13; do echo \"done $i\" > n; done";
    assert_eq!(counted(script), 3);
}

#[test]
fn a_pause_between_counted_jobs_is_starvation_not_slowness() {
    // A counter file says nothing of the jobs in flight (the shell's `sleep`s are not jobs), so
    // the pool is taken to be busy, and a pause in the input is found by spec §6's gap rule:
    // longer than ten mean gaps, it adds no busy time and is no sample. Base needs 3 samples
    // after the chain's first completion and one to settle: the 3rd comes after the pause.
    let dir = tempfile::tempdir().unwrap();
    let script = "i=0; step() { sleep 0.05; i=$((i+1)); echo \"done $i\" > n; }; \
                  step; step; step; step; sleep 2; for k in 1 2 3 4 5 6 7 8; do step; done";
    let out = tune(
        dir.path(),
        &[
            "--workers-file",
            "jobs",
            "--completions",
            "file:n",
            "--init",
            "1",
            "--max",
            "1",
            "--policy",
            "tcc:n_star=3,batch_min=1",
            "--json-log",
            "tune.jsonl",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = json_log(&dir.path().join("tune.jsonl"));
    let first = of_kind(&log, "transition")
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no transition: {log:?}"));
    let (t, busy) = (
        first["t"].as_f64().unwrap(),
        first["busy"].as_f64().unwrap(),
    );
    assert!(t > 2.0, "decided before the pause: {first}");
    // The whole pause (2 s of `sleep`) is outside the busy clock, and no sample spans it: the
    // judged pace is the jobs' (some 20/s), not 3 jobs in 2 s.
    assert!(busy + 2.0 <= t, "busy {busy} s of {t} s: {first}");
    let throughput = first["throughput"].as_f64().unwrap();
    assert!(throughput > 5.0, "{first}");
}

#[test]
fn the_commands_status_is_tacts() {
    let dir = tempfile::tempdir().unwrap();
    let out = tune(dir.path(), &["--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    let out = tune(dir.path(), &["--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(out.status.code(), Some(128 + 9));
    let out = tune(dir.path(), &["--", "no-such-command-tact-test"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        stderr(&out).contains("command not found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sigterm_to_tact_reaches_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let script = "trap 'echo term > got; exit 7' TERM; touch ready; while :; do sleep 0.05; done";
    let mut t = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .current_dir(dir.path())
        .args(["tune", "--", "sh", "-c", script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(20), "the command to start", || {
        dir.path().join("ready").exists()
    });
    kill(t.id() as i32, Signal::SIGTERM);
    let status = t.wait().unwrap();
    assert_eq!(status.code(), Some(7), "the command's own exit status");
    assert!(dir.path().join("got").exists());
}

/// TCC deciding on a few completions, so that a run of a few seconds reaches Steady.
const QUICK_TCC: &str = "tcc:n_star=3,batch_min=1,dwell=300ms,max_dwell=300ms";

/// Each `(args, code, says)`: `tact tune ARGS` exits with `code`, says `says` on stderr (in one
/// line when tact itself refuses, code 125), and never runs its command (`touch ran`).
fn assert_refused(dir: &Path, cases: &[(&[&str], i32, &str)]) {
    for &(args, code, says) in cases {
        let out = tune(dir, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.join("ran").exists(), "{args:?} ran the command");
        if code == 125 {
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
}

#[test]
fn bad_input_gets_a_one_line_error_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i32, &str); 7] = [
        (&["--max", "0", "--", "touch", "ran"], 2, "--max"),
        (
            &[
                "--policy",
                "tcc:n_min=9",
                "--max",
                "8",
                "--",
                "touch",
                "ran",
            ],
            125,
            "n_max = 8: must be at least n_min",
        ),
        (
            &["--init", "5", "--max", "3", "--", "touch", "ran"],
            125,
            "--init 5 is above --max 3",
        ),
        (&[], 2, "CMD"),
        (
            &["--completions", "file:/", "--", "touch", "ran"],
            125,
            "cannot read",
        ),
        (
            &["--completions", "file:no/such/dir/n", "--", "touch", "ran"],
            125,
            "does not exist",
        ),
        (
            &["--policy", "fastest", "--", "touch", "ran"],
            125,
            "unknown policy",
        ),
    ];
    assert_refused(dir.path(), &cases);
}

#[test]
fn psi_is_a_tcc_switch_and_bad_thresholds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = tune(
        dir.path(),
        &["--policy", "tcc:psi=1", "--", "sh", "-c", "touch ran"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(dir.path().join("ran").exists());
    // A kernel without PSI is told once at the start, and the run goes on.
    let absent = !std::path::Path::new("/proc/pressure/memory").exists();
    assert_eq!(err.contains("PSI is off for this run"), absent, "{err}");
    fs::remove_file(dir.path().join("ran")).unwrap();
    for (spec, says) in [
        ("tcc:psi=2", "not a switch"),
        (
            "tcc:psi=1,psi_full=0",
            "psi_full = 0: the stall fraction must be in (0, 1]",
        ),
        ("tcc:psi_some=1.5", "psi_some = 1.5"),
    ] {
        let out = tune(dir.path(), &["--policy", spec, "--", "touch", "ran"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{spec}: {err}");
        assert!(err.contains(says), "{spec}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{spec}: {err}");
        assert!(!dir.path().join("ran").exists(), "{spec} ran the command");
    }
}

/// The complete `hint` lines of a JSON log written while tact runs (a line being written is
/// left for the next look).
fn hints(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "hint")
        .collect()
}

/// Starts `tact tune --bottleneck SRC` on a command that runs until the test creates `stop`.
fn tune_until_stopped(dir: &Path, source: &str) -> std::process::Child {
    tact()
        .env("TACT_RUNTIME_DIR", dir)
        .current_dir(dir)
        .args(["tune", "--bottleneck", source, "--json-log", "tune.jsonl"])
        .args(["--workers-file", "jobs", "--", "sh", "-c"])
        .arg("while [ ! -e stop ]; do sleep 0.05; done")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Readings come at most every 100 ms, each the source's as `--bottleneck` wrote it.
fn check_readings(hints: &[Value], source: &str) {
    for h in hints {
        assert_eq!(h["bottleneck"], source, "{h}");
        assert!(h["utilization"].as_f64().unwrap() >= 0.0, "{h}");
    }
    for w in hints.windows(2) {
        let gap = w[1]["t"].as_f64().unwrap() - w[0]["t"].as_f64().unwrap();
        assert!(gap >= 0.0999, "readings {gap} s apart: {} {}", w[0], w[1]);
    }
}

/// A block device of this machine: a real disk when there is one, not a loop or RAM device.
fn a_block_device() -> Option<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/block")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort_by_key(|n| ["loop", "ram", "zram"].iter().any(|p| n.starts_with(p)));
    names.into_iter().next()
}

#[test]
fn a_disk_bottleneck_is_read_and_logged_while_the_command_runs() {
    let Some(dev) = a_block_device() else {
        eprintln!("skipped: /sys/block lists no device");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let source = format!("disk:/dev/{dev}");
    let t = tune_until_stopped(dir.path(), &source);
    let log = dir.path().join("tune.jsonl");
    wait_for(Duration::from_secs(60), "five disk readings", || {
        hints(&log).len() >= 5
    });
    fs::write(dir.path().join("stop"), "").unwrap();
    let out = t.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hints = hints(&log);
    check_readings(&hints, &source);
    for h in &hints {
        let u = h["utilization"].as_f64().unwrap();
        assert!(u <= 1.0, "a busy fraction: {h}");
    }
}

#[test]
fn a_link_bottleneck_counts_the_bytes_sent_over_the_rate() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    let dir = tempfile::tempdir().unwrap();
    let source = "net:lo@8mbit";
    let t = tune_until_stopped(dir.path(), source);
    let log = dir.path().join("tune.jsonl");
    wait_for(Duration::from_secs(60), "a first link reading", || {
        !hints(&log).is_empty()
    });
    // 4 MB over lo after the first reading: 32 Mbit, 4 s of the 8 mbit given.
    const SENT: usize = 4 << 20;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut rx, _) = listener.accept().unwrap();
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        while got < SENT {
            got += rx.read(&mut buf).unwrap();
        }
    });
    tx.write_all(&vec![7u8; SENT]).unwrap();
    drain.join().unwrap();
    // A reading that starts after the last byte arrived covers all of them.
    let seen = hints(&log).len();
    wait_for(Duration::from_secs(60), "two more readings", || {
        hints(&log).len() >= seen + 2
    });
    fs::write(dir.path().join("stop"), "").unwrap();
    let out = t.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hints = hints(&log);
    check_readings(&hints, source);
    // Each reading is the bits over the rate since the one before: summed over time it gives the
    // bytes back (lo carries everyone's traffic too, so at least ours). Half, because a logged
    // time may trail its reading by a moment on a loaded machine.
    let bits: f64 = hints
        .windows(2)
        .map(|w| {
            let dt = w[1]["t"].as_f64().unwrap() - w[0]["t"].as_f64().unwrap();
            w[1]["utilization"].as_f64().unwrap() * dt * 8e6
        })
        .sum();
    assert!(
        bits >= 0.5 * (SENT * 8) as f64,
        "the readings add up to {bits} bits; {} were sent",
        SENT * 8
    );
}

#[test]
fn a_bad_bottleneck_is_refused_before_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, i32, &str); 5] = [
        ("disk:vda@iops=0", 2, "at least 1"),
        ("net:lo", 2, "needs the link's rate"),
        ("tape:0", 2, "net:IF@RATE"),
        ("disk:no-such-disk-tact", 125, "unknown block device"),
        ("net:no-such-if@1gbit", 125, "unknown network interface"),
    ];
    for (source, code, says) in cases {
        let out = tune(dir.path(), &["--bottleneck", source, "--", "touch", "ran"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{source}: {err}");
        assert!(
            err.contains(says) && err.contains("--bottleneck"),
            "{source}: {err}"
        );
        assert!(!dir.path().join("ran").exists(), "{source} ran the command");
    }
}

/// `tact tune ARGS` started in `dir`, its stderr kept.
fn spawn_tune(dir: &Path, args: &[&str]) -> std::process::Child {
    tact()
        .env("TACT_RUNTIME_DIR", dir)
        .current_dir(dir)
        .arg("tune")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// How many commands xargs (tact's child) runs at once, sampled every few milliseconds until
/// tact exits; then tact's output. xargs reaps a finished command before it starts the next, so
/// its children are the commands it runs.
fn xargs_concurrency(t: std::process::Child) -> (Vec<usize>, Output) {
    let tact_pid = t.id() as i32;
    let reader = tact_linux::ProcReader::new();
    let mut xargs = None;
    let mut seen = Vec::new();
    let mut t = t;
    while t.try_wait().unwrap().is_none() {
        if xargs.is_none() {
            xargs = children_matching(tact_pid, "xargs").first().copied();
        }
        if let Some(x) = xargs {
            if let Ok(children) = reader.children(x) {
                seen.push(children.len());
            }
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    (seen, t.wait_with_output().unwrap())
}

/// How many samples saw each count, for messages.
fn histogram(seen: &[usize]) -> std::collections::BTreeMap<usize, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for &n in seen {
        *counts.entry(n).or_insert(0) += 1;
    }
    counts
}

/// `n` lines for xargs to read, one command each.
fn xargs_input(dir: &Path, n: usize) {
    let lines: String = (0..n).map(|i| format!("{i}\n")).collect();
    fs::write(dir.join("list"), lines).unwrap();
}

/// Lines in `done`: commands that ran to their end.
fn done_lines(dir: &Path) -> usize {
    fs::read_to_string(dir.join("done"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Runs `tact tune TACT_ARGS -- [PREFIX...] xargs -a list -P 1 -n 1 ...` over 40 commands of
/// 0.2 s under `static:4` and checks that xargs ran all of them, at most exactly 4 at once.
fn xargs_runs_exactly_four_at_most(tact_args: &[&str], prefix: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    xargs_input(dir.path(), 40);
    let mut args = vec!["--policy", "static:4", "--signals"];
    args.extend_from_slice(tact_args);
    args.push("--");
    args.extend_from_slice(prefix);
    args.extend_from_slice(&["xargs", "-a", "list", "-P", "1", "-n", "1"]);
    args.extend_from_slice(&["sh", "-c", "sleep 0.2; echo $0 >> done"]);
    let (seen, out) = xargs_concurrency(spawn_tune(dir.path(), &args));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(done_lines(dir.path()), 40, "every line ran once");
    let most = seen.iter().copied().max().unwrap_or(0);
    assert_eq!(
        most,
        4,
        "xargs ran at most {most} at once (samples per count: {:?})",
        histogram(&seen)
    );
}

#[test]
fn xargs_goes_from_its_own_count_to_the_target_and_no_further() {
    // From 1 to 4 is three SIGUSR1 at once: sent back to back, they would often merge into one
    // or two (see signals.rs), and xargs would never run 4.
    xargs_runs_exactly_four_at_most(&[], &[]);
}

#[test]
fn a_program_tact_does_not_know_gets_every_signal_apart() {
    // xargs behind env: tact takes the count from --signals-start and signals it at any
    // moment (no input pipe to cut short here), so only the wait for each signal to be taken
    // keeps the three apart.
    xargs_runs_exactly_four_at_most(&["--signals-start", "1"], &["env"]);
}

#[test]
fn xargs_comes_down_to_the_target_too() {
    let dir = tempfile::tempdir().unwrap();
    xargs_input(dir.path(), 30);
    let t = spawn_tune(
        dir.path(),
        &[
            "--policy",
            "static:2",
            "--signals",
            "--",
            "xargs",
            "-a",
            "list",
            "--max-procs=6",
            "-n",
            "1",
            "sh",
            "-c",
            "sleep 0.1; echo $0 >> done",
        ],
    );
    let (seen, out) = xargs_concurrency(t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(done_lines(dir.path()), 30, "every line ran once");
    // xargs may start up to 6 before the four SIGUSR2 arrive, a few milliseconds after its
    // start; the 30 commands then take at least 1.5 s at 2 at once.
    let second_half = &seen[seen.len() / 2..];
    assert!(
        !second_half.is_empty() && second_half.iter().all(|&n| n <= 2),
        "xargs ran more than 2 at once late in the run (samples per count: {:?})",
        histogram(second_half)
    );
}

#[test]
fn a_policy_that_moves_reaches_xargs() {
    let dir = tempfile::tempdir().unwrap();
    xargs_input(dir.path(), 150);
    // From 1 TCC must try 2 (slow start doubles), whatever it then judges.
    let t = spawn_tune(
        dir.path(),
        &[
            "--init",
            "1",
            "--max",
            "4",
            "--policy",
            QUICK_TCC,
            "--json-log",
            "tune.jsonl",
            "--signals",
            "--",
            "xargs",
            "-a",
            "list",
            "-n",
            "1",
            "sh",
            "-c",
            "sleep 0.03; echo $0 >> done",
        ],
    );
    let (seen, out) = xargs_concurrency(t);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(done_lines(dir.path()), 150, "every line ran once");
    let targets: Vec<usize> = of_kind(&json_log(&dir.path().join("tune.jsonl")), "target")
        .iter()
        .map(|t| t["target"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(targets[0], 1, "{targets:?}");
    let highest = *targets.iter().max().unwrap();
    assert!(highest > 1, "the policy never moved: {targets:?}");
    let most = seen.iter().copied().max().unwrap_or(0);
    assert!(
        (2..=highest).contains(&most),
        "xargs ran at most {most} at once; targets {targets:?}"
    );
}

#[test]
fn xargs_reading_a_slow_pipe_reads_all_of_it() {
    use std::io::Write;
    // GNU xargs takes a read of its input that a signal interrupts for the end of its input;
    // tact signals it only while it waits for a command to end, never while it reads.
    let dir = tempfile::tempdir().unwrap();
    let mut t = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .current_dir(dir.path())
        .args(["tune", "--policy", "static:3", "--signals", "--"])
        .args([
            "xargs",
            "-P",
            "1",
            "-n",
            "1",
            "sh",
            "-c",
            "sleep 0.1; echo $0 >> done",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // No input at first: xargs blocks reading the pipe while tact has two SIGUSR1 to send.
    // An xargs that stopped reading closes the pipe; the count of lines run then tells.
    let mut input = t.stdin.take().unwrap();
    for i in 0..20 {
        std::thread::sleep(Duration::from_millis(if i == 0 { 300 } else { 30 }));
        if writeln!(input, "{i}").is_err() {
            break;
        }
    }
    drop(input);
    let out = t.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(done_lines(dir.path()), 20, "every line ran once");
}

#[test]
fn signals_without_a_starting_count_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i32, &str); 6] = [
        (
            &["--signals", "--", "sh", "-c", "touch ran"],
            125,
            "--signals-start N",
        ),
        (
            &["--signals", "--", "xargs", "-P", "0", "touch", "ran"],
            125,
            "-P 0",
        ),
        (
            &[
                "--signals",
                "--signals-start",
                "2",
                "--",
                "xargs",
                "-P3",
                "touch",
                "ran",
            ],
            125,
            "disagrees with xargs's -P 3",
        ),
        (
            &["--signals-start", "2", "--", "touch", "ran"],
            2,
            "--signals",
        ),
        (
            &["--signals", "--workers-file", "j", "--", "touch", "ran"],
            2,
            "cannot be used with",
        ),
        (
            &["--signals", "--signals-start", "0", "--", "touch", "ran"],
            2,
            "--signals-start",
        ),
    ];
    assert_refused(dir.path(), &cases);
}

/// `tact tune --key KEY` with its state under `state` (XDG_STATE_HOME), on xargs running 300
/// commands of 30 ms from 1 at once, at most 4.
fn tune_with_key(dir: &Path, state: &Path, key: &str, log: &str) -> Output {
    tact()
        .env("TACT_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", state)
        .current_dir(dir)
        .args(["tune", "--key", key, "--init", "1", "--max", "4"])
        .args(["--policy", QUICK_TCC, "--json-log", log, "--signals", "--"])
        .args(["xargs", "-a", "list", "-n", "1", "sh", "-c", "sleep 0.03"])
        .output()
        .unwrap()
}

/// The count TCC's first cycle measures first when it warm-starts from `count`.
fn cut_of(count: usize) -> u64 {
    tact_core::tune::TuneParams::default().base_count(count) as u64
}

#[test]
fn a_keys_steady_count_is_recorded_and_the_next_run_starts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    xargs_input(dir.path(), 300);
    let file = state.join("tact/tune/build.json");

    let out = tune_with_key(dir.path(), &state, "build", "one.jsonl");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = json_log(&dir.path().join("one.jsonl"));
    let key = of_kind(&log, "key");
    assert_eq!(key.len(), 1);
    assert_eq!(
        key[0]["warm"],
        Value::Null,
        "nothing recorded yet: a cold start"
    );
    assert_eq!(key[0]["file"], file.display().to_string());
    assert_eq!(of_kind(&log, "target")[0]["target"], 1, "--init");
    let steady: Vec<u64> = of_kind(&log, "transition")
        .iter()
        .filter(|t| t["to"] == "steady")
        .map(|t| t["target_to"].as_u64().unwrap())
        .collect();
    let recorded: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        Some(&recorded["steady_count"].as_u64().unwrap()),
        steady.last(),
        "the last entry into Steady is recorded: {recorded}"
    );
    let count = steady.last().copied().unwrap() as usize;

    let out = tune_with_key(dir.path(), &state, "build", "two.jsonl");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("--key build: warm start from {count} jobs")),
        "{err}"
    );
    let log = json_log(&dir.path().join("two.jsonl"));
    assert_eq!(of_kind(&log, "key")[0]["warm"], count);
    // TCC's warm start is a normal first cycle from the count: Base at the count's cut.
    assert_eq!(of_kind(&log, "target")[0]["target"], cut_of(count));
    let first = of_kind(&log, "transition")[0].clone();
    assert_eq!(first["target_from"], cut_of(count), "{first}");
}

#[test]
fn a_recorded_count_is_read_and_a_bad_one_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("state/tact/tune");
    fs::create_dir_all(&keys).unwrap();
    let run = |key: &str, policy: &str| {
        let out = tact()
            .env("TACT_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path())
            .args([
                "tune", "--key", key, "--init", "1", "--max", "8", "--policy", policy,
            ])
            .args([
                "--json-log",
                "tune.jsonl",
                "--workers-file",
                "jobs",
                "--",
                "true",
            ])
            .output()
            .unwrap();
        let log: Vec<Value> = fs::read_to_string(dir.path().join("tune.jsonl"))
            .map(|text| {
                text.lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let first = of_kind(&log, "target").first().map(|t| t["target"].clone());
        let _ = fs::remove_file(dir.path().join("tune.jsonl"));
        (
            out,
            first,
            of_kind(&log, "key").first().map(|k| k["warm"].clone()),
        )
    };

    fs::write(
        keys.join("hand.json"),
        r#"{"steady_count": 6, "command": "by hand"}"#,
    )
    .unwrap();
    let (out, first, _) = run("hand", "tcc");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(first, Some(cut_of(6).into()));
    // A smaller --max bounds the recorded count too.
    fs::write(
        keys.join("big.json"),
        r#"{"steady_count": 50, "command": ""}"#,
    )
    .unwrap();
    let (out, first, _) = run("big", "tcc");
    assert!(
        stderr(&out).contains("warm start from 8 jobs"),
        "{}",
        stderr(&out)
    );
    assert_eq!(first, Some(cut_of(8).into()));
    // The user's own warm= wins over the record.
    let (_, first, warm) = run("hand", "tcc:warm=7");
    assert_ne!(cut_of(7), cut_of(6));
    assert_eq!(first, Some(cut_of(7).into()));
    assert_eq!(
        warm,
        Some(7.into()),
        "the key line logs the warm TCC starts from"
    );
    // A larger n_min raises the recorded count to it, as the library's pools do.
    let (out, first, warm) = run("hand", "tcc:n_min=7");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warm start from 7 jobs"),
        "{}",
        stderr(&out)
    );
    assert_eq!(warm, Some(7.into()));
    assert_eq!(first, Some(7.into()), "the first cut is held at n_min");

    fs::write(keys.join("bad.json"), "seven").unwrap();
    let (out, first, _) = run("bad", "tcc");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--key bad: ignoring") && err.contains("starting cold"),
        "{err}"
    );
    assert_eq!(first, Some(1.into()), "a cold start at --init");

    let (out, _, _) = run("hand", "static:2");
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warm start is TCC's"),
        "{}",
        stderr(&out)
    );
    let (out, _, _) = run("../escape", "tcc");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not a key"), "{}", stderr(&out));
}

#[test]
fn a_make_with_a_job_count_of_its_own_is_refused() {
    // make would run that many jobs itself (or all at once, with a bare -j), out of tact's hands.
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["--", "make", "-j4", "ran"],
            125,
            "make -j4: tact is make's jobserver",
        ),
        (&["--", "make", "-kj", "ran"], 125, "Remove -kj (--max N"),
        (
            &["--max", "2", "--", "gmake", "--jobs=2", "ran"],
            125,
            "--jobs=2",
        ),
        (&["--", "/usr/bin/make", "--jobs", "ran"], 125, "--jobs"),
    ];
    assert_refused(dir.path(), &cases);
    // Another program's -j is its own business.
    let out = tune(dir.path(), &["--", "sh", "-c", "touch ran", "-j4"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("ran").exists());
}

#[test]
fn a_recursive_makes_jobs_are_its_recipes_not_its_sub_makes() {
    // Two sub-makes of 15 recipes each, one run by make itself, one through a shell that
    // stays (`cd b && $(MAKE)`). A jobserver token stands for a recipe: counting the sub-makes
    // would make 2 jobs of the 30 (or 32 with both).
    let dir = tempfile::tempdir().unwrap();
    for sub in ["a", "b"] {
        fs::create_dir(dir.path().join(sub)).unwrap();
        makefile(&dir.path().join(sub), 15, 0.1);
    }
    fs::write(
        dir.path().join("M"),
        "all: a b\na:\n\t+@$(MAKE) --no-print-directory -C a -f M\n\
         b:\n\t+@cd b && $(MAKE) --no-print-directory -f M\n.PHONY: all a b\n",
    )
    .unwrap();
    let out = tune(
        dir.path(),
        &["--json-log", "tune.jsonl", "--", "make", "-f", "M"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for sub in ["a", "b"] {
        let built = fs::read_to_string(dir.path().join(sub).join("built")).unwrap();
        assert_eq!(built.lines().count(), 15, "{sub}");
    }
    let log = json_log(&dir.path().join("tune.jsonl"));
    let done = of_kind(&log, "end")[0]["completions"].as_u64().unwrap();
    // Each recipe lives 100 ms, tact looks every 2 ms (see the first test).
    assert!((15..=30).contains(&done), "{done} completions counted");
}

#[test]
fn the_start_says_how_tact_drives_the_command_and_when_tcc_steps_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = tune(dir.path(), &["--init", "2", "--max", "8", "--", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // b = max(batch_min 16, 2 jobs) completions a batch; settling (16) and n* = 30 batches.
    assert!(
        err.starts_with(
            "tact: tune: a make jobserver, starting at 2 jobs at once (at most 8); TCC's first \
             step after ~496 jobs finish or 30s at full load"
        ),
        "{err}"
    );
    let out = tune(
        dir.path(),
        &[
            "--max", "8", "--policy", QUICK_TCC, "--init", "3", "--", "make", "-v",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("make's jobserver, starting at 3 jobs at once (at most 8); TCC's first step after ~12 jobs finish or 0.3s"),
        "{err}"
    );
    let out = tune(dir.path(), &["--policy", "static:3", "--", "true"]);
    let err = stderr(&out);
    assert!(
        err.contains("starting at 3 jobs at once (at most ") && err.contains("), policy static:3"),
        "{err}"
    );
}
