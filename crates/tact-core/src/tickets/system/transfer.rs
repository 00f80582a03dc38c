//! Transfers (spec tickets.md §2.7): a process waiting on another gives it its rights until the
//! wait ends, so that the server runs on the waiter's behalf (no priority inversion). The kernel's
//! locks are invisible to tact, so waits are declared through the API.
//!
//! The waiter's client currency issues [`SELF_TICKET`] tickets to the server and stops competing.
//! Its self ticket leaves `A` and the transfer ticket, of the same amount, takes its place, so
//! every `A` and `V` in the model stays as it was with the waiter competing, and the server (if
//! it competes) gains exactly the waiter's would-be `R` (§3 invariant 12). Ending the transfer
//! revokes the ticket and restores the waiter's activity as it was. One thing it does not
//! restore: a waiter that competed for nothing becomes active through its ticket (the server
//! holds it), and an exchange in which it gives what it has no value left for is then undone
//! (invariant 8: it would pass negative rights on to the server); `Done::undone` reports it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Done, TicketSystem};
use crate::tickets::broker::Op;
use crate::tickets::error::{Result, TicketsError};
use crate::tickets::model::SELF_TICKET;
use crate::tickets::types::{Caller, Kind, Resource, TicketId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TransferId(pub u64);

impl fmt::Display for TransferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w{}", self.0)
    }
}

/// Process `waiter` waits on process `server` for `resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub id: TransferId,
    pub waiter: u32,
    pub server: u32,
    pub resource: Resource,
    /// Issued by the waiter, held by the server.
    pub ticket: TicketId,
    /// Whether the waiter competed for `resource` before, restored at the end.
    pub was_competing: bool,
}

impl TicketSystem {
    /// Process `waiter` waits on process `server` for `r`: it stops competing for `r` and its
    /// rights flow to the server. The caller needs i on the waiter's currency (its owner, by
    /// default): a transfer only gives, and lowers no one's rights but the waiter's, so the
    /// server's f bit is not asked for (that would make every wait on another user's server
    /// root's). A waiter waits on one server per resource, and the server may not (even
    /// indirectly) fund the waiter.
    pub fn transfer(
        &mut self,
        caller: &Caller,
        waiter: u32,
        server: u32,
        r: Resource,
    ) -> Result<Done<TransferId>> {
        let w = *self
            .process(waiter)
            .ok_or(TicketsError::UnknownProcess(waiter))?;
        let s = *self
            .process(server)
            .ok_or(TicketsError::UnknownProcess(server))?;
        self.check(&Op::Issue(w.currency), caller)?;
        if waiter == server {
            return Err(TicketsError::Structure(format!(
                "process {waiter} cannot wait on itself"
            )));
        }
        if let Some(x) = self
            .transfers
            .values()
            .find(|x| x.waiter == waiter && x.resource == r)
        {
            return Err(TicketsError::Structure(format!(
                "process {waiter} already waits on process {} for {r} ({}): end that first",
                x.server, x.id
            )));
        }
        self.transact(|sys| {
            let was_competing = sys.model.currency(w.currency)?.competing[r];
            let ticket = sys
                .model
                .issue(w.currency, s.currency, r, SELF_TICKET, Kind::Soft)?;
            sys.model.set_active(w.currency, r, false)?;
            let id = TransferId(sys.next_transfer);
            sys.next_transfer += 1;
            sys.transfers.insert(
                id,
                Transfer {
                    id,
                    waiter,
                    server,
                    resource: r,
                    ticket,
                    was_competing,
                },
            );
            Ok(id)
        })
    }

    /// The wait ended: the transfer's ticket is revoked and the waiter competes again if it did
    /// before. The caller needs i on the waiter's currency, as to start it.
    pub fn end_transfer(&mut self, caller: &Caller, id: TransferId) -> Result<Done<()>> {
        let x = *self
            .transfers
            .get(&id)
            .ok_or(TicketsError::UnknownTransfer(id))?;
        let waiter = self
            .process(x.waiter)
            .ok_or(TicketsError::UnknownProcess(x.waiter))?
            .currency;
        self.check(&Op::Revoke(waiter), caller)?;
        self.transact(|s| s.finish_transfer(id))
    }

    /// Revokes a transfer's ticket and restores its waiter's activity.
    pub(super) fn finish_transfer(&mut self, id: TransferId) -> Result<()> {
        let x = self
            .transfers
            .remove(&id)
            .ok_or(TicketsError::UnknownTransfer(id))?;
        let waiter = self
            .process(x.waiter)
            .ok_or(TicketsError::UnknownProcess(x.waiter))?
            .currency;
        self.model.revoke(x.ticket)?;
        self.model.set_active(waiter, x.resource, x.was_competing)
    }
}
