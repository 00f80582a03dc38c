//! Prints the polite engine's reproductions of the paper's claims as tables, and writes them as
//! JSON to the path given on the command line:
//!
//! `cargo run -p tact-sim --release --example polite_claims -- polite-claims.json`

use std::time::Duration;

use tact_sim::claims::{self, PROGRESS_NOISE};
use tact_sim::noise::Noise;
use tact_sim::Summary;

const SEED: u64 = 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1);

    let cal = claims::calibration(SEED);
    println!("## Calibration from a loaded start (paper §9.6: 1600 → 620 ms at 12 h → 500 ms at 24 h; ideal 480 ms)\n");
    println!("| hours | target (ms) | × ideal |");
    println!("|---:|---:|---:|");
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0}"));
    let x = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.2}", v / cal.ideal_ms));
    println!(
        "| bootstrap | {} | {} |",
        ms(cal.initial_ms),
        x(cal.initial_ms)
    );
    for (h, v) in cal
        .trajectory
        .iter()
        .filter(|(h, _)| *h % 4.0 == 0.0 || *h == 1.0)
    {
        println!("| {h:.0} | {} | {} |", ms(*v), x(*v));
    }

    println!("\n## Duty under cyclic load (second 24 h of the calibration run; paper: active 19% of a possible 50%, E 38%, interference 6%)\n");
    summary_table(&[
        ("hours 0–24 (probation)", &cal.first_day),
        ("hours 24–48", &cal.second_day),
    ]);

    let reaction = claims::reaction(SEED, 6);
    println!("\n## Bursty foreground, target calibrated idle, probation 0 (6 h; paper: reaction m = 5 testpoints, slowdown ~10× lower)\n");
    summary_table(&[
        ("regulated", &reaction.regulated),
        ("unregulated", &reaction.unregulated),
    ]);
    println!(
        "\nforeground slowdown regulated ÷ unregulated: {:.3}",
        reaction.slowdown_ratio
    );

    println!("\n## Idle machine, progress iid at target (equation 3: q = αβ/(αβ + m(β − α)))\n");
    println!("| noise | q eq. 3 | q measured | false-poor per m samples | poor share of verdicts | poor samples |");
    println!("|---|---:|---:|---:|---:|---:|");
    let duty = [
        claims::duty_cycle(SEED, 24, Noise::Normal { sigma: 0.2 }),
        claims::duty_cycle(SEED, 24, PROGRESS_NOISE),
        claims::duty_cycle(SEED, 24, Noise::LogNormal { sigma: 0.3 }),
    ];
    for d in &duty {
        println!(
            "| {:?} | {:.2}% | {:.2}% | {:.4} | {:.3} | {:.3} |",
            d.noise,
            100.0 * d.q_equation3,
            100.0 * d.q_measured,
            d.false_poor_per_window,
            d.poor_share_of_verdicts,
            d.summary.poor_sample_fraction
        );
    }

    let conc = claims::concurrent(SEED, Duration::from_secs(3600), Duration::from_secs(1800));
    println!("\n## Concurrent metrics (750 kB/s + 120 ops/s, costs add)\n");
    println!(
        "fitted rates {:?} (true {:?}); reaction {:?} testpoints",
        conc.fitted_rates, conc.true_rates, conc.reaction_testpoints
    );
    summary_table(&[
        ("uncontended", &conc.uncontended),
        ("contended", &conc.contended),
    ]);

    if let Some(path) = out {
        let json = serde_json::json!({
            "seed": SEED,
            "calibration": cal,
            "reaction": reaction,
            "duty_cycle": duty,
            "concurrent": conc,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
        println!("\nwrote {path}");
    }
    Ok(())
}

fn summary_table(rows: &[(&str, &Summary)]) {
    println!("| run | suspended | active | fg busy | E | interference | fg slowdown | overshoot median / max (s) | reaction median / max (tp) | missed |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, s) in rows {
        println!(
            "| {name} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.1} / {:.1} | {:.0} / {:.0} | {} |",
            100.0 * s.suspended_fraction,
            100.0 * s.active_fraction,
            100.0 * s.foreground_busy_fraction,
            100.0 * s.efficiency,
            100.0 * s.interference_share,
            100.0 * s.foreground_slowdown,
            s.overshoot.median,
            s.overshoot.max,
            s.reaction_testpoints.median,
            s.reaction_testpoints.max,
            s.reactions_missed,
        );
    }
}
