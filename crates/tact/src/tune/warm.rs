//! `--key NAME`: warm start per workload key (spec concurrency.md §6, "Beyond the paper" 1).
//! The store is tact-lib's (`tact_lib::tune::warm`), shared with the library's pools and the
//! Python executors; what is the CLI's own is `--key`'s parser.

pub use tact_lib::tune::warm::{default_dir, Loaded, WarmStore};

/// `--key`: a file name of letters, digits, `.`, `_` and `-`, not starting with `.` (so never
/// `..`, a hidden file or a path), at most 200 bytes.
pub fn parse_key(s: &str) -> Result<String, String> {
    tact_lib::tune::warm::check_key(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}
