//! The spec's X7 comparison (front 1 ms, web 2 ms, 25 ms delay) of TCC with the paper's Vegas+
//! and Vegas++, as oracle models, median of three seeds. The test asserts what the model meets;
//! the misses (Vegas+ ≈ 71% against the paper's 55%, and gaps under 10 points) are reported with
//! their numbers in docs/tune.md.

use tact_sim::tune::experiments::{self as x, SEEDS};

#[test]
fn x7_tcc_beats_vegas_plus_plus_which_beats_vegas_plus() {
    let rows: Vec<_> = SEEDS.iter().map(|&s| x::x7_rows(s)).collect();
    let vegas: Vec<_> = SEEDS.iter().map(|&s| x::x7_vegas(s)).collect();
    let checks = x::x7_vegas_checks(&rows, &vegas);
    let vpp = checks.iter().find(|c| c.id == "X7.vegas++").unwrap();
    assert_eq!(vpp.pass, Some(true), "{vpp:#?}");
    // The order holds in every seed, if not by 10 points: every TCC row's steady utilization
    // above Vegas++, and Vegas++ above Vegas+ (whose minRTT, below the mean single-worker
    // latency, overstates the baseline throughput).
    for (rows, v) in rows.iter().zip(&vegas) {
        assert!(
            (v.x1 - 1.0 / 0.028).abs() < 1e-9,
            "X₁ = 1/R(1), got {}",
            v.x1
        );
        let tcc = rows.iter().map(|r| r.web).fold(f64::INFINITY, f64::min);
        assert!(
            tcc > v.plus_plus && v.plus_plus > v.plus,
            "seed {}: TCC {tcc}, Vegas++ {}, Vegas+ {}",
            v.seed,
            v.plus_plus,
            v.plus
        );
    }
}
