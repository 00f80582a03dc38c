//! What the idle gates watch (spec idletime §6): foreground activity on a disk or a link, as the
//! device's counters less the job's own, and the preemption interval each resource gets by
//! default from its measured service time (the thesis's heuristic, T§4.3.1: p ≈ 10× the service
//! time).

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_linux::actuate::htb;
use tact_linux::probe::block_device::BlockDevice;
use tact_linux::probe::diskstats::{DiskStats, DiskstatsReader};
use tact_linux::probe::htb_class::{parse_classid, TcClasses};
use tact_linux::probe::netstats::{NetCounters, NetReader};
use tact_linux::probe::sockets::{Framing, JobSockets, LinkKind};
use tact_linux::{ProcId, ProcReader, ProgressMeter, ProgressSource};

/// Foreground bytes of this much or more in one probe interval count as foreground activity
/// (spec §6: θ = 4 KiB) while some of the job's own bytes are still unmatched: the match is only
/// as good as `/proc/PID/io`'s account, so a sliver of residual may be the job's. Inclusive, so
/// that one single-page request is seen: a probe every millisecond rarely sees two at once, and
/// with "above θ" a foreground of 4 KiB random reads never held the job (bench/idle).
pub const THETA_BYTES: u64 = 4096;

/// How long the job's own written bytes may take to reach the disk: the kernel writes dirty pages
/// back after `dirty_expire_centisecs` (30 s) at the next flusher wakeup (5 s later at most).
const WRITEBACK_WINDOW: Duration = Duration::from_secs(35);

/// How long the job's own packets may take from its namespace to the watched interface: the
/// queue of the bottleneck between them (tbf's `latency`, a codel target of 5 ms, a bloated FIFO
/// of some 100 ms) delays them, and what has not shown up by then was dropped or went out another
/// way. Short, because until they expire such bytes mask the same amount of foreground.
const NET_CARRY_WINDOW: Duration = Duration::from_millis(200);

/// IPv4 and TCP headers, the timestamp option included (Linux sends it by default), of each
/// frame a segmented TCP packet becomes; the link's header comes on top. IPv6 frames carry 20
/// bytes more, which this leaves to the ledger (see [`Segmentation`]).
const IPV4_TCP_HEADERS: u64 = 20 + 32;

/// The headers a job's packets gain between its network namespace and the watched interface.
/// The namespace counts a TCP GSO packet of up to 64 KiB once, with one set of headers; a qdisc
/// that cuts it into MTU-sized frames (tbf with a bucket smaller than the packet) or a driver
/// that counts the wire's bytes counts every frame with its own. Measured on bench/idle's
/// network (tbf, 16 KiB requests): the interface showed 4.3% more of the job's bytes than its
/// namespace; the ledger carried the shortfall from request to request until a probe fell
/// between two of them, and then it surfaced as 4–5 KiB of "foreground": a false f event every
/// 23 ms the job sent alone (docs/idle.md, "The network's automatic PI").
/// The frames the interface counted beyond the job's packets are such frames, as far as the
/// job's outstanding bytes could have made them (the rest are someone else's): their headers
/// are the job's too. Header sizes are a guess: too long and they build up in the ledger and
/// mask foreground, so IPv4's, the shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segmentation {
    /// The headers of one frame: the link's, IPv4's and TCP's.
    header: u64,
    /// The payload of a full frame: the MTU less the IPv4 and TCP headers.
    mss: u64,
}

impl Segmentation {
    /// For interface `iface` (`SYS_ROOT/class/net/IFACE/{type,mtu}`).
    fn read(sys_root: &Path, iface: &str) -> Result<Segmentation> {
        let link = LinkKind::read(sys_root, iface)?;
        let path = sys_root.join("class/net").join(iface).join("mtu");
        let mtu: u64 = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .trim()
            .parse()
            .with_context(|| format!("{}: not an MTU", path.display()))?;
        Ok(Segmentation {
            header: link.link_header + IPV4_TCP_HEADERS,
            mss: mtu.saturating_sub(IPV4_TCP_HEADERS).max(1),
        })
    }

    /// The job's bytes in a probe as the interface counts them: `own` (its namespace's bytes
    /// and packets since the last probe) plus the headers of the frames the interface counted
    /// beyond the job's packets (`device_packets`), at most as many as the job's `outstanding`
    /// bytes (not yet seen on the interface, this probe's included) fill at one MSS a frame.
    fn own_bytes(&self, own: &NetCounters, device_packets: u64, outstanding: u64) -> u64 {
        let extra = device_packets.saturating_sub(own.packets());
        own.bytes() + self.header * extra.min(outstanding.div_ceil(self.mss))
    }
}

/// The preemption interval's bounds when derived from a measured service time: below 10 ms the
/// 1 ms probe could not resolve a tenth of it, and above 1 s a background job would starve on
/// any disk in use.
const MIN_DEFAULT_PI: Duration = Duration::from_millis(10);
const MAX_DEFAULT_PI: Duration = Duration::from_secs(1);

/// The service time assumed for a disk whose counters measured none (the thesis's disk was
/// 20 ms; a 10 ms disk gives the 100 ms most of its figures favour).
const UNMEASURED_DISK_SERVICE: Duration = Duration::from_millis(10);

/// The network PI when nothing better is known: a local link serves a frame in microseconds,
/// and a foreground TCP flow needs p ≥ its RTT (spec §5), which tact cannot see from outside;
/// 10 ms covers LAN round trips and is ten probe intervals.
pub const DEFAULT_NET_PI: Duration = Duration::from_millis(10);

/// A default preemption interval and the reason for it, for the job's log.
#[derive(Debug, Clone)]
pub struct DefaultPi {
    pub pi: Duration,
    /// The service time it came from, when one was measured.
    pub service: Option<Duration>,
    pub why: String,
}

/// The default PI of a disk: ten times its mean service time since boot (`io_ticks` over
/// completed requests in `/proc/diskstats`), within [10 ms, 1 s].
pub fn disk_default_pi(stats: &[DiskStats]) -> DefaultPi {
    let ops: u64 = stats.iter().map(|s| s.reads + s.writes).sum();
    let busy_ms: u64 = stats.iter().map(|s| s.io_ticks_ms).sum();
    if ops == 0 || busy_ms == 0 {
        return DefaultPi {
            pi: UNMEASURED_DISK_SERVICE * 10,
            service: None,
            why: format!(
                "10x an assumed {} service time: the disk has no completed requests to measure",
                fmt_ms(UNMEASURED_DISK_SERVICE)
            ),
        };
    }
    let service = Duration::from_secs_f64(busy_ms as f64 / 1000.0 / ops as f64);
    let pi = (service * 10).clamp(MIN_DEFAULT_PI, MAX_DEFAULT_PI);
    let clamp = if pi == service * 10 {
        ""
    } else if pi == MIN_DEFAULT_PI {
        ", raised to the 10ms floor"
    } else {
        ", capped at 1s"
    };
    DefaultPi {
        pi,
        service: Some(service),
        why: format!(
            "10x the disk's mean service time {} (busy time per request in /proc/diskstats){clamp}",
            fmt_ms(service)
        ),
    }
}

