//! The tickets system: the façade the daemon holds and persists (spec tickets.md §2.6–2.9).
//!
//! [`TicketSystem`] puts the [`Model`], the [`Dealer`] and the default policy behind one set of
//! operations, each taking the [`Caller`] the daemon learned from the socket's peer credentials:
//!
//! - checked operations on currencies and tickets go through [`broker::check`] and then the model
//!   (this module);
//! - the default policy: user currencies, processes, children and changes of uid (`policy.rs`);
//! - nice, which funds a job straight from the base out of its user's own base funding (`nice.rs`);
//! - transfers of a waiting process's rights to the process it waits on (`transfer.rs`);
//! - offers at the dealer, carried out as exchanges (`trade.rs`).
//!
//! Every public operation either succeeds or changes nothing: model, dealer and maps. An operation
//! that is one atomic change of the model or the dealer is applied in place; one of several steps
//! runs on a copy of the system that replaces it only on success, which costs a copy of the state
//! per such operation (process events, nice, transfers, unfund and destroy), not per query or
//! activity change. After every operation the exchanges the model reports as undoable (a
//! participant active for what it gave has a negative value for it) are undone, oldest first,
//! until none is left, and the reply names them.

mod nice;
mod policy;
mod trade;
mod transfer;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::broker::{self, Op};
use super::dealer::Dealer;
use super::error::{Result, TicketsError};
use super::exchange::Exchange;
use super::model::Model;
use super::types::{
    Broker, Caller, CurrencyId, CurrencyKind, Kind, PerResource, PrincipalId, Resource, Ticket,
    TicketId,
};

pub use nice::Nice;
pub use policy::{Exit, Policy, Process, UserCurrency};
pub use trade::OfferReply;
pub use transfer::{Transfer, TransferId};

/// The model, the dealer and the default policy's records, as the daemon holds and saves them.
///
/// A state loaded from disk must pass [`TicketSystem::validate`] before use: the operations keep
/// it consistent, but a corrupt file would otherwise panic on the first query.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TicketSystem {
    model: Model,
    dealer: Dealer,
    policy: Policy,
    /// Names given to currencies created through [`TicketSystem::create_currency`]. The policy's
    /// own currencies are named `user:UID` and `pid:PID` (see [`TicketSystem::named`]), which is
    /// why created names may not contain `:`; the model's hidden ones `soft_tix(NAME)`, which is
    /// why they may not contain `(` or `)`.
    names: BTreeMap<String, CurrencyId>,
    /// uid → the user's currency (§2.7), created on first sight and kept for good.
    users: BTreeMap<u32, UserCurrency>,
    /// pid → the process's client currency.
    processes: BTreeMap<u32, Process>,
    /// The currencies nice created, by id (§2.8).
    nices: BTreeMap<CurrencyId, Nice>,
    transfers: BTreeMap<TransferId, Transfer>,
    next_transfer: u64,
}

/// What a successful operation returns: its own result, and what it set off.
#[derive(Debug, Clone, PartialEq)]
pub struct Done<T> {
    pub value: T,
    /// The exchanges the operation undid: those of an exiting participant, and those the model
    /// then found leaving an active participant with negative rights (§2.9). Their participants
    /// should be told.
    pub undone: Vec<Exchange>,
    /// The nice currencies whose last client went, destroyed, their base funding returned to
    /// their user's currency (§2.8).
    pub returned: Vec<Nice>,
}

impl TicketSystem {
    /// A system holding only the base currency, with `H(base,r)` from `base_hard_total`.
    pub fn new(base_hard_total: PerResource<i64>, policy: Policy) -> Result<TicketSystem> {
        policy.validate()?;
        Ok(TicketSystem {
            model: Model::new(base_hard_total),
            dealer: Dealer::new(),
            policy,
            names: BTreeMap::new(),
            users: BTreeMap::new(),
            processes: BTreeMap::new(),
            nices: BTreeMap::new(),
            transfers: BTreeMap::new(),
            next_transfer: 0,
        })
    }

