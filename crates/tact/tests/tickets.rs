//! `tact tickets` on real files and processes: `check` and `explain` give the spec's E1 shares,
//! bad setup files get one clear line and exit status 2, and `run` divides one CPU by tickets
//! with the cgroup backend, follows a job waking up, logs every interval and cleans up; with
//! disk and memory tickets it writes the disk weights and memory protections, logs them, and
//! removes them; the signals backend says it applies CPU rights only.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Spec tickets.md E1, as shipped in contrib/.
const E1: &str = include_str!("../../../contrib/tickets/e1.toml");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(mut c: Command) -> (Output, String, String) {
    let out = c.stdin(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn tickets(args: &[&str], runtime: &Path) -> Command {
    let mut c = tact();
    c.arg("tickets").args(args).env("TACT_RUNTIME_DIR", runtime);
    c
}

#[test]
fn check_and_explain_give_the_e1_shares() {
    let dir = tempfile::tempdir().unwrap();
    let setup = write(dir.path(), "e1.toml", E1);
    let s = setup.to_str().unwrap();

    let (out, stdout, stderr) = run(tickets(&["check", s], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for (job, share, path) in [
        ("A1", "16.67%", "base -1000-> A -100/300-> A1"),
        ("A2", "33.33%", "base -1000-> A -200/300-> A2"),
        ("B1", "8.33%", "base -1000-> B -100/600-> B1"),
        ("B2", "16.67%", "base -1000-> B -200/600-> B2"),
        ("B3", "25.00%", "base -1000-> B -300/600-> B3"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{job} ")))
            .unwrap_or_else(|| panic!("no line for {job}:\n{stdout}"));
        assert!(line.contains(share) && line.contains(path), "{line}");
    }

    let (out, stdout, stderr) = run(tickets(&["check", s, "--json"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let shares: Vec<f64> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["resources"]["cpu"]["share"].as_f64().unwrap())
        .collect();
    let want = [1.0 / 6.0, 1.0 / 3.0, 1.0 / 12.0, 1.0 / 6.0, 1.0 / 4.0];
    for (got, want) in shares.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{shares:?}");
    }

    let (out, stdout, stderr) = run(tickets(&["explain", s, "B3", "--json"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let cpu = &v["resources"][0];
    assert_eq!(cpu["resource"], "cpu");
    assert!(
        (cpu["rights"].as_f64().unwrap() - 500.0).abs() < 1e-9,
        "{cpu}"
    );
    let hops = cpu["paths"][0]["hops"].as_array().unwrap();
    let product: f64 = hops.iter().map(|h| h["factor"].as_f64().unwrap()).product();
    assert!((product - 500.0).abs() < 1e-9, "{cpu}");
    let holders: Vec<&str> = hops.iter().map(|h| h["holder"].as_str().unwrap()).collect();
    assert_eq!(holders, ["B", "B3", "B3"]);

    let (out, stdout, stderr) = run(tickets(&["explain", s, "A2"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("A -> A2") && stdout.contains("0.666667"),
        "{stdout}"
    );
}

#[test]
fn bad_setup_files_get_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"C\", cpu = 1 }]\n",
            "[[job]] \"J\", funding[0].from: unknown currency \"C\"",
        ),
        (
            "[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 0 }]\n",
            "funding[0].cpu = 0: ticket amounts are positive",
        ),
        (
            "[[job]]\nname = \"J\"\ncommad = \"x\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
            ":3:1: in [[job]]: unknown field `commad`",
        ),
        (
            "[[currency]]\nname = \"P\"\nfunding = [{ from = \"Q\", cpu = 1 }]\n\
             [[currency]]\nname = \"Q\"\nfunding = [{ from = \"P\", cpu = 1 }]\n",
            "would close a cycle",
        ),
        (
            "[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 1 }]\n\
             [[job]]\nname = \"J\"\ncommand = \"y\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
            "[[job]] #2: name \"J\" is already taken",
        ),
        (
            "[[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 2000, hard = true }]\n",
            "above its hard total 1000",
        ),
        ("[[job]\n", ":1:"),
        // Amounts above the daemon's cap are refused (they wrapped i64 in the sums: rc 0 and
        // R* = -4.6e19, or a hard total "kept" by two hard tickets of i64::MAX).
        (
            "[[currency]]\nname = \"C\"\nfunding = [{ from = \"base\", cpu = 10 }]\n\
             [[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"C\", cpu = 9223372036854775807 }]\n\
             [[job]]\nname = \"K\"\ncommand = \"x\"\nfunding = [{ from = \"C\", cpu = 9223372036854775807 }]\n",
            "[[job]] \"J\", funding[0].cpu = 9223372036854775807: ticket amounts are at most 1000000000000000",
        ),
        (
            "[base]\ncpu = 9223372036854775807\n\
             [[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 1, hard = true }]\n",
            "[base] cpu = 9223372036854775807: a hard total is at most 1000000000000000",
        ),
        // Names: '(' and ')' are the hidden soft_tix(NAME) currencies'; a newline broke the
        // tables.
        (
            "[[currency]]\nname = \"soft_tix(base)\"\nfunding = [{ from = \"base\", cpu = 1 }]\n\
             [[job]]\nname = \"J\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
            "[[currency]] #1: name \"soft_tix(base)\": names may not contain '(' or ')'",
        ),
        (
            "[[job]]\nname = \"J\\nK\"\ncommand = \"x\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
            "[[job]] #1: name \"J\\nK\": names may not contain whitespace or control characters",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let setup = write(dir.path(), &format!("bad{i}.toml"), text);
        let s = setup.to_str().unwrap();
        for args in [vec!["check", s], vec!["run", s, "--duration", "1s"]] {
            let (out, stdout, stderr) = run(tickets(&args, dir.path()));
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stdout.is_empty(), "{stdout}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains(s) && stderr.contains(want),
                "want {want:?} in {stderr}"
            );
        }
    }
    // Currencies without a job: nothing to run, a bad setup for `run` (`check` shows it).
    let nojob = write(
        dir.path(),
        "nojob.toml",
        "[[currency]]\nname = \"A\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
    );
    let (out, _, stderr) = run(tickets(&["run", nojob.to_str().unwrap()], dir.path()));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nojob.toml: no [[job]] to run"), "{stderr}");
    let missing = dir.path().join("missing.toml");
    let (out, _, stderr) = run(tickets(&["check", missing.to_str().unwrap()], dir.path()));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("missing.toml: cannot read"), "{stderr}");

    let e1 = write(dir.path(), "e1.toml", E1);
    let (out, _, stderr) = run(tickets(
        &["explain", e1.to_str().unwrap(), "C9"],
        dir.path(),
    ));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no job \"C9\" (its jobs: A1, A2, B1, B2, B3)"),
        "{stderr}"
    );
}

/// The root-only runs take turns: each divides CPU 1, and two at once would halve each other's.
static ONE_CPU: Mutex<()> = Mutex::new(());

/// What a `tact tickets run` left: its status, stderr, the interval lines and the summary.
struct Ran {
    out: Output,
    stderr: String,
    intervals: Vec<Value>,
    summary: Value,
}

/// Runs `setup` pinned to CPU 1 with the cgroup backend under test cgroups for `secs` seconds,
/// and checks that it removed its cgroups. The test cgroup is a child of the cpu hierarchy's
/// root that holds no process, so that on cgroup v2 tact may enable the cpu controller there
/// (`--cgroup-parent`) wherever the test itself runs. `None` (with the reason printed) when this
/// machine cannot: not root, or no writable cpu hierarchy.
fn run_on_one_cpu(name: &str, setup: &str, secs: u32) -> Option<Ran> {
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let rig = CgroupRig::new(&format!("tickets-{name}"))?;
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "setup.toml", setup);
    let log = dir.path().join("log.jsonl");
    let mut c = rig.tact_on_cpu1();
    c.args(["tickets", "run"])
        .arg(&path)
        .args(["--backend", "cgroup", "--duration", &format!("{secs}s")])
        .arg("--cgroup-parent")
        .arg(&rig.cpu.0)
        .arg("--json-log")
        .arg(&log)
        .env("TACT_RUNTIME_DIR", dir.path());
    let (out, _, stderr) = run(c);
    rig.assert_clean(&stderr);
    Some(Ran::read(out, stderr, &log))
}

impl Ran {
    /// The run's log: the interval lines, then the summary.
    fn read(out: Output, stderr: String, log: &Path) -> Ran {
        let mut lines: Vec<Value> = std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let summary = lines.pop().expect("a summary line")["summary"].clone();
        assert!(summary.is_object(), "{summary}\n{stderr}");
        Ran {
            out,
            stderr,
            intervals: lines,
            summary,
        }
    }

    /// Each job's achieved share, in job order.
    fn achieved(&self) -> Vec<f64> {
        self.summary["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["achieved"]["cpu"].as_f64().unwrap())
            .collect()
    }
}

/// `tact tickets run --backend signals` of `setup` pinned to CPU 1 (unprivileged).
fn signals_on_one_cpu(setup: &str, args: &[&str], runtime: &Path) -> (Command, PathBuf) {
    let path = write(runtime, "setup.toml", setup);
    let log = runtime.join("log.jsonl");
    let mut c = Command::new("taskset");
    c.args(["-c", "1", env!("CARGO_BIN_EXE_tact"), "tickets", "run"])
        .arg(&path)
        .args(["--backend", "signals", "--json-log"])
        .arg(&log)
        .args(args)
        .env("TACT_RUNTIME_DIR", runtime);
    (c, log)
}

/// Every pid the log names is gone or a zombie: nothing left running, nothing left stopped.
fn assert_all_ended(intervals: &[Value]) {
    let mut pids: Vec<i32> = intervals
        .iter()
        .flat_map(|l| l["jobs"].as_array().unwrap().clone())
        .flat_map(|j| j["pids"].as_array().unwrap().clone())
        .map(|p| p.as_i64().unwrap() as i32)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    assert!(!pids.is_empty());
    assert!(!any_stopped(&pids), "a job was left stopped: {pids:?}");
    let reader = tact_linux::ProcReader::new();
    for p in pids {
        if let Ok(s) = reader.stat(p) {
            assert!(s.is_dead(), "process {p} still runs: {s:?}");
        }
    }
}

/// A CPU-bound job; `timeout` ends it should tact fail to.
const SPIN: &str = "exec timeout 120 sh -c 'while :; do :; done'";

/// The job's field in each interval line, with the line's time.
fn series<'a>(intervals: &'a [Value], job: &str, field: &str) -> Vec<(f64, &'a Value)> {
    intervals
        .iter()
        .map(|l| {
            let j = l["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|j| j["name"] == job)
                .unwrap();
            (l["t"].as_f64().unwrap(), &j[field]["cpu"])
        })
        .collect()
}

/// A(1000) -> {x: 100, y: 200}, B(1000) -> {z: 100}: x 1/6, y 1/3, z 1/2 while all spin.
fn split_setup() -> String {
    two_currencies("y", SPIN)
}

/// A(1000) -> {x: 100, `second`: 200} and B(1000) -> {z: 100}, every job a spinner except
/// `second`, which runs `second_command`.
fn two_currencies(second: &str, second_command: &str) -> String {
    format!(
        r#"
[[currency]]
name = "A"
funding = [{{ from = "base", cpu = 1000 }}]

[[currency]]
name = "B"
funding = [{{ from = "base", cpu = 1000 }}]

[[job]]
name = "x"
command = "{SPIN}"
funding = [{{ from = "A", cpu = 100 }}]

[[job]]
name = "{second}"
command = "{second_command}"
funding = [{{ from = "A", cpu = 200 }}]

[[job]]
name = "z"
command = "{SPIN}"
funding = [{{ from = "B", cpu = 100 }}]
"#
    )
}

#[test]
fn run_divides_one_cpu_by_tickets_logs_every_interval_and_cleans_up() {
    let Some(ran) = run_on_one_cpu("split", &split_setup(), 6) else {
        return;
    };
    assert_eq!(ran.out.status.code(), Some(0), "{}", ran.stderr);
    use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuHierarchy};
    let version = CpuHierarchy::detect().unwrap().version;
    let backend = format!("backend cgroup ({}", version.weight_file());
    assert!(ran.stderr.contains(&backend), "{}", ran.stderr);

    // One object per interval, each with every job and the contract's fields.
    assert!(
        ran.intervals.len() >= 20,
        "{} intervals",
        ran.intervals.len()
    );
    let mut last_t = 0.0;
    for line in &ran.intervals {
        let t = line["t"].as_f64().unwrap();
        assert!(t > last_t, "{line}");
        last_t = t;
        let jobs = line["jobs"].as_array().unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["x", "y", "z"]);
        for j in jobs {
            assert!(j["pids"].is_array(), "{j}");
            assert!(j["active"]["cpu"].is_boolean(), "{j}");
            assert!(j["rights"]["cpu"].is_f64(), "{j}");
            assert!(j["expected"]["cpu"].is_f64(), "{j}");
            assert!(j["weight"]["cpu"].is_u64(), "{j}");
            assert!(j["cpu_ns"].is_u64(), "{j}");
        }
    }
    // All three compete throughout: 1/6, 1/3, 1/2, in weights 1:2:3 of the top of the range
    // (cpu.shares 2-262144 on v1, cpu.weight 1-10000 on v2).
    let last = &ran.intervals[ran.intervals.len() - 1]["jobs"];
    let weights: Vec<u64> = (0..3)
        .map(|i| last[i]["weight"]["cpu"].as_u64().unwrap())
        .collect();
    let want = match version {
        CgroupVersion::V1 => [87381, 174763, 262144],
        CgroupVersion::V2 => [3333, 6667, 10000],
    };
    assert_eq!(weights, want);

    let achieved = ran.achieved();
    let expected: Vec<f64> = (0..3)
        .map(|i| ran.summary["jobs"][i]["expected"]["cpu"].as_f64().unwrap())
        .collect();
    let (x, y, z) = (achieved[0], achieved[1], achieved[2]);
    assert!(z > x && y > x, "{achieved:?}\n{}", ran.stderr);
    assert!((0.35..=0.65).contains(&z), "{achieved:?}\n{}", ran.stderr);
    assert!((expected[2] - 0.5).abs() < 0.05, "{expected:?}");
    assert_eq!(ran.summary["end"], "--duration passed");
    assert_all_ended(&ran.intervals);
}

#[test]
fn a_job_waking_up_takes_its_part_of_its_currency_back() {
    let setup = two_currencies("w", &format!("sleep 2; {SPIN}"));
    let Some(ran) = run_on_one_cpu("wake", &setup, 5) else {
        return;
    };
    assert_eq!(ran.out.status.code(), Some(0), "{}", ran.stderr);
    let x = series(&ran.intervals, "x", "expected");
    let w = series(&ran.intervals, "w", "active");
    // Asleep: x holds all of A, half the CPU. Awake (the sleep ends at 2 s; give it a second to
    // be seen on a loaded machine): x is back to 100 of A's 300 tickets.
    let asleep: Vec<f64> = x
        .iter()
        .filter(|(t, _)| (0.5..1.5).contains(t))
        .map(|(_, e)| e.as_f64().unwrap())
        .collect();
    let awake: Vec<f64> = x
        .iter()
        .filter(|(t, _)| *t >= 3.5)
        .map(|(_, e)| e.as_f64().unwrap())
        .collect();
    assert!(!asleep.is_empty() && !awake.is_empty(), "{x:?}");
    assert!(asleep.iter().all(|e| (e - 0.5).abs() < 1e-9), "{asleep:?}");
    assert!(
        awake.iter().all(|e| (e - 1.0 / 6.0).abs() < 1e-9),
        "{awake:?}"
    );
    assert!(w
        .iter()
        .filter(|(t, _)| (0.5..1.5).contains(t))
        .all(|(_, a)| a.as_bool() == Some(false)));
    assert_all_ended(&ran.intervals);
}

/// *expected* is `R/ΣR` over the jobs competing, averaged over the time some job competed: a
/// job alone that spins for a second and then sleeps expected all of the CPU whenever it
/// wanted some (the sleep counted, it read about a quarter).
#[test]
fn expected_counts_only_the_time_some_job_competed() {
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tempfile::tempdir().unwrap();
    let setup = "[[job]]\nname = \"J\"\n\
                 command = \"timeout 1 sh -c 'while :; do :; done'; sleep 3\"\n\
                 funding = [{ from = \"base\", cpu = 100 }]\n";
    let (c, log) = signals_on_one_cpu(setup, &[], runtime.path());
    let (out, _, stderr) = run(c);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ran = Ran::read(out, stderr, &log);
    let expected = ran.summary["jobs"][0]["expected"]["cpu"].as_f64().unwrap();
    assert!(expected > 0.99, "{expected}\n{}", ran.stderr);
}

#[test]
fn the_signals_backend_divides_one_cpu_by_tickets_unprivileged() {
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tempfile::tempdir().unwrap();
    let (c, log) = signals_on_one_cpu(&split_setup(), &["--duration", "8s"], runtime.path());
    let (out, _, stderr) = run(c);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("backend signals (ALPS"), "{stderr}");
    let ran = Ran::read(out, stderr, &log);
    // All three compete: ALPS shares 7:13:20 (1/6, 1/3, 1/2 to within 1/20 of the largest).
    let last = &ran.intervals[ran.intervals.len() - 1]["jobs"];
    let shares: Vec<u64> = (0..3)
        .map(|i| last[i]["weight"]["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(shares, [7, 13, 20]);
    let a = ran.achieved();
    assert!(a[2] > a[0] && a[1] > a[0], "{a:?}\n{}", ran.stderr);
    assert!((0.35..=0.65).contains(&a[2]), "{a:?}\n{}", ran.stderr);
    assert_all_ended(&ran.intervals);
}

#[test]
fn sigterm_ends_the_jobs_resumes_what_tact_stopped_and_reports() {
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tempfile::tempdir().unwrap();
    let (mut c, log) = signals_on_one_cpu(&split_setup(), &[], runtime.path());
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for ALPS to have stopped someone (x's share is the smallest).
    wait_for(Duration::from_secs(60), "30 intervals in the log", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() >= 30)
    });
    kill(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    let ran = Ran::read(out, stderr, &log);
    assert_eq!(
        ran.summary["end"], "interrupted by SIGTERM",
        "{}",
        ran.stderr
    );
    for job in ran.summary["jobs"].as_array().unwrap() {
        assert_eq!(job["exit"], "signal 15", "{}", ran.stderr);
    }
    assert_all_ended(&ran.intervals);
}

/// A job stopped by someone else (here by itself) handles the SIGTERM tact passes on at once:
/// tact sends SIGCONT after it, as shells and systemd do. Before, the job slept on with the
/// signal pending and was SIGKILLed at the end of the 5 s grace. (SIGTERM, not SIGINT: where
/// tests run in the background SIGINT is ignored from the start.)
#[test]
fn a_job_stopped_by_someone_else_handles_the_sigterm_passed_on() {
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tempfile::tempdir().unwrap();
    let ready = runtime.path().join("ready");
    let setup = format!(
        "[[job]]\nname = \"s\"\ncommand = \"trap 'exit 5' TERM; touch {}; kill -STOP $$; \
         while :; do sleep 0.1; done\"\nfunding = [{{ from = \"base\", cpu = 100 }}]\n",
        ready.display()
    );
    let (mut c, log) = signals_on_one_cpu(&setup, &[], runtime.path());
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(60), "the job to stop itself", || {
        ready.exists()
            && std::fs::read_to_string(&log).is_ok_and(|t| {
                t.lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .any(|l| {
                        l["jobs"][0]["pids"].as_array().is_some_and(|pids| {
                            pids.iter().any(|p| {
                                let stat = format!("/proc/{}/stat", p.as_u64().unwrap_or(0));
                                std::fs::read_to_string(stat).is_ok_and(|s| {
                                    s.rsplit(')')
                                        .next()
                                        .is_some_and(|r| r.trim_start().starts_with('T'))
                                })
                            })
                        })
                    })
            })
    });
    let sent = std::time::Instant::now();
    kill(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    let ran = Ran::read(out, stderr, &log);
    assert_eq!(ran.summary["jobs"][0]["exit"], "5", "{}", ran.stderr);
    assert!(took < Duration::from_secs(3), "{took:?}\n{}", ran.stderr);
}

/// Hard tickets from the base are worth their amounts whoever is active, so the knobs are known
/// in advance: d (disk 600, 64 MiB) gets blkio.bfq.weight 1000 (the largest right at the top of
/// 1-1000) and a 64 MiB soft limit; e (disk 150, 16 MiB) 250 and 16 MiB; f holds CPU tickets
/// only and keeps the kernel's defaults. (A soft base ticket beside them would be issued by the
/// base's soft_tix and, its only holder, be worth all the base's unreserved value.) d reads its
/// own file with O_DIRECT, so it has disk I/O outstanding.
fn disk_mem_setup(file: &Path) -> String {
    format!(
        r#"
[[job]]
name = "d"
command = "exec timeout 60 sh -c 'while :; do dd if={file} of=/dev/null bs=4k iflag=direct 2>/dev/null; done'"
funding = [{{ from = "base", disk = 600, mem = "64MiB", hard = true }}, {{ from = "base", cpu = 100 }}]

[[job]]
name = "e"
command = "exec sleep 60"
funding = [{{ from = "base", disk = 150, mem = "16MiB", hard = true }}, {{ from = "base", cpu = 100 }}]

[[job]]
name = "f"
command = "exec sleep 60"
funding = [{{ from = "base", cpu = 100 }}]
"#,
        file = file.display()
    )
}

#[test]
fn disk_and_memory_tickets_become_bfq_weights_and_soft_limits_and_are_removed() {
    use tact_linux::actuate::cgroup_knobs::Controller;
    let _turn = ONE_CPU.lock().unwrap_or_else(|e| e.into_inner());
    // The same cgroup path in every hierarchy: --cgroup-parent names the cpu one, and tact uses
    // the same path in the memory and blkio hierarchies (and for its cpuacct mirror).
    let Some(V1Parents {
        cgroups: parents,
        mounts,
    }) = v1_parents("tickets-diskmem", &[Controller::Memory, Controller::Io])
    else {
        return;
    };
    let (mem_mount, blkio_mount) = (&mounts[0], &mounts[1]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, vec![7u8; 4 << 20]).unwrap();
    let setup = write(dir.path(), "setup.toml", &disk_mem_setup(&file));
    let log = dir.path().join("log.jsonl");
    let mut c = tact();
    c.args(["tickets", "run"])
        .arg(&setup)
        .args(["--backend", "cgroup", "--duration", "4s"])
        .arg("--cgroup-parent")
        .arg(&parents[0].0)
        .arg("--json-log")
        .arg(&log)
        .env("TACT_RUNTIME_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let top = |mount: &Path| {
        mount
            .join(parents[0].0.file_name().unwrap())
            .join(format!("tact-tickets-{}", child.id()))
    };
    let knob = |mount: &Path, job: usize, file: &str| {
        std::fs::read_to_string(top(mount).join(format!("job{job}")).join(file))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    // Read back while it runs: the knobs are written before the jobs are let go.
    let want_disk = ["1000", "250", "100"];
    let want_mem = ["67108864", "16777216"];
    wait_for(Duration::from_secs(60), "the knobs written", || {
        (0..3).all(|j| knob(blkio_mount, j, "blkio.bfq.weight") == want_disk[j])
            && (0..2).all(|j| knob(mem_mount, j, "memory.soft_limit_in_bytes") == want_mem[j])
    });
    // f's soft limit is the kernel's default (unlimited), untouched.
    let unlimited: u64 = knob(mem_mount, 2, "memory.soft_limit_in_bytes")
        .parse()
        .unwrap();
    assert!(unlimited > 1 << 60, "{unlimited}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for p in &parents {
        assert!(
            p.leftovers().is_empty(),
            "left in {:?}: {:?}",
            p.0,
            p.leftovers()
        );
    }
    // Where the weights act depends on this machine's schedulers; that it is said does not.
    let said = stderr.lines().find(|l| l.starts_with("tact: disk: "));
    assert!(
        said.is_some_and(|l| l.contains("blkio.bfq.weight")),
        "{stderr}"
    );
    assert!(
        stderr.contains("memory.soft_limit_in_bytes is not a floor"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("is not a floor").count(),
        1,
        "said once: {stderr}"
    );

    let ran = Ran::read(out, stderr, &log);
    let job = |line: &Value, name: &str| -> Value {
        line["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap()
            .clone()
    };
    let last = ran.intervals.last().expect("intervals");
    let (d, e, f) = (job(last, "d"), job(last, "e"), job(last, "f"));
    assert_eq!(d["weight"]["disk"], 1000, "{d}");
    assert_eq!(e["weight"]["disk"], 250, "{e}");
    assert_eq!(d["weight"]["mem"], 67108864, "{d}");
    assert_eq!(e["weight"]["mem"], 16777216, "{e}");
    assert!(
        (d["rights"]["mem"].as_f64().unwrap() - 67108864.0).abs() < 1.0,
        "{d}"
    );
    assert!(
        (d["rights"]["disk"].as_f64().unwrap() - 600.0).abs() < 1e-9,
        "{d}"
    );
    assert_eq!(d["active"]["mem"], true, "{d}");
    assert!(d["mem_bytes"].is_u64() && d["disk_bytes"].is_u64(), "{d}");
    // f holds neither: no disk or memory fields at all.
    assert!(
        f["weight"].get("disk").is_none() && f.get("mem_bytes").is_none(),
        "{f}"
    );
    // d's reader was seen with I/O outstanding, and moved bytes; e, asleep once started (its
    // exec may have read), was not in the second half.
    assert!(
        ran.intervals
            .iter()
            .any(|l| job(l, "d")["active"]["disk"] == true),
        "d never had disk I/O outstanding"
    );
    let half = ran.intervals.len() / 2;
    assert!(ran.intervals[half..]
        .iter()
        .all(|l| job(l, "e")["active"]["disk"] == false));
    let jobs = ran.summary["jobs"].as_array().unwrap();
    assert!(
        jobs[0]["disk_bytes"].as_u64().unwrap() > 0,
        "{}",
        ran.summary
    );
    assert!((jobs[0]["expected"]["mem"].as_f64().unwrap() - 67108864.0).abs() < 1.0);
    assert!(jobs[0]["achieved"]["mem"].is_f64(), "{}", ran.summary);
    assert!(
        jobs[0]["achieved"]["disk"].as_f64().unwrap() > 0.9,
        "{}",
        ran.summary
    );
    assert!(ran.stderr.contains("disk exp") && ran.stderr.contains("mem floor"));
    assert_all_ended(&ran.intervals);
}

#[test]
fn the_signals_backend_says_it_applies_cpu_rights_only() {
    let runtime = tempfile::tempdir().unwrap();
    let setup = disk_mem_setup(Path::new("/dev/null"));
    let (c, log) = signals_on_one_cpu(&setup, &["--duration", "1s"], runtime.path());
    let (out, _, stderr) = run(c);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for r in ["disk", "mem"] {
        assert!(
            stderr.contains(&format!(
                "the signals backend enforces CPU rights only: the {r} tickets of d, e are not applied"
            )),
            "{stderr}"
        );
    }
    // Nothing about disk or memory is logged as if applied.
    let ran = Ran::read(out, stderr, &log);
    for line in &ran.intervals {
        for j in line["jobs"].as_array().unwrap() {
            assert!(
                j["weight"].get("disk").is_none() && j["weight"].get("mem").is_none(),
                "{j}"
            );
        }
    }
    assert_all_ended(&ran.intervals);
}

/// Spec E4's setup with n = 300: spinners D and S, readers I and H, each funded 1000 CPU and
/// 1000 disk from the base; D gives I 300 disk for 300 CPU.
const E4: &str = r#"
[[job]]
name = "D"
command = "x"
funding = [{ from = "base", cpu = 1000, disk = 1000 }]

[[job]]
name = "S"
command = "x"
funding = [{ from = "base", cpu = 1000, disk = 1000 }]

[[job]]
name = "I"
command = "x"
funding = [{ from = "base", cpu = 1000, disk = 1000 }]

[[job]]
name = "H"
command = "x"
funding = [{ from = "base", cpu = 1000, disk = 1000 }]

[[exchange]]
a = "D"
a_gives = { disk = 300 }
b = "I"
b_gives = { cpu = 300 }
"#;

#[test]
fn check_and_explain_show_an_exchange_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let setup = write(dir.path(), "e4.toml", E4);
    let s = setup.to_str().unwrap();

    let (out, stdout, stderr) = run(tickets(&["check", s], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = |job: &str, r: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().take(2).eq([job, r]))
            .unwrap_or_else(|| panic!("no {job} {r} line:\n{stdout}"))
            .to_string()
    };
    // Everyone competing: 4000 of each resource, of which D holds 1300 CPU and 700 disk.
    for (job, r, rights, share, tickets) in [
        (
            "D",
            "cpu",
            "1300.0",
            "32.50%",
            "base -1000-> D + exchange x0 with I: +300",
        ),
        (
            "D",
            "disk",
            "700.0",
            "17.50%",
            "base -1000-> D + exchange x0 with I: -300",
        ),
        (
            "I",
            "cpu",
            "700.0",
            "17.50%",
            "base -1000-> I + exchange x0 with D: -300",
        ),
        (
            "I",
            "disk",
            "1300.0",
            "32.50%",
            "base -1000-> I + exchange x0 with D: +300",
        ),
        ("S", "cpu", "1000.0", "25.00%", "base -1000-> S"),
        ("H", "disk", "1000.0", "25.00%", "base -1000-> H"),
    ] {
        let l = line(job, r);
        assert!(
            l.contains(rights) && l.contains(share) && l.ends_with(tickets),
            "{l}"
        );
    }
    assert!(
        stdout.contains("exchange x0: D gives 300 of disk to I for 300 of cpu"),
        "{stdout}"
    );
    let (out, stdout, stderr) = run(tickets(&["check", s, "--json"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        v["exchanges"],
        serde_json::json!([{ "id": "x0", "a": "D", "a_gives": { "disk": 300 },
                             "b": "I", "b_gives": { "cpu": 300 } }])
    );

    // explain: the exchange ticket is its own path, and the factors still multiply out to R.
    let (out, stdout, stderr) = run(tickets(&["explain", s, "I", "--json"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["exchanges"][0]["id"], "x0");
    for res in v["resources"].as_array().unwrap() {
        let paths = res["paths"].as_array().unwrap();
        let total: f64 = paths
            .iter()
            .map(|p| {
                p["hops"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["factor"].as_f64().unwrap())
                    .product::<f64>()
            })
            .sum();
        assert!(
            (total - res["rights"].as_f64().unwrap()).abs() < 1e-9,
            "{res}"
        );
        let exchanged: Vec<&Value> = paths
            .iter()
            .filter(|p| p["hops"][0]["exchange"] == "x0")
            .collect();
        assert_eq!(exchanged.len(), 1, "{res}");
        let want = if res["resource"] == "cpu" { -300 } else { 300 };
        assert_eq!(exchanged[0]["hops"][0]["amount"], want, "{res}");
    }
    let (out, stdout, stderr) = run(tickets(&["explain", s, "D"], dir.path()));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("D: in exchange x0: D gives 300 of disk to I for 300 of cpu")
            && stdout.contains("-300 (exchange x0 with I)"),
        "{stdout}"
    );

    // D cannot give more disk than its R* (1000).
    let bad = write(
        dir.path(),
        "bad.toml",
        &E4.replace("disk = 300 }", "disk = 1300 }"),
    );
    let b = bad.to_str().unwrap();
    for args in [vec!["check", b], vec!["run", b, "--duration", "1s"]] {
        let (out, stdout, stderr) = run(tickets(&args, dir.path()));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{b}: [[exchange]] #1.a_gives.disk = 1300: \"D\" holds rights R* = 1000.0 of disk"
            )),
            "{stderr}"
        );
    }
}

/// `--cgroup-parent` that cannot hold the tree is a usage error, said before any job starts
/// (status 2, as the daemon): a directory that is not a cgroup (it was "…/cgroup.procs is not
/// writable by this user", and `auto` fell back to signals with that reason), and on cgroup v1
/// one missing from the cpuacct hierarchy, or from memory for a setup with memory tickets (it was
/// "…/tact-tickets-N: No such file or directory (os error 2): No such file or directory (os
/// error 2)" and status 125).
#[test]
fn a_cgroup_parent_that_cannot_hold_the_tree_is_refused_before_the_jobs_start() {
    use tact_linux::actuate::cgroup_knobs::{Controller, Hierarchies};
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the cgroup backend needs root");
        return;
    }
    let Ok(all) = Hierarchies::detect() else {
        eprintln!("skipped: no cgroup hierarchies");
        return;
    };
    let Ok(cpu) = all.get(Controller::Cpu) else {
        eprintln!("skipped: no cpu cgroup hierarchy");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let job = format!(
        "[[job]]\nname = \"j\"\ncommand = \"touch {}\"\nfunding = [{{ from = \"base\", cpu = 1 }}]\n",
        started.display()
    );
    let setup = write(dir.path(), "s.toml", &job);
    let mem_setup = write(
        dir.path(),
        "m.toml",
        &format!(
            "{job}[[job]]\nname = \"m\"\ncommand = \"true\"\n\
             funding = [{{ from = \"base\", mem = \"1MiB\", hard = true }}]\n"
        ),
    );
    let refused = |setup: &Path, backend: &str, parent: &Path| -> String {
        let (out, _, stderr) = run(tickets(
            &[
                "run",
                setup.to_str().unwrap(),
                "--backend",
                backend,
                "--duration",
                "2s",
                "--cgroup-parent",
                parent.to_str().unwrap(),
            ],
            dir.path(),
        ));
        assert_eq!(out.status.code(), Some(2), "{backend}: {stderr}");
        assert!(!started.exists(), "no job started: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        stderr
    };
    let not_a_cgroup = tempfile::tempdir().unwrap();
    for backend in ["cgroup", "auto"] {
        let err = refused(&setup, backend, not_a_cgroup.path());
        assert!(
            err.contains(&format!(
                "--cgroup-parent {}: not a cgroup directory",
                not_a_cgroup.path().display()
            )),
            "{err}"
        );
    }
    if cpu.version != tact_linux::actuate::cgroup_cpu::CgroupVersion::V1 {
        return;
    }
    let parent = TestCgroup::create(&cpu.mount.dir, "tickets-parent");
    let name = parent.0.file_name().unwrap().to_str().unwrap().to_string();
    if let Some(acct) = all.cpuacct.as_ref().filter(|a| a.dir != cpu.mount.dir) {
        let err = refused(&setup, "cgroup", &parent.0);
        assert!(
            err.contains(&format!(
                "no cgroup /{name} in the hierarchy mounted at {}",
                acct.dir.display()
            )),
            "{err}"
        );
        let _acct = TestCgroup::create(&acct.dir, "tickets-parent");
        if let Ok(mem) = all.get(Controller::Memory) {
            let err = refused(&mem_setup, "cgroup", &parent.0);
            assert!(
                err.contains(&format!(
                    "no cgroup /{name} in the hierarchy mounted at {}",
                    mem.mount.dir.display()
                )),
                "{err}"
            );
        }
    }
}
