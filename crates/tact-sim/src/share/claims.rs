//! The paper's experiments (spec section 5) as functions, shared by the tests and the
//! `share_claims` example.

use serde::Serialize;
use tact_core::share::{Event, Mode, ShareConfig};

use super::machine::{Behavior, InstId, ProcSpec, ShareSim, SimConfig};
use super::record::{accuracy, cycle_metrics, mean_sd, slope, Accuracy, CycleMetrics, Target};

/// Cycles the summary drops (start-up), as in the paper.
pub const SKIP: usize = 4;

const MS: u64 = 1_000_000;

/// The share distributions of spec section 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Dist {
    Linear,
    Equal,
    Skewed,
}

impl Dist {
    pub const ALL: [Dist; 3] = [Dist::Linear, Dist::Equal, Dist::Skewed];

    /// Shares of `n` processes; they sum to n².
    pub fn shares(self, n: usize) -> Vec<u64> {
        let n64 = n as u64;
        match self {
            Dist::Linear => (0..n64).map(|i| 2 * i + 1).collect(),
            Dist::Equal => vec![n64; n],
            Dist::Skewed => {
                let mut v = vec![1; n - 1];
                v.push(n64 * n64 - (n64 - 1));
                v
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dist::Linear => "linear",
            Dist::Equal => "equal",
            Dist::Skewed => "skewed",
        }
    }
}

/// One run of one workload configuration.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigRun {
    pub dist: Dist,
    pub n: usize,
    pub q_ms: u64,
    pub lazy: bool,
    pub mode: Mode,
    pub cores: u32,
    pub seed: u64,
    /// Against the shares in strict mode, against φ in conserving mode (surplus included).
    pub accuracy: Accuracy,
    /// Conserving mode: against φ with the engine's booked surplus taken out.
    pub accuracy_without_surplus: Option<Accuracy>,
    /// Largest |AbsErr| in quanta.
    pub max_abs_err_quanta: f64,
    pub reads_per_quantum: f64,
    pub signals_per_quantum: f64,
    /// tact's wake-ups (ticks and checks) per quantum.
    pub wakeups_per_quantum: f64,
    /// tact CPU / wall.
    pub overhead: f64,
    pub overruns: u64,
    pub max_ticks: u64,
    /// Mean CPUs the group used.
    pub group_cpus: f64,
    /// `group_cpus / min(cores, threads)`.
    pub utilization: f64,
    /// Skewed: mean and sd of the per-process RMS of the one-share processes.
    pub one_share_rms: Option<(f64, f64)>,
    /// Skewed: per-process RMS of the big process.
    pub big_rms: Option<f64>,
}

