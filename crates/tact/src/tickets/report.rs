//! What `tact tickets run` tells the user: one JSON object per interval in `--json-log`, and at
//! the end a table (and a `{"summary": ...}` object) of each job's tickets, its expected share
//! averaged over time and the share it achieved, per resource the run applies.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::show::table;

/// A per-resource value: `{"cpu": ..., "disk": ..., "mem": ...}` in the log. CPU rights are
/// always applied; `disk` and `mem` are left out where the job holds no tickets of them or the
/// backend does not apply them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Res<T> {
    pub cpu: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem: Option<T>,
}

/// One job in one interval.
#[derive(Debug, Clone, Serialize)]
pub struct JobInterval {
    pub name: String,
    /// The job's processes as last scanned.
    pub pids: Vec<i32>,
    /// CPU: runnable; disk: I/O outstanding; memory: holds its tickets (spec §2.3).
    pub active: Res<bool>,
    /// `R(job,r)`; for memory in bytes.
    pub rights: Res<f64>,
    /// `R / ΣR` over the jobs active for the resource now (0 for a job that is not); memory has
    /// none (its rights are a floor in bytes, not a share).
    pub expected: Res<f64>,
    /// What the backend holds: `cpu.shares`/`cpu.weight` or the ALPS share; the disk weight
    /// (`blkio.bfq.weight`, `io.bfq.weight` or `io.weight`); the memory protection in bytes.
    pub weight: Res<u64>,
    /// CPU time of the job's process tree since it started (cumulative).
    pub cpu_ns: u64,
    /// Bytes the job's cgroup has read and written on disks (cumulative).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Memory the job's cgroup uses now, page cache included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bytes: Option<u64>,
}

/// One line of the log.
#[derive(Serialize)]
pub struct Interval<'a> {
    /// Seconds since the jobs were let go.
    pub t: f64,
    pub jobs: &'a [JobInterval],
}

/// What a backend holds and measured for each job at the end of an interval (in job order).
/// `None` for a job where the resource is not applied.
#[derive(Debug, Clone, Default)]
pub struct Held {
    pub cpu: Vec<u64>,
    pub disk: Vec<Option<u64>>,
    pub mem: Vec<Option<u64>>,
    pub disk_bytes: Vec<Option<u64>>,
    pub mem_bytes: Vec<Option<u64>>,
}

impl Held {
    /// A backend that applies CPU rights only.
    pub fn cpu_only(cpu: Vec<u64>) -> Held {
        let n = cpu.len();
        Held {
            cpu,
            disk: vec![None; n],
            mem: vec![None; n],
            disk_bytes: vec![None; n],
            mem_bytes: vec![None; n],
        }
    }
}

/// The time-averaged value of each job, summed interval by interval.
#[derive(Debug, Default)]
pub struct Average {
    weighted: Vec<f64>,
    time: Vec<f64>,
}

impl Average {
    pub fn new(jobs: usize) -> Average {
        Average {
            weighted: vec![0.0; jobs],
            time: vec![0.0; jobs],
        }
    }

    /// Each job's value held for `dt`; a job without one (`None`) is not counted for `dt`.
    pub fn add(&mut self, dt: Duration, values: impl Iterator<Item = Option<f64>>) {
        let dt = dt.as_secs_f64();
        for ((w, t), v) in self.weighted.iter_mut().zip(&mut self.time).zip(values) {
            if let Some(v) = v {
                *w += v * dt;
                *t += dt;
            }
        }
    }

    pub fn of(&self, job: usize) -> Option<f64> {
        (self.time[job] > 0.0).then(|| self.weighted[job] / self.time[job])
    }
}

