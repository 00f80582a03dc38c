//! Per-process CPU time and run state for the share loop (spec proportional-share §3, §4), read
//! every quantum, so cheap: one `clock_gettime` on the process's CPU clock and one `pread` of a
//! `/proc/PID/stat` kept open, into a buffer allocated once.
//!
//! * CPU time comes from `clock_getcpuclockid(pid)` + `clock_gettime`: nanoseconds, summed over
//!   all threads including exited ones, no privileges needed. Fallback ([`CpuSource::Schedstat`]):
//!   the first field of `/proc/PID/task/*/schedstat` summed over the live threads (loses exited
//!   threads, and needs `CONFIG_SCHED_INFO`). Never utime+stime: they count 10 ms ticks.
//! * A CPU clock id names a pid, not a process. The stat fd, opened once, stays bound to the
//!   process it was opened on and fails with ESRCH once that process is reaped, even if the pid is
//!   reused, so every clock read is confirmed by a stat read *after* it: if the stat fd still
//!   reads, the pid still named our process when the clock was read.
//! * A process is *blocked* when none of its threads is runnable (`R`). The state letter of
//!   `/proc/PID/stat` is the leader thread's only, so a process with more than one thread is
//!   judged on `/proc/PID/task/*/stat`, whose files are also kept open and re-read with `pread`;
//!   the task directory is listed again only when the thread set changes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// Enough for any `/proc/PID/stat` line (52 numeric fields of at most 20 digits, a comm of at most
/// 64 bytes).
const STAT_BUF: usize = 4096;

/// Where CPU time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CpuSource {
    /// The process CPU clock (`clock_getcpuclockid`): every thread, including exited ones.
    Clock,
    /// The sum of `/proc/PID/task/*/schedstat` field 1 over live threads. Can drop when a thread
    /// exits; callers rebase on drops. Lists and opens files on every read (allocates).
    Schedstat,
}

/// The fields of `/proc/PID/stat` read every quantum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatLine {
    /// Field 3, parsed after the last `)`: `R`, `S`, `D`, `T`, `t`, `Z`, `X`, `I`, ...
    pub state: char,
    /// Field 20: live threads.
    pub threads: u32,
    /// Field 22: clock ticks after boot at which the process started.
    pub start_time: u64,
}

/// What a process is doing, as the share engine needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Activity {
    /// At least one thread is runnable (`R`).
    Runnable,
    /// No thread is runnable and none is stopped: sleeping (`S`), in the kernel (`D`), idle (`I`).
    Blocked,
    /// Every live thread is stopped (`T`) or traced (`t`). tact reads only the members it has not
    /// stopped, so a stopped process it reads was stopped by someone else: it counts as blocked
    /// and must be left alone.
    Stopped,
    /// Exited (`Z`/`X`) or reaped.
    Dead,
}

impl Activity {
    /// Blocked for the engine's I/O heuristic: not runnable, not dead. A process stopped by
    /// someone else counts as blocked (spec §4).
    pub fn is_blocked(self) -> bool {
        matches!(self, Activity::Blocked | Activity::Stopped)
    }

    /// Classifies one thread's state letter.
    fn of_letter(c: char) -> Activity {
        match c {
            'R' => Activity::Runnable,
            'T' | 't' => Activity::Stopped,
            'Z' | 'X' | 'x' => Activity::Dead,
            _ => Activity::Blocked,
        }
    }

    /// Combines the states of all threads of a process: runnable if any thread is, stopped if
    /// every live one is, dead if none is alive.
    pub fn of_threads(states: impl IntoIterator<Item = char>) -> Activity {
        let (mut live, mut stopped, mut runnable) = (0usize, 0usize, false);
        for c in states {
            match Activity::of_letter(c) {
                Activity::Runnable => runnable = true,
                Activity::Stopped => stopped += 1,
                Activity::Dead => continue,
                Activity::Blocked => {}
            }
            live += 1;
        }
        if runnable {
            Activity::Runnable
        } else if live == 0 {
            Activity::Dead
        } else if stopped == live {
            Activity::Stopped
        } else {
            Activity::Blocked
        }
    }
}

