//! Faster convergence (spec §6, item 1): slow start, warm start and fast mode, on deterministic
//! and seeded curves. Their effect against paper mode is measured in tact-sim
//! (`tests/tune_convergence.rs` there).

#[path = "tune_harness.rs"]
mod harness;

use std::time::Duration;

use harness::{Lcg, Pool};
use tact_core::tune::decide::look_z;
use tact_core::tune::params::SLOW_START;
use tact_core::tune::{policy_from_spec, Phase, Reason, Tcc, TuneParams};

use Phase::*;
use Reason::*;

const MAX: usize = 2_000_000;

/// The defaults (every extension on) with the paper's fixed 50 s steady state, from `n_init`.
fn extended(n_init: usize) -> TuneParams {
    TuneParams {
        n_init,
        steady_min: Duration::from_secs(50),
        steady_max: Duration::from_secs(50),
        steady_jitter: 0.0,
        ..TuneParams::default()
    }
}

fn flat_after(knee: usize) -> impl FnMut(usize, u64) -> f64 {
    move |n, _| 100.0 * n.min(knee) as f64
}

#[test]
fn the_defaults_enable_the_extensions_and_paper_mode_does_not() {
    let d = TuneParams::default();
    assert!(d.slow_start && d.fast && d.warm.is_none());
    let p = TuneParams::paper();
    assert!(!p.slow_start && !p.fast && p.warm.is_none());
    // Slow start's row satisfies condition (1): q > p(p+1)/(p+2) = 2/3 at p = 100%.
    let (sp, sq) = SLOW_START;
    assert!(sq > sp * (sp + 1.0) / (sp + 2.0));
}

#[test]
fn slow_start_doubles_until_its_first_failed_step_then_steps_by_p() {
    let mut pool = Pool::new(extended(1), flat_after(10));
    assert!(pool.tcc.status().slow_start);
    assert!(pool.until_steady(1, MAX));
    let moves = pool.moves();
    assert_eq!(
        moves[..6],
        [
            (Base, Add, Measured, 1, 2),
            (Add, Add, Better, 2, 4),
            (Add, Add, Better, 4, 8),
            (Add, Add, Better, 8, 16),
            // 8 → 16 gains 25%, short of 68%: back to 8 and on with p = 25% (up(8) = 10).
            (Add, Add, Overshoot, 16, 10),
            (Add, Add, Better, 10, 13),
        ]
    );
    let first = pool.trace.iter().find(|t| t.to == Steady).unwrap();
    assert_eq!(first.target_to, 10, "{:?}", pool.moves());
    assert!(!pool.tcc.status().slow_start);
    // The next cycle is a normal one: base cut, steps of p.
    assert!(pool.until_steady(2, MAX));
    let second: Vec<_> = pool.trace.iter().filter(|t| t.cycle == 1).collect();
    assert_eq!((second[0].target_from, second[0].target_to), (10, 7));
    assert!(second.iter().all(|t| t.reason != Overshoot));
}

#[test]
fn slow_start_from_one_worker_fails_like_the_paper_when_no_smaller_step_exists() {
    // 1 → 2 is the normal step too: a failure there is the paper's Flat (hold 2, then remove).
    let mut pool = Pool::new(extended(1), |n, _| if n == 1 { 100.0 } else { 110.0 });
    assert!(pool.until_steady(1, MAX));
    assert_eq!(pool.moves()[1], (Add, Max, Flat, 2, 2));
}

#[test]
fn warm_start_begins_a_normal_cycle_at_the_kept_counts_cut() {
    let params = TuneParams {
        warm: Some(20),
        ..extended(1)
    };
    let mut pool = Pool::new(params, flat_after(20));
    // base(20) = ⌈20 × 0.61⌉ = 13, and no slow start.
    assert_eq!(pool.targets[0], (Duration::ZERO, 13));
    assert!(!pool.tcc.status().slow_start);
    assert!(pool.until_steady(1, MAX));
    let adds: Vec<_> = pool.moves().into_iter().filter(|m| m.1 == Add).collect();
    assert_eq!(adds[0], (Base, Add, Measured, 13, 17));
    // What a host keeps for the next run.
    let steady = pool
        .trace
        .iter()
        .find(|t| t.to == Steady)
        .unwrap()
        .target_to;
    assert_eq!(pool.tcc.status().steady_count, Some(steady));
    assert!((19..=22).contains(&steady), "{:?}", pool.moves());
    // Out of range is refused, naming the field.
    let bad = TuneParams {
        warm: Some(0),
        ..extended(1)
    };
    assert!(Tcc::new(bad)
        .unwrap_err()
        .to_string()
        .starts_with("warm = 0"));
}

