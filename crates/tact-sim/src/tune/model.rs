//! Throughput models: what a pool (or two) achieves with a given number of tasks in flight.
//!
//! These are the paper's oracle (§3.2): TCC reads throughput from a model instead of a live
//! system. [`Closed`] wraps a single-class MVA curve (machine-repairman, event escalation, event
//! enrichment); [`ProportionalShare`] is the constant-competitor model of §3.3; [`Pair`] holds
//! two pools (or a pool and a competitor) on a two-class network; [`Alike`] holds any number of
//! pools whose tasks are alike; [`Thrash`] and [`Knee`] are the memory-thrashing and disk models
//! of the spec's extra scenarios.

use std::sync::Arc;

use serde::Serialize;

use super::mva::{Network, Shared, Station, TwoClass};

/// The operating point for one vector of in-flight counts (one entry per pool).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operating {
    /// Completions per second of each pool.
    pub rates: Vec<f64>,
    /// Utilization of the bottleneck resource by everyone (pools and competitors).
    pub bottleneck: f64,
    /// Each pool's own share of the bottleneck's capacity.
    pub shares: Vec<f64>,
}

pub trait ThroughputModel: Send + Sync {
    /// Number of pools the model serves.
    fn pools(&self) -> usize;
    fn at(&self, counts: &[usize]) -> Operating;
    fn name(&self) -> String;

    /// The share of time the tasks stall on memory at these counts, which the driver reports as
    /// PSI's memory `some` and `full` (`Scenario::pressure`). None of the MVA models waits on
    /// memory: 0 unless a model says otherwise ([`Thrash`]).
    fn memory_stall(&self, counts: &[usize]) -> f64 {
        let _ = counts;
        0.0
    }
}

/// A single-class closed network solved by exact MVA.
#[derive(Debug, Clone)]
pub struct Closed {
    name: String,
    net: Network,
    bottleneck: usize,
}

/// The paper's three closed models (Figure 4), with c servers per station and bottleneck-side
/// demand `d` seconds; `r` is the service-time ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// A c-server bottleneck (D) and a delay station (rD) for every other resource.
    MachineRepairman,
    /// The engine (D) then an external program (rD), both c-server.
    EventEscalation,
    /// Engine (D), database (rD), event source (rD), all c-server.
    EventEnrichment,
}

impl Topology {
    pub fn stations(self, c: usize, d: f64, r: f64) -> Vec<Station> {
        let q = |demand| Station::Queue { servers: c, demand };
        match self {
            Topology::MachineRepairman => vec![q(d), Station::Delay { demand: r * d }],
            Topology::EventEscalation => vec![q(d), q(r * d)],
            Topology::EventEnrichment => vec![q(d), q(r * d), q(r * d)],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Topology::MachineRepairman => "machine-repairman",
            Topology::EventEscalation => "event escalation",
            Topology::EventEnrichment => "event enrichment",
        }
    }
}

impl Closed {
    pub fn new(name: impl Into<String>, stations: &[Station], n_max: usize) -> Self {
        let net = Network::solve(stations, n_max);
        let bottleneck = net.bottleneck();
        Closed {
            name: name.into(),
            net,
            bottleneck,
        }
    }

    pub fn topology(t: Topology, c: usize, d: f64, r: f64, n_max: usize) -> Self {
        Closed::new(
            format!("{} c={c} D={d} r={r}", t.label()),
            &t.stations(c, d, r),
            n_max,
        )
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    pub fn utilization(&self, n: usize) -> f64 {
        self.net.utilization(n, self.bottleneck)
    }
}

impl ThroughputModel for Closed {
    fn pools(&self) -> usize {
        1
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let n = counts[0];
        let u = self.utilization(n);
        Operating {
            rates: vec![self.net.throughput(n)],
            bottleneck: u,
            shares: vec![u],
        }
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

/// §3.3: x tasks of the pool and y₀ of an uncontrolled program share a saturated
/// processor-sharing bottleneck of capacity C: f(x, y₀) = x/(x + y₀)·C.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProportionalShare {
    pub capacity: f64,
    pub competitor: f64,
}

impl ThroughputModel for ProportionalShare {
    fn pools(&self) -> usize {
        1
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let x = counts[0] as f64;
        let total = x + self.competitor;
        let share = if total > 0.0 { x / total } else { 0.0 };
        Operating {
            rates: vec![self.capacity * share],
            bottleneck: if total > 0.0 { 1.0 } else { 0.0 },
            shares: vec![share],
        }
    }

    fn name(&self) -> String {
        format!(
            "proportional share C={} y0={}",
            self.capacity, self.competitor
        )
    }
}

/// Two populations on a two-class network of single servers and delays. With `competitor`,
/// class 1 is an uncontrolled program holding a fixed number of tasks and the model serves one
/// pool; otherwise it serves two pools.
#[derive(Debug, Clone)]
pub struct Pair {
    name: String,
    net: TwoClass,
    bottleneck: usize,
    competitor: Option<usize>,
}

impl Pair {
    /// Two pools. `bottleneck` is the station whose utilization is reported.
    pub fn two_pools(
        name: impl Into<String>,
        stations: &[Shared],
        bottleneck: usize,
        n_max: usize,
    ) -> Self {
        Pair {
            name: name.into(),
            net: TwoClass::solve(stations, [n_max, n_max]),
            bottleneck,
            competitor: None,
        }
    }

