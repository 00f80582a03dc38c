//! The paper's experiments (§9, spec section 6) as functions returning their measured figures.
//! The tests assert on these; `examples/polite_claims.rs` prints them for the docs.

use std::time::Duration;

use serde::Serialize;
use tact_core::polite::PoliteConfig;
use tact_core::stats::Verdict;

use crate::job::{Concurrent, SingleMetric};
use crate::load::{Bursty, LoadPattern};
use crate::machine::Contention;
use crate::measure::Summary;
use crate::noise::Noise;
use crate::polite::{PoliteSim, Scenario};

const HOUR: Duration = Duration::from_secs(3600);

/// The paper's uncontended and loaded target durations (§9.6): 480 ms ideal, 1600 ms when the
/// calibration starts under load. Their ratio is the contention factor of the experiments.
pub const IDEAL_UNIT: Duration = Duration::from_millis(480);
pub const LOADED_UNIT: Duration = Duration::from_millis(1600);

pub fn paper_contention() -> Contention {
    Contention::symmetric(LOADED_UNIT.as_secs_f64() / IDEAL_UNIT.as_secs_f64())
}

/// Mild skewed noise on every testpoint's progress (the default for the claims below).
pub const PROGRESS_NOISE: Noise = Noise::LogNormal { sigma: 0.1 };

/// m = ⌈−log₂ α⌉: the fewest samples that can be judged poor (equation 1).
pub fn min_window(alpha: f64) -> u32 {
    (-alpha.log2()).ceil() as u32
}

/// The most testpoints an onset of contention can take to draw a suspension when every sample
/// from the onset on is poor: the sign-test window may already hold samples from before the
/// onset (it is only cleared by a verdict or at the window cap), and good ones delay the verdict.
/// The onset's own testpoint is counted, and may not read poor if the onset falls late in it.
pub fn worst_reaction(config: &PoliteConfig) -> u32 {
    let test = config.validate().expect("valid config");
    let cap = config.window_cap;
    let mut worst = 0;
    for n0 in 0..cap {
        for c0 in 0..=n0 {
            if n0 > 0 && test.verdict(n0, c0) != Verdict::Indeterminate {
                continue; // a verdict clears the window: this state never rests
            }
            let (mut n, mut c, mut k) = (n0, c0, 0);
            loop {
                k += 1;
                n += 1;
                c += 1;
                match test.verdict(n, c) {
                    Verdict::Poor => break,
                    _ if n >= cap => (n, c) = (0, 0),
                    _ => {}
                }
            }
            worst = worst.max(k);
        }
    }
    worst + 1
}

/// Equation 3: the fraction of time suspended when progress is exactly on target.
pub fn equation3_q(alpha: f64, beta: f64) -> f64 {
    let m = f64::from(min_window(alpha));
    alpha * beta / (alpha * beta + m * (beta - alpha))
}

