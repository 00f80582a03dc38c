//! The simulated kernel and driver themselves: tact's cost, stalls and missed quanta, loss of
//! control, sleeping threads, determinism.

use tact_core::share::ShareConfig;
use tact_sim::share::claims::{self, Dist, Variant};
use tact_sim::share::{
    cycle_metrics, Behavior, CostModel, ProcSpec, ShareSim, SimConfig, Target, TimerModel,
};

const MS: u64 = 1_000_000;

/// Spec section 3: T = I + R(r) + ρ·r + S·s + σ(N). Equal-5 under basic ALPS on the fluid kernel
/// reads 5 entities every quantum (but the first, which registers them) and never signals (all
/// five run out together, which ends the cycle): T = 9.02 + 1.1 + 5·(13.9 + 3.5) + 1.48 +
/// 0.142·5 = 99.31 µs, 0.9931% of 10 ms.
#[test]
fn tact_costs_what_the_model_says() {
    let r = claims::pinned(SimConfig::new(1, 1), Dist::Equal, 5, 10, Variant::Basic, 20);
    println!("{r:?}");
    assert!(
        (r.reads_per_quantum - 5.0).abs() < 0.01,
        "{}",
        r.reads_per_quantum
    );
    assert_eq!(r.signals_per_quantum, 0.0);
    assert!(
        (r.overhead - 0.009931).abs() < 0.00005,
        "overhead {}",
        r.overhead
    );
}

/// The paper's linear-20 at 10 ms: basic ALPS was delayed about 400 ms eight times, and the
/// low-share processes, favoured by FreeBSD meanwhile, got up to 1901% of their entitlement. A
/// timer that stalls for 400 ms shows the mechanism: the engine sees the missed quanta as `ticks`,
/// counts them as overruns, catches up one cycle per step, and the cycles around a stall are off.
/// (On the fluid kernel every eligible process runs during a stall, not the low-share ones only,
/// so the spikes are far smaller than FreeBSD's.)
#[test]
fn stalls_give_missed_quanta_and_error_spikes() {
    let calm = claims::pinned(
        SimConfig::new(1, 3),
        Dist::Linear,
        20,
        10,
        Variant::Basic,
        30,
    );
    let machine = SimConfig {
        timer: TimerModel {
            jitter_ns: 100_000,
            stall_probability: 0.002,
            stall_ns: 400 * MS,
        },
        ..SimConfig::new(1, 3)
    };
    let r = claims::pinned(machine, Dist::Linear, 20, 10, Variant::Basic, 30);
    let worst = r
        .accuracy
        .per_entity
        .iter()
        .map(|e| e.max_abs_err_ns)
        .fold(0.0, f64::max);
    println!(
        "overruns {}, max ticks {}, mean RMS {:.1}%, max RMS {:.0}%, worst |AbsErr| {:.1} Q",
        r.overruns,
        r.max_ticks,
        100.0 * r.accuracy.mean_rms,
        100.0 * r.accuracy.max_rms,
        worst / (10 * MS) as f64
    );
    assert!(r.overruns > 0 && r.max_ticks >= 40, "{r:?}");
    assert_eq!(calm.overruns, 0);
    assert!(r.accuracy.max_rms > 5.0 * calm.accuracy.max_rms, "{r:?}");
    assert!(r.max_abs_err_quanta > 5.0, "{}", r.max_abs_err_quanta);
    assert_eq!(r.accuracy.cycles, 26, "and the engine goes on");
}

/// Spec section 3: tact is an ordinary process and loses control once its cost per quantum
/// exceeds its fair share of the CPU, 1/(N+1). With the paper's costs, equal-5 at 10 ms costs
/// 1% and never overruns; at 30 times those costs (30%, above 1/6) it falls behind.
#[test]
fn tact_loses_control_above_its_fair_share() {
    let paper = CostModel::paper();
    let scale = |k: f64| CostModel {
        timer_us: paper.timer_us * k,
        read_fixed_us: paper.read_fixed_us * k,
        read_each_us: paper.read_each_us * k,
        rho_us: paper.rho_us * k,
        signal_us: paper.signal_us * k,
        sigma_fixed_us: paper.sigma_fixed_us * k,
        sigma_each_us: paper.sigma_each_us * k,
    };
    for (k, lost) in [(1.0, false), (12.0, false), (30.0, true)] {
        let machine = SimConfig {
            cost: scale(k),
            ..SimConfig::new(1, 1)
        };
        let r = claims::pinned(machine, Dist::Equal, 5, 10, Variant::Basic, 20);
        println!(
            "cost ×{k}: overhead {:.1}%, overruns {}, max ticks {}",
            100.0 * r.overhead,
            r.overruns,
            r.max_ticks
        );
        assert_eq!(r.overruns > 0, lost, "cost ×{k}: {r:?}");
    }
}

/// A run/sleep thread alone: 80 ms of CPU, then 240 ms asleep.
#[test]
fn run_sleep_threads_follow_their_pattern() {
    let mut sim = ShareSim::new(SimConfig {
        cost: CostModel::free(),
        timer: TimerModel::exact(),
        ..SimConfig::new(1, 1)
    });
    let inst = sim.add_instance(ShareConfig::new(10 * MS, 1), 0);
    let p = sim.add_process(
        inst,
        ProcSpec {
            behavior: Behavior::RunSleep {
                run_ns: 80 * MS,
                sleep_ns: 240 * MS,
                from_ns: 0,
            },
            ..ProcSpec::spinner(1)
        },
    );
    sim.run_until((3200 * MS) as f64);
    assert!(
        (sim.cpu_ns(p) - (800 * MS) as f64).abs() < 1.0,
        "{}",
        sim.cpu_ns(p)
    );
}

/// Same seed, same run; another seed (another timer jitter), another run.
#[test]
fn runs_are_deterministic() {
    let run = |seed| {
        let mut sim = ShareSim::new(SimConfig::new(1, seed));
        let inst = sim.add_instance(ShareConfig::new(10 * MS, 1), 0);
        for s in [1, 3, 5, 7, 9] {
            sim.add_process(inst, ProcSpec::spinner(s));
        }
        sim.run_cycles(inst, 20, 1e12);
        cycle_metrics(&sim, inst, Target::Shares, false)
            .iter()
            .map(|m| m.rms)
            .collect::<Vec<f64>>()
    };
    assert_eq!(run(4), run(4));
    assert_ne!(run(4), run(5));
}

/// SIGSTOP takes effect: an entity out of allowance gets no CPU until the cycle ends.
#[test]
fn stopped_processes_get_no_cpu() {
    let mut sim = ShareSim::new(SimConfig {
        cost: CostModel::free(),
        timer: TimerModel::exact(),
        ..SimConfig::new(1, 1)
    });
    let inst = sim.add_instance(
        ShareConfig {
            lazy: false,
            ..ShareConfig::new(10 * MS, 1)
        },
        0,
    );
    let a = sim.add_process(inst, ProcSpec::spinner(1));
    let b = sim.add_process(inst, ProcSpec::spinner(3));
    // The first step (at 10 ms) registers them; then both run at half a CPU; a has used its
    // quantum at 30 ms and is stopped there, b runs alone until the cycle ends at 50 ms.
    sim.run_until((31 * MS) as f64);
    assert!(sim.is_stopped(a) && !sim.is_stopped(b));
    let before = sim.cpu_ns(a);
    sim.run_until((49 * MS) as f64);
    assert_eq!(sim.cpu_ns(a), before);
    sim.run_until((51 * MS) as f64);
    assert!(!sim.is_stopped(a));
    assert_eq!(sim.snapshots(inst).len(), 1);
}
