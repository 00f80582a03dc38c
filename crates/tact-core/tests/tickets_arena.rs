//! The v1 memory arena's rule (tickets::arena): the limits it writes never go below a floor, a
//! squeeze frees what the protected jobs miss and no more than that (up to rounding), and
//! against a model of the kernel's reclaim the loop settles with every protected job that wants
//! its floor holding it, then lifts the limits once the pressure is gone.

use proptest::prelude::*;
use tact_core::tickets::arena::{ArenaJob, ArenaRule, ArenaState};

const MIB: u64 = 1 << 20;
const ARENA: u64 = 16 * MIB;

fn jobs_strategy() -> impl Strategy<Value = Vec<ArenaJob>> {
    proptest::collection::vec(
        (
            0..=ARENA,
            prop_oneof![Just(0u64), 0..=ARENA / 2],
            proptest::option::of(0..=ARENA),
            prop_oneof![Just(0u64), 0..=ARENA / 4],
        ),
        1..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(usage, floor, limit, pinned)| ArenaJob {
                usage,
                floor,
                limit,
                pinned: pinned.min(usage),
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn limits_never_go_below_a_floor_nor_reach_the_arena(
        jobs in jobs_strategy(),
        usage in 0..=ARENA + MIB,
        hit_limit: bool,
    ) {
        let rule = ArenaRule::for_limit(ARENA);
        let arena = ArenaState { limit: ARENA, usage, hit_limit };
        let next = rule.next_limits(&arena, &jobs);
        prop_assert_eq!(next.len(), jobs.len());
        for (j, l) in jobs.iter().zip(&next) {
            if let Some(l) = *l {
                prop_assert!(
                    l >= j.floor && l >= rule.min_limit && l >= j.pinned,
                    "{:?} -> {}", j, l
                );
                // A limit appears only by a squeeze, which starts from the usage.
                if j.limit.is_none() {
                    prop_assert!(l <= j.usage.max(rule.lowest(j)), "{:?} -> {}", j, l);
                }
            }
        }
    }

    #[test]
    fn a_squeeze_frees_the_deficit_or_the_margin_and_no_more(
        jobs in jobs_strategy(),
        below in prop_oneof![Just(0u64), 0..=ARENA / 32],
        hit_limit: bool,
    ) {
        let rule = ArenaRule::for_limit(ARENA);
        let usage = jobs.iter().map(|j| j.usage).sum::<u64>().max(ARENA - below);
        let arena = ArenaState { limit: ARENA, usage, hit_limit };
        let pressure = hit_limit || usage + rule.margin >= ARENA;
        let next = rule.next_limits(&arena, &jobs);
        let deficit: u64 = jobs
            .iter()
            .filter(|j| j.floor > 0)
            .map(|j| j.floor.saturating_sub(j.usage))
            .sum();
        let excess: u64 = jobs.iter().map(|j| j.usage.saturating_sub(rule.lowest(j))).sum();
        // What the new limits take from each job's usage now.
        let freed = |j: &ArenaJob, l: &Option<u64>| j.usage - l.map_or(j.usage, |l| l.min(j.usage));
        let taken: u64 = jobs.iter().zip(&next).map(|(j, l)| freed(j, l)).sum();
        let already: u64 = jobs.iter().map(|j| freed(j, &j.limit)).sum();
        if pressure && deficit > 0 && excess > 0 {
            // The deficit, or what takes the arena out of the margin when that is more.
            let out_of_margin = (usage + rule.margin + 1).saturating_sub(ARENA);
            let need = deficit.max(out_of_margin).min(excess);
            prop_assert!(taken >= need, "took {} of {}", taken, need);
            // Rounding up costs at most a byte per job; limits already lower stay lower.
            prop_assert!(taken <= need + jobs.len() as u64 + already);
        } else {
            // No squeeze: no limit falls (a limit below a risen floor is raised to it).
            for (j, l) in jobs.iter().zip(&next) {
                if let (Some(old), Some(new)) = (j.limit, *l) {
                    prop_assert!(new >= old.min(ARENA), "{:?} -> {}", j, new);
                }
            }
        }
    }

    #[test]
    fn the_loop_settles_with_every_floor_held_then_lifts_the_limits(
        demands in proptest::collection::vec(0..=4 * ARENA, 2..6),
        floor_parts in proptest::collection::vec(prop_oneof![Just(0u64), 1..=100u64], 2..6),
    ) {
        settles_then_lifts(&demands, &floor_parts)?;
    }
}

/// Found by CI: two protected jobs that stay 355 and 95 bytes short of their floors. Each
/// squeeze freed only those 450 bytes, so the limits crept down for 580 steps before the arena
/// left the margin; a squeeze now takes it out of the margin at once.
#[test]
fn a_deficit_of_a_few_bytes_settles_at_once() {
    settles_then_lifts(&[4926010, 2176671, 8453321, 4616476], &[43, 19, 73, 0]).unwrap();
}

/// Against the kernel model: floors that fit are held after 600 steps, the limits no longer move,
/// and once the pressure goes they are lifted.
fn settles_then_lifts(demands: &[u64], floor_parts: &[u64]) -> Result<(), TestCaseError> {
    let n = demands.len().min(floor_parts.len());
    let rule = ArenaRule::for_limit(ARENA);
    // Floors that fit beside everyone's lowest limit and the margin.
    let room = ARENA - rule.margin - n as u64 * rule.min_limit;
    let parts: u64 = floor_parts[..n].iter().sum::<u64>().max(100);
    let floors: Vec<u64> = floor_parts[..n].iter().map(|p| room * p / parts).collect();
    let mut sim = Kernel::new(&demands[..n], &floors);
    for _ in 0..600 {
        sim.tick(&rule);
    }
    let settled = sim.limits.clone();
    for _ in 0..50 {
        sim.tick(&rule);
        prop_assert!(sim.usage.iter().sum::<u64>() <= ARENA);
    }
    prop_assert_eq!(&sim.limits, &settled, "the limits still move");
    for i in 0..n {
        if floors[i] > 0 && demands[i] >= floors[i] {
            prop_assert!(
                sim.usage[i] >= floors[i],
                "job {} holds {} of its floor {}: {:?}",
                i,
                sim.usage[i],
                floors[i],
                sim
            );
        }
    }
    // The pressure goes: the protected jobs want their floors, the others little. The limits
    // are lifted.
    sim.demands = floors
        .iter()
        .map(|&f| if f > 0 { f } else { rule.min_limit / 2 })
        .collect();
    for _ in 0..200 {
        sim.tick(&rule);
    }
    prop_assert!(sim.limits.iter().all(Option::is_none), "{:?}", sim);
    Ok(())
}

/// Not work-conserving (spec §4): a protected job below its floor that does not fill it keeps
/// the others limited although the arena has room.
#[test]
fn an_unfilled_floor_holds_the_others_back() {
    let rule = ArenaRule::for_limit(ARENA);
    let mut sim = Kernel::new(&[MIB, 4 * ARENA], &[12 * MIB, 0]);
    for _ in 0..200 {
        sim.tick(&rule);
    }
    let free = ARENA - sim.usage.iter().sum::<u64>();
    assert!(free >= 10 * MIB, "{sim:?}");
    assert_eq!(sim.limits[0], None);
    assert!(sim.limits[1].unwrap() <= ARENA - 11 * MIB, "{sim:?}");
}

/// A model of reclaim in a v1 arena: each job faults in up to `GROWTH` a tick toward what it
/// wants (capped by its limit); when the arena overflows, the kernel takes the overflow from every
/// job in proportion to its usage, floors unseen (as v1 does), and counts a failed charge.
#[derive(Debug)]
struct Kernel {
    demands: Vec<u64>,
    floors: Vec<u64>,
    usage: Vec<u64>,
    limits: Vec<Option<u64>>,
}

const GROWTH: u64 = ARENA / 40;

impl Kernel {
    fn new(demands: &[u64], floors: &[u64]) -> Kernel {
        Kernel {
            demands: demands.to_vec(),
            floors: floors.to_vec(),
            usage: vec![0; demands.len()],
            limits: vec![None; demands.len()],
        }
    }

    fn tick(&mut self, rule: &ArenaRule) {
        for i in 0..self.usage.len() {
            let want = self.demands[i].min(self.limits[i].unwrap_or(u64::MAX));
            self.usage[i] = if self.usage[i] < want {
                (self.usage[i] + GROWTH).min(want)
            } else {
                want
            };
        }
        let total: u64 = self.usage.iter().sum();
        let hit_limit = total > ARENA;
        if hit_limit {
            let over = total - ARENA;
            for u in &mut self.usage {
                *u -= ((*u as u128 * over as u128).div_ceil(total as u128)) as u64;
            }
        }
        let jobs: Vec<ArenaJob> = (0..self.usage.len())
            .map(|i| ArenaJob {
                usage: self.usage[i],
                floor: self.floors[i],
                limit: self.limits[i],
                pinned: 0,
            })
            .collect();
        let arena = ArenaState {
            limit: ARENA,
            usage: self.usage.iter().sum(),
            hit_limit,
        };
        self.limits = rule.next_limits(&arena, &jobs);
        // The kernel reclaims a job down to a lowered limit when it is written.
        for (u, l) in self.usage.iter_mut().zip(&self.limits) {
            if let Some(l) = l {
                *u = (*u).min(*l);
            }
        }
    }
}