/// Run `dist` × `n` under `share` on `machine` for `cycles` recorded cycles.
pub fn run_workload(
    machine: SimConfig,
    dist: Dist,
    n: usize,
    share: ShareConfig,
    cycles: usize,
) -> ConfigRun {
    let shares = dist.shares(n);
    let total: u64 = shares.iter().sum();
    let q = share.quantum_ns;
    let (lazy, mode) = (share.lazy, share.mode);
    let mut sim = ShareSim::new(machine);
    let inst = sim.add_instance(share, 0);
    let procs: Vec<_> = shares
        .iter()
        .map(|&s| sim.add_process(inst, ProcSpec::spinner(s)))
        .collect();
    // A cycle takes S·Q of group CPU: at worst S·Q of wall time (one CPU busy); allow 4×.
    let limit = (cycles as f64 + 2.0) * (total * q) as f64 * 4.0;
    sim.run_cycles(inst, cycles, limit);
    let target = match mode {
        Mode::Strict => Target::Shares,
        Mode::Conserving => Target::Weights,
    };
    let metrics = cycle_metrics(&sim, inst, target, false);
    let acc = accuracy(&metrics, SKIP);
    let without = (mode == Mode::Conserving)
        .then(|| accuracy(&cycle_metrics(&sim, inst, target, true), SKIP));
    let stats = sim.stats(inst);
    let c = stats.counters;
    let wall = stats.wall_ns;
    let group: f64 = procs.iter().map(|&p| sim.cpu_ns(p)).sum();
    let group_cpus = group / wall;
    let (one_share_rms, big_rms) = if dist == Dist::Skewed {
        let ones: Vec<f64> = acc
            .per_entity
            .iter()
            .filter(|e| e.share == 1)
            .map(|e| e.rms_rel_err)
            .collect();
        let big = acc
            .per_entity
            .iter()
            .find(|e| e.share > 1)
            .map(|e| e.rms_rel_err);
        (Some(mean_sd(&ones)), big)
    } else {
        (None, None)
    };
    ConfigRun {
        dist,
        n,
        q_ms: q / MS,
        lazy,
        mode,
        cores: machine.cores,
        seed: machine.seed,
        max_abs_err_quanta: acc.max_abs_err_ns / q as f64,
        accuracy: acc,
        accuracy_without_surplus: without,
        reads_per_quantum: c.reads as f64 / c.quanta as f64,
        signals_per_quantum: c.signals as f64 / c.quanta as f64,
        wakeups_per_quantum: (c.steps + c.checks) as f64 / c.quanta as f64,
        overhead: stats.tact_cpu_ns / wall,
        overruns: c.overruns,
        max_ticks: stats.max_ticks,
        group_cpus,
        utilization: group_cpus / f64::from(machine.cores.min(n as u32)),
        one_share_rms,
        big_rms,
    }
}

/// Which ALPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// Reads every eligible entity every quantum.
    Basic,
    /// The paper's optimized ALPS, exactly as spec section 2 (`lazy`).
    Optimized,
    /// Optimized with tact's cycle bound (`lazy` and `cycle_bound`).
    Bounded,
    /// What `tact share` runs by default: bounded, with quantization-aware accounting (`checks`).
    Checked,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Basic,
        Variant::Optimized,
        Variant::Bounded,
        Variant::Checked,
    ];

    /// The engine configuration for this variant, strict, on `cpus` CPUs.
    pub fn config(self, q_ms: u64, cpus: u32) -> ShareConfig {
        ShareConfig {
            lazy: self != Variant::Basic,
            cycle_bound: matches!(self, Variant::Bounded | Variant::Checked),
            checks: self == Variant::Checked,
            mode: Mode::Strict,
            ..ShareConfig::new(q_ms * MS, cpus)
        }
    }
}

/// Strict ALPS of the given variant on one CPU: the paper's pinned condition.
pub fn pinned(
    machine: SimConfig,
    dist: Dist,
    n: usize,
    q_ms: u64,
    variant: Variant,
    cycles: usize,
) -> ConfigRun {
    run_workload(
        SimConfig {
            cores: 1,
            ..machine
        },
        dist,
        n,
        variant.config(q_ms, 1),
        cycles,
    )
}

/// Figures of one configuration averaged over runs with different seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Averaged {
    pub dist: Dist,
    pub n: usize,
    pub q_ms: u64,
    pub runs: usize,
    /// Mean over runs of the mean RMS.
    pub mean_rms: f64,
    /// Largest |AbsErr| over runs, in quanta.
    pub max_abs_err_quanta: f64,
    pub reads_per_quantum: f64,
    pub wakeups_per_quantum: f64,
    pub overhead: f64,
    pub overruns: u64,
    /// Skewed: mean over runs of the one-share processes' mean and sd of per-process RMS.
    pub one_share_rms: Option<(f64, f64)>,
    pub big_rms: Option<f64>,
    pub utilization: f64,
    /// Conserving mode: mean RMS against φ with the booked surplus taken out.
    pub mean_rms_without_surplus: Option<f64>,
}

