//! The broker table of spec tickets.md §2.6: every row, UNIX class selection, the superuser's
//! override, and (invariant 10) that `check` allows exactly what a naive oracle allows.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tact_core::tickets::broker::{check, has, Op};
use tact_core::tickets::{Broker, Caller, CurrencyId, Perm, TicketsError};

const C1: CurrencyId = CurrencyId(1);
const C2: CurrencyId = CurrencyId(2);
const C3: CurrencyId = CurrencyId(3);
const MISSING: CurrencyId = CurrencyId(9);

fn broker(owner: u32, group: u32, mode: &str) -> Broker {
    Broker {
        owner,
        group,
        mode: mode.parse().unwrap(),
    }
}

/// c1: alice's, her group may fund it. c2: bob's, anyone may issue from it. c3: carol's, with her
/// own triplet empty and everyone else's full.
fn brokers(c: CurrencyId) -> Option<Broker> {
    match c.0 {
        1 => Some(broker(1000, 100, "fci/f--/---")),
        2 => Some(broker(1001, 100, "fci/---/--i")),
        3 => Some(broker(1002, 200, "---/fci/fci")),
        _ => None,
    }
}

fn user(uid: u32, gids: &[u32]) -> Caller {
    Caller {
        uid,
        gids: gids.to_vec(),
    }
}

