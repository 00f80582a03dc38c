//! The memory arena's feedback rule (spec tickets §4, "Memory, in tact", cgroup v1): jobs share
//! an arena, a parent cgroup with a memory limit, and v1 has no floor inside it
//! (`memory.soft_limit_in_bytes` is ignored by reclaim that a parent's limit causes). So every
//! 100 ms, when the arena is under pressure and a protected job is below its floor, the rule
//! lowers the limits of the siblings above theirs (unprotected jobs have a floor of 0) by what the
//! protected ones miss, and it raises them again once there is room to spare beyond that.
//!
//! The rule is pure: usage, floors and limits in, the limits to write out. It is not
//! work-conserving: memory a protected job does not fill stays held back for it while the others
//! are limited, which is the price of a floor that v1 does not give (reports must say so).

/// One job of the arena, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaJob {
    /// What its cgroup uses now (page cache included).
    pub usage: u64,
    /// Its memory rights: what it keeps whatever the others do (0 when unprotected).
    pub floor: u64,
    /// Its limit as written now; `None` when it has none.
    pub limit: Option<u64>,
    /// What of its usage the kernel cannot reclaim (anonymous and shared memory, without swap):
    /// a limit below it only fails.
    pub pinned: u64,
}

/// The arena as a whole, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaState {
    /// The arena's own limit.
    pub limit: u64,
    /// What its jobs use together.
    pub usage: u64,
    /// The kernel failed a charge against the arena's limit since the last look (v1
    /// `memory.failcnt` grew): it reclaimed, so the arena is under pressure whatever its usage.
    pub hit_limit: bool,
}

/// The rule's constants, all derived from the arena's limit by [`ArenaRule::for_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaRule {
    /// Usage within this of the limit is pressure; raising keeps this much free beyond the
    /// deficit, so that raising does not cause the next squeeze at once.
    pub margin: u64,
    /// The most a limit rises per step (a slow rise lets the kernel and the protected jobs show
    /// pressure before the others take everything back).
    pub step: u64,
    /// No limit goes below this, even for unprotected jobs: a process's own memory cannot be
    /// reclaimed without swap, and a limit under it only fails.
    pub min_limit: u64,
}

impl ArenaRule {
    /// Margin 1/64 of the arena (256 KiB of 16 MiB), step 1/32 (a limit rises from nothing to
    /// the whole arena in 32 steps, 3.2 s at 100 ms), and at least 1/64 for any job.
    pub fn for_limit(limit: u64) -> ArenaRule {
        ArenaRule {
            margin: (limit / 64).max(1),
            step: (limit / 32).max(1),
            min_limit: (limit / 64).max(1),
        }
    }

    /// The lowest limit `job` may get: its floor, and never under [`ArenaRule::min_limit`] nor
    /// what it cannot give back.
    pub fn lowest(&self, job: &ArenaJob) -> u64 {
        job.floor.max(self.min_limit).max(job.pinned)
    }

