//! The ALPS engine's rules, one worked example each (spec proportional-share.md sections 2 and 4).

use tact_core::share::{
    Action, Alps, Event, EventError, Mode, Reading, ShareConfig, StepError, MAX_SHARE,
};

const Q: u64 = 10_000_000;

fn strict(lazy: bool) -> Alps {
    Alps::new(ShareConfig {
        quantum_ns: Q,
        lazy,
        io: true,
        cycle_bound: false,
        checks: false,
        mode: Mode::Strict,
        cpus: 1,
    })
    .unwrap()
}

fn one(id: u64, cpu: u64) -> Reading {
    Reading::single(id, cpu, false, 1)
}

fn arrive(id: u64, share: u64) -> Event {
    Event::Arrive {
        id,
        share,
        baseline: one(id, 0),
    }
}

/// A two-thread principal's reading: each member's CPU time.
fn members(cpu_ns: &[(u64, u64)]) -> Reading {
    Reading {
        cpu_ns: cpu_ns.to_vec(),
        blocked: false,
        threads: 2,
        cpus: 0,
    }
}

/// Principal 1, whose members 10 and 11 have used `start` so far, and the single entity 2, each
/// of `share`, join.
fn principal_and_one(a: &mut Alps, share: u64, start: [u64; 2]) {
    let principal = Event::Arrive {
        id: 1,
        share,
        baseline: members(&[(10, start[0]), (11, start[1])]),
    };
    a.step(1, &[], vec![principal, arrive(2, share)]).unwrap();
}

fn allowance(a: &Alps, id: u64) -> f64 {
    a.entity(id).unwrap().allowance
}

fn assert_invariant(a: &Alps) {
    let sum: f64 = a.entities().map(|e| e.allowance).sum();
    let q = a.config().quantum_ns as f64;
    assert!(
        (a.t_c_ns() - q * sum).abs() < 1e-3,
        "t_c {} vs Q·Σ allowance {}",
        a.t_c_ns(),
        q * sum
    );
}

/// A fluid uniprocessor: every entity that is running gets an equal part of each quantum.
struct Fluid {
    cpu: Vec<u64>,
    running: Vec<bool>,
}

impl Fluid {
    fn new(n: usize) -> Self {
        Fluid {
            cpu: vec![0; n],
            running: vec![true; n],
        }
    }
    fn quantum(&mut self) {
        let n = self.running.iter().filter(|&&r| r).count() as u64;
        for (c, _) in self.cpu.iter_mut().zip(&self.running).filter(|(_, &r)| r) {
            *c += Q / n;
        }
    }
    fn apply(&mut self, actions: &[Action]) {
        for a in actions {
            match *a {
                Action::Stop(id) | Action::Unfill(id) => self.running[id as usize] = false,
                Action::Continue(id) | Action::Fill(id) => self.running[id as usize] = true,
                _ => {}
            }
        }
    }
    fn readings(&self, due: &[u64]) -> Vec<(u64, Reading)> {
        due.iter()
            .map(|&id| (id, one(id, self.cpu[id as usize])))
            .collect()
    }
}

#[test]
fn basic_alps_one_to_two_to_three() {
    let mut a = strict(false);
    let out = a
        .step(1, &[], vec![arrive(0, 1), arrive(1, 2), arrive(2, 3)])
        .unwrap();
    assert!(out.actions.is_empty(), "arrivals are not signalled");
    assert_eq!(a.t_c_ns(), 6.0 * Q as f64);
    assert_eq!(a.total_weight(), 6.0);
    let mut k = Fluid::new(3);
    let mut consumed = [0u64; 3];
    let mut cycles = 0;
    for _ in 0..600 {
        k.quantum();
        let due = a.due(1);
        let out = a.step(1, &k.readings(&due), vec![]).unwrap();
        k.apply(&out.actions);
        assert_invariant(&a);
        if let Some(c) = out.cycle {
            cycles += 1;
            for e in &c.entities {
                consumed[e.id as usize] += e.consumed_ns;
            }
        }
    }
    // 600 quanta of CPU, 6 quanta per cycle.
    assert!((99..=100).contains(&cycles), "{cycles} cycles");
    let total: u64 = consumed.iter().sum();
    for (i, c) in consumed.iter().enumerate() {
        let frac = *c as f64 / total as f64;
        let want = (i + 1) as f64 / 6.0;
        assert!((frac - want).abs() < 0.005, "entity {i}: {frac} vs {want}");
    }
    // Basic ALPS reads every eligible entity every quantum: about 3 + 2 + 1 reads per 6 quanta.
    let c = a.counters();
    assert_eq!(c.quanta, 601);
    assert!(c.reads > 1000, "{} reads", c.reads);
}

