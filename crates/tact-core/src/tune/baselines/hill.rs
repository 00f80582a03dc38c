//! .NET's thread-pool hill climbing (CoreCLR `HillClimbing`, spec §5; Fuentes, "Optimizing
//! concurrency levels in the .NET ThreadPool"): the count is a control setting plus a square
//! wave, and the setting climbs the throughput curve by the slope the wave reveals.
//!
//! Each sample (a stretch of time and the completions in it) adds one throughput and the count
//! it ran at to a history of `wave_period × wave_history` samples. Over the last whole number of
//! periods a Goertzel filter takes the component at the wave's frequency of both series, each
//! divided by its mean; the throughput's components at the two adjacent Fourier bands estimate
//! its noise. The real part of (throughput wave − bias × count wave) / count wave is the slope:
//! positive while a relative thread buys more than `bias` of relative throughput. The move is
//! that slope clamped to ±1, times a confidence (count wave / noise / target SNR, at most 1),
//! raised to `gain_exponent` with its sign kept, times `max_change_per_second × sample seconds`,
//! limited to ±`max_change_per_sample`. The wave's amplitude follows a slow average of the noise
//! (`error_smoothing`), so that it stands `target_snr` above it: round(2 × setting × noise × SNR ×
//! multiplier), within [1, `max_wave_magnitude`]. The setting stays within [n_min, n_max −
//! amplitude]; the count is the setting, plus the amplitude during the wave's upper half (two
//! samples of four), within the bounds.
//!
//! Sampling follows CoreCLR's thread pool, which also samples at completions: a sample ends at the
//! first completion once its interval has passed and no shrink is pending (in-flight ≤ target). A
//! sample whose count could be off by more than `max_sample_error` (count − 1 tasks may straddle
//! its ends, so (count − 1) / completions ≥ 0.15) is extended by `sample_interval_low`
//! (CoreCLR: a literal 10 ms). Every change of the count draws a new interval, uniform in whole
//! milliseconds over [`sample_interval_low`, `sample_interval_high`] from a seeded stream (CoreCLR
//! seeds its generator with the process id), so that the wave does not lock onto other periodic
//! load. At n_min with a negative slope the next interval is 10 × max(−slope, 1) times longer, as
//! CoreCLR stays at its minimum and only now and then tries a higher count.
//!
//! Defaults are CoreCLR's (`clrconfigvalues.h`); the spec lists all but the noise smoothing
//! (CoreCLR: 1%). Differences: CoreCLR refuses an upward move while the machine's CPU is above
//! 95%; here there is no such gate (a host may report a utilization, but every baseline ignores
//! it, so that they all compete on the same inputs). Its thread pool's starvation and blocking
//! injections lie outside `HillClimbing` and have no counterpart. The move is limited in both
//! directions (the spec's "≤ 20 per sample"; CoreCLR caps only upward moves and bounds a
//! downward one by the gain alone). Ticks and other events carry no completions, so they never
//! end a sample.

use std::time::Duration;

use super::super::policy::{Event, Policy};
use super::seeded::SplitMix;
use super::{check_range, BaselineError, Bounds};

#[derive(Debug, Clone, PartialEq)]
pub struct HillClimbingParams {
    /// Samples per wave period; even, at least 4 (CoreCLR: 4).
    pub wave_period: usize,
    /// Largest wave amplitude in workers (CoreCLR: 20).
    pub max_wave_magnitude: usize,
    /// Scale of the amplitude the noise asks for (CoreCLR: 1.0).
    pub wave_magnitude_multiplier: f64,
    /// Wave periods of history analysed; at least 2 (CoreCLR: 8).
    pub wave_history: usize,
    /// The cost of a thread: relative throughput a relative thread must buy to climb, in [0, 1]
    /// (CoreCLR: 0.15).
    pub bias: f64,
    /// Wave-to-noise ratio the amplitude aims for and full confidence needs (CoreCLR: 3.0).
    pub target_snr: f64,
    /// Largest move per second of sample (CoreCLR: 4).
    pub max_change_per_second: f64,
    /// Largest move per sample (CoreCLR: 20).
    pub max_change_per_sample: f64,
    /// Range of the random sample interval (CoreCLR: 10–200 ms).
    pub sample_interval_low: Duration,
    pub sample_interval_high: Duration,
    /// Weight of a new noise estimate in its moving average, in (0, 1] (CoreCLR: 0.01).
    pub error_smoothing: f64,
    /// Exponent of the move: above 1 damps small moves and keeps large ones (CoreCLR: 2.0).
    pub gain_exponent: f64,
    /// Largest tolerated count error of a sample, (count − 1) / completions (CoreCLR: 0.15).
    pub max_sample_error: f64,
    /// Seed of the sample intervals.
    pub seed: u64,
}

