//! One client connection, served by its own thread: read a request line, answer it, repeat.
//! Whatever the client sends, the answer is a reply line or a closed connection, never a panic;
//! when the connection ends, its jobs go, and the turn with them if one held it.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tact_linux::ProcReader;
use tact_proto::{
    error_line, ok_line, parse_request, Done, ErrorCode, JobId, Line, LineReader, Request, Welcome,
    MAX_MESSAGE,
};

use super::permission::{may_register, Refusal};
use super::registry::{NewJob, Peer, Registry, Turn};
use super::tickets::Tickets;

/// A client that does not take its reply within this long is dropped (its jobs with it).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a job waiting for its turn checks that its client is still there (a client that
/// dies while waiting must not be picked).
const HANGUP_CHECK: Duration = Duration::from_millis(200);

/// What the connection threads share.
pub struct Shared {
    registry: Mutex<Registry>,
    /// Signalled whenever the turn may have changed hands.
    turn: Condvar,
    procs: ProcReader,
    /// The tickets model, behind its own lock: its requests never hold up the run turn.
    tickets: Tickets,
}

impl Shared {
    pub fn new(registry: Registry, tickets: Tickets) -> Self {
        Shared {
            registry: Mutex::new(registry),
            turn: Condvar::new(),
            procs: ProcReader::new(),
            tickets,
        }
    }

    /// The tickets model.
    pub fn tickets(&self) -> &Tickets {
        &self.tickets
    }

    /// The registry. A thread that panicked while holding it (a bug) must not take the other
    /// jobs down with it, so a poisoned lock is taken as it is.
    pub fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Brings the registry up to date and wakes waiters if the turn changed hands.
    pub fn schedule(&self, reg: &mut Registry, now: Instant) {
        if reg.schedule(now) {
            self.turn.notify_all();
        }
    }
}

/// Serves one client until it closes the connection, breaks the protocol beyond repair, or
/// stops reading its replies.
pub fn serve(stream: UnixStream, peer: Peer, shared: &Shared) {
    if let Err(e) = serve_lines(&stream, peer, shared) {
        tracing::debug!("connection {} (pid {}): {e}", peer.conn, peer.pid);
    }
    let mut reg = shared.lock();
    reg.disconnect(peer, Instant::now());
    shared.schedule(&mut reg, Instant::now());
}

fn serve_lines(stream: &UnixStream, peer: Peer, shared: &Shared) -> std::io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut reader = LineReader::new(stream.try_clone()?, MAX_MESSAGE);
    loop {
        let reply = match reader.read_line()? {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                shared.lock().counters.errors_total += 1;
                let e = tact_proto::ProtoError::TooLong { limit: MAX_MESSAGE };
                // Where the next message starts is unknown: say why, and hang up.
                let _ = (&*stream).write_all(&error_line(e.code(), &e.to_string()));
                return Ok(());
            }
            Line::Message(bytes) => match answer(&bytes, peer, shared, stream) {
                Some(reply) => reply,
                None => return Ok(()), // the client hung up while waiting for its turn
            },
        };
        (&*stream).write_all(&reply)?;
    }
}

/// The reply to one request line; `None` if the client went away meanwhile.
fn answer(bytes: &[u8], peer: Peer, shared: &Shared, stream: &UnixStream) -> Option<Vec<u8>> {
    let result = match parse_request(bytes) {
        Ok(request) => handle(request, peer, shared, stream)?,
        Err(e) => Err(Refusal::new(e.code(), e.to_string())),
    };
    Some(match result {
        Ok(reply) => reply,
        Err(refusal) => {
            tracing::debug!(
                "refused a request of pid {} (uid {}): {}",
                peer.pid,
                peer.uid,
                refusal.message
            );
            shared.lock().counters.errors_total += 1;
            error_line(refusal.code, &refusal.message)
        }
    })
}

fn handle(
    request: Request,
    peer: Peer,
    shared: &Shared,
    stream: &UnixStream,
) -> Option<Result<Vec<u8>, Refusal>> {
    let now = Instant::now();
    Some(match request {
        Request::Hello(hello) => {
            // Outside the lock: both may read files (and the user database may be remote).
            if let Some(pid) = hello.pid {
                if let Err(refusal) = may_register(&shared.procs, peer.uid, pid) {
                    return Some(Err(refusal));
                }
            }
            let user = user_name(peer.uid);
            let new = NewJob::from_hello(hello, peer, user);
            shared
                .lock()
                .register(peer, new, now)
                .map(|job| ok_line(&Welcome { job }))
        }
        Request::Acquire { job } => return wait_for_turn(job, peer, shared, stream),
        Request::Release {
            job,
            ran_ms,
            report,
        } => {
            let mut reg = shared.lock();
            let ack = reg.release(peer, job, Duration::from_millis(ran_ms), report, now);
            shared.schedule(&mut reg, now);
            ack.map(|a| ok_line(&a))
        }
        Request::Report { job, report } => {
            let mut reg = shared.lock();
            reg.report(peer, job, report, now).map(|a| ok_line(&a))
        }
        Request::SetPriority { job, priority } => shared
            .lock()
            .set_priority(peer, job, priority)
            .map(|()| ok_line(&Done {})),
        Request::Status => {
            let mut reg = shared.lock();
            shared.schedule(&mut reg, now);
            Ok(ok_line(&reg.status(now)))
        }
        Request::Bye { job } => {
            let mut reg = shared.lock();
            let done = reg.bye(peer, job, now);
            shared.schedule(&mut reg, now);
            // A job removed while waiting must hear of it.
            shared.turn.notify_all();
            done.map(|()| ok_line(&Done {}))
        }
        Request::Tickets(request) => shared.tickets.handle(request, peer),
    })
}

/// `acquire`: blocks this connection's thread until the job has the turn. `None` if the client
/// hangs up meanwhile (the caller then removes its jobs).
fn wait_for_turn(
    job: JobId,
    peer: Peer,
    shared: &Shared,
    stream: &UnixStream,
) -> Option<Result<Vec<u8>, Refusal>> {
    let mut reg = shared.lock();
    if let Err(refusal) = reg.want_turn(peer, job, Instant::now()) {
        return Some(Err(refusal));
    }
    loop {
        let now = Instant::now();
        shared.schedule(&mut reg, now);
        match reg.turn_of(job) {
            Turn::Granted(grant) => return Some(Ok(ok_line(&grant))),
            Turn::Gone => {
                return Some(Err(Refusal::new(
                    ErrorCode::NoSuchJob,
                    format!("job: job {job} was removed while it waited for its turn"),
                )))
            }
            Turn::Wait(deadline) => {
                let wait = deadline
                    .map_or(HANGUP_CHECK, |d| d.saturating_duration_since(now))
                    .clamp(Duration::from_millis(1), HANGUP_CHECK);
                reg = shared
                    .turn
                    .wait_timeout(reg, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                if hung_up(stream) {
                    return None;
                }
            }
        }
    }
}

/// Whether the client closed the connection (or it broke), without reading anything. A closed
/// Unix stream peer shows as POLLHUP, which poll reports whatever events are asked for.
fn hung_up(stream: &UnixStream) -> bool {
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::empty())];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
        Err(_) => true,
    }
}

/// The name of `uid` in the user database, or the number when it has none.
fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user.name,
        _ => uid.to_string(),
    }
}
