//! Setting up an [`IdleGate`]: the resource, the preemption interval, the threshold.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tact_core::idle::{GateParams, TunerParams, DEFAULT_BETA};

use super::clock::{Clock, Monotonic};
use super::sampler::{DiskSampler, NetSampler, Sampler};
use super::{IdleError, IdleGate};

/// Foreground residue per look below which the resource counts as idle (spec idletime §6, θ):
/// filesystem metadata and stray page-ins of other programs are not a foreground to defer to.
pub const DEFAULT_THRESHOLD: u64 = 4096;

/// The preemption interval p: fixed, or tuned from the gate's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preempt {
    /// A fixed p. Zero is plain priority: wait only while foreground is active right now.
    Fixed(Duration),
    /// tact-core's [`Tuner`](tact_core::idle::Tuner) sets p (see [`Preempt::auto_params`]).
    #[default]
    Auto,
}

impl Preempt {
    /// The tuner's bounds in library mode. The spec derives them from the foreground's service
    /// and think times, which a gate that sees only bytes per look cannot measure, so they are
    /// fixed: p_min = 10 ms, since looks come at most every millisecond and the spec wants
    /// δ ≤ p/10; p₀ = 100 ms, the long end of the thesis's effective disk band (20–100 ms), so
    /// tuning starts on the foreground's safe side; p_max = 2 s, far beyond where bg starves
    /// (t_max = 100 ms cycles). Windows are the spec's (1 s or 20 PIs), β tact-core's default.
    pub fn auto_params() -> TunerParams {
        TunerParams {
            beta: DEFAULT_BETA,
            p_min: Duration::from_millis(10),
            p_max: Duration::from_secs(2),
            initial: Duration::from_millis(100),
            window: Duration::from_secs(1),
            window_pis: 20,
        }
    }
}

impl From<Duration> for Preempt {
    fn from(p: Duration) -> Self {
        Preempt::Fixed(p)
    }
}

impl FromStr for Preempt {
    type Err = IdleError;

    /// `auto`, or a human duration (`50ms`, `0`, `1s`).
    fn from_str(s: &str) -> Result<Self, IdleError> {
        let text = s.trim();
        let bad = |reason: String| IdleError::Preempt {
            value: s.to_string(),
            reason,
        };
        if text == "auto" {
            return Ok(Preempt::Auto);
        }
        if text.starts_with('-') {
            return Err(bad("a preemption interval cannot be negative".into()));
        }
        if text == "0" {
            return Ok(Preempt::Fixed(Duration::ZERO));
        }
        humantime::parse_duration(text)
            .map(Preempt::Fixed)
            .map_err(|e| bad(format!("expected `auto` or a duration such as 50ms ({e})")))
    }
}

enum Resource {
    Device(String),
    Interface(String),
    Custom(Box<dyn Sampler>, String),
}

impl Resource {
    fn describe(&self) -> String {
        match self {
            Resource::Device(d) => format!("device `{d}`"),
            Resource::Interface(i) => format!("interface `{i}`"),
            Resource::Custom(_, name) => format!("sampler `{name}`"),
        }
    }
}

/// Builds an [`IdleGate`]: `IdleGate::builder().device("sda").preempt(Duration::from_millis(50))
/// .build()?`.
#[derive(Default)]
pub struct Builder {
    resources: Vec<Resource>,
    preempt: Preempt,
    threshold: Option<u64>,
    clock: Option<Arc<dyn Clock>>,
}

impl Builder {
    /// Gate a block device: a kernel name (`vda`, `sda1`, `dm-0`), a `/dev` path, or any
    /// absolute path, meaning the disk its mount lives on. The whole physical disks below it are
    /// watched.
    pub fn device(mut self, device: impl Into<String>) -> Self {
        self.resources.push(Resource::Device(device.into()));
        self
    }

    /// Gate a network interface (`eth0`, `lo`), both directions.
    pub fn interface(mut self, iface: impl Into<String>) -> Self {
        self.resources.push(Resource::Interface(iface.into()));
        self
    }

    /// Gate whatever `sampler` counts (`name` appears in errors and the status). Tests script
    /// foreground activity this way.
    pub fn sampler(mut self, sampler: Box<dyn Sampler>, name: impl Into<String>) -> Self {
        self.resources.push(Resource::Custom(sampler, name.into()));
        self
    }

    /// The preemption interval: a `Duration`, [`Preempt::Auto`] (the default), or parsed with
    /// `"50ms".parse::<Preempt>()`.
    pub fn preempt(mut self, preempt: impl Into<Preempt>) -> Self {
        self.preempt = preempt.into();
        self
    }

    /// Foreground bytes per look that count as activity: more than this (default
    /// [`DEFAULT_THRESHOLD`]) is foreground.
    pub fn threshold(mut self, bytes: u64) -> Self {
        self.threshold = Some(bytes);
        self
    }

    /// The time source (default [`Monotonic`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Resolves the resource (an unknown device or interface is an error naming it and listing
    /// those that exist) and starts the gate.
    pub fn build(mut self) -> Result<IdleGate, IdleError> {
        if self.resources.len() > 1 {
            return Err(IdleError::TwoResources(
                self.resources[0].describe(),
                self.resources[1].describe(),
            ));
        }
        let (sampler, name): (Box<dyn Sampler>, String) = match self.resources.pop() {
            None => return Err(IdleError::NoResource),
            Some(Resource::Device(spec)) => {
                let disk = DiskSampler::new(&spec)?;
                let disks = disk.disks().join("+");
                let name = match disks == spec {
                    true => format!("disk {disks}"),
                    false => format!("disk {disks} ({spec})"),
                };
                (Box::new(disk), name)
            }
            Some(Resource::Interface(iface)) => (
                Box::new(NetSampler::new(&iface)?),
                format!("interface {iface}"),
            ),
            Some(Resource::Custom(sampler, name)) => (sampler, name),
        };
        let (params, tuner) = match self.preempt {
            Preempt::Fixed(p) => (GateParams::new(p), None),
            Preempt::Auto => {
                let t = Preempt::auto_params();
                (GateParams::new(t.initial), Some(t))
            }
        };
        IdleGate::start(
            name,
            sampler,
            params,
            tuner,
            self.threshold.unwrap_or(DEFAULT_THRESHOLD),
            self.clock.unwrap_or_else(|| Arc::new(Monotonic)),
        )
    }
}
