//! Share changes, arrivals and departures (spec proportional-share.md section 2 rules; section 6
//! "live share changes": RMS under 5% of the new target within 2 cycles).
//!
//! Linear-5 (1,3,5,7,9) at Q = 10 ms on one CPU, optimized. Each change is made at ten points
//! spread over a cycle. "Cycle 1" is the first cycle to end after the change (it straddles it),
//! "cycle 2" the next. RMS is against the shares in force at each cycle end.

use tact_sim::share::claims::{self, Change, ChangeRun};

fn at_ten_points(change: Change) -> Vec<ChangeRun> {
    (0..10)
        .map(|k| claims::change(change, 10, 20, 0.05 + 0.1 * k as f64, 20, 1))
        .collect()
}

fn show(runs: &[ChangeRun]) {
    for r in runs {
        println!(
            "{}: before {:.2}%, cycle 1 {:.2}%, cycle 2 {:.2}%, cycle 3 {:.2}%, from cycle 2 mean {:.2}% max {:.2}%",
            r.name,
            100.0 * r.mean_before,
            100.0 * r.straddling,
            100.0 * r.second,
            100.0 * r.third,
            100.0 * r.mean_from_second,
            100.0 * r.max_from_second
        );
    }
}

/// A raised share takes effect in the current cycle: from cycle 2 on, the RMS against the new
/// shares is under 5% in every cycle, wherever in the cycle the change falls.
#[test]
fn raises_settle_within_two_cycles() {
    for change in [
        Change::SetShare { index: 0, share: 9 },
        Change::SetShare {
            index: 2,
            share: 15,
        },
    ] {
        let runs = at_ten_points(change);
        show(&runs);
        for r in &runs {
            assert!(r.second < 0.05, "{}: cycle 2 RMS {}", r.name, r.second);
            assert!(r.max_from_second < 0.05, "{}", r.name);
        }
    }
}

/// Arrivals and departures: from cycle 2 on, the workload's figure (mean RMS of the 19 cycles
/// that follow) is under 5%. Single cycles are not: cycle 2 reaches 10.0% after an arrival and
/// 5.6% after a departure at some change times (a miss of the 2-cycle target, reported).
/// So do the same processes without any change (six processes 1,3,5,7,9,5: mean 2.8–3.0%, single
/// cycles up to 10.7%, 10-cycle windows up to 5.0%; four processes 1,3,7,9: single cycles up to
/// 13.3%), so one cycle's RMS under 5% is not a property these workloads have in steady state.
#[test]
fn arrivals_and_departures_settle() {
    for change in [Change::Arrive { share: 5 }, Change::Depart { index: 2 }] {
        let runs = at_ten_points(change);
        show(&runs);
        for r in &runs {
            assert!(
                r.mean_from_second < 0.05,
                "{}: {}",
                r.name,
                r.mean_from_second
            );
        }
    }
}

/// A cut is charged in the current cycle (spec: `allowance += s'−s`): if the process has already
/// used more than its new share this cycle, it is overdrawn and repays one new share per cycle,
/// stopped meanwhile. Cutting 9 → 1 late in a cycle leaves up to 8 quanta to repay, so the RMS
/// against the new target stays near 45% for up to 8 cycles: the 2-cycle target is missed. What
/// is asserted is the rule's own promise: once repaid (at most 9 cycles after the cut), the
/// mean RMS is under 5% again.
#[test]
fn a_cut_is_repaid_first() {
    let runs = at_ten_points(Change::SetShare { index: 4, share: 1 });
    show(&runs);
    let worst = runs.iter().map(|r| r.second).fold(0.0, f64::max);
    println!("worst cycle-2 RMS after the cut: {:.1}%", 100.0 * worst);
    for r in &runs {
        let after = &r.rms[r.first_after + 9..];
        assert!(after.len() >= 10, "{}", after.len());
        let mean = after.iter().sum::<f64>() / after.len() as f64;
        assert!(mean < 0.05, "{}: mean RMS from cycle 10: {mean}", r.name);
    }
}
