//! Issue 5's disk target at the best fixed PI (fg ≥ 90% of its throughput alone, bg ≥ 70% of the
//! capacity fg leaves idle) at i = 0.3 and 0.5, on the bench's disk: τ = 20.45 ms, t_max =
//! 100 ms, one fg request outstanding, greedy bg (spec idletime.md section 7).
//!
//! The model (section 4) says a PI just above τ meets it with room to spare: in its middle band
//! fg loses nothing. The simulation of the same device and generator says no fixed PI can: with
//! bg filling the gap between bursts, every burst starts behind a bg request already in service
//! and waits its residual, about τ/2. A burst at i = 0.3 holds two 20.45 ms requests in a 30 ms
//! window, so a wait above the 9.55 ms of slack costs one of them: fg ≈ 1 − ½·P(wait > slack)
//! = 73%; at i = 0.5, 1 − ⅓·0.55 = 82%. fg keeps 90% only where bg stops reaching the next burst,
//! and then bg gets almost nothing. The PI cannot help: it decides when bg starts after fg, not
//! whether bg is still in service when the next burst arrives. The thesis's "disk fg 80% with
//! bg up to 70%" is this regime (its model-vs-disk fg error of 15–20%, claim 18).
//!
//! Exact service times, ±1% (the FUSE rig measured 20.3–20.5 ms) and ±10%; both anchors.

use std::time::Duration;

use tact_core::idle::Anchor;
use tact_sim::idle::claims::{self, BG_TARGET, FG_FLOOR};
use tact_sim::idle::Rig;

#[test]
fn no_fixed_pi_meets_90_70_on_the_20ms_disk_though_the_model_says_one_does() {
    for jitter in [0.0, 0.01, 0.1] {
        let rig = Rig {
            tau: Duration::from_micros(20_450),
            jitter,
            seed: 3,
            ..Rig::disk()
        };
        for anchor in [Anchor::Start, Anchor::End] {
            for i in [0.3, 0.5] {
                let s = claims::sweep(&rig, anchor, i, &claims::sweep_pis(rig.tau));
                let cell = format!("±{jitter} {anchor:?} i = {i}");
                let m = s.model_best(FG_FLOOR).expect("a model point");
                assert!(
                    m.model_fg_n >= 0.999 && m.model_bg_idle >= BG_TARGET,
                    "{cell}: model {m:?}"
                );
                let b = s.best(FG_FLOOR).expect("p > t_max keeps fg");
                assert!(b.sim.harvest() < 0.1, "{cell}: best fixed {b:?}");
                let at70 = s.best_fg_with_bg(BG_TARGET).expect("short p give bg 70%");
                assert!(
                    (0.7..0.86).contains(&at70.sim.fg_n),
                    "{cell}: fg with bg ≥ 70% {at70:?}"
                );
            }
        }
    }
}

/// Not even a gate that knew when each burst begins (and held bg exactly the time its last
/// request needs before it) meets 90 / 70 at i = 0.3 or 0.5, unless it lets bg's last request
/// reach into the burst: the whole 20.45 ms services that fit between fg's last completion and
/// the next burst are 2 of the 2.89 per cycle fg leaves idle at i = 0.3 (69%), and 1 of 1.89 at
/// i = 0.5 (53%). One more would reach 2.3 ms into the burst at both, within the 9.5 and 9.1 ms
/// of wait the burst absorbs without losing a request: so 90 / 70 needs bg's last request to
/// end a few ms into a burst, never more than its slack, a schedule no gate can keep without
/// knowing the burst's slack as well as its start.
#[test]
fn a_gate_that_kept_bg_off_every_burst_would_still_miss_70_percent() {
    let rig = Rig {
        tau: Duration::from_micros(20_450),
        ..Rig::disk()
    };
    let r_max = claims::baseline(&rig, 1.0).fg_done as f64 / rig.cycles as f64;
    for (i, bg, pct) in [(0.3, 2, 69), (0.5, 1, 53)] {
        let o = claims::oracle(&rig, i);
        // The bound's fg is the simulator's generator alone.
        let alone = claims::baseline(&rig, i).fg_done as f64 / rig.cycles as f64;
        assert!(
            (alone - o.fg_requests as f64).abs() < 0.01,
            "i = {i}: {alone} vs {o:?}"
        );
        assert!(
            (r_max - alone - o.idle_requests).abs() < 0.01,
            "i = {i}: {r_max} vs {o:?}"
        );
        assert_eq!(o.bg_requests, bg, "i = {i}: {o:?}");
        assert_eq!((100.0 * o.bg_idle).round() as u32, pct, "i = {i}: {o:?}");
        assert!(o.bg_idle < BG_TARGET, "i = {i}: {o:?}");
        assert!(
            o.overlap < o.slack,
            "i = {i}: one more bg request fits the slack: {o:?}"
        );
    }
}
