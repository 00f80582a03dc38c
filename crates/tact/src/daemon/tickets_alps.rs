//! The daemon's enforcement without root (issue 7): the attached clients of the daemon's own user
//! get CPU shares ∝ their CPU rights through `tact share`'s ALPS engine (SIGSTOP/SIGCONT duty
//! cycles), as `tact tickets run --backend signals` gives its jobs. An unprivileged daemon can
//! signal no one else's processes, and another user cannot attach a process to it anyway
//! ([`super::permission`]); a client that changes uid leaves the engine.
//!
//! One thread runs ALPS over the current client set, adopting each client's process tree as
//! `tact share --pid` does (a client whose attached ancestor is adopted is governed within the
//! ancestor's tree). Every [`TICK`] its [`Follow`] reads the model under the tickets mutex,
//! briefly: the shares follow the rights (quantized to [`ALPS_SHARES`]), what ALPS sees of each
//! client's activity (its blocked flag: a client ALPS stopped keeps the activity it had, so
//! tact's own stops do not count) becomes the model's cpu activity at the next refresh, and a
//! changed client set (attach, detach, exit, change of uid) or the daemon's shutdown ends the
//! run, which resumes everyone. The thread then starts a run over the new set, or waits while
//! there is none. A detach replies only once the engine has been through that
//! ([`Engine::caught_up`]), so that the process runs again when its detach returns.
//!
//! Crash safety is the share engine's own ([`Safety`]): each run's members are in a state file
//! and held by a watchdog before any of them is stopped, so a SIGTERMed daemon resumes everyone
//! before it exits, a SIGKILLed one's watchdog resumes them at once (a hung one's within the
//! lease), and a restarted tact resumes what a dead one left stopped. Disk and memory rights
//! are not applied: that needs root's cgroups (said once at start).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{Context, Result};
use tact_core::share::{Alps, EntityId, ShareConfig};
use tact_core::tickets::{Resource, TicketSystem};
use tact_linux::actuate::affinity;
use tact_linux::ProcReader;
use tact_proto::tickets::Knob;

use super::connection::Shared;
use super::tickets::{Tickets, TICK};
use crate::jobs::events::Events;
use crate::share::alps::{self, Retune};
use crate::share::default_alps_config;
use crate::share::group::Job;
use crate::share::safety::Safety;
use crate::share::spec::{JobSpec, What};
use crate::tickets::rights;
use crate::tickets::signals::{self, ALPS_SHARES};

/// The `file` of a client's cpu [`Knob`] under the share engine: its value is the ALPS share.
pub const KNOB: &str = "alps share";

/// How long the daemon's exit waits for the engine to resume everyone (past it the daemon exits
/// anyway, and the watchdog resumes them when it sees the daemon gone), and a detach for the
/// engine to let the process go.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The pause before the engine tries again after a failed run.
const RETRY: Duration = Duration::from_secs(1);

/// A client: pid and start time (a reused pid is another process).
type Client = (u32, u64);

/// What the share engine holds, kept with the model under the tickets mutex.
pub struct Engine {
    /// The user whose clients it governs: the daemon's.
    uid: u32,
    /// The share each adopted client runs at now, for `show` and `explain`.
    shares: BTreeMap<u32, u64>,
    /// Whether ALPS last found each adopted client runnable.
    active: BTreeMap<u32, bool>,
    /// The daemon is exiting: the run ends, and no other starts.
    stopping: bool,
    /// Why the engine does not enforce now, if it does not.
    failure: Option<String>,
    /// Counts the detaches, and the count the engine had seen when it last started to look
    /// for its clients, with no run going.
    changes: u64,
    seen: u64,
}

impl Engine {
    pub fn new(uid: u32) -> Engine {
        Engine {
            uid,
            shares: BTreeMap::new(),
            active: BTreeMap::new(),
            stopping: false,
            failure: None,
            changes: 0,
            seen: 0,
        }
    }

    /// Whether the rights are applied, and how (or why not).
    pub fn describe(&self) -> (bool, String) {
        match &self.failure {
            Some(why) => (false, format!("not enforced: {why}")),
            None => (
                true,
                format!(
                    "share engine (SIGSTOP/SIGCONT duty cycles, ALPS shares {}-{} ∝ CPU \
                     rights) for the processes of uid {}, CPU only: disk and memory rights \
                     need root's cgroups",
                    ALPS_SHARES.min, ALPS_SHARES.max, self.uid
                ),
            ),
        }
    }

