//! Claim (§4.4, §6.3; spec 2.5 "concurrent"): a job with two metrics whose per-unit costs add
//! (750 kB/s scanned + 120 index operations/s), mixed in varying proportions, gets both rates from
//! the ridge regression and is judged good when uncontended and poor when contended.

use std::time::Duration;

use tact_core::polite::PoliteConfig;
use tact_sim::claims;

#[test]
fn two_additive_metrics_are_judged_good_uncontended_and_poor_contended() {
    let r = claims::concurrent(3, Duration::from_secs(3600), Duration::from_secs(1800));
    let (u, c) = (&r.uncontended, &r.contended);
    println!(
        "fitted rates {:?} (true {:?}); uncontended: poor samples {:.3}, verdicts good {} poor {}, active {:.1}%; \
         contended: poor samples {:.3}, verdicts good {} poor {}, active {:.1}%, reaction {:?} testpoints",
        r.fitted_rates,
        r.true_rates,
        u.poor_sample_fraction,
        u.good_verdicts,
        u.poor_verdicts,
        100.0 * u.active_fraction,
        c.poor_sample_fraction,
        c.good_verdicts,
        c.poor_verdicts,
        100.0 * c.active_fraction,
        r.reaction_testpoints
    );
    for (fit, truth) in r.fitted_rates.iter().zip(&r.true_rates) {
        assert!((fit / truth - 1.0).abs() < 0.03, "fitted {fit} for {truth}");
    }
    // Uncontended: samples straddle the target and the job keeps running.
    assert!(
        u.poor_sample_fraction < 0.6,
        "uncontended poor samples {}",
        u.poor_sample_fraction
    );
    assert!(
        u.good_verdicts > 0 && u.active_fraction > 0.9,
        "uncontended active {}",
        u.active_fraction
    );
    // Contended: every sample is poor, no good verdict, and the job is held off.
    assert!(
        c.poor_sample_fraction > 0.99,
        "contended poor samples {}",
        c.poor_sample_fraction
    );
    assert_eq!(c.good_verdicts, 0);
    assert!(
        c.poor_verdicts > 0 && c.active_fraction < 0.1,
        "contended active {}",
        c.active_fraction
    );
    let reaction = r.reaction_testpoints.expect("contention drew a suspension");
    assert!(
        reaction <= claims::worst_reaction(&PoliteConfig::default()),
        "reaction {reaction}"
    );
}
