//! The daemon's state: registered jobs and the run turn (spec 2.6, 2.7). One job holds the turn
//! at a time; when it is free, the arbiter picks among the jobs waiting for it. A holder that
//! neither releases nor reports within the lease is presumed hung and loses it.
//!
//! A holder keeps the turn while nobody else waits, renewing its lease by `report` (or
//! `acquire`). While another job waits, renewals carry its lease no further than one lease from
//! the first renewal that found it waiting (whose `report` reply says so): a holder that goes on
//! reporting instead of releasing loses the turn then, as a hung one does, so that no job keeps
//! the turn from the others.
//!
//! Every method takes the time, and none blocks or touches a socket: the connection threads do
//! that, with this behind a mutex. State that depends on time passing (a lease running out) is
//! brought up to date by [`Registry::schedule`], which whoever looks calls first.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tact_core::polite::{Arbiter, DEFAULT_HALF_LIFE};
use tact_proto::{
    Ack, DaemonStatus, ErrorCode, Grant, Hello, JobId, JobState, JobStatus, Kind, Report,
    ReportState, Status,
};

use super::duty::Duty;
use super::permission::{may_control, Refusal};

/// Identifies a client connection; jobs belong to the connection that registered them.
pub type ConnId = u64;

/// Most jobs one connection may register (a process registers one; this only stops a flood).
pub const MAX_JOBS_PER_CONNECTION: usize = 64;

/// Most client connections at once, and per user other than root: each costs a thread, and one
/// user's flood of idle connections must not lock the others out of a machine-wide daemon.
pub const MAX_CONNECTIONS: u64 = 1024;
pub const MAX_CONNECTIONS_PER_USER: u64 = 128;

/// Who is on the other end of a connection (SO_PEERCRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub conn: ConnId,
    pub uid: u32,
    pub pid: i32,
}

/// A job as registered, with what `hello` said after the daemon resolved the defaults.
#[derive(Debug)]
pub struct NewJob {
    pub name: String,
    pub pid: i32,
    pub priority: i32,
    pub kind: Kind,
    /// The user name of the peer's uid.
    pub user: String,
}

impl NewJob {
    pub fn from_hello(hello: Hello, peer: Peer, user: String) -> Self {
        NewJob {
            pid: hello.pid.unwrap_or(peer.pid),
            name: hello.name,
            priority: hello.priority,
            kind: hello.kind,
            user,
        }
    }
}

#[derive(Debug)]
struct Job {
    conn: ConnId,
    uid: u32,
    new: NewJob,
    born: Instant,
    /// In `acquire`, waiting for the turn.
    waiting: bool,
    /// Lost the turn by letting its lease run out, and has not spoken since.
    hung: bool,
    /// Last `release` or `report` (or registration).
    last_yield: Instant,
    report: Option<(Report, Instant)>,
    duty: Duty,
}

#[derive(Debug, Clone, Copy)]
struct Holder {
    job: JobId,
    since: Instant,
    lease_until: Instant,
    /// The first renewal that found another job waiting (reset at one that finds none):
    /// renewals do not carry the lease past one lease from then.
    contested: Option<Instant>,
}

impl Holder {
    /// Renews the lease at `now`, when `waiting` other jobs wait: a full lease while nobody
    /// waits, else no further than one lease from the first renewal that found one waiting.
    fn renew(&mut self, now: Instant, lease: Duration, waiting: u32) {
        if waiting == 0 {
            self.contested = None;
            self.lease_until = now + lease;
        } else {
            let since = *self.contested.get_or_insert(now);
            self.lease_until = since + lease;
        }
    }
}

/// What a waiting job's thread should do.
#[derive(Debug, PartialEq)]
pub enum Turn {
    Granted(Grant),
    /// Keep waiting; something may change by this time at the latest (a lease runs out).
    Wait(Option<Instant>),
    /// The job is gone (removed by `bye` from another connection).
    Gone,
}