impl Default for HillClimbingParams {
    fn default() -> Self {
        HillClimbingParams {
            wave_period: 4,
            max_wave_magnitude: 20,
            wave_magnitude_multiplier: 1.0,
            wave_history: 8,
            bias: 0.15,
            target_snr: 3.0,
            max_change_per_second: 4.0,
            max_change_per_sample: 20.0,
            sample_interval_low: Duration::from_millis(10),
            sample_interval_high: Duration::from_millis(200),
            error_smoothing: 0.01,
            gain_exponent: 2.0,
            max_sample_error: 0.15,
            seed: 0,
        }
    }
}

impl HillClimbingParams {
    fn validate(&self) -> Result<(), BaselineError> {
        let positive = |field, value: f64| {
            check_range(
                field,
                value,
                f64::MIN_POSITIVE,
                f64::MAX,
                "must be positive",
            )
        };
        if self.wave_period < 4 || !self.wave_period.is_multiple_of(2) {
            // A square wave of half-period period/2 has period `wave_period` only when it is
            // even; the adjacent bands stay below Nyquist only from 4.
            return Err(BaselineError::Range {
                field: "wave_period",
                value: self.wave_period as f64,
                why: "the wave period must be even and at least 4 samples",
            });
        }
        check_range(
            "max_wave_magnitude",
            self.max_wave_magnitude as f64,
            1.0,
            f64::MAX,
            "the wave needs an amplitude of at least 1",
        )?;
        positive("wave_magnitude_multiplier", self.wave_magnitude_multiplier)?;
        check_range(
            "wave_history",
            self.wave_history as f64,
            2.0,
            f64::MAX,
            "the analysis needs more than one wave period",
        )?;
        check_range("bias", self.bias, 0.0, 1.0, "the bias must be in [0, 1]")?;
        positive("target_snr", self.target_snr)?;
        positive("max_change_per_second", self.max_change_per_second)?;
        positive("max_change_per_sample", self.max_change_per_sample)?;
        if self.sample_interval_low.as_millis() < 1
            || self.sample_interval_high < self.sample_interval_low
        {
            return Err(BaselineError::Range {
                field: "sample_interval_low",
                value: self.sample_interval_low.as_secs_f64(),
                why: "the sample interval needs 1 ms <= low <= high",
            });
        }
        check_range(
            "error_smoothing",
            self.error_smoothing,
            f64::MIN_POSITIVE,
            1.0,
            "the smoothing must be in (0, 1]",
        )?;
        positive("gain_exponent", self.gain_exponent)?;
        positive("max_sample_error", self.max_sample_error)
    }
}

/// A complex number, as much of one as the analysis needs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Complex {
    re: f64,
    im: f64,
}

impl Complex {
    fn scale(self, k: f64) -> Complex {
        Complex {
            re: self.re * k,
            im: self.im * k,
        }
    }

    fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// The real part of self / other (other non-zero).
    fn real_ratio(self, other: Complex) -> f64 {
        (self.re * other.re + self.im * other.im) / (other.re * other.re + other.im * other.im)
    }
}

/// The component of `samples` (oldest first) at `period` samples, by the Goertzel recurrence,
/// divided by the number of samples.
fn wave_component(samples: &[f64], period: f64) -> Complex {
    let w = 2.0 * std::f64::consts::PI / period;
    let (cos, sin) = (w.cos(), w.sin());
    let (mut q1, mut q2) = (0.0, 0.0);
    for &x in samples {
        let q0 = 2.0 * cos * q1 - q2 + x;
        q2 = q1;
        q1 = q0;
    }
    Complex {
        re: q1 - q2 * cos,
        im: q2 * sin,
    }
    .scale(1.0 / samples.len() as f64)
}

