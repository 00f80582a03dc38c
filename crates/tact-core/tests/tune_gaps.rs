//! Spec §6's gap rule in TCC: for a host that cannot see saturation
//! ([`Policy::saturation_unseen`]), a gap between completions longer than ten mean gaps is
//! starvation: no busy time, no sample across it.
//!
//! The hosts here report what such a host may report, a pool always holding the target with
//! work waiting, whatever the input does (so that the busy clock never depends on the counts
//! the controller chose).

use std::time::Duration;

use proptest::prelude::*;
use tact_core::tune::{Load, Policy, Tcc, TuneParams};

const MS: Duration = Duration::from_millis(1);

/// The paper's parameters from `n` workers (up to 64): Base needs 30 batches of 16 samples, so
/// a few hundred completions stay in it.
fn params(n: usize) -> TuneParams {
    TuneParams {
        n_init: n,
        n_max: 64,
        ..TuneParams::paper()
    }
}

/// A controller fed by a host that cannot see saturation, with or without the rule.
struct Blind {
    tcc: Tcc,
    now: Duration,
}

impl Blind {
    fn new(n: usize, rule: bool) -> Blind {
        let mut tcc = Tcc::new(params(n)).unwrap();
        if rule {
            tcc.saturation_unseen();
        }
        tcc.on_start(Duration::ZERO, Load::new(n, 1));
        Blind {
            tcc,
            now: Duration::ZERO,
        }
    }

    fn load(&self) -> Load {
        Load::new(self.tcc.target(), 1)
    }

    /// `k` tasks end together, `after` the previous event.
    fn complete(&mut self, after: Duration, k: usize) {
        self.now += after;
        for _ in 0..k {
            self.tcc.on_complete(self.now, self.load());
        }
    }

    fn tick(&mut self, after: Duration) {
        self.now += after;
        self.tcc.on_tick(self.now);
    }

    fn samples(&self) -> usize {
        self.tcc.status().samples
    }
}

/// One task every 10 ms, past the settling (n + 16 completions) and some samples.
fn settled(rule: bool) -> Blind {
    let mut b = Blind::new(2, rule);
    for _ in 0..60 {
        b.complete(MS * 10, 1);
    }
    assert!(b.samples() > 30, "{}", b.samples());
    b
}

#[test]
fn a_gap_of_eleven_means_is_starved_and_one_of_nine_is_not() {
    let mut b = settled(true);
    let (busy, samples) = (b.tcc.busy(), b.samples());
    b.complete(MS * 110, 1);
    assert_eq!(b.tcc.busy(), busy, "no busy time across 11 mean gaps");
    assert_eq!(b.samples(), samples, "no sample across it");
    // The completion that ended it starts the next sample.
    b.complete(MS * 10, 1);
    assert_eq!(b.tcc.busy(), busy + MS * 10);
    assert_eq!(b.samples(), samples + 1);

    // The mean excludes the gap judged: with it, 110 ms against (9 + 11) ms would pass.
    let mut b = settled(true);
    let (busy, samples) = (b.tcc.busy(), b.samples());
    b.complete(MS * 90, 1);
    assert_eq!(b.tcc.busy(), busy + MS * 90, "9 mean gaps are busy time");
    assert_eq!(b.samples(), samples + 1);

    // Without the rule, the host's "all busy" stands and 110 ms is a sample.
    let mut b = settled(false);
    let (busy, samples) = (b.tcc.busy(), b.samples());
    b.complete(MS * 110, 1);
    assert_eq!(b.tcc.busy(), busy + MS * 110);
    assert_eq!(b.samples(), samples + 1);
}

#[test]
fn busy_time_is_credited_at_the_completion_and_a_long_gap_starves_on_a_tick() {
    let mut b = settled(true);
    let busy = b.tcc.busy();
    // Ticks within the bound hold the busy time back until the gap ends.
    b.tick(MS * 40);
    assert_eq!(b.tcc.busy(), busy);
    assert!(b.tcc.status().saturated);
    b.complete(MS * 40, 1);
    assert_eq!(b.tcc.busy(), busy + MS * 80);
    // Past ten mean gaps (now 0.9·10 + 0.1·80 = 17 ms), a tick already sees the pool starved.
    let busy = b.tcc.busy();
    b.tick(MS * 160);
    assert!(b.tcc.status().saturated);
    b.tick(MS * 20);
    assert!(!b.tcc.status().saturated);
    for _ in 0..100 {
        b.tick(Duration::from_secs(1));
    }
    assert_eq!(b.tcc.busy(), busy);
    b.complete(MS * 10, 1);
    assert!(
        b.tcc.status().saturated,
        "the completion ends the starved gap"
    );
    assert_eq!(b.tcc.busy(), busy);
}

