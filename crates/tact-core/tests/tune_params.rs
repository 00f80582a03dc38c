//! Parameter validation (Theorem 1's conditions and every range), the errata E1–E3, and the
//! sequential test's formulas.

use std::time::Duration;

use tact_core::stats::normal_quantile;
use tact_core::tune::decide::{n1_hat, n1_hat_printed, n2_hat, verdict, zone};
use tact_core::tune::params::{min_cut, phi, satisfies};
use tact_core::tune::{
    check_friendly, Friendly, Outcome, ParamError, Summary, Tcc, TuneParams, TABLE_1,
    TABLE_1_PRINTED,
};

fn row((p, q, w): (f64, f64, f64)) -> Friendly {
    Friendly {
        p: p / 100.0,
        q: q / 100.0,
        w: w / 100.0,
    }
}

#[test]
fn defaults_and_the_paper_setting_are_valid() {
    assert_eq!(TuneParams::default().validate(), Ok(()));
    assert_eq!(TuneParams::paper().validate(), Ok(()));
    let p = TuneParams::default();
    assert_eq!(
        (p.p, p.q, p.w, p.r, p.delta),
        (0.25, 0.14, 0.39, 0.10, 0.05)
    );
    assert_eq!((p.beta, p.alpha, p.n_star), (0.1, 0.05, 30));
    assert_eq!((p.n_min, p.n_max), (1, 1024));
    assert_eq!(p.dwell, Duration::from_secs(30));
    assert_eq!(p.max_dwell, Duration::from_secs(60));
    assert_eq!(
        (p.steady_min, p.steady_max),
        (Duration::from_secs(60), Duration::from_secs(900))
    );
    let paper = TuneParams::paper();
    assert_eq!(paper.steady_min, Duration::from_secs(50));
    assert_eq!(paper.steady_max, Duration::from_secs(50));
}

#[test]
fn table_1_as_shipped_is_friendly_and_e2_is_the_only_printed_error() {
    for r in TABLE_1 {
        assert!(satisfies(row(r)), "{r:?}");
        assert_eq!(
            check_friendly(r.0 / 100.0, r.1 / 100.0, r.2 / 100.0),
            Ok(())
        );
        assert_eq!(TuneParams::default().with_row(r).validate(), Ok(()));
    }
    let bad: Vec<_> = TABLE_1_PRINTED
        .iter()
        .filter(|r| !satisfies(row(**r)))
        .collect();
    assert_eq!(bad, vec![&(20.0, 11.5, 33.0)]);
    // E2: condition (2) needs w ≥ 1 − (0.2/0.115 − 1)² = 45.4% at p = 20%, q = 11.5%.
    assert!((min_cut(0.2, 0.115) - 0.4537).abs() < 1e-4);
    // (20, 11, 34) is also valid, as the spec notes.
    assert!(satisfies(row((20.0, 11.0, 34.0))));
}

#[test]
fn condition_2_failure_names_it_and_suggests_valid_rows() {
    let err = TuneParams::default()
        .with_row((20.0, 11.5, 33.0))
        .validate()
        .unwrap_err();
    let ParamError::Condition2 { bound, .. } = &err else {
        panic!("{err:?}")
    };
    assert!((bound - 0.4537).abs() < 1e-4);
    let text = err.to_string();
    assert!(text.contains("condition (2)"), "{text}");
    assert!(text.contains("1 - (p/q - 1)^2"), "{text}");
    // Keep p and q, raise w to 45.4%; or Table 1's rule for p = 20%: q = 11%, w = 33.1%
    // (the printed 33% probably came from q = 11%).
    assert_eq!(
        err.nearest(),
        &[
            Friendly {
                p: 0.2,
                q: 0.115,
                w: 0.454
            },
            Friendly {
                p: 0.2,
                q: 0.11,
                w: 0.331
            },
        ]
    );
    // As the user types them (tcc:p=...,q=...,w=...), not in percent.
    assert!(
        text.contains("nearest valid: p=0.2,q=0.115,w=0.454 or "),
        "{text}"
    );
    for r in err.nearest() {
        assert!(satisfies(*r), "{r}");
    }
}

