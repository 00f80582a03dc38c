//! `--json-log` files: [`JsonLines`], one JSON object per line, flushed as written; and the
//! polite job's [`JsonLog`]: one object per evaluated testpoint, and one per stop when the job
//! resumes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tact_core::polite::{Phase, Step};

/// A JSON-lines file, flushed after each line so that the log of a job that is killed is
/// complete up to that moment.
pub struct JsonLines {
    out: BufWriter<File>,
}

impl JsonLines {
    pub fn create(path: &Path) -> Result<Self> {
        let f = File::create(path)
            .with_context(|| format!("cannot create --json-log file {}", path.display()))?;
        Ok(JsonLines {
            out: BufWriter::new(f),
        })
    }

    pub fn line(&mut self, line: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.out, line)?;
        self.out.write_all(b"\n")?;
        self.out.flush().context("cannot write --json-log")
    }
}

pub struct JsonLog {
    out: JsonLines,
}

#[derive(Serialize)]
struct Line<'a> {
    /// Seconds since tact started.
    t: f64,
    #[serde(flatten)]
    phase: Phase,
    kind: tact_core::polite::SampleKind,
    /// Progress per metric of the evaluated sample (of the last poll when nothing was evaluated).
    dp: &'a [f64],
    /// Active (unsuspended) seconds the sample covers.
    d: Option<f64>,
    /// Progress per second of each metric in this sample.
    rate: Option<Vec<f64>>,
    /// Calibrated target rate of each metric.
    target: Vec<f64>,
    /// Target duration of this sample, seconds.
    dstar: Option<f64>,
    poor: Option<bool>,
    verdict: Option<tact_core::stats::Verdict>,
    /// Seconds of suspension decided now (0 when running on).
    suspend: f64,
    /// Suspension the next poor verdict will impose.
    next_suspend: f64,
}

/// The end of one stop of the job: how long it lasted and what the machine's pressure did.
#[derive(Serialize)]
struct Resumed {
    t: f64,
    kind: &'static str,
    /// Seconds the job was stopped.
    stopped: f64,
    /// Largest and last stall fraction (PSI `some`, busiest resource) seen while it was stopped.
    stall_max: Option<f64>,
    stall_last: Option<f64>,
}

impl JsonLog {
    pub fn create(path: &Path) -> Result<Self> {
        Ok(JsonLog {
            out: JsonLines::create(path)?,
        })
    }

    pub fn write(
        &mut self,
        t: Duration,
        phase: Phase,
        step: &Step,
        dp: &[f64],
        target: Vec<f64>,
        next_suspend: Duration,
    ) -> Result<()> {
        let eval = step.eval.as_ref();
        let d = eval.map(|e| e.d);
        let line = Line {
            t: t.as_secs_f64(),
            phase,
            kind: step.kind,
            dp,
            d,
            rate: d
                .filter(|&d| d > 0.0)
                .map(|d| dp.iter().map(|p| p / d).collect()),
            target,
            dstar: eval.and_then(|e| e.dstar),
            poor: eval.and_then(|e| e.poor),
            verdict: eval.and_then(|e| e.verdict),
            suspend: step.decision.suspension().as_secs_f64(),
            next_suspend: next_suspend.as_secs_f64(),
        };
        self.out.line(&line)
    }

    /// A job resumed at `t` after `stopped`; `stall` as in [`Resumed`].
    pub fn resumed(
        &mut self,
        t: Duration,
        stopped: Duration,
        stall_max: Option<f64>,
        stall_last: Option<f64>,
    ) -> Result<()> {
        self.out.line(&Resumed {
            t: t.as_secs_f64(),
            kind: "resumed",
            stopped: stopped.as_secs_f64(),
            stall_max,
            stall_last,
        })
    }
}
