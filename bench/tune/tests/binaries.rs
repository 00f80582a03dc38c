//! The two binaries end to end on loopback: the service's protocol and mode switch, and a short
//! driver run whose JSON must describe what a static pool of two does.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use tact_bench_tune::protocol::Client;

/// The service, killed (it was started here) and reaped on every exit path of a test.
struct Service {
    child: Child,
    addr: String,
}

impl Service {
    fn start() -> Service {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tune-service"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--service-ms",
                "0.2",
                "--delay-ms",
                "1",
            ])
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
