//! Several TCC instances on one bottleneck (spec §6 item 4): X6's fronts, 2 to 4 of them, with
//! independent controllers, turn-taking (one lock) and loose synchronization (shared epochs),
//! without and with the bottleneck hint, against the spec's targets.
//!
//! The model is X6's (spec §5): every front on CPU 0 (1 ms a task), one web on CPU 1 (1.5 ms a
//! task), no delay; web is the bottleneck, 666.7 tasks/s. The fronts' tasks are alike, so
//! [`Alike`] solves it exactly for any number of them. Front k starts 5 minutes after front
//! k − 1, as the spec starts X6's second; each runs tact's defaults (slow start, fast mode,
//! steady states of 10 × the cycle's length) from 2 workers, with its own jitter seed.
//! Coordinated, the driver tells every front of the others' completions, so a front that
//! explores judges web's throughput rather than its own share of it.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tact_core::tune::TuneParams;

use super::claims::median;
use super::driver::{run, PoolSpec, Run, Scenario, Turns};
use super::experiments::PARETO;
use super::model::Alike;
use super::mva::Station;

/// Web's capacity on the X6 model, tasks per second.
pub const CAPACITY: f64 = 1.0 / 0.0015;
/// Between the starts of two fronts.
pub const STAGGER: Duration = Duration::from_secs(300);
/// How long the run goes on after the last front started.
pub const AFTER_LAST: Duration = Duration::from_secs(7200);
/// Two epochs for loose synchronization: tact's shortest steady state (a cycle that comes due
/// waits at most that long, but fronts due a few tens of seconds apart start at different
/// epochs), and its longest (every cycle starts at the same epoch as the others').
pub const EPOCH_SHORT: Duration = Duration::from_secs(60);
pub const EPOCH_LONG: Duration = Duration::from_secs(900);
/// Cycles every front has run before escalation is judged (spec: "after 5 cycles").
pub const CYCLES: usize = 5;

/// The ways of running several fronts.
pub const MODES: [Turns; 4] = [
    Turns::Off,
    Turns::Lock,
    Turns::Epoch {
        period: EPOCH_SHORT,
    },
    Turns::Epoch { period: EPOCH_LONG },
];

pub fn mode_name(turns: Turns) -> String {
    match turns {
        Turns::Off => "independent".into(),
        Turns::Lock => "turn-taking".into(),
        Turns::Epoch { period } => format!("epochs-{}s", period.as_secs()),
    }
}

/// One run of `n` fronts.
#[derive(Debug, Clone, Serialize)]
pub struct Fronts {
    pub n: usize,
    pub turns: Turns,
    pub hint: bool,
    pub seed: u64,
    /// The first front's last steady count before the second started.
    pub solo: usize,
    /// From when every front has entered Steady once (its first cycle done) to the end: each
    /// front's share of the fronts' total throughput, Jain's index over their throughputs, and
    /// web's mean utilization (all states: with several fronts someone is usually exploring).
    pub together: Duration,
    pub shares: Vec<f64>,
    pub jain: f64,
    pub utilization: f64,
    /// When every front had entered Steady [`CYCLES`] times (None: not within the run).
    pub cycles_done: Option<Duration>,
    /// From then on, the largest sum of the fronts' latest steady counts, over `solo`.
    pub escalation: Option<f64>,
    /// Every front's steady counts.
    pub counts: Vec<Vec<usize>>,
}

/// X6's stations: CPU 0 runs every front, CPU 1 runs web.
pub fn stations() -> [Station; 2] {
    [
        Station::Queue {
            servers: 1,
            demand: 0.001,
        },
        Station::Queue {
            servers: 1,
            demand: 0.0015,
        },
    ]
}

/// tact's defaults from 2 workers (the VM's online CPUs).
pub fn params(seed: u64) -> TuneParams {
    TuneParams {
        n_init: 2,
        n_max: 256,
        seed,
        ..TuneParams::default()
    }
}

pub fn scenario(n: usize, turns: Turns, hint: bool, seed: u64) -> Scenario {
    let model = Alike::new(format!("X6 × {n}"), &stations(), n, 256 * n);
    let end = STAGGER * (n as u32 - 1) + AFTER_LAST;
    let mut sc = Scenario {
        spacing: PARETO,
        seed,
        turns,
        ..Scenario::new(Arc::new(model), params(seed), end)
    };
    sc.pools = (0..n)
        .map(|k| PoolSpec {
            start: STAGGER * k as u32,
            hint,
            // Each front its own jitter stream, as separate processes have.
            ..PoolSpec::new(params(seed ^ (0x5EED * k as u64)))
        })
        .collect();
    sc
}

pub fn fronts(n: usize, turns: Turns, hint: bool, seed: u64) -> Fronts {
    let out = run(&scenario(n, turns, hint, seed));
    measure(&out, n, turns, hint, seed)
}

