//! Statistics shared by the engines.

pub mod normal;
pub mod ridge;
pub mod sign_test;

pub use normal::normal_quantile;
pub use ridge::{solve_ridge, RidgeError};
pub use sign_test::{SignTest, SignTestError, Verdict};
