//! `tact run --idle`: idletime scheduling of unmodified programs, on real processes, disks and
//! links. Every wait is generous and every assertion is about states and orderings: other
//! processes use the same disk, so the gate may hold the job at any time, but it must hold it
//! while our foreground runs and let it run again once the foreground is gone.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuHierarchy};
use tact_linux::ProcReader;

/// Writes 64 KiB blocks with O_DIRECT over the first 4 MiB of a file (no page cache, no growth,
/// no journal traffic per write) for `secs` seconds, sleeping `pause` between writes.
fn direct_writer(path: &Path, secs: f64, pause: f64) -> Vec<String> {
    let script = format!(
        "import mmap, os, time\n\
         fd = os.open({path:?}, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)\n\
         buf = mmap.mmap(-1, 65536); buf.write(b'x' * 65536)\n\
         end = time.monotonic() + {secs}; i = 0\n\
         while time.monotonic() < end:\n\
         \x20   os.pwrite(fd, buf, (i % 64) * 65536); i += 1\n\
         \x20   if {pause} > 0: time.sleep({pause})\n",
        path = path.display().to_string()
    );
    vec!["python3".into(), "-c".into(), script]
}

/// Sends 1400-byte UDP datagrams to a closed port on 127.0.0.1 as fast as it can for `secs`.
fn udp_sender(secs: f64) -> Vec<String> {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         end = time.monotonic() + {secs}\n\
         while time.monotonic() < end:\n\
         \x20   try: s.sendto(b'x' * 1400, ('127.0.0.1', 9))\n\
         \x20   except OSError: pass\n"
    );
    vec!["python3".into(), "-c".into(), script]
}

fn spawn(cmd: &[String]) -> Child {
    Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `tact run` with `args`, isolated crash records, and its JSON log in `dir`.
fn start_tact(dir: &Path, args: &[&str], cmd: &[String]) -> (Child, PathBuf) {
    start_tact_in(None, dir, args, cmd)
}

/// [`start_tact`], in the test's cgroups when given (where the idle cgroup of `--idle cpu` goes).
fn start_tact_in(
    cgroups: Option<&TestCgroups>,
    dir: &Path,
    args: &[&str],
    cmd: &[String],
) -> (Child, PathBuf) {
    let log = dir.join("idle.jsonl");
    let mut command = tact();
    if let Some(c) = cgroups {
        c.enter(&mut command);
    }
    let child = command
        .env("TACT_RUNTIME_DIR", dir.join("runtime"))
        // No daemon: the job runs on its own.
        .env("TACT_SOCKET", dir.join("no-daemon.sock"))
        .current_dir(dir)
        .arg("run")
        .args(args)
        .arg("--json-log")
        .arg(&log)
        .arg("--")
        .args(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, log)
}

/// `held` / `released` events of a log, as (t, kind), in order.
fn transitions(log: &Path) -> Vec<(f64, String)> {
    log_lines(log)
        .into_iter()
        .filter(|v| v["kind"] == "held" || v["kind"] == "released")
        .map(|v| {
            (
                v["t"].as_f64().unwrap(),
                v["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The root of the job tact runs: its child that is neither the guard nor one of the `tc` and
/// `nft` commands `--idle net` runs as root while it sets up and tears down its htb tree (and
/// reads its counters, once a second). A child between fork and exec still shows tact's command
/// line, and one that exited but is not reaped yet shows none: neither is the job.
fn job_of(tact_pid: i32) -> Option<i32> {
    let r = ProcReader::new();
    let tacts = r.cmdline(tact_pid).ok()?;
    r.children(tact_pid)
        .unwrap_or_default()
        .into_iter()
        .find(|&c| {
            r.cmdline(c)
                .map(|a| {
                    let tool = a.first().and_then(|p| p.rsplit('/').next());
                    !a.is_empty()
                        && a != tacts
                        && !a.iter().any(|x| x == "__guard")
                        && !matches!(tool, Some("tc" | "nft"))
                })
                .unwrap_or(false)
        })
}

fn stopped(pid: i32) -> bool {
    any_stopped(&[pid])
}

/// Bytes the job has written (`write_bytes` of /proc/PID/io).
fn written(pid: i32) -> u64 {
    ProcReader::new()
        .io(pid)
        .map(|io| io.write_bytes)
        .unwrap_or(0)
}

/// The tact run's start time on its log's clock.
fn log_now(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// Kills the job; tact exits with its status, leaves nothing stopped, and returns its stderr.
fn finish(mut tact: Child, job: i32) -> String {
    kill_tree(job);
    let status = tact.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGKILL));
    assert!(!any_stopped(&tree(job)));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut tact.stderr.take().unwrap(), &mut err).unwrap();
    err
}

/// `tact-test-*` cgroups, one in the cpu hierarchy and one in a separate v1 cpuacct hierarchy,
/// under the test's own: a tact started in them makes its idle cgroup there and nowhere else.
/// Removed on drop, once the processes in them are gone.
struct TestCgroups {
    /// The cpu hierarchy's directory first.
    dirs: Vec<PathBuf>,
    version: CgroupVersion,
    /// Made by the test, and removed on drop (not the v2 root of [`TestCgroups::for_idle_group`]).
    owned: bool,
}

impl TestCgroups {
    /// `Err`: why the test cannot make them (it is skipped then).
    fn new(what: &str) -> Result<TestCgroups, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("making cgroups needs root".into());
        }
        let hier = CpuHierarchy::detect().map_err(|e| format!("no cpu cgroup: {e}"))?;
        let name = format!("tact-test-{}-{what}", std::process::id());
        let mut bases = vec![hier.own_cgroup().map_err(|e| e.to_string())?];
        if let Some(acct) = hier.cpuacct.as_ref().filter(|_| !hier.comounted()) {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            let path = own
                .lines()
                .find_map(|l| {
                    // ID:CONTROLLERS:PATH
                    let mut parts = l.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers
                        .split(',')
                        .any(|c| c == "cpuacct")
                        .then_some(path)
                })
                .ok_or("no cpuacct line in /proc/self/cgroup")?;
            bases.push(
                acct.dir_of(path)
                    .ok_or("cpuacct cgroup outside its mount")?,
            );
        }
        let mut made = TestCgroups {
            dirs: Vec::new(),
            version: hier.version,
            owned: true,
        };
        for base in bases {
            let dir = base.join(&name);
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            made.dirs.push(dir);
        }
        Ok(made)
    }

    /// Where a tact started in them can make its idle group with `cpu.idle`, for the tests that
    /// check the group. On v1: new cgroups, as [`TestCgroups::new`]. On v2: the root cgroup, when
    /// the test runs there (a VM, tools/v2vm), left in place on drop: the kernel refuses the cpu
    /// controller below any other cgroup that holds a process, and tact is one in its own.
    fn for_idle_group(what: &str) -> Result<TestCgroups, String> {
        let hier = CpuHierarchy::detect().map_err(|e| format!("no cpu cgroup: {e}"))?;
        if hier.version == CgroupVersion::V1 {
            let made = TestCgroups::new(what)?;
            return match no_cpu_idle(hier.version, made.cpu()) {
                Some(why) => Err(why),
                None => Ok(made),
            };
        }
        if !nix::unistd::geteuid().is_root() {
            return Err("making cgroups needs root".into());
        }
        if let Some(why) = no_cpu_idle(hier.version, &hier.cpu.dir) {
            return Err(why);
        }
        let own = hier.own_cgroup().map_err(|e| e.to_string())?;
        if own != hier.cpu.dir {
            return Err(format!(
                "on cgroup v2 tact's idle group needs tact in the root cgroup (the kernel refuses \
                 the cpu controller below another cgroup that holds a process, tact itself); the \
                 test runs in {}",
                own.display()
            ));
        }
        // Only the real root may hold processes and give its children a controller: in a cgroup
        // namespace, the namespace's root cannot.
        let control = own.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&control).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == "cpu") {
            std::fs::write(&control, "+cpu")
                .map_err(|e| format!("cannot enable cpu in {}: {e}", control.display()))?;
            let _ = std::fs::write(&control, "-cpu");
        }
        Ok(TestCgroups {
            dirs: vec![own],
            version: hier.version,
            owned: false,
        })
    }

    fn cpu(&self) -> &Path {
        &self.dirs[0]
    }

    /// Makes `command`'s process move itself into the cgroups before it runs.
    fn enter(&self, command: &mut Command) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        let files: Vec<std::ffi::CString> = self
            .dirs
            .iter()
            .map(|d| std::ffi::CString::new(d.join("cgroup.procs").as_os_str().as_bytes()).unwrap())
            .collect();
        // SAFETY: open, write and close are async-signal-safe; the paths were made before fork.
        unsafe {
            command.pre_exec(move || {
                for f in &files {
                    let fd = libc::open(f.as_ptr(), libc::O_WRONLY);
                    // "0" is the writing process itself.
                    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(fd);
                }
                Ok(())
            });
        }
    }
}