/// Jain's fairness index: (Σx)² / (n Σx²), 1 when all are equal, 1/n when one takes all.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    sum * sum / (xs.len() as f64 * squares)
}

fn measure(out: &Run, n: usize, turns: Turns, hint: bool, seed: u64) -> Fronts {
    let end = out.duration;
    let entries: Vec<Vec<(Duration, usize)>> =
        out.pools.iter().map(|p| p.steady_counts()).collect();
    let solo = entries[0]
        .iter()
        .rev()
        .find(|e| e.0 < STAGGER)
        .map_or(0, |e| e.1);
    let first = |k: usize| entries[k].first().map_or(end, |e| e.0);
    let together = (0..n).map(first).max().unwrap_or(end);
    let rates: Vec<f64> = (0..n)
        .map(|k| out.throughput(k, together, end).unwrap_or(0.0))
        .collect();
    let total: f64 = rates.iter().sum();
    let nth = |k: usize| entries[k].get(CYCLES - 1).map(|e| e.0);
    let cycles_done = (0..n)
        .map(nth)
        .collect::<Option<Vec<_>>>()
        .map(|t| t.into_iter().max().expect("at least one front"));
    Fronts {
        n,
        turns,
        hint,
        seed,
        solo,
        together,
        shares: rates.iter().map(|r| r / total).collect(),
        jain: jain(&rates),
        utilization: out
            .mean_over(together, end, |_| true, |s| s.op.bottleneck)
            .unwrap_or(f64::NAN),
        cycles_done,
        escalation: cycles_done.map(|from| peak_sum(&entries, from) as f64 / solo as f64),
        counts: entries
            .iter()
            .map(|e| e.iter().map(|c| c.1).collect())
            .collect(),
    }
}

/// The largest sum of every front's latest steady count at the steady entries from `from` on.
fn peak_sum(entries: &[Vec<(Duration, usize)>], from: Duration) -> usize {
    let mut all: Vec<(Duration, usize, usize)> = entries
        .iter()
        .enumerate()
        .flat_map(|(k, e)| e.iter().map(move |&(t, c)| (t, k, c)))
        .collect();
    all.sort();
    let mut latest = vec![0; entries.len()];
    let mut peak = 0;
    for (t, k, c) in all {
        latest[k] = c;
        if t >= from {
            peak = peak.max(latest.iter().sum());
        }
    }
    peak
}

/// One target of spec §6 item 4 for one mode, number of fronts and hint setting, judged on the
/// median of the seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub id: String,
    pub criterion: &'static str,
    /// Median [min–max] over the seeds.
    pub measured: String,
    pub pass: bool,
}

fn spread(xs: &[f64], scale: f64, unit: &str) -> String {
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let m = median(xs);
    format!(
        "{:.2}{unit} [{:.2}–{:.2}]",
        scale * m,
        scale * lo,
        scale * hi
    )
}

/// The targets for the runs of one mode, n and hint setting (one per seed): Jain's index ≥ 0.95
/// for 2 fronts and ≥ 0.9 for more, web at 85–95%, and no escalation (a run that never
/// completed its cycles counts as infinite).
pub fn checks(runs: &[Fronts]) -> Vec<Check> {
    let r = &runs[0];
    let id = |what: &str| {
        format!(
            "X6×{}.{}{}.{what}",
            r.n,
            mode_name(r.turns),
            if r.hint { ".hint" } else { "" }
        )
    };
    let jains: Vec<f64> = runs.iter().map(|r| r.jain).collect();
    let utils: Vec<f64> = runs.iter().map(|r| r.utilization).collect();
    let esc: Vec<f64> = runs
        .iter()
        .map(|r| r.escalation.unwrap_or(f64::INFINITY))
        .collect();
    let floor = if r.n == 2 { 0.95 } else { 0.9 };
    vec![
        Check {
            id: id("jain"),
            criterion: if r.n == 2 {
                "Jain index ≥ 0.95"
            } else {
                "Jain index ≥ 0.9"
            },
            measured: spread(&jains, 1.0, ""),
            pass: median(&jains) >= floor,
        },
        Check {
            id: id("util"),
            criterion: "aggregate utilization 85–95%",
            measured: spread(&utils, 100.0, "%"),
            pass: (0.85..=0.95).contains(&median(&utils)),
        },
        Check {
            id: id("escalation"),
            criterion: "after 5 cycles, the sum of counts ≤ 1.5× the solo count",
            measured: spread(&esc, 1.0, "×"),
            pass: median(&esc) <= 1.5,
        },
    ]
}

