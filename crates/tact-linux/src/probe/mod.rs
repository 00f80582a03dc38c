//! Read-only views of the kernel: process tables and progress counters.

pub mod cpu;
pub mod members;
pub mod proc;
pub mod progress;
pub mod psi;
