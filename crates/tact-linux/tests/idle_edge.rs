//! The OS edge of `tact run --idle` against fixture trees and real processes: disk and network
//! probes (every parser, including malformed input), SCHED_IDLE and ioprio on children the test
//! starts, `cpu.idle` (v2 on fixtures; v1 for real under a `tact-test-*` cgroup the test removes),
//! and the htb actuator inside network namespaces the test creates and deletes. Tests that need
//! root print why they are skipped.

mod common;

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use common::*;
use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuHierarchy};
use tact_linux::actuate::cpu_idle::CpuIdle;
use tact_linux::actuate::htb::{self, BgMatch, HtbPlan, Tc, BG_CLASS, DSCP_LE, FG_CLASS};
use tact_linux::actuate::ioprio::{self, IoClass, IoPrio};
use tact_linux::actuate::sched_idle;
use tact_linux::probe::block_device::BlockResolver;
use tact_linux::probe::caps::{self, Capability};
use tact_linux::probe::diskstats::{DiskDelta, DiskstatsReader};
use tact_linux::probe::netstats::{self, NetCounters, NetReader};
use tact_linux::{Error, ProcReader};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/idle")
        .join(name)
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

// ---------------------------------------------------------------------------------------------
// Disk probe

#[test]
fn diskstats_parses_every_kernel_layout_and_gives_deltas() {
    let before = DiskstatsReader::with_path(fixture("diskstats"));
    let all = before.read_all().unwrap();
    let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["loop0", "sda", "sda1", "sdb", "dm-0"]);
    let sda = before.read("sda").unwrap();
    assert_eq!((sda.major, sda.minor), (8, 0));
    assert_eq!((sda.reads, sda.sectors_read), (56598, 4228282));
    assert_eq!((sda.writes, sda.sectors_written), (12515, 11636128));
    assert_eq!(
        (sda.in_flight, sda.io_ticks_ms, sda.time_in_queue_ms),
        (2, 10524, 101653)
    );
    // The 14-field layout of kernels before 4.18 reads the same.
    let sdb = before.read("sdb").unwrap();
    assert_eq!((sdb.reads, sdb.writes, sdb.io_ticks_ms), (100, 200, 12));

    let after = DiskstatsReader::with_path(fixture("diskstats-later"));
    let d = after.read("sda").unwrap().since(&sda);
    assert_eq!(
        d,
        DiskDelta {
            reads: 10,
            writes: 5,
            bytes_read: 80 * 512,
            bytes_written: 80 * 512,
            io_ticks_ms: 20,
            time_in_queue_ms: 47,
            in_flight: 0,
        }
    );
    assert_eq!(d.bytes(), 160 * 512);
    assert!(d.active());
    // Counters that went backwards (a device added again) read as idle, not as a huge burst.
    let back = after.read("sdb").unwrap().since(&sdb);
    assert_eq!(back, DiskDelta::default());
    assert!(!back.active());
    let dm = after.read("dm-0").unwrap();
    assert!(!dm.since(&before.read("dm-0").unwrap()).active());

    let err = before.read("nvme0n1").unwrap_err();
    assert!(matches!(err, Error::UnknownDevice { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("`nvme0n1`") && msg.contains("sda1, sdb"),
        "{msg}"
    );
}

#[test]
fn diskstats_errors_name_the_file_and_line() {
    let msg = DiskstatsReader::with_path(fixture("diskstats-short"))
        .read_all()
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("diskstats-short:2:") && msg.contains("at least 11 counters"),
        "{msg}"
    );
    let msg = DiskstatsReader::with_path(fixture("diskstats-bad-number"))
        .read("sda")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("diskstats-bad-number:2:") && msg.contains("sectors read `eight`"),
        "{msg}"
    );
    let msg = DiskstatsReader::with_path(fixture("no-such-file"))
        .read_all()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("no-such-file"), "{msg}");
}

