//! Read-only views of the kernel: process tables, progress counters, device and link activity.

pub mod block_device;
pub mod bottleneck;
pub mod busy;
pub mod caps;
pub mod cpu;
pub mod diskstats;
pub mod htb_class;
pub mod members;
pub mod netstats;
pub mod proc;
pub mod progress;
pub mod psi;
pub mod sockets;
pub mod veth_peer;
