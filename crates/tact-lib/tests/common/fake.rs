//! A fake tact daemon on a Unix socket in a temporary directory: it checks requests as the real
//! one does (`tact_proto::parse_request`), grants every `acquire` at once (or, told so, only the
//! first few), and records what each connection said and who connected (SO_PEERCRED).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tact_proto::{error_line, ok_line, parse_request, Ack, Done, ErrorCode, Grant, Request};

/// What a connection said.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// A `hello` the daemon accepted, with the id it gave.
    Hello { name: String, job: u64 },
    /// A request the daemon refused as malformed or invalid.
    Refused(String),
    /// Any other request, by its op.
    Op(&'static str),
}

#[derive(Debug, Clone)]
pub struct Seen {
    pub conn: usize,
    /// The connecting process (SO_PEERCRED).
    pub pid: i32,
    pub said: Said,
}

pub struct Fake {
    pub path: PathBuf,
    _dir: Option<tempfile::TempDir>,
    seen: Arc<Mutex<Vec<Seen>>>,
    streams: Arc<Mutex<Vec<UnixStream>>>,
    stopped: Arc<AtomicBool>,
}

/// The lease the fake grants (short, so that a client's wait bound is short too).
pub const LEASE_MS: u64 = 100;

impl Fake {
    /// A fake daemon in a temporary directory of its own that grants every acquire.
    pub fn start() -> Fake {
        Fake::start_granting(usize::MAX)
    }

    /// A fake daemon that grants the first `grants` acquires and never answers the others (a
    /// stopped or stuck daemon).
    pub fn start_granting(grants: usize) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Fake::start_at(&dir.path().join("daemon.sock"), grants);
        f._dir = Some(dir);
        f
    }

    pub fn start_at(path: &Path, grants: usize) -> Fake {
        let listener = UnixListener::bind(path).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicUsize::new(grants));
        {
            let (seen, streams, stopped) = (seen.clone(), streams.clone(), stopped.clone());
            std::thread::spawn(move || {
                let next_job = Arc::new(AtomicUsize::new(1));
                for (conn, stream) in listener.incoming().enumerate() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    streams.lock().unwrap().push(stream.try_clone().unwrap());
                    let (seen, left, next_job) = (seen.clone(), left.clone(), next_job.clone());
                    std::thread::spawn(move || serve(conn, stream, &seen, &left, &next_job));
                }
            });
        }
        Fake {
            path: path.to_path_buf(),
            _dir: None,
            seen,
            streams,
            stopped,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The daemon goes away: its socket is removed and its connections closed.
    pub fn stop(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wakes the accept loop, which then ends (and drops the listener).
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    conn: usize,
    stream: UnixStream,
    seen: &Mutex<Vec<Seen>>,
    left: &AtomicUsize,
    next_job: &AtomicUsize,
) {
    let pid = peer_pid(&stream);
    let mut out = stream.try_clone().unwrap();
    let record = |said: Said| seen.lock().unwrap().push(Seen { conn, pid, said });
    for line in BufReader::new(stream).split(b'\n') {
        let Ok(line) = line else { return };
        let reply = match parse_request(&line) {
            Err(e) => {
                record(Said::Refused(e.to_string()));
                error_line(ErrorCode::Invalid, &e.to_string())
            }
            Ok(Request::Hello(h)) => {
                let job = next_job.fetch_add(1, Ordering::SeqCst) as u64;
                record(Said::Hello { name: h.name, job });
                ok_line(&tact_proto::Welcome { job })
            }
            Ok(Request::Acquire { .. }) => {
                record(Said::Op("acquire"));
                let granted = left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if !granted {
                    // Stuck: never answers, until the client goes.
                    std::thread::sleep(Duration::from_secs(3600));
                    return;
                }
                ok_line(&Grant { lease_ms: LEASE_MS })
            }
            Ok(Request::Release { .. }) => {
                record(Said::Op("release"));
                ok_line(&Ack {
                    revoked: false,
                    waiting: 0,
                })
            }
            Ok(Request::Report { .. }) => {
                record(Said::Op("report"));
                ok_line(&Ack {
                    revoked: false,
                    waiting: 0,
                })
            }
            Ok(Request::SetPriority { .. }) => {
                record(Said::Op("set_priority"));
                ok_line(&Done {})
            }
            Ok(Request::Bye { .. }) => {
                record(Said::Op("bye"));
                ok_line(&Done {})
            }
            Ok(_) => {
                record(Said::Op("other"));
                error_line(ErrorCode::UnknownOp, "op: not in the fake daemon")
            }
        };
        if out.write_all(&reply).is_err() {
            return;
        }
    }
}

fn peer_pid(stream: &UnixStream) -> i32 {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: reads SO_PEERCRED into a ucred of the length given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "SO_PEERCRED");
    cred.pid
}
