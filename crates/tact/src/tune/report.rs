//! What `tact tune` tells: one JSON line per change of the count, per controller transition,
//! per bottleneck reading and per change of a frozen pool (`--json-log`), transitions and
//! frozen counts on stderr with `-v`, a line at the start and a summary line at the end.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tact_core::tune::{Load, Phase, Reason, Transition, TuneParams};
use tact_lib::tune::{TurnEvent, TurnKind, TurnStats};

use super::freeze::Frozen;
use crate::trace::JsonLines;

/// The line on stderr as the controller starts: how tact drives the command, the count, and
/// when TCC (`tcc`: its parameters) takes its first step, which takes tens of seconds and says
/// nothing meanwhile without -v.
pub fn start_line(
    how: &str,
    target: usize,
    n_max: usize,
    spec: &str,
    tcc: Option<&TuneParams>,
) -> String {
    let jobs = if target == 1 { "job" } else { "jobs" };
    let start = format!("tact: tune: {how}, starting at {target} {jobs} at once (at most {n_max})");
    let Some(p) = tcc else {
        return format!("{start}, policy {spec}");
    };
    // The first configuration settles for max(n, b) completions, then measures n* batches of
    // b = max(batch_min, n) (tact-core's Tcc), unless its dwell cap of busy time comes first.
    let b = (p.batch_min as usize).max(target);
    let jobs = (p.n_star as usize + 1) * b;
    format!(
        "{start}; TCC's first step after ~{jobs} jobs finish or {}s at full load, whichever is \
         first (-v shows each step)",
        p.dwell.as_secs_f64()
    )
}

#[derive(Serialize)]
struct TargetLine {
    /// Seconds since the command started.
    t: f64,
    kind: &'static str,
    target: usize,
    /// The count before (none for the first line).
    from: Option<usize>,
    /// Jobs finished so far.
    completions: u64,
    in_flight: usize,
}

#[derive(Serialize)]
struct TransitionLine {
    t: f64,
    kind: &'static str,
    cycle: u64,
    from: Phase,
    to: Phase,
    reason: Reason,
    target_from: usize,
    target_to: usize,
    /// Jobs per busy second of the configuration judged.
    throughput: Option<f64>,
    batches: u32,
    forced: bool,
    /// The bottleneck hint decided it (--bottleneck).
    hinted: bool,
    /// PSI decided it (tcc:psi=1).
    psi: bool,
    /// Seconds the command kept all its slots busy so far.
    busy: f64,
    completions: u64,
}

/// A reading of `--bottleneck`, as the controller got it (TCC clamps it to [0, 1]; a value
/// above 1 here says a cap was set below what the device or link does).
#[derive(Serialize)]
struct HintLine<'a> {
    t: f64,
    kind: &'static str,
    /// The source, as `--bottleneck` takes it (`disk:vda@riops=300`).
    bottleneck: &'a str,
    utilization: f64,
}

/// `--freeze`: the pool's workers and how many of them tact holds frozen, whenever either
/// changes (the frozen count follows the target as workers reach the end of a task).
#[derive(Serialize)]
struct FrozenLine {
    t: f64,
    kind: &'static str,
    /// Live workers.
    workers: usize,
    frozen: usize,
    /// Of the frozen, those stopped mid-task (after --freeze-wait).
    mid_task: usize,
}

/// `--key`: the workload's key, where it is kept, and the count the run warm-starts from.
#[derive(Serialize)]
struct KeyLine<'a> {
    t: f64,
    kind: &'static str,
    key: &'a str,
    file: String,
    /// The recorded steady count the first cycle starts from (none: a cold start).
    warm: Option<usize>,
}

/// `--coordinate`: the controller waits for the turn, gets it, or gives it up.
#[derive(Serialize)]
struct TurnLine<'a> {
    t: f64,
    kind: &'static str,
    turn: TurnKind,
    key: &'a str,
    /// A grant: seconds waited for it; a release: seconds the turn was held.
    #[serde(skip_serializing_if = "Option::is_none")]
    waited: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<f64>,
    /// CLOCK_MONOTONIC (seconds since boot, the same in every process) when the line was
    /// written, a few microseconds after `t`: it puts several instances' logs on one clock.
    monotonic: f64,
}

#[derive(Serialize)]
struct EndLine {
    t: f64,
    kind: &'static str,
    completions: u64,
    /// Jobs per second over the whole run.
    throughput: f64,
    target_min: usize,
    target_median: usize,
    target_max: usize,
    target_final: usize,
    /// The command's exit status as tact reports it.
    status: i32,
    /// `--freeze`: the most workers frozen at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    frozen_max: Option<usize>,
    /// `--coordinate`: turns granted, seconds spent waiting for them, and the other instances'
    /// completions passed to the controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    turns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_waited: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_completions: Option<u64>,
}

