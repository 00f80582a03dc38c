//! The effective capabilities of a process (`CapEff:` in `/proc/PID/status`), so that an actuator
//! can say up front that it needs CAP_NET_ADMIN or CAP_SYS_NICE instead of failing half way. Being
//! uid 0 is not the test: a root process in a container may lack capabilities, and a non-root one
//! may hold them (file capabilities, ambient sets).

use std::fs;

use crate::error::{Error, Result};
use crate::probe::proc::ProcReader;

/// The capabilities tact's actuators ask about (numbers from `include/uapi/linux/capability.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// `tc` qdiscs and classes, SO_MARK.
    NetAdmin = 12,
    /// Leaving SCHED_IDLE (without a high enough RLIMIT_NICE), raising scheduling policies.
    SysNice = 23,
}

impl Capability {
    /// The kernel's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::SysNice => "CAP_SYS_NICE",
        }
    }
}

/// Whether this process holds `cap` in its effective set.
pub fn has_capability(cap: Capability) -> Result<bool> {
    Ok(effective_caps(&ProcReader::new(), "self")? & (1 << cap as u32) != 0)
}

/// The effective capability mask of `who` (a pid or `self`) under `reader`'s procfs.
pub fn effective_caps(reader: &ProcReader, who: &str) -> Result<u64> {
    let path = reader.root().join(who).join("status");
    let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    for (i, line) in text.lines().enumerate() {
        if let Some(mask) = line.strip_prefix("CapEff:") {
            return u64::from_str_radix(mask.trim(), 16)
                .map_err(|_| Error::parse(&path, i + 1, "malformed CapEff line"));
        }
    }
    Err(Error::parse(&path, text.lines().count(), "no CapEff line"))
}