/// A sysfs tree: sda (BFQ) with partition sda1, sdb (mq-deadline), dm-0 over sda1 and sdb, and
/// loop0 with a queue that offers no choice.
fn block_sysfs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path();
    let devices = sys.join("devices/virtual/block");
    let device = |rel: &str, dev: &str, sched: Option<&str>, partition: bool| {
        let d = devices.join(rel);
        write(&d.join("dev"), &format!("{dev}\n"));
        if let Some(s) = sched {
            write(&d.join("queue/scheduler"), &format!("{s}\n"));
        }
        if partition {
            write(&d.join("partition"), "1\n");
        }
        let name = Path::new(rel).file_name().unwrap().to_str().unwrap();
        let up = "../../devices/virtual/block/";
        fs::create_dir_all(sys.join("class/block")).unwrap();
        fs::create_dir_all(sys.join("dev/block")).unwrap();
        symlink(format!("{up}{rel}"), sys.join("class/block").join(name)).unwrap();
        symlink(format!("{up}{rel}"), sys.join("dev/block").join(dev)).unwrap();
    };
    device("sda", "8:0", Some("mq-deadline kyber [bfq] none"), false);
    device("sda/sda1", "8:1", None, true);
    device("sdb", "8:16", Some("[mq-deadline] kyber bfq none"), false);
    device("dm-0", "253:0", Some("none"), false);
    device("loop0", "7:0", Some("none"), false);
    device("loop1", "7:1", Some("kyber none"), false);
    fs::create_dir_all(devices.join("dm-0/slaves")).unwrap();
    symlink("../../sda/sda1", devices.join("dm-0/slaves/sda1")).unwrap();
    symlink("../../sdb", devices.join("dm-0/slaves/sdb")).unwrap();
    dir
}

#[test]
fn disk_specs_resolve_to_devices_and_their_physical_disks() {
    let sys = block_sysfs();
    let r = BlockResolver::with_roots(sys.path(), fixture("mountinfo"));
    let sda = r.resolve("sda").unwrap();
    assert_eq!((sda.name.as_str(), sda.major, sda.minor), ("sda", 8, 0));
    assert!(!sda.partition);
    assert_eq!(sda.disks, ["sda"]);
    assert_eq!(r.resolve("/dev/sda").unwrap(), sda);
    // A partition maps to its whole disk, where the I/O scheduler is.
    let part = r.resolve("/dev/sda1").unwrap();
    assert_eq!(
        (part.name.as_str(), part.minor, part.partition),
        ("sda1", 1, true)
    );
    assert_eq!(part.disks, ["sda"]);
    // dm resolves through its slaves to every disk below.
    let dm = r.resolve("dm-0").unwrap();
    assert_eq!(dm.disks, ["sda", "sdb"]);
    assert_eq!(r.by_number(253, 0).unwrap(), dm);

    // Paths: the longest mount point that is a component-wise prefix.
    assert_eq!(r.resolve("/").unwrap(), part);
    assert_eq!(r.resolve("/home/me").unwrap(), part);
    assert_eq!(r.resolve("/var/lib").unwrap(), dm);
    assert_eq!(r.resolve("/var/lib/db/x").unwrap(), dm);
    assert_eq!(r.resolve("/var/libx/y").unwrap().name, "sdb");
    assert_eq!(r.resolve("/srv/my disk/f").unwrap().name, "sdb"); // \040 in mountinfo
    let msg = r.resolve("/var/lib/tmp/f").unwrap_err().to_string();
    assert!(msg.contains("tmpfs") && msg.contains("0:40"), "{msg}");

    for bad in ["sdz", "/dev/tact-no-such-disk", "var/lib", "", "../sda"] {
        let err = r.resolve(bad).unwrap_err();
        assert!(matches!(err, Error::UnknownDevice { .. }), "{bad}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("dm-0, loop0, loop1, sda, sda1, sdb"), "{msg}");
    }
    assert!(matches!(
        r.by_number(9, 9),
        Err(Error::UnknownDevice { .. })
    ));

    let msg = BlockResolver::with_roots(sys.path(), fixture("mountinfo-malformed"))
        .resolve("/x")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("mountinfo-malformed:2:"), "{msg}");
}

