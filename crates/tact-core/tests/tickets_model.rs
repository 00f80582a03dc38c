//! The tickets model on the report's worked examples (Sullivan & Seltzer §2.2, §3.3; spec
//! tickets.md §2.2–2.5, §2.9, §5 E1 and E3), and its structural refusals.

use tact_core::tickets::{
    Broker, CurrencyId, CurrencyKind, Kind, Mode, Model, PerResource, PrincipalId, Resource,
    TicketId, TicketsError, DEFAULT_HARD_TOTAL,
};

const CPU: Resource = Resource::Cpu;
const MEM: Resource = Resource::Mem;
const DISK: Resource = Resource::Disk;

fn model() -> Model {
    Model::new(PerResource([1000, 1 << 30, 1000]))
}

fn broker() -> Broker {
    Broker {
        owner: 1000,
        group: 1000,
        mode: Mode::OWNER_ONLY,
    }
}

fn pure(m: &mut Model, name: &str) -> CurrencyId {
    m.create_currency(CurrencyKind::Pure, name, broker())
        .unwrap()
}

/// A client competing for every resource.
fn client(m: &mut Model, name: &str) -> CurrencyId {
    let principal = PrincipalId(m.currencies().count() as u64);
    let k = m
        .create_currency(CurrencyKind::Client { principal }, name, broker())
        .unwrap();
    for r in Resource::ALL {
        m.set_active(k, r, true).unwrap();
    }
    k
}

fn fund(m: &mut Model, issuer: CurrencyId, holder: CurrencyId, amount: i64) -> TicketId {
    m.issue(issuer, holder, CPU, amount, Kind::Soft).unwrap()
}

fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

fn share(m: &Model, r: Resource, k: CurrencyId) -> f64 {
    m.shares(r)
        .into_iter()
        .find(|(c, _)| *c == k)
        .map(|(_, s)| s)
        .unwrap_or(0.0)
}

fn json(m: &Model) -> String {
    serde_json::to_string(m).unwrap()
}

/// Figure 1: bob holds 100 of the 400 base tickets; task3 200 and task2 100 of bob's 300.
struct Figure1 {
    m: Model,
    alice: CurrencyId,
    bob: CurrencyId,
    task2: CurrencyId,
    task3: CurrencyId,
    task2_ticket: TicketId,
}

fn figure1() -> Figure1 {
    let mut m = model();
    let alice = client(&mut m, "alice");
    let bob = pure(&mut m, "bob");
    let task2 = client(&mut m, "task2");
    let task3 = client(&mut m, "task3");
    fund(&mut m, CurrencyId::BASE, alice, 300);
    fund(&mut m, CurrencyId::BASE, bob, 100);
    let task2_ticket = fund(&mut m, bob, task2, 100);
    fund(&mut m, bob, task3, 200);
    Figure1 {
        m,
        alice,
        bob,
        task2,
        task3,
        task2_ticket,
    }
}

#[test]
fn bob_task2_task3_value_two_thirds_and_one_third_of_bobs_quarter() {
    let mut f = figure1();
    assert_close(f.m.value(f.bob, CPU).unwrap(), 100.0);
    assert_eq!(f.m.active_amount(f.bob, CPU).unwrap(), 300);
    assert_close(f.m.rights(f.task3, CPU).unwrap(), 200.0 / 3.0);
    assert_close(f.m.rights(f.task2, CPU).unwrap(), 100.0 / 3.0);
    assert_close(share(&f.m, CPU, f.task3), 1.0 / 6.0);
    assert_close(f.m.ticket_value(f.task2_ticket).unwrap(), 100.0 / 3.0);
    f.m.check_exact().unwrap();

    // bob issuing more lowers only bob's clients.
    let task4 = client(&mut f.m, "task4");
    fund(&mut f.m, f.bob, task4, 300);
    assert_close(f.m.rights(f.alice, CPU).unwrap(), 300.0);
    assert_close(f.m.rights(f.task3, CPU).unwrap(), 100.0 / 3.0);
    assert_close(f.m.rights(task4, CPU).unwrap(), 50.0);
    f.m.check_exact().unwrap();
}