#[test]
fn every_row_of_the_broker_table() {
    let alice = user(1000, &[100]);
    let bob = user(1001, &[100]);
    let carol = user(1002, &[200]);
    let dave = user(1003, &[300]);
    let root = Caller::root();
    let ok = "ok";
    let rows: Vec<(Op, &Caller, &str)> =
        vec![
        // create a currency for (uid, gid): both that uid and that gid
        (Op::CreateCurrency { uid: 1000, gid: 100 }, &alice, ok),
        (
            Op::CreateCurrency { uid: 1000, gid: 200 },
            &alice,
            "permission denied: create a currency for uid 1000 gid 200 needs to run as uid 1000 \
             in group 200 (or as root)",
        ),
        (
            Op::CreateCurrency { uid: 1001, gid: 100 },
            &alice,
            "permission denied: create a currency for uid 1001 gid 100 needs to run as uid 1001 \
             in group 100 (or as root)",
        ),
        (Op::CreateCurrency { uid: 1001, gid: 300 }, &root, ok),
        // destroy C: c on C
        (Op::Destroy(C1), &alice, ok),
        (
            Op::Destroy(C1),
            &bob,
            "permission denied: destroy c1 needs c (change) on currency c1",
        ),
        (
            Op::Destroy(C3),
            &carol,
            "permission denied: destroy c3 needs c (change) on currency c3",
        ),
        (Op::Destroy(C3), &dave, ok),
        (Op::Destroy(C1), &root, ok),
        (Op::Destroy(MISSING), &root, "unknown currency c9"),
        // fund A with B's tickets: f on A and i on B
        (Op::Fund { holder: C1, issuer: C2 }, &bob, ok),
        (
            Op::Fund { holder: C1, issuer: C2 },
            &alice,
            "permission denied: fund c1 from c2 needs i (issue) on currency c2",
        ),
        (
            Op::Fund { holder: C2, issuer: C1 },
            &dave,
            "permission denied: fund c2 from c1 needs f (fund) on currency c2",
        ),
        (Op::Fund { holder: C2, issuer: C1 }, &root, ok),
        (
            Op::Fund { holder: C1, issuer: MISSING },
            &alice,
            "unknown currency c9",
        ),
        // take B's tickets from A: c on A or i on B
        (Op::Unfund { holder: C1, issuer: C2 }, &alice, ok),
        (Op::Unfund { holder: C2, issuer: C1 }, &alice, ok),
        (Op::Unfund { holder: C2, issuer: C1 }, &bob, ok),
        (Op::Unfund { holder: C1, issuer: C2 }, &dave, ok),
        (
            Op::Unfund { holder: C1, issuer: C3 },
            &carol,
            "permission denied: take c3's tickets from c1 needs c (change) on currency c1 or \
             i (issue) on currency c3",
        ),
        (Op::Unfund { holder: C1, issuer: C3 }, &root, ok),
        // issue or revoke C's tickets: i on C
        (Op::Issue(C2), &dave, ok),
        (Op::Revoke(C2), &dave, ok),
        (
            Op::Issue(C1),
            &bob,
            "permission denied: issue tickets of c1 needs i (issue) on currency c1",
        ),
        (
            Op::Revoke(C1),
            &bob,
            "permission denied: revoke tickets of c1 needs i (issue) on currency c1",
        ),
        (Op::Revoke(C3), &root, ok),
        // offers and cancels at the dealer: the client's owner
        (Op::Exchange(C1), &alice, ok),
        (
            Op::Exchange(C1),
            &bob,
            "permission denied: offer or cancel an exchange for c1 needs the owner of c1 \
             (uid 1000) or root",
        ),
        (
            Op::Exchange(C3),
            &dave,
            "permission denied: offer or cancel an exchange for c3 needs the owner of c3 \
             (uid 1002) or root",
        ),
        (Op::Exchange(C3), &root, ok),
        // broker changes: the owner, keeping the currency to their own uid and groups
        (
            Op::SetBroker {
                currency: C1,
                to: broker(1000, 100, "fci/fci/---"),
            },
            &alice,
            ok,
        ),
        (
            Op::SetBroker {
                currency: C1,
                to: broker(1001, 100, "fci/---/---"),
            },
            &alice,
            "permission denied: give c1 to uid 1001 gid 100 with mode fci/---/--- needs to run \
             as uid 1001 in group 100 (or as root)",
        ),
        (
            Op::SetBroker {
                currency: C1,
                to: broker(1000, 200, "fci/---/---"),
            },
            &alice,
            "permission denied: give c1 to uid 1000 gid 200 with mode fci/---/--- needs to run \
             as uid 1000 in group 200 (or as root)",
        ),
        (
            Op::SetBroker {
                currency: C1,
                to: broker(1001, 100, "fci/---/---"),
            },
            &bob,
            "permission denied: give c1 to uid 1001 gid 100 with mode fci/---/--- needs the \
             owner of c1 (uid 1000) or root",
        ),
        (
            Op::SetBroker {
                currency: C1,
                to: broker(1001, 300, "---/---/---"),
            },
            &root,
            ok,
        ),
    ];
    for (op, caller, want) in rows {
        let got = match check(&op, caller, brokers) {
            Ok(()) => ok.to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(got, want, "{op:?} by uid {}", caller.uid);
    }
}

#[test]
fn the_first_matching_class_decides_as_for_unix_files() {
    let b = broker(1000, 100, "--i/f--/-c-");
    // The owner gets only the owner triplet, even in the currency's group.
    assert!(has(&b, &user(1000, &[100]), Perm::Issue));
    assert!(!has(&b, &user(1000, &[100]), Perm::Fund));
    assert!(!has(&b, &user(1000, &[100]), Perm::Change));
    // A group member (primary or supplementary) gets the group triplet, not other's.
    assert!(has(&b, &user(1001, &[300, 100]), Perm::Fund));
    assert!(!has(&b, &user(1001, &[300, 100]), Perm::Change));
    // Everyone else gets other's.
    assert!(has(&b, &user(1001, &[300]), Perm::Change));
    assert!(!has(&b, &user(1001, &[300]), Perm::Fund));
    // The bits alone do not let root in: the override is `check`'s.
    assert!(!has(&b, &Caller::root(), Perm::Fund));
    assert_eq!(
        check(
            &Op::Fund {
                holder: C1,
                issuer: C1
            },
            &Caller::root(),
            |_| Some(b)
        ),
        Ok(())
    );
}

#[test]
fn user_currencies_cannot_raise_their_own_funding() {
    // §2.6: base and user currencies default to fci/---/---; funding a user currency needs i on
    // the base, which only root has.
    let base = CurrencyId::BASE;
    let table = |c: CurrencyId| match c.0 {
        0 => Some(broker(0, 0, "fci/---/---")),
        5 => Some(broker(1000, 100, "fci/---/---")),
        _ => None,
    };
    let alice = user(1000, &[100]);
    let err = check(
        &Op::Fund {
            holder: CurrencyId(5),
            issuer: base,
        },
        &alice,
        table,
    );
    assert_eq!(
        err,
        Err(TicketsError::Denied {
            what: "fund c5 from c0".into(),
            perm: Perm::Issue,
            on: base,
        })
    );
    // ...but she may reweight what her currency issues.
    assert_eq!(check(&Op::Issue(CurrencyId(5)), &alice, table), Ok(()));
}

// ----- invariant 10: check against an independent oracle -----

/// The oracle's verdict.
#[derive(Debug, PartialEq)]
enum Verdict {
    Allowed,
    Unknown(CurrencyId),
    Denied,
}

/// One requirement; an operation is allowed when every requirement of one alternative holds.
#[derive(Clone, Copy)]
enum Need {
    Bit(CurrencyId, Perm),
    Owner(CurrencyId),
    Identity(u32, u32),
}

/// The report's Table 1 written out as alternatives of requirements, reading the bits from the
/// mode's text (`fci/f--/---`) rather than through `Mode`'s accessors.
fn oracle(op: &Op, caller: &Caller, table: &BTreeMap<CurrencyId, Broker>) -> Verdict {
    use Need::*;
    let (named, alternatives): (Vec<CurrencyId>, Vec<Vec<Need>>) = match *op {
        Op::CreateCurrency { uid, gid } => (vec![], vec![vec![Identity(uid, gid)]]),
        Op::Destroy(c) => (vec![c], vec![vec![Bit(c, Perm::Change)]]),
        Op::Fund { holder, issuer } => (
            vec![holder, issuer],
            vec![vec![Bit(holder, Perm::Fund), Bit(issuer, Perm::Issue)]],
        ),
        Op::Unfund { holder, issuer } => (
            vec![holder, issuer],
            vec![
                vec![Bit(holder, Perm::Change)],
                vec![Bit(issuer, Perm::Issue)],
            ],
        ),
        Op::Issue(c) | Op::Revoke(c) => (vec![c], vec![vec![Bit(c, Perm::Issue)]]),
        Op::Exchange(c) => (vec![c], vec![vec![Owner(c)]]),
        Op::SetBroker { currency, to } => (
            vec![currency],
            vec![vec![Owner(currency), Identity(to.owner, to.group)]],
        ),
    };
    if let Some(c) = named.iter().find(|c| !table.contains_key(c)) {
        return Verdict::Unknown(*c);
    }
    if caller.uid == 0 {
        return Verdict::Allowed;
    }
    let holds = |need: &Need| match *need {
        Bit(c, p) => oracle_bit(&table[&c], caller, p),
        Owner(c) => table[&c].owner == caller.uid,
        Identity(uid, gid) => caller.uid == uid && caller.gids.contains(&gid),
    };
    if alternatives.iter().any(|all| all.iter().all(holds)) {
        Verdict::Allowed
    } else {
        Verdict::Denied
    }
}

fn oracle_bit(b: &Broker, caller: &Caller, p: Perm) -> bool {
    let class = if b.owner == caller.uid {
        0
    } else if caller.gids.contains(&b.group) {
        1
    } else {
        2
    };
    let text = b.mode.to_string();
    let letter = text.as_bytes()[class * 4 + "fci".find(p.letter()).unwrap()];
    letter != b'-'
}

fn any_broker() -> impl Strategy<Value = Broker> {
    (0u32..4, 0u32..4, any::<[[bool; 3]; 3]>()).prop_map(|(owner, group, [o, g, x])| Broker {
        owner,
        group,
        mode: tact_core::tickets::Mode {
            owner: o,
            group: g,
            other: x,
        },
    })
}

fn caller() -> impl Strategy<Value = Caller> {
    (0u32..4, proptest::collection::btree_set(0u32..4, 0..3)).prop_map(|(uid, gids)| Caller {
        uid,
        gids: gids.into_iter().collect(),
    })
}

/// Currencies c0..c4, of which the table holds some.
fn currency() -> impl Strategy<Value = CurrencyId> {
    (0u32..5).prop_map(CurrencyId)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..4, 0u32..4).prop_map(|(uid, gid)| Op::CreateCurrency { uid, gid }),
        currency().prop_map(Op::Destroy),
        (currency(), currency()).prop_map(|(holder, issuer)| Op::Fund { holder, issuer }),
        (currency(), currency()).prop_map(|(holder, issuer)| Op::Unfund { holder, issuer }),
        currency().prop_map(Op::Issue),
        currency().prop_map(Op::Revoke),
        currency().prop_map(Op::Exchange),
        (currency(), any_broker()).prop_map(|(currency, to)| Op::SetBroker { currency, to }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn check_allows_exactly_what_the_table_allows(
        table in proptest::collection::btree_map(currency(), any_broker(), 0..5),
        caller in caller(),
        op in op(),
    ) {
        let got = check(&op, &caller, |c| table.get(&c).copied());
        let want = oracle(&op, &caller, &table);
        match (&got, &want) {
            (Ok(()), Verdict::Allowed) => {}
            (Err(TicketsError::UnknownCurrency(c)), Verdict::Unknown(w)) => prop_assert_eq!(c, w),
            (Err(TicketsError::Denied { perm, on, .. }), Verdict::Denied) => {
                // The refusal names a bit the caller really lacks.
                prop_assert!(!oracle_bit(&table[on], &caller, *perm));
            }
            (Err(TicketsError::DeniedEither { perm, on, or_perm, or_on, .. }), Verdict::Denied) => {
                prop_assert!(!oracle_bit(&table[on], &caller, *perm));
                prop_assert!(!oracle_bit(&table[or_on], &caller, *or_perm));
            }
            (Err(TicketsError::NotOwner { on, owner, .. }), Verdict::Denied) => {
                prop_assert_eq!(table[on].owner, *owner);
                prop_assert_ne!(caller.uid, *owner);
            }
            (Err(TicketsError::NotIdentity { uid, gid, .. }), Verdict::Denied) => {
                prop_assert!(caller.uid != *uid || !caller.gids.contains(gid));
            }
            _ => prop_assert!(false, "check gave {:?}, the oracle {:?}", got, want),
        }
    }
}
