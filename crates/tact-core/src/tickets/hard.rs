//! Hard tickets (spec tickets.md §2.5): fixed fractions of their issuer's value.
//!
//! C's first hard ticket for r fixes `H(C,r)` and creates the hidden `soft_tix(C)`, which from
//! then on issues C's soft tickets for r (those already issued move to it, keeping their ids and
//! holders). C funds `soft_tix(C)` with a hard ticket of `H − h`, h being C's other hard tickets
//! for r, resized after every change to them, so C's hard tickets always total H and `A(C,r) ≤ H`:
//! an active hard ticket of `amount` is worth at least `amount/H · V(C,r)`. A currency that only
//! ever issues soft tickets for r has no hard total for r, and its soft tickets stay its own.
//!
//! Exchange tickets, though issued by the base, stay outside the base's hard total: they have a
//! fixed value by construction and net to zero on each resource.

use super::error::{Result, TicketsError};
use super::model::{HardTotal, Model, DEFAULT_HARD_TOTAL};
use super::types::{CurrencyId, CurrencyKind, Kind, Resource, Ticket, TicketId};

impl Model {
    /// `H(c,r)`, once fixed.
    pub fn hard_total(&self, c: CurrencyId, r: Resource) -> Result<Option<i64>> {
        Ok(self.currency(c)?.hard[r].map(|h| h.total))
    }

    /// Fixes `H(c,r)` before c's first hard ticket for r, for a total other than
    /// [`DEFAULT_HARD_TOTAL`]. The base's totals are the machine's, given to [`Model::new`].
    pub fn set_hard_total(&mut self, c: CurrencyId, r: Resource, total: i64) -> Result<()> {
        let currency = self.visible(c)?;
        if c == CurrencyId::BASE {
            return Err(TicketsError::Structure(
                "the base's hard totals are the machine's, given when the model is made".into(),
            ));
        }
        if let Some(h) = currency.hard[r] {
            return Err(TicketsError::Structure(format!(
                "H({c},{r}) is already fixed at {}",
                h.total
            )));
        }
        if total <= 0 {
            return Err(TicketsError::NonPositiveAmount { amount: total });
        }
        self.fix_hard_total(c, r, total);
        Ok(())
    }

    /// Who issues c's soft tickets for r: `soft_tix(c)` once c has a hard total for r, else c.
    /// A client's implicit self ticket is one of them.
    pub(super) fn soft_issuer(&self, c: CurrencyId, r: Resource) -> CurrencyId {
        let currency = &self.currencies[&c];
        match (currency.hard[r], currency.soft_tix) {
            (Some(_), Some(soft)) => soft,
            _ => c,
        }
    }

    /// Whether `ticket` is the hard ticket funding its issuer's `soft_tix`.
    pub(super) fn is_funding(&self, ticket: &Ticket) -> bool {
        self.currencies
            .get(&ticket.issuer)
            .and_then(|c| c.hard[ticket.resource])
            .is_some_and(|h| h.funding == ticket.id)
    }

    /// h: c's hard tickets for r other than its `soft_tix` funding and exchange tickets, summed in
    /// i128 so that no number of amounts can wrap.
    pub(super) fn hard_sum(&self, c: CurrencyId, r: Resource) -> i128 {
        self.currencies[&c]
            .issued
            .iter()
            .map(|t| &self.tickets[t])
            .filter(|t| t.resource == r && t.kind == Kind::Hard && t.exchange.is_none())
            .filter(|t| !self.is_funding(t))
            .map(|t| i128::from(t.amount))
            .sum()
    }

    /// Checks that c's hard tickets for r may grow by `extra`, and returns `H(c,r)` (the one
    /// its first hard ticket would fix, if none is yet).
    pub(super) fn check_hard_room(&self, c: CurrencyId, r: Resource, extra: i64) -> Result<i64> {
        let total = match self.currencies[&c].hard[r] {
            Some(h) => h.total,
            None if c == CurrencyId::BASE => self.base_hard_total[r],
            None => DEFAULT_HARD_TOTAL,
        };
        let would = self.hard_sum(c, r) + i128::from(extra);
        if would > i128::from(total) {
            return Err(TicketsError::HardTotalExceeded {
                currency: c,
                resource: r,
                would,
                total,
            });
        }
        Ok(total)
    }

    /// Gives c a hard total for r: creates `soft_tix(c)` if c has none yet, moves c's soft
    /// tickets for r to it, and funds it with all of `total` (no hard tickets yet).
    pub(super) fn fix_hard_total(&mut self, c: CurrencyId, r: Resource, total: i64) {
        let soft = match self.currencies[&c].soft_tix {
            Some(soft) => soft,
            None => {
                let currency = &self.currencies[&c];
                let (name, broker) = (format!("soft_tix({})", currency.name), currency.broker);
                let soft = self.alloc_currency(CurrencyKind::SoftTix { of: c }, name, broker);
                if let Some(currency) = self.currencies.get_mut(&c) {
                    currency.soft_tix = Some(soft);
                }
                soft
            }
        };
        let moving: Vec<TicketId> = self.currencies[&c]
            .issued
            .iter()
            .copied()
            .filter(|t| {
                let t = &self.tickets[t];
                t.resource == r && t.kind == Kind::Soft && t.exchange.is_none()
            })
            .collect();
        for t in moving {
            if let Some(ticket) = self.tickets.get_mut(&t) {
                ticket.issuer = soft;
            }
            if let Some(currency) = self.currencies.get_mut(&c) {
                currency.issued.remove(&t);
            }
            if let Some(currency) = self.currencies.get_mut(&soft) {
                currency.issued.insert(t);
            }
        }
        let funding = self.add_ticket(c, soft, r, total, Kind::Hard, None);
        if let Some(currency) = self.currencies.get_mut(&c) {
            currency.hard[r] = Some(HardTotal { total, funding });
        }
        self.cache.invalidate_all();
    }

    /// Resizes c's `soft_tix` funding for r to `H − h`, if c has a hard total for r.
    pub(super) fn rebalance(&mut self, c: CurrencyId, r: Resource) {
        let Some(hard) = self.currencies.get(&c).and_then(|c| c.hard[r]) else {
            return;
        };
        // h <= H (checked before every change), so this fits.
        let amount = i64::try_from(i128::from(hard.total) - self.hard_sum(c, r)).unwrap_or(0);
        if let Some(t) = self.tickets.get_mut(&hard.funding) {
            t.amount = amount;
        }
        self.cache.invalidate(r);
    }
}