/// Counters for `status` and metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub connections: u64,
    pub connections_total: u64,
    pub grants_total: u64,
    pub revoked_total: u64,
    pub errors_total: u64,
}

pub struct Registry {
    jobs: BTreeMap<JobId, Job>,
    next_id: JobId,
    holder: Option<Holder>,
    arbiter: Arbiter<JobId>,
    lease: Duration,
    /// The arbiter's time origin (it takes durations).
    origin: Instant,
    /// Open connections by peer uid.
    connections: HashMap<u32, u64>,
    pub counters: Counters,
}

impl Registry {
    pub fn new(lease: Duration, now: Instant) -> Self {
        Registry {
            jobs: BTreeMap::new(),
            next_id: 1,
            holder: None,
            arbiter: Arbiter::new(DEFAULT_HALF_LIFE),
            lease,
            origin: now,
            connections: HashMap::new(),
            counters: Counters::default(),
        }
    }

    /// A client connected: counted, unless the daemon or the user has too many connections.
    pub fn connect(&mut self, uid: u32) -> Result<(), Refusal> {
        let mine = self.connections.get(&uid).copied().unwrap_or(0);
        if self.counters.connections >= MAX_CONNECTIONS {
            return Err(Refusal::new(
                ErrorCode::Busy,
                format!("op: the daemon serves {MAX_CONNECTIONS} connections already"),
            ));
        }
        if uid != 0 && mine >= MAX_CONNECTIONS_PER_USER {
            return Err(Refusal::new(
                ErrorCode::Busy,
                format!("op: uid {uid} has {mine} connections open already, the most a user may"),
            ));
        }
        self.connections.insert(uid, mine + 1);
        self.counters.connections += 1;
        self.counters.connections_total += 1;
        Ok(())
    }

