//! What `tact tickets run` tells the user: one JSON object per interval in `--json-log`, and at
//! the end a table (and a `{"summary": ...}` object) of each job's tickets, its expected share
//! averaged over time and the share of the group's CPU it achieved.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::show::table;

/// One job in one interval.
#[derive(Debug, Clone, Serialize)]
pub struct JobInterval {
    pub name: String,
    /// The job's processes as last scanned.
    pub pids: Vec<i32>,
    pub active: Cpu<bool>,
    /// `R(job,cpu)`.
    pub rights: Cpu<f64>,
    /// `R / ΣR` over the jobs competing now (0 for a job that does not compete).
    pub expected: Cpu<f64>,
    /// What the job's cgroup holds (`cpu.shares` or `cpu.weight`).
    pub weight: Cpu<u64>,
    /// CPU time of the job's process tree since it started (cumulative).
    pub cpu_ns: u64,
}

/// A per-resource value where only the CPU is enforced: `{"cpu": ...}` in the log.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cpu<T> {
    pub cpu: T,
}

/// One line of the log.
#[derive(Serialize)]
pub struct Interval<'a> {
    /// Seconds since the jobs were let go.
    pub t: f64,
    pub jobs: &'a [JobInterval],
}

/// The time-averaged expected share of each job, summed interval by interval.
#[derive(Debug, Default)]
pub struct Average {
    weighted: Vec<f64>,
    time: f64,
}

impl Average {
    pub fn new(jobs: usize) -> Average {
        Average {
            weighted: vec![0.0; jobs],
            time: 0.0,
        }
    }

    /// Each job's expected share held for `dt`.
    pub fn add(&mut self, dt: Duration, expected: impl Iterator<Item = f64>) {
        let dt = dt.as_secs_f64();
        for (w, e) in self.weighted.iter_mut().zip(expected) {
            *w += e * dt;
        }
        self.time += dt;
    }

    pub fn of(&self, job: usize) -> Option<f64> {
        (self.time > 0.0).then(|| self.weighted[job] / self.time)
    }
}

/// One job's line of the final table.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub name: String,
    /// Its funding paths for the CPU, one line.
    pub tickets: String,
    /// Time-averaged `R / ΣR` while tact enforced.
    pub expected: Cpu<Option<f64>>,
    /// Its part of the CPU time all jobs used.
    pub achieved: Cpu<Option<f64>>,
    pub cpu_ns: u64,
    pub exit: String,
}

/// The end of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub jobs: Vec<JobSummary>,
    /// How the run ended: `exited`, `duration`, `interrupted`.
    pub end: String,
    pub wall_s: f64,
    /// tact's own CPU time.
    pub tact_cpu_s: f64,
    pub backend: String,
}

impl Summary {
    /// The `{"summary": ...}` line of the log.
    pub fn json(&self) -> serde_json::Value {
        json!({ "summary": self })
    }

    /// The table, for stderr (stdout belongs to the jobs).
    pub fn table(&self) -> String {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
        let mut rows = vec![[
            "job".to_string(),
            "expected".into(),
            "achieved".into(),
            "cpu".into(),
            "exit".into(),
            "tickets (cpu)".into(),
        ]];
        for j in &self.jobs {
            rows.push([
                j.name.clone(),
                pct(j.expected.cpu),
                pct(j.achieved.cpu),
                format!("{:.2}s", j.cpu_ns as f64 / 1e9),
                j.exit.clone(),
                j.tickets.clone(),
            ]);
        }
        let mut out = table(&rows);
        out.push_str(&format!(
            "tact: {}; ended: {}; expected is R/ΣR over the competing jobs, averaged over time; \
             achieved is of the CPU all jobs used\n",
            self.backend, self.end
        ));
        out.push_str(&format!(
            "tact: own CPU {:.3} s over {:.1} s: {:.2}% of one CPU\n",
            self.tact_cpu_s,
            self.wall_s,
            100.0 * self.tact_cpu_s / self.wall_s.max(1e-9)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_weigh_each_interval_by_its_length() {
        let mut a = Average::new(2);
        assert_eq!(a.of(0), None);
        a.add(Duration::from_secs(1), [0.5, 0.5].into_iter());
        a.add(Duration::from_secs(3), [1.0, 0.0].into_iter());
        assert!((a.of(0).unwrap() - 0.875).abs() < 1e-12);
        assert!((a.of(1).unwrap() - 0.125).abs() < 1e-12);
    }

    #[test]
    fn intervals_serialize_as_the_contract_says() {
        let j = JobInterval {
            name: "A1".into(),
            pids: vec![123],
            active: Cpu { cpu: true },
            rights: Cpu { cpu: 333.3 },
            expected: Cpu { cpu: 0.1667 },
            weight: Cpu { cpu: 17476 },
            cpu_ns: 123_456_789,
        };
        let line = serde_json::to_value(Interval {
            t: 1.23,
            jobs: &[j],
        })
        .unwrap();
        assert_eq!(
            line,
            json!({"t": 1.23, "jobs": [{"name": "A1", "pids": [123], "active": {"cpu": true},
                "rights": {"cpu": 333.3}, "expected": {"cpu": 0.1667}, "weight": {"cpu": 17476},
                "cpu_ns": 123_456_789}]})
        );
    }
}
