//! The default policy (spec tickets.md §2.7, the report's §5.2): one currency per user, funded
//! equally from the base on the user's first sight; an equal issue of it to each of the user's
//! processes; children funded by whoever funds their parent; and re-funding on a change of uid.
//!
//! Process events are facts the daemon observes (a fork, an exit, a setuid, a process becoming
//! runnable), so only root, the daemon itself, reports them.

use serde::{Deserialize, Serialize};

use super::{Done, TicketSystem, TransferId};
use crate::tickets::error::{Result, TicketsError};
use crate::tickets::types::{
    Broker, Caller, CurrencyId, CurrencyKind, Kind, Mode, OfferId, PerResource, PrincipalId,
    Resource, TicketId,
};

/// The default policy's amounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Base tickets funding each user currency, per resource (`[cpu, mem, disk]`); 0 gives none.
    /// Memory is 0 by default: memory tickets go only to clients that ask (§2.3).
    pub user_funding: PerResource<i64>,
    /// The tickets each process gets from the currency that funds it.
    pub process_issue: i64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            user_funding: PerResource([1000, 0, 1000]),
            process_issue: 100,
        }
    }
}

impl Policy {
    /// Refuses amounts the model would refuse later, at the first user or process.
    pub fn validate(&self) -> Result<()> {
        if let Some((r, n)) = self.user_funding.iter().find(|(_, n)| **n < 0) {
            return Err(TicketsError::BadPolicy {
                field: "user_funding",
                why: format!("gives {n} of {r}: amounts must be 0 (none) or positive"),
            });
        }
        if self.process_issue <= 0 {
            return Err(TicketsError::BadPolicy {
                field: "process_issue",
                why: format!("is {}: it must be positive", self.process_issue),
            });
        }
        Ok(())
    }
}

/// A user's currency and the base tickets the policy funded it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCurrency {
    pub uid: u32,
    pub currency: CurrencyId,
    /// The base ticket funding it for each resource; nice takes from it and returns to it. It may
    /// since have been revoked by root (then nice has nothing to take).
    pub funding: PerResource<Option<TicketId>>,
}

/// A process the daemon reported, and its client currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub uid: u32,
    pub currency: CurrencyId,
}

/// The broker of the policy's currencies for `uid`: `fci/---/---` (§2.6), so the user can
/// reweight and build subcurrencies but not raise their own funding. The group is the uid's own
/// (user private groups); with this mode it grants nothing.
fn user_broker(uid: u32) -> Broker {
    Broker {
        owner: uid,
        group: uid,
        mode: Mode::OWNER_ONLY,
    }
}

impl TicketSystem {
    /// Process `pid` of `uid` appeared (root only). It gets a client currency and, for each
    /// resource, [`Policy::process_issue`] tickets: a child of a process of the same uid from the
    /// currency that issued its parent's first backing ticket (§2.7), anyone else from its user's
    /// currency (created and funded if `uid` is new).
    ///
    /// A parent funded for a resource only by exchange or transfer tickets, or straight from the
    /// base, passes nothing on for it: the child is funded by its user's currency, so that
    /// forking never mints base tickets.
    pub fn add_process(
        &mut self,
        caller: &Caller,
        pid: u32,
        uid: u32,
        parent: Option<u32>,
    ) -> Result<Done<CurrencyId>> {
        Self::daemon_only(caller, || format!("the start of process {pid}"))?;
        if let Some(p) = self.process(pid) {
            return Err(TicketsError::Structure(format!(
                "process {pid} already has currency {}: report its exit first",
                p.currency
            )));
        }
        let parent = match parent {
            Some(p) => Some(*self.process(p).ok_or(TicketsError::UnknownProcess(p))?),
            None => None,
        };
        self.transact(|s| {
            let user = s.ensure_user(uid)?;
            let client = s.model.create_currency(
                CurrencyKind::Client {
                    principal: PrincipalId(pid.into()),
                },
                &format!("pid:{pid}"),
                user_broker(uid),
            )?;
            s.processes.insert(
                pid,
                Process {
                    pid,
                    uid,
                    currency: client,
                },
            );
            for r in Resource::ALL {
                let inherited = match parent {
                    Some(p) if p.uid == uid => s.first_funder(p.currency, r)?,
                    _ => None,
                };
                if let Some(issuer) = inherited.or(s.user_funds(user, r)?) {
                    let amount = s.policy.process_issue;
                    s.model.issue(issuer, client, r, amount, Kind::Soft)?;
                }
            }
            Ok(client)
        })
    }