#[test]
fn first_quantum_charges_and_stops_in_order() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 2), arrive(2, 3)])
        .unwrap();
    // Entity 0 used a whole quantum and a half, entity 1 a quarter, entity 2 nothing.
    let r = vec![
        (0, one(0, 15_000_000)),
        (1, one(1, 2_500_000)),
        (2, one(2, 0)),
    ];
    assert_eq!(a.due(1), vec![0, 1, 2]);
    let out = a.step(1, &r, vec![]).unwrap();
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    assert!((allowance(&a, 0) + 0.5).abs() < 1e-12);
    assert!((allowance(&a, 1) - 1.75).abs() < 1e-12);
    assert_eq!(a.t_c_ns(), (60_000_000 - 17_500_000) as f64);
    assert_eq!(a.due(1), vec![1, 2], "ineligible entities are not read");
}

#[test]
fn optimized_alps_skips_reads_by_allowance() {
    let mut a = strict(true);
    a.step(1, &[], vec![arrive(7, 5)]).unwrap();
    assert_eq!(a.due(1), vec![7], "an arrival is read at the next step");
    // 0.7 quanta used: allowance 4.3, next read ceil(4.3) = 5 quanta later.
    a.step(1, &[(7, one(7, 7_000_000))], vec![]).unwrap();
    let e = a.entity(7).unwrap();
    assert!((e.allowance - 4.3).abs() < 1e-12);
    assert_eq!(e.update, a.count() + 5);
    for _ in 0..4 {
        assert!(a.due(1).is_empty());
        a.step(1, &[], vec![]).unwrap();
    }
    assert_eq!(a.due(1), vec![7]);
    // Missed quanta: ticks = 3 from 4 quanta before the read covers it too.
    let mut b = strict(true);
    b.step(1, &[], vec![arrive(7, 5)]).unwrap();
    b.step(1, &[(7, one(7, 7_000_000))], vec![]).unwrap();
    assert!(b.due(4).is_empty());
    assert_eq!(b.due(5), vec![7]);
}

#[test]
fn parallelism_divides_the_lazy_bound() {
    let mut a = Alps::new(ShareConfig {
        mode: Mode::Strict,
        ..ShareConfig::new(Q, 4)
    })
    .unwrap();
    let baseline = Reading {
        cpu_ns: vec![(1, 0)],
        blocked: false,
        threads: 8,
        cpus: 0,
    };
    a.step(
        1,
        &[],
        vec![Event::Arrive {
            id: 1,
            share: 10,
            baseline: baseline.clone(),
        }],
    )
    .unwrap();
    assert_eq!(a.entity(1).unwrap().par, 4, "min(threads, cpus)");
    // 8 threads restricted to 3 CPUs by affinity: par 3; allowance 10 − 0 → ceil(10/3) = 4.
    let r = Reading {
        cpus: 3,
        ..baseline
    };
    a.step(1, &[(1, r)], vec![]).unwrap();
    let e = a.entity(1).unwrap();
    assert_eq!(e.par, 3);
    assert_eq!(e.update, a.count() + 4);
}

