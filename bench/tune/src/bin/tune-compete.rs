//! tune-compete: the competing program of spec X5. Runs `--threads` threads that each alternate a
//! Pareto burst of thread CPU time with a Pareto sleep (a constant load, not a spin that would
//! take the whole core whatever the service does), until it is killed. run.py pins it to the
//! service's CPU with `taskset` once TCC is steady and stops it later.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;
use tact_bench_tune::cputime::spin;
use tact_bench_tune::pareto::{Pareto, SHAPE};
use tact_sim::SimRng;

#[derive(Parser, Debug)]
#[command(
    name = "tune-compete",
    about = "A competing load for the tune benchmark: bursts of CPU with sleeps, until killed"
)]
struct Args {
    /// Competing threads (spec X5: as many as tact's steady count).
    #[arg(long)]
    threads: usize,
    /// Mean burst per round, ms of thread CPU time (Pareto, k = 2.5).
    #[arg(long, default_value_t = 1.3)]
    burst_ms: f64,
    /// Mean sleep per round, ms (Pareto, k = 2.5).
    #[arg(long, default_value_t = 5.0)]
    sleep_ms: f64,
    /// Seed of the burst and sleep streams (two per thread).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let valid = |v: f64| v.is_finite() && v >= 0.0;
    if args.threads == 0 || !valid(args.burst_ms) || !valid(args.sleep_ms) {
        bail!("--threads must be positive, --burst-ms and --sleep-ms non-negative");
    }
    let threads: Vec<_> = (0..args.threads as u64)
        .map(|i| {
            let mut burst = Pareto::new(
                Duration::from_secs_f64(args.burst_ms / 1000.0),
                SHAPE,
                SimRng::stream(args.seed, 2 * i),
            );
            let mut sleep = Pareto::new(
                Duration::from_secs_f64(args.sleep_ms / 1000.0),
                SHAPE,
                SimRng::stream(args.seed, 2 * i + 1),
            );
            std::thread::spawn(move || loop {
                spin(burst.draw());
                std::thread::sleep(sleep.draw());
            })
        })
        .collect();
    println!("competing with {} threads", threads.len());
    for t in threads {
        // The threads never return; a panic in one is the only way out.
        if t.join().is_err() {
            bail!("a competing thread panicked");
        }
    }
    Ok(())
}