/// The default PI of a link.
pub fn net_default_pi() -> DefaultPi {
    DefaultPi {
        pi: DEFAULT_NET_PI,
        service: None,
        why:
            "a frame takes microseconds, and a foreground TCP flow needs at least its round trip, \
              which tact cannot measure from outside: 10ms covers LAN round trips"
                .into(),
    }
}

/// `12.5ms` / `120ms` / `1.2s`, for the job's log.
pub fn fmt_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    match ms {
        0.0 => "0ms".into(),
        ms if ms >= 60_000.0 => fmt_long(d),
        ms if ms >= 1000.0 => format!("{:.1}s", ms / 1000.0),
        ms if ms >= 10.0 => format!("{ms:.0}ms"),
        ms => format!("{ms:.2}ms"),
    }
}

/// A minute or more in its two largest units, as `--preempt` takes them (`2m5s`, `4166d15h`):
/// `--preempt 99999h` would otherwise read 359996400.0s.
fn fmt_long(d: Duration) -> String {
    let (hi, hi_unit, lo, lo_unit) = match d.as_secs() {
        s if s >= 86_400 => (s / 86_400, "d", s % 86_400 / 3600, "h"),
        s if s >= 3600 => (s / 3600, "h", s % 3600 / 60, "m"),
        s => (s / 60, "m", s % 60, "s"),
    };
    match lo {
        0 => format!("{hi}{hi_unit}"),
        _ => format!("{hi}{hi_unit}{lo}{lo_unit}"),
    }
}

/// The job's own bytes not yet seen on the device. On a disk, `/proc/PID/io` charges a written
/// page when it is dirtied and a read when it is issued, the device counts both when they
/// complete, up to half a minute later for buffered writes. On a link, the job's namespace counts
/// a packet when it leaves, the watched interface when the bottleneck's queue releases it. Device
/// bytes are matched against this first, oldest first, so the job's bytes count against the
/// device in whichever later probe they show up; bytes that never reach the device (a file
/// deleted before writeback, a packet dropped) expire after the window.
#[derive(Debug)]
pub struct OwnLedger {
    window: Duration,
    pending: VecDeque<(Instant, u64)>,
}

/// What is left of a probe's device bytes once the job's are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residual {
    /// The device bytes that are not the job's: the foreground's.
    pub foreground: u64,
    /// Whether any of the job's bytes were unmatched before this probe or charged in it. When
    /// none were, every device byte of the interval is someone else's.
    pub own_outstanding: bool,
}

impl OwnLedger {
    /// A ledger whose entries expire `window` after they were charged.
    pub fn new(window: Duration) -> OwnLedger {
        OwnLedger {
            window,
            pending: VecDeque::new(),
        }
    }

    /// Records `own` bytes of the job at `now` and takes the job's out of the device's `device`
    /// bytes.
    pub fn foreground(&mut self, now: Instant, own: u64, device: u64) -> Residual {
        self.expire(now);
        if own > 0 {
            self.pending.push_back((now, own));
        }
        let own_outstanding = !self.pending.is_empty();
        let mut left = device;
        while left > 0 {
            let Some(front) = self.pending.front_mut() else {
                break;
            };
            let take = front.1.min(left);
            front.1 -= take;
            left -= take;
            if front.1 == 0 {
                self.pending.pop_front();
            }
        }
        Residual {
            foreground: left,
            own_outstanding,
        }
    }

    /// Takes back `bytes` of the job's that will never reach the device (written pages the
    /// kernel dropped before writeback), newest first: the pages still dirty are the recent
    /// ones, and older entries expire sooner.
    pub fn cancel(&mut self, mut bytes: u64) {
        while bytes > 0 {
            let Some(back) = self.pending.back_mut() else {
                break;
            };
            let take = back.1.min(bytes);
            back.1 -= take;
            bytes -= take;
            if back.1 == 0 {
                self.pending.pop_back();
            }
        }
    }

    /// The job's bytes still unmatched at `now`.
    pub fn pending(&mut self, now: Instant) -> u64 {
        self.expire(now);
        self.pending.iter().map(|&(_, b)| b).sum()
    }

    fn expire(&mut self, now: Instant) {
        while self
            .pending
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > self.window)
        {
            self.pending.pop_front();
        }
    }
}

/// What one probe of a resource saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Probe {
    /// Bytes the device moved in the interval.
    pub device: u64,
    /// Of those, the foreground's (after taking out the job's own).
    pub foreground: u64,
    /// Whether `foreground` is exact: nothing of the job's could be in it.
    pub exact: bool,
}

impl Probe {
    /// Whether the probe saw foreground activity: any residual when it is exact (a foreground
    /// request of a single sector while the job has nothing in flight), θ or more otherwise.
    pub fn fg_active(&self) -> bool {
        self.foreground >= THETA_BYTES || (self.exact && self.foreground > 0)
    }
}

/// Foreground I/O on the whole disks under a device.
pub struct DiskWatch {
    reader: DiskstatsReader,
    disks: Vec<String>,
    last: Vec<DiskStats>,
    own: ProgressMeter,
    /// The job's `read_bytes + write_bytes` and `cancelled_write_bytes` at the last probe.
    last_own: (f64, f64),
    ledger: OwnLedger,
}

impl DiskWatch {
    /// Starts watching the disks under `device`; `members` are the processes whose I/O is the
    /// job's own at this moment.
    pub fn new(device: &BlockDevice, members: &[ProcId]) -> Result<DiskWatch> {
        let reader = DiskstatsReader::new();
        let disks = if device.disks.is_empty() {
            vec![device.name.clone()]
        } else {
            device.disks.clone()
        };
        let last = read_disks(&reader, &disks)?;
        let mut own = ProgressMeter::new(
            ProcReader::new(),
            vec![ProgressSource::IoStorage, ProgressSource::IoCancelled],
        );
        let last_own = own_bytes(&own.sample(members)?);
        Ok(DiskWatch {
            reader,
            disks,
            last,
            own,
            last_own,
            ledger: OwnLedger::new(WRITEBACK_WINDOW),
        })
    }

    /// The samples the watch started from (for the default PI).
    pub fn baseline(&self) -> &[DiskStats] {
        &self.last
    }

