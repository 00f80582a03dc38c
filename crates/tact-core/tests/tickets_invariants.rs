//! Property tests of the tickets model (spec tickets.md §3): random sequences of create,
//! destroy, issue, hard issue, hard total, revoke, set amount, (de)activate and exchange
//! create/undo, with the invariants checked after every step against the exact evaluator.
//! A façade step follows each operation, as the daemon's would: it undoes the exchanges the model
//! reports until none is left, each undo checked as a step of its own.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use tact_core::tickets::exact::{evaluate, to_f64, BigRational, ExactValuation};
use tact_core::tickets::{
    Broker, CurrencyId, CurrencyKind, ExchangeId, Kind, Mode, Model, PerResource, PrincipalId,
    Resource, TicketsError,
};

#[derive(Debug, Clone)]
enum Op {
    Create {
        client: bool,
    },
    Destroy(usize),
    Issue {
        issuer: usize,
        holder: usize,
        r: usize,
        amount: i64,
        hard: bool,
    },
    HardTotal {
        c: usize,
        r: usize,
        total: i64,
    },
    Revoke(usize),
    SetAmount(usize, i64),
    SetActive {
        c: usize,
        r: usize,
        on: bool,
    },
    Exchange {
        a: usize,
        b: usize,
        r1: usize,
        r2: usize,
        x: i64,
        y: i64,
    },
    Undo(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let i = || 0usize..64;
    let r = || 0usize..3;
    // Mostly positive amounts; zero and negatives are there to be refused.
    let amount = || prop_oneof![9 => 1i64..400, 1 => -5i64..=0];
    prop_oneof![
        2 => any::<bool>().prop_map(|client| Op::Create { client }),
        1 => i().prop_map(Op::Destroy),
        6 => (i(), i(), r(), amount(), any::<bool>()).prop_map(|(issuer, holder, r, amount, hard)| {
            Op::Issue { issuer, holder, r, amount, hard }
        }),
        1 => (i(), r(), -10i64..2000).prop_map(|(c, r, total)| Op::HardTotal { c, r, total }),
        2 => i().prop_map(Op::Revoke),
        2 => (i(), amount()).prop_map(|(t, a)| Op::SetAmount(t, a)),
        5 => (i(), r(), any::<bool>()).prop_map(|(c, r, on)| Op::SetActive { c, r, on }),
        3 => (i(), i(), r(), r(), 1i64..300, 1i64..300)
            .prop_map(|(a, b, r1, r2, x, y)| Op::Exchange { a, b, r1, r2, x, y }),
        1 => i().prop_map(Op::Undo),
    ]
}

/// What an operation touched, which decides the checks that compare before and after.
#[derive(Debug, Clone, Copy)]
enum Scope {
    /// A currency came or went: only the state invariants apply.
    Structure,
    /// Only `owner`'s own tickets for `r` changed (issue, revoke, amount, hard total).
    Confined { owner: CurrencyId, r: Resource },
    /// Only which clients compete for `r` changed.
    Activity { r: Resource },
    /// An exchange between `a` and `b` on `r1` and `r2` was created or undone.
    Exchange {
        a: CurrencyId,
        b: CurrencyId,
        r1: Resource,
        r2: Resource,
    },
}

fn broker() -> Broker {
    Broker {
        owner: 1000,
        group: 1000,
        mode: Mode::OWNER_ONLY,
    }
}

fn pick<T: Copy>(items: &[T], i: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[i % items.len()])
}

fn visible(m: &Model) -> Vec<CurrencyId> {
    m.currencies()
        .filter(|c| !c.is_hidden())
        .map(|c| c.id)
        .collect()
}

fn clients(m: &Model) -> Vec<CurrencyId> {
    m.currencies()
        .filter(|c| c.is_client())
        .map(|c| c.id)
        .collect()
}

/// The currency whose tickets a ticket of `issuer` belongs to: a `soft_tix`'s owner.
fn owner(m: &Model, issuer: CurrencyId) -> CurrencyId {
    match m.currency(issuer).unwrap().kind {
        CurrencyKind::SoftTix { of } => of,
        _ => issuer,
    }
}

