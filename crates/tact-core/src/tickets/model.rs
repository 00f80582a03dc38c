//! The tickets model's state and its structural operations (spec tickets.md §2.1–2.3): currencies,
//! the tickets between them, and which clients compete. Hard totals live in [`super::hard`],
//! exchanges in [`super::exchange`], valuation in [`super::value`].
//!
//! Operations here are unchecked for permission (the broker oracle is applied by the façade) but
//! not for structure: each one validates everything first and only then changes state, so a
//! refused operation leaves the model exactly as it was.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::error::{Result, TicketsError};
use super::exchange::Exchange;
use super::types::{
    Broker, CurrencyId, CurrencyKind, ExchangeId, Kind, Mode, PerResource, Resource, Ticket,
    TicketId,
};
use super::value::Cache;

/// The amount of a client's implicit self ticket (§2.2). Its value is the client's rights `R`.
///
/// While a client issues nothing the amount cancels out (`R = V`). It matters only while the
/// client competes *and* has issued tickets (a transfer, §2.7): the recipient of `t` tickets then
/// gets `t/(t + 1000)` of the client's value. 1000 is the scale of a currency's default hard total,
/// so a client's tickets read as thousandths of its own stake, as hard tickets do.
pub const SELF_TICKET: i64 = 1000;

/// `H(C,r)` fixed by a currency's first hard ticket for `r` when no total was set (§2.5).
pub const DEFAULT_HARD_TOTAL: i64 = 1000;

/// Why no currency or job name may hold `(` or `)`: the model names its hidden currencies
/// `soft_tix(NAME)` (§2.5), and a name of that shape would be taken for one.
pub const PARENS_RESERVED: &str =
    "names may not contain '(' or ')' (kept for the hidden soft_tix(NAME) currencies)";

/// `H(C,r)` and the hard ticket with which `C` funds `soft_tix(C)` for `r` (§2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardTotal {
    pub total: i64,
    /// Always `total − h` (h = C's other hard tickets for r); it can reach 0, when C's soft
    /// tickets for r are worth nothing.
    pub funding: TicketId,
}

/// A currency and its edges. Read-only outside the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Currency {
    pub id: CurrencyId,
    pub kind: CurrencyKind,
    pub name: String,
    pub broker: Broker,
    /// Clients only: whether the client competes for each resource (§2.3), which is what
    /// activates its self ticket.
    pub competing: PerResource<bool>,
    /// The tickets backing this currency, oldest first (§2.7 funds children from the issuer of
    /// the first one).
    pub backing: Vec<TicketId>,
    /// The tickets this currency issued.
    pub issued: BTreeSet<TicketId>,
    /// Per resource, `H(C,r)` once C has issued a hard ticket for r.
    pub hard: PerResource<Option<HardTotal>>,
    /// The hidden subcurrency issuing C's soft tickets for every resource that has a hard total.
    pub soft_tix: Option<CurrencyId>,
}

impl Currency {
    pub fn is_client(&self) -> bool {
        matches!(self.kind, CurrencyKind::Client { .. })
    }

    /// `soft_tix` currencies are managed by the model and never named by callers.
    pub fn is_hidden(&self) -> bool {
        matches!(self.kind, CurrencyKind::SoftTix { .. })
    }
}

/// The tickets model: pure, deterministic, persisted by the daemon as it is (the valuation cache
/// is rebuilt on demand after loading).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Model {
    /// `H(base,r)`: memory in bytes, the others unitless. Fixed by the base's first hard ticket.
    pub(super) base_hard_total: PerResource<i64>,
    pub(super) currencies: BTreeMap<CurrencyId, Currency>,
    pub(super) tickets: BTreeMap<TicketId, Ticket>,
    pub(super) exchanges: BTreeMap<ExchangeId, Exchange>,
    /// Identifiers are never reused, so a stale id held by a client names nothing.
    pub(super) next_currency: u32,
    pub(super) next_ticket: u64,
    pub(super) next_exchange: u64,
    #[serde(skip)]
    pub(super) cache: Cache,
}

