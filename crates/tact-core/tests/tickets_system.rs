//! The tickets system façade (spec tickets.md §2.6–2.9): access control, the default policy,
//! nice, transfers and exchanges, each operation and its refusals; then property tests over
//! random operation sequences by random callers of invariants 10 (access control, refusals
//! change nothing), 11 (nice conserves base funding), 12 (transfers) and 6 (exchange neutrality),
//! with the cached valuation checked against the exact evaluator after every step.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use tact_core::tickets::dealer::Offer;
use tact_core::tickets::system::{OfferReply, Policy};
use tact_core::tickets::{
    Broker, Caller, CurrencyId, CurrencyKind, Kind, Mode, PerResource, Resource, TicketId,
    TicketSystem, TicketsError,
};

const CPU: Resource = Resource::Cpu;
const MEM: Resource = Resource::Mem;
const DISK: Resource = Resource::Disk;
const ALICE: u32 = 1000;
const BOB: u32 = 1001;

fn system() -> TicketSystem {
    TicketSystem::new(PerResource([10_000, 1 << 30, 10_000]), Policy::default()).unwrap()
}

fn root() -> Caller {
    Caller::root()
}

fn user(uid: u32) -> Caller {
    Caller {
        uid,
        gids: vec![uid, 50],
    }
}

fn broker(owner: u32, group: u32, mode: &str) -> Broker {
    Broker {
        owner,
        group,
        mode: mode.parse().unwrap(),
    }
}

fn spawn(s: &mut TicketSystem, pid: u32, uid: u32, parent: Option<u32>) -> CurrencyId {
    let c = s.add_process(&root(), pid, uid, parent).unwrap().value;
    for r in Resource::ALL {
        s.set_active(&root(), pid, r, true).unwrap();
    }
    c
}

fn pid(s: &TicketSystem, pid: u32) -> CurrencyId {
    s.process(pid).unwrap().currency
}

fn rights(s: &TicketSystem, p: u32, r: Resource) -> f64 {
    s.model().rights(pid(s, p), r).unwrap()
}

fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

fn message<T: std::fmt::Debug>(r: Result<T, TicketsError>) -> String {
    r.unwrap_err().to_string()
}

/// The amounts of the base tickets (outside exchanges) `c` holds for `r`.
fn base_held(s: &TicketSystem, c: CurrencyId, r: Resource) -> i64 {
    let m = s.model();
    let from_base = |issuer: CurrencyId| {
        issuer == CurrencyId::BASE
            || matches!(m.currency(issuer).unwrap().kind,
                CurrencyKind::SoftTix { of } if of == CurrencyId::BASE)
    };
    m.tickets()
        .filter(|t| t.holder == c && t.resource == r && t.exchange.is_none())
        .filter(|t| from_base(t.issuer))
        .map(|t| t.amount)
        .sum()
}

/// A user's base funding for `r`: their user currency's and their nice currencies' (§2.8).
fn user_base(s: &TicketSystem, uid: u32, r: Resource) -> i64 {
    let Some(u) = s.user(uid) else { return 0 };
    let nices: i64 = s
        .nices()
        .filter(|n| n.uid == uid)
        .map(|n| base_held(s, n.currency, r))
        .sum();
    base_held(s, u.currency, r) + nices
}

fn issuer_of_first(s: &TicketSystem, c: CurrencyId, r: Resource) -> CurrencyId {
    let m = s.model();
    m.currency(c)
        .unwrap()
        .backing
        .iter()
        .map(|t| m.ticket(*t).unwrap())
        .find(|t| t.resource == r)
        .unwrap()
        .issuer
}

#[test]
fn users_are_funded_equally_and_processes_get_equal_issues() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 11, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    for uid in [ALICE, BOB] {
        let u = s.user(uid).unwrap();
        assert_eq!(s.named(&format!("user:{uid}")), Some(u.currency));
        assert_eq!(base_held(&s, u.currency, CPU), 1000);
        assert_eq!(base_held(&s, u.currency, DISK), 1000);
        assert_eq!(u.funding[MEM], None, "no memory by default");
        let b = s.model().currency(u.currency).unwrap().broker;
        assert_eq!((b.owner, b.mode), (uid, Mode::OWNER_ONLY));
    }
    assert_eq!(s.named("pid:10"), Some(pid(&s, 10)));
    for r in [CPU, DISK] {
        assert_close(rights(&s, 10, r), 500.0);
        assert_close(rights(&s, 11, r), 500.0);
        assert_close(rights(&s, 20, r), 1000.0);
    }
    assert_close(rights(&s, 10, MEM), 0.0);
    let issue = s
        .model()
        .ticket(s.model().currency(pid(&s, 10)).unwrap().backing[0])
        .unwrap()
        .amount;
    assert_eq!(issue, 100);
    s.model().check_exact().unwrap();
}

#[test]
fn process_events_are_the_daemons_and_pids_are_unique() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    assert_eq!(
        message(s.add_process(&user(ALICE), 11, ALICE, None)),
        "permission denied: the start of process 11 is reported by the daemon only (root)"
    );
    assert_eq!(
        message(s.exit(&user(ALICE), 10)),
        "permission denied: the exit of process 10 is reported by the daemon only (root)"
    );
    assert_eq!(
        message(s.setuid(&user(ALICE), 10, BOB)),
        "permission denied: the change of uid of process 10 is reported by the daemon only (root)"
    );
    assert_eq!(
        message(s.set_active(&user(ALICE), 10, CPU, false)),
        "permission denied: the activity of process 10 is reported by the daemon only (root)"
    );
    assert!(message(s.add_process(&root(), 10, ALICE, None))
        .starts_with("process 10 already has currency c"));
    assert_eq!(
        message(s.add_process(&root(), 12, ALICE, Some(99))),
        "unknown process 99"
    );
    assert_eq!(message(s.exit(&root(), 99)), "unknown process 99");
}

#[test]
fn children_are_funded_by_the_issuer_of_the_parents_first_ticket() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    let alice = s.user(ALICE).unwrap().currency;
    // Alice funds a build currency from her own and moves process 10 onto it.
    let build = s
        .create_currency(&user(ALICE), "build", broker(ALICE, ALICE, "fci/---/---"))
        .unwrap()
        .value;
    s.fund(&user(ALICE), build, alice, CPU, 300, Kind::Soft)
        .unwrap();
    let first = s.model().currency(pid(&s, 10)).unwrap().backing[0];
    s.fund(&user(ALICE), pid(&s, 10), build, CPU, 50, Kind::Soft)
        .unwrap();
    s.unfund(&user(ALICE), first).unwrap();
    spawn(&mut s, 12, ALICE, Some(10));
    assert_eq!(issuer_of_first(&s, pid(&s, 12), CPU), build);
    assert_eq!(issuer_of_first(&s, pid(&s, 12), DISK), alice);
    // A child running as another user is funded by that user, not by its parent.
    spawn(&mut s, 13, BOB, Some(10));
    let bob = s.user(BOB).unwrap().currency;
    assert_eq!(issuer_of_first(&s, pid(&s, 13), CPU), bob);
    s.model().check_exact().unwrap();
}

