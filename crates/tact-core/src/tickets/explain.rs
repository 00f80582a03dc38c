//! Funding paths (spec tickets.md §6 "Explanation"): how a client's rights come from the base.
//!
//! `V` is linear along funding edges, so `R(k,r)` is a sum over the paths from the base to k's
//! self ticket of a product of factors: the base ticket's amount, then `amount/A(issuer)` for
//! every later hop (0 for an inactive one). `tact tickets explain` prints these paths.

use serde::{Deserialize, Serialize};

use super::error::{Result, TicketsError};
use super::model::{Model, SELF_TICKET};
use super::types::{CurrencyId, ExchangeId, Kind, Resource, TicketId};

/// One ticket along a funding path, with its issuer's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    /// `None` for the client's implicit self ticket, the last hop.
    pub ticket: Option<TicketId>,
    pub issuer: CurrencyId,
    pub holder: CurrencyId,
    pub amount: i64,
    pub kind: Kind,
    pub exchange: Option<ExchangeId>,
    pub active: bool,
    /// `A(issuer,r)`.
    pub issuer_active: i64,
    /// `V(issuer,r)`.
    pub issuer_value: f64,
}

impl Hop {
    /// What this hop multiplies the path by: a base ticket's amount, else `amount/A(issuer)`.
    pub fn factor(&self) -> f64 {
        if !self.active {
            0.0
        } else if self.issuer == CurrencyId::BASE {
            self.amount as f64
        } else if self.issuer_active == 0 {
            0.0
        } else {
            self.amount as f64 / self.issuer_active as f64
        }
    }
}

/// The tickets from a base ticket down to the client's self ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FundingPath {
    pub hops: Vec<Hop>,
}

impl FundingPath {
    /// This path's part of the client's rights: the product of its factors.
    pub fn contribution(&self) -> f64 {
        self.hops.iter().map(Hop::factor).product()
    }
}

/// Every funding path of a client for one resource; their contributions sum to `rights`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub client: CurrencyId,
    pub resource: Resource,
    pub paths: Vec<FundingPath>,
    /// `R(client,r)`.
    pub rights: f64,
    /// `R*(client,r)`.
    pub guaranteed: f64,
}

impl Model {
    /// Every funding path from the base to `client` for `r`, inactive ones included (they
    /// contribute 0), in the order of each currency's backing list.
    pub fn explain_path(&self, client: CurrencyId, r: Resource) -> Result<Explanation> {
        let currency = self.currency(client)?;
        if !currency.is_client() {
            return Err(TicketsError::NotClient(client));
        }
        let si = self.soft_issuer(client, r);
        let own = self.hop(si, client, r, None, SELF_TICKET, Kind::Soft)?;
        let own = Hop {
            active: currency.competing[r],
            ..own
        };
        let mut paths = self.paths_to(si, r)?;
        for path in &mut paths {
            path.hops.push(own.clone());
        }
        Ok(Explanation {
            client,
            resource: r,
            paths,
            rights: self.rights(client, r)?,
            guaranteed: self.guaranteed(client, r)?,
        })
    }

    fn paths_to(&self, c: CurrencyId, r: Resource) -> Result<Vec<FundingPath>> {
        if c == CurrencyId::BASE {
            return Ok(vec![FundingPath { hops: Vec::new() }]);
        }
        let mut paths = Vec::new();
        for t in &self.currency(c)?.backing {
            let t = self.ticket(*t)?;
            if t.resource != r {
                continue;
            }
            let hop = self.hop(t.issuer, c, r, Some(t.id), t.amount, t.kind)?;
            let hop = Hop {
                exchange: t.exchange,
                ..hop
            };
            for mut path in self.paths_to(t.issuer, r)? {
                path.hops.push(hop.clone());
                paths.push(path);
            }
        }
        Ok(paths)
    }

    fn hop(
        &self,
        issuer: CurrencyId,
        holder: CurrencyId,
        r: Resource,
        ticket: Option<TicketId>,
        amount: i64,
        kind: Kind,
    ) -> Result<Hop> {
        Ok(Hop {
            ticket,
            issuer,
            holder,
            amount,
            kind,
            exchange: None,
            active: self.is_active(holder, r)?,
            issuer_active: self.active_amount(issuer, r)?,
            issuer_value: self.value(issuer, r)?,
        })
    }
}
