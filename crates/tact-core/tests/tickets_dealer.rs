//! The dealer of spec tickets.md §2.9: exact complements match oldest first, other amounts of the
//! same pair are reported as conflicts to both sides, expired, cancelled and withdrawn offers never
//! match, and offers that could not be carried out are refused.

use std::time::Duration;

use tact_core::tickets::dealer::{BaseTicket, Dealer, Offer, OfferOutcome, Trade};
use tact_core::tickets::{CurrencyId, OfferId, Resource, TicketsError};

use Resource::{Cpu, Disk, Mem};

const A: CurrencyId = CurrencyId(10);
const B: CurrencyId = CurrencyId(11);
const C: CurrencyId = CurrencyId(12);
const RICH: i64 = 1 << 40;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn offer(client: CurrencyId, give: (Resource, i64), want: (Resource, i64)) -> Offer {
    Offer {
        client,
        give,
        want,
        expires: None,
    }
}

fn queued(outcome: OfferOutcome) -> (OfferId, Vec<OfferId>) {
    match outcome {
        OfferOutcome::Queued { id, conflicts } => (id, conflicts),
        other => panic!("expected the offer to be queued, got {other:?}"),
    }
}

#[test]
fn the_reports_example_each_side_sees_the_other_as_conflicting() {
    let mut d = Dealer::new();
    // A asks 20 CPU for 10 memory; B asks 10 memory for 10 CPU.
    let (a, a_conflicts) = queued(
        d.offer(offer(A, (Mem, 10), (Cpu, 20)), secs(0), RICH)
            .unwrap(),
    );
    assert!(a_conflicts.is_empty());
    let (b, b_conflicts) = queued(
        d.offer(offer(B, (Cpu, 10), (Mem, 10)), secs(1), RICH)
            .unwrap(),
    );
    assert_eq!(b_conflicts, vec![a]);
    assert_eq!(d.conflicts(a, secs(2)).unwrap(), vec![b]);
    assert_eq!(d.conflicts(b, secs(2)).unwrap(), vec![a]);
    // Both wait; A revises to B's terms and the exchange happens at once.
    assert_eq!(d.offers().len(), 2);
    d.cancel(a).unwrap();
    match d
        .offer(offer(A, (Mem, 10), (Cpu, 10)), secs(3), RICH)
        .unwrap()
    {
        OfferOutcome::Matched {
            offer_a,
            offer_b,
            trade,
        } => {
            assert_ne!(offer_a, a);
            assert_eq!(offer_b, b);
            assert_eq!(
                trade,
                Trade {
                    a: A,
                    b: B,
                    give: (Mem, 10),
                    get: (Cpu, 10),
                }
            );
        }
        other => panic!("expected a match, got {other:?}"),
    }
    assert!(d.offers().is_empty());
}

#[test]
fn a_trade_is_four_base_tickets_that_net_to_zero_per_resource() {
    // §2.9: a trades disk worth 50 for memory worth 20.
    let trade = Trade {
        a: A,
        b: B,
        give: (Disk, 50),
        get: (Mem, 20),
    };
    let t = |holder, resource, amount| BaseTicket {
        holder,
        resource,
        amount,
    };
    assert_eq!(
        trade.tickets(),
        [
            t(A, Mem, 20),
            t(A, Disk, -50),
            t(B, Disk, 50),
            t(B, Mem, -20)
        ]
    );
}