#[test]
fn fast_mode_decides_clear_steps_on_n_star_batches() {
    let params = TuneParams {
        slow_start: false,
        ..extended(4)
    };
    let mut pool = Pool::new(params, flat_after(10));
    assert!(pool.until_steady(1, MAX));
    let decisions = pool.tcc.drain_decisions();
    assert!(!decisions.is_empty());
    for d in &decisions {
        assert!(!d.forced, "{d:?}");
        // Noise-free: the first look decides. Base or Max's batches plus n* of C₂'s (plus
        // settling's skipped completions, which are not samples).
        let batches = d.samples as f64 / d.batch_size as f64;
        assert!(batches <= 3.0 * 30.0 + 1.0, "{d:?}");
    }
    // The records name what was compared: 4 → 5, 5 → 7, 7 → 9, 9 → 12 (flat), then removals
    // against the best.
    let adds: Vec<_> = decisions
        .iter()
        .filter(|d| d.phase == Add)
        .map(|d| (d.c1, d.c2, d.better))
        .collect();
    assert_eq!(
        adds,
        [(4, 5, true), (5, 7, true), (7, 9, true), (9, 12, false)]
    );
    assert!(decisions
        .iter()
        .filter(|d| d.phase == Remove)
        .all(|d| d.c1 == 12 || d.c1 == 11 || d.c1 == 10));
}

#[test]
fn fast_mode_measures_c1_again_when_the_test_needs_it() {
    // A step whose gain sits near q under noise: n* batches of each cannot settle it, so the
    // pool goes back to C₁'s count for more before C₂ goes on.
    let params = TuneParams {
        slow_start: false,
        n_max: 5,
        ..extended(4)
    };
    let mut lcg = Lcg(7);
    let mut pool = Pool::new(params, move |n, _| {
        let x = if n >= 5 { 114.0 } else { 100.0 };
        // Exponential spacing: σ/μ = 1 per completion.
        x / -(1.0 - lcg.uniform()).ln()
    });
    let mut revisited = false;
    let done = pool.run_until(MAX, |p| {
        let s = p.tcc.status();
        if s.revisiting {
            revisited = true;
            assert_eq!((s.phase, s.target), (Add, 4));
        }
        p.tcc.phase() != Base && p.tcc.phase() != Add
    });
    assert!(done && revisited);
    let d = pool.tcc.drain_decisions();
    assert_eq!((d[0].c1, d[0].c2), (4, 5));
}

#[test]
fn looks_spend_alpha_by_halves() {
    assert!((look_z(0.05, 0) - 1.959_964).abs() < 1e-5);
    assert!((look_z(0.05, 1) - 2.241_403).abs() < 1e-5);
    let zs: Vec<f64> = (0..40).map(|k| look_z(0.05, k)).collect();
    assert!(zs.windows(2).all(|w| w[1] > w[0] && w[1].is_finite()));
}

#[test]
fn specs_set_the_new_fields() {
    for spec in [
        "tcc:fast=false,slow_start=false",
        "tcc:warm=12",
        "tcc:warm=none",
    ] {
        assert!(policy_from_spec(spec, 4, 64).is_ok(), "{spec}");
    }
    let err = policy_from_spec("tcc:warm=100", 4, 64).err().unwrap();
    assert!(err.to_string().contains("warm = 100"), "{err}");
    let err = policy_from_spec("tcc:fast=maybe", 4, 64).err().unwrap();
    assert!(err.to_string().contains("fast"), "{err}");
    let warm = policy_from_spec("tcc:warm=12", 4, 64).unwrap();
    assert_eq!(warm.target(), 8);
}
