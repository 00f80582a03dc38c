//! The watchdog (spec 5.3): a separate process, in its own session, that resumes every process
//! tact stopped if the regulator dies (even by SIGKILL) or hangs.
//!
//! The regulator and the guard share a `SOCK_SEQPACKET` socketpair, which keeps message
//! boundaries, so each message is one datagram:
//!
//! * guard -> regulator `R`: the guard is serving (sent once, `Guard::start` waits for it);
//! * `W` with pidfds attached (SCM_RIGHTS): watch these processes;
//! * `F` + a path: the regulator's state file (`state::StateDir::record_path`) of a job; on
//!   giving up, the guard also undoes what it records (members, original CPU masks) and, when
//!   the regulator is gone, removes it;
//! * `L` + u64 little-endian milliseconds: the lease; the guard resumes everything if no
//!   renewal arrives within it;
//! * `B`: clean exit; the guard exits without touching anything;
//! * end of file (the regulator's end closed because it exited or died): resume everything.
//!
//! Resuming comes first, through the pidfds; the state files are read only after, so that a
//! damaged file never holds up a SIGCONT.

use std::collections::HashSet;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};

use crate::actuate::pidfd::PidFd;
use crate::actuate::tree::JobTree;
use crate::error::{Error, Result};
use crate::probe::proc::ProcId;
use crate::state;

/// The descriptor number on which the guard process finds its end of the socket.
pub const GUARD_FD: RawFd = 3;

/// How long `Guard::start` waits for the guard to report that it is serving.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Pidfds per `W` message; the kernel accepts at most 253 (SCM_MAX_FD) in one message.
const FDS_PER_MESSAGE: usize = 200;

/// The longest message: `F` and a path of at most PATH_MAX bytes.
const MAX_MESSAGE: usize = 1 + libc::PATH_MAX as usize;

/// The regulator's handle on its guard process.
///
/// Dropping it without [`Guard::bye`] closes the socket, so the guard resumes everything: a
/// regulator that unwinds on a panic is treated like one that died.
#[derive(Debug)]
pub struct Guard {
    sock: Option<OwnedFd>,
    child: Child,
    /// Processes whose pidfds the guard already holds.
    sent: HashSet<ProcId>,
    /// State files the guard already knows.
    records: HashSet<PathBuf>,
}