/// What the analysis of the history found.
#[derive(Debug, Clone, Copy, Default)]
struct Analysis {
    /// Real part of the bias-adjusted throughput-to-count wave ratio (0 without a count wave).
    slope: f64,
    /// In [0, ∞): 1 and above means the count wave stands target_snr above the noise.
    confidence: f64,
}

/// .NET's hill-climbing thread-count controller.
#[derive(Debug, Clone)]
pub struct HillClimbing {
    params: HillClimbingParams,
    bounds: Bounds,
    target: usize,
    /// The count without the wave (CoreCLR's `m_currentControlSetting`).
    control: f64,
    magnitude: usize,
    /// Throughputs and the counts they ran at, a ring of wave_period × wave_history samples.
    throughputs: Vec<f64>,
    counts: Vec<f64>,
    samples: u64,
    /// Moving average of the throughput noise (relative to the mean throughput).
    noise: f64,
    /// The interval drawn at the last change of the count.
    interval: Duration,
    /// How long the current sample must run before a completion may end it.
    wait: Duration,
    /// Start of the current sample; None before the first event.
    sample_start: Option<Duration>,
    completions: u64,
    /// A sample too short to be accurate, carried into the next (CoreCLR's accumulators).
    carried: (Duration, u64),
    rng: SplitMix,
}

impl HillClimbing {
    pub fn new(params: HillClimbingParams, bounds: Bounds) -> Result<Self, BaselineError> {
        params.validate()?;
        let history = params.wave_period * params.wave_history;
        let mut rng = SplitMix::new(params.seed);
        let interval = draw_interval(&params, &mut rng);
        Ok(HillClimbing {
            bounds,
            target: bounds.n_init(),
            control: bounds.n_init() as f64,
            magnitude: 1,
            throughputs: vec![0.0; history],
            counts: vec![0.0; history],
            samples: 0,
            noise: 0.0,
            interval,
            wait: interval,
            sample_start: None,
            completions: 0,
            carried: (Duration::ZERO, 0),
            rng,
            params,
        })
    }

    /// The count without the wave.
    pub fn control_setting(&self) -> f64 {
        self.control
    }

    /// The wave's current amplitude in workers.
    pub fn wave_magnitude(&self) -> usize {
        self.magnitude
    }

    /// Samples taken so far (those carried into a later one not counted).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The last `n` samples of `series`, oldest first.
    fn last(&self, series: &[f64], n: usize) -> Vec<f64> {
        let len = series.len() as u64;
        (self.samples - n as u64..self.samples)
            .map(|i| series[(i % len) as usize])
            .collect()
    }

    /// The Fourier analysis of the history, once it holds more than one whole wave period
    /// (besides the newest sample: CoreCLR counts samples − 1).
    fn analyse(&mut self) -> Analysis {
        let period = self.params.wave_period;
        let history = self.throughputs.len() as u64;
        let n = ((self.samples - 1).min(history) as usize / period) * period;
        if n <= period {
            return Analysis::default();
        }
        let throughputs = self.last(&self.throughputs, n);
        let counts = self.last(&self.counts, n);
        let mean_throughput = throughputs.iter().sum::<f64>() / n as f64;
        let mean_count = counts.iter().sum::<f64>() / n as f64;
        if mean_throughput <= 0.0 || mean_count <= 0.0 {
            return Analysis::default();
        }
        // The two Fourier bands next to the wave's, whose content can only be noise.
        let waves = n as f64 / period as f64;
        let (adjacent1, adjacent2) = (n as f64 / (waves + 1.0), n as f64 / (waves - 1.0));
        let throughput_wave =
            wave_component(&throughputs, period as f64).scale(1.0 / mean_throughput);
        let mut error = wave_component(&throughputs, adjacent1).abs() / mean_throughput;
        if adjacent2 <= n as f64 {
            error = error.max(wave_component(&throughputs, adjacent2).abs() / mean_throughput);
        }
        let count_wave = wave_component(&counts, period as f64).scale(1.0 / mean_count);
        self.noise = if self.noise == 0.0 {
            error
        } else {
            self.params.error_smoothing * error + (1.0 - self.params.error_smoothing) * self.noise
        };
        let slope = if count_wave.abs() > 0.0 {
            let adjusted = Complex {
                re: throughput_wave.re - self.params.bias * count_wave.re,
                im: throughput_wave.im - self.params.bias * count_wave.im,
            };
            adjusted.real_ratio(count_wave)
        } else {
            0.0
        };
        let noise = self.noise.max(error);
        let confidence = if noise > 0.0 {
            count_wave.abs() / noise / self.params.target_snr
        } else {
            1.0
        };
        Analysis { slope, confidence }
    }