#[test]
fn the_oldest_exact_complement_matches_first() {
    let mut d = Dealer::new();
    let (first, _) = queued(
        d.offer(offer(A, (Cpu, 30), (Disk, 40)), secs(0), RICH)
            .unwrap(),
    );
    // Another amount of the same pair, then a second exact complement from another client.
    let (other_amount, _) = queued(
        d.offer(offer(B, (Cpu, 31), (Disk, 40)), secs(1), RICH)
            .unwrap(),
    );
    let (second, _) = queued(
        d.offer(offer(B, (Cpu, 30), (Disk, 40)), secs(2), RICH)
            .unwrap(),
    );
    let m = d
        .offer(offer(C, (Disk, 40), (Cpu, 30)), secs(3), RICH)
        .unwrap();
    assert!(
        matches!(m, OfferOutcome::Matched { offer_b, trade, .. } if offer_b == first && trade.b == A),
        "{m:?}"
    );
    let m = d
        .offer(offer(C, (Disk, 40), (Cpu, 30)), secs(4), RICH)
        .unwrap();
    assert!(
        matches!(m, OfferOutcome::Matched { offer_b, trade, .. } if offer_b == second && trade.b == B),
        "{m:?}"
    );
    let left: Vec<OfferId> = d.offers().iter().map(|q| q.id).collect();
    assert_eq!(left, vec![other_amount]);
}

#[test]
fn a_client_never_trades_with_itself() {
    let mut d = Dealer::new();
    let (mine, _) = queued(
        d.offer(offer(A, (Cpu, 5), (Mem, 5)), secs(0), RICH)
            .unwrap(),
    );
    let (again, conflicts) = queued(
        d.offer(offer(A, (Mem, 5), (Cpu, 5)), secs(1), RICH)
            .unwrap(),
    );
    assert!(conflicts.is_empty());
    assert_eq!(d.offers().len(), 2);
    // Its own offers are not conflicts either.
    let (_, conflicts) = queued(
        d.offer(offer(A, (Mem, 6), (Cpu, 5)), secs(2), RICH)
            .unwrap(),
    );
    assert!(conflicts.is_empty());
    assert!(d.conflicts(mine, secs(2)).unwrap().is_empty());
    assert!(d.conflicts(again, secs(2)).unwrap().is_empty());
}

#[test]
fn expired_offers_never_match_and_are_dropped_by_expire() {
    let mut d = Dealer::new();
    let lapsing = Offer {
        expires: Some(secs(10)),
        ..offer(A, (Cpu, 10), (Disk, 10))
    };
    let (old, _) = queued(d.offer(lapsing, secs(0), RICH).unwrap());
    // Still live just before its expiry: listed as a conflict.
    let (_, conflicts) = queued(
        d.offer(offer(B, (Disk, 9), (Cpu, 10)), secs(9), RICH)
            .unwrap(),
    );
    assert_eq!(conflicts, vec![old]);
    // From its expiry on it neither matches nor conflicts, even before `expire` runs.
    let (late, conflicts) = queued(
        d.offer(offer(C, (Disk, 10), (Cpu, 10)), secs(10), RICH)
            .unwrap(),
    );
    assert!(conflicts.is_empty());
    assert!(d.get(old).is_some());
    assert_eq!(d.expire(secs(10)), vec![old]);
    assert!(d.get(old).is_none());
    assert!(d.get(late).is_some());
    assert!(d.expire(secs(1000)).is_empty());
}

#[test]
fn cancelled_and_withdrawn_offers_never_match() {
    let mut d = Dealer::new();
    let (a, _) = queued(
        d.offer(offer(A, (Cpu, 10), (Disk, 10)), secs(0), RICH)
            .unwrap(),
    );
    let (b1, _) = queued(
        d.offer(offer(B, (Mem, 10), (Disk, 10)), secs(1), RICH)
            .unwrap(),
    );
    let (b2, _) = queued(
        d.offer(offer(B, (Mem, 20), (Cpu, 10)), secs(2), RICH)
            .unwrap(),
    );
    let cancelled = d.cancel(a).unwrap();
    assert_eq!(
        (cancelled.id, cancelled.offer.client, cancelled.at),
        (a, A, secs(0))
    );
    assert_eq!(d.cancel(a), Err(TicketsError::UnknownOffer(a)));
    assert_eq!(d.withdraw_client(B), vec![b1, b2]);
    for complement in [
        offer(C, (Disk, 10), (Cpu, 10)),
        offer(C, (Disk, 10), (Mem, 10)),
        offer(C, (Cpu, 10), (Mem, 20)),
    ] {
        let (_, conflicts) = queued(d.offer(complement, secs(3), RICH).unwrap());
        assert!(conflicts.is_empty());
    }
    assert_eq!(
        d.conflicts(b1, secs(3)),
        Err(TicketsError::UnknownOffer(b1))
    );
}

