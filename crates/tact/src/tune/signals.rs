//! `--signals`: the count reaches the program as signals to its process, SIGUSR1 for one job
//! more and SIGUSR2 for one fewer, which is how GNU xargs -P (findutils 4.6 and later) takes
//! them: it starts more commands at once, or fewer as running ones end (never below 1).
//!
//! Standard signals do not queue: a SIGUSR1 sent while another is still pending merges with
//! it (a burst of five raised xargs by 1 and by 2 in two runs of three here, `tune.md`). So
//! tact sends the next signal only once `/proc/PID/status` shows neither pending (SigPnd,
//! ShdPnd): the program has taken the last one, and a later one is a new delivery. A signal
//! that arrives while the program's handler for the previous one runs is held pending by the
//! kernel and delivered after it, so it is not lost either.
//!
//! GNU xargs (4.9) installs its handlers without SA_RESTART and takes a read of its input that
//! a signal interrupts for the end of its input: it runs no further commands and exits 1
//! ("error closing file"). Such a read blocks only on a pipe or terminal that has no data yet.
//! So xargs gets a signal only while it is blocked waiting for a job to end (wait4 or waitid in
//! `/proc/PID/syscall`), which it leaves only when a job ends; there the interruption is what
//! it expects. It waits there whenever it runs as many jobs as it may and has input; starved
//! of input, it takes the change once input comes and it fills its slots again.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::probe::proc::SignalMasks;
use tact_linux::ProcReader;

/// The signals that carry the count: one more, one fewer.
const BOTH: [i32; 2] = [libc::SIGUSR1, libc::SIGUSR2];

/// How soon the loop looks again while signals are owed: a program takes a signal as soon as
/// it is scheduled, so a step of several costs a few milliseconds each at most.
pub const RETRY: Duration = Duration::from_millis(1);

/// How long the program may go without handlers for both signals before tact says it waits.
const PATIENCE: Duration = Duration::from_secs(2);

/// How the command takes the signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receiver {
    /// The count it runs at its start.
    pub start: usize,
    /// It is GNU xargs: signal it only while it waits for a job to end (see the module's doc).
    pub xargs: bool,
}

/// What `--signals` needs to know of the command: the count it starts with, xargs's own `-P`
/// (1 without one) when the command is xargs, else `--signals-start`, which must then be
/// given. Both given must agree.
pub fn receiver(command: &[String], given: Option<u32>) -> Result<Receiver> {
    let (cmd, args) = command.split_first().expect("clap requires a command");
    let is_xargs = Path::new(cmd).file_name().is_some_and(|n| n == "xargs");
    let start = match (is_xargs, given) {
        (true, given) => {
            let procs = match xargs_procs(args) {
                None => 1,
                Some(value) => parse_procs(value)?,
            };
            if let Some(given) = given.filter(|&g| g != procs) {
                bail!("--signals-start {given} disagrees with xargs's -P {procs}");
            }
            procs
        }
        (false, Some(given)) => given,
        (false, None) => bail!(
            "--signals: tact reads the starting count from xargs's -P only; say how many jobs \
             {cmd} runs at once when it starts with --signals-start N"
        ),
    };
    Ok(Receiver {
        start: start as usize,
        xargs: is_xargs,
    })
}

fn parse_procs(value: &str) -> Result<u32> {
    match value.trim().parse::<u32>() {
        Ok(0) => bail!(
            "--signals: xargs -P 0 runs as many commands at once as it can, so signals cannot \
             set its count; give it -P 1 (tact brings it to its own count at once)"
        ),
        Ok(n) => Ok(n),
        Err(_) => bail!("--signals: xargs's -P `{value}` is not a number of processes"),
    }
}

/// Whether a long option takes an argument, as getopt_long sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HasArg {
    No,
    Required,
    /// Only as `--name=VALUE`.
    Optional,
}

/// GNU xargs 4.9's long options.
const LONG_OPTIONS: [(&str, HasArg); 18] = [
    ("null", HasArg::No),
    ("arg-file", HasArg::Required),
    ("delimiter", HasArg::Required),
    ("eof", HasArg::Optional),
    ("replace", HasArg::Optional),
    ("max-lines", HasArg::Optional),
    ("max-args", HasArg::Required),
    ("open-tty", HasArg::No),
    ("interactive", HasArg::No),
    ("no-run-if-empty", HasArg::No),
    ("max-chars", HasArg::Required),
    ("verbose", HasArg::No),
    ("show-limits", HasArg::No),
    ("exit", HasArg::No),
    ("max-procs", HasArg::Required),
    ("process-slot-var", HasArg::Required),
    ("version", HasArg::No),
    ("help", HasArg::No),
];