#[test]
fn upper_limit_doubling_task2_moves_it_from_33_to_50_not_67() {
    let mut f = figure1();
    f.m.set_amount(f.task2_ticket, 200).unwrap();
    assert_close(f.m.rights(f.task2, CPU).unwrap(), 50.0);
    assert_close(f.m.rights(f.task3, CPU).unwrap(), 50.0);
    assert_close(f.m.rights(f.alice, CPU).unwrap(), 300.0);

    // A sole holder gains nothing from more tickets.
    let mut m = model();
    let solo = pure(&mut m, "solo");
    let only = client(&mut m, "only");
    fund(&mut m, CurrencyId::BASE, solo, 100);
    let t = fund(&mut m, solo, only, 10);
    assert_close(m.rights(only, CPU).unwrap(), 100.0);
    m.set_amount(t, 10_000).unwrap();
    assert_close(m.rights(only, CPU).unwrap(), 100.0);
    m.check_exact().unwrap();
}

#[test]
fn lower_limit_the_hog_takes_all_of_bobs_rights_while_task2_sleeps() {
    let mut m = model();
    let bob = pure(&mut m, "bob");
    let task2 = client(&mut m, "task2");
    let hog = client(&mut m, "hog");
    let other = client(&mut m, "other");
    fund(&mut m, CurrencyId::BASE, bob, 100);
    fund(&mut m, CurrencyId::BASE, other, 300);
    fund(&mut m, bob, task2, 100);
    fund(&mut m, bob, hog, 10);
    assert_close(m.rights(hog, CPU).unwrap(), 100.0 * 10.0 / 110.0);
    m.set_active(task2, CPU, false).unwrap();
    assert_close(m.rights(hog, CPU).unwrap(), 100.0);
    assert_eq!(m.rights(task2, CPU).unwrap(), 0.0);
    assert_close(share(&m, CPU, hog), 0.25);
    // R* still counts task2.
    assert_close(m.guaranteed(hog, CPU).unwrap(), 100.0 * 10.0 / 110.0);
    m.check_exact().unwrap();

    // Funding the hog straight from the base removes the lower limit (Figure 2, bottom).
    let hog2 = client(&mut m, "hog2");
    fund(&mut m, CurrencyId::BASE, hog2, 10);
    assert_close(m.rights(hog2, CPU).unwrap(), 10.0);
}

#[test]
fn a_hard_200_of_bobs_1000_is_20_percent_however_many_soft_tickets_bob_issues() {
    let mut m = model();
    let bob = pure(&mut m, "bob");
    let other = client(&mut m, "other");
    let d = client(&mut m, "D");
    let early = client(&mut m, "early");
    fund(&mut m, CurrencyId::BASE, bob, 100);
    fund(&mut m, CurrencyId::BASE, other, 300);
    let early_ticket = fund(&mut m, bob, early, 50);
    m.issue(bob, d, CPU, 200, Kind::Hard).unwrap();

    let soft = m.currency(bob).unwrap().soft_tix.expect("soft_tix(bob)");
    assert!(m.currency(soft).unwrap().is_hidden());
    assert_eq!(m.hard_total(bob, CPU).unwrap(), Some(DEFAULT_HARD_TOTAL));
    let funding = m.currency(bob).unwrap().hard[CPU].unwrap().funding;
    assert_eq!(m.ticket(funding).unwrap().amount, 800);
    // The soft ticket issued before moved to soft_tix, keeping its id and holder.
    assert_eq!(m.ticket(early_ticket).unwrap().issuer, soft);
    assert_eq!(m.ticket(early_ticket).unwrap().holder, early);

    for n in 0..5 {
        let task = client(&mut m, &format!("task{n}"));
        fund(&mut m, bob, task, 100 * (n + 1));
        assert_close(m.rights(d, CPU).unwrap(), 20.0);
        assert_close(m.rights(other, CPU).unwrap(), 300.0);
        m.check_exact().unwrap();
    }

    // More than H is refused, and changes nothing.
    let before = json(&m);
    let err = m.issue(bob, other, CPU, 801, Kind::Hard).unwrap_err();
    assert!(matches!(
        err,
        TicketsError::HardTotalExceeded {
            would: 1001,
            total: 1000,
            ..
        }
    ));
    assert_eq!(json(&m), before);

    // A hard ticket is a floor, not a cap: with bob's soft side idle, D gets all of bob.
    let soft_clients: Vec<CurrencyId> = m
        .currency(soft)
        .unwrap()
        .issued
        .iter()
        .map(|t| m.ticket(*t).unwrap().holder)
        .collect();
    for k in soft_clients {
        m.set_active(k, CPU, false).unwrap();
    }
    assert_close(m.rights(d, CPU).unwrap(), 100.0);

    // Revoking the hard ticket gives its amount back to soft_tix.
    let hard = *m.currency(d).unwrap().backing.first().unwrap();
    m.revoke(hard).unwrap();
    assert_eq!(m.ticket(funding).unwrap().amount, 1000);
    m.check_exact().unwrap();
}