#[test]
fn blocked_heuristic_charges_one_quantum_per_observation() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 2)]).unwrap();
    let blocked = Reading::single(1, 0, true, 1);
    a.step(1, &[(0, one(0, 5_000_000)), (1, blocked.clone())], vec![])
        .unwrap();
    assert!((allowance(&a, 1) - 1.0).abs() < 1e-12);
    assert_eq!(a.t_c_ns(), (30_000_000 - 5_000_000 - 10_000_000) as f64);
    assert_invariant(&a);
    // Asleep through its allowance: the cycle ends early, once entity 0 has used its quantum.
    let out = a
        .step(1, &[(0, one(0, 10_000_000)), (1, blocked)], vec![])
        .unwrap();
    let c = out.cycle.expect("cycle ends");
    assert_eq!(c.cycle, 1);
    assert!((allowance(&a, 0) - 1.0).abs() < 1e-12);
    assert!((allowance(&a, 1) - 2.0).abs() < 1e-12);
    assert!(out.actions.is_empty());
    // With io off the same sleeper holds up the cycle.
    let mut b = Alps::new(ShareConfig {
        io: false,
        lazy: false,
        ..ShareConfig::new(Q, 1)
    })
    .unwrap();
    b.step(1, &[], vec![arrive(0, 1), arrive(1, 2)]).unwrap();
    let blocked = Reading::single(1, 0, true, 1);
    let out = b
        .step(1, &[(0, one(0, 10_000_000)), (1, blocked)], vec![])
        .unwrap();
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    assert!(out.cycle.is_none());
    assert_eq!(allowance(&b, 1), 2.0);
}

#[test]
fn remainders_carry_over_and_a_stall_is_caught_up_one_cycle_per_step() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 1)]).unwrap();
    // A long stall: 7 quanta of CPU each (ticks = 14); t_c = 2Q − 14Q = −12Q.
    let out = a
        .step(14, &[(0, one(0, 7 * Q)), (1, one(1, 7 * Q))], vec![])
        .unwrap();
    assert!(out.cycle.is_some());
    assert_eq!(a.counters().overruns, 13);
    assert!((allowance(&a, 0) + 5.0).abs() < 1e-9, "1 − 7 + 1");
    assert_eq!(a.t_c_ns(), -10.0 * Q as f64);
    // Catching up: t_c −10Q → −8Q → … → 0 → 2Q, one cycle per step; the allowances climb from
    // −5 to 1, and only then are the two continued.
    let mut cycles = 1;
    loop {
        let out = a.step(1, &[], vec![]).unwrap();
        assert!(out.cycle.is_some(), "catching up");
        cycles += 1;
        assert_invariant(&a);
        if !out.actions.is_empty() {
            assert_eq!(out.actions, vec![Action::Continue(0), Action::Continue(1)]);
            break;
        }
    }
    assert_eq!(cycles, 7);
    assert!((allowance(&a, 0) - 1.0).abs() < 1e-9);
    assert!((a.t_c_ns() - 2.0 * Q as f64).abs() < 1e-3);
    assert!(a.step(1, &[], vec![]).unwrap().cycle.is_none());
}

#[test]
fn departure_keeps_the_others_entitlements() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 2), arrive(2, 3)])
        .unwrap();
    a.step(
        1,
        &[
            (0, one(0, 2_000_000)),
            (1, one(1, 3_000_000)),
            (2, one(2, 5_000_000)),
        ],
        vec![],
    )
    .unwrap();
    let before: Vec<f64> = [0, 2].iter().map(|&i| allowance(&a, i)).collect();
    // Entity 1 exits with a final reading (wait4): charged, then t_c −= allowance·Q.
    let out = a
        .step(
            1,
            &[],
            vec![Event::Depart {
                id: 1,
                last: Some(one(1, 4_000_000)),
            }],
        )
        .unwrap();
    assert!(out.rejected.is_empty());
    assert!(a.entity(1).is_none());
    assert_eq!(
        [0, 2].iter().map(|&i| allowance(&a, i)).collect::<Vec<_>>(),
        before
    );
    assert_invariant(&a);
    assert_eq!(a.total_weight(), 4.0);
    // Entity 2 vanishes without a final reading two quanta after its last read: lost ≤ 2 Q.
    a.step(1, &[], vec![]).unwrap();
    a.step(1, &[], vec![Event::Depart { id: 2, last: None }])
        .unwrap();
    assert_eq!(a.counters().lost_ns, 3 * Q, "read at quantum 2, gone at 5");
    assert_invariant(&a);
}

