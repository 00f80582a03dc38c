//! Command-line interface: what the user types, with help that teaches.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// A command line that clap accepts but tact refuses before it starts anything (options that do
/// not go together): tact exits with 2 for it, as for clap's own errors, not with 125, which
/// says tact itself failed.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit status of a command line tact refuses: clap's.
pub const USAGE_FAILED: u8 = 2;

const ABOUT: &str = "Let background work use what important work leaves idle.";

const LONG_ABOUT: &str = "\
Let background work use what important work leaves idle.

tact watches a low-importance job's own progress (bytes it reads and writes, CPU time, or a counter
it keeps) and suspends it whenever that progress slows down, which is the sign that it is competing
with something more important for a disk, the CPU or memory. The target rate is calibrated
automatically; nothing needs tuning. This is MS Manners / BeNice (Douceur & Bolosky, SOSP 1999).

The other commands: `tact run --idle` lets a job use a CPU, disk or link only after the foreground
has left it idle for a preemption interval (idletime scheduling); `tact share` divides the CPU
among jobs in given proportions (ALPS); `tact tickets` gives jobs CPU, disk and memory rights
through currencies and tickets; `tact tune` runs as many of a program's jobs at once as give the
best throughput (TCC).";

const RUN_EXAMPLES: &str = "\
Examples:
  tact run -- tar -cf - /home | zstd -o /backup/home.tar.zst      (wrong: the pipe is the shell's)
  tact run -- sh -c 'tar -cf - /home | zstd -o /backup/home.tar.zst'
  tact run --progress cpu -- make -j2                               regulate on CPU time
  tact run --progress file:/tmp/done.count -- ./indexer             a counter the program writes
  tact run --probation 0 --json-log trace.jsonl -- rsync -a src/ dst/
  tact run --idle cpu -- make -j8                                   SCHED_IDLE for every thread
  sudo tact run --idle cpu --cgroup-parent /sys/fs/cgroup -- make   idle against every service
  tact run --idle disk -- updatedb                    held while others use the disk under $PWD
  tact run --idle disk:/dev/sdb,net:eth0 --preempt auto -- ./backup

Progress sources (--progress, repeat it for a job with several metrics):
  io          bytes read + written by the job's processes (rchar + wchar; the default)
  io-read     bytes read
  io-write    bytes written
  io-storage  bytes that reached the block layer (read_bytes + write_bytes)
  cpu         CPU time of the job's processes, in nanoseconds
  file:PATH   the last number in PATH, a counter the program keeps up to date

Idle-time scheduling (--idle, instead of progress regulation; Eggert's idletime scheduler):
  cpu              SCHED_IDLE for every thread of the job: it runs only on CPU time nothing else
                   wants (no preemption interval: taking a CPU back costs microseconds); where
                   tact may, also an idle cgroup (cpu.idle = 1) under tact's own, or under
                   --cgroup-parent DIR: SCHED_IDLE is idle only inside its own cgroup, so against
                   a service in another cgroup (cgroup v2: a session's scope against a system
                   service) use --cgroup-parent /sys/fs/cgroup as root
  disk[:DEVICE]    tact watches the disk (default: the one under the working directory) and
                   stops the job while other processes do I/O on it, until one preemption
                   interval has passed with none; also the idle I/O class where BFQ runs
  net[:INTERFACE]  the same on an interface's traffic (default: the default route's); as root
                   (CAP_NET_ADMIN) also an htb tree on its egress with the job's class below the
                   foreground, whose packets go first (rate: --net-rate, or 95% of the link
                   speed when known), and the job's packets marked DSCP LE by
                   nftables (the job in a cgroup v2 directory of tact's). A root qdisc someone
                   else added is left alone unless --net-replace-qdisc, but a tbf: tact grafts
                   its tree under it (tbf's rate kept, its bfifo put back at the end) unless
                   --net-leave-tbf. All removed at the end.
  Default --preempt: disk 10x its mean service time from /proc/diskstats (at least 10ms, at
  most 1s; 100ms if unmeasured), net 10ms. --preempt auto tunes it from how often the
  foreground finds the job running, except on a link where tact's tree holds the queue (checked
  every second): there the kernel sends the foreground's packets first, and the PI is 0. tact
  says what it chose and why, and how much the job was held at the end. Nothing is left
  stopped when tact exits, however it exits.

Signalling tact ends the whole job: tact resumes it and passes SIGTERM, SIGINT, SIGHUP or SIGQUIT
on to every process of it, the command's children and members that called setsid included (a
Ctrl-C only to those outside the terminal's process group, which had it already), then waits for
the command and exits with its status: 128+n when signal n killed it.";

const ATTACH_EXAMPLES: &str = "\
Examples:
  tact attach 12345                       regulate pid 12345 and its children on io progress
  tact attach --progress cpu $(pgrep -n updatedb)

  tact attach --idle cpu,disk 12345        SCHED_IDLE, and held while others use its disk
  tact attach --idle net 12345             held while others use the default route's link

The process stays in its own cgroup: --idle cpu gives it SCHED_IDLE only, and as root --idle net
marks DSCP LE (into the job's class of tact's htb tree) only the packets it sends from a network
namespace of its own (a container's) through a veth into tact's, not its sockets in tact's.

Interrupt tact (Ctrl-C) to stop regulating: the process is left running (with --idle cpu, back
on its old scheduling policy).";

#[derive(Debug, Parser)]
#[command(name = "tact", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    /// Print decisions on stderr as they happen: verdicts of polite jobs, idle gates holding and
    /// releasing, the concurrency controller's transitions.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command as a polite background job.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Regulate a running process (and its children) until it exits or tact is interrupted.
    #[command(after_help = ATTACH_EXAMPLES)]
    Attach(AttachArgs),
    /// Show in under a minute what tact does, against an unregulated and a nice'd background job.
    Demo(DemoArgs),
    /// Resume processes that a crashed tact left stopped (also done at the start of every other
    /// command but exec-wrap, which runs once per job of `tact tune`).
    Recover,
    /// Hand out the machine-wide run turn, so that regulated jobs run one at a time.
    #[command(after_help = DAEMON_EXAMPLES)]
    Daemon(DaemonArgs),
    /// Show the jobs registered with the daemon: state, progress against target, duty cycle.
    Status(StatusArgs),
    /// Divide the CPU among jobs in proportion to integer shares (ALPS), as an ordinary process.
    #[command(after_help = SHARE_EXAMPLES)]
    Share(ShareArgs),
    /// Tune how many jobs a program runs at once (make, GNU parallel) to its best throughput (TCC).
    #[command(after_help = TUNE_EXAMPLES)]
    Tune(TuneArgs),
    /// Run one job and report its start, end and status to `tact tune --completions wrap` (as
    /// the job command, or as make's SHELL).
    #[command(name = "exec-wrap", after_help = EXEC_WRAP_EXAMPLES)]
    ExecWrap(ExecWrapArgs),
    /// Give jobs CPU, disk and memory rights through currencies and tickets, and enforce them.
    #[command(long_about = TICKETS_ABOUT)]
    Tickets(TicketsArgs),
    /// Internal: the watchdog that resumes a job if its regulator dies.
    #[command(name = "__guard", hide = true)]
    Guard,
    /// Internal: built-in workloads of `tact demo`.
    #[command(name = "__work", hide = true)]
    Work(WorkArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub polite: PoliteArgs,
    #[command(flatten)]
    pub idle: IdleArgs,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub polite: PoliteArgs,
    #[command(flatten)]
    pub idle: IdleArgs,
    /// Process to regulate, with every child it has or starts later.
    pub pid: i32,
}

/// Idletime scheduling (`--idle`): the job uses a resource only once the foreground has left it
/// idle for a preemption interval.
#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Run the job in the idle time of these resources instead of regulating it by progress:
    /// cpu, disk[:DEVICE], net[:INTERFACE], comma-separated (explained in `tact run --help`).
    #[arg(long = "idle", value_name = "RESOURCE[,RESOURCE...]", value_delimiter = ',',
          value_parser = crate::jobs::idle::parse_resource,
          conflicts_with_all = ["polite", "progress", "peek", "probation", "bootstrap",
                                "testpoint", "max_suspend", "alpha", "beta", "state_dir"])]
    pub resources: Vec<crate::jobs::idle::Resource>,
    /// Preemption interval: how long a disk or link must stay free of foreground I/O before the
    /// job may run again. `0ms` is a plain two-level priority queue; `auto` tunes it from how
    /// often the foreground finds the job in its way, and keeps it at 0 on a link while tact's
    /// priority tree there holds the queue [default: 10x the measured service time (disk), 10ms
    /// (net)].
    #[arg(long, value_name = "DUR|auto", requires = "resources", allow_hyphen_values = true,
          value_parser = crate::jobs::idle::parse_preempt)]
    pub preempt: Option<crate::jobs::idle::Preempt>,
    /// With --idle net, as root (CAP_NET_ADMIN): the rate of the htb tree tact builds on the
    /// interface, in tc's units (e.g. 95mbit) [default: under a root tbf twice tbf's rate, so
    /// that tbf alone shapes; else 95% of the link speed in /sys/class/net/IF/speed; without
    /// either, no htb]. Given, a failure to build it is an error.
    #[arg(long, value_name = "RATE", requires = "resources",
          value_parser = tact_linux::rate::parse_rate)]
    pub net_rate: Option<u64>,
    /// With --idle net: replace a root qdisc someone else put on the interface with tact's htb
    /// (otherwise tact leaves it and uses the gate alone, or grafts its tree under a tbf). It is
    /// not put back afterwards.
    #[arg(long, requires = "resources")]
    pub net_replace_qdisc: bool,
    /// With --idle net: leave a root tbf alone. By default tact grafts its htb tree under it, as
    /// tbf's child in place of tbf's bfifo (tbf still sets the rate, the job's packets queue
    /// behind the foreground's), and puts the bfifo back at the end.
    #[arg(long, requires = "resources", conflicts_with = "net_replace_qdisc")]
    pub net_leave_tbf: bool,
    /// With --idle cpu, `tact run` only: make the job's idle group (`tact-PID-idle`, with
    /// cpu.idle = 1) under DIR, a directory of the cpu hierarchy, instead of tact's own cgroup.
    /// The group is idle against its siblings only: under the hierarchy's root (/sys/fs/cgroup
    /// on cgroup v2, as root) it is idle against every service and session, and on cgroup v2
    /// tact's own cgroup, when it holds processes (a login session's does), cannot have one at
    /// all. Given, a failure to make the group is an error [default: tact's own cgroup].
    #[arg(long, value_name = "DIR", requires = "resources")]
    pub cgroup_parent: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PoliteArgs {
    /// Regulate by progress (MS Manners): the default, unless --idle is given.
    #[arg(long)]
    pub polite: bool,
    /// What counts as progress: io, io-read, io-write, io-storage, cpu, file:PATH. Repeat for several.
    #[arg(long = "progress", value_name = "SRC")]
    pub progress: Vec<String>,
    /// Testpoint period: how often progress is judged.
    #[arg(long, value_name = "DUR", default_value = "200ms", value_parser = positive_duration)]
    pub testpoint: Duration,
    /// Longest single suspension; suspensions double from one testpoint period up to this.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = positive_duration)]
    pub max_suspend: Duration,
    /// Serve suspensions longer than this in pieces, with one testpoint of running (a peek)
    /// between them; a peek at 80% of the target or more ends the suspension early. `off` serves
    /// them whole, as the paper did [default: 100 testpoints].
    #[arg(long, value_name = "DUR|off", value_parser = peek)]
    pub peek: Option<Peek>,
    /// Sign-test false-alarm level: lower reacts slower but suspends less by mistake. In
    /// [2^-32, --beta): a poor verdict takes at least ⌈−log2 A⌉ testpoints (5 at 0.05).
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    pub alpha: f64,
    /// Sign-test miss level: higher resumes sooner after contention ends. Above --alpha, below 1.
    #[arg(long, value_name = "B", default_value_t = 0.2)]
    pub beta: f64,
    /// Testpoints of unregulated running that calibrate the first target (when none is saved).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub bootstrap: u32,
    /// After calibrating, cap the job at 25% of the time for this long, in case calibration ran
    /// under load. Default: 10m, or none when the machine was quiet (PSI some below 5%, the
    /// job's own stalls included) or a saved target exists.
    #[arg(long, value_name = "DUR", value_parser = duration)]
    pub probation: Option<Duration>,
    /// Where calibrated targets persist between runs [default: $XDG_STATE_HOME/tact].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Name under which the target is saved and the job shows in `tact status` [default: the
    /// program's file name in status; the target's key derived from the command and --progress].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Write a JSON object per line to FILE: one per evaluated testpoint (its `kind`: judged,
    /// peek, ...) and one as the job resumes after each stop (`"kind":"resumed"`: seconds
    /// stopped, the largest and last PSI stall seen meanwhile); or with --idle one per hold and
    /// release, the gates' counters every second, and a summary at the end.
    #[arg(long, value_name = "FILE")]
    pub json_log: Option<PathBuf>,
    /// Daemon to take turns through with other low-importance jobs (only one runs at a time)
    /// [default: $TACT_SOCKET, else the user's or the system daemon if one runs, else none].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Priority among the daemon's jobs, -100 to 100: higher runs first, equals share fairly.
    #[arg(long, value_name = "N", default_value_t = 0, allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-100..=100))]
    pub priority: i32,
}