/// The summary of a run, for the last line.
pub struct Summary<'a> {
    pub completions: u64,
    pub wall: Duration,
    pub status: i32,
    /// `--coordinate`'s key and its turns.
    pub turns: Option<(&'a str, TurnStats)>,
}

pub struct Report {
    log: Option<JsonLines>,
    verbose: bool,
    /// Each target in force and for how long, in order.
    history: Vec<(usize, Duration)>,
    /// When the current target came into force.
    since: Duration,
    /// `--freeze`: the most workers frozen at once, and the pool's largest size.
    frozen_max: Option<(usize, usize)>,
}

impl Report {
    pub fn new(json_log: Option<&Path>, verbose: bool) -> Result<Self> {
        Ok(Report {
            log: json_log.map(JsonLines::create).transpose()?,
            verbose,
            history: Vec::new(),
            since: Duration::ZERO,
            frozen_max: None,
        })
    }

    /// The run's `--key`, logged before the first target.
    pub fn key(&mut self, key: &str, file: &Path, warm: Option<usize>) -> Result<()> {
        match &mut self.log {
            Some(log) => log.line(&KeyLine {
                t: 0.0,
                kind: "key",
                key,
                file: file.display().to_string(),
                warm,
            }),
            None => Ok(()),
        }
    }

    /// A new target is in force at `t` (the first one at the start).
    pub fn target(
        &mut self,
        t: Duration,
        target: usize,
        completions: u64,
        load: Load,
    ) -> Result<()> {
        let from = self.history.last().map(|&(n, _)| n);
        if let Some(last) = self.history.last_mut() {
            last.1 += t.saturating_sub(self.since);
        }
        self.history.push((target, Duration::ZERO));
        self.since = t;
        if self.verbose {
            if let Some(from) = from {
                eprintln!(
                    "tact: tune: {:.2} s: {from} -> {target} jobs",
                    t.as_secs_f64()
                );
            }
        }
        match &mut self.log {
            Some(log) => log.line(&TargetLine {
                t: t.as_secs_f64(),
                kind: "target",
                target,
                from,
                completions,
                in_flight: load.in_flight,
            }),
            None => Ok(()),
        }
    }

    /// A controller transition (its `at` is on the same clock as `t` elsewhere).
    pub fn transition(&mut self, tr: &Transition, completions: u64) -> Result<()> {
        if self.verbose {
            eprintln!(
                "tact: tune: {:.2} s: cycle {} {:?} -> {:?} ({:?}{}), {} -> {} jobs{}",
                tr.at.as_secs_f64(),
                tr.cycle,
                tr.from,
                tr.to,
                tr.reason,
                [
                    (tr.forced, ", forced"),
                    (tr.hinted, ", hinted"),
                    (tr.psi, ", psi")
                ]
                .iter()
                .filter_map(|&(on, s)| on.then_some(s))
                .collect::<String>(),
                tr.target_from,
                tr.target_to,
                tr.throughput
                    .map(|x| format!(", {x:.1} jobs/s busy"))
                    .unwrap_or_default(),
            );
        }
        match &mut self.log {
            Some(log) => log.line(&TransitionLine {
                t: tr.at.as_secs_f64(),
                kind: "transition",
                cycle: tr.cycle,
                from: tr.from,
                to: tr.to,
                reason: tr.reason,
                target_from: tr.target_from,
                target_to: tr.target_to,
                throughput: tr.throughput,
                batches: tr.batches,
                forced: tr.forced,
                hinted: tr.hinted,
                psi: tr.psi,
                busy: tr.busy.as_secs_f64(),
                completions,
            }),
            None => Ok(()),
        }
    }

    /// A frozen pool's counts changed at `t`.
    pub fn frozen(&mut self, t: Duration, f: Frozen) -> Result<()> {
        let (most, workers) = self.frozen_max.get_or_insert((0, 0));
        *most = (*most).max(f.frozen);
        *workers = (*workers).max(f.workers);
        if self.verbose {
            eprintln!(
                "tact: tune: {:.2} s: {} of {} workers frozen{}",
                t.as_secs_f64(),
                f.frozen,
                f.workers,
                match f.mid_task {
                    0 => String::new(),
                    n => format!(" ({n} mid-task)"),
                }
            );
        }
        match &mut self.log {
            Some(log) => log.line(&FrozenLine {
                t: t.as_secs_f64(),
                kind: "frozen",
                workers: f.workers,
                frozen: f.frozen,
                mid_task: f.mid_task,
            }),
            None => Ok(()),
        }
    }

