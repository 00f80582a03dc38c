//! The idletime gate's transitions (spec idletime.md section 3): the V1 table cell by cell, the
//! cells that differ across the four variants, both anchors, the counters and the polling driver.

use std::time::Duration;

use tact_core::idle::{Action, Anchor, Event, Gate, GateParams, State, Variant};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn gate(pi: u64, anchor: Anchor, variant: Variant) -> Gate {
    Gate::new(GateParams {
        pi: ms(pi),
        anchor,
        variant,
    })
}

/// A gate driven into `state` (end-anchored, p = 10 ms, deadline 10 ms after t = 5 ms).
fn in_state(state: State, variant: Variant) -> Gate {
    let mut g = gate(10, Anchor::End, variant);
    match state {
        State::Idle => {}
        State::Fg => {
            g.step(Event::Fg, ms(0));
        }
        State::Pi => {
            g.step(Event::Fg, ms(0));
            g.step(Event::Empty, ms(5));
        }
        State::Bg => {
            g.step(Event::Bg, ms(0));
        }
    }
    assert_eq!(g.state(), state);
    g
}

#[test]
fn v1_table_cell_by_cell() {
    use Action::*;
    use Event::*;
    use State::{Bg as B, Fg as F, Idle as I, Pi as P};
    let now = ms(6);
    // (state, event) -> (next state, actions), spec section 3's V1 table.
    let table: [(State, Event, State, Vec<Action>); 16] = [
        (I, Fg, F, vec![DispatchFg]),
        (I, Bg, B, vec![DispatchBg]),
        (I, Timer, I, vec![]),
        (I, Empty, I, vec![]),
        (F, Fg, F, vec![DispatchFg]),
        (F, Bg, P, vec![HoldBg, ArmTimer(ms(16))]),
        (F, Timer, F, vec![]),
        (F, Empty, P, vec![HoldBg, ArmTimer(ms(16))]),
        (P, Fg, F, vec![CancelTimer, DispatchFg]),
        (P, Bg, P, vec![HoldBg]),
        (P, Timer, P, vec![ArmTimer(ms(15))]), // early: re-armed for the deadline
        (P, Empty, P, vec![HoldBg]),
        (B, Fg, F, vec![PreemptBg, DispatchFg]),
        (B, Bg, B, vec![DispatchBg]),
        (B, Timer, B, vec![]),
        (B, Empty, I, vec![]),
    ];
    for (s, e, next, actions) in table {
        let mut g = in_state(s, Variant::V1);
        let before = g.counters().get(s, e);
        assert_eq!(g.step(e, now), actions, "({s:?}, {e:?})");
        assert_eq!(g.state(), next, "({s:?}, {e:?})");
        assert_eq!(g.counters().get(s, e), before + 1, "({s:?}, {e:?}) counted");
    }
    // The timer at the deadline ends P in I; the driver then re-classifies the head.
    let mut g = in_state(P, Variant::V1);
    assert_eq!(g.step(Timer, ms(15)), vec![]);
    assert_eq!(g.state(), I);
    assert_eq!(g.counters().expired_pis(), 1);
}

#[test]
fn variants_differ_only_in_state_b() {
    let now = ms(6);
    for v in Variant::ALL {
        let mut on_b = in_state(State::Bg, v);
        let a = on_b.step(Event::Bg, now);
        let mut on_i = in_state(State::Bg, v);
        let b = on_i.step(Event::Empty, now);
        let (b_next, i_next) = match v {
            Variant::V1 => (State::Bg, State::Idle),
            Variant::V2 => (State::Bg, State::Pi),
            Variant::V3 => (State::Pi, State::Idle),
            Variant::V4 => (State::Pi, State::Pi),
        };
        assert_eq!((on_b.state(), on_i.state()), (b_next, i_next), "{v:?}");
        if b_next == State::Pi {
            assert_eq!(a, vec![Action::HoldBg, Action::ArmTimer(ms(16))], "{v:?}");
        }
        if i_next == State::Pi {
            assert_eq!(b, vec![Action::HoldBg, Action::ArmTimer(ms(16))], "{v:?}");
        }
        // Every other cell is V1's.
        for s in [State::Idle, State::Fg, State::Pi] {
            for e in Event::ALL {
                let mut x = in_state(s, v);
                let mut y = in_state(s, Variant::V1);
                assert_eq!(x.step(e, now), y.step(e, now), "{v:?} ({s:?}, {e:?})");
                assert_eq!(x.state(), y.state());
            }
        }
    }
}

