//! `tact tune --coordinate KEY`: two runs on one key take turns measuring (spec concurrency.md
//! §6 item 4). Their TCC explorations, read from their JSON logs and put on one clock, never
//! overlap, each run takes turns, and each is told the other's completions, never its own.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};

use common::*;
use serde_json::Value;

/// TCC deciding on a few completions and re-measuring after a second of steady state, so that
/// a run of a few seconds explores several times.
const QUICK_TCC: &str =
    "tcc:n_star=3,batch_min=1,dwell=300ms,max_dwell=300ms,steady_min=1s,steady_max=1s";

/// A Makefile of `n` independent targets, each sleeping `secs`.
fn makefile(dir: &Path, n: usize, secs: f64) {
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    fs::write(
        dir.join("M"),
        format!(
            "all: {}\n\nt%:\n\t@sleep {secs}; touch $@\n",
            names.join(" ")
        ),
    )
    .unwrap();
}

/// `tact tune --coordinate KEY` on make in `dir` (its own tree), with the lock directory under
/// `runtime`.
fn coordinated(runtime: &Path, dir: &Path, key: &str) -> Child {
    tact()
        .env("TACT_RUNTIME_DIR", runtime)
        .current_dir(dir)
        .args(["tune", "--coordinate", key, "--policy", QUICK_TCC])
        .args(["--max", "6", "--init", "2", "--json-log", "tune.jsonl"])
        .args(["--", "make", "-f", "M", "all"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One run's explorations, as [start, end] on CLOCK_MONOTONIC: from each transition that leaves
/// Steady to the next one that enters it (or the end of the run), and the turns it took.
fn explorations(log: &[Value]) -> (Vec<(f64, f64)>, u64) {
    let turns = of_kind(log, "turn");
    // The log's `t` is the run's own clock; turn lines carry the shared one too.
    let first = turns.first().expect("the run logged its turns");
    let offset = first["monotonic"].as_f64().unwrap() - first["t"].as_f64().unwrap();
    let mut out = Vec::new();
    let mut since = None;
    for tr in of_kind(log, "transition") {
        let t = tr["t"].as_f64().unwrap() + offset;
        if tr["from"] == "steady" && tr["to"] != "steady" {
            since = Some(t);
        } else if tr["to"] == "steady" && tr["from"] != "steady" {
            if let Some(s) = since.take() {
                out.push((s, t));
            }
        }
    }
    let end = of_kind(log, "end")[0];
    if let Some(s) = since {
        out.push((s, end["t"].as_f64().unwrap() + offset));
    }
    (out, end["turns"].as_u64().unwrap())
}

#[test]
fn two_runs_on_one_key_never_explore_at_once() {
    let runtime = tempfile::tempdir().unwrap();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // ~30 jobs/s at the most (6 at once): each run lasts about 10 s, several steady timeouts.
    for d in &dirs {
        makefile(d.path(), 300, 0.2);
    }
    let key = "tact-test-coordinate";
    let mut children: Vec<Child> = dirs
        .iter()
        .map(|d| coordinated(runtime.path(), d.path(), key))
        .collect();
    let mut runs = Vec::new();
    for (child, d) in children.iter_mut().zip(&dirs) {
        let status = child.wait().unwrap();
        let err = stderr_of(child);
        assert_eq!(status.code(), Some(0), "{err}");
        assert!(err.contains(&format!("turns on {key}: ")), "{err}");
        let log = json_log(&d.path().join("tune.jsonl"));
        // The runs overlap for most of their 300 jobs each: told some of the other's
        // completions, and never more than it has (its own would be 300 more).
        let end = of_kind(&log, "end")[0];
        let peers = end["peer_completions"].as_u64().unwrap();
        assert!((1..=300).contains(&peers), "{end}");
        assert!(
            err.contains(&format!("{peers} completions of the others")),
            "{err}"
        );
        runs.push(explorations(&log));
    }
    assert!(runtime.path().join(format!("tune/{key}.lock")).exists());
    assert!(runtime.path().join(format!("tune/{key}.done")).exists());
    let [(a, turns_a), (b, turns_b)] = [&runs[0], &runs[1]];
    // Not vacuous: both took turns, and both explored from a steady state.
    assert!(
        *turns_a >= 1 && *turns_b >= 1,
        "turns: {turns_a} and {turns_b}"
    );
    assert!(!a.is_empty() && !b.is_empty(), "explorations: {a:?} {b:?}");
    for x in a {
        for y in b {
            let overlap = x.0.max(y.0) < x.1.min(y.1);
            assert!(
                !overlap,
                "explorations overlap: {x:?} and {y:?}\n{a:?}\n{b:?}"
            );
        }
    }
}

#[test]
fn bad_keys_and_modes_are_refused_before_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--coordinate", "a/b"], 2, "without '/'"),
        (&["--coordinate", ".."], 2, "without '/'"),
        (&["--coordinate", ""], 2, "without '/'"),
        (
            &["--coordinate", "k", "--epoch", "5s"],
            125,
            "add --coordinate-mode epoch",
        ),
        (&["--epoch", "5s"], 2, "--coordinate"),
    ];
    for (args, code, says) in cases {
        let out = tact()
            .env("TACT_RUNTIME_DIR", dir.path())
            .current_dir(dir.path())
            .arg("tune")
            .args(args)
            .args(["--", "touch", "ran"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.path().join("ran").exists(), "{args:?} ran the command");
    }
    // A lock directory tact cannot create: told at once, nothing runs.
    fs::write(dir.path().join("file"), "").unwrap();
    let out = tact()
        .env("TACT_RUNTIME_DIR", dir.path().join("file"))
        .current_dir(dir.path())
        .args(["tune", "--coordinate", "k", "--", "touch", "ran"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("cannot use the lock directory"), "{err}");
    assert!(!dir.path().join("ran").exists());
}

#[test]
fn epoch_mode_logs_its_turns_without_a_lock() {
    let runtime = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    makefile(dir.path(), 40, 0.05);
    let out = tact()
        .env("TACT_RUNTIME_DIR", runtime.path())
        .current_dir(dir.path())
        .args(["tune", "--coordinate", "e", "--coordinate-mode", "epoch"])
        .args([
            "--epoch",
            "500ms",
            "--policy",
            QUICK_TCC,
            "--json-log",
            "tune.jsonl",
        ])
        .args(["--", "make", "-f", "M", "all"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // No lock, but the completions are shared through the same directory.
    assert!(
        !runtime.path().join("tune/e.lock").exists(),
        "epoch mode takes no lock"
    );
    assert!(runtime.path().join("tune/e.done").exists());
    let log = json_log(&dir.path().join("tune.jsonl"));
    let grants: Vec<&Value> = of_kind(&log, "turn")
        .into_iter()
        .filter(|t| t["turn"] == "grant")
        .collect();
    assert!(!grants.is_empty(), "{log:?}");
    // A round waits for the next boundary: at most an epoch, plus the tick that sees it (late
    // on a loaded machine).
    for g in &grants {
        assert!(g["waited"].as_f64().unwrap() <= 0.5 + 1.0, "{g}");
    }
}
