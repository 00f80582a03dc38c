//! Claim (§4.1, equation 3; spec section 6 "stable on target"): on an idle machine with progress
//! iid around its target, the job is suspended a fraction q = αβ/(αβ + m(β − α)) ≈ 1.3% of the
//! time.

use tact_sim::claims;
use tact_sim::noise::Noise;

#[test]
fn suspended_fraction_on_target_matches_equation_3() {
    // Symmetric noise: the calibrated mean is also the median, so samples are poor with p = ½.
    let d = claims::duty_cycle(7, 12, Noise::Normal { sigma: 0.2 });
    println!(
        "q equation 3 {:.2}%, measured {:.2}% over {} judged samples; false-poor rate per {} samples {:.4} \
         (alpha {}), poor share of verdicts {:.3}, poor samples {:.3}",
        100.0 * d.q_equation3,
        100.0 * d.q_measured,
        d.summary.judged,
        d.m,
        d.false_poor_per_window,
        d.alpha,
        d.poor_share_of_verdicts,
        d.summary.poor_sample_fraction
    );
    assert!(
        (d.q_equation3 - 0.0132).abs() < 0.0005,
        "equation 3 gives {}",
        d.q_equation3
    );
    // The premise holds: samples sit at target.
    assert!(
        (d.summary.poor_sample_fraction - 0.5).abs() < 0.01,
        "poor samples {}",
        d.summary.poor_sample_fraction
    );
    assert!(
        d.summary.poor_verdicts > 0,
        "no false poor verdict at all: the test would not see q"
    );
    assert!(
        (0.003..=0.03).contains(&d.q_measured),
        "suspended {:.3}%",
        100.0 * d.q_measured
    );
}
