//! Friendliness (§3.3): against y₀ processor-sharing tasks of an uncontrolled program, TCC
//! keeps adding while x ≤ ŷ = (p/q − 1)y₀ and stops with a share in
//! (1 − q/p, (1+p)(p−q)/(p(1+p−q))] (equation 6): 44–49.5% with the defaults, 80–83% with
//! q = 5%, which breaks condition (1). Two instances taking turns shrink until saturation ends
//! (Theorem 1). Noise-free runs, as the analysis assumes.

use tact_sim::tune::claims::{self, Protocol, SharePoint, Shared2};
use tact_sim::tune::Spacing;

fn run(y0: f64, q: f64, remove: bool) -> SharePoint {
    claims::share_run(
        y0,
        claims::share_params(q, remove, 1),
        Protocol::noise_free(),
    )
}

#[test]
fn equation_6_bounds() {
    let (lo, hi) = claims::share_bounds(0.25, 0.14);
    assert!((lo - 0.44).abs() < 1e-12 && (hi - 0.4955).abs() < 1e-4);
    let (lo, hi) = claims::share_bounds(0.25, 0.05);
    assert!((lo - 0.80).abs() < 1e-12 && (hi - 0.8333).abs() < 1e-4);
}

#[test]
fn the_default_row_takes_44_to_50_percent() {
    for y0 in [50.0, 100.0, 200.0] {
        let s = run(y0, 0.14, false);
        assert!(s.shares.len() >= 8, "{s:?}");
        for &share in &s.shares {
            assert!((0.44..=0.50).contains(&share), "y0 = {y0}: {s:?}");
        }
        assert!((0.44..=0.50).contains(&s.share), "{s:?}");
    }
}

#[test]
fn an_unfriendly_q_of_5_percent_takes_80_to_83_5_percent() {
    for y0 in [50.0, 100.0, 200.0] {
        let s = run(y0, 0.05, false);
        for &share in &s.shares {
            assert!((0.80..=0.835).contains(&share), "y0 = {y0}: {s:?}");
        }
    }
}

#[test]
fn the_remove_state_only_lowers_the_share() {
    for (y0, q) in [(50.0, 0.14), (100.0, 0.14), (50.0, 0.05), (100.0, 0.05)] {
        let with = run(y0, q, true);
        let without = run(y0, q, false);
        assert!(
            with.share <= without.share + 1e-9,
            "y0 = {y0}, q = {q}: {} with removal, {} without",
            with.share,
            without.share
        );
    }
}

#[test]
fn two_instances_taking_turns_shrink_as_theorem_1_says() {
    // The theorem's own model (always saturated), X from 30 against Y's 60.
    let turns = claims::alternation(
        Shared2::ProportionalShare,
        30,
        60,
        16,
        Spacing::Deterministic,
        1,
    );
    let (_, hi) = claims::share_bounds(0.25, 0.14);
    for t in &turns {
        // Never more than the other: y₀ ≥ x₁ ≥ y₂ ≥ …
        assert!(t.to <= t.other, "{turns:?}");
        // Strictly fewer, and at most equation (6)'s upper share, while counts are large
        // enough for a 25% step to be resolved in whole workers. (The lower bound of (6) is
        // for add steps alone; removal may go below it.)
        if t.other >= 16 {
            assert!(t.to < t.other, "{turns:?}");
            assert!(t.share <= hi, "{t:?}");
        }
    }
    assert!(turns.last().unwrap().to <= 10, "{turns:?}");
}

#[test]
fn two_instances_with_think_time_settle_at_an_even_split() {
    // One shared server at 1 ms per task, 20 ms of each instance's own work per task:
    // saturation ends below about 21 tasks in all.
    let turns = claims::alternation(
        Shared2::WithThink { think: 0.02 },
        30,
        60,
        16,
        Spacing::Deterministic,
        1,
    );
    // The counts shrink from 60 ...
    for t in turns.iter().take(10) {
        assert!(t.to < t.other, "{turns:?}");
    }
    // ... to an even split that keeps the bottleneck busy, and stay there.
    let last: Vec<usize> = turns.iter().rev().take(4).map(|t| t.to).collect();
    assert!(
        last.iter().max().unwrap() - last.iter().min().unwrap() <= 1,
        "{turns:?}"
    );
    let end = turns.last().unwrap();
    assert!((end.share - 0.5).abs() < 0.03, "{end:?}");
    assert!(end.bottleneck > 0.99, "{end:?}");
    assert!(end.to + end.other < 45, "{turns:?}");
}
