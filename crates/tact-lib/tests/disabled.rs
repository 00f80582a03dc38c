//! `TACT_DISABLE=1`: every testpoint is a no-op. One test per file: the setting is read once per
//! process.

use std::time::{Duration, Instant};

#[test]
fn disabled_testpoints_do_nothing() {
    // Set before anything reads it; the only test of this process.
    std::env::set_var("TACT_DISABLE", "1");
    assert!(tact_lib::supervisor().is_none());
    let started = Instant::now();
    for i in 0..1_000_000u32 {
        tact_lib::testpoint(i % 3, &[f64::NAN]).unwrap();
    }
    // Generous: a no-op is a few nanoseconds.
    assert!(started.elapsed() < Duration::from_secs(2));
    tact_lib::set_priority(3).unwrap();
    assert!(tact_lib::stats().is_none());
    assert!(tact_lib::flush().is_ok());
    let mut unit = tact_lib::Polite::new();
    unit.testpoint(0, &[-1.0]).unwrap();
    assert!(unit.stats().is_none());
}
