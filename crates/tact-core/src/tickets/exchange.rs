//! Exchanges (spec tickets.md §2.9): client `a` gives `x` of `r1` (base value) for `y` of `r2`
//! from client `b`, as four linked base tickets: `a` gets `+y` of r2 and `−x` of r1, `b` gets `+x`
//! of r1 and `−y` of r2. They come from the base because only base values stay fixed; they net to
//! zero on each resource, so non-participants keep their `R` and `R*` exactly. The four are
//! created and removed together. Negative amounts exist only here.
//!
//! Matching offers is the dealer's ([`super::dealer`]); this module only carries trades out.

use serde::{Deserialize, Serialize};

use super::error::{Result, TicketsError};
use super::model::Model;
use super::types::{CurrencyId, ExchangeId, Kind, Resource, TicketId};

/// An exchange in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub id: ExchangeId,
    /// `a` gives `give = (r1, x)` …
    pub a: CurrencyId,
    pub give: (Resource, i64),
    /// … to `b` for `get = (r2, y)`.
    pub b: CurrencyId,
    pub get: (Resource, i64),
    /// `a`'s `+y` of r2, `a`'s `−x` of r1, `b`'s `+x` of r1, `b`'s `−y` of r2.
    pub tickets: [TicketId; 4],
}

impl Model {
    /// Carries out a trade: `a` gives `give` to `b` for `get`. Both must be distinct clients,
    /// the resources distinct and the amounts positive. Refused if a participant that competes
    /// for the resource it gives would be left with a negative value for it.
    pub fn create_exchange(
        &mut self,
        a: CurrencyId,
        give: (Resource, i64),
        b: CurrencyId,
        get: (Resource, i64),
    ) -> Result<ExchangeId> {
        let ((r1, x), (r2, y)) = (give, get);
        for amount in [x, y] {
            if amount <= 0 {
                return Err(TicketsError::NonPositiveAmount { amount });
            }
        }
        if r1 == r2 {
            return Err(TicketsError::SameResource(r1));
        }
        for c in [a, b] {
            if !self.visible(c)?.is_client() {
                return Err(TicketsError::NotClient(c));
            }
        }
        if a == b {
            return Err(TicketsError::Structure(format!(
                "{a} cannot exchange with itself (self-conversion is not an exchange)"
            )));
        }
        // A held base ticket of −n lowers the holder's value by exactly n while it is active,
        // and changes no one's activity, so the value after the trade is known beforehand.
        for (c, r, n) in [(a, r1, x), (b, r2, y)] {
            let after = self.value(c, r)? - n as f64;
            if self.is_active(c, r)? && after < -self.tolerance(r) {
                return Err(TicketsError::NegativeRights {
                    client: c,
                    resource: r,
                    value: after,
                });
            }
        }
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        let base = CurrencyId::BASE;
        let tickets = [(a, r2, y), (a, r1, -x), (b, r1, x), (b, r2, -y)]
            .map(|(holder, r, n)| self.add_ticket(base, holder, r, n, Kind::Hard, Some(id)));
        self.exchanges.insert(
            id,
            Exchange {
                id,
                a,
                give,
                b,
                get,
                tickets,
            },
        );
        Ok(id)
    }

    /// Removes all four tickets of an exchange in one step.
    pub fn undo_exchange(&mut self, x: ExchangeId) -> Result<()> {
        self.exchange(x)?;
        self.remove_exchange(x);
        Ok(())
    }

    pub fn exchange(&self, x: ExchangeId) -> Result<&Exchange> {
        self.exchanges
            .get(&x)
            .ok_or(TicketsError::UnknownExchange(x))
    }

    /// Every exchange in force, oldest first.
    pub fn exchanges(&self) -> impl Iterator<Item = &Exchange> {
        self.exchanges.values()
    }

    /// The exchanges to undo now: those in which a participant that is active for the resource
    /// it gives has a negative value `V` for it (which its self ticket, and any transfer it
    /// issued, would pass on as negative rights). The façade undoes them and asks again, until
    /// none is left, before it publishes shares (§3 invariant 8).
    pub fn exchanges_to_undo(&self) -> Vec<ExchangeId> {
        self.exchanges
            .values()
            .filter(|x| {
                [(x.a, x.give.0), (x.b, x.get.0)].into_iter().any(|(c, r)| {
                    self.is_active(c, r).unwrap_or(false)
                        && self.value(c, r).unwrap_or(0.0) < -self.tolerance(r)
                })
            })
            .map(|x| x.id)
            .collect()
    }

    pub(super) fn remove_exchange(&mut self, x: ExchangeId) {
        if let Some(exchange) = self.exchanges.remove(&x) {
            for t in exchange.tickets {
                self.remove_ticket(t);
            }
        }
    }
}
