//! Helpers shared by the binary's integration tests.
#![allow(dead_code)] // each test file uses its own subset

pub mod pty;
pub mod started;
pub mod veth;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tact_linux::ProcReader;

/// Options that make tact judge within a second: 100 ms testpoints, a 5-testpoint bootstrap,
/// no probation.
pub const FAST_REGULATION: [&str; 6] = [
    "--testpoint",
    "100ms",
    "--bootstrap",
    "5",
    "--probation",
    "0",
];

pub fn tact() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tact"));
    // Keep tests' calibrated targets and crash records out of the user's directories.
    c.env_remove("TACT_LOG");
    c
}

/// `tact tune ARGS` run to its end in `dir`, which is its runtime directory too.
pub fn tune_output(dir: &Path, args: &[&str]) -> Output {
    tact()
        .env("TACT_RUNTIME_DIR", dir)
        .current_dir(dir)
        .arg("tune")
        .args(args)
        .output()
        .unwrap()
}

/// What a finished tact wrote on stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns the time it took.
pub fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// The records of a `--json-log` file so far (none before it exists; a line still being
/// written is skipped).
pub fn log_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every record of a finished `--json-log` file; each line must be one.
pub fn json_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The records of `log` of one `kind`.
pub fn of_kind<'a>(log: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    log.iter().filter(|l| l["kind"] == kind).collect()
}

/// All of a child's piped stderr, read to its end (the child has exited or closed it).
pub fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    err
}

/// Samples `pid` every 10 ms while `fg` runs: (samples that found it stopped, samples). Fails
/// when `fg` still runs `limit` after `since`.
pub fn stopped_samples(pid: i32, fg: &mut Child, since: Instant, limit: Duration) -> (u32, u32) {
    let (mut stopped, mut samples) = (0, 0);
    while fg.try_wait().unwrap().is_none() {
        assert!(since.elapsed() < limit, "the foreground ran too long");
        stopped += u32::from(any_stopped(&[pid]));
        samples += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    (stopped, samples)
}

/// This process's cgroup v2 directory, where tact (its child) makes the job's.
pub fn cgroup2_dir() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split(' ').next() == Some("cgroup2"))
            .then(|| pre.split(' ').nth(4).map(PathBuf::from))
    })??;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(path.trim_start_matches('/')))
}

/// Why the tests of `--idle net`'s kernel part (htb tree, nft marking) cannot run here, if
/// they cannot: they need root, `tc`, `nft`, python3 and a cgroup2 hierarchy.
pub fn net_kernel_missing() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("network namespaces, tc and nftables need root".into());
    }
    for (tool, arg) in [("tc", "-V"), ("nft", "--version"), ("python3", "--version")] {
        match Command::new(tool).arg(arg).output() {
            Ok(o) if o.status.success() => {}
            _ => return Some(format!("`{tool}` is not installed")),
        }
    }
    if cgroup2_dir().is_none() {
        return Some("no cgroup2 hierarchy is mounted".into());
    }
    None
}

/// Waits until `find` gives something and returns that, from the same call: a second look can
/// miss what the first saw (a process's cmdline reads empty while it execs).
pub fn wait_for_some<T>(limit: Duration, what: &str, mut find: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    wait_for(limit, what, || {
        found = find();
        found.is_some()
    });
    found.unwrap()
}

/// Waits until a daemon (`child`) accepts connections on `socket`; fails at once, with what
/// `stderr` gives, if it exits first.
pub fn wait_until_listening(
    child: &mut Child,
    socket: &Path,
    limit: Duration,
    stderr: impl Fn() -> String,
) {
    wait_for(limit, "the daemon to listen", || {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the daemon exited: {}",
            stderr()
        );
        std::os::unix::net::UnixStream::connect(socket).is_ok()
    });
}

/// The process tree under `pid` (including it).
pub fn tree(pid: i32) -> Vec<i32> {
    ProcReader::new().descendants(pid).unwrap_or_default()
}

/// Whether any process of the tree is stopped (state T).
pub fn any_stopped(pids: &[i32]) -> bool {
    let r = ProcReader::new();
    pids.iter()
        .any(|&p| r.stat(p).map(|s| s.is_stopped()).unwrap_or(false))
}

