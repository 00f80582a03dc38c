//! Several TCC instances on one bottleneck (spec §6 item 4): the many-pool model, the driver as
//! the coordinating host (one lock, or shared epochs, telling each pool the others'
//! completions), and the targets on X6 with 2–4 fronts that the engine meets. The targets it misses are reported by `examples/tune_claims.rs` with
//! their numbers (`docs/tune.md` "Several instances on one bottleneck").

use std::time::Duration;

use tact_core::tune::Phase;
use tact_sim::tune::claims::median;
use tact_sim::tune::coord::{self, Fronts, EPOCH_LONG, EPOCH_SHORT};
use tact_sim::tune::driver::Turns;
use tact_sim::tune::model::Alike;
use tact_sim::tune::{run, Pair, Run, Shared, ThroughputModel};

const SEEDS: [u64; 3] = [1, 2, 3];

#[test]
fn alike_pools_are_the_two_class_network_and_split_by_count() {
    let shared = [
        Shared {
            queue: true,
            demand: [0.001, 0.001],
        },
        Shared {
            queue: true,
            demand: [0.0015, 0.0015],
        },
    ];
    let pair = Pair::two_pools("X6", &shared, 1, 64);
    let alike = Alike::new("X6", &coord::stations(), 2, 128);
    for counts in [[1, 0], [0, 3], [2, 2], [3, 7], [20, 9], [64, 64]] {
        let (a, b) = (pair.at(&counts), alike.at(&counts));
        for k in 0..2 {
            assert!((a.rates[k] - b.rates[k]).abs() <= 1e-9 * a.rates[k].max(1.0));
            assert!((a.shares[k] - b.shares[k]).abs() <= 1e-9);
        }
        assert!((a.bottleneck - b.bottleneck).abs() <= 1e-9, "{counts:?}");
    }
    // Four pools: the shares follow the counts, and web saturates at 1/1.5 ms.
    let four = Alike::new("X6 × 4", &coord::stations(), 4, 1024);
    let op = four.at(&[1, 2, 3, 250]);
    let total: f64 = op.rates.iter().sum();
    assert!((total - coord::CAPACITY).abs() < 1e-6 * coord::CAPACITY);
    assert!((op.rates[1] - 2.0 * op.rates[0]).abs() < 1e-9 * total);
    assert!((op.shares.iter().sum::<f64>() - op.bottleneck).abs() < 1e-12);
}

/// Each pool's cycles as (grant, entry into Steady) intervals, from the driver's grants.
fn cycles(out: &Run) -> Vec<Vec<(Duration, Duration)>> {
    out.pools
        .iter()
        .map(|p| {
            p.grants
                .iter()
                .map(|&g| {
                    let back = p.steady_counts().into_iter().find(|e| e.0 >= g);
                    (g, back.map_or(out.duration, |e| e.0))
                })
                .collect()
        })
        .collect()
}

/// The most pools exploring (not in Steady, waiting for a first turn aside) at once, and the
/// time two or more did; without turns, every pool explores from its start to each steady
/// entry and from each exit.
fn explorers(out: &Run) -> (usize, f64) {
    let mut most = 0;
    let mut together = 0.0;
    let turns = cycles(out);
    for s in &out.segments {
        let n = (0..s.phases.len())
            .filter(|&k| {
                let exploring = matches!(s.phases[k], Some(ph) if ph != Phase::Steady);
                let granted =
                    out.pools[k].grants.is_empty() || turns[k].iter().any(|&(g, _)| g <= s.from);
                exploring && granted
            })
            .count();
        most = most.max(n);
        if n >= 2 {
            together += s.length();
        }
    }
    (most, together)
}

