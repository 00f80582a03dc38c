//! Exact solutions of closed product-form queueing networks.
//!
//! [`Network`] solves one class of N circulating tasks over delay stations and c-server FCFS
//! stations with exponential service, for every N up to a bound, with Buzen's convolution
//! algorithm over the product-form factors (in logs, with demands scaled to the bottleneck). [`mva`] is the textbook exact mean value analysis
//! recursion for the same networks (Reiser & Lavenberg; c-server stations through the marginal
//! probabilities of their first c − 1 queue lengths). Both are exact, but the recursion's p(0)
//! loses all precision once a multi-server station nears saturation (at c = 8 and two balanced
//! stations it returns X(80) = −271 tasks/s); it serves as the independent check of
//! [`Network`] where it is stable: single-server networks at every N, multi-server ones at
//! small N. [`TwoClass`] solves two classes over delay and single-server stations by exact MVA,
//! which is stable there. Demands are seconds of service per task cycle (visits × service
//! time); throughputs are tasks per second.

use serde::{Deserialize, Serialize};

/// One station of a closed network.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Station {
    /// Infinite servers: a task spends `demand` here regardless of the others (think time,
    /// network delay, every non-bottleneck resource lumped together).
    Delay { demand: f64 },
    /// `servers` identical servers in front of one FCFS queue.
    Queue { servers: usize, demand: f64 },
}

impl Station {
    pub fn demand(&self) -> f64 {
        match *self {
            Station::Delay { demand } | Station::Queue { demand, .. } => demand,
        }
    }

    /// Servers of a queue; None for a delay.
    pub fn servers(&self) -> Option<usize> {
        match *self {
            Station::Delay { .. } => None,
            Station::Queue { servers, .. } => Some(servers.max(1)),
        }
    }

    /// ln of the product-form factor Π_{j ≤ m} d/α(j) for m = 0..=n, with α(j) = min(j, c) for a
    /// queue and j for a delay.
    fn log_factors(&self, scale: f64, n: usize) -> Vec<f64> {
        let d = (self.demand() / scale).ln();
        let mut f = vec![0.0; n + 1];
        for m in 1..=n {
            let alpha = match self.servers() {
                None => m,
                Some(c) => m.min(c),
            };
            f[m] = f[m - 1] + d - (alpha as f64).ln();
        }
        f
    }
}

/// The solution of a single-class network for every population 0..=n_max.
#[derive(Debug, Clone)]
pub struct Network {
    stations: Vec<Station>,
    /// x[n]: throughput with n tasks.
    x: Vec<f64>,
}

impl Network {
    pub fn solve(stations: &[Station], n_max: usize) -> Network {
        let active: Vec<&Station> = stations.iter().filter(|s| s.demand() > 0.0).collect();
        // Demands in units of the largest per-server demand of a queue keep the bottleneck's
        // factors constant past c and every other queue's decaying; delays peak and decay.
        let per_server = |s: &&Station| s.servers().map(|c| s.demand() / c as f64);
        let scale = match active.iter().filter_map(per_server).reduce(f64::max) {
            Some(v) => v,
            None => active.iter().map(|s| s.demand()).fold(0.0, f64::max),
        };
        let mut x = vec![0.0; n_max + 1];
        if active.is_empty() || n_max == 0 {
            for v in x.iter_mut().skip(1) {
                *v = f64::INFINITY;
            }
            return Network {
                stations: stations.to_vec(),
                x,
            };
        }
        // Convolution in the log domain: a delay with a large demand has factors spanning more
        // than f64's range (d^m/m! peaks near m = d).
        let mut g = active[0].log_factors(scale, n_max);
        let mut terms = Vec::with_capacity(n_max + 1);
        for s in &active[1..] {
            let f = s.log_factors(scale, n_max);
            let next: Vec<f64> = (0..=n_max)
                .map(|m| {
                    terms.clear();
                    terms.extend((0..=m).map(|a| g[a] + f[m - a]));
                    let top = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    top + terms.iter().map(|t| (t - top).exp()).sum::<f64>().ln()
                })
                .collect();
            g = next;
        }
        for n in 1..=n_max {
            x[n] = (g[n - 1] - g[n]).exp() / scale;
        }
        Network {
            stations: stations.to_vec(),
            x,
        }
    }