#[test]
fn hard_tickets_spending_the_whole_total_leave_the_soft_side_worthless_and_lose_nothing() {
    let mut m = model();
    let bob = pure(&mut m, "bob");
    let other = client(&mut m, "other");
    let d = client(&mut m, "D");
    let soft = client(&mut m, "soft");
    fund(&mut m, CurrencyId::BASE, bob, 100);
    fund(&mut m, CurrencyId::BASE, other, 100);
    m.set_hard_total(bob, CPU, 500).unwrap();
    m.issue(bob, d, CPU, 500, Kind::Hard).unwrap();
    fund(&mut m, bob, soft, 10);
    assert_close(m.rights(d, CPU).unwrap(), 100.0);
    assert_eq!(m.rights(soft, CPU).unwrap(), 0.0);
    // D asleep: bob's soft side passes nothing, so bob stops competing and other gets it all.
    m.set_active(d, CPU, false).unwrap();
    assert!(!m.is_active(bob, CPU).unwrap());
    assert_close(share(&m, CPU, other), 1.0);
    m.check_exact().unwrap();
}

#[test]
fn e1_hierarchical_shares_in_both_halves() {
    let mut m = model();
    let a = pure(&mut m, "A");
    let b = pure(&mut m, "B");
    fund(&mut m, CurrencyId::BASE, a, 1000);
    fund(&mut m, CurrencyId::BASE, b, 1000);
    let [a1, a2, b1, b2, b3] = ["A1", "A2", "B1", "B2", "B3"].map(|n| client(&mut m, n));
    fund(&mut m, a, a1, 100);
    fund(&mut m, a, a2, 200);
    fund(&mut m, b, b1, 100);
    fund(&mut m, b, b2, 200);
    fund(&mut m, b, b3, 300);

    m.set_active(b3, CPU, false).unwrap();
    for (k, want) in [
        (a1, 1.0 / 6.0),
        (a2, 1.0 / 3.0),
        (b1, 1.0 / 6.0),
        (b2, 1.0 / 3.0),
    ] {
        assert_close(share(&m, CPU, k), want);
    }
    assert_eq!(share(&m, CPU, b3), 0.0);
    m.check_exact().unwrap();

    m.set_active(b3, CPU, true).unwrap();
    let second = [
        (a1, 1.0 / 6.0),
        (a2, 1.0 / 3.0),
        (b1, 1.0 / 12.0),
        (b2, 1.0 / 6.0),
        (b3, 1.0 / 4.0),
    ];
    for (k, want) in second {
        assert_close(share(&m, CPU, k), want);
    }
    let total: f64 = m.shares(CPU).iter().map(|(_, s)| s).sum();
    assert_close(total, 1.0);
    m.check_exact().unwrap();
}

#[test]
fn e3_a_hard_half_of_the_base_disk_and_four_soft_eighths() {
    let mut m = model();
    let reserved = client(&mut m, "reserved");
    let user = pure(&mut m, "user");
    m.issue(CurrencyId::BASE, user, DISK, 1000, Kind::Soft)
        .unwrap();
    m.issue(CurrencyId::BASE, reserved, DISK, 500, Kind::Hard)
        .unwrap();
    let soft: Vec<CurrencyId> = (0..4)
        .map(|i| {
            let k = client(&mut m, &format!("iohog{i}"));
            m.issue(user, k, DISK, 200, Kind::Soft).unwrap();
            k
        })
        .collect();
    assert_eq!(m.hard_total(CurrencyId::BASE, DISK).unwrap(), Some(1000));
    assert_close(share(&m, DISK, reserved), 0.5);
    for k in soft {
        assert_close(share(&m, DISK, k), 0.125);
    }
    // The base's other resources are untouched: no hard total, no soft_tix funding.
    assert_eq!(m.hard_total(CurrencyId::BASE, CPU).unwrap(), None);
    m.check_exact().unwrap();
}