    /// Checks a loaded state: the policy, the model's links ([`Model::validate`]), and that every
    /// record of users, processes, nice currencies, transfers and names points at what it says.
    pub fn validate(&self) -> Result<()> {
        self.policy.validate()?;
        self.model.validate()?;
        let bad = |what: String| Err(TicketsError::Structure(format!("corrupt state: {what}")));
        let kind = |c: CurrencyId| self.model.currency(c).ok().map(|c| c.kind);
        for (uid, u) in &self.users {
            if *uid != u.uid || kind(u.currency) != Some(CurrencyKind::Pure) {
                return bad(format!("uid {uid}'s user currency {} is amiss", u.currency));
            }
        }
        for (pid, p) in &self.processes {
            let principal = PrincipalId((*pid).into());
            if *pid != p.pid || kind(p.currency) != Some(CurrencyKind::Client { principal }) {
                return bad(format!("process {pid}'s currency {} is amiss", p.currency));
            }
        }
        for (c, n) in &self.nices {
            if *c != n.currency
                || kind(*c) != Some(CurrencyKind::Pure)
                || self.user(n.uid).is_none()
            {
                return bad(format!("nice currency {c} is amiss"));
            }
        }
        for (id, x) in &self.transfers {
            let ticket = self.model.ticket(x.ticket).ok();
            let ends = ticket.map(|t| (self.named_for(t.issuer), t.holder));
            let want = self.process(x.waiter).zip(self.process(x.server));
            if *id != x.id
                || id.0 >= self.next_transfer
                || ends != want.map(|(w, s)| (w.currency, s.currency))
            {
                return bad(format!("transfer {id} does not match its ticket"));
            }
        }
        if let Some((name, c)) = self.names.iter().find(|(_, c)| kind(**c).is_none()) {
            return bad(format!("name {name:?} names the missing currency {c}"));
        }
        Ok(())
    }

