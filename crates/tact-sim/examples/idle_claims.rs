//! Prints the idle engine's reproduction of the thesis's disk claims (spec idletime.md
//! section 7) on the simulated non-preemptive 20 ms device, next to the model and the thesis,
//! then the automatic PI against the best fixed PI, and writes everything as JSON to the path
//! given:
//!
//! `cargo run --release -p tact-sim --example idle_claims [-- OUT.json]`
//!
//! Two rigs: exact (every service 20 ms) and ±10% service times (seeded). The grid is
//! start-anchored, as the thesis's prototype; the end-anchored grid (tact's default) follows.

use std::time::Duration;

use tact_core::idle::{Anchor, DEFAULT_BETA};
use tact_sim::idle::claims::{
    self, Grid, Region, BG_TARGET, FG_FLOOR, INTENSITIES, PIS_MS, STOPPED,
};
use tact_sim::idle::Rig;

fn boundary(x: Option<f64>) -> String {
    x.map_or("none".into(), |i| format!("{i}"))
}

fn print_grid(name: &str, g: &Grid) {
    println!("\n## {name}: fg/bg (sim; model below)\n");
    let head: Vec<String> = INTENSITIES.iter().map(|i| format!("i={i}")).collect();
    println!("| p ms | {} |", head.join(" | "));
    println!("|---:|{}", "---|".repeat(INTENSITIES.len()));
    for p in PIS_MS {
        let sim: Vec<String> = INTENSITIES
            .iter()
            .map(|&i| {
                let x = g.at(i, p);
                format!("{:.2}/{:.2}", x.fg_n, x.bg_n)
            })
            .collect();
        let model: Vec<String> = INTENSITIES
            .iter()
            .map(|&i| {
                let x = g.at(i, p);
                format!("*{:.2}/{:.2}*", x.model_fg_n, x.model_bg_n)
            })
            .collect();
        println!("| {p} | {} |", sim.join(" | "));
        println!("| | {} |", model.join(" | "));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1);
    let exact = Rig::disk();
    let jittered = Rig {
        jitter: 0.1,
        seed: 7,
        ..exact
    };
    let grids: Vec<(&str, Grid)> = vec![
        (
            "exact, start-anchored",
            claims::grid(&exact, Anchor::Start, &INTENSITIES, &PIS_MS),
        ),
        (
            "±10%, start-anchored",
            claims::grid(&jittered, Anchor::Start, &INTENSITIES, &PIS_MS),
        ),
        (
            "exact, end-anchored",
            claims::grid(&exact, Anchor::End, &INTENSITIES, &PIS_MS),
        ),
        (
            "±10%, end-anchored",
            claims::grid(&jittered, Anchor::End, &INTENSITIES, &PIS_MS),
        ),
    ];

    println!(
        "# idle: the thesis's disk on the simulated 20 ms device (t_max 100 ms, 300 cycles)\n"
    );
    println!("fg is normalized by r(i) measured alone, bg by r_max; \"stops past\" is the lowest grid intensity from which bg < {STOPPED} at every higher one.\n");
    println!("| claim | thesis | model | exact start | ±10% start | exact end | ±10% end |");
    println!("|---|---|---|---|---|---|---|");
    let model = |g: &Grid| claims::model(&g.rig, g.anchor, g.r_max);
    let cells = |f: &dyn Fn(&Grid) -> String| -> String {
        grids
            .iter()
            .map(|(_, g)| f(g))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    println!(
        "| 3: p < τ, i = 1: fg/bg | ≈ 50% / 50% | {:.2} / {:.2} | {} |",
        grids[0].1.at(1.0, 10).model_fg_n,
        grids[0].1.at(1.0, 10).model_bg_n,
        cells(&|g| {
            let x = g.at(1.0, 10);
            format!("{:.2} / {:.2}", x.fg_n, x.bg_n)
        })
    );
    for (p, thesis) in [(40, "past 90%"), (80, "past 40%")] {
        println!(
            "| {}: bg stops, p = {p} ms | {thesis} | {:.1} (start) | {} |",
            if p == 40 { 5 } else { 6 },
            model(&grids[0].1).stall_boundary(Duration::from_millis(p)),
            cells(&|g| boundary(g.stall_boundary(p)))
        );
    }
    println!(
        "| 7: p > 100 ms: max bg, min fg | ≈ 0, ≈ 100% | 0, 1 | {} |",
        cells(&|g| {
            let long = g.points.iter().filter(|x| x.pi_ms > 100);
            let bg = long.clone().map(|x| x.bg_n).fold(0.0, f64::max);
            let fg = long.map(|x| x.fg_n).fold(1.0, f64::min);
            format!("{bg:.3}, {fg:.3}")
        })
    );
    println!(
        "| 9: i = 0.1, p = 0: fg throughput, latency | ≈ baseline, higher | 0.50, – | {} |",
        cells(&|g| {
            let x = g.at(0.1, 0);
            format!("{:.2}, {:.2}×", x.fg_n, x.latency_x)
        })
    );

    println!("\n## Largest |sim − model| per region (fg, bg)\n");
    println!(
        "| region | {} |",
        grids
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(grids.len()));
    let mut errors = Vec::new();
    for region in Region::ALL {
        let e: Vec<_> = grids
            .iter()
            .map(|(_, g)| g.model_error(region, 0.0))
            .collect();
        println!(
            "| {region:?} | {} |",
            e.iter()
                .map(|e| format!("{:.2}, {:.2}", e.fg, e.bg))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        errors.push(e);
    }

    for (name, g) in &grids {
        print_grid(name, g);
    }

    println!("\n## Issue 5 on the disk: the best any fixed PI gives (τ = 20.45 ms, the bench's FUSE disk; 300 cycles)\n");
    println!("fg / bg in % of fg's throughput alone / of the capacity fg leaves idle. \"best\": most bg with fg ≥ 90% (throughput and response time); \"fg at bg ≥ 70%\": most fg among the p that give bg 70% of idle.\n");
    println!("| rig | anchor | i | model: best p ms, fg / bg | sim: best p ms, fg / bg | sim: fg at bg ≥ 70%, p ms |");
    println!("|---|---|---:|---|---|---|");
    let mut targets = Vec::new();
    for (name, jitter) in [("exact", 0.0), ("±1%", 0.01), ("±10%", 0.1)] {
        let rig = Rig {
            tau: Duration::from_micros(20_450),
            jitter,
            seed: 3,
            ..exact
        };
        for anchor in [Anchor::Start, Anchor::End] {
            for i in [0.3, 0.5] {
                let s = claims::sweep(&rig, anchor, i, &claims::sweep_pis(rig.tau));
                let m = s.model_best(FG_FLOOR).expect("p > t_max keeps fg");
                let b = s.best(FG_FLOOR).expect("p > t_max keeps fg");
                let at70 = s.best_fg_with_bg(BG_TARGET).map_or("–".to_string(), |p| {
                    format!(
                        "{:.0} / {:.0}, {:.1}",
                        p.sim.fg_n * 100.0,
                        p.sim.bg_idle * 100.0,
                        p.pi_ms
                    )
                });
                println!(
                    "| {name} | {anchor:?} | {i} | {:.1}: {:.0} / {:.0} | {:.1}: {:.0} / {:.0} | {at70} |",
                    m.pi_ms,
                    m.model_fg_n * 100.0,
                    m.model_bg_idle * 100.0,
                    b.pi_ms,
                    b.sim.fg_n * 100.0,
                    b.sim.bg_idle * 100.0,
                );
                targets.push(s);
            }
        }
    }

    println!("\n## A gate that knew each burst's start and kept bg off it (τ = 20.45 ms, exact)\n");
    println!("bg gets the whole services that fit between fg's last completion and the next burst. \"one more\": how far the next bg request would reach into the burst, against the wait the burst absorbs without losing a request.\n");
    println!("| i | fg requests | gap ms | bg requests | idle requests | bg % of idle | one more: into the burst ms / slack ms |");
    println!("|---:|---:|---:|---:|---:|---:|---|");
    let oracle_rig = Rig {
        tau: Duration::from_micros(20_450),
        ..exact
    };
    let oracles: Vec<_> = [0.1, 0.3, 0.5, 0.7]
        .iter()
        .map(|&i| claims::oracle(&oracle_rig, i))
        .collect();
    for o in &oracles {
        println!(
            "| {} | {} | {:.2} | {} | {:.2} | {:.1} | {:.2} / {:.2} |",
            o.intensity,
            o.fg_requests,
            o.gap.as_secs_f64() * 1e3,
            o.bg_requests,
            o.idle_requests,
            o.bg_idle * 100.0,
            o.overlap.as_secs_f64() * 1e3,
            o.slack.as_secs_f64() * 1e3
        );
    }

    println!("\n## Automatic PI (β = {DEFAULT_BETA}, from p₀ = 2τ, one 10 s run each) against the best fixed PI (fg ≥ 90% of throughput and response time; ±10% service times; start-anchored, as tact's watcher)\n");
    println!("| τ | i | idle % of r_max | best fixed p ms | its fg / bg | auto fg / bg | auto mean p ms | bg shortfall |");
    println!("|---|---:|---:|---:|---|---|---:|---:|");
    let mut tunings = Vec::new();
    for (tau_us, intensities) in [
        (20_450, &[0.1, 0.3, 0.5, 0.7, 0.9][..]),
        (1_380, &[0.2, 0.4, 0.6, 0.8][..]),
    ] {
        let rig = Rig {
            tau: Duration::from_micros(tau_us),
            jitter: 0.1,
            seed: 3,
            cycles: 100,
            ..exact
        };
        for &i in intensities {
            let t = claims::tuning(&rig, Anchor::Start, i, DEFAULT_BETA);
            println!(
                "| {:.2} ms | {i} | {:.0} | {:.1} | {:.0} / {:.0} | {:.0} / {:.0} | {:.1} | {:+.0} |",
                t.tau_ms,
                t.idle * 100.0,
                t.best_pi_ms,
                t.best.fg_n * 100.0,
                t.best.bg_idle * 100.0,
                t.auto.fg_n * 100.0,
                t.auto.bg_idle * 100.0,
                t.auto_mean_pi_ms,
                t.shortfall() * 100.0
            );
            tunings.push(t);
        }
    }

    if let Some(path) = out {
        let json = serde_json::json!({
            "grids": grids.iter().map(|(n, g)| serde_json::json!({"name": n, "grid": g})).collect::<Vec<_>>(),
            "model_errors": errors,
            "disk_targets": targets,
            "oracle": oracles,
            "tuning": tunings,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
        println!("\nwrote {path}");
    }
    Ok(())
}
