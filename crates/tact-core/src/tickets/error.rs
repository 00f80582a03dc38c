//! Refusals of the tickets model. Each names the currency, ticket or permission at fault, and a
//! refused operation leaves the model exactly as it was (spec §3 invariants 9 and 10).

use thiserror::Error;

use std::time::Duration;

use super::system::TransferId;
use super::types::{CurrencyId, ExchangeId, OfferId, Perm, Resource, TicketId};

#[derive(Debug, Clone, PartialEq, Error)]
pub enum TicketsError {
    #[error("unknown currency {0}")]
    UnknownCurrency(CurrencyId),
    #[error("unknown ticket {0}")]
    UnknownTicket(TicketId),
    #[error("funding {holder} from {issuer} would close a cycle in the funding graph")]
    Cycle {
        issuer: CurrencyId,
        holder: CurrencyId,
    },
    #[error("amount {amount}: tickets must be positive (only the dealer issues negative ones)")]
    NonPositiveAmount { amount: i64 },
    #[error("permission denied: {what} needs {perm} on currency {on}")]
    Denied {
        what: String,
        perm: Perm,
        on: CurrencyId,
    },
    #[error(
        "{currency} would hold {would} of {resource} in hard tickets, above its hard total {total}"
    )]
    HardTotalExceeded {
        currency: CurrencyId,
        resource: Resource,
        /// What C's hard tickets would total, summed exactly (no sum of amounts wraps).
        would: i128,
        total: i64,
    },
    /// Taking tickets away (unfund) is allowed by either of two bits (§2.6), so a refusal names
    /// both.
    #[error(
        "permission denied: {what} needs {perm} on currency {on} or {or_perm} on currency {or_on}"
    )]
    DeniedEither {
        what: String,
        perm: Perm,
        on: CurrencyId,
        or_perm: Perm,
        or_on: CurrencyId,
    },
    /// Offers and broker changes belong to the currency's owner, whatever its mode bits.
    #[error("permission denied: {what} needs the owner of {on} (uid {owner}) or root")]
    NotOwner {
        what: String,
        on: CurrencyId,
        owner: u32,
    },
    /// Creating a currency for (uid, gid), or handing one to them, needs that very uid and gid.
    #[error("permission denied: {what} needs to run as uid {uid} in group {gid} (or as root)")]
    NotIdentity { what: String, uid: u32, gid: u32 },
    #[error("unknown offer {0}")]
    UnknownOffer(OfferId),
    #[error("{client} offers {give} of {resource}, above its guaranteed rights R* = {max}")]
    GiveAboveRights {
        client: CurrencyId,
        resource: Resource,
        give: i64,
        max: i64,
    },
    #[error("an exchange trades two different resources, but the offer gives and wants {0}")]
    SameResource(Resource),
    #[error("offer expires at {expires:?}, which is not after now ({now:?})")]
    OfferExpired { expires: Duration, now: Duration },
    #[error("unknown exchange {0}")]
    UnknownExchange(ExchangeId),
    #[error("{0} is not a client currency (only clients compete and hold rights)")]
    NotClient(CurrencyId),
    #[error("{0} is a hidden soft_tix currency: name the currency that owns it")]
    Hidden(CurrencyId),
    #[error("the exchange would leave {client}, active for {resource}, with a negative value {value:.3} for it")]
    NegativeRights {
        client: CurrencyId,
        resource: Resource,
        value: f64,
    },
    /// Process events (a new process, an exit, a change of uid, activity) are facts the daemon
    /// observes, never requests from a client.
    #[error("permission denied: {what} is reported by the daemon only (root)")]
    NotRoot { what: String },
    #[error("currency name {name:?}: {why}")]
    Name { name: String, why: &'static str },
    #[error("unknown process {0}")]
    UnknownProcess(u32),
    #[error("unknown transfer {0}")]
    UnknownTransfer(TransferId),
    #[error(
        "nice: uid {uid}'s user currency holds {funding} base tickets of {resource}; X = {x} \
         must be below that, so that the user's other processes keep some"
    )]
    NiceAboveFunding {
        uid: u32,
        resource: Resource,
        x: i64,
        funding: i64,
    },
    #[error("policy: {field} {why}")]
    BadPolicy { field: &'static str, why: String },
    #[error("{0}")]
    Structure(String),
}

pub type Result<T> = std::result::Result<T, TicketsError>;
