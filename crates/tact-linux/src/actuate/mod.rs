//! Actuators: the code that changes processes.

pub mod affinity;
pub mod cgroup_cpu;
pub mod pidfd;
pub mod tree;
