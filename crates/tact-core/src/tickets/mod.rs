//! tickets: one model of resource rights for CPU, memory and disk (Sullivan & Seltzer, Harvard
//! TR-13-99; spec `tickets.md`), extending lottery scheduling's tickets and currencies.
//!
//! - [`types`]: resources, identifiers, tickets, brokers' modes and callers.
//! - [`error`]: every refusal, naming what is wrong; a refused operation changes nothing.
//! - [`arena`]: the v1 memory arena's feedback rule: floors kept by lowering siblings' limits.
//! - [`broker`]: who may do what to a currency (owner, group and mode bits).
//! - [`dealer`]: the queue that matches offers to exchange rights between resources.
//! - [`compile`]: rights to kernel weights, as a tree of cgroups or flat.
//! - [`model`]: the [`Model`]: currencies, tickets, who competes; structural operations.
//! - [`hard`]: hard tickets, hard totals and the hidden `soft_tix` currencies.
//! - [`exchange`]: the four linked base tickets of an exchange.
//! - [`value`]: the cached valuation (`A`, `V`, `R`, `R*`, shares).
//! - [`exact`]: the exact-rational reference evaluator the cache is checked against.
//! - [`explain`]: every funding path of a client, factor by factor.
//! - [`system`]: the [`TicketSystem`] façade the daemon holds: access control, the default
//!   policy, nice, transfers and exchanges through the dealer.

pub mod arena;
pub mod broker;
pub mod compile;
pub mod dealer;
pub mod error;
pub mod exact;
pub mod exchange;
pub mod explain;
pub mod hard;
pub mod model;
pub mod system;
pub mod types;
pub mod value;

pub use error::TicketsError;
pub use exchange::Exchange;
pub use explain::{Explanation, FundingPath, Hop};
pub use model::{Currency, HardTotal, Model, DEFAULT_HARD_TOTAL, PARENS_RESERVED, SELF_TICKET};
pub use system::{Done, TicketSystem};
pub use types::{
    Broker, Caller, CurrencyId, CurrencyKind, ExchangeId, Kind, Mode, OfferId, PerResource, Perm,
    PrincipalId, Resource, Ticket, TicketId,
};