#[test]
fn turn_taking_lets_one_pool_explore_at_a_time_and_every_pool_gets_turns() {
    for n in [2, 3, 4] {
        let independent = run(&coord::scenario(n, Turns::Off, false, 1));
        let (most, together) = explorers(&independent);
        // Without turns the pools' cycles overlap (so the check below can fail).
        assert!(most >= 2 && together > 10.0, "{n}: {most}, {together}");

        let sc = coord::scenario(n, Turns::Lock, false, 1);
        let out = run(&sc);
        assert_eq!(explorers(&out), (1, 0.0), "{n} pools");
        // No starvation: every pool gets the turn again and again.
        for (k, p) in out.pools.iter().enumerate() {
            let entries = p.steady_counts();
            assert!(entries.len() > coord::CYCLES, "{n}: pool {k}: {entries:?}");
        }
    }
}

#[test]
fn epochs_start_every_cycle_at_an_epoch() {
    for period in [EPOCH_SHORT, EPOCH_LONG] {
        let sc = coord::scenario(3, Turns::Epoch { period }, false, 2);
        let out = run(&sc);
        let mut starts = 0;
        for (k, p) in out.pools.iter().enumerate() {
            // Cycle 0 starts at the first epoch at or after the pool's start: its first
            // transition comes after that.
            let first =
                sc.pools[k].start.as_nanos().div_ceil(period.as_nanos()) * period.as_nanos();
            assert!(p.transitions[0].at.as_nanos() >= first, "pool {k}");
            for t in p.transitions.iter().filter(|t| t.from == Phase::Steady) {
                assert_eq!(t.at.as_nanos() % period.as_nanos(), 0, "pool {k}: {t:?}");
                starts += 1;
            }
        }
        assert!(starts >= 3 * 3, "{period:?}: {starts} cycles");
        // And without epochs, cycles start whenever they come due.
        let independent = run(&coord::scenario(3, Turns::Off, false, 2));
        assert!(independent
            .pools
            .iter()
            .flat_map(|p| &p.transitions)
            .any(|t| t.from == Phase::Steady && t.at.as_nanos() % period.as_nanos() != 0));
    }
}

fn seeds(n: usize, turns: Turns, hint: bool) -> Vec<Fronts> {
    SEEDS
        .iter()
        .map(|&s| coord::fronts(n, turns, hint, s))
        .collect()
}

fn passes(runs: &[Fronts], id_end: &str) -> bool {
    let checks = coord::checks(runs);
    let c = checks
        .iter()
        .find(|c| c.id.ends_with(id_end))
        .expect("a check with that id");
    c.pass
}

#[test]
fn turns_and_short_epochs_meet_the_targets_they_are_asserted_for() {
    // Spec §6 item 4 (median of three seeds, without and with the hint): Jain ≥ 0.95 for 2
    // fronts and ≥ 0.9 for 3 and 4; web at 85–95%; no escalation. Asserted where the engine
    // meets them (the exploring front judges the bottleneck's throughput, all fronts'
    // completions); the misses (escalation with 3–4 fronts, web with 4 fronts at 60 s epochs)
    // are reported with their numbers in `docs/tune.md`.
    let epochs = Turns::Epoch {
        period: EPOCH_SHORT,
    };
    let all: &[&str] = &[".jain", ".util", ".escalation"];
    let cases: [(usize, Turns, &[&str]); 6] = [
        (2, Turns::Lock, all),
        (3, Turns::Lock, &[".jain", ".util"]),
        (4, Turns::Lock, &[".jain", ".util"]),
        (2, epochs, all),
        (3, epochs, &[".jain", ".util"]),
        (4, epochs, &[".jain"]),
    ];
    for (n, turns, targets) in cases {
        for hint in [false, true] {
            let runs = seeds(n, turns, hint);
            for c in coord::checks(&runs) {
                if targets.iter().any(|t| c.id.ends_with(t)) {
                    assert!(c.pass, "{}: {}", c.id, c.measured);
                }
            }
        }
    }
}

