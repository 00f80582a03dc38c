//! A blocking client of the daemon: one connection, one request at a time.
//!
//! A job's registration lives as long as its connection: if the client (or its process) goes,
//! the daemon forgets the job and frees the turn if it held it. If the daemon goes, every call
//! fails with an error for which [`ClientError::lost`] is true; the caller goes on alone and may
//! later [`Client::reconnect`], which registers the same jobs again.

use std::io::{self, ErrorKind};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, sockopt, AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr};

use crate::error::ClientError;
use crate::line::{Line, LineReader};
use crate::reply::{parse_reply, Ack, Done, Grant, Status, Welcome};
use crate::request::{Hello, JobId, Report, Request};

/// Largest reply a client reads (a `status` of many jobs is long; requests have a smaller limit).
pub const MAX_REPLY: usize = 16 << 20;

/// How long a client waits, other than for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To connect (a daemon that does not accept fills its backlog, and connecting then waits).
    pub connect: Duration,
    /// To send a request, and to get the reply to any request but `acquire`.
    pub reply: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            reply: Duration::from_secs(10),
        }
    }
}

type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A connection to the daemon, and the jobs registered on it.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    timeouts: Timeouts,
    conn: Option<Conn>,
    /// Each `hello` that succeeded, with the id it got, so that `reconnect` can repeat them.
    registered: Vec<(Hello, JobId)>,
}

#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    reader: LineReader<UnixStream>,
}

impl Client {
    /// Connects to the daemon at `path` with default [`Timeouts`].
    pub fn connect(path: impl AsRef<Path>) -> Result<Client> {
        Client::connect_with(path, Timeouts::default())
    }

    /// Connects to the daemon at [`crate::socket_path`]`(None)`.
    pub fn connect_default() -> Result<Client> {
        Client::connect(crate::socket_path(None)?)
    }

    pub fn connect_with(path: impl AsRef<Path>, timeouts: Timeouts) -> Result<Client> {
        let path = path.as_ref().to_path_buf();
        let conn = Some(Conn::open(&path, timeouts.connect)?);
        Ok(Client {
            path,
            timeouts,
            conn,
            registered: Vec::new(),
        })
    }

    /// The socket this client talks to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the connection is still up as far as this client knows.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// The jobs registered on this connection, in the order of their `hello`.
    pub fn jobs(&self) -> Vec<JobId> {
        self.registered.iter().map(|(_, job)| *job).collect()
    }

    /// Registers a job.
    pub fn hello(&mut self, hello: Hello) -> Result<JobId> {
        let Welcome { job } =
            self.call(&Request::Hello(hello.clone()), Some(self.timeouts.reply))?;
        self.registered.push((hello, job));
        Ok(job)
    }

    /// Waits, without limit, until `job` has the run turn. Fails if the daemon goes away, so that
    /// the caller can run alone.
    pub fn acquire(&mut self, job: JobId) -> Result<Grant> {
        self.call(&Request::Acquire { job }, None)
    }

    /// As [`Client::acquire`], giving up after `limit` (a stuck daemon). Giving up closes the
    /// connection, which unregisters the jobs; [`Client::reconnect`] registers them again.
    pub fn acquire_within(&mut self, job: JobId, limit: Duration) -> Result<Grant> {
        self.call(&Request::Acquire { job }, Some(limit))
    }

    /// Asks for the run turn without waiting for it; [`Client::grant`] collects the answer. For
    /// a caller that must act while it waits: `tact run` stops its job until the turn comes.
    pub fn request_turn(&mut self, job: JobId) -> Result<()> {
        let conn = self.conn.as_mut().ok_or(ClientError::NotConnected)?;
        let limit = self.timeouts.reply;
        let sent = conn
            .stream
            .set_write_timeout(Some(limit))
            .map_err(ClientError::Io)
            .and_then(|()| {
                send_all(&conn.stream, &Request::Acquire { job }.to_line())
                    .map_err(|e| timeout_or(e, limit))
            });
        if sent.is_err() {
            self.conn = None;
        }
        sent
    }

    /// The answer to [`Client::request_turn`] if it comes within `wait`, `None` if not yet.
    pub fn grant(&mut self, wait: Duration) -> Result<Option<Grant>> {
        let conn = self.conn.as_mut().ok_or(ClientError::NotConnected)?;
        // Poll first, then read the whole line: a read that times out midway could lose part
        // of it (see `LineReader::read_line`).
        let mut fds = [PollFd::new(conn.stream.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, ms) {
            Ok(0) => return Ok(None),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                self.conn = None;
                return Err(ClientError::Io(e.into()));
            }
        }
        let limit = self.timeouts.reply;
        let result = conn
            .stream
            .set_read_timeout(Some(limit))
            .map_err(ClientError::Io)
            .and_then(|()| conn.read_reply(limit))
            .and_then(|line| parse_reply(&line));
        if matches!(&result, Err(e) if !matches!(e, ClientError::Refused { .. })) {
            self.conn = None;
        }
        result.map(Some)
    }

    /// Gives the turn back after running `ran` since it was granted.
    pub fn release(&mut self, job: JobId, ran: Duration, report: Option<Report>) -> Result<Ack> {
        let ran_ms = u64::try_from(ran.as_millis())
            .unwrap_or(u64::MAX)
            .min(crate::MAX_DAY_MS);
        self.call(
            &Request::Release {
                job,
                ran_ms,
                report,
            },
            Some(self.timeouts.reply),
        )
    }