/// The real rig's pair (`bench/tune/run.py --scenario pools`): X6 with the rig's 5 ms delay
/// (front 1 ms, service 1.5 ms), so pools hold 5–8 workers rather than X6's 1–3; the second
/// pool joins after the first ran alone for [`RIG_JOIN`] (the rig's 20 + 60 s).
pub const RIG_JOIN: Duration = Duration::from_secs(80);
/// The rig's window together (100 s, the first 10 s of it a warm-up), and a longer one.
pub const RIG_WARMUP: Duration = Duration::from_secs(10);
pub const RIG_TOGETHER: Duration = Duration::from_secs(100);
pub const RIG_LONG: Duration = Duration::from_secs(300);

/// The rig's stations: fronts on CPU 0, the service on CPU 1, and the 5 ms delay.
pub fn rig_stations() -> [Station; 3] {
    let [front, web] = stations();
    [front, web, Station::Delay { demand: 0.005 }]
}

/// Earlier joins than the rig's, while the first pool still explores its first cycles (the
/// rig's second pool came during a cycle, and waited 63 s of its window for its first turn).
pub const EARLY_JOINS: [Duration; 4] = [
    Duration::from_secs(20),
    Duration::from_secs(30),
    Duration::from_secs(40),
    Duration::from_secs(50),
];

/// The rig's pair, the second pool joining at `join`, run for [`RIG_LONG`] after it.
pub fn rig_scenario(turns: Turns, hint: bool, seed: u64, join: Duration) -> Scenario {
    let model = Alike::new("X6 rig pair", &rig_stations(), 2, 512);
    let mut sc = Scenario {
        spacing: PARETO,
        seed,
        turns,
        ..Scenario::new(Arc::new(model), params(seed), join + RIG_LONG)
    };
    sc.pools = (0..2)
        .map(|k| PoolSpec {
            start: join * k as u32,
            hint,
            ..PoolSpec::new(params(seed ^ (0x5EED * k as u64)))
        })
        .collect();
    sc
}

/// The latecomer's share of the pair's throughput on the rig-like pair.
#[derive(Debug, Clone, Serialize)]
pub struct Latecomer {
    pub turns: Turns,
    pub hint: bool,
    pub seed: u64,
    /// When the second pool started.
    pub join: Duration,
    /// Over the rig's window (from [`RIG_WARMUP`] to [`RIG_TOGETHER`] after the join) and over
    /// the first [`RIG_LONG`] together.
    pub share: f64,
    pub share_long: f64,
    /// The service's mean utilization over the rig's window.
    pub utilization: f64,
    /// Each pool's count at the end of the rig's window.
    pub counts: [usize; 2],
    /// From the join to the latecomer's first grant, the start of its first cycle (None:
    /// independent, or no grant within the run).
    pub wait: Option<Duration>,
}

/// The rig's pair as the rig ran it: the second pool joins at [`RIG_JOIN`].
pub fn latecomer(turns: Turns, hint: bool, seed: u64) -> Latecomer {
    latecomer_at(turns, hint, seed, RIG_JOIN)
}

/// The rig's pair, the second pool joining at `join`.
pub fn latecomer_at(turns: Turns, hint: bool, seed: u64, join: Duration) -> Latecomer {
    latecomer_of(&rig_scenario(turns, hint, seed, join), hint, join)
}

/// The rig's pair taking turns, joined at [`RIG_JOIN`], with the others' completions passed on
/// as the rig's host passes them: those since a pool's last event, at once
/// ([`Scenario::peers_batched`]).
pub fn latecomer_read_in_batches(hint: bool, seed: u64) -> Latecomer {
    let mut sc = rig_scenario(Turns::Lock, hint, seed, RIG_JOIN);
    sc.peers_batched = true;
    latecomer_of(&sc, hint, RIG_JOIN)
}

fn latecomer_of(sc: &Scenario, hint: bool, join: Duration) -> Latecomer {
    let (turns, seed) = (sc.turns, sc.seed);
    let out = run(sc);
    let share = |from: Duration, to: Duration| {
        let r: Vec<f64> = (0..2)
            .map(|k| out.throughput(k, from, to).unwrap_or(0.0))
            .collect();
        r[1] / (r[0] + r[1])
    };
    let (from, to) = (join + RIG_WARMUP, join + RIG_TOGETHER);
    let count = |k: usize| {
        let t = &out.pools[k].targets;
        t.iter().rev().find(|e| e.0 <= to).map_or(0, |e| e.1)
    };
    Latecomer {
        turns,
        hint,
        seed,
        join,
        share: share(from, to),
        share_long: share(join, join + RIG_LONG),
        utilization: out
            .mean_over(from, to, |_| true, |s| s.op.bottleneck)
            .unwrap_or(f64::NAN),
        counts: [count(0), count(1)],
        wait: out.pools[1].grants.first().map(|&g| g - join),
    }
}