    pub fn stations(&self) -> &[Station] {
        &self.stations
    }

    pub fn n_max(&self) -> usize {
        self.x.len() - 1
    }

    /// X(n), tasks per second (n is clamped to the solved range).
    pub fn throughput(&self, n: usize) -> f64 {
        self.x[n.min(self.n_max())]
    }

    /// Utilization of station k: X·D/c for a queue, X·D (mean busy servers) for a delay.
    pub fn utilization(&self, n: usize, k: usize) -> f64 {
        let s = self.stations[k];
        self.throughput(n) * s.demand() / s.servers().unwrap_or(1) as f64
    }

    /// The queue station with the largest demand per server (the first of equals).
    pub fn bottleneck(&self) -> usize {
        let mut best = 0;
        let mut load = f64::NEG_INFINITY;
        for (k, s) in self.stations.iter().enumerate() {
            if let Some(c) = s.servers() {
                let l = s.demand() / c as f64;
                if l > load {
                    load = l;
                    best = k;
                }
            }
        }
        best
    }
}

/// Exact MVA (the recursion): X(n) for n = 0..=n_max, and the mean queue lengths at n_max.
/// Unstable for multi-server stations near saturation; see the module documentation.
pub fn mva(stations: &[Station], n_max: usize) -> (Vec<f64>, Vec<f64>) {
    let k = stations.len();
    let mut q = vec![0.0; k];
    // p[i][j]: P(j tasks at station i), j < servers, at the previous population.
    let mut p: Vec<Vec<f64>> = stations
        .iter()
        .map(|s| {
            let mut v = vec![0.0; s.servers().unwrap_or(1)];
            v[0] = 1.0;
            v
        })
        .collect();
    let mut x = vec![0.0];
    let mut r = vec![0.0; k];
    for n in 1..=n_max {
        for (i, s) in stations.iter().enumerate() {
            r[i] = match s.servers() {
                None => s.demand(),
                Some(c) => {
                    let idle: f64 = (0..c - 1).map(|j| (c - 1 - j) as f64 * p[i][j]).sum();
                    s.demand() / c as f64 * (1.0 + q[i] + idle)
                }
            };
        }
        let xn = n as f64 / r.iter().sum::<f64>();
        for (i, s) in stations.iter().enumerate() {
            q[i] = xn * r[i];
            if let Some(c) = s.servers() {
                let load = xn * s.demand();
                let mut next = vec![0.0; c];
                for j in 1..c {
                    next[j] = load / j as f64 * p[i][j - 1];
                }
                let weighted: f64 = (1..c).map(|j| (c - j) as f64 * next[j]).sum();
                next[0] = 1.0 - (load + weighted) / c as f64;
                p[i] = next;
            }
        }
        x.push(xn);
    }
    (x, q)
}

/// Seidmann's approximation: a c-server station with demand D becomes a single server with
/// demand D/c followed by a delay of D(c − 1)/c. Used to check [`Network`].
pub fn seidmann(stations: &[Station]) -> Vec<Station> {
    let mut out = Vec::new();
    for s in stations {
        match *s {
            Station::Queue { servers, demand } if servers > 1 => {
                let c = servers as f64;
                out.push(Station::Queue {
                    servers: 1,
                    demand: demand / c,
                });
                out.push(Station::Delay {
                    demand: demand * (c - 1.0) / c,
                });
            }
            other => out.push(other),
        }
    }
    out
}

/// A station of a two-class network: per-class demands.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    /// Single server (processor sharing or FCFS with equal service) when true, delay otherwise.
    pub queue: bool,
    pub demand: [f64; 2],
}

