//! Golden hashes (spec concurrency.md §4): the (t, target) sequence of every pool
//! (`PoolRun::target_hash`) on the oracle scenarios the experiments use, seeds 1–3, pinned.
//! Runs are pure functions of their scenario, so a hash moves only when some decision does: a
//! target chosen differently, or at another time, by TCC, a baseline, the driver or a model.
//!
//! The scenarios are those of `tune::claims` and `tune::experiments` (Figure 5, X1–X4, X6, X7
//! and its Vegas baselines, tact's defaults with the bottleneck hint, warm start), shortened to
//! a few simulated minutes so that all of them take seconds in a debug build. Coordinated pools
//! (`Turns`) and X5 are left out.
//!
//! `TACT_GOLDEN_PRINT=1 cargo test -p tact-sim --test tune_golden -- --nocapture` prints every
//! hash as the `GOLDEN` table below; a mismatch prints it too.

use std::sync::Arc;
use std::time::Duration;

use tact_core::tune::{TuneParams, TABLE_1};
use tact_sim::tune::claims::{paper_params, CPUS, ENGINE_DEMAND, N_SOLVED};
use tact_sim::tune::driver::Latency;
use tact_sim::tune::experiments::{escalation_vm, x3_disk_curve, PARETO, SEEDS};
use tact_sim::tune::hint::ROW;
use tact_sim::tune::rows::mode_params;
use tact_sim::tune::{
    run, Closed, Input, Pair, PoolSpec, Scenario, Shared, Spacing, Station, Thrash,
    ThroughputModel, Topology,
};

