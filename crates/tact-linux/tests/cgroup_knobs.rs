//! The tickets model's cgroup knobs (actuate::cgroup_knobs): detection and every v2 knob on
//! fixture trees, and the v1 knobs on this machine's real hierarchies. Real cgroups are made only
//! under `/sys/fs/cgroup/<hierarchy>/tact-test-<pid>-*`, removed afterwards (a guard removes them
//! on panic too), and only processes the tests started are moved or signalled.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use tact_linux::actuate::cgroup_cpu::{CgroupMount, CgroupVersion};
use tact_linux::actuate::cgroup_knobs::{
    Controller, DiskBytes, DiskKnob, Hierarchies, KnobTree, MemProtection,
};
use tact_linux::{Error, ProcReader};

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("mountinfo")
}

// ---------------------------------------------------------------------------------------------
// Detection

#[test]
fn detects_each_controller_and_names_what_is_missing() {
    let fs_root = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    let root = fs_root.path();
    let reader = ProcReader::with_root(proc_root.path());

    // Pure v2 with every controller.
    write(
        &root.join("sys/fs/cgroup/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    let h = Hierarchies::detect_in(&fixture("cgroup-v2"), root, reader.clone()).unwrap();
    for c in Controller::ALL {
        let m = h.get(c).unwrap();
        assert_eq!(m.version, CgroupVersion::V2, "{c:?}");
        assert_eq!(m.mount.dir, root.join("sys/fs/cgroup"));
    }
    assert!(h.cpuacct.is_none());
    write(&proc_root.path().join("self/cgroup"), "0::/a/b\n");
    assert_eq!(
        h.own_cgroup(Controller::Io).unwrap(),
        root.join("sys/fs/cgroup/a/b")
    );

    // v2 without io: cpu and memory are there, io is an error naming what was looked for, the
    // mountinfo file and the fallback.
    write(
        &root.join("sys/fs/cgroup/cgroup.controllers"),
        "cpu memory\n",
    );
    let h = Hierarchies::detect_in(&fixture("cgroup-v2"), root, reader.clone()).unwrap();
    assert!(h.get(Controller::Memory).is_ok());
    let err = h.get(Controller::Io).unwrap_err().to_string();
    for want in [
        "io cgroup controller",
        "blkio",
        "cgroup-v2/mountinfo",
        "fallback",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }

    // This machine's layout: everything on v1, cpuacct apart from cpu, an empty unified mount.
    let h = Hierarchies::detect_in(&fixture("cgroup-v1-blkio"), root, reader.clone()).unwrap();
    for (c, dir) in [
        (Controller::Cpu, "cpu"),
        (Controller::Memory, "memory"),
        (Controller::Io, "blkio"),
    ] {
        let m = h.get(c).unwrap();
        assert_eq!(m.version, CgroupVersion::V1, "{c:?}");
        assert_eq!(m.mount.dir, root.join("sys/fs/cgroup").join(dir));
    }
    assert_eq!(
        h.cpuacct,
        Some(CgroupMount {
            dir: root.join("sys/fs/cgroup/cpuacct"),
            root: "/".into()
        })
    );
    write(
        &proc_root.path().join("4242/cgroup"),
        "7:blkio:/x\n4:memory:/m/n\n2:cpuacct:/\n1:cpu:/\n0::/\n",
    );
    assert_eq!(
        h.cgroup_of(Controller::Memory, 4242).unwrap(),
        root.join("sys/fs/cgroup/memory/m/n")
    );
    assert_eq!(
        h.cgroup_of(Controller::Io, 4242).unwrap(),
        root.join("sys/fs/cgroup/blkio/x")
    );
    assert!(matches!(
        h.cgroup_of(Controller::Io, 4243),
        Err(Error::NoProcess { pid: 4243 })
    ));

    // The hybrid fixture has no blkio: memory is found, io is not.
    let h = Hierarchies::detect_in(&fixture("cgroup-hybrid"), root, reader).unwrap();
    assert!(h.get(Controller::Memory).is_ok());
    assert!(matches!(
        h.get(Controller::Io),
        Err(Error::Unavailable { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// v2 on a fixture tree

/// A v2 fixture: `sys/fs/cgroup` with every controller, this process in `/work`, pid 4242 in
/// `/elsewhere` and pid 4243 in a cgroup that is gone.
struct V2Fixture {
    _fs: tempfile::TempDir,
    _proc: tempfile::TempDir,
    cg: PathBuf,
    hier: Hierarchies,
}

fn v2_fixture() -> V2Fixture {
    let fs_root = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    let cg = fs_root.path().join("sys/fs/cgroup");
    write(&cg.join("cgroup.controllers"), "cpu io memory pids\n");
    let base = cg.join("work");
    write(&base.join("cgroup.controllers"), "cpu io memory pids\n");
    write(&base.join("cgroup.subtree_control"), "");
    write(&base.join("cgroup.procs"), "");
    write(&cg.join("elsewhere/cgroup.procs"), "");
    // tact (a daemon) runs in a cgroup of its own; BASE is `--cgroup-parent /work`.
    write(&cg.join("service/cgroup.procs"), "");
    write(&proc_root.path().join("self/cgroup"), "0::/service\n");
    write(&proc_root.path().join("4242/cgroup"), "0::/elsewhere\n");
    write(&proc_root.path().join("4243/cgroup"), "0::/gone\n");
    let reader = ProcReader::with_root(proc_root.path());
    let hier = Hierarchies::detect_in(&fixture("cgroup-v2"), fs_root.path(), reader).unwrap();
    V2Fixture {
        _fs: fs_root,
        _proc: proc_root,
        cg,
        hier,
    }
}

/// What the kernel puts in a new v2 cgroup whose parent enables cpu, io and memory (io.weight
/// only when `iocost`).
fn kernel_files(dir: &Path, controllers: &str, iocost: bool) {
    let mut files = vec![
        ("cgroup.controllers", controllers),
        ("cgroup.subtree_control", ""),
        ("cgroup.procs", ""),
        ("cpu.weight", "100\n"),
        ("memory.min", "0\n"),
        ("memory.low", "0\n"),
        ("memory.max", "max\n"),
        ("io.bfq.weight", "default 100\n"),
    ];
    if iocost {
        files.push(("io.weight", "default 100\n"));
    }
    for (f, text) in files {
        write(&dir.join(f), text);
    }
}

/// Removes what `kernel_files` (and the tests) put in `dir`: the kernel's files vanish with the
/// directory, a fixture's do not.
fn remove_files(dir: &Path) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            fs::remove_file(e.path()).unwrap();
        }
    }
}

#[test]
fn v2_tree_enables_controllers_writes_every_knob_and_clamps_with_a_report() {
    let fx = v2_fixture();
    let base = fx.cg.join("work");
    let all = Controller::ALL;
    let mut tree = KnobTree::create(&fx.hier, &all, "tact-test-v2", Some("/work")).unwrap();
    let top = base.join("tact-test-v2");
    assert!(top.is_dir());
    assert_eq!(
        read(&base.join("cgroup.subtree_control")),
        "+cpu\n+memory\n+io\n",
        "one write per controller, so a failure names its controller"
    );
    // What the kernel then shows. A second tree of the same name is refused, and leaves the
    // first alone: it finds the controllers enabled, so it takes none back.
    write(&base.join("cgroup.subtree_control"), "cpu io memory\n");
    assert!(KnobTree::create(&fx.hier, &all, "tact-test-v2", Some("/work")).is_err());
    assert!(top.is_dir());
    assert_eq!(
        read(&base.join("cgroup.subtree_control")),
        "cpu io memory\n"
    );

    // Nested nodes (the tree mirror): the parent gets the controllers before its first child.
    kernel_files(&top, "cpu io memory\n", true);
    for bad in ["", "..", "a/b", ".hidden", "sp ace"] {
        assert!(tree.add_node(KnobTree::ROOT, bad).is_err(), "{bad:?}");
    }
    let a = tree.add_node(KnobTree::ROOT, "a").unwrap();
    assert_eq!(
        read(&top.join("cgroup.subtree_control")),
        "+cpu\n+memory\n+io\n"
    );
    assert!(tree.add_node(KnobTree::ROOT, "a").is_err(), "duplicate");
    kernel_files(&top.join("a"), "cpu io memory\n", true);
    let b = tree.add_node(a, "b").unwrap();
    assert_eq!(
        tree.node_dir(b, Controller::Memory).unwrap(),
        top.join("a/b")
    );
    kernel_files(&top.join("a/b"), "cpu io memory\n", true);
    // A flat leaf without iocost: the disk weight goes to io.bfq.weight.
    let c = tree.add_node(KnobTree::ROOT, "c").unwrap();
    kernel_files(&top.join("c"), "cpu io memory\n", false);

    // CPU: cpu.weight, 1..=10000.
    assert_eq!(tree.cpu_weight_range().unwrap(), (1, 10_000));
    let w = tree.set_cpu_weight(b, 250).unwrap();
    assert_eq!(
        (w.file.clone(), w.written.as_str()),
        (top.join("a/b/cpu.weight"), "250")
    );
    assert!(w.clamp.is_none() && w.caveat.is_none());
    assert_eq!(read(&top.join("a/b/cpu.weight")), "250");
    let w = tree.set_cpu_weight(a, 0).unwrap();
    let clamp = w.clamp.expect("0 is below the range");
    assert_eq!((clamp.requested, clamp.applied, clamp.min), (0, 1, 1));
    assert_eq!(read(&top.join("a/cpu.weight")), "1");
    let w = tree.set_cpu_weight(a, 50_000).unwrap();
    assert_eq!(
        (w.clamp.unwrap().applied, w.written.as_str()),
        (10_000, "10000")
    );

    // Memory: memory.min on hard paths, memory.low for soft entitlements, the other one 0.
    let ws = tree
        .set_mem_protection(b, MemProtection::Hard(2_048_000))
        .unwrap();
    assert_eq!(ws.len(), 2);
    assert_eq!(read(&top.join("a/b/memory.min")), "2048000");
    assert_eq!(read(&top.join("a/b/memory.low")), "0");
    // A child's protection counts only up to its parent's: each node above, up to the top,
    // gets the sum of its children's.
    for dir in [top.join("a"), top.clone()] {
        assert_eq!(
            read(&dir.join("memory.min")),
            "2048000",
            "{}",
            dir.display()
        );
        assert_eq!(read(&dir.join("memory.low")), "0", "{}", dir.display());
    }
    assert!(ws.iter().all(|w| w.caveat.is_none()));
    // BASE, not tact's to change, given less than that: said, naming the file.
    write(&base.join("memory.min"), "0\n");
    write(&base.join("memory.low"), "max\n");
    let ws = tree
        .set_mem_protection(b, MemProtection::Hard(2_048_000))
        .unwrap();
    let caveat = ws[0]
        .caveat
        .as_deref()
        .expect("BASE's memory.min caps the floors");
    assert!(
        caveat.contains("work/memory.min is 0") && caveat.contains("2048000 bytes"),
        "{caveat}"
    );
    write(&base.join("memory.min"), "max\n");
    let ws = tree
        .set_mem_protection(b, MemProtection::Hard(2_048_000))
        .unwrap();
    assert!(ws.iter().all(|w| w.caveat.is_none()));
    tree.set_mem_protection(b, MemProtection::Soft(1_433_600))
        .unwrap();
    assert_eq!(read(&top.join("a/b/memory.min")), "0");
    assert_eq!(read(&top.join("a/b/memory.low")), "1433600");
    tree.set_mem_protection(b, MemProtection::None).unwrap();
    assert_eq!(read(&top.join("a/b/memory.low")), "0");
    let ws = tree
        .set_mem_protection(a, MemProtection::Hard(u64::MAX))
        .unwrap();
    assert_eq!(ws[0].clamp.unwrap().applied, i64::MAX as u64);
    assert!(
        ws.iter().all(|w| w.caveat.is_none()),
        "v2 floors are floors"
    );
    // The limit: bytes, or "max" to remove it.
    let w = tree.set_mem_limit(c, Some(64 << 20)).unwrap();
    assert_eq!(
        (w.written.as_str(), w.file.clone()),
        ("67108864", top.join("c/memory.max"))
    );
    assert_eq!(read(&top.join("c/memory.max")), "67108864");
    tree.set_mem_limit(c, None).unwrap();
    assert_eq!(read(&top.join("c/memory.max")), "max");

    // Disk: io.weight ("default N", 1..=10000) where it exists, else io.bfq.weight (1..=1000).
    // Beside io.weight, io.bfq.weight gets the same weight on its scale (for disks using bfq).
    assert_eq!(tree.disk_knob(b).unwrap(), DiskKnob::IoWeight);
    let w = tree.set_disk_weight(b, 800).unwrap();
    assert!(w.clamp.is_none());
    assert_eq!(read(&top.join("a/b/io.weight")), "default 800");
    assert_eq!(read(&top.join("a/b/io.bfq.weight")), "default 80");
    tree.set_disk_weight(b, 4).unwrap();
    assert_eq!(read(&top.join("a/b/io.bfq.weight")), "default 1");
    let w = tree.set_disk_weight(b, 20_000).unwrap();
    assert_eq!(w.clamp.unwrap().applied, 10_000);
    assert_eq!(read(&top.join("a/b/io.bfq.weight")), "default 1000");
    assert_eq!(tree.disk_knob(c).unwrap(), DiskKnob::IoBfqWeight);
    let w = tree.set_disk_weight(c, 5000).unwrap();
    assert_eq!(
        (w.clamp.unwrap().max, w.written.as_str()),
        (1000, "default 1000")
    );
    assert_eq!(read(&top.join("c/io.bfq.weight")), "default 1000");
    // Neither file: an error naming both, the directory, and the fallback.
    fs::remove_file(top.join("c/io.bfq.weight")).unwrap();
    let err = tree.set_disk_weight(c, 100).unwrap_err().to_string();
    for want in [
        "io.weight or io.bfq.weight",
        "tact-test-v2/c",
        "iocost",
        "fallback",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // A missing memory file is reported the same way, and never created.
    fs::remove_file(top.join("c/memory.min")).unwrap();
    let err = tree
        .set_mem_protection(c, MemProtection::Hard(4096))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Unavailable { what, .. } if what.ends_with("c/memory.min")),
        "{err}"
    );
    assert!(!top.join("c/memory.min").exists());

    // A parent without io available: the error says which controller failed and why; the
    // others were enabled.
    write(&top.join("c/cgroup.controllers"), "cpu memory\n");
    let err = tree.add_node(c, "d").unwrap_err().to_string();
    assert!(
        err.contains("io: not in") && err.contains("c/cgroup.controllers"),
        "{err}"
    );
    assert!(!err.contains("cpu:") && !err.contains("memory:"), "{err}");
    assert_eq!(
        read(&top.join("c/cgroup.subtree_control")),
        "+cpu\n+memory\n"
    );
    assert!(!top.join("c/d").exists());

    // Readers.
    write(
        &top.join("a/b/cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\n",
    );
    assert_eq!(tree.cpu_usage_ns(b).unwrap(), Some(1_500_000));
    write(&top.join("a/b/memory.current"), "2101248\n");
    assert_eq!(tree.mem_usage_bytes(b).unwrap(), 2_101_248);
    write(
        &top.join("a/b/memory.events"),
        "low 0\nhigh 0\nmax 7\noom 0\noom_kill 0\n",
    );
    assert_eq!(tree.mem_limit_hits(b).unwrap(), 7);
    write(
        &top.join("a/b/memory.stat"),
        "anon 4096\nfile 8192\nshmem 1024\nfile_mapped 0\n",
    );
    assert_eq!(tree.mem_pinned_bytes(b).unwrap(), 5120);
    write(
        &top.join("a/b/io.stat"),
        "8:0 rbytes=4096 wbytes=512 rios=1 wios=1 dbytes=0 dios=0\n\
         254:0 rbytes=8192 wbytes=0 rios=2 wios=0 dbytes=0 dios=0\n",
    );
    assert_eq!(
        tree.disk_bytes(b).unwrap(),
        DiskBytes {
            read: 12_288,
            written: 512
        }
    );
    write(&top.join("a/io.stat"), "8:0 rbytes=x\n");
    let err = tree.disk_bytes(a).unwrap_err().to_string();
    assert!(
        err.contains("a/io.stat:1") && err.contains("rbytes"),
        "{err}"
    );

    // Moves: into a leaf, back to where the process came from, or to tact's own cgroup when
    // that is gone: not to BASE, which enables controllers for its children and so may hold no
    // process (the kernel's no-internal-processes rule).
    tree.move_pid(b, 4242).unwrap();
    tree.move_pid(c, 4243).unwrap();
    assert_eq!(tree.pids(b).unwrap(), vec![4242]);
    tree.release_pid(4242).unwrap();
    assert_eq!(read(&fx.cg.join("elsewhere/cgroup.procs")), "4242");
    tree.release_pid(4243).unwrap();
    assert_eq!(read(&fx.cg.join("service/cgroup.procs")), "4243");
    assert_eq!(read(&base.join("cgroup.procs")), "");
    assert!(matches!(
        tree.move_pid(b, 5000),
        Err(Error::NoProcess { pid: 5000 })
    ));

    // Removing a node removes what is below it first; teardown removes the rest and takes back
    // what it enabled in BASE. (Moving processes out at teardown is tested on the real kernel:
    // a fixture's cgroup.procs would keep its directory busy.)
    remove_files(&top.join("a/b"));
    remove_files(&top.join("a"));
    tree.remove_node(a).unwrap();
    assert!(!top.join("a").exists());
    assert!(tree.set_cpu_weight(b, 100).is_err(), "b went with a");
    assert!(tree.set_cpu_weight(c, 100).is_ok(), "c stays");
    remove_files(&top.join("c"));
    remove_files(&top);
    tree.teardown().unwrap();
    assert!(!top.exists());
    assert_eq!(
        read(&base.join("cgroup.subtree_control")),
        "cpu io memory\n-io\n-memory\n-cpu\n"
    );
    tree.teardown().unwrap(); // idempotent
}

// ---------------------------------------------------------------------------------------------
// v1 on a fixture tree: what this machine's kernel cannot be made to show

#[test]
fn v1_fixture_mirrors_cpuacct_caveats_soft_limits_and_explains_a_missing_bfq() {
    let fs_root = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    let cg = fs_root.path().join("sys/fs/cgroup");
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        write(&cg.join(h).join("cgroup.procs"), "");
    }
    write(
        &proc_root.path().join("self/cgroup"),
        "7:blkio:/\n4:memory:/\n2:cpuacct:/\n1:cpu:/\n0::/\n",
    );
    let reader = ProcReader::with_root(proc_root.path());
    let hier = Hierarchies::detect_in(&fixture("cgroup-v1-blkio"), fs_root.path(), reader).unwrap();
    let mut tree = KnobTree::create(&hier, &Controller::ALL, "tact-test-v1", Some("/")).unwrap();
    let leaf = tree.add_node(KnobTree::ROOT, "leaf").unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert!(cg.join(h).join("tact-test-v1/leaf").is_dir(), "{h}");
    }
    assert_eq!(
        tree.node_dir(leaf, Controller::Io).unwrap(),
        cg.join("blkio/tact-test-v1/leaf")
    );

    // cpu.shares clamps at 2; usage comes from the cpuacct mirror.
    write(&cg.join("cpu/tact-test-v1/leaf/cpu.shares"), "1024\n");
    let w = tree.set_cpu_weight(leaf, 1).unwrap();
    assert_eq!((w.written.as_str(), w.clamp.unwrap().min), ("2", 2));
    write(
        &cg.join("cpuacct/tact-test-v1/leaf/cpuacct.usage"),
        "123456\n",
    );
    assert_eq!(tree.cpu_usage_ns(leaf).unwrap(), Some(123_456));

    // A protected node's soft limit is its entitlement, with the caveat that it is no floor; an
    // unprotected node's is 0, without one.
    let soft = cg.join("memory/tact-test-v1/leaf/memory.soft_limit_in_bytes");
    write(&soft, "9223372036854771712\n");
    let ws = tree
        .set_mem_protection(leaf, MemProtection::Hard(2_048_000))
        .unwrap();
    assert_eq!((ws.len(), read(&soft).as_str()), (1, "2048000"));
    assert!(ws[0].caveat.as_deref().unwrap().contains("not a floor"));
    let ws = tree.set_mem_protection(leaf, MemProtection::None).unwrap();
    assert_eq!((read(&soft).as_str(), ws[0].caveat.as_deref()), ("0", None));
    let limit = cg.join("memory/tact-test-v1/leaf/memory.limit_in_bytes");
    write(&limit, "9223372036854771712\n");
    tree.set_mem_limit(leaf, None).unwrap();
    assert_eq!(read(&limit), "-1");

    // Without the bfq scheduler there is no blkio.bfq.weight: the error says so.
    let err = tree.set_disk_weight(leaf, 100).unwrap_err().to_string();
    for want in [
        "blkio.bfq.weight",
        "non-root",
        "bfq I/O scheduler",
        "fallback",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // Disk bytes: the throttle file counts every device, the closing Total is skipped.
    write(
        &cg.join("blkio/tact-test-v1/leaf/blkio.throttle.io_service_bytes_recursive"),
        "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 12288\n254:0 Async 0\n\
         254:0 Discard 0\n254:0 Total 12288\n7:0 Read 100\n7:0 Write 0\nTotal 12388\n",
    );
    assert_eq!(
        tree.disk_bytes(leaf).unwrap(),
        DiskBytes {
            read: 4196,
            written: 8192
        }
    );
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        remove_files(&cg.join(h).join("tact-test-v1/leaf"));
    }
    tree.teardown().unwrap();
    for h in ["cpu", "cpuacct", "memory", "blkio"] {
        assert!(!cg.join(h).join("tact-test-v1").exists(), "{h}");
    }
}

// ---------------------------------------------------------------------------------------------
// v1 on this machine's hierarchies

/// Removes, also when the test panics, any `tact-test-*` directory the test left in the real
/// hierarchies, deepest first. Declared before the children and the tree, it is dropped after
/// them: the tree's own teardown runs first, and the children are dead.
struct Leftovers(Vec<PathBuf>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        fn remove(dir: &Path) {
            if let Ok(entries) = fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        remove(&e.path());
                    }
                }
            }
            let _ = fs::remove_dir(dir);
        }
        for dir in &self.0 {
            if dir.exists() {
                eprintln!("removing leftover {}", dir.display());
                remove(dir);
            }
        }
    }
}

