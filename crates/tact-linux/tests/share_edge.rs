//! The OS edge of `tact share` against fixture trees and real processes: CPU clocks and run
//! states, the cgroup weight backend (v2 on fixtures, the machine's own hierarchy for real),
//! affinity, and principal member scans. Real cgroups are made only under `tact-test-*`
//! directories that the tests remove, and only processes the tests started are signalled.

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::*;
use tact_linux::actuate::affinity::{self, thread_cpus};
use tact_linux::actuate::cgroup_cpu::{self, CgroupVersion, CpuGroups, CpuHierarchy, EntityId};
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::probe::cpu::{Activity, CpuSource, ProcWatch};
use tact_linux::probe::members::MemberScan;
use tact_linux::{Error, JobTree, ProcReader};

const HELPER_ENV: &str = "TACT_SHARE_EDGE_HELPER";

/// Not a test: the body of a multi-threaded helper process (this test binary run again with
/// `HELPER_ENV` set). `spin`: the main thread and two workers sleep while a third spins;
/// `sleep`: every thread sleeps. It exits when its parent (the test) does.
#[test]
fn helper_process() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        return;
    };
    for i in 0..3 {
        let spin = mode == "spin" && i == 2;
        thread::spawn(move || loop {
            if spin {
                std::hint::black_box((0..10_000u64).sum::<u64>());
            } else {
                thread::sleep(Duration::from_secs(1));
            }
        });
    }
    let parent = std::os::unix::process::parent_id();
    while std::os::unix::process::parent_id() == parent {
        thread::sleep(Duration::from_millis(200));
    }
}

/// Starts the helper in `mode` and waits until it has its 4+ threads.
fn helper(mode: &str) -> Reaped {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, mode)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    assert!(wait_until(PATIENCE, || ProcReader::new()
        .threads(pid)
        .is_ok_and(|t| t.len() >= 4)));
    Reaped(child)
}

fn spinner() -> Reaped {
    Reaped(sh("while :; do :; done"))
}

fn pid_of(c: &Reaped) -> i32 {
    c.0.id() as i32
}

fn id_of(c: &Reaped) -> tact_linux::ProcId {
    ProcReader::new().stat(pid_of(c)).unwrap().id()
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("mountinfo")
}

// ---------------------------------------------------------------------------------------------
// probe::cpu

#[test]
fn proc_watch_reads_clock_threads_and_states() {
    let spin = spinner();
    let sleeper = Reaped(sh("exec sleep 60"));
    let _killer = Killer::new(&[id_of(&spin), id_of(&sleeper)]);

    let mut w = ProcWatch::open(pid_of(&spin)).unwrap();
    assert_eq!(w.source(), CpuSource::Clock);
    assert_eq!(w.id(), id_of(&spin));
    let first = w.read().unwrap();
    assert_eq!(first.threads, 1);
    // Spinning: runnable most of the time, and its clock advances.
    assert!(wait_until(PATIENCE, || {
        let r = w.read().unwrap();
        r.activity == Activity::Runnable && r.cpu_ns > first.cpu_ns + 20_000_000
    }));
    // The schedstat fallback agrees within what runs between the two reads.
    let mut fallback =
        ProcWatch::open_with(&ProcReader::new(), pid_of(&spin), CpuSource::Schedstat).unwrap();
    let (a, b) = (w.cpu_ns().unwrap(), fallback.cpu_ns().unwrap());
    assert!(b + 1_000_000_000 > a && a + 1_000_000_000 > b, "{a} vs {b}");

    let mut s = ProcWatch::open(pid_of(&sleeper)).unwrap();
    assert!(wait_until(PATIENCE, || s.activity().unwrap() == Activity::Blocked));

    // Stopped by someone else (here the test): counts as blocked.
    let fd = PidFd::open(pid_of(&spin)).unwrap();
    fd.send_signal(libc::SIGSTOP).unwrap();
    assert!(wait_until(PATIENCE, || w.activity().unwrap() == Activity::Stopped));
    assert!(w.read().unwrap().activity.is_blocked());
    let stopped_at = w.cpu_ns().unwrap();
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        w.cpu_ns().unwrap(),
        stopped_at,
        "a stopped process uses no CPU"
    );
    fd.send_signal(libc::SIGCONT).unwrap();

    // Killed but not reaped: dead; reaped: gone, even if the pid were reused.
    fd.send_signal(libc::SIGKILL).unwrap();
    assert!(wait_until(PATIENCE, || match w.read() {
        Ok(r) => r.activity == Activity::Dead,
        Err(Error::NoProcess { .. }) => true,
        Err(e) => panic!("{e}"),
    }));
    let mut spin = spin;
    spin.0.wait().unwrap();
    assert!(matches!(w.read(), Err(Error::NoProcess { .. })));
    assert!(matches!(w.stat(), Err(Error::NoProcess { .. })));
    assert!(matches!(
        ProcWatch::open(pid_of(&spin)),
        Err(Error::NoProcess { .. })
    ));
}

