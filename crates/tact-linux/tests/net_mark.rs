//! Marking a cgroup's packets DSCP LE from outside (nftables `socket cgroupv2`) into the htb
//! background class, on the real kernel: a process placed in a `tact-test-*` cgroup v2 directory
//! before it opens its socket sends through a veth pair between two network namespaces the test
//! creates; its packets land in 1:20, an unplaced sender's in 1:10; the table and the directory
//! are removed after. Skipped, saying why, without CAP_NET_ADMIN, nftables, python3 or cgroup2.

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use tact_linux::actuate::cgroup2::JobCgroup2;
use tact_linux::actuate::cgroup_cpu::read_procs;
use tact_linux::actuate::htb::{self, BgMatch, HtbPlan, Tc, DSCP_LE};
use tact_linux::actuate::nft::{DscpMark, Nft};
use tact_linux::probe::caps::{self, Capability};
use tact_linux::ProcReader;

mod common;
use common::Netns;

const DATAGRAMS: u64 = 50;
const PAYLOAD: u64 = 1400;

fn bytes(tc: &Tc, class: &str) -> u64 {
    tc.class_stats("nma")
        .unwrap()
        .iter()
        .find(|c| c.classid == class)
        .map_or(0, |c| c.bytes)
}

#[test]
fn a_cgroups_packets_are_marked_into_the_background_class_and_the_marking_goes_after() {
    if !caps::has_capability(Capability::NetAdmin).unwrap() {
        println!("skipped: tc, nftables and network namespaces need CAP_NET_ADMIN");
        return;
    }
    if let Err(e) = Nft.check() {
        println!("skipped: {e}");
        return;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        println!("skipped: python3 is not installed");
        return;
    }
    let ns = match Netns::create("mark-", 232, "nma", "nmb") {
        Ok(ns) => ns,
        Err(e) => {
            println!("skipped: cannot create test network namespaces: {e}");
            return;
        }
    };
    let path = format!("/run/netns/{}", ns.a);
    // A network namespace is per thread; what this thread spawns (tc, nft, the sender) is in it.
    thread::spawn(move || {
        let file = fs::File::open(&path).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let tc = Tc::new();
        let plan = HtbPlan::new("nma", 100_000_000, vec![BgMatch::Dscp(DSCP_LE)]).unwrap();
        tc.apply(&plan).unwrap();
        let mut cg = match JobCgroup2::create(&format!("tact-test-mark-{}", std::process::id())) {
            Ok(cg) => cg,
            Err(e) => {
                println!("skipped: no cgroup v2 directory: {e}");
                tc.remove(&plan).unwrap();
                return;
            }
        };
        // The sender opens its socket only once told to, after it was placed.
        let script = format!(
            "import socket, sys, time\n\
             sys.stdin.readline()\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for _ in range({DATAGRAMS}):\n\
             \x20   s.sendto(b'x' * {PAYLOAD}, ('10.232.7.2', 9))\n\
             \x20   time.sleep(0.002)\n"
        );
        let mut child = Command::new("python3")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let id = ProcReader::new().stat(child.id() as i32).unwrap().id();
        cg.cover(&[id]).unwrap();
        // Not only it: a `python3` that is a pyenv shim forks helpers before it execs python,
        // and they are born in the cgroup too.
        assert!(read_procs(cg.dir()).unwrap().contains(&id.pid));
        let table = format!("tact-test-mark-{}", std::process::id());
        let mark = DscpMark::new(&table, cg.dir(), cg.level(), DSCP_LE).unwrap();
        Nft.apply(&mark).unwrap();
        assert!(Nft.exists(&table).unwrap());
        // A table of that name is never taken over.
        assert!(Nft.apply(&mark).is_err());

        let (fg0, bg0) = (bytes(&tc, htb::FG_CLASS), bytes(&tc, htb::BG_CLASS));
        writeln!(child.stdin.take().unwrap()).unwrap();
        assert!(child.wait().unwrap().success());
        let (fg1, bg1) = (bytes(&tc, htb::FG_CLASS), bytes(&tc, htb::BG_CLASS));
        assert!(
            bg1 - bg0 >= DATAGRAMS * PAYLOAD,
            "background: {bg0} -> {bg1}"
        );
        assert!(
            fg1 - fg0 < DATAGRAMS * PAYLOAD,
            "foreground: {fg0} -> {fg1}"
        );

        // This thread's socket was not made in the cgroup: its packets are foreground.
        let sock = std::net::UdpSocket::bind("10.232.7.1:0").unwrap();
        for _ in 0..DATAGRAMS {
            let _ = sock.send_to(&[0u8; PAYLOAD as usize], "10.232.7.2:9");
            thread::sleep(Duration::from_millis(2));
        }
        let (fg2, bg2) = (bytes(&tc, htb::FG_CLASS), bytes(&tc, htb::BG_CLASS));
        assert!(
            fg2 - fg1 >= DATAGRAMS * PAYLOAD,
            "foreground: {fg1} -> {fg2}"
        );
        assert!(
            bg2 - bg1 < DATAGRAMS * PAYLOAD,
            "background: {bg1} -> {bg2}"
        );

        Nft.remove(&mark).unwrap();
        assert!(!Nft.exists(&table).unwrap());
        let dir = cg.dir().to_path_buf();
        cg.remove().unwrap();
        assert!(!dir.exists(), "{} is left", dir.display());
        tc.remove(&plan).unwrap();
    })
    .join()
    .unwrap();
    drop(ns);
}