/// One job's line of the final table.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub name: String,
    /// Its funding paths for the CPU, one line.
    pub tickets: String,
    /// Time-averaged `R / ΣR` while tact enforced, for CPU and disk; for memory, the floor in
    /// bytes (`R(job,mem)`, averaged over time).
    pub expected: Res<Option<f64>>,
    /// Its part of the CPU time, and of the disk bytes, all jobs holding tickets of the
    /// resource used; for memory, the bytes its cgroup used, averaged over the intervals.
    pub achieved: Res<Option<f64>>,
    pub cpu_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
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

    /// The table, for stderr (stdout belongs to the jobs). Disk and memory columns appear when
    /// some job has them.
    pub fn table(&self) -> String {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
        let bytes = |v: Option<f64>| v.map_or("-".to_string(), mib);
        let disk = self.jobs.iter().any(|j| j.expected.disk.is_some());
        let mem = self.jobs.iter().any(|j| j.expected.mem.is_some());
        let mut header = vec![
            "job".to_string(),
            "expected".into(),
            "achieved".into(),
            "cpu".into(),
        ];
        if disk {
            header.extend(["disk exp".into(), "disk got".into(), "disk bytes".into()]);
        }
        if mem {
            header.extend(["mem floor".into(), "mem used".into()]);
        }
        header.extend(["exit".into(), "tickets (cpu)".into()]);
        let mut rows = vec![header];
        for j in &self.jobs {
            let mut row = vec![
                j.name.clone(),
                pct(j.expected.cpu),
                pct(j.achieved.cpu),
                format!("{:.2}s", j.cpu_ns as f64 / 1e9),
            ];
            if disk {
                row.extend([
                    pct(j.expected.disk.flatten()),
                    pct(j.achieved.disk.flatten()),
                    bytes(j.disk_bytes.map(|b| b as f64)),
                ]);
            }
            if mem {
                row.extend([
                    bytes(j.expected.mem.flatten()),
                    bytes(j.achieved.mem.flatten()),
                ]);
            }
            row.extend([j.exit.clone(), j.tickets.clone()]);
            rows.push(row);
        }
        let mut out = table(&rows);
        out.push_str(&format!(
            "tact: {}; ended: {}; expected is R/ΣR over the competing jobs, averaged over time; \
             achieved is of the CPU all jobs used{}{}\n",
            self.backend,
            self.end,
            if disk {
                ", and of the disk bytes the jobs with disk tickets moved"
            } else {
                ""
            },
            if mem {
                "; mem floor is R(mem), mem used the cgroup's mean usage"
            } else {
                ""
            },
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

/// Bytes in MiB, to two decimals.
fn mib(bytes: f64) -> String {
    format!("{:.2}MiB", bytes / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu<T>(cpu: T) -> Res<T> {
        Res {
            cpu,
            disk: None,
            mem: None,
        }
    }

    #[test]
    fn averages_weigh_each_interval_by_its_length() {
        let mut a = Average::new(2);
        assert_eq!(a.of(0), None);
        a.add(Duration::from_secs(1), [Some(0.5), Some(0.5)].into_iter());
        a.add(Duration::from_secs(3), [Some(1.0), None].into_iter());
        assert!((a.of(0).unwrap() - 0.875).abs() < 1e-12);
        // Counted only over the second it had a value.
        assert!((a.of(1).unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn intervals_serialize_as_the_contract_says() {
        let cpu_only = JobInterval {
            name: "A1".into(),
            pids: vec![123],
            active: cpu(true),
            rights: cpu(333.3),
            expected: cpu(0.1667),
            weight: cpu(17476),
            cpu_ns: 123_456_789,
            disk_bytes: None,
            mem_bytes: None,
        };
        let all = JobInterval {
            name: "D".into(),
            pids: vec![124],
            active: Res {
                cpu: false,
                disk: Some(true),
                mem: Some(true),
            },
            rights: Res {
                cpu: 10.0,
                disk: Some(500.0),
                mem: Some(2_048_000.0),
            },
            expected: Res {
                cpu: 0.0,
                disk: Some(0.5),
                mem: None,
            },
            weight: Res {
                cpu: 2,
                disk: Some(1000),
                mem: Some(2_048_000),
            },
            cpu_ns: 5,
            disk_bytes: Some(4096),
            mem_bytes: Some(1 << 20),
        };
        let line = serde_json::to_value(Interval {
            t: 1.23,
            jobs: &[cpu_only, all],
        })
        .unwrap();
        assert_eq!(
            line,
            json!({"t": 1.23, "jobs": [{"name": "A1", "pids": [123], "active": {"cpu": true},
                "rights": {"cpu": 333.3}, "expected": {"cpu": 0.1667}, "weight": {"cpu": 17476},
                "cpu_ns": 123_456_789},
                {"name": "D", "pids": [124], "active": {"cpu": false, "disk": true, "mem": true},
                "rights": {"cpu": 10.0, "disk": 500.0, "mem": 2_048_000.0},
                "expected": {"cpu": 0.0, "disk": 0.5}, "weight": {"cpu": 2, "disk": 1000,
                "mem": 2_048_000}, "cpu_ns": 5, "disk_bytes": 4096, "mem_bytes": 1_048_576}]})
        );
    }

    #[test]
    fn the_table_shows_disk_and_memory_columns_only_when_used() {
        let job = |disk: Option<f64>, mem: Option<f64>| JobSummary {
            name: "j".into(),
            tickets: "base -10-> j".into(),
            expected: Res {
                cpu: Some(0.5),
                disk: disk.map(Some),
                mem: mem.map(Some),
            },
            achieved: Res {
                cpu: Some(0.5),
                disk: disk.map(Some),
                mem: mem.map(Some),
            },
            cpu_ns: 1_000_000_000,
            disk_bytes: disk.map(|_| 3 << 20),
            exit: "exited".into(),
        };
        let summary = |jobs| Summary {
            jobs,
            end: "every job exited".into(),
            wall_s: 1.0,
            tact_cpu_s: 0.01,
            backend: "backend cgroup".into(),
        };
        let cpu = summary(vec![job(None, None)]).table();
        assert!(!cpu.contains("disk") && !cpu.contains("mem"), "{cpu}");
        let both = summary(vec![job(Some(0.8), Some(2097152.0)), job(None, None)]).table();
        let header = both.lines().next().unwrap();
        assert!(
            header.contains("disk exp") && header.contains("mem floor"),
            "{both}"
        );
        assert!(both.contains("80.0%") && both.contains("3.00MiB") && both.contains("2.00MiB"));
    }
}