/// Short options with a required argument, and with an optional one (attached only), from
/// xargs's getopt string `+0a:E:e::i::I:l::L:n:oprs:txP:d:`.
const SHORT_REQUIRED: &str = "aEILnsPd";
const SHORT_OPTIONAL: &str = "eil";

/// The value of xargs's last `-P N`, `-PN`, `--max-procs=N` or `--max-procs N` (or an
/// unambiguous abbreviation, which getopt_long accepts), read as xargs reads its arguments:
/// options end at `--` or at the first operand (the leading `+` of its getopt string), which
/// begins the command xargs runs, whose own `-P` is not xargs's.
fn xargs_procs(args: &[String]) -> Option<&str> {
    let mut procs = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            // An unknown or ambiguous option: xargs refuses it and runs nothing.
            let Some((full, has_arg)) = long_option(name) else {
                continue;
            };
            let value = match has_arg {
                HasArg::Required => inline.or_else(|| words.next().map(String::as_str)),
                HasArg::Optional | HasArg::No => inline,
            };
            if full == "max-procs" {
                procs = value;
            }
        } else if let Some(flags) = word.strip_prefix('-').filter(|f| !f.is_empty()) {
            for (at, flag) in flags.char_indices() {
                let rest = &flags[at + flag.len_utf8()..];
                if SHORT_REQUIRED.contains(flag) {
                    let value = if rest.is_empty() {
                        words.next().map(String::as_str)
                    } else {
                        Some(rest)
                    };
                    if flag == 'P' {
                        procs = value;
                    }
                    break;
                }
                if SHORT_OPTIONAL.contains(flag) {
                    break; // the rest of the word is its argument
                }
            }
        } else {
            break;
        }
    }
    procs
}

/// The long option `name` names: exactly, or as the one option it abbreviates.
fn long_option(name: &str) -> Option<(&'static str, HasArg)> {
    if let Some(exact) = LONG_OPTIONS.iter().find(|(n, _)| *n == name) {
        return Some(*exact);
    }
    let mut prefixed = LONG_OPTIONS.iter().filter(|(n, _)| n.starts_with(name));
    match (prefixed.next(), prefixed.next()) {
        (Some(only), None) if !name.is_empty() => Some(*only),
        _ => None,
    }
}

/// Signals to the command's process, one per step between the count it runs and the target.
pub struct Signals {
    root: PidFd,
    reader: ProcReader,
    /// The command's name, for messages.
    name: String,
    /// The count the program runs once it has taken every signal sent.
    count: usize,
    /// Send only while the program waits for a job to end (xargs), as far as tact can see.
    only_while_waiting: bool,
    /// The count it should run.
    want: usize,
    /// The program has handlers for both signals: before it installs them (xargs does at its
    /// start), either would kill it, their default action.
    catching: bool,
    /// When tact started waiting for those handlers, and whether it said so.
    since: Instant,
    warned: bool,
    /// The process exited; the loop sees that next.
    gone: bool,
}

impl Signals {
    /// `root`: the command's process; brought from its starting count to `target` as soon as
    /// it catches both signals.
    pub fn new(root: PidFd, name: &str, receiver: Receiver, target: usize, now: Instant) -> Self {
        Signals {
            root,
            reader: ProcReader::new(),
            name: name.to_string(),
            count: receiver.start,
            only_while_waiting: receiver.xargs,
            want: target,
            catching: false,
            since: now,
            warned: false,
            gone: false,
        }
    }

    pub fn set_target(&mut self, target: usize, now: Instant) -> Result<()> {
        self.want = target;
        self.flush(now)
    }

    /// Whether signals are still owed (the loop then looks again within [`RETRY`]).
    pub fn owing(&self) -> bool {
        self.count != self.want && !self.gone
    }

    /// Sends the signals owed, each once the program has taken the one before.
    pub fn flush(&mut self, now: Instant) -> Result<()> {
        let pid = self.root.pid();
        while self.owing() {
            let masks = match self.reader.signal_masks(pid) {
                Ok(masks) => masks,
                Err(tact_linux::Error::NoProcess { .. }) => {
                    self.gone = true;
                    break;
                }
                Err(e) => return Err(e).context("--signals"),
            };
            if !self.catching {
                if !BOTH.iter().all(|&s| SignalMasks::has(masks.caught, s)) {
                    self.warn_if_slow(now);
                    break;
                }
                self.catching = true;
            }
            let pending = masks.thread_pending | masks.shared_pending;
            if BOTH.iter().any(|&s| SignalMasks::has(pending, s)) || !self.may_interrupt() {
                break;
            }
            let (signal, next) = if self.want > self.count {
                (libc::SIGUSR1, self.count + 1)
            } else {
                (libc::SIGUSR2, self.count - 1)
            };
            match self.root.send_signal(signal) {
                Ok(()) => self.count = next,
                Err(tact_linux::Error::NoProcess { .. }) => self.gone = true,
                Err(e) => return Err(e).context("--signals"),
            }
        }
        Ok(())
    }