#[test]
fn share_changes_take_effect_in_the_current_cycle() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 3), arrive(1, 3)]).unwrap();
    a.step(1, &[(0, one(0, 2 * Q)), (1, one(1, 0))], vec![])
        .unwrap();
    // Cut 3 → 1 after using 2: allowance 1 − 2 = −1, repaid next cycle; stopped at once.
    let out = a
        .step(1, &[], vec![Event::SetShare { id: 0, share: 1 }])
        .unwrap();
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    assert!((allowance(&a, 0) + 1.0).abs() < 1e-12);
    assert_eq!(a.total_weight(), 4.0);
    assert_invariant(&a);
    // Raise 3 → 5: +2 quanta now.
    a.step(1, &[], vec![Event::SetShare { id: 1, share: 5 }])
        .unwrap();
    assert!((allowance(&a, 1) - 5.0).abs() < 1e-12);
    assert_invariant(&a);
}

#[test]
fn a_cut_brings_the_next_read_forward() {
    let mut a = strict(true);
    a.step(1, &[], vec![arrive(0, 20)]).unwrap();
    a.step(1, &[(0, one(0, 0))], vec![]).unwrap();
    assert_eq!(a.entity(0).unwrap().update, 22);
    a.step(1, &[], vec![Event::SetShare { id: 0, share: 3 }])
        .unwrap();
    // Read at quantum 2 with allowance now 3: it could be exhausted at quantum 5.
    assert_eq!(a.entity(0).unwrap().update, 5);
}

#[test]
fn bad_input_is_refused_and_named() {
    let mut a = strict(true);
    assert_eq!(a.step(0, &[], vec![]), Err(StepError::ZeroTicks));
    assert!(StepError::ZeroTicks.to_string().starts_with("ticks"));
    let out = a
        .step(
            1,
            &[],
            vec![
                arrive(0, 0),
                arrive(1, MAX_SHARE + 1),
                arrive(2, 2),
                arrive(2, 2),
                Event::SetShare { id: 2, share: 0 },
                Event::SetShare { id: 9, share: 1 },
                Event::Depart { id: 9, last: None },
                Event::Arrive {
                    id: 3,
                    share: 1,
                    baseline: Reading {
                        cpu_ns: vec![],
                        blocked: false,
                        threads: 1,
                        cpus: 0,
                    },
                },
                Event::MemberLeft {
                    id: 2,
                    member: 5,
                    last_cpu_ns: None,
                },
                Event::MemberJoined {
                    id: 2,
                    member: 2,
                    cpu_ns: 0,
                },
            ],
        )
        .unwrap();
    let errs: Vec<EventError> = out.rejected.iter().map(|r| r.error.clone()).collect();
    assert_eq!(
        errs,
        vec![
            EventError::Share { id: 0, share: 0 },
            EventError::Share {
                id: 1,
                share: MAX_SHARE + 1
            },
            EventError::DuplicateEntity(2),
            EventError::Share { id: 2, share: 0 },
            EventError::UnknownEntity(9),
            EventError::UnknownEntity(9),
            EventError::NoMembers(3),
            EventError::UnknownMember { id: 2, member: 5 },
            EventError::DuplicateMember { id: 2, member: 2 },
        ]
    );
    assert!(errs[0].to_string().starts_with("share:"));
    assert!(errs[6].to_string().starts_with("baseline.cpu_ns:"));
    assert_eq!(a.entities().count(), 1);
    assert_eq!(a.entity(2).unwrap().share, 2);
    assert_eq!(a.counters().rejected, 9);
    assert_invariant(&a);
    // A refused event serializes with its reason.
    let json = serde_json::to_string(&out.rejected[0]).unwrap();
    assert!(json.contains("share: must be between 1"), "{json}");
}

