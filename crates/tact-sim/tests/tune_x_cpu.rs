//! The spec's experiments X1 (CPU bottleneck), X4 (network) and X5 (a competitor) as oracle
//! models on the 2-core VM, median of three seeds (`tact_sim::tune::experiments`). Each test
//! asserts the criteria the model meets; the misses (X1.web, X4.link, X5.fall, X5.cpu1) are
//! reported with their figures in docs/tune.md.

use tact_sim::tune::experiments::{self as x, Check, SEEDS};

fn expect_pass(checks: &[Check], ids: &[&str]) {
    for id in ids {
        let c = checks.iter().find(|c| c.id == *id).expect(id);
        assert_eq!(c.pass, Some(true), "{c:#?}");
    }
}

#[test]
fn x1_counts_are_stable_and_idle_input_changes_nothing() {
    let runs: Vec<_> = SEEDS.iter().map(|&s| x::x1_cpu(s)).collect();
    let checks = x::x1_checks(&runs);
    expect_pass(&checks, &["X1.spread", "X1.blocks"]);
    // The block-input runs really idled between blocks.
    for r in &runs {
        assert!(r.block_busy_share < 0.85, "{r:?}");
    }
}

#[test]
fn x4_link_bound_with_idle_cpus() {
    let runs: Vec<_> = SEEDS.iter().map(|&s| x::x4_network(s)).collect();
    expect_pass(&x::x4_checks(&runs), &["X4.cpus"]);
}

#[test]
fn x5_shares_the_core_and_recovers_after_the_competitor() {
    let runs: Vec<_> = SEEDS.iter().map(|&s| x::x5_competitor(s)).collect();
    expect_pass(
        &x::x5_checks(&runs),
        &["X5.share", "X5.back", "X5.util_after"],
    );
}