/// Average `runs` (same configuration, different seeds).
pub fn average(runs: &[ConfigRun]) -> Averaged {
    let k = runs.len() as f64;
    let mean = |f: &dyn Fn(&ConfigRun) -> f64| runs.iter().map(f).sum::<f64>() / k;
    let first = &runs[0];
    Averaged {
        dist: first.dist,
        n: first.n,
        q_ms: first.q_ms,
        runs: runs.len(),
        mean_rms: mean(&|r| r.accuracy.mean_rms),
        max_abs_err_quanta: runs
            .iter()
            .map(|r| r.max_abs_err_quanta)
            .fold(0.0, f64::max),
        reads_per_quantum: mean(&|r| r.reads_per_quantum),
        wakeups_per_quantum: mean(&|r| r.wakeups_per_quantum),
        overhead: mean(&|r| r.overhead),
        overruns: runs.iter().map(|r| r.overruns).sum(),
        one_share_rms: first.one_share_rms.map(|_| {
            (
                mean(&|r| r.one_share_rms.unwrap().0),
                mean(&|r| r.one_share_rms.unwrap().1),
            )
        }),
        big_rms: first.big_rms.map(|_| mean(&|r| r.big_rms.unwrap())),
        utilization: mean(&|r| r.utilization),
        mean_rms_without_surplus: first
            .accuracy_without_surplus
            .as_ref()
            .map(|_| mean(&|r| r.accuracy_without_surplus.as_ref().unwrap().mean_rms)),
    }
}

/// Optimized ALPS (the spec's rule) on two CPUs in the given mode: the unpinned condition.
pub fn two_cores(
    machine: SimConfig,
    dist: Dist,
    n: usize,
    q_ms: u64,
    mode: Mode,
    cycles: usize,
) -> ConfigRun {
    let share = ShareConfig {
        mode,
        ..ShareConfig::new(q_ms * MS, 2)
    };
    run_workload(
        SimConfig {
            cores: 2,
            ..machine
        },
        dist,
        n,
        share,
        cycles,
    )
}

/// The paper's published figure for a configuration, where it gives one as a number.
/// (The paper gives Figures 5 and 7 as plots; only these values are stated in its text.)
pub fn paper_figure(dist: Dist, n: usize, q_ms: u64) -> &'static str {
    match (dist, n, q_ms) {
        (Dist::Linear, 5, 10) => "basic 2.05%",
        (Dist::Skewed, 20, 40) => "1-share 31.2% (sd 3.07), big 0.36%",
        (Dist::Linear, 20, 10) => "basic: 8 cycles up to 1901% (400 ms stalls)",
        (Dist::Skewed, _, _) => "above 5% (quantization)",
        _ => "under 5%",
    }
}

/// Claim 5 (I/O): A:B:C = 1:2:3 on one CPU, Q = 10 ms; B uses 80 ms of CPU then sleeps 240 ms.
#[derive(Debug, Clone, Serialize)]
pub struct IoRun {
    pub io: bool,
    pub variant: Variant,
    /// Mean per-cycle fractions of A, B, C in cycles where B never slept.
    pub ready: [f64; 3],
    /// Largest per-cycle deviation from 1/6, 2/6, 3/6 in those cycles, in points.
    pub ready_max_dev: f64,
    /// 90th percentile of the per-cycle deviation (largest of the three) in those cycles.
    pub ready_p90_dev: f64,
    pub ready_cycles: usize,
    /// Mean per-cycle fractions of A and C (and B, ~0) in cycles B slept through.
    pub asleep: [f64; 3],
    /// Largest per-cycle deviation of A and C from 25% and 75%, in points.
    pub asleep_max_dev: f64,
    /// 90th percentile of the per-cycle deviation in those cycles.
    pub asleep_p90_dev: f64,
    pub asleep_cycles: usize,
    /// Cycles in which B both ran and slept (not classified).
    pub mixed_cycles: usize,
    /// Group CPU / wall once B's pattern runs.
    pub utilization: f64,
    /// Group CPU / wall over the wall time B slept.
    pub utilization_while_b_sleeps: f64,
}