/// (scenario, seed, one hash per pool), pinned from main at 4b605dd. Kept as the test prints
/// it, one line per run.
#[rustfmt::skip]
const GOLDEN: &[(&str, u64, &[u64])] = &[
    ("figure5_escalation_noisy", 1, &[0x9193a50dc73bb257]),
    ("figure5_escalation_noisy", 2, &[0x09346256fc0f9891]),
    ("figure5_escalation_noisy", 3, &[0x1f07fd26fdb8d0d7]),
    ("figure5_enrichment_noise_free", 1, &[0x1129742b3c8fa453]),
    ("figure5_enrichment_noise_free", 2, &[0x1129742b3c8fa453]),
    ("figure5_enrichment_noise_free", 3, &[0x1129742b3c8fa453]),
    ("x1_cpu", 1, &[0x93c4e974c9525d21]),
    ("x1_cpu", 2, &[0xdbd59b9af582da59]),
    ("x1_cpu", 3, &[0x8d0623fcd1283a2b]),
    ("x1_blocks", 1, &[0xd39f73ca7d8fa354]),
    ("x1_blocks", 2, &[0x21c47ef631eefb06]),
    ("x1_blocks", 3, &[0xb6579b12dfb09a36]),
    ("x1_defaults_hint", 1, &[0x0e55e28611b253fb]),
    ("x1_defaults_hint", 2, &[0xcb4161b6e34d6335]),
    ("x1_defaults_hint", 3, &[0xa83a7b1e4955c9b0]),
    ("x1_warm_fast", 1, &[0x233f33e57471693b]),
    ("x1_warm_fast", 2, &[0x64f8a34edf49fa28]),
    ("x1_warm_fast", 3, &[0x24f659b3aa54ee76]),
    ("x2_memory_psi", 1, &[0x43a9e1644efc79f9]),
    ("x2_memory_psi", 2, &[0x36de3afecf032f7e]),
    ("x2_memory_psi", 3, &[0xda5a64c5fde5796e]),
    ("x3_disk", 1, &[0x75bf3976f311f6a4]),
    ("x3_disk", 2, &[0x0cb9159a68f9960e]),
    ("x3_disk", 3, &[0x6f33d7a2f5bf5682]),
    ("x4_network", 1, &[0x0d351f89cd31e033]),
    ("x4_network", 2, &[0xe0826fba79a95f67]),
    ("x4_network", 3, &[0x61c846af919428d5]),
    ("x6_independent", 1, &[0x3d222aa6e493d391, 0xf3ead6fcf45d1f74]),
    ("x6_independent", 2, &[0x808ffa00c4c8579c, 0x68e0954f7e2e4a64]),
    ("x6_independent", 3, &[0x569ac4e31f510be9, 0x4cfad6e5f31c95c4]),
    ("x7_row_p10", 1, &[0x665acb1ca6146acb]),
    ("x7_row_p10", 2, &[0x6d5448fda7115f7e]),
    ("x7_row_p10", 3, &[0xba04b1c0ce80644f]),
    ("x7_row_p50", 1, &[0x085df63e60b7634d]),
    ("x7_row_p50", 2, &[0xc8d0358f8037ac32]),
    ("x7_row_p50", 3, &[0xb4397cbf214b60aa]),
    ("x7_vegas_plus", 1, &[0xc79fb36375fc8115]),
    ("x7_vegas_plus", 2, &[0x45c186d0a6993215]),
    ("x7_vegas_plus", 3, &[0x297b57351af89c25]),
    ("x7_vegas_plus_plus", 1, &[0x9a3d049c7e45e077]),
    ("x7_vegas_plus_plus", 2, &[0x6f0a1a2583831570]),
    ("x7_vegas_plus_plus", 3, &[0xe49cc401618f99c1]),
];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A scenario: its name and the hashes of its pools for a seed.
type Case = (&'static str, fn(u64) -> Vec<u64>);

const CASES: [Case; 14] = [
    ("figure5_escalation_noisy", figure5_escalation_noisy),
    (
        "figure5_enrichment_noise_free",
        figure5_enrichment_noise_free,
    ),
    ("x1_cpu", x1_cpu),
    ("x1_blocks", x1_blocks),
    ("x1_defaults_hint", x1_defaults_hint),
    ("x1_warm_fast", x1_warm_fast),
    ("x2_memory_psi", x2_memory_psi),
    ("x3_disk", x3_disk),
    ("x4_network", x4_network),
    ("x6_independent", x6_independent),
    ("x7_row_p10", x7_row_p10),
    ("x7_row_p50", x7_row_p50),
    ("x7_vegas_plus", x7_vegas_plus),
    ("x7_vegas_plus_plus", x7_vegas_plus_plus),
];

fn hashes(sc: &Scenario) -> Vec<u64> {
    run(sc).pools.iter().map(|p| p.target_hash()).collect()
}

/// The experiments' runs on the spec's 2-core VM: Pareto completions, 2 workers to start.
fn vm(model: Arc<dyn ThroughputModel>, seed: u64, duration: Duration) -> Scenario {
    Scenario {
        spacing: PARETO,
        seed,
        ..Scenario::new(model, paper_params(2, seed), duration)
    }
}

/// Figure 5's event escalation at r = 1 (8 CPUs per station), `claims::Protocol::noisy`.
fn figure5_escalation_noisy(seed: u64) -> Vec<u64> {
    let model = Closed::topology(
        Topology::EventEscalation,
        CPUS,
        ENGINE_DEMAND,
        1.0,
        N_SOLVED,
    );
    hashes(&Scenario {
        seed,
        ..Scenario::new(Arc::new(model), paper_params(CPUS, seed), secs(240))
    })
}

/// Figure 5's event enrichment at r = 1, `claims::Protocol::noise_free`: 5 s steady states,
/// nine cycles. Without noise the seed changes nothing: one hash for all three.
fn figure5_enrichment_noise_free(seed: u64) -> Vec<u64> {
    let model = Closed::topology(
        Topology::EventEnrichment,
        CPUS,
        ENGINE_DEMAND,
        1.0,
        N_SOLVED,
    );
    let params = TuneParams {
        steady_min: secs(5),
        steady_max: secs(5),
        ..paper_params(CPUS, seed)
    };
    hashes(&Scenario {
        spacing: Spacing::Deterministic,
        seed,
        stop_after_steady: Some(9),
        ..Scenario::new(Arc::new(model), params, secs(3600))
    })
}

fn x1_model() -> Arc<dyn ThroughputModel> {
    Arc::new(Closed::new(
        "X1",
        &escalation_vm(0.001, 0.0013, 0.005),
        N_SOLVED,
    ))
}

fn x1_cpu(seed: u64) -> Vec<u64> {
    hashes(&vm(x1_model(), seed, secs(240)))
}

/// X1 with input in blocks of 2,500 tasks every 5 s (the pool idles between them).
fn x1_blocks(seed: u64) -> Vec<u64> {
    let mut sc = vm(x1_model(), seed, secs(240));
    sc.pools[0].input = Input::Blocks {
        size: 2500,
        every: secs(5),
    };
    hashes(&sc)
}

/// X1's VM under tact's defaults (slow start, fast mode) with the bottleneck hint (`tune::hint`).
fn x1_defaults_hint(seed: u64) -> Vec<u64> {
    let mut sc = vm(x1_model(), seed, secs(240));
    sc.pools[0].params = mode_params(true, ROW, seed);
    sc.pools[0].hint = true;
    hashes(&sc)
}

/// X1 warm-started at 7 workers in fast mode (`tune::convergence`).
fn x1_warm_fast(seed: u64) -> Vec<u64> {
    let mut sc = vm(x1_model(), seed, secs(240));
    sc.pools[0].params = TuneParams {
        fast: true,
        warm: Some(7),
        ..paper_params(2, seed)
    };
    hashes(&sc)
}

/// X2 with PSI: web thrashes past two thirds of the count in use at the switch, the host
/// reports memory pressure and TCC acts on it (`experiments::x2_psi`).
fn x2_memory_psi(seed: u64) -> Vec<u64> {
    let stations = [
        Station::Queue {
            servers: 8,
            demand: 0.008,
        },
        Station::Queue {
            servers: 8,
            demand: 0.001,
        },
        Station::Delay { demand: 0.05 },
    ];
    let healthy: Arc<dyn ThroughputModel> = Arc::new(Closed::new("X2", &stations, N_SOLVED));
    let (switch, end) = (secs(150), secs(300));
    let params = TuneParams {
        psi: true,
        ..paper_params(CPUS, seed)
    };
    let base = Scenario {
        spacing: PARETO,
        seed,
        pressure: true,
        ..Scenario::new(healthy.clone(), params, end)
    };
    let probe = run(&Scenario {
        duration: switch,
        ..base.clone()
    });
    let count_before = probe.pools[0].targets.last().map_or(CPUS, |t| t.1);
    let thrash: Arc<dyn ThroughputModel> = Arc::new(Thrash {
        inner: healthy,
        threshold: count_before * 2 / 3,
        factor: 17.0,
    });
    hashes(&Scenario {
        changes: vec![(switch, thrash)],
        ..base
    })
}

/// X3: CPU stations, then at the switch a disk with a queue-depth knee.
fn x3_disk(seed: u64) -> Vec<u64> {
    let stations = [
        Station::Queue {
            servers: 8,
            demand: 0.001,
        },
        Station::Queue {
            servers: 8,
            demand: 0.002,
        },
        Station::Delay { demand: 0.02 },
    ];
    let cpu: Arc<dyn ThroughputModel> = Arc::new(Closed::new("X3", &stations, N_SOLVED));
    let disk: Arc<dyn ThroughputModel> = Arc::new(x3_disk_curve());
    hashes(&Scenario {
        spacing: PARETO,
        seed,
        changes: vec![(secs(120), disk)],
        ..Scenario::new(cpu, paper_params(CPUS, seed), secs(300))
    })
}

/// X4: a 50 Mbit/s link carrying 64 KiB replies between front and web.
fn x4_network(seed: u64) -> Vec<u64> {
    let stations = [
        Station::Queue {
            servers: 1,
            demand: 0.0015,
        },
        Station::Queue {
            servers: 1,
            demand: 64.0 * 1024.0 * 8.0 / 50e6,
        },
        Station::Queue {
            servers: 1,
            demand: 0.001,
        },
    ];
    hashes(&vm(
        Arc::new(Closed::new("X4", &stations, N_SOLVED)),
        seed,
        secs(600),
    ))
}

/// X6 without coordination: two fronts on one web, the second starting later.
fn x6_independent(seed: u64) -> Vec<u64> {
    let stations = [
        Shared {
            queue: true,
            demand: [0.001, 0.001],
        },
        Shared {
            queue: true,
            demand: [0.0015, 0.0015],
        },
    ];
    let model = Pair::two_pools("X6", &stations, 1, 256);
    let mut sc = vm(Arc::new(model), seed, secs(360));
    sc.pools.push(PoolSpec {
        start: secs(120),
        ..PoolSpec::new(paper_params(2, seed ^ 0x5EED))
    });
    hashes(&sc)
}

fn x7_model() -> Arc<dyn ThroughputModel> {
    Arc::new(Closed::new(
        "X7",
        &escalation_vm(0.001, 0.002, 0.025),
        N_SOLVED,
    ))
}

/// 8 minutes: the first row's steps all run to their 30 s dwell cap for the first 6, the same
/// in every seed.
fn x7_row(seed: u64, row: (f64, f64, f64)) -> Vec<u64> {
    let mut sc = vm(x7_model(), seed, secs(480));
    sc.pools[0].params = paper_params(2, seed).with_row(row);
    hashes(&sc)
}

/// X7 with Table 1's first and last rows.
fn x7_row_p10(seed: u64) -> Vec<u64> {
    x7_row(seed, TABLE_1[0])
}

fn x7_row_p50(seed: u64) -> Vec<u64> {
    x7_row(seed, TABLE_1[8])
}

/// X7's latency baselines: completions carry latencies, another policy runs the pool.
fn x7_vegas(seed: u64, spec: String) -> Vec<u64> {
    let mut sc = vm(x7_model(), seed, secs(240));
    sc.latency = Some(Latency {
        fixed: Duration::from_secs_f64(0.025),
    });
    sc.pools[0].policy = Some(spec);
    hashes(&sc)
}

fn x7_vegas_plus(seed: u64) -> Vec<u64> {
    x7_vegas(seed, "vegas+".to_string())
}

fn x7_vegas_plus_plus(seed: u64) -> Vec<u64> {
    let x1 = x7_model().at(&[1]).rates[0];
    x7_vegas(seed, format!("vegas++:x1={x1}"))
}

/// Every case and seed, computed on as many threads as the machine gives.
fn compute() -> Vec<(&'static str, u64, Vec<u64>)> {
    let jobs: Vec<(Case, u64)> = CASES
        .iter()
        .flat_map(|&case| SEEDS.iter().map(move |&seed| (case, seed)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = jobs.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|&((name, f), seed)| (name, seed, f(seed)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a scenario panicked"))
            .collect()
    })
}

/// The computed hashes as a `GOLDEN` table to paste over the one above.
fn table(got: &[(&str, u64, Vec<u64>)]) -> String {
    let mut out = String::from("const GOLDEN: &[(&str, u64, &[u64])] = &[\n");
    for (name, seed, hs) in got {
        let hs: Vec<String> = hs.iter().map(|h| format!("0x{h:016x}")).collect();
        out.push_str(&format!(
            "    (\"{name}\", {seed}, &[{}]),\n",
            hs.join(", ")
        ));
    }
    out.push_str("];\n");
    out
}

#[test]
fn target_sequences_match_their_pinned_hashes() {
    let got = compute();
    let pinned = |name: &str, seed: u64| {
        GOLDEN
            .iter()
            .find(|g| g.0 == name && g.1 == seed)
            .map(|g| g.2)
    };
    let mut changed: Vec<String> = got
        .iter()
        .filter(|(name, seed, hs)| pinned(name, *seed) != Some(hs.as_slice()))
        .map(|(name, seed, _)| format!("{name} seed {seed}"))
        .collect();
    changed.extend(
        GOLDEN
            .iter()
            .filter(|g| {
                !got.iter()
                    .any(|(name, seed, _)| *name == g.0 && *seed == g.1)
            })
            .map(|g| format!("{} seed {} (pinned, no longer run)", g.0, g.1)),
    );
    // A mismatch prints the table anyway.
    if changed.is_empty() && std::env::var_os("TACT_GOLDEN_PRINT").is_some_and(|v| v == "1") {
        println!("{}", table(&got));
    }
    assert!(
        changed.is_empty(),
        "target hashes changed: {}.\n\nA changed hash means the controller's decisions changed \
         on that scenario: some target was chosen differently, or at another time (TCC, a \
         baseline, the driver or a model changed). If the change was meant, review its effect \
         (the tune_x_*, tune_figure5 and tune_hint tests, docs/tune.md's figures), then re-pin: \
         paste this over GOLDEN in crates/tact-sim/tests/tune_golden.rs:\n\n{}",
        changed.join(", "),
        table(&got)
    );
}
