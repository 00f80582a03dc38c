//! Command-line interface: what the user types, with help that teaches.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "Let background work use what important work leaves idle.";

const LONG_ABOUT: &str = "\
Let background work use what important work leaves idle.

tact watches a low-importance job's own progress (bytes it reads and writes, CPU time, or a counter
it keeps) and suspends it whenever that progress slows down, which is the sign that it is competing
with something more important for a disk, the CPU or memory. The target rate is calibrated
automatically; nothing needs tuning. This is MS Manners / BeNice (Douceur & Bolosky, SOSP 1999).";

const RUN_EXAMPLES: &str = "\
Examples:
  tact run -- tar -cf - /home | zstd -o /backup/home.tar.zst      (wrong: the pipe is the shell's)
  tact run -- sh -c 'tar -cf - /home | zstd -o /backup/home.tar.zst'
  tact run --progress cpu -- make -j2                               regulate on CPU time
  tact run --progress file:/tmp/done.count -- ./indexer             a counter the program writes
  tact run --probation 0 --json-log trace.jsonl -- rsync -a src/ dst/

Progress sources (--progress, repeat it for a job with several metrics):
  io          bytes read + written by the job's processes (rchar + wchar; the default)
  io-read     bytes read
  io-write    bytes written
  io-storage  bytes that reached the block layer (read_bytes + write_bytes)
  cpu         CPU time of the job's processes, in nanoseconds
  file:PATH   the last number in PATH, a counter the program keeps up to date";

const ATTACH_EXAMPLES: &str = "\
Examples:
  tact attach 12345                       regulate pid 12345 and its children on io progress
  tact attach --progress cpu $(pgrep -n updatedb)

Interrupt tact (Ctrl-C) to stop regulating: the process is left running.";

#[derive(Debug, Parser)]
#[command(name = "tact", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    /// Print each testpoint's verdict on stderr.
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
    /// Resume processes that a crashed tact left stopped (also done at the start of every command).
    Recover,
    /// Hand out the machine-wide run turn, so that regulated jobs run one at a time.
    #[command(after_help = DAEMON_EXAMPLES)]
    Daemon(DaemonArgs),
    /// Show the jobs registered with the daemon: state, progress against target, duty cycle.
    Status(StatusArgs),
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
    /// Process to regulate, with every child it has or starts later.
    pub pid: i32,
}

#[derive(Debug, Args)]
pub struct PoliteArgs {
    /// Regulate by progress (MS Manners); the only mode so far, and the default.
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
    /// Sign-test false-alarm level: lower reacts slower but suspends less by mistake.
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    pub alpha: f64,
    /// Sign-test miss level: higher resumes sooner after contention ends.
    #[arg(long, value_name = "B", default_value_t = 0.2)]
    pub beta: f64,
    /// Testpoints of unregulated running that calibrate the first target (when none is saved).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub bootstrap: u32,
    /// After calibrating, cap the job at 25% of the time for this long, in case calibration ran
    /// under load. Default: 10m, or none when the machine was quiet or a saved target exists.
    #[arg(long, value_name = "DUR", value_parser = duration)]
    pub probation: Option<Duration>,
    /// Where calibrated targets persist between runs [default: $XDG_STATE_HOME/tact].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Name under which the target is saved [default: derived from the program and --progress].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Write one JSON object per testpoint to FILE.
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
    /// and loses it.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = positive_duration)]
    pub lease: Duration,
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

Jobs register when a daemon runs and run alone when none does. `tact status` shows them.";

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