const SHARE_EXAMPLES: &str = "\
Examples:
  tact share --job 1='make -j2' --job 3='./simulate'        make gets 1/4 of the CPU the two use
  tact share --job 2=./encode --pid 1=4242                 adopt a running process (and its children)
  sudo tact share --user 1=alice --user 3=bob              every process of alice against every one
                                                           of bob's, until interrupted (Ctrl-C)
  sudo tact share --user 1=www-data --job 3=./batch        the web server's processes get 1/4
                                                           while ./batch runs
  taskset -c 1 tact share --quantum 10ms --job 1=a --job 3=b   divide one CPU, as the paper did
  tact share --backend cgroup --job 1=a --job 4=b          let the kernel enforce it (needs root
                                                           or a delegated cgroup)

A job's share covers its whole process tree. A --user principal covers every process whose real
uid is USER (a name or a number), found again every second: processes the user starts later join
(stopped at once if the principal is), those that exit leave. tact itself, its watchdog, its
ancestors (your shell) and the commands it started are never members. Only root may name another
user. A user with no processes yet is waited for. tact runs until every --job and --pid has
ended; with only --user principals, until it is interrupted. Interrupted, it passes the signal
on to every process of the commands it started, setsid ones included (a Ctrl-C only to those
outside the terminal's process group, which had it already); --pid and --user processes are
left running.

tact divides the CPU the jobs get together; it does not change how much that is. With the
`signals` backend it stops (SIGSTOP) the jobs that are ahead of their share and resumes (SIGCONT)
them when a cycle of S x QUANTUM of the group's CPU time has been used, S being the sum of the
shares. Nothing is left stopped when tact exits, however it exits. At the end tact prints each
job's target and achieved share and its own CPU overhead.

Backends:
  signals   ALPS at user level: unprivileged, exact ratios of consumed CPU (the paper's method)
  cgroup    cpu.shares (cgroup v1) or cpu.weight (v2) in a cgroup tact creates and removes:
            no overhead, work conserving, but weights only act under contention
  auto      cgroup when tact may create cgroups, else signals (the default; tact says which);
            signals whenever --quantum, --basic, --quantized, --no-io, --mode or --user is
            given (--user needs signals: moving a user's processes into tact's cgroup would
            take them out of their own sessions' and services' cgroups)

Modes (signals backend) when the jobs may use several CPUs:
  strict      the paper's rule: consumed CPU in the exact ratio of the shares; CPUs may idle
              while stopped jobs wait (the default on one CPU)
  conserving  shares no single-threaded job can use are capped at one CPU and handed to the
              rest, capped jobs get CPUs of their own, and idle CPUs are lent to stopped jobs
              (the default on two or more CPUs)";

#[derive(Debug, Args)]
pub struct ShareArgs {
    /// A command to start (through `sh -c`) with this many shares. Repeat for several.
    #[arg(
        long = "job",
        value_name = "SHARES=COMMAND",
        allow_hyphen_values = true
    )]
    pub jobs: Vec<String>,
    /// A running process (with its children) to adopt with this many shares. Repeat for several.
    #[arg(long = "pid", value_name = "SHARES=PID", allow_hyphen_values = true)]
    pub pids: Vec<String>,
    /// Every process of USER (a name or a numeric uid) as one principal with this many shares,
    /// rescanned every second, or every quantum when that is longer (signals backend only).
    /// Repeat for several.
    #[arg(long = "user", value_name = "SHARES=USER", allow_hyphen_values = true)]
    pub users: Vec<String>,
    /// Timer period: how often tact looks at the jobs' CPU time. A cycle is the sum of the
    /// shares times this much CPU time; shorter is more even, at more overhead; 100us to 60s
    /// [default: 20ms]. tact looks for new children and notices that the jobs have ended at
    /// the quanta, so a quantum over a second makes both wait up to a quantum.
    #[arg(long, value_name = "DUR", value_parser = quantum)]
    pub quantum: Option<Duration>,
    /// Basic ALPS: read every running job every quantum (the default, optimized ALPS, skips
    /// reads that cannot change a decision).
    #[arg(long)]
    pub basic: bool,
    /// Turn off the blocked-job rule (a job found sleeping is charged one quantum, so that it
    /// cannot hold up the end of a cycle while the others wait).
    #[arg(long)]
    pub no_io: bool,
    /// Decide only at quantum ticks, as the paper does: no checks between ticks, and a full
    /// quantum charged per blocked observation (the default stops a job that runs out between
    /// ticks near the time it does).
    #[arg(long)]
    pub quantized: bool,
    /// How the shares are enforced.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// Create the jobs' cgroups under DIR (a directory of the cpu hierarchy, e.g. a subtree
    /// systemd delegated to you) [default: tact's own cgroup].
    #[arg(long, value_name = "DIR")]
    pub cgroup_parent: Option<PathBuf>,
    /// Strict or conserving division when the jobs may use several CPUs [default: strict on
    /// one CPU, conserving on more].
    #[arg(long, value_enum)]
    pub mode: Option<ShareMode>,
    /// Write one JSON object per cycle (signals) or per second (cgroup) to FILE: each job's CPU
    /// time, entitlement and relative error.
    #[arg(long, value_name = "FILE")]
    pub json_log: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Auto,
    Signals,
    Cgroup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShareMode {
    Strict,
    Conserving,
}

const TICKETS_ABOUT: &str = "\
Give jobs rights to the CPU, the disk and memory through currencies and tickets (Sullivan &
Seltzer's resource management framework, on lottery scheduling's tickets), and enforce them.