#[test]
fn proc_watch_judges_threaded_processes_on_every_thread() {
    let spin = helper("spin");
    let idle = helper("sleep");
    let _killer = Killer::new(&[id_of(&spin), id_of(&idle)]);
    let mut w = ProcWatch::open(pid_of(&spin)).unwrap();
    // The leader sleeps, a worker spins: runnable.
    assert!(wait_until(PATIENCE, || {
        let r = w.read().unwrap();
        r.threads >= 4 && r.activity == Activity::Runnable
    }));
    assert_ne!(w.stat().unwrap().state, 'R', "the leader itself sleeps");
    let mut i = ProcWatch::open(pid_of(&idle)).unwrap();
    assert!(wait_until(PATIENCE, || i.read().unwrap().activity == Activity::Blocked));
    // Stopped: every thread takes the stop.
    let fd = PidFd::open(pid_of(&spin)).unwrap();
    fd.send_signal(libc::SIGSTOP).unwrap();
    assert!(wait_until(PATIENCE, || w.activity().unwrap() == Activity::Stopped));
    fd.send_signal(libc::SIGCONT).unwrap();
    assert!(wait_until(PATIENCE, || w.activity().unwrap() == Activity::Runnable));
}

// ---------------------------------------------------------------------------------------------
// actuate::affinity

#[test]
fn affinity_of_every_thread_is_set_and_restored() {
    let h = helper("spin");
    let _killer = Killer::new(&[id_of(&h)]);
    let pid = pid_of(&h);
    let mine = thread_cpus(std::process::id() as i32).unwrap();
    let target = vec![*mine.last().unwrap()];
    let saved = affinity::pin(pid, &target).unwrap();
    assert!(saved.threads.len() >= 4);
    let tids = ProcReader::new().threads(pid).unwrap();
    for &tid in &tids {
        assert_eq!(thread_cpus(tid).unwrap(), target, "thread {tid}");
    }
    saved.restore().unwrap();
    for &tid in &tids {
        assert_eq!(thread_cpus(tid).unwrap(), mine, "thread {tid}");
    }
}

// ---------------------------------------------------------------------------------------------
// probe::members

#[test]
fn member_scans_find_our_children_and_never_tact() {
    let kid = Reaped(sh("exec sleep 60"));
    let _killer = Killer::new(&[id_of(&kid)]);
    let scan = MemberScan::new().unwrap();
    let me = std::process::id() as i32;
    let parent = std::os::unix::process::parent_id() as i32;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let pids = scan.uid(uid).unwrap();
    assert!(pids.contains(&pid_of(&kid)));
    assert!(!pids.contains(&me) && !pids.contains(&parent) && !pids.contains(&1));
    assert!(scan.excluded().contains(&parent));
}

// ---------------------------------------------------------------------------------------------
// actuate::cgroup_cpu: detection and the v2 logic on fixtures