fn apply(m: &mut Model, op: &Op) -> (Result<(), TicketsError>, Scope) {
    let cs = visible(m);
    let ts: Vec<_> = m.tickets().map(|t| t.id).collect();
    let xs: Vec<_> = m.exchanges().map(|x| x.id).collect();
    let res = |r: usize| Resource::ALL[r];
    let ks = clients(m);
    let c = |i: usize| pick(&cs, i).unwrap();
    // Only clients compete and trade; one pick in eight names any currency, to be refused.
    let k = |i: usize| {
        if i % 8 == 7 {
            c(i / 8)
        } else {
            pick(&ks, i).unwrap_or(c(i))
        }
    };
    match *op {
        Op::Create { client } => {
            let kind = if client {
                CurrencyKind::Client {
                    principal: PrincipalId(cs.len() as u64),
                }
            } else {
                CurrencyKind::Pure
            };
            let r = m.create_currency(kind, "c", broker()).map(|_| ());
            (r, Scope::Structure)
        }
        Op::Destroy(i) => (m.destroy(c(i)), Scope::Structure),
        Op::Issue {
            issuer,
            holder,
            r,
            amount,
            hard,
        } => {
            let kind = if hard { Kind::Hard } else { Kind::Soft };
            let (issuer, holder, r) = (c(issuer), c(holder), res(r));
            let out = m.issue(issuer, holder, r, amount, kind).map(|_| ());
            (out, Scope::Confined { owner: issuer, r })
        }
        Op::HardTotal { c: i, r, total } => {
            let (owner, r) = (c(i), res(r));
            (
                m.set_hard_total(owner, r, total),
                Scope::Confined { owner, r },
            )
        }
        Op::Revoke(i) | Op::SetAmount(i, _) => {
            let Some(t) = pick(&ts, i) else {
                return (Ok(()), Scope::Structure);
            };
            let ticket = *m.ticket(t).unwrap();
            let scope = match ticket.exchange.map(|x| *m.exchange(x).unwrap()) {
                Some(x) => Scope::Exchange {
                    a: x.a,
                    b: x.b,
                    r1: x.give.0,
                    r2: x.get.0,
                },
                None => Scope::Confined {
                    owner: owner(m, ticket.issuer),
                    r: ticket.resource,
                },
            };
            let out = match *op {
                Op::SetAmount(_, amount) => m.set_amount(t, amount),
                _ => m.revoke(t),
            };
            (out, scope)
        }
        Op::SetActive { c: i, r, on } => {
            let r = res(r);
            (m.set_active(k(i), r, on), Scope::Activity { r })
        }
        Op::Exchange { a, b, r1, r2, x, y } => {
            let (a, b, r1, r2) = (k(a), k(b), res(r1), res(r2));
            let out = m.create_exchange(a, (r1, x), b, (r2, y)).map(|_| ());
            (out, Scope::Exchange { a, b, r1, r2 })
        }
        Op::Undo(i) => match pick(&xs, i) {
            Some(x) => undo(m, x),
            None => (Ok(()), Scope::Structure),
        },
    }
}

fn undo(m: &mut Model, x: ExchangeId) -> (Result<(), TicketsError>, Scope) {
    let e = *m.exchange(x).unwrap();
    let scope = Scope::Exchange {
        a: e.a,
        b: e.b,
        r1: e.give.0,
        r2: e.get.0,
    };
    (m.undo_exchange(x), scope)
}

/// The exact valuations of every resource, now and with everyone competing.
struct Snapshot {
    json: String,
    now: Vec<ExactValuation>,
    all: Vec<ExactValuation>,
}

fn snapshot(m: &Model) -> Snapshot {
    Snapshot {
        json: serde_json::to_string(m).unwrap(),
        now: Resource::ALL.map(|r| evaluate(m, r, false)).to_vec(),
        all: Resource::ALL.map(|r| evaluate(m, r, true)).to_vec(),
    }
}

fn zero() -> BigRational {
    BigRational::from_integer(0.into())
}

fn q(n: i64) -> BigRational {
    BigRational::from_integer(n.into())
}

/// Σ|amount| of r's base tickets, the scale of r's values.
fn scale(m: &Model, r: Resource) -> f64 {
    m.tickets()
        .filter(|t| t.resource == r && t.issuer == CurrencyId::BASE)
        .map(|t| t.amount.unsigned_abs() as f64)
        .sum::<f64>()
        .max(1.0)
}

/// Currencies reachable from `from` (itself included) along edges of `r`, or of every resource;
/// `skip` is treated as absent.
fn reach(
    m: &Model,
    from: CurrencyId,
    r: Option<Resource>,
    skip: Option<CurrencyId>,
) -> BTreeSet<CurrencyId> {
    let mut seen = BTreeSet::from([from]);
    let mut queue = VecDeque::from([from]);
    while let Some(c) = queue.pop_front() {
        for t in &m.currency(c).unwrap().issued {
            let t = m.ticket(*t).unwrap();
            if (r.is_none() || r == Some(t.resource))
                && Some(t.holder) != skip
                && seen.insert(t.holder)
            {
                queue.push_back(t.holder);
            }
        }
    }
    seen
}

