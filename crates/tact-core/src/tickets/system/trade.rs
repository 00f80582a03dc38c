//! Exchanges through the dealer (spec tickets.md §2.9): offers by a client's owner, matched by
//! the [`Dealer`](crate::tickets::dealer::Dealer) and carried out by the model as four linked
//! base tickets.

use std::time::Duration;

use super::{Done, TicketSystem};
use crate::tickets::broker::Op;
use crate::tickets::dealer::{Offer, OfferOutcome, QueuedOffer};
use crate::tickets::error::{Result, TicketsError};
use crate::tickets::exchange::Exchange;
use crate::tickets::types::{Caller, CurrencyId, ExchangeId, OfferId, Resource};

/// What became of an offer.
#[derive(Debug, Clone, PartialEq)]
pub enum OfferReply {
    /// It matched the queued offer `matched`, and the exchange is in force.
    Exchanged {
        offer: OfferId,
        matched: OfferId,
        exchange: ExchangeId,
    },
    /// It waits as `id`; `conflicts` are the live queued offers it could be revised to meet.
    Queued {
        id: OfferId,
        conflicts: Vec<OfferId>,
    },
    /// It matched the queued offer `matched`, but the model refused the exchange (a
    /// participant's rights would go negative, or the queued offerer's have shrunk since): both
    /// offers are withdrawn, and `why` says what was wrong.
    Refused {
        offer: OfferId,
        matched: OfferId,
        why: TicketsError,
    },
}

impl TicketSystem {
    /// Offers an exchange at `now` for `offer.client`, which the caller must own (or be root).
    /// It may give at most the client's guaranteed rights `R*` for the resource given.
    pub fn offer(
        &mut self,
        caller: &Caller,
        offer: Offer,
        now: Duration,
    ) -> Result<Done<OfferReply>> {
        self.check(&Op::Exchange(offer.client), caller)?;
        let max_give = self.max_give(offer.client, offer.give.0)?;
        // One change of the dealer, then at most one of the model: the dealer refuses before
        // changing anything, and a refused exchange is a reply, not a failure.
        self.in_place(|s| {
            Ok(match s.dealer.offer(offer, now, max_give)? {
                OfferOutcome::Queued { id, conflicts } => OfferReply::Queued { id, conflicts },
                OfferOutcome::Matched {
                    offer_a,
                    offer_b,
                    trade,
                } => match s
                    .model
                    .create_exchange(trade.a, trade.give, trade.b, trade.get)
                {
                    Ok(exchange) => OfferReply::Exchanged {
                        offer: offer_a,
                        matched: offer_b,
                        exchange,
                    },
                    Err(why) => OfferReply::Refused {
                        offer: offer_a,
                        matched: offer_b,
                        why,
                    },
                },
            })
        })
    }

    /// Withdraws a queued offer: its client's owner, or root.
    pub fn cancel_offer(&mut self, caller: &Caller, id: OfferId) -> Result<Done<QueuedOffer>> {
        let client = self
            .dealer
            .get(id)
            .ok_or(TicketsError::UnknownOffer(id))?
            .offer
            .client;
        self.check(&Op::Exchange(client), caller)?;
        self.in_place(|s| s.dealer.cancel(id))
    }

    /// Undoes an exchange in force: the owner of either participant, or root (§2.9: "either side
    /// cancels").
    pub fn cancel_exchange(&mut self, caller: &Caller, x: ExchangeId) -> Result<Done<Exchange>> {
        let exchange = *self.model.exchange(x)?;
        self.check(&Op::Exchange(exchange.a), caller)
            .or_else(|denied| {
                self.check(&Op::Exchange(exchange.b), caller)
                    .map_err(|_| denied)
            })?;
        self.in_place(|s| {
            s.model.undo_exchange(x)?;
            Ok(exchange)
        })
    }

    /// Drops the offers that have expired by `now` (root: the daemon's clock).
    pub fn expire_offers(&mut self, caller: &Caller, now: Duration) -> Result<Done<Vec<OfferId>>> {
        Self::daemon_only(caller, || "expiring offers".to_string())?;
        self.in_place(|s| Ok(s.dealer.expire(now)))
    }

    /// `R*(client, r)` rounded down, with the model's tolerance, so that rights worth exactly
    /// 100 in exact arithmetic but 99.999999999 in `f64` may still give 100.
    fn max_give(&self, client: CurrencyId, r: Resource) -> Result<i64> {
        let guaranteed = self.model.guaranteed(client, r)?;
        Ok((guaranteed + 1e-9 * guaranteed.abs().max(1.0)).floor() as i64)
    }
}
