//! The tact daemon as the supervisor's [`Coordinator`] (spec 2.6; the paper's superintendent):
//! regulated processes that run at once slow each other and read that as contention, so while a
//! daemon runs, one low-importance process on the machine executes at a time. The process-wide
//! supervisor installs this when a daemon answers at `$TACT_SOCKET` or the default path at its
//! start; when the daemon goes away (or stops answering), the process works alone and looks for
//! it again every few seconds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tact_proto::{Client, ClientError, Hello, JobId, Kind, Report, ReportState, Timeouts};

use crate::coordinator::{Coordinator, CoordinatorError, ReleaseReason, UnitReport};

/// How often a process that lost its daemon tries to register again.
const REJOIN_EVERY: Duration = Duration::from_secs(5);

/// How many of the daemon's leases a unit waits for the turn before it gives up on the daemon
/// and runs alone (a stopped or stuck daemon must not hold the program's testpoints for ever).
/// While others wait, a holder keeps the turn at most a lease, so a few leases cover a turn
/// or two of other jobs.
const ACQUIRE_LEASES: u32 = 3;

/// The daemon's lease until it grants one (`tact daemon`'s default).
const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// A daemon that does not answer within these is lost: the testpoint that asked runs alone.
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(2),
    reply: Duration::from_secs(3),
};

pub struct DaemonCoordinator {
    path: PathBuf,
    name: String,
    /// The connection and this process's job on it, while registered.
    joined: Option<Joined>,
    /// The priority the daemon knows this process by.
    priority: i32,
    last_attempt: Instant,
    /// Register again at the next acquire without waiting for [`REJOIN_EVERY`] (a forked child).
    rejoin_now: bool,
    /// The lease of the daemon's last grant: an acquire waits [`ACQUIRE_LEASES`] of it.
    lease: Duration,
    /// Running alone has been said on stderr: it is said once, until the daemon is back.
    warned: bool,
}

struct Joined {
    client: Client,
    job: JobId,
    /// The process that registered: a child forked after that shares the connection (its
    /// socket) with its parent and must not use it.
    pid: u32,
}

impl DaemonCoordinator {
    /// A coordinator for this process if a daemon answers at the socket `$TACT_SOCKET` or the
    /// default path names now; `None` (work alone) otherwise.
    pub fn find(name: &str) -> Option<Self> {
        let path = tact_proto::socket_path(None).ok()?;
        if !path.exists() {
            return None;
        }
        Self::connect(path, name)
    }

    /// A coordinator registered as `name` with the daemon at `path`; `None` if it does not
    /// answer or refuses (the reason goes to stderr). The name is made fit for the protocol
    /// ([`tact_proto::job_name`]).
    pub fn connect(path: PathBuf, name: &str) -> Option<Self> {
        let mut c = DaemonCoordinator {
            path,
            name: tact_proto::job_name(name),
            joined: None,
            priority: 0,
            last_attempt: Instant::now(),
            rejoin_now: false,
            lease: DEFAULT_LEASE,
            warned: false,
        };
        c.join(0).then_some(c)
    }

    fn join(&mut self, priority: i32) -> bool {
        self.last_attempt = Instant::now();
        self.rejoin_now = false;
        let hello = Hello {
            name: self.name.clone(),
            pid: None,
            priority,
            kind: Kind::Library,
        };
        let joined = Client::connect_with(&self.path, TIMEOUTS).and_then(|mut client| {
            let job = client.hello(hello)?;
            Ok((client, job))
        });
        match joined {
            Ok((client, job)) => {
                self.joined = Some(Joined {
                    client,
                    job,
                    pid: std::process::id(),
                });
                self.priority = priority;
                if std::mem::take(&mut self.warned) {
                    eprintln!("tact: rejoined the daemon at {}", self.path.display());
                }
                true
            }
            Err(e) => {
                self.warn_alone(format!("daemon at {}: {e}", self.path.display()));
                false
            }
        }
    }

    /// The daemon went away or stopped answering: work alone, and say so once.
    fn lose(&mut self, e: &ClientError) {
        self.joined = None;
        self.last_attempt = Instant::now();
        self.warn_alone(format!("lost the daemon at {} ({e})", self.path.display()));
    }

    /// Says on stderr, once until the daemon is back, why the process runs alone.
    fn warn_alone(&mut self, why: String) {
        if !std::mem::replace(&mut self.warned, true) {
            eprintln!(
                "tact: {why}; running alone, looking for it every {}s",
                REJOIN_EVERY.as_secs()
            );
        }
    }

    /// In a child forked after registering, the connection is its parent's: dropped without a
    /// word on it (closing the child's copy of the socket leaves the parent's open), and the
    /// child registers a job of its own at its next acquire.
    fn forget_if_forked(&mut self) {
        if self
            .joined
            .as_ref()
            .is_some_and(|j| j.pid != std::process::id())
        {
            self.joined = None;
            self.rejoin_now = true;
        }
    }
}

impl Coordinator for DaemonCoordinator {
    fn acquire(&mut self, priority: i32) -> Result<(), CoordinatorError> {
        self.forget_if_forked();
        // The daemon refuses a priority out of its range (and would drop this process's turn
        // with it); `set_priority` refuses them, so this only guards.
        let priority = priority.clamp(tact_proto::PRIORITY_MIN, tact_proto::PRIORITY_MAX);
        if self.joined.is_none()
            && ((!self.rejoin_now && self.last_attempt.elapsed() < REJOIN_EVERY)
                || !self.join(priority))
        {
            return Err("no tact daemon".into());
        }
        let limit = self.lease * ACQUIRE_LEASES;
        let Joined { client, job, .. } = self.joined.as_mut().expect("joined above");
        let job = *job;
        let result = (|| {
            if priority != self.priority {
                client.set_priority(job, priority)?;
                self.priority = priority;
            }
            client.acquire_within(job, limit)
        })();
        match result {
            Ok(grant) => {
                self.lease = Duration::from_millis(grant.lease_ms.max(1));
                Ok(())
            }
            Err(e) => {
                self.lose(&e);
                Err(e.into())
            }
        }
    }

    fn release(&mut self, ran: Duration, report: &UnitReport) {
        self.forget_if_forked();
        let Some(Joined { client, job, .. }) = self.joined.as_mut() else {
            return;
        };
        let (state, suspend_for) = match report.reason {
            ReleaseReason::Suspended(s) => (ReportState::Suspended, s),
            _ if report.calibrating => (ReportState::Calibrating, Duration::ZERO),
            _ => (ReportState::Running, Duration::ZERO),
        };
        // The protocol bounds rates; a figure it would refuse is left out rather than costing
        // the release.
        let valid = |r: Option<f64>| {
            r.filter(|r| r.is_finite() && (0.0..=tact_proto::MAX_RATE).contains(r))
        };
        let figures = Report {
            state,
            rate: valid(report.rate),
            target: valid(report.target),
            unit: Some("units/s".to_string()),
            suspended_ms: report
                .suspended
                .as_millis()
                .min(tact_proto::MAX_TOTAL_MS as u128) as u64,
            suspend_for_ms: suspend_for.as_millis().min(tact_proto::MAX_DAY_MS as u128) as u64,
            idle: None,
        };
        if let Err(e) = client.release(*job, ran, Some(figures)) {
            self.lose(&e);
        }
    }
}