    /// One pool (class 0) against `tasks` tasks of a competitor (class 1).
    pub fn competitor(
        name: impl Into<String>,
        stations: &[Shared],
        bottleneck: usize,
        n_max: usize,
        tasks: usize,
    ) -> Self {
        Pair {
            name: name.into(),
            net: TwoClass::solve(stations, [n_max, tasks]),
            bottleneck,
            competitor: Some(tasks),
        }
    }

    pub fn net(&self) -> &TwoClass {
        &self.net
    }
}

impl ThroughputModel for Pair {
    fn pools(&self) -> usize {
        if self.competitor.is_some() {
            1
        } else {
            2
        }
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let (i, j) = match self.competitor {
            Some(y) => (counts[0], y),
            None => (counts[0], counts[1]),
        };
        let x = self.net.throughput(i, j);
        let u = self.net.utilization(i, j, self.bottleneck);
        let pools = ThroughputModel::pools(self);
        Operating {
            rates: x[..pools].to_vec(),
            bottleneck: u[0] + u[1],
            shares: u[..pools].to_vec(),
        }
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

/// Any number of pools whose tasks make the same demands on one network (X6's fronts: same
/// code, same core, same web). A product-form network whose classes have equal demands at every
/// station behaves as one class of all their tasks, each class taking the total throughput in
/// proportion to its population: exact, not an approximation (the two-class case is checked
/// against [`TwoClass`]). So k pools cost one single-class solution.
#[derive(Debug, Clone)]
pub struct Alike {
    name: String,
    net: Network,
    bottleneck: usize,
    pools: usize,
}

impl Alike {
    /// `pools` pools on `stations`; populations are solved up to `n_max` tasks in all.
    pub fn new(name: impl Into<String>, stations: &[Station], pools: usize, n_max: usize) -> Self {
        let net = Network::solve(stations, n_max);
        let bottleneck = net.bottleneck();
        Alike {
            name: name.into(),
            net,
            bottleneck,
            pools,
        }
    }

    pub fn network(&self) -> &Network {
        &self.net
    }
}

impl ThroughputModel for Alike {
    fn pools(&self) -> usize {
        self.pools
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let total: usize = counts.iter().sum();
        let u = self.net.utilization(total, self.bottleneck);
        let part = |c: usize| {
            if total > 0 {
                c as f64 / total as f64
            } else {
                0.0
            }
        };
        Operating {
            rates: counts
                .iter()
                .map(|&c| self.net.throughput(total) * part(c))
                .collect(),
            bottleneck: u,
            shares: counts.iter().map(|&c| u * part(c)).collect(),
        }
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

/// Memory thrashing: past `threshold` tasks in flight (summed over pools), every rate and the
/// bottleneck's useful utilization fall by `factor` (17× in the spec's thrash model).
#[derive(Clone)]
pub struct Thrash {
    pub inner: Arc<dyn ThroughputModel>,
    pub threshold: usize,
    pub factor: f64,
}

impl ThroughputModel for Thrash {
    fn pools(&self) -> usize {
        self.inner.pools()
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let mut op = self.inner.at(counts);
        if counts.iter().sum::<usize>() > self.threshold {
            for r in &mut op.rates {
                *r /= self.factor;
            }
            for s in &mut op.shares {
                *s /= self.factor;
            }
            op.bottleneck /= self.factor;
        }
        op
    }

    /// Thrashing, the work goes on 1/factor as fast: the rest of the time every task waits for
    /// its pages to come back (refaults), so memory `full` (all non-idle tasks stalled), and
    /// with it `some`, is 1 − 1/factor (94% at 17×). Below the threshold nothing stalls.
    fn memory_stall(&self, counts: &[usize]) -> f64 {
        if counts.iter().sum::<usize>() > self.threshold {
            1.0 - 1.0 / self.factor
        } else {
            self.inner.memory_stall(counts)
        }
    }

    fn name(&self) -> String {
        format!(
            "{} thrashing /{} past {} tasks",
            self.inner.name(),
            self.factor,
            self.threshold
        )
    }
}

/// A disk whose throughput rises with queue depth, then falls past a knee as requests thrash
/// the heads: X(N) = C·N/(N + h) / (1 + (N/k)^γ). "Utilization" is X/C, the share of the
/// device's rated (or `io.max`-capped) throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Knee {
    pub capacity: f64,
    pub half: f64,
    pub knee: f64,
    pub power: f64,
}

impl Knee {
    pub fn throughput(&self, n: usize) -> f64 {
        let n = n as f64;
        self.capacity * n / (n + self.half) / (1.0 + (n / self.knee).powf(self.power))
    }
}

impl ThroughputModel for Knee {
    fn pools(&self) -> usize {
        1
    }

    fn at(&self, counts: &[usize]) -> Operating {
        let x = self.throughput(counts[0]);
        let u = x / self.capacity;
        Operating {
            rates: vec![x],
            bottleneck: u,
            shares: vec![u],
        }
    }

    fn name(&self) -> String {
        format!(
            "disk C={} h={} knee={} power={}",
            self.capacity, self.half, self.knee, self.power
        )
    }
}
