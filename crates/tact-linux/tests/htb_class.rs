//! The htb classes' counters read over rtnetlink ([`TcClasses`]) on the real kernel: on tact's
//! tree on a veth between two network namespaces the test creates, they agree with
//! `tc -s class show` once traffic has passed, and they map onto the veth's own `tx_bytes`:
//! every packet sent is counted in one leaf class with its Ethernet header, so a job's UDP
//! datagrams in 1:20 are exactly its frames on the interface; a TCP flow's GSO packets are
//! counted by the class as the segments they stand for, by the veth as one frame (the class
//! counts a few % more). Also the cost of one read. Skipped, saying why, without CAP_NET_ADMIN.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::thread;
use std::time::Instant;

use tact_linux::actuate::htb::{self, BgMatch, ClassStats, HtbPlan, Tc, DSCP_LE};
use tact_linux::probe::caps::{self, Capability};
use tact_linux::probe::htb_class::{parse_classid, TcClasses};
use tact_linux::probe::netstats::{parse_net_dev, NetCounters};

mod common;
use common::{wait_until, Netns, PATIENCE};

const LINK: &str = "hca";
const PEER: &str = "hcb";
const SINK: &str = "10.233.7.2";
const DATAGRAMS: u64 = 200;
const PAYLOAD: u64 = 1400;
/// The frame of one datagram: Ethernet 14, IPv4 20, UDP 8.
const UDP_FRAME: u64 = PAYLOAD + 14 + 20 + 8;

/// Moves this thread into the named namespace: the sockets it opens and the commands it
/// spawns are there.
fn enter(ns: &str) {
    let file = fs::File::open(format!("/run/netns/{ns}")).unwrap();
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

/// The link's counters as this thread's namespace shows them.
fn link_counters() -> NetCounters {
    let path = Path::new("/proc/thread-self/net/dev");
    let text = fs::read_to_string(path).unwrap();
    parse_net_dev(path, &text)
        .unwrap()
        .into_iter()
        .find(|(name, _)| name == LINK)
        .unwrap()
        .1
}

fn find<'a>(classes: &'a [ClassStats], id: &str) -> &'a ClassStats {
    classes
        .iter()
        .find(|c| c.classid == id)
        .unwrap_or_else(|| panic!("no class {id} in {classes:?}"))
}

/// The leaf classes' bytes and packets added up: every packet the link sends is in one of them.
fn leaves(classes: &[ClassStats]) -> (u64, u64) {
    [htb::FG_CLASS, htb::BG_CLASS]
        .iter()
        .map(|id| find(classes, id))
        .fold((0, 0), |(b, p), c| (b + c.bytes, p + c.packets))
}

