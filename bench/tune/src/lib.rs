//! The tune benchmark (bench/tune/README.md): a loopback service whose throughput bends at a knee
//! (`tune-service`), and a driver that runs tact's pool against it under one controller at a time
//! (`tune-drive`). This library holds what both binaries share and what can be tested without
//! sockets: CPU clocks and spinning, Pareto draws, the wire protocol, the service's modes, and the
//! summary of a run.

pub mod cputime;
pub mod external;
pub mod mode;
pub mod pareto;
pub mod protocol;
pub mod summary;