pub fn io_test(variant: Variant, io: bool, seed: u64, seconds: u64) -> IoRun {
    let from = 2_000 * MS;
    let end = from + seconds * 1_000 * MS;
    let mut sim = ShareSim::new(SimConfig::new(1, seed));
    let inst = sim.add_instance(
        ShareConfig {
            io,
            ..variant.config(10, 1)
        },
        0,
    );
    let a = sim.add_process(inst, ProcSpec::spinner(1));
    let b = sim.add_process(
        inst,
        ProcSpec {
            behavior: Behavior::RunSleep {
                run_ns: 80 * MS,
                sleep_ns: 240 * MS,
                from_ns: from,
            },
            ..ProcSpec::spinner(2)
        },
    );
    let c = sim.add_process(inst, ProcSpec::spinner(3));
    sim.run_until(from as f64);
    let cpu0: f64 = [a, b, c].iter().map(|&p| sim.cpu_ns(p)).sum();
    sim.run_until(end as f64);
    let cpu1: f64 = [a, b, c].iter().map(|&p| sim.cpu_ns(p)).sum();
    let metrics = cycle_metrics(&sim, inst, Target::Shares, false);
    let (mut ready, mut asleep) = (Vec::new(), Vec::new());
    let mut mixed = 0;
    let (mut sleep_wall, mut sleep_cpu) = (0.0, 0.0);
    for m in metrics.iter().filter(|m| m.t_ns - m.wall_ns > from as f64) {
        let total: f64 = m.consumed.iter().sum();
        let f = [
            m.consumed[0] / total,
            m.consumed[1] / total,
            m.consumed[2] / total,
        ];
        let b_asleep = m.asleep[1];
        if b_asleep <= 0.0 {
            ready.push(f);
        } else if b_asleep >= m.wall_ns - 1.0 {
            asleep.push(f);
            sleep_wall += m.wall_ns;
            sleep_cpu += total;
        } else {
            mixed += 1;
        }
    }
    let mean3 = |v: &[[f64; 3]]| {
        let n = v.len().max(1) as f64;
        [0, 1, 2].map(|k| v.iter().map(|f| f[k]).sum::<f64>() / n)
    };
    let ready_dev: Vec<f64> = ready
        .iter()
        .map(|f| {
            [f[0] - 1.0 / 6.0, f[1] - 2.0 / 6.0, f[2] - 3.0 / 6.0]
                .iter()
                .fold(0.0f64, |m, d| m.max(100.0 * d.abs()))
        })
        .collect();
    let asleep_dev: Vec<f64> = asleep
        .iter()
        .map(|f| {
            let ac = f[0] + f[2];
            (100.0 * (f[0] / ac - 0.25).abs()).max(100.0 * (f[2] / ac - 0.75).abs())
        })
        .collect();
    IoRun {
        io,
        variant,
        ready: mean3(&ready),
        ready_max_dev: ready_dev.iter().copied().fold(0.0, f64::max),
        ready_p90_dev: percentile(&ready_dev, 0.9),
        ready_cycles: ready.len(),
        asleep: mean3(&asleep),
        asleep_max_dev: asleep_dev.iter().copied().fold(0.0, f64::max),
        asleep_p90_dev: percentile(&asleep_dev, 0.9),
        asleep_cycles: asleep.len(),
        mixed_cycles: mixed,
        utilization: (cpu1 - cpu0) / (end - from) as f64,
        utilization_while_b_sleeps: if sleep_wall > 0.0 {
            sleep_cpu / sleep_wall
        } else {
            f64::NAN
        },
    }
}

