//! .NET hill climbing on deterministic throughput curves: a closed pool whose completions come
//! evenly at the curve's rate for the current target, with work always waiting.

use std::time::Duration;

use tact_core::tune::{
    policy_from_spec, Bounds, Event, HillClimbing, HillClimbingParams, Load, Policy,
};

/// What a run saw at every sample: (time in s, target), the control setting's move, and the
/// wave (target − ⌊setting⌋).
struct Run {
    targets: Vec<(f64, usize)>,
    moves: Vec<f64>,
    waves: Vec<usize>,
}

impl Run {
    /// Mean target over samples at or after `from` seconds.
    fn mean_after(&self, from: f64) -> f64 {
        let tail: Vec<f64> = self
            .targets
            .iter()
            .filter(|&&(t, _)| t >= from)
            .map(|&(_, n)| n as f64)
            .collect();
        tail.iter().sum::<f64>() / tail.len() as f64
    }
}

/// Runs `hill` for `seconds` on the curve `rate(n)` (completions per second at n workers).
fn drive(hill: &mut HillClimbing, rate: impl Fn(usize) -> f64, seconds: f64) -> Run {
    let mut run = Run {
        targets: Vec::new(),
        moves: Vec::new(),
        waves: Vec::new(),
    };
    let mut t = 0.0;
    let mut samples = hill.samples();
    while t < seconds {
        let n = hill.target();
        t += 1.0 / rate(n);
        let control = hill.control_setting();
        hill.on_event(Event::Complete {
            at: Duration::from_secs_f64(t),
            load: Load::new(hill.target(), 1),
            latency: Some(Duration::from_secs_f64(n as f64 / rate(n))),
        });
        if hill.samples() != samples {
            samples = hill.samples();
            run.targets.push((t, hill.target()));
            run.moves.push(hill.control_setting() - control);
            run.waves
                .push(hill.target() - hill.control_setting().floor() as usize);
        }
    }
    run
}

fn hill(n_init: usize, n_max: usize) -> HillClimbing {
    HillClimbing::new(
        HillClimbingParams::default(),
        Bounds::new(n_init, 1, n_max).unwrap(),
    )
    .unwrap()
}

/// Linear up to `knee` workers, then falling by 3% of the peak per extra worker (contention).
fn knee(knee: usize) -> impl Fn(usize) -> f64 {
    move |n| {
        let peak = 100.0 * knee as f64;
        if n <= knee {
            100.0 * n as f64
        } else {
            (peak * (1.0 - 0.03 * (n - knee) as f64)).max(peak * 0.2)
        }
    }
}

#[test]
fn climbs_a_rising_curve() {
    let mut h = hill(2, 64);
    let run = drive(&mut h, |n| 100.0 * n as f64, 60.0);
    // About one worker per second (4/s at full slope and confidence, times 0.85² after the bias).
    let late = run.mean_after(50.0);
    assert!(late > 40.0, "mean target over 50-60 s: {late:.1}");
    assert!(run.mean_after(20.0) > 15.0, "{:.1}", run.mean_after(20.0));
}

#[test]
fn backs_off_past_a_knee() {
    let mut h = hill(40, 64);
    let run = drive(&mut h, knee(10), 120.0);
    let late = run.mean_after(100.0);
    assert!(
        (8.0..=13.0).contains(&late),
        "mean target over 100-120 s: {late:.1}"
    );
}

#[test]
fn finds_a_knee_from_below() {
    let mut h = hill(2, 64);
    let run = drive(&mut h, knee(10), 120.0);
    let late = run.mean_after(60.0);
    assert!(
        (8.0..=13.0).contains(&late),
        "mean target over 60-120 s: {late:.1}"
    );
    assert!(
        run.targets.iter().all(|&(t, n)| t < 30.0 || n <= 14),
        "overshot the knee"
    );
}

#[test]
fn holds_within_bounds_at_both_ends() {
    // Rising to n_max = 6: the wave and the setting stay below it.
    let mut h = hill(3, 6);
    let run = drive(&mut h, |n| 100.0 * n as f64, 60.0);
    assert!(run.targets.iter().all(|&(_, n)| (1..=6).contains(&n)));
    assert!(run.mean_after(40.0) > 5.0, "{}", run.mean_after(40.0));
    assert!(h.control_setting() <= 6.0 - h.wave_magnitude() as f64);
    // Falling everywhere (each worker costs throughput): down to n_min = 1 and no lower.
    let mut h = hill(12, 32);
    let run = drive(&mut h, |n| 1000.0 / n as f64, 120.0);
    assert!(run.targets.iter().all(|&(_, n)| (1..=32).contains(&n)));
    assert!(run.mean_after(100.0) < 2.0, "{}", run.mean_after(100.0));
    assert!(h.control_setting() >= 1.0);
}

