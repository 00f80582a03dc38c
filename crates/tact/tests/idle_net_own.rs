//! `tact run --idle net:IF` with the job in tact's own network namespace: the job's TCP traffic
//! is its own (its sockets' counters, read over sock_diag), not foreground, while another
//! process's traffic on the same link still holds it. Root only: tact runs inside a network
//! namespace the test creates, joined by a veth pair to a second one that holds a sink; both
//! are deleted at the end. Waits are generous and assertions are about states and fractions of
//! time, never speeds.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::veth::Link;
use common::*;
use tact_linux::ProcReader;

const SUBNET: &str = "10.98.0";
/// Where the sink listens, in the far namespace.
const SINK: &str = "10.98.0.2";
const SINK_PORT: u16 = 5001;

/// tact and the job in the near namespace, watching its veth; a TCP sink that discards what
/// it gets in the far one, listening once this returns.
fn tcp_link(tag: char) -> Link {
    let sink = format!(
        "import socket, threading\n\
         srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         srv.bind(('{SINK}', {SINK_PORT})); srv.listen(16)\n\
         def drain(c):\n\
         \x20   while c.recv(1 << 20): pass\n\
         while True:\n\
         \x20   c, _ = srv.accept()\n\
         \x20   threading.Thread(target=drain, args=(c,), daemon=True).start()\n"
    );
    let link = Link::new("own", tag, SUBNET, &sink);
    wait_for(Duration::from_secs(30), "the sink to listen", || {
        link.near()
            .args(["python3", "-c"])
            .arg(format!(
                "import socket; socket.create_connection(('{SINK}', {SINK_PORT}), 1).close()"
            ))
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    });
    link
}

/// A TCP bulk sender to the sink for `secs` seconds of wall time, which then writes the bytes
/// it sent to `report` (when given).
fn bulk_sender(secs: f64, report: Option<&Path>) -> Vec<String> {
    let report = report.map_or("None".to_string(), |p| {
        format!("{:?}", p.display().to_string())
    });
    let script = format!(
        "import socket, time\n\
         s = socket.create_connection(('{SINK}', {SINK_PORT}))\n\
         print('connected', flush=True)\n\
         buf = b'x' * 65536; sent = 0; end = time.monotonic() + {secs}\n\
         while time.monotonic() < end:\n\
         \x20   sent += s.send(buf)\n\
         s.close()\n\
         if {report}: open({report}, 'w').write(str(sent))\n"
    );
    vec!["python3".into(), "-c".into(), script]
}

