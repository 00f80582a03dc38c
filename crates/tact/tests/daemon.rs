//! `tact daemon` and `tact status` over their socket, as clients see them: turn-taking, priority,
//! leases, dead and silent and malicious clients, restarts, metrics. Timing is never asserted
//! tightly: states and orderings are, with generous limits for a loaded machine.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{tact, wait_for};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::{json, Value};
use tact_proto::{Client, Hello, Kind};

/// How long anything that should happen promptly may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// A `tact daemon` on a socket in its own temporary directory; killed when dropped.
struct Daemon {
    child: Child,
    path: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: Option<tempfile::TempDir>,
}

impl Daemon {
    fn start(extra: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Daemon::start_at(&dir.path().join("s"), extra);
        d._dir = Some(dir);
        d
    }

    fn start_at(path: &Path, extra: &[&str]) -> Daemon {
        let mut child = tact()
            .env("TACT_RUNTIME_DIR", path.parent().unwrap())
            .arg("daemon")
            .arg("--socket")
            .arg(path)
            .args(extra)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Drain stderr (the daemon must never block on it) and keep it for the tests.
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut d = Daemon {
            child,
            path: path.to_path_buf(),
            stderr,
            _dir: None,
        };
        let lines = d.stderr.clone();
        common::wait_until_listening(&mut d.child, &d.path, PATIENCE, || {
            format!("{:?}", lines.lock().unwrap())
        });
        d
    }

    fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    fn raw(&self) -> Raw {
        Raw::connect(&self.path)
    }

    /// The `status` reply, through a connection of its own.
    fn status(&self) -> Value {
        self.raw().call(json!({"v": 1, "op": "status"}))
    }

    /// The state of job `job` according to `status`.
    fn state(&self, job: u64) -> String {
        let status = self.status();
        let jobs = status["jobs"].as_array().unwrap();
        match jobs.iter().find(|j| j["job"] == job) {
            Some(j) => j["state"].as_str().unwrap().to_string(),
            None => "gone".into(),
        }
    }