#[test]
fn setuid_refunds_from_the_new_user_with_the_new_ticket_first() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let bob = s.user(BOB).unwrap().currency;
    // An exchange ticket ahead in the backing list must not fund children.
    let give = Offer {
        client: pid(&s, 10),
        give: (DISK, 10),
        want: (CPU, 10),
        expires: None,
    };
    let take = Offer {
        client: pid(&s, 20),
        give: (CPU, 10),
        want: (DISK, 10),
        expires: None,
    };
    s.offer(&user(ALICE), give, Duration::ZERO).unwrap();
    s.offer(&user(BOB), take, Duration::ZERO).unwrap();
    s.setuid(&root(), 10, BOB).unwrap();
    let client = pid(&s, 10);
    let c = s.model().currency(client).unwrap();
    assert_eq!(c.broker.owner, BOB);
    assert_eq!(s.process(10).unwrap().uid, BOB);
    let alice = s.user(ALICE).unwrap().currency;
    assert!(c
        .backing
        .iter()
        .all(|t| s.model().ticket(*t).unwrap().issuer != alice));
    for r in [CPU, DISK] {
        assert_eq!(issuer_of_first(&s, client, r), bob, "{r}");
    }
    assert_eq!(s.model().exchanges().count(), 1, "the exchange stays");
    spawn(&mut s, 11, BOB, Some(10));
    assert_eq!(issuer_of_first(&s, pid(&s, 11), CPU), bob);
    assert_eq!(issuer_of_first(&s, pid(&s, 11), DISK), bob);
    // Alice's currency now funds no one; Bob's three processes share his 1000.
    assert_close(
        s.model().guaranteed(pid(&s, 11), CPU).unwrap(),
        1000.0 / 3.0,
    );
    s.model().check_exact().unwrap();
}

#[test]
fn exit_withdraws_offers_ends_transfers_and_undoes_exchanges() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 11, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let (a, b) = (pid(&s, 10), pid(&s, 20));
    let lone = Offer {
        client: a,
        give: (DISK, 1),
        want: (MEM, 1),
        expires: None,
    };
    s.offer(&user(ALICE), lone, Duration::ZERO).unwrap();
    s.offer(
        &user(ALICE),
        Offer {
            client: a,
            give: (CPU, 100),
            want: (DISK, 100),
            expires: None,
        },
        Duration::ZERO,
    )
    .unwrap();
    let reply = s
        .offer(
            &user(BOB),
            Offer {
                client: b,
                give: (DISK, 100),
                want: (CPU, 100),
                expires: None,
            },
            Duration::ZERO,
        )
        .unwrap()
        .value;
    let OfferReply::Exchanged { exchange, .. } = reply else {
        panic!("{reply:?}")
    };
    let w = s.transfer(&user(ALICE), 11, 20, CPU).unwrap().value;
    let done = s.exit(&root(), 10).unwrap();
    assert_eq!(done.value.withdrawn.len(), 1);
    assert!(done.value.ended.is_empty());
    assert_eq!(done.undone.len(), 1);
    assert_eq!(done.undone[0].id, exchange);
    assert!(s.process(10).is_none());
    assert!(s.model().currency(a).is_err());
    assert!(s.dealer().offers().is_empty());
    // The server's exit ends the transfer, and the waiter competes again.
    let done = s.exit(&root(), 20).unwrap();
    assert_eq!(done.value.ended, vec![w]);
    assert!(s.transfers().next().is_none());
    assert_close(rights(&s, 11, CPU), 1000.0);
    s.model().check_exact().unwrap();
}

#[test]
fn nice_funds_the_job_from_the_base_out_of_its_users_own_funding() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 11, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let alice = s.user(ALICE).unwrap().currency;
    let done = s.nice(&user(ALICE), 10, CPU, 100).unwrap();
    let n = done.value;
    assert_eq!(base_held(&s, alice, CPU), 900);
    assert_eq!(base_held(&s, n, CPU), 100);
    assert_eq!(user_base(&s, ALICE, CPU), 1000);
    assert_eq!(issuer_of_first(&s, pid(&s, 10), CPU), n);
    assert_close(rights(&s, 10, CPU), 100.0);
    assert_close(rights(&s, 11, CPU), 900.0);
    assert_close(rights(&s, 20, CPU), 1000.0);
    // Disk is not niced.
    assert_close(rights(&s, 10, DISK), 500.0);
    // The lower limit is gone: with process 11 idle, process 10 still gets its 100, not all of
    // Alice's 1000.
    s.set_active(&root(), 11, CPU, false).unwrap();
    assert_close(rights(&s, 10, CPU), 100.0);
    s.set_active(&root(), 11, CPU, true).unwrap();
    // Its children share N.
    spawn(&mut s, 12, ALICE, Some(10));
    assert_eq!(issuer_of_first(&s, pid(&s, 12), CPU), n);
    assert_close(rights(&s, 10, CPU), 50.0);
    assert_close(rights(&s, 12, CPU), 50.0);
    let done = s.exit(&root(), 10).unwrap();
    assert!(done.returned.is_empty(), "the child still holds N");
    assert_close(rights(&s, 12, CPU), 100.0);
    let done = s.exit(&root(), 12).unwrap();
    assert_eq!(done.returned.len(), 1);
    assert_eq!(
        (done.returned[0].currency, done.returned[0].amount),
        (n, 100)
    );
    assert!(s.model().currency(n).is_err());
    assert_eq!(base_held(&s, alice, CPU), 1000);
    assert!(s.nices().next().is_none());
    s.model().check_exact().unwrap();
}

#[test]
fn nice_refusals() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let before = serde_json::to_string(&s).unwrap();
    let c = pid(&s, 10);
    assert_eq!(
        message(s.nice(&user(BOB), 10, CPU, 100)),
        format!("permission denied: nice process 10 needs the owner of {c} (uid 1000) or root")
    );
    assert_eq!(
        message(s.nice(&user(ALICE), 10, CPU, 1000)),
        "nice: uid 1000's user currency holds 1000 base tickets of cpu; X = 1000 must be below \
         that, so that the user's other processes keep some"
    );
    assert_eq!(
        message(s.nice(&user(ALICE), 10, MEM, 1)),
        "nice: uid 1000's user currency holds 0 base tickets of mem; X = 1 must be below that, \
         so that the user's other processes keep some"
    );
    assert_eq!(
        message(s.nice(&user(ALICE), 10, CPU, 0)),
        "amount 0: tickets must be positive (only the dealer issues negative ones)"
    );
    assert_eq!(message(s.nice(&root(), 99, CPU, 1)), "unknown process 99");
    assert_eq!(serde_json::to_string(&s).unwrap(), before);
    // Root may nice anyone's job, from that job's user.
    let n = s.nice(&root(), 10, CPU, 10).unwrap().value;
    assert_eq!(user_base(&s, ALICE, CPU), 1000);
    assert_eq!(user_base(&s, 0, CPU), 0);
    // The loan is the system's: neither its owner nor root takes it away or adds to it.
    let loan = s.model().currency(n).unwrap().backing[0];
    assert!(message(s.unfund(&root(), loan)).contains("is the base funding uid 1000 lent"));
    assert!(message(s.set_amount(&root(), loan, 20)).contains("is the base funding"));
    assert!(
        message(s.fund(&root(), n, CurrencyId::BASE, CPU, 5, Kind::Soft))
            .contains("is a nice currency")
    );
    assert_eq!(
        message(s.destroy(&user(ALICE), n)),
        format!("permission denied: destroy {n} needs c (change) on currency {n}")
    );
    assert!(message(s.destroy(&root(), n)).contains("the nice currency of process 10"));
    // Niced again, the job moves to a new currency and the old one returns its loan.
    let done = s.nice(&user(ALICE), 10, CPU, 30).unwrap();
    assert_eq!(done.returned.len(), 1);
    assert_eq!(done.returned[0].currency, n);
    assert_eq!(base_held(&s, s.user(ALICE).unwrap().currency, CPU), 970);
    assert_eq!(user_base(&s, ALICE, CPU), 1000);
    s.model().check_exact().unwrap();
}

