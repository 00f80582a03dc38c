//! The tickets model in the daemon (spec tickets.md §6 "Live reconfiguration"): one
//! [`TicketSystem`] behind its own mutex (tickets requests never hold up the run turn), loaded and
//! validated at start, saved atomically after every change, and served over the socket.
//!
//! * Who asks is the socket's peer: its uid from SO_PEERCRED, its groups from
//!   `/proc/PEERPID/status`; the model's brokers decide the rest, and a refusal names the missing
//!   permission.
//! * Facts about processes (they start, exit, change uid, compete) are the daemon's to report, as
//!   the model's superuser. Before answering, the daemon brings them up to date from `/proc` for
//!   the attached processes: exits (a reused pid is told apart by its start time), changes of uid,
//!   and activity (cpu: a thread runnable; disk: a thread in uninterruptible I/O wait; mem: holds
//!   memory tickets), so that `R` and the shares it reports are those of the moment.
//! * The state file is taken (locked) by the first daemon that changes it, so two daemons never
//!   overwrite each other's tickets; reading it needs no lock. Without one, the model starts
//!   from `--tickets-setup FILE` ([`super::tickets_setup`]) or with the base alone.
//! * Enforcement: a root daemon applies the rights as cgroup knobs, one cgroup per attached
//!   client ([`super::tickets_knobs`]), kept in line with the model after every request and on
//!   a tick ([`Tickets::tick`], every [`TICK`]) that re-reads activity from `/proc`, so the
//!   weights follow which clients compete. An unprivileged daemon applies the CPU rights of its
//!   clients with the share engine ([`super::tickets_alps`], in its own thread, which reads the
//!   model through [`Tickets::with_engine`]); the tick then keeps exits and activity current,
//!   the activity of a client under the engine being the engine's view of it. With
//!   `--no-tickets-enforce` the model is served without being applied, and `show`/`explain` say
//!   so.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use tact_core::tickets::dealer::{Offer, QueuedOffer};
use tact_core::tickets::system::{OfferReply, Policy};
use tact_core::tickets::{
    Broker, Caller, CurrencyId, CurrencyKind, Hop, Kind, Mode, Model, PerResource, Resource,
    TicketId, TicketSystem, TicketsError, DEFAULT_HARD_TOTAL,
};
use tact_core::tickets::{ExchangeId, OfferId};
use tact_linux::ProcReader;
use tact_proto::tickets::{
    Amount, Changed, ClientView, CurrencyView, ExchangeView, Explain, HopView, OfferResult,
    OfferView, Offers, PathView, ResourceExplanation, Rights, Show, TicketView, TicketsRequest,
};
use tact_proto::{ok_line, ErrorCode};

use super::permission::{may_register, Refusal};
use super::registry::Peer;
use super::tickets_alps::{Engine, PATIENCE as ENGINE_PATIENCE};
use super::tickets_knobs::Knobs;
use super::tickets_usage::Usage;
use crate::tickets::show::path_line;

/// The state file's format; a file of another format is refused, not misread.
const FORMAT: u32 = 1;

/// How often the daemon re-reads its clients' activity to rewrite their weights when it
/// enforces (spec §4: the flat layout polls at most every 100 ms), and the share engine
/// retunes.
pub const TICK: Duration = Duration::from_millis(100);

/// The daemon's tickets.
pub struct Tickets {
    state: Mutex<State>,
    /// Signalled whenever the share engine has looked at the model: a detach waits on it.
    engine_looked: Condvar,
    path: PathBuf,
    procs: ProcReader,
}

struct State {
    system: TicketSystem,
    /// pid → start time of each attached process: a pid reused by another process is not it.
    starts: BTreeMap<u32, u64>,
    /// The lock on `<state file>.lock`, taken at the first change and held until exit.
    lock: Option<Flock<File>>,
    knobs: Knobs,
    /// The clients' recent CPU time and I/O, for `explain`'s measured shares.
    usage: Usage,
}

/// The state file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    format: u32,
    system: TicketSystem,
    starts: BTreeMap<u32, u64>,
}

/// [`Saved`], borrowed for writing.
#[derive(Serialize)]
struct SavedRef<'a> {
    format: u32,
    system: &'a TicketSystem,
    starts: &'a BTreeMap<u32, u64>,
}