#[test]
fn an_exchange_moves_rights_between_two_clients_only_and_undoes_in_one_step() {
    let mut m = model();
    let [a, b, c] = ["a", "b", "c"].map(|n| client(&mut m, n));
    for k in [a, b, c] {
        for r in [MEM, DISK] {
            m.issue(CurrencyId::BASE, k, r, 100, Kind::Soft).unwrap();
        }
    }
    let before_c = [m.rights(c, MEM).unwrap(), m.rights(c, DISK).unwrap()];
    // a trades disk worth 50 for memory worth 20.
    let x = m.create_exchange(a, (DISK, 50), b, (MEM, 20)).unwrap();
    assert_close(m.rights(a, DISK).unwrap(), 50.0);
    assert_close(m.rights(a, MEM).unwrap(), 120.0);
    assert_close(m.rights(b, DISK).unwrap(), 150.0);
    assert_close(m.rights(b, MEM).unwrap(), 80.0);
    assert_eq!(
        [m.rights(c, MEM).unwrap(), m.rights(c, DISK).unwrap()],
        before_c
    );
    assert_close(m.guaranteed(c, DISK).unwrap(), 100.0);
    m.check_exact().unwrap();

    // Revoking any one of the four undoes all of them.
    let ring = m.exchange(x).unwrap().tickets;
    assert_eq!(
        ring.map(|t| m.ticket(t).unwrap().amount),
        [20, -50, 50, -20]
    );
    m.revoke(ring[2]).unwrap();
    assert!(ring.iter().all(|t| m.ticket(*t).is_err()));
    assert!(m.exchange(x).is_err());
    assert_close(m.rights(a, DISK).unwrap(), 100.0);

    // Exchange tickets keep their amounts; an exchange is between two distinct clients on two
    // resources.
    let x = m.create_exchange(a, (DISK, 50), b, (MEM, 20)).unwrap();
    let t = m.exchange(x).unwrap().tickets[0];
    assert!(m.set_amount(t, 30).is_err());
    assert!(matches!(
        m.create_exchange(a, (DISK, 5), b, (DISK, 5)),
        Err(TicketsError::SameResource(DISK))
    ));
    assert!(m.create_exchange(a, (DISK, 5), a, (MEM, 5)).is_err());
    m.undo_exchange(x).unwrap();
    assert!(m.exchanges().next().is_none());
}

#[test]
fn an_exchange_is_refused_or_flagged_when_a_giver_would_go_negative() {
    let mut m = model();
    let [a, b] = ["a", "b"].map(|n| client(&mut m, n));
    for k in [a, b] {
        for r in [CPU, DISK] {
            m.issue(CurrencyId::BASE, k, r, 100, Kind::Soft).unwrap();
        }
    }
    let before = json(&m);
    assert!(matches!(
        m.create_exchange(a, (DISK, 150), b, (CPU, 10)),
        Err(TicketsError::NegativeRights { client, resource: DISK, .. }) if client == a
    ));
    assert_eq!(json(&m), before);

    // A CPU-bound giver's negative disk ticket idles; the partner's positive one is used.
    m.set_active(a, DISK, false).unwrap();
    let x = m.create_exchange(a, (DISK, 150), b, (CPU, 10)).unwrap();
    assert!(m.exchanges_to_undo().is_empty());
    assert_close(m.rights(b, DISK).unwrap(), 250.0);
    m.check_exact().unwrap();
    // When it wants the disk again, its disk value is negative: the exchange must go.
    m.set_active(a, DISK, true).unwrap();
    assert_close(m.value(a, DISK).unwrap(), -50.0);
    assert_eq!(m.exchanges_to_undo(), vec![x]);
    m.undo_exchange(x).unwrap();
    assert!(m.exchanges_to_undo().is_empty());
    assert_close(m.rights(a, DISK).unwrap(), 100.0);
}