impl Model {
    /// A model holding only the base currency, owned by root with mode `fci/---/---`.
    pub fn new(base_hard_total: PerResource<i64>) -> Model {
        let mut model = Model {
            base_hard_total,
            currencies: BTreeMap::new(),
            tickets: BTreeMap::new(),
            exchanges: BTreeMap::new(),
            next_currency: CurrencyId::BASE.0,
            next_ticket: 0,
            next_exchange: 0,
            cache: Cache::default(),
        };
        let root = Broker {
            owner: 0,
            group: 0,
            mode: Mode::OWNER_ONLY,
        };
        model.alloc_currency(CurrencyKind::Base, "base".to_string(), root);
        model
    }

    /// `H(base,r)` as given to [`Model::new`].
    pub fn base_hard_total(&self) -> PerResource<i64> {
        self.base_hard_total
    }

    /// Any currency, hidden `soft_tix` ones included.
    pub fn currency(&self, c: CurrencyId) -> Result<&Currency> {
        self.currencies
            .get(&c)
            .ok_or(TicketsError::UnknownCurrency(c))
    }

    /// Every currency, in id order.
    pub fn currencies(&self) -> impl Iterator<Item = &Currency> {
        self.currencies.values()
    }

    pub fn ticket(&self, t: TicketId) -> Result<&Ticket> {
        self.tickets.get(&t).ok_or(TicketsError::UnknownTicket(t))
    }

    /// Every ticket, in id order.
    pub fn tickets(&self) -> impl Iterator<Item = &Ticket> {
        self.tickets.values()
    }

    /// Makes a pure or client currency with no funding. The base exists once, and `soft_tix`
    /// currencies come from hard tickets.
    pub fn create_currency(
        &mut self,
        kind: CurrencyKind,
        name: &str,
        broker: Broker,
    ) -> Result<CurrencyId> {
        match kind {
            CurrencyKind::Base => Err(TicketsError::Structure(
                "there is one base currency, made with the model".into(),
            )),
            CurrencyKind::SoftTix { .. } => Err(TicketsError::Structure(
                "soft_tix currencies are made by a currency's first hard ticket".into(),
            )),
            CurrencyKind::Pure | CurrencyKind::Client { .. } => {
                Ok(self.alloc_currency(kind, name.to_string(), broker))
            }
        }
    }

    /// Destroys `c` and its `soft_tix`: revokes every ticket they issued or hold, and undoes the
    /// exchanges `c` takes part in (a participant exits, §2.9). Holders of its tickets lose that
    /// funding; issuers of its hard tickets get the amount back on their `soft_tix`.
    pub fn destroy(&mut self, c: CurrencyId) -> Result<()> {
        let currency = self.visible(c)?;
        if c == CurrencyId::BASE {
            return Err(TicketsError::Structure(
                "the base currency cannot be destroyed".into(),
            ));
        }
        let doomed: Vec<CurrencyId> = std::iter::once(c).chain(currency.soft_tix).collect();
        let undone: Vec<ExchangeId> = self
            .exchanges
            .values()
            .filter(|x| x.a == c || x.b == c)
            .map(|x| x.id)
            .collect();
        for x in undone {
            self.remove_exchange(x);
        }
        let mut gone = BTreeSet::new();
        for d in &doomed {
            let d = &self.currencies[d];
            gone.extend(d.issued.iter().copied());
            gone.extend(d.backing.iter().copied());
        }
        // Outside issuers of hard tickets held here regain the amount on their soft side.
        let resize: BTreeSet<(CurrencyId, Resource)> = gone
            .iter()
            .map(|t| &self.tickets[t])
            .filter(|t| t.kind == Kind::Hard && !doomed.contains(&t.issuer))
            .map(|t| (t.issuer, t.resource))
            .collect();
        for t in gone {
            self.remove_ticket(t);
        }
        for d in doomed {
            self.currencies.remove(&d);
        }
        for (issuer, r) in resize {
            self.rebalance(issuer, r);
        }
        self.cache.invalidate_all();
        Ok(())
    }