/// Where the tickets are kept unless `--tickets-state` says: `/var/lib/tact/tickets.json` for
/// root's daemon, `$XDG_STATE_HOME/tact/tickets.json` for a user's.
pub fn default_path(root: bool) -> PathBuf {
    if root {
        PathBuf::from("/var/lib/tact/tickets.json")
    } else {
        crate::paths::state_dir().join("tickets.json")
    }
}

impl Tickets {
    /// The tickets saved at `path`, checked; else `initial` (the daemon's `--tickets-setup`),
    /// else a fresh model. A file that cannot be read or fails the model's validation is an
    /// error: the daemon must not start on a state it would misrepresent (or silently replace).
    /// `knobs` applies the model from now on.
    pub fn load(path: PathBuf, initial: Option<TicketSystem>, knobs: Knobs) -> Result<Tickets> {
        let (system, starts) = match (read(&path)?, initial) {
            (Some(saved), _) => (saved.system, saved.starts),
            (None, Some(system)) => (system, BTreeMap::new()),
            (None, None) => (fresh(None)?, BTreeMap::new()),
        };
        let tickets = Tickets {
            state: Mutex::new(State {
                system,
                starts,
                lock: None,
                knobs,
                usage: Usage::default(),
            }),
            engine_looked: Condvar::new(),
            path,
            procs: ProcReader::new(),
        };
        // Clients of a persisted state get their cgroups back at once.
        tickets.tick();
        Ok(tickets)
    }

    /// Whether the daemon may apply the model (and so needs its [`Tickets::tick`]).
    pub fn enforcing(&self) -> bool {
        !matches!(self.lock().knobs, Knobs::Off(_))
    }

    /// Runs `f` on the model, the attached processes' start times and the share engine's state,
    /// under the tickets mutex (so briefly); `None` unless the share engine enforces the model.
    pub fn with_engine<T>(
        &self,
        f: impl FnOnce(&TicketSystem, &BTreeMap<u32, u64>, &mut Engine) -> T,
    ) -> Option<T> {
        let mut state = self.lock();
        let state = &mut *state;
        let done = match &mut state.knobs {
            Knobs::Alps(engine) => Some(f(&state.system, &state.starts, engine)),
            _ => None,
        };
        self.engine_looked.notify_all();
        done
    }

    /// What `show` says of enforcement, for the daemon's start message.
    pub fn enforcement(&self) -> (bool, String) {
        self.lock().knobs.describe()
    }

    /// The periodic refresh: re-reads activity, exits and uid changes from `/proc`, and rewrites
    /// the knobs that follow. A structural change is saved when this daemon owns the state file
    /// (else at the next request).
    pub fn tick(&self) {
        let mut state = self.lock();
        let structural = self.refresh(&mut state, wall_clock());
        if structural && state.lock.is_some() {
            if let Err(e) = self.save(&state) {
                tracing::warn!("{e:#}");
            }
        }
        let state = &mut *state;
        state.knobs.sync(&state.system, &state.starts);
    }

