//! Compiling rights to kernel weights (spec §4 "Compiling").
//!
//! Cgroups form a tree and a process sits in one cgroup per hierarchy, so DAG funding, negative
//! tickets, exchanges and transfers cannot be expressed to the kernel as they are. Per resource,
//! [`layout`] chooses between
//!
//! - the **tree mirror**, when the resource's tickets form a soft-only tree with no exchanges,
//!   transfers or pooling: currencies become nested cgroups with sibling weights ∝ ticket amounts.
//!   The kernel counts only siblings with runnable work, which is exactly `A(C,r)`, and reacts
//!   at once;
//! - **flat**, otherwise: each client is a leaf weighted ∝ `R(k,r)` ([`quantize`] over the rights),
//!   rewritten on every activity change.
//!
//! [`quantize`] turns real rights into a kernel weight range and reports what rounding and
//! clamping cost, for `explain`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::types::{CurrencyId, Kind, Resource, Ticket, TicketId};

/// The integer weights a kernel knob accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightRange {
    pub min: u64,
    pub max: u64,
    /// What a cgroup starts with, and what tact writes back when it lets go.
    pub default: u64,
}

/// cgroup v1 `cpu.shares`.
pub const CPU_SHARES_V1: WeightRange = WeightRange {
    min: 2,
    max: 262_144,
    default: 1024,
};
/// cgroup v2 `cpu.weight`.
pub const CPU_WEIGHT_V2: WeightRange = WeightRange {
    min: 1,
    max: 10_000,
    default: 100,
};
/// cgroup v2 `io.weight` (iocost).
pub const IO_WEIGHT_V2: WeightRange = WeightRange {
    min: 1,
    max: 10_000,
    default: 100,
};
/// BFQ's `io.bfq.weight` (v2) and `blkio.bfq.weight` (v1).
pub const BFQ_WEIGHT: WeightRange = WeightRange {
    min: 1,
    max: 1000,
    default: 100,
};

/// One right compiled to a weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiled<K> {
    pub key: K,
    pub weight: u64,
    /// The weight was raised to the range's minimum: the right was too small (or ≤ 0) for the
    /// range, so the kernel will give it more than its share.
    pub clamped: bool,
    /// `(compiled share − intended share) / intended share`, shares taken over all the rights
    /// given together; `None` when the intended share is 0 (R ≤ 0), where it is undefined.
    pub share_error: Option<f64>,
}

/// `w = clamp(round(S·R), min, max)` for each right, with `S` mapping the largest right to
/// `range.max`; a right that is not a positive finite number gets `range.min`.
///
/// Scaling the largest right to the top of the range keeps every weight as large as it can be,
/// so rounding costs least: whenever `max R / min R ≤ (max/min)/100`, every weight is at least
/// `100·min` and no share is off by more than 1% of itself.
pub fn quantize<K: Clone>(rights: &[(K, f64)], range: WeightRange) -> Vec<Compiled<K>> {
    let positive = |r: f64| r.is_finite() && r > 0.0;
    let largest = rights
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| positive(*r))
        .fold(0.0, f64::max);
    let total: f64 = rights
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| positive(*r))
        .sum();
    let weights: Vec<(u64, bool)> = rights
        .iter()
        .map(|(_, r)| {
            if !positive(*r) {
                return (range.min, true);
            }
            let w = (range.max as f64 * (*r / largest)).round();
            if w < range.min as f64 {
                (range.min, true)
            } else {
                // S·R ≤ S·max R = range.max, so only the bottom of the range can clamp.
                (w as u64, false)
            }
        })
        .collect();
    let weight_total: u64 = weights.iter().map(|(w, _)| w).sum();
    rights
        .iter()
        .zip(weights)
        .map(|((key, r), (weight, clamped))| Compiled {
            key: key.clone(),
            weight,
            clamped,
            share_error: positive(*r).then(|| {
                let intended = *r / total;
                let compiled = weight as f64 / weight_total as f64;
                (compiled - intended) / intended
            }),
        })
        .collect()
}

/// How one resource is laid out in cgroups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "layout", rename_all = "snake_case")]
pub enum Layout {
    /// Nested cgroups, one per currency; each issuer's children are weighted ∝ the amounts of
    /// the tickets it issued them. Groups are ordered by issuer, children by holder.
    TreeMirror { groups: Vec<SiblingGroup> },
    /// One leaf per client weighted ∝ its rights; `why` is the first ticket that rules the tree
    /// mirror out.
    Flat { why: FlatReason },
}

/// The children an issuer funds, as they are weighted under its cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiblingGroup {
    pub parent: CurrencyId,
    pub children: Vec<Compiled<CurrencyId>>,
}

/// Why a resource cannot be mirrored as a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum FlatReason {
    /// A hard ticket is a fixed fraction of its issuer, which sibling weights cannot hold.
    Hard { ticket: TicketId },
    /// An exchange ticket, which may be negative and crosses the tree.
    Exchange { ticket: TicketId },
    /// A transfer: a ticket issued by a client currency.
    Transfer { ticket: TicketId },
    /// Pooled funding: the holder has more than one issuer, but a cgroup has one parent.
    Pooled { holder: CurrencyId },
}

/// Chooses the layout of `resource` from the model's tickets (tickets of other resources are
/// ignored). `is_client` tells client currencies, whose issues are transfers, from pure ones.
/// The tree mirror's weights are quantized into `range` per sibling group.
pub fn layout(
    tickets: &[Ticket],
    resource: Resource,
    is_client: impl Fn(CurrencyId) -> bool,
    range: WeightRange,
) -> Layout {
    let mut holders = BTreeSet::new();
    let mut groups: BTreeMap<CurrencyId, Vec<(CurrencyId, f64)>> = BTreeMap::new();
    for t in tickets.iter().filter(|t| t.resource == resource) {
        let why = if t.exchange.is_some() {
            Some(FlatReason::Exchange { ticket: t.id })
        } else if t.kind == Kind::Hard {
            Some(FlatReason::Hard { ticket: t.id })
        } else if is_client(t.issuer) {
            Some(FlatReason::Transfer { ticket: t.id })
        } else if !holders.insert(t.holder) {
            Some(FlatReason::Pooled { holder: t.holder })
        } else {
            None
        };
        if let Some(why) = why {
            return Layout::Flat { why };
        }
        groups
            .entry(t.issuer)
            .or_default()
            .push((t.holder, t.amount as f64));
    }
    Layout::TreeMirror {
        groups: groups
            .into_iter()
            .map(|(parent, mut children)| {
                children.sort_by_key(|(holder, _)| *holder);
                SiblingGroup {
                    parent,
                    children: quantize(&children, range),
                }
            })
            .collect(),
    }
}