#[test]
fn detects_the_cpu_hierarchy_from_mountinfo() {
    let fs_root = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    let reader = ProcReader::with_root(proc_root.path());
    let root = fs_root.path();

    // Pure v2 with cpu available.
    write(
        &root.join("sys/fs/cgroup/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    let h = CpuHierarchy::detect_in(&fixture("cgroup-v2"), root, reader.clone()).unwrap();
    assert_eq!(h.version, CgroupVersion::V2);
    assert_eq!(h.cpu.dir, root.join("sys/fs/cgroup"));
    assert!(h.cpuacct.is_none() && h.has_usage());
    write(
        &proc_root.path().join("self/cgroup"),
        "0::/user.slice/user-1000.slice/session-2.scope\n",
    );
    assert_eq!(
        h.own_cgroup().unwrap(),
        root.join("sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope")
    );
    write(&proc_root.path().join("77/cgroup"), "0::/x\n");
    assert_eq!(h.cgroup_of(77).unwrap(), root.join("sys/fs/cgroup/x"));
    assert!(matches!(h.cgroup_of(78), Err(Error::NoProcess { pid: 78 })));

    // Hybrid (this test machine's layout): cpu and cpuacct are separate v1 hierarchies and the
    // unified mount has no controllers.
    let h = CpuHierarchy::detect_in(&fixture("cgroup-hybrid"), root, reader.clone()).unwrap();
    assert_eq!(h.version, CgroupVersion::V1);
    assert_eq!(h.cpu.dir, root.join("sys/fs/cgroup/cpu"));
    assert_eq!(
        h.cpuacct.as_ref().unwrap().dir,
        root.join("sys/fs/cgroup/cpuacct")
    );
    assert!(!h.comounted());
    write(
        &proc_root.path().join("self/cgroup"),
        "4:memory:/m\n3:cpuacct:/acct/x\n1:cpu:/tasks/y\n0::/\n",
    );
    assert_eq!(
        h.own_cgroup().unwrap(),
        root.join("sys/fs/cgroup/cpu/tasks/y")
    );

    // v1 with cpu,cpuacct co-mounted.
    let h = CpuHierarchy::detect_in(&fixture("cgroup-v1-comounted"), root, reader.clone()).unwrap();
    assert_eq!(h.version, CgroupVersion::V1);
    assert!(h.comounted() && h.has_usage());
    assert_eq!(h.cpu.dir, root.join("sys/fs/cgroup/cpu,cpuacct"));
    write(&proc_root.path().join("self/cgroup"), "2:cpu,cpuacct:/a\n");
    assert_eq!(
        h.own_cgroup().unwrap(),
        root.join("sys/fs/cgroup/cpu,cpuacct/a")
    );

    // A container that sees only its part of the v2 hierarchy.
    let croot = tempfile::tempdir().unwrap();
    write(
        &croot.path().join("sys/fs/cgroup/cgroup.controllers"),
        "cpu\n",
    );
    let h = CpuHierarchy::detect_in(&fixture("cgroup-container"), croot.path(), reader.clone())
        .unwrap();
    write(
        &proc_root.path().join("self/cgroup"),
        "0::/docker/0123abcd/app\n",
    );
    assert_eq!(
        h.own_cgroup().unwrap(),
        croot.path().join("sys/fs/cgroup/app")
    );

    // No cpu anywhere: a clear error naming the file.
    let bare = tempfile::tempdir().unwrap();
    let err = CpuHierarchy::detect_in(&fixture("cgroup-v2"), bare.path(), reader)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cgroup-v2/mountinfo") && err.contains("cpu controller"),
        "{err}"
    );
}

#[test]
fn v2_weights_moves_usage_and_teardown_on_a_fixture_tree() {
    let fs_root = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    let root = fs_root.path();
    let cg = root.join("sys/fs/cgroup");
    write(&cg.join("cgroup.controllers"), "cpu io memory\n");
    let base = cg.join("work");
    write(&base.join("cgroup.controllers"), "cpu io memory\n");
    write(&base.join("cgroup.subtree_control"), "memory\n");
    write(&base.join("cgroup.procs"), "");
    let from = cg.join("elsewhere");
    write(&from.join("cgroup.procs"), "");
    // tact runs in a cgroup of its own, not in BASE (`--cgroup-parent`).
    let home = cg.join("service");
    write(&home.join("cgroup.procs"), "");
    write(&proc_root.path().join("self/cgroup"), "0::/service\n");
    write(&proc_root.path().join("4242/cgroup"), "0::/elsewhere\n");
    write(&proc_root.path().join("4243/cgroup"), "0::/gone\n");
    let reader = ProcReader::with_root(proc_root.path());
    let h = CpuHierarchy::detect_in(&fixture("cgroup-v2"), root, reader).unwrap();

    // A base without the cpu controller available: a clear error, nothing left behind.
    let dir = base.join("tact-test-fixture");
    write(&base.join("cgroup.controllers"), "io memory\n");
    let err = CpuGroups::create(h.clone(), "tact-test-fixture", Some(&base))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("work/cgroup.controllers") && err.contains("cpu controller"),
        "{err}"
    );
    assert!(!dir.exists());
    write(&base.join("cgroup.controllers"), "cpu io memory\n");

    let mut groups = CpuGroups::create(h.clone(), "tact-test-fixture", Some(&base)).unwrap();
    assert_eq!(groups.dir(), dir);
    assert_eq!(
        fs::read_to_string(base.join("cgroup.subtree_control")).unwrap(),
        "+cpu"
    );
    assert_eq!(
        fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap(),
        "+cpu"
    );

    // Names are checked.
    for bad in ["", "..", "a/b", ".hidden", "sp ace"] {
        assert!(groups.add_entity(bad, 1).is_err(), "{bad:?}");
    }
    assert!(groups.add_entity("zero", 0).is_err());
    let (a, w) = groups.add_entity("a", 1).unwrap();
    assert_eq!((w[0].weight, w[0].clamped), (10_000, false));
    let (b, w) = groups.add_entity("b", 3).unwrap();
    let weight = |e: &str| fs::read_to_string(dir.join(e).join("cpu.weight")).unwrap();
    assert_eq!((weight("a"), weight("b")), ("3333".into(), "9999".into()));
    assert!(w.iter().all(|w| w.ratio_error.abs() < 1e-9 && !w.clamped));
    assert!(groups.add_entity("a", 1).is_err(), "duplicate name");

    // Live change, and a ratio beyond the range is clamped and reported.
    let w = groups.set_share(a, 100_000).unwrap();
    assert_eq!((weight("a"), weight("b")), ("10000".into(), "1".into()));
    assert!(w[1].clamped && w[1].ratio_error > 1.0);
    groups.set_share(a, 1).unwrap();
    assert_eq!((weight("a"), weight("b")), ("3333".into(), "9999".into()));

    // Moves write cgroup.procs; release puts a process back where it came from, or in tact's
    // own cgroup when that is gone: not in BASE, which enables cpu for its children and so may
    // hold no process (the kernel's no-internal-processes rule).
    groups.move_pid(b, 4242).unwrap();
    groups.move_pid(a, 4243).unwrap();
    assert_eq!(groups.pids(b).unwrap(), vec![4242]);
    assert_eq!(groups.pids(a).unwrap(), vec![4243]);
    groups.release_pid(4242).unwrap();
    assert_eq!(
        fs::read_to_string(from.join("cgroup.procs")).unwrap(),
        "4242"
    );
    groups.release_pid(4243).unwrap();
    assert_eq!(
        fs::read_to_string(home.join("cgroup.procs")).unwrap(),
        "4243"
    );
    assert_eq!(fs::read_to_string(base.join("cgroup.procs")).unwrap(), "");
    assert!(matches!(
        groups.move_pid(a, 5000),
        Err(Error::NoProcess { pid: 5000 })
    ));

    // Usage from cpu.stat, and errors naming the file.
    write(
        &dir.join("a/cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
    );
    assert_eq!(groups.usage_ns(a).unwrap(), Some(1_500_000));
    write(&dir.join("b/cpu.stat"), "user_usec 1000\n");
    let err = groups.usage_ns(b).unwrap_err().to_string();
    assert!(
        err.contains("b/cpu.stat") && err.contains("usage_usec"),
        "{err}"
    );
    assert!(groups.usage_ns(EntityId(9)).is_err());

    // Teardown: the kernel's files vanish with the directory; a fixture's must be removed.
    for e in ["a", "b"] {
        for f in ["cpu.weight", "cpu.stat", "cgroup.procs"] {
            let _ = fs::remove_file(dir.join(e).join(f));
        }
    }
    fs::remove_file(dir.join("cgroup.subtree_control")).unwrap();
    groups.teardown().unwrap();
    assert!(!dir.exists());
    assert_eq!(
        fs::read_to_string(base.join("cgroup.subtree_control")).unwrap(),
        "-cpu",
        "tact takes back the +cpu it wrote"
    );
    groups.teardown().unwrap(); // idempotent
}

// ---------------------------------------------------------------------------------------------
// actuate::cgroup_cpu on this machine's hierarchy

/// The real hierarchy if this process may create cgroups in its own cgroup; otherwise prints why
/// the test is skipped.
fn real_hierarchy(test: &str) -> Option<CpuHierarchy> {
    match cgroup_cpu::can_use(None, &test_name(&format!("probe-{test}"))) {
        Ok(h) => Some(h),
        Err(reason) => {
            eprintln!("{test}: skipped: {reason}");
            None
        }
    }
}

fn test_name(what: &str) -> String {
    format!("tact-test-{}-{what}", std::process::id())
}

#[test]
fn can_use_explains_why_not() {
    let err = cgroup_cpu::can_use(Some(Path::new("/nonexistent/cg")), &test_name("x")).unwrap_err();
    assert!(err.contains("/nonexistent/cg"), "{err}");
    if let Some(h) = real_hierarchy("can-use") {
        // The probe leaves nothing behind.
        let probe = h.own_cgroup().unwrap().join(test_name("probe-can-use"));
        assert!(!probe.exists(), "{}", probe.display());
        // A name that is not one plain path component is refused.
        let err = cgroup_cpu::check(&h, None, "../tact-test-escape").unwrap_err();
        assert!(err.contains("path component"), "{err}");
    }
}

/// CPU nanoseconds each process uses over `span`.
fn cpu_over(watches: &mut [ProcWatch], span: Duration) -> Vec<u64> {
    let before: Vec<u64> = watches.iter_mut().map(|w| w.cpu_ns().unwrap()).collect();
    thread::sleep(span);
    watches
        .iter_mut()
        .zip(before)
        .map(|(w, b)| w.cpu_ns().unwrap() - b)
        .collect()
}

#[test]
fn weights_divide_a_pinned_cpu_and_change_live() {
    let Some(h) = real_hierarchy("ratio") else {
        return;
    };
    let (s1, s2) = (spinner(), spinner());
    let _killer = Killer::new(&[id_of(&s1), id_of(&s2)]);
    let (p1, p2) = (pid_of(&s1), pid_of(&s2));
    let origin = h.cgroup_of(p1).unwrap();
    let cpu = *thread_cpus(p1).unwrap().last().unwrap();
    let _pin1 = affinity::pin(p1, &[cpu]).unwrap();
    let _pin2 = affinity::pin(p2, &[cpu]).unwrap();

    let mut groups = CpuGroups::create(h.clone(), &test_name("ratio"), None).unwrap();
    let dir = groups.dir().to_path_buf();
    let (a, _) = groups.add_entity("a", 1).unwrap();
    let (b, w) = groups.add_entity("b", 3).unwrap();
    assert!(w.iter().all(|w| !w.clamped));
    groups.move_pid(a, p1).unwrap();
    groups.move_pid(b, p2).unwrap();
    assert_eq!(groups.pids(a).unwrap(), vec![p1]);
    assert_eq!(h.cgroup_of(p2).unwrap(), groups.entity_dir(b).unwrap());

    let mut watches = vec![ProcWatch::open(p1).unwrap(), ProcWatch::open(p2).unwrap()];
    let usage_before = (groups.usage_ns(a).unwrap(), groups.usage_ns(b).unwrap());
    let used = cpu_over(&mut watches, Duration::from_secs(2));
    let frac = used[1] as f64 / (used[0] + used[1]) as f64;
    eprintln!("shares 1:3 -> cpu {used:?}, b's fraction {frac:.3} (ideal 0.75)");
    assert!(
        used[1] > used[0] * 3 / 2 && frac > 0.6,
        "share 3 got {} ns, share 1 got {} ns",
        used[1],
        used[0]
    );
    if h.has_usage() {
        let after = (groups.usage_ns(a).unwrap(), groups.usage_ns(b).unwrap());
        let (ua, ub) = (
            after.0.unwrap() - usage_before.0.unwrap(),
            after.1.unwrap() - usage_before.1.unwrap(),
        );
        eprintln!("cgroup usage over the same span: a {ua} ns, b {ub} ns");
        assert!(ub > ua, "cgroup usage agrees on the ordering");
    }

    // Live change: 3:1 now.
    groups.set_share(a, 3).unwrap();
    groups.set_share(b, 1).unwrap();
    thread::sleep(Duration::from_millis(200));
    let used = cpu_over(&mut watches, Duration::from_secs(2));
    eprintln!("shares 3:1 -> cpu {used:?}");
    assert!(used[0] > used[1] * 3 / 2, "{used:?}");

    // Teardown with the spinners still running: they go back where they came from.
    groups.teardown().unwrap();
    assert!(!dir.exists());
    assert_eq!(h.cgroup_of(p1).unwrap(), origin);
    assert_eq!(h.cgroup_of(p2).unwrap(), origin);
    if let Some(acct) = &h.cpuacct {
        let mirror = acct.dir.join(dir.file_name().unwrap());
        assert!(!mirror.exists(), "{}", mirror.display());
    }
}

/// Plain cgroup directories of the test's own, removed at the end (once the processes killed
/// before have left them).
struct Dirs(Vec<PathBuf>);

impl Drop for Dirs {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            wait_until(PATIENCE, || fs::remove_dir(d).is_ok() || !d.exists());
        }
    }
}