    /// The share client `pid` runs at, if the engine governs it now.
    pub fn written(&self, pid: u32) -> Option<Knob> {
        self.shares.get(&pid).map(|&value| Knob {
            file: KNOB.to_string(),
            value,
        })
    }

    /// Whether client `pid` competes for the CPU as ALPS sees it, if the engine governs it:
    /// `/proc` would show a client the engine stopped as not competing.
    pub fn cpu_activity(&self, pid: u32) -> Option<bool> {
        self.active.get(&pid).copied()
    }

    /// A client was detached: the change number to wait for with [`Engine::caught_up`].
    pub fn changed(&mut self) -> u64 {
        self.changes += 1;
        self.changes
    }

    /// Whether no run over the clients of before change `change` goes on any more (or the
    /// engine has ended).
    pub fn caught_up(&self, change: u64) -> bool {
        self.seen >= change
    }

    /// The daemon exits: the engine resumes everyone and ends.
    pub fn stop(&mut self) {
        self.stopping = true;
    }

    /// No run: no client is governed.
    fn idle(&mut self) {
        self.shares.clear();
        self.active.clear();
    }
}

/// The daemon's wait for the engine's thread to have resumed everyone.
pub struct Finished(mpsc::Receiver<()>);

impl Finished {
    /// Call after [`Tickets::shutdown`].
    pub fn wait(&self) {
        // Disconnected (the thread ended earlier) or timed out: either way, go.
        let _ = self.0.recv_timeout(PATIENCE);
    }
}

/// Starts the engine's thread if the daemon enforces with it.
pub fn start(shared: Arc<Shared>) -> Result<Option<Finished>> {
    if shared.tickets().with_engine(|_, _, _| ()).is_none() {
        return Ok(None);
    }
    eprintln!(
        "tact daemon: not root: the CPU rights of attached processes are enforced with the share \
         engine (SIGSTOP/SIGCONT); disk and memory tickets are not applied (that needs root's \
         cgroups)"
    );
    let (done, finished) = mpsc::channel();
    std::thread::Builder::new()
        .name("share-engine".into())
        .spawn(move || {
            let tickets = shared.tickets();
            if let Err(e) = serve(tickets) {
                let why = format!("the share engine failed: {e:#}");
                eprintln!("tact daemon: CPU rights are no longer enforced: {why}");
                tickets.with_engine(|_, _, engine| {
                    engine.idle();
                    engine.failure = Some(why);
                    // No run will hold anyone.
                    engine.seen = u64::MAX;
                });
            }
            let _ = done.send(());
        })
        .context("cannot start the share engine's thread")?;
    Ok(Some(Finished(finished)))
}

/// Runs ALPS over each client set in turn until the daemon stops. A run that fails (its
/// watchdog cannot start on a machine short of memory, say) is said, shown as not enforced,
/// and tried again after [`RETRY`]; what fails before any run ends enforcement.
fn serve(tickets: &Tickets) -> Result<()> {
    let cpus = affinity::thread_cpus(std::process::id() as i32)
        .context("cannot read the daemon's CPU affinity")?;
    let cfg = default_alps_config(cpus.len())?;
    // The daemon's signal thread takes the termination signals: the engine must not read them.
    let mut events = Events::without_signals()?;
    let mut told = BTreeSet::new();
    let mut failed: Option<String> = None;
    loop {
        // No run goes on here: every change made so far is taken into account.
        let looked = tickets.with_engine(|system, starts, engine| {
            engine.seen = engine.changes;
            clients(system, starts, engine)
        });
        let Some(wanted) = looked.flatten() else {
            return Ok(());
        };
        let jobs = adopt(&wanted, &mut told);
        if jobs.is_empty() {
            std::thread::sleep(TICK);
            continue;
        }
        match run(tickets, &wanted, jobs, &cfg, &cpus, &mut events) {
            Ok(()) => failed = None,
            Err(e) => {
                let why = format!("the share engine failed: {e:#}");
                // Once per kind of failure, not at every retry.
                if failed.as_ref() != Some(&why) {
                    eprintln!(
                        "tact daemon: CPU rights are not enforced until the share engine runs \
                         again: {why}"
                    );
                }
                tickets.with_engine(|_, _, engine| engine.failure = Some(why.clone()));
                failed = Some(why);
                std::thread::sleep(RETRY);
            }
        }
    }
}

