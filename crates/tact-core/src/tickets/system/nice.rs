//! Nice (spec tickets.md §2.8, the report's §4.4 and §5.6): a job funded straight from the base,
//! out of its user's own base funding, which removes the lower limit of the user's currency
//! (a lone hog otherwise takes all of it) without touching anyone else's rights.
//!
//! Issuing base tickets is root's alone. Like the report's setuid-root utility, the daemon (root)
//! does it on the caller's behalf, for a job the caller owns, and only by moving funding the
//! user already has: `x` of the user currency's base ticket for the resource goes to a new
//! currency N, which funds the job, and returns when N's last client exits. A user's base funding
//! is therefore the same before, during and after a niced job (§3 invariant 11), never above
//! what the policy gave it, and other users are unaffected.

use serde::{Deserialize, Serialize};

use super::{Done, TicketSystem};
use crate::tickets::error::{Result, TicketsError};
use crate::tickets::types::{
    Broker, Caller, CurrencyId, CurrencyKind, Kind, Mode, Resource, TicketId,
};

/// A nice currency N: `amount` of `resource` lent by uid's user currency to fund process `job`
/// (and the children it has since).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nice {
    pub currency: CurrencyId,
    pub uid: u32,
    pub job: u32,
    pub resource: Resource,
    pub amount: i64,
}

/// N belongs to the user, who may fund it and issue its tickets (to share it further) but not
/// change it: its base funding is a loan the system takes back, and destroying N or taking that
/// funding away would lose it.
fn nice_broker(uid: u32) -> Broker {
    let mode = Mode {
        owner: [true, false, true],
        group: [false; 3],
        other: [false; 3],
    };
    Broker {
        owner: uid,
        group: uid,
        mode,
    }
}

impl TicketSystem {
    /// Funds process `pid` for `r` from a new currency N holding `x` base tickets taken from its
    /// user's currency; the job's other funding for `r` is revoked (exchange and transfer tickets
    /// stay), so it and the children it forks from now on share exactly `x`. The caller must own
    /// the process, or be root; `x` must be positive and below the user currency's base funding
    /// for `r`. Niced again, the job moves to a new N and the old one returns its funding once
    /// no client is left to it.
    pub fn nice(
        &mut self,
        caller: &Caller,
        pid: u32,
        r: Resource,
        x: i64,
    ) -> Result<Done<CurrencyId>> {
        let job = *self.process(pid).ok_or(TicketsError::UnknownProcess(pid))?;
        if !caller.is_root() && caller.uid != job.uid {
            return Err(TicketsError::NotOwner {
                what: format!("nice process {pid}"),
                on: job.currency,
                owner: job.uid,
            });
        }
        if x <= 0 {
            return Err(TicketsError::NonPositiveAmount { amount: x });
        }
        let lender = self.base_funding(job.uid, r)?;
        let funding = lender.map_or(0, |(_, amount)| amount);
        let Some((ticket, _)) = lender.filter(|_| x < funding) else {
            return Err(TicketsError::NiceAboveFunding {
                uid: job.uid,
                resource: r,
                x,
                funding,
            });
        };
        self.transact(|s| {
            s.model.set_amount(ticket, funding - x)?;
            let n = s.model.create_currency(
                CurrencyKind::Pure,
                &format!("nice:{pid}:{r}"),
                nice_broker(job.uid),
            )?;
            s.model.issue(CurrencyId::BASE, n, r, x, Kind::Soft)?;
            for t in s.ordinary_backing(job.currency, Some(r))? {
                s.model.revoke(t)?;
            }
            let t = s
                .model
                .issue(n, job.currency, r, s.policy.process_issue, Kind::Soft)?;
            s.model.put_first(t)?;
            s.nices.insert(
                n,
                Nice {
                    currency: n,
                    uid: job.uid,
                    job: pid,
                    resource: r,
                    amount: x,
                },
            );
            Ok(n)
        })
    }

    /// The user currency's live base ticket for `r` and its amount.
    fn base_funding(&self, uid: u32, r: Resource) -> Result<Option<(TicketId, i64)>> {
        let Some(t) = self.user(uid).and_then(|u| u.funding[r]) else {
            return Ok(None);
        };
        Ok(self.model.ticket(t).ok().map(|ticket| (t, ticket.amount)))
    }

    /// Destroys the nice currencies no client holds tickets of any more, and returns each one's
    /// funding to its user's currency: onto its base ticket, or as a new one if root revoked it.
    pub(super) fn return_idle_nices(&mut self) -> Result<Vec<Nice>> {
        let mut idle = Vec::new();
        for n in self.nices.values() {
            if !self.has_holders(n.currency)? {
                idle.push(*n);
            }
        }
        for n in &idle {
            self.model.destroy(n.currency)?;
            self.nices.remove(&n.currency);
            let user = self.users.get(&n.uid).copied().ok_or_else(|| {
                TicketsError::Structure(format!("uid {} has no user currency", n.uid))
            })?;
            match self.base_funding(n.uid, n.resource)? {
                Some((t, amount)) => self.model.set_amount(t, amount.saturating_add(n.amount))?,
                None => {
                    let t = self.model.issue(
                        CurrencyId::BASE,
                        user.currency,
                        n.resource,
                        n.amount,
                        Kind::Soft,
                    )?;
                    if let Some(u) = self.users.get_mut(&n.uid) {
                        u.funding[n.resource] = Some(t);
                    }
                }
            }
        }
        Ok(idle)
    }

    /// Whether any currency a caller can name holds tickets of `c` (or of its `soft_tix`).
    fn has_holders(&self, c: CurrencyId) -> Result<bool> {
        let currency = self.model.currency(c)?;
        for issuer in std::iter::once(c).chain(currency.soft_tix) {
            for t in &self.model.currency(issuer)?.issued {
                let holder = self.model.ticket(*t)?.holder;
                if !self.model.currency(holder)?.is_hidden() {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}