#[test]
fn the_checks_judge_the_median_and_count_unfinished_runs_as_escalated() {
    let mut runs = seeds(2, Turns::Lock, false);
    for (r, j) in runs.iter_mut().zip([0.99, 0.5, 0.96]) {
        r.jain = j;
    }
    assert!(passes(&runs, ".jain"));
    runs[2].jain = 0.94;
    assert!(!passes(&runs, ".jain"));
    for r in runs.iter_mut() {
        r.escalation = Some(1.0);
    }
    assert!(passes(&runs, ".escalation"));
    runs[0].escalation = None;
    runs[1].escalation = None;
    assert!(!passes(&runs, ".escalation"));
    assert_eq!(median(&[1.0, f64::INFINITY, 2.0]), 2.0);
}

#[test]
fn a_latecomer_takes_its_fair_share_within_the_rig_s_window() {
    // The real rig's pair (`docs/tune.md` "On the real X6 rig"): X6 with its 5 ms delay, the
    // second pool joining one that settled alone at 5–8 workers, judged over the rig's 100 s
    // together. Judging only the bottleneck's throughput, the latecomer's add steps gained
    // nothing against a service already at ~90%: it stayed at 1–2 workers, 12.6–32.8% of the
    // pair's throughput (median 16.4%, 15.6% with the hint; the rig measured 16.9% and 13.8%).
    // With the fair-share rule (k = 2) its steps below half count by its own throughput.
    for hint in [false, true] {
        let runs: Vec<coord::Latecomer> = (1..=5)
            .map(|seed| coord::latecomer(Turns::Lock, hint, seed))
            .collect();
        let shares: Vec<f64> = runs.iter().map(|r| r.share).collect();
        let long: Vec<f64> = runs.iter().map(|r| r.share_long).collect();
        let m = median(&shares);
        assert!((0.4..=0.6).contains(&m), "hint {hint}: {runs:?}");
        assert!(
            (0.4..=0.6).contains(&median(&long)),
            "hint {hint}: {runs:?}"
        );
        // The latecomer's first cycle starts at once: a first pool that held the turn when it
        // joined ends its cycle at its next event (`Reason::Joined`). Before that rule, seed 5
        // waited 3.4 s (14.2 s with the hint) while the first pool finished its cycle.
        for r in &runs {
            let wait = r.wait.expect("the latecomer is granted a turn");
            assert!(wait < Duration::from_secs(1), "hint {hint}: {r:?}");
        }
        // And the pair does not escalate to get there: the service runs below where two
        // independent controllers put it (96.7%, 98.4% with the hint).
        let util = |runs: &[coord::Latecomer]| {
            median(&runs.iter().map(|r| r.utilization).collect::<Vec<_>>())
        };
        let independent: Vec<coord::Latecomer> = (1..=5)
            .map(|seed| coord::latecomer(Turns::Off, hint, seed))
            .collect();
        assert!(util(&runs) < util(&independent), "hint {hint}: {runs:?}");
    }
}

#[test]
fn a_latecomer_that_joins_during_a_cycle_gets_its_first_turn_at_once() {
    // The rig's failure with the hint: the second pool joined while the first explored, and
    // waited 63 s of its 100 s window for its first turn. Joining the simulator's pair 20–50 s
    // in (the first pool in its first cycles), it waited up to 70 s before (medians 32–57 s;
    // none when the first pool happened to be in Steady); the holder now ends its cycle at its
    // next event (`Reason::Joined`), so the grant follows at once.
    for hint in [false, true] {
        for join in coord::EARLY_JOINS {
            for seed in 1..=5 {
                let r = coord::latecomer_at(Turns::Lock, hint, seed, join);
                let wait = r.wait.expect("the latecomer is granted a turn");
                assert!(wait < Duration::from_secs(1), "{r:?}");
            }
        }
    }
}