    /// The disks' activity since the last probe, less the job's own (`members`: the job's tree
    /// now, and tact itself, whose log lands on some disk too).
    pub fn probe(&mut self, now: Instant, members: &[ProcId]) -> Result<Probe> {
        let stats = read_disks(&self.reader, &self.disks)?;
        let device: u64 = stats
            .iter()
            .zip(&self.last)
            .map(|(s, l)| s.since(l).bytes())
            .sum();
        self.last = stats;
        let own_total = own_bytes(&self.own.sample(members)?);
        let own = (own_total.0 - self.last_own.0).max(0.0) as u64;
        let cancelled = (own_total.1 - self.last_own.1).max(0.0) as u64;
        self.last_own = own_total;
        let residual = disk_residual(&mut self.ledger, now, own, cancelled, device);
        Ok(Probe {
            device,
            foreground: residual.foreground,
            exact: !residual.own_outstanding,
        })
    }
}

/// A disk meter's sample as (read + written, cancelled) bytes.
fn own_bytes(sample: &[f64]) -> (f64, f64) {
    (sample[0], sample[1])
}

/// One probe of a disk: the job's `own` bytes (read and written, `/proc/PID/io`) charged, those
/// it wrote that the kernel `cancelled` before writeback (a file deleted or truncated while
/// dirty) taken back, what they cancel of this probe's first, and the device's bytes matched.
/// Left in the ledger, a deleted file's pages masked as much foreground for its 35 s window.
fn disk_residual(
    ledger: &mut OwnLedger,
    now: Instant,
    own: u64,
    cancelled: u64,
    device: u64,
) -> Residual {
    ledger.cancel(cancelled.saturating_sub(own));
    ledger.foreground(now, own.saturating_sub(cancelled), device)
}

fn read_disks(reader: &DiskstatsReader, disks: &[String]) -> Result<Vec<DiskStats>> {
    disks
        .iter()
        .map(|d| reader.read(d).map_err(anyhow::Error::from))
        .collect()
}

/// Where the job's own traffic on the watched interface comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnTraffic {
    /// The job has a network namespace of its own: its interfaces' counters are exactly its
    /// traffic (behind a veth that the watched interface forwards).
    Namespace(i32),
    /// The job shares tact's namespace and its packets are marked into its class of tact's htb
    /// tree on the interface: the class's counters are what it sends, every protocol; what it
    /// receives, its TCP sockets' (sock_diag) received bytes. Its UDP and other received
    /// traffic counts as foreground.
    HtbClass,
    /// The job shares tact's namespace: the byte and segment counters of its TCP sockets
    /// (sock_diag), with estimated headers. Its UDP and other traffic counts as foreground.
    TcpSockets,
    /// No source: the job's own packets count as foreground.
    Unknown,
}

impl OwnTraffic {
    /// The source as the daemon's gate report carries it.
    pub fn report(self) -> tact_proto::OwnTraffic {
        match self {
            OwnTraffic::Namespace(_) => tact_proto::OwnTraffic::Namespace,
            OwnTraffic::HtbClass => tact_proto::OwnTraffic::HtbClass,
            OwnTraffic::TcpSockets => tact_proto::OwnTraffic::TcpSockets,
            OwnTraffic::Unknown => tact_proto::OwnTraffic::Unknown,
        }
    }

    /// The name the log's `start` and `netns` objects give it: the report's.
    pub fn name(self) -> &'static str {
        self.report().as_str()
    }

    /// What it means for the gate, for stderr.
    pub fn describe(self, iface: &str) -> String {
        match self {
            OwnTraffic::Namespace(_) => format!(
                "own traffic: the job's network namespace (its interfaces' counters): its \
                 traffic on {iface} is not foreground"
            ),
            OwnTraffic::HtbClass => format!(
                "own traffic: the job's htb class {} (its counters, read over rtnetlink) for \
                 what it sends, every protocol, and its TCP sockets for what it receives: \
                 its sent traffic and received TCP on {iface} are not foreground, its received \
                 UDP and other traffic is",
                htb::BG_CLASS
            ),
            OwnTraffic::TcpSockets => format!(
                "own traffic: the job's TCP sockets (their byte counters, read over sock_diag): \
                 its TCP traffic on {iface} is not foreground, its UDP and other traffic is"
            ),
            OwnTraffic::Unknown => format!(
                "own traffic: none: the job's traffic on {iface} counts as foreground, so a job \
                 that uses {iface} itself is held for a PI after each of its bursts"
            ),
        }
    }
}

/// When the job's sockets are looked for again: a probe costs a lookup per known socket (4 µs),
/// a rescan a read of every member's fds (30 µs a process), and a dump of the namespace's TCP
/// sockets (1 ms) when there is a new fd to match. Fully once a second (every fd that is not a
/// tracked socket matched again); for new fds sooner, when the tree changed or a probe's
/// residual looks like foreground (a new socket of the job counts as foreground until then),
/// but not more often than this, so that a steady foreground does not cost a rescan every
/// probe.
const SOCKET_RESCAN: Duration = Duration::from_secs(1);
const MIN_SOCKET_RESCAN: Duration = Duration::from_millis(10);

/// The job's TCP sockets as a source of its traffic, and when they were last looked for.
struct SocketSource {
    sockets: JobSockets,
    framing: Framing,
    last_rescan: Option<Instant>,
    members: Vec<ProcId>,
}

impl SocketSource {
    /// The job's frame bytes on the interface since the last probe, whose counters went up by
    /// `device` (bytes and frames): what the known sockets carried, some of what the ones that
    /// closed since did, and what new sockets carried since they were created. Those go to the
    /// ledger whole: the qdisc releases what TCP has sent over the next probes, and crediting
    /// only the bytes the interface showed unexplained now left the rest as foreground a probe
    /// later (a socket adopted with a long past masks as much foreground for the ledger's
    /// window at most). The first scan's sockets are the baseline, not credited.
    /// `unexplained(own)`: the device bytes neither `own` nor the ledger accounts for.
    fn own(
        &mut self,
        now: Instant,
        members: &[ProcId],
        device: &NetCounters,
        unexplained: impl Fn(u64) -> u64,
    ) -> Result<u64> {
        let link = self.sockets.link();
        let look = self.sockets.look()?;
        let mut own = self
            .framing
            .frame_bytes(&link, &look.carried, device.packets());
        // A socket that closed since the last look carried some more before it went: about as
        // much as in its interval before, twice that at most (a probe may come late), and no
        // more than the interface shows unexplained.
        own += (2 * look.vanished.frame_bytes(&link, device.packets())).min(unexplained(own));
        let since = self.last_rescan.map(|t| now.saturating_duration_since(t));
        let full = since.is_none_or(|s| s >= SOCKET_RESCAN);
        let due = full
            || since.is_some_and(|s| s >= MIN_SOCKET_RESCAN)
                && (members != self.members.as_slice() || unexplained(own) >= THETA_BYTES);
        if due {
            let pids: Vec<i32> = members.iter().map(|m| m.pid).collect();
            let fresh = self.sockets.rescan(&pids, full)?;
            if self.last_rescan.is_some() {
                // Headers for no more segments than this probe's frames: the rest of a new
                // socket's past frames are not worth masking foreground for.
                own += fresh.frame_bytes(&link, device.packets());
            }
            self.last_rescan = Some(now);
            self.members = members.to_vec();
        }
        Ok(own)
    }
}

