//! What `tact share` tells the user: one JSON line per cycle (or per second with cgroups) in
//! `--json-log`, and the table of target against achieved share at the end.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use tact_core::share::CycleReport;

use super::group::Job;
use crate::trace::JsonLines;

/// `--json-log` of `tact share`.
pub struct CycleLog {
    out: JsonLines,
}

impl CycleLog {
    pub fn create(path: &Path) -> Result<CycleLog> {
        Ok(CycleLog {
            out: JsonLines::create(path)?,
        })
    }

    /// A cycle of the engine: per job the CPU it was charged, its entitlement (its weight's part
    /// of everything charged in the cycle) and the relative error.
    pub fn cycle(&mut self, t: Duration, c: &CycleReport, jobs: &[Job]) -> Result<()> {
        let entities: Vec<_> = c
            .entities
            .iter()
            .map(|e| {
                json!({
                    "job": jobs.get(e.id as usize).map(|j| j.spec.label()),
                    "id": e.id,
                    "share": e.share,
                    "weight": e.weight_used,
                    "consumed_ns": e.consumed_ns,
                    "entitlement_ns": e.entitlement_ns,
                    "rel_err": e.rel_err,
                    "surplus_ns": e.surplus_ns,
                })
            })
            .collect();
        self.out.line(&json!({
            "t": t.as_secs_f64(),
            "cycle": c.cycle,
            "quantum": c.quantum,
            "rms": c.rms,
            "surplus_ns": c.surplus_ns,
            "lost_ns": c.lost_ns,
            "jobs": entities,
        }))
    }

    /// A second of the cgroup backend: per job the CPU its cgroup used in that second.
    pub fn second(&mut self, t: Duration, used: &[(usize, u64, u64)], jobs: &[Job]) -> Result<()> {
        let total: u64 = used.iter().map(|u| u.2).sum();
        let shares: u64 = used.iter().map(|u| u.1).sum();
        let entities: Vec<_> = used
            .iter()
            .map(|&(i, share, ns)| {
                let entitled = total as f64 * share as f64 / shares.max(1) as f64;
                json!({
                    "job": jobs[i].spec.label(),
                    "id": i,
                    "share": share,
                    "consumed_ns": ns,
                    "entitlement_ns": entitled,
                    "rel_err": if entitled > 0.0 { (ns as f64 - entitled) / entitled } else { 0.0 },
                })
            })
            .collect();
        self.out
            .line(&json!({ "t": t.as_secs_f64(), "jobs": entities }))
    }
}

/// One line of the final table.
pub struct Row {
    pub label: String,
    pub shares: u64,
    /// Conserving mode's feasible share φ, when it differs from the share somewhere.
    pub feasible: Option<f64>,
    pub cpu_ns: u64,
    pub exit: String,
}

/// The table of target against achieved share, on stderr (stdout belongs to the jobs). In
/// conserving mode, when a share was capped, a `feasible` column gives the target tact held the
/// jobs to (φ/Σφ).
pub fn table(rows: &[Row], footer: &[String]) {
    // Written, not eprintln!'d: a reader gone (`2>&1 | head -1`) made eprintln! panic (exit 101)
    // after the jobs had ended; the table is then lost, and the exit status is the jobs'.
    let mut err = std::io::stderr().lock();
    let shares: u64 = rows.iter().map(|r| r.shares).sum();
    let phis: f64 = rows.iter().filter_map(|r| r.feasible).sum();
    let capped = rows.iter().any(|r| {
        r.feasible
            .is_some_and(|f| (f - r.shares as f64).abs() > 1e-9)
    });
    let cpu: u64 = rows.iter().map(|r| r.cpu_ns).sum();
    let width = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 40);
    let feasible_head = if capped { "  feasible" } else { "" };
    let _ = writeln!(
        err,
        "{:<width$}  {:>6}  {:>7}{feasible_head}  {:>8}  {:>9}  exit",
        "job", "shares", "target", "achieved", "cpu"
    );
    for r in rows {
        let target = 100.0 * r.shares as f64 / shares.max(1) as f64;
        let feasible = match (capped, r.feasible) {
            (true, Some(f)) => format!("  {:>7.1}%", 100.0 * f / phis),
            (true, None) => format!("  {:>8}", "-"),
            (false, _) => String::new(),
        };
        let achieved = if cpu > 0 {
            format!("{:.1}%", 100.0 * r.cpu_ns as f64 / cpu as f64)
        } else {
            "-".into()
        };
        let mut label = r.label.clone();
        if label.chars().count() > width {
            label = label.chars().take(width - 1).collect();
            label.push('…');
        }
        let _ = writeln!(
            err,
            "{label:<width$}  {:>6}  {:>6.1}%{feasible}  {achieved:>8}  {:>8.2}s  {}",
            r.shares,
            target,
            r.cpu_ns as f64 / 1e9,
            r.exit
        );
    }
    for line in footer {
        let _ = writeln!(err, "{line}");
    }
}