/// One read of a process: everything the share engine's step needs from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuReading {
    /// Cumulative CPU nanoseconds (see [`CpuSource`]).
    pub cpu_ns: u64,
    /// Live threads (stat field 20).
    pub threads: u32,
    pub activity: Activity,
}

/// The CPU clock of a process: `clock_getcpuclockid` then `clock_gettime` per read.
///
/// The clock id is derived from the pid, so on its own it can read a process that reused the pid;
/// [`ProcWatch`] confirms each read with its stat fd.
#[derive(Debug, Clone, Copy)]
pub struct CpuClock {
    pid: i32,
    clock: libc::clockid_t,
}

impl CpuClock {
    /// The CPU clock of process `pid`. Any process may read any visible process's clock.
    pub fn open(pid: i32) -> Result<CpuClock> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: writes one clockid_t through a valid pointer.
        let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
        if rc != 0 {
            // Returns the error number rather than setting errno.
            return Err(clock_error("clock_getcpuclockid", pid, rc));
        }
        let c = CpuClock { pid, clock };
        c.read_ns()?; // glibc does not check that the process exists
        Ok(c)
    }

    /// The CPU clock of the calling thread's process.
    pub fn this_process() -> CpuClock {
        CpuClock {
            pid: std::process::id() as i32,
            clock: libc::CLOCK_PROCESS_CPUTIME_ID,
        }
    }

    /// Cumulative CPU nanoseconds of every thread of the process, exited ones included.
    pub fn read_ns(&self) -> Result<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes one timespec through a valid pointer.
        if unsafe { libc::clock_gettime(self.clock, &mut ts) } != 0 {
            let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(clock_error("clock_gettime", self.pid, errno));
        }
        Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// The pid this clock was opened on.
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

/// A process's CPU clock fails with EINVAL (or ESRCH) once the process is gone.
fn clock_error(op: &'static str, pid: i32, errno: i32) -> Error {
    if errno == libc::EINVAL || errno == libc::ESRCH {
        Error::NoProcess { pid }
    } else {
        Error::Syscall {
            op,
            pid,
            source: io::Error::from_raw_os_error(errno),
        }
    }
}

/// `/proc/PID/stat` opened once and re-read with `pread` into a buffer allocated once.
pub struct StatFile {
    pid: i32,
    path: PathBuf,
    file: File,
    buf: Box<[u8]>,
}

impl StatFile {
    /// Opens `ROOT/PID/stat`.
    pub fn open(root: &Path, pid: i32) -> Result<StatFile> {
        let path = root.join(pid.to_string()).join("stat");
        let file = File::open(&path).map_err(|e| gone_or_io(&path, pid, e))?;
        Ok(StatFile {
            pid,
            path,
            file,
            buf: vec![0; STAT_BUF].into_boxed_slice(),
        })
    }

    /// One `pread` and parse, no allocation. A process that has been reaped gives `NoProcess`.
    pub fn read(&mut self) -> Result<StatLine> {
        let n = self
            .file
            .read_at(&mut self.buf, 0)
            .map_err(|e| gone_or_io(&self.path, self.pid, e))?;
        if n == 0 {
            return Err(Error::NoProcess { pid: self.pid });
        }
        parse_stat_line(&self.buf[..n]).map_err(|msg| Error::parse(&self.path, 1, msg))
    }