    /// A bottleneck reading at `t`, covering the time since the previous one.
    pub fn hint(&mut self, t: Duration, source: &impl std::fmt::Display, u: f64) -> Result<()> {
        match &mut self.log {
            Some(log) => log.line(&HintLine {
                t: t.as_secs_f64(),
                kind: "hint",
                bottleneck: &source.to_string(),
                utilization: u,
            }),
            None => Ok(()),
        }
    }

    /// A change of `--coordinate`'s turn.
    pub fn turn(&mut self, e: &TurnEvent, key: &str) -> Result<()> {
        let took = e.took.as_secs_f64();
        if self.verbose {
            let what = match e.kind {
                TurnKind::Wait => "a round is due: waiting for the turn".to_string(),
                TurnKind::Grant => format!("turn granted after {took:.2} s"),
                TurnKind::Release => format!("turn released after {took:.2} s"),
            };
            eprintln!("tact: tune: {:.2} s: {key}: {what}", e.at.as_secs_f64());
        }
        match &mut self.log {
            Some(log) => log.line(&TurnLine {
                t: e.at.as_secs_f64(),
                kind: "turn",
                turn: e.kind,
                key,
                waited: (e.kind == TurnKind::Grant).then_some(took),
                held: (e.kind == TurnKind::Release).then_some(took),
                monotonic: monotonic_now(),
            }),
            None => Ok(()),
        }
    }

    /// Logs the end and returns the summary line.
    pub fn finish(mut self, s: &Summary) -> Result<String> {
        if let Some(last) = self.history.last_mut() {
            last.1 += s.wall.saturating_sub(self.since);
        }
        let stats = TargetStats::of(&self.history);
        let throughput = s.completions as f64 / s.wall.as_secs_f64().max(1e-9);
        if let Some(log) = &mut self.log {
            log.line(&EndLine {
                t: s.wall.as_secs_f64(),
                kind: "end",
                completions: s.completions,
                throughput,
                target_min: stats.min,
                target_median: stats.median,
                target_max: stats.max,
                target_final: stats.last,
                status: s.status,
                frozen_max: self.frozen_max.map(|(most, _)| most),
                turns: s.turns.map(|(_, t)| t.turns),
                turn_waited: s.turns.map(|(_, t)| t.waited.as_secs_f64()),
                peer_completions: s.turns.map(|(_, t)| t.peer_completions),
            })?;
        }
        Ok(format!(
            "tact: tune: {} job{} finished in {:.1} s ({throughput:.2}/s); jobs at once: min {}, \
             median {}, max {}, final {}{}{}",
            s.completions,
            if s.completions == 1 { "" } else { "s" },
            s.wall.as_secs_f64(),
            stats.min,
            stats.median,
            stats.max,
            stats.last,
            self.frozen_max
                .map(|(most, workers)| format!("; workers frozen: at most {most} of {workers}"))
                .unwrap_or_default(),
            s.turns
                .map(|(key, t)| format!(
                    "; turns on {key}: {}, {:.1} s waited for them, {} completions of the others",
                    t.turns,
                    t.waited.as_secs_f64(),
                    t.peer_completions
                ))
                .unwrap_or_default(),
        ))
    }
}

/// CLOCK_MONOTONIC in seconds: std's `Instant` hides its value.
fn monotonic_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[derive(Debug, PartialEq)]
struct TargetStats {
    min: usize,
    /// Weighted by how long each target was in force.
    median: usize,
    max: usize,
    last: usize,
}

