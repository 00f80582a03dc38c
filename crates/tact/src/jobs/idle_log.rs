//! The `--json-log` of an idle-gated job: one object per hold and release, the gates' counters
//! every second, changes of the job's namespace and marking, and a summary at the end. Every
//! object has `t` (seconds since tact started) and `kind`.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tact_core::idle::{Counters, Gate, State};
use tact_proto::IdleCpu;

use crate::trace::JsonLines;

/// A gate as the log and `tact status` show it.
#[derive(Debug, Clone, Serialize)]
pub struct GateView {
    pub resource: String,
    /// `idle`, `fg`, `bg` or `pi` (the thesis's I, F, B, P).
    pub state: &'static str,
    /// The preemption interval in force, seconds.
    pub pi: f64,
    /// Foreground bytes seen on the resource since the job started.
    pub fg_bytes: u64,
    /// X\[s\]\[e\]: rows idle, fg, bg, pi; columns f, b, t, i.
    pub counters: [[u64; 4]; 4],
    /// B\[f\]: probes that found foreground activity while the job was released.
    pub preempted: u64,
    /// P\[t\]: preemption intervals that ran out (chances for the job).
    pub expired_pis: u64,
    /// B\[f\] over every probe with foreground activity.
    pub harm: f64,
    /// The htb classes on a link where tact built them (`--idle net` with CAP_NET_ADMIN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<ClassBytes>,
}

/// What the htb classes of a link have sent since tact built them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ClassBytes {
    /// Class 1:10: every packet not marked LE.
    pub fg_bytes: u64,
    /// Class 1:20: the packets marked LE (the job's, when tact marks them).
    pub bg_bytes: u64,
}

/// What the kernel does for a link beyond the gate (`--idle net` where tact may).
#[derive(Debug, Clone, Serialize)]
pub struct NetKernel {
    /// The htb rate in bits/s, when the tree is on the interface.
    pub htb_rate_bits: Option<u64>,
    /// Whether tact marks some of the job's packets DSCP LE (nftables: its sockets by cgroup,
    /// or those forwarded from its network namespace at a veth's ingress). At the start; a
    /// `marking` record says when the forwarded part begins or ends later.
    pub marking: bool,
    /// What was applied, and why the rest was not.
    pub why: String,
}

impl GateView {
    pub fn new(resource: String, gate: &Gate, fg_bytes: u64) -> GateView {
        let c: &Counters = gate.counters();
        GateView {
            resource,
            state: state_name(gate.state()),
            pi: gate.params().pi.as_secs_f64(),
            fg_bytes,
            counters: c.x,
            preempted: c.preempted(),
            expired_pis: c.expired_pis(),
            harm: c.harm(),
            classes: None,
        }
    }
}

pub fn state_name(s: State) -> &'static str {
    match s {
        State::Idle => "idle",
        State::Fg => "fg",
        State::Bg => "bg",
        State::Pi => "pi",
    }
}

/// How a resource's gate was set up.
#[derive(Debug, Serialize)]
pub struct Setup {
    pub resource: String,
    pub pi: f64,
    pub auto: bool,
    /// Why this PI (the default's reasoning, or "--preempt").
    pub why: String,
    /// A link's source of the job's own traffic at the start: `namespace`, `tcp_sockets` or
    /// `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_traffic: Option<&'static str>,
    /// A link's kernel-assisted priority: applied, or why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<NetKernel>,
}

/// The resource that holds the job and what it saw.
#[derive(Debug, Serialize)]
pub struct Holder {
    pub resource: String,
    /// Foreground bytes in the probe interval that decided the hold.
    pub fg_bytes: u64,
    /// All bytes the device moved in that interval, the job's included.
    pub device_bytes: u64,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Record<'a> {
    Start {
        t: f64,
        cpu: bool,
        /// How `--idle cpu` is carried out: `cgroup` (cpu.idle and SCHED_IDLE) or `sched_idle`.
        #[serde(skip_serializing_if = "Option::is_none")]
        cpu_idle: Option<IdleCpu>,
        /// Seconds between probes.
        probe: f64,
        gates: &'a [Setup],
    },
    Held {
        t: f64,
        by: &'a [Holder],
    },
    Released {
        t: f64,
        /// Seconds the job was held.
        held: f64,
    },
    Pi {
        t: f64,
        resource: &'a str,
        pi: f64,
        /// Why, when it is not the tuner's step (`--preempt auto` under tact's tree).
        #[serde(skip_serializing_if = "Option::is_none")]
        why: Option<&'a str>,
    },
    Netns {
        t: f64,
        resource: &'a str,
        /// Whether the job now has a network namespace of its own.
        own: bool,
        /// The source of its own traffic from now on (as in `start`).
        own_traffic: &'a str,
    },
    /// The marking of the packets forwarded from the job's network namespaces began or ended
    /// (its first ingress chain added, or its last removed) after the start.
    Marking {
        t: f64,
        resource: &'a str,
        /// Whether some of the job's packets are marked now: the start's `kernel.marking` from
        /// here on.
        marked: bool,
        /// Which veths and chains.
        why: &'a str,
    },
    Counters {
        t: f64,
        held: bool,
        gates: &'a [GateView],
    },
    Summary {
        t: f64,
        /// Seconds held in all.
        held: f64,
        holds: u32,
        gates: &'a [GateView],
    },
}

pub struct IdleLog {
    out: JsonLines,
}

impl IdleLog {
    pub fn new(out: JsonLines) -> Self {
        IdleLog { out }
    }

    pub fn start(
        &mut self,
        t: Duration,
        cpu: Option<IdleCpu>,
        probe: Duration,
        gates: &[Setup],
    ) -> Result<()> {
        self.out.line(&Record::Start {
            t: t.as_secs_f64(),
            cpu: cpu.is_some(),
            cpu_idle: cpu,
            probe: probe.as_secs_f64(),
            gates,
        })
    }

    pub fn held(&mut self, t: Duration, by: &[Holder]) -> Result<()> {
        self.out.line(&Record::Held {
            t: t.as_secs_f64(),
            by,
        })
    }

    pub fn released(&mut self, t: Duration, held: Duration) -> Result<()> {
        self.out.line(&Record::Released {
            t: t.as_secs_f64(),
            held: held.as_secs_f64(),
        })
    }

    pub fn pi(
        &mut self,
        t: Duration,
        resource: &str,
        pi: Duration,
        why: Option<&str>,
    ) -> Result<()> {
        self.out.line(&Record::Pi {
            t: t.as_secs_f64(),
            resource,
            pi: pi.as_secs_f64(),
            why,
        })
    }

    pub fn netns(
        &mut self,
        t: Duration,
        resource: &str,
        own: bool,
        own_traffic: &str,
    ) -> Result<()> {
        self.out.line(&Record::Netns {
            t: t.as_secs_f64(),
            resource,
            own,
            own_traffic,
        })
    }

    pub fn marking(&mut self, t: Duration, resource: &str, marked: bool, why: &str) -> Result<()> {
        self.out.line(&Record::Marking {
            t: t.as_secs_f64(),
            resource,
            marked,
            why,
        })
    }

    pub fn counters(&mut self, t: Duration, held: bool, gates: &[GateView]) -> Result<()> {
        self.out.line(&Record::Counters {
            t: t.as_secs_f64(),
            held,
            gates,
        })
    }

    pub fn summary(
        &mut self,
        t: Duration,
        held: Duration,
        holds: u32,
        gates: &[GateView],
    ) -> Result<()> {
        self.out.line(&Record::Summary {
            t: t.as_secs_f64(),
            held: held.as_secs_f64(),
            holds,
            gates,
        })
    }
}