#[test]
fn v3_puts_a_pi_before_every_bg_request_after_the_first() {
    let mut g = gate(10, Anchor::End, Variant::V3);
    assert_eq!(g.step(Event::Bg, ms(0)), vec![Action::DispatchBg]);
    // The first bg request completes at 20 ms with another waiting: a PI, then the next.
    assert_eq!(
        g.step(Event::Bg, ms(20)),
        vec![Action::HoldBg, Action::ArmTimer(ms(30))]
    );
    assert_eq!(g.step(Event::Timer, ms(30)), vec![]);
    assert_eq!(g.step(Event::Bg, ms(30)), vec![Action::DispatchBg]);
}

#[test]
fn end_anchor_counts_from_the_last_fg_completion() {
    let mut g = gate(30, Anchor::End, Variant::V1);
    g.step(Event::Fg, ms(0));
    g.fg_started(ms(0)); // ignored end-anchored
                         // Completion at 20 ms with bg waiting: hold until 50 ms.
    assert_eq!(
        g.step(Event::Bg, ms(20)),
        vec![Action::HoldBg, Action::ArmTimer(ms(50))]
    );
    assert_eq!(g.hold_until(), Some(ms(50)));
}

#[test]
fn start_anchor_counts_from_the_latest_fg_start_and_falls_through_below_tau() {
    // p = 30 ms, a fg request started at 0 and again (after waiting) at 12 ms.
    let mut g = gate(30, Anchor::Start, Variant::V1);
    g.step(Event::Fg, ms(0));
    g.fg_started(ms(12));
    assert_eq!(
        g.step(Event::Bg, ms(32)),
        vec![Action::HoldBg, Action::ArmTimer(ms(42))]
    );
    // p = 10 ms below a 20 ms service time: the deadline passed during service, so F goes
    // through P (counted as an expiry) to I and dispatches bg at once: a priority queue.
    let mut g = gate(10, Anchor::Start, Variant::V1);
    g.step(Event::Fg, ms(0));
    assert_eq!(g.step(Event::Bg, ms(20)), vec![Action::DispatchBg]);
    assert_eq!(g.state(), State::Bg);
    assert_eq!(g.counters().expired_pis(), 1);
    assert_eq!(g.counters().get(State::Idle, Event::Bg), 1);
}

#[test]
fn infinite_pi_never_expires() {
    let mut g = Gate::new(GateParams::new(Duration::MAX));
    g.step(Event::Fg, ms(0));
    assert_eq!(
        g.step(Event::Bg, ms(20)),
        vec![Action::HoldBg, Action::ArmTimer(Duration::MAX)]
    );
    assert_eq!(g.step(Event::Timer, Duration::from_secs(1 << 40)).len(), 1);
    assert_eq!(g.state(), State::Pi);
}

#[test]
fn counters_name_the_thesis_cells_and_the_harm_ratio() {
    let mut g = gate(10, Anchor::End, Variant::V1);
    g.step(Event::Fg, ms(0)); // I[f]
    g.step(Event::Bg, ms(1)); // F[b] -> P
    g.step(Event::Fg, ms(2)); // P[f]: shielded
    g.step(Event::Bg, ms(3)); // F[b] -> P, deadline 13
    g.step(Event::Timer, ms(13)); // P[t]
    g.step(Event::Bg, ms(13)); // I[b] -> B
    g.step(Event::Fg, ms(14)); // B[f]: preempted
    let c = g.counters();
    assert_eq!(
        (c.found_idle(), c.shielded(), c.preempted(), c.expired_pis()),
        (1, 1, 1, 1)
    );
    assert_eq!(c.fg_total(), 3);
    assert!((c.harm() - 1.0 / 3.0).abs() < 1e-12);
}

#[test]
fn polling_driver_holds_for_a_full_pi_after_the_last_activity() {
    // δ = 1 ms, p = 10 ms, end-anchored: fg active at polls 0..=4.
    let mut g = gate(10, Anchor::End, Variant::V1);
    let released: Vec<bool> = (0..30).map(|t| g.poll(ms(t), t <= 4, true)).collect();
    // The first quiet poll (5 ms) arms the PI to 15 ms; bg is released at 15 ms, not before.
    assert!(released[..15].iter().all(|r| !r), "{released:?}");
    assert!(released[15..].iter().all(|r| *r), "{released:?}");
    // Fg activity holds bg again at once.
    assert!(!g.poll(ms(30), true, true));
    assert_eq!(g.counters().preempted(), 1);
    // Nothing runnable: no release, and the gate settles in I once the PI has passed.
    let mut g = gate(10, Anchor::End, Variant::V1);
    assert!(!g.poll(ms(0), false, false));
    assert_eq!(g.state(), State::Idle);
}
