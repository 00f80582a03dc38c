//! Calibrated targets (spec 2.4, 2.5): one per metric-set index.
//!
//! A single-metric index keeps a target rate r, updated by exponential averaging (equations 4, 5).
//! A multi-metric index keeps decayed sufficient statistics x = ΣΔpΔpᵀ and y = Σ dΔp and the ridge
//! solution w (w_k = 1/r_k, equations 8–14), so its target duration is D* = Σ w_k Δp_k.
//! Both start with a plain mean over their first `bootstrap` updates, then decay with ξ.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::solve_ridge;

/// Version of the persisted form of [`TargetSet`]; bump it when the fields change meaning.
pub const TARGETS_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    Single {
        /// Target progress rate, units per second.
        rate: f64,
        updates: u64,
    },
    Multi {
        /// k×k row-major decayed Σ ΔpΔpᵀ.
        x: Vec<f64>,
        /// Decayed Σ d·Δp.
        y: Vec<f64>,
        /// Seconds per unit of each metric (1/r_k).
        w: Vec<f64>,
        updates: u64,
    },
}

impl Target {
    fn new(k: usize) -> Self {
        if k == 1 {
            Target::Single {
                rate: 0.0,
                updates: 0,
            }
        } else {
            Target::Multi {
                x: vec![0.0; k * k],
                y: vec![0.0; k],
                w: vec![0.0; k],
                updates: 0,
            }
        }
    }

    /// Number of metrics this target was built for.
    pub fn metrics(&self) -> usize {
        match self {
            Target::Single { .. } => 1,
            Target::Multi { y, .. } => y.len(),
        }
    }

    pub fn updates(&self) -> u64 {
        match self {
            Target::Single { updates, .. } | Target::Multi { updates, .. } => *updates,
        }
    }

    /// Target duration D* in seconds for progress `dp`, if the target can judge yet.
    pub fn duration(&self, dp: &[f64]) -> Option<f64> {
        let d = match self {
            Target::Single { rate, updates } => {
                if *updates == 0 || *rate <= 0.0 {
                    return None;
                }
                dp[0] / rate
            }
            Target::Multi { w, updates, .. } => {
                if *updates == 0 || w.iter().all(|&v| v == 0.0) {
                    return None;
                }
                w.iter().zip(dp).map(|(w, p)| w * p).sum()
            }
        };
        d.is_finite().then_some(d)
    }

    /// The target rate of each metric (units per second; 0 where unknown), for reports.
    pub fn rates(&self) -> Vec<f64> {
        match self {
            Target::Single { rate, .. } => vec![*rate],
            Target::Multi { w, .. } => w
                .iter()
                .map(|&v| if v > 0.0 { 1.0 / v } else { 0.0 })
                .collect(),
        }
    }

    /// Fold one sample of progress `dp` made in `d` seconds of running into the target.
    fn update(&mut self, dp: &[f64], d: f64, bootstrap: u32, xi: f64, ridge: f64) {
        let warm = self.updates() < bootstrap as u64;
        match self {
            Target::Single { rate, updates } => {
                let weight = if warm {
                    1.0 / (*updates as f64 + 1.0)
                } else {
                    1.0 - xi
                };
                *rate += weight * (dp[0] / d - *rate);
                *updates += 1;
            }
            Target::Multi { x, y, w, updates } => {
                let decay = if warm { 1.0 } else { xi };
                let k = y.len();
                for i in 0..k {
                    y[i] = decay * y[i] + d * dp[i];
                    for j in 0..k {
                        x[i * k + j] = decay * x[i * k + j] + dp[i] * dp[j];
                    }
                }
                // A failed solve (all-zero progress so far) keeps the previous weights.
                if let Ok(sol) = solve_ridge(x, y, ridge) {
                    *w = sol;
                }
                *updates += 1;
            }
        }
    }
}

