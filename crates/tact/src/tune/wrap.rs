//! `--completions wrap`: jobs report their own start and end to tact through `tact exec-wrap`
//! (see [`super::exec_wrap`]), so that no job is missed however short, and each one's latency
//! is exact rather than known to a poll period.
//!
//! tact listens on a Unix socket in a private directory and names it to the command in
//! [`SOCKET_ENV`]. Each wrapper connects once (one connection per job), sends `start`, runs its
//! program and sends `end LATENCY_NS CODE`. The socket is SOCK_SEQPACKET, not a datagram
//! socket: a datagram socket queues at most net.unix.max_dgram_qlen (10) packets, so a burst of
//! short jobs between two of tact's reads would lose reports, while pending connections wait in
//! a listen backlog of SOMAXCONN (4096), each with its messages, until tact accepts them. The
//! wrapper connects and sends without blocking: with tact gone or the backlog full, the job goes
//! on unreported.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    accept4, bind, connect, listen, recv, send, socket, AddressFamily, Backlog, MsgFlags, SockFlag,
    SockType, UnixAddr,
};

use super::private_dir::PrivateDir;

/// The variable that names tact's socket to the command and, through it, to every wrapper.
pub const SOCKET_ENV: &str = "TACT_TUNE_SOCKET";

/// How long a drop in the jobs in flight is held off. A lane's next job reports its start a
/// few milliseconds after the last one's end (xargs or make reaps the wrapper, forks, execs
/// tact, which connects), longer on a loaded machine; read as it is, every such restart would
/// be a starved moment, and TCC, whose samples must not span one, would never measure. A pool
/// that really drains reads as such this much later.
const LANE_RESTART: Duration = Duration::from_millis(50);

/// The longest message (an `end` with the largest numbers is 35 bytes); a longer packet is
/// truncated, and then not understood.
const MAX_MESSAGE: usize = 64;

/// What a wrapper tells tact, one message per packet, in ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// `start`: the job is about to start.
    Start,
    /// `end NS CODE`: the job ended `latency` after it started (nanoseconds), with the shell's
    /// exit code (128 + n for signal n).
    End { latency: Duration, code: i32 },
}

impl Message {
    pub fn encode(&self) -> String {
        match self {
            Message::Start => "start".into(),
            Message::End { latency, code } => format!("end {} {code}", latency.as_nanos()),
        }
    }

    /// None for anything else (a packet from another version of tact, or not from tact).
    pub fn decode(packet: &[u8]) -> Option<Message> {
        let text = std::str::from_utf8(packet).ok()?;
        let mut words = text.split(' ');
        let message = match words.next()? {
            "start" => Message::Start,
            "end" => {
                let ns: u64 = words.next()?.parse().ok()?;
                let code = words.next()?.parse().ok()?;
                Message::End {
                    latency: Duration::from_nanos(ns),
                    code,
                }
            }
            _ => return None,
        };
        words.next().is_none().then_some(message)
    }
}

/// The wrapper's end: a connection to tact's socket, or none.
pub struct Reporter {
    fd: OwnedFd,
}

impl Reporter {
    /// Connects without waiting: fails at once when nothing listens at `path` or tact's
    /// backlog is full.
    pub fn connect(path: &Path) -> Result<Self> {
        let fd = seqpacket()?;
        let addr = UnixAddr::new(path)?;
        connect(fd.as_raw_fd(), &addr)?;
        Ok(Reporter { fd })
    }

    /// Sends without waiting; a message that cannot go is dropped (tact exited, say): the job
    /// must not wait for tact, nor die of SIGPIPE.
    pub fn send(&self, message: Message) {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        if let Err(e) = send(self.fd.as_raw_fd(), message.encode().as_bytes(), flags) {
            tracing::debug!("exec-wrap: report to tact dropped: {e}");
        }
    }
}

/// A non-blocking, close-on-exec seqpacket socket.
fn seqpacket() -> nix::Result<OwnedFd> {
    socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
}

/// One wrapper's connection (one job).
struct Conn {
    fd: OwnedFd,
    /// Its `start` came: the job is in flight until its `end`.
    started: bool,
}

/// What happened to a connection at one read.
enum Read {
    /// Still open, nothing more to read now.
    Open,
    /// Its job ended (the connection is done with).
    Ended { latency: Duration, code: i32 },
    /// Closed before any `end`: a wrapper killed, or one that never started its program.
    Gone,
}

/// Counts of jobs.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    started: u64,
    failed: u64,
    lost: u64,
}

/// tact's end: the socket, and the jobs in flight.
pub struct Listener {
    socket: OwnedFd,
    /// Removed when the listener is dropped (declared after the socket: closed first).
    dir: PrivateDir,
    conns: Vec<Conn>,
    /// Jobs over the run: started, ended with a non-zero code, started and never ended.
    totals: Totals,
    /// accept failed for want of descriptors (said once; the connections wait in the backlog).
    starved: bool,
    /// The jobs in flight as reported, and when the count last stood at least that high:
    /// a lower count is reported only after [`LANE_RESTART`].
    held: (usize, Instant),
}