#[test]
fn condition_1_failure_names_it_and_suggests_valid_rows() {
    // The paper's unfriendly example: p = 25%, q = 5%.
    let params = TuneParams {
        q: 0.05,
        ..TuneParams::default()
    };
    let err = params.validate().unwrap_err();
    let ParamError::Condition1 { p, q, bound, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*p, *q), (0.25, 0.05));
    assert!((bound - 0.25 * 1.25 / 2.25).abs() < 1e-12);
    let text = err.to_string();
    assert!(text.contains("condition (1)"), "{text}");
    assert!(text.contains("p(p+1)/(p+2)"), "{text}");
    let nearest = err.nearest();
    assert_eq!(nearest.len(), 2);
    // Keep p: the smallest q above φ(0.25) = 13.89% on a 0.1-point grid, and w raised to
    // what (2) then needs. Keep q: the largest p with φ(p) < 5%.
    assert_eq!(nearest[0].p, 0.25);
    assert!((nearest[0].q - 0.139).abs() < 1e-12);
    assert!(
        (nearest[0].w - 0.39).abs() < 1e-12,
        "w = 39% already suffices"
    );
    assert_eq!(nearest[1].q, 0.05);
    assert!(phi(nearest[1].p) < 0.05 && phi(nearest[1].p + 0.001) >= 0.05);
    for r in nearest {
        assert!(satisfies(*r), "{r}");
    }
    // allow_unfriendly runs it anyway.
    let unfriendly = TuneParams {
        allow_unfriendly: true,
        ..params
    };
    assert_eq!(unfriendly.validate(), Ok(()));
    assert!(Tcc::new(unfriendly).is_ok());
    assert!(Tcc::new(params).is_err());
}

