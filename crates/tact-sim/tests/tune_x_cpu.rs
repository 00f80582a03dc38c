//! The spec's experiments X1 (CPU bottleneck), X4 (network) and X5 (a competitor) as oracle
//! models on the 2-core VM, median of three seeds (`tact_sim::tune::experiments`). Each test
//! asserts the criteria the model meets; the misses (X1.web, X4.link, X5.fall, X5.cpu1, and
//! without the hint X5.util_after) are reported with their figures in docs/tune.md.

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

/// The second steady count with the competitor ÷ the count before, median over the seeds.
fn fall(runs: &[x::X5]) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .map(|r| r.counts_during[1] as f64 / r.count_before as f64)
        .collect();
    tact_sim::tune::claims::median(&v)
}

#[test]
fn x5_shares_the_core_and_recovers_after_the_competitor() {
    // The spec's competitor: bursts with sleeps. X5.fall (the count holds), X5.cpu1 (the
    // competitor alone keeps the core 94.5% busy) and, without the hint, X5.util_after (X1.web's
    // 83.7% at 7 workers) miss; docs/tune.md reports them.
    let runs = |hint| -> Vec<_> {
        SEEDS
            .iter()
            .map(|&s| x::x5_competitor(x::Competitor::Bursty, hint, s))
            .collect()
    };
    let plain = runs(false);
    expect_pass(&x::x5_checks(&plain), &["X5.share", "X5.back"]);
    let hinted = runs(true);
    expect_pass(
        &x::x5_checks(&hinted),
        &["X5.share", "X5.back", "X5.util_after"],
    );
    // The competitor's threads sleep, yet with as many as the steady count they saturate the
    // core between them and tact: web is busy nearly all the time.
    for r in plain.iter().chain(&hinted) {
        assert!(r.web_during > 0.99, "{r:?}");
    }
    // tact does not escalate against it: the count holds rather than rising.
    assert!(fall(&plain) <= 1.0, "{plain:#?}");
}

#[test]
fn x5_an_always_runnable_competitor_makes_the_count_rise() {
    // Not the spec's competitor: one that never sleeps takes whatever tact leaves, and tact wins
    // its share of the core (equation 6) only with more tasks there.
    let runs: Vec<_> = SEEDS
        .iter()
        .map(|&s| x::x5_competitor(x::Competitor::Spinning, false, s))
        .collect();
    expect_pass(&x::x5_checks(&runs), &["X5.share", "X5.back"]);
    assert!(fall(&runs) > 1.2, "{runs:#?}");
    for r in &runs {
        assert!(r.web_during > 0.999, "{r:?}");
    }
}
