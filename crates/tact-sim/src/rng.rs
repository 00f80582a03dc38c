//! Seeded randomness for the simulator.
//!
//! A SplitMix64 generator written out here rather than taken from `rand`: the stream depends on
//! nothing but the seed, so a figure recorded in the docs reproduces bit for bit whatever crate
//! versions the workspace later resolves, and the simulator needs only uniform, normal and
//! log-uniform draws.

/// A small deterministic pseudo-random generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// An independent generator for one component, so that adding draws to one component (say
    /// the noise) does not shift the stream of another (say the load).
    pub fn stream(seed: u64, component: u64) -> Self {
        let mut mix = SimRng::new(seed ^ component.wrapping_mul(0xA076_1D64_78BD_642F));
        SimRng::new(mix.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Standard normal (Box–Muller; one of the pair is dropped to keep the state trivial).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]: ln(u1) is finite
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-uniform in [lo, hi): every factor of two between the bounds is equally likely, which
    /// is how "bursts between 10 s and 15 min" spread over two orders of magnitude.
    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.uniform()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| SimRng::stream(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            SimRng::stream(7, 1).next_u64(),
            SimRng::stream(7, 2).next_u64()
        );
    }

    #[test]
    fn moments_are_right() {
        let mut r = SimRng::new(1);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        let u: f64 = (0..n).map(|_| r.uniform()).sum::<f64>() / n as f64;
        assert!((u - 0.5).abs() < 0.005);
        assert!((0..1000).all(|_| (2.0..3.0).contains(&r.log_uniform(2.0, 3.0))));
    }
}