#[test]
fn moves_at_most_the_per_sample_limit() {
    // A gain that would ask for far more than 20 per sample.
    let params = HillClimbingParams {
        max_change_per_second: 10_000.0,
        ..HillClimbingParams::default()
    };
    let mut h = HillClimbing::new(params, Bounds::new(2, 1, 1000).unwrap()).unwrap();
    let run = drive(&mut h, |n| 50.0 * n as f64, 10.0);
    let largest = run.moves.iter().fold(0.0f64, |m, d| m.max(d.abs()));
    assert!(largest <= 20.0 + 1e-9, "moved {largest} in one sample");
    assert!(
        largest >= 19.0,
        "the limit never bound: largest move {largest}"
    );
}

#[test]
fn moves_at_most_four_per_second_of_samples() {
    let mut h = hill(2, 64);
    let run = drive(&mut h, |n| 100.0 * n as f64, 30.0);
    let total: f64 = run.moves.iter().sum();
    assert!(total <= 4.0 * 30.0, "moved {total} in 30 s");
    assert!(total > 0.0);
}

#[test]
fn the_wave_is_a_square_of_period_four() {
    // Noise-free and flat: the amplitude stays 1 and the count is the setting, raised by it
    // for two samples of every four.
    let mut h = hill(8, 64);
    let run = drive(&mut h, |_| 1000.0, 3.0);
    assert!(run.waves.len() > 12, "{} samples", run.waves.len());
    for (i, &wave) in run.waves.iter().enumerate() {
        // After sample k (1-based) the count is raised when ⌊k/2⌋ is odd.
        let k = i + 1;
        let up = (k / 2) % 2 == 1;
        assert_eq!(wave, usize::from(up), "sample {k}: {:?}", run.waves);
    }
}

#[test]
fn is_deterministic_for_a_seed_and_its_intervals_follow_it() {
    let trace = |seed| {
        let params = HillClimbingParams {
            seed,
            ..HillClimbingParams::default()
        };
        let mut h = HillClimbing::new(params, Bounds::new(4, 1, 64).unwrap()).unwrap();
        drive(&mut h, knee(12), 20.0).targets
    };
    assert_eq!(trace(3), trace(3));
    assert_ne!(trace(3), trace(4), "the seed does not reach the intervals");
}

#[test]
fn samples_end_at_completions_after_their_interval() {
    let mut h = hill(4, 64);
    // Ticks and starts never end a sample, however late.
    h.on_tick(Duration::ZERO);
    h.on_tick(Duration::from_secs(5));
    h.on_start(Duration::from_secs(6), Load::new(4, 3));
    assert_eq!(h.samples(), 0);
    // A completion while a shrink is pending (in-flight above the target) does not either.
    h.on_complete(Duration::from_secs(7), Load::new(9, 3));
    assert_eq!(h.samples(), 0);
    h.on_complete(Duration::from_secs(8), Load::new(4, 3));
    assert_eq!(h.samples(), 1);
    // Later samples need (4 − 1)/completions < 0.15, i.e. 21 completions: until then they are
    // carried on.
    for i in 1..=20 {
        h.on_complete(Duration::from_secs(8 + i), Load::new(4, 3));
    }
    assert_eq!(h.samples(), 1);
    h.on_complete(Duration::from_secs(29), Load::new(4, 3));
    assert_eq!(h.samples(), 2);
}

#[test]
fn rejects_parameters_out_of_range() {
    let b = Bounds::new(4, 1, 64).unwrap();
    let cases: [(HillClimbingParams, &str); 5] = [
        (
            HillClimbingParams {
                wave_period: 5,
                ..HillClimbingParams::default()
            },
            "wave_period",
        ),
        (
            HillClimbingParams {
                wave_history: 1,
                ..HillClimbingParams::default()
            },
            "wave_history",
        ),
        (
            HillClimbingParams {
                bias: -0.1,
                ..HillClimbingParams::default()
            },
            "bias",
        ),
        (
            HillClimbingParams {
                sample_interval_high: Duration::from_millis(5),
                ..HillClimbingParams::default()
            },
            "sample_interval",
        ),
        (
            HillClimbingParams {
                error_smoothing: 0.0,
                ..HillClimbingParams::default()
            },
            "error_smoothing",
        ),
    ];
    for (params, field) in cases {
        let e = HillClimbing::new(params, b).unwrap_err().to_string();
        assert!(e.contains(field), "{e} does not name {field}");
    }
}

#[test]
fn the_spec_name_builds_it() {
    let p = policy_from_spec("hill", 4, 16).unwrap();
    assert_eq!(p.target(), 4);
    assert!(policy_from_spec("hill:x", 4, 16).is_err());
}