#[test]
fn principals_sum_members_and_stop_newcomers() {
    let mut a = strict(false);
    principal_and_one(&mut a, 1, [100, 200]);
    assert_eq!(a.entity(1).unwrap().members, 2);
    // Members used 0.6 + 0.5 quanta: the principal is overdrawn and stopped.
    let r = members(&[(10, 100 + 6_000_000), (11, 200 + 5_000_000)]);
    let out = a.step(1, &[(1, r), (2, one(2, 0))], vec![]).unwrap();
    assert_eq!(out.actions, vec![Action::Stop(1)]);
    assert!((allowance(&a, 1) + 0.1).abs() < 1e-12);
    // A process joins the stopped principal: stopped at once.
    let out = a
        .step(
            1,
            &[(2, one(2, 0))],
            vec![Event::MemberJoined {
                id: 1,
                member: 12,
                cpu_ns: 50,
            }],
        )
        .unwrap();
    assert_eq!(out.actions, vec![Action::Stop(1)]);
    assert_eq!(a.entity(1).unwrap().members, 3);
    // Members leave; the last one takes the principal with it (a departure).
    for (m, last) in [(10, Some(6_000_100)), (11, None), (12, Some(50))] {
        let out = a
            .step(
                1,
                &[(2, one(2, 0))],
                vec![Event::MemberLeft {
                    id: 1,
                    member: m,
                    last_cpu_ns: last,
                }],
            )
            .unwrap();
        assert!(out.rejected.is_empty());
        assert_invariant(&a);
    }
    assert!(a.entity(1).is_none());
    assert_eq!(a.total_weight(), 1.0);
    // A reading blocked only if all members are: the driver's job, the engine trusts the flag.
}

#[test]
fn cycle_report_measures_against_charged_consumption() {
    let mut a = strict(false);
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
    let out = a
        .step(1, &[(0, one(0, Q)), (1, one(1, 3 * Q))], vec![])
        .unwrap();
    let c = out.cycle.unwrap();
    assert_eq!(c.entities.len(), 2);
    assert_eq!(c.entities[0].consumed_ns, Q);
    assert!((c.entities[0].entitlement_ns - Q as f64).abs() < 1e-6);
    assert!(c.rms < 1e-12);
    // Next cycle: 2:2 instead of 1:3 → rel errs +100% and −33%.
    let out = a
        .step(1, &[(0, one(0, 3 * Q)), (1, one(1, 5 * Q))], vec![])
        .unwrap();
    let c = out.cycle.unwrap();
    assert!((c.entities[0].rel_err - 1.0).abs() < 1e-12);
    assert!((c.entities[1].rel_err + 1.0 / 3.0).abs() < 1e-12);
    let rms = ((1.0f64 + 1.0 / 9.0) / 2.0).sqrt();
    assert!((c.rms - rms).abs() < 1e-12);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["entities"][0]["weight_used"], 1.0);
}

#[test]
fn conserving_skewed_five_on_two_cores() {
    let mut a = Alps::new(ShareConfig::new(Q, 2)).unwrap();
    assert_eq!(a.config().mode, Mode::Conserving);
    let events = [1, 1, 1, 1, 21]
        .iter()
        .enumerate()
        .map(|(i, &s)| arrive(i as u64, s))
        .collect();
    let out = a.step(1, &[], events).unwrap();
    let w: Vec<f64> = a.entities().map(|e| e.weight).collect();
    assert_eq!(w, vec![1.0, 1.0, 1.0, 1.0, 4.0]);
    assert_eq!(out.actions, vec![Action::Pin { id: 4, cpus: 1 }]);
    assert_eq!(a.total_weight(), 8.0);
    assert_invariant(&a);
    // Raising a small share to 21 too: 21/45 < 1/2, nothing is capped any more.
    let out = a
        .step(1, &[], vec![Event::SetShare { id: 0, share: 21 }])
        .unwrap();
    assert_eq!(out.actions, vec![Action::Unpin(4)]);
    assert_eq!(a.total_weight(), 45.0);
    assert!((allowance(&a, 4) - 21.0).abs() < 1e-12);
    assert_invariant(&a);
}

/// Conserving ALPS on two CPUs that reads every eligible entity every quantum (no lazy reads).
fn eager_on_two_cpus() -> Alps {
    Alps::new(ShareConfig {
        lazy: false,
        ..ShareConfig::new(Q, 2)
    })
    .unwrap()
}

