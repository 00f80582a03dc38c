//! `tact daemon` without root enforcing CPU rights with the share engine (issue 7): a daemon run
//! as nobody, and two spinning processes of nobody attached to it, funded 1:3 from one currency,
//! all on one CPU. The 3 gets clearly more CPU, `show` reports the engine and each client's
//! share, and no exit path leaves a client stopped: detach, the daemon's SIGTERM (which also
//! removes the crash records), its SIGKILL (the watchdog resumes them). Skipped, with the reason,
//! where a process cannot be run as nobody (not root, no setpriv or taskset).

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{one_cpu, wait_for, AS_NOBODY};
use nix::sys::signal::Signal;
use serde_json::Value;
use tact_linux::ProcReader;

const TASKSET: &str = "/usr/bin/taskset";
/// Generous: the machine may be heavily loaded.
const PATIENCE: Duration = Duration::from_secs(30);

/// Why these tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: cannot run the daemon as nobody".into());
    }
    for tool in [AS_NOBODY[0], TASKSET] {
        if !Path::new(tool).exists() {
            return Some(format!("{tool} is missing"));
        }
    }
    None
}

/// A command run as nobody, pinned to `cpu`.
fn as_nobody(cpu: usize, program: &str) -> Command {
    let mut c = Command::new(AS_NOBODY[0]);
    c.args(&AS_NOBODY[1..])
        .arg(TASKSET)
        .arg("-c")
        .arg(cpu.to_string())
        .arg(program)
        .env_remove("TACT_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// A daemon of nobody's, with its socket, state, crash records (`run/`) and stderr in one
/// temporary directory that nobody owns; killed when dropped.
struct Daemon {
    child: Child,
    dir: tempfile::TempDir,
    cpu: usize,
}

impl Daemon {
    fn start(cpu: usize) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("run")).unwrap();
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        let nogroup = Some(nix::unistd::Gid::from_raw(65534));
        for d in [dir.path().to_path_buf(), dir.path().join("run")] {
            nix::unistd::chown(&d, nobody, nogroup).unwrap();
        }
        let stderr = File::create(dir.path().join("stderr")).unwrap();
        let child = as_nobody(cpu, env!("CARGO_BIN_EXE_tact"))
            .env("TACT_RUNTIME_DIR", dir.path().join("run"))
            .arg("daemon")
            .arg("--socket")
            .arg(dir.path().join("s"))
            .arg("--tickets-state")
            .arg(dir.path().join("tickets.json"))
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut d = Daemon { child, dir, cpu };
        let (socket, stderr) = (d.dir.path().join("s"), d.dir.path().join("stderr"));
        common::wait_until_listening(&mut d.child, &socket, PATIENCE, || {
            fs::read_to_string(&stderr).unwrap_or_default()
        });
        d
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// `tact tickets ARGS`, as nobody.
    fn tickets(&self, args: &[&str]) -> (i32, String, String) {
        let out = as_nobody(self.cpu, env!("CARGO_BIN_EXE_tact"))
            .env("TACT_RUNTIME_DIR", self.dir.path().join("run"))
            .arg("tickets")
            .args(args)
            .arg("--socket")
            .arg(self.dir.path().join("s"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.tickets(args);
        assert_eq!(code, 0, "tact tickets {args:?}: {err}");
        out
    }

    fn show(&self) -> Value {
        serde_json::from_str(&self.ok(&["show", "--json"])).unwrap()
    }

    /// Funds currency C with 1000 of the base's CPU and attaches the spinners with 100 and 300
    /// of C's.
    fn attach(&self, spinners: &Spinners) {
        for (pid, cpu) in spinners.pids().into_iter().zip(["100", "300"]) {
            self.ok(&["attach", &pid.to_string(), "--from", "C", "--cpu", cpu]);
        }
    }

    /// Each spinner's ALPS share, once `show` reports both in the order of their rights, 1:3 (a
    /// client just attached counts as not competing until the daemon's next look at `/proc`, and
    /// the other then holds the whole currency for a moment).
    fn shares(&self, spinners: &Spinners) -> Vec<u64> {
        let mut shares = Vec::new();
        wait_for(PATIENCE, "both clients under the share engine, 1:3", || {
            let show = self.show();
            shares = spinners
                .pids()
                .iter()
                .filter_map(|pid| {
                    let client = show["clients"]
                        .as_array()?
                        .iter()
                        .find(|c| c["pid"] == *pid)?;
                    let knob = client["knobs"].get("cpu")?;
                    assert_eq!(knob["file"], "alps share", "{show}");
                    knob["value"].as_u64()
                })
                .collect();
            shares.len() == 2 && shares[0] < shares[1]
        });
        shares
    }

    /// Waits for the daemon to exit.
    fn exited(&mut self) {
        wait_for(PATIENCE, "the daemon to exit", || {
            self.child.try_wait().unwrap().is_some()
        });
    }

    fn signal(&self, sig: Signal) {
        common::kill(self.child.id() as i32, sig);
    }

    /// The crash records the daemon's share engine left.
    fn records(&self) -> Vec<PathBuf> {
        fs::read_dir(self.dir.path().join("run"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two spinning processes of nobody's, on the daemon's CPU; killed when dropped.
struct Spinners(Vec<Child>);

impl Spinners {
    fn start(cpu: usize) -> Spinners {
        let spinners = Spinners(
            (0..2)
                .map(|_| as_nobody(cpu, "yes").spawn().unwrap())
                .collect(),
        );
        // setpriv and taskset exec into `yes` under the same pid; before that it is root's.
        for pid in spinners.pids() {
            wait_for(PATIENCE, "a spinner to start", || {
                fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "yes")
            });
        }
        spinners
    }

    fn pids(&self) -> Vec<i32> {
        self.0.iter().map(|c| c.id() as i32).collect()
    }

    fn any_stopped(&self) -> bool {
        common::any_stopped(&self.pids())
    }

    /// Asserts that none is stopped now, nor over the next second.
    fn stay_running(&self, when: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(1) {
            assert!(!self.any_stopped(), "a client is stopped {when}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// CPU time of each, in clock ticks.
    fn cpu(&self) -> Vec<u64> {
        let reader = ProcReader::new();
        self.pids()
            .iter()
            .map(|&pid| {
                let text =
                    fs::read_to_string(reader.root().join(pid.to_string()).join("stat")).unwrap();
                // Fields after the command: state is field 3, utime 14 and stime 15.
                let rest = &text[text.rfind(')').unwrap() + 1..];
                let fields: Vec<u64> = rest
                    .split_whitespace()
                    .skip(11)
                    .take(2)
                    .map(|f| f.parse().unwrap())
                    .collect();
                fields.iter().sum()
            })
            .collect()
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts a daemon and two spinners, and funds currency C.
fn setup() -> Option<(Daemon, Spinners)> {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return None;
    }
    let cpu = one_cpu();
    let d = Daemon::start(cpu);
    let spinners = Spinners::start(cpu);
    d.ok(&["create", "C"]);
    d.ok(&["fund", "C", "--from", "base", "--cpu", "1000"]);
    Some((d, spinners))
}

#[test]
fn cpu_divides_by_rights_and_no_exit_leaves_a_client_stopped() {
    let Some((mut d, spinners)) = setup() else {
        return;
    };
    d.attach(&spinners);
    let shares = d.shares(&spinners);
    // Said once, when the engine starts.
    assert!(
        d.stderr()
            .contains("disk and memory tickets are not applied"),
        "{}",
        d.stderr()
    );
    let show = d.show();
    assert_eq!(show["enforced"], true, "{show}");
    let how = show["enforcement"].as_str().unwrap();
    assert!(
        how.contains("share engine") && how.contains("CPU only"),
        "{how}"
    );
    let text = d.ok(&["show", "C"]);
    assert!(text.contains("enforced: share engine"), "{text}");
    let pid = spinners.pids()[1].to_string();
    let explain: Value = serde_json::from_str(&d.ok(&["explain", &pid, "--json"])).unwrap();
    assert_eq!(explain["enforced"], true, "{explain}");

    // On one CPU the one with 3 times the rights gets clearly more of it.
    let before = spinners.cpu();
    std::thread::sleep(Duration::from_secs(6));
    let after = spinners.cpu();
    let used: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert!(
        used[1] as f64 > 1.5 * used[0] as f64,
        "CPU ticks used {used:?} with shares {shares:?}; the daemon said: {}",
        d.stderr()
    );

    // A detach returns once the engine has let the process go: both run from then on.
    for pid in spinners.pids() {
        d.ok(&["detach", &pid.to_string()]);
    }
    spinners.stay_running("after detach");

    // Attached again, then the daemon stops: it resumes both before it exits.
    d.attach(&spinners);
    d.shares(&spinners);
    d.signal(Signal::SIGTERM);
    d.exited();
    spinners.stay_running("after the daemon's SIGTERM");
    assert_eq!(
        d.records(),
        Vec::<PathBuf>::new(),
        "a clean exit leaves no crash record"
    );
}

#[test]
fn a_sigkilled_daemons_watchdog_resumes_its_clients() {
    let Some((mut d, spinners)) = setup() else {
        return;
    };
    d.attach(&spinners);
    d.shares(&spinners);
    // The engine is at work: a client is stopped now and then.
    let stopped = Instant::now();
    while !spinners.any_stopped() {
        assert!(
            stopped.elapsed() < PATIENCE,
            "the share engine stopped no client; the daemon said: {}",
            d.stderr()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    d.signal(Signal::SIGKILL);
    d.exited();
    wait_for(PATIENCE, "the watchdog to resume the clients", || {
        !spinners.any_stopped()
    });
    spinners.stay_running("after the daemon's SIGKILL");
}
