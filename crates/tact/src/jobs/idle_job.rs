//! An idle-gated job (spec idletime §6): SCHED_IDLE for `cpu`, and for each disk or link a
//! polling driver of a [`Gate`]: every δ ≤ p/10 the resource's activity less the job's own is
//! fed to [`Gate::poll`], and the job's tree is held (SIGSTOP) whenever any gate says hold and
//! released (SIGCONT) once every gate says release. Holding goes through the same crash-safe
//! path as a polite suspension: the crash record and the guard are in place before the first
//! SIGSTOP, so no exit of tact, SIGKILL included, leaves the job stopped.

use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tact_core::idle::{
    poll_interval, Anchor, Gate, GateParams, State, TreeJudge, TreeLook, TreeVerdict, Tuner,
    TunerParams,
};
use tact_linux::actuate::per_thread::SavedThreads;
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::actuate::{ioprio, sched_idle};
use tact_linux::probe::block_device::BlockResolver;
use tact_linux::rate::fmt_rate;
use tact_linux::state::StateDir;
use tact_linux::timer::Ticker;
use tact_linux::{Guard, JobTree, ProcId, ProcReader};
use tact_proto::{
    ClassReport, GateReport, GateState, IdleCpu, IdleReport, NetKernelReport, Report, ReportState,
    MAX_WHY,
};

use super::events::{Event, Events};
use super::guarded;
use super::idle::{Gated, IdleSettings, Preempt};
use super::idle_cgroup::IdleCgroup;
use super::idle_log::{ClassBytes, GateView, Holder, IdleLog, NetKernel, Setup};
use super::idle_net::{Marking, MarkingChange, Shaper};
use super::idle_watch::{
    disk_default_pi, fmt_ms, net_default_pi, DefaultPi, DiskWatch, NetWatch, OwnTraffic, Probe,
};
use super::job::shown_name;
use super::polite::Ended;
use super::turn::Turn;

/// How often the counters go to the log and the daemon, and the job's tree is checked for
/// processes that are not idle yet.
const EVERY_SECOND: Duration = Duration::from_secs(1);
/// The guard resumes the job if tact neither renews within this long nor closes the socket (it
/// hung); renewed every second, and more than a second and the daemon's calls (a report and a
/// rejoin: `turn::TIMEOUTS`, 8 s at most) apart.
const LEASE: Duration = Duration::from_secs(15);
/// Where a link's kernel `why` for the daemon goes on with the marking's latest change.
const SINCE: &str = "; since t=";
/// The probe interval's bounds: δ ≤ p/10 (spec §3), but a probe reads /proc for every member.
const MIN_PROBE: Duration = Duration::from_millis(1);
const MAX_PROBE: Duration = Duration::from_millis(100);
/// `--preempt auto` keeps p between these (beyond the tuner's own bounds): no shorter than the
/// shortest probe interval, as with a fixed p (the bench's network does best at 1–2 ms, which a
/// floor of ten probe intervals kept out of reach), and the longest foreground gap tact plans
/// for is a second.
const AUTO_MIN_PI: Duration = MIN_PROBE;
const AUTO_LONGEST_GAP: Duration = Duration::from_secs(1);

enum Watch {
    Disk(DiskWatch),
    Net(NetWatch),
}

/// One gated resource.
struct Watched {
    label: String,
    watch: Watch,
    gate: Gate,
    tuner: Option<Tuner>,
    /// Foreground bytes seen in all.
    fg_bytes: u64,
    /// Times this gate has held the job (it alone or with others).
    holds: u64,
    /// Time this gate held the job, up to `holding_since`.
    held: Duration,
    /// Since when this gate holds the job, while it does.
    holding_since: Option<Instant>,
    /// The htb tree on the link, where tact could build it (the job's class below the
    /// foreground; the gate's hold is the PI, the tree is not changed).
    shaper: Option<Shaper>,
    /// The htb classes' bytes at the last look (once a second, for the log and the daemon).
    classes: Option<ClassBytes>,
    /// A link's kernel-assisted part as set up (the log's `kernel`), for the daemon; its
    /// `marking` follows the `marking` records.
    kernel: Option<NetKernel>,
    /// What the probes saw since the last look at the tree, for the tuner's verdict on whether
    /// the tree preempts the job.
    since_look: SinceLook,
    /// The looks' verdicts, each only once the job sent through a whole look.
    tree_judge: TreeJudge,
}

/// A link's traffic between two looks at its tree (once a second), as [`TreeLook`] needs it.
#[derive(Debug, Default)]
struct SinceLook {
    /// The classes' bytes at the last look, and when it was.
    last: Option<(ClassBytes, Instant)>,
    /// The job's own bytes on the link since: what each probe took out of the device's count.
    job_bytes: u64,
    /// Time the gate held the job in a PI since (a probe interval per probe that left it in P).
    pi_time: Duration,
}

impl Watched {
    fn view(&self) -> GateView {
        let mut view = GateView::new(self.label.clone(), &self.gate, self.fg_bytes);
        view.classes = self.classes;
        view
    }