impl Listener {
    /// Listens at `tact-tune-XXXXXX/socket` in the temporary directory.
    pub fn open() -> Result<Self> {
        let dir = PrivateDir::create("tact-tune", "socket", "exec-wrap socket")?;
        let socket = seqpacket().context("cannot create the exec-wrap socket")?;
        let path = dir.entry();
        let bound = UnixAddr::new(path).and_then(|addr| bind(socket.as_raw_fd(), &addr));
        bound.with_context(|| format!("cannot bind the exec-wrap socket {}", path.display()))?;
        listen(&socket, Backlog::MAXCONN).context("cannot listen on the exec-wrap socket")?;
        Ok(Listener {
            socket,
            dir,
            conns: Vec::new(),
            totals: Totals::default(),
            starved: false,
            held: (0, Instant::now()),
        })
    }

    /// Names the socket to the command.
    pub fn prepare(&self, command: &mut Command) {
        command.env(SOCKET_ENV, self.dir.entry());
    }

    /// Takes in new wrappers and reads every message that came since the last call; returns
    /// the latency of each job that ended.
    pub fn drain(&mut self) -> Result<Vec<Duration>> {
        self.accept()?;
        let mut ready = vec![false; self.conns.len()];
        if !self.conns.is_empty() {
            let mut fds: Vec<PollFd> = self
                .conns
                .iter()
                .map(|c| PollFd::new(c.fd.as_fd(), PollFlags::POLLIN))
                .collect();
            match poll(&mut fds, PollTimeout::ZERO) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e).context("poll on the exec-wrap connections"),
            }
            for (r, fd) in ready.iter_mut().zip(&fds) {
                *r = fd.revents().is_some_and(|r| !r.is_empty());
            }
        }
        let mut latencies = Vec::new();
        let mut totals = Totals::default();
        let mut ready = ready.into_iter();
        self.conns.retain_mut(|conn| {
            if !ready.next().unwrap_or(false) {
                return true;
            }
            let was_started = conn.started;
            let read = read(conn);
            totals.started += u64::from(conn.started && !was_started);
            match read {
                Read::Open => true,
                Read::Ended { latency, code } => {
                    latencies.push(latency);
                    totals.failed += u64::from(code != 0);
                    false
                }
                Read::Gone => {
                    totals.lost += u64::from(conn.started);
                    false
                }
            }
        });
        self.totals.started += totals.started;
        self.totals.failed += totals.failed;
        self.totals.lost += totals.lost;
        self.hold(Instant::now());
        Ok(latencies)
    }

    fn accept(&mut self) -> Result<()> {
        loop {
            let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
            match accept4(self.socket.as_raw_fd(), flags) {
                // SAFETY: accept4 returned a new descriptor that nothing else owns.
                Ok(fd) => self.conns.push(Conn {
                    fd: unsafe { OwnedFd::from_raw_fd(fd) },
                    started: false,
                }),
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::EINTR | Errno::ECONNABORTED) => {}
                // The wrappers wait in the backlog until jobs end and free descriptors.
                Err(e @ (Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM)) => {
                    if !std::mem::replace(&mut self.starved, true) {
                        tracing::warn!("--completions wrap: cannot take in more jobs now: {e}");
                    }
                    return Ok(());
                }
                Err(e) => return Err(e).context("accept on the exec-wrap socket"),
            }
        }
    }

    /// Jobs in flight: started and not ended, as of the last [`Listener::drain`], with a drop
    /// held off for [`LANE_RESTART`].
    pub fn running(&self) -> usize {
        self.held.0
    }

    /// Updates the count [`Listener::running`] reports.
    fn hold(&mut self, now: Instant) {
        let open = self.conns.iter().filter(|c| c.started).count();
        if open >= self.held.0 || now.duration_since(self.held.1) > LANE_RESTART {
            self.held = (open, now);
        }
    }

    /// What the user should know at the end: no job reported at all (the command runs none
    /// through `tact exec-wrap`), jobs that failed, wrappers that never reported an end.
    pub fn note(&self) -> Option<String> {
        let Totals {
            started,
            failed,
            lost,
        } = self.totals;
        if started == 0 {
            return Some(format!(
                "tact: tune: --completions wrap: no job reported; run each job through `tact \
                 exec-wrap` (`make SHELL='tact exec-wrap /bin/sh'`, `xargs ... tact exec-wrap \
                 -- CMD`), which finds tact through ${SOCKET_ENV}"
            ));
        }
        let mut said = Vec::new();
        if failed > 0 {
            said.push(format!("{failed} exited with a non-zero status"));
        }
        if lost > 0 {
            said.push(format!("{lost} never reported an end (killed)"));
        }
        (!said.is_empty())
            .then(|| format!("tact: tune: of {started} wrapped jobs, {}", said.join(", ")))
    }
}