The base currency issues tickets to currencies and jobs; a currency issues its own tickets to the
jobs (or currencies) below it. A ticket is worth its issuer's value times its part of the tickets
the issuer has out among the jobs that compete now. So a currency isolates its jobs: whatever
happens inside B (a job sleeping, B issuing more) changes nothing for A's jobs, and a job that
sleeps leaves its part of its currency to its siblings.

An example setup (E1 of the report): A and B each get half of the CPU; A1 gets 1/6, A2 1/3, and
B's jobs split B's half 1:2:3, or 1:2 while B3 sleeps.

  [[currency]]
  name = \"A\"
  funding = [{ from = \"base\", cpu = 1000 }]

  [[currency]]
  name = \"B\"
  funding = [{ from = \"base\", cpu = 1000 }]

  [[job]]
  name = \"A1\"
  command = \"exec ./spin\"               # run through sh -c; covers the whole process tree
  funding = [{ from = \"A\", cpu = 100 }]

  [[job]]
  name = \"A2\"
  command = \"exec ./spin\"
  funding = [{ from = \"A\", cpu = 200 }]

  [[job]]
  name = \"B1\"
  command = \"exec ./spin\"
  funding = [{ from = \"B\", cpu = 100 }]

  [[job]]
  name = \"B2\"
  command = \"exec ./spin\"
  funding = [{ from = \"B\", cpu = 200 }]

  [[job]]
  name = \"B3\"
  command = \"sleep 30; exec ./spin\"
  funding = [{ from = \"B\", cpu = 300 }]

A funding entry has `from` (a currency or \"base\"), one or more of `cpu`, `disk` and `mem` (bytes
or \"512MiB\", \"1375pages\"), and `hard = true` for a hard ticket: a fixed fraction of its issuer
(a floor) instead of a relative share. Several entries pool funding. An optional [base] table
sets the base's hard totals (cpu = 1000, disk = 1000, mem = the reservable memory by default).

Examples:
  tact tickets check setup.toml                  every job's guaranteed rights R* and its share
  tact tickets explain setup.toml A1 --json      A1's funding paths, factor by factor
  sudo tact tickets run setup.toml --duration 60s --json-log run.jsonl

`run` starts every job, then every --interval reads which jobs are runnable, recomputes the rights
and applies them: as cpu.shares (cgroup v1) or cpu.weight (v2), one cgroup per job (--backend
cgroup, the default when tact may create cgroups), or as the shares of `tact share`'s ALPS engine,
which stops and resumes the jobs (--backend signals, unprivileged; its shares are 1 to 20, so
rights are rounded to 1/20 of the largest). It ends when
every job has exited, when --duration has passed (the jobs get SIGTERM, then SIGKILL 5 s later),
or when tact is interrupted; the cgroups are removed and nothing is left stopped. At the end it
prints per job its tickets, its expected share (time-averaged) and the share it achieved.

With --backend cgroup, disk and memory rights are applied too, to the jobs holding tickets of
them: disk weights ∝ rights (blkio.bfq.weight on v1; io.weight, else io.bfq.weight, on v2; BFQ
weights act only on disks using the bfq scheduler, which tact names at the start), and memory
rights in bytes as protection (memory.min on paths hard from the base, else memory.low, on v2;
memory.soft_limit_in_bytes on v1, which is not a floor). The signals backend applies CPU rights
only, and says so.

The daemon (`tact daemon`) holds a live model of the same kind, saved across restarts, which the
other subcommands change and query through its socket (--socket). Who may do what is decided by
each currency's owner, group and mode (f: fund it, c: change or destroy it, i: issue its
tickets), like a file's; a refusal names the permission missing. A root daemon also enforces it:
each attached process gets its own cgroup with CPU and disk weights and memory protection from
its rights, rewritten as clients start and stop competing; an unprivileged daemon applies the
CPU rights of its own user's clients with the share engine of `tact share` (SIGSTOP/SIGCONT duty
cycles; a watchdog resumes them if the daemon dies) and their disk and memory rights not at all;
`show` and `explain` say which (tact daemon --help).

  sudo tact tickets create A --owner $(id -u)    a currency root makes for you, mode fci/---/---
  sudo tact tickets fund A --from base --cpu 1000    prints the ticket (t0); `issue` is the same
  tact tickets attach 4242 --from A --cpu 100    your process 4242 as a client funded by A only
  tact tickets attach 4243                       funded by the default policy (your user:UID)
  tact tickets explain 4242                      its funding paths, R, R* and shares now
  tact tickets show [A] [--json]                 currencies, tickets, clients' rights
  tact tickets set t0 2000; tact tickets unfund t0 (or revoke t0); tact tickets destroy A
  tact tickets offer 4242 --give cpu:100 --want disk:50 [--expires 10m]
  tact tickets accept o3 --pid 4243              4243 takes the other side of offer o3
  tact tickets offers; tact tickets cancel o3 (an offer) or x1 (an exchange); tact tickets detach 4242

Exit status: 0, 1 when the daemon refuses (the message says why), 2 for malformed input.";

const TUNE_EXAMPLES: &str = "\
Examples:
  tact tune -- make                             tact is make's jobserver (a -j is refused)
  tact tune --max 16 -- make -C build all       never more than 16 jobs at once
  tact tune --completions tree -- make          every process below make counts as a job
  tact tune -v --json-log tune.jsonl -- make    print and log every decision
  tact tune --policy static:4 -- make           a fixed count, for comparison
  tact tune --jobserver-style fifo -- cmake --build b    ninja below cmake: a fifo jobserver
  tact tune --bottleneck cpu:0-3 -- make        also watch CPUs 0-3: climb while they have room
  tact tune --bottleneck disk:sda@iops=3000 -- make    a volume provisioned at 3000 IOPS
  tact tune --policy tcc:psi=1 -- make          also back off when memory or the disk stalls
  tact tune --policy tcc:psi=1 --psi-cgroup /sys/fs/cgroup/system.slice/postgresql.service -- ./load
                                                back off when the database's memory or disk stalls
  tact tune --bottleneck net:eth0@1gbit,rx --workers-file /tmp/j -- parallel -j /tmp/j wget -q :::: urls
  tact tune --workers-file /tmp/j -- parallel -j /tmp/j gzip ::: *.log
  tact tune --workers-file /tmp/j --completions file:/tmp/done -- ./crawler --jobs-file /tmp/j
  find . -name '*.log' | tact tune --signals -- xargs -P 1 -n 1 gzip
  tact tune --signals --max 8 -- xargs -a urls -P 2 -n 1 wget -q
  tact tune --signals --signals-start 4 -- ./pool     a program that takes SIGUSR1/SIGUSR2 too
  tact tune --freeze --completions file:/tmp/done -- python3 pool.py    a fixed pool of workers
  tact tune --key kernel -- make -C linux       start from the count the last run settled on
  tact tune --completions wrap -- make SHELL='tact exec-wrap /bin/sh'    every recipe line counts

tact runs the command and keeps adjusting how many jobs it may run at once: it raises the count
while each step still raises the rate at which jobs finish, backs off when it stops paying, and
re-checks now and then (TCC, Tang et al.). It needs no model of the machine: only job
completions.

How the count reaches the program:
  --jobserver         tact is the GNU make jobserver (MAKEFLAGS=-j --jobserver-auth=...): make
                      runs at most COUNT jobs; sub-makes share them (the default). A -j, -jN or
                      --jobs on make's command line would override it and is refused (--max N
                      sets the most jobs)
  --jobserver-style STYLE
                      pipe: inherited descriptors (--jobserver-auth=R,W), which every GNU make
                      reads, but only recipes make takes for sub-makes ($(MAKE), +) inherit.
                      fifo: a named pipe in a private temporary directory, removed when tact
                      exits (--jobserver-auth=fifo:PATH): every process below can open it. For
                      make 4.4 and later, ninja 1.13 and later (it reads no pipe) and cargo;
                      make 4.3 and older stop on it. auto (the default): fifo when the command
                      is ninja, or make/gmake whose --version says GNU Make 4.4 or later (asked
                      on every run), else pipe. Pick fifo for ninja or make 4.4 run through
                      another program (cmake --build, a script)
  --workers-file P    tact writes COUNT to P (atomically) whenever it changes, for programs that
                      re-read such a file, like GNU parallel's -j P
  --signals           tact sends the command's process SIGUSR1 per job more and SIGUSR2 per job
                      fewer, as GNU xargs -P takes them: it starts more commands at once, or
                      fewer as running ones end. tact reads the starting count from xargs's -P
                      (1 without one; -P 0 is refused) or from --signals-start N, and sends the
                      first signals as soon as the command has handlers for both. The command
                      must be xargs itself (or exec it), not a shell running it. xargs gets
                      them only while it waits for a command to end: one that interrupts its
                      read of a pipe ends its input (GNU xargs takes it for an error)
  --freeze            for a fixed pool of long-lived workers (multiprocessing.Pool, gunicorn
                      -w): tact keeps COUNT workers running and stops the rest (SIGSTOP),
                      continuing them (SIGCONT) as COUNT rises. Workers are the children of the
                      command's process or, below wrappers (processes with one child), of the
                      first with several (--freeze-depth N: N levels down); COUNT never
                      exceeds how many there were once the pool settled. tact freezes workers
                      between tasks (blocked, CPU clock still), running ones mid-task only
                      after --freeze-wait (1s), and swaps those back in soon. Frozen workers
                      are continued on any exit (by the guard if tact is killed) and before a
                      signal is passed on. Needs --completions file:PATH, tree or wrap; -v and
                      --json-log show how many are frozen

What counts as a finished job (--completions):
  children            a process the command started exits (make's recipes, parallel's jobs;
                      the default). A sub-make (a child named make or gmake, or a shell running
                      one) is no job: its own children count instead
  tree                any process below the command exits (recursive builds, scripts)
  file:PATH           the last number in PATH, a counter the program keeps
  wrap                a job run through `tact exec-wrap` reports its end (see `tact exec-wrap
                      --help`): every job counts however short, with its exact latency, and
                      the jobs in flight are those started and not ended. tact tells the
                      wrappers where it listens in $TACT_TUNE_SOCKET
The other sources look at the processes every few milliseconds: a job that starts and ends
between two looks is missed, and its latency is known only to a look.

When to use --bottleneck: by throughput alone TCC stops where one more step gains less than q
(14%), which on a gently bending curve leaves the bottleneck at 75-85%. If you know what the jobs
saturate, name it: TCC then goes on while it is below 90% busy (tcc:util=0.9). Name a resource
the jobs do saturate: with one that never fills up, TCC climbs for as long as throughput rises
at all. The sources, read on the controller's ticks (--tick), at most every 100 ms:
  cpu:LIST            busy fraction of those CPUs (cpu:1, cpu:0,2-3): jobs bound to a CPU set
  psi:cpu|io|memory   fraction of time some task waited for it (/proc/pressure): when you cannot
                      name the CPUs or the device
  disk:DEV            the device's busy time (/proc/diskstats io_ticks over wall time; DEV is
                      vda, /dev/sda2 or a path on it): a disk that serves one request at a time
                      (a spinning disk); an SSD or a cloud volume reads 100% long before it is full
  disk:DEV@iops=N     reads and writes completed per second over N: a device capped at N IOPS
                      (a cloud volume's provisioned IOPS, a cgroup's io.max), which io_ticks
                      cannot see; riops=N counts reads only, wiops=N writes only (io.max's keys)
  net:IF@RATE         bits IF sends per second over RATE (tc's units: 50mbit, 1gbit): the egress
                      of a link capped at RATE (a shaper, a provider's plan), e.g. a server's
                      replies or an upload
  net:IF@RATE,rx      bits IF receives over RATE: the ingress, e.g. a crawler downloading
A RATE or N below what the link or device really does shows as readings above 100% (tact warns
after 10 readings in a row above 120%): the hint then never fires. --json-log records every
reading. Once the count holds, a bottleneck that had room and now reads above 97%
(tcc:saturated=0.97) starts a new round of measuring: something else is using it.

PSI (--policy tcc:psi=1): tact reads /proc/pressure/{memory,io} every second, or with
--psi-cgroup DIR the cgroup v2 directory's memory.pressure and io.pressure. A step up during
which memory or io \"full\" stalls exceed 5% (psi_full=0.05) is undone, and memory \"some\" stalls
above 10% (psi_some=0.1) during the steady state start a new round of measuring, from a lower
count. PSI never raises the count. Off by default: /proc/pressure's figures are the whole
machine's, so other programs' stalls cut the count too. When the bottleneck's processes (a
database, a service the jobs call) or the command itself run in a cgroup of their own, name its
directory with --psi-cgroup: then only their stalls count. cgroup v1 has no pressure files; on
a hybrid machine take the same cgroup in the unified hierarchy (/sys/fs/cgroup/unified/...),
whose directories have them even with no controllers enabled. The start line says where PSI is
read. Without /proc/pressure tact says so and goes on without; a DIR that cannot be read stops
tact before the command starts.

Warm start (--key NAME): tact records the count TCC settles on in
$XDG_STATE_HOME/tact/tune/NAME.json (root without it: /var/lib/tact/tune; else
~/.local/state/tact/tune), and the next run with that key starts its first cycle from it
instead of climbing from --init. Name the workload, not the command: the same make in two trees
settles on different counts. A damaged record is reported and ignored.

Several instances on one bottleneck (--coordinate KEY): two tact tune runs (or tact pools) that
feed the same service or disk each take the other's steps for noise, and whichever climbed first
keeps the larger share. Give them the same KEY and they take turns measuring: the others hold
their counts meanwhile. --coordinate-mode turns (the default): one at a time, through a lock on
LOCKDIR/KEY.lock (LOCKDIR: $TACT_RUNTIME_DIR/tune when set, else /run/tact/tune for root, else
$XDG_RUNTIME_DIR/tact/tune, else /tmp/tact-UID/tune; the kernel drops the lock when tact exits
or dies). In tact's simulator of 2, 3 and 4 instances, turns kept them fair and the bottleneck
85-95% busy, and their counts added up to at most 1.25-1.67x what one alone settles on.
--coordinate-mode epoch: no lock; a round that comes due waits for the next multiple of --epoch
(60s) on the real-time clock, so the instances measure together rather than queue for turns.
Each then takes the others' steps into its own samples: in the simulator 3 and 4 instances
were as fair, but their counts added up to 1.5-2.67x, and 4 kept the bottleneck above 95%.
-v and --json-log show each wait, grant and release; the summary line counts the turns and the
time spent waiting for them.

tact passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to every process of the command, its
children included (a Ctrl-C only to those outside the terminal's process group, which had it
already), and exits with the command's status.";

#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("actuator").args(["jobserver", "workers_file", "signals", "freeze"])
))]
pub struct TuneArgs {
    /// Be the GNU make jobserver of the command (the default).
    #[arg(long)]
    pub jobserver: bool,
    /// How the command finds the jobserver, as make's own option: pipe (inherited descriptors,
    /// which every GNU make reads), fifo (a named pipe, for make 4.4 and later, ninja 1.13 and
    /// later; make 4.3 stops on it) or auto (fifo for ninja, which reads nothing else, and for
    /// a make or gmake whose --version says GNU Make 4.4 or later; pipe for any other command).
    #[arg(long, value_enum, value_name = "STYLE", default_value_t = crate::tune::JobserverStyle::Auto,
          conflicts_with_all = ["workers_file", "signals", "freeze"])]
    pub jobserver_style: crate::tune::JobserverStyle,
    /// Write the count of jobs to PATH whenever it changes, for programs that re-read it.
    #[arg(long, value_name = "PATH")]
    pub workers_file: Option<PathBuf>,
    /// Send the command SIGUSR1 for each job more and SIGUSR2 for each job fewer, as GNU xargs
    /// -P takes them (findutils 4.6 or later).
    #[arg(long)]
    pub signals: bool,
    /// With --signals: how many jobs the command runs at once when it starts [default: xargs's
    /// own -P; required for other programs].
    #[arg(long, value_name = "N", requires = "signals",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub signals_start: Option<u32>,
    /// The command runs a fixed pool of long-lived workers: keep the count of them running and
    /// stop the rest (SIGSTOP), between tasks where tact can tell, continuing them (SIGCONT) as
    /// the count rises. Needs --completions file:PATH, tree or wrap: a worker's exit is no task.
    #[arg(long)]
    pub freeze: bool,
    /// With --freeze: the workers are the processes N levels below the command's [default: 1,
    /// plus 1 for each process from the command's down that has exactly one child (a wrapper)].
    #[arg(long, value_name = "N", requires = "freeze",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub freeze_depth: Option<u32>,
    /// With --freeze: how long surplus workers may run on while none is between tasks, before
    /// tact freezes running ones, mid-task (their task waits until they are continued).
    #[arg(long, value_name = "DUR", default_value = "1s", requires = "freeze",
          value_parser = positive_duration)]
    pub freeze_wait: Duration,
    /// Most jobs at once [default: 4 x the CPUs tact may run on (its affinity, a cgroup CPU
    /// quota), at least 8; with --freeze, the pool's workers, which it never exceeds].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max: Option<u32>,
    /// Jobs at once to start with [default: the CPUs tact may run on, at most --max; with
    /// --freeze, --max].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub init: Option<u32>,
    /// The controller: tcc, tcc:KEY=VALUE,... (e.g. tcc:q=0.05, tcc:psi=1; the keys are
    /// listed in docs/tune.md, "Parameters and validation"), static:N, aimd, vegas,
    /// gradient2, envoy (these three judge by job latency: a job's lifetime as tact saw it),
    /// hill (.NET's hill climbing, by the rate of finished jobs), vegas+ (the paper's Vegas+:
    /// rate of finished jobs against the shortest job lifetime) and vegas++:x1=RATE (Vegas++,
    /// with RATE jobs/s finished by one worker, measured beforehand).
    #[arg(long, value_name = "SPEC", default_value = "tcc")]
    pub policy: String,
    /// With --policy tcc:psi=1: read PSI from this cgroup v2 directory's memory.pressure and
    /// io.pressure instead of the machine's /proc/pressure, so that only the stalls of the
    /// processes in it count (the bottleneck's, or the command's own).
    #[arg(long, value_name = "DIR")]
    pub psi_cgroup: Option<PathBuf>,
    /// The workload's name: the count TCC settles on is recorded under it, and the next run
    /// with the same key starts from it (TCC's warm start) [default: none, a cold start].
    #[arg(long, value_name = "NAME", value_parser = crate::tune::parse_key)]
    pub key: Option<String>,
    /// What counts as a finished job: children, tree, file:PATH, or wrap (jobs run through
    /// `tact exec-wrap` report their own end).
    #[arg(long, value_name = "SRC", default_value = "children",
          value_parser = crate::tune::completions::parse_counting)]
    pub completions: crate::tune::completions::Counting,
    /// How often the controller's timers run.
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = positive_duration)]
    pub tick: Duration,
    /// Write one JSON object per change of the count, per controller decision and per
    /// --bottleneck reading to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_log: Option<PathBuf>,
    /// The resource the jobs saturate, read every 100 ms for TCC's bottleneck hint: cpu:LIST
    /// (busy fraction of those CPUs), psi:cpu|io|memory (time some task waited for it),
    /// disk:DEV (the device's busy time), disk:DEV@iops=N (its I/Os per second over a cap of
    /// N; riops, wiops), net:IF@RATE (bits IF sends per second over RATE, e.g. 50mbit: its
    /// egress) or net:IF@RATE,rx (what it receives). While it stays below tcc's util (0.9), a
    /// step that gains less than q still counts, so TCC reaches 85-95% utilization where
    /// throughput alone stops early; a bottleneck someone else also saturates reads ~100% and
    /// leaves the paper's rule as is. When to use which: below.
    #[arg(long, value_name = "SRC", value_parser = crate::tune::bottleneck::parse_bottleneck)]
    pub bottleneck: Option<crate::tune::bottleneck::BottleneckSpec>,
    /// Take turns with the other `tact tune` runs and tact pools that name the same bottleneck
    /// KEY (e.g. db-5432): TCC starts a new round of measuring only when it has the turn, so
    /// that they do not mistake each other's steps for their own and split it fairly. KEY is a
    /// file name in the lock directory (no '/'). When to use which mode: below.
    #[arg(long, value_name = "KEY", value_parser = crate::tune::parse_coordinate_key)]
    pub coordinate: Option<String>,
    /// With --coordinate: turns (one instance measures at a time) or epoch (every instance
    /// that has a round due starts it at the next multiple of --epoch on the clock, without
    /// queueing for a turn). When to use which: below.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = crate::tune::TurnMode::Turns,
          requires = "coordinate")]
    pub coordinate_mode: crate::tune::TurnMode,
    /// With --coordinate-mode epoch: the period of the shared epochs [default: 60s].
    #[arg(long, value_name = "DUR", requires = "coordinate", value_parser = positive_duration)]
    pub epoch: Option<Duration>,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

const EXEC_WRAP_EXAMPLES: &str = "\
Examples:
  tact tune --completions wrap -- make SHELL='tact exec-wrap /bin/sh'
  find . -name '*.log' | tact tune --signals --completions wrap -- xargs -P 1 -n 1 tact exec-wrap -- gzip
  tact tune --workers-file /tmp/j --completions wrap -- parallel -j /tmp/j tact exec-wrap -- gzip ::: *.log

Below `tact tune --completions wrap`, which names its socket in $TACT_TUNE_SOCKET, exec-wrap tells
tact when PROG starts and when it ends, with its exact run time and exit status: tact counts every
job, however short, and the jobs in flight. Reporting never holds the job up: a report tact cannot
take at once is dropped. Elsewhere exec-wrap simply execs PROG (-v says so on stderr).

exec-wrap exits with PROG's status (128+n when signal n killed it), and passes SIGTERM, SIGINT,
SIGHUP and SIGQUIT on to PROG (not a Ctrl-C: the terminal sent PROG that one already).

As make's shell: GNU make splits a SHELL of several words and runs $(SHELL) $(.SHELLFLAGS) LINE,
here `tact exec-wrap /bin/sh -c LINE`, so every recipe line is one job, and so is every
$(shell ...) call. Give tact's full path unless make finds it in $PATH. A SHELL given on make's
command line reaches sub-makes (through MAKEFLAGS): their lines are jobs too, as is each sub-make.
Under .ONESHELL make 4.3 takes SHELL for one program's name: point it at a script that runs
`exec tact exec-wrap /bin/sh \"$@\"`.";

#[derive(Debug, Args)]
pub struct ExecWrapArgs {
    /// The program to run and its arguments (`--` first, unless PROG is a path such as /bin/sh).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROG"
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TicketsArgs {
    #[command(subcommand)]
    pub command: TicketsCommand,
}

#[derive(Debug, Subcommand)]
pub enum TicketsCommand {
    /// Check a setup file; print every job's guaranteed rights R*, its share and its tickets.
    Check {
        /// The setup file (TOML; see `tact tickets --help`).
        setup: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print funding paths from the base, factor by factor: of an attached process (PID, from the
    /// daemon), or of a setup file's job (SETUP JOB).
    Explain {
        /// An attached process's pid, or a setup file followed by a job's name.
        #[arg(value_name = "PID|SETUP")]
        target: String,
        /// The job's name, after a setup file.
        job: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Start the setup's jobs and enforce their rights until they exit (CPU, disk and memory
    /// with cgroups; CPU only with signals).
    Run(TicketsRunArgs),
    /// Create a currency in the daemon's model (owned by you unless --owner/--group say).
    Create {
        /// Its name: no ':' or whitespace (user:UID and pid:PID name the policy's currencies).
        name: String,
        /// The owner's uid [default: yours]; creating one for another uid needs root.
        #[arg(long, value_name = "UID")]
        owner: Option<u32>,
        /// The group's gid [default: your primary group]; it must be one of yours.
        #[arg(long, value_name = "GID")]
        group: Option<u32>,
        /// Who may fund (f), change (c) and issue (i): owner/group/other triplets.
        #[arg(long, value_name = "MODE", default_value = "fci/---/---",
              value_parser = clap::value_parser!(tact_core::tickets::Mode))]
        mode: tact_core::tickets::Mode,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Destroy a currency (c on it); the tickets it issued and holds go with it.
    Destroy {
        /// The currency's name.
        currency: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Fund HOLDER with ISSUER's tickets (f on HOLDER, i on ISSUER); prints the new ticket.
    #[command(visible_alias = "issue")]
    #[command(group(clap::ArgGroup::new("amount").required(true).args(["cpu", "disk", "mem"])))]
    Fund {
        /// The currency (or pid:PID, user:UID) to fund.
        holder: String,
        /// The currency that issues the ticket: base, a name, user:UID or pid:PID.
        #[arg(long, value_name = "ISSUER")]
        from: String,
        /// A CPU ticket of N.
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        cpu: Option<i64>,
        /// A disk ticket of N.
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        disk: Option<i64>,
        /// A memory ticket of SIZE: bytes, or KiB, MiB, GiB, TiB, pages (`512MiB`, `1375pages`).
        #[arg(long, value_name = "SIZE")]
        mem: Option<String>,
        /// A hard ticket: a fixed fraction of the issuer's hard total (a floor), not a relative
        /// share.
        #[arg(long)]
        hard: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Take a ticket away from its holder (c on the holder, or i on the issuer).
    #[command(visible_alias = "revoke")]
    Unfund {
        /// The ticket, as `fund` printed it (`t12`).
        ticket: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Resize a ticket (i on its issuer).
    Set {
        /// The ticket (`t12`).
        ticket: String,
        /// Its new amount (a SIZE for a memory ticket).
        amount: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Print the daemon's currencies (value, active amount, tickets issued and held) and its
    /// attached processes (R, R*, share).
    Show {
        /// Only this currency (and the processes it funds).
        currency: Option<String>,
        /// Print JSON (the daemon's reply) instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Make a process of yours a client: funded by the default policy from your user currency,
    /// or with --from only by the amounts given.
    #[command(group(clap::ArgGroup::new("amounts").multiple(true).args(["cpu", "disk", "mem"])))]
    Attach {
        /// The process (yours; root may attach anyone's).
        pid: i32,
        /// The currency that funds it instead of the policy (i on it needed).
        #[arg(long, value_name = "CURRENCY", requires = "amounts")]
        from: Option<String>,
        /// CPU tickets of --from.
        #[arg(
            long,
            value_name = "N",
            requires = "from",
            allow_negative_numbers = true
        )]
        cpu: Option<i64>,
        /// Disk tickets of --from.
        #[arg(
            long,
            value_name = "N",
            requires = "from",
            allow_negative_numbers = true
        )]
        disk: Option<i64>,
        /// Memory tickets of --from: bytes, or KiB, MiB, GiB, TiB, pages.
        #[arg(long, value_name = "SIZE", requires = "from")]
        mem: Option<String>,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Stop treating a process as a client: its currency, offers and exchanges go.
    Detach {
        /// The attached process.
        pid: i32,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Offer to trade some of a process's rights to one resource for another's at the dealer;
    /// prints whether it was exchanged at once or queued (with conflicting offers).
    Offer {
        /// The attached process of yours whose rights are offered.
        pid: i32,
        /// What it gives: RESOURCE:AMOUNT (`cpu:100`, `mem:64MiB`).
        #[arg(long, value_name = "RES:N")]
        give: String,
        /// What it wants in return: RESOURCE:AMOUNT.
        #[arg(long, value_name = "RES:N")]
        want: String,
        /// Withdraw the offer if unmatched after this long.
        #[arg(long, value_name = "DUR", value_parser = positive_duration)]
        expires: Option<Duration>,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Accept a queued offer: PID gives what the offer wants and gets what it gives (the mirror
    /// offer, which the dealer matches at once); prints the exchange now in force.
    Accept {
        /// The offer, as `offers` lists it (`o3`).
        #[arg(value_name = "OFFER")]
        offer: String,
        /// The process of yours that takes the other side.
        #[arg(long)]
        pid: i32,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// List the queued offers and the exchanges in force.
    Offers {
        /// Print JSON (the daemon's reply) instead of tables.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Withdraw a queued offer (`o3`) or undo an exchange in force (`x2`).
    Cancel {
        /// The offer (`o3`) or exchange (`x2`), as `offers` lists it.
        #[arg(value_name = "OFFER|EXCHANGE")]
        id: String,
        #[command(flatten)]
        socket: SocketArg,
    },
}

/// `--socket`, for the commands that ask the daemon.
#[derive(Debug, Args)]
pub struct SocketArg {
    /// The daemon's socket [default: $TACT_SOCKET, else the user's daemon, else the system's].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TicketsRunArgs {
    /// The setup file.
    pub setup: PathBuf,
    /// How the rights are enforced: cgroup weights (needs root or a delegated cgroup), signals
    /// (ALPS duty cycles of SIGSTOP/SIGCONT, unprivileged), or auto (cgroup when tact may create
    /// cgroups, else signals).
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// How often tact reads which jobs compete and rewrites the weights.
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = positive_duration)]
    pub interval: Duration,
    /// Stop the jobs after this long (SIGTERM, then SIGKILL 5 s later) [default: run until every
    /// job has exited].
    #[arg(long, value_name = "DUR", value_parser = positive_duration)]
    pub duration: Option<Duration>,
    /// Write one JSON object per interval to FILE (each job's activity, rights, expected share,
    /// weight and CPU time), then a summary object.
    #[arg(long, value_name = "FILE")]
    pub json_log: Option<PathBuf>,
    /// Create the jobs' cgroups under DIR (a directory of the cpu hierarchy) [default: tact's
    /// own cgroup].
    #[arg(long, value_name = "DIR")]
    pub cgroup_parent: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Socket to listen on [default: $TACT_SOCKET, else /run/tact/daemon.sock for root,
    /// $XDG_RUNTIME_DIR/tact/daemon.sock for other users].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (a loopback address: 127.0.0.1:PORT).
    #[arg(long, value_name = "ADDR", value_parser = crate::daemon::metrics::loopback_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// A job holding the turn that neither releases nor reports for this long is presumed hung
    /// and loses it; so does one that keeps it this long after hearing that another job waits.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = positive_duration)]
    pub lease: Duration,
    /// Where the tickets model (`tact tickets create|fund|attach|...`) is kept across restarts
    /// [default: /var/lib/tact/tickets.json for root, $XDG_STATE_HOME/tact/tickets.json for
    /// other users].
    #[arg(long, value_name = "FILE")]
    pub tickets_state: Option<PathBuf>,
    /// The initial tickets model, used only while the state file does not exist yet: `[base]`
    /// and `[[currency]]` tables in the syntax of `tact tickets run` setups (no `[[job]]`: attach
    /// running processes instead). A bad file stops the daemon (status 2).
    #[arg(long, value_name = "FILE")]
    pub tickets_setup: Option<PathBuf>,
    /// As root, the daemon enforces the rights of attached processes with cgroup knobs: each is
    /// moved into its own cgroup NAME/pidPID (in the daemon's own cgroup, or --cgroup-parent, of
    /// the cpu, memory and blkio/io hierarchies) with CPU and disk weights ∝ its rights and its memory rights as
    /// protection, rewritten as clients start and stop competing (every 100 ms). The cgroups
    /// exist while clients are attached and are removed at exit, clients moved back. What a
    /// SIGKILLed daemon leaves is removed by the next one once empty (a restarted daemon moves
    /// its clients into its own cgroups) [default: tact-tickets-PID].
    #[arg(long, value_name = "NAME", value_parser = cgroup_name)]
    pub tickets_cgroup: Option<String>,
    /// Make the NAME tree under DIR, a directory of the cpu hierarchy, instead of in the
    /// daemon's own cgroup. On cgroup v2 the kernel gives the children of a cgroup that holds
    /// processes no controllers (but the root's), so a daemon in a service's or a session's
    /// cgroup needs an empty one here, e.g. /sys/fs/cgroup/tact-clients made before it starts
    /// (docs/tickets.md, "Running the daemon") [default: the daemon's own cgroup].
    #[arg(long, value_name = "DIR")]
    pub cgroup_parent: Option<PathBuf>,
    /// Serve the tickets model without applying it. By default a root daemon applies it with
    /// cgroup knobs (--tickets-cgroup), and an unprivileged daemon applies the CPU rights of its
    /// own user's attached processes with the share engine of `tact share` (SIGSTOP/SIGCONT duty
    /// cycles, ALPS shares 1-20 ∝ rights, retuned every 100 ms; a watchdog resumes them if the
    /// daemon dies); without root, disk and memory rights are not applied.
    #[arg(long)]
    pub no_tickets_enforce: bool,
}

/// A cgroup directory name: one path component of letters, digits, `-`, `_`, `.` and `@`.
fn cgroup_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err("a cgroup name is one path component of letters, digits, -, _, . and @".into())
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON (the daemon's `status` reply) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The daemon's socket [default: $TACT_SOCKET, else the user's daemon, else the system's].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

const DAEMON_EXAMPLES: &str = "\
Examples:
  tact daemon                                  one daemon for this user's jobs
  sudo tact daemon                             one for the whole machine (/run/tact/daemon.sock)
  tact daemon --metrics 127.0.0.1:9477         also export Prometheus metrics
  TACT_SOCKET=/tmp/t.sock tact daemon          a separate instance; jobs find it through the variable

Jobs register with a daemon that runs when they start, and run alone when none does (a daemon
started later takes the jobs that start after it). `tact status` shows them.";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seconds of foreground work per scenario.
    #[arg(long, value_name = "DUR", default_value = "8s", value_parser = positive_duration)]
    pub length: Duration,
    /// Directory for the demo's scratch files [default: a temporary directory].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Which built-in workload.
    pub kind: String,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// A human duration such as `200ms`, `30s`, `1h` (zero allowed).
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. 200ms, 30s, 5m"))
}

/// `--peek`: a positive duration, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peek {
    Off,
    Every(Duration),
}

fn peek(s: &str) -> Result<Peek, String> {
    match s.trim() {
        "off" | "none" => Ok(Peek::Off),
        other => positive_duration(other)
            .map(Peek::Every)
            .map_err(|e| format!("{e}, or `off`")),
    }
}

/// `tact share --quantum`: a duration within what the share engine takes.
fn quantum(s: &str) -> Result<Duration, String> {
    use tact_core::share::{MAX_QUANTUM_NS, MIN_QUANTUM_NS};
    let d = duration(s)?;
    let range = Duration::from_nanos(MIN_QUANTUM_NS)..=Duration::from_nanos(MAX_QUANTUM_NS);
    if range.contains(&d) {
        Ok(d)
    } else {
        Err(format!("`{s}` is outside 100us..60s"))
    }
}

/// A human duration that must be greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("`{s}` must be greater than zero")),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(positive_duration("200ms"), Ok(Duration::from_millis(200)));
        assert!(positive_duration("0s")
            .unwrap_err()
            .contains("greater than zero"));
        assert!(positive_duration("-1s")
            .unwrap_err()
            .contains("not a duration"));
        assert!(positive_duration("fast").is_err());
        assert_eq!(duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn exec_wrap_takes_make_shell_arguments_as_they_come() {
        let parse = |argv: &[&str]| {
            let cli = Cli::try_parse_from(argv).unwrap();
            let Command::ExecWrap(w) = cli.command else {
                panic!("{argv:?}")
            };
            w.command
        };
        // make runs `$(SHELL) $(.SHELLFLAGS) LINE`.
        assert_eq!(
            parse(&["tact", "exec-wrap", "/bin/sh", "-c", "cc -v x.c"]),
            vec!["/bin/sh", "-c", "cc -v x.c"]
        );
        assert_eq!(
            parse(&["tact", "exec-wrap", "/bin/sh", "-v", "-h", "x"]),
            vec!["/bin/sh", "-v", "-h", "x"]
        );
        assert_eq!(
            parse(&["tact", "-v", "exec-wrap", "--", "gzip", "-9", "a"]),
            vec!["gzip", "-9", "a"]
        );
    }

    #[test]
    fn run_takes_the_command_after_the_dashes() {
        let cli =
            Cli::try_parse_from(["tact", "run", "--progress", "cpu", "--", "ls", "-l"]).unwrap();
        let Command::Run(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.command, vec!["ls", "-l"]);
        assert_eq!(r.polite.progress, vec!["cpu"]);
        assert_eq!(r.polite.testpoint, Duration::from_millis(200));
    }
}