    /// Reads the htb classes' bytes, if there is a tree. A tree someone removed (the classes are
    /// gone) ends the kernel-assisted part, not the job; the probe finds the job's class gone on
    /// its own and takes the job's traffic from another source.
    fn look_at_classes(&mut self, t: Duration) {
        let Some(shaper) = &mut self.shaper else {
            return;
        };
        match shaper.class_bytes() {
            Ok(Some(c)) => self.classes = Some(c),
            Ok(None) => {
                let why = format!(
                    "the htb tree was removed by someone else at t={:.2}s",
                    t.as_secs_f64()
                );
                eprintln!("tact: {}: {why}; the gate goes on alone", self.label);
                if let Some(k) = &mut self.kernel {
                    k.why = format!("{}; {why}", k.why);
                }
                self.classes = None;
                if let Some(Err(e)) = self.shaper.take().map(Shaper::forget) {
                    tracing::warn!("{}: {e}", self.label);
                }
            }
            Err(e) => tracing::warn!("{}: {e}", self.label),
        }
    }

    /// Under `--preempt auto` on a link with tact's tree, tells the tuner whether the tree
    /// preempted the job over the last second (after [`Watched::look_at_classes`]): the job's
    /// traffic in its class and the tree sending at its rate, or no tree any more. Returns the
    /// new p and why, when the verdict changed it.
    fn judge_tree(&mut self, now: Instant) -> Option<(Duration, String)> {
        let tuner = self.tuner.as_mut()?;
        let since = std::mem::take(&mut self.since_look);
        let verdict = match (&self.shaper, self.classes) {
            (Some(shaper), Some(c)) => {
                let Some((last, at)) = since.last else {
                    self.since_look.last = Some((c, now));
                    return None;
                };
                self.since_look.last = Some((c, now));
                let look = TreeLook {
                    elapsed: (now - at).saturating_sub(since.pi_time),
                    rate_bits: shaper.drain_bits(),
                    fg_bytes: c.fg_bytes.saturating_sub(last.fg_bytes),
                    bg_bytes: c.bg_bytes.saturating_sub(last.bg_bytes),
                    job_bytes: since.job_bytes,
                };
                let busy = format!(
                    "{:.0}% of its {}",
                    100.0 * look.busy(),
                    fmt_rate(look.rate_bits)
                );
                self.tree_judge.judge(&look).map(|verdict| match verdict {
                    TreeVerdict::Preempts => (
                        true,
                        format!(
                            "the job's traffic goes through its class and the tree sends at \
                             {busy}: the tree holds the queue, so a foreground that finds the job \
                             sending pays one frame"
                        ),
                    ),
                    TreeVerdict::OutsideClass => (
                        false,
                        format!(
                            "the job's class sent {} B of the job's {} B: its packets share the \
                             foreground's class",
                            look.bg_bytes, look.job_bytes
                        ),
                    ),
                    TreeVerdict::NoQueue => (
                        false,
                        format!(
                            "the tree sends at {busy} while the job runs: the queue is not in \
                             the tree (a bottleneck downstream?), which cannot put the \
                             foreground first"
                        ),
                    ),
                })
            }
            _ => Some((false, "tact's tree is gone".to_string())),
        };
        let (yes, why) = verdict?;
        let pi = tuner.set_preemptive(yes)?;
        self.gate.set_pi(pi);
        let params = tuner.params();
        let why = if yes {
            format!("--preempt auto: PI 0: {why}")
        } else {
            format!(
                "--preempt auto: {why}; the PI is tuned from {} between {} and {}",
                fmt_ms(params.initial),
                fmt_ms(params.p_min),
                fmt_ms(params.p_max)
            )
        };
        Some((pi, why))
    }

    /// Removes the htb tree, saying so if that fails; the job's class goes with it as the
    /// source of its own traffic.
    fn remove_shaper(&mut self) {
        if let Watch::Net(n) = &mut self.watch {
            match n.drop_class() {
                Ok(Some(own)) => eprintln!("tact: {}: {}", self.label, own.describe(n.iface())),
                Ok(None) => {}
                Err(e) => eprintln!("tact: {}: {e}", self.label),
            }
        }
        if let Some(mut shaper) = self.shaper.take() {
            match shaper.remove() {
                Ok(Some(restored)) => eprintln!("tact: {}: {restored}", self.label),
                Ok(None) => {}
                Err(e) => eprintln!("tact: {}: cannot remove the htb tree: {e}", self.label),
            }
        }
    }

    /// Counts a hold of this gate beginning or ending at `now`.
    fn holding(&mut self, hold: bool, now: Instant) {
        match (hold, self.holding_since) {
            (true, None) => {
                self.holds += 1;
                self.holding_since = Some(now);
            }
            (false, Some(since)) => {
                self.held += now - since;
                self.holding_since = None;
            }
            _ => {}
        }
    }

    /// The gate as the daemon shows it.
    fn report(&self, now: Instant) -> GateReport {
        let held = self.held + self.holding_since.map_or(Duration::ZERO, |s| now - s);
        let view = self.view();
        GateReport {
            resource: view.resource,
            state: match self.gate.state() {
                State::Fg => GateState::Held,
                State::Pi => GateState::Pi,
                State::Idle | State::Bg => GateState::Released,
            },
            pi_ms: view.pi * 1000.0,
            holds: self.holds,
            held_ms: held.as_millis() as u64,
            fg_bytes: view.fg_bytes,
            counters: view.counters,
            preempted: view.preempted,
            expired_pis: view.expired_pis,
            harm: view.harm,
            kernel: self.kernel.as_ref().map(|k| NetKernelReport {
                // From the tree as it is now: one that failed is gone.
                htb_rate_bits: self.shaper.as_ref().map(Shaper::rate_bits),
                marking: k.marking,
                why: truncate(&k.why, MAX_WHY),
                classes: self.shaper.as_ref().and(self.classes).map(|c| ClassReport {
                    fg_bytes: c.fg_bytes,
                    bg_bytes: c.bg_bytes,
                }),
            }),
            // As it is now: the job may have moved to a namespace of its own since the start.
            own_traffic: match &self.watch {
                Watch::Net(n) => Some(n.own().report()),
                Watch::Disk(_) => None,
            },
        }
    }
}