/// Exact two-class MVA over delay and single-server stations, for populations up to
/// (`n_max[0]`, `n_max[1]`).
#[derive(Debug, Clone)]
pub struct TwoClass {
    stations: Vec<Shared>,
    n_max: [usize; 2],
    /// x[(i, j)]: per-class throughput with i tasks of class 0 and j of class 1.
    x: Vec<[f64; 2]>,
}

impl TwoClass {
    pub fn solve(stations: &[Shared], n_max: [usize; 2]) -> TwoClass {
        let k = stations.len();
        let width = n_max[1] + 1;
        let idx = |i: usize, j: usize| i * width + j;
        let cells = (n_max[0] + 1) * width;
        let mut q = vec![0.0; cells * k];
        let mut x = vec![[0.0; 2]; cells];
        for i in 0..=n_max[0] {
            for j in 0..=n_max[1] {
                if i == 0 && j == 0 {
                    continue;
                }
                let pop = [i, j];
                let mut xs = [0.0; 2];
                let mut r = vec![[0.0; 2]; k];
                for c in 0..2 {
                    if pop[c] == 0 {
                        continue;
                    }
                    let prev = if c == 0 { idx(i - 1, j) } else { idx(i, j - 1) };
                    let mut total = 0.0;
                    for (s, st) in stations.iter().enumerate() {
                        let d = st.demand[c];
                        r[s][c] = if st.queue {
                            d * (1.0 + q[prev * k + s])
                        } else {
                            d
                        };
                        total += r[s][c];
                    }
                    xs[c] = if total > 0.0 {
                        pop[c] as f64 / total
                    } else {
                        f64::INFINITY
                    };
                }
                let cell = idx(i, j);
                for s in 0..k {
                    q[cell * k + s] = xs[0] * r[s][0] + xs[1] * r[s][1];
                }
                x[cell] = xs;
            }
        }
        TwoClass {
            stations: stations.to_vec(),
            n_max,
            x,
        }
    }

    pub fn stations(&self) -> &[Shared] {
        &self.stations
    }

    /// Per-class throughput (populations clamped to the solved range).
    pub fn throughput(&self, i: usize, j: usize) -> [f64; 2] {
        let i = i.min(self.n_max[0]);
        let j = j.min(self.n_max[1]);
        self.x[i * (self.n_max[1] + 1) + j]
    }