#[test]
fn a_transfer_gives_the_server_the_waiters_rights_until_it_ends() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 11, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let before = serde_json::to_value(s.model()).unwrap();
    let w = s.transfer(&user(ALICE), 10, 20, CPU).unwrap().value;
    assert_close(rights(&s, 10, CPU), 0.0);
    assert_close(rights(&s, 20, CPU), 1500.0);
    assert_close(rights(&s, 11, CPU), 500.0);
    assert_close(rights(&s, 10, DISK), 500.0);
    let x = *s.transfers().next().unwrap();
    assert_eq!((x.id, x.waiter, x.server, x.resource), (w, 10, 20, CPU));
    assert!(message(s.unfund(&root(), x.ticket)).contains("end the transfer instead"));
    s.end_transfer(&user(ALICE), w).unwrap();
    let after = serde_json::to_value(s.model()).unwrap();
    assert_eq!(before["currencies"], after["currencies"]);
    assert_eq!(before["tickets"], after["tickets"]);
    assert_close(rights(&s, 20, CPU), 1000.0);
    s.model().check_exact().unwrap();
}

#[test]
fn transfer_refusals() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let c = pid(&s, 10);
    assert_eq!(
        message(s.transfer(&user(BOB), 10, 20, CPU)),
        format!("permission denied: issue tickets of {c} needs i (issue) on currency {c}")
    );
    assert_eq!(
        message(s.transfer(&user(ALICE), 10, 10, CPU)),
        "process 10 cannot wait on itself"
    );
    assert_eq!(
        message(s.transfer(&user(ALICE), 10, 99, CPU)),
        "unknown process 99"
    );
    let w = s.transfer(&user(ALICE), 10, 20, CPU).unwrap().value;
    assert_eq!(
        message(s.transfer(&user(ALICE), 10, 20, CPU)),
        format!("process 10 already waits on process 20 for cpu ({w}): end that first")
    );
    let server = pid(&s, 20);
    assert_eq!(
        message(s.transfer(&user(BOB), 20, 10, CPU)),
        format!("funding {c} from {server} would close a cycle in the funding graph")
    );
    assert_eq!(
        message(s.end_transfer(&user(BOB), w)),
        format!("permission denied: revoke tickets of {c} needs i (issue) on currency {c}")
    );
    s.end_transfer(&root(), w).unwrap();
    assert!(message(s.end_transfer(&root(), w)).starts_with("unknown transfer w"));
}

#[test]
fn offers_match_into_exchanges_and_refusals_withdraw_both() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let (a, b) = (pid(&s, 10), pid(&s, 20));
    let offer = |client, give, want| Offer {
        client,
        give,
        want,
        expires: None,
    };
    assert_eq!(
        message(s.offer(&user(BOB), offer(a, (CPU, 1), (DISK, 1)), Duration::ZERO)),
        format!("permission denied: offer or cancel an exchange for {a} needs the owner of {a} (uid 1000) or root")
    );
    assert_eq!(
        message(s.offer(
            &user(ALICE),
            offer(a, (CPU, 1001), (DISK, 1)),
            Duration::ZERO
        )),
        format!("{a} offers 1001 of cpu, above its guaranteed rights R* = 1000")
    );
    let alice = s.user(ALICE).unwrap().currency;
    assert_eq!(
        message(s.offer(&root(), offer(alice, (CPU, 1), (DISK, 1)), Duration::ZERO)),
        format!("{alice} is not a client currency (only clients compete and hold rights)")
    );
    let queued = s
        .offer(
            &user(ALICE),
            offer(a, (CPU, 800), (DISK, 10)),
            Duration::ZERO,
        )
        .unwrap()
        .value;
    let OfferReply::Queued { id: first, .. } = queued else {
        panic!("{queued:?}")
    };
    // Alice's currency now funds four processes: process 10's R* falls to 250.
    for p in 11..14 {
        spawn(&mut s, p, ALICE, None);
    }
    let reply = s
        .offer(&user(BOB), offer(b, (DISK, 10), (CPU, 800)), Duration::ZERO)
        .unwrap()
        .value;
    let OfferReply::Refused { matched, why, .. } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(matched, first);
    assert_eq!(
        why.to_string(),
        format!(
            "the exchange would leave {a}, active for cpu, with a negative value -550.000 for it"
        )
    );
    assert!(s.dealer().offers().is_empty(), "both offers are withdrawn");
    assert_eq!(s.model().exchanges().count(), 0);
    // A fitting trade goes through, and either side may undo it.
    s.offer(
        &user(ALICE),
        offer(a, (CPU, 200), (DISK, 10)),
        Duration::ZERO,
    )
    .unwrap();
    let reply = s
        .offer(&user(BOB), offer(b, (DISK, 10), (CPU, 200)), Duration::ZERO)
        .unwrap()
        .value;
    let OfferReply::Exchanged { exchange, .. } = reply else {
        panic!("{reply:?}")
    };
    assert_close(rights(&s, 10, CPU), 50.0);
    assert_close(rights(&s, 20, CPU), 1200.0);
    assert_close(rights(&s, 10, DISK), 260.0);
    assert_eq!(
        message(s.cancel_exchange(&user(2000), exchange)),
        format!("permission denied: offer or cancel an exchange for {b} needs the owner of {b} (uid 1001) or root")
    );
    // Bob's offer matched, so Bob's process is the exchange's `a`; Alice, on the other side,
    // may undo it too.
    let done = s.cancel_exchange(&user(ALICE), exchange).unwrap();
    assert_eq!(done.value.id, exchange);
    assert_close(rights(&s, 20, CPU), 1000.0);
    s.model().check_exact().unwrap();
}

#[test]
fn exchanges_left_negative_are_undone_by_the_operation_that_caused_it() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    let (a, b) = (pid(&s, 10), pid(&s, 20));
    s.offer(
        &user(ALICE),
        Offer {
            client: a,
            give: (CPU, 600),
            want: (DISK, 10),
            expires: None,
        },
        Duration::ZERO,
    )
    .unwrap();
    s.offer(
        &user(BOB),
        Offer {
            client: b,
            give: (DISK, 10),
            want: (CPU, 600),
            expires: None,
        },
        Duration::ZERO,
    )
    .unwrap();
    assert_eq!(s.model().exchanges().count(), 1);
    // A second process of Alice's, once runnable, halves process 10's value to 500, below the
    // 600 it gave.
    let done = s.add_process(&root(), 11, ALICE, None).unwrap();
    assert!(done.undone.is_empty(), "process 11 does not compete yet");
    let done = s.set_active(&root(), 11, CPU, true).unwrap();
    assert_eq!(done.undone.len(), 1);
    assert_eq!(
        (done.undone[0].a, done.undone[0].b),
        (b, a),
        "Bob's offer matched"
    );
    assert_eq!(s.model().exchanges().count(), 0);
    assert!(s.model().exchanges_to_undo().is_empty());
}