/// Reads a connection's messages until none is left.
fn read(conn: &mut Conn) -> Read {
    let mut buf = [0u8; MAX_MESSAGE];
    loop {
        match recv(conn.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
            Ok(0) => return Read::Gone,
            Ok(n) => match Message::decode(&buf[..n]) {
                Some(Message::Start) => conn.started = true,
                // An end without its start (dropped) still counts the job once.
                Some(Message::End { latency, code }) => {
                    conn.started = true;
                    return Read::Ended { latency, code };
                }
                None => tracing::debug!(
                    "--completions wrap: ignoring a message: {:?}",
                    String::from_utf8_lossy(&buf[..n])
                ),
            },
            Err(Errno::EAGAIN) => return Read::Open,
            Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::debug!("--completions wrap: a wrapper's connection failed: {e}");
                return Read::Gone;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    use super::*;

    #[test]
    fn messages_are_tiny_words_and_anything_else_is_ignored() {
        let end = Message::End {
            latency: Duration::from_nanos(1_234_567),
            code: 130,
        };
        assert_eq!(Message::Start.encode(), "start");
        assert_eq!(end.encode(), "end 1234567 130");
        for m in [Message::Start, end] {
            assert_eq!(Message::decode(m.encode().as_bytes()), Some(m));
        }
        let longest = Message::End {
            latency: Duration::from_nanos(u64::MAX),
            code: i32::MIN,
        };
        assert!(longest.encode().len() <= MAX_MESSAGE);
        assert_eq!(Message::decode(longest.encode().as_bytes()), Some(longest));
        for bad in [
            &b""[..],
            b"begin",
            b"start 1",
            b"end",
            b"end 5",
            b"end -5 0",
            b"end 5 0 1",
            b"end 5 x",
            b"\xff",
        ] {
            assert_eq!(
                Message::decode(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    fn reporter(listener: &Listener) -> Reporter {
        Reporter::connect(listener.dir.entry()).unwrap()
    }

    #[test]
    fn starts_and_ends_give_the_jobs_in_flight_and_their_latencies() {
        let mut l = Listener::open().unwrap();
        let (a, b) = (reporter(&l), reporter(&l));
        // Connected but silent: not in flight yet.
        assert!(l.drain().unwrap().is_empty());
        assert_eq!(l.running(), 0);
        a.send(Message::Start);
        b.send(Message::Start);
        assert!(l.drain().unwrap().is_empty());
        assert_eq!(l.running(), 2);
        let latency = Duration::from_micros(1500);
        a.send(Message::End { latency, code: 0 });
        assert_eq!(l.drain().unwrap(), vec![latency]);
        // Held off: the lane's next job may be starting.
        assert_eq!(l.running(), 2);
        std::thread::sleep(LANE_RESTART + Duration::from_millis(10));
        assert!(l.drain().unwrap().is_empty());
        assert_eq!(l.running(), 1);
        // A start within the hold keeps the count up without a dip.
        let c = reporter(&l);
        c.send(Message::Start);
        assert!(l.drain().unwrap().is_empty());
        assert_eq!(l.running(), 2);
        c.send(Message::End { latency, code: 0 });
        assert_eq!(l.drain().unwrap(), vec![latency]);
        // A wrapper gone without an end: out of flight (once the hold has passed), not a
        // completion.
        drop(b);
        std::thread::sleep(LANE_RESTART + Duration::from_millis(10));
        assert!(l.drain().unwrap().is_empty());
        assert_eq!(l.running(), 0);
        let note = l.note().unwrap();
        assert!(
            note.contains("of 3 wrapped jobs, 1 never reported an end"),
            "{note}"
        );
    }

    /// Far more jobs than a datagram socket could queue (10) start and end before tact reads:
    /// every one waits in the backlog with its messages, and is counted.
    #[test]
    fn a_burst_of_jobs_between_two_reads_is_counted_whole() {
        let mut l = Listener::open().unwrap();
        for i in 0..300 {
            let r = reporter(&l);
            r.send(Message::Start);
            let code = i32::from(i % 3 == 0);
            r.send(Message::End {
                latency: Duration::from_nanos(i),
                code,
            });
        }
        let mut latencies = l.drain().unwrap();
        latencies.sort();
        let expected: Vec<Duration> = (0..300).map(Duration::from_nanos).collect();
        assert_eq!(latencies, expected);
        assert_eq!(l.running(), 0);
        let note = l.note().unwrap();
        assert_eq!(
            note,
            "tact: tune: of 300 wrapped jobs, 100 exited with a non-zero status"
        );
    }

    #[test]
    fn the_socket_is_private_and_goes_with_the_listener() {
        let l = Listener::open().unwrap();
        let (dir, path) = (l.dir.dir().to_path_buf(), l.dir.entry().to_path_buf());
        assert!(std::fs::metadata(&path).unwrap().file_type().is_socket());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let mut command = Command::new("true");
        l.prepare(&mut command);
        let named = command.get_envs().find(|(k, _)| *k == SOCKET_ENV);
        assert_eq!(named, Some((SOCKET_ENV.as_ref(), Some(path.as_os_str()))));
        assert!(l.note().unwrap().contains("no job reported"));

        drop(l);
        assert!(!path.exists() && !dir.exists(), "{} is left", dir.display());
        // With tact gone, a wrapper finds nothing and runs its job unreported.
        assert!(Reporter::connect(&path).is_err());
    }
}
