//! The recorder's metrics (spec section 5): per cycle `E_p`, `AbsErr_p`, `RelErr_p` and `RMS`,
//! computed from the clocks read at each cycle end; the summary drops the first cycles.

use serde::Serialize;
use tact_core::share::EntityId;

use super::machine::{InstId, ShareSim};

/// The weights entitlements are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Target {
    /// The user's shares (the paper's metric).
    Shares,
    /// The weights the engine ran on: φ in conserving mode, the shares in strict mode.
    Weights,
}

/// One cycle as the recorder saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleMetrics {
    /// Simulated time of the cycle end, ns.
    pub t_ns: f64,
    /// Wall time of the cycle, ns.
    pub wall_ns: f64,
    pub ids: Vec<EntityId>,
    pub shares: Vec<u64>,
    /// Weights the entitlements use.
    pub weights: Vec<f64>,
    /// CPU used during the cycle (clock difference), ns.
    pub consumed: Vec<f64>,
    /// Of which booked by the engine as idle-fill surplus, ns.
    pub surplus: Vec<f64>,
    /// Wall time during the cycle with every thread of the entity asleep, ns.
    pub asleep: Vec<f64>,
    /// `E_p`, ns.
    pub entitlement: Vec<f64>,
    /// `AbsErr_p = consumed_p − E_p`, ns.
    pub abs_err: Vec<f64>,
    /// `RelErr_p = AbsErr_p/E_p`.
    pub rel_err: Vec<f64>,
    /// `sqrt(Σ RelErr²/N)`.
    pub rms: f64,
}

/// Per-cycle metrics of instance `inst`. With `exclude_surplus`, idle-fill CPU (as the engine
/// booked it) is taken out of each entity's consumption first.
pub fn cycle_metrics(
    sim: &ShareSim,
    inst: InstId,
    target: Target,
    exclude_surplus: bool,
) -> Vec<CycleMetrics> {
    let snaps = sim.snapshots(inst);
    let arrivals = sim.arrival_cpu(inst);
    let mut out = Vec::with_capacity(snaps.len());
    let mut prev_t = None;
    for (n, s) in snaps.iter().enumerate() {
        let prev = n.checked_sub(1).map(|k| &snaps[k]);
        let mut m = CycleMetrics {
            t_ns: s.t_ns,
            wall_ns: s.t_ns - prev_t.unwrap_or(s.t_ns),
            ids: Vec::new(),
            shares: Vec::new(),
            weights: Vec::new(),
            consumed: Vec::new(),
            surplus: Vec::new(),
            asleep: Vec::new(),
            entitlement: Vec::new(),
            abs_err: Vec::new(),
            rel_err: Vec::new(),
            rms: 0.0,
        };
        prev_t = Some(s.t_ns);
        for (e, &(id, cpu, asleep)) in s.report.entities.iter().zip(&s.clocks) {
            debug_assert_eq!(e.id, id);
            let before = prev
                .and_then(|p| p.clocks.iter().find(|c| c.0 == id))
                .map(|c| (c.1, c.2));
            let (cpu0, asleep0) = before.unwrap_or_else(|| {
                (
                    arrivals.iter().find(|a| a.0 == id).map_or(0.0, |a| a.1),
                    asleep,
                )
            });
            let surplus = e.surplus_ns as f64;
            let mut used = cpu - cpu0;
            if exclude_surplus {
                used -= surplus;
            }
            m.ids.push(id);
            m.shares.push(e.share);
            m.weights.push(match target {
                Target::Shares => e.share as f64,
                Target::Weights => e.weight_used,
            });
            m.consumed.push(used);
            m.surplus.push(surplus);
            m.asleep.push(asleep - asleep0);
        }
        let total_w: f64 = m.weights.iter().sum();
        let total_c: f64 = m.consumed.iter().sum();
        let mut sq = 0.0;
        for k in 0..m.ids.len() {
            let ent = m.weights[k] / total_w * total_c;
            let abs = m.consumed[k] - ent;
            let rel = if ent > 0.0 { abs / ent } else { 0.0 };
            sq += rel * rel;
            m.entitlement.push(ent);
            m.abs_err.push(abs);
            m.rel_err.push(rel);
        }
        m.rms = (sq / m.ids.len().max(1) as f64).sqrt();
        out.push(m);
    }
    out
}

/// One entity's figure over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityAccuracy {
    pub id: EntityId,
    pub share: u64,
    /// RMS of its `RelErr_p(n)` over the cycles kept.
    pub rms_rel_err: f64,
    /// Mean of its `RelErr_p(n)` (bias).
    pub mean_rel_err: f64,
    /// Largest `|AbsErr_p(n)|`, ns.
    pub max_abs_err_ns: f64,
}

/// A run's accuracy summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accuracy {
    /// Cycles kept.
    pub cycles: usize,
    /// Mean `RMS(n)` over the cycles kept: the workload's figure.
    pub mean_rms: f64,
    /// Largest `RMS(n)`.
    pub max_rms: f64,
    pub per_entity: Vec<EntityAccuracy>,
    /// Largest `|AbsErr_p(n)|` over entities and cycles, ns.
    pub max_abs_err_ns: f64,
}

/// Summary over `metrics` after dropping the first `skip` cycles (the spec drops 4). Entities
/// are those of the last cycle; an entity's figure uses the cycles it took part in.
pub fn accuracy(metrics: &[CycleMetrics], skip: usize) -> Accuracy {
    let kept = metrics.get(skip..).unwrap_or(&[]);
    let mean_rms = if kept.is_empty() {
        f64::NAN
    } else {
        kept.iter().map(|m| m.rms).sum::<f64>() / kept.len() as f64
    };
    let max_rms = kept.iter().map(|m| m.rms).fold(0.0, f64::max);
    let mut per_entity = Vec::new();
    if let Some(last) = kept.last() {
        for (k, &id) in last.ids.iter().enumerate() {
            let mut n = 0usize;
            let (mut sq, mut sum, mut max_abs) = (0.0, 0.0, 0.0f64);
            for m in kept {
                if let Some(j) = m.ids.iter().position(|&x| x == id) {
                    n += 1;
                    sq += m.rel_err[j] * m.rel_err[j];
                    sum += m.rel_err[j];
                    max_abs = max_abs.max(m.abs_err[j].abs());
                }
            }
            per_entity.push(EntityAccuracy {
                id,
                share: last.shares[k],
                rms_rel_err: (sq / n.max(1) as f64).sqrt(),
                mean_rel_err: sum / n.max(1) as f64,
                max_abs_err_ns: max_abs,
            });
        }
    }
    let max_abs_err_ns = kept
        .iter()
        .flat_map(|m| m.abs_err.iter())
        .fold(0.0f64, |a, &b| a.max(b.abs()));
    Accuracy {
        cycles: kept.len(),
        mean_rms,
        max_rms,
        per_entity,
        max_abs_err_ns,
    }
}

/// Mean and (population) standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Least-squares slope of `y` over `x`.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return f64::NAN;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_and_spread() {
        assert!((slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]) - 2.0).abs() < 1e-12);
        let (m, sd) = mean_sd(&[1.0, 3.0]);
        assert_eq!((m, sd), (2.0, 1.0));
    }
}