    /// The model, for valuations, explanations and compilation.
    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn dealer(&self) -> &Dealer {
        &self.dealer
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The currency a client names: `user:UID`, `pid:PID`, or a name given at creation.
    pub fn named(&self, name: &str) -> Option<CurrencyId> {
        if let Some(uid) = name.strip_prefix("user:") {
            uid.parse()
                .ok()
                .and_then(|u| self.user(u))
                .map(|u| u.currency)
        } else if let Some(pid) = name.strip_prefix("pid:") {
            pid.parse()
                .ok()
                .and_then(|p| self.process(p))
                .map(|p| p.currency)
        } else {
            self.names.get(name).copied()
        }
    }

    pub fn user(&self, uid: u32) -> Option<&UserCurrency> {
        self.users.get(&uid)
    }

    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.processes.get(&pid)
    }

    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.processes.values()
    }

    pub fn nices(&self) -> impl Iterator<Item = &Nice> {
        self.nices.values()
    }

    pub fn transfers(&self) -> impl Iterator<Item = &Transfer> {
        self.transfers.values()
    }

    /// Creates a pure currency owned by `broker.owner` and `broker.group`, which the caller must
    /// be (§2.6). The name must be new, non-empty, and free of `:` and whitespace.
    pub fn create_currency(
        &mut self,
        caller: &Caller,
        name: &str,
        broker: Broker,
    ) -> Result<Done<CurrencyId>> {
        self.check(
            &Op::CreateCurrency {
                uid: broker.owner,
                gid: broker.group,
            },
            caller,
        )?;
        self.check_name(name)?;
        self.in_place(|s| {
            let c = s.model.create_currency(CurrencyKind::Pure, name, broker)?;
            s.names.insert(name.to_string(), c);
            Ok(c)
        })
    }

    /// Destroys a pure currency (c on it). The policy's own currencies go with what they stand
    /// for: a process's when it exits, a nice currency when its last client does, and a user's
    /// never.
    pub fn destroy(&mut self, caller: &Caller, c: CurrencyId) -> Result<Done<()>> {
        self.check(&Op::Destroy(c), caller)?;
        if let Some(what) = self.managed(c) {
            return Err(TicketsError::Structure(format!(
                "{c} is {what}, which the default policy manages and cannot be destroyed"
            )));
        }
        self.transact(|s| {
            s.model.destroy(c)?;
            s.names.retain(|_, named| *named != c);
            Ok(())
        })
    }

    /// Funds `holder` with `amount` of `issuer`'s tickets for `r`: f on the holder and i on the
    /// issuer, and no cycle (§2.6).
    pub fn fund(
        &mut self,
        caller: &Caller,
        holder: CurrencyId,
        issuer: CurrencyId,
        r: Resource,
        amount: i64,
        kind: Kind,
    ) -> Result<Done<TicketId>> {
        self.check(&Op::Fund { holder, issuer }, caller)?;
        if issuer == CurrencyId::BASE {
            if let Some(n) = self.nices.get(&holder) {
                return Err(TicketsError::Structure(format!(
                    "{holder} is a nice currency: its base funding is the {} of {} that uid {} \
                     lent it, and changes only with a new nice",
                    n.amount, n.resource, n.uid
                )));
            }
        }
        self.in_place(|s| s.model.issue(issuer, holder, r, amount, kind))
    }

    /// Takes a ticket away from its holder: c on the holder or i on the issuer (§2.6), so this is
    /// also how an issuer revokes. Taking one ticket of an exchange undoes the exchange.
    pub fn unfund(&mut self, caller: &Caller, t: TicketId) -> Result<Done<()>> {
        let ticket = *self.model.ticket(t)?;
        let op = Op::Unfund {
            holder: self.named_for(ticket.holder),
            issuer: self.named_for(ticket.issuer),
        };
        self.check(&op, caller)?;
        self.protect(&ticket)?;
        self.transact(|s| s.model.revoke(t))
    }

    /// Resizes a ticket: i on its issuer (§2.6).
    pub fn set_amount(&mut self, caller: &Caller, t: TicketId, amount: i64) -> Result<Done<()>> {
        let ticket = *self.model.ticket(t)?;
        self.check(&Op::Issue(self.named_for(ticket.issuer)), caller)?;
        self.protect(&ticket)?;
        self.in_place(|s| s.model.set_amount(t, amount))
    }

    /// Replaces a currency's broker, as chown/chgrp/chmod would: its owner (or root) may change
    /// the mode and the group to one of their own.
    pub fn set_broker(&mut self, caller: &Caller, c: CurrencyId, to: Broker) -> Result<Done<()>> {
        self.check(&Op::SetBroker { currency: c, to }, caller)?;
        self.in_place(|s| s.model.set_broker(c, to))
    }

    /// The broker table's verdict on `op` (§2.6).
    fn check(&self, op: &Op, caller: &Caller) -> Result<()> {
        broker::check(op, caller, |c| {
            self.model.currency(c).ok().map(|currency| currency.broker)
        })
    }

    /// Process events and the dealer's clock are the daemon's to report.
    fn daemon_only(caller: &Caller, what: impl FnOnce() -> String) -> Result<()> {
        if caller.is_root() {
            Ok(())
        } else {
            Err(TicketsError::NotRoot { what: what() })
        }
    }

    /// The currency a caller names for `c`: a hidden `soft_tix` acts for its owner.
    fn named_for(&self, c: CurrencyId) -> CurrencyId {
        match self.model.currency(c).map(|c| c.kind) {
            Ok(CurrencyKind::SoftTix { of }) => of,
            _ => c,
        }
    }

    fn check_name(&self, name: &str) -> Result<()> {
        let why = if name.is_empty() {
            Some("a currency needs a name")
        } else if name.contains(':') || name.contains(char::is_whitespace) {
            Some("names may not contain ':' (kept for user:UID and pid:PID) or whitespace")
        } else if name.contains(['(', ')']) {
            Some(crate::tickets::PARENS_RESERVED)
        } else if name.contains(char::is_control) {
            Some("names may not contain control characters")
        } else if self.names.contains_key(name) {
            Some("another currency has this name")
        } else {
            None
        };
        match why {
            Some(why) => Err(TicketsError::Name {
                name: name.to_string(),
                why,
            }),
            None => Ok(()),
        }
    }

    /// What the default policy uses `c` for, if anything.
    fn managed(&self, c: CurrencyId) -> Option<String> {
        if let Some(u) = self.users.values().find(|u| u.currency == c) {
            return Some(format!("the user currency of uid {}", u.uid));
        }
        if let Some(p) = self.processes.values().find(|p| p.currency == c) {
            return Some(format!(
                "the currency of process {}, which goes when it exits",
                p.pid
            ));
        }
        self.nices.get(&c).map(|n| {
            format!(
                "the nice currency of process {}, which goes when its last client exits",
                n.job
            )
        })
    }

    /// Refuses direct changes to the tickets the system keeps for itself: a transfer's, which
    /// its end revokes, and a nice currency's base funding, which returns to its user.
    fn protect(&self, ticket: &Ticket) -> Result<()> {
        if let Some(x) = self.transfers.values().find(|x| x.ticket == ticket.id) {
            return Err(TicketsError::Structure(format!(
                "{} carries transfer {} from process {} to process {}: end the transfer instead",
                ticket.id, x.id, x.waiter, x.server
            )));
        }
        if let Some(n) = self.nices.get(&ticket.holder) {
            if self.named_for(ticket.issuer) == CurrencyId::BASE && ticket.exchange.is_none() {
                return Err(TicketsError::Structure(format!(
                    "{} is the base funding uid {} lent to nice currency {}; it returns when the \
                     job's last process exits",
                    ticket.id, n.uid, n.currency
                )));
            }
        }
        Ok(())
    }

    /// Applies `f`, which must make at most one change to the model or the dealer and none when
    /// it fails, then undoes what exchanges that leaves negative.
    fn in_place<T>(&mut self, f: impl FnOnce(&mut TicketSystem) -> Result<T>) -> Result<Done<T>> {
        let value = f(self)?;
        let undone = self.settle();
        Ok(Done {
            value,
            undone,
            returned: Vec::new(),
        })
    }

    /// Applies `f`, of any number of steps, to a copy that replaces `self` only if `f`, the
    /// return of nice currencies left without clients and the undoing of exchanges all succeed.
    fn transact<T>(&mut self, f: impl FnOnce(&mut TicketSystem) -> Result<T>) -> Result<Done<T>> {
        let mut next = self.clone();
        let value = f(&mut next)?;
        let returned = next.return_idle_nices()?;
        let settled = next.settle();
        // Exchanges gone since before `f`, including those a destroyed participant took along.
        let mut undone: Vec<Exchange> = self
            .model
            .exchanges()
            .filter(|x| next.model.exchange(x.id).is_err())
            .copied()
            .collect();
        for x in settled {
            if !undone.contains(&x) {
                undone.push(x);
            }
        }
        *self = next;
        Ok(Done {
            value,
            undone,
            returned,
        })
    }

    /// Undoes the exchanges the model reports, oldest first, asking again after each: undoing one
    /// can restore another's participant (§2.9, §3 invariant 8).
    fn settle(&mut self) -> Vec<Exchange> {
        let mut undone = Vec::new();
        while let Some(x) = self
            .model
            .exchanges_to_undo()
            .first()
            .and_then(|x| self.model.exchange(*x).ok())
            .copied()
        {
            self.model.remove_exchange(x.id);
            undone.push(x);
        }
        undone
    }

    /// `c`'s backing tickets (for `r`, or all) that the policy may revoke and re-issue: neither
    /// exchange tickets, which only the dealer touches, nor transfers held, which their end
    /// revokes.
    fn ordinary_backing(&self, c: CurrencyId, r: Option<Resource>) -> Result<Vec<TicketId>> {
        let mut out = Vec::new();
        for t in &self.model.currency(c)?.backing {
            let ticket = self.model.ticket(*t)?;
            let transfer = self.transfers.values().any(|x| x.ticket == *t);
            // Written out: `Option::is_none_or` is newer than the workspace's rust-version.
            let wanted = match r {
                Some(r) => ticket.resource == r,
                None => true,
            };
            if ticket.exchange.is_none() && !transfer && wanted {
                out.push(*t);
            }
        }
        Ok(out)
    }
}
