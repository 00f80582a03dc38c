//! The two binaries end to end on loopback: the service's protocol and mode switch, and a short
//! driver run whose JSON must describe what a static pool of two does, padded replies, the mapped
//! memory mode, and the competitor's load.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use tact_bench_tune::protocol::Client;

/// The service, killed (it was started here) and reaped on every exit path of a test.
struct Service {
    child: Child,
    addr: String,
}

impl Service {
    fn start() -> Service {
        Service::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Service {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tune-service"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--service-ms",
                "0.2",
                "--delay-ms",
                "1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tune-service");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim()
            .to_string();
        Service { child, addr }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn service_serves_counts_and_switches_modes() {
    let svc = Service::start();
    let mut c = Client::connect(&svc.addr).unwrap();
    let before = c.stats().unwrap();
    assert_eq!((before.requests, before.mode.as_str()), (0, "cpu"));
    for _ in 0..5 {
        c.request().unwrap();
    }
    let after = c.stats().unwrap();
    assert_eq!(after.requests, 5);
    // Five requests spun at least 0.2 ms × (k − 1)/k each of CPU.
    assert!(after.cpu - before.cpu >= std::time::Duration::from_micros(5 * 120));
    let err = c.set_mode("disk:/nonexistent/tune-bench").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/tune-bench"), "{err}");
    c.set_mode("memory:1").unwrap();
    c.request().unwrap();
    let s = c.stats().unwrap();
    assert_eq!((s.requests, s.mode.as_str()), (6, "memory:1"));

    // The mapped mode over a 2 MiB file: two 1 MiB slices, any connection maps one of them.
    let dir = std::env::temp_dir().join(format!("tact-bench-tune-mapped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data");
    std::fs::write(&file, vec![1u8; 2 << 20]).unwrap();
    let spec = format!("mapped:{}:1", file.display());
    c.set_mode(&spec).unwrap();
    c.request().unwrap();
    let s = c.stats().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((s.requests, s.mode.as_str()), (7, spec.as_str()));
}

#[test]
fn replies_carry_the_requested_padding() {
    let svc = Service::start_with(&["--reply-bytes", "65536"]);
    let mut raw = std::net::TcpStream::connect(&svc.addr).unwrap();
    raw.write_all(b"R\n").unwrap();
    let mut line = String::new();
    BufReader::new(raw).read_line(&mut line).unwrap();
    assert_eq!(line.len(), 65538, "K + 64 KiB + newline");
    assert!(line.starts_with('K') && line.ends_with('\n'));
    // The client accepts a padded reply as one unit of work done.
    let mut c = Client::connect(&svc.addr).unwrap();
    c.request().unwrap();
    assert_eq!(c.stats().unwrap().requests, 2);
}

/// The process's user + system CPU time in clock ticks, from /proc.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn the_competitor_runs_its_threads_until_killed() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tune-compete"))
        .args(["--threads", "2", "--burst-ms", "2", "--sleep-ms", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tune-compete");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // Generous on a loaded machine: it only has to have burnt some CPU within 30 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut burnt = 0;
    while burnt == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        burnt = cpu_ticks(child.id());
    }
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(line.trim(), "competing with 2 threads");
    assert!(burnt > 0, "no CPU burnt in 30 s");
    assert!(alive, "it must run until killed");
}

#[test]
fn the_competitor_rejects_zero_threads() {
    let out = Command::new(env!("CARGO_BIN_EXE_tune-compete"))
        .args(["--threads", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
}

#[test]
fn driver_reports_a_static_pool_run() {
    let svc = Service::start();
    let dir = std::env::temp_dir().join(format!("tact-bench-tune-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("run.json");
    let out = Command::new(env!("CARGO_BIN_EXE_tune-drive"))
        .args([
            "--policy",
            "static:2",
            "--addr",
            &svc.addr,
            "--seconds",
            "1.5",
        ])
        .args([
            "--warmup",
            "0.3",
            "--front-ms",
            "0.2",
            "--max",
            "4",
            "--sample-ms",
            "100",
            // Opened and read, though a static pool ignores it.
            "--bottleneck",
            "net:lo@1gbit,rx",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run tune-drive");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The event line a harness waits for comes first; a static pool never enters Steady.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().next(), Some("started"), "{stdout}");
    assert!(!stdout.contains("steady "), "{stdout}");
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let w = &rep["window"];
    assert_eq!(rep["errors"], 0);
    assert!(w["completions"].as_u64().unwrap() > 0, "{w}");
    assert_eq!(w["count"]["min"], 2);
    assert_eq!(w["count"]["max"], 2);
    let util = w["service_util"].as_f64().unwrap();
    assert!(util > 0.0 && util < 2.0, "service CPU {util}");
    assert!(w["latency"]["p99_ms"].as_f64().unwrap() >= w["latency"]["p50_ms"].as_f64().unwrap());
    // A static pool has no states: no trace, never steady.
    assert_eq!(rep["trace"].as_array().unwrap().len(), 0);
    assert!(rep["steady"].is_null());
    assert_eq!(rep["targets"][0][1], 2);
    assert_eq!(rep["bottleneck"], "net:lo@1gbit,rx");
}

#[test]
fn driver_refuses_a_bottleneck_this_machine_lacks() {
    let svc = Service::start();
    let run = |source: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tune-drive"))
            .args(["--policy", "tcc:util=0.9", "--addr", &svc.addr])
            .args(["--seconds", "1", "--bottleneck", source])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{source}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("disk:no-such-disk-tact@riops=300");
    assert!(
        err.contains("--bottleneck disk:no-such-disk-tact@riops=300")
            && err.contains("unknown block device"),
        "{err}"
    );
    let err = run("net:lo");
    assert!(err.contains("needs the link's rate"), "{err}");
}

#[test]
fn driver_rejects_a_bad_policy_with_its_name() {
    let svc = Service::start();
    let out = Command::new(env!("CARGO_BIN_EXE_tune-drive"))
        .args([
            "--policy",
            "nonsense",
            "--addr",
            &svc.addr,
            "--seconds",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nonsense"), "{err}");
}

/// `tune-drive --external HOW --done-file DIR/done` against the service for 3 s, as `tact
/// tune` would start it.
fn external_drive(svc: &Service, dir: &std::path::Path, how: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tune-drive"));
    cmd.args(["--external", how, "--addr", &svc.addr])
        .args(["--seconds", "3", "--warmup", "0.3", "--front-ms", "0.2"])
        .args(["--max", "6", "--sample-ms", "50", "--done-file"])
        .arg(dir.join("done"))
        .arg("--json")
        .arg(dir.join("run.json"))
        .env_remove("MAKEFLAGS")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("MFLAGS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn report_of(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// The number `--done-file` holds.
fn done_in(dir: &std::path::Path) -> u64 {
    std::fs::read_to_string(dir.join("done"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn an_external_driver_follows_its_workers_file_and_counts_into_its_done_file() {
    let svc = Service::start();
    let dir = tempfile::tempdir().unwrap();
    let workers = dir.path().join("workers");
    std::fs::write(&workers, "1\n").unwrap();
    let how = format!("workers-file:{}", workers.display());
    let child = external_drive(&svc, dir.path(), &how).spawn().unwrap();
    // Once it counts (it runs), the count goes to 4, as tact would write it: whole, by rename.
    let start = std::time::Instant::now();
    while !dir.path().join("done").exists() || done_in(dir.path()) == 0 {
        assert!(start.elapsed().as_secs() < 60, "no task done");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(dir.path().join("w.tmp"), "4\n").unwrap();
    std::fs::rename(dir.path().join("w.tmp"), &workers).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = report_of(dir.path());
    assert_eq!(
        rep["policy"],
        format!("tact tune --workers-file {}", workers.display())
    );
    // The counts it saw, in order, and the most tasks it ran at once (each sample's count).
    let seen: Vec<u64> = rep["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[1].as_u64().unwrap())
        .collect();
    assert_eq!(seen, [1, 4]);
    assert_eq!(
        rep["samples"].as_array().unwrap().last().unwrap()["target"],
        4
    );
    // Every completion is in the file, the last written after the last sample.
    let last = rep["samples"].as_array().unwrap().last().unwrap()["completions"]
        .as_u64()
        .unwrap();
    assert!(done_in(dir.path()) >= last && last > 0, "{last}");
    assert_eq!(rep["errors"], 0);
    assert_eq!(
        rep["trace"].as_array().unwrap().len(),
        0,
        "no tact log, no transitions"
    );
}

#[test]
fn an_external_driver_runs_one_task_beyond_its_jobserver_tokens() {
    let svc = Service::start();
    let dir = tempfile::tempdir().unwrap();
    // Two tokens, as `tact tune --jobserver` writes target − 1 of them: three tasks at once.
    let client = jobserver::Client::new(2).unwrap();
    let mut cmd = external_drive(&svc, dir.path(), "jobserver");
    client.configure(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = report_of(dir.path());
    assert_eq!(rep["policy"], "tact tune --jobserver");
    let running: Vec<u64> = rep["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["target"].as_u64().unwrap())
        .collect();
    assert!(running.iter().all(|&n| n <= 3), "{running:?}");
    assert!(running.iter().any(|&n| n >= 2), "{running:?}");
    assert!(done_in(dir.path()) > 0);

    // Without a jobserver in its environment it says so rather than run one task at a time.
    let out = external_drive(&svc, dir.path(), "jobserver")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no jobserver in MAKEFLAGS"), "{err}");
}

#[test]
fn an_external_driver_needs_a_done_file_and_no_policy() {
    let svc = Service::start();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tune-drive"))
            .args(["--addr", &svc.addr, "--seconds", "1"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--external", "jobserver"]).contains("--done-file"));
    let err = run(&[
        "--external",
        "jobserver",
        "--done-file",
        "d",
        "--policy",
        "tcc",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = run(&["--external", "make", "--done-file", "d"]);
    assert!(err.contains("workers-file:PATH or jobserver"), "{err}");
}

/// Fixture pressure files in a cgroup v2 directory's form (`memory.pressure`, `io.pressure`):
/// memory and io `full` at `full` percent.
fn psi_fixture(dir: &std::path::Path, full: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let lines = format!(
        "some avg10={full} avg60=0.00 avg300=0.00 total=1\nfull avg10={full} avg60=0.00 avg300=0.00 total=1\n"
    );
    for file in ["memory.pressure", "io.pressure"] {
        std::fs::write(dir.join(file), &lines).unwrap();
    }
}

/// `tcc:psi=1` reaches the pool as TCC it reads pressure for: with fixture files whose `full`
/// stalls read 50%, the controller's last reading is theirs, the steps PSI decided are the
/// transitions marked `psi`, and the record says where it read. As an opaque policy (before)
/// the pool read nothing: no reading, no step PSI decided.
#[test]
fn driver_reads_psi_for_tcc_with_psi_on() {
    let svc = Service::start();
    let dir = std::env::temp_dir().join(format!("tact-bench-tune-psi-{}", std::process::id()));
    let stalls = dir.join("cgroup");
    psi_fixture(&stalls, "50.00");
    let json = dir.join("run.json");
    let out = Command::new(env!("CARGO_BIN_EXE_tune-drive"))
        .args(["--policy", "tcc:psi=1", "--addr", &svc.addr])
        .args(["--seconds", "15", "--warmup", "0", "--front-ms", "0.2"])
        .args(["--init", "2", "--max", "16"])
        .arg("--psi-cgroup")
        .arg(&stalls)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run tune-drive");
    let rep: Option<serde_json::Value> = std::fs::read_to_string(&json)
        .ok()
        .map(|text| serde_json::from_str(&text).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = rep.expect("the record");
    let psi = &rep["psi"];
    assert_eq!(
        psi["source"].as_str().unwrap(),
        format!("cgroup {}", stalls.display())
    );
    assert_eq!(psi["last"]["io_full"], 0.5, "{psi}");
    let steps = psi["steps"].as_u64().unwrap();
    let marked = rep["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["psi"] == true)
        .count() as u64;
    // Whether PSI revokes a step in these 15 s depends on TCC judging an add step in them,
    // which a loaded `.ci/run` did not ("0 steps"); the revocation itself is tested on a pool
    // with fixed timings (tact-lib/tests/psi.rs). Here: the reading reached TCC (`last`
    // above; an opaque policy has none) and every step counted is marked.
    assert_eq!(marked, steps, "{steps} steps, {marked} marked");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(", psi from cgroup "), "{stdout}");
    // The target event lines: the first sample's, then each change.
    assert!(
        stdout.lines().nth(1).unwrap().starts_with("target "),
        "{stdout}"
    );
}

#[test]
fn driver_reads_psi_only_when_asked_and_refuses_unreadable_files() {
    let svc = Service::start();
    let dir = std::env::temp_dir().join(format!("tact-bench-tune-nopsi-{}", std::process::id()));
    psi_fixture(&dir, "50.00");
    let run = |policy: &str, psi_dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_tune-drive"))
            .args(["--policy", policy, "--addr", &svc.addr, "--seconds", "1"])
            .arg("--psi-cgroup")
            .arg(psi_dir)
            .output()
            .unwrap()
    };
    // Files a policy would not read are a mistake in the command, not silently ignored.
    let out = run("tcc", &dir);
    let missing = run("tcc:psi=1", &dir.join("absent"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--psi-cgroup needs a TCC policy with psi=1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The pool would turn PSI off with a warning nobody sees: the driver refuses instead.
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("reading PSI from cgroup") && err.contains("absent"),
        "{err}"
    );
}
