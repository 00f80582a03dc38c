//! Prints the TCC engine's reproductions of the paper's figures and the spec's claims beside
//! the paper's values, and writes them as JSON to the path given on the command line:
//!
//! `cargo run --release -p tact-sim --example tune_claims [-- tune-claims.json]`
//!
//! About three minutes on two cores (most of it the 20-seed runs and the X6 fronts).

use std::thread;
use std::time::{Duration, Instant};

use tact_core::stats::normal_quantile;
use tact_core::tune::decide::{n1_hat, n1_hat_printed};
use tact_core::tune::params::min_cut;
use tact_core::tune::TuneParams;
use tact_sim::tune::claims::{self, Fig5Point, Fig5Spread, Protocol, SharePoint, Shared2, R_GRID};
use tact_sim::tune::convergence::{self, ModeSummary, MODES, WORKLOADS};
use tact_sim::tune::coord::{self, Fronts};
use tact_sim::tune::driver::Turns;
use tact_sim::tune::experiments::{self as x, Check, SEEDS};
use tact_sim::tune::hint;
use tact_sim::tune::rows::{self, References, Rig, RowSummary, RIGS};
use tact_sim::tune::{Spacing, Topology};

const TOPOLOGIES: [Topology; 3] = [
    Topology::MachineRepairman,
    Topology::EventEscalation,
    Topology::EventEnrichment,
];
const NOISY_SEEDS: u64 = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1);
    let started = Instant::now();

    // ---- Figure 5 -------------------------------------------------------------------------
    let noise_free: Vec<Vec<Fig5Point>> = TOPOLOGIES
        .iter()
        .map(|&t| claims::figure5_grid(t, Protocol::noise_free()))
        .collect();
    println!("## Figure 5: bottleneck utilization, noise-free (the paper's method; 8 CPUs per station, n_init = 8)\n");
    println!("Paper: high and below saturation at every r; lowest at r = 1: 88% (escalation), 85% (enrichment). Spec: ±4 points.\n");
    println!("| r | machine-repairman | event escalation | event enrichment |");
    println!("|---:|---|---|---|");
    for (i, r) in R_GRID.iter().enumerate() {
        let cell = |p: &Fig5Point| {
            let mut counts = p.steady_counts.clone();
            counts.sort_unstable();
            counts.dedup();
            format!("{:.1}% (n = {:?})", 100.0 * p.utilization, counts)
        };
        println!(
            "| {r} | {} | {} | {} |",
            cell(&noise_free[0][i]),
            cell(&noise_free[1][i]),
            cell(&noise_free[2][i])
        );
    }

    let noisy: Vec<Vec<Fig5Spread>> = thread::scope(|s| {
        let handles: Vec<_> = TOPOLOGIES
            .iter()
            .map(|&t| {
                s.spawn(move || {
                    R_GRID
                        .iter()
                        .map(|&r| claims::figure5_seeds(t, r, 1..NOISY_SEEDS + 1))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("\n## Figure 5 with measurement noise: exponential spacing, 50 s steady states, 10 min, median [min–max] of {NOISY_SEEDS} seeds\n");
    println!("| r | machine-repairman | event escalation | event enrichment |");
    println!("|---:|---|---|---|");
    for (i, r) in R_GRID.iter().enumerate() {
        let cell = |s: &Fig5Spread| {
            format!(
                "{:.1}% [{:.1}–{:.1}]",
                100.0 * s.median,
                100.0 * s.min,
                100.0 * s.max
            )
        };
        println!(
            "| {r} | {} | {} | {} |",
            cell(&noisy[0][i]),
            cell(&noisy[1][i]),
            cell(&noisy[2][i])
        );
    }

    // ---- Equation (6) ---------------------------------------------------------------------
    println!(
        "\n## Equation (6): share of a bottleneck against y₀ constant processor-sharing tasks\n"
    );
    println!("Paper: 44–49% with (p, q) = (25%, 14%); 80–83% with q = 5%. Spec CI: [44, 50] and [80, 83.5] with removal off, y₀ ≥ 50.\n");
    println!("Noisy: exponential spacing, 30 min, time-weighted share over the steady periods.\n");
    println!("| y₀ | q | removal | noise-free: steady shares | noise-free: time-weighted | noisy: median [min–max] of {NOISY_SEEDS} seeds | equation (6) |");
    println!("|---:|---:|---|---|---:|---|---|");
    let mut shares: Vec<(SharePoint, Vec<SharePoint>)> = Vec::new();
    for (q, remove) in [(0.14, false), (0.14, true), (0.05, false), (0.05, true)] {
        for y0 in [50.0, 100.0, 200.0] {
            let clean = claims::share_run(
                y0,
                claims::share_params(q, remove, 1),
                Protocol::noise_free(),
            );
            let seeded: Vec<SharePoint> = thread::scope(|s| {
                let handles: Vec<_> = (1..=NOISY_SEEDS)
                    .collect::<Vec<_>>()
                    .chunks(10)
                    .map(|chunk| {
                        let chunk = chunk.to_vec();
                        s.spawn(move || {
                            chunk
                                .iter()
                                .map(|&seed| {
                                    claims::share_run(
                                        y0,
                                        claims::share_params(q, remove, seed),
                                        Protocol::noisy_long(seed),
                                    )
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect()
            });
            let v: Vec<f64> = seeded.iter().map(|p| p.share).collect();
            let lo = clean.shares.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = clean
                .shares
                .iter()
                .cloned()
                .fold(f64::NEG_INFINITY, f64::max);
            println!(
                "| {y0} | {:.0}% | {} | {:.1}–{:.1}% | {:.1}% | {:.1}% [{:.1}–{:.1}] | ({:.1}, {:.1}] |",
                100.0 * q,
                if remove { "on" } else { "off" },
                100.0 * lo,
                100.0 * hi,
                100.0 * clean.share,
                100.0 * claims::median(&v),
                100.0 * v.iter().cloned().fold(f64::INFINITY, f64::min),
                100.0 * v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                100.0 * clean.bound_low,
                100.0 * clean.bound_high,
            );
            shares.push((clean, seeded));
        }
    }

    // ---- Theorem 1 --------------------------------------------------------------------------
    println!("\n## Theorem 1: two instances taking turns (X starts at 30 against Y's 60)\n");
    println!("Paper: y₀ > x₁ > y₂ > … until the bottleneck is relieved of saturation.\n");
    let alternations = [
        (
            "proportional share (the theorem's model), noise-free",
            Shared2::ProportionalShare,
            Spacing::Deterministic,
        ),
        (
            "one server + 20 ms of each instance's own work, noise-free",
            Shared2::WithThink { think: 0.02 },
            Spacing::Deterministic,
        ),
        (
            "one server + 20 ms of each instance's own work, exponential spacing",
            Shared2::WithThink { think: 0.02 },
            Spacing::Exponential,
        ),
    ];
    let mut turns_json = Vec::new();
    for (name, shared, spacing) in alternations {
        let turns = claims::alternation(shared, 30, 60, 16, spacing, 1);
        let seq: Vec<String> = turns
            .iter()
            .map(|t| format!("{}{}", t.instance, t.to))
            .collect();
        println!("- {name}: Y60 {}", seq.join(" "));
        turns_json.push(serde_json::json!({ "model": name, "turns": turns }));
    }

    // ---- Experiments -----------------------------------------------------------------------
    let (x1, x2, x3, x4, x5, x6, x7, x7_vegas) = thread::scope(|s| {
        let a = s.spawn(|| {
            (
                SEEDS.iter().map(|&k| x::x1_cpu(k)).collect::<Vec<_>>(),
                SEEDS.iter().map(|&k| x::x2_memory(k)).collect::<Vec<_>>(),
                SEEDS.iter().map(|&k| x::x3_disk(k)).collect::<Vec<_>>(),
                SEEDS.iter().map(|&k| x::x4_network(k)).collect::<Vec<_>>(),
            )
        });
        let b = s.spawn(|| {
            let x5 = |competitor, hint| {
                SEEDS
                    .iter()
                    .map(|&k| x::x5_competitor(competitor, hint, k))
                    .collect::<Vec<_>>()
            };
            (
                // The spec's competitor; with the hint; an always-runnable one.
                [
                    x5(x::Competitor::Bursty, false),
                    x5(x::Competitor::Bursty, true),
                    x5(x::Competitor::Spinning, false),
                ],
                SEEDS
                    .iter()
                    .map(|&k| x::x6_two_instances(k))
                    .collect::<Vec<_>>(),
                SEEDS.iter().map(|&k| x::x7_rows(k)).collect::<Vec<_>>(),
            )
        });
        let c = s.spawn(|| SEEDS.iter().map(|&k| x::x7_vegas(k)).collect::<Vec<_>>());
        let (x1, x2, x3, x4) = a.join().unwrap();
        let (x5, x6, x7) = b.join().unwrap();
        (x1, x2, x3, x4, x5, x6, x7, c.join().unwrap())
    });
    let checks: Vec<Check> = [
        x::x1_checks(&x1),
        x::x2_checks(&x2),
        x::x3_checks(&x3),
        x::x4_checks(&x4),
        x::x5_checks(&x5[0]),
        x::x6_checks(&x6),
        x::x7_checks(&x7),
        x::x7_vegas_checks(&x7, &x7_vegas),
    ]
    .concat();
    println!("\n## Spec §5 experiments as oracle models: median [min–max] of seeds {SEEDS:?}\n");
    println!("X1, X4–X7: one single-server station per side of the 2-core VM, 2 initial workers. X2, X3: the paper's 8-CPU machines, 8 initial workers. Pareto (k = 2.5) spacing; 50 s steady states.\n");
    println!("| claim | criterion | paper | measured | verdict |");
    println!("|---|---|---|---|---|");
    for c in &checks {
        let verdict = match c.pass {
            Some(true) => "pass",
            Some(false) => "**miss**",
            None => "n/a",
        };
        println!(
            "| {} | {} | {} | {} | {} |",
            c.id, c.criterion, c.paper, c.measured, verdict
        );
    }
    println!("\nSteady counts, seed 1: X1 {:?}; X2 {} before, {:?} after; X3 {} before, {:?} after; X4 {:?}; X5 {} before, {:?} with the competitor, {:?} after; X6 solo {:?}, together {:?}",
        x1[0].counts, x2[0].count_before, x2[0].counts_after, x3[0].count_before, x3[0].counts_after,
        x4[0].counts, x5[0][0].count_before, x5[0][0].counts_during, x5[0][0].counts_after, x6[0].solo_counts, x6[0].counts);
    let x5_line = |runs: &[x::X5]| {
        let checks: Vec<String> = x::x5_checks(runs)
            .iter()
            .map(|c| {
                format!(
                    "{} {} ({})",
                    c.id,
                    c.measured,
                    if c.pass == Some(true) { "pass" } else { "miss" }
                )
            })
            .collect();
        format!(
            "{}; seed 1: {} before, {:?} with it, {:?} after",
            checks.join(", "),
            runs[0].count_before,
            runs[0].counts_during,
            runs[0].counts_after
        )
    };
    println!(
        "X5 with the bottleneck hint (util 0.9): {}",
        x5_line(&x5[1])
    );
    println!(
        "X5 against an always-runnable competitor (not the spec's): {}",
        x5_line(&x5[2])
    );
    println!(
        "X7, seed 1: mean count after the warm-up, Vegas+ {:.1}, Vegas++ {:.1} (X₁ = {:.1}/s)",
        x7_vegas[0].plus_count, x7_vegas[0].plus_plus_count, x7_vegas[0].x1
    );

    // ---- PSI as a saturation hint (spec §6, item 3) -----------------------------------------
    let (x2_psi, x1_psi) = thread::scope(|s| {
        let a = s.spawn(|| SEEDS.iter().map(|&k| x::x2_psi(k)).collect::<Vec<_>>());
        let b = SEEDS.iter().map(|&k| x::x1_psi(k)).collect::<Vec<_>>();
        (a.join().unwrap(), b)
    });
    println!("\n## PSI as a saturation hint (spec §6 item 3): X2 and X1 with PSI on and off, median [min–max] of seeds {SEEDS:?}\n");
    println!("The host reads memory pressure every second: the model's thrashing share of time (1 − 1/17 past X2's threshold, else 0) as avg10, reported as memory some and full.\n");
    println!("| claim | criterion | measured | verdict |");
    println!("|---|---|---|---|");
    for c in &x::psi_checks(&x2_psi, &x1_psi) {
        let verdict = if c.pass == Some(true) {
            "pass"
        } else {
            "**miss**"
        };
        println!(
            "| {} | {} | {} | {} |",
            c.id, c.criterion, c.measured, verdict
        );
    }
    let (off, on) = (&x2_psi[0].off, &x2_psi[0].on);
    println!(
        "\nX2, seed 1: thrashing after the switch {:.1} s off, {:.1} s on (while exploring {:.1} s, {:.1} s); PSI decided {} step(s)",
        off.thrashing_after, on.thrashing_after, off.thrashing_exploring, on.thrashing_exploring, on.psi_steps
    );

    // ---- Several instances on one bottleneck (spec §6, item 4) -----------------------------
    let grid: Vec<(usize, bool)> = [2, 3, 4]
        .into_iter()
        .flat_map(|n| [(n, false), (n, true)])
        .collect();
    let fronts: Vec<Vec<Fronts>> = thread::scope(|s| {
        let handles: Vec<_> = grid
            .iter()
            .flat_map(|&(n, hint)| coord::MODES.map(|turns| (n, hint, turns)))
            .map(|(n, hint, turns)| {
                s.spawn(move || {
                    SEEDS
                        .iter()
                        .map(|&k| coord::fronts(n, turns, hint, k))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let coord_checks: Vec<coord::Check> = fronts.iter().flat_map(|r| coord::checks(r)).collect();
    println!("\n## Several instances on one bottleneck (spec §6 item 4): X6 with 2–4 fronts, median [min–max] of seeds {SEEDS:?}\n");
    println!("Fronts start 5 min apart, tact's defaults from 2 workers, Pareto spacing, {} s after the last start. Jain index and web's utilization from when every front has finished its first cycle; escalation: the largest sum of the fronts' latest steady counts once each has run {} cycles, over the first front's solo count.\n", coord::AFTER_LAST.as_secs(), coord::CYCLES);
    println!("| fronts | mode | hint | Jain | web | escalation | shares, seed 1 | solo and last steady counts, seed 1 |");
    println!("|---:|---|---|---|---|---|---|---|");
    for runs in &fronts {
        let r = &runs[0];
        let checks = coord::checks(runs);
        let cell =
            |c: &coord::Check| format!("{}{}", c.measured, if c.pass { "" } else { " **miss**" });
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} → {:?} |",
            r.n,
            coord::mode_name(r.turns),
            if r.hint { "on" } else { "off" },
            cell(&checks[0]),
            cell(&checks[1]),
            cell(&checks[2]),
            r.shares
                .iter()
                .map(|s| format!("{:.1}%", 100.0 * s))
                .collect::<Vec<_>>()
                .join(", "),
            r.solo,
            r.counts
                .iter()
                .map(|c| c.last().copied().unwrap_or(0))
                .collect::<Vec<_>>(),
        );
    }
    let pairs: Vec<Vec<coord::Latecomer>> = [Turns::Off, Turns::Lock]
        .into_iter()
        .flat_map(|turns| [(turns, false), (turns, true)])
        .map(|(turns, hint)| {
            (1..=5)
                .map(|seed| coord::latecomer(turns, hint, seed))
                .collect()
        })
        .collect();
    println!("\nThe real rig's pair (X6 with its 5 ms delay, the second pool joining after 80 s), seeds 1–5: the latecomer's share of the pair's throughput 10–100 s and 0–300 s after the join, the service's utilization 10–100 s, and the time from the join to the latecomer's first turn (coordinated).\n");
    println!(
        "| pair | hint | latecomer, 10–100 s | latecomer, 0–300 s | service | counts at 100 s | first turn after |"
    );
    println!("|---|---|---|---|---|---|---|");
    for runs in &pairs {
        let col = |f: fn(&coord::Latecomer) -> f64| {
            let xs: Vec<f64> = runs.iter().map(f).collect();
            let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            format!(
                "{:.1}% [{:.1}–{:.1}]",
                100.0 * claims::median(&xs),
                100.0 * lo,
                100.0 * hi
            )
        };
        let waits: Vec<String> = runs
            .iter()
            .map(|r| {
                r.wait
                    .map_or("–".into(), |w| format!("{:.1} s", w.as_secs_f64()))
            })
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:?} | {} |",
            coord::mode_name(runs[0].turns),
            if runs[0].hint { "on" } else { "off" },
            col(|r| r.share),
            col(|r| r.share_long),
            col(|r| r.utilization),
            runs.iter().map(|r| r.counts).collect::<Vec<_>>(),
            waits.join(", "),
        );
    }
    // Joining at 0 s, the two start together: the second's first turn comes at once (the
    // first's cycle, just granted, ends at its next event), and the first waits for it.
    let joins: Vec<Duration> = std::iter::once(Duration::ZERO)
        .chain(coord::EARLY_JOINS)
        .collect();
    let early: Vec<Vec<coord::Latecomer>> = [false, true]
        .into_iter()
        .flat_map(|hint| joins.iter().map(move |&join| (hint, join)))
        .map(|(hint, join)| {
            (1..=5)
                .map(|seed| coord::latecomer_at(Turns::Lock, hint, seed, join))
                .collect()
        })
        .collect();
    println!("\nThe same pair with turn-taking, the second pool starting with the first (0 s) or joining while the first still explores its first cycles (20–50 s): the time from the join to the latecomer's first turn, its share 10–100 s and 0–300 s after the join, and the service's utilization 10–100 s, median [min–max] of seeds 1–5.\n");
    println!(
        "| join | hint | first turn after | latecomer, 10–100 s | latecomer, 0–300 s | service |"
    );
    println!("|---:|---|---|---|---|---|");
    for runs in &early {
        let spread = |xs: Vec<f64>, scale: f64, unit: &str| {
            let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            format!(
                "{:.1}{unit} [{:.1}–{:.1}]",
                scale * claims::median(&xs),
                scale * lo,
                scale * hi
            )
        };
        let waits = runs
            .iter()
            .map(|r| r.wait.map_or(f64::INFINITY, |w| w.as_secs_f64()))
            .collect();
        println!(
            "| {} s | {} | {} | {} | {} | {} |",
            runs[0].join.as_secs(),
            if runs[0].hint { "on" } else { "off" },
            spread(waits, 1.0, " s"),
            spread(runs.iter().map(|r| r.share).collect(), 100.0, "%"),
            spread(runs.iter().map(|r| r.share_long).collect(), 100.0, "%"),
            spread(runs.iter().map(|r| r.utilization).collect(), 100.0, "%"),
        );
    }

    // ---- Faster convergence (spec §6, item 1) ----------------------------------------------
    let seeds: Vec<u64> = (1..=NOISY_SEEDS).collect();
    let convergence: Vec<Vec<ModeSummary>> = thread::scope(|s| {
        let handles: Vec<_> = WORKLOADS
            .iter()
            .map(|&w| {
                let seeds = &seeds;
                s.spawn(move || convergence::compare(w, &MODES, seeds))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("\n## Faster convergence against paper mode: Pareto spacing, 50 s steady states, 40 min, median of {NOISY_SEEDS} seeds\n");
    println!("Targets: time to first steady ≤ 50% of paper mode, utilization ±2 points, batches per decision ≤ 30%, wrong decisions ≤ 2α = 10%.\n");
    println!("| workload | mode | first steady | count | utilization | batches/decision | wrong (truth outside [L, H]) | forced | vs paper: time, utilization, batches |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    for m in convergence.iter().flatten() {
        println!(
            "| {:?} | {} | {:.0} s | {} | {:.1}% | {:.0} | {}/{} ({:.1}%) | {:.0}% | {:.0}%, {:+.1} pt, {:.0}% |",
            m.workload,
            m.mode.name,
            m.first_steady_s,
            m.first_count,
            100.0 * m.utilization,
            m.batches_per_decision,
            m.wrong,
            m.judged,
            100.0 * m.wrong_rate,
            100.0 * m.forced_share,
            100.0 * m.time_ratio,
            100.0 * m.utilization_diff,
            100.0 * m.batches_ratio,
        );
    }

    // ---- Issue 6: where each Table 1 row settles on the X1 rig's curve ----------------------
    let rigs: Vec<(Rig, References, Vec<RowSummary>)> = thread::scope(|s| {
        let handles: Vec<_> = RIGS
            .iter()
            .flat_map(|&rig| [false, true].map(|tact| (rig, tact)))
            .map(|(rig, tact)| s.spawn(move || (rig, rows::table(rig, tact, &SEEDS))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (rig, table) = h.join().unwrap();
                (rig, rows::references(&rig.model()), table)
            })
            .collect()
    });
    println!("\n## Table 1 rows on the X1 rig's curve: Pareto spacing, 50 s steady states, 12 min from 2 workers, median of seeds {SEEDS:?}\n");
    println!("Fair-share equivalent of a count n: 1 − the curve's elasticity over n − 1 → n, the share of a bottleneck that stopping there takes from Theorem 1's competitor.\n");
    for (rig, refs, _) in rigs.iter().step_by(2) {
        let m = rig.model();
        let points: Vec<String> = (5..=11)
            .map(|n| {
                format!(
                    "{n}: {:.0}/s {:.1}% ({:.0}%)",
                    m.network().throughput(n),
                    100.0 * m.utilization(n),
                    100.0 * rows::fair_share_equivalent(&m, n)
                )
            })
            .collect();
        println!("- {rig:?}: X*_95 {:.0}/s at {}, X*_max {:.0}/s, fair limit {} workers; n: throughput, utilization (fair-share equivalent): {}", refs.best95, refs.best95_count, refs.max, refs.fair_limit, points.join(", "));
    }
    println!("\n| rig | mode | (p, q, w) | count | utilization | vs X*_95 | vs X*_max | fair-share equivalent | G1 | G2 |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---|---|");
    let yes = |b: bool| if b { "pass" } else { "**miss**" };
    for (rig, _, table) in &rigs {
        for r in table {
            println!(
                "| {rig:?} | {} | ({}, {}, {}) | {} | {:.1}% | {:.1}% | {:.1}% | {:.0}% | {} | {} |",
                if r.tact { "tact" } else { "paper" },
                r.row.0,
                r.row.1,
                r.row.2,
                r.count,
                100.0 * r.utilization,
                100.0 * r.vs_best95,
                100.0 * r.vs_max,
                100.0 * r.fair_share,
                yes(r.g1()),
                yes(r.g2()),
            );
        }
    }

    // ---- The bottleneck hint -----------------------------------------------------------------
    let (vm_plain, vm_hint) = (hint::vm(false, &SEEDS), hint::vm(true, &SEEDS));
    println!("\n## The bottleneck hint (util = 0.9) on the X1 VM model: tact's defaults, Pareto spacing, 50 s steady states, 12 min from 2 workers, median of seeds {SEEDS:?}\n");
    println!(
        "| hint | steady counts (seed 1) | count | utilization | vs X*_95 | vs X*_max | G1 | G2 |"
    );
    println!("|---|---|---:|---:|---:|---:|---|---|");
    for r in [&vm_plain, &vm_hint] {
        println!(
            "| {} | {:?} | {} | {:.1}% | {:.1}% | {:.1}% | {} | {} |",
            if std::ptr::eq(r, &vm_hint) {
                "on"
            } else {
                "off"
            },
            r.runs[0].counts,
            r.count,
            100.0 * r.utilization,
            100.0 * r.vs_best95,
            100.0 * r.vs_max,
            yes(r.g1()),
            yes(r.g2()),
        );
    }
    let rooms: Vec<_> = SEEDS.iter().map(|&k| hint::vm_room(k)).collect();
    println!("\nThe room rule (room = 0.02): the same runs with the reports beginning at the first steady state, which throughput alone left below util − room; from the climb on:\n");
    println!("| seed | first steady count | its utilization | climbs (s, from) | held before | steady counts | count sd | utilization | cycles |");
    println!("|---:|---:|---:|---|---:|---|---:|---:|---:|");
    for r in &rooms {
        println!(
            "| {} | {} | {:.1}% | {:?} | {:.1} s | {:?} | {:.2} | {:.1}% | {} |",
            r.seed,
            r.before,
            100.0 * r.before_util,
            r.climbs
                .iter()
                .map(|(at, n)| (at.as_secs_f64().round(), *n))
                .collect::<Vec<_>>(),
            r.held.as_secs_f64(),
            r.counts,
            r.count_sd,
            100.0 * r.utilization,
            r.cycles,
        );
    }
    let friendly: Vec<_> = [50.0, 100.0, 200.0]
        .iter()
        .flat_map(|&y0| {
            [Protocol::noise_free(), Protocol::noisy_long(1)]
                .map(|how| (y0, how.spacing, hint::theorem1(y0, how)))
        })
        .collect();
    println!("\nAgainst Theorem 1's competitor (defaults, removal off; equation (6): (44.0, 49.5]%), time-weighted share over the steady periods:\n");
    println!("| y₀ | spacing | share without the hint | share with it | steady counts identical |");
    println!("|---:|---|---:|---:|---|");
    for (y0, spacing, f) in &friendly {
        println!(
            "| {y0} | {} | {:.1}% | {:.1}% | {} |",
            spacing_name(*spacing),
            100.0 * f.without.share,
            100.0 * f.with.share,
            f.with.steady_counts == f.without.steady_counts,
        );
    }
    let vm_comp: Vec<_> = SEEDS
        .iter()
        .flat_map(|&k| [hint::vm_competitor(false, k), hint::vm_competitor(true, k)])
        .collect();
    println!(
        "\nThe VM with {} always-runnable competitor tasks on web's core, 20 min:\n",
        hint::VM_COMPETITOR_TASKS
    );
    for r in &vm_comp {
        println!(
            "- seed {}, hint {}: share of web {:.1}%, web {:.1}%, steady counts {:?}",
            r.seed,
            if r.hint { "on" } else { "off" },
            100.0 * r.share,
            100.0 * r.web,
            r.counts
        );
    }

    // ---- Errata -----------------------------------------------------------------------------
    let z = normal_quantile(0.95).unwrap();
    let e1 = n1_hat(1.0, 1.0, 0.14, 0.1, z);
    let e1_printed = n1_hat_printed(1.0, 0.14, 0.1, z);
    println!("\n## Errata\n");
    println!("- E1: n̂₁ at q = 14%, β = 0.1, α = 0.05, σ/μ = 1: {e1:.1} with (23) (printed (24): {e1_printed:.1}).");
    println!(
        "- E2: Table 1 row p = 20%, q = 11.5% needs w ≥ {:.1}% (printed 33%): {}",
        100.0 * min_cut(0.2, 0.115),
        TuneParams::default()
            .with_row((20.0, 11.5, 33.0))
            .validate()
            .unwrap_err()
    );

    println!("\n(total {:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = out {
        let json = serde_json::json!({
            "figure5": {
                "noise_free": noise_free,
                "noisy": noisy,
            },
            "shares": shares.iter().map(|(clean, seeded)| serde_json::json!({
                "noise_free": clean,
                "noisy": seeded,
            })).collect::<Vec<_>>(),
            "alternation": turns_json,
            "experiments": {
                "checks": checks,
                "x1": x1, "x2": x2, "x3": x3, "x4": x4, "x5": x5[0], "x5_hint": x5[1], "x5_spinning": x5[2], "x6": x6, "x7": x7,
                "x7_vegas": x7_vegas,
            },
            "errata": { "e1_n1_hat": e1, "e1_printed": e1_printed },
            "convergence": convergence,
            "coordination": { "runs": fronts, "checks": coord_checks, "rig_pairs": pairs, "early_joins": early },
            "hint": {
                "vm": [&vm_plain, &vm_hint],
                "vm_room": rooms,
                "theorem1": friendly.iter().map(|(y0, _, f)| serde_json::json!({
                    "competitor": y0, "without": f.without, "with": f.with,
                })).collect::<Vec<_>>(),
                "vm_competitor": vm_comp,
            },
            "rows": rigs.iter().map(|(rig, refs, table)| serde_json::json!({
                "rig": rig, "references": refs, "rows": table,
            })).collect::<Vec<_>>(),
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
        println!("wrote {path}");
    }
    Ok(())
}

fn spacing_name(s: Spacing) -> &'static str {
    match s {
        Spacing::Deterministic => "noise-free",
        Spacing::Exponential => "exponential, 30 min",
        Spacing::Pareto { .. } => "Pareto",
    }
}
