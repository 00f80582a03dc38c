//! The automatic PI (`--preempt auto`, spec idletime.md section 8.1, issue 5) against the best
//! fixed PI on the simulated device, at every intensity of the bench's grid (bench/idle), for the
//! bench's disk (τ = 20.45 ms) and network (τ = 1.38 ms per 16 KiB request) service times.
//!
//! The best fixed PI is the one with the most bg (as a share of the capacity fg leaves idle)
//! among those that keep fg at 90% of its performance alone (throughput, and mean response
//! time; see `Perf::keeps_fg`), over a sweep every τ/8. The tuner starts from its own p₀ (2·τ)
//! with the default budget, and is measured over a 10 s run (100 cycles of t_max = 100 ms, the
//! length of a bench point), its transient included: it must keep fg at 90% and come within 5
//! points of that bg.
//!
//! The gate is start-anchored, as tact's watcher effectively is: it sees fg I/O in the device's
//! counters only when a request completes, so its PI runs from the completion before the request
//! in service, which is that request's start. Service times vary ±10% (seeded), so that bursts
//! do not lock to the cycle.
//!
//! Two cells fall outside, each pinned by its own test below: i = 0.9 on the disk, where fg
//! alone does r_max and leaves nothing idle, and i = 0.7 on the disk, where the best fixed PI is
//! a ledge 2 ms wide.

use std::time::Duration;

use tact_core::idle::{Anchor, DEFAULT_BETA};
use tact_sim::idle::claims::{self, Tuning, FG_FLOOR, MIN_IDLE};
use tact_sim::idle::Rig;

fn rig(tau_us: u64) -> Rig {
    Rig {
        tau: Duration::from_micros(tau_us),
        jitter: 0.1,
        seed: 3,
        cycles: 100,
        ..Rig::disk()
    }
}

const DISK_US: u64 = 20_450;
const NET_US: u64 = 1_380;

fn check(t: &Tuning) {
    assert!(t.idle >= MIN_IDLE, "fg leaves capacity idle: {t:?}");
    assert!(t.auto.keeps_fg(FG_FLOOR), "fg: {t:?}");
    assert!(
        t.shortfall() <= 0.05,
        "bg: auto {:.3} of idle (mean p {:.1} ms) vs best fixed {:.3} at {:.2} ms: {t:?}",
        t.auto.harvest(),
        t.auto_mean_pi_ms,
        t.best.harvest(),
        t.best_pi_ms
    );
}

#[test]
fn auto_pi_is_within_5_points_of_the_best_fixed_pi_on_the_disk() {
    for i in [0.1, 0.3, 0.5] {
        check(&claims::tuning(
            &rig(DISK_US),
            Anchor::Start,
            i,
            DEFAULT_BETA,
        ));
    }
}

/// On throughput alone, i = 0.1 on the disk is a miss by design: fg's one request per cycle
/// completes however long it waits, so p = 0 keeps 100% of fg's throughput and gives bg all the
/// idle capacity, at 1.5× fg's response time. The tuner sees every fg request wait for bg and
/// lengthens p.
#[test]
fn at_intensity_0_1_throughput_alone_cannot_see_what_the_tuner_prevents() {
    let r = rig(DISK_US);
    let t = claims::tuning(&r, Anchor::Start, 0.1, DEFAULT_BETA);
    let pq = claims::sweep(&r, Anchor::Start, 0.1, &[Duration::ZERO]).points[0].sim;
    assert!(pq.fg_n >= 0.99 && pq.harvest() >= 0.99, "{pq:?}");
    assert!(pq.latency_x > 1.4, "{pq:?}");
    assert!(t.auto.harvest() < 0.2 && t.auto.latency_x < 1.15, "{t:?}");
}

#[test]
fn auto_pi_is_within_5_points_of_the_best_fixed_pi_on_the_network() {
    for i in [0.2, 0.4, 0.6, 0.8] {
        let t = claims::tuning(&rig(NET_US), Anchor::Start, i, DEFAULT_BETA);
        check(&t);
        // Bursts of 14 or more requests: bg takes nearly all the idle capacity.
        assert!(t.auto.harvest() >= 0.9, "{t:?}");
    }
}

/// At i = 0.9 a burst of five 20.45 ms requests fills the 90 ms window: fg alone does r_max.
#[test]
fn the_disk_leaves_nothing_idle_at_intensity_0_9() {
    let t = claims::tuning(&rig(DISK_US), Anchor::Start, 0.9, DEFAULT_BETA);
    assert!(t.idle < MIN_IDLE, "{t:?}");
    assert!(t.auto.fg_n >= FG_FLOOR, "{t:?}");
}

/// At i = 0.7 fg keeps 90% only where bg barely gets in: at p = 40 ms (start-anchored) bg slips
/// into a cycle's gap only when the burst's service times sum short, and 2 ms either side it
/// takes either a preemption per burst (fg ≤ 86%) or nothing. A tuner that swings by +25% above
/// the edge spends most of its time past the ledge; it keeps fg safe and gives up the bg.
#[test]
fn at_intensity_0_7_the_best_fixed_pi_is_a_ledge_the_tuner_does_not_hold() {
    let r = rig(DISK_US);
    let t = claims::tuning(&r, Anchor::Start, 0.7, DEFAULT_BETA);
    assert!(t.idle >= MIN_IDLE, "{t:?}");
    assert!(t.best.harvest() > 0.3, "{t:?}");
    let ledge = Duration::from_secs_f64(t.best_pi_ms / 1e3);
    let around = [
        ledge - Duration::from_millis(2),
        ledge + Duration::from_millis(2),
    ];
    for p in claims::sweep(&r, Anchor::Start, 0.7, &around).points {
        assert!(
            p.sim.fg_n < 0.87 || p.sim.harvest() < 0.05,
            "{} ms is not on a ledge: {p:?}",
            t.best_pi_ms
        );
    }
    assert!(t.auto.fg_n >= FG_FLOOR, "{t:?}");
    assert!(t.shortfall() > 0.05, "the tuner holds the ledge now: {t:?}");
}