#[test]
fn offers_that_could_not_be_carried_out_are_refused_and_change_nothing() {
    let mut d = Dealer::new();
    queued(
        d.offer(offer(A, (Cpu, 10), (Disk, 10)), secs(0), 10)
            .unwrap(),
    );
    let before = d.clone();
    // Above the offerer's R* for the resource it gives.
    assert_eq!(
        d.offer(offer(B, (Disk, 11), (Cpu, 10)), secs(1), 10),
        Err(TicketsError::GiveAboveRights {
            client: B,
            resource: Disk,
            give: 11,
            max: 10,
        })
    );
    assert_eq!(
        d.offer(offer(B, (Disk, 0), (Cpu, 10)), secs(1), 10),
        Err(TicketsError::NonPositiveAmount { amount: 0 })
    );
    assert_eq!(
        d.offer(offer(B, (Disk, 5), (Cpu, -3)), secs(1), 10),
        Err(TicketsError::NonPositiveAmount { amount: -3 })
    );
    assert_eq!(
        d.offer(offer(B, (Cpu, 5), (Cpu, 6)), secs(1), 10),
        Err(TicketsError::SameResource(Cpu))
    );
    let stale = Offer {
        expires: Some(secs(1)),
        ..offer(B, (Disk, 10), (Cpu, 10))
    };
    assert_eq!(
        d.offer(stale, secs(1), 10),
        Err(TicketsError::OfferExpired {
            expires: secs(1),
            now: secs(1),
        })
    );
    assert_eq!(d, before);
    // At exactly R* it goes through.
    assert!(matches!(
        d.offer(offer(B, (Disk, 10), (Cpu, 10)), secs(1), 10),
        Ok(OfferOutcome::Matched { .. })
    ));
}

#[test]
fn the_queue_survives_a_json_round_trip() {
    let mut d = Dealer::new();
    let lapsing = Offer {
        expires: Some(secs(60)),
        ..offer(A, (Mem, 1 << 20), (Disk, 100))
    };
    queued(d.offer(lapsing, secs(5), RICH).unwrap());
    queued(
        d.offer(offer(B, (Cpu, 7), (Mem, 3)), secs(6), RICH)
            .unwrap(),
    );
    let json = serde_json::to_string(&d).unwrap();
    let mut back: Dealer = serde_json::from_str(&json).unwrap();
    assert_eq!(back, d);
    // Ids keep increasing after a restore.
    let (id, _) = queued(
        back.offer(offer(C, (Cpu, 1), (Disk, 1)), secs(7), RICH)
            .unwrap(),
    );
    assert!(d.offers().iter().all(|q| q.id < id));
}

// ----- random sequences against a naive reading of §2.9 -----

mod sequences {
    use super::*;
    use proptest::prelude::*;
    use tact_core::tickets::dealer::QueuedOffer;

    #[derive(Debug, Clone)]
    enum Step {
        Offer {
            client: u32,
            give: (Resource, i64),
            want: (Resource, i64),
            ttl: Option<u64>,
        },
        Cancel(usize),
        Expire,
        Withdraw(u32),
    }

    fn resource() -> impl Strategy<Value = Resource> {
        prop_oneof![Just(Cpu), Just(Mem), Just(Disk)]
    }

    fn step() -> impl Strategy<Value = Step> {
        // Few clients, resources and amounts, so that complements and conflicts are common.
        let side = || (resource(), 1i64..4);
        prop_oneof![
            6 => (0u32..3, side(), side(), proptest::option::of(0u64..6))
                .prop_map(|(client, give, want, ttl)| Step::Offer { client, give, want, ttl }),
            1 => any::<usize>().prop_map(Step::Cancel),
            1 => Just(Step::Expire),
            1 => (0u32..3).prop_map(Step::Withdraw),
        ]
    }

