//! `--metrics ADDR`: Prometheus text exposition at `http://ADDR/metrics`, loopback only.
//!
//! The responder is a few lines of HTTP/1.1 (one route, GET and HEAD, `Connection: close`)
//! rather than a server crate: a scraper asks for one page every few seconds, and a hand-rolled
//! reader with a size limit and a timeout is easier to make robust than to audit a crate for.
//! Requests are served one after the other on one thread, so a local client cannot make the
//! daemon start threads; a slow one delays a scrape by at most [`READ_TIMEOUT`].

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_proto::{GateReport, GateState, IdleReport, JobState, JobStatus, NetKernelReport, Status};

use super::connection::Shared;

const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request head read; a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 8192;

/// Parses `--metrics`: an IP address and port on the loopback interface. Metrics show who runs
/// what, so they are not offered to the network; put a proxy in front to export them.
pub fn loopback_addr(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s.trim().parse().map_err(|_| {
        format!("`{s}` is not an address and port, e.g. 127.0.0.1:9477 or [::1]:9477")
    })?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "{addr} is not a loopback address; metrics are served on 127.0.0.1 or ::1 only \
             (put a proxy in front to export them)"
        ));
    }
    Ok(addr)
}

/// Starts serving; returns the address bound (the port, when `addr` asked for port 0).
pub fn serve(addr: SocketAddr, shared: Arc<Shared>) -> Result<SocketAddr> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("--metrics: cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => {
                        if let Err(e) = respond(stream, &shared) {
                            tracing::debug!("metrics request: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!("metrics: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
        .context("cannot start the metrics thread")?;
    Ok(bound)
}

fn respond(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let head = read_head(&mut stream)?;
    let mut words = head.split(|&b| b == b' ' || b == b'\r' || b == b'\n');
    let (method, target, version) = (words.next(), words.next(), words.next());
    let path = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or(t));
    let (status, body, extra) = match (method, path, version) {
        (_, _, Some(v)) if !v.starts_with(b"HTTP/1.") => ("400 Bad Request", String::new(), ""),
        (Some(b"GET" | b"HEAD"), Some(b"/metrics"), _) => {
            let now = Instant::now();
            let status = {
                let mut reg = shared.lock();
                shared.schedule(&mut reg, now);
                reg.status(now)
            };
            ("200 OK", render(&status), "")
        }
        (Some(b"GET" | b"HEAD"), Some(_), _) => (
            "404 Not Found",
            "tact: metrics are at /metrics\n".into(),
            "",
        ),
        (Some(_), Some(_), Some(_)) => (
            "405 Method Not Allowed",
            String::new(),
            "Allow: GET, HEAD\r\n",
        ),
        _ => ("400 Bad Request", String::new(), ""),
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != Some(&b"HEAD"[..]) {
        reply.extend_from_slice(body.as_bytes());
    }
    stream.write_all(&reply)
}

/// The request line and headers, up to the blank line (the body of a GET is empty).
fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// The exposition text: one gauge family per job figure, and the daemon's counters.
pub fn render(status: &Status) -> String {
    let mut out = String::new();
    let d = &status.daemon;
    family(&mut out, "tact_daemon_jobs", "gauge", "Jobs registered.");
    let _ = writeln!(out, "tact_daemon_jobs {}", status.jobs.len());
    family(
        &mut out,
        "tact_daemon_connections",
        "gauge",
        "Open client connections.",
    );
    let _ = writeln!(out, "tact_daemon_connections {}", d.connections);
    for (name, help, value) in [
        (
            "tact_daemon_connections_total",
            "Client connections accepted.",
            d.connections_total,
        ),
        (
            "tact_daemon_grants_total",
            "Run turns handed out.",
            d.grants_total,
        ),
        (
            "tact_daemon_revoked_total",
            "Turns taken back from holders past their lease.",
            d.revoked_total,
        ),
        (
            "tact_daemon_errors_total",
            "Requests refused.",
            d.errors_total,
        ),
    ] {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    family(
        &mut out,
        "tact_daemon_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    );
    let _ = writeln!(out, "tact_daemon_uptime_seconds {}", d.uptime_s);
    family(
        &mut out,
        "tact_daemon_lease_seconds",
        "gauge",
        "How long a holder may go without a testpoint.",
    );
    let _ = writeln!(
        out,
        "tact_daemon_lease_seconds {}",
        d.lease_ms as f64 / 1000.0
    );

    family(
        &mut out,
        "tact_job_state",
        "gauge",
        "1 for the state the job is in, 0 for the others.",
    );
    for job in &status.jobs {
        for state in JobState::ALL {
            let on = u8::from(job.state == state);
            let _ = writeln!(
                out,
                "tact_job_state{{{},state=\"{}\"}} {on}",
                labels(job),
                state.as_str()
            );
        }
    }
    type Figure = fn(&JobStatus) -> Option<f64>;
    let figures: [(&str, &str, Figure); 7] = [
        (
            "tact_job_rate",
            "Progress per second at the job's last evaluated testpoint.",
            |j| j.rate,
        ),
        (
            "tact_job_target",
            "The job's calibrated target rate.",
            |j| j.target,
        ),
        (
            "tact_job_duty_cycle",
            "Fraction of the last minute the job held the run turn.",
            |j| Some(j.duty_cycle),
        ),
        (
            "tact_job_suspended_seconds",
            "Total time the job has been suspended, as it reported.",
            |j| Some(j.suspended_s),
        ),
        (
            "tact_job_seconds_since_yield",
            "Seconds since the job's last testpoint.",
            |j| Some(j.since_yield_s),
        ),
        (
            "tact_job_priority",
            "The job's priority (higher runs first).",
            |j| Some(j.priority.into()),
        ),
        (
            "tact_job_usage_seconds",
            "Decayed run time the arbiter orders equal priorities by.",
            |j| Some(j.usage_s),
        ),
    ];
    for (name, help, value) in figures {
        family(&mut out, name, "gauge", help);
        for job in &status.jobs {
            if let Some(v) = value(job) {
                let _ = writeln!(out, "{name}{{{}}} {v}", labels(job));
            }
        }
    }
    render_idle(&mut out, &status.jobs);
    out
}

/// The gates of idle-gated jobs (`tact run --idle`), labelled by job and resource.
fn render_idle(out: &mut String, jobs: &[JobStatus]) {
    let idle: Vec<(&JobStatus, &IdleReport)> = jobs
        .iter()
        .filter_map(|j| j.idle.as_ref().map(|i| (j, i)))
        .collect();
    family(
        out,
        "tact_job_idle_cpu",
        "gauge",
        "1 for how an idle-gated job's CPU use is made idle (cgroup: cpu.idle and SCHED_IDLE).",
    );
    for &(job, i) in &idle {
        if let Some(cpu) = i.cpu {
            let _ = writeln!(
                out,
                "tact_job_idle_cpu{{{},mechanism=\"{}\"}} 1",
                labels(job),
                cpu.as_str()
            );
        }
    }
    let gates: Vec<(&JobStatus, &GateReport)> = idle
        .iter()
        .flat_map(|&(j, i)| i.gates.iter().map(move |g| (j, g)))
        .collect();
    let gate_labels = |job: &JobStatus, g: &GateReport| {
        format!("{},resource=\"{}\"", labels(job), escape(&g.resource))
    };
    family(
        out,
        "tact_job_gate_state",
        "gauge",
        "1 for the state an idle gate is in (held, pi: held for a preemption interval, released).",
    );
    for &(job, g) in &gates {
        for state in GateState::ALL {
            let _ = writeln!(
                out,
                "tact_job_gate_state{{{},state=\"{}\"}} {}",
                gate_labels(job, g),
                state.as_str(),
                u8::from(g.state == state)
            );
        }
    }
    type Figure = fn(&GateReport) -> f64;
    let figures: [(&str, &str, &str, Figure); 6] = [
        (
            "tact_job_gate_pi_seconds",
            "gauge",
            "The preemption interval in force.",
            |g| g.pi_ms / 1000.0,
        ),
        (
            "tact_job_gate_holds_total",
            "counter",
            "Times the gate has held the job.",
            |g| g.holds as f64,
        ),
        (
            "tact_job_gate_held_seconds_total",
            "counter",
            "Time the gate has held the job.",
            |g| g.held_ms as f64 / 1000.0,
        ),
        (
            "tact_job_gate_foreground_bytes_total",
            "counter",
            "Foreground bytes seen on the resource.",
            |g| g.fg_bytes as f64,
        ),
        (
            "tact_job_gate_preempted_total",
            "counter",
            "Probes that found foreground activity while the job was released (B[f]).",
            |g| g.preempted as f64,
        ),
        (
            "tact_job_gate_harm",
            "gauge",
            "B[f] over every probe with foreground activity.",
            |g| g.harm,
        ),
    ];
    for (name, kind, help, value) in figures {
        family(out, name, kind, help);
        for &(job, g) in &gates {
            let _ = writeln!(out, "{name}{{{}}} {}", gate_labels(job, g), value(g));
        }
    }
    family(
        out,
        "tact_job_gate_events_total",
        "counter",
        "The gate's event counters X[s][e]: events e (f, b, t, i) seen in state s (idle, fg, bg, pi).",
    );
    for &(job, g) in &gates {
        for (s, row) in ["idle", "fg", "bg", "pi"].iter().zip(&g.counters) {
            for (e, n) in ["f", "b", "t", "i"].iter().zip(row) {
                let _ = writeln!(
                    out,
                    "tact_job_gate_events_total{{{},state=\"{s}\",event=\"{e}\"}} {n}",
                    gate_labels(job, g)
                );
            }
        }
    }
    family(
        out,
        "tact_job_gate_own_traffic",
        "gauge",
        "1 for where a link's gate learns the job's own traffic, which is not foreground \
         (namespace: its network namespace; tcp_sockets: its TCP sockets; none).",
    );
    for &(job, g) in &gates {
        if let Some(own) = g.own_traffic {
            let _ = writeln!(
                out,
                "tact_job_gate_own_traffic{{{},source=\"{}\"}} 1",
                gate_labels(job, g),
                own.as_str()
            );
        }
    }
    render_net_kernel(out, &gates, gate_labels);
}

/// The kernel-assisted part of links' gates (`--idle net` as root): the htb tree, the marking
/// of the job's packets, and what each class has sent. Only gates that report one appear.
fn render_net_kernel(
    out: &mut String,
    gates: &[(&JobStatus, &GateReport)],
    gate_labels: impl Fn(&JobStatus, &GateReport) -> String,
) {
    let kernels: Vec<(String, &NetKernelReport)> = gates
        .iter()
        .filter_map(|&(j, g)| g.kernel.as_ref().map(|k| (gate_labels(j, g), k)))
        .collect();
    family(
        out,
        "tact_job_gate_htb_rate_bits",
        "gauge",
        "The rate of the htb tree tact built on the link, in bits/s (absent: no tree).",
    );
    for (l, k) in &kernels {
        if let Some(rate) = k.htb_rate_bits {
            let _ = writeln!(out, "tact_job_gate_htb_rate_bits{{{l}}} {rate}");
        }
    }
    family(
        out,
        "tact_job_gate_marking",
        "gauge",
        "1 when tact marks the job's packets DSCP LE on the link, 0 when it does not.",
    );
    for (l, k) in &kernels {
        let _ = writeln!(out, "tact_job_gate_marking{{{l}}} {}", u8::from(k.marking));
    }
    family(
        out,
        "tact_job_gate_class_bytes_total",
        "counter",
        "Bytes the htb tree's classes have sent: fg (1:10, unmarked) and bg (1:20, the job's).",
    );
    for (l, k) in &kernels {
        if let Some(c) = k.classes {
            for (class, n) in [("fg", c.fg_bytes), ("bg", c.bg_bytes)] {
                let _ = writeln!(
                    out,
                    "tact_job_gate_class_bytes_total{{{l},class=\"{class}\"}} {n}"
                );
            }
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn labels(job: &JobStatus) -> String {
    format!(
        "job=\"{}\",name=\"{}\",user=\"{}\",pid=\"{}\"",
        job.job,
        escape(&job.name),
        escape(&job.user),
        job.pid
    )
}

/// Label values escape backslash, double quote and newline (exposition format).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_proto::{DaemonStatus, Kind};

    #[test]
    fn only_loopback_addresses() {
        assert!(loopback_addr("127.0.0.1:9477").is_ok());
        assert!(loopback_addr("[::1]:0").is_ok());
        let e = loopback_addr("0.0.0.0:9").unwrap_err();
        assert!(e.contains("not a loopback address"), "{e}");
        assert!(loopback_addr("192.168.1.2:9").is_err());
        assert!(loopback_addr("localhost")
            .unwrap_err()
            .contains("not an address"));
    }

    #[test]
    fn exposition_has_one_help_per_family_and_escaped_labels() {
        let job = JobStatus {
            job: 3,
            pid: 42,
            uid: 1000,
            user: "alice".into(),
            name: "back\"up\\".into(),
            kind: Kind::Run,
            priority: 2,
            state: JobState::Waiting,
            suspended_for_s: None,
            reported: None,
            rate: Some(1.5),
            target: None,
            unit: None,
            duty_cycle: 0.25,
            suspended_s: 3.0,
            since_yield_s: 0.5,
            holding_s: None,
            usage_s: 1.0,
            age_s: 9.0,
            idle: None,
        };
        let status = Status {
            daemon: DaemonStatus {
                pid: 1,
                uptime_s: 10.0,
                lease_ms: 10_000,
                holder: None,
                connections: 1,
                connections_total: 4,
                grants_total: 7,
                revoked_total: 0,
                errors_total: 2,
            },
            jobs: vec![job],
        };
        let text = render(&status);
        let l = r#"job="3",name="back\"up\\",user="alice",pid="42""#;
        assert!(
            text.contains(&format!("tact_job_state{{{l},state=\"waiting\"}} 1")),
            "{text}"
        );
        assert!(text.contains(&format!("tact_job_state{{{l},state=\"running\"}} 0")));
        assert!(text.contains(&format!("tact_job_rate{{{l}}} 1.5")));
        assert!(!text.contains("tact_job_target{"));
        assert!(text.contains(&format!("tact_job_priority{{{l}}} 2")));
        assert!(text.contains("tact_daemon_grants_total 7"));
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(helps, types);
        assert!(
            !text.contains("tact_job_gate_state{"),
            "no gated job: {text}"
        );
    }

    #[test]
    fn an_idle_gated_jobs_gates_are_exported() {
        use tact_proto::{IdleCpu, Kind};
        let mut counters = [[0; 4]; 4];
        counters[1][0] = 7;
        let mut job = JobStatus {
            job: 5,
            pid: 43,
            uid: 0,
            user: "root".into(),
            name: "scrub".into(),
            kind: Kind::Run,
            priority: 0,
            state: JobState::Idle,
            suspended_for_s: None,
            reported: None,
            rate: None,
            target: None,
            unit: None,
            duty_cycle: 0.0,
            suspended_s: 0.0,
            since_yield_s: 0.5,
            holding_s: None,
            usage_s: 0.0,
            age_s: 9.0,
            idle: Some(IdleReport {
                cpu: Some(IdleCpu::SchedIdle),
                gates: vec![GateReport {
                    resource: "net:lo".into(),
                    state: GateState::Pi,
                    pi_ms: 10.0,
                    holds: 4,
                    held_ms: 1500,
                    fg_bytes: 9000,
                    counters,
                    preempted: 2,
                    expired_pis: 3,
                    harm: 0.5,
                    kernel: Some(NetKernelReport {
                        htb_rate_bits: Some(95_000_000),
                        marking: true,
                        why: "htb at 95Mbit".into(),
                        classes: Some(tact_proto::ClassReport {
                            fg_bytes: 1500,
                            bg_bytes: 64_000,
                        }),
                    }),
                    own_traffic: Some(tact_proto::OwnTraffic::TcpSockets),
                }],
            }),
        };
        // A disk's gate beside it: no kernel part, no own traffic.
        let idle = job.idle.as_mut().unwrap();
        let disk = GateReport {
            resource: "disk:vda".into(),
            kernel: None,
            own_traffic: None,
            ..idle.gates[0].clone()
        };
        idle.gates.push(disk);
        let status = Status {
            daemon: crate::daemon::status::one_idle_connection(),
            jobs: vec![job],
        };
        let text = render(&status);
        let l = r#"job="5",name="scrub",user="root",pid="43",resource="net:lo""#;
        for want in [
            format!("tact_job_gate_state{{{l},state=\"pi\"}} 1"),
            format!("tact_job_gate_state{{{l},state=\"held\"}} 0"),
            format!("tact_job_gate_pi_seconds{{{l}}} 0.01"),
            format!("tact_job_gate_holds_total{{{l}}} 4"),
            format!("tact_job_gate_held_seconds_total{{{l}}} 1.5"),
            format!("tact_job_gate_foreground_bytes_total{{{l}}} 9000"),
            format!("tact_job_gate_events_total{{{l},state=\"fg\",event=\"f\"}} 7"),
            format!("tact_job_gate_htb_rate_bits{{{l}}} 95000000"),
            format!("tact_job_gate_marking{{{l}}} 1"),
            format!("tact_job_gate_class_bytes_total{{{l},class=\"fg\"}} 1500"),
            format!("tact_job_gate_class_bytes_total{{{l},class=\"bg\"}} 64000"),
            format!("tact_job_gate_own_traffic{{{l},source=\"tcp_sockets\"}} 1"),
            r#"tact_job_idle_cpu{job="5",name="scrub",user="root",pid="43",mechanism="sched_idle"} 1"#
                .to_string(),
        ] {
            assert!(text.contains(&want), "{want} missing from {text}");
        }
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(helps, types);
        // An info-style gauge: one series, the source a label, none for the others.
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("tact_job_gate_own_traffic{"))
                .count(),
            1,
            "{text}"
        );
    }
}