    /// Per-class utilization of station s (busy fraction of the server, or mean busy count of a
    /// delay).
    pub fn utilization(&self, i: usize, j: usize, s: usize) -> [f64; 2] {
        let x = self.throughput(i, j);
        let d = self.stations[s].demand;
        [x[0] * d[0], x[1] * d[1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(servers: usize, demand: f64) -> Station {
        Station::Queue { servers, demand }
    }

    #[test]
    fn matches_the_mva_recursion_where_it_is_stable() {
        // Single servers: the recursion is stable at every population.
        let single = [q(1, 0.001), q(1, 0.0013), Station::Delay { demand: 0.005 }];
        let net = Network::solve(&single, 400);
        let (x, _) = mva(&single, 400);
        for (n, &xn) in x.iter().enumerate().skip(1) {
            assert!((net.throughput(n) - xn).abs() < 1e-9 * xn, "n={n}");
        }
        // Eight servers: up to 30 tasks, before the recursion's p(0) degrades.
        for stations in [
            vec![q(8, 0.01), Station::Delay { demand: 0.01 }],
            vec![q(8, 0.01), q(8, 0.01)],
            vec![q(8, 0.008), q(8, 0.012), q(8, 0.012)],
        ] {
            let net = Network::solve(&stations, 30);
            let (x, _) = mva(&stations, 30);
            for (n, &xn) in x.iter().enumerate().skip(1) {
                assert!(
                    (net.throughput(n) - xn).abs() < 1e-9 * xn,
                    "{stations:?} n={n}: {} vs {xn}",
                    net.throughput(n),
                );
            }
        }
    }

    #[test]
    fn the_recursion_breaks_down_where_convolution_holds() {
        // Why Network does not use the recursion: two balanced 8-server stations, 80 tasks.
        let stations = [q(8, 0.01), q(8, 0.01)];
        let (x, _) = mva(&stations, 80);
        let net = Network::solve(&stations, 1024);
        assert!(x[80] < 0.0, "the recursion gave {}", x[80]);
        // The convolution stays between the asymptotes and climbs towards c/D = 800.
        for n in 1..1024 {
            let v = net.throughput(n);
            assert!(v > 0.0 && v <= 800.0 + 1e-9, "n={n}: {v}");
            assert!(net.throughput(n + 1) >= v - 1e-9 * v, "n={n}");
        }
        assert!(net.throughput(1024) > 790.0);
    }

    #[test]
    fn limits_and_laws() {
        let stations = [q(8, 0.01), Station::Delay { demand: 0.02 }];
        let net = Network::solve(&stations, 400);
        // One task: no queueing.
        assert!((net.throughput(1) - 1.0 / 0.03).abs() < 1e-9);
        // Saturation: X → c/D.
        assert!((net.throughput(400) - 800.0).abs() < 1e-6);
        for n in 1..400 {
            assert!(net.throughput(n + 1) >= net.throughput(n) * (1.0 - 1e-12));
            assert!(net.throughput(n) <= (n as f64 / 0.03).min(800.0) * (1.0 + 1e-12));
        }
        assert_eq!(net.bottleneck(), 0);
        // Little's law in the recursion, at a population where it is stable.
        let (x, queues) = mva(&stations, 20);
        assert!((queues.iter().sum::<f64>() - 20.0).abs() < 1e-9);
        assert!((x[20] - net.throughput(20)).abs() < 1e-9 * x[20]);
        // Machine-repairman at r = 0 (no delay) saturates at N = c.
        let bare = Network::solve(&[q(8, 0.01), Station::Delay { demand: 0.0 }], 20);
        assert!((bare.throughput(8) - 800.0).abs() < 1e-9);
        assert!((bare.throughput(4) - 400.0).abs() < 1e-9);
    }

    #[test]
    fn seidmann_is_close() {
        let stations = [q(8, 0.01), q(8, 0.01)];
        let exact = Network::solve(&stations, 400);
        let approx = Network::solve(&seidmann(&stations), 400);
        let mut worst: f64 = 0.0;
        for n in 1..=400 {
            let (e, a) = (exact.throughput(n), approx.throughput(n));
            worst = worst.max((e - a).abs() / e);
        }
        // Seidmann's error peaks near the knee and vanishes at both ends.
        assert!(worst < 0.15, "worst relative error {worst}");
        assert!((exact.throughput(1) - approx.throughput(1)).abs() < 1e-9);
        assert!((exact.throughput(400) - approx.throughput(400)).abs() < 0.01 * 800.0);
    }

    #[test]
    fn two_class_reduces_to_one_class() {
        let net = [
            Shared {
                queue: true,
                demand: [0.001, 0.001],
            },
            Shared {
                queue: true,
                demand: [0.0013, 0.0013],
            },
            Shared {
                queue: false,
                demand: [0.005, 0.005],
            },
        ];
        let two = TwoClass::solve(&net, [30, 30]);
        let one = Network::solve(
            &[q(1, 0.001), q(1, 0.0013), Station::Delay { demand: 0.005 }],
            60,
        );
        for (i, j) in [(5, 0), (0, 9), (7, 7), (12, 20), (30, 30)] {
            let x = two.throughput(i, j);
            let total = one.throughput(i + j);
            assert!(((x[0] + x[1]) - total).abs() < 1e-9 * total, "({i}, {j})");
            // Identical classes share in proportion to their populations.
            assert!((x[0] - total * i as f64 / (i + j) as f64).abs() < 1e-9 * total);
        }
    }
}