    /// Process `pid` exited (root only): its offers are withdrawn, its transfers (as waiter or
    /// as server) end, its exchanges are undone and its currency destroyed. A nice currency left
    /// without clients returns its funding ([`Done::returned`]).
    pub fn exit(&mut self, caller: &Caller, pid: u32) -> Result<Done<Exit>> {
        Self::daemon_only(caller, || format!("the exit of process {pid}"))?;
        let process = *self.process(pid).ok_or(TicketsError::UnknownProcess(pid))?;
        self.transact(|s| {
            let withdrawn = s.dealer.withdraw_client(process.currency);
            let ended: Vec<_> = s
                .transfers
                .values()
                .filter(|x| x.waiter == pid || x.server == pid)
                .map(|x| x.id)
                .collect();
            for x in &ended {
                s.finish_transfer(*x)?;
            }
            s.model.destroy(process.currency)?;
            s.processes.remove(&pid);
            Ok(Exit { withdrawn, ended })
        })
    }

    /// Process `pid` changed its uid (root only): its funding is revoked and replaced by
    /// [`Policy::process_issue`] tickets of the new user's currency, placed at the head of its
    /// backing list so that its children are funded by the new user too (§2.7), and the new user
    /// owns its currency. Exchange tickets and transfers it holds stay.
    pub fn setuid(&mut self, caller: &Caller, pid: u32, uid: u32) -> Result<Done<()>> {
        Self::daemon_only(caller, || format!("the change of uid of process {pid}"))?;
        let process = *self.process(pid).ok_or(TicketsError::UnknownProcess(pid))?;
        if process.uid == uid {
            return self.in_place(|_| Ok(()));
        }
        self.transact(|s| {
            let user = s.ensure_user(uid)?;
            let client = process.currency;
            for t in s.ordinary_backing(client, None)? {
                s.model.revoke(t)?;
            }
            for r in Resource::ALL {
                if let Some(issuer) = s.user_funds(user, r)? {
                    let t = s
                        .model
                        .issue(issuer, client, r, s.policy.process_issue, Kind::Soft)?;
                    s.model.put_first(t)?;
                }
            }
            s.model.set_broker(client, user_broker(uid))?;
            s.processes.insert(pid, Process { uid, ..process });
            Ok(())
        })
    }

    /// Whether process `pid` competes for `r` (root only): runnable for CPU, a request
    /// outstanding for disk, memory tickets requested for memory (§2.3).
    pub fn set_active(
        &mut self,
        caller: &Caller,
        pid: u32,
        r: Resource,
        competing: bool,
    ) -> Result<Done<()>> {
        Self::daemon_only(caller, || format!("the activity of process {pid}"))?;
        let client = self
            .process(pid)
            .ok_or(TicketsError::UnknownProcess(pid))?
            .currency;
        self.in_place(|s| s.model.set_active(client, r, competing))
    }

    /// `uid`'s currency, created and funded from the base on first sight.
    fn ensure_user(&mut self, uid: u32) -> Result<CurrencyId> {
        if let Some(u) = self.users.get(&uid) {
            return Ok(u.currency);
        }
        let currency = self.model.create_currency(
            CurrencyKind::Pure,
            &format!("user:{uid}"),
            user_broker(uid),
        )?;
        let mut funding = PerResource::default();
        for (r, amount) in self.policy.user_funding.iter() {
            if *amount > 0 {
                let t = self
                    .model
                    .issue(CurrencyId::BASE, currency, r, *amount, Kind::Soft)?;
                funding[r] = Some(t);
            }
        }
        self.users.insert(
            uid,
            UserCurrency {
                uid,
                currency,
                funding,
            },
        );
        Ok(currency)
    }

    /// The user currency, if it is funded for `r` (else it has nothing to give).
    fn user_funds(&self, user: CurrencyId, r: Resource) -> Result<Option<CurrencyId>> {
        for t in &self.model.currency(user)?.backing {
            if self.model.ticket(*t)?.resource == r {
                return Ok(Some(user));
            }
        }
        Ok(None)
    }

    /// The currency that issued `c`'s first ordinary backing ticket for `r`, unless the base.
    fn first_funder(&self, c: CurrencyId, r: Resource) -> Result<Option<CurrencyId>> {
        let Some(t) = self.ordinary_backing(c, Some(r))?.first().copied() else {
            return Ok(None);
        };
        let issuer = self.named_for(self.model.ticket(t)?.issuer);
        Ok((issuer != CurrencyId::BASE).then_some(issuer))
    }
}

/// What an exit ended besides the process's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// Its queued offers, withdrawn from the dealer.
    pub withdrawn: Vec<OfferId>,
    /// The transfers it took part in, as waiter or as server.
    pub ended: Vec<TransferId>,
}