/// `ip netns exec NS sysctl -w net.ipv6.conf.DEV.disable_ipv6=1`: no neighbour discovery or
/// MLD frames of the kernel's own among the test's.
fn no_ipv6(ns: &str, dev: &str) {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw"])
        .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_netlink_counters_are_tcs_and_the_links_frames() {
    if !caps::has_capability(Capability::NetAdmin).unwrap() {
        println!("skipped: tc and network namespaces need CAP_NET_ADMIN");
        return;
    }
    let ns = match Netns::create("htbc-", 233, LINK, PEER) {
        Ok(ns) => ns,
        Err(e) => {
            println!("skipped: cannot create test network namespaces: {e}");
            return;
        }
    };
    no_ipv6(&ns.a, LINK);
    no_ipv6(&ns.b, PEER);
    // A TCP sink in the peer namespace that reads until the sender closes.
    let b = ns.b.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = thread::spawn(move || {
        enter(&b);
        let listener = TcpListener::bind((SINK, 0)).unwrap();
        tx.send(listener.local_addr().unwrap().port()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0; 1 << 16];
        while conn.read(&mut buf).unwrap() > 0 {}
    });
    let port = rx.recv().unwrap();
    let a = ns.a.clone();
    thread::spawn(move || {
        enter(&a);
        let tc = Tc::new();
        let plan = HtbPlan::new(LINK, 1_000_000_000, vec![BgMatch::Dscp(DSCP_LE)]).unwrap();
        tc.apply(&plan).unwrap();
        let mut reader = TcClasses::new(LINK).unwrap();
        let before = reader.dump().unwrap();
        let link_before = link_counters();

        // The job's datagrams, marked LE as nftables would, and some of someone else's.
        let sock = UdpSocket::bind("10.233.7.1:0").unwrap();
        set_tos(&sock, DSCP_LE << 2);
        let other = UdpSocket::bind("10.233.7.1:0").unwrap();
        for _ in 0..DATAGRAMS {
            sock.send_to(&[0; PAYLOAD as usize], (SINK, 9)).unwrap();
            other.send_to(&[0; 100], (SINK, 9)).unwrap();
        }
        // Once the tree has drained, tc and the reader see the same counters: tc read before
        // and after the reader, equal both times.
        let mut classes = Vec::new();
        assert!(
            wait_until(PATIENCE, || {
                let shown = tc.class_stats(LINK).unwrap();
                classes = reader.dump().unwrap();
                let again = tc.class_stats(LINK).unwrap();
                shown == again && sorted(&classes) == sorted(&shown)
            }),
            "netlink {classes:?} vs tc {:?}",
            tc.class_stats(LINK).unwrap()
        );
        let bg = find(&classes, htb::BG_CLASS);
        let bg0 = find(&before, htb::BG_CLASS);
        // The job's class holds exactly its datagrams, each counted as its Ethernet frame.
        assert_eq!(bg.packets - bg0.packets, DATAGRAMS, "{classes:?}");
        assert_eq!(bg.bytes - bg0.bytes, DATAGRAMS * UDP_FRAME, "{classes:?}");
        assert_eq!(
            reader.class(parse_classid(htb::BG_CLASS).unwrap()).unwrap(),
            *bg
        );
        // Every frame the link sent is in a leaf (ARP included), with the same bytes.
        let link = link_counters().since(&link_before);
        let (sent, packets) = leaves(&classes);
        let (sent0, packets0) = leaves(&before);
        assert_eq!(
            (sent - sent0, packets - packets0),
            (link.tx_bytes, link.tx_packets)
        );

        // A TCP flow in the job's class: GSO packets, a frame each on the veth, counted by the
        // class as the segments they will be (a header each).
        let link_before = link_counters();
        let (classes_before, _) = leaves(&reader.dump().unwrap());
        let mut conn = TcpStream::connect((SINK, port)).unwrap();
        set_tos(&conn, DSCP_LE << 2);
        let chunk = vec![0; 1 << 16];
        for _ in 0..320 {
            conn.write_all(&chunk).unwrap();
        }
        drop(conn);
        sink.join().unwrap();
        // The sink has read everything; what is left to send is the connection's end.
        let mut tcp = (0, 0);
        assert!(wait_until(PATIENCE, || {
            let link = link_counters().since(&link_before);
            let now = (
                leaves(&reader.dump().unwrap()).0 - classes_before,
                link.tx_bytes,
            );
            let settled = now == tcp;
            tcp = now;
            settled
        }));
        let (class_bytes, link_bytes) = tcp;
        println!("20 MiB over TCP: the classes counted {class_bytes} bytes, the veth {link_bytes}");
        assert!(link_bytes > 20 << 20, "{tcp:?}");
        assert!(class_bytes >= link_bytes, "{tcp:?}");
        assert!(class_bytes - link_bytes < link_bytes / 16, "{tcp:?}");

        // What one read costs (a debug build costs more: the figure is printed, not asserted).
        let n = 2000;
        let t = Instant::now();
        for _ in 0..n {
            reader.class(0x0001_0020).unwrap();
        }
        println!(
            "one read of the job's class: {:.1} µs",
            t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        );
        tc.remove(&plan).unwrap();
        // No tree, no class: an error, not a count of zero.
        assert!(reader.class(0x0001_0020).is_err());
    })
    .join()
    .unwrap();
    drop(ns);
}

fn sorted(classes: &[ClassStats]) -> Vec<ClassStats> {
    let mut v = classes.to_vec();
    v.sort_by(|a, b| a.classid.cmp(&b.classid));
    v
}

/// IP_TOS on a socket: what the job's nftables rule would write into its packets.
fn set_tos(sock: &impl AsRawFd, tos: u8) {
    let tos = libc::c_int::from(tos);
    // SAFETY: a valid fd and a pointer to an int that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            (&tos as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}
