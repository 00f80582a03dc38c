//! Actuators: the code that changes processes, their scheduling, cgroups and qdiscs.

pub mod affinity;
pub mod cgroup2;
pub mod cgroup_cpu;
pub mod cgroup_join;
pub mod cgroup_knobs;
pub mod cpu_idle;
pub mod htb;
pub mod ioprio;
pub mod nft;
pub mod per_thread;
pub mod pidfd;
pub mod sched_idle;
pub mod slice;
pub mod stale;
pub mod tree;
