//! The dealer: matches offers to trade rights to one resource for rights to another (spec §2.9).
//!
//! The dealer keeps the queue of outstanding offers and nothing else. It never touches the model:
//! a match comes back as a [`Trade`], whose four base tickets ([`Trade::tickets`]) the model
//! issues as one exchange. Checks that need the model stay with the caller: the offerer's
//! guaranteed rights `R*` come in as `max_give`, and whether the caller owns the client (an
//! [`Op::Exchange`](super::broker::Op::Exchange) check) is the façade's.
//!
//! Offers are amounts, not ratios (the report's E5: what is acceptable depends on size), so only
//! an exact complement matches. A queued offer of the same resource pair in the opposite direction
//! but with other amounts is a *conflict*: it is reported, so that either side can revise.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Result, TicketsError};
use super::types::{CurrencyId, OfferId, Resource};

/// A proposal: `client` gives `give.1` of `give.0` (base value) for `want.1` of `want.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub client: CurrencyId,
    pub give: (Resource, i64),
    pub want: (Resource, i64),
    /// The instant, on the same clock as `now`, from which the offer no longer matches; `None`
    /// keeps it until it is cancelled or its client exits.
    pub expires: Option<Duration>,
}

impl Offer {
    fn live(&self, now: Duration) -> bool {
        // Written out: `Option::is_none_or` is newer than the workspace's rust-version.
        match self.expires {
            Some(e) => now < e,
            None => true,
        }
    }

    /// `other` gives exactly what this one wants, for exactly what it gives.
    fn complements(&self, other: &Offer) -> bool {
        self.give == other.want && self.want == other.give
    }

    /// `other` trades the same pair of resources the other way, at other amounts.
    fn conflicts_with(&self, other: &Offer) -> bool {
        self.give.0 == other.want.0 && self.want.0 == other.give.0 && !self.complements(other)
    }
}

/// An offer waiting in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedOffer {
    pub id: OfferId,
    pub offer: Offer,
    /// When it was made: the queue is in this order, and the oldest match wins.
    pub at: Duration,
}

/// An agreed exchange: client `a` gives `give` to client `b` and receives `get` from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trade {
    pub a: CurrencyId,
    pub b: CurrencyId,
    pub give: (Resource, i64),
    pub get: (Resource, i64),
}

/// One of the four base tickets that carry out a [`Trade`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseTicket {
    pub holder: CurrencyId,
    pub resource: Resource,
    /// Positive for what the holder receives, negative for what it gives up.
    pub amount: i64,
}

impl Trade {
    /// The exchange's four base tickets (§2.9): `a` gets `+y` of r2 and `−x` of r1, `b` gets
    /// `+x` of r1 and `−y` of r2. They come from the base because only base values stay fixed
    /// while subcurrencies' values drift; they net to zero on each resource, which is what leaves
    /// non-participants' rights untouched.
    pub fn tickets(&self) -> [BaseTicket; 4] {
        let t = |holder, (resource, amount): (Resource, i64)| BaseTicket {
            holder,
            resource,
            amount,
        };
        let ((r1, x), (r2, y)) = (self.give, self.get);
        [
            t(self.a, (r2, y)),
            t(self.a, (r1, -x)),
            t(self.b, (r1, x)),
            t(self.b, (r2, -y)),
        ]
    }
}

/// What became of an offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OfferOutcome {
    /// It matched the queued offer `offer_b`, which leaves the queue; the model should now carry
    /// out `trade` (with `trade.a` the new offer's client).
    Matched {
        offer_a: OfferId,
        offer_b: OfferId,
        trade: Trade,
    },
    /// It waits as `id`; `conflicts` are the live queued offers it could be revised to meet,
    /// oldest first.
    Queued {
        id: OfferId,
        conflicts: Vec<OfferId>,
    },
}

/// The queue of outstanding offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dealer {
    /// Oldest first; ids increase along it.
    queue: Vec<QueuedOffer>,
    next_id: u64,
}

impl Dealer {
    pub fn new() -> Dealer {
        Dealer::default()
    }

