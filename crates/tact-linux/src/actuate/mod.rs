//! Actuators: the code that changes processes.

pub mod pidfd;
pub mod tree;