/// The job's class in tact's htb tree as the source of what it sends: the packets its cgroup's
/// sockets send are marked into it (1:20), everything else goes to the foreground's (1:10). One
/// read is an rtnetlink dump of the interface's classes, 6–12 µs.
struct ClassSource {
    reader: TcClasses,
    /// The two classes' handles.
    fg_id: u32,
    job_id: u32,
    /// The two classes' bytes at the last read.
    last: ClassBytes,
    /// What the job's class sent between the two reads before the last.
    job_before: u64,
}

/// The bytes of tact's two classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ClassBytes {
    fg: u64,
    job: u64,
}

/// What the classes sent since the last read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ClassSent {
    /// The foreground's class.
    fg: u64,
    /// The job's class, this interval and the one before.
    job: u64,
    job_before: u64,
}

impl ClassSource {
    fn new(iface: &str) -> tact_linux::Result<ClassSource> {
        let mut source = ClassSource {
            reader: TcClasses::new(iface)?,
            fg_id: parse_classid(htb::FG_CLASS).expect("a valid class id"),
            job_id: parse_classid(htb::BG_CLASS).expect("a valid class id"),
            last: ClassBytes::default(),
            job_before: 0,
        };
        source.last = source.read()?;
        Ok(source)
    }

    fn read(&mut self) -> tact_linux::Result<ClassBytes> {
        let classes = self.reader.dump()?;
        Ok(ClassBytes {
            fg: self.reader.find(&classes, self.fg_id)?.bytes,
            job: self.reader.find(&classes, self.job_id)?.bytes,
        })
    }

    /// Counts from now on.
    fn restart(&mut self) -> tact_linux::Result<()> {
        self.last = self.read()?;
        self.job_before = 0;
        Ok(())
    }

    /// What the classes sent since the last read.
    fn sent(&mut self) -> tact_linux::Result<ClassSent> {
        let now = self.read()?;
        let job = now.job.saturating_sub(self.last.job);
        let sent = ClassSent {
            fg: now.fg.saturating_sub(self.last.fg),
            job,
            job_before: self.job_before,
        };
        self.last = now;
        self.job_before = job;
        Ok(sent)
    }
}

/// The job's share of the `tx` bytes the interface sent in a probe, with tact's htb tree on it:
/// what the foreground's class did not send, and no more than the job's class sent in this
/// interval and the one before. Not its class's bytes themselves: a qdisc counts a GSO packet
/// with the headers of every segment it will be cut into, and a veth, which passes it on whole,
/// counts one set (`probe::htb_class`): a TCP flow's class read some 4 % over the veth's
/// `tx_bytes` (902 MB against 867 MB in a second), and carried in the ledger that excess, more
/// than a foreground of 30 MB/s, masked the foreground entirely. Everything tact does not mark
/// goes to the foreground's class, so the bytes it did not send are the job's, in the
/// interface's own count, on a NIC (which counts every segment's headers, as the qdisc does) and
/// a veth alike; what is left over is the foreground's, overcounted by its own GSO headers if
/// anything. Credited to this probe only, never carried: the qdisc hands a packet to the device
/// as it counts it, so the interface has counted in this probe whatever of the job's it will
/// ever count. The cap: a packet outside the tree (a packet socket that bypasses the qdisc) is
/// not the job's; the class is read a moment after the interface, so the job's last bytes
/// before a pause can show in its class a probe before the interface counts them, hence the
/// interval before.
fn class_own_tx(tx: u64, sent: ClassSent) -> u64 {
    tx.saturating_sub(sent.fg)
        .min(sent.job.saturating_add(sent.job_before))
}

/// A probe's foreground bytes on an interface with tact's htb tree, whose counters went up by
/// `delta`, the classes' by `sent`: what the job sent comes off the interface's bytes in this
/// probe ([`class_own_tx`]), and what its sockets say it `received` goes through the ledger.
fn class_foreground(
    ledger: &mut OwnLedger,
    now: Instant,
    delta: &NetCounters,
    sent: ClassSent,
    received: u64,
) -> u64 {
    let off = class_own_tx(delta.tx_bytes, sent);
    ledger
        .foreground(now, received, delta.bytes().saturating_sub(off))
        .foreground
}

/// Foreground traffic on one interface (rx + tx: ACK-clocked TCP shows as receive traffic).
pub struct NetWatch {
    reader: NetReader,
    iface: String,
    /// The job's root process, whose namespace is the job's.
    job: i32,
    last: NetCounters,
    own: OwnTraffic,
    last_own: NetCounters,
    /// The job's sockets, where sock_diag could be opened (else why not). Boxed: it is most of
    /// a watch's size, and a disk's has none.
    sockets: std::result::Result<Box<SocketSource>, String>,
    /// The job's htb class, once its packets are marked into it ([`NetWatch::use_class`]).
    class: Option<ClassSource>,
    /// The job's bytes that left its namespace and have not shown on the interface yet.
    ledger: OwnLedger,
    /// The headers its packets gain on the way, when they come from its namespace.
    segmentation: Segmentation,
}

impl NetWatch {
    /// Starts watching `iface` for the job rooted at `job`.
    pub fn new(iface: &str, job: i32) -> Result<NetWatch> {
        let reader = NetReader::new();
        let last = reader.counters(iface)?;
        let sockets = JobSockets::new(Path::new("/sys"), ProcReader::new().root(), iface)
            .map(|sockets| {
                Box::new(SocketSource {
                    sockets,
                    framing: Framing::default(),
                    last_rescan: None,
                    members: Vec::new(),
                })
            })
            .map_err(|e| e.to_string());
        let mut watch = NetWatch {
            reader,
            iface: iface.to_string(),
            job,
            last,
            own: OwnTraffic::Unknown,
            last_own: NetCounters::default(),
            sockets,
            class: None,
            ledger: OwnLedger::new(NET_CARRY_WINDOW),
            segmentation: Segmentation::read(Path::new("/sys"), iface)?,
        };
        watch.recheck()?;
        Ok(watch)
    }