    /// At the daemon's exit: every client back where it came from, the cgroups removed; the
    /// share engine told to resume everyone (its thread does, see [`super::tickets_alps`]).
    pub fn shutdown(&self) {
        self.lock().knobs.shutdown();
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A poisoned lock (a bug in a thread) is taken as it is: every operation is all-or-nothing,
    /// so the state is whole.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers one tickets request of `peer`.
    pub fn handle(&self, request: TicketsRequest, peer: Peer) -> Result<Vec<u8>, Refusal> {
        let caller = caller_of(&self.procs, peer)?;
        let op = request.op();
        let changes = request.changes();
        let detach = matches!(request, TicketsRequest::Detach { .. });
        let mut state = self.lock();
        if changes {
            self.take(&mut state)?;
        }
        let now = wall_clock();
        let refreshed = self.refresh(&mut state, now);
        // What show and explain report is what the machine holds for the activity just read.
        let inner = &mut *state;
        inner.knobs.sync(&inner.system, &inner.starts);
        let backup = changes.then(|| (state.system.clone(), state.starts.clone()));
        let result = self.apply(&mut state, &caller, peer, request, now);
        let result = match result {
            Ok(reply) if changes || refreshed => match self.save(&state) {
                Ok(()) => Ok(reply),
                Err(e) => Err(Refusal::new(
                    ErrorCode::Refused,
                    format!("cannot save the tickets state, so nothing was changed: {e:#}"),
                )),
            },
            other => other,
        };
        if result.is_err() {
            // Multi-step operations (attach with explicit funding) and failed saves leave
            // nothing behind.
            if let Some((system, starts)) = backup {
                state.system = system;
                state.starts = starts;
            }
        } else if changes {
            let inner = &mut *state;
            inner.knobs.sync(&inner.system, &inner.starts);
        }
        // A detached process is the share engine's until its run ends: the reply waits for
        // that, so that a process is running again when its detach returns.
        let change = match &mut state.knobs {
            Knobs::Alps(engine) if detach && result.is_ok() => Some(engine.changed()),
            _ => None,
        };
        if let Some(change) = change {
            let waited = self.engine_looked.wait_timeout_while(
                state,
                ENGINE_PATIENCE,
                |s| matches!(&s.knobs, Knobs::Alps(e) if !e.caught_up(change)),
            );
            drop(waited);
        }
        result.map_err(|r| Refusal::new(r.code, format!("{op}: {}", r.message)))
    }

    fn apply(
        &self,
        state: &mut State,
        caller: &Caller,
        peer: Peer,
        request: TicketsRequest,
        now: Duration,
    ) -> Result<Vec<u8>, Refusal> {
        let refuse = |system: &TicketSystem, e: TicketsError| refusal(system.model(), e);
        match request {
            TicketsRequest::Create {
                name,
                owner,
                group,
                mode,
            } => {
                let broker = Broker {
                    owner: owner.unwrap_or(caller.uid),
                    group: group.unwrap_or(caller.gids[0]),
                    mode: mode.unwrap_or(Mode::OWNER_ONLY),
                };
                let done = state.system.create_currency(caller, &name, broker);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                Ok(ok_line(&Changed {
                    currency: Some(name),
                    undone: undone_ids(&done.undone),
                    ..Changed::default()
                }))
            }
            TicketsRequest::Destroy { currency } => {
                let c = resolve(&state.system, "currency", &currency)?;
                let done = state.system.destroy(caller, c);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                Ok(changed(&done.undone))
            }
            TicketsRequest::Fund {
                holder,
                issuer,
                resource,
                amount,
                hard,
            } => {
                let h = resolve(&state.system, "holder", &holder)?;
                let i = resolve(&state.system, "issuer", &issuer)?;
                let kind = if hard { Kind::Hard } else { Kind::Soft };
                let done = state.system.fund(caller, h, i, resource, amount, kind);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                Ok(ok_line(&Changed {
                    tickets: vec![done.value.0],
                    undone: undone_ids(&done.undone),
                    ..Changed::default()
                }))
            }
            TicketsRequest::Unfund { ticket } => {
                let done = state.system.unfund(caller, TicketId(ticket));
                let done = done.map_err(|e| refuse(&state.system, e))?;
                Ok(changed(&done.undone))
            }
            TicketsRequest::Set { ticket, amount } => {
                let done = state.system.set_amount(caller, TicketId(ticket), amount);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                Ok(changed(&done.undone))
            }
            TicketsRequest::Show { currency } => {
                let only = match currency {
                    Some(name) => Some(resolve(&state.system, "currency", &name)?),
                    None => None,
                };
                Ok(ok_line(&show(&state.system, &state.knobs, only)))
            }
            TicketsRequest::Attach { pid, from, amounts } => {
                self.attach(state, caller, peer, pid, from, amounts)
            }
            TicketsRequest::Detach { pid } => {
                let process = process(&state.system, pid)?;
                if !caller.is_root() && caller.uid != process.uid {
                    return Err(Refusal::new(
                        ErrorCode::Permission,
                        format!(
                            "pid: process {pid} belongs to uid {}, not to you (uid {}); \
                             detaching another user's process needs root",
                            process.uid, caller.uid
                        ),
                    ));
                }
                let done = state.system.exit(&Caller::root(), process.pid);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                state.starts.remove(&process.pid);
                Ok(changed(&done.undone))
            }
            TicketsRequest::Offer {
                pid,
                give,
                want,
                expires_ms,
            } => {
                let client = process(&state.system, pid)?.currency;
                let offer = Offer {
                    client,
                    give: (give.resource, give.amount),
                    want: (want.resource, want.amount),
                    expires: expires_ms.map(|ms| now + Duration::from_millis(ms)),
                };
                let done = state.system.offer(caller, offer, now);
                let done = done.map_err(|e| refuse(&state.system, e))?;
                let model = state.system.model();
                let reply = match done.value {
                    OfferReply::Exchanged {
                        offer,
                        matched,
                        exchange,
                    } => OfferResult::Exchanged {
                        offer: offer.0,
                        matched: matched.0,
                        exchange: exchange.0,
                    },
                    OfferReply::Queued { id, conflicts } => OfferResult::Queued {
                        offer: id.0,
                        conflicts: conflicts
                            .iter()
                            .filter_map(|o| state.system.dealer().get(*o))
                            .map(|q| offer_view(model, q, now))
                            .collect(),
                    },
                    OfferReply::Refused {
                        offer,
                        matched,
                        why,
                    } => OfferResult::Refused {
                        offer: offer.0,
                        matched: matched.0,
                        why: with_names(model, &why.to_string()),
                    },
                };
                Ok(ok_line(&reply))
            }
            TicketsRequest::Offers => {
                let model = state.system.model();
                Ok(ok_line(&Offers {
                    offers: state
                        .system
                        .dealer()
                        .offers()
                        .iter()
                        .map(|q| offer_view(model, q, now))
                        .collect(),
                    exchanges: model
                        .exchanges()
                        .map(|x| ExchangeView {
                            id: x.id.0,
                            a: name(model, x.a),
                            give: amount(x.give),
                            b: name(model, x.b),
                            get: amount(x.get),
                            tickets: x.tickets.iter().map(|t| t.0).collect(),
                        })
                        .collect(),
                }))
            }
            TicketsRequest::Cancel { offer, exchange } => {
                let undone = match (offer, exchange) {
                    (Some(o), _) => {
                        let done = state.system.cancel_offer(caller, OfferId(o));
                        done.map_err(|e| refuse(&state.system, e))?.undone
                    }
                    (None, Some(x)) => {
                        let done = state.system.cancel_exchange(caller, ExchangeId(x));
                        let done = done.map_err(|e| refuse(&state.system, e))?;
                        let mut undone = vec![done.value];
                        undone.extend(done.undone);
                        undone
                    }
                    (None, None) => unreachable!("the protocol requires one of the two"),
                };
                Ok(changed(&undone))
            }
            TicketsRequest::Explain { pid } => {
                let process = process(&state.system, pid)?;
                Ok(ok_line(&explain(
                    &state.system,
                    &state.knobs,
                    &state.usage,
                    process.pid,
                    process.currency,
                )))
            }
        }
    }

    /// Registers `pid` as a client: the peer must own it (or be root). The default policy funds
    /// it from its user's currency (or its parent's funder, if the parent is attached); with
    /// `from`, that funding is replaced by `amounts` of `from`'s tickets, issued as the peer
    /// (who needs f on the process's currency and i on `from`).
    fn attach(
        &self,
        state: &mut State,
        caller: &Caller,
        peer: Peer,
        pid: i32,
        from: Option<String>,
        amounts: BTreeMap<Resource, i64>,
    ) -> Result<Vec<u8>, Refusal> {
        may_register(&self.procs, peer.uid, pid)?;
        let gone = |e: tact_linux::Error| {
            Refusal::new(ErrorCode::Invalid, format!("pid: process {pid}: {e}"))
        };
        let stat = self.procs.stat(pid).map_err(gone)?;
        let uid = self.procs.uid(pid).map_err(gone)?;
        let from = match from {
            Some(name) => Some(resolve(&state.system, "from", &name)?),
            None => None,
        };
        let pid = pid as u32;
        let parent = u32::try_from(stat.ppid)
            .ok()
            .filter(|p| state.system.process(*p).is_some());
        let root = Caller::root();
        let system = &mut state.system;
        let refuse = |system: &TicketSystem, e| refusal(system.model(), e);
        let done = system.add_process(&root, pid, uid, parent);
        let client = done.map_err(|e| refuse(system, e))?.value;
        if let Some(from) = from {
            let policy: Vec<TicketId> = system
                .model()
                .currency(client)
                .map_or_else(|_| Vec::new(), |c| c.backing.clone());
            for t in policy {
                system.unfund(&root, t).map_err(|e| refuse(system, e))?;
            }
            for (r, amount) in &amounts {
                let done = system.fund(caller, client, from, *r, *amount, Kind::Soft);
                done.map_err(|e| refuse(system, e))?;
            }
        }
        state.starts.insert(pid, stat.start_time);
        let backing = state
            .system
            .model()
            .currency(client)
            .map_or_else(|_| Vec::new(), |c| c.backing.iter().map(|t| t.0).collect());
        Ok(ok_line(&Changed {
            tickets: backing,
            currency: Some(name(state.system.model(), client)),
            undone: Vec::new(),
        }))
    }

    /// Brings the attached processes' facts up to date from `/proc`, and drops expired offers.
    /// Returns whether anything but activity changed (then the state is saved).
    fn refresh(&self, state: &mut State, now: Duration) -> bool {
        let root = Caller::root();
        let mut structural = false;
        let processes: Vec<_> = state.system.processes().copied().collect();
        for p in processes {
            let pid = p.pid as i32;
            let alive = self
                .procs
                .stat(pid)
                .ok()
                .filter(|s| !s.is_dead() && state.starts.get(&p.pid) == Some(&s.start_time));
            let Some(stat) = alive else {
                match state.system.exit(&root, p.pid) {
                    Ok(_) => structural = true,
                    Err(e) => tracing::warn!("cannot record the exit of process {pid}: {e}"),
                }
                state.starts.remove(&p.pid);
                continue;
            };
            if let Ok(uid) = self.procs.uid(pid) {
                if uid != p.uid {
                    match state.system.setuid(&root, p.pid, uid) {
                        Ok(_) => structural = true,
                        Err(e) => tracing::warn!("cannot re-fund process {pid} for uid {uid}: {e}"),
                    }
                }
            }
            // One listing of its threads gives both their CPU time (the measured share) and
            // their states (the activity below).
            let threads = self.procs.threads_now(pid);
            if let (Ok(now), Ok(io)) = (&threads, self.procs.io(pid)) {
                let io_bytes = io.read_bytes + io.write_bytes;
                state
                    .usage
                    .record(p.pid, Instant::now(), now.cpu_ns, io_bytes);
            }
            let threads = threads.map_or_else(|_| vec![stat.state], |now| now.states);
            let model = state.system.model();
            let Ok(currency) = model.currency(p.currency) else {
                continue;
            };
            let holds_mem = currency
                .backing
                .iter()
                .any(|t| model.ticket(*t).is_ok_and(|t| t.resource == Resource::Mem));
            let cpu = state
                .knobs
                .cpu_activity(p.pid)
                .unwrap_or_else(|| threads.contains(&'R'));
            let competing = PerResource([cpu, holds_mem, threads.contains(&'D')]);
            let was = currency.competing;
            for r in Resource::ALL
                .into_iter()
                .filter(|r| was[*r] != competing[*r])
            {
                match state.system.set_active(&root, p.pid, r, competing[r]) {
                    Ok(done) => structural |= !done.undone.is_empty(),
                    Err(e) => tracing::warn!("cannot record the activity of process {pid}: {e}"),
                }
            }
        }
        let starts = &state.starts;
        state.usage.retain(|pid| starts.contains_key(&pid));
        match state.system.expire_offers(&root, now) {
            Ok(done) => structural |= !done.value.is_empty(),
            Err(e) => tracing::warn!("cannot expire offers: {e}"),
        }
        structural
    }

    /// Takes the state file for this daemon before its first change, and reads it again: another
    /// daemon may have changed it since this one loaded it.
    fn take(&self, state: &mut State) -> Result<(), Refusal> {
        if state.lock.is_some() {
            return Ok(());
        }
        let fail = |e: anyhow::Error| Refusal::new(ErrorCode::Refused, format!("{e:#}"));
        create_dir(&self.path).map_err(fail)?;
        let lock_path = suffixed(&self.path, ".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))
            .map_err(fail)?;
        let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(Refusal::new(
                    ErrorCode::Busy,
                    format!(
                        "another tact daemon keeps its tickets in {}; give this one another \
                         --tickets-state",
                        self.path.display()
                    ),
                ))
            }
            Err((_, e)) => {
                return Err(fail(anyhow::anyhow!(
                    "cannot lock {}: {e}",
                    lock_path.display()
                )))
            }
        };
        if let Some(saved) = read(&self.path).map_err(fail)? {
            state.system = saved.system;
            state.starts = saved.starts;
        }
        state.lock = Some(lock);
        Ok(())
    }