    /// Makes an offer at `now`. `max_give` is the client's guaranteed rights `R*` for the
    /// resource it gives, rounded down: no offer may exceed it (§2.9).
    ///
    /// The oldest live queued offer of another client that gives exactly what this one wants for
    /// exactly what it gives matches at once. Otherwise the offer is queued. A queued offer's own
    /// `R*` is not checked again when it matches: the model refuses an exchange that would leave
    /// a participant's rights negative, and the façade then withdraws the offers it concerns.
    pub fn offer(&mut self, offer: Offer, now: Duration, max_give: i64) -> Result<OfferOutcome> {
        validate(&offer, now, max_give)?;
        let id = OfferId(self.next_id);
        self.next_id += 1;
        let others = |q: &&QueuedOffer| q.offer.client != offer.client && q.offer.live(now);
        if let Some(pos) = self
            .queue
            .iter()
            .position(|q| others(&q) && q.offer.complements(&offer))
        {
            let queued = self.queue.remove(pos);
            return Ok(OfferOutcome::Matched {
                offer_a: id,
                offer_b: queued.id,
                trade: Trade {
                    a: offer.client,
                    b: queued.offer.client,
                    give: offer.give,
                    get: offer.want,
                },
            });
        }
        let conflicts = self
            .queue
            .iter()
            .filter(others)
            .filter(|q| q.offer.conflicts_with(&offer))
            .map(|q| q.id)
            .collect();
        self.queue.push(QueuedOffer { id, offer, at: now });
        Ok(OfferOutcome::Queued { id, conflicts })
    }

    /// The live queued offers that conflict with queued offer `id`, oldest first: how an offerer
    /// whose offer was queued before its counterpart learns of it.
    pub fn conflicts(&self, id: OfferId, now: Duration) -> Result<Vec<OfferId>> {
        let mine = self.get(id).ok_or(TicketsError::UnknownOffer(id))?.offer;
        Ok(self
            .queue
            .iter()
            .filter(|q| q.offer.client != mine.client && q.offer.live(now))
            .filter(|q| q.offer.conflicts_with(&mine))
            .map(|q| q.id)
            .collect())
    }

    /// Withdraws a queued offer. Whether the caller may (its client's owner or root) is checked by
    /// the façade before.
    pub fn cancel(&mut self, id: OfferId) -> Result<QueuedOffer> {
        let pos = self
            .queue
            .iter()
            .position(|q| q.id == id)
            .ok_or(TicketsError::UnknownOffer(id))?;
        Ok(self.queue.remove(pos))
    }

    /// Drops the offers that have expired by `now` and names them.
    pub fn expire(&mut self, now: Duration) -> Vec<OfferId> {
        self.drain(|q| !q.offer.live(now))
    }

    /// Drops every offer of a client that exited.
    pub fn withdraw_client(&mut self, client: CurrencyId) -> Vec<OfferId> {
        self.drain(|q| q.offer.client == client)
    }

    /// The queue, oldest first. Expired offers stay listed until [`Dealer::expire`] drops them,
    /// but never match.
    pub fn offers(&self) -> &[QueuedOffer] {
        &self.queue
    }

    pub fn get(&self, id: OfferId) -> Option<&QueuedOffer> {
        self.queue.iter().find(|q| q.id == id)
    }

    fn drain(&mut self, gone: impl Fn(&QueuedOffer) -> bool) -> Vec<OfferId> {
        let ids = self
            .queue
            .iter()
            .filter(|q| gone(q))
            .map(|q| q.id)
            .collect();
        self.queue.retain(|q| !gone(q));
        ids
    }
}

/// Refuses an offer that could never be carried out.
///
/// Trading a resource for itself is always refused: it would move rights between two clients on
/// one resource, a gift rather than an exchange. (The report's *self-conversion*, where the dealer
/// converts one client's rights between resources against the base, is a different operation and
/// is not offered here.)
fn validate(offer: &Offer, now: Duration, max_give: i64) -> Result<()> {
    for amount in [offer.give.1, offer.want.1] {
        if amount <= 0 {
            return Err(TicketsError::NonPositiveAmount { amount });
        }
    }
    if offer.give.0 == offer.want.0 {
        return Err(TicketsError::SameResource(offer.give.0));
    }
    if offer.give.1 > max_give {
        return Err(TicketsError::GiveAboveRights {
            client: offer.client,
            resource: offer.give.0,
            give: offer.give.1,
            max: max_give,
        });
    }
    match offer.expires {
        Some(expires) if expires <= now => Err(TicketsError::OfferExpired { expires, now }),
        _ => Ok(()),
    }
}