#[test]
fn friendliness_checks_agree_with_the_inequalities_on_a_grid() {
    let mut seen = [0usize; 3];
    for pi in 1..=60 {
        for qi in 1..=60 {
            for wi in 0..20 {
                let (p, q, w) = (pi as f64 / 100.0, qi as f64 / 100.0, wi as f64 / 20.0);
                let ok1 = q > p * (p + 1.0) / (p + 2.0);
                let ok2 = w >= 1.0 - (p / q - 1.0).powi(2);
                match check_friendly(p, q, w) {
                    Ok(()) => {
                        assert!(ok1 && ok2, "{p} {q} {w}");
                        seen[0] += 1;
                    }
                    Err(e @ ParamError::Condition1 { .. }) => {
                        assert!(!ok1, "{p} {q} {w}");
                        for r in e.nearest() {
                            assert!(satisfies(*r));
                        }
                        seen[1] += 1;
                    }
                    Err(e @ ParamError::Condition2 { .. }) => {
                        assert!(ok1 && !ok2, "{p} {q} {w}");
                        assert!(!e.nearest().is_empty());
                        for r in e.nearest() {
                            assert!(satisfies(*r));
                        }
                        seen[2] += 1;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
}

#[test]
fn every_range_error_names_its_field() {
    let d = TuneParams::default;
    let cases: Vec<(TuneParams, &str)> = vec![
        (TuneParams { p: 0.0, ..d() }, "p"),
        (TuneParams { p: f64::NAN, ..d() }, "p"),
        (TuneParams { q: -0.1, ..d() }, "q"),
        (TuneParams { w: 1.0, ..d() }, "w"),
        (TuneParams { w: -0.1, ..d() }, "w"),
        (TuneParams { r: 0.0, ..d() }, "r"),
        (TuneParams { r: 1.0, ..d() }, "r"),
        (TuneParams { delta: 0.0, ..d() }, "delta"),
        (TuneParams { beta: 0.0, ..d() }, "beta"),
        (TuneParams { alpha: 0.5, ..d() }, "alpha"),
        (TuneParams { alpha: 0.0, ..d() }, "alpha"),
        (TuneParams { trim: 0.5, ..d() }, "trim"),
        (TuneParams { trim: -0.01, ..d() }, "trim"),
        (
            TuneParams {
                autocorr_max: 1.0,
                ..d()
            },
            "autocorr_max",
        ),
        (
            TuneParams {
                steady_factor: -1.0,
                ..d()
            },
            "steady_factor",
        ),
        (
            TuneParams {
                steady_jitter: 1.0,
                ..d()
            },
            "steady_jitter",
        ),
        (TuneParams { shift: 1.0, ..d() }, "shift"),
        (
            TuneParams {
                shift_hard: 1.1,
                ..d()
            },
            "shift_hard",
        ),
        (TuneParams { n_star: 2, ..d() }, "n_star"),
        (
            TuneParams {
                batch_min: 0,
                ..d()
            },
            "batch_min",
        ),
        (
            TuneParams {
                batch_max: 8,
                ..d()
            },
            "batch_max",
        ),
        (TuneParams { n_min: 0, ..d() }, "n_min"),
        (
            TuneParams {
                n_min: 5,
                n_max: 4,
                n_init: 4,
                ..d()
            },
            "n_max",
        ),
        (TuneParams { n_init: 0, ..d() }, "n_init"),
        (
            TuneParams {
                n_init: 2000,
                ..d()
            },
            "n_init",
        ),
        (
            TuneParams {
                max_samples: 1,
                ..d()
            },
            "max_samples",
        ),
        (
            TuneParams {
                dwell: Duration::ZERO,
                ..d()
            },
            "dwell",
        ),
        (
            TuneParams {
                max_dwell: Duration::ZERO,
                ..d()
            },
            "max_dwell",
        ),
        (
            TuneParams {
                steady_max: Duration::from_secs(10),
                ..d()
            },
            "steady_max",
        ),
    ];
    for (params, field) in cases {
        match params.validate() {
            Err(ParamError::Range { field: f, .. } | ParamError::Outside { field: f, .. }) => {
                assert_eq!(f, field)
            }
            other => panic!("{field}: {other:?}"),
        }
        let text = Tcc::new(params).unwrap_err().to_string();
        assert!(text.starts_with(&format!("{field} = ")), "{text}");
    }
    // A count out of bounds shows the bounds, which the user may not have set.
    let text = TuneParams {
        n_init: 2000,
        ..d()
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "n_init = 2000: must lie in [n_min, n_max] = [1, 1024]"
    );
    // Trimming can be switched off.
    assert_eq!(TuneParams { trim: 0.0, ..d() }.validate(), Ok(()));
}

#[test]
fn e1_the_sample_count_of_equation_23() {
    let z = normal_quantile(0.95).unwrap();
    assert!((z - 1.644_853_627).abs() < 1e-8);
    // σ/μ = 1, q = 14%, β = 0.1, α = 0.05: n̂₁ ≈ 143,515.3 with the correct constant 8 ...
    let n = n1_hat(1.0, 1.0, 0.14, 0.1, z);
    assert!((n - 143_515.3).abs() < 0.1, "{n}");
    // ... and ≈ 35,878.8 with the printed equation (24), a quarter of it.
    let printed = n1_hat_printed(1.0, 0.14, 0.1, z);
    assert!((printed - 35_878.8).abs() < 0.1, "{printed}");
    assert!((n / printed - 4.0).abs() < 1e-12);
    // The spec's scale note: ≈ 7.8·10⁵ for the remove test (q = −5%).
    let remove = n1_hat(1.0, 1.0, -0.05, 0.1, z);
    assert!((remove / 7.8e5 - 1.0).abs() < 0.01, "{remove}");
    // Scale-free: only σ/μ matters.
    assert!((n1_hat(3.0, 3.0, 0.14, 0.1, z) - n).abs() < 1e-6);
}

#[test]
fn e3_the_zone_of_a_negative_threshold_uses_its_magnitude() {
    // μ′ = −δ/(1−δ)·μ₁ < 0: L < μ′ < H with H − L = β|μ′|.
    let (lo, hi) = zone(-0.05, 1.0, 0.1);
    let mp = -0.05 / 0.95;
    assert!(lo < mp && mp < hi);
    assert!((hi - lo - 0.1 * mp.abs()).abs() < 1e-15);
    let (lo, hi) = zone(0.14, 2.0, 0.1);
    let mp = 0.14 / 1.14 * 2.0;
    assert!((lo - (1.0 - 0.05) * mp).abs() < 1e-15 && (hi - (1.0 + 0.05) * mp).abs() < 1e-15);
}

#[test]
fn equation_25_is_positive_and_consistent_with_17() {
    let z = normal_quantile(0.95).unwrap();
    let (lo, hi) = zone(0.14, 1.0, 0.1);
    for mu_y in [-0.5, 0.0, 0.05, lo, 0.1228, hi, 0.2, 0.5] {
        let n2 = n2_hat(1.0, mu_y, lo, hi, z);
        assert!(n2 > 0.0 && n2.is_finite(), "{mu_y}: {n2}");
    }
    // With n₁ = n̂₁ and σ₁ = σ₂, taking n̂₂ samples makes (17) hold exactly.
    let (s1, s2, mu_y) = (1.0, 1.0, 0.2);
    let n1 = n1_hat(s1, 1.0, 0.14, 0.1, z);
    let n2 = n2_hat(s2, mu_y, lo, hi, z);
    let sy = (s1 * s1 / n1 + s2 * s2 / n2).sqrt();
    let gap = f64::max(hi - mu_y, mu_y - lo);
    assert!((sy * z - gap).abs() < 1e-12);
}

fn summary(batches: u32, mean: f64, sd: f64) -> Summary {
    Summary {
        batches,
        mean,
        var: sd * sd,
    }
}

#[test]
fn the_verdict_waits_for_n_star_then_decides_on_the_threshold() {
    let z = 1.645;
    let c1 = summary(100, 1.0, 0.01);
    // A throughput gain of 25% (mean time 0.8), precise: better.
    assert_eq!(
        verdict(&c1, &summary(30, 0.8, 0.01), 0.14, 0.1, z, 30, false),
        Outcome::Better
    );
    // Fewer than n* batches: pending, even when forced.
    assert_eq!(
        verdict(&c1, &summary(29, 0.8, 0.01), 0.14, 0.1, z, 30, true),
        Outcome::Pending
    );
    // A gain of 5%: not better.
    assert_eq!(
        verdict(&c1, &summary(30, 1.0 / 1.05, 0.01), 0.14, 0.1, z, 30, false),
        Outcome::NotBetter
    );
    // A gain right at q, with noise: the zone is too narrow to resolve, pending ...
    let at_q = summary(30, 1.0 / 1.14, 0.2);
    assert_eq!(
        verdict(&c1, &at_q, 0.14, 0.1, z, 30, false),
        Outcome::Pending
    );
    // ... until a dwell cap forces the point estimate: ȳ ≥ μ′ is better.
    let just_above = summary(30, 1.0 / 1.141, 0.2);
    let just_below = summary(30, 1.0 / 1.139, 0.2);
    assert_eq!(
        verdict(&c1, &just_above, 0.14, 0.1, z, 30, true),
        Outcome::Better
    );
    assert_eq!(
        verdict(&c1, &just_below, 0.14, 0.1, z, 30, true),
        Outcome::NotBetter
    );
    // The remove test (q = −δ): keeping 96% of the throughput is better, 94% is not.
    assert_eq!(
        verdict(
            &c1,
            &summary(30, 1.0 / 0.96, 0.001),
            -0.05,
            0.1,
            z,
            30,
            false
        ),
        Outcome::Better
    );
    assert_eq!(
        verdict(
            &c1,
            &summary(30, 1.0 / 0.94, 0.001),
            -0.05,
            0.1,
            z,
            30,
            false
        ),
        Outcome::NotBetter
    );
}

#[test]
fn the_controller_uses_z_of_alpha() {
    for alpha in [0.01, 0.05, 0.1] {
        let tcc = Tcc::new(TuneParams {
            alpha,
            ..TuneParams::default()
        })
        .unwrap();
        assert!((tcc.z() - normal_quantile(1.0 - alpha).unwrap()).abs() < 1e-15);
    }
}

#[test]
fn params_round_trip_through_json() {
    let p = TuneParams::paper().with_row(TABLE_1[2]);
    let text = serde_json::to_string(&p).unwrap();
    let back: TuneParams = serde_json::from_str(&text).unwrap();
    assert_eq!(back, p);
}