    /// Funds `holder` with `amount` of `issuer`'s tickets for `resource`.
    ///
    /// A soft ticket of a currency with a hard total for `resource` is issued by its `soft_tix`.
    /// A hard ticket fixes the hard total first if needed ([`DEFAULT_HARD_TOTAL`], or `H(base,r)`
    /// for the base) and is refused if C's hard tickets would exceed it. Refused: non-positive
    /// amounts, unknown or hidden currencies, holding by the base, and any edge that would close a
    /// cycle in the funding graph over all resources.
    pub fn issue(
        &mut self,
        issuer: CurrencyId,
        holder: CurrencyId,
        resource: Resource,
        amount: i64,
        kind: Kind,
    ) -> Result<TicketId> {
        if amount <= 0 {
            return Err(TicketsError::NonPositiveAmount { amount });
        }
        self.visible(issuer)?;
        self.visible(holder)?;
        if holder == CurrencyId::BASE {
            return Err(TicketsError::Structure(
                "the base currency holds no tickets: it is the root of all funding".into(),
            ));
        }
        if issuer == holder || self.reaches(holder, issuer) {
            return Err(TicketsError::Cycle { issuer, holder });
        }
        match kind {
            Kind::Soft => {
                let from = self.soft_issuer(issuer, resource);
                Ok(self.add_ticket(from, holder, resource, amount, Kind::Soft, None))
            }
            Kind::Hard => {
                let total = self.check_hard_room(issuer, resource, amount)?;
                if self.currencies[&issuer].hard[resource].is_none() {
                    self.fix_hard_total(issuer, resource, total);
                }
                let id = self.add_ticket(issuer, holder, resource, amount, Kind::Hard, None);
                self.rebalance(issuer, resource);
                Ok(id)
            }
        }
    }

    /// Takes a ticket back. Revoking one ticket of an exchange undoes the whole exchange (§2.9);
    /// the funding of a `soft_tix` follows the hard tickets and is refused.
    pub fn revoke(&mut self, t: TicketId) -> Result<()> {
        let ticket = *self.ticket(t)?;
        if let Some(x) = ticket.exchange {
            self.remove_exchange(x);
            return Ok(());
        }
        self.refuse_funding(&ticket)?;
        self.remove_ticket(t);
        if ticket.kind == Kind::Hard {
            self.rebalance(ticket.issuer, ticket.resource);
        }
        Ok(())
    }

    /// Changes a ticket's amount (a hard one within its issuer's hard total). Exchange tickets
    /// keep the amounts the dealer agreed, and a `soft_tix` funding follows the hard tickets.
    pub fn set_amount(&mut self, t: TicketId, amount: i64) -> Result<()> {
        if amount <= 0 {
            return Err(TicketsError::NonPositiveAmount { amount });
        }
        let ticket = *self.ticket(t)?;
        if ticket.exchange.is_some() {
            return Err(TicketsError::Structure(format!(
                "{t} belongs to an exchange, whose amounts are fixed: undo the exchange instead"
            )));
        }
        self.refuse_funding(&ticket)?;
        if ticket.kind == Kind::Hard {
            self.check_hard_room(ticket.issuer, ticket.resource, amount - ticket.amount)?;
        }
        if let Some(x) = self.tickets.get_mut(&t) {
            x.amount = amount;
        }
        self.cache.invalidate(ticket.resource);
        if ticket.kind == Kind::Hard {
            self.rebalance(ticket.issuer, ticket.resource);
        }
        Ok(())
    }

    /// Whether a client competes for `r` (§2.3): runnable for CPU, a request outstanding for disk,
    /// memory tickets requested for memory. The façade maps those states to this flag.
    pub fn set_active(&mut self, client: CurrencyId, r: Resource, competing: bool) -> Result<()> {
        let c = self.visible(client)?;
        if !c.is_client() {
            return Err(TicketsError::NotClient(client));
        }
        if c.competing[r] != competing {
            if let Some(c) = self.currencies.get_mut(&client) {
                c.competing[r] = competing;
            }
            self.cache.invalidate_activity(r);
        }
        Ok(())
    }