impl Guard {
    /// Starts `program args...` as the guard, in a new session (so that signals aimed at the
    /// regulator's process group or terminal miss it), with its end of the socket on
    /// [`GUARD_FD`], stdin and stdout on /dev/null and stderr inherited. The program must call
    /// [`serve`] (the tact binary runs `tact __guard`). Returns once the guard is serving.
    pub fn start(program: &Path, args: &[&str]) -> Result<Guard> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Error::guard("socketpair", e.into()))?;
        let their_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null());
        // SAFETY: only async-signal-safe calls (setsid, dup2, fcntl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // dup2 clears close-on-exec on the copy; if the fd already is GUARD_FD, clear
                // it by hand.
                let rc = if their_fd == GUARD_FD {
                    libc::fcntl(GUARD_FD, libc::F_SETFD, 0)
                } else {
                    libc::dup2(their_fd, GUARD_FD)
                };
                if rc < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| Error::guard(format!("starting {}", program.display()), e))?;
        drop(theirs);
        let mut guard = Guard {
            sock: Some(ours),
            child,
            sent: HashSet::new(),
            records: HashSet::new(),
        };
        guard.wait_ready()?;
        Ok(guard)
    }

    /// The guard process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Hands the guard the pidfds of the members of `tree` that tact has stopped and the guard
    /// does not hold yet. Call it from `JobTree::stop_with`'s callback.
    pub fn watch(&mut self, tree: &JobTree) -> Result<()> {
        self.sent.retain(|id| tree.contains(id));
        let new: Vec<(ProcId, BorrowedFd<'_>)> = tree
            .stopped_by_tact()
            .filter(|(id, _)| !self.sent.contains(id))
            .collect();
        self.send_watch(new)
    }

    /// Hands the guard every member of `tree` it does not hold yet, stopped or not, for a
    /// regulator that stops and resumes too often to do it at each stop (`tact share`): call it
    /// whenever membership changes. Several trees may be watched; a process the guard resumes
    /// that was running is unaffected.
    pub fn watch_all(&mut self, tree: &JobTree) -> Result<()> {
        let new: Vec<(ProcId, BorrowedFd<'_>)> = tree
            .all_members()
            .filter(|(id, _)| !self.sent.contains(id))
            .collect();
        self.send_watch(new)
    }

    fn send_watch(&mut self, new: Vec<(ProcId, BorrowedFd<'_>)>) -> Result<()> {
        for chunk in new.chunks(FDS_PER_MESSAGE) {
            let fds: Vec<RawFd> = chunk.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
            self.send(b"W", &fds)?;
            self.sent.extend(chunk.iter().map(|(id, _)| *id));
        }
        Ok(())
    }

    /// Tells the guard where the state file of a job is: when it gives up it resumes the
    /// members that file lists and puts back the original CPU masks it holds (each after
    /// checking that the pid still names the recorded process), then removes the file if the
    /// regulator is gone. The file may be written (and rewritten) later; call this before the
    /// first change that only the file records, such as a CPU mask.
    pub fn watch_record(&mut self, path: &Path) -> Result<()> {
        if self.records.contains(path) {
            return Ok(());
        }
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() + 1 > MAX_MESSAGE {
            return Err(Error::guard(
                format!("state file path {} is too long", path.display()),
                std::io::Error::from_raw_os_error(libc::ENAMETOOLONG),
            ));
        }
        let mut msg = Vec::with_capacity(bytes.len() + 1);
        msg.push(b'F');
        msg.extend_from_slice(bytes);
        self.send(&msg, &[])?;
        self.records.insert(path.to_path_buf());
        Ok(())
    }

    /// Renews the lease: unless renewed again within `lease`, the guard resumes everything and
    /// exits (the regulator hung). Until the first renewal only the regulator's death counts.
    pub fn renew(&mut self, lease: Duration) -> Result<()> {
        let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let mut msg = vec![b'L'];
        msg.extend_from_slice(&ms.to_le_bytes());
        self.send(&msg, &[])
    }

    /// Clean exit: tells the guard to exit without touching anything and waits for it. Resume
    /// the tree before calling this.
    pub fn bye(mut self) -> Result<()> {
        self.send(b"B", &[])?;
        self.sock = None;
        let pid = self.child.id();
        let status = self
            .child
            .wait()
            .map_err(|e| Error::guard(format!("waiting for pid {pid}"), e))?;
        if !status.success() {
            return Err(Error::guard(
                format!("guard {pid} exited with {status}"),
                std::io::Error::other("guard failed"),
            ));
        }
        Ok(())
    }

    fn send(&self, msg: &[u8], fds: &[RawFd]) -> Result<()> {
        let sock = self
            .sock
            .as_ref()
            .expect("the socket is open until bye or drop");
        let cmsgs = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsgs };
        // MSG_NOSIGNAL: a dead guard must give an error here, not kill the regulator by SIGPIPE.
        sendmsg::<()>(
            sock.as_raw_fd(),
            &[IoSlice::new(msg)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| Error::guard(format!("sending to guard {}", self.child.id()), e.into()))?;
        Ok(())
    }

    fn wait_ready(&mut self) -> Result<()> {
        let pid = self.child.id();
        let sock = self.sock.as_ref().expect("open");
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(READY_TIMEOUT.as_millis() as i32).expect("fits");
        let n = poll(&mut fds, timeout)
            .map_err(|e| Error::guard(format!("waiting for guard {pid}"), e.into()))?;
        let mut buf = [0u8; 8];
        let got = if n == 0 {
            0
        } else {
            nix::sys::socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())
                .map_err(|e| Error::guard(format!("reading from guard {pid}"), e.into()))?
        };
        if got != 1 || buf[0] != b'R' {
            return Err(Error::guard(
                format!("guard {pid} did not report ready within {READY_TIMEOUT:?}"),
                std::io::Error::other("no ready message"),
            ));
        }
        Ok(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.sock.take().is_some() {
            // The guard now sees end of file, resumes everything and exits; reap it so that it
            // does not stay a zombie, but never block the regulator's exit for long.
            let deadline = Instant::now() + Duration::from_secs(1);
            while Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Why [`serve`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardExit {
    /// The regulator said bye; nothing was touched.
    Bye,
    /// The regulator's end closed (it exited or died); `resumed` processes were sent SIGCONT.
    RegulatorGone { resumed: usize },
    /// The lease ran out (the regulator hung); `resumed` processes were sent SIGCONT.
    LeaseExpired { resumed: usize },
}

/// The guard's socket as inherited from [`Guard::start`], checked to be a socket.
pub fn inherited_socket() -> Result<OwnedFd> {
    // SAFETY: fstat on a possibly closed fd just fails with EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(GUARD_FD, &mut st) } < 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK
    {
        return Err(Error::guard(
            format!("fd {GUARD_FD} is not the guard socket (run only by the regulator)"),
            std::io::Error::from_raw_os_error(libc::EBADF),
        ));
    }
    // SAFETY: the fd is open, was left to us by the regulator, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(GUARD_FD) })
}

/// The guard's main loop: holds the pidfds the regulator sends, and resumes them all when the
/// regulator goes away or its lease runs out. Processes that exit are forgotten as they go
/// (their pidfd becomes readable), so a long job with many short-lived children does not pile up
/// descriptors.
pub fn serve(sock: OwnedFd) -> Result<GuardExit> {
    let fail = |what: &str, e: nix::Error| Error::guard(what.to_string(), e.into());
    raise_fd_limit();
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(b"R")],
        &[],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(|e| fail("reporting ready", e))?;
    let mut watched: Vec<PidFd> = Vec::new();
    let mut records: Vec<PathBuf> = Vec::new();
    let mut deadline: Option<Instant> = None;
    let mut buf = vec![0u8; MAX_MESSAGE];
    loop {
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let resumed = resume_all(&watched);
                    // The hung regulator is still there: its files stay, for `recover` should
                    // it die later.
                    undo_records(&records, false);
                    return Ok(GuardExit::LeaseExpired { resumed });
                }
                // Round up so that we never wake a hair before the deadline and spin.
                PollTimeout::try_from(left.as_millis().min(60_000) as i32 + 1).expect("fits")
            }
            None => PollTimeout::NONE,
        };
        let mut fds: Vec<PollFd> = std::iter::once(sock.as_fd())
            .chain(watched.iter().map(|p| p.as_fd()))
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(fail("poll", e)),
        }
        let sock_ready = fds[0].any().unwrap_or(false);
        let exited: Vec<bool> = fds[1..].iter().map(|p| p.any().unwrap_or(false)).collect();
        drop(fds);
        // A pidfd becomes readable when its process exits: nothing left to resume there.
        let mut exited = exited.into_iter();
        watched.retain(|_| !exited.next().unwrap_or(false));
        if !sock_ready {
            continue;
        }
        let mut iov = [IoSliceMut::new(&mut buf)];
        let mut cmsg = nix::cmsg_space!([RawFd; FDS_PER_MESSAGE]);
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => msg,
            Err(nix::Error::EINTR) => continue,
            // ECONNRESET and the like: the regulator is gone.
            Err(_) => return Ok(regulator_gone(&watched, &records)),
        };
        let len = msg.bytes;
        let truncated = msg.flags.contains(MsgFlags::MSG_TRUNC);
        for c in msg
            .cmsgs()
            .map_err(|e| fail("reading control messages", e))?
        {
            if let ControlMessageOwned::ScmRights(received) = c {
                for fd in received {
                    // SAFETY: the kernel installed this fd for us; nothing else owns it.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    watched.push(PidFd::from_owned(fd, -1));
                }
            }
        }
        match &buf[..len] {
            _ if truncated => {
                let resumed = resume_all(&watched);
                undo_records(&records, false);
                return Err(Error::guard(
                    format!("message longer than {MAX_MESSAGE} bytes; resumed {resumed} processes"),
                    std::io::Error::from(std::io::ErrorKind::InvalidData),
                ));
            }
            [] => return Ok(regulator_gone(&watched, &records)),
            [b'W'] => {}
            [b'F', path @ ..] if !path.is_empty() => {
                records.push(PathBuf::from(std::ffi::OsStr::from_bytes(path)));
            }
            [b'L', ms @ ..] if ms.len() == 8 => {
                let ms = u64::from_le_bytes(ms.try_into().expect("8 bytes"));
                deadline = Some(Instant::now() + Duration::from_millis(ms));
            }
            [b'B'] => return Ok(GuardExit::Bye),
            other => {
                // Not something a regulator sends: safer to thaw than to keep guessing.
                let resumed = resume_all(&watched);
                undo_records(&records, false);
                return Err(Error::guard(
                    format!("unexpected message {other:?}; resumed {resumed} processes"),
                    std::io::Error::from(std::io::ErrorKind::InvalidData),
                ));
            }
        }
    }
}

