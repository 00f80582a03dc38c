//! Where another network namespace's traffic enters this one: the veths of this namespace whose
//! peer is in the namespace of a given process. tact marks what arrives through them
//! ([`crate::actuate::nft::IngressMark`]), as the job's packets forwarded out of the watched
//! interface have no socket in tact's namespace for its cgroup rule to match.
//!
//! How, without entering the other namespace: a veth whose peer lives in another namespace carries
//! `IFLA_LINK_NETNSID` in an `RTM_GETLINK` dump, the id this namespace gives the peer's
//! namespace; the kernel assigns one, if there was none, as it answers the dump. `RTM_GETNSID`
//! with `NETNSA_PID` gives the id of a process's namespace (`NETNSA_NSID_NOT_ASSIGNED`, -1, when
//! nothing here links to it). A veth of kind `veth` with the process's id is one end of a pair
//! whose other end is in the process's namespace. The alternatives need more: reading the other
//! end's `iflink` means entering the namespace (`setns`, CAP_SYS_ADMIN, a thread of its own) or a
//! process (`ip -n`, `nsenter`), and `/sys/class/net` shows the namespace that mounted sysfs.
//!
//! The replies are read attribute by attribute (`IFLA_IFNAME`, `IFLA_LINKINFO`'s
//! `IFLA_INFO_KIND`, `IFLA_LINK_NETNSID`), not through a full parse of every link: a kind whose
//! attributes the parser does not know must not hide the veths. A namespace joined through a
//! macvlan or ipvlan (its lower device is here, with no link id), or through a chain of
//! namespaces, has no veth here: none is found.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NlasIterator, NLMSG_DONE, NLMSG_ERROR,
    NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::nsid::{NsidAttribute, NsidMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::error::{Error, Result};

const RTM_NEWLINK: u16 = 16;
const RTM_NEWNSID: u16 = 88;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_LINK_NETNSID: u16 = 37;
const IFLA_INFO_KIND: u16 = 1;
const NETNSA_NSID: u16 = 1;
/// `struct ifinfomsg`: family, pad, type, index (i32 at 4), flags, change.
const IFINFOMSG_LEN: usize = 16;
/// `struct rtgenmsg` padded to 4: the header of an nsid message.
const RTGENMSG_LEN: usize = 4;
/// A link dump comes in netlink skbs of 32 KiB at most; twice that never truncates.
const RECV_BUF: usize = 64 << 10;

/// One interface of this namespace as a link dump shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `IFLA_INFO_KIND`: `veth`, `bridge`, ...; `None` for a physical NIC.
    pub kind: Option<String>,
    /// The id of the namespace its other end (or lower device) is in, when that is not this one.
    pub link_netnsid: Option<i32>,
}

/// This namespace's end of a veth pair whose other end is in another namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VethEnd {
    pub index: u32,
    pub name: String,
}

/// The veths among `links` whose other end is in the namespace of id `nsid`.
pub fn veth_ends(links: &[Link], nsid: i32) -> Vec<VethEnd> {
    links
        .iter()
        .filter(|l| l.kind.as_deref() == Some("veth") && l.link_netnsid == Some(nsid))
        .map(|l| VethEnd {
            index: l.index,
            name: l.name.clone(),
        })
        .collect()
}