    fn t(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.origin)
    }

    /// Registers a job for `peer` (whose right to name `new.pid` the caller has checked).
    pub fn register(&mut self, peer: Peer, new: NewJob, now: Instant) -> Result<JobId, Refusal> {
        let mine = self.jobs.values().filter(|j| j.conn == peer.conn).count();
        if mine >= MAX_JOBS_PER_CONNECTION {
            return Err(Refusal::new(
                ErrorCode::Busy,
                format!("op: this connection already has {mine} jobs, the most it may register"),
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.arbiter.add(id, new.priority, self.t(now));
        tracing::info!(
            "job {id} registered: {:?} pid {} uid {} priority {}",
            new.name,
            new.pid,
            peer.uid,
            new.priority
        );
        self.jobs.insert(
            id,
            Job {
                conn: peer.conn,
                uid: peer.uid,
                new,
                born: now,
                waiting: false,
                hung: false,
                last_yield: now,
                report: None,
                duty: Duty::default(),
            },
        );
        Ok(id)
    }

    /// The job, if it exists and was registered on this connection: taking turns goes through
    /// the connection that said hello, whose end frees the turn.
    fn own_job(&mut self, peer: Peer, job: JobId) -> Result<&mut Job, Refusal> {
        match self.jobs.get_mut(&job) {
            None => Err(no_such_job(job)),
            Some(j) if j.conn != peer.conn => Err(Refusal::new(
                ErrorCode::Permission,
                format!(
                    "job: job {job} was registered on another connection; acquire, release and \
                     report go through the connection that registered it"
                ),
            )),
            Some(j) => Ok(j),
        }
    }

    /// `acquire`: the job starts waiting (or, holding the turn already, keeps it with a new lease).
    pub fn want_turn(&mut self, peer: Peer, job: JobId, now: Instant) -> Result<(), Refusal> {
        self.own_job(peer, job)?;
        let lease = self.lease;
        let waiting = self.waiting_besides(job);
        let holding = match self.holder.as_mut() {
            Some(h) if h.job == job => {
                h.renew(now, lease, waiting);
                true
            }
            _ => false,
        };
        let j = self.jobs.get_mut(&job).expect("checked by own_job");
        j.hung = false;
        j.waiting = !holding;
        Ok(())
    }

    /// Where a waiting job stands. Call [`Registry::schedule`] first.
    pub fn turn_of(&self, job: JobId) -> Turn {
        match self.holder {
            Some(h) if h.job == job => Turn::Granted(Grant {
                lease_ms: self.lease.as_millis() as u64,
            }),
            _ if self.jobs.contains_key(&job) => Turn::Wait(self.holder.map(|h| h.lease_until)),
            _ => Turn::Gone,
        }
    }

    /// Brings the turn up to date: a holder past its lease loses it, and a free turn goes to the
    /// waiting job the arbiter picks. Returns true if the turn changed hands (waiters to wake).
    pub fn schedule(&mut self, now: Instant) -> bool {
        let mut changed = false;
        if let Some(h) = self.holder.filter(|h| now >= h.lease_until) {
            match h.contested {
                Some(since) if now.saturating_duration_since(since) >= self.lease => {
                    tracing::warn!(
                        "job {} kept the turn for the {:?} lease after hearing that another \
                         job waits: it loses the turn",
                        h.job,
                        self.lease
                    )
                }
                _ => tracing::warn!(
                    "job {} neither released nor reported within the {:?} lease: presumed \
                     hung, it loses the turn",
                    h.job,
                    self.lease
                ),
            }
            self.end_turn(h, now, now.saturating_duration_since(h.since));
            if let Some(j) = self.jobs.get_mut(&h.job) {
                j.hung = true;
            }
            self.counters.revoked_total += 1;
            changed = true;
        }
        if self.holder.is_none() {
            let jobs = &self.jobs;
            let pick = self
                .arbiter
                .pick(self.t(now), |id| jobs.get(&id).is_some_and(|j| j.waiting));
            if let Some(id) = pick {
                let j = self.jobs.get_mut(&id).expect("picked among the jobs");
                j.waiting = false;
                j.duty.start(now);
                self.holder = Some(Holder {
                    job: id,
                    since: now,
                    lease_until: now + self.lease,
                    contested: None,
                });
                self.counters.grants_total += 1;
                tracing::debug!("job {id} has the turn");
                changed = true;
            }
        }
        changed
    }

    /// The holder gives up the turn; `charge` is the run time the arbiter bills it.
    fn end_turn(&mut self, h: Holder, now: Instant, charge: Duration) {
        self.holder = None;
        self.arbiter.charge(h.job, self.t(now), charge);
        if let Some(j) = self.jobs.get_mut(&h.job) {
            j.duty.stop(now);
        }
    }

    /// `release`: the job gives the turn back after running `ran` (billed no more than the time
    /// it actually held the turn).
    pub fn release(
        &mut self,
        peer: Peer,
        job: JobId,
        ran: Duration,
        report: Option<Report>,
        now: Instant,
    ) -> Result<Ack, Refusal> {
        let ack = self.testpoint(peer, job, report, now)?;
        if let Some(h) = self.holder.filter(|h| h.job == job) {
            let held = now.saturating_duration_since(h.since);
            self.end_turn(h, now, ran.min(held));
        }
        Ok(ack)
    }

    /// `report`: figures, and a renewed lease for a holder (while others wait, no further than
    /// one lease from the first renewal that found one waiting).
    pub fn report(
        &mut self,
        peer: Peer,
        job: JobId,
        report: Report,
        now: Instant,
    ) -> Result<Ack, Refusal> {
        let ack = self.testpoint(peer, job, Some(report), now)?;
        let lease = self.lease;
        if let Some(h) = self.holder.as_mut().filter(|h| h.job == job) {
            h.renew(now, lease, ack.waiting);
        }
        Ok(ack)
    }

    /// What `release` and `report` share: the job spoke at a testpoint.
    fn testpoint(
        &mut self,
        peer: Peer,
        job: JobId,
        report: Option<Report>,
        now: Instant,
    ) -> Result<Ack, Refusal> {
        let j = self.own_job(peer, job)?;
        let revoked = std::mem::take(&mut j.hung);
        j.last_yield = now;
        if let Some(r) = report {
            j.report = Some((r, now));
        }
        let waiting = self.waiting_besides(job);
        Ok(Ack { revoked, waiting })
    }

    /// How many jobs other than `job` wait for the turn.
    fn waiting_besides(&self, job: JobId) -> u32 {
        self.jobs
            .iter()
            .filter(|(&id, j)| id != job && j.waiting)
            .count() as u32
    }

    pub fn set_priority(&mut self, peer: Peer, job: JobId, priority: i32) -> Result<(), Refusal> {
        let j = self.jobs.get(&job).ok_or_else(|| no_such_job(job))?;
        may_control(peer.uid, j.uid, job, "changing the priority of")?;
        self.jobs.get_mut(&job).expect("checked").new.priority = priority;
        self.arbiter.set_priority(job, priority);
        Ok(())
    }

    /// `bye`: removes a job (the caller's own, or as its owner or root, any).
    pub fn bye(&mut self, peer: Peer, job: JobId, now: Instant) -> Result<(), Refusal> {
        let j = self.jobs.get(&job).ok_or_else(|| no_such_job(job))?;
        may_control(peer.uid, j.uid, job, "removing")?;
        self.remove(job, now);
        Ok(())
    }

    /// A connection closed: removes its jobs, and frees the turn if one of them held it.
    pub fn disconnect(&mut self, peer: Peer, now: Instant) {
        if let Some(n) = self.connections.get_mut(&peer.uid) {
            *n -= 1;
            if *n == 0 {
                self.connections.remove(&peer.uid);
            }
        }
        self.counters.connections = self.counters.connections.saturating_sub(1);
        self.remove_jobs_of(peer.conn, now);
    }

    fn remove_jobs_of(&mut self, conn: ConnId, now: Instant) {
        let gone: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.conn == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.remove(id, now);
        }
    }

    fn remove(&mut self, job: JobId, now: Instant) {
        if let Some(h) = self.holder.filter(|h| h.job == job) {
            self.end_turn(h, now, Duration::ZERO);
        }
        self.arbiter.remove(job);
        if let Some(j) = self.jobs.remove(&job) {
            tracing::info!("job {job} ({:?}) removed", j.new.name);
        }
    }

    /// Everything, for `status` and metrics. Call [`Registry::schedule`] first.
    pub fn status(&self, now: Instant) -> Status {
        let secs = |d: Duration| d.as_secs_f64();
        let jobs = self
            .jobs
            .iter()
            .map(|(&id, j)| {
                let holding = self.holder.filter(|h| h.job == id);
                let report = j.report.as_ref();
                let suspended_for = report.and_then(|(r, at)| {
                    let end = *at + Duration::from_millis(r.suspend_for_ms);
                    (r.state == ReportState::Suspended && end > now).then(|| end - now)
                });
                let state = if holding.is_some() {
                    JobState::Running
                } else if j.waiting {
                    JobState::Waiting
                } else if j.hung {
                    JobState::Hung
                } else if suspended_for.is_some() {
                    JobState::Suspended
                } else {
                    JobState::Idle
                };
                JobStatus {
                    job: id,
                    pid: j.new.pid,
                    uid: j.uid,
                    user: j.new.user.clone(),
                    name: j.new.name.clone(),
                    kind: j.new.kind,
                    priority: j.new.priority,
                    state,
                    suspended_for_s: suspended_for.map(secs),
                    reported: report.map(|(r, _)| r.state),
                    rate: report.and_then(|(r, _)| r.rate),
                    target: report.and_then(|(r, _)| r.target),
                    unit: report.and_then(|(r, _)| r.unit.clone()),
                    duty_cycle: j.duty.fraction(j.born, now),
                    suspended_s: report.map_or(0.0, |(r, _)| r.suspended_ms as f64 / 1000.0),
                    since_yield_s: secs(now.saturating_duration_since(j.last_yield)),
                    holding_s: holding.map(|h| secs(now.saturating_duration_since(h.since))),
                    usage_s: self
                        .arbiter
                        .usage(id, self.t(now))
                        .map_or(0.0, |u| u.as_secs_f64()),
                    age_s: secs(now.saturating_duration_since(j.born)),
                    idle: report.and_then(|(r, _)| r.idle.clone()),
                }
            })
            .collect();
        Status {
            daemon: DaemonStatus {
                pid: std::process::id() as i32,
                uptime_s: secs(self.t(now)),
                lease_ms: self.lease.as_millis() as u64,
                holder: self.holder.map(|h| h.job),
                connections: self.counters.connections,
                connections_total: self.counters.connections_total,
                grants_total: self.counters.grants_total,
                revoked_total: self.counters.revoked_total,
                errors_total: self.counters.errors_total,
            },
            jobs,
        }
    }
}

fn no_such_job(job: JobId) -> Refusal {
    Refusal::new(
        ErrorCode::NoSuchJob,
        format!("job: no job {job} (it never existed, said bye, or its connection closed)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(10);

    fn peer(conn: ConnId, uid: u32) -> Peer {
        Peer {
            conn,
            uid,
            pid: 100 + conn as i32,
        }
    }

    fn job(reg: &mut Registry, p: Peer, priority: i32, now: Instant) -> JobId {
        let new = NewJob {
            name: format!("job of {}", p.conn),
            pid: p.pid,
            priority,
            kind: Kind::Library,
            user: p.uid.to_string(),
        };
        reg.register(p, new, now).unwrap()
    }

    /// A registry started now, with two connections of `uid` that registered a job each at
    /// priority 0.
    fn two_jobs(uid: u32) -> (Registry, Instant, [(Peer, JobId); 2]) {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        let (a, b) = (peer(1, uid), peer(2, uid));
        let ja = job(&mut reg, a, 0, t0);
        let jb = job(&mut reg, b, 0, t0);
        (reg, t0, [(a, ja), (b, jb)])
    }

    fn granted(reg: &mut Registry, job: JobId, now: Instant) -> bool {
        reg.schedule(now);
        matches!(reg.turn_of(job), Turn::Granted(_))
    }

    fn state(reg: &Registry, job: JobId, now: Instant) -> JobState {
        reg.status(now)
            .jobs
            .iter()
            .find(|j| j.job == job)
            .unwrap()
            .state
    }

    #[test]
    fn one_holder_at_a_time_and_the_turn_passes_on_release() {
        let (mut reg, t0, [(a, ja), (b, jb)]) = two_jobs(1000);
        reg.want_turn(a, ja, t0).unwrap();
        reg.want_turn(b, jb, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        assert!(!granted(&mut reg, jb, t0));
        assert_eq!(state(&reg, jb, t0), JobState::Waiting);
        let t1 = t0 + Duration::from_millis(200);
        assert_eq!(
            reg.release(a, ja, Duration::from_millis(200), None, t1),
            Ok(Ack {
                revoked: false,
                waiting: 1,
            }),
            "b waits"
        );
        assert!(granted(&mut reg, jb, t1));
        assert_eq!(state(&reg, ja, t1), JobState::Idle);
        // a comes back: b has used less (nothing billed yet), but a was billed 200 ms; b keeps
        // the turn until it releases anyway.
        reg.want_turn(a, ja, t1).unwrap();
        assert!(!granted(&mut reg, ja, t1));
        reg.release(
            b,
            jb,
            Duration::from_millis(100),
            None,
            t1 + Duration::from_millis(100),
        )
        .unwrap();
        assert!(granted(&mut reg, ja, t1 + Duration::from_millis(100)));
    }

    #[test]
    fn priority_then_least_usage() {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        let (a, b, c) = (peer(1, 0), peer(2, 0), peer(3, 0));
        let ja = job(&mut reg, a, 0, t0);
        let jb = job(&mut reg, b, 0, t0);
        let jc = job(&mut reg, c, 5, t0);
        // a runs first and is billed.
        reg.want_turn(a, ja, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        reg.want_turn(b, jb, t0).unwrap();
        reg.want_turn(c, jc, t0).unwrap();
        let t1 = t0 + Duration::from_secs(1);
        reg.want_turn(a, ja, t1).unwrap(); // a holder asking again keeps its turn
        reg.release(a, ja, Duration::from_secs(1), None, t1)
            .unwrap();
        reg.want_turn(a, ja, t1).unwrap();
        // c has the highest priority.
        assert!(granted(&mut reg, jc, t1));
        reg.release(c, jc, Duration::from_secs(5), None, t1)
            .unwrap();
        // Then b, which has used less than a.
        assert!(granted(&mut reg, jb, t1));
        reg.set_priority(b, jb, -1).unwrap();
        reg.release(b, jb, Duration::ZERO, None, t1).unwrap();
        assert!(granted(&mut reg, ja, t1));
    }

    #[test]
    fn a_hung_holder_loses_the_turn_after_the_lease_and_hears_so() {
        let (mut reg, t0, [(a, ja), (b, jb)]) = two_jobs(0);
        reg.want_turn(a, ja, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        reg.want_turn(b, jb, t0).unwrap();
        assert_eq!(reg.turn_of(jb), Turn::Wait(Some(t0 + LEASE)));
        // A report renews the lease.
        let report = Report {
            state: ReportState::Running,
            rate: Some(1.0),
            target: Some(2.0),
            unit: None,
            suspended_ms: 0,
            suspend_for_ms: 0,
            idle: None,
        };
        let t1 = t0 + Duration::from_secs(9);
        reg.report(a, ja, report, t1).unwrap();
        assert!(!granted(&mut reg, jb, t0 + Duration::from_secs(11)));
        let t2 = t1 + LEASE;
        assert!(granted(&mut reg, jb, t2));
        assert_eq!(state(&reg, ja, t2), JobState::Hung);
        assert_eq!(reg.counters.revoked_total, 1);
        assert_eq!(
            reg.release(a, ja, Duration::from_secs(1), None, t2),
            Ok(Ack {
                revoked: true,
                waiting: 0,
            })
        );
        // The late release does not take b's turn away.
        assert!(granted(&mut reg, jb, t2));
        assert_eq!(state(&reg, ja, t2), JobState::Idle);
    }

    /// A holder that reports on and on instead of releasing keeps the turn while nobody else
    /// waits, but once another job waits, reports renew its lease no further than one lease
    /// from the first report that told it so.
    #[test]
    fn reporting_holds_the_turn_for_at_most_a_lease_while_another_job_waits() {
        let (mut reg, t0, [(a, ja), (b, jb)]) = two_jobs(1000);
        let report = || Report {
            state: ReportState::Running,
            rate: None,
            target: None,
            unit: None,
            suspended_ms: 0,
            suspend_for_ms: 0,
            idle: None,
        };
        let every = Duration::from_secs(4);
        reg.want_turn(a, ja, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        // Alone, a keeps the turn as long as it reports: five leases.
        let mut t = t0;
        while t < t0 + 5 * LEASE {
            t += every;
            let ack = reg.report(a, ja, report(), t).unwrap();
            assert_eq!(ack.waiting, 0);
            assert!(granted(&mut reg, ja, t));
        }
        // b asks; a's next report hears so, and a keeps reporting, never releasing.
        reg.want_turn(b, jb, t).unwrap();
        let told = t + every;
        let mut now = told;
        while now < told + 3 * LEASE && !granted(&mut reg, jb, now) {
            let ack = reg.report(a, ja, report(), now).unwrap();
            if now == told {
                assert_eq!(
                    ack,
                    Ack {
                        revoked: false,
                        waiting: 1
                    }
                );
            }
            // Asking again while holding does not renew it further either.
            reg.want_turn(a, ja, now).unwrap();
            now += every;
        }
        assert!(
            granted(&mut reg, jb, now),
            "b still waits {:?} after a heard that it waits",
            now - told
        );
        assert!(now >= told + LEASE, "a had a lease from {told:?}: {now:?}");
        assert!(now <= told + LEASE + every, "{:?}", now - told);
        assert_eq!(reg.counters.revoked_total, 1);
        assert_eq!(
            reg.report(a, ja, report(), now).unwrap(),
            Ack {
                revoked: true,
                waiting: 0
            }
        );
        // b's turn is a fresh one: alone again after a releases... a waits now, so b too is
        // held to a lease from its first report that hears so.
        reg.want_turn(a, ja, now).unwrap();
        let ack = reg.report(b, jb, report(), now).unwrap();
        assert_eq!(ack.waiting, 1);
        assert!(!granted(
            &mut reg,
            ja,
            now + LEASE - Duration::from_millis(1)
        ));
        reg.report(b, jb, report(), now + LEASE - Duration::from_millis(1))
            .unwrap();
        assert!(granted(&mut reg, ja, now + LEASE));
    }

    /// The cap applies only while someone waits: a waiter that leaves lets the holder renew
    /// fully again, and a later waiter starts a new lease's grace.
    #[test]
    fn a_waiter_that_leaves_lifts_the_cap() {
        let (mut reg, t0, [(a, ja), (b, jb)]) = two_jobs(1000);
        let report = || Report {
            state: ReportState::Running,
            rate: None,
            target: None,
            unit: None,
            suspended_ms: 0,
            suspend_for_ms: 0,
            idle: None,
        };
        reg.want_turn(a, ja, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        reg.want_turn(b, jb, t0).unwrap();
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(reg.report(a, ja, report(), t1).unwrap().waiting, 1);
        reg.bye(b, jb, t1).unwrap();
        let t2 = t1 + Duration::from_secs(8);
        assert_eq!(reg.report(a, ja, report(), t2).unwrap().waiting, 0);
        // Renewed fully at t2, past t1 + LEASE.
        assert!(granted(&mut reg, ja, t1 + LEASE + Duration::from_secs(1)));
        assert_eq!(reg.counters.revoked_total, 0);
    }

    #[test]
    fn a_closed_connection_frees_the_turn_and_removes_its_jobs() {
        let (mut reg, t0, [(a, ja), (b, jb)]) = two_jobs(0);
        reg.want_turn(a, ja, t0).unwrap();
        reg.want_turn(b, jb, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        reg.disconnect(a, t0);
        assert_eq!(reg.turn_of(ja), Turn::Gone);
        assert!(granted(&mut reg, jb, t0));
    }

    #[test]
    fn jobs_are_used_through_their_connection_and_controlled_by_their_owner() {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        let (a, a2, other, root) = (peer(1, 1000), peer(2, 1000), peer(3, 1001), peer(4, 0));
        let ja = job(&mut reg, a, 0, t0);
        let e = reg.want_turn(a2, ja, t0).unwrap_err();
        assert_eq!(e.code, ErrorCode::Permission);
        assert_eq!(
            reg.want_turn(a, 99, t0).unwrap_err().code,
            ErrorCode::NoSuchJob
        );
        assert_eq!(
            reg.set_priority(other, ja, 3).unwrap_err().code,
            ErrorCode::Permission
        );
        assert_eq!(
            reg.bye(other, ja, t0).unwrap_err().code,
            ErrorCode::Permission
        );
        reg.set_priority(a2, ja, 3).unwrap();
        reg.set_priority(root, ja, 4).unwrap();
        reg.bye(root, ja, t0).unwrap();
        assert_eq!(reg.turn_of(ja), Turn::Gone);
    }

    #[test]
    fn connections_are_limited_per_user_but_not_for_root() {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        for _ in 0..MAX_CONNECTIONS_PER_USER {
            reg.connect(1000).unwrap();
        }
        assert_eq!(reg.connect(1000).unwrap_err().code, ErrorCode::Busy);
        reg.connect(1001).unwrap();
        reg.disconnect(peer(1, 1000), t0);
        reg.connect(1000).unwrap();
        while reg.counters.connections < MAX_CONNECTIONS {
            reg.connect(0).unwrap();
        }
        assert_eq!(reg.connect(0).unwrap_err().code, ErrorCode::Busy);
        assert_eq!(reg.counters.connections_total, MAX_CONNECTIONS + 1);
    }

    /// An idle-gated job only reports: it never holds the turn, so a polite job gets the turn at
    /// once beside it, and its silence past a lease is no hang.
    #[test]
    fn an_idle_gated_job_that_only_reports_takes_no_part_in_the_turns() {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        let (gated, polite) = (peer(1, 0), peer(2, 0));
        let jg = job(&mut reg, gated, 10, t0);
        let jp = job(&mut reg, polite, 0, t0);
        let gate = tact_proto::GateReport {
            resource: "disk:vda".into(),
            state: tact_proto::GateState::Held,
            pi_ms: 10.0,
            holds: 1,
            held_ms: 5,
            fg_bytes: 8192,
            counters: [[0; 4]; 4],
            preempted: 0,
            expired_pis: 0,
            harm: 0.0,
            kernel: None,
            own_traffic: None,
        };
        let report = Report {
            state: ReportState::Suspended,
            rate: None,
            target: None,
            unit: None,
            suspended_ms: 5,
            suspend_for_ms: 1010,
            idle: Some(tact_proto::IdleReport {
                cpu: None,
                gates: vec![gate],
            }),
        };
        assert_eq!(
            reg.report(gated, jg, report, t0),
            Ok(Ack {
                revoked: false,
                waiting: 0
            })
        );
        reg.want_turn(polite, jp, t0).unwrap();
        assert!(granted(&mut reg, jp, t0), "the gated job is not in the way");
        let s = reg.status(t0);
        let g = s.jobs.iter().find(|j| j.job == jg).unwrap();
        assert_eq!(g.state, JobState::Suspended);
        assert_eq!(g.idle.as_ref().unwrap().gates[0].resource, "disk:vda");
        // Long after a lease, with nobody releasing: neither job is hung or revoked.
        let later = t0 + 3 * LEASE;
        reg.release(polite, jp, Duration::from_secs(1), None, t0)
            .unwrap();
        reg.schedule(later);
        assert_eq!(reg.counters.revoked_total, 0);
        assert_eq!(state(&reg, jg, later), JobState::Idle);
        assert_eq!(reg.status(later).daemon.holder, None);
    }

    #[test]
    fn status_shows_suspension_and_duty() {
        let t0 = Instant::now();
        let mut reg = Registry::new(LEASE, t0);
        let a = peer(1, 0);
        let ja = job(&mut reg, a, 0, t0);
        reg.want_turn(a, ja, t0).unwrap();
        assert!(granted(&mut reg, ja, t0));
        let report = Report {
            state: ReportState::Suspended,
            rate: Some(1.0),
            target: Some(2.0),
            unit: Some("B/s".into()),
            suspended_ms: 1500,
            suspend_for_ms: 4000,
            idle: None,
        };
        let t1 = t0 + Duration::from_secs(2);
        reg.release(a, ja, Duration::from_secs(2), Some(report), t1)
            .unwrap();
        let t2 = t1 + Duration::from_secs(2);
        let s = reg.status(t2);
        let j = &s.jobs[0];
        assert_eq!(j.state, JobState::Suspended);
        assert!((j.suspended_for_s.unwrap() - 2.0).abs() < 1e-6);
        assert!((j.duty_cycle - 0.5).abs() < 1e-6);
        assert_eq!(
            (j.rate, j.target, j.suspended_s),
            (Some(1.0), Some(2.0), 1.5)
        );
        assert!((j.since_yield_s - 2.0).abs() < 1e-6);
        assert!(j.usage_s > 1.0);
        assert_eq!(state(&reg, ja, t2 + Duration::from_secs(3)), JobState::Idle);
    }
}
