//! `tact share` on real processes: shares divide a CPU, nothing is left stopped on any exit
//! path, bad input gets clear errors, and the cgroup backend cleans up after itself.

mod common;

use std::io::Read;
use std::process::{Child, Output, Stdio};
use std::thread;
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::ProcId;

/// A CPU-bound job that ends on its own after `secs` seconds of wall time.
fn spinner(secs: u32) -> String {
    format!("timeout {secs} sh -c 'while :; do :; done'")
}

/// `tact share` pinned to one CPU (the paper's uniprocessor: the jobs compete for it).
fn share_on_one_cpu(args: &[&str], runtime: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new("taskset");
    c.args(["-c", "1", env!("CARGO_BIN_EXE_tact"), "share"])
        .args(args)
        .env("TACT_RUNTIME_DIR", runtime);
    c
}

/// The achieved percentages of the final table, in job order.
fn achieved(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("job "))
        .skip(1)
        .take_while(|l| !l.starts_with("tact:"))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // ... shares target achieved cpu exit
            cols[cols.len() - 3].trim_end_matches('%').parse().unwrap()
        })
        .collect()
}

fn run(mut c: std::process::Command) -> (Output, String) {
    let out = c.stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

/// `tact share` with the signals backend and 10 ms quanta of a 1-share and a `heavy`-share
/// spinner, each `secs` seconds long, with `extra` arguments.
fn one_against(
    heavy: u32,
    secs: u32,
    extra: &[&str],
    runtime: &std::path::Path,
) -> (Output, String) {
    let (a, b) = (
        format!("1={}", spinner(secs)),
        format!("{heavy}={}", spinner(secs)),
    );
    let mut args = vec![
        "--backend",
        "signals",
        "--quantum",
        "10ms",
        "--job",
        &a,
        "--job",
        &b,
    ];
    args.extend(extra);
    run(share_on_one_cpu(&args, runtime))
}

/// The count a footer line gives just before `what` ("… 12.5 reads and …").
fn footer_count<T: std::str::FromStr>(err: &str, what: &str) -> T {
    let line = err
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no footer with {what:?}\n{err}"));
    let count = line.split(what).next().unwrap().rsplit(' ').next().unwrap();
    count
        .parse()
        .unwrap_or_else(|_| panic!("{count:?} before {what:?}\n{err}"))
}

#[test]
fn signals_divide_one_cpu_one_to_three() {
    let runtime = tempfile::tempdir().unwrap();
    let log = runtime.path().join("cycles.jsonl");
    let (out, err) = one_against(3, 4, &["--json-log", log.to_str().unwrap()], runtime.path());
    // `timeout` ends each job with status 124, which tact reports as a failed job.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("backend signals: optimized ALPS"), "{err}");
    let got = achieved(&err);
    assert_eq!(got.len(), 2, "{err}");
    // Exact on an idle machine (25/75); the bounds leave room for a loaded one, where a
    // quantum's overshoot is larger, but exclude the kernel's even split.
    assert!(
        got[0] > 15.0 && got[0] < 35.0,
        "1-share job got {got:?}\n{err}"
    );
    assert!(
        got[1] > 65.0 && got[1] < 85.0,
        "3-share job got {got:?}\n{err}"
    );
    assert!(err.contains("own CPU"), "{err}");
    // One JSON object per cycle, each naming both jobs while both ran. (A cycle is S·Q of the
    // jobs' CPU, so how many fit in the 4 s depends on the load.)
    let text = std::fs::read_to_string(&log).unwrap();
    let cycles: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let counted: usize = footer_count(&err, " cycles,");
    assert_eq!(cycles.len(), counted, "{err}");
    assert!(cycles.len() >= 2, "{err}");
    // The spinners run behind `timeout`, which waits for them: tact finds them at its first read
    // of the waiting parent, and the first cycle is spent by their CPU (S·Q = 40 ms, less what
    // a hold leaves over). When the jobs were taken for sleepers until the rescan a second
    // later, they ran at the kernel's even split meanwhile and the first cycle, ended by blocked
    // charges, showed 4 ms.
    let spent: f64 = cycles[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["consumed_ns"].as_f64().unwrap())
        .sum();
    assert!(spent >= 20e6, "first cycle: {}\n{err}", cycles[0]);
    let first = &cycles[1];
    assert_eq!(first["jobs"].as_array().unwrap().len(), 2, "{first}");
    for key in ["consumed_ns", "entitlement_ns", "rel_err", "share"] {
        assert!(
            first["jobs"][0].get(key).is_some(),
            "{key} missing: {first}"
        );
    }
}

/// The paper's two algorithms, both deciding only at ticks (`--quantized`): what differs is
/// optimized ALPS's lazy reads. tact's default adds the checks between ticks, whose reads grow as
/// the jobs run slower than flat out (1.4–1.5 a quantum against basic's 1.3–1.4 for this 1:3 pair
/// on a busy machine): they buy accuracy, not fewer reads.
#[test]
fn basic_alps_reads_more_than_optimized_for_the_same_split() {
    let reads = |basic: bool| {
        let runtime = tempfile::tempdir().unwrap();
        let extra: &[&str] = if basic {
            &["--basic"]
        } else {
            &["--quantized"]
        };
        let (_, err) = one_against(3, 3, extra, runtime.path());
        assert!(
            err.contains(if basic {
                "basic ALPS"
            } else {
                "optimized ALPS"
            }),
            "{err}"
        );
        let per_quantum: f64 = footer_count(&err, " reads and");
        (per_quantum, achieved(&err))
    };
    let (basic, split_b) = reads(true);
    let (optimized, split_o) = reads(false);
    assert!(
        optimized < basic,
        "optimized {optimized} vs basic {basic} reads per quantum"
    );
    for split in [split_b, split_o] {
        assert!(split[1] > split[0] * 1.8, "{split:?}");
    }
}

/// Quantization-aware accounting is the default: tact wakes between ticks to stop a job near the
/// time it runs out; `--quantized` decides only at ticks, as the paper does. Either way the
/// split holds.
#[test]
fn checks_between_ticks_unless_quantized() {
    let checks = |quantized: bool| {
        let runtime = tempfile::tempdir().unwrap();
        let extra: &[&str] = if quantized { &["--quantized"] } else { &[] };
        let (_, err) = one_against(9, 3, extra, runtime.path());
        let n: u64 = footer_count(&err, " checks between ticks");
        let split = achieved(&err);
        assert_eq!(split.len(), 2, "{err}");
        // 10% and 90% on an idle machine; far from the kernel's even split on a loaded one.
        assert!(split[0] < 25.0 && split[1] > 75.0, "{split:?}\n{err}");
        n
    };
    assert_eq!(checks(true), 0);
    assert!(checks(false) > 0);
}

/// A `tact share` of two endless spinners on one CPU, running until the test ends it.
struct Endless {
    tact: Child,
    /// Every process of the jobs the test has seen, so that the jobs are killed at the end even
    /// if tact died first (then they are no longer in its tree) or the test failed.
    seen: std::cell::RefCell<Vec<ProcId>>,
    _runtime: tempfile::TempDir,
}

impl Endless {
    fn start() -> Endless {
        Endless::of("while :; do :; done")
    }

    /// Two jobs of shares 1 and 9 that run `script`, with 10 ms quanta.
    fn of(script: &str) -> Endless {
        let runtime = tempfile::tempdir().unwrap();
        let (a, b) = (format!("1={script}"), format!("9={script}"));
        let tact = share_on_one_cpu(
            &[
                "--backend",
                "signals",
                "--quantum",
                "10ms",
                "--job",
                &a,
                "--job",
                &b,
            ],
            runtime.path(),
        );
        Endless::spawn(tact, runtime)
    }

    /// Runs `tact` (a `tact share` of endless jobs, its crash records in `runtime`).
    fn spawn(mut tact: std::process::Command, runtime: tempfile::TempDir) -> Endless {
        let tact = tact
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Endless {
            tact,
            seen: Default::default(),
            _runtime: runtime,
        }
    }

    /// Processes of tact's tree but tact and its watchdog: the jobs, and a job's process between
    /// tact's fork and its exec of `sh`.
    fn members(&self) -> Vec<i32> {
        let r = tact_linux::ProcReader::new();
        let tact = self.tact.id() as i32;
        let found: Vec<i32> = tree(tact)
            .into_iter()
            .filter(|&p| p != tact)
            .filter(|&p| {
                r.cmdline(p)
                    .map(|a| !a.iter().any(|a| a == "__guard"))
                    .unwrap_or(false)
            })
            .collect();
        self.remember(&found);
        found
    }

    /// The jobs' processes (those that run `sh`).
    fn jobs(&self) -> Vec<i32> {
        let r = tact_linux::ProcReader::new();
        self.members()
            .into_iter()
            .filter(|&p| {
                r.cmdline(p)
                    .map(|a| a.first().is_some_and(|a| a == "sh"))
                    .unwrap_or(false)
            })
            .collect()
    }

    fn remember(&self, pids: &[i32]) {
        let r = tact_linux::ProcReader::new();
        let mut seen = self.seen.borrow_mut();
        for s in pids.iter().filter_map(|&p| r.stat(p).ok()) {
            if !seen.contains(&s.id()) {
                seen.push(s.id());
            }
        }
    }

    /// Waits until the jobs run and tact has stopped one of them at least once: a job that
    /// has used CPU time (so tact let it go) and is stopped.
    fn wait_for_a_stop(&self) -> Vec<i32> {
        let r = tact_linux::ProcReader::new();
        let mut jobs = Vec::new();
        wait_for(
            Duration::from_secs(20),
            "both jobs, one of them stopped",
            || {
                jobs = self.jobs();
                jobs.len() == 2
                    && jobs
                        .iter()
                        .any(|&p| r.stat(p).is_ok_and(|s| s.is_stopped() && s.cpu_ticks > 0))
            },
        );
        jobs
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        self.members();
        let _ = self.tact.kill();
        let _ = self.tact.wait();
        // Through a pidfd, checked to name the process seen: never a recycled pid.
        let r = tact_linux::ProcReader::new();
        for id in self.seen.borrow().iter() {
            let Ok(fd) = PidFd::open(id.pid) else {
                continue;
            };
            if r.stat(id.pid).is_ok_and(|s| s.id() == *id) {
                let _ = fd.send_signal(libc::SIGKILL);
            }
        }
    }
}

/// Whether none of `ids` is stopped, and each has exited or has run for a while since tact's
/// death (its CPU time reached `ticks`): a job left stopped never gets there.
fn all_gone_or_running(ids: &[ProcId], ticks: u64) -> bool {
    let r = tact_linux::ProcReader::new();
    ids.iter().all(|id| match r.stat(id.pid) {
        Ok(s) if s.id() == *id && !s.is_dead() => !s.is_stopped() && s.cpu_ticks >= ticks,
        _ => true,
    })
}

/// A quantum longer than the watchdog's lease (5 s): tact renews it between ticks too. It used
/// to renew only after a tick, so at 6 s the watchdog took tact for hung, resumed the jobs and
/// left, and tact failed (125) at its next renewal.
#[test]
fn a_quantum_longer_than_the_watchdogs_lease_runs_to_the_end() {
    let runtime = tempfile::tempdir().unwrap();
    let (out, err) = run(share_on_one_cpu(
        &[
            "--backend",
            "signals",
            "--quantum",
            "6s",
            "--job",
            &format!("1={}", spinner(8)),
            "--job",
            "1=sleep 8",
        ],
        runtime.path(),
    ));
    // `timeout` ends the spinner with 124, a failed job: 1, where tact's own failure is 125.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("guard"), "{err}");
    assert_eq!(achieved(&err).len(), 2, "{err}");
}

#[test]
fn sigkill_of_tact_leaves_no_job_stopped() {
    let mut e = Endless::start();
    let jobs = e.wait_for_a_stop();
    // The 1-share job spends most of each cycle stopped: kill tact while it is.
    kill(e.tact.id() as i32, Signal::SIGKILL);
    e.tact.wait().unwrap();
    // The watchdog resumes them within a second of noticing; the margin is for a heavily
    // loaded machine.
    wait_for(
        Duration::from_secs(30),
        "the watchdog to resume the jobs",
        || !any_stopped(&jobs),
    );
    // And they stay running: nobody stops them again.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!any_stopped(&jobs));
}

/// The CPUs process `pid` may run on, as the kernel lists them (`Cpus_allowed_list`).
fn cpus_allowed(pid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// Conserving mode on two CPUs caps the 9-share job at one CPU and gives it a CPU of its own,
/// the other job the other one. Killed, tact cannot put the masks back itself: its watchdog does,
/// from the state file (spec proportional-share §4, crash safety). Needs both CPUs.
#[test]
fn sigkill_of_tact_in_conserving_mode_puts_the_jobs_cpu_masks_back() {
    let runtime = tempfile::tempdir().unwrap();
    let records = runtime.path().to_path_buf();
    let mut c = std::process::Command::new("taskset");
    c.args(["-c", "0,1", env!("CARGO_BIN_EXE_tact"), "share"])
        .args(["--backend", "signals", "--mode", "conserving"])
        .args(["--quantum", "10ms"])
        .args(["--job", "1=while :; do :; done"])
        .args(["--job", "9=while :; do :; done"])
        .env("TACT_RUNTIME_DIR", runtime.path());
    let mut e = Endless::spawn(c, runtime);
    let tact = e.tact.id() as i32;
    let mut jobs = Vec::new();
    let mut original = String::new();
    wait_for(
        Duration::from_secs(30),
        "both jobs on CPUs narrower than tact's",
        || {
            // tact's own mask is the group's and the jobs' original one (taskset has exec'd
            // tact by the time its jobs exist).
            jobs = e.jobs();
            original = cpus_allowed(tact).unwrap_or_default();
            jobs.len() == 2
                && jobs
                    .iter()
                    .all(|&p| cpus_allowed(p).is_some_and(|c| c != original))
        },
    );
    assert_eq!(original, "0-1");
    kill(tact, Signal::SIGKILL);
    e.tact.wait().unwrap();
    let records_left = || {
        std::fs::read_dir(&records)
            .unwrap()
            .filter(|f| {
                f.as_ref()
                    .is_ok_and(|f| f.path().extension().is_some_and(|x| x == "json"))
            })
            .count()
    };
    // The watchdog resumes, puts the masks back, then removes the state file; the margin is
    // for a heavily loaded machine.
    wait_for(
        Duration::from_secs(30),
        "the watchdog to put the masks back and remove its record",
        || {
            jobs.iter()
                .all(|&p| cpus_allowed(p).as_deref() == Some(original.as_str()))
                && records_left() == 0
        },
    );
    assert!(!any_stopped(&jobs));
    // And they stay so: nobody narrows or stops them again.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!any_stopped(&jobs));
    for &p in &jobs {
        assert_eq!(
            cpus_allowed(p).as_deref(),
            Some(original.as_str()),
            "job {p}"
        );
    }
}

/// While tact starts its jobs, before the watchdog holds them, nothing may be stopped: a command
/// tact starts waits at a gate that tact's death closes. (Born stopped instead, a job seen here
/// was left stopped for good.)
#[test]
fn sigkill_of_tact_while_it_starts_the_jobs_leaves_no_job_stopped() {
    let mut e = Endless::start();
    // Kill tact the moment its first job's shell exists, in the middle of starting the jobs.
    let poll = Duration::from_millis(1);
    let start = std::time::Instant::now();
    while e.jobs().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(20), "no job started");
        std::thread::sleep(poll);
    }
    kill(e.tact.id() as i32, Signal::SIGKILL);
    e.members();
    e.tact.wait().unwrap();
    let members = e.seen.borrow().clone();
    // Each either never ran and exited, or runs its endless command (the watchdog resumed it):
    // 20 ticks of CPU (0.2 s) to tell it from one that has not stopped yet but will.
    wait_for(Duration::from_secs(30), "the jobs to exit or run", || {
        all_gone_or_running(&members, 20)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(all_gone_or_running(&members, 0));
}

#[test]
fn sigterm_resumes_the_jobs_passes_the_signal_on_and_reports() {
    let mut e = Endless::start();
    let jobs = e.wait_for_a_stop();
    kill(e.tact.id() as i32, Signal::SIGTERM);
    let status = e.tact.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    let mut err = String::new();
    std::io::Read::read_to_string(e.tact.stderr.as_mut().unwrap(), &mut err).unwrap();
    // The commands tact started got the SIGTERM and ended; nothing was left stopped.
    for p in &jobs {
        assert!(
            tact_linux::ProcReader::new().stat(*p).is_err(),
            "job {p} still exists\n{err}"
        );
    }
    assert!(err.contains("signal 15"), "{err}");
    assert!(err.contains("target"), "{err}");
}

/// A command that survives the SIGTERM tact passes on: a second one, sent while tact waits for
/// it, goes on too (it waited in tact's blocked mask until the command ended by itself). The
/// commands' trap takes the first and dies of the second: SIGINT, SIGQUIT and SIGHUP may be
/// ignored from the start where the tests run in the background (CI: `nohup ... &`).
#[test]
fn a_second_signal_reaches_a_command_that_survived_the_first() {
    let mut e = Endless::of("trap 'trap - TERM' TERM; while :; do :; done");
    let jobs = e.wait_for_a_stop();
    kill(e.tact.id() as i32, Signal::SIGTERM);
    // Within the 10 s tact gives the commands to exit after passing the first on.
    std::thread::sleep(Duration::from_secs(1));
    kill(e.tact.id() as i32, Signal::SIGTERM);
    let ended = wait_for_some(Duration::from_secs(60), "tact to end", || {
        e.tact.try_wait().unwrap()
    });
    assert_eq!(ended.code(), Some(128 + 15), "the first signal's status");
    for p in &jobs {
        assert!(
            tact_linux::ProcReader::new().stat(*p).is_err(),
            "job {p} outlived the second SIGTERM"
        );
    }
}

/// The process `cmdline` names among `pids`, as first seen.
fn find_member(pids: &[i32], cmdline: &str) -> Option<ProcId> {
    let r = tact_linux::ProcReader::new();
    let pid = pids
        .iter()
        .copied()
        .find(|&p| r.cmdline(p).is_ok_and(|a| a.join(" ") == cmdline))?;
    r.stat(pid).ok().map(|s| s.id())
}

/// Running (not exited, not a zombie) with no signal waiting for it: nothing was sent to it (a
/// SIGTERM sent and not yet taken is pending until the process is gone).
fn untouched(id: ProcId) -> bool {
    let r = tact_linux::ProcReader::new();
    r.stat(id.pid)
        .is_ok_and(|s| s.id() == id && !s.is_dead() && !s.is_stopped())
        && r.signal_masks(id.pid)
            .is_ok_and(|m| m.thread_pending == 0 && m.shared_pending == 0)
}

/// SIGTERM ends every process of a command tact started, not only its shell (`; true` keeps sh
/// from exec'ing sleep), and never touches a process tact was given with `--pid`, nor its
/// children.
#[test]
fn sigterm_ends_the_started_commands_whole_tree_and_leaves_adopted_ones_running() {
    let limit = Duration::from_secs(60);
    /// The adopted shell, killed with its children whatever the test's outcome.
    struct Adopted(Child);
    impl Drop for Adopted {
        fn drop(&mut self) {
            kill_tree(self.0.id() as i32);
            let _ = self.0.wait();
        }
    }
    let adopted = Adopted(
        std::process::Command::new("sh")
            .args(["-c", "sleep 602; true"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let adopted_pid = adopted.0.id() as i32;
    let mut adopted_sleep = None;
    wait_for(limit, "the adopted shell's sleep", || {
        adopted_sleep = find_member(&tree(adopted_pid), "sleep 602");
        adopted_sleep.is_some()
    });
    let adopted_sh = tact_linux::ProcReader::new()
        .stat(adopted_pid)
        .unwrap()
        .id();

    let runtime = tempfile::tempdir().unwrap();
    let pid_arg = format!("1={adopted_pid}");
    let share = share_on_one_cpu(
        &[
            "--backend",
            "signals",
            "--job",
            "1=sleep 600; true",
            "--pid",
            &pid_arg,
        ],
        runtime.path(),
    );
    let mut e = Endless::spawn(share, runtime);
    let (mut sh, mut sleep) = (None, None);
    wait_for(limit, "the job's shell and its sleep", || {
        let members = e.members();
        sh = find_member(&members, "sh -c sleep 600; true");
        sleep = find_member(&members, "sleep 600");
        sh.is_some() && sleep.is_some()
    });
    kill(e.tact.id() as i32, Signal::SIGTERM);
    let status = e.tact.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    let r = tact_linux::ProcReader::new();
    let ended = |id: ProcId| !r.stat(id.pid).is_ok_and(|s| s.id() == id && !s.is_dead());
    wait_for(
        limit,
        "the started command's shell and sleep to end",
        || ended(sh.unwrap()) && ended(sleep.unwrap()),
    );
    assert!(untouched(adopted_sh), "the adopted shell was signalled");
    assert!(
        untouched(adopted_sleep.unwrap()),
        "the adopted shell's child was signalled"
    );
    drop(adopted);
}

/// A reader of tact's stderr that has gone (`tact share ... 2>&1 | head -1`) loses the table,
/// and the exit status is still the jobs' (the table's eprintln! panicked: 101).
#[test]
fn a_closed_stderr_loses_the_table_not_the_exit_status() {
    use std::io::BufRead;
    let runtime = tempfile::tempdir().unwrap();
    let mut c = tact();
    c.args(["share", "--backend", "signals", "--job", "1=sleep 0.5"])
        .env("TACT_RUNTIME_DIR", runtime.path())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("tact: backend signals"), "{first}");
    // The reader is dropped here, before the job ends and the table is written.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A `--pid` whose process descends from another `--pid` would be in two jobs (counted in
/// both, and a split neither can reach): refused before anything starts, in either order.
#[test]
fn a_pid_in_the_tree_of_another_given_pid_is_refused() {
    struct Tree(Child);
    impl Drop for Tree {
        fn drop(&mut self) {
            kill_tree(self.0.id() as i32);
            let _ = self.0.wait();
        }
    }
    let parent = Tree(
        std::process::Command::new("sh")
            .args(["-c", "sleep 604; true"])
            .spawn()
            .unwrap(),
    );
    let sh = parent.0.id() as i32;
    let mut child = None;
    wait_for(Duration::from_secs(60), "the shell's sleep", || {
        child = find_member(&tree(sh), "sleep 604");
        child.is_some()
    });
    let child = child.unwrap().pid;
    let runtime = tempfile::tempdir().unwrap();
    for (a, b) in [(sh, child), (child, sh)] {
        let (out, err) = run({
            let mut c = tact();
            c.args(["share", "--backend", "signals"])
                .args(["--pid", &format!("1={a}"), "--pid", &format!("1={b}")])
                .env("TACT_RUNTIME_DIR", runtime.path());
            c
        });
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert!(
            err.contains(&format!(
                "--pid 1={child}: process {child} descends from process {sh}"
            )),
            "{err}"
        );
    }
    drop(parent);
}

#[test]
fn bad_input_is_refused_with_the_argument_named() {
    let runtime = tempfile::tempdir().unwrap();
    let share = |args: &[&str]| {
        run({
            let mut c = tact();
            c.arg("share")
                .args(args)
                .env("TACT_RUNTIME_DIR", runtime.path());
            c
        })
    };
    let refuse = |args: &[&str], needle: &str| {
        let (out, err) = share(args);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    };
    refuse(
        &["--job", "0=true"],
        "--job \"0=true\": shares must be between 1 and",
    );
    refuse(&["--job", "-2=true"], "shares must be a positive integer");
    refuse(&["--job", "2.5=true"], "shares must be a positive integer");
    refuse(&["--job", "true"], "expected SHARES=COMMAND");
    refuse(&["--job", "1="], "the command after `=` is empty");
    refuse(&[], "nothing to share");
    refuse(&["--pid", "1=abc"], "not a process id");
    refuse(&["--pid", "1=1"], "--pid 1=1");
    refuse(&["--pid", "1=999999999"], "no such process");
    refuse(
        &["--backend", "cgroup", "--basic", "--job", "1=true"],
        "only apply to the signals backend",
    );
    // Outside the engine's range: refused by the parser with the bounds, as `--quantum 0` is.
    let (out, err) = share(&["--quantum", "1h", "--job", "1=true"]);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--quantum") && err.contains("outside 100us..60s"),
        "{err}"
    );
    // An option the chosen backend does not use is said to be unused.
    let (out, err) = share(&[
        "--backend",
        "signals",
        "--cgroup-parent",
        "/sys/fs/cgroup",
        "--job",
        "1=true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("--cgroup-parent is not used"), "{err}");
}

#[test]
fn adopted_pids_are_shared_and_left_running() {
    let runtime = tempfile::tempdir().unwrap();
    let spin = |secs: u32| {
        std::process::Command::new("taskset")
            .args(["-c", "1", "sh", "-c"])
            .arg(spinner(secs))
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spin(3), spin(3));
    let (pa, pb) = (format!("1={}", a.id()), format!("3={}", b.id()));
    let (out, err) = run(share_on_one_cpu(
        &["--backend", "signals", "--pid", &pa, "--pid", &pb],
        runtime.path(),
    ));
    assert_eq!(out.status.code(), Some(0), "{err}");
    let got = achieved(&err);
    assert!(got[1] > got[0] * 1.8, "{got:?}\n{err}");
    a.wait().unwrap();
    b.wait().unwrap();
}

/// Interrupted, the cgroup backend passes the signal on and removes its cgroups, also when the
/// jobs have children: tact's pass over the trees every second once took a child forked inside
/// a job's cgroup for one that came from there, so teardown put it back, could not remove the
/// directory, and failed (125) before the signal went on, leaving the commands running in it.
#[test]
fn the_cgroup_backend_interrupted_passes_the_signal_on_and_removes_its_cgroups() {
    let Some(rig) = CgroupRig::new("share-int") else {
        return;
    };
    let runtime = tempfile::tempdir().unwrap();
    let mut c = rig.tact_on_cpu1();
    c.args(["share", "--backend", "cgroup", "--cgroup-parent"])
        .arg(&rig.cpu.0)
        .args(["--job", "1=sleep 600; true", "--job", "3=sleep 601; true"])
        .env("TACT_RUNTIME_DIR", runtime.path());
    let mut e = Endless::spawn(c, runtime);
    let limit = Duration::from_secs(60);
    let mut sleeps = Vec::new();
    wait_for(limit, "both jobs' sleeps", || {
        let members = e.members();
        sleeps = ["sleep 600", "sleep 601"]
            .iter()
            .filter_map(|s| find_member(&members, s))
            .collect();
        sleeps.len() == 2
    });
    // Past a few of tact's passes over the trees (one a second).
    thread::sleep(Duration::from_millis(3500));
    kill(e.tact.id() as i32, Signal::SIGTERM);
    let status = e.tact.wait().unwrap();
    let mut err = String::new();
    e.tact
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{err}");
    let r = tact_linux::ProcReader::new();
    wait_for(limit, "the jobs' sleeps to end", || {
        sleeps
            .iter()
            .all(|id| !r.stat(id.pid).is_ok_and(|s| s.id() == *id && !s.is_dead()))
    });
    rig.assert_clean(&err);
}

#[test]
fn the_cgroup_backend_weighs_one_cpu_and_removes_its_cgroups() {
    let Some(rig) = CgroupRig::new("share") else {
        return;
    };
    let runtime = tempfile::tempdir().unwrap();
    let (a, b) = (format!("1={}", spinner(4)), format!("3={}", spinner(4)));
    let mut c = rig.tact_on_cpu1();
    c.args(["share", "--backend", "cgroup", "--cgroup-parent"])
        .arg(&rig.cpu.0)
        .args(["--job", &a, "--job", &b])
        .env("TACT_RUNTIME_DIR", runtime.path());
    let (out, err) = run(c);
    assert_eq!(out.status.code(), Some(1), "{err}"); // timeout's 124
    let backend = format!("backend cgroup ({})", rig.hier.version.weight_file());
    assert!(err.contains(&backend), "{err}");
    let got = achieved(&err);
    assert!(got[1] > got[0] * 1.8, "{got:?}\n{err}");
    rig.assert_clean(&err);
}