#[test]
fn offers_are_cancelled_by_their_owner_and_expire_on_the_daemons_clock() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    let a = pid(&s, 10);
    let mut offer = Offer {
        client: a,
        give: (CPU, 1),
        want: (DISK, 1),
        expires: None,
    };
    let reply = s.offer(&user(ALICE), offer, Duration::ZERO).unwrap().value;
    let OfferReply::Queued { id, .. } = reply else {
        panic!("{reply:?}")
    };
    assert!(message(s.cancel_offer(&user(BOB), id)).starts_with("permission denied"));
    assert_eq!(s.cancel_offer(&user(ALICE), id).unwrap().value.id, id);
    assert!(message(s.cancel_offer(&user(ALICE), id)).starts_with("unknown offer"));
    offer.expires = Some(Duration::from_secs(5));
    s.offer(&user(ALICE), offer, Duration::ZERO).unwrap();
    assert_eq!(
        message(s.expire_offers(&user(ALICE), Duration::from_secs(9))),
        "permission denied: expiring offers is reported by the daemon only (root)"
    );
    assert_eq!(
        s.expire_offers(&root(), Duration::from_secs(9))
            .unwrap()
            .value
            .len(),
        1
    );
}

#[test]
fn checked_operations_follow_the_broker_table() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    let alice = s.user(ALICE).unwrap().currency;
    assert_eq!(
        message(s.create_currency(&user(ALICE), "x", broker(BOB, BOB, "fci/---/---"))),
        "permission denied: create a currency for uid 1001 gid 1001 needs to run as uid 1001 in \
         group 1001 (or as root)"
    );
    let shared = s
        .create_currency(&user(ALICE), "shared", broker(ALICE, 50, "fci/f--/---"))
        .unwrap()
        .value;
    assert_eq!(s.named("shared"), Some(shared));
    for (name, why) in [
        ("shared", "another currency has this name"),
        ("", "a currency needs a name"),
        (
            "a:b",
            "names may not contain ':' (kept for user:UID and pid:PID) or whitespace",
        ),
        // The model's hidden currency of the base's soft tickets is called this.
        (
            "soft_tix(base)",
            "names may not contain '(' or ')' (kept for the hidden soft_tix(NAME) currencies)",
        ),
        ("a\u{1b}[2Jb", "names may not contain control characters"),
    ] {
        assert_eq!(
            message(s.create_currency(&user(ALICE), name, broker(ALICE, 50, "fci/---/---"))),
            format!("currency name {name:?}: {why}")
        );
    }
    // Users cannot raise their own funding: that needs i on the base.
    assert_eq!(
        message(s.fund(&user(ALICE), alice, CurrencyId::BASE, CPU, 1, Kind::Soft)),
        "permission denied: fund c1 from c0 needs i (issue) on currency c0"
    );
    // Bob, in group 50, may fund `shared` from his own currency, but not issue Alice's.
    spawn(&mut s, 20, BOB, None);
    let bob = s.user(BOB).unwrap().currency;
    let t = s
        .fund(&user(BOB), shared, bob, CPU, 10, Kind::Soft)
        .unwrap()
        .value;
    assert_eq!(
        message(s.fund(&user(BOB), shared, alice, CPU, 10, Kind::Soft)),
        format!(
            "permission denied: fund {shared} from {alice} needs i (issue) on currency {alice}"
        )
    );
    // Alice may take Bob's ticket off her currency (c on it), and Bob may revoke it (i on his).
    let t2 = s
        .fund(&user(BOB), shared, bob, CPU, 10, Kind::Soft)
        .unwrap()
        .value;
    s.unfund(&user(ALICE), t).unwrap();
    s.unfund(&user(BOB), t2).unwrap();
    let t3 = s
        .fund(&user(ALICE), shared, alice, CPU, 10, Kind::Soft)
        .unwrap()
        .value;
    assert_eq!(
        message(s.unfund(&user(BOB), t3)),
        format!(
            "permission denied: take {alice}'s tickets from {shared} needs c (change) on \
             currency {shared} or i (issue) on currency {alice}"
        )
    );
    assert_eq!(
        message(s.set_amount(&user(BOB), t3, 20)),
        format!("permission denied: issue tickets of {alice} needs i (issue) on currency {alice}")
    );
    s.set_amount(&user(ALICE), t3, 20).unwrap();
    assert_eq!(
        message(s.set_broker(&user(BOB), shared, broker(BOB, 50, "fci/fci/---"))),
        format!(
            "permission denied: give {shared} to uid 1001 gid 50 with mode fci/fci/--- needs \
             the owner of {shared} (uid 1000) or root"
        )
    );
    s.set_broker(&user(ALICE), shared, broker(ALICE, 50, "fci/fci/---"))
        .unwrap();
    assert_eq!(
        message(s.destroy(&user(ALICE), alice)),
        format!(
            "{alice} is the user currency of uid 1000, which the default policy manages and \
             cannot be destroyed"
        )
    );
    let p = pid(&s, 10);
    assert!(message(s.destroy(&root(), p)).contains("the currency of process 10"));
    assert_eq!(
        message(s.destroy(&user(ALICE), CurrencyId(99))),
        "unknown currency c99"
    );
    // Group members got c with the new mode.
    s.destroy(&user(BOB), shared).unwrap();
    assert_eq!(s.named("shared"), None);
    s.model().check_exact().unwrap();
}

#[test]
fn a_policy_with_bad_amounts_is_refused_naming_the_field() {
    let base = PerResource([1000, 1000, 1000]);
    let mut policy = Policy::default();
    policy.user_funding[MEM] = -1;
    assert_eq!(
        message(TicketSystem::new(base, policy)),
        "policy: user_funding gives -1 of mem: amounts must be 0 (none) or positive"
    );
    let policy = Policy {
        process_issue: 0,
        ..Policy::default()
    };
    assert_eq!(
        message(TicketSystem::new(base, policy)),
        "policy: process_issue is 0: it must be positive"
    );
}

#[test]
fn the_system_survives_a_json_round_trip() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 11, ALICE, Some(10));
    spawn(&mut s, 20, BOB, None);
    s.nice(&user(ALICE), 11, CPU, 100).unwrap();
    s.transfer(&user(BOB), 20, 10, DISK).unwrap();
    let json = serde_json::to_string(&s).unwrap();
    let back: TicketSystem = serde_json::from_str(&json).unwrap();
    back.validate().unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
    back.model().check_exact().unwrap();
    for p in [10, 11, 20] {
        for r in Resource::ALL {
            assert_eq!(rights(&back, p, r), rights(&s, p, r));
        }
    }
}