/// One run of ALPS over `jobs`, the adopted clients of `wanted`, until the client set changes
/// or the daemon stops; everyone runs again when it returns.
fn run(
    tickets: &Tickets,
    wanted: &[Client],
    mut jobs: Vec<Job>,
    cfg: &ShareConfig,
    cpus: &[usize],
    events: &mut Events,
) -> Result<()> {
    let adopted: Vec<Client> = jobs
        .iter()
        .map(|j| (j.tree().root().pid as u32, j.tree().root().start_time))
        .collect();
    // A watchdog per run, there before any stop: releasing dismisses it.
    let mut safety = Safety::start()?;
    let first = tickets.with_engine(|system, starts, engine| {
        let shares = follow(system, starts, engine, wanted, &adopted, None)?;
        engine.failure = None;
        Some(shares)
    });
    let Some(shares) = first.flatten() else {
        return safety.release(&mut jobs);
    };
    for (job, share) in jobs.iter_mut().zip(&shares) {
        job.spec.shares = *share;
    }
    let mut retune = Follow {
        tickets,
        wanted,
        adopted: &adopted,
        shares,
    };
    let ran = alps::run(
        &mut jobs,
        cfg.clone(),
        cpus,
        &mut safety,
        None,
        events,
        Some(&mut retune),
    );
    let released = safety.release(&mut jobs);
    tickets.with_engine(|_, _, engine| engine.idle());
    ran?;
    released
}

/// The clients the engine should govern now (the daemon's user's, in pid order), or `None` when
/// it should not run.
fn clients(
    system: &TicketSystem,
    starts: &BTreeMap<u32, u64>,
    engine: &Engine,
) -> Option<Vec<Client>> {
    if engine.stopping {
        return None;
    }
    Some(
        system
            .processes()
            .filter(|p| p.uid == engine.uid)
            .filter_map(|p| starts.get(&p.pid).map(|s| (p.pid, *s)))
            .collect(),
    )
}

/// Takes charge of each client's process tree (entity ids 0, 1, ... in `wanted`'s order). A
/// client that cannot be adopted is said once, unless it is gone (the next refresh drops it).
fn adopt(wanted: &[Client], told: &mut BTreeSet<Client>) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for &(pid, start) in wanted {
        let spec = JobSpec {
            shares: ALPS_SHARES.default,
            what: What::Pid(pid as i32),
            name: Some(format!("pid:{pid}")),
        };
        match Job::start(0, spec) {
            Ok(job) if job.tree().root().start_time == start => jobs.push(job),
            // The pid now names another process.
            Ok(_) => {}
            Err(e) => {
                let alive = ProcReader::new()
                    .stat(pid as i32)
                    .is_ok_and(|s| s.start_time == start && !s.is_dead());
                if alive && told.insert((pid, start)) {
                    eprintln!("tact daemon: process {pid} is not under the share engine: {e:#}");
                }
            }
        }
    }
    // The tree of a client with an attached ancestor is within the ancestor's.
    let covered: Vec<bool> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let root = j.tree().root();
            jobs.iter()
                .enumerate()
                .any(|(k, other)| k != i && other.tree().members().contains(&root))
        })
        .collect();
    let mut jobs: Vec<Job> = jobs
        .into_iter()
        .zip(covered)
        .filter(|(_, covered)| !covered)
        .map(|(job, _)| job)
        .collect();
    for (i, job) in jobs.iter_mut().enumerate() {
        job.id = i as EntityId;
    }
    jobs
}

/// The shares of the `adopted` clients now (recorded for `show`), recording `active` (in their
/// order) as their cpu activity; `None` when the run must end: the client set is no longer
/// `wanted`, or the daemon stops.
fn follow(
    system: &TicketSystem,
    starts: &BTreeMap<u32, u64>,
    engine: &mut Engine,
    wanted: &[Client],
    adopted: &[Client],
    active: Option<&[bool]>,
) -> Option<Vec<u64>> {
    if clients(system, starts, engine)? != wanted {
        return None;
    }
    let model = system.model();
    // Every adopted client is in the current set, which is `wanted`.
    let holding: Vec<_> = adopted
        .iter()
        .filter_map(|(pid, _)| system.process(*pid))
        .map(|p| {
            let holds = rights::holds_tickets(model, p.currency, Resource::Cpu);
            (p.currency, holds)
        })
        .collect();
    let shares: Vec<u64> = rights::compile(model, &holding, Resource::Cpu, ALPS_SHARES)
        .iter()
        .map(|c| c.weight)
        .collect();
    let pids = || adopted.iter().map(|c| c.0);
    if let Some(active) = active {
        engine.active = pids().zip(active.iter().copied()).collect();
    }
    engine.shares = pids().zip(shares.iter().copied()).collect();
    Some(shares)
}