/// The invariants that hold of any state (1, 2, 5, 7, 8, 9, 13).
fn check_state(m: &Model) -> Result<(), TestCaseError> {
    m.check_exact().map_err(TestCaseError::fail)?; // 13
    let pending = m.exchanges_to_undo();

    // 9: the funding graph over all resources is a DAG.
    let mut indegree: BTreeMap<CurrencyId, usize> = m.currencies().map(|c| (c.id, 0)).collect();
    for t in m.tickets() {
        *indegree.get_mut(&t.holder).unwrap() += 1;
    }
    let mut ready: Vec<CurrencyId> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(c, _)| *c)
        .collect();
    let mut sorted = 0;
    while let Some(c) = ready.pop() {
        sorted += 1;
        for t in &m.currency(c).unwrap().issued {
            let h = m.ticket(*t).unwrap().holder;
            let d = indegree.get_mut(&h).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(h);
            }
        }
    }
    prop_assert_eq!(sorted, indegree.len(), "the funding graph has a cycle");

    // 7: exchanges have all four tickets, and exchange tickets belong to live exchanges.
    for x in m.exchanges() {
        for t in x.tickets {
            prop_assert_eq!(m.ticket(t).map(|t| t.exchange), Ok(Some(x.id)));
        }
    }
    for t in m.tickets() {
        if let Some(x) = t.exchange {
            prop_assert!(m.exchange(x).unwrap().tickets.contains(&t.id));
        } else {
            prop_assert!(t.amount >= 0, "only exchange tickets are negative");
        }
    }

    for r in Resource::ALL {
        let now = evaluate(m, r, false);
        let tol = 1e-9 * scale(m, r);
        let competing: Vec<CurrencyId> = clients(m)
            .into_iter()
            .filter(|k| m.currency(*k).unwrap().competing[r])
            .collect();

        // 1: conservation, exactly; shares sum to 1.
        let total_rights = competing
            .iter()
            .fold(zero(), |s, k| s + now.rights[k].clone());
        let active_base = m
            .tickets()
            .filter(|t| t.resource == r && t.issuer == CurrencyId::BASE && now.active[&t.holder])
            .fold(zero(), |s, t| s + q(t.amount));
        prop_assert_eq!(&total_rights, &active_base, "conservation on {}", r);
        let shares: f64 = m.shares(r).iter().map(|(_, s)| s).sum();
        if to_f64(&total_rights) > tol {
            prop_assert!(
                (shares - 1.0).abs() < 1e-9,
                "shares of {} sum to {}",
                r,
                shares
            );
        }

        // 5: hard totals hold, and an active hard ticket is worth at least amount/H · V.
        for c in m.currencies() {
            let Some(hard) = c.hard[r] else { continue };
            let own: Vec<_> = c
                .issued
                .iter()
                .map(|t| m.ticket(*t).unwrap())
                .filter(|t| t.resource == r && t.exchange.is_none())
                .collect();
            prop_assert!(own.iter().all(|t| t.kind == Kind::Hard));
            prop_assert_eq!(own.iter().map(|t| t.amount).sum::<i64>(), hard.total);
            let v = &now.v[&c.id];
            if c.id != CurrencyId::BASE && *v >= zero() {
                for t in own.iter().filter(|t| now.active[&t.holder] && t.amount > 0) {
                    let worth = q(t.amount) * v.clone() / q(now.a[&c.id]);
                    prop_assert!(worth >= q(t.amount) * v.clone() / q(hard.total));
                }
            }
        }

        if pending.is_empty() {
            // 8: no active client has negative rights.
            for k in &competing {
                prop_assert!(to_f64(&now.rights[k]) >= -tol, "R({},{}) < 0", k, r);
            }
            // 2: the clients funded only through C share at most V(C).
            for c in m.currencies().filter(|c| c.id != CurrencyId::BASE) {
                let from_c = reach(m, c.id, Some(r), None);
                let around = reach(m, CurrencyId::BASE, Some(r), Some(c.id));
                let inside = competing
                    .iter()
                    .filter(|k| from_c.contains(k) && !around.contains(k))
                    .fold(zero(), |s, k| s + now.rights[k].clone());
                prop_assert!(inside <= now.v[&c.id], "upper limit of {} on {}", c.id, r);
            }
        }
    }
    Ok(())
}

/// The indices of the resources an operation on `touched` must leave alone.
fn untouched(touched: &[Resource]) -> Vec<usize> {
    Resource::ALL
        .into_iter()
        .filter(|r| !touched.contains(r))
        .map(Resource::index)
        .collect()
}

/// 4: resources other than `touched` keep their valuations, now and with everyone competing.
fn independent(before: &Snapshot, after: &Snapshot, touched: &[Resource]) -> bool {
    untouched(touched).into_iter().all(|i| {
        same_valuation(&before.now[i], &after.now[i])
            && same_valuation(&before.all[i], &after.all[i])
    })
}