    /// Whether a signal now cannot cut the program's input short: always, unless it is xargs,
    /// which must be waiting for a job. When tact may not read `/proc/PID/syscall` (a ptrace
    /// restriction), it says so and sends anyway: a count that never changes would be worse.
    fn may_interrupt(&mut self) -> bool {
        if !self.only_while_waiting {
            return true;
        }
        match self.reader.blocking_syscall(self.root.pid()) {
            Ok(Some(nr)) => nr == libc::SYS_wait4 || nr == libc::SYS_waitid,
            Ok(None) => false,
            // Gone: the signal fails the same way, and the loop sees the exit.
            Err(tact_linux::Error::NoProcess { .. }) => true,
            Err(e) => {
                self.only_while_waiting = false;
                let message = format!(
                    "cannot see whether {} waits for a job ({e}); signals go at any moment, and \
                     one that interrupts its read of a pipe ends its input",
                    self.name
                );
                tracing::warn!("--signals: {message}");
                eprintln!("tact: tune: --signals: {message}");
                true
            }
        }
    }

    fn warn_if_slow(&mut self, now: Instant) {
        if !self.warned && now.saturating_duration_since(self.since) >= PATIENCE {
            self.warned = true;
            let message = format!(
                "{} has no handler for SIGUSR1 and SIGUSR2 after {} s; tact sends none until it \
                 has (they would kill it), so it runs {} jobs at once meanwhile",
                self.name,
                PATIENCE.as_secs(),
                self.count
            );
            tracing::warn!("--signals: {message}");
            eprintln!("tact: tune: --signals: {message}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn start(line: &str, given: Option<u32>) -> Result<usize> {
        receiver(&words(line), given).map(|r| r.start)
    }

    #[test]
    fn xargs_count_is_read_in_every_spelling() {
        for (line, count) in [
            ("xargs gzip", 1),
            ("xargs -P 4 gzip", 4),
            ("xargs -P4 gzip", 4),
            ("/usr/bin/xargs -0tP 3 -n 1 gzip", 3),
            ("xargs -n1 -P3 -P 5 gzip", 5),
            ("xargs --max-procs=6 gzip", 6),
            ("xargs --max-procs 7 gzip", 7),
            ("xargs --max-p=2 gzip", 2),
            ("xargs -I {} -P 2 sh -c 'x {}'", 2),
            // Arguments of other options are not options.
            ("xargs -d -P -s 100 gzip", 1),
            ("xargs --arg-file -P gzip", 1),
            // Optional arguments are attached, so -e's word holds no -P of xargs.
            ("xargs -eP9 -P 2 gzip", 2),
            // The command's own -P, after the first operand or --, is not xargs's.
            ("xargs -P 2 grep -P 8 x", 2),
            ("xargs -- sort -P 8", 1),
        ] {
            assert_eq!(start(line, None).unwrap(), count, "{line}");
        }
    }

    #[test]
    fn a_count_tact_cannot_use_is_refused() {
        let err = |line: &str, given| format!("{:#}", start(line, given).unwrap_err());
        assert!(err("xargs -P 0 gzip", None).contains("-P 0"));
        assert!(err("xargs --max-procs=0 gzip", None).contains("-P 0"));
        assert!(err("xargs -P many gzip", None).contains("`many`"));
        let e = err("parallel -j 4 gzip", None);
        assert!(
            e.contains("--signals-start") && e.contains("parallel"),
            "{e}"
        );
        assert!(err("xargs -P 2 gzip", Some(3)).contains("disagrees"));
    }

    #[test]
    fn a_given_count_serves_other_programs() {
        let pool = receiver(&words("./pool --workers 3"), Some(3)).unwrap();
        assert_eq!(
            pool,
            Receiver {
                start: 3,
                xargs: false
            }
        );
        let xargs = receiver(&words("/usr/bin/xargs -P 2 gzip"), Some(2)).unwrap();
        assert_eq!(
            xargs,
            Receiver {
                start: 2,
                xargs: true
            }
        );
    }

    #[test]
    fn ambiguous_abbreviations_name_no_option() {
        assert!(long_option("max-").is_none());
        assert!(long_option("").is_none());
        assert_eq!(long_option("max-pr").map(|o| o.0), Some("max-procs"));
        assert_eq!(long_option("null").map(|o| o.0), Some("null"));
    }
}