#[test]
fn a_pool_whose_tasks_end_together_is_not_starved_between_rounds() {
    // 16 workers ending together every 160 ms: a mean gap of 10 ms and gaps of 16 means.
    let run = |rule: bool, pause: Duration| {
        let mut b = Blind::new(16, rule);
        for round in 0..20 {
            let gap = if round == 10 { pause } else { MS * 160 };
            b.complete(gap, 16);
        }
        (b.tcc.busy(), b.samples())
    };
    let seen = run(false, MS * 160);
    assert_eq!(run(true, MS * 160), seen, "the rule is inert on rounds");
    // A pause of ten rounds is still starvation (two rounds are 320 ms).
    let (busy, samples) = run(true, MS * 1600);
    assert_eq!(
        busy,
        seen.0 - MS * 160,
        "the pause and its round are not busy"
    );
    assert_eq!(samples, seen.1 - 1);
}

/// A host that cannot see saturation, fed input in blocks: `size` tasks 10 ms apart, then
/// `pause` without any. The first transition's throughput (the measured base count's).
fn first_judged_throughput(rule: bool, size: usize, pause: Duration) -> f64 {
    let mut b = Blind::new(4, rule);
    for i in 0..100_000 {
        let gap = if i % size == 0 { pause } else { MS * 10 };
        b.complete(gap, 1);
        if let Some(tr) = b.tcc.drain_trace().first() {
            return tr.throughput.expect("Base judges a configuration");
        }
    }
    panic!("no transition");
}

#[test]
fn input_in_blocks_no_longer_makes_a_configuration_look_slow() {
    // 20 tasks at 100/s, then 1 s without input: a twentieth of the samples are pauses, far more
    // than trimming (1%) removes.
    let with = first_judged_throughput(true, 20, Duration::from_secs(1));
    let without = first_judged_throughput(false, 20, Duration::from_secs(1));
    assert!((with - 100.0).abs() < 1.0, "with the rule: {with}/s");
    assert!(without < 30.0, "without: {without}/s");
    // Unbroken input: the same estimate either way.
    let steady = first_judged_throughput(false, usize::MAX, MS * 10);
    assert_eq!(first_judged_throughput(true, usize::MAX, MS * 10), steady);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Gaps that stay within a factor 10 of each other are never starvation: the rule changes
    /// nothing. One pause longer than ten of the longest is, whole: exactly its busy time goes.
    #[test]
    fn the_rule_takes_exactly_the_pauses(
        gaps in prop::collection::vec(1u64..=99, 3..300),
        at in 2usize..300,
        pause_factor in 10.01f64..1000.0,
    ) {
        // Gaps of 1–99 ms scaled into [10, 99]: within 9.9× of each other.
        let gaps: Vec<Duration> = gaps.iter().map(|&g| MS * (10 + (g as u32 * 89) / 99)).collect();
        let run = |rule: bool, pause: Option<(usize, Duration)>| {
            let mut b = Blind::new(2, rule);
            for (i, &g) in gaps.iter().enumerate() {
                if let Some((at, p)) = pause {
                    if i == at {
                        b.complete(p, 1);
                    }
                }
                b.complete(g, 1);
            }
            (b.tcc.busy(), b.samples(), b.tcc.target())
        };
        let plain = run(false, None);
        prop_assert_eq!(run(true, None), plain);
        let longest = *gaps.iter().max().unwrap();
        let pause = longest.mul_f64(pause_factor);
        let at = at.min(gaps.len() - 1).max(2);
        let (busy_plain, ..) = run(false, Some((at, pause)));
        let (busy_rule, ..) = run(true, Some((at, pause)));
        prop_assert_eq!(busy_rule, busy_plain - pause);
    }
}