#[test]
fn schedulers_are_read_and_the_idle_class_needs_bfq() {
    let sys = block_sysfs();
    let r = BlockResolver::with_roots(sys.path(), fixture("mountinfo"));
    let sda = r.scheduler("sda").unwrap();
    assert_eq!(sda.active, "bfq");
    assert_eq!(sda.available, ["mq-deadline", "kyber", "bfq", "none"]);
    assert!(sda.is_bfq());
    assert!(!r.scheduler("sdb").unwrap().is_bfq());
    assert_eq!(r.scheduler("loop0").unwrap().active, "none");

    ioprio::check_idle_class(&r, &r.resolve("/dev/sda1").unwrap()).unwrap();
    let err = ioprio::check_idle_class(&r, &r.resolve("/var/lib").unwrap()).unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("disk sdb uses the mq-deadline scheduler")
            && msg.contains("echo bfq > /sys/block/sdb/queue/scheduler"),
        "{msg}"
    );
    let msg = ioprio::check_idle_class(&r, &r.resolve("loop0").unwrap())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("offers no bfq"), "{msg}");
    // No active scheduler marked: a parse error naming the file.
    let msg = r.scheduler("loop1").unwrap_err().to_string();
    assert!(msg.contains("loop1/queue/scheduler:1:"), "{msg}");
    // A partition has no queue of its own, nor has a bio-based device (zram, some dm).
    let err = r.scheduler("sda1").unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("sda1/queue/scheduler"), "{err}");
}