#[test]
fn a_corrupt_saved_state_is_refused_by_validate_not_by_a_panic() {
    let mut s = system();
    spawn(&mut s, 10, ALICE, None);
    spawn(&mut s, 20, BOB, None);
    s.transfer(&user(ALICE), 10, 20, CPU).unwrap();
    let good = serde_json::to_value(&s).unwrap();
    let load =
        |v: &serde_json::Value| -> TicketSystem { serde_json::from_value(v.clone()).unwrap() };
    let alice = s.user(ALICE).unwrap().currency;
    let first = s.model().currency(pid(&s, 10)).unwrap().backing[0];
    let mut v = good.clone();
    v["model"]["tickets"]
        .as_object_mut()
        .unwrap()
        .remove(&first.0.to_string());
    assert_eq!(
        message(load(&v).validate()),
        format!("corrupt model: {alice} lists {first}, which is not its")
    );
    let mut v = good.clone();
    v["processes"]["10"]["currency"] = 99.into();
    assert_eq!(
        message(load(&v).validate()),
        "corrupt state: process 10's currency c99 is amiss"
    );
    let mut v = good.clone();
    v["next_transfer"] = 0.into();
    assert_eq!(
        message(load(&v).validate()),
        "corrupt state: transfer w0 does not match its ticket"
    );
    let mut v = good.clone();
    v["policy"]["process_issue"] = 0.into();
    assert!(message(load(&v).validate()).starts_with("policy: process_issue"));
    load(&good).validate().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Random operation sequences by random callers.

/// Root, three users sharing group 50 two by two, and an outsider.
fn callers() -> [Caller; 5] {
    [
        root(),
        Caller {
            uid: 1000,
            gids: vec![1000, 50],
        },
        Caller {
            uid: 1001,
            gids: vec![1001, 50],
        },
        Caller {
            uid: 1002,
            gids: vec![1002, 60],
        },
        Caller {
            uid: 1003,
            gids: vec![1003],
        },
    ]
}

const UIDS: [u32; 4] = [0, 1000, 1001, 1002];
const GIDS: [u32; 4] = [0, 50, 60, 1003];

#[derive(Debug, Clone)]
enum Op {
    Spawn {
        uid: usize,
        parent: Option<usize>,
    },
    Exit(usize),
    Setuid {
        pid: usize,
        uid: usize,
    },
    Active {
        pid: usize,
        r: usize,
        on: bool,
    },
    Create {
        owner: usize,
        group: usize,
        mode: u16,
    },
    Destroy(usize),
    Fund {
        holder: usize,
        issuer: usize,
        r: usize,
        amount: i64,
        hard: bool,
    },
    Unfund(usize),
    SetAmount(usize, i64),
    SetBroker {
        c: usize,
        owner: usize,
        group: usize,
        mode: u16,
    },
    Nice {
        pid: usize,
        r: usize,
        x: i64,
    },
    Transfer {
        waiter: usize,
        server: usize,
        r: usize,
    },
    EndTransfer(usize),
    /// `mirror` makes it the complement of a queued offer, so that trades happen.
    Offer {
        client: usize,
        give: (usize, i64),
        want: (usize, i64),
        ttl: Option<u64>,
        mirror: Option<usize>,
    },
    CancelOffer(usize),
    CancelExchange(usize),
    Expire,
}

impl Op {
    /// Process events and the clock come from the daemon, so these are mostly root's.
    fn is_event(&self) -> bool {
        matches!(
            self,
            Op::Spawn { .. } | Op::Exit(_) | Op::Setuid { .. } | Op::Active { .. } | Op::Expire
        )
    }
}

fn op() -> impl Strategy<Value = Op> {
    let i = || 0usize..32;
    let r = || 0usize..3;
    let amount = || prop_oneof![9 => 1i64..300, 1 => -2i64..=0];
    // Few amounts, so that offers often meet their exact complement.
    let offered = || prop_oneof![9 => prop::sample::select(vec![5i64, 20, 60]), 1 => Just(2000i64)];
    // Mostly two different resources: trading one for itself is refused.
    let pair = || {
        (r(), prop_oneof![9 => 1usize..3, 1 => Just(0usize)]).prop_map(|(g, d)| (g, (g + d) % 3))
    };
    prop_oneof![
        4 => (0usize..4, prop::option::of(i())).prop_map(|(uid, parent)| Op::Spawn { uid, parent }),
        1 => i().prop_map(Op::Exit),
        1 => (i(), 0usize..4).prop_map(|(pid, uid)| Op::Setuid { pid, uid }),
        4 => (i(), r(), any::<bool>()).prop_map(|(pid, r, on)| Op::Active { pid, r, on }),
        2 => (0usize..4, 0usize..4, 0u16..512)
            .prop_map(|(owner, group, mode)| Op::Create { owner, group, mode }),
        1 => i().prop_map(Op::Destroy),
        5 => (i(), i(), r(), amount(), prop::bool::weighted(0.2))
            .prop_map(|(holder, issuer, r, amount, hard)| Op::Fund { holder, issuer, r, amount, hard }),
        2 => i().prop_map(Op::Unfund),
        2 => (i(), amount()).prop_map(|(t, a)| Op::SetAmount(t, a)),
        1 => (i(), 0usize..4, 0usize..4, 0u16..512)
            .prop_map(|(c, owner, group, mode)| Op::SetBroker { c, owner, group, mode }),
        2 => (i(), r(), -1i64..1200).prop_map(|(pid, r, x)| Op::Nice { pid, r, x }),
        2 => (i(), i(), r()).prop_map(|(waiter, server, r)| Op::Transfer { waiter, server, r }),
        1 => i().prop_map(Op::EndTransfer),
        6 => (i(), pair(), offered(), offered(), prop::option::of(1u64..20), prop::option::of(i()))
            .prop_map(|(client, (g, w), x, y, ttl, mirror)| Op::Offer {
                client, give: (g, x), want: (w, y), ttl, mirror
            }),
        1 => i().prop_map(Op::CancelOffer),
        1 => i().prop_map(Op::CancelExchange),
        1 => Just(Op::Expire),
    ]
}

/// An operation and who asks: events are root's five times in six, the rest a third of the time.
fn step() -> impl Strategy<Value = (usize, Op)> {
    (op(), 0usize..6, 1usize..5).prop_map(|(op, roll, other)| {
        let root = if op.is_event() { roll < 5 } else { roll < 2 };
        (if root { 0 } else { other }, op)
    })
}

fn pick<T: Copy>(items: &[T], i: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[i % items.len()])
}

fn mode(bits: u16) -> Mode {
    let b = |i: u16| bits & (1 << i) != 0;
    Mode {
        owner: [b(0), b(1), b(2)],
        group: [b(3), b(4), b(5)],
        other: [b(6), b(7), b(8)],
    }
}

/// The test's own reading of §2.6, independent of `broker::has`: the first class that applies
/// to the caller decides; root may do anything. Bits are f, c, i.
fn may(s: &TicketSystem, who: &Caller, c: CurrencyId, bit: usize) -> bool {
    let b = s.model().currency(c).unwrap().broker;
    let bits = if who.uid == b.owner {
        b.mode.owner
    } else if who.gids.contains(&b.group) {
        b.mode.group
    } else {
        b.mode.other
    };
    who.uid == 0 || bits[bit]
}

