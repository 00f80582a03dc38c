//! `tact daemon`: the machine-wide arbiter of spec 2.6 (the paper's superintendent, §4.5/§7.1).
//!
//! Regulated jobs that run together slow each other and can all back off on an idle machine, so
//! only one low-importance job runs at a time: jobs register over a Unix socket
//! (`docs/protocol.md`), ask for the run turn at each testpoint and give it back at the next one;
//! the arbiter of `tact_core::polite` picks by priority, then least recent use.
//!
//! * [`socket`] binds the socket (one daemon per path) and removes it at exit;
//! * [`connection`] serves each client on its own thread (blocking I/O, one request at a time);
//! * [`registry`] is the shared state: jobs, the turn, leases (pure, time passed in);
//! * [`permission`] decides who may register which process and control which job;
//! * [`duty`] measures each job's share of the last minute; [`metrics`] exports it all;
//! * [`status`] is the `tact status` client command;
//! * [`tickets`] holds the tickets model (spec tickets.md §6), persisted, served to clients;
//!   [`tickets_knobs`] enforces it with cgroup knobs (root), [`tickets_alps`] with the share
//!   engine (SIGSTOP/SIGCONT, CPU only) for an unprivileged daemon, [`tickets_setup`] reads the
//!   initial model of `--tickets-setup`.
//!
//! Threads rather than an async runtime: a daemon with a handful of clients, each of which
//! mostly waits, reads best as straight-line code per connection around one mutex and condvar.

mod connection;
mod duty;
pub mod metrics;
mod permission;
mod registry;
mod socket;
pub mod status;
mod tickets;
mod tickets_alps;
mod tickets_knobs;
mod tickets_setup;
mod tickets_usage;

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use crate::cli::DaemonArgs;
use connection::Shared;
use registry::{Peer, Registry};

/// Stack of a connection thread: requests are small and parsed with bounded recursion.
const CONNECTION_STACK: usize = 512 * 1024;

/// The exit status for a `--tickets-setup` file that is wrong, or a `--cgroup-parent` that is not
/// a cgroup of the cpu hierarchy (as for a bad command line).
const BAD_SETUP: i32 = crate::cli::USAGE_FAILED as i32;

pub fn run(args: &DaemonArgs) -> Result<i32> {
    let root = nix::unistd::geteuid().is_root();
    let path = tact_proto::daemon_socket_path(args.socket.as_deref())?;
    // Termination signals are blocked in every thread (threads inherit the mask) and taken by
    // one, which removes the socket before exiting.
    let mut signals = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(sig);
    }
    signals
        .thread_block()
        .context("cannot block termination signals")?;
    // Before binding: a daemon that cannot load its tickets must not take the socket.
    let tickets_path = args
        .tickets_state
        .clone()
        .unwrap_or_else(|| tickets::default_path(root));
    let initial = match &args.tickets_setup {
        Some(setup) if tickets_path.exists() => {
            eprintln!(
                "tact daemon: the tickets state {} exists, so --tickets-setup {} is not applied \
                 (the persisted state wins; move it away to start from the setup)",
                tickets_path.display(),
                setup.display()
            );
            None
        }
        Some(setup) => match tickets_setup::load(setup) {
            Ok(system) => Some(system),
            Err(e) => {
                eprintln!("tact daemon: {e}");
                return Ok(BAD_SETUP);
            }
        },
        None => None,
    };
    // The pid in the default name lets the next daemon tell a SIGKILLed one's tree from a live
    // one's (tact_linux::actuate::stale).
    let cgroup = (args.tickets_cgroup.clone())
        .unwrap_or_else(|| format!("tact-tickets-{}", std::process::id()));
    if args.cgroup_parent.is_some() && (!root || args.no_tickets_enforce) {
        eprintln!(
            "tact daemon: --cgroup-parent is not used: only a root daemon that enforces the \
             tickets makes cgroups"
        );
    }
    let knobs = match tickets_knobs::Knobs::detect(
        &cgroup,
        args.cgroup_parent.as_deref(),
        root,
        args.no_tickets_enforce,
    ) {
        Ok(knobs) => knobs,
        Err(e) => {
            eprintln!("tact daemon: {e}");
            return Ok(BAD_SETUP);
        }
    };
    let tickets = tickets::Tickets::load(tickets_path, initial, knobs)?;
    let bound = socket::bind(&path, root)?;
    eprintln!("tact daemon: tickets state {}", tickets.path().display());
    let (enforced, enforcement) = tickets.enforcement();
    if enforced {
        eprintln!("tact daemon: tickets enforced with {enforcement}");
    } else {
        eprintln!("tact daemon: the tickets model is served but {enforcement}");
    }
    let registry = Registry::new(args.lease, Instant::now());
    let shared = Arc::new(Shared::new(registry, tickets));
    eprintln!(
        "tact daemon: listening on {} (lease {:?})",
        path.display(),
        args.lease
    );
    if let Some(addr) = args.metrics {
        let addr = metrics::serve(addr, shared.clone())?;
        eprintln!("tact daemon: metrics on http://{addr}/metrics");
    }
    if shared.tickets().enforcing() {
        let ticking = shared.clone();
        std::thread::Builder::new()
            .name("tickets".into())
            .spawn(move || loop {
                std::thread::sleep(tickets::TICK);
                ticking.tickets().tick();
            })
            .context("cannot start the tickets thread")?;
    }
    let engine = tickets_alps::start(shared.clone())?;
    let cleanup = bound.path.clone();
    let socket_id = socket::identity(&cleanup)?;
    let stopping = shared.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let sig = signals.wait();
            socket::remove(&cleanup, socket_id);
            stopping.tickets().shutdown();
            // Before exiting: the share engine resumes everyone it holds.
            if let Some(engine) = &engine {
                engine.wait();
            }
            match sig {
                Ok(sig) => eprintln!("tact daemon: stopping on {sig}"),
                Err(e) => eprintln!("tact daemon: stopping ({e})"),
            }
            std::process::exit(0)
        })
        .context("cannot start the signal thread")?;
    let mut next_conn = 0;
    loop {
        match bound.listener.accept() {
            Ok((stream, _)) => {
                next_conn += 1;
                accept(stream, next_conn, &shared);
            }
            Err(e) => {
                // Out of file descriptors, say: wait instead of spinning.
                tracing::warn!("accepting a connection failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Starts serving a new connection on its own thread, unless the daemon is full.
fn accept(stream: UnixStream, conn: u64, shared: &Arc<Shared>) {
    let creds = match getsockopt(&stream, PeerCredentials) {
        Ok(creds) => creds,
        Err(e) => {
            tracing::warn!("cannot learn who connected (SO_PEERCRED): {e}; closing");
            return;
        }
    };
    let peer = Peer {
        conn,
        uid: creds.uid(),
        pid: creds.pid(),
    };
    let admitted = shared.lock().connect(peer.uid);
    if let Err(refusal) = admitted {
        // Answered "busy" and closed: a flood must not exhaust threads or file descriptors.
        tracing::warn!(
            "refusing a connection from pid {}: {}",
            peer.pid,
            refusal.message
        );
        let line = tact_proto::error_line(refusal.code, &refusal.message);
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = std::io::Write::write_all(&mut &stream, &line);
        return;
    }
    let shared_for_thread = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("conn-{conn}"))
        .stack_size(CONNECTION_STACK)
        .spawn(move || connection::serve(stream, peer, &shared_for_thread));
    if let Err(e) = spawned {
        tracing::warn!("cannot start a thread for pid {}: {e}", peer.pid);
        shared.lock().disconnect(peer, Instant::now());
    }
}
