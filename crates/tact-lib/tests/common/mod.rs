//! Settings shared by the library's tests: short periods so that they run in seconds; and in
//! `tasks`, the gates and meters of the tune tests; in `fake`, a fake tact daemon.
#![allow(dead_code)] // each test file uses a part

pub mod fake;
pub mod tasks;

use std::time::Duration;

use tact_lib::{Config, PoliteConfig};

pub const P: Duration = Duration::from_millis(20);

/// 20 ms testpoints, no probation, and a bootstrap of `bootstrap` testpoints. A long bootstrap
/// keeps regulation (and its suspensions) out of tests about the token.
pub fn config(bootstrap: u32) -> Config {
    Config {
        polite: PoliteConfig {
            bootstrap,
            probation: Some(Duration::ZERO),
            ..PoliteConfig::with_period(P)
        },
        ..Config::default()
    }
}

/// `config` with another hung threshold.
pub fn with_hung(bootstrap: u32, hung: Duration) -> Config {
    let mut c = config(bootstrap);
    c.polite.hung = hung;
    c
}
