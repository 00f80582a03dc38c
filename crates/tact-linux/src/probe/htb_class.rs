//! The counters of an interface's tc classes, read over rtnetlink (`RTM_GETTCLASS` dump on the
//! interface's index): what `tc -s class show dev DEV` prints, without running `tc`. tact's htb
//! tree puts exactly the packets marked DSCP LE, the job's, in class 1:20 and everything else in
//! 1:10 ([`crate::actuate::htb`]), so what 1:10 did not send is the job's, every protocol.
//!
//! One read is a dump request and its reply, a few hundred bytes for tact's three classes: 6–12
//! µs in a release build (54 in a debug one) against the milliseconds of a `tc` run, cheap
//! enough for the idle gate's probe every millisecond. A dump and not a plain `RTM_GETTCLASS` of one class: the kernel answers the
//! latter with a notification to the `RTNLGRP_TC` multicast group (every `tc monitor` would see
//! each probe), and to the asker only with `NLM_F_ECHO`; a dump's reply goes to the asker alone.
//! A dump names the interface by index and lists that interface's classes only.
//!
//! # Class bytes and the interface's counters
//!
//! A qdisc counts `qdisc_pkt_len(skb)` when it dequeues a packet: the skb's length with its link
//! header (14 bytes on Ethernet and veth), and for a GSO/TSO packet the headers of every segment
//! it will be cut into, its packets counted as segments. A NIC's driver counts the frames it sends
//! the same way (its `tx_bytes` has every segment's headers), so there one class byte is one byte
//! of `tx_bytes`. A veth (and other virtual devices) passes a GSO packet on whole and counts
//! `skb->len`: one header for all its segments. For packets without GSO (UDP, ICMP, a TCP flow on
//! a device without segmentation offload) class bytes equal `tx_bytes` exactly on a veth too
//! (`tests/htb_class.rs`); for a TCP bulk flow on a veth the class counts some 66 bytes more per
//! segment after the first of each GSO packet, about 4 %: the idle gate takes the job's share
//! of the veth's `tx_bytes` as what the foreground's class did not send rather than its own
//! class's bytes (`tact`'s `jobs/idle_watch.rs`, `class_own_tx`).

use std::ffi::CString;
use std::io;
use std::path::PathBuf;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcAttribute, TcMessage, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::actuate::htb::ClassStats;
use crate::error::{Error, Result};

/// `TCA_STATS_PKT64`: the packet count when it exceeds the 32 bits of `TCA_STATS_BASIC`'s.
const TCA_STATS_PKT64: u16 = 8;

/// A dump of a few classes fits in one netlink skb (32 KiB at most); twice that never truncates.
const RECV_BUF: usize = 64 << 10;

/// A tc class handle (`MAJOR:MINOR`, both hexadecimal as tc writes them: `1:20` is 0x0001_0020).
pub fn parse_classid(text: &str) -> Option<u32> {
    let (major, minor) = text.split_once(':')?;
    let major = u16::from_str_radix(major, 16).ok()?;
    let minor = if minor.is_empty() {
        0
    } else {
        u16::from_str_radix(minor, 16).ok()?
    };
    Some(u32::from(major) << 16 | u32::from(minor))
}

/// A class handle as tc writes it: `1:20`.
pub fn format_classid(handle: u32) -> String {
    format!("{:x}:{:x}", handle >> 16, handle & 0xffff)
}

/// Reads the classes of one interface (in this process's network namespace) over a
/// `NETLINK_ROUTE` socket of its own. Reading needs no capability.
pub struct TcClasses {
    socket: Socket,
    buf: Vec<u8>,
    seq: u32,
    dev: String,
    ifindex: i32,
}

impl TcClasses {
    /// A reader of `dev`'s classes; `dev` must exist now (its index is what the dumps name: an
    /// interface deleted and made again under the same name is another one).
    pub fn new(dev: &str) -> Result<TcClasses> {
        let missing = || Error::Unavailable {
            what: format!("the interface {dev}"),
            reason: "it does not exist in this network namespace".into(),
        };
        let name = CString::new(dev).map_err(|_| missing())?;
        // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
        let ifindex = match unsafe { libc::if_nametoindex(name.as_ptr()) } {
            0 => return Err(missing()),
            i => i32::try_from(i).map_err(|_| missing())?,
        };
        let socket = Socket::new(NETLINK_ROUTE).map_err(|e| Error::Unavailable {
            what: "rtnetlink".into(),
            reason: format!("cannot open a NETLINK_ROUTE socket: {e}"),
        })?;
        let reader = TcClasses {
            socket,
            buf: vec![0; RECV_BUF],
            seq: 0,
            dev: dev.to_string(),
            ifindex,
        };
        reader
            .socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(|e| reader.io_err(e))?;
        Ok(reader)
    }