    /// The limits to hold next, one per job (`None`: no limit).
    ///
    /// - Under pressure (usage within `margin` of the limit, or a failed charge) with protected
    ///   jobs below their floors, the jobs above theirs give up together what those miss (the
    ///   deficit), each in proportion to how far above its floor it is: its limit becomes its
    ///   usage less its part, never under [`ArenaRule::lowest`] and never above its limit now.
    ///   They give at least what takes the arena out of the margin: a protected job that stays
    ///   a few bytes short of its floor would otherwise have them give those few bytes again at
    ///   every step, for as many steps as the margin holds deficits (a minute and more at 100 ms
    ///   for a deficit of a few hundred bytes), with the limits moving all that time.
    /// - With room to spare (free memory beyond the deficit and the margin), each limited job's
    ///   limit rises by its part of the spare, at most `step`, and is lifted once it reaches the
    ///   arena's limit.
    /// - Otherwise the limits stay.
    pub fn next_limits(&self, arena: &ArenaState, jobs: &[ArenaJob]) -> Vec<Option<u64>> {
        let deficit: u64 = jobs
            .iter()
            .filter(|j| j.floor > 0)
            .map(|j| j.floor.saturating_sub(j.usage))
            .sum();
        let pressure = arena.hit_limit || arena.usage.saturating_add(self.margin) >= arena.limit;
        // Nothing goes below its lowest, even a limit written before a floor rose.
        let kept = |j: &ArenaJob| j.limit.map(|l| l.max(self.lowest(j)));
        if pressure && deficit > 0 {
            let excess = |j: &ArenaJob| j.usage.saturating_sub(self.lowest(j));
            let total: u64 = jobs.iter().map(excess).sum();
            if total == 0 {
                return jobs.iter().map(kept).collect();
            }
            let out_of_margin =
                (arena.usage.saturating_add(self.margin + 1)).saturating_sub(arena.limit);
            let need = deficit.max(out_of_margin).min(total);
            return jobs
                .iter()
                .map(|j| {
                    let e = excess(j);
                    if e == 0 {
                        return kept(j);
                    }
                    // Rounded up, so that the parts add up to at least the deficit.
                    let part = ((e as u128 * need as u128).div_ceil(total as u128)) as u64;
                    let to = (j.usage - part.min(e)).max(self.lowest(j));
                    Some(j.limit.map_or(to, |l| l.min(to)).max(self.lowest(j)))
                })
                .collect();
        }
        let free = arena.limit.saturating_sub(arena.usage);
        let spare = free.saturating_sub(deficit).saturating_sub(self.margin);
        let limited = jobs.iter().filter(|j| j.limit.is_some()).count() as u64;
        if spare == 0 || limited == 0 {
            return jobs.iter().map(kept).collect();
        }
        let rise = (spare / limited).clamp(1, self.step);
        jobs.iter()
            .map(|j| {
                let l = kept(j)?.saturating_add(rise);
                (l < arena.limit).then_some(l)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn job(usage: u64, floor: u64, limit: Option<u64>) -> ArenaJob {
        ArenaJob {
            usage,
            floor,
            limit,
            pinned: 0,
        }
    }

    #[test]
    fn a_protected_job_below_its_floor_takes_from_the_ones_above_theirs_in_proportion() {
        let rule = ArenaRule::for_limit(16 * MIB);
        let arena = ArenaState {
            limit: 16 * MIB,
            usage: 16 * MIB,
            hit_limit: false,
        };
        // small misses 2 MiB of its 5 MiB; big is 6 MiB above its 5 MiB, the hog 2 MiB above
        // its lowest (256 KiB): they give 2 MiB in the ratio of 6 : 2.
        let jobs = [
            job(3 * MIB, 5 * MIB, None),
            job(11 * MIB, 5 * MIB, None),
            job(2 * MIB + MIB / 4, 0, None),
        ];
        let l = rule.next_limits(&arena, &jobs);
        assert_eq!(l[0], None);
        let (big, hog) = (l[1].unwrap(), l[2].unwrap());
        let freed = (11 * MIB - big) + (2 * MIB + MIB / 4 - hog);
        assert!((2 * MIB..2 * MIB + 2).contains(&freed), "{freed}");
        let ratio = (11 * MIB - big) as f64 / (2 * MIB + MIB / 4 - hog) as f64;
        assert!((ratio - 3.0).abs() < 1e-3, "{ratio}");
    }

    #[test]
    fn without_a_deficit_limits_hold_under_pressure_and_rise_with_room_to_spare() {
        let rule = ArenaRule::for_limit(16 * MIB);
        let jobs = [
            job(5 * MIB, 5 * MIB, None),
            job(10 * MIB, 5 * MIB, Some(10 * MIB)),
        ];
        let full = ArenaState {
            limit: 16 * MIB,
            usage: 15 * MIB + 900 * 1024,
            hit_limit: false,
        };
        assert_eq!(rule.next_limits(&full, &jobs), vec![None, Some(10 * MIB)]);
        let roomy = ArenaState {
            usage: 12 * MIB,
            ..full
        };
        assert_eq!(
            rule.next_limits(&roomy, &jobs),
            vec![None, Some(10 * MIB + rule.step)]
        );
        // A limit that would reach the arena's is lifted.
        let near = [job(5 * MIB, 5 * MIB, None), job(1, 0, Some(16 * MIB - 1))];
        assert_eq!(rule.next_limits(&roomy, &near), vec![None, None]);
    }

    #[test]
    fn a_failed_charge_is_pressure_even_below_the_margin() {
        let rule = ArenaRule::for_limit(16 * MIB);
        let jobs = [job(4 * MIB, 5 * MIB, None), job(10 * MIB, 0, None)];
        let arena = ArenaState {
            limit: 16 * MIB,
            usage: 14 * MIB,
            hit_limit: true,
        };
        assert_eq!(rule.next_limits(&arena, &jobs)[1], Some(9 * MIB));
        // What a job cannot give back is not asked of it: the other one gives it all.
        let pinned = [
            job(4 * MIB, 5 * MIB, None),
            ArenaJob {
                pinned: 5 * MIB,
                ..job(5 * MIB, 0, None)
            },
            job(5 * MIB, 0, None),
        ];
        let l = rule.next_limits(&arena, &pinned);
        assert_eq!(l[1], None);
        assert_eq!(l[2], Some(4 * MIB));
    }
}