/// `tact run --idle net:IF --preempt 50ms` on `job` inside the near namespace, with its JSON log
/// in `dir`.
fn start_tact(link: &Link, dir: &Path, job: &[String]) -> Child {
    link.near()
        .arg(env!("CARGO_BIN_EXE_tact"))
        .env_remove("TACT_LOG")
        .env("TACT_RUNTIME_DIR", dir.join("runtime"))
        .env("TACT_SOCKET", dir.join("no-daemon.sock"))
        .current_dir(dir)
        .args(["run", "--idle"])
        .arg(format!("net:{}", link.near_if))
        .args(["--preempt", "50ms", "--json-log"])
        .arg(dir.join("idle.jsonl"))
        .arg("--")
        .args(job)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The job tact runs: its child running python (not the guard, nor a `tc` or `nft` that tact
/// runs as root for its htb tree, nor such a child between fork and exec, which still shows
/// tact's command line).
fn job_of(tact_pid: i32) -> Option<i32> {
    let r = ProcReader::new();
    r.children(tact_pid)
        .unwrap_or_default()
        .into_iter()
        .find(|&c| {
            r.cmdline(c)
                .is_ok_and(|a| a.first().is_some_and(|p| p.ends_with("python3")))
        })
}

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: creating network namespaces needs root");
    false
}

#[test]
fn a_job_alone_on_the_link_is_not_held_by_its_own_tcp_traffic() {
    if !root() {
        return;
    }
    let link = tcp_link('a');
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("sent");
    let mut tact = start_tact(&link, dir.path(), &bulk_sender(4.0, Some(&report)));
    let status = tact.wait().unwrap();
    let err = stderr_of(&mut tact);
    assert!(status.success(), "{err}");
    let lines = log_lines(&dir.path().join("idle.jsonl"));
    let summary = lines.iter().find(|v| v["kind"] == "summary").unwrap();
    let (held, t) = (
        summary["held"].as_f64().unwrap(),
        summary["t"].as_f64().unwrap(),
    );
    let sent: u64 = std::fs::read_to_string(&report).unwrap().parse().unwrap();
    eprintln!(
        "job alone on the link: {:.1} MB/s, held {held:.2} s of {t:.2} s ({} holds)",
        sent as f64 / 4.0 / 1e6,
        summary["holds"]
    );
    // Its whole flow crossed the watched interface; counted as foreground, it held the job
    // after every burst, most of the time (measured: 80–95 % before the job's sockets were
    // counted). Stray frames (neighbour discovery) and a socket's bytes between its last look
    // and its close may still hold it now and then.
    assert!(sent > 1 << 20, "the job sent {sent} bytes");
    assert!(held < 0.25 * t, "held {held:.2} s of {t:.2} s: {summary}");
    assert!(
        err.contains("own traffic: the job's TCP sockets"),
        "tact says which source it uses: {err}"
    );
    let start = lines.iter().find(|v| v["kind"] == "start").unwrap();
    assert_eq!(start["gates"][0]["own_traffic"], "tcp_sockets", "{start}");
}

#[test]
fn the_job_is_still_held_while_another_process_sends_on_the_link() {
    if !root() {
        return;
    }
    let link = tcp_link('b');
    let dir = tempfile::tempdir().unwrap();
    let tact = start_tact(&link, dir.path(), &bulk_sender(600.0, None));
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    // The job's flow runs on its own first: tact has found its socket.
    std::thread::sleep(Duration::from_secs(1));
    let fg_from = Instant::now();
    let mut fg = link
        .near()
        .args(bulk_sender(3.0, None))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its python may take seconds to start on a loaded machine: sample from its first send on.
    let mut said = String::new();
    BufReader::new(fg.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "connected", "the foreground could not connect");
    let (held_samples, samples) = stopped_samples(job, &mut fg, fg_from, Duration::from_secs(120));
    // Measured: held in 93 % of the samples (the rest: the foreground's first PI and its end).
    assert!(
        2 * held_samples > samples,
        "held in {held_samples} of {samples} samples while the foreground sent: {:?}",
        log_lines(&dir.path().join("idle.jsonl"))
    );
    wait_for(Duration::from_secs(60), "the job to run again", || {
        !any_stopped(&[job])
    });
    let held = log_lines(&dir.path().join("idle.jsonl"))
        .into_iter()
        .find(|v| v["kind"] == "held")
        .expect("a hold in the log");
    assert_eq!(held["by"][0]["resource"], format!("net:{}", link.near_if));
    assert!(
        held["by"][0]["fg_bytes"].as_u64().unwrap() >= 4096,
        "{held}"
    );
    kill_tree(job);
    let mut tact = tact;
    // tact passes on the job's end, and resumed it before (it was running when killed).
    assert_eq!(tact.wait().unwrap().code(), Some(128 + libc::SIGKILL));
}

/// A TCP sender to the sink that sends 64 KiB every `pause` seconds for `secs`, printing
/// `connected` first.
fn paced_sender(secs: f64, pause: f64) -> Vec<String> {
    let script = format!(
        "import socket, time\n\
         s = socket.create_connection(('{SINK}', {SINK_PORT}))\n\
         print('connected', flush=True)\n\
         buf = b'x' * 65536; end = time.monotonic() + {secs}\n\
         while time.monotonic() < end:\n\
         \x20   s.sendall(buf); time.sleep({pause})\n\
         s.close()\n"
    );
    vec!["python3".into(), "-c".into(), script]
}

/// The audit's rig for the job's htb class on a veth: tact (as root, with the cgroup2 hierarchy
/// mounted in its namespace, so its htb tree at the veth's speed is up and the job's packets are
/// marked into 1:20) runs a TCP bulk sender, and another process sends on the same link. A qdisc
/// counts a GSO packet with every segment's headers and the veth with one set: the job's class
/// reads some 4 % over what the veth sent (902 MB against 867 MB in a second), and credited whole
/// to the ledger that excess masked all of a 30 MB/s foreground (`held 0 times`, the summary's
/// `fg_bytes` 0 while its class had sent 57 MB). Here the foreground is a lighter 6 MB/s, masked
/// by the old count as soon as the job sends 160 MB/s. With the job's share taken as what the
/// foreground's class did not send, the job is held while the foreground sends.
#[test]
fn a_fast_job_counted_by_its_htb_class_is_held_while_another_process_sends() {
    if let Some(why) = net_kernel_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let link = tcp_link('c');
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("idle.jsonl");
    let tact = link
        .near()
        .args([
            "sh",
            "-c",
            "mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec \"$@\"",
            "sh",
        ])
        .arg(env!("CARGO_BIN_EXE_tact"))
        .env_remove("TACT_LOG")
        .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
        .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
        .current_dir(dir.path())
        .args(["run", "--idle"])
        .arg(format!("net:{}", link.near_if))
        .args(["--preempt", "50ms", "--json-log"])
        .arg(&log)
        .arg("--")
        .args(bulk_sender(600.0, None))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut tact = Running(tact);
    let tact_pid = tact.0.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    wait_for(Duration::from_secs(30), "the start record", || {
        log_lines(&log).iter().any(|v| v["kind"] == "start")
    });
    let start = log_lines(&log)
        .into_iter()
        .find(|v| v["kind"] == "start")
        .unwrap();
    assert_eq!(start["gates"][0]["own_traffic"], "htb_class", "{start}");
    // The job's flow alone first.
    std::thread::sleep(Duration::from_secs(2));
    let fg_from = Instant::now();
    let mut fg = link
        .near()
        .args(paced_sender(3.0, 0.01))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(fg.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "connected", "the foreground could not connect");
    let (held_samples, samples) = stopped_samples(job, &mut fg, fg_from, Duration::from_secs(120));
    wait_for(Duration::from_secs(60), "the job to run again", || {
        !any_stopped(&[job])
    });
    kill_tree(job);
    assert_eq!(tact.0.wait().unwrap().code(), Some(128 + libc::SIGKILL));
    let lines = log_lines(&log);
    let summary = lines.iter().find(|v| v["kind"] == "summary").unwrap();
    eprintln!(
        "held in {held_samples} of {samples} samples while the foreground sent; summary: {summary}"
    );
    assert!(
        2 * held_samples > samples,
        "held in {held_samples} of {samples} samples while the foreground sent: {summary}"
    );
    assert!(summary["holds"].as_u64().unwrap() >= 1, "{summary}");
    assert!(
        summary["gates"][0]["fg_bytes"].as_u64().unwrap() > 1 << 20,
        "{summary}"
    );
}

/// A tact that a failing test leaves running gets SIGTERM and is waited for.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            kill(self.0.id() as i32, nix::sys::signal::Signal::SIGTERM);
            let _ = self.0.wait();
        }
    }
}