    fn wait_state(&self, job: u64, state: &str) {
        wait_for(PATIENCE, &format!("job {job} to be {state}"), || {
            self.state(job) == state
        });
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client speaking the protocol by hand.
struct Raw {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Raw {
    fn connect(path: &Path) -> Raw {
        let stream = UnixStream::connect(path).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Raw { stream, reader }
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn send(&mut self, msg: Value) {
        self.send_bytes(format!("{msg}\n").as_bytes());
    }

    /// The next reply; panics after PATIENCE.
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).unwrap();
        assert!(n > 0, "the daemon closed the connection");
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, msg: Value) -> Value {
        self.send(msg);
        self.recv()
    }

    fn call_line(&mut self, line: &str) -> Value {
        self.send_bytes(format!("{line}\n").as_bytes());
        self.recv()
    }

    /// Whether a reply is waiting within `limit` (without losing it: nothing is read).
    fn has_reply(&mut self, limit: Duration) -> bool {
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let mut fds = [PollFd::new(self.stream.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(limit).unwrap();
        poll(&mut fds, ms).unwrap() > 0
    }

    fn hello(&mut self, name: &str, priority: i32) -> u64 {
        let r = self.call(
            json!({"v": 1, "op": "hello", "name": name, "kind": "library",
                                 "priority": priority}),
        );
        assert_eq!(r["ok"], true, "{r}");
        r["job"].as_u64().unwrap()
    }

    fn acquire(&mut self, job: u64) {
        self.send(json!({"v": 1, "op": "acquire", "job": job}));
    }

    fn granted(&mut self) {
        let r = self.recv();
        assert_eq!(r["ok"], true, "{r}");
        assert!(r["lease_ms"].as_u64().unwrap() > 0, "{r}");
    }

    fn release(&mut self, job: u64, ran_ms: u64) -> Value {
        let r = self.call(
            json!({"v": 1, "op": "release", "job": job, "ran_ms": ran_ms,
            "report": {"state": "running", "rate": 100.0, "target": 120.0, "unit": "B/s",
                       "suspended_ms": 2500, "suspend_for_ms": 0}}),
        );
        assert_eq!(r["ok"], true, "{r}");
        r
    }
}

fn assert_error(reply: &Value, code: &str, field: &str) {
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["v"], 1, "{reply}");
    assert_eq!(reply["code"], code, "{reply}");
    let msg = reply["error"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("{field}: ")),
        "{msg} should name {field}"
    );
}

#[test]
fn two_clients_take_turns() {
    let d = Daemon::start(&[]);
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("a", 0);
    let jb = b.hello("b", 0);
    a.acquire(ja);
    a.granted();
    b.acquire(jb);
    d.wait_state(jb, "waiting");
    assert_eq!(d.state(ja), "running");
    assert!(
        !b.has_reply(Duration::from_millis(300)),
        "b got the turn while a held it"
    );
    assert_eq!(a.release(ja, 50)["revoked"], false);
    b.granted();
    assert_eq!(d.state(jb), "running");
    // a comes back and waits for b.
    a.acquire(ja);
    d.wait_state(ja, "waiting");
    b.release(jb, 50);
    a.granted();
}

#[test]
fn higher_priority_goes_first() {
    let d = Daemon::start(&[]);
    let (mut a, mut low, mut high) = (d.raw(), d.raw(), d.raw());
    let ja = a.hello("holder", 0);
    let jl = low.hello("low", 0);
    let jh = high.hello("high", 5);
    a.acquire(ja);
    a.granted();
    low.acquire(jl);
    d.wait_state(jl, "waiting");
    high.acquire(jh);
    d.wait_state(jh, "waiting");
    a.release(ja, 10);
    high.granted();
    assert_eq!(d.state(jl), "waiting");
    assert!(!low.has_reply(Duration::from_millis(200)));
    // Priorities can change: the holder's job drops below everyone.
    let r = high.call(json!({"v": 1, "op": "set_priority", "job": jh, "priority": -5}));
    assert_eq!(r["ok"], true, "{r}");
    high.release(jh, 10);
    low.granted();
}

#[test]
fn a_holder_that_dies_frees_the_turn_at_once() {
    let d = Daemon::start(&[]);
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("doomed", 0);
    let jb = b.hello("survivor", 0);
    a.acquire(ja);
    a.granted();
    b.acquire(jb);
    d.wait_state(jb, "waiting");
    let start = Instant::now();
    drop(a);
    b.granted();
    // Noticed by the end of the connection, not by the 10 s lease.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(d.state(ja), "gone");
}

#[test]
fn a_waiter_that_dies_is_never_picked() {
    let d = Daemon::start(&[]);
    let (mut a, mut b, mut c) = (d.raw(), d.raw(), d.raw());
    let ja = a.hello("holder", 0);
    let jb = b.hello("dies waiting", 5);
    let jc = c.hello("lives", 0);
    a.acquire(ja);
    a.granted();
    b.acquire(jb);
    c.acquire(jc);
    d.wait_state(jb, "waiting");
    d.wait_state(jc, "waiting");
    drop(b);
    wait_for(PATIENCE, "the dead waiter to go", || d.state(jb) == "gone");
    a.release(ja, 10);
    c.granted();
}

#[test]
fn a_hung_holder_loses_the_turn_after_its_lease() {
    let d = Daemon::start(&["--lease", "500ms"]);
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("hangs", 0);
    let jb = b.hello("patient", 0);
    a.acquire(ja);
    a.granted();
    b.acquire(jb);
    b.granted();
    assert_eq!(d.state(ja), "hung");
    assert_eq!(d.status()["daemon"]["revoked_total"], 1);
    // When it comes back, it hears that it lost the turn.
    assert_eq!(a.release(ja, 600)["revoked"], true);
    assert_eq!(d.state(ja), "idle");
    assert_eq!(d.state(jb), "running");
}

/// A holder that keeps reporting (which renews its lease) instead of releasing cannot keep the
/// turn from a job that waits for longer than a lease after hearing that one waits.
#[test]
fn a_holder_that_only_reports_loses_the_turn_to_a_waiting_job() {
    let d = Daemon::start(&["--lease", "1s"]);
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("greedy", 0);
    let jb = b.hello("patient", 0);
    a.acquire(ja);
    a.granted();
    b.acquire(jb);
    let report = json!({"v": 1, "op": "report", "job": ja, "report": {"state": "running"}});
    let mut told = false;
    let deadline = Instant::now() + PATIENCE;
    while !b.has_reply(Duration::from_millis(200)) {
        assert!(
            Instant::now() < deadline,
            "the reporting holder kept the turn for {PATIENCE:?}"
        );
        let r = a.call(report.clone());
        assert_eq!(r["ok"], true, "{r}");
        if r["revoked"] == true {
            break;
        }
        assert_eq!(r["waiting"], 1, "{r}");
        told = true;
    }
    assert!(told, "a heard that b waits");
    b.granted();
    assert_eq!(d.state(jb), "running");
    assert_eq!(d.status()["daemon"]["revoked_total"], 1);
}

#[test]
fn bad_messages_get_errors_naming_the_field_and_others_go_on() {
    let d = Daemon::start(&[]);
    let mut good = d.raw();
    let jg = good.hello("good", 0);
    good.acquire(jg);
    good.granted();

    let mut bad = d.raw();
    let jb = bad.hello("bad", 0);
    assert_error(&bad.call_line("{not json"), "malformed", "message");
    assert_error(&bad.call_line(""), "malformed", "message");
    assert_error(&bad.call_line("[1]"), "malformed", "message");
    assert_error(&bad.call_line(r#"{"v":2,"op":"status"}"#), "version", "v");
    assert_error(&bad.call_line(r#"{"op":"status"}"#), "version", "v");
    assert_error(&bad.call_line(r#"{"v":1,"op":"fly"}"#), "unknown_op", "op");
    assert_error(
        &bad.call_line(&format!(
            r#"{{"v":1,"op":"release","job":{jb},"ran_ms":NaN}}"#
        )),
        "malformed",
        "message",
    );
    assert_error(
        &bad.call_line(&format!(
            r#"{{"v":1,"op":"release","job":{jb},"ran_ms":-5}}"#
        )),
        "invalid",
        "ran_ms",
    );
    assert_error(
        &bad.call_line(&format!(
            r#"{{"v":1,"op":"release","job":{jb},"ran_ms":999999999999}}"#
        )),
        "invalid",
        "ran_ms",
    );
    assert_error(
        &bad.call(json!({"v":1,"op":"report","job":jb,"report":{"state":"running","rate":-1}})),
        "invalid",
        "report.rate",
    );
    assert_error(
        &bad.call(json!({"v":1,"op":"set_priority","job":jb,"priority":1000})),
        "invalid",
        "priority",
    );
    assert_error(
        &bad.call(json!({"v":1,"op":"acquire","job":"x"})),
        "invalid",
        "job",
    );
    assert_error(
        &bad.call(json!({"v":1,"op":"acquire","job":999})),
        "no_such_job",
        "job",
    );
    // Someone else's job, through this connection.
    assert_error(
        &bad.call(json!({"v":1,"op":"release","job":jg,"ran_ms":1})),
        "permission",
        "job",
    );
    assert_error(&bad.call_line(&"[".repeat(50_000)), "malformed", "message");
    bad.send_bytes(b"\xff\xfe\n");
    assert_error(&bad.recv(), "malformed", "message");
    // After all that, the connection still works.
    assert_eq!(bad.call(json!({"v":1,"op":"status"}))["ok"], true);

    // An oversized message: an error, then the connection is dropped.
    let mut huge = d.raw();
    let mut line = vec![b'x'; 70 * 1024];
    line.push(b'\n');
    // The daemon may hang up before it has read everything: ignore a failing write.
    let _ = huge.stream.write_all(&line);
    assert_error(&huge.recv(), "too_long", "message");
    let mut rest = Vec::new();
    let _ = huge.reader.read_to_end(&mut rest);

    // The good job still holds its turn and goes on.
    assert_eq!(d.state(jg), "running");
    assert_eq!(good.release(jg, 10)["revoked"], false);
    good.acquire(jg);
    good.granted();
    assert!(d.status()["daemon"]["errors_total"].as_u64().unwrap() >= 15);
}

#[test]
fn silent_and_flooding_clients_block_nobody() {
    let d = Daemon::start(&[]);
    // Connected and never speaking; one speaking half a message.
    let _silent = d.raw();
    let mut partial = d.raw();
    partial.send_bytes(br#"{"v":1,"op":"acq"#);
    // Many connections sending garbage, one sending requests as fast as it can.
    let mut floods: Vec<Raw> = (0..50).map(|_| d.raw()).collect();
    for f in &mut floods {
        f.send_bytes(&b"garbage\n".repeat(20));
    }
    let path = d.path.clone();
    let flooder = std::thread::spawn(move || {
        let mut f = Raw::connect(&path);
        for _ in 0..500 {
            assert_eq!(f.call(json!({"v":1,"op":"status"}))["ok"], true);
        }
    });
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("a", 0);
    let jb = b.hello("b", 0);
    for _ in 0..3 {
        a.acquire(ja);
        a.granted();
        a.release(ja, 5);
        b.acquire(jb);
        b.granted();
        b.release(jb, 5);
    }
    flooder.join().unwrap();
    for f in &mut floods {
        for _ in 0..20 {
            assert_error(&f.recv(), "malformed", "message");
        }
    }
    let mut d = d;
    assert!(d.alive());
}

#[test]
fn status_shows_every_job() {
    let d = Daemon::start(&[]);
    let (mut a, mut b) = (d.raw(), d.raw());
    let ja = a.hello("indexer", 0);
    let jb = b.hello("backup", 3);
    a.acquire(ja);
    a.granted();
    let r = b.call(
        json!({"v":1,"op":"report","job":jb,"report":{"state":"suspended",
        "rate":5.0,"target":50.0,"suspended_ms":1500,"suspend_for_ms":60000}}),
    );
    assert_eq!(r["ok"], true, "{r}");

    let out = tact()
        .args(["status", "--json", "--socket"])
        .arg(&d.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let jobs = status["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let a_row = &jobs[0];
    assert_eq!(a_row["job"], ja);
    assert_eq!(a_row["name"], "indexer");
    assert_eq!(a_row["state"], "running");
    assert_eq!(a_row["pid"], std::process::id());
    assert!(a_row["user"].as_str().is_some_and(|u| !u.is_empty()));
    let b_row = &jobs[1];
    assert_eq!(b_row["state"], "suspended");
    assert_eq!(b_row["priority"], 3);
    assert_eq!(
        (b_row["rate"].as_f64(), b_row["target"].as_f64()),
        (Some(5.0), Some(50.0))
    );
    assert_eq!(b_row["suspended_s"], 1.5);
    assert!(b_row["suspended_for_s"].as_f64().unwrap() > 30.0);
    for field in ["duty_cycle", "since_yield_s", "usage_s", "age_s"] {
        assert!(b_row[field].as_f64().is_some(), "{field} in {b_row}");
    }
    assert_eq!(status["daemon"]["holder"], ja);

    // Through $TACT_SOCKET, as a table.
    let out = tact()
        .arg("status")
        .env("TACT_SOCKET", &d.path)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        table.contains("indexer") && table.contains("running"),
        "{table}"
    );
    assert!(
        table.contains("backup") && table.contains("suspended"),
        "{table}"
    );
}

#[test]
fn status_without_a_daemon_says_how_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = tact()
        .args(["status", "--socket"])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no daemon is running") && err.contains("tact daemon"),
        "{err}"
    );
}

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let d = Daemon::start(&[]);
    let out = tact()
        .env("TACT_RUNTIME_DIR", d.path.parent().unwrap())
        .args(["daemon", "--socket"])
        .arg(&d.path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already running"), "{err}");
    // The first one is untouched.
    assert_eq!(d.status()["ok"], true);
}

#[test]
fn registering_a_process_one_may_not_is_refused() {
    let d = Daemon::start(&[]);
    let mut c = d.raw();
    // A pid that no process has (pids stay below PID_MAX_LIMIT = 2^22).
    let r = c.call(json!({"v":1,"op":"hello","name":"x","kind":"run","pid": 4_194_304}));
    assert_error(&r, "invalid", "pid");
    assert!(
        r["error"].as_str().unwrap().contains("does not exist"),
        "{r}"
    );
    let r = c.call(json!({"v":1,"op":"hello","name":"x","kind":"run","pid": 1}));
    if nix::unistd::geteuid().is_root() {
        assert_eq!(r["ok"], true, "{r}");
    } else {
        assert_error(&r, "permission", "pid");
    }
    // One's own process is fine.
    let r = c.call(json!({"v":1,"op":"hello","name":"x","kind":"run","pid": std::process::id()}));
    assert_eq!(r["ok"], true, "{r}");
}

#[test]
fn a_client_reconnects_to_a_restarted_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut first = Daemon::start_at(&path, &[]);
    let mut client = Client::connect(&path).unwrap();
    let job = client
        .hello(Hello {
            name: "survivor".into(),
            pid: None,
            priority: 2,
            kind: Kind::Library,
        })
        .unwrap();
    client.acquire(job).unwrap();
    // The daemon dies without cleaning up: the socket file stays behind.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(path.exists());
    let e = client
        .release(job, Duration::from_millis(5), None)
        .unwrap_err();
    assert!(e.lost(), "{e}");
    assert!(client.acquire(job).unwrap_err().lost());

    let second = Daemon::start_at(&path, &[]);
    let jobs = client.reconnect().unwrap();
    assert_eq!(jobs.len(), 1);
    let grant = client.acquire(jobs[0]).unwrap();
    assert_eq!(grant.lease_ms, 10_000);
    let status = client.status().unwrap();
    assert_eq!(status.jobs.len(), 1);
    assert_eq!(status.jobs[0].name, "survivor");
    assert_eq!(status.jobs[0].priority, 2);
    drop(second);
}

#[test]
fn sigterm_removes_the_socket() {
    let mut d = Daemon::start(&[]);
    common::kill(d.child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!d.path.exists());
}

#[test]
fn metrics_are_served_on_loopback() {
    let d = Daemon::start(&["--metrics", "127.0.0.1:0"]);
    let addr = wait_for_line(&d, "metrics on http://")
        .split("http://")
        .nth(1)
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();
    let mut a = d.raw();
    let ja = a.hello("exported \"job\"", 4);
    a.acquire(ja);
    a.granted();
    let (head, body) = http_get(&addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let labels = format!(r#"job="{ja}",name="exported \"job\"""#);
    for line in [
        format!(r#"tact_job_state{{{labels}"#),
        format!(r#"tact_job_priority{{{labels}"#),
        format!(r#"tact_job_duty_cycle{{{labels}"#),
        format!(r#"tact_job_seconds_since_yield{{{labels}"#),
        "tact_daemon_grants_total 1".to_string(),
    ] {
        assert!(body.contains(&line), "{line} missing from\n{body}");
    }
    assert!(body.contains(r#"state="running"} 1"#), "{body}");
    assert!(http_get(&addr, "/").0.starts_with("HTTP/1.1 404"));
}

#[test]
fn metrics_refuse_other_than_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = tact()
        .args(["daemon", "--metrics", "0.0.0.0:9", "--socket"])
        .arg(dir.path().join("s"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(!dir.path().join("s").exists());
}

fn wait_for_line(d: &Daemon, needle: &str) -> String {
    let mut found = None;
    wait_for(PATIENCE, needle, || {
        found = d.stderr().into_iter().find(|l| l.contains(needle));
        found.is_some()
    });
    found.unwrap()
}

fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

/// The shell a `tact run` started (its child that is not the guard).
fn job_of(tact_pid: u32) -> Option<i32> {
    common::children_matching(tact_pid as i32, "sh")
        .into_iter()
        .next()
}

fn running(pid: i32) -> bool {
    tact_linux::ProcReader::new()
        .stat(pid)
        .is_ok_and(|s| !s.is_stopped())
}

/// Two `tact run` jobs registered with one daemon take turns: at any moment at most one runs
/// (but for a handoff's moment), both get to run, and `tact status` lists both.
#[test]
fn run_jobs_take_turns_through_the_daemon() {
    let d = Daemon::start(&[]);
    let state = tempfile::tempdir().unwrap();
    let spawn = |name: &str| {
        tact()
            .env("TACT_RUNTIME_DIR", state.path())
            .args(["run", "--socket"])
            .arg(&d.path)
            .args(common::FAST_REGULATION)
            // The test waits for both jobs to end: a cap keeps a load that came after their
            // calibration from stretching their suspensions to a minute (the default).
            .args(["--max-suspend", "1s"])
            .args(["--progress", "cpu", "--name", name, "--state-dir"])
            .arg(state.path())
            .args(["--", "sh", "-c"])
            .arg("i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done")
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn("turn-a"), spawn("turn-b"));
    let (mut ja, mut jb) = (None, None);
    wait_for(PATIENCE, "both jobs to start", || {
        ja = ja.or_else(|| job_of(a.id()));
        jb = jb.or_else(|| job_of(b.id()));
        ja.is_some() && jb.is_some()
    });
    let (ja, jb) = (ja.unwrap(), jb.unwrap());
    wait_for(PATIENCE, "both jobs in the daemon's list", || {
        d.status()["jobs"].as_array().is_some_and(|j| j.len() == 2)
    });

    // Sample both jobs' states for a few seconds.
    let (mut both, mut either, mut a_ran, mut b_ran) = (0, 0, false, false);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) && a.try_wait().unwrap().is_none() {
        let (ra, rb) = (running(ja), running(jb));
        both += (ra && rb) as u32;
        either += (ra || rb) as u32;
        a_ran |= ra;
        b_ran |= rb;
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a_ran && b_ran, "each job ran at some point");
    // A handoff stops one job before the other resumes; the states are read one after the other,
    // so allow a few samples that straddle one.
    assert!(
        both * 10 <= either,
        "both jobs ran at once in {both} of {either} samples"
    );
    for job in [&mut a, &mut b] {
        assert!(job.wait().unwrap().success());
    }
}

/// A daemon named on the command line that is not there is an error, not a silent solo run.
#[test]
fn run_with_a_missing_daemon_socket_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["run", "--socket"])
        .arg(dir.path().join("none.sock"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none.sock"), "{err}");
}

/// Two processes' supervisors (here two in one test process, each with its own connection)
/// registered through tact-lib's daemon coordinator never run their regulated sections at once,
/// and both get turns.
#[test]
fn library_processes_take_turns_through_the_daemon() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use tact_lib::{Config, DaemonCoordinator, Polite, Supervisor};

    let d = Daemon::start(&[]);
    let inside = Arc::new(AtomicU32::new(0));
    let overlaps = Arc::new(AtomicU32::new(0));
    let workers: Vec<_> = ["lib-a", "lib-b"]
        .into_iter()
        .map(|name| {
            let sup =
                Supervisor::with_config(Config::with_period(Duration::from_millis(20))).unwrap();
            let daemon = DaemonCoordinator::connect(d.path.clone(), name).expect("daemon answers");
            sup.set_coordinator(Some(Box::new(daemon)));
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            std::thread::spawn(move || {
                let mut unit = Polite::with_supervisor(&sup);
                let mut turns = 0;
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(2) {
                    unit.testpoint(0, &[1.0]).unwrap();
                    if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    turns += 1;
                    std::thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
                turns
            })
        })
        .collect();
    wait_for(PATIENCE, "both library jobs in the daemon's list", || {
        d.status()["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 2 && j.iter().all(|j| j["kind"] == "library"))
    });
    let turns: Vec<u32> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(turns.iter().all(|&t| t > 0), "turns {turns:?}");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "both ran at once");
}

#[test]
fn status_shows_a_library_jobs_rate_against_its_target() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tact_lib::{Config, DaemonCoordinator, Polite, Supervisor};

    let d = Daemon::start(&[]);
    let done = Arc::new(AtomicBool::new(false));
    let sup = Supervisor::with_config(Config::with_period(Duration::from_millis(20))).unwrap();
    let daemon = DaemonCoordinator::connect(d.path.clone(), "lib-rate").expect("daemon answers");
    sup.set_coordinator(Some(Box::new(daemon)));
    let worker = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut unit = Polite::with_supervisor(&sup);
            while !done.load(Ordering::SeqCst) {
                unit.testpoint(0, &[1000.0]).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let mut calibrating_seen = false;
    wait_for(
        PATIENCE,
        "the library job's rate and calibrated target",
        || {
            let status = d.status();
            let Some(job) = status["jobs"].as_array().and_then(|j| j.first().cloned()) else {
                return false;
            };
            calibrating_seen |= job["reported"] == "calibrating" && job["rate"].is_f64();
            job["rate"].is_f64() && job["target"].is_f64() && job["unit"] == "units/s"
        },
    );
    let status = d.status();
    let job = &status["jobs"][0];
    // About 1000 units per ~1.1 ms of running: the rate is the program's own pace.
    let (rate, target) = (
        job["rate"].as_f64().unwrap(),
        job["target"].as_f64().unwrap(),
    );
    assert!(rate > 1e4 && rate < 1e7, "rate {rate}");
    assert!(target > 1e4 && target < 1e7, "target {target}");
    assert!(
        calibrating_seen,
        "the job was never shown calibrating: {job}"
    );
    done.store(true, Ordering::SeqCst);
    worker.join().unwrap();
}

/// Creates its file when dropped: a job waiting for it ends however its test does.
struct Stop(PathBuf);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "");
        // The jobs look for it every 0.1 s: time to see it before the test's directory, the
        // file with it, goes (a failed test left its job waiting, holding the harness's pipes).
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A `tact run` job in `tact status`: named by its program (not by whatever follows the command
/// line's last '/'), no target while it calibrates, and the rate the testpoint judged, which on
/// a counter of wall-clock milliseconds is 1000/s however loaded the machine is (it read about
/// half that once polls came twice per testpoint).
#[test]
fn a_run_job_shows_its_program_and_the_rate_it_was_judged_on() {
    let d = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (counter, stop) = (dir.path().join("ms"), dir.path().join("stop"));
    let _stop = Stop(stop.clone());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::fs::write(&counter, format!("{now_ms}\n")).unwrap();
    let script = format!(
        "while [ ! -e {s} ]; do date +%s%3N > {c}.tmp; mv {c}.tmp {c}; sleep 0.02; done",
        s = stop.display(),
        c = counter.display()
    );
    let mut run = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["run", "--socket"])
        .arg(&d.path)
        .args([
            "--testpoint",
            "100ms",
            "--bootstrap",
            "20",
            "--probation",
            "0",
        ])
        .arg("--progress")
        .arg(format!("file:{}", counter.display()))
        .arg("--state-dir")
        .arg(dir.path())
        .args(["--", "/bin/sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut calibrating, mut running) = (Vec::new(), Vec::new());
    wait_for(PATIENCE, "ten reports of the job running", || {
        let status = d.status();
        let Some(job) = status["jobs"].as_array().and_then(|j| j.first().cloned()) else {
            return false;
        };
        match job["reported"].as_str() {
            Some("calibrating") => calibrating.push(job),
            Some("running") => running.push(job),
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(200));
        running.len() >= 10
    });
    std::fs::write(&stop, "").unwrap();
    assert!(run.wait().unwrap().success());
    assert!(!calibrating.is_empty(), "never shown calibrating");
    for job in &calibrating {
        assert!(job["target"].is_null(), "a target while calibrating: {job}");
    }
    assert_eq!(running[0]["name"], "sh", "{}", running[0]);
    let mut rates: Vec<f64> = running.iter().filter_map(|j| j["rate"].as_f64()).collect();
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    assert!((750.0..1350.0).contains(&median), "rates {rates:?}");
}

/// Two `tact run` jobs outlive their daemon: when it dies by SIGKILL (it cannot tell them),
/// the one waiting stopped for its turn is resumed and both work alone; a new daemon on the same
/// socket gets both back.
#[test]
fn run_jobs_survive_a_daemon_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut first = Daemon::start_at(&path, &[]);
    let spawn = |name: &str| {
        tact()
            .env("TACT_RUNTIME_DIR", dir.path())
            .args(["run", "--socket"])
            .arg(&path)
            .args(common::FAST_REGULATION)
            .args(["--progress", "cpu", "--name", name, "--state-dir"])
            .arg(dir.path())
            .args(["--", "sh", "-c", "while :; do :; done"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Killed with their jobs however the test ends: the jobs never end on their own.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            common::kill_tree(self.0.id() as i32);
            let _ = self.0.wait();
        }
    }
    let tacts = [Reaped(spawn("restart-a")), Reaped(spawn("restart-b"))];
    let mut jobs = [None, None];
    wait_for(PATIENCE, "both jobs to start", || {
        for (j, t) in jobs.iter_mut().zip(&tacts) {
            *j = j.or_else(|| job_of(t.0.id()));
        }
        jobs.iter().all(Option::is_some)
    });
    let jobs = jobs.map(Option::unwrap);
    wait_for(PATIENCE, "one job waiting stopped for its turn", || {
        first.status()["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 2)
            && jobs.iter().any(|&j| !running(j))
    });

    first.child.kill().unwrap();
    first.child.wait().unwrap();
    wait_for(PATIENCE, "both jobs running alone", || {
        jobs.iter().all(|&j| running(j))
    });
    let second = Daemon::start_at(&path, &[]);
    wait_for(PATIENCE, "both jobs back in the new daemon's list", || {
        second.status()["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 2)
    });
    drop(tacts);
}

/// A process of the test's, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Foreground traffic on lo: 1400-byte datagrams to a closed port, until dropped.
fn udp_on_lo() -> Killed {
    std::process::Command::new("python3")
        .args([
            "-c",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                      while True:\n    try: s.sendto(b'x' * 1400, ('127.0.0.1', 9))\n    \
                      except OSError: pass\n",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Killed)
        .unwrap()
}

/// A daemon that stops answering (stopped here, as a hung one would be) is lost after a few
/// seconds, and an idle-gated job runs on with its gate: a report or a rejoin blocks tact well
/// inside the guard's lease. Each used to block it for 10 s, as long as the lease, so whether
/// the guard outlived them was a race of milliseconds (lost in a run with `--idle disk`: the
/// guard resumed the job and left, and tact gave up with 125).
#[test]
fn an_idle_job_runs_on_when_its_daemon_stops_answering() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let d = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let _stop = Stop(stop.clone());
    let run = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["run", "--socket"])
        .arg(&d.path)
        .args(["--idle", "net:lo", "--preempt", "50ms", "--", "sh", "-c"])
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.1; done",
            stop.display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let fg = udp_on_lo();
    let mut job = Value::Null;
    wait_for(PATIENCE, "the gate to have held the job", || {
        job = d.status()["jobs"][0].clone();
        job["idle"]["gates"][0]["holds"].as_u64().unwrap_or(0) > 0
    });
    // Named by its program, not by the command line's last '/'-component (the stop file's).
    assert_eq!(job["name"], "sh", "{job}");
    let daemon = Pid::from_raw(d.child.id() as i32);
    kill(daemon, Signal::SIGSTOP).unwrap();
    // Longer than the lease the guard had (10 s).
    std::thread::sleep(Duration::from_secs(14));
    kill(daemon, Signal::SIGCONT).unwrap();
    drop(fg);
    std::fs::write(&stop, "").unwrap();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("guard"), "{err}");
}

/// `tact run --idle net:lo` registers as a run job that never takes the turn: `tact status`
/// (JSON and table) shows its gate with the counters of its `--json-log`, the daemon hands out
/// no turn and revokes none, and the job ends cleanly.
#[test]
fn an_idle_gated_run_job_shows_its_gate_in_status() {
    let d = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    // The job ends however the test does.
    let _stop = Stop(stop.clone());
    let mut run = tact()
        .env("TACT_RUNTIME_DIR", dir.path())
        .args(["run", "--socket"])
        .arg(&d.path)
        .args([
            "--idle",
            "net:lo",
            "--preempt",
            "50ms",
            "--name",
            "gated",
            "--",
        ])
        .args(["sh", "-c"])
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.1; done",
            stop.display()
        ))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fg = udp_on_lo();
    let status_json = || {
        let out = tact()
            .args(["status", "--json", "--socket"])
            .arg(&d.path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let mut job = Value::Null;
    wait_for(
        PATIENCE,
        "the gate to have held the job, in tact status",
        || {
            job = status_json()["jobs"][0].clone();
            job["idle"]["gates"][0]["holds"].as_u64().unwrap_or(0) > 0
        },
    );
    drop(fg);
    assert_eq!(
        (job["name"].as_str(), job["kind"].as_str()),
        (Some("gated"), Some("run"))
    );
    let gate = &job["idle"]["gates"][0];
    assert_eq!(gate["resource"], "net:lo", "{job}");
    assert_eq!(gate["pi_ms"], 50.0, "{job}");
    assert!(
        ["held", "pi", "released"].contains(&gate["state"].as_str().unwrap()),
        "{job}"
    );
    assert!(gate["fg_bytes"].as_u64().unwrap() > 4096, "{job}");
    let counters = gate["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 4, "{job}");
    assert!(gate["harm"].as_f64().is_some(), "{job}");
    assert_eq!(job["idle"]["cpu"], Value::Null, "no --idle cpu: {job}");
    // The job shares tact's namespace: its TCP sockets, or none where sock_diag is missing.
    assert!(
        ["tcp_sockets", "none"].contains(&gate["own_traffic"].as_str().unwrap_or("absent")),
        "{job}"
    );

    let table = tact()
        .args(["status", "--socket"])
        .arg(&d.path)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("gated: "), "{table}");
    assert!(table.contains("\n  net:lo: "), "{table}");
    assert!(table.contains(", own traffic: "), "{table}");

    // It never asked for the turn: none was handed out, none taken back.
    let daemon = &d.status()["daemon"];
    assert_eq!(daemon["grants_total"], 0, "{daemon}");
    assert_eq!(daemon["revoked_total"], 0, "{daemon}");
    assert_eq!(daemon["holder"], Value::Null, "{daemon}");

    std::fs::write(&stop, "").unwrap();
    let mut exited = None;
    wait_for(PATIENCE, "the gated job to end", || {
        exited = run.try_wait().unwrap();
        exited.is_some()
    });
    assert!(exited.unwrap().success(), "{exited:?}");
    wait_for(PATIENCE, "the job to leave the daemon's list", || {
        d.status()["jobs"].as_array().is_some_and(|j| j.is_empty())
    });
}