    /// Writes the state to a temporary file beside the state file and renames it over it, so
    /// that a crash leaves the old state or the new one, never half of one.
    fn save(&self, state: &State) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(&SavedRef {
            format: FORMAT,
            system: &state.system,
            starts: &state.starts,
        })
        .context("cannot encode the tickets state")?;
        create_dir(&self.path)?;
        let tmp = suffixed(&self.path, ".tmp");
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &self.path)
            .with_context(|| format!("cannot replace {}", self.path.display()))
    }
}

/// The state file at `path`, validated; `None` if there is none.
fn read(path: &Path) -> Result<Option<Saved>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let saved: Saved = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "the tickets state {} is corrupt (fix it, or move it away to start afresh)",
            path.display()
        )
    })?;
    if saved.format != FORMAT {
        bail!(
            "the tickets state {} has format {}, this tact reads format {FORMAT}",
            path.display(),
            saved.format
        );
    }
    let attached: Vec<u32> = saved.system.processes().map(|p| p.pid).collect();
    if let Err(e) = saved.system.validate() {
        bail!("the tickets state {} is inconsistent: {e}", path.display());
    }
    if !attached.iter().copied().eq(saved.starts.keys().copied()) {
        bail!(
            "the tickets state {} is inconsistent: its start times do not match its processes",
            path.display()
        );
    }
    Ok(Some(saved))
}