#[test]
fn idle_fill_books_surplus_outside_allowances() {
    // Two single-threaded entities on 2 CPUs, conserving, 1:1.
    let mut a = eager_on_two_cpus();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 1)]).unwrap();
    // Entity 0 uses its quantum, entity 1 half of one: 0 becomes ineligible, but a CPU would idle,
    // so it goes on running as fill (no Stop, no Fill: it is running already).
    let out = a
        .step(1, &[(0, one(0, Q)), (1, one(1, Q / 2))], vec![])
        .unwrap();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    let e = a.entity(0).unwrap();
    assert!(!e.eligible && e.filled);
    assert_eq!(a.due(1), vec![0, 1], "fill entities are read every quantum");
    let before = allowance(&a, 0);
    let t_c = a.t_c_ns();
    let out = a
        .step(1, &[(0, one(0, 2 * Q)), (1, one(1, 3 * Q / 4))], vec![])
        .unwrap();
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    assert_eq!(allowance(&a, 0), before, "surplus is outside the allowance");
    assert_eq!(a.t_c_ns(), t_c - (Q / 4) as f64, "and outside t_c");
    assert_eq!(a.counters().surplus_ns, Q);
    assert_invariant(&a);
    // Entity 1 ends the cycle: both replenished; 0 is already running (no Continue).
    let out = a
        .step(1, &[(0, one(0, 3 * Q)), (1, one(1, 5 * Q / 4))], vec![])
        .unwrap();
    let c = out.cycle.unwrap();
    assert_eq!(c.surplus_ns, 2 * Q);
    assert_eq!(c.entities[0].surplus_ns, 2 * Q);
    assert_eq!(c.entities[0].consumed_ns, Q);
    assert_eq!(c.entities[1].consumed_ns, 5 * Q / 4);
    assert!(out.actions.is_empty(), "{:?}", out.actions);
    let e = a.entity(0).unwrap();
    assert!(e.eligible && !e.filled);
    assert_invariant(&a);
}

#[test]
fn fill_stops_when_eligible_parallelism_recovers() {
    let mut a = eager_on_two_cpus();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 2), arrive(2, 2)])
        .unwrap();
    // 0 exhausts, 1 and 2 keep both CPUs busy: no fill.
    let out = a
        .step(
            1,
            &[(0, one(0, Q)), (1, one(1, Q / 2)), (2, one(2, Q / 2))],
            vec![],
        )
        .unwrap();
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    // 1 blocks: its CPU is idle, 0 fills it.
    let out = a
        .step(
            1,
            &[(1, Reading::single(1, Q / 2, true, 1)), (2, one(2, Q))],
            vec![],
        )
        .unwrap();
    assert_eq!(out.actions, vec![Action::Fill(0)]);
    // 1 runs again: 0 is stopped again.
    let out = a
        .step(
            1,
            &[
                (0, one(0, Q + Q / 2)),
                (1, one(1, Q / 2 + 1)),
                (2, one(2, Q + Q / 2)),
            ],
            vec![],
        )
        .unwrap();
    assert_eq!(out.actions, vec![Action::Unfill(0)]);
    assert_invariant(&a);
}

#[test]
fn strict_mode_never_fills_or_pins() {
    let mut a = Alps::new(ShareConfig {
        mode: Mode::Strict,
        lazy: false,
        ..ShareConfig::new(Q, 2)
    })
    .unwrap();
    let events = [1, 1, 1, 1, 21]
        .iter()
        .enumerate()
        .map(|(i, &s)| arrive(i as u64, s))
        .collect();
    let out = a.step(1, &[], events).unwrap();
    assert!(out.actions.is_empty());
    let r: Vec<(u64, Reading)> = (0..5).map(|i| (i, one(i, 2 * Q / 5 + Q))).collect();
    let out = a.step(1, &r, vec![]).unwrap();
    assert_eq!(
        out.actions,
        (0..4).map(Action::Stop).collect::<Vec<_>>(),
        "the big one runs alone on 2 CPUs; nothing fills the other"
    );
}