fn owns(s: &TicketSystem, who: &Caller, c: CurrencyId) -> bool {
    who.uid == 0 || s.model().currency(c).unwrap().broker.owner == who.uid
}

const F: usize = 0;
const C: usize = 1;
const I: usize = 2;

/// The currency that answers for `c`: a `soft_tix`'s owner.
fn answering(s: &TicketSystem, c: CurrencyId) -> CurrencyId {
    match s.model().currency(c).unwrap().kind {
        CurrencyKind::SoftTix { of } => of,
        _ => c,
    }
}

/// What a step did, for the checks that compare before and after.
struct Applied {
    result: Result<Seen, TicketsError>,
    /// The oracle's verdict: whether the broker table allows the step.
    allowed: bool,
    /// Whether the step may change users' base funding directly (root handing out or taking
    /// back base tickets), outside nice and the policy.
    touches_base: bool,
}

/// The successful replies the checks look into.
enum Seen {
    Exchanged {
        a: CurrencyId,
        b: CurrencyId,
        undone: Vec<(CurrencyId, CurrencyId)>,
    },
    Other,
}

struct World {
    s: TicketSystem,
    next_pid: u32,
    now: u64,
}

impl World {
    /// A process of root's and one of each user's, competing for everything. Users get memory
    /// too, so that every resource can be traded.
    fn new() -> World {
        let policy = Policy {
            user_funding: PerResource([1000, 1000, 1000]),
            ..Policy::default()
        };
        let mut s = TicketSystem::new(PerResource([10_000, 1 << 30, 10_000]), policy).unwrap();
        for (pid, uid) in (1..).zip(UIDS) {
            spawn(&mut s, pid, uid, None);
        }
        World {
            s,
            next_pid: 100,
            now: 0,
        }
    }

    fn apply(&mut self, who: &Caller, op: &Op) -> Applied {
        self.now += 1;
        let now = Duration::from_secs(self.now);
        let s = &mut self.s;
        let pids: Vec<u32> = s.processes().map(|p| p.pid).collect();
        let cs: Vec<CurrencyId> = s
            .model()
            .currencies()
            .filter(|c| !c.is_hidden())
            .map(|c| c.id)
            .collect();
        let ts: Vec<TicketId> = s.model().tickets().map(|t| t.id).collect();
        let res = |r: usize| Resource::ALL[r];
        let other = |r: Result<(), TicketsError>| r.map(|_| Seen::Other);
        let root = who.uid == 0;
        let skip = Applied {
            result: Ok(Seen::Other),
            allowed: true,
            touches_base: false,
        };
        let applied = |result, allowed| Applied {
            result,
            allowed,
            touches_base: false,
        };
        match *op {
            Op::Spawn { uid, parent } => {
                // One spawn in eight reuses a live pid, to be refused.
                let reuse = parent.filter(|p| p % 8 == 7).and_then(|p| pick(&pids, p));
                let pid = reuse.unwrap_or_else(|| {
                    self.next_pid += 1;
                    self.next_pid
                });
                let parent = parent.and_then(|p| pick(&pids, p));
                let r = s.add_process(who, pid, UIDS[uid], parent).map(|_| ());
                applied(other(r), root)
            }
            Op::Exit(p) => match pick(&pids, p) {
                Some(p) => applied(other(s.exit(who, p).map(|_| ())), root),
                None => skip,
            },
            Op::Setuid { pid, uid } => match pick(&pids, pid) {
                Some(p) => applied(other(s.setuid(who, p, UIDS[uid]).map(|_| ())), root),
                None => skip,
            },
            Op::Active { pid, r, on } => match pick(&pids, pid) {
                Some(p) => applied(other(s.set_active(who, p, res(r), on).map(|_| ())), root),
                None => skip,
            },
            Op::Create {
                owner,
                group,
                mode: bits,
            } => {
                let (uid, gid) = (UIDS[owner], GIDS[group]);
                let allowed = root || (who.uid == uid && who.gids.contains(&gid));
                let name = format!("c{}", self.now);
                let b = Broker {
                    owner: uid,
                    group: gid,
                    mode: mode(bits),
                };
                let r = s.create_currency(who, &name, b).map(|_| ());
                applied(other(r), allowed)
            }
            Op::Destroy(c) => {
                let c = pick(&cs, c).unwrap();
                let allowed = may(s, who, c, C);
                applied(other(s.destroy(who, c).map(|_| ())), allowed)
            }
            Op::Fund {
                holder,
                issuer,
                r,
                amount,
                hard,
            } => {
                let (h, i) = (pick(&cs, holder).unwrap(), pick(&cs, issuer).unwrap());
                let allowed = may(s, who, h, F) && may(s, who, i, I);
                let kind = if hard { Kind::Hard } else { Kind::Soft };
                let r = s.fund(who, h, i, res(r), amount, kind).map(|_| ());
                Applied {
                    result: other(r),
                    allowed,
                    touches_base: i == CurrencyId::BASE,
                }
            }
            Op::Unfund(t) | Op::SetAmount(t, _) => {
                let Some(t) = pick(&ts, t) else { return skip };
                let ticket = *s.model().ticket(t).unwrap();
                let issuer = answering(s, ticket.issuer);
                let r = match *op {
                    Op::SetAmount(_, amount) => {
                        let allowed = may(s, who, issuer, I);
                        applied(other(s.set_amount(who, t, amount).map(|_| ())), allowed)
                    }
                    _ => {
                        let holder = answering(s, ticket.holder);
                        let allowed = may(s, who, holder, C) || may(s, who, issuer, I);
                        applied(other(s.unfund(who, t).map(|_| ())), allowed)
                    }
                };
                Applied {
                    touches_base: issuer == CurrencyId::BASE,
                    ..r
                }
            }
            Op::SetBroker {
                c,
                owner,
                group,
                mode: bits,
            } => {
                let c = pick(&cs, c).unwrap();
                let to = Broker {
                    owner: UIDS[owner],
                    group: GIDS[group],
                    mode: mode(bits),
                };
                let allowed = owns(s, who, c)
                    && (root || (who.uid == to.owner && who.gids.contains(&to.group)));
                applied(other(s.set_broker(who, c, to).map(|_| ())), allowed)
            }
            Op::Nice { pid, r, x } => match pick(&pids, pid) {
                Some(p) => {
                    let allowed = root || s.process(p).unwrap().uid == who.uid;
                    applied(other(s.nice(who, p, res(r), x).map(|_| ())), allowed)
                }
                None => skip,
            },
            Op::Transfer { waiter, server, r } => {
                match (pick(&pids, waiter), pick(&pids, server)) {
                    (Some(w), Some(sv)) => {
                        let allowed = may(s, who, s.process(w).unwrap().currency, I);
                        applied(other(s.transfer(who, w, sv, res(r)).map(|_| ())), allowed)
                    }
                    _ => skip,
                }
            }
            Op::EndTransfer(x) => {
                let xs: Vec<_> = s.transfers().copied().collect();
                match pick(&xs, x) {
                    Some(x) => {
                        let allowed = may(s, who, s.process(x.waiter).unwrap().currency, I);
                        applied(other(s.end_transfer(who, x.id).map(|_| ())), allowed)
                    }
                    None => skip,
                }
            }
            Op::Offer {
                client,
                give,
                want,
                ttl,
                mirror,
            } => {
                let ks: Vec<CurrencyId> = s.processes().map(|p| p.currency).collect();
                let own: Vec<CurrencyId> =
                    ks.iter().copied().filter(|k| owns(s, who, *k)).collect();
                // Mostly the caller's own clients; one offer in eight names any currency, to be
                // refused if it is no client.
                let k = match client % 8 {
                    7 => pick(&cs, client),
                    6 => pick(&ks, client),
                    _ => pick(&own, client).or(pick(&ks, client)),
                };
                let Some(k) = k else { return skip };
                let queued = s.dealer().offers().to_vec();
                let (give, want) = match mirror.and_then(|j| pick(&queued, j)) {
                    Some(q) => (q.offer.want, q.offer.give),
                    None => ((res(give.0), give.1), (res(want.0), want.1)),
                };
                let offer = Offer {
                    client: k,
                    give,
                    want,
                    expires: ttl.map(|t| now + Duration::from_secs(t)),
                };
                let allowed = owns(s, who, k);
                let r = s.offer(who, offer, now).map(|done| match done.value {
                    OfferReply::Exchanged { exchange, .. } => {
                        let x = *s.model().exchange(exchange).unwrap();
                        Seen::Exchanged {
                            a: x.a,
                            b: x.b,
                            undone: done.undone.iter().map(|u| (u.a, u.b)).collect(),
                        }
                    }
                    _ => Seen::Other,
                });
                applied(r, allowed)
            }
            Op::CancelOffer(o) => {
                let os: Vec<_> = s.dealer().offers().to_vec();
                match pick(&os, o) {
                    Some(q) => {
                        let allowed = owns(s, who, q.offer.client);
                        applied(other(s.cancel_offer(who, q.id).map(|_| ())), allowed)
                    }
                    None => skip,
                }
            }
            Op::CancelExchange(x) => {
                let xs: Vec<_> = s.model().exchanges().copied().collect();
                match pick(&xs, x) {
                    Some(x) => {
                        let allowed = owns(s, who, x.a) || owns(s, who, x.b);
                        let r = s.cancel_exchange(who, x.id).map(|done| Seen::Exchanged {
                            a: x.a,
                            b: x.b,
                            undone: done.undone.iter().map(|u| (u.a, u.b)).collect(),
                        });
                        applied(r, allowed)
                    }
                    None => skip,
                }
            }
            Op::Expire => applied(other(s.expire_offers(who, now).map(|_| ())), root),
        }
    }
}