    fn live(q: &QueuedOffer, now: Duration) -> bool {
        match q.offer.expires {
            Some(e) => now < e,
            None => true,
        }
    }

    fn complement(q: &Offer, o: &Offer) -> bool {
        q.client != o.client && q.give == o.want && q.want == o.give
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn matches_are_oldest_live_exact_complements_and_the_queue_holds_no_match(
            steps in proptest::collection::vec((0u64..3, step()), 1..60),
        ) {
            let mut d = Dealer::new();
            let mut now = Duration::ZERO;
            for (dt, step) in steps {
                now += secs(dt);
                let before: Vec<QueuedOffer> = d.offers().to_vec();
                match step {
                    Step::Offer { client, give, want, ttl } => {
                        let o = Offer {
                            client: CurrencyId(client),
                            give,
                            want,
                            expires: ttl.map(|t| now + secs(t)),
                        };
                        let got = d.offer(o, now, 2);
                        if give.1 > 2 || give.0 == want.0 || o.expires.is_some_and(|e| e <= now) {
                            prop_assert!(got.is_err(), "{:?}", got);
                            prop_assert_eq!(d.offers(), &before[..]);
                            continue;
                        }
                        let first = before.iter().find(|q| live(q, now) && complement(&q.offer, &o));
                        match got.unwrap() {
                            OfferOutcome::Matched { offer_a, offer_b, trade } => {
                                let q = first.expect("a match needs a live complement");
                                prop_assert_eq!(offer_b, q.id);
                                prop_assert!(before.iter().all(|q| q.id < offer_a));
                                prop_assert_eq!(trade, Trade { a: o.client, b: q.offer.client, give, get: want });
                                for r in Resource::ALL {
                                    let net: i64 = trade.tickets().iter()
                                        .filter(|t| t.resource == r).map(|t| t.amount).sum();
                                    prop_assert_eq!(net, 0);
                                }
                                let mut expected = before.clone();
                                expected.retain(|e| e.id != q.id);
                                prop_assert_eq!(d.offers(), &expected[..]);
                            }
                            OfferOutcome::Queued { id, conflicts } => {
                                prop_assert!(first.is_none());
                                let want_conflicts: Vec<OfferId> = before.iter()
                                    .filter(|q| live(q, now) && q.offer.client != o.client)
                                    .filter(|q| q.offer.give.0 == want.0 && q.offer.want.0 == give.0)
                                    .map(|q| q.id)
                                    .collect();
                                prop_assert_eq!(conflicts, want_conflicts);
                                prop_assert_eq!(d.offers().last().map(|q| q.id), Some(id));
                            }
                        }
                    }
                    Step::Cancel(pick) => {
                        if !before.is_empty() {
                            let id = before[pick % before.len()].id;
                            prop_assert_eq!(d.cancel(id).unwrap().id, id);
                            prop_assert!(d.get(id).is_none());
                        }
                    }
                    Step::Expire => {
                        let gone: Vec<OfferId> =
                            before.iter().filter(|q| !live(q, now)).map(|q| q.id).collect();
                        prop_assert_eq!(d.expire(now), gone);
                        prop_assert!(d.offers().iter().all(|q| live(q, now)));
                    }
                    Step::Withdraw(c) => {
                        d.withdraw_client(CurrencyId(c));
                        prop_assert!(d.offers().iter().all(|q| q.offer.client != CurrencyId(c)));
                    }
                }
                // Oldest first, and no two live offers in the queue could have been matched.
                let q = d.offers();
                prop_assert!(q.windows(2).all(|w| w[0].id < w[1].id && w[0].at <= w[1].at));
                for x in q.iter().filter(|x| live(x, now)) {
                    for y in q.iter().filter(|y| live(y, now)) {
                        prop_assert!(!complement(&x.offer, &y.offer), "{:?} and {:?} both wait", x, y);
                    }
                }
            }
        }
    }
}
