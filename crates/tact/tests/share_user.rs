//! `tact share --user SHARES=USER` on real processes: every process of a user is one principal,
//! held to its share against a `--job`, processes the user starts later join it (their CPU counts
//! and they are stopped with the rest), a SIGKILL of tact leaves none of them stopped, and only
//! root may name another user.
//!
//! Each test runs its user's processes under a uid of its own that has no account (setpriv runs a
//! process under any uid), so the principal holds only what the test started: tact never stops
//! another test's or the machine's processes. The tests that need root (to run processes as
//! another uid) skip with the reason elsewhere.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use common::{kill, one_cpu, tact, wait_for};
use nix::sys::signal::Signal;
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::{ProcId, ProcReader};

const SETPRIV: &str = "/usr/bin/setpriv";
const TASKSET: &str = "/usr/bin/taskset";
/// Generous: the machine may be heavily loaded.
const PATIENCE: Duration = Duration::from_secs(30);

/// Why the tests that run processes as another uid cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: cannot run processes as another user".into());
    }
    [SETPRIV, TASKSET]
        .into_iter()
        .find(|tool| !Path::new(tool).exists())
        .map(|tool| format!("{tool} is missing"))
}

macro_rules! skip_unless_root {
    () => {
        if let Some(why) = cannot_run() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// `program args` run as `uid` (real and effective; no groups).
fn as_uid(uid: u32, program: &str) -> Command {
    let mut c = Command::new(SETPRIV);
    c.args(["--reuid", &uid.to_string(), "--regid", &uid.to_string()])
        .args(["--clear-groups", program])
        .env_remove("TACT_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// CPU-bound processes of one uid, pinned to one CPU; killed when dropped (through pidfds checked
/// to name the processes started: never a recycled pid).
struct Spinners {
    uid: u32,
    cpu: usize,
    children: Vec<Child>,
    ids: Vec<ProcId>,
}

impl Spinners {
    fn new(uid: u32, cpu: usize) -> Spinners {
        Spinners {
            uid,
            cpu,
            children: Vec::new(),
            ids: Vec::new(),
        }
    }

    /// Starts one more; returns once it runs `yes` under the uid (setpriv and taskset exec into
    /// it under the same pid; before that it is root's).
    fn add(&mut self) -> i32 {
        let child = as_uid(self.uid, TASKSET)
            .args(["-c", &self.cpu.to_string(), "yes"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        self.children.push(child);
        wait_for(PATIENCE, "a spinner to start", || {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "yes")
        });
        self.ids.push(ProcReader::new().stat(pid).unwrap().id());
        pid
    }

    fn pids(&self) -> Vec<i32> {
        self.ids.iter().map(|id| id.pid).collect()
    }

    /// CPU time of all of them, in seconds.
    fn cpu_secs(&self) -> f64 {
        let r = ProcReader::new();
        let ticks: u64 = self
            .pids()
            .iter()
            .map(|&p| r.stat(p).map(|s| s.cpu_ticks).unwrap_or(0))
            .sum();
        ticks as f64 / 100.0
    }

    /// Whether none is stopped and each has run `ticks` clock ticks past `since` (its CPU time
    /// when tact died): one left stopped never gets there.
    fn all_running_past(&self, since: &[u64], ticks: u64) -> bool {
        let r = ProcReader::new();
        self.pids().iter().zip(since).all(|(&p, &t)| {
            r.stat(p)
                .is_ok_and(|s| !s.is_stopped() && s.cpu_ticks >= t + ticks)
        })
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        let r = ProcReader::new();
        for id in &self.ids {
            if let Ok(fd) = PidFd::open(id.pid) {
                if r.stat(id.pid).is_ok_and(|s| s.id() == *id) {
                    let _ = fd.send_signal(libc::SIGKILL);
                }
            }
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

/// `tact share ARGS` on `cpu` (it and the commands it starts), its stderr piped; killed when
/// dropped.
struct Share {
    tact: Child,
    _runtime: tempfile::TempDir,
}

impl Share {
    fn start(cpu: usize, args: &[&str]) -> Share {
        let runtime = tempfile::tempdir().unwrap();
        let tact = Command::new(TASKSET)
            .args(["-c", &cpu.to_string(), env!("CARGO_BIN_EXE_tact"), "share"])
            .args(args)
            .env("TACT_RUNTIME_DIR", runtime.path())
            .env_remove("TACT_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Share {
            tact,
            _runtime: runtime,
        }
    }

    /// Reads stderr up to a line containing `needle`; the lines read.
    fn read_until(&mut self, needle: &str) -> (BufReader<ChildStderr>, String) {
        let mut lines = BufReader::new(self.tact.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            assert!(
                lines.read_line(&mut line).unwrap() > 0,
                "tact ended before saying {needle:?}:\n{seen}"
            );
            seen.push_str(&line);
            if line.contains(needle) {
                return (lines, seen);
            }
        }
    }

    /// Waits for tact's exit; its code and everything it wrote to stderr (after `seen`).
    fn finish(&mut self, rest: Option<BufReader<ChildStderr>>, seen: String) -> (i32, String) {
        let mut err = seen;
        match rest {
            Some(mut r) => r.read_to_string(&mut err).unwrap(),
            None => self
                .tact
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap(),
        };
        let status = self.tact.wait().unwrap();
        (status.code().unwrap_or(-1), err)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let _ = self.tact.kill();
        let _ = self.tact.wait();
    }
}

/// The final table's row of `label`: (achieved %, CPU seconds).
fn row(stderr: &str, label: &str) -> (f64, f64) {
    let line = stderr
        .lines()
        .skip_while(|l| !l.starts_with("job "))
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label:?} in\n{stderr}"));
    // ... shares target achieved cpu exit...
    let cols: Vec<&str> = line[label.len()..].split_whitespace().collect();
    let achieved = cols[2].trim_end_matches('%').parse().unwrap();
    let cpu = cols[3].trim_end_matches('s').parse().unwrap();
    (achieved, cpu)
}

/// The CPU time each entity was charged, summed over the cycles of `log` in which both the
/// user principal and the job took part (all of them: the user's first process is charged its
/// CPU from birth at the first, which the shares repay over the following ones).
fn split_of_log(log: &Path, user: &str) -> (f64, f64, usize) {
    let text = std::fs::read_to_string(log).unwrap();
    let both: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let jobs = v["jobs"].as_array()?;
            let ns = |pick: &dyn Fn(&str) -> bool| {
                jobs.iter()
                    .find(|j| j["job"].as_str().is_some_and(pick))
                    .and_then(|j| j["consumed_ns"].as_f64())
            };
            Some((ns(&|n| n == user)?, ns(&|n| n != user)?))
        })
        .collect();
    let user_ns = both.iter().map(|c| c.0).sum();
    let job_ns = both.iter().map(|c| c.1).sum();
    (user_ns, job_ns, both.len())
}

/// A user with no process when tact starts is waited for; the processes it starts later are
/// members from birth (all their CPU counts), are stopped with the rest, and the principal gets
/// its share against a job: 1:3 on one CPU. `auto` picks signals for a `--user`, even as root.
#[test]
fn a_user_principal_is_held_to_its_share_and_newcomers_join_it() {
    skip_unless_root!();
    const UID: u32 = 4_100_001;
    let cpu = one_cpu();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cycles.jsonl");
    let user = format!("1={UID}");
    let mut share = Share::start(
        cpu,
        &[
            "--json-log",
            log.to_str().unwrap(),
            "--user",
            &user,
            "--job",
            "3=timeout 10 sh -c 'while :; do :; done'",
        ],
    );
    let (rest, seen) = share.read_until(&format!(
        "user {UID} has no processes yet: it joins when one starts"
    ));
    assert!(seen.contains("backend signals"), "{seen}");
    let mut spinners = Spinners::new(UID, cpu);
    let first = spinners.add();
    wait_for(PATIENCE, "the user's first process to be stopped", || {
        common::any_stopped(&[first])
    });
    // One more, once the principal runs: it joins as a member and is stopped with the rest.
    let second = spinners.add();
    wait_for(PATIENCE, "the user's second process to be stopped", || {
        common::any_stopped(&[second])
    });
    let (code, err) = share.finish(Some(rest), seen);
    // Read at once: from here on they run freely.
    let measured = spinners.cpu_secs();
    // `timeout` ends the job with status 124, which tact reports as a failed job.
    assert_eq!(code, 1, "{err}");
    let label = format!("user {UID}");
    let (_, charged) = row(&err, &label);
    // Every CPU second of both, from their birth on, counts for the principal.
    assert!(
        charged > 0.85 * measured - 0.1 && charged < measured + 0.1,
        "table {charged} s against {measured} s measured\n{err}"
    );
    let (user_ns, job_ns, cycles) = split_of_log(&log, &label);
    assert!(cycles >= 5, "{cycles} cycles with both\n{err}");
    let part = user_ns / (user_ns + job_ns);
    // 25% on an idle machine; the bounds leave room for a loaded one but exclude the
    // kernel's split (2 of 3 runnable processes are the user's).
    assert!(
        part > 0.15 && part < 0.35,
        "user got {part:.3} of {cycles} cycles\n{err}"
    );
    assert!(!common::any_stopped(&spinners.pids()), "{err}");
}

/// Members found at the start and one that joined later: a SIGKILL of tact leaves none of them
/// stopped (each was in the state file and with the watchdog before it could be stopped).
#[test]
fn sigkill_of_tact_leaves_no_member_of_a_user_stopped() {
    skip_unless_root!();
    const UID: u32 = 4_100_002;
    let cpu = one_cpu();
    let mut spinners = Spinners::new(UID, cpu);
    spinners.add();
    spinners.add();
    let user = format!("1={UID}");
    let mut share = Share::start(
        cpu,
        &[
            "--backend",
            "signals",
            "--quantum",
            "10ms",
            "--user",
            &user,
            "--job",
            "9=while :; do :; done",
        ],
    );
    wait_for(PATIENCE, "tact to stop the user's processes", || {
        common::any_stopped(&spinners.pids())
    });
    let late = spinners.add();
    wait_for(PATIENCE, "the newcomer to be stopped", || {
        common::any_stopped(&[late])
    });
    // The 1-share principal spends most of each cycle stopped: kill tact while it is.
    wait_for(PATIENCE, "the principal to be stopped", || {
        common::any_stopped(&spinners.pids())
    });
    let tact_pid = share.tact.id() as i32;
    let _job = Leftovers::of_job(tact_pid);
    kill(tact_pid, Signal::SIGKILL);
    share.tact.wait().unwrap();
    let r = ProcReader::new();
    let since: Vec<u64> = spinners
        .pids()
        .iter()
        .map(|&p| r.stat(p).map(|s| s.cpu_ticks).unwrap_or(0))
        .collect();
    // The watchdog resumes them within a second of noticing; the margin is for a loaded
    // machine. 20 ticks (0.2 s) of CPU each tells running from not yet stopped again.
    wait_for(
        PATIENCE,
        "the watchdog to resume the user's processes",
        || spinners.all_running_past(&since, 20),
    );
    let settled = Instant::now();
    while settled.elapsed() < Duration::from_millis(300) {
        assert!(!common::any_stopped(&spinners.pids()));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes of the `--job` of a tact about to be killed (its tree but tact and its
/// watchdog), which outlive it; killed when dropped, through pidfds checked to name them.
struct Leftovers(Vec<ProcId>);

impl Leftovers {
    fn of_job(tact: i32) -> Leftovers {
        let r = ProcReader::new();
        let job = common::tree(tact)
            .into_iter()
            .filter(|&p| p != tact)
            .filter(|&p| {
                r.cmdline(p)
                    .is_ok_and(|a| !a.iter().any(|a| a == "__guard"))
            })
            .filter_map(|p| r.stat(p).ok().map(|s| s.id()))
            .collect();
        Leftovers(job)
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let r = ProcReader::new();
        for id in &self.0 {
            if let Ok(fd) = PidFd::open(id.pid) {
                if r.stat(id.pid).is_ok_and(|s| s.id() == *id) {
                    let _ = fd.send_signal(libc::SIGKILL);
                }
            }
        }
    }
}

/// A directory the given uid owns (tact's runtime directory when it runs as that uid).
fn owned_dir(uid: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let id = Some(nix::unistd::Uid::from_raw(uid));
    nix::unistd::chown(dir.path(), id, Some(nix::unistd::Gid::from_raw(uid))).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// An unprivileged user may name only itself: another user is refused, naming the argument;
/// itself is shared (its processes but tact and tact's ancestors, here none) until the job ends.
#[test]
fn an_unprivileged_user_may_name_only_itself() {
    skip_unless_root!();
    const UID: u32 = 4_100_003;
    let runtime = owned_dir(UID);
    let run_as = |user: &str| {
        let out = as_uid(UID, env!("CARGO_BIN_EXE_tact"))
            .args(["share", "--user", user, "--job", "1=sleep 0.2"])
            .env("TACT_RUNTIME_DIR", runtime.path())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run_as("1=4100004");
    assert_eq!(code, Some(125), "{err}");
    assert!(
        err.contains("--user 1=4100004: only root may share another user's processes"),
        "{err}"
    );
    let (code, err) = run_as("2=0");
    assert_eq!(code, Some(125), "{err}");
    assert!(err.contains("--user 2=root: only root may"), "{err}");
    let (code, err) = run_as(&format!("1={UID}"));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("user {UID}")), "{err}");
}

#[test]
fn bad_users_are_refused_with_the_argument_named() {
    let runtime = tempfile::tempdir().unwrap();
    let refuse = |args: &[&str], needle: &str| {
        let out = tact()
            .arg("share")
            .args(args)
            .env("TACT_RUNTIME_DIR", runtime.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    };
    refuse(
        &["--user", "1=no-such-user-of-tact", "--job", "1=true"],
        "--user \"1=no-such-user-of-tact\": no user named \"no-such-user-of-tact\"",
    );
    refuse(&["--user", "0=root"], "shares must be between 1 and");
    refuse(&["--user", "root"], "expected SHARES=USER");
    let me = nix::unistd::getuid().as_raw().to_string();
    refuse(
        &["--backend", "cgroup", "--user", &format!("1={me}")],
        "--user needs the signals backend",
    );
    // tact's own process is one of its user's: an adopted pid of a user shared as a whole
    // would be in two entities.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    refuse(
        &[
            "--pid",
            &format!("1={}", sleeper.id()),
            "--user",
            &format!("1={me}"),
        ],
        "already shares",
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}