/// The tree is moved in from a cgroup of its own (`from`), into a group made under a BASE that
/// is not this process's cgroup (`--cgroup-parent`). A child forked inside has no origin of its
/// own: it goes back where its parent came from, never into BASE (on cgroup v2 a BASE that
/// enables cpu for its children may hold no process) and never into the group itself, which a
/// second pass over the tree (share's, every second) once recorded as its origin, so that the
/// directory could not be removed.
#[test]
fn a_tree_moves_in_its_children_follow_and_drop_cleans_up() {
    let Some(h) = real_hierarchy("tree") else {
        return;
    };
    let own = h.own_cgroup().unwrap();
    let from = own.join(test_name("tree-from"));
    let base = own.join(test_name("tree-base"));
    let _dirs = Dirs(vec![from.clone(), base.clone()]);
    fs::create_dir(&from).unwrap();
    fs::create_dir(&base).unwrap();
    // The root forks a new sleeper each time a line arrives on its stdin.
    let mut root = Reaped(sh("sleep 60 & while read x; do sleep 60 & done; wait"));
    let mut stdin = root.0.stdin.take().unwrap();
    let pid = pid_of(&root);
    let mut tree = JobTree::attach(pid).unwrap();
    assert!(wait_until(PATIENCE, || {
        tree.refresh().unwrap();
        tree.members().len() == 2
    }));
    let _killer = Killer::new(&tree.members());
    for m in tree.members() {
        fs::write(from.join("cgroup.procs"), m.pid.to_string()).unwrap();
    }
    assert_eq!(h.cgroup_of(pid).unwrap(), from);
    let dir;
    // The child forked inside the block is killed at the end of the test, not of the block:
    // dropped before `groups`, it killed the members before they were moved back, and on
    // cgroup v2 a killed child its parent has not reaped still names the deleted cgroup.
    let _late_killer;
    {
        let mut groups = CpuGroups::create(h.clone(), &test_name("tree"), Some(&base)).unwrap();
        dir = groups.dir().to_path_buf();
        let (e, _) = groups.add_entity("job", 5).unwrap();
        assert_eq!(groups.move_tree(e, &tree).unwrap(), 2);
        // A child forked after the move starts in the entity's cgroup.
        writeln!(stdin, "go").unwrap();
        assert!(wait_until(PATIENCE, || groups.pids(e).unwrap().len() == 3));
        tree.refresh().unwrap();
        _late_killer = Killer::new(&tree.members());
        let mut all = groups.pids(e).unwrap();
        let mut members: Vec<i32> = tree.members().iter().map(|m| m.pid).collect();
        all.sort_unstable();
        members.sort_unstable();
        assert_eq!(all, members);
        // The scan of a cgroup principal sees the same processes.
        let scan = MemberScan::new().unwrap();
        assert_eq!(scan.cgroup(groups.entity_dir(e).unwrap()).unwrap(), all);
        // Another pass over the tree moves nothing: everyone is inside.
        assert_eq!(groups.move_tree(e, &tree).unwrap(), 0);
        groups.teardown().unwrap();
    }
    assert!(!dir.exists());
    for m in tree.members() {
        assert_eq!(h.cgroup_of(m.pid).unwrap(), from, "{m:?}");
    }
    assert_eq!(fs::read_to_string(base.join("cgroup.procs")).unwrap(), "");
    drop(stdin);
    root.0.kill().unwrap();
}