#[test]
fn config_errors_stop_construction() {
    let err = Alps::new(ShareConfig {
        cpus: 0,
        ..ShareConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().starts_with("cpus"));
}

#[test]
fn the_cycle_bound_reads_when_the_cycle_could_end() {
    for (bound, want) in [(false, 11), (true, 10)] {
        let mut a = Alps::new(ShareConfig {
            cycle_bound: bound,
            ..ShareConfig::new(Q, 1)
        })
        .unwrap();
        a.step(1, &[], vec![arrive(0, 1), arrive(1, 9)]).unwrap();
        // Entity 0 overdraws by 1.5 quanta: t_c = 7.5 Q while entity 1 still has 9 quanta. The
        // cycle can end after 8 more quanta of CPU, before entity 1 could exhaust its own 9.
        let out = a
            .step(1, &[(0, one(0, 5 * Q / 2)), (1, one(1, 0))], vec![])
            .unwrap();
        assert_eq!(out.actions, vec![Action::Stop(0)]);
        assert_eq!(a.t_c_ns(), 7.5 * Q as f64);
        assert_eq!(a.entity(1).unwrap().update, want, "cycle_bound {bound}");
    }
}

#[test]
fn a_member_that_left_is_not_charged_again() {
    let mut a = strict(false);
    principal_and_one(&mut a, 5, [0, 0]);
    // Member 11 leaves; the driver's reading still lists it (read just before it exited).
    let r = members(&[(10, Q), (11, Q)]);
    a.step(
        1,
        &[(1, r), (2, one(2, 0))],
        vec![Event::MemberLeft {
            id: 1,
            member: 11,
            last_cpu_ns: None,
        }],
    )
    .unwrap();
    let e = a.entity(1).unwrap();
    assert_eq!(e.members, 1);
    assert!((e.allowance - 3.0).abs() < 1e-12, "{}", e.allowance);
    // A member nobody announced is ignored.
    let r = members(&[(10, 2 * Q), (99, 50 * Q)]);
    a.step(1, &[(1, r), (2, one(2, 0))], vec![]).unwrap();
    let e = a.entity(1).unwrap();
    assert_eq!(e.members, 1);
    assert!((e.allowance - 2.0).abs() < 1e-12, "{}", e.allowance);
    assert_invariant(&a);
}

/// Strict ALPS on one CPU with quantization-aware accounting (spec section 6).
fn checked() -> Alps {
    Alps::new(ShareConfig {
        checks: true,
        ..ShareConfig::new(Q, 1)
    })
    .unwrap()
}

#[test]
fn a_check_stops_an_entity_where_it_runs_out() {
    let mut a = checked();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
    // Entity 0 used 6 ms of its 10: it could run out 4 ms after the tick at 20 ms.
    let out = a
        .step(1, &[(0, one(0, 6_000_000)), (1, one(1, 4_000_000))], vec![])
        .unwrap();
    assert!(out.actions.is_empty());
    assert_eq!(out.wake_at, Some(24_000_000));
    assert!(a.due_checks(22_000_000).is_empty());
    assert_eq!(a.due_checks(24_000_000), vec![0]);
    // It ran flat out: stopped at the check, exactly spent, not a quantum later.
    let out = a.check(24_000_000, &[(0, one(0, 10_000_000))]);
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    assert_eq!(allowance(&a, 0), 0.0);
    assert_eq!(a.counters().checks, 1);
    assert_invariant(&a);
    // Without checks the same entity runs on to the next tick.
    let mut b = strict(true);
    b.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
    let out = b
        .step(1, &[(0, one(0, 6_000_000)), (1, one(1, 4_000_000))], vec![])
        .unwrap();
    assert_eq!(out.wake_at, None);
}

#[test]
fn a_check_rearms_from_what_is_left() {
    let mut a = checked();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
    a.step(1, &[(0, one(0, 6_000_000)), (1, one(1, 4_000_000))], vec![])
        .unwrap();
    // Half speed since the tick: 2 ms of the 4 ms left are gone, so the next earliest
    // exhaustion is 2 ms later.
    let out = a.check(24_000_000, &[(0, one(0, 8_000_000))]);
    assert!(out.actions.is_empty());
    assert_eq!(out.wake_at, Some(26_000_000));
    assert!((allowance(&a, 0) - 0.2).abs() < 1e-9);
    assert_invariant(&a);
}

#[test]
fn a_check_holds_an_entity_that_would_overshoot_more_than_it_undershoots() {
    let mut a = checked();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
    a.step(1, &[(0, one(0, 6_000_000)), (1, one(1, 4_000_000))], vec![])
        .unwrap();
    // Flat out since the tick but 0.3 ms short of the check's estimate: 0.3 ms left, and the
    // next decision at least 1 ms away, in which it would use 1 ms. Stopped now, 0.3 ms under.
    let out = a.check(23_700_000, &[(0, one(0, 9_700_000))]);
    assert_eq!(out.actions, vec![Action::Stop(0)]);
    let e = a.entity(0).unwrap();
    assert!(e.held && !e.eligible && (e.allowance - 0.03).abs() < 1e-9);
    assert_invariant(&a);
    // It stays stopped, unread, while entity 1 (2.6 quanta left, read lazily at 50 ms) runs
    // alone from the check on.
    for _ in 0..2 {
        assert!(a.due(1).is_empty());
        assert!(a.step(1, &[], vec![]).unwrap().actions.is_empty());
        assert!(a.entity(0).unwrap().held);
    }
    assert_eq!(a.due(1), vec![1]);
    // By 50 ms entity 1 has used 30.3 ms: the group has spent its cycle (0.03 quanta held
    // back, 0.03 overdrawn). The cycle ends, the held remainder carries over, entity 0 runs.
    let out = a.step(1, &[(1, one(1, 30_300_000))], vec![]).unwrap();
    assert!(out.cycle.is_some());
    assert_eq!(out.actions, vec![Action::Continue(0)]);
    let e = a.entity(0).unwrap();
    assert!(!e.held && e.eligible && (e.allowance - 1.03).abs() < 1e-9);
    assert!((allowance(&a, 1) - 2.97).abs() < 1e-9);
    assert_invariant(&a);
}

#[test]
fn when_every_entity_left_is_held_the_cycle_ends() {
    let mut a = checked();
    a.step(1, &[], vec![arrive(0, 1), arrive(1, 1)]).unwrap();
    // Entity 1 overdraws at the tick; entity 0 has 0.4 quanta left and a check at 24 ms.
    let out = a
        .step(
            1,
            &[(0, one(0, 6_000_000)), (1, one(1, 11_000_000))],
            vec![],
        )
        .unwrap();
    assert_eq!(out.actions, vec![Action::Stop(1)]);
    assert_eq!(out.wake_at, Some(24_000_000));
    // Held with 0.3 ms left: nobody else may run, so the cycle ends at the check.
    let out = a.check(23_700_000, &[(0, one(0, 9_700_000))]);
    assert!(out.cycle.is_some());
    assert_eq!(out.actions, vec![Action::Continue(1)]);
    assert!(a.entity(0).unwrap().eligible && a.entity(1).unwrap().eligible);
    assert!((allowance(&a, 0) - 1.03).abs() < 1e-9);
    assert!((allowance(&a, 1) - 0.9).abs() < 1e-9);
    assert_invariant(&a);
}

#[test]
fn the_blocked_charge_is_clamped_to_what_is_left() {
    for (checks, want) in [(false, -0.7), (true, 0.0)] {
        let mut a = Alps::new(ShareConfig {
            checks,
            ..ShareConfig::new(Q, 1)
        })
        .unwrap();
        a.step(1, &[], vec![arrive(0, 1), arrive(1, 3)]).unwrap();
        let asleep = Reading::single(0, 7_000_000, true, 1);
        let out = a
            .step(1, &[(0, asleep), (1, one(1, 3_000_000))], vec![])
            .unwrap();
        assert_eq!(out.actions, vec![Action::Stop(0)]);
        assert!((allowance(&a, 0) - want).abs() < 1e-9, "checks {checks}");
        assert_invariant(&a);
    }
}