/// The network namespace of `pid` (`None`: this process's), as the inode of `/proc/PID/ns/net`:
/// two processes share a namespace when their inodes are equal.
pub fn net_namespace(pid: Option<i32>) -> Result<u64> {
    let path = PathBuf::from(match pid {
        Some(p) => format!("/proc/{p}/ns/net"),
        None => "/proc/self/ns/net".into(),
    });
    match fs::metadata(&path) {
        Ok(m) => Ok(m.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::NoProcess {
            pid: pid.unwrap_or(0),
        }),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Asks this namespace's rtnetlink about its links and the ids it gives other namespaces.
pub struct VethPeers {
    socket: Socket,
    buf: Vec<u8>,
    seq: u32,
}

impl VethPeers {
    pub fn new() -> Result<VethPeers> {
        let socket = Socket::new(NETLINK_ROUTE).map_err(|e| Error::Unavailable {
            what: "rtnetlink".into(),
            reason: format!("cannot open a NETLINK_ROUTE socket: {e}"),
        })?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(|e| io_err("connect", e))?;
        Ok(VethPeers {
            socket,
            buf: vec![0; RECV_BUF],
            seq: 0,
        })
    }

    /// The veths here whose other end is in `pid`'s namespace; none when `pid` shares this one
    /// or its namespace has no veth into it.
    pub fn of(&mut self, pid: i32) -> Result<Vec<VethEnd>> {
        // The dump first: it assigns the ids that the question after it reads.
        let links = self.links()?;
        Ok(match self.nsid_of(pid)? {
            Some(id) => veth_ends(&links, id),
            None => Vec::new(),
        })
    }

    /// Every link of this namespace.
    pub fn links(&mut self) -> Result<Vec<Link>> {
        let request = RouteNetlinkMessage::GetLink(LinkMessage::default());
        let mut links = Vec::new();
        self.ask(request, NLM_F_REQUEST | NLM_F_DUMP, |kind, payload| {
            if kind == RTM_NEWLINK {
                links.push(parse_link(payload)?);
            }
            Ok(false)
        })?;
        Ok(links)
    }

    /// The id this namespace gives `pid`'s namespace; `None` when it has none (nothing here
    /// links to that namespace).
    pub fn nsid_of(&mut self, pid: i32) -> Result<Option<i32>> {
        let pid_attr = u32::try_from(pid).map_err(|_| Error::NoProcess { pid })?;
        let mut msg = NsidMessage::default();
        msg.attributes.push(NsidAttribute::Pid(pid_attr));
        let mut id = None;
        let asked = self.ask(
            RouteNetlinkMessage::GetNsId(msg),
            NLM_F_REQUEST,
            |kind, payload| {
                if kind == RTM_NEWNSID {
                    id = parse_nsid(payload)?;
                    return Ok(true);
                }
                Ok(false)
            },
        );
        match asked {
            // ESRCH: the process is gone.
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {
                Err(Error::NoProcess { pid })
            }
            other => other.map(|()| id.filter(|&i| i >= 0)),
        }
    }

    /// Sends `request` and hands each reply of its sequence number (type, payload) to `each`
    /// until the dump's end, an error, or `each` says it has its answer.
    fn ask(
        &mut self,
        request: RouteNetlinkMessage,
        flags: u16,
        mut each: impl FnMut(u16, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, request.into());
        packet.finalize();
        let mut out = vec![0; packet.buffer_len()];
        packet.serialize(&mut out);
        self.socket.send(&out, 0).map_err(|e| io_err("send", e))?;
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)
                .map_err(|e| io_err("recv", e))?;
            let mut at = 0;
            while at < n {
                let msg = NetlinkBuffer::new_checked(&self.buf[at..n])
                    .map_err(|e| parse_err(format!("a reply that does not parse: {e}")))?;
                let len = msg.length() as usize;
                if len == 0 {
                    break;
                }
                // A reply with another number answers an earlier request: not ours to read.
                if msg.sequence_number() == self.seq {
                    match msg.message_type() {
                        NLMSG_DONE => return Ok(()),
                        NLMSG_ERROR => {
                            let code = msg
                                .payload()
                                .get(..4)
                                .map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
                                .ok_or_else(|| parse_err("a short error reply".into()))?;
                            if code == 0 {
                                return Ok(()); // an acknowledgement
                            }
                            return Err(io_err("reply", io::Error::from_raw_os_error(-code)));
                        }
                        kind => {
                            if each(kind, msg.payload())? {
                                return Ok(());
                            }
                        }
                    }
                }
                at += len.next_multiple_of(4);
            }
        }
    }
}

