//! Compiling rights to kernel weights (spec tickets.md §4 "Compiling"): the quantization target
//! (relative share error ≤ 1% whenever max R / min R ≤ (w_max/w_min)/100) for every kernel range,
//! clamps reported, R ≤ 0 at w_min, and the choice between the tree mirror and flat.

use proptest::prelude::*;
use tact_core::tickets::compile::{
    layout, quantize, FlatReason, Layout, WeightRange, BFQ_WEIGHT, CPU_SHARES_V1, CPU_WEIGHT_V2,
    IO_WEIGHT_V2,
};
use tact_core::tickets::{CurrencyId, ExchangeId, Kind, Resource, Ticket, TicketId};

const RANGES: [WeightRange; 4] = [CPU_SHARES_V1, CPU_WEIGHT_V2, IO_WEIGHT_V2, BFQ_WEIGHT];

/// The 1% target, with room for f64 rounding only.
const TARGET: f64 = 0.01 + 1e-12;

fn range() -> impl Strategy<Value = WeightRange> {
    proptest::sample::select(RANGES.to_vec())
}

/// Rights whose spread is within the target's condition for `range`: the largest, then others
/// down to `largest / ((max/min)/100)`.
fn rights_within(range: WeightRange) -> impl Strategy<Value = Vec<(usize, f64)>> {
    let spread = (range.max as f64 / range.min as f64) / 100.0;
    (
        1e-6f64..1e12,
        proptest::collection::vec(1.0f64..=spread, 0..60),
    )
        .prop_map(|(largest, divisors)| {
            std::iter::once(largest)
                .chain(divisors.into_iter().map(|d| largest / d))
                .enumerate()
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn shares_are_within_one_percent_when_the_spread_fits_the_range(
        (range, rights) in range().prop_flat_map(|r| (Just(r), rights_within(r)))
    ) {
        let out = quantize(&rights, range);
        prop_assert_eq!(out.len(), rights.len());
        prop_assert_eq!(out[0].weight, range.max);
        for (c, (key, _)) in out.iter().zip(&rights) {
            prop_assert_eq!(c.key, *key);
            prop_assert!(!c.clamped, "{:?}", c);
            prop_assert!(c.weight >= 100 * range.min && c.weight <= range.max, "{:?}", c);
            let err = c.share_error.expect("positive rights have a share error");
            prop_assert!(err.abs() <= TARGET, "{:?} in {:?}", c, range);
        }
    }

    #[test]
    fn any_rights_get_weights_in_range_in_order_with_clamps_reported(
        range in range(),
        rights in proptest::collection::vec(
            prop_oneof![
                8 => 1e-9f64..1e9,
                1 => -1e3f64..=0.0,
                1 => Just(f64::NAN),
            ],
            1..40,
        ),
    ) {
        let keyed: Vec<(usize, f64)> = rights.iter().copied().enumerate().collect();
        let out = quantize(&keyed, range);
        let largest = rights.iter().copied().filter(|r| *r > 0.0).fold(0.0, f64::max);
        for (c, r) in out.iter().zip(&rights) {
            prop_assert!(c.weight >= range.min && c.weight <= range.max, "{:?}", c);
            if *r > 0.0 {
                let unclamped = (range.max as f64 * r / largest).round();
                prop_assert_eq!(c.clamped, unclamped < range.min as f64, "{:?} for {}", c, r);
                prop_assert!(c.share_error.is_some());
                if !c.clamped {
                    prop_assert_eq!(c.weight as f64, unclamped);
                }
            } else {
                // R ≤ 0 (or not a number) gets w_min, flagged, with no relative error.
                prop_assert_eq!(c.weight, range.min);
                prop_assert!(c.clamped);
                prop_assert_eq!(c.share_error, None);
            }
        }
        // Larger rights never get smaller weights.
        for (a, ra) in out.iter().zip(&rights) {
            for (b, rb) in out.iter().zip(&rights) {
                if ra.max(0.0) < rb.max(0.0) {
                    prop_assert!(a.weight <= b.weight, "{}→{} but {}→{}", ra, a.weight, rb, b.weight);
                }
            }
        }
    }
}

#[test]
fn a_spread_beyond_the_range_clamps_and_says_so() {
    // 1 : 100000 does not fit bfq's 1–1000: the small right is raised to 1, a 100× share.
    let out = quantize(
        &[("big", 100_000.0), ("small", 1.0), ("none", 0.0)],
        BFQ_WEIGHT,
    );
    assert_eq!(
        out.iter()
            .map(|c| (c.key, c.weight, c.clamped))
            .collect::<Vec<_>>(),
        vec![("big", 1000, false), ("small", 1, true), ("none", 1, true)]
    );
    assert!(out[1].share_error.unwrap() > 50.0);
    assert_eq!(out[2].share_error, None);
}

#[test]
fn the_bound_is_nearly_tight_at_the_edge_of_the_condition() {
    // cpu.weight, spread 99.5 ≤ 100: one right rounds up by almost half a unit while many round
    // down by almost as much, so its share is off by almost 1%, but not more.
    let mut rights = vec![(0, 10_000.0), (1, 100.5)];
    rights.extend((2..1002).map(|k| (k, 100.49)));
    let out = quantize(&rights, CPU_WEIGHT_V2);
    assert_eq!((out[1].weight, out[2].weight), (101, 100));
    let err = out[1].share_error.unwrap();
    assert!(err > 0.009 && err <= 0.01, "{err}");
}

#[test]
fn no_rights_compile_to_nothing() {
    assert!(quantize::<u8>(&[], CPU_SHARES_V1).is_empty());
}

// ----- layout -----

fn ticket(id: u64, issuer: u32, holder: u32, amount: i64) -> Ticket {
    Ticket {
        id: TicketId(id),
        issuer: CurrencyId(issuer),
        holder: CurrencyId(holder),
        resource: Resource::Cpu,
        amount,
        kind: Kind::Soft,
        exchange: None,
    }
}

/// The report's E1: base→A = base→B = 1000; A→A1 100, A→A2 200; B→B1 100, B→B2 200, B→B3 300.
/// Currencies: base 0, A 1, B 2; clients 11, 12, 21, 22, 23.
fn e1() -> Vec<Ticket> {
    vec![
        ticket(1, 0, 1, 1000),
        ticket(2, 0, 2, 1000),
        ticket(3, 1, 11, 100),
        ticket(4, 1, 12, 200),
        ticket(5, 2, 23, 300),
        ticket(6, 2, 21, 100),
        ticket(7, 2, 22, 200),
    ]
}

fn is_client(c: CurrencyId) -> bool {
    c.0 >= 10
}

#[test]
fn a_soft_tree_is_mirrored_with_sibling_weights_proportional_to_amounts() {
    let Layout::TreeMirror { groups } = layout(&e1(), Resource::Cpu, is_client, CPU_WEIGHT_V2)
    else {
        panic!("E1 is a soft tree");
    };
    let got: Vec<(u32, Vec<(u32, u64)>)> = groups
        .iter()
        .map(|g| {
            let children = g.children.iter().map(|c| (c.key.0, c.weight)).collect();
            (g.parent.0, children)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, vec![(1, 10_000), (2, 10_000)]),
            (1, vec![(11, 5_000), (12, 10_000)]),
            (2, vec![(21, 3_333), (22, 6_667), (23, 10_000)]),
        ]
    );
    assert!(groups
        .iter()
        .flat_map(|g| &g.children)
        .all(|c| !c.clamped && c.share_error.unwrap().abs() <= TARGET));
}

#[test]
fn hard_tickets_exchanges_transfers_and_pooling_force_flat() {
    let cases: Vec<(Ticket, FlatReason)> = vec![
        (
            Ticket {
                kind: Kind::Hard,
                ..ticket(8, 0, 3, 500)
            },
            FlatReason::Hard {
                ticket: TicketId(8),
            },
        ),
        (
            Ticket {
                exchange: Some(ExchangeId(1)),
                ..ticket(8, 0, 11, -50)
            },
            FlatReason::Exchange {
                ticket: TicketId(8),
            },
        ),
        // Client 11 waits on client 21 and transfers its tickets to it.
        (
            ticket(8, 11, 21, 100),
            FlatReason::Transfer {
                ticket: TicketId(8),
            },
        ),
        // A and B pool their funding of client 23.
        (
            ticket(8, 1, 23, 50),
            FlatReason::Pooled {
                holder: CurrencyId(23),
            },
        ),
    ];
    for (extra, why) in cases {
        let mut tickets = e1();
        tickets.push(extra);
        assert_eq!(
            layout(&tickets, Resource::Cpu, is_client, CPU_WEIGHT_V2),
            Layout::Flat { why },
            "{extra:?}"
        );
        // The layout is per resource: the same ticket on disk leaves CPU mirrored.
        let mut on_disk = e1();
        on_disk.push(Ticket {
            resource: Resource::Disk,
            ..extra
        });
        assert!(matches!(
            layout(&on_disk, Resource::Cpu, is_client, CPU_WEIGHT_V2),
            Layout::TreeMirror { .. }
        ));
    }
}

#[test]
fn layouts_serialize_for_explain() {
    let json = serde_json::to_value(layout(&e1(), Resource::Cpu, is_client, BFQ_WEIGHT)).unwrap();
    assert_eq!(json["layout"], "tree_mirror");
    assert_eq!(json["groups"][1]["children"][0]["weight"], 500);
    let mut tickets = e1();
    tickets.push(ticket(8, 11, 21, 100));
    let json =
        serde_json::to_value(layout(&tickets, Resource::Cpu, is_client, BFQ_WEIGHT)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"layout": "flat", "why": {"reason": "transfer", "ticket": 8}})
    );
}
