//! Claim 5 of spec proportional-share.md section 5 (the paper's Figure 9): A:B:C = 1:2:3 on one
//! CPU, Q = 10 ms; B uses 80 ms of CPU, then sleeps 240 ms, and so on. While B is ready the group
//! gets 1:2:3; while it sleeps A and C get 25% and 75%. With the blocked heuristic off, the group
//! idles while B sleeps.
//!
//! Asserted: the mean of the per-cycle fractions over the cycles of each phase is within 2 points
//! of the target. Cycles in which B both ran and slept are not classified. Single cycles deviate
//! more at the phase boundaries (B's last burst ending near a cycle end, the charges B carries
//! after waking): their 90th percentile and maximum are printed, and are in the example's table.

use tact_sim::share::claims::{self, Variant};

const SECONDS: u64 = 20;

#[test]
fn blocked_heuristic_redistributes_the_sleepers_share() {
    for variant in Variant::ALL {
        let r = claims::io_test(variant, true, 3, SECONDS);
        println!("{r:?}");
        assert!(r.ready_cycles >= 20 && r.asleep_cycles >= 20, "{r:?}");
        let target = [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0];
        for (got, want) in r.ready.iter().zip(target) {
            assert!((got - want).abs() < 0.02, "{variant:?} ready {:?}", r.ready);
        }
        let ac = r.asleep[0] + r.asleep[2];
        assert!(r.asleep[1] < 0.001, "B asleep uses nothing");
        assert!((r.asleep[0] / ac - 0.25).abs() < 0.02, "{:?}", r.asleep);
        assert!((r.asleep[2] / ac - 0.75).abs() < 0.02, "{:?}", r.asleep);
        // The cycle ends early: the group keeps the CPU busy while B sleeps.
        assert!(r.utilization_while_b_sleeps > 0.98, "{r:?}");
        assert!(r.utilization > 0.98, "{r:?}");
    }
}

#[test]
fn without_the_heuristic_the_group_idles() {
    let on = claims::io_test(Variant::Optimized, true, 3, SECONDS);
    let off = claims::io_test(Variant::Optimized, false, 3, SECONDS);
    println!(
        "group CPU: io on {:.1}%, io off {:.1}%; cycles B slept through: on {}, off {}",
        100.0 * on.utilization,
        100.0 * off.utilization,
        on.asleep_cycles,
        off.asleep_cycles
    );
    // A and C exhaust their allowances and wait for B, who sleeps: the CPU idles (B is ready
    // 80 ms at 1/3 of the CPU out of every ~480 ms, so the group runs a bit over half the time).
    assert!(off.utilization < 0.7, "{off:?}");
    assert!(on.utilization > 0.98);
    // No cycle can end while B sleeps: each needs B's 2 quanta of CPU.
    assert_eq!(off.asleep_cycles, 0);
}