    /// Every class on the interface, with its counters now (an interface without classes: none).
    pub fn dump(&mut self) -> Result<Vec<ClassStats>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let request = RouteNetlinkMessage::GetTrafficClass(TcMessage::with_index(self.ifindex));
        let mut packet = NetlinkMessage::new(header, request.into());
        packet.finalize();
        let mut out = vec![0; packet.buffer_len()];
        packet.serialize(&mut out);
        self.socket.send(&out, 0).map_err(|e| self.io_err(e))?;
        let mut found = Vec::new();
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)
                .map_err(|e| io_err(&self.dev, e))?;
            let mut at = 0;
            while at < n {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[at..n])
                    .map_err(|e| self.parse_err(format!("a reply that does not parse: {e}")))?;
                let len = msg.header.length as usize;
                // A reply with another number answers an earlier request: not ours to read.
                if msg.header.sequence_number == self.seq {
                    match msg.payload {
                        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewTrafficClass(m))
                            if m.header.index == self.ifindex =>
                        {
                            found.push(class_stats(&m));
                        }
                        NetlinkPayload::Done(_) => return Ok(found),
                        NetlinkPayload::Error(e) => return Err(self.io_err(e.to_io())),
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                at += len;
            }
        }
    }

    /// The interface it reads.
    pub fn dev(&self) -> &str {
        &self.dev
    }

    /// The counters of class `classid` (a handle: [`parse_classid`]) now; an error when the
    /// interface has no such class (its tree was removed).
    pub fn class(&mut self, classid: u32) -> Result<ClassStats> {
        let classes = self.dump()?;
        self.find(&classes, classid)
    }

    /// Class `classid` (a handle) in `classes`, a [`TcClasses::dump`] of this interface (one
    /// dump serves several classes); an error when it is not there (its tree was removed).
    pub fn find(&self, classes: &[ClassStats], classid: u32) -> Result<ClassStats> {
        let id = format_classid(classid);
        classes
            .iter()
            .find(|c| c.classid == id)
            .cloned()
            .ok_or_else(|| Error::Unavailable {
                what: format!("tc class {id} on {}", self.dev),
                reason: "the interface has no such class (its qdisc was removed?)".into(),
            })
    }

    fn io_err(&self, source: io::Error) -> Error {
        io_err(&self.dev, source)
    }

    fn parse_err(&self, msg: String) -> Error {
        Error::Parse {
            path: source_name(&self.dev),
            line: 0,
            msg,
        }
    }
}

/// The name errors of a reader carry in place of a file: `RTM_GETTCLASS DEV`.
fn source_name(dev: &str) -> PathBuf {
    PathBuf::from(format!("RTM_GETTCLASS {dev}"))
}

fn io_err(dev: &str, source: io::Error) -> Error {
    Error::Io {
        path: source_name(dev),
        source,
    }
}

/// A class's handle and counters from a `RTM_NEWTCLASS` message: `TCA_STATS2`'s basic and queue
/// stats (with `TCA_STATS_PKT64` when the packets overflow 32 bits), else the legacy `TCA_STATS`.
fn class_stats(m: &TcMessage) -> ClassStats {
    let mut stats = ClassStats {
        classid: format_classid(u32::from(m.header.handle)),
        bytes: 0,
        packets: 0,
        dropped: 0,
    };
    let mut stats2 = false;
    for attr in &m.attributes {
        match attr {
            TcAttribute::Stats2(v) => {
                stats2 = true;
                for s in v {
                    match s {
                        TcStats2::Basic(b) => {
                            stats.bytes = b.bytes;
                            stats.packets = stats.packets.max(u64::from(b.packets));
                        }
                        TcStats2::Queue(q) => stats.dropped = u64::from(q.drops),
                        TcStats2::Other(nla) if nla.kind() == TCA_STATS_PKT64 => {
                            let mut v = [0u8; 8];
                            if nla.value_len() == 8 {
                                nla.emit_value(&mut v);
                                stats.packets = u64::from_ne_bytes(v);
                            }
                        }
                        _ => {}
                    }
                }
            }
            TcAttribute::Stats(s) if !stats2 => {
                stats.bytes = s.bytes;
                stats.packets = u64::from(s.packets);
                stats.dropped = u64::from(s.drops);
            }
            _ => {}
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_handles_are_hexadecimal_as_tc_writes_them() {
        assert_eq!(parse_classid("1:20"), Some(0x0001_0020));
        assert_eq!(parse_classid("1:10"), Some(0x0001_0010));
        assert_eq!(parse_classid("1:"), Some(0x0001_0000));
        assert_eq!(parse_classid("ffff:fff1"), Some(0xffff_fff1));
        assert_eq!(parse_classid("1"), None);
        assert_eq!(parse_classid("1:g"), None);
        assert_eq!(parse_classid("10000:1"), None);
        for id in ["1:20", "1:10", "1:1", "8001:abc"] {
            assert_eq!(format_classid(parse_classid(id).unwrap()), id);
        }
    }

    #[test]
    fn an_interface_that_does_not_exist_is_refused() {
        let e = TcClasses::new("tact-no-such").err().unwrap().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn lo_without_classes_dumps_none() {
        // `lo` has no classful qdisc unless someone put one there, and a dump needs no
        // capability.
        let mut lo = TcClasses::new("lo").unwrap();
        if std::process::Command::new("tc")
            .args(["class", "show", "dev", "lo"])
            .output()
            .is_ok_and(|o| o.stdout.is_empty())
        {
            assert_eq!(lo.dump().unwrap(), Vec::new());
            assert!(lo.class(0x0001_0020).is_err());
        }
    }
}