impl TargetStats {
    fn of(history: &[(usize, Duration)]) -> TargetStats {
        let min = history.iter().map(|h| h.0).min().unwrap_or(0);
        let max = history.iter().map(|h| h.0).max().unwrap_or(0);
        let last = history.last().map_or(0, |h| h.0);
        let mut by_count = history.to_vec();
        by_count.sort_unstable();
        let total: Duration = history.iter().map(|h| h.1).sum();
        let mut acc = Duration::ZERO;
        let median = by_count
            .iter()
            .find(|&&(_, d)| {
                acc += d;
                acc * 2 >= total
            })
            .map_or(last, |h| h.0);
        TargetStats {
            min,
            median,
            max,
            last,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_weighs_targets_by_time_in_force() {
        let s = |v: &[(usize, u64)]| {
            TargetStats::of(
                &v.iter()
                    .map(|&(n, ms)| (n, Duration::from_millis(ms)))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            s(&[(2, 100), (3, 50), (8, 10), (3, 900)]),
            TargetStats {
                min: 2,
                median: 3,
                max: 8,
                last: 3
            }
        );
        assert_eq!(s(&[(4, 0)]).median, 4);
        assert_eq!(s(&[(1, 700), (9, 300)]).median, 1);
    }

    #[test]
    fn a_frozen_pool_is_logged_and_summed_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut r = Report::new(Some(&path), false).unwrap();
        r.target(Duration::ZERO, 2, 0, Load::new(0, 0)).unwrap();
        let f = |workers, frozen, mid_task| Frozen {
            workers,
            frozen,
            mid_task,
        };
        r.frozen(Duration::from_millis(10), f(5, 3, 1)).unwrap();
        r.frozen(Duration::from_millis(20), f(6, 2, 0)).unwrap();
        r.frozen(Duration::from_millis(30), f(0, 0, 0)).unwrap();
        let line = r
            .finish(&Summary {
                completions: 4,
                wall: Duration::from_secs(1),
                status: 0,
                turns: None,
            })
            .unwrap();
        assert!(line.ends_with("; workers frozen: at most 3 of 6"), "{line}");
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["kind"], "frozen");
        assert_eq!(
            (
                &lines[1]["workers"],
                &lines[1]["frozen"],
                &lines[1]["mid_task"]
            ),
            (&5.into(), &3.into(), &1.into())
        );
        assert_eq!(lines[4]["frozen_max"], 3);
    }

    #[test]
    fn the_log_has_targets_transitions_and_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut r = Report::new(Some(&path), false).unwrap();
        r.target(Duration::ZERO, 2, 0, Load::new(0, 0)).unwrap();
        r.transition(
            &Transition {
                at: Duration::from_secs(1),
                busy: Duration::from_millis(900),
                cycle: 0,
                from: Phase::Base,
                to: Phase::Add,
                reason: Reason::Measured,
                target_from: 2,
                target_to: 3,
                throughput: Some(10.0),
                batches: 30,
                forced: false,
                hinted: false,
                psi: false,
            },
            12,
        )
        .unwrap();
        r.target(Duration::from_secs(1), 3, 12, Load::new(2, 1))
            .unwrap();
        r.hint(Duration::from_millis(1100), &"disk:vda@riops=300", 0.87)
            .unwrap();
        let line = r
            .finish(&Summary {
                completions: 40,
                wall: Duration::from_secs(4),
                status: 0,
                turns: None,
            })
            .unwrap();
        assert!(
            line.contains("40 jobs finished in 4.0 s (10.00/s)"),
            "{line}"
        );
        assert!(line.contains("min 2, median 3, max 3, final 3"), "{line}");
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["target", "transition", "target", "hint", "end"]);
        assert_eq!(lines[1]["reason"], "measured");
        assert_eq!(lines[2]["from"], 2);
        assert_eq!(lines[3]["bottleneck"], "disk:vda@riops=300");
        assert_eq!(lines[3]["utilization"], 0.87);
        assert_eq!(lines[4]["completions"], 40);
        // No pool was frozen: the end says nothing of one.
        assert!(lines[4].get("frozen_max").is_none());
        assert!(!line.contains("frozen"), "{line}");
    }

    #[test]
    fn turns_are_logged_and_summed_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut r = Report::new(Some(&path), false).unwrap();
        r.target(Duration::ZERO, 2, 0, Load::new(0, 0)).unwrap();
        let ms = Duration::from_millis;
        for (at, kind, took) in [
            (100, TurnKind::Wait, 0),
            (1600, TurnKind::Grant, 1500),
            (4600, TurnKind::Release, 3000),
        ] {
            let e = TurnEvent {
                at: ms(at),
                kind,
                took: ms(took),
            };
            r.turn(&e, "db-5432").unwrap();
        }
        let stats = TurnStats {
            turns: 1,
            waited: ms(1500),
            held: ms(3000),
            holding: false,
            peer_completions: 40,
        };
        let line = r
            .finish(&Summary {
                completions: 4,
                wall: Duration::from_secs(5),
                status: 0,
                turns: Some(("db-5432", stats)),
            })
            .unwrap();
        assert!(
            line.ends_with(
                "; turns on db-5432: 1, 1.5 s waited for them, 40 completions of the others"
            ),
            "{line}"
        );
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let turns: Vec<_> = lines.iter().filter(|l| l["kind"] == "turn").collect();
        let what: Vec<_> = turns.iter().map(|l| l["turn"].as_str().unwrap()).collect();
        assert_eq!(what, ["wait", "grant", "release"]);
        assert_eq!(
            (turns[1]["t"].as_f64(), turns[1]["waited"].as_f64()),
            (Some(1.6), Some(1.5))
        );
        assert_eq!(turns[2]["held"], 3.0);
        assert!(turns[0].get("waited").is_none() && turns[0].get("held").is_none());
        assert_eq!(turns[0]["key"], "db-5432");
        assert!(turns[0]["monotonic"].as_f64().unwrap() > 0.0);
        let end = lines.last().unwrap();
        assert_eq!(
            (&end["turns"], &end["turn_waited"], &end["peer_completions"]),
            (&1.into(), &1.5.into(), &40.into())
        );
    }
}