    /// Ends a sample of `elapsed` with `completions`: CoreCLR's `Update`. Returns how long the
    /// next sample must run.
    fn update(&mut self, elapsed: Duration, completions: u64) -> Duration {
        let current = self.target;
        let elapsed = elapsed + self.carried.0;
        let completions = completions + self.carried.1;
        if self.samples > 0
            && (current as f64 - 1.0) / completions as f64 >= self.params.max_sample_error
        {
            self.carried = (elapsed, completions);
            return self.params.sample_interval_low;
        }
        self.carried = (Duration::ZERO, 0);
        let seconds = elapsed.as_secs_f64();
        let slot = (self.samples % self.throughputs.len() as u64) as usize;
        self.throughputs[slot] = completions as f64 / seconds;
        self.counts[slot] = current as f64;
        self.samples += 1;

        let Analysis { slope, confidence } = self.analyse();
        let step = slope.clamp(-1.0, 1.0) * confidence.clamp(0.0, 1.0);
        let limit = self.params.max_change_per_sample;
        let step = (step.abs().powf(self.params.gain_exponent).copysign(step)
            * self.params.max_change_per_second
            * seconds)
            .clamp(-limit, limit);
        self.control += step;

        // The amplitude that stands target_snr above the noise at this setting.
        let magnitude = 0.5
            + self.control
                * self.noise
                * self.params.target_snr
                * self.params.wave_magnitude_multiplier
                * 2.0;
        self.magnitude = (magnitude.max(0.0) as usize).clamp(1, self.params.max_wave_magnitude);
        let (n_min, n_max) = (self.bounds.n_min() as f64, self.bounds.n_max() as f64);
        self.control = self.control.min(n_max - self.magnitude as f64).max(n_min);

        let half = (self.params.wave_period / 2) as u64;
        let upper = (self.samples / half) % 2 == 1;
        let wave = if upper { self.magnitude as f64 } else { 0.0 };
        self.target = self.bounds.clamp((self.control + wave) as usize);
        if self.target != current {
            self.interval = draw_interval(&self.params, &mut self.rng);
        }
        if slope < 0.0 && self.target == self.bounds.n_min() {
            self.interval.mul_f64(10.0 * (-slope).max(1.0))
        } else {
            self.interval
        }
    }
}

/// A sample interval uniform in whole milliseconds over [low, high].
fn draw_interval(params: &HillClimbingParams, rng: &mut SplitMix) -> Duration {
    let low = params.sample_interval_low.as_millis() as f64;
    let high = params.sample_interval_high.as_millis() as f64;
    Duration::from_millis(rng.between(low, high + 1.0).floor() as u64)
}

impl Policy for HillClimbing {
    fn target(&self) -> usize {
        self.target
    }

    fn on_event(&mut self, event: Event) -> Option<usize> {
        let before = self.target;
        let now = event.at();
        let start = *self.sample_start.get_or_insert(now);
        if let Event::Complete { load, .. } = event {
            self.completions += 1;
            // CoreCLR adjusts only when no retirement is pending.
            let elapsed = now.saturating_sub(start);
            if elapsed >= self.wait && load.in_flight <= self.target {
                self.wait = self.update(elapsed, self.completions);
                self.sample_start = Some(now);
                self.completions = 0;
            }
        }
        (self.target != before).then_some(self.target)
    }
}