/// Claim 6: three instances, groups {7,8,9}, {4,5,6}, {1,2,3} started in turn.
#[derive(Debug, Clone, Serialize)]
pub struct ConcurrentRun {
    pub q_ms: u64,
    /// Phase lengths, s.
    pub phases_s: [u64; 3],
    /// (share, phase 1..3, target %, achieved %, relative error %) per process and phase it ran.
    pub rows: Vec<(u64, usize, f64, f64, f64)>,
    /// Mean relative error over the rows, %.
    pub mean_rel_err: f64,
    /// CPU of each group in each phase as a fraction of the machine.
    pub group_cpu: Vec<[f64; 3]>,
}

pub fn concurrent(seed: u64, phases_s: [u64; 3], q_ms: u64) -> ConcurrentRun {
    let groups: [[u64; 3]; 3] = [[7, 8, 9], [4, 5, 6], [1, 2, 3]];
    let bounds: [u64; 4] = [
        0,
        phases_s[0],
        phases_s[0] + phases_s[1],
        phases_s[0] + phases_s[1] + phases_s[2],
    ];
    let s = 1_000 * MS;
    let mut sim = ShareSim::new(SimConfig::new(1, seed));
    let mut insts: Vec<(InstId, Vec<usize>)> = Vec::new();
    for (g, shares) in groups.iter().enumerate() {
        let start = bounds[g] * s;
        let inst = sim.add_instance(ShareConfig::new(q_ms * MS, 1), start);
        let procs = shares
            .iter()
            .map(|&sh| {
                sim.add_process(
                    inst,
                    ProcSpec {
                        start_ns: start,
                        ..ProcSpec::spinner(sh)
                    },
                )
            })
            .collect();
        insts.push((inst, procs));
    }
    let mut group_cpu = vec![[0.0; 3]; 3];
    for phase in 0..3 {
        let before: Vec<f64> = insts
            .iter()
            .map(|(_, ps)| ps.iter().map(|&p| sim.cpu_ns(p)).sum())
            .collect();
        sim.run_until((bounds[phase + 1] * s) as f64);
        for (g, (_, ps)) in insts.iter().enumerate() {
            let after: f64 = ps.iter().map(|&p| sim.cpu_ns(p)).sum();
            group_cpu[g][phase] =
                (after - before[g]) / ((bounds[phase + 1] - bounds[phase]) * s) as f64;
        }
    }
    // Per phase, the slope of each process's cumulative CPU at its instance's cycle ends, after
    // a 2 s settling time at the start of the phase.
    let mut rows = Vec::new();
    for (g, (inst, procs)) in insts.iter().enumerate() {
        for phase in g..3 {
            let lo = ((bounds[phase] + 2) * s) as f64;
            let hi = (bounds[phase + 1] * s) as f64;
            let slopes: Vec<f64> = procs
                .iter()
                .map(|&p| {
                    let pts: Vec<(f64, f64)> = sim
                        .snapshots(*inst)
                        .iter()
                        .filter(|sn| sn.t_ns >= lo && sn.t_ns <= hi)
                        .filter_map(|sn| {
                            sn.clocks
                                .iter()
                                .find(|c| c.0 == p as u64)
                                .map(|c| (sn.t_ns, c.1))
                        })
                        .collect();
                    slope(&pts)
                })
                .collect();
            let total: f64 = slopes.iter().sum();
            let share_total: u64 = groups[g].iter().sum();
            for (k, &sh) in groups[g].iter().enumerate() {
                let target = 100.0 * sh as f64 / share_total as f64;
                let got = 100.0 * slopes[k] / total;
                rows.push((
                    sh,
                    phase + 1,
                    target,
                    got,
                    100.0 * (got - target).abs() / target,
                ));
            }
        }
    }
    let mean_rel_err = rows.iter().map(|r| r.4).sum::<f64>() / rows.len() as f64;
    ConcurrentRun {
        q_ms,
        phases_s,
        rows,
        mean_rel_err,
        group_cpu,
    }
}