/// The regulator exited or died: resume everything, undo and remove its state files.
fn regulator_gone(watched: &[PidFd], records: &[PathBuf]) -> GuardExit {
    let resumed = resume_all(watched);
    undo_records(records, true);
    GuardExit::RegulatorGone { resumed }
}

/// Undoes each state file (`state::undo_record`), removing it if `remove` (one that cannot be
/// read stays, for a human or `recover`). What fails is told on the guard's stderr, which is the
/// regulator's: nobody else is left to tell it.
fn undo_records(records: &[PathBuf], remove: bool) {
    for path in records {
        let undone = match state::undo_record(path) {
            Ok(undone) => undone,
            Err(e) => {
                eprintln!("tact guard: {e}");
                continue;
            }
        };
        for (id, why) in &undone.unrestored {
            eprintln!(
                "tact guard: cannot restore the CPU mask of process {}: {why}",
                id.pid
            );
        }
        if remove {
            if let Err(e) = std::fs::remove_file(path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("tact guard: removing {}: {e}", path.display());
                }
            }
        }
    }
}

/// SIGCONT to every watched process; returns how many were signalled.
fn resume_all(watched: &[PidFd]) -> usize {
    watched
        .iter()
        .filter(|p| p.send_signal(libc::SIGCONT).is_ok())
        .count()
}