impl Drop for TestCgroups {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        for dir in &self.dirs {
            // Processes that just exited may linger in the cgroup for a moment; a group tact
            // left behind (a failed test) goes first.
            let deadline = Instant::now() + Duration::from_secs(10);
            while dir.exists() && Instant::now() < deadline {
                for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    if sub.path().is_dir() {
                        let _ = std::fs::remove_dir(sub.path().join("job"));
                        let _ = std::fs::remove_dir(sub.path());
                    }
                }
                if std::fs::remove_dir(dir).is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// Why the kernel has no `cpu.idle`, if it has none: on v1 `dir`, a cgroup other than the root,
/// shows it; on v2 the file appears only once cpu is enabled for a child, so the kernel's
/// version says (5.15 added it).
fn no_cpu_idle(version: CgroupVersion, dir: &Path) -> Option<String> {
    if version == CgroupVersion::V1 {
        return (!dir.join("cpu.idle").exists())
            .then(|| "the kernel has no cpu.idle in the v1 cpu hierarchy".into());
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let numbers: Vec<u32> = (release.split(|c: char| !c.is_ascii_digit()).take(2))
        .filter_map(|n| n.parse().ok())
        .collect();
    (numbers.len() < 2 || (numbers[0], numbers[1]) < (5, 15))
        .then(|| format!("kernel {:?}: no cpu.idle before 5.15", release.trim()))
}

/// The directory of `pid`'s cgroup in the cpu hierarchy.
fn cpu_cgroup(pid: i32) -> PathBuf {
    CpuHierarchy::detect().unwrap().cgroup_of(pid).unwrap()
}

/// As root, the job runs in `tact-<PID>-idle` under tact's cgroup, with `cpu.idle = 1`, and at
/// the end the group is gone, in the cpu hierarchy and in a separate cpuacct one, and a child
/// that outlives the job is back in tact's cgroup.
#[test]
fn idle_cpu_puts_the_job_in_an_idle_cgroup_and_removes_it_after() {
    let cgroups = match TestCgroups::for_idle_group("idle-cgroup") {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    // A child that outlives the shell when it is terminated: it ignores the SIGTERM tact passes
    // on to the whole job (and does not hold tact's stderr open).
    let cmd: Vec<String> = [
        "sh",
        "-c",
        "(trap '' TERM; exec sleep 600) >/dev/null 2>&1 & wait",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (tact, log) = start_tact_in(Some(&cgroups), dir.path(), &["--idle", "cpu"], &cmd);
    let tact_pid = tact.id() as i32;
    // However the test ends, the processes are gone before the test's cgroups are removed.
    struct Reap {
        tact: Option<Child>,
        pids: Vec<i32>,
    }
    impl Drop for Reap {
        fn drop(&mut self) {
            for &pid in &self.pids {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
            if let Some(mut tact) = self.tact.take() {
                // It exits once its job has; a tact that does not is killed.
                let deadline = Instant::now() + Duration::from_secs(20);
                while tact.try_wait().unwrap().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = tact.kill();
                let _ = tact.wait();
            }
        }
    }
    let mut reap = Reap {
        tact: Some(tact),
        pids: Vec::new(),
    };
    let job = wait_for_some(Duration::from_secs(30), "the job and its child", || {
        job_of(tact_pid).filter(|&j| children_matching(j, "sleep 600").len() == 1)
    });
    let child = children_matching(job, "sleep 600")[0];
    reap.pids = vec![child, job];
    // The subshell ignores SIGTERM once it runs sleep: it sets the trap, then execs.
    wait_for(Duration::from_secs(30), "the child to run sleep", || {
        ProcReader::new()
            .cmdline(child)
            .is_ok_and(|a| a == ["sleep", "600"])
    });
    let idle = cgroups.cpu().join(format!("tact-{tact_pid}-idle"));
    // The job joins the group as it starts, and forks its child there.
    wait_for(
        Duration::from_secs(30),
        "the job in the idle cgroup",
        || cpu_cgroup(job).starts_with(&idle) && cpu_cgroup(child).starts_with(&idle),
    );
    let flag = std::fs::read_to_string(idle.join("cpu.idle")).unwrap();
    assert_eq!(flag.trim(), "1");
    // The job is in the group from its start; tact sets SCHED_IDLE once it has attached.
    wait_for(Duration::from_secs(30), "the log's start", || {
        !log_lines(&log).is_empty()
    });
    assert_eq!(nix_policy(job), libc::SCHED_IDLE, "SCHED_IDLE as well");
    assert_eq!(log_lines(&log)[0]["cpu_idle"], "cgroup");

    // SIGTERM: tact takes the group down before it passes the signal on.
    kill(tact_pid, Signal::SIGTERM);
    let mut tact = reap.tact.take().unwrap();
    let status = tact.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    reap.pids.retain(|&p| p != job); // gone with tact's wait
    let mut err = String::new();
    std::io::Read::read_to_string(&mut tact.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("with cpu.idle = 1"), "{err}");
    assert!(err.contains("cpu: cgroup cpu.idle and SCHED_IDLE"), "{err}");
    for d in &cgroups.dirs {
        let gone = d.join(format!("tact-{tact_pid}-idle"));
        assert!(!gone.exists(), "{} is left", gone.display());
    }
    assert!(ProcReader::new().stat(child).is_ok(), "the child lives on");
    assert_eq!(
        cpu_cgroup(child),
        cgroups.cpu(),
        "moved back to tact's cgroup: {err}"
    );
}

#[test]
fn idle_cpu_puts_every_thread_and_later_children_in_sched_idle() {
    let dir = tempfile::tempdir().unwrap();
    // The child is forked a second after tact set the policy: it must inherit it.
    let cmd: Vec<String> = ["sh", "-c", "sleep 1; sleep 60 & wait"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // As root, tact also makes an idle cgroup under its own: in the test's cgroups then.
    let cgroups = TestCgroups::new("sched-idle").ok();
    let (tact, log) = start_tact_in(cgroups.as_ref(), dir.path(), &["--idle", "cpu"], &cmd);
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    wait_for(Duration::from_secs(30), "the later child", || {
        children_matching(job, "sleep 60").len() == 1
    });
    let child = children_matching(job, "sleep 60")[0];
    for pid in [job, child] {
        let policy = nix_policy(pid);
        assert_eq!(
            policy,
            libc::SCHED_IDLE,
            "process {pid} has policy {policy}"
        );
    }
    let start = &log_lines(&log)[0];
    assert_eq!(start["kind"], "start");
    assert_eq!(start["cpu"], true);
    let err = finish(tact, job);
    assert!(err.contains("SCHED_IDLE"), "{err}");
}

fn nix_policy(pid: i32) -> i32 {
    // SAFETY: sched_getscheduler only reads.
    unsafe { libc::sched_getscheduler(pid) }
}

#[test]
fn idle_disk_holds_the_job_while_the_foreground_writes_and_releases_it_after() {
    let dir = tempfile::tempdir().unwrap();
    let bg = direct_writer(&dir.path().join("bg.dat"), 600.0, 0.002);
    let started = Instant::now();
    let (tact, log) = start_tact(dir.path(), &["--idle", "disk:/", "--preempt", "20ms"], &bg);
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    // The foreground: 3 s of O_DIRECT writes to the same disk, without pauses.
    let fg_began = log_now(started);
    let mut fg = spawn(&direct_writer(&dir.path().join("fg.dat"), 3.0, 0.0));
    let (held_samples, _) = stopped_samples(job, &mut fg, Instant::now(), Duration::from_secs(120));
    let fg_ended = log_now(started);
    assert!(
        held_samples > 0,
        "the job never stopped while the foreground wrote"
    );
    let held_during_fg = transitions(&log)
        .iter()
        .any(|(t, k)| k == "held" && *t >= fg_began - 0.5 && *t <= fg_ended + 0.5);
    assert!(
        held_during_fg,
        "no hold in the log during the foreground: {:?}",
        transitions(&log)
    );
    // Once the foreground is gone the job runs again and writes.
    let before = written(job);
    wait_for(Duration::from_secs(60), "the job to write again", || {
        !stopped(job) && written(job) > before + (1 << 20)
    });
    assert!(transitions(&log)
        .iter()
        .any(|(t, k)| k == "released" && *t >= fg_ended - 0.5));
    let err = finish(tact, job);
    assert!(
        err.contains("preemption interval 20ms (--preempt)"),
        "{err}"
    );
    assert!(err.contains("held"), "{err}");
    let summary = log_lines(&log).pop().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert!(summary["holds"].as_u64().unwrap() >= 1);
    assert!(summary["gates"][0]["resource"]
        .as_str()
        .unwrap()
        .starts_with("disk:"));
    assert!(summary["gates"][0]["fg_bytes"].as_u64().unwrap() > 1 << 20);
}

#[test]
fn idle_net_holds_the_job_while_foreground_traffic_flows_on_lo() {
    let dir = tempfile::tempdir().unwrap();
    let (tact, log) = start_tact(
        dir.path(),
        &["--idle", "net:lo", "--preempt", "50ms"],
        &["sleep".to_string(), "600".to_string()],
    );
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    let mut fg = spawn(&udp_sender(3.0));
    let (held_samples, _) = stopped_samples(job, &mut fg, Instant::now(), Duration::from_secs(120));
    assert!(
        held_samples > 0,
        "the job never stopped while traffic flowed"
    );
    wait_for(Duration::from_secs(60), "the job to run again", || {
        !stopped(job)
    });
    let t = transitions(&log);
    let first_hold = t.iter().position(|(_, k)| k == "held").expect("a hold");
    assert!(
        t[first_hold..].iter().any(|(_, k)| k == "released"),
        "{t:?}"
    );
    let held = log_lines(&log)
        .into_iter()
        .find(|v| v["kind"] == "held")
        .unwrap();
    assert_eq!(held["by"][0]["resource"], "net:lo");
    assert!(held["by"][0]["fg_bytes"].as_u64().unwrap() > 4096);
    finish(tact, job);
}

/// Two network namespaces joined by a veth pair, deleted (with the pair) on drop.
struct NetnsPair {
    /// Where tact runs, and the end of the pair it watches.
    outer: String,
    outer_if: String,
    /// Where the job moves to.
    inner: String,
}

impl NetnsPair {
    fn new() -> NetnsPair {
        let id = std::process::id();
        let pair = NetnsPair {
            outer: format!("tact-test-idle-out-{id}"),
            outer_if: format!("tto{id}"),
            inner: format!("tact-test-idle-in-{id}"),
        };
        let inner_if = format!("tti{id}");
        ip(&["netns", "add", &pair.outer]);
        ip(&["netns", "add", &pair.inner]);
        let (o, i) = (&pair.outer, &pair.inner);
        ip(&[
            "-n",
            o,
            "link",
            "add",
            &pair.outer_if,
            "type",
            "veth",
            "peer",
            "name",
        ]
        .into_iter()
        .chain([inner_if.as_str(), "netns", i])
        .collect::<Vec<_>>());
        ip(&[
            "-n",
            o,
            "addr",
            "add",
            "10.99.0.1/24",
            "dev",
            &pair.outer_if,
        ]);
        ip(&["-n", i, "addr", "add", "10.99.0.2/24", "dev", &inner_if]);
        ip(&["-n", o, "link", "set", &pair.outer_if, "up"]);
        ip(&["-n", i, "link", "set", &inner_if, "up"]);
        pair
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.outer, &self.inner] {
            Command::new("ip").args(["netns", "del", ns]).output().ok();
        }
    }
}

#[test]
fn a_job_that_moves_to_its_own_namespace_after_it_starts_is_not_its_own_foreground() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: creating network namespaces needs root");
        return;
    }
    let pair = NetnsPair::new();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("idle.jsonl");
    // The job floods the veth toward tact's namespace, but only after `ip netns exec` has moved
    // it: tact sees it in its own namespace at the start. Its traffic is all there is on the
    // watched interface, so every hold would be the job holding itself.
    let sender = "import socket, time\n\
                  s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                  end = time.monotonic() + 600\n\
                  while time.monotonic() < end:\n\
                  \x20   try: s.sendto(b'x' * 1400, ('10.99.0.1', 9))\n\
                  \x20   except OSError: pass\n";
    let job = format!(
        "sleep 0.3; exec ip netns exec {} python3 -c \"{sender}\"",
        pair.inner
    );
    let tact = Command::new("ip")
        .args(["netns", "exec", &pair.outer])
        .arg(env!("CARGO_BIN_EXE_tact"))
        .env_remove("TACT_LOG")
        .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
        .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
        .current_dir(dir.path())
        .args(["run", "--idle"])
        .arg(format!("net:{}", pair.outer_if))
        .args(["--preempt", "50ms", "--json-log"])
        .arg(&log)
        .args(["--", "sh", "-c", &job])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ip netns exec` execs tact in place.
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    wait_for(Duration::from_secs(60), "tact to notice the move", || {
        log_lines(&log).iter().any(|v| v["kind"] == "netns")
    });
    let moved = log_lines(&log)
        .into_iter()
        .find(|v| v["kind"] == "netns")
        .unwrap();
    assert_eq!(moved["own"], true, "{moved}");
    // Three seconds of the job's flood, all of it on the watched interface.
    let sent = |pid| {
        std::fs::read_to_string(format!("/proc/{pid}/net/dev"))
            .unwrap_or_default()
            .contains("tti")
    };
    wait_for(
        Duration::from_secs(60),
        "the job to run in its namespace",
        || sent(job),
    );
    std::thread::sleep(Duration::from_secs(3));
    let held: Vec<_> = transitions(&log)
        .into_iter()
        .filter(|(_, k)| k == "held")
        .collect();
    assert!(held.is_empty(), "the job held itself: {held:?}");
    let counters = log_lines(&log)
        .into_iter()
        .rev()
        .find(|v| v["kind"] == "counters")
        .expect("a counters line");
    // Stray frames of the pair's own (IPv6 neighbour discovery) may count; the flood may not.
    let fg = counters["gates"][0]["fg_bytes"].as_u64().unwrap();
    assert!(fg < 64 << 10, "{counters}");
    let err = finish(tact, job);
    assert!(
        err.contains("moved to a network namespace of its own"),
        "{err}"
    );
}

#[test]
fn sigkill_of_tact_while_the_job_is_held_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    // A PI of a minute: once held, the job stays held until tact is gone.
    let (mut tact, _log) = start_tact(
        dir.path(),
        &["--idle", "net:lo", "--preempt", "60s"],
        &["sleep".to_string(), "600".to_string()],
    );
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    let mut fg = spawn(&udp_sender(2.0));
    wait_for(Duration::from_secs(60), "the job to be held", || {
        stopped(job)
    });
    fg.wait().unwrap();
    assert!(stopped(job), "released within the 60 s PI");
    kill(tact_pid, Signal::SIGKILL);
    tact.wait().unwrap();
    wait_for(
        Duration::from_secs(20),
        "the guard to resume the job",
        || !stopped(job),
    );
    kill_tree(job);
}

/// `--preempt 0` probes as often as the shortest PI does: a plain priority queue resumes the job
/// at the first quiet probe, so a longer δ is a longer effective PI. Until 26 Nov p = 0 probed
/// every 10 ms, and on bench/idle's network at i = 0.8 the job got 16–55% of the idle capacity
/// where p = 1 ms gave it 100% (docs/idle.md, "p = 0 on tact's htb tree").
#[test]
fn a_zero_pi_probes_as_often_as_the_shortest_pi() {
    for pi in ["0ms", "1ms"] {
        let dir = tempfile::tempdir().unwrap();
        let job = ["sleep".to_string(), "1".to_string()];
        let (tact, log) = start_tact(dir.path(), &["--idle", "net:lo", "--preempt", pi], &job);
        let out = tact.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{pi}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let start = log_lines(&log)
            .into_iter()
            .find(|v| v["kind"] == "start")
            .expect("a start line");
        assert_eq!(start["probe"].as_f64(), Some(0.001), "{pi}: {start}");
    }
}

#[test]
fn a_zero_pi_is_accepted_and_bad_input_gets_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let run_cmd = |args: &[&str], cmd: &[&str]| {
        tact()
            .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
            .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
            .arg("run")
            .args(args)
            .arg("--")
            .args(cmd)
            .output()
            .unwrap()
    };
    let run = |args: &[&str]| run_cmd(args, &["true"]);
    // A command that outlives tact's setup: one that exits before tact attaches needs no gate,
    // and tact says nothing about one.
    let ok = run_cmd(&["--idle", "disk:/", "--preempt", "0ms"], &["sleep", "2"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stderr).contains("priority queue"));
    for (args, needle) in [
        (&["--idle", "gpu"][..], "unknown resource `gpu`"),
        (
            &["--idle", "disk:nosuchdisk"][..],
            "unknown block device `nosuchdisk`",
        ),
        // A mistyped path is not taken for the disk of `/`.
        (
            &["--idle", "disk:/nonexistent/tact-typo"][..],
            "--idle disk:/nonexistent/tact-typo: unknown block device `/nonexistent/tact-typo` \
             (no such file or directory",
        ),
        (
            &["--idle", "net:nosuch0"][..],
            "unknown network interface `nosuch0`",
        ),
        (&["--idle", "cpu,cpu"][..], "--idle names cpu twice"),
        (
            &["--idle", "disk", "--preempt", "-5ms"][..],
            "cannot be negative",
        ),
        (
            &["--idle", "disk", "--preempt", "soon"][..],
            "`soon` is not a duration",
        ),
        (&["--preempt", "5ms"][..], "--idle"),
        // Options of the progress regulator, which an idle job would silently not use.
        (
            &["--idle", "cpu", "--testpoint", "1s"][..],
            "cannot be used with '--testpoint <DUR>'",
        ),
        (
            &["--idle", "cpu", "--max-suspend", "5s"][..],
            "cannot be used with '--max-suspend <DUR>'",
        ),
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        // One line says what is wrong (clap adds a usage hint after it).
        let first = err.lines().next().unwrap();
        assert!(
            first.starts_with("tact: ") || first.starts_with("error: "),
            "{args:?}: {err}"
        );
    }
}

/// What `tact run --idle cpu -- cat /proc/self/cgroup -` showed: the job's first act is to print
/// its cgroups; it then copies stdin, which the test holds open until tact has set the job up.
struct FirstLook {
    tact_pid: i32,
    status: std::process::ExitStatus,
    /// The job's output: `/proc/self/cgroup` as it was when it started.
    cgroups: String,
    stderr: String,
    start: serde_json::Value,
}

/// Runs that job with tact in `cgroups` (else the test's own), as user nobody when
/// `unprivileged`, with `--cgroup-parent parent` when given.
fn first_look(
    cgroups: Option<&TestCgroups>,
    dir: &Path,
    unprivileged: bool,
    parent: Option<&Path>,
) -> FirstLook {
    use std::os::unix::process::CommandExt;
    let log = dir.join("idle.jsonl");
    let mut command = tact();
    if let Some(cgroups) = cgroups {
        cgroups.enter(&mut command);
    }
    if unprivileged {
        // Readable and writable by nobody: the log, the runtime dir and the job's directory.
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        // SAFETY: setgroups, setgid and setuid are async-signal-safe system calls.
        unsafe {
            command.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut tact = command
        .env("TACT_RUNTIME_DIR", dir.join("runtime"))
        .env("TACT_SOCKET", dir.join("no-daemon.sock"))
        .current_dir(dir)
        .args(["run", "--idle", "cpu", "--json-log"])
        .arg(&log)
        .args(
            parent
                .iter()
                .flat_map(|p| [Path::new("--cgroup-parent"), p]),
        )
        .args(["--", "cat", "/proc/self/cgroup", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tact_pid = tact.id() as i32;
    wait_for(Duration::from_secs(60), "tact to set the job up", || {
        !log_lines(&log).is_empty() || tact.try_wait().unwrap().is_some()
    });
    drop(tact.stdin.take()); // the job's end of input: it exits, and tact with it
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = tact.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = tact.kill();
            panic!("tact did not exit after its job's input closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |pipe: &mut dyn std::io::Read| {
        let mut text = String::new();
        pipe.read_to_string(&mut text).unwrap();
        text
    };
    FirstLook {
        tact_pid,
        status,
        cgroups: read(tact.stdout.as_mut().unwrap()),
        stderr: read(tact.stderr.as_mut().unwrap()),
        start: log_lines(&log).first().cloned().unwrap_or_default(),
    }
}

/// The directory a `/proc/PID/cgroup` text names in the cpu hierarchy (`acct`: the cpuacct one).
fn dir_in(text: &str, hier: &CpuHierarchy, acct: bool) -> PathBuf {
    let (controller, mount) = match (acct, &hier.cpuacct) {
        (true, Some(m)) => ("cpuacct", m),
        _ => ("cpu", &hier.cpu),
    };
    let path = text
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = match hier.version {
                CgroupVersion::V2 => id == "0" && controllers.is_empty(),
                CgroupVersion::V1 => controllers.split(',').any(|c| c == controller),
            };
            wanted.then_some(path)
        })
        .unwrap_or_else(|| panic!("no {controller} line in {text:?}"));
    mount.dir_of(path).unwrap()
}

/// The cgroups test of issue 5: the job's first process is in `tact-<PID>-idle/job` when it
/// execs (it prints `/proc/self/cgroup` as its first act), in the cpu hierarchy and in a
/// separate cpuacct one, and the group is gone at the end.
#[test]
fn idle_cpu_job_is_in_its_idle_cgroup_from_its_first_instruction() {
    let cgroups = match TestCgroups::for_idle_group("first-look") {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let look = first_look(Some(&cgroups), dir.path(), false, None);
    assert!(look.status.success(), "{:?}: {}", look.status, look.stderr);
    let idle = format!("tact-{}-idle", look.tact_pid);
    let hier = CpuHierarchy::detect().unwrap();
    assert_eq!(
        dir_in(&look.cgroups, &hier, false),
        cgroups.cpu().join(&idle).join("job"),
        "{}",
        look.cgroups
    );
    if let Some(test_acct) = cgroups.dirs.get(1) {
        assert_eq!(
            dir_in(&look.cgroups, &hier, true),
            test_acct.join(&idle).join("job"),
            "{}",
            look.cgroups
        );
    }
    assert_eq!(look.start["cpu_idle"], "cgroup", "{}", look.stderr);
    assert!(
        look.stderr.contains("from its first instruction"),
        "{}",
        look.stderr
    );
    for d in &cgroups.dirs {
        assert!(
            !d.join(&idle).exists(),
            "{} is left",
            d.join(&idle).display()
        );
    }
}

/// `--cgroup-parent DIR`: the idle group is DIR's child wherever tact runs (DIR at the
/// hierarchy's root makes it idle against everything there, not only tact's neighbours; on
/// cgroup v2 a tact in a session's scope has no group otherwise), and it is gone at the end. A
/// DIR that is not a cgroup of the cpu hierarchy stops the run with the reason and nothing made
/// in it (125); the option without `--idle cpu` is a usage error (2).
#[test]
fn idle_cpu_makes_its_group_under_a_cgroup_parent() {
    let refused = |code: i32, args: &[&str]| {
        let out = tact().args(args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let plain = tempfile::tempdir().unwrap();
    let plain_dir = plain.path().to_str().unwrap();
    let err = refused(
        125,
        &[
            "run",
            "--idle",
            "cpu",
            "--cgroup-parent",
            plain_dir,
            "--",
            "true",
        ],
    );
    assert!(err.contains("no idle group there"), "{err}");
    assert_eq!(std::fs::read_dir(plain.path()).unwrap().count(), 0);
    let err = refused(
        2,
        &[
            "run",
            "--idle",
            "net:lo",
            "--cgroup-parent",
            plain_dir,
            "--",
            "true",
        ],
    );
    assert!(err.contains("applies to --idle cpu"), "{err}");

    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped (the group itself): making cgroups needs root");
        return;
    }
    let hier = CpuHierarchy::detect().unwrap();
    let parent = hier
        .cpu
        .dir
        .join(format!("tact-test-{}-parent", std::process::id()));
    std::fs::create_dir(&parent).unwrap();
    let made = TestCgroups {
        dirs: vec![parent.clone()],
        version: hier.version,
        owned: true,
    };
    if let Some(why) = no_cpu_idle(hier.version, &parent) {
        eprintln!("skipped (the group itself): {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let look = first_look(None, dir.path(), false, Some(&parent));
    assert!(look.status.success(), "{:?}: {}", look.status, look.stderr);
    let idle = format!("tact-{}-idle", look.tact_pid);
    assert_eq!(
        dir_in(&look.cgroups, &hier, false),
        parent.join(&idle).join("job"),
        "{}",
        look.cgroups
    );
    assert_eq!(look.start["cpu_idle"], "cgroup", "{}", look.stderr);
    assert!(!parent.join(&idle).exists(), "the group is left");
    drop(made);
    assert!(!parent.exists(), "the test's parent is left");
}

/// Where tact may not make the idle cgroup (here: it runs as nobody), the job starts all the
/// same, in tact's own cgroup, with SCHED_IDLE alone, and tact says why.
#[test]
fn idle_cpu_without_a_cgroup_falls_back_to_sched_idle_and_says_why() {
    let cgroups = match TestCgroups::new("fallback") {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let look = first_look(Some(&cgroups), dir.path(), true, None);
    assert!(look.status.success(), "{:?}: {}", look.status, look.stderr);
    let hier = CpuHierarchy::detect().unwrap();
    assert_eq!(
        dir_in(&look.cgroups, &hier, false),
        cgroups.cpu(),
        "{}",
        look.cgroups
    );
    assert_eq!(look.start["cpu_idle"], "sched_idle", "{}", look.stderr);
    assert!(
        look.stderr
            .contains("SCHED_IDLE for every thread only; cgroup cpu.idle not used: "),
        "{}",
        look.stderr
    );
    if hier.version == CgroupVersion::V1 {
        // The group's directory, under a cgroup only root may write.
        assert!(look.stderr.contains("Permission denied"), "{}", look.stderr);
    }
    assert!(!cgroups
        .cpu()
        .join(format!("tact-{}-idle", look.tact_pid))
        .exists());
}

/// A job that cannot join its idle cgroup is not started: tact fails (status 125) and names the
/// file, and removes the group. Here the join fails as the kernel refuses it for a realtime
/// process: with RT group scheduling, a new v1 cpu cgroup has no realtime runtime, so tact runs
/// SCHED_RR (in the test's cgroup, given some) and its child, still SCHED_RR between fork and
/// exec, is refused.
#[test]
fn a_job_that_cannot_join_its_idle_cgroup_is_not_started() {
    use std::os::unix::process::CommandExt;
    let cgroups = match TestCgroups::new("no-join") {
        Ok(c)
            if c.version == CgroupVersion::V1
                && c.cpu().join("cpu.idle").exists()
                && c.cpu().join("cpu.rt_runtime_us").exists() =>
        {
            c
        }
        Ok(_) => {
            eprintln!("skipped: needs cgroup v1 with cpu.idle and RT group scheduling");
            return;
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // 10 ms a second: the kernel lets realtime tasks into a group only with a runtime.
    std::fs::write(cgroups.cpu().join("cpu.rt_runtime_us"), "10000").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let mut command = tact();
    cgroups.enter(&mut command);
    // SAFETY: sched_setscheduler is an async-signal-safe system call.
    unsafe {
        command.pre_exec(|| {
            let param = libc::sched_param { sched_priority: 1 };
            if libc::sched_setscheduler(0, libc::SCHED_RR, &param) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command
        .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
        .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
        .current_dir(dir.path())
        .args(["run", "--idle", "cpu", "--", "touch"])
        .arg(&ran)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("the job could not join its idle cgroup, so it was not started")
            && err.contains("-idle/job/cgroup.procs")
            && err.contains("Invalid argument"),
        "{err}"
    );
    assert!(!ran.exists(), "the job ran");
    let left: Vec<_> = std::fs::read_dir(cgroups.cpu())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// An ext2 file system on a loop device over a file the test creates, mounted in the test's
/// directory: a disk no one else uses. Unmounted and detached on drop.
struct LoopDisk {
    dev: String,
    mnt: PathBuf,
}

impl LoopDisk {
    /// None, saying why, when the test cannot make one (not root, no losetup or mkfs.ext2).
    fn new(dir: &Path) -> Option<LoopDisk> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: a loop device needs root");
            return None;
        }
        let image = dir.join("disk.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output();
        let dev = match out {
            Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_string(),
            other => {
                eprintln!("skipped: no loop device: {other:?}");
                return None;
            }
        };
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let disk = LoopDisk { dev, mnt };
        for cmd in [
            vec!["mkfs.ext2", "-q", disk.dev.as_str()],
            vec!["mount", disk.dev.as_str(), disk.mnt.to_str().unwrap()],
        ] {
            let out = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap();
            assert!(out.status.success(), "{cmd:?}: {out:?}");
        }
        Some(disk)
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        Command::new("umount").arg(&self.mnt).output().ok();
        Command::new("losetup")
            .args(["-d", &self.dev])
            .output()
            .ok();
    }
}

/// A job that writes 30 MiB to a file on the gated disk and deletes it before writeback: the
/// kernel cancels those pages (`/proc/PID/io`: write_bytes 31461376, cancelled_write_bytes
/// 31457280 in the audit's run), so they never reach the disk. Counted as the job's, they sat
/// in the 35 s writeback ledger and hid the foreground's I/O (the first hold came 2.8 s late in
/// the audit's run); here a foreground of 64 KiB every 50 ms (30 MiB would take it 23 s) is
/// seen at once.
#[test]
fn written_bytes_the_job_deleted_before_writeback_do_not_hide_the_foreground() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = LoopDisk::new(dir.path()) else {
        return;
    };
    let marker = dir.path().join("deleted");
    let junk = disk.mnt.join("junk");
    let job = vec![
        "python3".to_string(),
        "-c".into(),
        format!(
            "import os, time\n\
             with open({junk:?}, 'wb') as f:\n\
             \x20   for _ in range(30): f.write(b'x' * (1 << 20))\n\
             os.remove({junk:?})\n\
             open({marker:?}, 'w').close()\n\
             time.sleep(600)\n",
            junk = junk.display().to_string(),
            marker = marker.display().to_string()
        ),
    ];
    let disk_arg = format!("disk:{}", disk.mnt.display());
    let (tact, log) = start_tact(
        dir.path(),
        &["--idle", &disk_arg, "--preempt", "20ms"],
        &job,
    );
    let tact_pid = tact.id() as i32;
    let job = wait_for_some(Duration::from_secs(30), "the job to start", || {
        job_of(tact_pid)
    });
    wait_for(
        Duration::from_secs(60),
        "the job to write and delete",
        || marker.exists(),
    );
    let io = ProcReader::new().io(job).unwrap();
    assert!(
        io.cancelled_write_bytes >= 30 << 20,
        "the kernel cancelled the job's writes: {io:?}"
    );
    // The job was not held by its own writes, which never reached the disk.
    assert!(!stopped(job));
    let fg_file = disk.mnt.join("fg.dat");
    let mut fg = spawn(&direct_writer(&fg_file, 20.0, 0.05));
    wait_for(Duration::from_secs(60), "the foreground to start", || {
        fg_file.exists()
    });
    let took = wait_for(Duration::from_secs(60), "a hold", || stopped(job));
    let _ = fg.kill();
    let _ = fg.wait();
    eprintln!(
        "held {took:?} after the foreground began: {:?}",
        transitions(&log)
    );
    // Measured: at once. The old count held it only once the foreground had written the
    // deleted 30 MiB over, 23 s in.
    assert!(
        took < Duration::from_secs(8),
        "held {took:?} after the foreground began"
    );
    finish(tact, job);
}

/// Options that do not go together exit 2, as clap's own refusals do (README: "2 when tact's
/// own command line is wrong ... the command never started"), not 125 (tact failed), with one
/// line that says what is wrong; the command never runs.
#[test]
fn options_that_do_not_go_together_exit_2_and_the_command_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let touch = ["touch".to_string(), ran.display().to_string()];
    for (args, needle) in [
        (
            &["--idle", "cpu", "--preempt", "5ms"][..],
            "--preempt applies to disk and net only",
        ),
        (&["--idle", "cpu,cpu"][..], "--idle names cpu twice"),
        (
            &["--idle", "disk:/", "--net-rate", "5mbit"][..],
            "apply to --idle net only",
        ),
        (
            &["--idle", "disk:/", "--net-leave-tbf"][..],
            "apply to --idle net only",
        ),
        (
            &["--idle", "disk:/", "--cgroup-parent", "/tmp"][..],
            "--cgroup-parent applies to --idle cpu",
        ),
        (&["--idle", "disk:/,disk:/"][..], "twice"),
    ] {
        let out = tact()
            .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
            .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
            .arg("run")
            .args(args)
            .arg("--")
            .args(&touch)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!ran.exists(), "{args:?}: the command ran");
    }
    // `tact attach` refuses the idle group, and leaves the process alone.
    let sleeper = Sleeper(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    let out = tact()
        .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
        .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
        .args(["attach", "--idle", "cpu", "--cgroup-parent", "/tmp", &pid])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tact attach leaves the process in its own cgroup"),
        "{err}"
    );
    assert_eq!(nix_policy(sleeper.0.id() as i32), libc::SCHED_OTHER);
}

/// Messages that say what is true: a directory under /dev is a path like any other (`/dev/shm`
/// is a tmpfs, which has no disk: not "not a block special file"); a device given with a
/// trailing `/` is said to be no directory once (it read "Not a directory (os error 20): Not a
/// directory (os error 20)"); and `tact attach` on a process someone else stopped leaves it
/// stopped and says so on SIGTERM (it said "process N is running").
#[test]
fn idle_messages_say_what_is_true() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        tact()
            .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
            .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
            .arg("run")
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap()
    };
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let out = run(&["--idle", "disk:/dev/shm"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            !err.contains("block special") && err.contains("no block device"),
            "{err}"
        );
    }
    let disk = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| format!("/dev/{}", e.file_name().to_string_lossy()))
        .find(|d| Path::new(d).exists());
    if let Some(disk) = disk {
        let out = run(&["--idle", &format!("disk:{disk}/")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert_eq!(
            err.to_lowercase().matches("not a directory").count(),
            1,
            "{err}"
        );
    }
    // A process the user stopped, attached with --idle cpu, then tact gets SIGTERM.
    let sleeper = Sleeper(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = sleeper.0.id() as i32;
    kill(pid, Signal::SIGSTOP);
    wait_for(Duration::from_secs(10), "the process to stop", || {
        stopped(pid)
    });
    let mut attach = tact()
        .env("TACT_RUNTIME_DIR", dir.path().join("runtime"))
        .env("TACT_SOCKET", dir.path().join("no-daemon.sock"))
        .args(["attach", "--idle", "cpu", &pid.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(30), "SCHED_IDLE on the process", || {
        nix_policy(pid) == libc::SCHED_IDLE
    });
    kill(attach.id() as i32, Signal::SIGTERM);
    let status = attach.wait().unwrap();
    let err = stderr_of(&mut attach);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(stopped(pid), "tact continued a stop it did not make");
    assert!(
        err.contains(&format!("process {pid} is stopped")) && !err.contains("is running"),
        "{err}"
    );
    drop(sleeper);
}

/// A process the test started, continued and killed on drop (a failed assertion must not leave
/// it stopped, holding the harness's pipes).
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        kill(self.0.id() as i32, Signal::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