/// At most `max` bytes of `s`, cut at a character boundary (the protocol's limit on a `why`).
fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Applies a per-thread setting to processes, returning what it replaced.
type Apply<T> = fn(&ProcReader, &[ProcId]) -> tact_linux::Result<Vec<SavedThreads<T>>>;
/// Puts back what [`Apply`] replaced (and the first process's old value on later members).
type Undo<T> = fn(&ProcReader, &[SavedThreads<T>], &[ProcId]) -> tact_linux::Result<()>;

/// A per-thread setting (scheduling policy, I/O priority) applied to the job's processes, with
/// what it replaced.
struct PerThread<T> {
    what: &'static str,
    apply: Apply<T>,
    undo: Undo<T>,
    /// Whether a process's main thread has the setting already (inherited from its parent).
    has: fn(i32) -> tact_linux::Result<bool>,
    saved: Vec<SavedThreads<T>>,
    seen: HashSet<ProcId>,
}

impl<T> PerThread<T> {
    /// Applies the setting to members not seen before. A process that inherited it is left out
    /// of `saved`: restoring gives it the job's original setting instead of the inherited one.
    fn cover(&mut self, reader: &ProcReader, members: &[ProcId]) -> Result<()> {
        let mut fresh = Vec::new();
        for id in members.iter().filter(|id| !self.seen.contains(id)) {
            match (self.has)(id.pid) {
                Ok(true) => {}
                Ok(false) => fresh.push(*id),
                // Exited since the walk.
                Err(tact_linux::Error::NoProcess { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !fresh.is_empty() {
            let saved = (self.apply)(reader, &fresh)
                .with_context(|| format!("cannot set {}", self.what))?;
            self.saved.extend(saved);
        }
        self.seen.extend(members.iter().copied());
        Ok(())
    }

    fn restore(&self, reader: &ProcReader, members: &[ProcId]) -> Result<()> {
        (self.undo)(reader, &self.saved, members)
            .with_context(|| format!("cannot restore {}", self.what))
    }
}

fn sched_idle_setting() -> PerThread<sched_idle::SchedPolicy> {
    PerThread {
        what: "SCHED_IDLE",
        apply: sched_idle::make_idle,
        undo: sched_idle::restore,
        has: |pid| Ok(sched_idle::thread_policy(pid)?.is_idle()),
        saved: Vec::new(),
        seen: HashSet::new(),
    }
}

fn ioprio_idle_setting() -> PerThread<ioprio::IoPrio> {
    PerThread {
        what: "the idle I/O class",
        apply: ioprio::make_idle,
        undo: ioprio::restore,
        has: |pid| Ok(ioprio::thread_ioprio(pid)?.class() == ioprio::IoClass::Idle),
        saved: Vec::new(),
        seen: HashSet::new(),
    }
}

/// What a user wants to know at the end.
#[derive(Default)]
pub struct IdleSummary {
    pub elapsed: Duration,
    pub held: Duration,
    pub holds: u32,
    /// Each gated resource with its final PI.
    pub pis: Vec<(String, Duration)>,
    pub cpu: Option<IdleCpu>,
}

impl IdleSummary {
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        match self.cpu {
            Some(IdleCpu::Cgroup) => parts.push("cpu: cgroup cpu.idle and SCHED_IDLE".to_string()),
            Some(IdleCpu::SchedIdle) => parts.push("cpu: SCHED_IDLE".to_string()),
            None => {}
        }
        for (label, pi) in &self.pis {
            parts.push(format!("{label}: PI {}", fmt_ms(*pi)));
        }
        // Both durations rounded the same way, so that the time held never reads longer than
        // the run (a whole-second run and a rounded hold printed `ran 0% of 3s; held 1 times for
        // 4.0s`).
        let held = self.held.min(self.elapsed);
        let ran = if self.elapsed.is_zero() {
            100.0
        } else {
            100.0 * (1.0 - held.as_secs_f64() / self.elapsed.as_secs_f64())
        };
        format!(
            "tact: job ran {ran:.0}% of {}; held {} times for {} in all ({})",
            fmt_ms(self.elapsed),
            self.holds,
            fmt_ms(held),
            parts.join(", ")
        )
    }
}

pub struct IdleJob {
    verbose: bool,
    tree: JobTree,
    root: PidFd,
    /// tact itself: its own log writes land on a disk too, and are not the foreground's.
    me: ProcId,
    reader: ProcReader,
    watched: Vec<Watched>,
    probe: Duration,
    sched: Option<PerThread<sched_idle::SchedPolicy>>,
    /// The idle cgroup the job is in, when `--idle cpu` could have one.
    cgroup: Option<IdleCgroup>,
    /// The job's packets marked DSCP LE, when a link has an htb tree and tact may mark.
    marking: Option<Marking>,
    io: Option<PerThread<ioprio::IoPrio>>,
    restore: bool,
    log: Option<IdleLog>,
    state: StateDir,
    guard: Option<Guard>,
    turn: Option<Turn>,
    start: Instant,
    held_since: Option<Instant>,
    summary: IdleSummary,
}

impl IdleJob {
    /// Takes charge of the tree rooted at `pid`, which runs `command` (its name for the daemon).
    pub fn new(settings: IdleSettings, pid: i32, command: &[String]) -> Result<Self> {
        let IdleSettings {
            cpu_cgroup,
            gated,
            preempt,
            shapers,
            marking,
            json_log,
            crash_records,
            verbose,
            name,
            socket,
            priority,
            restore,
        } = settings;
        let tree = JobTree::attach(pid)?;
        let root = PidFd::open(pid)?;
        let reader = ProcReader::new();
        if reader.stat(pid)?.id() != tree.root() {
            bail!("process {pid} exited while tact was attaching to it");
        }
        let me = reader.stat(std::process::id() as i32)?.id();
        let members = tree.members();
        let mut sched = None;
        let mut cgroup = None;
        let cpu = cpu_cgroup.is_some();
        if let Some(made) = cpu_cgroup {
            if restore {
                if let Err(e) = sched_idle::check_leave(pid) {
                    eprintln!("tact: {e}: process {pid} will stay SCHED_IDLE after tact detaches");
                }
            }
            let mut s = sched_idle_setting();
            s.cover(&reader, &members)?;
            sched = Some(s);
            // The job joined the group before it execed; members it forked already are in too.
            let why_not = (*made).and_then(|mut g| {
                g.cover(&members).map_err(|e| e.to_string())?;
                Ok(g)
            });
            let how = match why_not {
                Ok(g) => {
                    let how = format!(
                        "and the job, from its first instruction, in {} with cpu.idle = 1",
                        g.dir().display()
                    );
                    cgroup = Some(g);
                    how
                }
                Err(why) => format!("only; cgroup cpu.idle not used: {why}"),
            };
            eprintln!(
                "tact: idle cpu: SCHED_IDLE for every thread {how} (no preemption interval: \
                 taking a CPU back costs microseconds)"
            );
        }
        let cpu = cpu.then_some(if cgroup.is_some() {
            IdleCpu::Cgroup
        } else {
            IdleCpu::SchedIdle
        });
        let mut io = None;
        let mut shapers = shapers.into_iter();
        let mut watched = Vec::new();
        let mut setups = Vec::new();
        for g in &gated {
            let label = g.label();
            let (watch, default, own_traffic) = match g {
                Gated::Disk(dev) => {
                    let w = DiskWatch::new(dev, &with(&members, me))?;
                    let default = disk_default_pi(w.baseline());
                    let resolver = BlockResolver::new();
                    match ioprio::check_idle_class(&resolver, dev) {
                        Ok(()) if io.is_none() => {
                            let mut s = ioprio_idle_setting();
                            s.cover(&reader, &members)?;
                            io = Some(s);
                            eprintln!("tact: {label}: BFQ is active: the job's I/O also gets the idle class");
                        }
                        Ok(()) => {}
                        Err(e) => eprintln!(
                            "tact: {label}: not using the idle I/O class ({e}); the gate alone holds the job"
                        ),
                    }
                    (Watch::Disk(w), default, None)
                }
                Gated::Net(iface) => {
                    // Which source of the job's own traffic it uses is told once the job's
                    // packets are marked, or not (`own_traffic`, below).
                    let w = NetWatch::new(iface, pid)?;
                    let own = w.own().name();
                    (Watch::Net(w), net_default_pi(), Some(own))
                }
            };
            let (shaper, kernel) = match g {
                Gated::Net(_) => {
                    let (shaper, kernel) = shapers.next().expect("one per link");
                    (shaper, Some(kernel))
                }
                Gated::Disk(_) => (None, None),
            };
            let (gate, tuner, why) = gate_for(preempt, &default, shaper.is_some())?;
            eprintln!(
                "tact: {label}: preemption interval {}{} ({why})",
                fmt_ms(gate.params().pi),
                if tuner.is_some() { ", tuned" } else { "" }
            );
            setups.push(Setup {
                resource: label.clone(),
                pi: gate.params().pi.as_secs_f64(),
                auto: tuner.is_some(),
                why,
                own_traffic,
                kernel,
            });
            watched.push(Watched {
                label,
                watch,
                gate,
                tuner,
                fg_bytes: 0,
                holds: 0,
                held: Duration::ZERO,
                holding_since: None,
                shaper,
                classes: None,
                kernel: None,
                since_look: SinceLook::default(),
                tree_judge: TreeJudge::default(),
            });
        }
        let marking = mark_job((pid, &members), marking, &watched, &mut setups);
        for (w, s) in watched.iter_mut().zip(&setups) {
            w.kernel = s.kernel.clone();
        }
        own_traffic(
            marking.as_ref().is_some_and(Marking::marks_sockets),
            &mut watched,
            &mut setups,
        );
        let probe = probe_interval(&watched);
        let shown = shown_name(name.as_deref(), command);
        let turn = Turn::join(socket.as_deref(), &shown, pid, priority)?;
        let start = Instant::now();
        let mut log = json_log.map(IdleLog::new);
        if let Some(log) = &mut log {
            log.start(Duration::ZERO, cpu, probe, &setups)?;
        }
        Ok(IdleJob {
            verbose,
            tree,
            root,
            me,
            reader,
            watched,
            probe,
            sched,
            cgroup,
            marking,
            io,
            restore,
            log,
            state: crash_records,
            guard: None,
            turn,
            start,
            held_since: None,
            summary: IdleSummary {
                cpu,
                ..IdleSummary::default()
            },
        })
    }

    /// Gates the job until its root exits or a signal arrives; the job is running when this
    /// returns, whether it returns an error or not.
    pub fn regulate(&mut self, events: &mut Events) -> Result<Ended> {
        let result = self.regulate_inner(events);
        let resumed = self.release().context("cannot resume the job");
        self.summary.elapsed = self.start.elapsed();
        self.summary.pis = self
            .watched
            .iter()
            .map(|w| (w.label.clone(), w.gate.params().pi))
            .collect();
        for w in &mut self.watched {
            w.look_at_classes(self.summary.elapsed);
        }
        let views: Vec<GateView> = self.watched.iter().map(Watched::view).collect();
        if let Some(log) = &mut self.log {
            if let Err(e) = log.summary(
                self.summary.elapsed,
                self.summary.held,
                self.summary.holds,
                &views,
            ) {
                tracing::warn!("{e:#}");
            }
        }
        if self.restore {
            self.restore_settings();
        }
        // Before the cpu cgroup: the marking may match that cgroup.
        self.remove_net_priority();
        if let Some(cgroup) = self.cgroup.take() {
            let dir = cgroup.dir().to_path_buf();
            if let Err(e) = cgroup.remove() {
                eprintln!("tact: cannot remove the idle cgroup {}: {e}", dir.display());
            }
        }
        let ended = result?;
        resumed?;
        Ok(ended)
    }

    fn regulate_inner(&mut self, events: &mut Events) -> Result<Ended> {
        if self.watched.is_empty() {
            // CPU only: nothing to hold; look for new members now and then.
            loop {
                match events.wait(self.root.as_fd(), EVERY_SECOND)? {
                    Event::Ready => return Ok(Ended::Exited),
                    Event::Signal(sig) => return Ok(Ended::Interrupted(sig)),
                    Event::Timeout => {
                        self.tree.refresh()?;
                        self.cover()?;
                        self.report()?;
                    }
                }
            }
        }
        // The guard is up before the first probe: started at the first hold, it delayed that
        // hold by its own start (up to 219 ms on a loaded machine), while the job went on
        // beside the foreground the gate had seen (docs/idle.md, "The first hold").
        guarded::start(&mut self.guard, LEASE)?;
        let mut ticker = Ticker::new(self.probe)?;
        let mut last_second = Instant::now();
        loop {
            // A tick comes every δ; the wait's own timeout only guards against a stuck timer.
            match events.wait(ticker.as_fd(), self.probe + EVERY_SECOND)? {
                Event::Signal(sig) => return Ok(Ended::Interrupted(sig)),
                Event::Ready => {
                    ticker.take()?;
                }
                Event::Timeout => {}
            }
            if exited(self.root.as_fd())? {
                return Ok(Ended::Exited);
            }
            self.step()?;
            if last_second.elapsed() >= EVERY_SECOND {
                last_second = Instant::now();
                self.cover()?;
                if let Some(guard) = &mut self.guard {
                    guard.renew(LEASE)?;
                }
                let t = self.start.elapsed();
                for w in &mut self.watched {
                    w.look_at_classes(t);
                    if let Some((pi, why)) = w.judge_tree(Instant::now()) {
                        eprintln!("tact: t={:.2}s {}: {why}", t.as_secs_f64(), w.label);
                        if let Some(log) = &mut self.log {
                            log.pi(t, &w.label, pi, Some(&why))?;
                        }
                    }
                }
                let views: Vec<GateView> = self.watched.iter().map(Watched::view).collect();
                let held = self.held_since.is_some();
                if let Some(log) = &mut self.log {
                    log.counters(self.start.elapsed(), held, &views)?;
                }
                self.report()?;
            }
        }
    }

    /// One probe of every gated resource, then hold or release.
    fn step(&mut self) -> Result<()> {
        let now = Instant::now();
        let t = now - self.start;
        self.tree.refresh()?;
        let members = with(&self.tree.members(), self.me);
        let mut holders = Vec::new();
        let mut marking = None;
        for w in &mut self.watched {
            let probe = match &mut w.watch {
                Watch::Disk(d) => d.probe(now, &members)?,
                Watch::Net(n) => {
                    if let Some(own) = n.recheck()? {
                        let own_ns = matches!(own, OwnTraffic::Namespace(_));
                        eprintln!(
                            "tact: t={:.2}s {}: {}; {}",
                            t.as_secs_f64(),
                            w.label,
                            if own_ns {
                                "the job moved to a network namespace of its own"
                            } else {
                                "the job is in tact's network namespace now"
                            },
                            own.describe(n.iface())
                        );
                        if let Some(log) = &mut self.log {
                            log.netns(t, &w.label, own_ns, own.name())?;
                        }
                        // Its packets forwarded from there are marked at once, not at the next
                        // second's cover.
                        if let Some(m) = &mut self.marking {
                            marking = m.follow(&self.tree.members()).or(marking);
                        }
                    }
                    n.probe(now, &members)?
                }
            };
            w.fg_bytes += probe.foreground;
            let hold = !w.gate.poll(t, probe.fg_active(), true);
            w.holding(hold, now);
            if w.shaper.is_some() && w.tuner.is_some() {
                w.since_look.job_bytes += probe.device.saturating_sub(probe.foreground);
                if w.gate.state() == State::Pi {
                    w.since_look.pi_time += self.probe;
                }
            }
            if hold {
                holders.push(holder(&w.label, &probe));
            }
            if let Some(tuner) = &mut w.tuner {
                if let Some(pi) = tuner.observe(t, w.gate.counters()) {
                    if pi != w.gate.params().pi {
                        w.gate.set_pi(pi);
                        if let Some(log) = &mut self.log {
                            log.pi(t, &w.label, pi, None)?;
                        }
                    }
                }
            }
        }
        if let Some(change) = marking {
            self.marking_changed(t, &change)?;
        }
        match (holders.is_empty(), self.held_since) {
            (false, None) => {
                self.hold()?;
                self.held_since = Some(now);
                self.summary.holds += 1;
                if self.verbose {
                    let by: Vec<String> = holders
                        .iter()
                        .map(|h| format!("{} ({} B)", h.resource, h.fg_bytes))
                        .collect();
                    eprintln!("tact: t={:.2}s held by {}", t.as_secs_f64(), by.join(", "));
                }
                if let Some(log) = &mut self.log {
                    log.held(t, &holders)?;
                }
            }
            (true, Some(since)) => {
                self.release()?;
                if self.verbose {
                    eprintln!(
                        "tact: t={:.2}s released after {}",
                        t.as_secs_f64(),
                        fmt_ms(since.elapsed())
                    );
                }
                if let Some(log) = &mut self.log {
                    log.released(t, since.elapsed())?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Stops the job's tree, with the guard and the crash record in place first.
    fn hold(&mut self) -> Result<()> {
        guarded::stop(&mut self.tree, &self.state, &mut self.guard, LEASE)
    }

    /// Resumes the job if it is held, counting the time it was.
    fn release(&mut self) -> Result<()> {
        if let Some(since) = self.held_since.take() {
            self.summary.held += since.elapsed();
        }
        self.tree.resume()?;
        Ok(())
    }

    /// Makes members found since the last look idle too (a process adopted into the tree, or
    /// one that escaped the inherited setting).
    fn cover(&mut self) -> Result<()> {
        let members = self.tree.members();
        if let Some(s) = &mut self.sched {
            s.cover(&self.reader, &members)?;
        }
        if let Some(g) = &mut self.cgroup {
            // SCHED_IDLE covers the newcomers already; a cgroup that cannot take them is worth
            // a warning, not the job.
            if let Err(e) = g.cover(&members) {
                tracing::warn!("cannot move new members into {}: {e}", g.dir().display());
            }
        }
        if let Some(s) = &mut self.io {
            s.cover(&self.reader, &members)?;
        }
        if let Some(m) = &mut self.marking {
            let change = m.follow(&members);
            // Newcomers forked inside are marked already; one that cannot be moved is worth a
            // warning, not the job.
            if let Err(e) = m.cover(&members) {
                tracing::warn!("cannot move new members into the job's cgroup v2 directory: {e}");
            }
            if let Some(change) = change {
                self.marking_changed(self.start.elapsed(), &change)?;
            }
        }
        Ok(())
    }

    /// Tells each link with a tree, the user, the log and the daemon that the marking of the
    /// job's forwarded packets began or ended: the start's `kernel.marking` holds no more.
    fn marking_changed(&mut self, t: Duration, change: &MarkingChange) -> Result<()> {
        for w in &mut self.watched {
            let Some(kernel) = w.kernel.as_mut().filter(|_| w.shaper.is_some()) else {
                continue;
            };
            kernel.marking = change.marked;
            // The daemon's `why` is the start's and the latest change's, not every change's.
            let start = kernel.why.split(SINCE).next().unwrap_or_default();
            kernel.why = format!("{start}{SINCE}{:.2}s: {}", t.as_secs_f64(), change.why);
            eprintln!(
                "tact: t={:.2}s {}: {}",
                t.as_secs_f64(),
                w.label,
                change.why
            );
            if let Some(log) = &mut self.log {
                log.marking(t, &w.label, change.marked, &change.why)?;
            }
        }
        Ok(())
    }

    /// Takes the nftables table and the job's cgroup v2 directory away, then every htb tree,
    /// saying what could not be removed.
    fn remove_net_priority(&mut self) {
        if let Some(mut m) = self.marking.take() {
            for e in m.remove() {
                eprintln!("tact: cannot remove the marking of the job's packets: {e}");
            }
        }
        for w in &mut self.watched {
            w.remove_shaper();
        }
    }

    fn restore_settings(&mut self) {
        if self.tree.refresh().is_err() {
            return; // the job is gone
        }
        let members = self.tree.members();
        if let Some(s) = &self.sched {
            if let Err(e) = s.restore(&self.reader, &members) {
                eprintln!("tact: {e:#}");
            }
        }
        if let Some(s) = &self.io {
            if let Err(e) = s.restore(&self.reader, &members) {
                eprintln!("tact: {e:#}");
            }
        }
    }

    /// Tells the daemon, if one runs, whether the job is held, for how long it has been in all,
    /// and its gates. (Idle jobs do not take turns: the gates decide when they run.)
    fn report(&mut self) -> Result<()> {
        let Some(turn) = self.turn.as_mut() else {
            return Ok(());
        };
        let now = Instant::now();
        let mut held = self.summary.held;
        if let Some(since) = self.held_since {
            held += now - since;
        }
        turn.report(Report {
            state: if self.held_since.is_some() {
                ReportState::Suspended
            } else {
                ReportState::Running
            },
            rate: None,
            target: None,
            unit: None,
            suspended_ms: held.as_millis() as u64,
            // Held until the foreground leaves the resource alone for a PI, which may take any
            // time: shown as suspended until the next report, which comes within a second.
            suspend_for_ms: match self.held_since {
                Some(_) => (EVERY_SECOND + self.probe).as_millis() as u64,
                None => 0,
            },
            idle: Some(IdleReport {
                cpu: self.summary.cpu,
                gates: self.watched.iter().map(|w| w.report(now)).collect(),
            }),
        });
        Ok(())
    }

    /// Clean exit: the guard leaves, and the crash record goes. Call after `regulate`.
    pub fn finish(mut self) -> IdleSummary {
        guarded::leave(&self.tree, &self.state, self.guard.take());
        std::mem::take(&mut self.summary)
    }

    /// The job's root process, to wait for its exit.
    pub fn root(&self) -> &PidFd {
        &self.root
    }

    /// The job's process tree, to pass signals on to.
    pub fn tree(&mut self) -> &mut JobTree {
        &mut self.tree
    }
}

/// Marks the job (its root and members) DSCP LE when some link has an htb tree to put them in,
/// with the marking `prepared` before the start (there is one for every such job; for `tact
/// attach` it marks forwarded packets only), and tells each such link's log entry and the user
/// what happened.
fn mark_job(
    (root, members): (i32, &[ProcId]),
    prepared: Option<Box<Result<Marking, String>>>,
    watched: &[Watched],
    setups: &mut [Setup],
) -> Option<Marking> {
    if watched.iter().all(|w| w.shaper.is_none()) {
        return None;
    }
    let outcome = (*prepared?).map(|mut m| {
        let how = m.cover_job(root, members);
        (m, how)
    });
    let (marking, note) = match outcome {
        Ok((m, how)) => (Some(m), how),
        Err(why) => (
            None,
            format!(
                "the job's packets are not marked ({why}): only traffic marked DSCP LE already \
                 (sockets of tact's library gate) goes to the job's class"
            ),
        ),
    };
    for (w, s) in watched.iter().zip(setups.iter_mut()) {
        if let (Some(_), Some(k)) = (&w.shaper, &mut s.kernel) {
            k.marking = marking.as_ref().is_some_and(Marking::marks_any);
            eprintln!("tact: {}: {}; {note}", w.label, k.why);
            k.why = format!("{}; {note}", k.why);
        }
    }
    marking
}

/// Takes each link's own traffic from the job's htb class where the tree is up and the job's
/// packets are `marked` into it, and tells the user and the log's `start` which source each
/// link's gate uses.
fn own_traffic(marked: bool, watched: &mut [Watched], setups: &mut [Setup]) {
    for (w, s) in watched.iter_mut().zip(setups.iter_mut()) {
        let Watch::Net(n) = &mut w.watch else {
            continue;
        };
        let class = (marked && w.shaper.is_some()).then(|| n.use_class());
        let why_not = match (class, n.own(), n.no_sockets()) {
            (Some(Err(why)), ..) => format!(" (the job's htb class cannot be read: {why})"),
            (_, OwnTraffic::Unknown, Some(why)) => format!(
                " (the job's TCP sockets cannot be read: {why}; run it in a network namespace \
                 of its own for an exact count: tact notices when it moves to one)"
            ),
            _ => String::new(),
        };
        eprintln!(
            "tact: {}: {}{why_not}",
            w.label,
            n.own().describe(n.iface())
        );
        s.own_traffic = Some(n.own().name());
    }
}

/// The gate of a resource and why it has its PI; `tree`: tact's priority tree is on the link.
fn gate_for(
    preempt: Option<Preempt>,
    default: &DefaultPi,
    tree: bool,
) -> Result<(Gate, Option<Tuner>, String)> {
    Ok(match preempt {
        None => (
            Gate::new(GateParams::new(default.pi)),
            None,
            default.why.clone(),
        ),
        Some(Preempt::Fixed(pi)) => (
            Gate::new(GateParams::new(pi)),
            None,
            if pi.is_zero() {
                "--preempt 0: a plain two-level priority queue".into()
            } else {
                "--preempt".into()
            },
        ),
        Some(Preempt::Auto) => {
            // The watcher's gate is end-anchored, but it sees foreground I/O only as it
            // completes: the PI runs from the completion before the request in service, which
            // is that request's start. So the tuner's start-anchored bounds apply (p_min =
            // 1.25·τ, p₀ = 2·τ), from the measured service time, not from the default PI
            // (10·τ): from there the tuner took longer than a bench point to come down.
            let tau = default.service.unwrap_or(default.pi / 10);
            let mut params =
                TunerParams::measured(tau, Anchor::Start, Duration::ZERO, AUTO_LONGEST_GAP);
            params.p_min = params.p_min.max(AUTO_MIN_PI);
            params.initial = params.initial.clamp(params.p_min, params.p_max);
            let mut tuner =
                Tuner::new(params).map_err(|e| anyhow::anyhow!("--preempt auto: {e}"))?;
            let tuned = format!(
                "starts at {} and moves between {} and {} to keep the share of foreground I/O \
                 that finds the job running under {:.0}%",
                fmt_ms(params.initial),
                fmt_ms(params.p_min),
                fmt_ms(params.p_max),
                params.beta * 100.0
            );
            // Under the tree the kernel sends the foreground's packets before the job's queued
            // ones: finding the job sending costs the foreground a frame, and p = 0 gave the job
            // the most on the tbf rig at no cost to fg. Each second's look at the tree
            // confirms it or hands the PI back to the tuner (`Watched::judge_tree`).
            let why = if tree {
                tuner.set_preemptive(true);
                format!(
                    "--preempt auto: 0ms while tact's priority tree preempts the job (its \
                     packets go after the foreground's, so a foreground that finds it sending \
                     pays one frame; checked every second: the job's traffic in its class and the \
                     tree sending at its rate); otherwise the PI {tuned}"
                )
            } else {
                format!("--preempt auto: {tuned}")
            };
            (Gate::new(GateParams::new(tuner.pi())), Some(tuner), why)
        }
    })
}

/// δ = p/10 for the shortest PI any gate may use, within [1 ms, 100 ms]; p = 0 probes every
/// 1 ms too, since it resumes the job at the first quiet probe (until 26 Nov it probed every
/// 10 ms, which resumed the job 10–20 ms after the foreground's last byte, later than p = 1 ms).
fn probe_interval(watched: &[Watched]) -> Duration {
    watched
        .iter()
        .map(|w| {
            let p = match &w.tuner {
                Some(t) => t.params().p_min,
                None => w.gate.params().pi,
            };
            poll_interval(p, MIN_PROBE, MAX_PROBE)
        })
        .min()
        .unwrap_or(MAX_PROBE)
}

fn holder(label: &str, probe: &Probe) -> Holder {
    Holder {
        resource: label.to_string(),
        fg_bytes: probe.foreground,
        device_bytes: probe.device,
    }
}

fn with(members: &[ProcId], me: ProcId) -> Vec<ProcId> {
    let mut all = members.to_vec();
    all.push(me);
    all
}

/// Whether the process behind `pidfd` has exited (its pidfd is readable), without waiting.
fn exited(pidfd: BorrowedFd) -> Result<bool> {
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
        Err(e) => return Err(e).context("poll"),
    }
    Ok(fds[0].revents().is_some_and(|r| !r.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::{truncate, IdleSummary};
    use std::time::Duration;

    /// Seconds in a duration as `fmt_ms` writes it: `105ms`, `4.0s`, `1m`, `1m2s`.
    fn secs(t: &str) -> f64 {
        if let Some(ms) = t.strip_suffix("ms") {
            return ms.parse::<f64>().unwrap() / 1000.0;
        }
        let (m, s) = t.split_once('m').unwrap_or(("0", t));
        let s = s.strip_suffix('s').unwrap_or(s);
        m.parse::<f64>().unwrap() * 60.0
            + if s.is_empty() {
                0.0
            } else {
                s.parse().unwrap()
            }
    }

    #[test]
    fn the_summary_never_shows_more_time_held_than_the_job_ran() {
        // The audit's run: held from its first probe to its end, 3.96 s.
        let s = IdleSummary {
            elapsed: Duration::from_millis(3960),
            held: Duration::from_millis(3958),
            holds: 1,
            pis: vec![("disk:vda".into(), Duration::from_millis(40))],
            cpu: None,
        };
        assert_eq!(
            s.line(),
            "tact: job ran 0% of 4.0s; held 1 times for 4.0s in all (disk:vda: PI 40ms)"
        );
        let s = IdleSummary {
            elapsed: Duration::from_millis(2040),
            held: Duration::from_millis(105),
            holds: 3,
            ..IdleSummary::default()
        };
        assert_eq!(
            s.line(),
            "tact: job ran 95% of 2.0s; held 3 times for 105ms in all ()"
        );
        // Rounded alike, whatever the two durations.
        for (run, held) in [(2999, 2951), (59_990, 59_960), (61_500, 61_499), (999, 996)] {
            let s = IdleSummary {
                elapsed: Duration::from_millis(run),
                held: Duration::from_millis(held),
                ..IdleSummary::default()
            };
            let line = s.line();
            let (of, rest) = line.split_once(" of ").unwrap().1.split_once(';').unwrap();
            let for_ = rest
                .split(" for ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            assert!(secs(for_) <= secs(of), "{line}");
        }
    }

    #[test]
    fn a_why_is_cut_at_a_character_boundary() {
        assert_eq!(truncate("htb at 95mbit", 100), "htb at 95mbit");
        assert_eq!(truncate("htb at 95mbit", 3), "htb");
        // "é" is two bytes: cutting inside it drops it whole.
        assert_eq!(truncate("aé", 2), "a");
        assert_eq!(truncate("", 0), "");
    }
}
