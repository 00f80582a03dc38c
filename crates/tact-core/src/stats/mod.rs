//! Statistics shared by the engines.

pub mod ridge;
pub mod sign_test;

pub use ridge::{solve_ridge, RidgeError};
pub use sign_test::{SignTest, SignTestError, Verdict};