#[test]
fn the_funding_graph_stays_acyclic_over_all_resources_and_refusals_change_nothing() {
    let mut m = model();
    let p = pure(&mut m, "p");
    let q = pure(&mut m, "q");
    let k = client(&mut m, "k");
    fund(&mut m, CurrencyId::BASE, p, 100);
    fund(&mut m, p, q, 10);
    fund(&mut m, q, k, 10);
    let before = json(&m);
    // k → p on disk would close p → q → k → p, though the other edges are CPU.
    assert_eq!(
        m.issue(k, p, DISK, 5, Kind::Soft),
        Err(TicketsError::Cycle {
            issuer: k,
            holder: p
        })
    );
    assert!(matches!(
        m.issue(p, p, CPU, 5, Kind::Soft),
        Err(TicketsError::Cycle { .. })
    ));
    assert!(m.issue(p, CurrencyId::BASE, CPU, 5, Kind::Soft).is_err());
    assert!(matches!(
        m.issue(p, k, CPU, 0, Kind::Soft),
        Err(TicketsError::NonPositiveAmount { amount: 0 })
    ));
    assert!(m.issue(p, CurrencyId(99), CPU, 5, Kind::Soft).is_err());
    assert!(m.set_active(p, CPU, true).is_err());
    assert!(m.destroy(CurrencyId::BASE).is_err());
    assert!(m.revoke(TicketId(999)).is_err());
    assert_eq!(json(&m), before);
}

#[test]
fn hidden_soft_tix_currencies_cannot_be_named_and_their_funding_cannot_be_touched() {
    let mut m = model();
    let bob = pure(&mut m, "bob");
    let d = client(&mut m, "D");
    fund(&mut m, CurrencyId::BASE, bob, 100);
    m.issue(bob, d, CPU, 100, Kind::Hard).unwrap();
    let soft = m.currency(bob).unwrap().soft_tix.unwrap();
    let funding = m.currency(bob).unwrap().hard[CPU].unwrap().funding;
    let before = json(&m);
    assert_eq!(
        m.issue(soft, d, CPU, 5, Kind::Soft),
        Err(TicketsError::Hidden(soft))
    );
    assert!(m.destroy(soft).is_err());
    assert!(m.revoke(funding).is_err());
    assert!(m.set_amount(funding, 5).is_err());
    assert!(m.set_hard_total(bob, CPU, 10).is_err());
    assert_eq!(json(&m), before);
}

#[test]
fn destroying_a_currency_revokes_what_it_issued_and_holds_and_returns_hard_amounts() {
    let mut f = figure1();
    f.m.destroy(f.bob).unwrap();
    assert!(f.m.currency(f.bob).is_err());
    assert_eq!(f.m.rights(f.task2, CPU).unwrap(), 0.0);
    assert!(f.m.currency(f.task3).unwrap().backing.is_empty());
    assert_close(share(&f.m, CPU, f.alice), 1.0);

    let mut m = model();
    let bob = pure(&mut m, "bob");
    let d = client(&mut m, "D");
    fund(&mut m, CurrencyId::BASE, bob, 100);
    m.issue(bob, d, CPU, 300, Kind::Hard).unwrap();
    m.destroy(d).unwrap();
    let funding = m.currency(bob).unwrap().hard[CPU].unwrap().funding;
    assert_eq!(m.ticket(funding).unwrap().amount, 1000);
    // Destroying bob takes its soft_tix with it.
    let soft = m.currency(bob).unwrap().soft_tix.unwrap();
    m.destroy(bob).unwrap();
    assert!(m.currency(soft).is_err());
    assert_eq!(m.tickets().count(), 0);
    m.check_exact().unwrap();
}

#[test]
fn a_waiting_client_passes_its_whole_value_to_the_one_it_waits_on() {
    let mut m = model();
    let k = client(&mut m, "k");
    let s = client(&mut m, "s");
    fund(&mut m, CurrencyId::BASE, k, 300);
    fund(&mut m, CurrencyId::BASE, s, 100);
    m.issue(k, s, CPU, 1000, Kind::Soft).unwrap();
    // Both competing: the transfer gets t/(t + SELF_TICKET) of k's value.
    assert_close(m.rights(k, CPU).unwrap(), 150.0);
    assert_close(m.rights(s, CPU).unwrap(), 250.0);
    m.set_active(k, CPU, false).unwrap();
    assert_close(m.rights(s, CPU).unwrap(), 400.0);
    m.check_exact().unwrap();
}