    pub fn own(&self) -> OwnTraffic {
        self.own
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Why the job's TCP sockets cannot be counted, when they cannot.
    pub fn no_sockets(&self) -> Option<&str> {
        self.sockets.as_ref().err().map(String::as_str)
    }

    /// Takes what the job sends from its class of tact's htb tree on the interface, from now on
    /// while it shares tact's namespace: call once the tree is up and the job's packets are
    /// marked into the class. The new source when that changed it, or why the class cannot be
    /// read.
    pub fn use_class(&mut self) -> std::result::Result<Option<OwnTraffic>, String> {
        // `lo` counts every packet sent and again received, the class once; its TCP sockets
        // count both ends there.
        if LinkKind::read(Path::new("/sys"), &self.iface).is_ok_and(|k| k.loopback) {
            return Err("a loopback interface: its TCP sockets stay the source".into());
        }
        self.class = Some(ClassSource::new(&self.iface).map_err(|e| e.to_string())?);
        let changed = self.recheck().map_err(|e| e.to_string())?;
        Ok(changed)
    }

    /// Stops reading the job's class (its tree is gone); the new source, if that changed it.
    pub fn drop_class(&mut self) -> Result<Option<OwnTraffic>> {
        if self.class.take().is_none() {
            return Ok(None);
        }
        self.recheck()
    }

    /// Looks again whether the job's root has a network namespace of its own (`/proc/PID/ns/net`
    /// against tact's), and returns the new source of its traffic when that changed. Once is not
    /// enough: `ip netns exec NS cmd` moves the job only after tact has started it.
    pub fn recheck(&mut self) -> Result<Option<OwnTraffic>> {
        let own_ns = match self.reader.own_namespace(self.job) {
            Ok(own_ns) => own_ns,
            // The root left: `probe` finds out on its own.
            Err(tact_linux::Error::NoProcess { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let sources = Sources {
            class: self.class.is_some(),
            sockets: self.sockets.is_ok(),
        };
        let Some(own) = switched(self.own, self.job, own_ns, sources) else {
            return Ok(None);
        };
        match own {
            OwnTraffic::Namespace(pid) => {
                // The namespace's counters start from here; what it sent before is not the job's.
                match self.reader.job_counters(pid) {
                    Ok(c) => self.last_own = c,
                    Err(tact_linux::Error::NoProcess { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
            OwnTraffic::HtbClass | OwnTraffic::TcpSockets => {
                if own == OwnTraffic::HtbClass {
                    // The class's bytes start from here, as a namespace's do; a class that
                    // cannot be read any more is no source.
                    if let Some(Err(e)) = self.class.as_mut().map(ClassSource::restart) {
                        tracing::warn!("net:{}: the job's htb class is no source: {e}", self.iface);
                        self.class = None;
                        return self.recheck();
                    }
                }
                // Look for the job's sockets at the next probe; with the class, they count
                // what the job receives only.
                if let Ok(s) = &mut self.sockets {
                    s.last_rescan = None;
                    s.sockets.count_received_only(own == OwnTraffic::HtbClass);
                }
            }
            OwnTraffic::Unknown => {}
        }
        self.own = own;
        Ok(Some(own))
    }

    /// The interface's traffic since the last probe less the job's (`members`: the job's tree
    /// now, whose fds hold its sockets).
    pub fn probe(&mut self, now: Instant, members: &[ProcId]) -> Result<Probe> {
        let counters = self.reader.counters(&self.iface)?;
        let delta = counters.since(&self.last);
        let device = delta.bytes();
        self.last = counters;
        let mut class_sent = None;
        let own = match self.own {
            OwnTraffic::Namespace(pid) => match self.reader.job_counters(pid) {
                Ok(c) => {
                    let d = c.since(&self.last_own);
                    self.last_own = c;
                    let outstanding = self.ledger.pending(now) + d.bytes();
                    self.segmentation
                        .own_bytes(&d, delta.packets(), outstanding)
                }
                // The root left; what is left of the job shares its namespace, but tact can no
                // longer name it, so its traffic counts as foreground from here on.
                Err(_) => {
                    self.own = OwnTraffic::Unknown;
                    0
                }
            },
            OwnTraffic::HtbClass | OwnTraffic::TcpSockets => {
                if let (Some(c), OwnTraffic::HtbClass) = (&mut self.class, self.own) {
                    match c.sent() {
                        Ok(sent) => class_sent = Some(sent),
                        // The tree went (someone removed it): the sockets alone from the next
                        // probe on, both ways.
                        Err(e) => {
                            self.class = None;
                            let now = self.recheck()?.unwrap_or(self.own);
                            tracing::warn!(
                                "net:{}: the job's htb class cannot be read any more ({e}); {}",
                                self.iface,
                                now.describe(&self.iface)
                            );
                        }
                    }
                }
                let sent = class_sent.map_or(0, |c| class_own_tx(delta.tx_bytes, c));
                match &mut self.sockets {
                    Ok(s) => {
                        let pending = self.ledger.pending(now);
                        s.own(now, members, &delta, |own| {
                            device.saturating_sub(own.saturating_add(sent).saturating_add(pending))
                        })?
                    }
                    Err(_) => 0,
                }
            }
            OwnTraffic::Unknown => 0,
        };
        let foreground = match class_sent {
            Some(sent) => class_foreground(&mut self.ledger, now, &delta, sent, own),
            None => self.ledger.foreground(now, own, device).foreground,
        };
        Ok(Probe {
            device,
            foreground,
            // Never exact: a link carries stray frames (ARP, neighbour discovery, a DNS query)
            // that are not a foreground flow, and θ keeps them from holding the job.
            exact: false,
        })
    }
}

/// Which sources of the job's traffic in tact's namespace can be read.
#[derive(Debug, Clone, Copy)]
struct Sources {
    /// Its htb class, its packets marked into it.
    class: bool,
    /// Its TCP sockets.
    sockets: bool,
}

/// The source of the job's traffic now that its root is (`own_ns`) or is not in a network
/// namespace other than tact's, if it differs from `current`; in tact's namespace, its htb
/// class when its packets go there, else its TCP sockets when they can be read.
fn switched(current: OwnTraffic, job: i32, own_ns: bool, can: Sources) -> Option<OwnTraffic> {
    let now = if own_ns {
        OwnTraffic::Namespace(job)
    } else if can.class {
        OwnTraffic::HtbClass
    } else if can.sockets {
        OwnTraffic::TcpSockets
    } else {
        OwnTraffic::Unknown
    };
    (now != current).then_some(now)
}

/// The interface of the default route (`/proc/net/route`, destination 0), for `--idle net`.
pub fn default_route_interface() -> Result<String> {
    let path = "/proc/net/route";
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    parse_default_route(&text).with_context(|| {
        format!("{path} has no default route; name the interface: --idle net:INTERFACE")
    })
}

fn parse_default_route(text: &str) -> Option<String> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[1] == "00000000").then(|| f[0].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(reads: u64, writes: u64, io_ticks_ms: u64) -> DiskStats {
        DiskStats {
            major: 8,
            minor: 0,
            name: "sda".into(),
            reads,
            sectors_read: 0,
            writes,
            sectors_written: 0,
            in_flight: 0,
            io_ticks_ms,
            time_in_queue_ms: 0,
        }
    }

    #[test]
    fn the_disk_pi_is_ten_service_times_within_bounds() {
        // 2000 ms busy over 100 requests: 20 ms each, p = 200 ms (the thesis's disk).
        let d = disk_default_pi(&[disk(60, 40, 2000)]);
        assert_eq!(d.pi, Duration::from_millis(200));
        assert_eq!(d.service, Some(Duration::from_millis(20)));
        assert!(d.why.contains("20ms"), "{}", d.why);
        // An SSD: 0.1 ms per request would give 1 ms, below what the probe resolves.
        let d = disk_default_pi(&[disk(10_000, 0, 1000)]);
        assert_eq!(d.pi, MIN_DEFAULT_PI);
        assert!(d.why.contains("floor"), "{}", d.why);
        // A very slow device is capped.
        assert_eq!(disk_default_pi(&[disk(1, 0, 500)]).pi, MAX_DEFAULT_PI);
        // Nothing measured.
        let d = disk_default_pi(&[disk(0, 0, 0)]);
        assert_eq!((d.pi, d.service), (Duration::from_millis(100), None));
    }

    #[test]
    fn the_ledger_takes_the_jobs_bytes_out_when_they_reach_the_device() {
        let t0 = Instant::now();
        let mut l = OwnLedger::new(WRITEBACK_WINDOW);
        let fg = |r: Residual| r.foreground;
        // The job dirties 1 MB; nothing reaches the disk yet.
        assert_eq!(fg(l.foreground(t0, 1 << 20, 0)), 0);
        // Writeback of 1 MB later is the job's, plus 8 KiB of someone else's.
        let t1 = t0 + Duration::from_secs(5);
        let r = l.foreground(t1, 0, (1 << 20) + 8192);
        assert_eq!(r.foreground, 8192);
        assert!(r.own_outstanding, "the job's megabyte was outstanding");
        // Nothing of the job's is left to mask the next foreground bytes.
        let r = l.foreground(t1, 0, 512);
        assert_eq!(
            r,
            Residual {
                foreground: 512,
                own_outstanding: false
            }
        );
        // Bytes that never reach the disk stop masking the foreground after the window.
        l.foreground(t1, 4096, 0);
        let late = t1 + WRITEBACK_WINDOW + Duration::from_secs(1);
        assert_eq!(fg(l.foreground(late, 0, 4096)), 4096);
    }

    /// One probe of a disk watch: the ledger's residual as `DiskWatch::probe` makes it.
    fn disk_probe(l: &mut OwnLedger, now: Instant, own: u64, device: u64) -> Probe {
        let r = l.foreground(now, own, device);
        Probe {
            device,
            foreground: r.foreground,
            exact: !r.own_outstanding,
        }
    }

    #[test]
    fn written_bytes_the_kernel_cancelled_do_not_mask_the_foreground() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut l = OwnLedger::new(WRITEBACK_WINDOW);
        // The audit's job: 30 MiB written to the page cache, then the file deleted before
        // writeback (`/proc/PID/io`: write_bytes 31461376, cancelled_write_bytes 31457280).
        let p = disk_residual(&mut l, t0, 31_461_376, 0, 0);
        assert_eq!(p.foreground, 0);
        let p = disk_residual(&mut l, t0 + 200 * ms, 0, 31_457_280, 0);
        assert_eq!(p.foreground, 0);
        assert_eq!(l.pending(t0 + 200 * ms), 4096);
        // A foreground write of 64 KiB a second later is seen (it was masked for 35 s).
        let p = disk_residual(&mut l, t0 + 1000 * ms, 0, 0, 65536);
        assert_eq!(p.foreground, 61440);
        let p = disk_residual(&mut l, t0 + 1001 * ms, 0, 0, 65536);
        assert_eq!((p.foreground, p.own_outstanding), (65536, false));
        // Written and deleted within one probe: nothing charged.
        let p = disk_residual(&mut l, t0 + 1002 * ms, 1 << 20, 1 << 20, 4096);
        assert_eq!((p.foreground, p.own_outstanding), (4096, false));
        // Partly written back before the delete: only what is still pending is taken back,
        // and a cancel beyond the ledger (a file dirtied before the job) takes nothing more.
        disk_residual(&mut l, t0 + 1003 * ms, 8 << 20, 0, 0);
        disk_residual(&mut l, t0 + 1004 * ms, 0, 0, 3 << 20);
        disk_residual(&mut l, t0 + 1005 * ms, 0, 9 << 20, 0);
        assert_eq!(l.pending(t0 + 1005 * ms), 0);
        // The newest bytes go first: the older stay to match what is being written back.
        disk_residual(&mut l, t0 + 1006 * ms, 4096, 0, 0);
        disk_residual(&mut l, t0 + 1007 * ms, 8192, 0, 0);
        disk_residual(&mut l, t0 + 1008 * ms, 0, 8192, 0);
        assert_eq!(l.pending(t0 + 1008 * ms), 4096);
        let late = t0 + 1006 * ms + WRITEBACK_WINDOW + ms;
        assert_eq!(l.pending(late), 0);
    }

    #[test]
    fn a_lone_page_read_between_two_probes_is_foreground() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut l = OwnLedger::new(WRITEBACK_WINDOW);
        // The job is idle; one 4 KiB foreground read completes between two probes.
        assert!(!disk_probe(&mut l, t0, 0, 0).fg_active());
        assert!(disk_probe(&mut l, t0 + ms, 0, 4096).fg_active());
        // Even a single sector is a request when the job has nothing outstanding.
        assert!(disk_probe(&mut l, t0 + 2 * ms, 0, 512).fg_active());
        // The job issues 64 KiB; the foreground's page completes first and is matched against
        // the job's bytes, so it shows when the job's request completes, a probe later.
        let p = disk_probe(&mut l, t0 + 3 * ms, 65536, 4096);
        assert_eq!(p.foreground, 0);
        let p = disk_probe(&mut l, t0 + 4 * ms, 0, 65536);
        assert_eq!(p.foreground, 4096);
        assert!(p.fg_active(), "{p:?}");
    }

    #[test]
    fn the_jobs_own_io_is_not_foreground() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut l = OwnLedger::new(WRITEBACK_WINDOW);
        // The job's 4 KiB reads, each issued in one probe and completed in the same or the next.
        for i in 0..10 {
            let t = t0 + i * 2 * ms;
            assert!(!disk_probe(&mut l, t, 4096, 4096).fg_active());
            assert!(!disk_probe(&mut l, t + ms, 4096, 0).fg_active());
            assert!(!disk_probe(&mut l, t + ms, 0, 4096).fg_active());
        }
        // While the job has bytes outstanding, less than θ of residual may be the ledger's
        // inexactness (the file system's rounding in the job's name) and does not count.
        let p = disk_probe(&mut l, t0 + 30 * ms, 8192, 8192 + 1024);
        assert_eq!((p.foreground, p.exact), (1024, false));
        assert!(!p.fg_active());
    }

    #[test]
    fn theta_is_inclusive() {
        let p = |fg| Probe {
            device: fg,
            foreground: fg,
            exact: false,
        };
        assert!(!p(THETA_BYTES - 512).fg_active());
        assert!(p(THETA_BYTES).fg_active());
    }

    #[test]
    fn the_jobs_packets_count_in_whichever_probe_they_reach_the_interface() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut l = OwnLedger::new(NET_CARRY_WINDOW);
        // A 64 KiB burst leaves the job's namespace; the bottleneck releases it over the next
        // three probes.
        assert_eq!(l.foreground(t0, 65536, 16384).foreground, 0);
        assert_eq!(l.foreground(t0 + ms, 0, 32768).foreground, 0);
        assert_eq!(l.foreground(t0 + 2 * ms, 0, 16384).foreground, 0);
        // The next bytes on the interface are someone else's.
        assert_eq!(l.foreground(t0 + 3 * ms, 0, 6000).foreground, 6000);
        // Packets of the job that never reach the interface (dropped, or routed elsewhere) mask
        // the foreground only for the window.
        l.foreground(t0 + 4 * ms, 10_000, 0);
        assert_eq!(l.foreground(t0 + 5 * ms, 0, 6000).foreground, 0);
        let late = t0 + 4 * ms + NET_CARRY_WINDOW + ms;
        assert_eq!(l.foreground(late, 0, 6000).foreground, 6000);
    }

    /// bench/idle's network, the job alone: in a namespace of its own, it sends 16 KiB requests
    /// one at a time, each a single GSO packet that its namespace counts once; tbf cuts it into
    /// 12 frames of at most 1514 bytes that the interface counts as they leave at 100 Mbit/s
    /// (80 ns a byte), and the job writes the next request 50 µs after the last frame of the one
    /// before. The probes, one a millisecond, as `NetWatch::probe` makes them from the two
    /// counters with `seg`.
    fn segmented_link(seg: Segmentation, requests: u64) -> Vec<Probe> {
        const PAYLOAD: u64 = 16384;
        let (header, mss) = (66, 1448);
        // (µs at which the job counted it, µs at which each of its frames had left, its bytes).
        let mut sent = Vec::new();
        let mut t_ns = 0u64;
        for _ in 0..requests {
            let start = t_ns;
            let mut frames = Vec::new();
            let mut left = PAYLOAD;
            while left > 0 {
                let frame = left.min(mss) + header;
                left -= left.min(mss);
                t_ns += 80 * frame;
                frames.push((t_ns / 1000, frame));
            }
            sent.push((start / 1000, frames));
            t_ns += 50_000;
        }
        let t0 = Instant::now();
        let mut ledger = OwnLedger::new(NET_CARRY_WINDOW);
        let (mut last_own, mut last_dev) = (NetCounters::default(), NetCounters::default());
        let mut probes = Vec::new();
        for ms in 1..=t_ns / 1_000_000 {
            let at = ms * 1000;
            let mut own = NetCounters::default();
            let mut dev = NetCounters::default();
            for (_, frames) in sent.iter().filter(|(start, _)| *start < at) {
                own.tx_bytes += PAYLOAD + header;
                own.tx_packets += 1;
                for (_, bytes) in frames.iter().filter(|(end, _)| *end < at) {
                    dev.tx_bytes += bytes;
                    dev.tx_packets += 1;
                }
            }
            let (d_own, d_dev) = (own.since(&last_own), dev.since(&last_dev));
            (last_own, last_dev) = (own, dev);
            let now = t0 + Duration::from_millis(ms);
            let outstanding = ledger.pending(now) + d_own.bytes();
            let own_bytes = seg.own_bytes(&d_own, d_dev.packets(), outstanding);
            let r = ledger.foreground(now, own_bytes, d_dev.bytes());
            probes.push(Probe {
                device: d_dev.bytes(),
                foreground: r.foreground,
                exact: false,
            });
        }
        probes
    }

    #[test]
    fn frames_cut_from_the_jobs_packets_are_the_jobs() {
        let ether = Segmentation {
            header: 14 + IPV4_TCP_HEADERS,
            mss: 1500 - IPV4_TCP_HEADERS,
        };
        let probes = segmented_link(ether, 400);
        assert!(probes.len() > 500, "{}", probes.len());
        assert!(probes.iter().all(|p| !p.fg_active()), "{probes:?}");
        let fg: u64 = probes.iter().map(|p| p.foreground).sum();
        assert!(fg < 1514, "{fg} bytes of the job's taken for foreground");
        // Counting the job's packets as its namespace does, the interface's extra headers
        // (726 bytes a request) pile up in the ledger until a probe falls between two
        // requests, and then show as foreground.
        let bare = Segmentation { header: 0, ..ether };
        let false_fg = segmented_link(bare, 400)
            .iter()
            .filter(|p| p.fg_active())
            .count();
        assert!(false_fg > 3, "{false_fg}");
    }

    #[test]
    fn the_segmentation_allowance_needs_the_jobs_bytes() {
        let seg = Segmentation {
            header: 66,
            mss: 1448,
        };
        let own = |bytes, packets| NetCounters {
            tx_bytes: bytes,
            tx_packets: packets,
            ..NetCounters::default()
        };
        // One GSO packet of the job's, 12 frames on the interface: 11 more headers.
        assert_eq!(seg.own_bytes(&own(16450, 1), 12, 16450), 16450 + 11 * 66);
        // The job has nothing outstanding: the interface's frames are someone else's, small
        // ones included, and are not masked.
        assert_eq!(seg.own_bytes(&own(0, 0), 60, 0), 0);
        // Frames beyond what the job's outstanding bytes could fill are someone else's.
        assert_eq!(seg.own_bytes(&own(0, 0), 40, 3000), 3 * 66);
        // A link that does not cut packets counts as many as the job's namespace.
        assert_eq!(seg.own_bytes(&own(16450, 1), 1, 16450), 16450);
    }

    /// A veth with tact's htb tree, probed every millisecond: the interface's counters read at
    /// each millisecond, the classes' 50 µs later. The job's TCP flow sends `job` bytes a
    /// millisecond (as the veth counts them: one header per GSO packet) while `job_on(ms)`, the
    /// foreground's `fg` while `fg_on(ms)`; the classes count 4 % more of each (every segment's
    /// headers), and the job's ACKs come back at 1.5 % of its rate, which its sockets count as
    /// received. The foreground bytes of each probe, as `NetWatch::probe` makes them.
    fn veth_with_tree(
        ms: u64,
        job: u64,
        job_on: impl Fn(f64) -> bool,
        fg: u64,
        fg_on: impl Fn(f64) -> bool,
    ) -> Vec<u64> {
        // Bytes sent by time `t` (ms) at `rate` a millisecond while `on`, in steps of 10 µs.
        let upto = |t: f64, rate: u64, on: &dyn Fn(f64) -> bool| -> u64 {
            let steps = (t * 100.0).round() as u64;
            (0..steps).filter(|&i| on(i as f64 / 100.0)).count() as u64 * rate / 100
        };
        let gso = |b: u64| b * 104 / 100;
        let t0 = Instant::now();
        let mut ledger = OwnLedger::new(NET_CARRY_WINDOW);
        let mut class = ClassBytes::default();
        let mut job_before = 0;
        let mut last = NetCounters::default();
        let mut out = Vec::new();
        for k in 1..=ms {
            let (t, tc) = (k as f64, k as f64 + 0.05);
            let counters = NetCounters {
                tx_bytes: upto(t, job, &job_on) + upto(t, fg, &fg_on),
                rx_bytes: upto(t, job * 15 / 1000, &job_on),
                ..NetCounters::default()
            };
            let delta = counters.since(&last);
            last = counters;
            let now_class = ClassBytes {
                fg: gso(upto(tc, fg, &fg_on)),
                job: gso(upto(tc, job, &job_on)),
            };
            let sent = ClassSent {
                fg: now_class.fg - class.fg,
                job: now_class.job - class.job,
                job_before,
            };
            (class, job_before) = (now_class, sent.job);
            let received = delta.rx_bytes;
            let now = t0 + Duration::from_millis(k);
            out.push(class_foreground(&mut ledger, now, &delta, sent, received));
        }
        out
    }

    #[test]
    fn the_jobs_class_does_not_mask_the_foreground_on_a_veth() {
        let fg_active = |fg: &u64| *fg >= THETA_BYTES;
        // The audit's rig: the job at 867 MB/s, the foreground at 30 MB/s from 100 ms to 300 ms.
        let during = |t: f64| (100.0..300.0).contains(&t);
        let probes = veth_with_tree(400, 867_000, |_| true, 30_000, during);
        // Alone, the job is never foreground.
        assert!(
            !probes[..99].iter().any(fg_active) && !probes[301..].iter().any(fg_active),
            "{probes:?}"
        );
        // The foreground is seen in every probe while it sends (the class's 4 % over the
        // veth's count, carried in the ledger, hid all of it).
        assert!(probes[101..299].iter().all(fg_active), "{probes:?}");
        let seen: u64 = probes[100..300].iter().sum();
        assert!(seen >= 200 * 30_000, "{seen}");
        assert!(seen <= 200 * 31_300, "{seen}");
        // A job that pauses, its last bytes in its class a probe before the interface counts
        // them, and that starts again: never foreground.
        let bursts = |t: f64| t % 20.0 < 10.0;
        let probes = veth_with_tree(200, 867_000, bursts, 30_000, |_| false);
        assert!(!probes.iter().any(fg_active), "{probes:?}");
    }

    #[test]
    fn the_jobs_share_of_what_the_tree_sent() {
        let sent = |fg, job, job_before| ClassSent {
            fg,
            job,
            job_before,
        };
        // A veth: the classes count every GSO segment's headers, the interface one set.
        assert_eq!(
            class_own_tx(897_000, sent(31_200, 901_680, 901_680)),
            865_800
        );
        // No foreground: the interface's bytes are the job's.
        assert_eq!(class_own_tx(867_000, sent(0, 901_680, 901_680)), 867_000);
        // The job's last bytes were in its class a probe before.
        assert_eq!(class_own_tx(43_000, sent(0, 0, 901_680)), 43_000);
        // Bytes outside the tree are not the job's.
        assert_eq!(class_own_tx(50_000, sent(0, 0, 0)), 0);
        assert_eq!(class_own_tx(50_000, sent(0, 1000, 500)), 1500);
        // The foreground's class read a moment later than the interface.
        assert_eq!(class_own_tx(10_000, sent(12_000, 0, 0)), 0);
    }

    #[test]
    fn a_move_to_another_namespace_is_noticed_once() {
        use OwnTraffic::*;
        let (sockets, neither) = (
            Sources {
                class: false,
                sockets: true,
            },
            Sources {
                class: false,
                sockets: false,
            },
        );
        // Started in tact's namespace: its TCP sockets, where sock_diag can be read.
        assert_eq!(switched(Unknown, 42, false, sockets), Some(TcpSockets));
        assert_eq!(switched(TcpSockets, 42, false, sockets), None);
        assert_eq!(switched(Unknown, 42, false, neither), None);
        // `ip netns exec` moved it.
        assert_eq!(switched(TcpSockets, 42, true, sockets), Some(Namespace(42)));
        assert_eq!(switched(Unknown, 42, true, neither), Some(Namespace(42)));
        assert_eq!(switched(Namespace(42), 42, true, sockets), None);
        // Back in tact's namespace (a `nsenter` of ours): its sockets again, or nothing.
        assert_eq!(
            switched(Namespace(42), 42, false, sockets),
            Some(TcpSockets)
        );
        assert_eq!(switched(Namespace(42), 42, false, neither), Some(Unknown));
    }

    #[test]
    fn the_jobs_class_is_its_source_while_it_shares_tacts_namespace() {
        use OwnTraffic::*;
        let class = |sockets| Sources {
            class: true,
            sockets,
        };
        // Marked into its class once the tree is up: with or without sock_diag.
        assert_eq!(switched(TcpSockets, 42, false, class(true)), Some(HtbClass));
        assert_eq!(switched(Unknown, 42, false, class(false)), Some(HtbClass));
        assert_eq!(switched(HtbClass, 42, false, class(true)), None);
        // A namespace of its own is exact: it wins.
        assert_eq!(
            switched(HtbClass, 42, true, class(true)),
            Some(Namespace(42))
        );
        // The tree gone: back to its sockets.
        let sockets = Sources {
            class: false,
            sockets: true,
        };
        assert_eq!(switched(HtbClass, 42, false, sockets), Some(TcpSockets));
    }

    #[test]
    fn the_default_route_names_its_interface() {
        let text = "Iface\tDestination\tGateway\tFlags\n\
                    eth0\t0000A8C0\t00000000\t0001\n\
                    eth1\t00000000\t0100A8C0\t0003\n";
        assert_eq!(parse_default_route(text).as_deref(), Some("eth1"));
        assert_eq!(parse_default_route("Iface\tDestination\n"), None);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt_ms(Duration::from_micros(80)), "0.08ms");
        assert_eq!(fmt_ms(Duration::from_millis(40)), "40ms");
        assert_eq!(fmt_ms(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_ms(Duration::ZERO), "0ms");
        assert_eq!(fmt_ms(Duration::from_secs(59)), "59.0s");
        assert_eq!(fmt_ms(Duration::from_secs(125)), "2m5s");
        assert_eq!(fmt_ms(Duration::from_secs(3600)), "1h");
        assert_eq!(fmt_ms(Duration::from_secs(99_999 * 3600)), "4166d15h");
    }
}