#[test]
fn the_machines_disks_resolve_and_their_counters_read() {
    let stats = DiskstatsReader::new();
    let r = BlockResolver::new();
    let all = stats.read_all().unwrap();
    for d in &all {
        // Devices can come and go; those that sysfs knows must agree with diskstats.
        if let Ok(dev) = r.by_name(&d.name) {
            assert_eq!((dev.major, dev.minor), (d.major, d.minor), "{}", d.name);
            for disk in &dev.disks {
                match r.scheduler(disk) {
                    Ok(_) | Err(Error::Unavailable { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    // The root filesystem is on a disk, or on something without one (overlay in a container).
    match r.resolve("/") {
        Ok(dev) => {
            stats.read(&dev.name).unwrap();
        }
        Err(Error::UnknownDevice { .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Network probe

fn net_sysfs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let iface = |name: &str, rx: u64, tx: u64, speed: &str| {
        let d = dir.path().join("class/net").join(name);
        write(&d.join("statistics/rx_bytes"), &format!("{rx}\n"));
        write(&d.join("statistics/tx_bytes"), &format!("{tx}\n"));
        write(&d.join("statistics/rx_packets"), &format!("{}\n", rx / 100));
        write(&d.join("statistics/tx_packets"), &format!("{}\n", tx / 100));
        write(&d.join("speed"), speed);
    };
    iface("eth0", 10_000, 20_000, "1000\n");
    iface("veth0", 500, 700, "-1\n");
    iface("lo", 0, 0, "");
    write(
        &dir.path().join("class/net/bad0/statistics/rx_bytes"),
        "lots\n",
    );
    dir
}

#[test]
fn interface_counters_speeds_and_validation() {
    let sys = net_sysfs();
    let r = NetReader::with_roots(sys.path(), ProcReader::with_root("/nonexistent"));
    assert_eq!(r.interfaces().unwrap(), ["bad0", "eth0", "lo", "veth0"]);
    let eth = r.counters("eth0").unwrap();
    assert_eq!(
        eth,
        NetCounters {
            rx_bytes: 10_000,
            tx_bytes: 20_000,
            rx_packets: 100,
            tx_packets: 200,
        }
    );
    let earlier = NetCounters {
        rx_bytes: 9_000,
        tx_bytes: 20_000,
        rx_packets: 90,
        tx_packets: 300,
    };
    let d = eth.since(&earlier);
    assert_eq!((d.bytes(), d.packets()), (1_000, 10));
    assert_eq!(r.speed_bits("eth0").unwrap(), Some(1_000_000_000));
    assert_eq!(r.speed_bits("veth0").unwrap(), None);
    assert_eq!(r.speed_bits("lo").unwrap(), None);

    for bad in ["eth9", "", "../eth0"] {
        let err = r.counters(bad).unwrap_err();
        assert!(matches!(err, Error::UnknownDevice { .. }), "{err}");
        assert!(err.to_string().contains("bad0, eth0, lo, veth0"), "{err}");
    }
    let msg = r.counters("bad0").unwrap_err().to_string();
    assert!(
        msg.contains("bad0/statistics/rx_bytes:1:") && msg.contains("`lots`"),
        "{msg}"
    );
}

#[test]
fn the_jobs_own_traffic_comes_from_its_own_namespace() {
    let sys = net_sysfs();
    let proc = tempfile::tempdir().unwrap();
    let p = proc.path();
    for (who, ns) in [
        ("self", "4026531840"),
        ("42", "4026532999"),
        ("43", "4026531840"),
    ] {
        fs::create_dir_all(p.join(who).join("ns")).unwrap();
        symlink(format!("net:[{ns}]"), p.join(who).join("ns/net")).unwrap();
    }
    write(
        &p.join("42/net/dev"),
        &fs::read_to_string(fixture("net_dev")).unwrap(),
    );
    write(
        &p.join("43/net/dev"),
        &fs::read_to_string(fixture("net_dev-malformed")).unwrap(),
    );
    let r = NetReader::with_roots(sys.path(), ProcReader::with_root(p));
    assert!(r.own_namespace(42).unwrap());
    assert!(!r.own_namespace(43).unwrap());
    assert!(matches!(
        r.own_namespace(44),
        Err(Error::NoProcess { pid: 44 })
    ));
    // lo is left out: a job's loopback traffic never reaches a link.
    assert_eq!(
        r.job_counters(42).unwrap(),
        NetCounters {
            rx_bytes: 5_000_300,
            tx_bytes: 7_000_400,
            rx_packets: 4_003,
            tx_packets: 5_004,
        }
    );
    let msg = r.job_counters(43).unwrap_err().to_string();
    assert!(
        msg.contains("43/net/dev:4:") && msg.contains("16 counters"),
        "{msg}"
    );
    let path = fixture("net_dev");
    let rows = netstats::parse_net_dev(&path, &fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(rows.len(), 3);
}

#[test]
fn the_machines_interfaces_read() {
    let r = NetReader::new();
    assert!(r.interfaces().unwrap().contains(&"lo".to_string()));
    r.counters("lo").unwrap();
    let msg = r.counters("tact-nosuch0").unwrap_err().to_string();
    assert!(msg.contains("lo"), "{msg}");
    let me = std::process::id() as i32;
    assert!(!r.own_namespace(me).unwrap());
    r.job_counters(me).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Capabilities

#[test]
fn capabilities_come_from_capeff() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("7/status"),
        "Name:\tx\nCapEff:\t0000000000001000\n",
    );
    write(&dir.path().join("8/status"), "Name:\tx\nCapEff:\tzz\n");
    write(&dir.path().join("9/status"), "Name:\tx\n");
    let r = ProcReader::with_root(dir.path());
    let caps = caps::effective_caps(&r, "7").unwrap();
    assert_eq!(caps, 1 << Capability::NetAdmin as u32);
    assert!(caps & (1 << Capability::SysNice as u32) == 0);
    let msg = caps::effective_caps(&r, "8").unwrap_err().to_string();
    assert!(msg.contains("8/status:2:"), "{msg}");
    let msg = caps::effective_caps(&r, "9").unwrap_err().to_string();
    assert!(msg.contains("no CapEff"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// SCHED_IDLE and ioprio on real children

/// A `sh` that starts a `sleep` child once a line arrives on its stdin, so the test can change
/// the shell and then watch a child forked afterwards inherit the change.
struct LateFork {
    child: Reaped,
    pid: i32,
}

impl LateFork {
    fn start() -> LateFork {
        let child = Reaped(sh("read x; sleep 60 & wait"));
        let pid = child.0.id() as i32;
        assert!(wait_until(PATIENCE, || tree_ids(pid).len() == 1));
        LateFork { child, pid }
    }

    /// Lets the shell fork its child; returns the whole tree (shell first) and a killer for it.
    fn fork(&mut self) -> (Vec<tact_linux::ProcId>, Killer) {
        use std::io::Write;
        writeln!(self.child.0.stdin.as_mut().unwrap(), "go").unwrap();
        assert!(
            wait_until(PATIENCE, || tree_ids(self.pid).len() == 2),
            "sh did not start its sleep"
        );
        let ids = tree_ids(self.pid);
        let killer = Killer::new(&ids);
        (ids, killer)
    }
}

#[test]
fn sched_idle_is_inherited_by_the_tree_and_restored() {
    let mut job = LateFork::start();
    let reader = ProcReader::new();
    let shell = tree_ids(job.pid);
    let before = sched_idle::thread_policy(job.pid).unwrap();
    assert!(!before.is_idle());
    let saved = sched_idle::make_idle(&reader, &shell).unwrap();
    assert_eq!(saved.len(), 1);
    assert!(sched_idle::thread_policy(job.pid).unwrap().is_idle());
    let (ids, killer) = job.fork();
    assert!(sched_idle::thread_policy(ids[1].pid).unwrap().is_idle());
    // What is saved survives the state file.
    let json = serde_json::to_string(&saved).unwrap();
    let back: Vec<sched_idle::SavedPolicies> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, saved);

    match sched_idle::check_leave(job.pid) {
        Ok(()) => {
            sched_idle::restore(&reader, &back, &ids).unwrap();
            for id in &ids {
                assert_eq!(sched_idle::thread_policy(id.pid).unwrap(), before);
            }
        }
        Err(e) => {
            // Neither CAP_SYS_NICE nor a high enough RLIMIT_NICE: the error says so up front.
            assert!(matches!(e, Error::Unavailable { .. }), "{e}");
            assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
            println!("skipping the restore: {e}");
        }
    }
    drop(killer);
    // Gone processes: nothing to do, and no error.
    assert!(wait_until(PATIENCE, || ids.iter().all(|&id| !exists(id))));
    sched_idle::restore(&reader, &back, &ids).unwrap();
    assert!(sched_idle::make_idle(&reader, &ids).unwrap().is_empty());
}

#[test]
fn the_idle_io_class_is_inherited_by_the_tree_and_restored() {
    let mut job = LateFork::start();
    let reader = ProcReader::new();
    let shell = tree_ids(job.pid);
    let before = ioprio::thread_ioprio(job.pid).unwrap();
    assert_ne!(before.class(), IoClass::Idle);
    let saved = ioprio::make_idle(&reader, &shell).unwrap();
    let now = ioprio::thread_ioprio(job.pid).unwrap();
    assert_eq!(
        (now, now.class(), now.level()),
        (IoPrio::IDLE, IoClass::Idle, 0)
    );
    let (ids, killer) = job.fork();
    assert_eq!(ioprio::thread_ioprio(ids[1].pid).unwrap(), IoPrio::IDLE);
    // Back to best-effort is unprivileged.
    ioprio::restore(&reader, &saved, &ids).unwrap();
    for id in &ids {
        assert_eq!(ioprio::thread_ioprio(id.pid).unwrap(), before);
    }
    drop(killer);
    assert!(wait_until(PATIENCE, || ids.iter().all(|&id| !exists(id))));
    ioprio::restore(&reader, &saved, &ids).unwrap();
    assert!(ioprio::make_idle(&reader, &ids).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// cpu.idle

/// A cgroup v2 machine under a temporary root: `tact.slice` with cpu enabled for its children,
/// `job` below it with `cpu.idle`, and `plain` whose children get no cpu controller.
fn v2_tree() -> (tempfile::TempDir, CpuHierarchy) {
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("sys/fs/cgroup");
    write(
        &cg.join("cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    write(
        &cg.join("tact.slice/cgroup.subtree_control"),
        "cpu memory\n",
    );
    write(&cg.join("tact.slice/job/cpu.idle"), "0\n");
    write(&cg.join("tact.slice/odd/cpu.idle"), "2\n");
    write(&cg.join("plain/cgroup.subtree_control"), "memory\n");
    fs::create_dir_all(cg.join("plain/job")).unwrap();
    let mountinfo =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup-v2/mountinfo");
    let hier =
        CpuHierarchy::detect_in(&mountinfo, dir.path(), ProcReader::with_root("/proc")).unwrap();
    assert_eq!(hier.version, CgroupVersion::V2);
    (dir, hier)
}

#[test]
fn cpu_idle_on_a_v2_fixture() {
    let (dir, hier) = v2_tree();
    let cg = dir.path().join("sys/fs/cgroup");
    let idle = CpuIdle::open(&hier, &cg.join("tact.slice/job")).unwrap();
    assert!(!idle.get().unwrap());
    idle.set(true).unwrap();
    assert_eq!(fs::read_to_string(idle.file()).unwrap(), "1");
    assert!(idle.get().unwrap());
    idle.set(false).unwrap();
    assert!(!idle.get().unwrap());

    let refuse = |dir: &Path, want: &str| {
        let err = CpuIdle::open(&hier, dir).unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(want), "{msg}");
    };
    refuse(&cg, "root cgroup");
    refuse(Path::new("/tmp"), "not inside the cpu hierarchy");
    refuse(&cg.join("tact.slice/none"), "no such cgroup");
    refuse(&cg.join("plain/job"), "cpu controller is not enabled in");
    refuse(&cg.join("plain/job"), "plain/cgroup.subtree_control");
    let msg = CpuIdle::open(&hier, &cg.join("tact.slice/odd"))
        .unwrap()
        .get()
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("odd/cpu.idle:1:") && msg.contains("`2`"),
        "{msg}"
    );
}

/// Removes a test cgroup (after the test moved nothing into it, or moved it all out).
struct TestCgroup(PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = wait_until(PATIENCE, || {
            fs::remove_dir(&self.0).is_ok() || !self.0.exists()
        });
    }
}

/// A new cgroup below the root of the machine's cpu hierarchy, v1 or v2 (on v2 the root's
/// `cgroup.subtree_control` must have cpu, as systemd and tools/v2vm give it; without it
/// `CpuIdle::open` says so and the test is skipped).
#[test]
fn cpu_idle_on_the_machines_hierarchy() {
    if !is_root() {
        println!("skipped: writing cpu.idle of a new cgroup needs root");
        return;
    }
    let hier = match CpuHierarchy::detect() {
        Ok(h) => h,
        Err(e) => {
            println!("skipped: no cpu cgroup hierarchy: {e}");
            return;
        }
    };
    let dir = hier
        .cpu
        .dir
        .join(format!("tact-test-idle-{}", std::process::id()));
    fs::create_dir(&dir).unwrap();
    let _cleanup = TestCgroup(dir.clone());
    let idle = match CpuIdle::open(&hier, &dir) {
        Ok(idle) => idle,
        Err(e) => {
            println!("skipped: {e}");
            assert!(matches!(e, Error::Unavailable { .. }));
            return;
        }
    };
    assert!(!idle.get().unwrap());
    idle.set(true).unwrap();
    assert!(idle.get().unwrap());
    idle.set(false).unwrap();
    assert!(!idle.get().unwrap());
}

// ---------------------------------------------------------------------------------------------
// htb

#[test]
fn htb_plans_are_exact_commands() {
    let plan = HtbPlan::new(
        "eth0",
        95_000_000,
        vec![BgMatch::Dscp(DSCP_LE), BgMatch::Mark(0x7)],
    )
    .unwrap();
    let cmds: Vec<String> = plan.setup().iter().map(|c| c.to_string()).collect();
    assert_eq!(
        cmds,
        [
            "tc qdisc add dev eth0 root handle 1: htb default 10",
            "tc class add dev eth0 parent 1: classid 1:1 htb rate 95000000bit ceil 95000000bit quantum 1514",
            "tc class add dev eth0 parent 1:1 classid 1:10 htb rate 95000000bit ceil 95000000bit prio 0 quantum 1514",
            "tc class add dev eth0 parent 1:1 classid 1:20 htb rate 8000bit ceil 95000000bit prio 7 quantum 1514",
            "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x04 0xfc flowid 1:20",
            "tc filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x04 0xfc flowid 1:20",
            "tc filter add dev eth0 parent 1: protocol all prio 3 u32 match mark 0x7 0xffffffff flowid 1:20",
        ]
    );
    assert_eq!(plan.teardown().to_string(), "tc qdisc del dev eth0 root");
    // CS1, the thesis's mark.
    let cs1 = HtbPlan::new("eth0", 1_000_000, vec![BgMatch::Dscp(8)]).unwrap();
    assert!(cs1.setup()[4].to_string().contains("dsfield 0x20 0xfc"));

    for (dev, rate, bg, want) in [
        ("", 1_000_000, vec![BgMatch::Mark(1)], "interface name"),
        ("a/b", 1_000_000, vec![BgMatch::Mark(1)], "interface name"),
        ("eth0", 8_000, vec![BgMatch::Mark(1)], "background floor"),
        ("eth0", 1_000_000, vec![], "no background match"),
        ("eth0", 1_000_000, vec![BgMatch::Dscp(64)], "DSCP 64"),
    ] {
        let msg = HtbPlan::new(dev, rate, bg).unwrap_err().to_string();
        assert!(msg.contains(want), "{msg}");
    }
}

#[test]
fn tc_class_stats_parse() {
    let path = fixture("tc_class_show");
    let stats = htb::parse_class_stats(
        "tc -s class show dev va",
        &fs::read_to_string(&path).unwrap(),
    )
    .unwrap();
    let got: Vec<(&str, u64, u64, u64)> = stats
        .iter()
        .map(|s| (s.classid.as_str(), s.bytes, s.packets, s.dropped))
        .collect();
    assert_eq!(
        got,
        [
            ("1:1", 1250, 17, 0),
            (FG_CLASS, 450, 5, 0),
            (BG_CLASS, 800, 12, 3)
        ]
    );
    let text = fs::read_to_string(fixture("tc_class_show-malformed")).unwrap();
    let msg = htb::parse_class_stats("tc -s class show dev va", &text)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("tc -s class show dev va:2:") && msg.contains("packet"),
        "{msg}"
    );
    let msg = htb::parse_class_stats("tc", "class htb 1:10 root\n")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("tc:1:") && msg.contains("no Sent line"),
        "{msg}"
    );
    assert!(htb::parse_class_stats("tc", "").unwrap().is_empty());
}

impl Netns {
    /// Sends `count` UDP datagrams from namespace a to b with this TOS byte and firewall mark, from
    /// a thread that enters the namespace (a network namespace is per thread).
    fn send(&self, count: usize, tos: i32, mark: u32) {
        let path = format!("/run/netns/{}", self.a);
        thread::spawn(move || {
            let ns = fs::File::open(&path).unwrap();
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let sock = std::net::UdpSocket::bind("10.231.7.1:0").unwrap();
            let fd = sock.as_raw_fd();
            let set = |level, name, value: i32| {
                // SAFETY: a valid socket and a pointer to an int of the given size.
                let r = unsafe {
                    libc::setsockopt(
                        fd,
                        level,
                        name,
                        &value as *const i32 as *const libc::c_void,
                        std::mem::size_of::<i32>() as libc::socklen_t,
                    )
                };
                assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            };
            set(libc::IPPROTO_IP, libc::IP_TOS, tos);
            set(libc::SOL_SOCKET, libc::SO_MARK, mark as i32);
            for _ in 0..count {
                // The sink is closed: its ICMP errors may fail a later send, which is fine.
                let _ = sock.send_to(b"tact idle test", "10.231.7.2:9");
                thread::sleep(Duration::from_millis(2));
            }
        })
        .join()
        .unwrap();
    }
}

#[test]
fn htb_classifies_background_traffic_in_a_private_namespace() {
    if !caps::has_capability(Capability::NetAdmin).unwrap() {
        println!("skipped: tc and network namespaces need CAP_NET_ADMIN");
        return;
    }
    let ns = match Netns::create("", 231, "va", "vb") {
        Ok(ns) => ns,
        Err(e) => {
            println!("skipped: cannot create test network namespaces: {e}");
            return;
        }
    };
    let tc = Tc::in_netns(&ns.a);
    tc.check("va").unwrap();
    let err = tc.check("tact-nosuch0").unwrap_err();
    assert!(matches!(err, Error::Command { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "ip netns exec {} tc qdisc show dev tact-nosuch0",
            ns.a
        )),
        "{msg}"
    );

    let class = |id: &str| {
        tc.class_stats("va")
            .unwrap()
            .into_iter()
            .find(|c| c.classid == id)
            .unwrap_or_else(|| panic!("no class {id}"))
    };

    // Firewall marks: classified where the kernel's u32 matches marks, refused where it does not
    // (the test machine), never a filter that takes everything.
    let marks = HtbPlan::new("va", 100_000_000, vec![BgMatch::Mark(7)]).unwrap();
    match tc.apply(&marks) {
        Ok(()) => {
            ns.send(5, 0, 7);
            ns.send(5, 0, 0);
            assert!(wait_until(PATIENCE, || class(BG_CLASS).packets >= 5));
            assert!(
                wait_until(PATIENCE, || class(FG_CLASS).packets >= 5),
                "{:?}",
                class(FG_CLASS)
            );
            assert_eq!(class(BG_CLASS).packets, 5);
            tc.remove(&marks).unwrap();
        }
        Err(e) => {
            assert!(matches!(e, Error::Unavailable { .. }), "{e}");
            assert!(e.to_string().contains("CONFIG_CLS_U32_MARK"), "{e}");
            println!("mark classification unavailable here: {e}");
        }
    }
    assert!(tc.class_stats("va").unwrap().is_empty());

    let plan = HtbPlan::new("va", 100_000_000, vec![BgMatch::Dscp(DSCP_LE)]).unwrap();
    tc.apply(&plan).unwrap();
    assert_eq!(class(BG_CLASS).packets, 0);
    ns.send(20, 0x04, 0); // DSCP LE
    ns.send(10, 0, 0); // foreground
    ns.send(10, 0x20, 0); // CS1 is not LE: foreground for this plan
    assert!(
        wait_until(PATIENCE, || class(BG_CLASS).packets >= 20),
        "background class saw {:?}",
        class(BG_CLASS)
    );
    // The foreground got its 20 datagrams; none of them went to the background.
    assert!(
        wait_until(PATIENCE, || class(FG_CLASS).packets >= 20),
        "{:?}",
        class(FG_CLASS)
    );
    assert_eq!(class(BG_CLASS).packets, 20);

    // The background class as built: below the foreground, its floor guaranteed, and free to
    // borrow up to the full rate (tact never changes it while the tree stands).
    let show = tc
        .run(&htb::TcCommand(
            ["class", "show", "dev", "va", "classid", BG_CLASS]
                .map(String::from)
                .to_vec(),
        ))
        .unwrap();
    assert!(
        show.contains("prio 7") && show.contains("rate 8Kbit ceil 100Mbit"),
        "{show}"
    );

    // A second plan never replaces a root qdisc that exists, and leaves it intact.
    let err = tc.apply(&plan).unwrap_err();
    assert!(
        matches!(&err, Error::Command { command, .. } if command.contains("qdisc add dev va root")),
        "{err}"
    );
    assert_eq!(tc.class_stats("va").unwrap().len(), 3);

    tc.remove(&plan).unwrap();
    assert!(tc
        .class_stats("va")
        .unwrap()
        .iter()
        .all(|c| c.classid != BG_CLASS));
    assert!(tc.remove(&plan).is_err());
}
