//! DESIGN.md invariant 1: no exit path of tact leaves a job stopped, SIGKILL included.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;

/// Waits until tact has decided a suspension of at least `secs` and the job is stopped now.
fn wait_for_long_stop(log: &std::path::Path, job: i32, secs: f64) {
    wait_for(Duration::from_secs(60), "a long suspension", || {
        longest_suspension(log) >= secs && any_stopped(&tree(job))
    });
}

/// The root of the job tact runs (its child that is not the guard).
fn job_of(tact_pid: i32) -> Option<i32> {
    let r = tact_linux::ProcReader::new();
    r.children(tact_pid)
        .unwrap_or_default()
        .into_iter()
        .find(|&c| {
            r.cmdline(c)
                .map(|a| a.first().is_some_and(|a| a == "sh"))
                .unwrap_or(false)
        })
}

/// A `tact run` holding its stalling job in a suspension of at least 0.8 s right now.
struct Suspended {
    tact: std::process::Child,
    /// Root of the job's tree.
    job: i32,
    runtime: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

fn suspended_job() -> Suspended {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let (tact, log) = start_stalling(dir.path(), runtime.path());
    let pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(20), "the job to start", || job_of(pid));
    wait_for_long_stop(&log, job, 0.8);
    Suspended {
        tact,
        job,
        runtime,
        _dir: dir,
    }
}

#[test]
fn sigkill_of_tact_while_the_job_is_suspended_resumes_it_within_a_second() {
    let mut s = suspended_job();
    kill(s.tact.id() as i32, Signal::SIGKILL);
    s.tact.wait().unwrap();
    // The guard notices its socket close at once; the 5 s limit allows for a loaded machine.
    let took = wait_for(
        Duration::from_secs(5),
        "the guard to resume the job",
        || !any_stopped(&tree(s.job)),
    );
    eprintln!("resumed {took:?} after SIGKILL of tact");
    kill_tree(s.job);
}

#[test]
fn when_tact_and_its_guard_both_die_the_next_tact_resumes_the_job() {
    let mut s = suspended_job();
    let pid = s.tact.id() as i32;
    let guard = children_matching(pid, "__guard");
    assert_eq!(guard.len(), 1, "one guard process");
    kill(guard[0], Signal::SIGKILL);
    kill(pid, Signal::SIGKILL);
    s.tact.wait().unwrap();
    // Nobody is left to resume it: it stays stopped...
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        any_stopped(&tree(s.job)),
        "the job should still be stopped before recovery"
    );
    // ...until any tact command starts (here `tact recover`), which reads the crash record.
    let out = tact()
        .env("TACT_RUNTIME_DIR", s.runtime.path())
        .arg("recover")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("resumed process"));
    assert!(!any_stopped(&tree(s.job)), "recover left the job stopped");
    kill_tree(s.job);
}

/// Probation stretches a suspension by 1/φ = 4, past `--max-suspend` and so past the lease the
/// guard was given when tact stopped the job (`--max-suspend` + 5 s): tact renews the lease
/// while it holds the job, so the guard does not take it for hung, resume the job and leave
/// (tact then lost its guard and exited 125).
#[test]
fn a_probation_suspension_longer_than_the_guards_lease_ends_normally() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("count");
    let stop = dir.path().join("stop");
    std::fs::write(&counter, "0\n").unwrap();
    // 40 counts, then no progress until the test says stop.
    let script = format!(
        "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo $i > {c}.tmp; mv {c}.tmp {c}; \
         sleep 0.015; done; while [ ! -e {s} ]; do sleep 0.1; done",
        c = counter.display(),
        s = stop.display()
    );
    let log = dir.path().join("trace.jsonl");
    let mut run = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["run", "--testpoint", "100ms", "--bootstrap", "5"])
        .args(["--probation", "10m", "--max-suspend", "2s", "--progress"])
        .arg(format!("file:{}", counter.display()))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--json-log")
        .arg(&log)
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Suspensions double from 0.1 s to 2 s, each served 4 times as long: 0.4 ... 6.4, 8 s.
    let served = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["kind"] == "resumed")
            .filter_map(|v| v["stopped"].as_f64())
            .fold(0.0, f64::max)
    };
    wait_for(
        Duration::from_secs(120),
        "a suspension past the lease (2 s + 5 s) served whole",
        || served() >= 7.5 || run.try_wait().unwrap().is_some(),
    );
    // A testpoint or more after it, when tact renews the lease again (and found no guard).
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(&stop, "").unwrap();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(served() >= 7.5, "longest served {} s: {err}", served());
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The log gives probation's end in seconds, as its other times (it was {secs, nanos}).
    let text = std::fs::read_to_string(&log).unwrap();
    let probation = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["phase"] == "probation")
        .expect("a testpoint in probation");
    assert!(probation["until"].as_f64().unwrap() > 500.0, "{probation}");
}