/// Retunes a run every [`TICK`]: the shares follow the model, and the run ends when the client
/// set changes or the daemon stops.
struct Follow<'a> {
    tickets: &'a Tickets,
    wanted: &'a [Client],
    adopted: &'a [Client],
    /// The shares the engine runs on.
    shares: Vec<u64>,
}

impl Retune for Follow<'_> {
    fn every(&self) -> Duration {
        TICK
    }

    fn retune(&mut self, alps: &Alps, jobs: &[Job]) -> Result<Option<Vec<(EntityId, u64)>>> {
        let active = signals::competing(alps, jobs);
        let (wanted, adopted) = (self.wanted, self.adopted);
        let shares = self.tickets.with_engine(|system, starts, engine| {
            follow(system, starts, engine, wanted, adopted, Some(&active))
        });
        let Some(shares) = shares.flatten() else {
            return Ok(None);
        };
        let changed = signals::changed_shares(jobs, &shares, &self.shares);
        self.shares = shares;
        Ok(Some(changed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_core::tickets::system::Policy;
    use tact_core::tickets::{Broker, Caller, CurrencyId, Kind, Mode, PerResource};

    /// Currency C with 1000 of the base's CPU, and processes 10 and 20 of uid 1000 funded with
    /// 100 and 300 of C's, both competing; 30 of uid 2000, from the policy.
    fn model() -> (TicketSystem, BTreeMap<u32, u64>) {
        let root = Caller::root();
        let mut system = TicketSystem::new(PerResource([1000, 1000, 1000]), Policy::default())
            .expect("a valid base");
        let broker = Broker {
            owner: 1000,
            group: 1000,
            mode: Mode::OWNER_ONLY,
        };
        let c = system.create_currency(&root, "C", broker).unwrap().value;
        system
            .fund(&root, c, CurrencyId::BASE, Resource::Cpu, 1000, Kind::Soft)
            .unwrap();
        for (pid, amount) in [(10, 100), (20, 300)] {
            let client = system.add_process(&root, pid, 1000, None).unwrap().value;
            let policy = system.model().currency(client).unwrap().backing.clone();
            for t in policy {
                system.unfund(&root, t).unwrap();
            }
            system
                .fund(&root, client, c, Resource::Cpu, amount, Kind::Soft)
                .unwrap();
            system.set_active(&root, pid, Resource::Cpu, true).unwrap();
        }
        system.add_process(&root, 30, 2000, None).unwrap();
        (system, BTreeMap::from([(10, 7), (20, 8), (30, 9)]))
    }

    #[test]
    fn shares_follow_rights_and_a_changed_set_or_stop_ends_the_run() {
        let (mut system, starts) = model();
        let mut engine = Engine::new(1000);
        let wanted = clients(&system, &starts, &engine).unwrap();
        // Only the daemon's user's processes.
        assert_eq!(wanted, vec![(10, 7), (20, 8)]);
        let shares = follow(
            &system,
            &starts,
            &mut engine,
            &wanted,
            &wanted,
            Some(&[true, false]),
        );
        // 250:750 of the CPU rights, quantized with the largest at 20.
        assert_eq!(shares, Some(vec![7, 20]));
        assert_eq!(engine.written(20).map(|k| k.value), Some(20));
        assert_eq!(engine.written(20).unwrap().file, KNOB);
        assert_eq!(engine.cpu_activity(10), Some(true));
        assert_eq!(engine.cpu_activity(20), Some(false));
        assert_eq!(engine.written(30), None);
        engine.idle();
        assert_eq!((engine.written(10), engine.cpu_activity(10)), (None, None));

        // Another set (a start time that is another process's): the run ends.
        let reused = BTreeMap::from([(10, 7), (20, 99), (30, 9)]);
        assert_eq!(
            follow(&system, &reused, &mut engine, &wanted, &wanted, None),
            None
        );
        system.exit(&Caller::root(), 10).unwrap();
        assert_eq!(
            follow(&system, &starts, &mut engine, &wanted, &wanted, None),
            None
        );
        engine.stop();
        assert_eq!(clients(&system, &starts, &engine), None);
    }

    #[test]
    fn a_detach_is_caught_up_with_once_the_engine_looks_again() {
        let mut engine = Engine::new(1000);
        let change = engine.changed();
        assert!(!engine.caught_up(change));
        engine.seen = engine.changes;
        assert!(engine.caught_up(change));
        let next = engine.changed();
        assert!(!engine.caught_up(next));
    }
}
