//! Claim (§9.2, §9.4; spec section 6 "stable on target, prompt reaction", "overshoot",
//! "regulation cuts slowdown ~10×"): a job calibrated on an idle machine (probation 0) sharing a
//! resource with a bursty foreground is suspended within a few testpoints of each burst's onset,
//! resumes within the suspension cap of its end, and the foreground's slowdown falls by an order
//! of magnitude.

use tact_core::polite::PoliteConfig;
use tact_sim::claims;

#[test]
fn bursty_contention_is_detected_promptly_and_released_within_the_cap() {
    let r = claims::reaction(1, 6);
    let reg = &r.regulated;
    let worst = claims::worst_reaction(&PoliteConfig::default());
    println!(
        "onsets {} (missed {}), reaction testpoints median {} p90 {} max {} (sign-test worst case {worst}); \
         overshoot median {:.1} s max {:.1} s over {} idle starts; fg slowdown {:.2}% regulated vs {:.1}% unregulated; \
         interference {:.1}%, E {:.1}%",
        reg.reaction_testpoints.count,
        reg.reactions_missed,
        reg.reaction_testpoints.median,
        reg.reaction_testpoints.p90,
        reg.reaction_testpoints.max,
        reg.overshoot.median,
        reg.overshoot.max,
        reg.overshoot.count,
        100.0 * reg.foreground_slowdown,
        100.0 * r.unregulated.foreground_slowdown,
        100.0 * reg.interference_share,
        100.0 * reg.efficiency,
    );

    // Enough bursts to mean something, and every one of them drew a suspension.
    assert!(
        reg.reaction_testpoints.count >= 20,
        "only {} onsets",
        reg.reaction_testpoints.count
    );
    assert_eq!(
        reg.reactions_missed, 0,
        "some bursts ended before any suspension"
    );
    // Typical reaction near the paper's m = 5 testpoints; none beyond what the sign test allows.
    assert!(
        reg.reaction_testpoints.median <= 8.0,
        "median reaction {}",
        reg.reaction_testpoints.median
    );
    assert!(
        reg.reaction_testpoints.max <= f64::from(worst),
        "reaction {} > {worst}",
        reg.reaction_testpoints.max
    );

    // Resumption after a burst ends is bounded by the suspension cap (one suspension at most).
    assert!(reg.overshoot.count >= 20);
    assert!(
        reg.overshoot.max <= r.max_suspension_s + r.period_s,
        "overshoot {} s exceeds S_max {} s",
        reg.overshoot.max,
        r.max_suspension_s
    );
    // Spec section 6 pass criterion: at least 7× below the unregulated slowdown.
    assert!(
        r.unregulated.foreground_slowdown > 0.5,
        "the unregulated baseline shows no contention"
    );
    assert!(
        r.slowdown_ratio <= 1.0 / 7.0,
        "slowdown only cut to {:.3} of unregulated",
        r.slowdown_ratio
    );
}
