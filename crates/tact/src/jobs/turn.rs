//! Taking turns with the machine's other low-importance jobs through the daemon (spec 2.6):
//! regulated jobs that run at once slow each other and read that as contention, so while a
//! daemon runs, a `tact run` job runs only while it holds the daemon's turn. It keeps the turn
//! across testpoints while nobody else waits, and otherwise gives it back at a testpoint after
//! stopping the job, so that two jobs never run at once. Without a daemon, or when it goes away,
//! the job runs alone; tact tries to rejoin every few seconds.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tact_proto::{Client, ClientError, Hello, JobId, Kind, Report, Timeouts};

/// How often a job that lost its daemon tries to register again.
const REJOIN_EVERY: Duration = Duration::from_secs(5);

/// A daemon that does not answer within these is lost (the job runs alone and rejoins later):
/// tact holds or stops the job meanwhile, and the guard's lease must outlast a report and a
/// rejoin (its connect and hello), 8 s at most.
pub const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(2),
    reply: Duration::from_secs(3),
};

pub struct Turn {
    client: Client,
    job: Option<JobId>,
    /// When the turn was granted, while this job holds it.
    held_since: Option<Instant>,
    /// An `acquire` is out and its answer not read yet.
    asked: bool,
    last_attempt: Instant,
}

impl Turn {
    /// Registers the process `pid` with the daemon at `socket` (the default path when `None`).
    /// `Ok(None)` when no daemon runs there: the job runs alone, as it would without tact's
    /// daemon. Other failures (a refusal, a daemon that does not answer) are errors.
    pub fn join(
        socket: Option<&Path>,
        name: &str,
        pid: i32,
        priority: i32,
    ) -> anyhow::Result<Option<Turn>> {
        let path: PathBuf = tact_proto::socket_path(socket)?;
        let mut client = match Client::connect_with(&path, TIMEOUTS) {
            Ok(c) => c,
            Err(e) if e.no_daemon() && socket.is_none() => return Ok(None),
            Err(e) => return Err(anyhow::anyhow!("daemon at {}: {e}", path.display())),
        };
        let job = client.hello(Hello {
            name: tact_proto::job_name(name),
            pid: Some(pid),
            priority,
            kind: Kind::Run,
        })?;
        tracing::info!(
            "registered with the daemon at {} as job {job}",
            path.display()
        );
        Ok(Some(Turn {
            client,
            job: Some(job),
            held_since: None,
            asked: false,
            last_attempt: Instant::now(),
        }))
    }

    /// Asks for the turn; `Some(true)` when granted within `wait`, `Some(false)` when not yet
    /// (ask [`Turn::granted`] again), `None` when there is no daemon to ask: run alone.
    pub fn request(&mut self, wait: Duration) -> Option<bool> {
        if self.held_since.is_some() {
            return Some(true);
        }
        let job = self.job()?;
        if !self.asked {
            if let Err(e) = self.client.request_turn(job) {
                self.lose(e);
                return None;
            }
            self.asked = true;
        }
        self.granted(wait)
    }

    /// Whether the turn asked for has come within `wait`; `None` if the daemon went away.
    pub fn granted(&mut self, wait: Duration) -> Option<bool> {
        if self.held_since.is_some() {
            return Some(true);
        }
        match self.client.grant(wait) {
            Ok(Some(_)) => {
                self.asked = false;
                self.held_since = Some(Instant::now());
                Some(true)
            }
            Ok(None) => Some(false),
            Err(e) => {
                self.lose(e);
                None
            }
        }
    }

    /// At a testpoint of a job that runs on: sends the figures `tact status` shows and renews
    /// the lease. `true` when the job should give the turn back (another job waits, or the turn
    /// was taken away as presumed hung); `false` to run on, as when there is no daemon.
    pub fn should_yield(&mut self, report: Report) -> bool {
        let Some(job) = self.job() else {
            return false;
        };
        if self.held_since.is_none() {
            // Registered again after losing the daemon: take a turn like everyone else.
            return true;
        }
        match self.client.report(job, report) {
            Ok(ack) if ack.revoked => {
                self.held_since = None;
                true
            }
            Ok(ack) => ack.waiting > 0,
            Err(e) => {
                self.lose(e);
                false
            }
        }
    }

    /// Gives the turn back at a testpoint, with the figures `tact status` shows.
    pub fn release(&mut self, report: Report) {
        let (Some(job), Some(since)) = (self.job, self.held_since.take()) else {
            return;
        };
        if let Err(e) = self.client.release(job, since.elapsed(), Some(report)) {
            self.lose(e);
        }
    }

    /// Sends the figures `tact status` shows, for a job that does not take turns (an idle-gated
    /// job: its gates decide when it runs).
    pub fn report(&mut self, report: Report) {
        let Some(job) = self.job() else {
            return;
        };
        if let Err(e) = self.client.report(job, report) {
            self.lose(e);
        }
    }

    /// The registered job, registering again (a restarted daemon) at most every few seconds.
    fn job(&mut self) -> Option<JobId> {
        if self.job.is_none() && self.last_attempt.elapsed() >= REJOIN_EVERY {
            self.last_attempt = Instant::now();
            match self.client.reconnect() {
                Ok(jobs) => {
                    self.job = jobs.first().copied();
                    tracing::warn!("rejoined the daemon at {}", self.client.path().display());
                }
                Err(e) => tracing::debug!("daemon still unreachable: {e}"),
            }
        }
        self.job
    }

    fn lose(&mut self, e: ClientError) {
        if self.job.is_some() {
            tracing::warn!(
                "lost the daemon at {} ({e}); running alone until it is back",
                self.client.path().display()
            );
        }
        self.job = None;
        self.held_since = None;
        self.asked = false;
        self.last_attempt = Instant::now();
    }
}
