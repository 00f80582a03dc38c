//! Brokers: who may do what to a currency (spec §2.6, the report's Table 1).
//!
//! This is the access-control oracle only. It looks at owners, groups and mode bits; the
//! structural rules (acyclic funding, an indestructible base, hard totals, exchange tickets only
//! from the dealer) are the model's, and bind the superuser too. The model calls [`check`] before
//! changing anything, so a denied operation changes nothing (§3 invariant 10).

use std::fmt;

use super::error::{Result, TicketsError};
use super::types::{Broker, Caller, CurrencyId, Perm};

/// An operation as the broker table sees it: what is done, and to which currencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Create a currency owned by `uid` and `gid`.
    CreateCurrency {
        uid: u32,
        gid: u32,
    },
    Destroy(CurrencyId),
    /// Fund `holder` with a new ticket issued by `issuer`.
    Fund {
        holder: CurrencyId,
        issuer: CurrencyId,
    },
    /// Take `issuer`'s tickets away from `holder`.
    Unfund {
        holder: CurrencyId,
        issuer: CurrencyId,
    },
    /// Issue (or resize, or make hard) tickets of the currency.
    Issue(CurrencyId),
    /// Revoke tickets of the currency.
    Revoke(CurrencyId),
    /// Offer, or cancel, an exchange of the client's rights at the dealer (§2.9): only the
    /// client's owner may, not whoever the mode lets fund or change it.
    Exchange(CurrencyId),
    /// Replace the currency's broker (owner, group, mode), like chown/chgrp/chmod on a file.
    SetBroker {
        currency: CurrencyId,
        to: Broker,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::CreateCurrency { uid, gid } => {
                write!(f, "create a currency for uid {uid} gid {gid}")
            }
            Op::Destroy(c) => write!(f, "destroy {c}"),
            Op::Fund { holder, issuer } => write!(f, "fund {holder} from {issuer}"),
            Op::Unfund { holder, issuer } => write!(f, "take {issuer}'s tickets from {holder}"),
            Op::Issue(c) => write!(f, "issue tickets of {c}"),
            Op::Revoke(c) => write!(f, "revoke tickets of {c}"),
            Op::Exchange(c) => write!(f, "offer or cancel an exchange for {c}"),
            Op::SetBroker { currency, to } => write!(
                f,
                "give {currency} to uid {} gid {} with mode {}",
                to.owner, to.group, to.mode
            ),
        }
    }
}

/// Whether the broker's mode bits grant `perm` to `caller`, with UNIX file semantics: the owner
/// triplet applies if the caller is the owner, otherwise the group triplet if the currency's group
/// is among the caller's groups, otherwise the other triplet. Only the first class that applies
/// counts, so an owner whose own triplet lacks a bit is refused even when the group or other
/// triplet has it (a user may lock themself out of a currency, as with `chmod 077`).
///
/// `caller.gids` must hold the primary group as well as the supplementary ones. The superuser
/// gets no special treatment here; [`check`] applies the override.
pub fn has(broker: &Broker, caller: &Caller, perm: Perm) -> bool {
    if caller.uid == broker.owner {
        broker.mode.owner_has(perm)
    } else if caller.gids.contains(&broker.group) {
        broker.mode.group_has(perm)
    } else {
        broker.mode.other_has(perm)
    }
}

/// Whether `caller` may perform `op`, per the broker table of §2.6. `brokers` looks up a
/// currency's broker (`None`: no such currency).
///
/// Every currency `op` names must exist, even for the superuser, who otherwise passes every
/// check. The refusal names the operation, the permission missing and the currency it is missing
/// on; when funding lacks both bits it names the holder's.
pub fn check(
    op: &Op,
    caller: &Caller,
    brokers: impl Fn(CurrencyId) -> Option<Broker>,
) -> Result<()> {
    let broker = |c: CurrencyId| brokers(c).ok_or(TicketsError::UnknownCurrency(c));
    let root = caller.is_root();
    let need = |perm: Perm, on: CurrencyId, b: &Broker| {
        if root || has(b, caller, perm) {
            Ok(())
        } else {
            Err(TicketsError::Denied {
                what: op.to_string(),
                perm,
                on,
            })
        }
    };
    match *op {
        Op::CreateCurrency { uid, gid } => identity(op, caller, uid, gid),
        Op::Destroy(c) => need(Perm::Change, c, &broker(c)?),
        Op::Fund { holder, issuer } => {
            let (a, b) = (broker(holder)?, broker(issuer)?);
            need(Perm::Fund, holder, &a)?;
            need(Perm::Issue, issuer, &b)
        }
        Op::Unfund { holder, issuer } => {
            let (a, b) = (broker(holder)?, broker(issuer)?);
            if root || has(&a, caller, Perm::Change) || has(&b, caller, Perm::Issue) {
                Ok(())
            } else {
                Err(TicketsError::DeniedEither {
                    what: op.to_string(),
                    perm: Perm::Change,
                    on: holder,
                    or_perm: Perm::Issue,
                    or_on: issuer,
                })
            }
        }
        Op::Issue(c) | Op::Revoke(c) => need(Perm::Issue, c, &broker(c)?),
        Op::Exchange(c) => owner(op, caller, c, &broker(c)?),
        Op::SetBroker { currency, to } => {
            owner(op, caller, currency, &broker(currency)?)?;
            // As chown on a file: an owner may change the group to one of their own and the mode
            // at will, but cannot hand the currency to another uid.
            identity(op, caller, to.owner, to.group)
        }
    }
}

/// The caller must be `uid` and in group `gid` (or root).
fn identity(op: &Op, caller: &Caller, uid: u32, gid: u32) -> Result<()> {
    if caller.is_root() || (caller.uid == uid && caller.gids.contains(&gid)) {
        Ok(())
    } else {
        Err(TicketsError::NotIdentity {
            what: op.to_string(),
            uid,
            gid,
        })
    }
}

/// The caller must own `on` (or be root).
fn owner(op: &Op, caller: &Caller, on: CurrencyId, b: &Broker) -> Result<()> {
    if caller.is_root() || caller.uid == b.owner {
        Ok(())
    } else {
        Err(TicketsError::NotOwner {
            what: op.to_string(),
            on,
            owner: b.owner,
        })
    }
}