/// The v1 hierarchies of this machine, or why the real test cannot run here.
fn real_v1() -> Result<Hierarchies, String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: creating cgroups needs root".into());
    }
    let hier = Hierarchies::detect().map_err(|e| e.to_string())?;
    for c in Controller::ALL {
        let m = hier.get(c).map_err(|e| e.to_string())?;
        if m.version != CgroupVersion::V1 {
            return Err(format!("{c:?} is on cgroup v2 here (covered by fixtures)"));
        }
    }
    Ok(hier)
}

/// The lines of `/proc/PID/cgroup` for the hierarchies the test uses.
fn cgroup_lines(pid: i32) -> Vec<String> {
    read(&PathBuf::from(format!("/proc/{pid}/cgroup")))
        .lines()
        .filter(|l| {
            ["cpu", "cpuacct", "memory", "blkio"].contains(&l.split(':').nth(1).unwrap_or(""))
        })
        .map(str::to_string)
        .collect()
}

/// A daemon SIGKILLed and restarted adopts its clients from the dead one's tree
/// (`tact-tickets-DEADPID`): that tree is no place to send them back to (it kept the old knobs,
/// and would never be removed while they lived in it), and it goes once they have left it.
#[test]
fn a_process_found_in_a_dead_tacts_tree_is_not_sent_back_there() {
    let hier = match real_v1() {
        Ok(h) => h,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let base = format!("tact-test-{}-restart", std::process::id());
    let mut mounts: Vec<PathBuf> = Controller::ALL
        .iter()
        .map(|&c| hier.get(c).unwrap().mount.dir.clone())
        .collect();
    mounts.extend(hier.cpuacct.iter().map(|m| m.dir.clone()));
    mounts.sort();
    mounts.dedup();
    let bases: Vec<PathBuf> = mounts.iter().map(|m| m.join(&base)).collect();
    let _leftovers = Leftovers(bases.clone());
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let old = format!("tact-tickets-{dead_pid}");
    let sleeper = Reaped(sh("exec sleep 60"));
    let pid = sleeper.0.id() as i32;
    for b in &bases {
        fs::create_dir_all(b.join(&old).join("pid1")).unwrap();
        fs::write(b.join(&old).join("pid1/cgroup.procs"), pid.to_string()).unwrap();
    }
    let own = cgroup_lines(std::process::id() as i32);

    let name = format!("tact-test-{}-tree", std::process::id());
    let mut tree =
        KnobTree::create(&hier, &Controller::ALL, &name, Some(&format!("/{base}"))).unwrap();
    let leaf = tree.add_node(KnobTree::ROOT, "pid1").unwrap();
    tree.move_pid(leaf, pid).unwrap();
    for b in &bases {
        assert!(!b.join(&old).exists(), "{}", b.join(&old).display());
    }
    tree.release_pid(pid).unwrap();
    assert_eq!(cgroup_lines(pid), own, "where tact runs, not the dead tree");
    tree.teardown().unwrap();
}

#[test]
fn v1_tree_on_this_machine_writes_reads_moves_and_leaves_nothing() {
    let hier = match real_v1() {
        Ok(h) => h,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let name = format!("tact-test-{}-knobs", std::process::id());
    let mut mounts: Vec<PathBuf> = Controller::ALL
        .iter()
        .map(|&c| hier.get(c).unwrap().mount.dir.clone())
        .collect();
    mounts.extend(hier.cpuacct.iter().map(|m| m.dir.clone()));
    let tops: Vec<PathBuf> = mounts.iter().map(|m| m.join(&name)).collect();
    let _leftovers = Leftovers(tops.clone());
    let sleeper = Reaped(sh("exec sleep 60"));
    let spinner = Reaped(sh("while :; do :; done"));
    let (sleep_pid, spin_pid) = (sleeper.0.id() as i32, spinner.0.id() as i32);
    let (sleep_before, spin_before) = (cgroup_lines(sleep_pid), cgroup_lines(spin_pid));

    // Under each hierarchy's root, never under the cgroups this machine already uses.
    let mut tree = KnobTree::create(&hier, &Controller::ALL, &name, Some("/")).unwrap();
    let a = tree.add_node(KnobTree::ROOT, "a").unwrap();
    let b = tree.add_node(a, "b").unwrap();
    let c = tree.add_node(KnobTree::ROOT, "c").unwrap();
    for top in &tops {
        assert!(
            top.join("a/b").is_dir() && top.join("c").is_dir(),
            "{}",
            top.display()
        );
    }

    // Every knob, read back from the kernel.
    let file = |node, ctl, f: &str| tree.node_dir(node, ctl).unwrap().join(f);
    for (node, w) in [(a, 2048), (b, 512), (c, 1024)] {
        tree.set_cpu_weight(node, w).unwrap();
        assert_eq!(
            read(&file(node, Controller::Cpu, "cpu.shares")).trim(),
            w.to_string()
        );
    }
    let w = tree.set_cpu_weight(c, 1).unwrap();
    assert_eq!(w.clamp.unwrap().applied, 2);
    assert_eq!(read(&file(c, Controller::Cpu, "cpu.shares")).trim(), "2");

    let mib = 1u64 << 20;
    let ws = tree
        .set_mem_protection(b, MemProtection::Hard(64 * mib))
        .unwrap();
    assert!(ws[0].caveat.is_some());
    let soft = |node| {
        read(&file(
            node,
            Controller::Memory,
            "memory.soft_limit_in_bytes",
        ))
    };
    assert_eq!(soft(b).trim(), (64 * mib).to_string());
    tree.set_mem_protection(c, MemProtection::None).unwrap();
    assert_eq!(soft(c).trim(), "0");
    let limit = |node| read(&file(node, Controller::Memory, "memory.limit_in_bytes"));
    tree.set_mem_limit(c, Some(256 * mib)).unwrap();
    assert_eq!(limit(c).trim(), (256 * mib).to_string());
    tree.set_mem_limit(c, None).unwrap();
    assert!(
        limit(c).trim().parse::<u64>().unwrap() > 1 << 60,
        "unlimited again"
    );

    match tree.disk_knob(b) {
        Ok(knob) => {
            assert_eq!(knob, DiskKnob::BlkioBfqWeight);
            tree.set_disk_weight(b, 500).unwrap();
            assert_eq!(
                read(&file(b, Controller::Io, "blkio.bfq.weight")).trim(),
                "500"
            );
            let w = tree.set_disk_weight(a, 5000).unwrap();
            assert_eq!(w.clamp.unwrap().applied, 1000);
            assert_eq!(
                read(&file(a, Controller::Io, "blkio.bfq.weight")).trim(),
                "1000"
            );
        }
        Err(e) => {
            // Not a pass by silence: the kernel lacks the file, and the error must say why.
            println!("bfq not loaded here, blkio.bfq.weight not tested: {e}");
            assert!(e.to_string().contains("bfq I/O scheduler"), "{e}");
        }
    }

    // A sleeping child moves in (every hierarchy) and back out to where it was.
    tree.move_pid(b, sleep_pid).unwrap();
    assert_eq!(tree.pids(b).unwrap(), vec![sleep_pid]);
    let inside = cgroup_lines(sleep_pid);
    assert_eq!(inside.len(), 4, "{inside:?}");
    for line in &inside {
        assert!(line.ends_with(&format!("/{name}/a/b")), "{line}");
    }
    tree.release_pid(sleep_pid).unwrap();
    assert_eq!(cgroup_lines(sleep_pid), sleep_before);
    assert!(tree.pids(b).unwrap().is_empty());

    // Usage: a spinning child in c shows CPU time there and in the (hierarchical) root.
    tree.move_pid(c, spin_pid).unwrap();
    assert!(wait_until(PATIENCE, || tree
        .cpu_usage_ns(c)
        .unwrap()
        .is_some_and(|ns| ns > 10_000_000)));
    assert!(
        tree.cpu_usage_ns(KnobTree::ROOT).unwrap().unwrap()
            >= tree.cpu_usage_ns(c).unwrap().unwrap()
    );
    tree.mem_usage_bytes(c).unwrap();
    tree.mem_limit_hits(c).unwrap();
    tree.mem_pinned_bytes(c).unwrap();
    let io = tree.disk_bytes(c).unwrap();
    assert!(io.read <= tree.disk_bytes(KnobTree::ROOT).unwrap().read);

    // Removing a subtree, then teardown with the spinner still inside: it is moved back, and
    // nothing of the tree is left in any hierarchy.
    tree.remove_node(a).unwrap();
    for top in &tops {
        assert!(!top.join("a").exists() && top.join("c").is_dir());
    }
    tree.teardown().unwrap();
    for top in &tops {
        assert!(!top.exists(), "{}", top.display());
    }
    assert_eq!(cgroup_lines(spin_pid), spin_before);
    assert!(exists(ProcReader::new().stat(spin_pid).unwrap().id()));
}

/// Direct reads by a process in a fresh v1 blkio cgroup show in `disk_bytes`, on a disk no
/// cgroup throttles. Since Linux 6.x blk-throttle counts a disk's bios per cgroup only once it
/// has been set up there, which a limit does; the tree sets it up with "no limit" (on 6.18 the
/// tickets run's reader showed 0 bytes before).
#[test]
fn v1_disk_bytes_count_direct_reads_on_a_disk_nobody_throttles() {
    let hier = match real_v1() {
        Ok(h) => h,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let name = format!("tact-test-{}-diskbytes", std::process::id());
    let top = hier.get(Controller::Io).unwrap().mount.dir.join(&name);
    let _leftovers = Leftovers(vec![top.clone()]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("data");
    fs::write(&data, vec![7u8; 1 << 20]).unwrap();

    let mut tree = KnobTree::create(&hier, &[Controller::Io], &name, Some("/")).unwrap();
    let node = tree.add_node(KnobTree::ROOT, "reader").unwrap();
    // The reader waits for its move before it reads.
    let ready = dir.path().join("moved");
    let reader = Reaped(sh(&format!(
        "while [ ! -e {ready} ]; do sleep 0.01; done; \
         dd if={data} of=/dev/null bs=4k iflag=direct 2>/dev/null; exec sleep 60",
        ready = ready.display(),
        data = data.display()
    )));
    tree.move_pid(node, reader.0.id() as i32).unwrap();
    fs::write(&ready, "").unwrap();
    assert!(
        wait_until(PATIENCE, || tree
            .disk_bytes(node)
            .is_ok_and(|b| b.read >= 1 << 20)),
        "1 MiB read with O_DIRECT, counted: {:?}",
        tree.disk_bytes(node)
    );
    // Nothing is limited: the knob lists no device.
    let limits = fs::read_to_string(top.join("blkio.throttle.read_bps_device")).unwrap();
    assert!(limits.trim().is_empty(), "{limits}");
    drop(reader);
    tree.teardown().unwrap();
    assert!(!top.exists());
}