/// A model with only the base, `H(base)` = `totals` or by default 1000 for cpu and disk and the
/// reservable memory in bytes, and the default policy. A user's own daemon serves that user
/// alone, so the user owns its base (root owns a system daemon's).
pub(super) fn fresh(totals: Option<PerResource<i64>>) -> Result<TicketSystem> {
    let totals = match totals {
        Some(t) => t,
        None => {
            let machine = crate::tickets::this_machine()?;
            PerResource([
                DEFAULT_HARD_TOTAL,
                machine.reservable_mem,
                DEFAULT_HARD_TOTAL,
            ])
        }
    };
    let mut system = TicketSystem::new(totals, Policy::default())?;
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    if !uid.is_root() {
        let broker = Broker {
            owner: uid.as_raw(),
            group: gid.as_raw(),
            mode: Mode::OWNER_ONLY,
        };
        system.set_broker(&Caller::root(), CurrencyId::BASE, broker)?;
    }
    Ok(system)
}

fn create_dir(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display())),
        _ => Ok(()),
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The time offers expire on: the wall clock, so that expiry survives a restart.
fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The peer as the model sees it: its uid (from the socket) and its groups, the primary one first
/// (from `/proc/PID/status`, which must still show that uid: the connecting process is gone if
/// its pid now belongs to someone else).
fn caller_of(procs: &ProcReader, peer: Peer) -> Result<Caller, Refusal> {
    let path = procs.root().join(peer.pid.to_string()).join("status");
    let unknown = |why: String| {
        Refusal::new(
            ErrorCode::Permission,
            format!(
                "message: cannot tell your groups ({}): {why}",
                path.display()
            ),
        )
    };
    let text = fs::read_to_string(&path).map_err(|e| unknown(e.to_string()))?;
    let field = |key: &str| -> Vec<u32> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Effective ids: those SO_PEERCRED reports.
    let (uids, gids, groups) = (field("Uid:"), field("Gid:"), field("Groups:"));
    if uids.get(1) != Some(&peer.uid) {
        return Err(unknown(format!(
            "process {} is no longer the one that connected",
            peer.pid
        )));
    }
    let primary = *gids
        .get(1)
        .ok_or_else(|| unknown("no Gid line".to_string()))?;
    let mut all = vec![primary];
    all.extend(groups.into_iter().filter(|g| *g != primary));
    Ok(Caller {
        uid: peer.uid,
        gids: all,
    })
}