    /// The file this reads.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Debug for StatFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatFile")
            .field("pid", &self.pid)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// State, thread count and start time from the bytes of a stat line, without allocating.
pub fn parse_stat_line(bytes: &[u8]) -> std::result::Result<StatLine, &'static str> {
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .ok_or("no ')' after comm")?;
    // Field 3 is the first word after the comm.
    let mut fields = bytes[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let state = fields.next().ok_or("missing field 3 (state)")?;
    let state = match state {
        [c] if c.is_ascii_alphabetic() => *c as char,
        _ => return Err("bad state (field 3)"),
    };
    // Fields 4..=19 are skipped; next is field 20.
    let threads = fields.nth(16).ok_or("missing field 20 (threads)")?;
    let threads = parse_u64(threads).ok_or("bad number in field 20 (threads)")?;
    let start = fields.nth(1).ok_or("missing field 22 (start time)")?;
    let start_time = parse_u64(start).ok_or("bad number in field 22 (start time)")?;
    Ok(StatLine {
        state,
        threads: u32::try_from(threads).map_err(|_| "field 20 (threads) out of range")?,
        start_time,
    })
}

fn parse_u64(word: &[u8]) -> Option<u64> {
    if word.is_empty() {
        return None;
    }
    word.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// "Not found" and ESRCH under /proc/PID mean the process is gone.
fn gone_or_io(path: &Path, pid: i32, e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        Error::NoProcess { pid }
    } else {
        Error::io(path, e)
    }
}

/// Everything the share loop reads of one process, with the stat file kept open.
///
/// Every read is confirmed by the stat fd (bound to the process it was opened on), so a reading
/// never describes another process that reused the pid: after the process is reaped every read
/// gives `NoProcess`.
#[derive(Debug)]
pub struct ProcWatch {
    reader: ProcReader,
    id: ProcId,
    stat: StatFile,
    clock: Option<CpuClock>,
    /// `/proc/PID/task/TID/stat` of each thread, kept open while the process has more than one.
    tasks: Vec<(i32, File)>,
}

impl ProcWatch {
    /// Watches `pid` in the real `/proc`, with its CPU clock, or the schedstat files when the
    /// clock cannot be opened.
    pub fn open(pid: i32) -> Result<ProcWatch> {
        let reader = ProcReader::new();
        match ProcWatch::open_with(&reader, pid, CpuSource::Clock) {
            Err(Error::Syscall { .. }) => ProcWatch::open_with(&reader, pid, CpuSource::Schedstat),
            other => other,
        }
    }

    /// Watches `pid` in the procfs of `reader` with the given CPU source ([`CpuSource::Clock`]
    /// reads the real kernel's clock of `pid`, so fixture trees need [`CpuSource::Schedstat`]).
    /// Fails with `NoProcess` for a process that does not exist or has already exited.
    pub fn open_with(reader: &ProcReader, pid: i32, source: CpuSource) -> Result<ProcWatch> {
        let mut stat = StatFile::open(reader.root(), pid)?;
        let clock = match source {
            CpuSource::Clock => Some(CpuClock::open(pid)?),
            CpuSource::Schedstat => None,
        };
        // Read after the clock was opened, through the fd opened before it: the identity below is
        // the process both name.
        let line = stat.read()?;
        if matches!(line.state, 'Z' | 'X' | 'x') && line.threads <= 1 {
            return Err(Error::NoProcess { pid });
        }
        Ok(ProcWatch {
            reader: reader.clone(),
            id: ProcId {
                pid,
                start_time: line.start_time,
            },
            stat,
            clock,
            tasks: Vec::new(),
        })
    }

    /// The process watched.
    pub fn id(&self) -> ProcId {
        self.id
    }

    /// Where CPU time comes from.
    pub fn source(&self) -> CpuSource {
        if self.clock.is_some() {
            CpuSource::Clock
        } else {
            CpuSource::Schedstat
        }
    }

    /// `/proc/PID/stat` by `pread`: state letter, threads, start time.
    pub fn stat(&mut self) -> Result<StatLine> {
        self.stat.read()
    }

    /// Cumulative CPU nanoseconds, confirmed by a stat read afterwards (one clock read and one
    /// pread with the CPU clock).
    pub fn cpu_ns(&mut self) -> Result<u64> {
        let ns = self.raw_cpu_ns()?;
        self.stat.read()?;
        Ok(ns)
    }

    /// Cumulative CPU nanoseconds from the clock alone, *not* confirmed by a stat read: one
    /// `clock_gettime`, for a caller that confirms otherwise (a value below an earlier one means
    /// the pid no longer names this process; so does a later [`ProcWatch::read`] failing).
    pub fn clock_ns(&self) -> Result<u64> {
        self.raw_cpu_ns()
    }