    /// Replaces the broker of `c` and of its `soft_tix`, which acts for it and must not keep the
    /// old owner's rights.
    pub fn set_broker(&mut self, c: CurrencyId, broker: Broker) -> Result<()> {
        let soft = self.visible(c)?.soft_tix;
        for d in std::iter::once(c).chain(soft) {
            if let Some(d) = self.currencies.get_mut(&d) {
                d.broker = broker;
            }
        }
        Ok(())
    }

    /// Moves `t` to the head of its holder's backing list, where the default policy looks for
    /// the currency that funds the holder's children (§2.7: after a change of uid the new
    /// funding must come first). Order does not enter valuation, so no cache is dropped.
    pub fn put_first(&mut self, t: TicketId) -> Result<()> {
        let holder = self.ticket(t)?.holder;
        if let Some(c) = self.currencies.get_mut(&holder) {
            c.backing.retain(|b| *b != t);
            c.backing.insert(0, t);
        }
        Ok(())
    }

    /// Checks a loaded model's internal links, which the operations keep and the valuation
    /// relies on (it would panic on a dangling one): ids match their keys and stay below the
    /// counters, every ticket's issuer and holder exist and list it, every `soft_tix`, hard
    /// funding and exchange ticket is where its owner says, amounts are positive outside
    /// exchanges, and the funding graph is a DAG. The error names the first inconsistency.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(TicketsError::Structure(format!("corrupt model: {what}")));
        match self.currencies.get(&CurrencyId::BASE).map(|c| c.kind) {
            Some(CurrencyKind::Base) => {}
            _ => return bad("no base currency".into()),
        }
        for (id, c) in &self.currencies {
            if *id != c.id || id.0 >= self.next_currency {
                return bad(format!("currency {id} is recorded as {}", c.id));
            }
            if c.kind == CurrencyKind::Base && *id != CurrencyId::BASE {
                return bad(format!("{id} is a second base"));
            }
            let issued = c
                .issued
                .iter()
                .map(|t| (t, self.tickets.get(t).map(|x| x.issuer)));
            let backing = c
                .backing
                .iter()
                .map(|t| (t, self.tickets.get(t).map(|x| x.holder)));
            if let Some((t, _)) = issued.chain(backing).find(|(_, end)| *end != Some(*id)) {
                return bad(format!("{id} lists {t}, which is not its"));
            }
            if let Some(soft) = c.soft_tix {
                match self.currencies.get(&soft).map(|s| s.kind) {
                    Some(CurrencyKind::SoftTix { of }) if of == *id => {}
                    _ => return bad(format!("{id}'s soft_tix {soft} is not its")),
                }
            }
            for (r, hard) in c.hard.iter() {
                let Some(hard) = hard else { continue };
                match (self.tickets.get(&hard.funding), c.soft_tix) {
                    (Some(t), Some(soft)) if t.issuer == *id && t.holder == soft => {}
                    _ => return bad(format!("{id}'s hard total for {r} has no funding ticket")),
                }
            }
        }
        for (id, t) in &self.tickets {
            let (Some(issuer), Some(holder)) = (
                self.currencies.get(&t.issuer),
                self.currencies.get(&t.holder),
            ) else {
                return bad(format!("{id} names a missing currency"));
            };
            let listed = issuer.issued.contains(id)
                && holder.backing.iter().filter(|b| *b == id).count() == 1;
            if *id != t.id || id.0 >= self.next_ticket || !listed {
                return bad(format!("{id} is not listed by its issuer and holder once"));
            }
            let exchange = t
                .exchange
                .map(|x| self.exchanges.get(&x).map(|x| x.tickets));
            match exchange {
                None if t.amount <= 0 => return bad(format!("{id} has amount {}", t.amount)),
                Some(Some(tickets)) if tickets.contains(id) => {}
                Some(_) => return bad(format!("{id} names an exchange that lacks it")),
                None => {}
            }
        }
        for (id, x) in &self.exchanges {
            if *id != x.id || id.0 >= self.next_exchange {
                return bad(format!("exchange {id} is recorded as {}", x.id));
            }
            if x.tickets
                .iter()
                .any(|t| self.tickets.get(t).map(|t| t.exchange) != Some(Some(*id)))
            {
                return bad(format!("exchange {id} lacks one of its four tickets"));
            }
        }
        // Kahn's algorithm over every resource's edges: what is left is on a cycle.
        let mut indegree: BTreeMap<CurrencyId, usize> =
            self.currencies.keys().map(|c| (*c, 0)).collect();
        for t in self.tickets.values() {
            *indegree.entry(t.holder).or_default() += 1;
        }
        let mut ready: Vec<CurrencyId> = indegree
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(c, _)| *c)
            .collect();
        let mut seen = 0;
        while let Some(c) = ready.pop() {
            seen += 1;
            for t in &self.currencies[&c].issued {
                let n = indegree.entry(self.tickets[t].holder).or_default();
                *n -= 1;
                if *n == 0 {
                    ready.push(self.tickets[t].holder);
                }
            }
        }
        if seen != self.currencies.len() {
            return bad("the funding graph has a cycle".into());
        }
        Ok(())
    }

    /// A currency a caller may name: it exists and is not a hidden `soft_tix`.
    pub(super) fn visible(&self, c: CurrencyId) -> Result<&Currency> {
        let currency = self.currency(c)?;
        if currency.is_hidden() {
            return Err(TicketsError::Hidden(c));
        }
        Ok(currency)
    }

    /// Whether `to` is reachable from `from` along issuer→holder edges of any resource.
    pub(super) fn reaches(&self, from: CurrencyId, to: CurrencyId) -> bool {
        let mut seen = BTreeSet::from([from]);
        let mut stack = vec![from];
        while let Some(c) = stack.pop() {
            if c == to {
                return true;
            }
            for t in &self.currencies[&c].issued {
                let holder = self.tickets[t].holder;
                if seen.insert(holder) {
                    stack.push(holder);
                }
            }
        }
        false
    }

    pub(super) fn alloc_currency(
        &mut self,
        kind: CurrencyKind,
        name: String,
        broker: Broker,
    ) -> CurrencyId {
        let id = CurrencyId(self.next_currency);
        self.next_currency += 1;
        self.currencies.insert(
            id,
            Currency {
                id,
                kind,
                name,
                broker,
                competing: PerResource::default(),
                backing: Vec::new(),
                issued: BTreeSet::new(),
                hard: PerResource::default(),
                soft_tix: None,
            },
        );
        self.cache.invalidate_all();
        id
    }

    /// Records a ticket whose currencies the caller has validated.
    pub(super) fn add_ticket(
        &mut self,
        issuer: CurrencyId,
        holder: CurrencyId,
        resource: Resource,
        amount: i64,
        kind: Kind,
        exchange: Option<ExchangeId>,
    ) -> TicketId {
        let id = TicketId(self.next_ticket);
        self.next_ticket += 1;
        self.tickets.insert(
            id,
            Ticket {
                id,
                issuer,
                holder,
                resource,
                amount,
                kind,
                exchange,
            },
        );
        if let Some(c) = self.currencies.get_mut(&issuer) {
            c.issued.insert(id);
        }
        if let Some(c) = self.currencies.get_mut(&holder) {
            c.backing.push(id);
        }
        self.cache.invalidate(resource);
        id
    }

    /// Drops a ticket from the ticket table and both of its currencies.
    pub(super) fn remove_ticket(&mut self, t: TicketId) {
        let Some(ticket) = self.tickets.remove(&t) else {
            return;
        };
        if let Some(c) = self.currencies.get_mut(&ticket.issuer) {
            c.issued.remove(&t);
        }
        if let Some(c) = self.currencies.get_mut(&ticket.holder) {
            c.backing.retain(|b| *b != t);
        }
        self.cache.invalidate(ticket.resource);
    }

    fn refuse_funding(&self, ticket: &Ticket) -> Result<()> {
        if self.is_funding(ticket) {
            return Err(TicketsError::Structure(format!(
                "{} funds the soft tickets of {} and follows its hard tickets; change those instead",
                ticket.id, ticket.issuer
            )));
        }
        Ok(())
    }
}