/// The currency a request names: `base`, `user:UID`, `pid:PID` or a created name.
fn resolve(system: &TicketSystem, field: &str, name: &str) -> Result<CurrencyId, Refusal> {
    if name == "base" {
        return Ok(CurrencyId::BASE);
    }
    system.named(name).ok_or_else(|| {
        Refusal::new(
            ErrorCode::Refused,
            format!(
                "{field}: unknown currency {name:?} (`tact tickets show` lists them; processes \
                 are pid:PID once attached, users user:UID once seen)"
            ),
        )
    })
}

fn process(
    system: &TicketSystem,
    pid: i32,
) -> Result<tact_core::tickets::system::Process, Refusal> {
    system.process(pid as u32).copied().ok_or_else(|| {
        Refusal::new(
            ErrorCode::Refused,
            format!("pid: process {pid} is not attached (`tact tickets attach {pid}`)"),
        )
    })
}

/// A refusal of the model: `permission` when a broker (or ownership) says no, else `refused`.
/// Currency ids in the message are replaced by names.
fn refusal(model: &Model, e: TicketsError) -> Refusal {
    let code = match e {
        TicketsError::Denied { .. }
        | TicketsError::DeniedEither { .. }
        | TicketsError::NotOwner { .. }
        | TicketsError::NotIdentity { .. }
        | TicketsError::NotRoot { .. } => ErrorCode::Permission,
        _ => ErrorCode::Refused,
    };
    Refusal::new(code, with_names(model, &e.to_string()))
}