#[test]
fn pooled_funding_is_explained_path_by_path_and_the_factors_multiply_out_to_r() {
    let mut m = model();
    let p = pure(&mut m, "p");
    let q = pure(&mut m, "q");
    let [k, j] = ["k", "j"].map(|n| client(&mut m, n));
    fund(&mut m, CurrencyId::BASE, p, 100);
    fund(&mut m, CurrencyId::BASE, q, 300);
    fund(&mut m, p, k, 10);
    fund(&mut m, p, j, 30);
    fund(&mut m, q, k, 5);
    m.issue(q, j, CPU, 5, Kind::Hard).unwrap();
    let e = m.explain_path(k, CPU).unwrap();
    assert_eq!(e.paths.len(), 2);
    // base → p → k → self, and base → q → soft_tix(q) → k → self.
    assert_eq!(e.paths[0].hops.len(), 3);
    assert_eq!(e.paths[1].hops.len(), 4);
    let sum: f64 = e.paths.iter().map(|p| p.contribution()).sum();
    assert_close(sum, e.rights);
    assert_close(e.rights, m.rights(k, CPU).unwrap());
    assert_close(e.paths[0].contribution(), 25.0);
    let text = serde_json::to_string(&e).unwrap();
    assert!(text.contains("issuer_active"));
    assert!(matches!(
        m.explain_path(p, CPU),
        Err(TicketsError::NotClient(_))
    ));
}

#[test]
fn a_persisted_model_values_the_same_after_loading() {
    let mut f = figure1();
    f.m.issue(f.bob, f.task3, MEM, 7, Kind::Hard).unwrap();
    let text = json(&f.m);
    let loaded: Model = serde_json::from_str(&text).unwrap();
    assert_eq!(json(&loaded), text);
    for r in Resource::ALL {
        assert_eq!(loaded.shares(r), f.m.shares(r));
    }
    loaded.check_exact().unwrap();
}

/// Throughput with 1,000 clients (spec §6: ≥ 10,000 core operations/s). Prints, never asserts
/// speed. Run: `cargo test --release -p tact-core --test tickets_model -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput_with_a_thousand_clients() {
    let mut m = model();
    let mut clients = Vec::new();
    let mut tickets = Vec::new();
    for u in 0..10 {
        let user = pure(&mut m, &format!("user{u}"));
        fund(&mut m, CurrencyId::BASE, user, 1000);
        for i in 0..100 {
            let k = client(&mut m, &format!("p{u}.{i}"));
            tickets.push(fund(&mut m, user, k, 100));
            clients.push(k);
        }
    }
    let ops = 100_000usize;
    let start = std::time::Instant::now();
    let mut checksum = 0.0;
    for i in 0..ops {
        let k = clients[(i * 7919) % clients.len()];
        if i % 10 == 9 {
            m.set_amount(tickets[(i * 31) % tickets.len()], 50 + (i % 100) as i64)
                .unwrap();
        } else {
            m.set_active(k, CPU, i % 3 != 0).unwrap();
        }
        checksum += m.rights(k, CPU).unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{ops} operations (90% activity changes, 10% amount changes), each followed by a rights \
         query, with 1,000 clients: {:.0} ops/s (checksum {checksum:.3})",
        ops as f64 / elapsed
    );
    m.check_exact().unwrap();
}

/// Sums of ticket amounts saturate instead of wrapping: two soft tickets of `i64::MAX` from a
/// currency worth 10 are worth 5 each, never negative (`A(C)` wrapped to -2 and `R*` to -4.6e19),
/// and two hard tickets of `i64::MAX` overflow no hard total, they exceed it.
#[test]
fn huge_amounts_saturate_and_never_wrap() {
    let mut m = model();
    let c = pure(&mut m, "C");
    fund(&mut m, CurrencyId::BASE, c, 10);
    let (j, k) = (client(&mut m, "J"), client(&mut m, "K"));
    fund(&mut m, c, j, i64::MAX);
    fund(&mut m, c, k, i64::MAX);
    for x in [j, k] {
        let r = m.guaranteed(x, CPU).unwrap();
        assert!((0.0..=10.0).contains(&r), "R* = {r}");
    }

    let mut m = Model::new(PerResource([i64::MAX, 1 << 30, 1000]));
    let (j, k) = (client(&mut m, "J"), client(&mut m, "K"));
    m.issue(CurrencyId::BASE, j, CPU, i64::MAX, Kind::Hard)
        .unwrap();
    let err = m
        .issue(CurrencyId::BASE, k, CPU, i64::MAX, Kind::Hard)
        .unwrap_err();
    assert!(
        matches!(err, TicketsError::HardTotalExceeded { .. }),
        "{err:?}"
    );
}
