//! What the idle gates watch (spec idletime §6): foreground activity on a disk or a link, as the
//! device's counters less the job's own, and the preemption interval each resource gets by
//! default from its measured service time (the thesis's heuristic, T§4.3.1: p ≈ 10× the service
//! time).

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_linux::probe::block_device::BlockDevice;
use tact_linux::probe::diskstats::{DiskStats, DiskstatsReader};
use tact_linux::probe::netstats::{NetCounters, NetReader};
use tact_linux::probe::sockets::{Framing, JobSockets};
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
        ms if ms >= 1000.0 => format!("{:.1}s", ms / 1000.0),
        ms if ms >= 10.0 => format!("{ms:.0}ms"),
        ms => format!("{ms:.2}ms"),
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
    last_own: f64,
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
        let mut own = ProgressMeter::new(ProcReader::new(), vec![ProgressSource::IoStorage]);
        let last_own = own.sample(members)?[0];
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
        let own_total = self.own.sample(members)?[0];
        let own = (own_total - self.last_own).max(0.0) as u64;
        self.last_own = own_total;
        let residual = self.ledger.foreground(now, own, device);
        Ok(Probe {
            device,
            foreground: residual.foreground,
            exact: !residual.own_outstanding,
        })
    }
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
    /// The job's bytes that left its namespace and have not shown on the interface yet.
    ledger: OwnLedger,
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
            ledger: OwnLedger::new(NET_CARRY_WINDOW),
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
        let Some(own) = switched(self.own, self.job, own_ns, self.sockets.is_ok()) else {
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
            OwnTraffic::TcpSockets => {
                // Look for the job's sockets at the next probe.
                if let Ok(s) = &mut self.sockets {
                    s.last_rescan = None;
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
        let own = match self.own {
            OwnTraffic::Namespace(pid) => match self.reader.job_counters(pid) {
                Ok(c) => {
                    let d = c.since(&self.last_own).bytes();
                    self.last_own = c;
                    d
                }
                // The root left; what is left of the job shares its namespace, but tact can no
                // longer name it, so its traffic counts as foreground from here on.
                Err(_) => {
                    self.own = OwnTraffic::Unknown;
                    0
                }
            },
            OwnTraffic::TcpSockets => match &mut self.sockets {
                Ok(s) => {
                    let pending = self.ledger.pending(now);
                    s.own(now, members, &delta, |own| {
                        device.saturating_sub(own.saturating_add(pending))
                    })?
                }
                Err(_) => 0,
            },
            OwnTraffic::Unknown => 0,
        };
        Ok(Probe {
            device,
            foreground: self.ledger.foreground(now, own, device).foreground,
            // Never exact: a link carries stray frames (ARP, neighbour discovery, a DNS query)
            // that are not a foreground flow, and θ keeps them from holding the job.
            exact: false,
        })
    }
}

/// The source of the job's traffic now that its root is (`own_ns`) or is not in a network
/// namespace other than tact's, if it differs from `current`; in tact's namespace, its TCP
/// sockets when they can be read (`sockets`).
fn switched(current: OwnTraffic, job: i32, own_ns: bool, sockets: bool) -> Option<OwnTraffic> {
    let now = if own_ns {
        OwnTraffic::Namespace(job)
    } else if sockets {
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

    #[test]
    fn a_move_to_another_namespace_is_noticed_once() {
        use OwnTraffic::*;
        // Started in tact's namespace: its TCP sockets, where sock_diag can be read.
        assert_eq!(switched(Unknown, 42, false, true), Some(TcpSockets));
        assert_eq!(switched(TcpSockets, 42, false, true), None);
        assert_eq!(switched(Unknown, 42, false, false), None);
        // `ip netns exec` moved it.
        assert_eq!(switched(TcpSockets, 42, true, true), Some(Namespace(42)));
        assert_eq!(switched(Unknown, 42, true, false), Some(Namespace(42)));
        assert_eq!(switched(Namespace(42), 42, true, true), None);
        // Back in tact's namespace (a `nsenter` of ours): its sockets again, or nothing.
        assert_eq!(switched(Namespace(42), 42, false, true), Some(TcpSockets));
        assert_eq!(switched(Namespace(42), 42, false, false), Some(Unknown));
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
    }
}