/// The targets of one job, by metric-set index. This is what persists between runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSet {
    pub version: u32,
    pub targets: BTreeMap<u32, Target>,
}

impl Default for TargetSet {
    fn default() -> Self {
        TargetSet::new()
    }
}

impl TargetSet {
    pub fn new() -> Self {
        TargetSet {
            version: TARGETS_VERSION,
            targets: BTreeMap::new(),
        }
    }

    pub fn get(&self, index: u32) -> Option<&Target> {
        self.targets.get(&index)
    }

    /// Target duration summed over the indices of a sample; None if any index cannot judge yet.
    pub fn duration(&self, samples: &BTreeMap<u32, Vec<f64>>) -> Option<f64> {
        samples
            .iter()
            .map(|(i, dp)| self.targets.get(i)?.duration(dp))
            .sum()
    }

    pub(crate) fn update(
        &mut self,
        index: u32,
        dp: &[f64],
        d: f64,
        bootstrap: u32,
        xi: f64,
        ridge: f64,
    ) {
        self.targets
            .entry(index)
            .or_insert_with(|| Target::new(dp.len()))
            .update(dp, d, bootstrap, xi, ridge);
    }

    /// Whether every target has finished its plain-mean warm-up (a loaded set needs no bootstrap).
    pub fn is_calibrated(&self, bootstrap: u32) -> bool {
        !self.targets.is_empty()
            && self
                .targets
                .values()
                .all(|t| t.updates() >= bootstrap as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_target_is_a_plain_mean_then_an_exponential_average() {
        let mut t = Target::new(1);
        for rate in [100.0, 200.0, 300.0] {
            t.update(&[rate], 1.0, 3, 0.5, 0.0);
        }
        assert_eq!(t.rates(), vec![200.0]);
        t.update(&[400.0], 1.0, 3, 0.5, 0.0); // now r <- 0.5 r + 0.5 * 400
        assert_eq!(t.rates(), vec![300.0]);
        assert_eq!(t.duration(&[600.0]), Some(2.0));
    }

    #[test]
    fn an_unseeded_target_cannot_judge() {
        assert_eq!(Target::new(1).duration(&[1.0]), None);
        assert_eq!(Target::new(2).duration(&[1.0, 1.0]), None);
    }

    #[test]
    fn multi_target_learns_additive_costs() {
        // 60 kB at 750 kB/s plus 5 indices at 120/s: the paper's 122 ms example (§4.4).
        let mut t = Target::new(2);
        for i in 0..200 {
            let dp = [40_000.0 + 500.0 * (i % 40) as f64, 1.0 + (i % 9) as f64];
            let d = dp[0] / 750_000.0 + dp[1] / 120.0;
            t.update(&dp, d, 100, 0.9999, 1e-11);
        }
        let dstar = t.duration(&[60_000.0, 5.0]).unwrap();
        assert!((dstar - (0.08 + 5.0 / 120.0)).abs() < 1e-4, "D* = {dstar}");
        let rates = t.rates();
        assert!((rates[0] - 750_000.0).abs() / 750_000.0 < 1e-3 && (rates[1] - 120.0).abs() < 0.5);
    }

    #[test]
    fn a_set_sums_durations_over_indices_and_round_trips() {
        let mut set = TargetSet::new();
        set.update(0, &[10.0], 1.0, 1, 0.99, 0.0);
        set.update(1, &[5.0], 1.0, 1, 0.99, 0.0);
        let s = BTreeMap::from([(0, vec![20.0]), (1, vec![5.0])]);
        assert_eq!(set.duration(&s), Some(3.0));
        assert_eq!(set.duration(&BTreeMap::from([(7, vec![1.0])])), None);
        assert!(set.is_calibrated(1) && !set.is_calibrated(2));
        assert_eq!(TargetSet::default().version, TARGETS_VERSION);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(serde_json::from_str::<TargetSet>(&json).unwrap(), set);
    }
}