fn is_permission(e: &TicketsError) -> bool {
    matches!(
        e,
        TicketsError::Denied { .. }
            | TicketsError::DeniedEither { .. }
            | TicketsError::NotOwner { .. }
            | TicketsError::NotIdentity { .. }
            | TicketsError::NotRoot { .. }
    )
}

fn clients(s: &TicketSystem) -> Vec<CurrencyId> {
    s.model()
        .currencies()
        .filter(|c| c.is_client())
        .map(|c| c.id)
        .collect()
}

/// Every client's `(R, R*)` per resource.
fn all_rights(s: &TicketSystem) -> BTreeMap<CurrencyId, [(f64, f64); 3]> {
    clients(s)
        .into_iter()
        .map(|k| {
            let m = s.model();
            (
                k,
                Resource::ALL.map(|r| (m.rights(k, r).unwrap(), m.guaranteed(k, r).unwrap())),
            )
        })
        .collect()
}

/// The currencies reachable from `from` (itself included) along tickets of `r`, or of any
/// resource.
fn funded_by(s: &TicketSystem, from: CurrencyId, r: Option<Resource>) -> Vec<CurrencyId> {
    let m = s.model();
    let mut seen = vec![from];
    let mut i = 0;
    while i < seen.len() {
        for t in &m.currency(seen[i]).unwrap().issued {
            let t = m.ticket(*t).unwrap();
            let wanted = match r {
                Some(r) => t.resource == r,
                None => true,
            };
            if wanted && !seen.contains(&t.holder) {
                seen.push(t.holder);
            }
        }
        i += 1;
    }
    seen
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The system's own records agree with the model.
fn check_records(s: &TicketSystem) -> Result<(), String> {
    let m = s.model();
    for p in s.processes() {
        if !m
            .currency(p.currency)
            .map_err(|e| e.to_string())?
            .is_client()
        {
            return Err(format!("process {} has no client currency", p.pid));
        }
    }
    for x in s.transfers() {
        let t = m.ticket(x.ticket).map_err(|e| e.to_string())?;
        let (w, sv) = (s.process(x.waiter), s.process(x.server));
        let issuer = answering(s, t.issuer);
        if w.map(|w| w.currency) != Some(issuer) || sv.map(|p| p.currency) != Some(t.holder) {
            return Err(format!("transfer {} does not match its ticket", x.id));
        }
    }
    for n in s.nices() {
        if base_held(s, n.currency, n.resource) != n.amount {
            return Err(format!(
                "nice currency {} holds not exactly its X",
                n.currency
            ));
        }
    }
    if !m.exchanges_to_undo().is_empty() {
        return Err("an exchange left to undo after an operation".into());
    }
    Ok(())
}

fn run(steps: &[(usize, Op)]) -> Result<World, TestCaseError> {
    let callers = callers();
    let mut w = World::new();
    for (i, (who, op)) in steps.iter().enumerate() {
        let who = &callers[*who];
        let json = serde_json::to_string(&w.s).unwrap();
        let users: Vec<u32> = UIDS
            .into_iter()
            .filter(|u| w.s.user(*u).is_some())
            .collect();
        let funding: Vec<[i64; 3]> = users
            .iter()
            .map(|u| Resource::ALL.map(|r| user_base(&w.s, *u, r)))
            .collect();
        let before = all_rights(&w.s);
        let applied = w.apply(who, op);
        let at = format!("step {i}: {op:?} by uid {}", who.uid);
        // Invariant 10: permission refusals exactly where the oracle refuses; refusals of any
        // kind change nothing.
        match &applied.result {
            Ok(_) => prop_assert!(applied.allowed, "{at}: allowed, but the oracle denies"),
            Err(e) => {
                prop_assert_eq!(is_permission(e), !applied.allowed, "{}: {}", at, e);
                prop_assert_eq!(
                    &serde_json::to_string(&w.s).unwrap(),
                    &json,
                    "{}: {}",
                    at,
                    e
                );
            }
        }
        w.s.model()
            .check_exact()
            .map_err(|e| TestCaseError::fail(format!("{at}: {e}")))?;
        check_records(&w.s).map_err(|e| TestCaseError::fail(format!("{at}: {e}")))?;
        w.s.validate()
            .map_err(|e| TestCaseError::fail(format!("{at}: {e}")))?;
        // Invariant 11: only root's own hand on base tickets changes a user's base funding.
        if !applied.touches_base {
            for (u, was) in users.iter().zip(&funding) {
                let now = Resource::ALL.map(|r| user_base(&w.s, *u, r));
                prop_assert_eq!(&now, was, "{}: base funding of uid {}", at, u);
            }
        }
        // Invariant 6: an exchange made or undone leaves everyone else's R and R*, and ΣR*, as
        // they were; everyone else being neither a participant nor funded by one.
        if let Ok(Seen::Exchanged { a, b, undone }) = &applied.result {
            let after = all_rights(&w.s);
            let mut involved: Vec<CurrencyId> = Vec::new();
            for p in [a, b]
                .into_iter()
                .chain(undone.iter().flat_map(|(x, y)| [x, y]))
            {
                involved.extend(funded_by(&w.s, *p, None));
            }
            let involved = |k: &CurrencyId| involved.contains(k);
            for (k, was) in before.iter().filter(|(k, _)| !involved(k)) {
                for (r, (old, new)) in Resource::ALL.iter().zip(was.iter().zip(&after[k])) {
                    prop_assert!(
                        close(old.0, new.0) && close(old.1, new.1),
                        "{}: {} {} moved from {:?} to {:?}",
                        at,
                        k,
                        r,
                        old,
                        new
                    );
                }
            }
            for r in 0..3 {
                let sum = |m: &BTreeMap<CurrencyId, [(f64, f64); 3]>| -> f64 {
                    m.values().map(|v| v[r].1).sum()
                };
                prop_assert!(close(sum(&before), sum(&after)), "{}: ΣR* moved", at);
            }
        }
    }
    Ok(w)
}

/// A model's JSON without the tickets `gone`, as the model is after they are revoked: out of the
/// ticket map (keyed by id) and of every currency's issued and backing lists.
fn without_tickets(mut model: serde_json::Value, gone: &[u64]) -> serde_json::Value {
    let kept = |id: Option<u64>| !id.is_some_and(|id| gone.contains(&id));
    if let Some(tickets) = model["tickets"].as_object_mut() {
        tickets.retain(|id, _| kept(id.parse().ok()));
    }
    if let Some(currencies) = model["currencies"].as_object_mut() {
        for c in currencies.values_mut() {
            for list in ["issued", "backing"] {
                if let Some(ids) = c[list].as_array_mut() {
                    ids.retain(|id| kept(id.as_u64()));
                }
            }
        }
    }
    model
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Invariants 6, 10 and 11 and the exact valuation after every step.
    #[test]
    fn random_operations_by_random_callers(steps in prop::collection::vec(step(), 1..48)) {
        run(&steps)?;
    }

    /// Invariant 12, on any state random operations reach: the server gains exactly the
    /// waiter's would-be R; clients other than those two and those the server funds keep their
    /// R; and ending the transfer restores the model.
    #[test]
    fn transfers_move_exactly_the_waiters_rights(
        steps in prop::collection::vec(step(), 1..32),
        waiter in 0usize..32,
        server in 0usize..32,
        r in 0usize..3,
    ) {
        transfer_case(&steps, waiter, server, r)?;
    }
}

/// Invariant 12 for one state and one transfer (see `transfers_move_exactly_the_waiters_rights`).
fn transfer_case(
    steps: &[(usize, Op)],
    waiter: usize,
    server: usize,
    r: usize,
) -> Result<(), TestCaseError> {
    let mut w = run(steps)?;
    let pids: Vec<u32> = w.s.processes().map(|p| p.pid).collect();
    let (Some(wp), Some(sp)) = (pick(&pids, waiter), pick(&pids, server)) else {
        return Ok(());
    };
    let r = Resource::ALL[r];
    let (k, srv) = (
        w.s.process(wp).unwrap().currency,
        w.s.process(sp).unwrap().currency,
    );
    let before = serde_json::to_value(w.s.model()).unwrap();
    // The would-be state: the waiter competing.
    let mut would = w.s.clone();
    would.set_active(&root(), wp, r, true).unwrap();
    let base = all_rights(&would);
    let Ok(done) = w.s.transfer(&root(), wp, sp, r) else {
        // Refused (a cycle, or the waiter already waits): nothing changed.
        prop_assert_eq!(serde_json::to_value(w.s.model()).unwrap(), before);
        return Ok(());
    };
    // A waiter that competed for nothing is made active by its transfer ticket (the server
    // holds it). An exchange in which it gives what it no longer has the value for is then
    // undone (invariant 8: it would pass negative rights on to the server), reported in
    // `undone`, and stays undone when the transfer ends; the rest is restored exactly.
    for x in &done.undone {
        prop_assert!(
            x.a == k || x.b == k,
            "{:?} undone, not the waiter's ({})",
            x,
            k
        );
    }
    let gone: Vec<u64> = done
        .undone
        .iter()
        .flat_map(|x| x.tickets.iter().map(|t| t.0))
        .collect();
    let before = without_tickets(before, &gone);
    w.s.model().check_exact().map_err(TestCaseError::fail)?;
    let after = all_rights(&w.s);
    let m = w.s.model();
    let downstream = funded_by(&w.s, srv, Some(r));
    let ri = r.index();
    prop_assert!(
        close(after[&k][ri].0, 0.0),
        "the waiter keeps {}",
        after[&k][ri].0
    );
    // While the server is idle the transfer ticket is too, and the waiter's value goes to
    // its siblings, as any idle client's does.
    if m.is_active(srv, r).unwrap() {
        if m.currency(srv).unwrap().competing[r] && downstream.len() == 1 {
            let gain = after[&srv][ri].0 - base[&srv][ri].0;
            prop_assert!(
                close(gain, base[&k][ri].0),
                "gain {} vs {}",
                gain,
                base[&k][ri].0
            );
        }
        let off = |c: &CurrencyId| *c != k && !downstream.contains(c);
        for (c, was) in base.iter().filter(|(c, _)| off(c)) {
            prop_assert!(close(was[ri].0, after[c][ri].0), "{} moved", c);
        }
    }
    let x =
        w.s.transfers()
            .find(|x| x.waiter == wp && x.resource == r)
            .unwrap()
            .id;
    w.s.end_transfer(&root(), x).unwrap();
    let restored = serde_json::to_value(w.s.model()).unwrap();
    prop_assert_eq!(&before["currencies"], &restored["currencies"]);
    prop_assert_eq!(&before["tickets"], &restored["tickets"]);
    w.s.model().check_exact().map_err(TestCaseError::fail)?;
    Ok(())
}

/// Found by a long run of the property (1 case in about 72,000): the waiter's exchange, whose
/// Disk it could no longer back, is undone when its transfer ticket makes it active.
#[test]
fn a_transfer_undoes_the_waiters_exchange_it_cannot_back() {
    let steps = [
        (
            0,
            Op::Spawn {
                uid: 0,
                parent: None,
            },
        ),
        (0, Op::Setuid { pid: 4, uid: 2 }),
        (
            0,
            Op::Spawn {
                uid: 0,
                parent: None,
            },
        ),
        (
            0,
            Op::Offer {
                client: 22,
                give: (2, 5),
                want: (0, 5),
                ttl: None,
                mirror: None,
            },
        ),
        (0, Op::Unfund(14)),
        (
            0,
            Op::Offer {
                client: 0,
                give: (0, 5),
                want: (1, 5),
                ttl: None,
                mirror: Some(0),
            },
        ),
    ];
    transfer_case(&steps, 22, 0, 2).unwrap();
}
