//! `tact status`: ask the daemon about its jobs, and print them as a table or as JSON.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use tact_linux::rate::fmt_rate;
use tact_proto::{
    Client, GateState, IdleCpu, IdleReport, JobState, JobStatus, NetKernelReport, OwnTraffic,
    ReportState, Status,
};

use crate::cli::StatusArgs;

/// Exit status when no daemon runs at the socket.
const NO_DAEMON: i32 = 1;

pub fn run(args: &StatusArgs) -> Result<i32> {
    let path = tact_proto::socket_path(args.socket.as_deref())?;
    let mut client = match Client::connect(&path) {
        Ok(client) => client,
        Err(e) if e.no_daemon() => {
            eprintln!("{}", no_daemon(&path));
            return Ok(NO_DAEMON);
        }
        Err(e) => return Err(e.into()),
    };
    let status = client.status()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", table(&status, &path));
    }
    Ok(0)
}

fn no_daemon(path: &Path) -> String {
    format!(
        "tact: no daemon is running at {}.\n\
         Start one with `tact daemon` (or `systemctl --user start tact`, or as root \
         `systemctl start tact`),\n\
         or point --socket or $TACT_SOCKET at a running one. Jobs run alone meanwhile.",
        path.display()
    )
}

fn table(status: &Status, path: &Path) -> String {
    let d = &status.daemon;
    let mut out = format!(
        "tact daemon pid {} on {}, up {}, lease {}, {} job{}\n",
        d.pid,
        path.display(),
        duration(d.uptime_s),
        duration(d.lease_ms as f64 / 1000.0),
        status.jobs.len(),
        if status.jobs.len() == 1 { "" } else { "s" }
    );
    if status.jobs.is_empty() {
        return out;
    }
    let header = [
        "JOB",
        "PID",
        "USER",
        "NAME",
        "PRIO",
        "STATE",
        "RATE / TARGET",
        "DUTY",
        "SUSPENDED",
        "YIELDED",
    ];
    let rows: Vec<[String; 10]> = status
        .jobs
        .iter()
        .map(|j| {
            [
                j.job.to_string(),
                j.pid.to_string(),
                j.user.clone(),
                shorten(&j.name, 24),
                j.priority.to_string(),
                state(j),
                progress(j),
                format!("{:.0}%", j.duty_cycle * 100.0),
                match j.reported {
                    Some(_) => duration(j.suspended_s),
                    None => "-".into(),
                },
                format!("{} ago", duration(j.since_yield_s)),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (cell, w) in cells.iter().zip(&widths) {
            let _ = write!(l, "{cell:<w$}  ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for (row, job) in rows.iter().zip(&status.jobs) {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
        if let Some(idle) = &job.idle {
            for detail in idle_lines(idle) {
                line(&[&format!("  {detail}")]);
            }
        }
    }
    out
}

/// An idle-gated job's CPU setting and gates, one line each, below its row.
fn idle_lines(idle: &IdleReport) -> Vec<String> {
    let mut lines = Vec::new();
    match idle.cpu {
        Some(IdleCpu::Cgroup) => lines.push("cpu: cgroup cpu.idle and SCHED_IDLE".to_string()),
        Some(IdleCpu::SchedIdle) => lines.push("cpu: SCHED_IDLE".to_string()),
        None => {}
    }
    for g in &idle.gates {
        let mut line = format!(
            "{}: {}, PI {}, held {} time{} for {} in all, foreground {}B, harm {:.1}%",
            g.resource,
            match g.state {
                GateState::Held => "holds (foreground active)",
                GateState::Pi => "holds (preemption interval)",
                GateState::Released => "released",
            },
            milliseconds(g.pi_ms),
            g.holds,
            if g.holds == 1 { "" } else { "s" },
            duration(g.held_ms as f64 / 1000.0),
            si(g.fg_bytes as f64),
            g.harm * 100.0
        );
        // What the foreground bytes leave out: a job whose own traffic is not told apart is
        // held by it, and this says why.
        if let Some(own) = g.own_traffic {
            line.push_str(match own {
                OwnTraffic::Namespace => ", own traffic: the job's network namespace",
                OwnTraffic::HtbClass => ", own traffic: the job's htb class",
                OwnTraffic::TcpSockets => ", own traffic: the job's TCP sockets",
                OwnTraffic::Unknown => ", own traffic: none (counted as foreground)",
            });
        }
        lines.push(line);
        if let Some(k) = &g.kernel {
            lines.push(kernel_line(&g.resource, k));
        }
    }
    lines
}

/// A link's htb tree and marking (`--idle net` as root), with why not when one is missing.
fn kernel_line(resource: &str, k: &NetKernelReport) -> String {
    let mut parts = vec![
        match k.htb_rate_bits {
            Some(rate) => format!("htb at {}", fmt_rate(rate)),
            None => "no htb tree".to_string(),
        },
        if k.marking {
            "the job's packets marked DSCP LE".to_string()
        } else {
            "the job's packets not marked".to_string()
        },
    ];
    if let Some(c) = k.classes {
        parts.push(format!(
            "sent: foreground class {}B, the job's class {}B",
            si(c.fg_bytes as f64),
            si(c.bg_bytes as f64),
        ));
    }
    let mut line = format!("{resource} kernel: {}", parts.join(", "));
    if k.htb_rate_bits.is_none() || !k.marking {
        let _ = write!(line, " ({})", k.why);
    }
    line
}

fn state(j: &JobStatus) -> String {
    if let Some(idle) = &j.idle {
        // It never takes the turn: its gates say whether it runs.
        let holding: Vec<&str> = idle
            .gates
            .iter()
            .filter(|g| g.state != GateState::Released)
            .map(|g| g.resource.as_str())
            .collect();
        return if holding.is_empty() {
            "gated: running".into()
        } else {
            format!("gated: held by {}", holding.join(", "))
        };
    }
    match j.state {
        JobState::Running => match j.holding_s {
            Some(s) => format!("running ({})", duration(s)),
            None => "running".into(),
        },
        JobState::Suspended => match j.suspended_for_s {
            Some(s) => format!("suspended ({} more)", duration(s)),
            None => "suspended".into(),
        },
        JobState::Waiting => "waiting for its turn".into(),
        JobState::Hung => "hung (lost its turn)".into(),
        JobState::Idle => "idle".into(),
    }
}

fn progress(j: &JobStatus) -> String {
    let unit = j
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    match (j.rate, j.target) {
        (Some(r), Some(t)) if t > 0.0 => {
            format!("{} / {}{unit} ({:.0}%)", si(r), si(t), 100.0 * r / t)
        }
        (Some(r), _) if j.reported == Some(ReportState::Calibrating) => {
            format!("{}{unit} (calibrating)", si(r))
        }
        (Some(r), t) => format!("{} / {}{unit}", si(r), t.map_or("-".into(), si)),
        (None, _) if j.reported == Some(ReportState::Calibrating) => "calibrating".into(),
        (None, _) => "-".into(),
    }
}

/// 2.1M, 950k, 12.
fn si(x: f64) -> String {
    for (scale, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if x >= scale {
            return format!("{:.1}{suffix}", x / scale);
        }
    }
    if x >= 10.0 || x == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// 0.50ms, 12ms, 1.2s.
fn milliseconds(ms: f64) -> String {
    if ms >= 1000.0 {
        duration(ms / 1000.0)
    } else if ms >= 10.0 || ms == 0.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{ms:.2}ms")
    }
}

/// 0.2s, 12s, 3m05s, 2h03m.
fn duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 10.0 {
        format!("{s:.1}s")
    } else if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        let s = s as u64;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = s as u64 / 60;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A daemon with one connection and nothing handed out yet, for the status and metrics tests.
#[cfg(test)]
pub(crate) fn one_idle_connection() -> tact_proto::DaemonStatus {
    tact_proto::DaemonStatus {
        pid: 1,
        uptime_s: 10.0,
        lease_ms: 10_000,
        holder: None,
        connections: 1,
        connections_total: 1,
        grants_total: 0,
        revoked_total: 0,
        errors_total: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_well() {
        assert_eq!(si(2_100_000.0), "2.1M");
        assert_eq!(si(12.0), "12");
        assert_eq!(si(0.5), "0.50");
        assert_eq!(duration(0.23), "0.2s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(7380.0), "2h03m");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(milliseconds(12.4), "12ms");
        assert_eq!(milliseconds(0.5), "0.50ms");
        assert_eq!(milliseconds(1500.0), "1.5s");
    }

    #[test]
    fn an_idle_gated_job_shows_its_gates() {
        use tact_proto::{GateReport, Kind};
        let gate = |resource: &str, state| GateReport {
            resource: resource.into(),
            state,
            pi_ms: 10.0,
            holds: 3,
            held_ms: 1200,
            fg_bytes: 12_000_000,
            counters: [[0; 4]; 4],
            preempted: 1,
            expired_pis: 2,
            harm: 0.25,
            kernel: None,
            own_traffic: None,
        };
        let job = JobStatus {
            job: 4,
            pid: 42,
            uid: 0,
            user: "root".into(),
            name: "updatedb".into(),
            kind: Kind::Run,
            priority: 0,
            state: JobState::Suspended,
            suspended_for_s: Some(0.5),
            reported: Some(ReportState::Suspended),
            rate: None,
            target: None,
            unit: None,
            duty_cycle: 0.0,
            suspended_s: 1.2,
            since_yield_s: 0.3,
            holding_s: None,
            usage_s: 0.0,
            age_s: 5.0,
            idle: Some(IdleReport {
                cpu: Some(IdleCpu::Cgroup),
                gates: vec![
                    gate("disk:vda", GateState::Pi),
                    GateReport {
                        own_traffic: Some(OwnTraffic::TcpSockets),
                        ..gate("net:lo", GateState::Released)
                    },
                    GateReport {
                        kernel: Some(NetKernelReport {
                            htb_rate_bits: Some(95_000_000),
                            marking: true,
                            why: "htb at 95Mbit".into(),
                            classes: Some(tact_proto::ClassReport {
                                fg_bytes: 1500,
                                bg_bytes: 2_400_000,
                            }),
                        }),
                        own_traffic: Some(OwnTraffic::Namespace),
                        ..gate("net:veth0", GateState::Released)
                    },
                    GateReport {
                        kernel: Some(NetKernelReport {
                            htb_rate_bits: None,
                            marking: false,
                            why: "no htb: the link speed of lo is unknown".into(),
                            classes: None,
                        }),
                        own_traffic: Some(OwnTraffic::Unknown),
                        ..gate("net:lo2", GateState::Released)
                    },
                    GateReport {
                        own_traffic: Some(OwnTraffic::HtbClass),
                        ..gate("net:eth1", GateState::Released)
                    },
                ],
            }),
        };
        let status = Status {
            daemon: crate::daemon::status::one_idle_connection(),
            jobs: vec![job],
        };
        let text = table(&status, Path::new("/run/tact/daemon.sock"));
        assert!(text.contains("gated: held by disk:vda "), "{text}");
        assert!(
            text.contains("\n  cpu: cgroup cpu.idle and SCHED_IDLE\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n  disk:vda: holds (preemption interval), PI 10ms, held 3 times for 1.2s in \
                 all, foreground 12.0MB, harm 25.0%\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n  net:lo: released, "), "{text}");
        assert!(
            text.contains("harm 25.0%, own traffic: the job's TCP sockets\n  net:veth0: "),
            "{text}"
        );
        assert!(
            text.contains("harm 25.0%, own traffic: the job's network namespace\n"),
            "{text}"
        );
        assert!(
            text.contains("harm 25.0%, own traffic: none (counted as foreground)\n"),
            "{text}"
        );
        assert!(
            text.contains("harm 25.0%, own traffic: the job's htb class\n"),
            "{text}"
        );
        // A disk has no own traffic to tell apart.
        assert_eq!(text.matches("own traffic").count(), 4, "{text}");
        // `--json` prints the reply as it came: the field by its wire name, absent for disks.
        let json = serde_json::to_value(&status).unwrap();
        let gates = &json["jobs"][0]["idle"]["gates"];
        assert_eq!(gates[1]["own_traffic"], "tcp_sockets", "{json}");
        assert_eq!(gates[2]["own_traffic"], "namespace", "{json}");
        assert_eq!(gates[3]["own_traffic"], "none", "{json}");
        assert_eq!(gates[4]["own_traffic"], "htb_class", "{json}");
        assert!(gates[0].get("own_traffic").is_none(), "{json}");
        assert!(
            text.contains(
                "\n  net:veth0 kernel: htb at 95mbit, the job's packets marked DSCP LE, sent: \
                 foreground class 1.5kB, the job's class 2.4MB\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\n  net:lo2 kernel: no htb tree, the job's packets not marked (no htb: the \
                 link speed of lo is unknown)\n"
            ),
            "{text}"
        );
        // A disk's gate has no kernel line.
        assert!(!text.contains("disk:vda kernel"), "{text}");
    }
}
