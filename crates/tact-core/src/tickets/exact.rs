//! The reference evaluator (spec tickets.md §2.2, §3 invariant 13): the same valuation as
//! [`super::value`], computed independently in exact rationals by memoized recursion over the
//! model's own maps, for tests and for [`Model::check_exact`]. It is slow (big integers, one
//! map lookup per step) and meant for checking, not for serving queries.

use std::collections::BTreeMap;

pub use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};

use super::model::{Model, SELF_TICKET};
use super::types::{CurrencyId, Resource, Ticket};
use super::value::Competing;

/// Relative agreement required between the cached and exact valuations. Values under one ticket
/// are compared absolutely, so that a value that is exactly 0 may come out as 1e-14 in `f64`.
pub const AGREEMENT: f64 = 1e-9;

/// One resource's valuation, exact.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactValuation {
    pub active: BTreeMap<CurrencyId, bool>,
    pub a: BTreeMap<CurrencyId, i64>,
    pub v: BTreeMap<CurrencyId, BigRational>,
    /// Clients only.
    pub rights: BTreeMap<CurrencyId, BigRational>,
}

/// The valuation of `r` with the clients competing now, or with all of them (`R*`).
pub fn evaluate(model: &Model, r: Resource, everyone_competes: bool) -> ExactValuation {
    // The self tickets of competing clients, per issuer.
    let mut own = BTreeMap::new();
    for k in model.currencies().filter(|k| k.is_client()) {
        if everyone_competes || k.competing[r] {
            *own.entry(model.soft_issuer(k.id, r)).or_insert(0) += SELF_TICKET;
        }
    }
    let mut e = Evaluator {
        model,
        r,
        everyone_competes,
        own,
        active: BTreeMap::new(),
        a: BTreeMap::new(),
        v: BTreeMap::new(),
    };
    let mut out = ExactValuation {
        active: BTreeMap::new(),
        a: BTreeMap::new(),
        v: BTreeMap::new(),
        rights: BTreeMap::new(),
    };
    for c in model.currencies() {
        out.active.insert(c.id, e.active(c.id));
        out.a.insert(c.id, e.a(c.id));
        out.v.insert(c.id, e.v(c.id));
        if c.is_client() {
            out.rights.insert(c.id, e.rights(c.id));
        }
    }
    out
}

/// `q` as the nearest `f64`.
pub fn to_f64(q: &BigRational) -> f64 {
    q.to_f64().unwrap_or(f64::NAN)
}

fn rational(n: i64) -> BigRational {
    BigRational::from_integer(n.into())
}

struct Evaluator<'m> {
    model: &'m Model,
    r: Resource,
    everyone_competes: bool,
    own: BTreeMap<CurrencyId, i64>,
    active: BTreeMap<CurrencyId, bool>,
    a: BTreeMap<CurrencyId, i64>,
    v: BTreeMap<CurrencyId, BigRational>,
}

impl<'m> Evaluator<'m> {
    fn issued(&self, c: CurrencyId) -> impl Iterator<Item = &'m Ticket> + 'm {
        let (model, r) = (self.model, self.r);
        model.currencies[&c]
            .issued
            .iter()
            .map(move |t| &model.tickets[t])
            .filter(move |t| t.resource == r)
    }

    /// The amount of the competing self tickets `c` issues.
    fn own_tickets(&self, c: CurrencyId) -> i64 {
        self.own.get(&c).copied().unwrap_or(0)
    }

    fn competes(&self, k: CurrencyId) -> bool {
        self.everyone_competes || self.model.currencies[&k].competing[self.r]
    }

    fn active(&mut self, c: CurrencyId) -> bool {
        if let Some(&a) = self.active.get(&c) {
            return a;
        }
        let mut active = self.own_tickets(c) > 0;
        for t in self.issued(c) {
            if !active && t.amount != 0 && self.active(t.holder) {
                active = true;
            }
        }
        self.active.insert(c, active);
        active
    }

    fn a(&mut self, c: CurrencyId) -> i64 {
        if let Some(&a) = self.a.get(&c) {
            return a;
        }
        let mut a = self.own_tickets(c);
        for t in self.issued(c) {
            if self.active(t.holder) {
                a = a.saturating_add(t.amount);
            }
        }
        self.a.insert(c, a);
        a
    }

    fn v(&mut self, c: CurrencyId) -> BigRational {
        if let Some(v) = self.v.get(&c) {
            return v.clone();
        }
        let v = if c == CurrencyId::BASE {
            rational(self.a(c))
        } else {
            let model = self.model;
            let mut v = BigRational::zero();
            for t in &model.currencies[&c].backing {
                let t = &model.tickets[t];
                if t.resource == self.r && self.active(c) {
                    v += self.worth(t.issuer, t.amount);
                }
            }
            v
        };
        self.v.insert(c, v.clone());
        v
    }

    /// The value of an active ticket.
    fn worth(&mut self, issuer: CurrencyId, amount: i64) -> BigRational {
        if issuer == CurrencyId::BASE {
            return rational(amount);
        }
        let a = self.a(issuer);
        if a == 0 {
            return BigRational::zero();
        }
        rational(amount) * self.v(issuer) / rational(a)
    }

    fn rights(&mut self, k: CurrencyId) -> BigRational {
        if !self.competes(k) {
            return BigRational::zero();
        }
        self.worth(self.model.soft_issuer(k, self.r), SELF_TICKET)
    }
}

impl Model {
    /// Compares every cached activity, `V`, `A`, `R` and `R*` with the exact evaluator
    /// (invariant 13); the error names the first disagreement.
    pub fn check_exact(&self) -> Result<(), String> {
        for r in Resource::ALL {
            for (who, everyone) in [(Competing::Now, false), (Competing::Everyone, true)] {
                let exact = evaluate(self, r, everyone);
                let cached = self.valuation(r, who);
                let ids = &self.layout(r).ids;
                let label = |c: &CurrencyId, what: &str| format!("{what}({c},{r}) [{who:?}]");
                for (i, c) in ids.iter().enumerate() {
                    if cached.active[i] != exact.active[c] {
                        return Err(format!(
                            "{}: cached {}",
                            label(c, "active"),
                            cached.active[i]
                        ));
                    }
                    if cached.a[i] != exact.a[c] {
                        return Err(format!(
                            "{}: cached {} exact {}",
                            label(c, "A"),
                            cached.a[i],
                            exact.a[c]
                        ));
                    }
                    agree(cached.v[i], &exact.v[c])
                        .map_err(|e| format!("{}: {e}", label(c, "V")))?;
                    if let Some(rights) = exact.rights.get(c) {
                        agree(cached.rights[i], rights)
                            .map_err(|e| format!("{}: {e}", label(c, "R")))?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn agree(cached: f64, exact: &BigRational) -> Result<(), String> {
    let e = to_f64(exact);
    if (cached - e).abs() <= AGREEMENT * e.abs().max(1.0) {
        Ok(())
    } else {
        Err(format!("cached {cached} exact {e}"))
    }
}