/// Claim (spec section 6, live share changes; section 2 arrival and departure): per-cycle RMS
/// against the shares in force at each cycle end, around one change.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeRun {
    pub name: String,
    /// Index (in `rms`) of the first cycle that ends after the change.
    pub first_after: usize,
    /// Per-cycle RMS, all cycles.
    pub rms: Vec<f64>,
    /// Mean RMS of the cycles before the change (the first 4 dropped).
    pub mean_before: f64,
    /// RMS of the first cycle ending after the change (it straddles the change).
    pub straddling: f64,
    /// RMS of the second cycle ending after the change.
    pub second: f64,
    /// RMS of the third.
    pub third: f64,
    /// Largest RMS from the second cycle after the change to the end of the run.
    pub max_from_second: f64,
    /// Mean RMS from the second cycle after the change to the end of the run (the workload's
    /// figure, as in claim 1).
    pub mean_from_second: f64,
}

/// What happens at the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Change {
    /// Entity `index` gets share `share`.
    SetShare { index: usize, share: u64 },
    /// A new spinner with this share arrives.
    Arrive { share: u64 },
    /// Entity `index` exits.
    Depart { index: usize },
}

/// Linear-5 (1,3,5,7,9) at Q on one CPU, optimized; the change happens `phase` (0..1) of the way
/// into the cycle after `before` cycles; the run goes on for `after` more cycles.
pub fn change(
    change: Change,
    q_ms: u64,
    before: usize,
    phase: f64,
    after: usize,
    seed: u64,
) -> ChangeRun {
    let q = q_ms * MS;
    let shares = Dist::Linear.shares(5);
    let total: u64 = shares.iter().sum();
    let mut sim = ShareSim::new(SimConfig::new(1, seed));
    let inst = sim.add_instance(ShareConfig::new(q, 1), 0);
    let mut procs: Vec<usize> = Vec::new();
    // The change time: `before` cycles (S·Q each on one busy CPU) and `phase` into the next.
    let t_change = ((before as f64 + phase) * (total * q) as f64) as u64;
    for (i, &s) in shares.iter().enumerate() {
        let exit_ns = match change {
            Change::Depart { index } if index == i => Some(t_change),
            _ => None,
        };
        procs.push(sim.add_process(
            inst,
            ProcSpec {
                exit_ns,
                ..ProcSpec::spinner(s)
            },
        ));
    }
    let name = match change {
        Change::SetShare { index, share } => {
            sim.schedule(
                t_change,
                inst,
                Event::SetShare {
                    id: procs[index] as u64,
                    share,
                },
            );
            format!("share {} → {}", shares[index], share)
        }
        Change::Arrive { share } => {
            sim.add_process(
                inst,
                ProcSpec {
                    start_ns: t_change,
                    ..ProcSpec::spinner(share)
                },
            );
            format!("arrival of a {share}-share process")
        }
        Change::Depart { index } => format!("departure of the {}-share process", shares[index]),
    };
    let end = ((before + after + 2) as f64) * (2 * total * q) as f64;
    sim.run_cycles(inst, before + after + 1, end);
    let metrics: Vec<CycleMetrics> = cycle_metrics(&sim, inst, Target::Shares, false);
    let first_after = metrics
        .iter()
        .position(|m| m.t_ns > t_change as f64)
        .unwrap_or(metrics.len());
    let rms: Vec<f64> = metrics.iter().map(|m| m.rms).collect();
    let tail = rms.get(first_after + 1..).unwrap_or(&[]);
    let head = rms.get(SKIP..first_after).unwrap_or(&[]);
    let at = |k: usize| rms.get(first_after + k).copied().unwrap_or(f64::NAN);
    ChangeRun {
        name,
        first_after,
        mean_before: head.iter().sum::<f64>() / head.len().max(1) as f64,
        straddling: at(0),
        second: at(1),
        third: at(2),
        max_from_second: tail.iter().copied().fold(0.0, f64::max),
        mean_from_second: tail.iter().sum::<f64>() / tail.len().max(1) as f64,
        rms,
    }
}

/// The `p` quantile (nearest rank) of `xs`.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}