/// A bursty load with no diurnal swing, starting idle so the target calibrates on an idle machine.
pub fn stationary_bursts(seed: u64, lead_in_idle: Duration) -> Bursty {
    Bursty {
        diurnal_amplitude: 0.0,
        lead_in: Some((false, lead_in_idle)),
        ..Bursty::paper_calibration(seed)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ReactionReport {
    pub hours: f64,
    pub regulated: Summary,
    pub unregulated: Summary,
    /// Regulated foreground slowdown ÷ unregulated: the paper's "order of magnitude".
    pub slowdown_ratio: f64,
    pub max_suspension_s: f64,
    pub period_s: f64,
}

/// §9.2/§9.4: a job calibrated idle (probation 0) shares a resource with bursts of 10 s–15 min.
pub fn reaction(seed: u64, hours: u64) -> ReactionReport {
    let config = PoliteConfig {
        probation: Some(Duration::ZERO),
        ..PoliteConfig::default()
    };
    let load = LoadPattern::Bursty(stationary_bursts(seed, Duration::from_secs(60)));
    let mut scenario = Scenario::new(config.clone(), load, paper_contention());
    scenario.noise = PROGRESS_NOISE;
    scenario.seed = seed;
    let run = |regulate: bool| {
        let s = Scenario {
            regulate,
            ..scenario.clone()
        };
        let mut sim =
            PoliteSim::new(s, SingleMetric::with_unit_duration(IDEAL_UNIT)).expect("valid config");
        sim.run_until(HOUR * hours as u32);
        sim.summary()
    };
    let (regulated, unregulated) = (run(true), run(false));
    ReactionReport {
        hours: hours as f64,
        slowdown_ratio: regulated.foreground_slowdown / unregulated.foreground_slowdown,
        regulated,
        unregulated,
        max_suspension_s: config.max_suspension.as_secs_f64(),
        period_s: config.period.as_secs_f64(),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CalibrationReport {
    pub ideal_ms: f64,
    pub initial_ms: Option<f64>,
    /// (hours, target ms) every 15 minutes.
    pub trajectory: Vec<(f64, Option<f64>)>,
    pub at_12h_ms: Option<f64>,
    pub at_24h_ms: Option<f64>,
    pub at_48h_ms: Option<f64>,
    /// The second 24 h (after probation): the paper's cyclic-load figures (§9.6).
    pub second_day: Summary,
    pub first_day: Summary,
}

/// §9.6: calibration started inside a burst, probation 24 h, n_avg 10,000, 48 h of bursty
/// diurnal load with contention factor 1600/480.
pub fn calibration(seed: u64) -> CalibrationReport {
    calibration_with(seed, PoliteConfig::default())
}

/// [`calibration`] with other regulator settings (the probation stays the paper's 24 h).
pub fn calibration_with(seed: u64, base: PoliteConfig) -> CalibrationReport {
    let config = PoliteConfig {
        probation: Some(HOUR * 24),
        ..base
    };
    let load = LoadPattern::Bursty(Bursty::paper_calibration(seed));
    let mut scenario = Scenario::new(config.clone(), load, paper_contention());
    scenario.noise = PROGRESS_NOISE;
    scenario.seed = seed;
    scenario.target_every = Duration::from_secs(15 * 60);
    let mut sim = PoliteSim::new(scenario, SingleMetric::with_unit_duration(IDEAL_UNIT))
        .expect("valid config");
    // Just past the bootstrap (B testpoints of P): the target as first seeded under load.
    sim.run_until(config.period * (config.bootstrap + 1));
    let initial_ms = sim.target_duration().map(|s| s * 1e3);
    sim.run_until(HOUR * 24);
    let day1 = sim.mark();
    sim.run_until(HOUR * 48);
    let trajectory: Vec<(f64, Option<f64>)> = sim
        .target_series()
        .iter()
        .map(|p| (p.t.as_secs_f64() / 3600.0, p.target.map(|s| s * 1e3)))
        .collect();
    let at = |h: f64| {
        trajectory
            .iter()
            .find(|(t, _)| *t >= h)
            .and_then(|(_, v)| *v)
    };
    let start = crate::measure::Mark {
        at: Duration::ZERO,
        counters: Default::default(),
    };
    CalibrationReport {
        ideal_ms: IDEAL_UNIT.as_secs_f64() * 1e3,
        initial_ms,
        at_12h_ms: at(12.0),
        at_24h_ms: at(24.0),
        at_48h_ms: at(48.0),
        first_day: Summary::new(&start, &day1, sim.overshoots(), sim.reactions()),
        second_day: sim.summary_since(&day1),
        trajectory,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DutyCycleReport {
    pub noise: Noise,
    pub hours: f64,
    pub alpha: f64,
    pub beta: f64,
    pub m: u32,
    /// Equation 3's prediction.
    pub q_equation3: f64,
    /// Measured fraction of time suspended.
    pub q_measured: f64,
    /// Poor verdicts per m judged samples: the per-verdict false-poor rate equation 3 calls α.
    pub false_poor_per_window: f64,
    /// Poor verdicts ÷ all decisive verdicts.
    pub poor_share_of_verdicts: f64,
    pub summary: Summary,
}

/// §4.1 / equation 3: an idle machine, progress iid around its own calibrated target.
pub fn duty_cycle(seed: u64, hours: u64, noise: Noise) -> DutyCycleReport {
    let config = PoliteConfig {
        probation: Some(Duration::ZERO),
        ..PoliteConfig::default()
    };
    let mut scenario = Scenario::new(config.clone(), LoadPattern::None, Contention::none());
    scenario.noise = noise;
    scenario.seed = seed;
    let mut sim = PoliteSim::new(scenario, SingleMetric::with_unit_duration(IDEAL_UNIT))
        .expect("valid config");
    // Measure after the bootstrap, from when the regulator judges.
    sim.run_until(config.period * (config.bootstrap + 1));
    let start = sim.mark();
    sim.run_until(HOUR * hours as u32);
    let summary = sim.summary_since(&start);
    let m = min_window(config.alpha);
    let decisive = summary.poor_verdicts + summary.good_verdicts;
    DutyCycleReport {
        noise,
        hours: hours as f64,
        alpha: config.alpha,
        beta: config.beta,
        m,
        q_equation3: equation3_q(config.alpha, config.beta),
        q_measured: summary.suspended_fraction,
        false_poor_per_window: summary.poor_verdicts as f64 * f64::from(m)
            / summary.judged.max(1) as f64,
        poor_share_of_verdicts: summary.poor_verdicts as f64 / decisive.max(1) as f64,
        summary,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ConcurrentReport {
    /// Calibrated rates of the two metrics (bytes/s, operations/s).
    pub fitted_rates: Vec<f64>,
    pub true_rates: Vec<f64>,
    pub uncontended: Summary,
    pub contended: Summary,
    /// Testpoints from the start of contention to the first suspension.
    pub reaction_testpoints: Option<u32>,
}

/// §4.4 / §6.3: a job with two metrics whose per-unit costs add, mixed in varying proportions,
/// idle for `idle`, then contended for `busy`.
pub fn concurrent(seed: u64, idle: Duration, busy: Duration) -> ConcurrentReport {
    let config = PoliteConfig {
        probation: Some(Duration::ZERO),
        ..PoliteConfig::default()
    };
    let load = LoadPattern::Script {
        segments: vec![(false, idle), (true, busy)],
        then_busy: false,
    };
    let mut scenario = Scenario::new(config, load, paper_contention());
    scenario.noise = PROGRESS_NOISE;
    scenario.seed = seed;
    let job = Concurrent::paper_example(seed);
    let true_rates = job.rates.clone();
    let mut sim = PoliteSim::new(scenario, job).expect("valid config");
    sim.run_until(idle);
    let contention_starts = sim.mark();
    let fitted_rates = sim
        .regulator()
        .targets()
        .get(0)
        .map(|t| t.rates())
        .unwrap_or_default();
    sim.run_until(idle + busy);
    let start = crate::measure::Mark {
        at: Duration::ZERO,
        counters: Default::default(),
    };
    ConcurrentReport {
        fitted_rates,
        true_rates,
        uncontended: Summary::new(
            &start,
            &contention_starts,
            sim.overshoots(),
            sim.reactions(),
        ),
        contended: sim.summary_since(&contention_starts),
        reaction_testpoints: sim.reactions().first().and_then(|r| r.testpoints),
    }
}