/// The guard may hold one pidfd per process of large jobs; the default soft limit (1024) is
/// often lower than the hard one, so take what we are allowed.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuate::affinity::{self, tests::change_mask};

    /// The guard's end of a socketpair served on a thread; the regulator's end, once it is served.
    fn serving() -> (OwnedFd, std::thread::JoinHandle<Result<GuardExit>>) {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let server = std::thread::spawn(move || serve(theirs));
        let mut buf = [0u8; 4];
        let got = nix::sys::socket::recv(ours.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap();
        assert_eq!(&buf[..got], b"R");
        (ours, server)
    }

    fn send(sock: &OwnedFd, msg: &[u8]) {
        sendmsg::<()>(
            sock.as_raw_fd(),
            &[IoSlice::new(msg)],
            &[],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
    }

    #[test]
    fn a_gone_regulator_s_state_file_is_undone_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let state = state::StateDir::new(dir.path()).unwrap();
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        let tree = JobTree::attach(child.id() as i32).unwrap();
        let id = tree.root();
        // As `tact share` does it: the original mask in the record, then the change.
        let original = affinity::save(id.pid).unwrap();
        state
            .record_all(&tree, std::slice::from_ref(&original))
            .unwrap();
        let path = state.record_path(&tree);
        let changed = change_mask(id.pid);
        assert_eq!(changed, original);

        let (ours, server) = serving();
        let mut msg = b"F".to_vec();
        msg.extend_from_slice(path.as_os_str().as_bytes());
        send(&ours, &msg);
        drop(ours);
        assert_eq!(
            server.join().unwrap().unwrap(),
            GuardExit::RegulatorGone { resumed: 0 }
        );
        assert_eq!(
            affinity::thread_cpus(id.pid).unwrap(),
            original.process_cpus().unwrap()
        );
        assert!(!path.exists());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_hung_regulator_s_state_file_is_undone_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = state::StateDir::new(dir.path()).unwrap();
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        let tree = JobTree::attach(child.id() as i32).unwrap();
        let id = tree.root();
        let original = change_mask(id.pid);
        state
            .record_all(&tree, std::slice::from_ref(&original))
            .unwrap();
        let path = state.record_path(&tree);

        let (ours, server) = serving();
        let mut msg = b"F".to_vec();
        msg.extend_from_slice(path.as_os_str().as_bytes());
        send(&ours, &msg);
        let mut lease = vec![b'L'];
        lease.extend_from_slice(&1u64.to_le_bytes());
        send(&ours, &lease);
        assert_eq!(
            server.join().unwrap().unwrap(),
            GuardExit::LeaseExpired { resumed: 0 }
        );
        assert_eq!(
            affinity::thread_cpus(id.pid).unwrap(),
            original.process_cpus().unwrap()
        );
        // The regulator is still there and may go on: its record stays for `recover`.
        assert!(path.exists());
        drop(ours);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