/// A link from an `RTM_NEWLINK` payload: `ifinfomsg`, then its attributes.
fn parse_link(payload: &[u8]) -> Result<Link> {
    let header = payload
        .get(..IFINFOMSG_LEN)
        .ok_or_else(|| parse_err("a link message shorter than ifinfomsg".into()))?;
    let index = u32::from_ne_bytes(header[4..8].try_into().expect("4 bytes"));
    let mut link = Link {
        index,
        name: String::new(),
        kind: None,
        link_netnsid: None,
    };
    for nla in NlasIterator::new(&payload[IFINFOMSG_LEN..]) {
        let nla = nla.map_err(|e| parse_err(format!("link {index}: {e}")))?;
        match nla.kind() {
            IFLA_IFNAME => link.name = c_string(nla.value()),
            IFLA_LINK_NETNSID => link.link_netnsid = Some(i32_of(nla.value())?),
            IFLA_LINKINFO => {
                for info in NlasIterator::new(nla.value()) {
                    let info = info.map_err(|e| parse_err(format!("link {index}: {e}")))?;
                    if info.kind() == IFLA_INFO_KIND {
                        link.kind = Some(c_string(info.value()));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(link)
}

/// The `NETNSA_NSID` of an `RTM_NEWNSID` payload.
fn parse_nsid(payload: &[u8]) -> Result<Option<i32>> {
    let attrs = payload
        .get(RTGENMSG_LEN..)
        .ok_or_else(|| parse_err("an nsid message shorter than rtgenmsg".into()))?;
    for nla in NlasIterator::new(attrs) {
        let nla = nla.map_err(|e| parse_err(format!("nsid: {e}")))?;
        if nla.kind() == NETNSA_NSID {
            return i32_of(nla.value()).map(Some);
        }
    }
    Ok(None)
}

/// A NUL-terminated attribute as text.
fn c_string(value: &[u8]) -> String {
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

fn i32_of(value: &[u8]) -> Result<i32> {
    value
        .get(..4)
        .map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| parse_err("a 32-bit attribute shorter than 4 bytes".into()))
}

/// The name errors carry in place of a file.
fn source_name() -> PathBuf {
    PathBuf::from("rtnetlink (RTM_GETLINK, RTM_GETNSID)")
}

fn io_err(what: &str, source: io::Error) -> Error {
    Error::Io {
        path: source_name().join(what),
        source,
    }
}

fn parse_err(msg: String) -> Error {
    Error::Parse {
        path: source_name(),
        line: 0,
        msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    fn link_payload(index: u32, name: &str, kind: Option<&str>, nsid: Option<i32>) -> Vec<u8> {
        let mut out = vec![0u8; IFINFOMSG_LEN];
        out[4..8].copy_from_slice(&index.to_ne_bytes());
        out.extend(nla(IFLA_IFNAME, format!("{name}\0").as_bytes()));
        // An attribute the reader does not know, as a newer kernel adds them.
        out.extend(nla(999, &[1, 2, 3, 4, 5]));
        if let Some(k) = kind {
            // IFLA_LINKINFO is nested (NLA_F_NESTED), its kind first, then data tact skips.
            let mut info = nla(IFLA_INFO_KIND, format!("{k}\0").as_bytes());
            info.extend(nla(2, &[0; 8]));
            out.extend(nla(IFLA_LINKINFO | 0x8000, &info));
        }
        if let Some(id) = nsid {
            out.extend(nla(IFLA_LINK_NETNSID, &id.to_ne_bytes()));
        }
        out
    }

    #[test]
    fn links_are_read_from_their_attributes() {
        let l = parse_link(&link_payload(7, "vethab", Some("veth"), Some(3))).unwrap();
        assert_eq!(
            l,
            Link {
                index: 7,
                name: "vethab".into(),
                kind: Some("veth".into()),
                link_netnsid: Some(3),
            }
        );
        let nic = parse_link(&link_payload(2, "eth0", None, None)).unwrap();
        assert_eq!((nic.kind, nic.link_netnsid), (None, None));
        assert!(parse_link(&[0; 8]).is_err());
    }

    #[test]
    fn only_veths_into_the_namespace_asked_about_are_its_ends() {
        let links = [
            link_payload(1, "lo", None, None),
            link_payload(5, "to-job", Some("veth"), Some(0)),
            link_payload(6, "to-other", Some("veth"), Some(1)),
            // A veth with both ends here (no link id) is no way in from elsewhere.
            link_payload(8, "local", Some("veth"), None),
            // A tunnel whose underlay is in the job's namespace is not a veth.
            link_payload(9, "vx", Some("vxlan"), Some(0)),
            link_payload(10, "to-job2", Some("veth"), Some(0)),
        ]
        .map(|p| parse_link(&p).unwrap());
        let ends = veth_ends(&links, 0);
        let names: Vec<&str> = ends.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["to-job", "to-job2"]);
        assert_eq!(ends[0].index, 5);
        assert!(veth_ends(&links, 2).is_empty());
    }

    #[test]
    fn an_nsid_reply_gives_its_id() {
        let mut p = vec![0u8; RTGENMSG_LEN];
        p.extend(nla(NETNSA_NSID, &4i32.to_ne_bytes()));
        assert_eq!(parse_nsid(&p).unwrap(), Some(4));
        let mut none = vec![0u8; RTGENMSG_LEN];
        none.extend(nla(NETNSA_NSID, &(-1i32).to_ne_bytes()));
        assert_eq!(parse_nsid(&none).unwrap(), Some(-1));
        assert_eq!(parse_nsid(&[0; RTGENMSG_LEN]).unwrap(), None);
    }

    #[test]
    fn this_process_has_a_namespace_and_a_dead_pid_none() {
        assert_eq!(
            net_namespace(None).unwrap(),
            net_namespace(Some(std::process::id() as i32)).unwrap()
        );
        assert!(matches!(
            net_namespace(Some(i32::MAX)),
            Err(Error::NoProcess { .. })
        ));
    }
}