#[test]
fn a_hinted_pair_splits_fairly_with_the_service_in_the_hint_s_band() {
    // With the hint, a first pool that held the service alone at its `util` (9 workers, 95%)
    // held that count beside the latecomer, which climbed to 2–4 workers: the service ran at
    // 97.5% (median, joining at 50 s) and the latecomer took 30.7% [24.7–52.3] of the pair's
    // throughput 10–100 s after the join. The crowding rule (a coordinated steady count above
    // its fair share of a bottleneck above `util` is judged again beside the others) brings
    // every join to a fair split with the service in the hint's band: median shares within
    // 40–60% over the rig's window and over 300 s, the service at 85–95%.
    let joins = coord::EARLY_JOINS.into_iter().chain([coord::RIG_JOIN]);
    for join in joins {
        let runs: Vec<coord::Latecomer> = (1..=5)
            .map(|seed| coord::latecomer_at(Turns::Lock, true, seed, join))
            .collect();
        let of = |f: fn(&coord::Latecomer) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        assert!((0.4..=0.6).contains(&of(|r| r.share)), "{runs:?}");
        assert!((0.4..=0.6).contains(&of(|r| r.share_long)), "{runs:?}");
        assert!((0.85..=0.95).contains(&of(|r| r.utilization)), "{runs:?}");
    }
    // Starting together, the second pool explores first (the first's cycle, just granted,
    // ends at its next event) while the first waits at its initial count through that whole
    // cycle (to 5–55 s): over 300 s the split is fair, over the rig's window the second's
    // share is at the edge (60.7% median; 60.1% without the hint).
    let together: Vec<coord::Latecomer> = (1..=5)
        .map(|seed| coord::latecomer_at(Turns::Lock, true, seed, Duration::ZERO))
        .collect();
    let long: Vec<f64> = together.iter().map(|r| r.share_long).collect();
    assert!((0.4..=0.6).contains(&median(&long)), "{together:?}");
}

#[test]
fn a_latecomer_told_the_others_completions_in_batches_takes_its_fair_share() {
    // The rig's host passes the others' completions in batches (`KEY.done` read before each of
    // a pool's own events and on its ticks), not one by one. TCC shares each batch's span
    // among its samples; when the first carried all of it, trimming read a latecomer with few
    // workers 10–20% above the bottleneck, the more the fewer its workers.
    for hint in [false, true] {
        let runs: Vec<coord::Latecomer> = (1..=5)
            .map(|seed| coord::latecomer_read_in_batches(hint, seed))
            .collect();
        let shares: Vec<f64> = runs.iter().map(|r| r.share).collect();
        assert!(
            (0.4..=0.6).contains(&median(&shares)),
            "hint {hint}: {runs:?}"
        );
    }
}

#[test]
fn without_the_hint_a_steady_first_pool_gives_back_after_a_join() {
    // Without the hint nothing made a first pool in Steady give back to a latecomer: its own
    // throughput, which change detection watches, held while the latecomer sat below its
    // share, and its timeout was minutes away. Joined at 50 s the latecomer took 41.6%
    // [29.9–46.8] of the pair's throughput 10–100 s after the join with the service at 96.8%;
    // at 80 s the service ran at 95.9%. The join rule (a coordinated steady count long beside
    // the newcomer at the first window that counts it starts a cycle) brings every join's
    // service into 85–95% and no seed's latecomer below a third (29.9–32.1% at 30–50 s before).
    let joins = coord::EARLY_JOINS.into_iter().chain([coord::RIG_JOIN]);
    for join in joins {
        let runs: Vec<coord::Latecomer> = (1..=5)
            .map(|seed| coord::latecomer_at(Turns::Lock, false, seed, join))
            .collect();
        let of = |f: fn(&coord::Latecomer) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        assert!((0.4..=0.6).contains(&of(|r| r.share)), "{runs:?}");
        assert!((0.4..=0.6).contains(&of(|r| r.share_long)), "{runs:?}");
        assert!((0.85..=0.95).contains(&of(|r| r.utilization)), "{runs:?}");
        assert!(runs.iter().all(|r| r.share > 1.0 / 3.0), "{runs:?}");
    }
}