    /// What the process is doing. Single-threaded: its stat letter. Multi-threaded: runnable if
    /// any thread in `/proc/PID/task/*/stat` is `R`.
    pub fn activity(&mut self) -> Result<Activity> {
        let line = self.stat.read()?;
        self.activity_from(line)
    }

    /// CPU time, thread count and activity in one go: the per-member read of a quantum. With the
    /// CPU clock and one thread this is one `clock_gettime` and one `pread`.
    pub fn read(&mut self) -> Result<CpuReading> {
        let cpu_ns = self.raw_cpu_ns()?;
        let line = self.stat.read()?; // confirms cpu_ns was this process's
        let activity = self.activity_from(line)?;
        Ok(CpuReading {
            cpu_ns,
            threads: line.threads,
            activity,
        })
    }

    fn raw_cpu_ns(&self) -> Result<u64> {
        match &self.clock {
            Some(clock) => clock.read_ns(),
            None => self.reader.cpu_ns(self.id.pid),
        }
    }

    fn activity_from(&mut self, line: StatLine) -> Result<Activity> {
        // A zombie leader with threads left (it called pthread_exit) is not a dead process.
        if line.threads <= 1 {
            self.tasks.clear();
            return Ok(Activity::of_letter(line.state));
        }
        // The cached thread files are the current thread set when there are as many as the
        // kernel counts and all of them still read (an exited thread's file gives ESRCH).
        for attempt in 0..3 {
            if self.tasks.len() != line.threads as usize || attempt > 0 {
                self.list_tasks()?;
            }
            match self.task_states() {
                Some(activity) => {
                    // The task files were opened by path: confirm the pid still names our
                    // process.
                    self.stat.read()?;
                    return Ok(activity);
                }
                None => continue, // a thread exited meanwhile: list again
            }
        }
        // Threads come and go faster than we can list them: judge on the leader.
        Ok(Activity::of_letter(self.stat.read()?.state))
    }

    /// Reads every cached thread file; None if one of the threads has exited.
    fn task_states(&mut self) -> Option<Activity> {
        let buf = &mut self.stat.buf;
        let mut complete = true;
        let activity = Activity::of_threads(self.tasks.iter().map_while(|(_, file)| {
            let state = match file.read_at(buf, 0) {
                Ok(n) if n > 0 => parse_stat_line(&buf[..n]).ok().map(|l| l.state),
                _ => None,
            };
            complete &= state.is_some();
            state
        }));
        complete.then_some(activity)
    }