/// A tact that was SIGKILLed leaves its `tact-…-PID` directories; the next one that creates a
/// group beside them removes those whose owner is gone and that hold no process, and only those.
#[test]
fn stale_directories_of_dead_tacts_are_swept() {
    let Some(h) = real_hierarchy("stale") else {
        return;
    };
    let outer = CpuGroups::create(h.clone(), &test_name("stale"), None).unwrap();
    let base = outer.dir().to_path_buf();
    // A pid that is gone: a child that has exited and been reaped.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id() as i32;
    dead.wait().unwrap();
    let own = std::process::id();
    let empty = base.join(format!("tact-share-{dead_pid}"));
    let busy = base.join(format!("tact-{dead_pid}-idle"));
    let live = base.join(format!("tact-tickets-{own}"));
    let unnamed = base.join("tact-tickets");
    for d in [
        empty.join("job0"),
        busy.join("job"),
        live.clone(),
        unnamed.clone(),
    ] {
        fs::create_dir_all(&d).unwrap();
    }
    let s = spinner();
    let _killer = Killer::new(&[id_of(&s)]);
    let origin = h.cgroup_of(pid_of(&s)).unwrap();
    fs::write(busy.join("job/cgroup.procs"), pid_of(&s).to_string()).unwrap();

    let inner = CpuGroups::create(h.clone(), "tact-share-inner", Some(&base)).unwrap();
    let gone = !empty.exists();
    let kept = [busy.exists(), live.exists(), unnamed.exists()];
    // Undo before asserting, so that a failure leaves nothing behind.
    drop(inner);
    fs::write(origin.join("cgroup.procs"), pid_of(&s).to_string()).unwrap();
    for d in [
        busy.join("job"),
        busy,
        live,
        unnamed,
        empty.join("job0"),
        empty,
    ] {
        let _ = fs::remove_dir(d);
    }
    drop(outer);
    assert!(gone, "an empty directory of a dead tact is swept");
    assert_eq!(
        kept, [true; 3],
        "kept: one holding a process, one whose owner lives, one without a pid"
    );
}