    /// Sends figures for `tact status`; renews the lease of a job that holds the turn.
    pub fn report(&mut self, job: JobId, report: Report) -> Result<Ack> {
        self.call(&Request::Report { job, report }, Some(self.timeouts.reply))
    }

    pub fn set_priority(&mut self, job: JobId, priority: i32) -> Result<()> {
        let Done {} = self.call(
            &Request::SetPriority { job, priority },
            Some(self.timeouts.reply),
        )?;
        for (hello, _) in self.registered.iter_mut().filter(|(_, j)| *j == job) {
            hello.priority = priority;
        }
        Ok(())
    }

    pub fn status(&mut self) -> Result<Status> {
        self.call(&Request::Status, Some(self.timeouts.reply))
    }

    /// Sends a tickets operation and decodes its reply (`T` is the reply type the operation's
    /// documentation in [`crate::tickets`] names).
    pub fn tickets<T: serde::de::DeserializeOwned>(
        &mut self,
        request: crate::tickets::TicketsRequest,
    ) -> Result<T> {
        self.call(&Request::Tickets(request), Some(self.timeouts.reply))
    }

    /// Unregisters a job (one's own, or as root or its owner, anyone's).
    pub fn bye(&mut self, job: JobId) -> Result<()> {
        let Done {} = self.call(&Request::Bye { job }, Some(self.timeouts.reply))?;
        self.registered.retain(|(_, j)| *j != job);
        Ok(())
    }

    /// Opens a new connection (to a restarted daemon, say) and registers this client's jobs
    /// again; returns their new ids in the order of [`Client::jobs`]. If one cannot be
    /// registered, its error is returned: the jobs registered before it stay, the rest are
    /// dropped (register them again with [`Client::hello`]).
    pub fn reconnect(&mut self) -> Result<Vec<JobId>> {
        self.conn = None;
        self.conn = Some(Conn::open(&self.path, self.timeouts.connect)?);
        let hellos: Vec<Hello> = self.registered.drain(..).map(|(h, _)| h).collect();
        let mut jobs = Vec::with_capacity(hellos.len());
        for hello in hellos {
            jobs.push(self.hello(hello)?);
        }
        Ok(jobs)
    }

    /// Sends `request` and reads its reply, waiting at most `wait` for it. Any failure but a
    /// refusal closes the connection: after a timeout or a garbled reply, the next line read
    /// might answer an earlier request.
    fn call<T: serde::de::DeserializeOwned>(
        &mut self,
        request: &Request,
        wait: Option<Duration>,
    ) -> Result<T> {
        let conn = self.conn.as_mut().ok_or(ClientError::NotConnected)?;
        let result = conn
            .exchange(request, self.timeouts.reply, wait)
            .and_then(|line| parse_reply(&line));
        if matches!(&result, Err(e) if !matches!(e, ClientError::Refused { .. })) {
            self.conn = None;
        }
        result
    }
}

impl Conn {
    fn open(path: &Path, limit: Duration) -> Result<Conn> {
        let stream = connect(path, limit).map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        let reader = LineReader::new(stream.try_clone()?, MAX_REPLY);
        Ok(Conn { stream, reader })
    }

    /// One request, one reply line.
    fn exchange(
        &mut self,
        request: &Request,
        send_limit: Duration,
        wait: Option<Duration>,
    ) -> Result<Vec<u8>> {
        self.stream.set_write_timeout(Some(send_limit))?;
        send_all(&self.stream, &request.to_line()).map_err(|e| timeout_or(e, send_limit))?;
        self.stream.set_read_timeout(wait)?;
        self.read_reply(wait.unwrap_or_default())
    }

    /// One reply line, within the stream's read timeout (`limit`, for the error message).
    fn read_reply(&mut self, limit: Duration) -> Result<Vec<u8>> {
        match self.reader.read_line() {
            Ok(Line::Message(line)) => Ok(line),
            Ok(Line::Eof) => Err(ClientError::Disconnected),
            Ok(Line::TooLong) => Err(ClientError::BadReply(format!(
                "a reply longer than {MAX_REPLY} bytes"
            ))),
            Err(e) => Err(timeout_or(e, limit)),
        }
    }
}

fn timeout_or(e: io::Error, limit: Duration) -> ClientError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => ClientError::Timeout(limit),
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => ClientError::Disconnected,
        _ => ClientError::Io(e),
    }
}

/// Writes all of `bytes` with MSG_NOSIGNAL: a daemon that died must give this process an error,
/// not a SIGPIPE (a library must not change its host's signal dispositions to avoid it).
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match socket::send(stream.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Connects within `limit`. A blocking connect to a Unix socket whose listener does not accept
/// waits for room in the backlog without end, so connect without blocking and retry.
fn connect(path: &Path, limit: Duration) -> io::Result<UnixStream> {
    let deadline = Instant::now() + limit;
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    loop {
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => break,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(Errno::EINPROGRESS) => {
                let left = deadline.saturating_duration_since(Instant::now());
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
                let ms = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
                if poll(&mut fds, ms)? == 0 {
                    return Err(ErrorKind::TimedOut.into());
                }
                match socket::getsockopt(&fd, sockopt::SocketError)? {
                    0 => break,
                    errno => return Err(io::Error::from_raw_os_error(errno)),
                }
            }
            Err(Errno::EAGAIN) => return Err(ErrorKind::TimedOut.into()),
            Err(e) => return Err(e.into()),
        }
    }
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}