    /// Opens the stat file of every current thread.
    fn list_tasks(&mut self) -> Result<()> {
        self.tasks.clear();
        let pid = self.id.pid;
        let dir = self.reader.root().join(pid.to_string()).join("task");
        for tid in self.reader.threads(pid)? {
            let path = dir.join(tid.to_string()).join("stat");
            match File::open(&path) {
                Ok(file) => self.tasks.push((tid, file)),
                Err(e) => match gone_or_io(&path, pid, e) {
                    Error::NoProcess { .. } => continue, // that thread just exited
                    e => return Err(e),
                },
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, Instant};

    fn stat_line(pid: i32, comm: &str, state: char, threads: u32, start: u64) -> String {
        // Fields 4..: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        // cutime cstime priority nice threads itreal starttime vsize ...
        format!(
            "{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194304 10 0 0 0 7 5 0 0 20 0 {threads} 0 \
             {start} 1000 10 18446744073709551615\n"
        )
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn stat_line_parses_after_the_last_paren() {
        let s = parse_stat_line(stat_line(5, "a) R 1 (b", 'S', 7, 99).as_bytes()).unwrap();
        assert_eq!(
            s,
            StatLine {
                state: 'S',
                threads: 7,
                start_time: 99
            }
        );
        assert_eq!(
            parse_stat_line(b"5 (x) R 1 2 3").unwrap_err(),
            "missing field 20 (threads)"
        );
        assert!(parse_stat_line(b"5 x R").is_err());
        let bad = stat_line(5, "x", 'S', 7, 99).replace(" 7 0 99", " 7 0 9z");
        assert_eq!(
            parse_stat_line(bad.as_bytes()).unwrap_err(),
            "bad number in field 22 (start time)"
        );
    }

    #[test]
    fn activity_of_threads() {
        use Activity::*;
        assert_eq!(Activity::of_threads(['S', 'R', 'D']), Runnable);
        assert_eq!(Activity::of_threads(['S', 'D', 'I']), Blocked);
        assert_eq!(Activity::of_threads(['T', 't', 'Z']), Stopped);
        assert_eq!(Activity::of_threads(['T', 'S']), Blocked);
        assert_eq!(Activity::of_threads(['Z', 'X']), Dead);
        assert_eq!(Activity::of_threads(['Z', 'R']), Runnable);
        assert!(Stopped.is_blocked() && Blocked.is_blocked());
        assert!(!Runnable.is_blocked() && !Dead.is_blocked());
    }

    #[test]
    fn fixture_reads_threads_and_schedstat() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Leader sleeps, a worker spins: runnable.
        write(root, "10/stat", &stat_line(10, "w", 'S', 2, 500));
        write(root, "10/task/10/stat", &stat_line(10, "w", 'S', 2, 500));
        write(root, "10/task/11/stat", &stat_line(11, "w", 'R', 2, 500));
        write(root, "10/task/10/schedstat", "1000 0 0\n");
        write(root, "10/task/11/schedstat", "234 0 0\n");
        // Zombie leader whose other thread still sleeps: blocked, not dead.
        write(root, "20/stat", &stat_line(20, "z", 'Z', 2, 600));
        write(root, "20/task/20/stat", &stat_line(20, "z", 'Z', 2, 600));
        write(root, "20/task/21/stat", &stat_line(21, "z", 'S', 2, 600));
        write(root, "30/stat", &stat_line(30, "gone", 'Z', 1, 700));
        write(
            root,
            "40/stat",
            &stat_line(40, "bad", 'S', 1, 700).replace(") S", ")"),
        );

        let reader = ProcReader::with_root(root);
        let mut w = ProcWatch::open_with(&reader, 10, CpuSource::Schedstat).unwrap();
        assert_eq!(w.source(), CpuSource::Schedstat);
        assert_eq!(w.id().start_time, 500);
        assert_eq!(
            w.read().unwrap(),
            CpuReading {
                cpu_ns: 1234,
                threads: 2,
                activity: Activity::Runnable
            }
        );
        let mut z = ProcWatch::open_with(&reader, 20, CpuSource::Schedstat).unwrap();
        assert_eq!(z.activity().unwrap(), Activity::Blocked);
        assert!(matches!(
            ProcWatch::open_with(&reader, 30, CpuSource::Schedstat),
            Err(Error::NoProcess { pid: 30 })
        ));
        assert!(matches!(
            ProcWatch::open_with(&reader, 50, CpuSource::Schedstat),
            Err(Error::NoProcess { pid: 50 })
        ));
        let err = ProcWatch::open_with(&reader, 40, CpuSource::Schedstat)
            .unwrap_err()
            .to_string();
        assert!(err.contains("40/stat:1:"), "{err}");
    }

    #[test]
    fn clock_counts_exited_threads() {
        let me = std::process::id() as i32;
        let clock = CpuClock::open(me).unwrap();
        let before = clock.read_ns().unwrap();
        // The thread spins until its own CPU clock says 50 ms (not wall time: on a loaded
        // machine 50 ms of wall time can hold much less CPU).
        std::thread::spawn(|| {
            let thread_ns = || {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: writes one timespec through a valid pointer.
                assert_eq!(
                    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) },
                    0
                );
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            let mut x = 0u64;
            while thread_ns() < 50_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
        })
        .join()
        .unwrap();
        // The thread has exited; its 50 ms stay in the process clock.
        assert!(clock.read_ns().unwrap() >= before + 50_000_000);
        let own = CpuClock::this_process().read_ns().unwrap();
        assert!(own >= before + 50_000_000);
    }

    /// What `tact share` relies on to skip stat reads: a process a stat read found runnable has
    /// not blocked while its CPU clock has not moved, for blocking deschedules it, and that
    /// brings its clock up to date before the voluntary switch is counted. (The clock of another
    /// process moves only at ticks while it runs, and a stat read can catch a running process in
    /// `S` on its way to sleep, e.g. in wait4's scan, so the state letter is not the witness:
    /// its voluntary context switches are.) A shell that computes and sleeps by turns shares one
    /// CPU with a spinner, so it often waits in `R`; whenever its clock has not moved since a
    /// stat read said `R`, nor across the count read after, it has not blocked in between.
    #[test]
    fn runnable_stays_runnable_until_its_clock_moves() {
        let cpu = crate::actuate::affinity::thread_cpus(std::process::id() as i32).unwrap()[0];
        let on_cpu = |script: &str| {
            std::process::Command::new("taskset")
                .args(["-c", &cpu.to_string(), "sh", "-c", script])
                .spawn()
                .unwrap()
        };
        let mut spinner = on_cpu("while :; do :; done");
        let mut shell = on_cpu(
            "while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.001; done",
        );
        let mut w = ProcWatch::open(shell.id() as i32).unwrap();
        let status = format!("/proc/{}/status", shell.id());
        let blocks = || {
            let text = std::fs::read_to_string(&status).unwrap();
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .unwrap();
            line.trim().parse::<u64>().unwrap()
        };
        let (mut runnable_at, mut confirmed, mut states) = (None, 0, Vec::new());
        let start = Instant::now();
        let slept = |states: &[Activity]| states.contains(&Activity::Blocked);
        while (confirmed < 20 || !slept(&states)) && start.elapsed() < Duration::from_secs(20) {
            let before = w.clock_ns().unwrap();
            let r = w.read().unwrap();
            let blocked = blocks();
            let after = w.clock_ns().unwrap();
            states.push(r.activity);
            if let Some((at, blocked_then)) = runnable_at {
                if at == before && after == before {
                    assert_eq!(blocked, blocked_then, "blocked without its clock moving");
                    confirmed += 1;
                }
            }
            runnable_at = (r.activity == Activity::Runnable).then_some((r.cpu_ns, blocked));
            std::thread::sleep(Duration::from_micros(200));
        }
        for c in [&mut spinner, &mut shell] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert!(confirmed > 0, "never saw it wait in R: {states:?}");
        assert!(slept(&states), "never saw it sleep");
    }

    /// Prints the cost of the reads done per member per quantum (run with `--nocapture`):
    /// `cargo test -p tact-linux --release --lib read_costs -- --nocapture`.
    #[test]
    fn read_costs() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let kid = child.id() as i32;
        let me = std::process::id() as i32;
        let mut single = ProcWatch::open(kid).unwrap();
        let mut multi = ProcWatch::open(me).unwrap();
        assert_eq!(single.source(), CpuSource::Clock);
        let clock = CpuClock::open(kid).unwrap();
        let mut stat = StatFile::open(Path::new("/proc"), kid).unwrap();
        let reader = ProcReader::new();
        let n = 2000u32;
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n) / 1e3
        };
        let clock_us = time(&mut || {
            std::hint::black_box(clock.read_ns().unwrap());
        });
        let stat_us = time(&mut || {
            std::hint::black_box(stat.read().unwrap());
        });
        let single_us = time(&mut || {
            std::hint::black_box(single.read().unwrap());
        });
        let threads = multi.stat().unwrap().threads;
        let multi_us = time(&mut || {
            std::hint::black_box(multi.read().unwrap());
        });
        let sched_us = time(&mut || {
            std::hint::black_box(reader.cpu_ns(kid).unwrap());
        });
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(matches!(single.read(), Err(Error::NoProcess { .. })));
        eprintln!(
            "per read: cpu clock {clock_us:.2} us; stat pread+parse {stat_us:.2} us; \
             ProcWatch::read 1 thread {single_us:.2} us, {threads} threads {multi_us:.2} us; \
             schedstat fallback (1 thread) {sched_us:.2} us"
        );
    }
}
