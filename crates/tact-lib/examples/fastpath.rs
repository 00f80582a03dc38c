//! What a testpoint costs: nanoseconds per call that is not due (the fast path: a clock read and
//! an addition), per call when regulation is disabled, and per due testpoint (the supervisor's
//! lock, a regulator step, a turn of the token; suspensions included, capped at 1 ms here).
//!
//! `cargo run --release -p tact-lib --example fastpath`

use std::hint::black_box;
use std::time::{Duration, Instant};

use tact_lib::{Config, Polite, PoliteConfig, Supervisor};

fn per_call(calls: u32, mut f: impl FnMut(u32)) -> f64 {
    let started = Instant::now();
    for i in 0..calls {
        f(i);
    }
    started.elapsed().as_nanos() as f64 / calls as f64
}

fn main() -> Result<(), tact_lib::Error> {
    // The thread's own unit, at the default 200 ms period, without persistence.
    tact_lib::init(Config::default())?;
    tact_lib::testpoint(0, &[1.0])?;
    let fast = per_call(20_000_000, |_| {
        tact_lib::testpoint(black_box(0), black_box(&[1.0])).ok();
    });
    println!("fast path (thread unit, not due):   {fast:7.1} ns/call");

    let mut concurrent = Polite::new();
    concurrent.testpoint(1, &[1.0, 1.0, 1.0])?;
    let fast3 = per_call(20_000_000, |_| {
        concurrent
            .testpoint(black_box(1), black_box(&[1.0, 2.0, 3.0]))
            .ok();
    });
    drop(concurrent);
    println!("fast path (handle, 3 metrics):      {fast3:7.1} ns/call");

    // Periods shorter than 20 ticks of the coarse clock compare with the precise clock.
    let short = Supervisor::with_config(Config::with_period(Duration::from_millis(20)))?;
    let mut precise = Polite::with_supervisor(&short);
    precise.testpoint(0, &[1.0])?;
    let fast_precise = per_call(20_000_000, |_| {
        precise.testpoint(black_box(0), black_box(&[1.0])).ok();
    });
    drop(precise);
    println!("fast path (handle, 20 ms period):   {fast_precise:7.1} ns/call");

    let off = Supervisor::with_config(Config {
        disabled: true,
        ..Config::default()
    })?;
    let mut disabled = Polite::with_supervisor(&off);
    let none = per_call(20_000_000, |_| {
        disabled.testpoint(black_box(0), black_box(&[1.0])).ok();
    });
    println!("disabled:                           {none:7.1} ns/call");

    // Due testpoints, one at a time: with a 1 ms period, a call after 5 ms of "work" is due
    // (the fast path compares with a clock that ticks every few milliseconds, so back-to-back
    // calls would mostly take the fast path). A short bootstrap and suspension cap keep the unit
    // regulated without long sleeps.
    let every = Supervisor::with_config(Config {
        polite: PoliteConfig {
            bootstrap: 10,
            probation: Some(Duration::ZERO),
            max_suspension: Duration::from_millis(1),
            ..PoliteConfig::with_period(Duration::from_millis(1))
        },
        ..Config::default()
    })?;
    let mut unit = Polite::with_supervisor(&every);
    let mut took = Vec::new();
    for i in 0..300 {
        std::thread::sleep(Duration::from_millis(5));
        let started = Instant::now();
        unit.testpoint(0, &[1.0])?;
        if i >= 20 {
            took.push(started.elapsed());
        }
    }
    took.sort();
    let stats = unit.stats().expect("registered");
    println!(
        "due testpoint (lock, step, turn):   {:7.1} ns/call median, {:.1} ns at the 90th \
         percentile ({} due, {} suspensions)",
        took[took.len() / 2].as_nanos() as f64,
        took[took.len() * 9 / 10].as_nanos() as f64,
        stats.testpoints,
        stats.suspensions,
    );
    Ok(())
}
