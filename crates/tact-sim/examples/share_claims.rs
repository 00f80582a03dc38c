//! Prints the share engine's reproductions of the ALPS paper's claims (spec proportional-share.md
//! section 5) on the simulated kernel as tables, and writes them as JSON to the path given:
//!
//! `cargo run --release -p tact-sim --example share_claims [-- OUT.json]`
//!
//! The main machine is the one the tests use ([`SimConfig::new`]): exact processor sharing, tact
//! waking up to 100 µs late, the paper's per-operation costs. The pinned table is repeated on a
//! kernel with 3 ms time slices ([`KernelModel::slices`]) to show how much the figures depend on
//! the kernel.

use tact_core::share::Mode;
use tact_sim::share::claims::{self, Averaged, Change, Dist, Variant};
use tact_sim::share::{KernelModel, SimConfig};

const SEEDS: [u64; 3] = [1, 2, 3];
const CYCLES: usize = 200;
const NS: [usize; 3] = [5, 10, 20];
const QS: [u64; 3] = [10, 20, 40];

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1);
    let fluid = SimConfig::new(1, 0);
    let slices = SimConfig {
        kernel: KernelModel::slices(),
        ..fluid
    };

    // Claims 1–3: the 27 configurations, pinned.
    println!(
        "## 27 configurations on one CPU (fluid kernel; {CYCLES} cycles, first {} dropped; mean of {} runs)\n",
        claims::SKIP,
        SEEDS.len()
    );
    println!("Mean RMS relative error; `bounded` is optimized ALPS with tact's cycle bound (`cycle_bound`), `tact` is bounded with quantization-aware accounting (`checks`), `tact share`'s default. Reads, wake-ups and overhead are per quantum; max |AbsErr| over all processes and kept cycles, in quanta.\n");
    println!("| config | basic | optimized | bounded | tact | opt − basic | reads basic | reads opt | basic ÷ opt | wake-ups tact | overhead basic | overhead opt | overhead tact | max abs err basic / opt / bounded / tact (Q) | paper |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut pinned_json = Vec::new();
    let mut skewed_rows = Vec::new();
    for dist in Dist::ALL {
        for n in NS {
            for q in QS {
                let avg: Vec<Averaged> = Variant::ALL
                    .iter()
                    .map(|&v| {
                        let runs: Vec<_> = SEEDS
                            .iter()
                            .map(|&seed| {
                                claims::pinned(SimConfig { seed, ..fluid }, dist, n, q, v, CYCLES)
                            })
                            .collect();
                        claims::average(&runs)
                    })
                    .collect();
                let (b, o, k, t) = (&avg[0], &avg[1], &avg[2], &avg[3]);
                println!(
                    "| {}-{n} Q={q} | {} | {} | {} | {} | {:+.2} | {:.2} | {:.2} | {:.1}× | {:.2} | {} | {} | {} | {:.2} / {:.2} / {:.2} / {:.2} | {} |",
                    dist.name(),
                    pct(b.mean_rms),
                    pct(o.mean_rms),
                    pct(k.mean_rms),
                    pct(t.mean_rms),
                    100.0 * (o.mean_rms - b.mean_rms),
                    b.reads_per_quantum,
                    o.reads_per_quantum,
                    b.reads_per_quantum / o.reads_per_quantum,
                    t.wakeups_per_quantum,
                    pct(b.overhead),
                    pct(o.overhead),
                    pct(t.overhead),
                    b.max_abs_err_quanta,
                    o.max_abs_err_quanta,
                    k.max_abs_err_quanta,
                    t.max_abs_err_quanta,
                    claims::paper_figure(dist, n, q),
                );
                if dist == Dist::Skewed {
                    skewed_rows.push((n, q, b.clone(), o.clone()));
                }
                pinned_json.push(serde_json::json!({
                    "dist": dist, "n": n, "q_ms": q,
                    "basic": b, "optimized": o, "bounded": k, "tact": t,
                    "paper": claims::paper_figure(dist, n, q),
                }));
            }
        }
    }

    println!("\n## Skewed: per-process RMS (paper, skewed-20 at 40 ms basic: one-share processes 31.2%, sd 3.07; big process 0.36%)\n");
    println!("| config | one-share mean basic | sd basic | big basic | one-share mean opt | sd opt | big opt |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (n, q, b, o) in &skewed_rows {
        let (bm, bs) = b.one_share_rms.unwrap();
        let (om, os) = o.one_share_rms.unwrap();
        println!(
            "| skewed-{n} Q={q} | {} | {:.2} pts | {} | {} | {:.2} pts | {} |",
            pct(bm),
            100.0 * bs,
            pct(b.big_rms.unwrap()),
            pct(om),
            100.0 * os,
            pct(o.big_rms.unwrap()),
        );
    }

    println!("\n## The same on a time-slice kernel (3 ms slices by least virtual runtime; one run of {CYCLES} cycles)\n");
    println!("| config | basic | optimized | bounded | tact | max abs err basic / opt / tact (Q) | one-share mean (sd) opt | big opt | one-share mean (sd) tact | big tact | wake-ups tact |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut slices_json = Vec::new();
    for dist in Dist::ALL {
        for n in NS {
            for q in QS {
                let runs: Vec<_> = Variant::ALL
                    .iter()
                    .map(|&v| {
                        claims::pinned(SimConfig { seed: 1, ..slices }, dist, n, q, v, CYCLES)
                    })
                    .collect();
                let one_share = |r: &claims::ConfigRun| {
                    r.one_share_rms.map_or("–".into(), |(m, s)| {
                        format!("{} ({:.2} pts)", pct(m), 100.0 * s)
                    })
                };
                let big = |r: &claims::ConfigRun| r.big_rms.map_or("–".into(), pct);
                println!(
                    "| {}-{n} Q={q} | {} | {} | {} | {} | {:.2} / {:.2} / {:.2} | {} | {} | {} | {} | {:.2} |",
                    dist.name(),
                    pct(runs[0].accuracy.mean_rms),
                    pct(runs[1].accuracy.mean_rms),
                    pct(runs[2].accuracy.mean_rms),
                    pct(runs[3].accuracy.mean_rms),
                    runs[0].max_abs_err_quanta,
                    runs[1].max_abs_err_quanta,
                    runs[3].max_abs_err_quanta,
                    one_share(&runs[1]),
                    big(&runs[1]),
                    one_share(&runs[3]),
                    big(&runs[3]),
                    runs[3].wakeups_per_quantum,
                );
                slices_json.push(serde_json::json!({
                    "dist": dist, "n": n, "q_ms": q,
                    "basic": claims::average(&runs[0..1]),
                    "optimized": claims::average(&runs[1..2]),
                    "bounded": claims::average(&runs[2..3]),
                    "tact": claims::average(&runs[3..4]),
                }));
            }
        }
    }

    // Claim 5: I/O.
    println!("\n## I/O (A:B:C = 1:2:3, Q = 10 ms, B: 80 ms CPU then 240 ms asleep; 60 s)\n");
    println!("| run | B ready: A / B / C | p90 / max per-cycle dev | B asleep: A / C of A+C | p90 / max per-cycle dev | cycles ready / asleep / mixed | group CPU | group CPU while B sleeps |");
    println!("|---|---|---:|---|---:|---:|---:|---:|");
    let io_runs = [
        claims::io_test(Variant::Optimized, true, 1, 60),
        claims::io_test(Variant::Basic, true, 1, 60),
        claims::io_test(Variant::Bounded, true, 1, 60),
        claims::io_test(Variant::Checked, true, 1, 60),
        claims::io_test(Variant::Optimized, false, 1, 60),
    ];
    for r in &io_runs {
        let ac = r.asleep[0] + r.asleep[2];
        println!(
            "| io {} {} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} pts | {} | {:.1} / {:.1} pts | {} / {} / {} | {:.1}% | {} |",
            if r.io { "on" } else { "off" },
            format!("{:?}", r.variant).to_lowercase(),
            100.0 * r.ready[0],
            100.0 * r.ready[1],
            100.0 * r.ready[2],
            r.ready_p90_dev,
            r.ready_max_dev,
            if r.asleep_cycles > 0 {
                format!("{:.1} / {:.1}", 100.0 * r.asleep[0] / ac, 100.0 * r.asleep[2] / ac)
            } else {
                "no cycle ends while B sleeps".into()
            },
            r.asleep_p90_dev,
            r.asleep_max_dev,
            r.ready_cycles,
            r.asleep_cycles,
            r.mixed_cycles,
            100.0 * r.utilization,
            if r.utilization_while_b_sleeps.is_finite() {
                pct(r.utilization_while_b_sleeps)
            } else {
                "–".into()
            },
        );
    }

    // Claim 6: three instances.
    let conc = claims::concurrent(1, [60, 60, 180], 20);
    println!("\n## Three instances, groups {{7,8,9}}, {{4,5,6}}, {{1,2,3}} started in turn (phases 60/60/180 s, Q = 20 ms; paper average 0.93%)\n");
    println!("| share | phase | target | achieved | rel. error |");
    println!("|---:|---:|---:|---:|---:|");
    for (sh, phase, target, got, err) in &conc.rows {
        println!("| {sh} | {phase} | {target:.2}% | {got:.3}% | {err:.3}% |");
    }
    println!(
        "\naverage within-group relative error {:.3}%",
        conc.mean_rel_err
    );
    for (g, cpu) in conc.group_cpu.iter().enumerate() {
        println!(
            "group {} CPU per phase: {:.1}% / {:.1}% / {:.1}%",
            ["{7,8,9}", "{4,5,6}", "{1,2,3}"][g],
            100.0 * cpu[0],
            100.0 * cpu[1],
            100.0 * cpu[2]
        );
    }

    // Spec section 4 and 6: two cores, strict and conserving.
    println!(
        "\n## Two cores, unpinned (optimized; {CYCLES} cycles; mean of {} runs)\n",
        SEEDS.len()
    );
    println!("Utilization is group CPU ÷ min(C, runnable threads). Conserving RMS is against φ, with and without the idle-fill surplus.\n");
    println!("| config | strict util. | strict RMS | conserving util. | RMS vs φ | RMS vs φ without surplus |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut multi_json = Vec::new();
    for dist in Dist::ALL {
        for n in NS {
            for q in QS {
                let run = |mode| {
                    let runs: Vec<_> = SEEDS
                        .iter()
                        .map(|&seed| {
                            claims::two_cores(SimConfig { seed, ..fluid }, dist, n, q, mode, CYCLES)
                        })
                        .collect();
                    claims::average(&runs)
                };
                let (s, c) = (run(Mode::Strict), run(Mode::Conserving));
                println!(
                    "| {}-{n} Q={q} | {} | {} | {} | {} | {} |",
                    dist.name(),
                    pct(s.utilization),
                    pct(s.mean_rms),
                    pct(c.utilization),
                    pct(c.mean_rms),
                    pct(c.mean_rms_without_surplus.unwrap()),
                );
                multi_json.push(serde_json::json!({
                    "dist": dist, "n": n, "q_ms": q, "strict": s, "conserving": c,
                }));
            }
        }
    }

    // Share changes, arrivals, departures.
    println!("\n## Changes in linear-5 at Q = 10 ms, one CPU, optimized (RMS against the shares in force; the worst of ten change times over a cycle)\n");
    println!("| change | mean RMS before | cycle 1 after (straddles) | cycle 2 | cycle 3 | mean from cycle 2 | max from cycle 2 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let changes: Vec<_> = [
        Change::SetShare { index: 0, share: 9 },
        Change::SetShare {
            index: 2,
            share: 15,
        },
        Change::SetShare { index: 4, share: 1 },
        Change::Arrive { share: 5 },
        Change::Depart { index: 2 },
    ]
    .into_iter()
    .map(|c| {
        // The worst (by cycle-2 RMS) of ten change times spread over a cycle.
        (0..10)
            .map(|k| claims::change(c, 10, 20, 0.05 + 0.1 * k as f64, 20, 1))
            .max_by(|a, b| a.second.total_cmp(&b.second))
            .unwrap()
    })
    .collect();
    for r in &changes {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            pct(r.mean_before),
            pct(r.straddling),
            pct(r.second),
            pct(r.third),
            pct(r.mean_from_second),
            pct(r.max_from_second),
        );
    }

    if let Some(path) = out {
        let json = serde_json::json!({
            "machine": fluid,
            "slices_machine": slices,
            "seeds": SEEDS,
            "cycles": CYCLES,
            "skip": claims::SKIP,
            "pinned": pinned_json,
            "pinned_slices": slices_json,
            "io": io_runs,
            "concurrent": conc,
            "two_cores": multi_json,
            "changes": changes,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
        println!("\nwrote {path}");
    }
    Ok(())
}