/// Every currency of `before` has the same exact valuation after (new currencies aside).
fn same_valuation(before: &ExactValuation, after: &ExactValuation) -> bool {
    before
        .active
        .iter()
        .all(|(c, a)| after.active.get(c) == Some(a))
        && before.a.iter().all(|(c, a)| after.a.get(c) == Some(a))
        && before.v.iter().all(|(c, v)| after.v.get(c) == Some(v))
        && before
            .rights
            .iter()
            .all(|(c, v)| after.rights.get(c) == Some(v))
}

/// The invariants about one operation (3, 4, 6, 9's "a refusal changes nothing", 2's "issuing
/// never raises V(C)").
fn check_step(
    before: &Snapshot,
    pre: &Model,
    m: &Model,
    out: &Result<(), TicketsError>,
    scope: Scope,
) -> Result<(), TestCaseError> {
    if out.is_err() {
        prop_assert_eq!(&serde_json::to_string(m).unwrap(), &before.json);
        return Ok(());
    }
    let after = snapshot(m);
    match scope {
        Scope::Structure => {}
        Scope::Activity { r } => {
            prop_assert!(independent(before, &after, &[r]), "4: {:?}", scope);
        }
        Scope::Confined { owner, r } => {
            prop_assert!(independent(before, &after, &[r]), "4: {:?}", scope);
            let i = r.index();
            let mut reached = reach(pre, owner, None, None);
            reached.extend(reach(m, owner, None, None));
            for (b, a) in [
                (&before.now[i], &after.now[i]),
                (&before.all[i], &after.all[i]),
            ] {
                if b.active[&owner] != a.active[&owner] {
                    continue;
                }
                // 2: the owner's value does not move with its own tickets (the base's value is
                // the sum of its tickets, by definition).
                if owner != CurrencyId::BASE {
                    prop_assert_eq!(&b.v[&owner], &a.v[&owner], "2: V({}) moved", owner);
                }
                // 3: clients the owner cannot reach keep their rights exactly.
                for (k, rights) in &b.rights {
                    if !reached.contains(k) {
                        prop_assert_eq!(Some(rights), a.rights.get(k), "3: R({}) moved", k);
                    }
                }
            }
        }
        Scope::Exchange { a, b, r1, r2 } => {
            prop_assert!(independent(before, &after, &[r1, r2]), "4: {:?}", scope);
            let mut reached = reach(pre, a, None, None);
            reached.extend(reach(pre, b, None, None));
            for r in [r1, r2] {
                let i = r.index();
                for (bv, av) in [
                    (&before.now[i], &after.now[i]),
                    (&before.all[i], &after.all[i]),
                ] {
                    for (k, rights) in &bv.rights {
                        if !reached.contains(k) {
                            prop_assert_eq!(Some(rights), av.rights.get(k), "6: R({}) moved", k);
                        }
                    }
                }
                let sum = |v: &ExactValuation| v.rights.values().fold(zero(), |s, x| s + x.clone());
                prop_assert_eq!(sum(&before.all[i]), sum(&after.all[i]), "6: ΣR* on {}", r);
            }
        }
    }
    check_state(m)
}

fn run(m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let before = snapshot(m);
    let pre = m.clone();
    let (out, scope) = apply(m, op);
    check_step(&before, &pre, m, &out, scope)?;
    // The façade: undo what the model reports, one checked step at a time.
    for _ in 0..64 {
        let Some(&x) = m.exchanges_to_undo().first() else {
            return Ok(());
        };
        let before = snapshot(m);
        let pre = m.clone();
        let (out, scope) = undo(m, x);
        prop_assert!(out.is_ok());
        check_step(&before, &pre, m, &out, scope)?;
    }
    prop_assert!(
        m.exchanges_to_undo().is_empty(),
        "undoing exchanges did not settle"
    );
    Ok(())
}

/// A small funded start, so that short sequences reach interesting states.
fn start() -> Model {
    let mut m = Model::new(PerResource([1000, 4096, 1000]));
    let user = m
        .create_currency(CurrencyKind::Pure, "user", broker())
        .unwrap();
    for r in Resource::ALL {
        m.issue(CurrencyId::BASE, user, r, 1000, Kind::Soft)
            .unwrap();
    }
    for p in 0..3 {
        let k = m
            .create_currency(
                CurrencyKind::Client {
                    principal: PrincipalId(p),
                },
                "k",
                broker(),
            )
            .unwrap();
        let issuer = if p == 2 { CurrencyId::BASE } else { user };
        for r in Resource::ALL {
            m.issue(issuer, k, r, 100 * (p as i64 + 1), Kind::Soft)
                .unwrap();
            m.set_active(k, r, true).unwrap();
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(ops in proptest::collection::vec(op(), 1..48)) {
        let mut m = start();
        check_state(&m)?;
        for op in &ops {
            run(&mut m, op)?;
        }
        // A persisted model loads to the same valuation.
        let loaded: Model = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        for r in Resource::ALL {
            prop_assert_eq!(loaded.shares(r), m.shares(r));
        }
    }
}