/// `text` with each currency id (`c3`) replaced by the currency's name: people know currencies
/// by name, the model's messages by id.
fn with_names(model: &Model, text: &str) -> String {
    text.split(' ')
        .map(|word| {
            let core = word.trim_end_matches([',', '.', ':', ';', ')']);
            let id = core
                .strip_prefix('c')
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|_| core.len() > 1 && !core[1..].starts_with('+'));
            match id.and_then(|n| model.currency(CurrencyId(n)).ok()) {
                Some(c) => format!("{}{}", c.name, &word[core.len()..]),
                None => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn changed(undone: &[tact_core::tickets::Exchange]) -> Vec<u8> {
    ok_line(&Changed {
        undone: undone_ids(undone),
        ..Changed::default()
    })
}

fn undone_ids(undone: &[tact_core::tickets::Exchange]) -> Vec<u64> {
    undone.iter().map(|x| x.id.0).collect()
}

fn name(model: &Model, c: CurrencyId) -> String {
    model
        .currency(c)
        .map_or_else(|_| c.to_string(), |c| c.name.clone())
}

fn amount((resource, amount): (Resource, i64)) -> Amount {
    Amount { resource, amount }
}

fn offer_view(model: &Model, q: &QueuedOffer, now: Duration) -> OfferView {
    OfferView {
        id: q.id.0,
        client: name(model, q.offer.client),
        give: amount(q.offer.give),
        want: amount(q.offer.want),
        expires_in_ms: q
            .offer
            .expires
            .map(|e| e.saturating_sub(now).as_millis() as u64),
    }
}

/// Every client's rights to `r`, as [`Rights`].
struct Standing {
    shares: BTreeMap<CurrencyId, f64>,
    guaranteed_total: f64,
}

impl Standing {
    fn of(system: &TicketSystem, r: Resource) -> Standing {
        let model = system.model();
        Standing {
            shares: model.shares(r).into_iter().collect(),
            guaranteed_total: system
                .processes()
                .filter_map(|p| model.guaranteed(p.currency, r).ok())
                .sum(),
        }
    }

    fn rights(&self, model: &Model, c: CurrencyId, r: Resource) -> Rights {
        let guaranteed = model.guaranteed(c, r).unwrap_or(0.0);
        Rights {
            competing: model.currency(c).is_ok_and(|c| c.competing[r]),
            rights: model.rights(c, r).unwrap_or(0.0),
            guaranteed,
            share: self.shares.get(&c).copied().unwrap_or(0.0),
            guaranteed_share: if self.guaranteed_total > 0.0 {
                guaranteed / self.guaranteed_total
            } else {
                0.0
            },
        }
    }
}

/// Whether a filter on currency `only` lets through what `test` checks against it. Written out:
/// `Option::is_none_or` is newer than the workspace's rust-version.
fn within(only: Option<CurrencyId>, test: impl Fn(CurrencyId) -> bool) -> bool {
    match only {
        Some(o) => test(o),
        None => true,
    }
}

fn show(system: &TicketSystem, knobs: &Knobs, only: Option<CurrencyId>) -> Show {
    let model = system.model();
    let ticket = |t: &TicketId| -> Option<TicketView> {
        let ticket = model.ticket(*t).ok()?;
        Some(TicketView {
            id: t.0,
            issuer: name(model, ticket.issuer),
            holder: name(model, ticket.holder),
            resource: ticket.resource,
            amount: ticket.amount,
            hard: ticket.kind == Kind::Hard,
            exchange: ticket.exchange.map(|x| x.0),
            active: model
                .is_active(ticket.holder, ticket.resource)
                .unwrap_or(false),
            value: model.ticket_value(*t).unwrap_or(0.0),
        })
    };
    let wanted = |c: CurrencyId| within(only, |o| o == c);
    let currencies = model
        .currencies()
        .filter(|c| wanted(c.id))
        .map(|c| CurrencyView {
            id: c.id.0,
            name: c.name.clone(),
            kind: match c.kind {
                CurrencyKind::Base => "base",
                CurrencyKind::Pure => "pure",
                CurrencyKind::Client { .. } => "client",
                CurrencyKind::SoftTix { .. } => "soft_tix",
            }
            .to_string(),
            owner: c.broker.owner,
            group: c.broker.group,
            mode: c.broker.mode.to_string(),
            value: Resource::ALL
                .into_iter()
                .map(|r| (r, model.value(c.id, r).unwrap_or(0.0)))
                .collect(),
            active: Resource::ALL
                .into_iter()
                .map(|r| (r, model.active_amount(c.id, r).unwrap_or(0)))
                .collect(),
            issued: c.issued.iter().filter_map(ticket).collect(),
            held: c.backing.iter().filter_map(ticket).collect(),
        })
        .collect();
    let standing = PerResource::from_fn(|r| Standing::of(system, r));
    let funded_by = |c: CurrencyId, o: CurrencyId| {
        model.currency(c).is_ok_and(|c| {
            c.backing
                .iter()
                .any(|t| model.ticket(*t).is_ok_and(|t| t.issuer == o))
        })
    };
    let clients = system
        .processes()
        .filter(|p| within(only, |o| o == p.currency || funded_by(p.currency, o)))
        .map(|p| ClientView {
            pid: p.pid,
            uid: p.uid,
            currency: name(model, p.currency),
            rights: Resource::ALL
                .into_iter()
                .map(|r| (r, standing[r].rights(model, p.currency, r)))
                .collect(),
            knobs: knobs.written(p.pid),
        })
        .collect();
    let (enforced, enforcement) = knobs.describe();
    Show {
        currencies,
        clients,
        enforced,
        enforcement,
    }
}

fn explain(
    system: &TicketSystem,
    knobs: &Knobs,
    usage: &Usage,
    pid: u32,
    client: CurrencyId,
) -> Explain {
    let model = system.model();
    let mut written = knobs.written(pid);
    let hop = |h: &Hop| HopView {
        ticket: h.ticket.map(|t| t.0),
        issuer: name(model, h.issuer),
        holder: name(model, h.holder),
        amount: h.amount,
        hard: h.kind == Kind::Hard,
        exchange: h.exchange.map(|x| x.0),
        active: h.active,
        issuer_active: h.issuer_active,
        issuer_value: h.issuer_value,
        factor: h.factor(),
    };
    let resources = Resource::ALL
        .into_iter()
        .filter_map(|r| model.explain_path(client, r).ok())
        .filter(|e| !e.paths.is_empty())
        .map(|e| ResourceExplanation {
            resource: e.resource,
            rights: Standing::of(system, e.resource).rights(model, client, e.resource),
            paths: e
                .paths
                .iter()
                .map(|p| PathView {
                    contribution: p.contribution(),
                    summary: path_line(model, p),
                    hops: p.hops.iter().map(hop).collect(),
                })
                .collect(),
            knob: written.remove(&e.resource),
            measured: usage.share(pid, e.resource),
        })
        .collect();
    let (enforced, enforcement) = knobs.describe();
    Explain {
        pid,
        currency: name(model, client),
        resources,
        enforced,
        enforcement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_currencies() {
        let mut model = Model::new(PerResource([1000, 1000, 1000]));
        let broker = Broker {
            owner: 0,
            group: 0,
            mode: Mode::OWNER_ONLY,
        };
        let a = model
            .create_currency(CurrencyKind::Pure, "A", broker)
            .unwrap();
        let text = format!("permission denied: fund {a} from c0 needs f (fund) on currency {a}.");
        assert_eq!(
            with_names(&model, &text),
            "permission denied: fund A from base needs f (fund) on currency A."
        );
        assert_eq!(with_names(&model, "c99 cpu c"), "c99 cpu c");
    }

    #[test]
    fn a_corrupt_or_inconsistent_state_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        assert!(read(&path).unwrap().is_none());
        fs::write(&path, "{\"format\":1,").unwrap();
        let e = format!("{:#}", read(&path).err().unwrap());
        assert!(e.contains("is corrupt"), "{e}");
        let system = TicketSystem::new(PerResource([1000, 1000, 1000]), Policy::default()).unwrap();
        let starts = BTreeMap::from([(42, 7)]);
        let text = serde_json::to_vec(&SavedRef {
            format: FORMAT,
            system: &system,
            starts: &starts,
        })
        .unwrap();
        fs::write(&path, text).unwrap();
        let e = format!("{:#}", read(&path).err().unwrap());
        assert!(e.contains("start times do not match"), "{e}");
    }
}