/// Children of `pid` whose command line contains `needle`.
pub fn children_matching(pid: i32, needle: &str) -> Vec<i32> {
    let r = ProcReader::new();
    r.children(pid)
        .unwrap_or_default()
        .into_iter()
        .filter(|&c| {
            r.cmdline(c)
                .map(|a| a.join(" ").contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

pub fn kill(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
}

/// Kills what is left of a test's job: the current tree under its root (read now, so no pid that
/// exited and may have been reused is signalled), root first, so that it dies of the SIGKILL
/// (killed after its children, a shell's `wait` could return and the shell exit 0 in between).
pub fn kill_tree(root: i32) {
    for p in tree(root) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A shell job that advances a counter file for about half a second, then makes no progress:
/// tact calibrates on the first part and then suspends it with doubling suspensions.
pub fn stalling_job(dir: &Path) -> (PathBuf, Vec<String>) {
    let counter = dir.join("count");
    std::fs::write(&counter, "0\n").unwrap();
    let script = format!(
        "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo $i > {c}.tmp; mv {c}.tmp {c}; sleep 0.015; done; sleep 120",
        c = counter.display()
    );
    (counter, vec!["sh".into(), "-c".into(), script])
}

/// Starts `tact run` on the stalling job with fast testpoints, isolated state directories and a
/// JSON log; returns the child and the log's path.
pub fn start_stalling(dir: &Path, runtime: &Path) -> (Child, PathBuf) {
    let (counter, cmd) = stalling_job(dir);
    let log = dir.join("trace.jsonl");
    let child = tact()
        .env("TACT_RUNTIME_DIR", runtime)
        .arg("run")
        .args(FAST_REGULATION)
        .args(["--max-suspend", "60s"])
        .arg("--progress")
        .arg(format!("file:{}", counter.display()))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--json-log")
        .arg(&log)
        .arg("--")
        .args(cmd)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, log)
}

/// Longest suspension (seconds) decided so far according to a JSON log.
pub fn longest_suspension(log: &Path) -> f64 {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["suspend"].as_f64())
        .fold(0.0, f64::max)
}

/// Where the cgroup backend's tests run tact: `cpu`, a test cgroup at the cpu hierarchy's root
/// for `--cgroup-parent` (on cgroup v1 and v2 alike it holds no process, so that on v2 tact may
/// enable the cpu controller there wherever the test itself runs), and on v1 with cpuacct
/// mounted apart `acct`, a test cgroup that `enter` (a shell prefix) puts tact in, since tact
/// counts usage in a mirror under its own cpuacct cgroup. `None`, said why, where it cannot.
pub struct CgroupRig {
    pub hier: tact_linux::actuate::cgroup_cpu::CpuHierarchy,
    pub cpu: TestCgroup,
    pub acct: Option<TestCgroup>,
    /// A shell prefix that puts the shell in `acct`.
    pub enter: String,
}

impl CgroupRig {
    pub fn new(name: &str) -> Option<CgroupRig> {
        use tact_linux::actuate::cgroup_cpu::{self, CpuHierarchy};
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: the cgroup backend needs root");
            return None;
        }
        let Ok(hier) = CpuHierarchy::detect() else {
            eprintln!("skipped: no cpu cgroup hierarchy");
            return None;
        };
        let cpu = TestCgroup::create(&hier.cpu.dir, name);
        if let Err(why) = cgroup_cpu::can_use(Some(&cpu.0), "tact-test-probe") {
            eprintln!("skipped: {why}");
            return None;
        }
        let acct = hier
            .cpuacct
            .as_ref()
            .filter(|a| a.dir != hier.cpu.dir)
            .map(|a| TestCgroup::create(&a.dir, name));
        let enter = acct
            .as_ref()
            .map(|a| format!("echo $$ > {}/cgroup.procs; ", a.0.display()))
            .unwrap_or_default();
        Some(CgroupRig {
            hier,
            cpu,
            acct,
            enter,
        })
    }

    /// tact pinned to CPU 1, entered into `acct` first (`taskset -c 1 sh -c '...exec tact'`):
    /// add its arguments.
    pub fn tact_on_cpu1(&self) -> Command {
        let mut c = Command::new("taskset");
        c.args(["-c", "1", "sh", "-c"])
            .arg(format!("{}exec \"$0\" \"$@\"", self.enter))
            .arg(env!("CARGO_BIN_EXE_tact"));
        c
    }

    /// Nothing left in the test's cgroups.
    pub fn assert_clean(&self, err: &str) {
        for cg in std::iter::once(&self.cpu).chain(&self.acct) {
            assert!(
                cg.leftovers().is_empty(),
                "left behind: {:?}\n{err}",
                cg.leftovers()
            );
        }
    }
}

/// A `tact-test-NAME-PID` directory in a cgroup hierarchy, removed at the end with whatever tact
/// left in it (which a test reports first, with `leftovers`).
pub struct TestCgroup(pub PathBuf);

impl TestCgroup {
    pub fn create(mount: &Path, name: &str) -> TestCgroup {
        let dir = mount.join(format!("tact-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        TestCgroup(dir)
    }

    /// Child cgroups left inside.
    pub fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Depth first: tact's directories, if it failed to remove them, then ours.
        fn remove(dir: &Path) {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
                    remove(&e.path());
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        remove(&self.0);
    }
}

/// The same `tact-test-NAME-PID` cgroup in the v1 hierarchies `tact tickets run --cgroup-parent`
/// uses: the cpu one first (the one to name), then one per controller of `controllers`, then the
/// cpuacct mirror when cpuacct is mounted apart; with each controller's mount directory. `None`,
/// the reason printed, unless this is root with writable v1 cpu and `controllers` hierarchies.
pub struct V1Parents {
    pub cgroups: Vec<TestCgroup>,
    pub mounts: Vec<PathBuf>,
}

pub fn v1_parents(
    name: &str,
    controllers: &[tact_linux::actuate::cgroup_knobs::Controller],
) -> Option<V1Parents> {
    use tact_linux::actuate::cgroup_cpu::{self, CgroupVersion, CpuHierarchy};
    use tact_linux::actuate::cgroup_knobs::Hierarchies;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the cgroup backend needs root");
        return None;
    }
    let (Ok(hier), Ok(all)) = (CpuHierarchy::detect(), Hierarchies::detect()) else {
        eprintln!("skipped: no cgroup hierarchies");
        return None;
    };
    let v1 = |c| all.get(c).is_ok_and(|m| m.version == CgroupVersion::V1);
    if hier.version != CgroupVersion::V1
        || !controllers.iter().all(|&c| v1(c))
        || cgroup_cpu::can_use(None, "tact-test-probe").is_err()
    {
        eprintln!("skipped: needs writable cgroup v1 hierarchies for cpu and {controllers:?}");
        return None;
    }
    let mounts: Vec<PathBuf> = (controllers.iter())
        .map(|&c| all.get(c).unwrap().mount.dir.clone())
        .collect();
    let mut cgroups = vec![TestCgroup::create(&hier.cpu.dir, name)];
    cgroups.extend(mounts.iter().map(|m| TestCgroup::create(m, name)));
    if let Some(a) = hier.cpuacct.as_ref().filter(|a| a.dir != hier.cpu.dir) {
        cgroups.push(TestCgroup::create(&a.dir, name));
    }
    Some(V1Parents { cgroups, mounts })
}

/// Runs `tact tickets ARGS --socket SOCKET`, as `as_user` (a command prefix such as
/// `["setpriv", "--reuid=nobody", ...]`) when given; its exit status, stdout and stderr.
pub fn tickets_at(socket: &Path, as_user: &[&str], args: &[&str]) -> (i32, String, String) {
    let mut cmd = match as_user.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(env!("CARGO_BIN_EXE_tact"));
            c
        }
        None => tact(),
    };
    let out = cmd
        .arg("tickets")
        .args(args)
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`tickets_at`] for a command that must succeed: its stdout.
pub fn tickets_ok(socket: &Path, args: &[&str]) -> String {
    let (code, out, err) = tickets_at(socket, &[], args);
    assert_eq!(code, 0, "tact tickets {args:?}: {err}");
    out
}

/// `tact daemon` with its socket (`DIR/s`), tickets state (`DIR/tickets.json`) and runtime
/// directory in `dir`, and `extra` arguments; stdin and stdout closed, stderr left to the caller.
pub fn tickets_daemon(dir: &Path, extra: &[&str]) -> Command {
    let mut c = tact();
    c.env("TACT_RUNTIME_DIR", dir)
        .arg("daemon")
        .arg("--socket")
        .arg(dir.join("s"))
        .arg("--tickets-state")
        .arg(dir.join("tickets.json"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// The CPU everything of a test runs on: the last one this test may use.
pub fn one_cpu() -> usize {
    let cpus = tact_linux::actuate::affinity::thread_cpus(std::process::id() as i32).unwrap();
    *cpus.last().unwrap()
}

/// Runs `ip ARGS...`; a failure fails the test with ip's message.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The prefix that runs a command as nobody (uid and gid 65534, no supplementary groups).
pub const AS_NOBODY: [&str; 6] = [
    "/usr/bin/setpriv",
    "--reuid",
    "65534",
    "--regid",
    "65534",
    "--clear-groups",
];
