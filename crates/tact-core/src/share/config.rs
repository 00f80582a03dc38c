//! Parameters of the share engine (spec proportional-share.md section 2, table; section 4 modes).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Shortest quantum the engine accepts (0.1 ms): below it the timer, not the algorithm, decides.
pub const MIN_QUANTUM_NS: u64 = 100_000;
/// Longest quantum the engine accepts (60 s).
pub const MAX_QUANTUM_NS: u64 = 60_000_000_000;
/// Most CPUs a group may use.
pub const MAX_CPUS: u32 = 4096;
/// Largest share of one entity. Shares are positive integers; a cycle is `S·Q` nanoseconds of
/// group CPU kept in an `f64`, so shares are bounded to keep that exact to well under a
/// nanosecond per quantum.
pub const MAX_SHARE: u64 = 1_000_000;

/// How the engine treats a group that can use more than one CPU (spec section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The paper's semantics: exact ratios of consumed CPU, cores may idle.
    Strict,
    /// Feasible shares φ, a core partition for capped entities, and idle fill.
    Conserving,
}

impl Mode {
    /// Strict when the group has one CPU, conserving from two on.
    pub fn default_for(cpus: u32) -> Mode {
        if cpus >= 2 {
            Mode::Conserving
        } else {
            Mode::Strict
        }
    }
}

/// Configuration of one ALPS instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareConfig {
    /// Quantum Q, the timer period, in nanoseconds.
    pub quantum_ns: u64,
    /// Optimized ALPS: skip reads that cannot change a decision. Off is basic ALPS.
    pub lazy: bool,
    /// The blocked-entity heuristic (one quantum charged per blocked observation).
    pub io: bool,
    /// tact's refinement of optimized ALPS (off = the paper's and the spec's rule): also read
    /// every eligible entity by the quantum at which the cycle could end, `ceil(t_c/(Q·P))`
    /// quanta ahead with `P = min(C, Σ par)` of the eligible entities, so that a cycle end is
    /// not seen late because the entities still running are read lazily.
    #[serde(default)]
    pub cycle_bound: bool,
    /// Quantization-aware accounting (spec section 6): between quantum ticks, check an entity
    /// that could exhaust its allowance before the next tick at the earliest time it could, and
    /// stop it early when less than half of what it would use before the next decision is left;
    /// clamp the blocked charge to what is left of the allowance. Off: decisions only at ticks,
    /// a full quantum per blocked observation (the paper's rules).
    #[serde(default)]
    pub checks: bool,
    /// Strict or conserving (spec section 4).
    pub mode: Mode,
    /// CPUs the group may use (C).
    pub cpus: u32,
}

impl Default for ShareConfig {
    /// The spec's defaults on one CPU: Q = 20 ms, optimized, I/O heuristic on, strict.
    fn default() -> Self {
        ShareConfig::new(20_000_000, 1)
    }
}

impl ShareConfig {
    /// Defaults (optimized, I/O heuristic on) with this quantum and CPU count; the mode is
    /// [`Mode::default_for`] the CPU count.
    pub fn new(quantum_ns: u64, cpus: u32) -> Self {
        ShareConfig {
            quantum_ns,
            lazy: true,
            io: true,
            cycle_bound: false,
            checks: false,
            mode: Mode::default_for(cpus),
            cpus,
        }
    }

    /// Check every field; the error names the one that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_QUANTUM_NS..=MAX_QUANTUM_NS).contains(&self.quantum_ns) {
            return Err(ConfigError::Quantum(self.quantum_ns));
        }
        if !(1..=MAX_CPUS).contains(&self.cpus) {
            return Err(ConfigError::Cpus(self.cpus));
        }
        Ok(())
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("quantum_ns must be between {MIN_QUANTUM_NS} and {MAX_QUANTUM_NS} ns, got {0}")]
    Quantum(u64),
    #[error("cpus must be between 1 and {MAX_CPUS}, got {0}")]
    Cpus(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_specs() {
        let c = ShareConfig::default();
        assert_eq!(c.quantum_ns, 20_000_000);
        assert!(c.lazy && c.io);
        assert_eq!(c.mode, Mode::Strict);
        assert!(c.validate().is_ok());
        assert_eq!(ShareConfig::new(10_000_000, 2).mode, Mode::Conserving);
        assert_eq!(Mode::default_for(1), Mode::Strict);
        assert_eq!(Mode::default_for(8), Mode::Conserving);
    }

    #[test]
    fn bad_values_are_named() {
        let c = ShareConfig {
            quantum_ns: 0,
            ..ShareConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("quantum_ns"));
        let c = ShareConfig {
            cpus: 0,
            ..ShareConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().starts_with("cpus"));
    }

    #[test]
    fn serializes_mode_in_lowercase() {
        let s = serde_json::to_string(&ShareConfig::new(10_000_000, 2)).unwrap();
        assert!(s.contains("\"mode\":\"conserving\""), "{s}");
    }
}
