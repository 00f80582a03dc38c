//! `/proc` reader. It takes its root directory (like Meta's `below`) so that tests can run on
//! fixture trees, and every error names the file it failed on.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// `PF_KTHREAD` from `include/linux/sched.h`: the flag (stat field 9) that marks kernel threads.
const PF_KTHREAD: u32 = 0x0020_0000;

/// A process identity that survives pid reuse: the pid plus its start time (stat field 22).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ProcId {
    pub pid: i32,
    /// Clock ticks after boot at which the process started.
    pub start_time: u64,
}

/// Signal masks of `/proc/PID/status`; bit N-1 stands for signal N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalMasks {
    /// Pending for the main thread alone (`SigPnd`).
    pub thread_pending: u64,
    /// Pending for the whole process (`ShdPnd`): where a signal sent to the process waits
    /// until a thread takes it.
    pub shared_pending: u64,
    /// Signals the process has a handler for (`SigCgt`).
    pub caught: u64,
}

impl SignalMasks {
    /// Whether `mask` (one of the fields) holds signal `sig`, at bit `sig - 1`. Numbers outside
    /// 1..=64 are in no mask.
    pub fn has(mask: u64, sig: i32) -> bool {
        (1..=64).contains(&sig) && mask & (1 << (sig - 1)) != 0
    }
}

/// A process's live threads as one listing of `/proc/PID/task` found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadsNow {
    /// Their nanoseconds on CPU, summed (as [`ProcReader::cpu_ns`]).
    pub cpu_ns: u64,
    /// The state of each (as [`ProcReader::thread_states`]).
    pub states: Vec<char>,
}

/// The fields of `/proc/PID/stat` tact uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// The command name, as written between the parentheses (it may contain spaces and ')').
    pub comm: String,
    /// `R`, `S`, `D`, `T` (stopped), `t` (tracing stop), `Z` (zombie), `X`, `I`, ...
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    pub session: i32,
    /// Kernel `PF_*` flags (field 9).
    pub flags: u32,
    /// utime + stime in clock ticks (fields 14 and 15); includes exited threads.
    pub cpu_ticks: u64,
    /// Field 22, clock ticks after boot.
    pub start_time: u64,
}

impl Stat {
    /// The identity of this process.
    pub fn id(&self) -> ProcId {
        ProcId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    /// Whether this is a kernel thread (which tact must never signal).
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether the process has exited (it may still wait to be reaped).
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Whether the process is not running because of a stop (`T`) or a tracing stop (`t`).
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

/// The counters of `/proc/PID/io`. They include the counts of exited threads and of reaped
/// children (the kernel folds those into the parent when it waits for them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub syscr: u64,
    pub syscw: u64,
    /// Written bytes the kernel dropped before writeback (the pages of a file truncated or
    /// deleted while dirty), charged to the task that truncated it: `write_bytes` counted them
    /// when they were dirtied, and they never reach the device.
    pub cancelled_write_bytes: u64,
}

/// Reads process information from a procfs mounted at `root`.
#[derive(Debug, Clone)]
pub struct ProcReader {
    root: PathBuf,
}

impl Default for ProcReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcReader {
    /// A reader of the real `/proc`.
    pub fn new() -> Self {
        Self::with_root("/proc")
    }

    /// A reader of a procfs-shaped tree at `root` (fixtures in tests).
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        ProcReader { root: root.into() }
    }

    /// The root this reader reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `/proc/PID/stat`.
    pub fn stat(&self, pid: i32) -> Result<Stat> {
        let path = self.root.join(pid.to_string()).join("stat");
        let text = read_proc_file(&path, pid)?;
        parse_stat(&text).map_err(|msg| Error::parse(&path, 1, msg))
    }

    /// The command line of `pid` (`/proc/PID/cmdline`, NUL-separated); empty for kernel threads
    /// and zombies.
    pub fn cmdline(&self, pid: i32) -> Result<Vec<String>> {
        let path = self.root.join(pid.to_string()).join("cmdline");
        let bytes = fs::read(&path).map_err(|e| proc_error(&path, pid, e))?;
        Ok(bytes
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect())
    }

    /// The real uid of the process (first number of the `Uid:` line of `/proc/PID/status`).
    pub fn uid(&self, pid: i32) -> Result<u32> {
        let path = self.root.join(pid.to_string()).join("status");
        let text = read_proc_file(&path, pid)?;
        for (i, line) in text.lines().enumerate() {
            if let Some(rest) = line.strip_prefix("Uid:") {
                return rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| Error::parse(&path, i + 1, "malformed Uid line"));
            }
        }
        Err(Error::parse(&path, text.lines().count(), "no Uid line"))
    }

    /// `/proc/PID/io`.
    pub fn io(&self, pid: i32) -> Result<IoCounters> {
        let path = self.root.join(pid.to_string()).join("io");
        let text = read_proc_file(&path, pid)?;
        let mut io = IoCounters::default();
        for (i, line) in text.lines().enumerate() {
            let Some((key, value)) = line.split_once(':') else {
                return Err(Error::parse(&path, i + 1, "expected `name: value`"));
            };
            let value: u64 = value
                .trim()
                .parse()
                .map_err(|_| Error::parse(&path, i + 1, format!("bad number for {key}")))?;
            match key {
                "rchar" => io.rchar = value,
                "wchar" => io.wchar = value,
                "read_bytes" => io.read_bytes = value,
                "write_bytes" => io.write_bytes = value,
                "syscr" => io.syscr = value,
                "syscw" => io.syscw = value,
                "cancelled_write_bytes" => io.cancelled_write_bytes = value,
                _ => {} // future fields
            }
        }
        Ok(io)
    }

    /// Nanoseconds on CPU: field 1 of `/proc/PID/task/*/schedstat`, summed over the live threads.
    /// Threads that exited take their time with them, so this can drop; callers rebase on drops.
    pub fn cpu_ns(&self, pid: i32) -> Result<u64> {
        let mut total = 0u64;
        for tid in self.threads(pid)? {
            total += self.thread_cpu_ns(pid, tid)?.unwrap_or(0);
        }
        Ok(total)
    }

    /// The thread ids of a process (`/proc/PID/task`).
    pub fn threads(&self, pid: i32) -> Result<Vec<i32>> {
        let dir = self.root.join(pid.to_string()).join("task");
        numeric_entries(&dir).map_err(|e| proc_error(&dir, pid, e))
    }

    /// The state of every thread (`/proc/PID/task/TID/stat`): a process is only fully stopped
    /// once each of its threads has taken the stop.
    pub fn thread_states(&self, pid: i32) -> Result<Vec<char>> {
        let mut states = Vec::new();
        for tid in self.threads(pid)? {
            states.extend(self.thread_state(pid, tid)?);
        }
        Ok(states)
    }

    /// [`Self::cpu_ns`] and [`Self::thread_states`] from one listing of `/proc/PID/task`, for a
    /// caller that wants both of a process at once (the daemon's refresh of each client). The
    /// two files of each thread are most of the cost (some 17 µs each in a debug build on a
    /// loaded two-core machine, the listing about 4 µs).
    pub fn threads_now(&self, pid: i32) -> Result<ThreadsNow> {
        let mut now = ThreadsNow::default();
        for tid in self.threads(pid)? {
            now.cpu_ns += self.thread_cpu_ns(pid, tid)?.unwrap_or(0);
            now.states.extend(self.thread_state(pid, tid)?);
        }
        Ok(now)
    }

    /// A thread's nanoseconds on CPU; `None` once it has exited.
    fn thread_cpu_ns(&self, pid: i32, tid: i32) -> Result<Option<u64>> {
        let path = self.task_dir(pid, tid).join("schedstat");
        let text = match read_proc_file(&path, pid) {
            Ok(text) => text,
            Err(Error::NoProcess { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        text.split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .map(Some)
            .ok_or_else(|| Error::parse(&path, 1, "expected a number of nanoseconds"))
    }

    /// A thread's state (`R`, `S`, `D`, `T`, ...); `None` once it has exited.
    fn thread_state(&self, pid: i32, tid: i32) -> Result<Option<char>> {
        let path = self.task_dir(pid, tid).join("stat");
        match read_proc_file(&path, pid) {
            Ok(text) => Ok(Some(
                parse_stat(&text)
                    .map_err(|m| Error::parse(&path, 1, m))?
                    .state,
            )),
            Err(Error::NoProcess { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether a process we sent SIGSTOP can no longer run user code: every thread is stopped
    /// (T, t) or exited, except threads blocked in the kernel (D) that will take the stop before
    /// returning to user space, because the stop is already under way (another thread is in T)
    /// or SIGSTOP is pending (`ShdPnd` of `/proc/PID/status`). A parent blocked in `vfork` until
    /// its (stopped) child execs stays in D for as long as the child is stopped.
    pub fn stop_settled(&self, pid: i32) -> Result<bool> {
        let states = self.thread_states(pid)?;
        let stopped = |c: &char| matches!(c, 'T' | 't');
        if !states
            .iter()
            .all(|c| stopped(c) || matches!(c, 'D' | 'Z' | 'X' | 'x'))
        {
            return Ok(false);
        }
        if !states.contains(&'D') || states.iter().any(stopped) {
            return Ok(true);
        }
        Ok(SignalMasks::has(
            self.signal_masks(pid)?.shared_pending,
            libc::SIGSTOP,
        ))
    }

    /// The signal masks of `/proc/PID/status` that tell whether a signal sent to the process
    /// has been taken yet, and whether it has a handler for one.
    pub fn signal_masks(&self, pid: i32) -> Result<SignalMasks> {
        let path = self.root.join(pid.to_string()).join("status");
        let text = read_proc_file(&path, pid)?;
        let mut found = [None; 3];
        for (i, line) in text.lines().enumerate() {
            let Some((key, mask)) = line.split_once(':') else {
                continue;
            };
            let Some(slot) = ["SigPnd", "ShdPnd", "SigCgt"]
                .iter()
                .position(|k| *k == key)
            else {
                continue;
            };
            let mask = u64::from_str_radix(mask.trim(), 16)
                .map_err(|_| Error::parse(&path, i + 1, format!("malformed {key} line")))?;
            found[slot] = Some(mask);
        }
        match found {
            [Some(thread_pending), Some(shared_pending), Some(caught)] => Ok(SignalMasks {
                thread_pending,
                shared_pending,
                caught,
            }),
            _ => Err(Error::parse(
                &path,
                text.lines().count(),
                "no SigPnd, ShdPnd or SigCgt line",
            )),
        }
    }

    /// The system call the process's main thread is blocked in (`/proc/PID/syscall`: its
    /// number, then its arguments), or `None` while it runs or is blocked outside one. Reading
    /// it takes the right to ptrace the process (its parent has it under Yama's default).
    pub fn blocking_syscall(&self, pid: i32) -> Result<Option<i64>> {
        let path = self.root.join(pid.to_string()).join("syscall");
        let text = read_proc_file(&path, pid)?;
        let first = text.split_whitespace().next().unwrap_or("");
        if first == "running" {
            return Ok(None);
        }
        let nr: i64 = first
            .parse()
            .map_err(|_| Error::parse(&path, 1, "expected `running` or a syscall number"))?;
        Ok((nr >= 0).then_some(nr))
    }

    /// The children of a process: the union of `/proc/PID/task/*/children`, or, on kernels built
    /// without `CONFIG_PROC_CHILDREN` (this file then does not exist), the processes whose ppid is
    /// `pid`.
    pub fn children(&self, pid: i32) -> Result<Vec<i32>> {
        Ok(self
            .descendants_map(&[pid], false)?
            .remove(&pid)
            .unwrap_or_default())
    }

    /// The tree rooted at `pid`, `pid` first, parents before their children.
    pub fn descendants(&self, pid: i32) -> Result<Vec<i32>> {
        self.descendants_of(&[pid])
    }

    /// The union of the trees rooted at `roots` (roots first, then breadth first, no duplicates).
    /// Roots that have exited are skipped, so that a job whose middle process exits keeps the
    /// members already known.
    pub fn descendants_of(&self, roots: &[i32]) -> Result<Vec<i32>> {
        let children = self.descendants_map(roots, true)?;
        let mut seen: HashSet<i32> = HashSet::new();
        let mut order = Vec::new();
        let mut queue: VecDeque<i32> = roots.iter().copied().collect();
        while let Some(pid) = queue.pop_front() {
            if !seen.insert(pid) {
                continue;
            }
            order.push(pid);
            queue.extend(children.get(&pid).into_iter().flatten());
        }
        Ok(order)
    }

    /// Parent -> children for the trees below `roots` (all of them when `deep`).
    fn descendants_map(&self, roots: &[i32], deep: bool) -> Result<HashMap<i32, Vec<i32>>> {
        let Some(&first) = roots.first() else {
            return Ok(HashMap::new());
        };
        if self.has_children_files(first) {
            let mut map = HashMap::new();
            let mut queue: VecDeque<i32> = roots.iter().copied().collect();
            let mut seen = HashSet::new();
            while let Some(pid) = queue.pop_front() {
                if !seen.insert(pid) {
                    continue;
                }
                let kids = match self.children_from_files(pid) {
                    Ok(kids) => kids,
                    Err(Error::NoProcess { .. }) => continue,
                    Err(e) => return Err(e),
                };
                if deep {
                    queue.extend(kids.iter().copied());
                }
                map.insert(pid, kids);
            }
            Ok(map)
        } else {
            // One pass over the whole process table answers for every root at once.
            self.ppid_map()
        }
    }

    /// Whether this kernel has `/proc/PID/task/TID/children`: the main thread (tid = pid) of a
    /// live process has it exactly when the kernel was built with `CONFIG_PROC_CHILDREN`.
    fn has_children_files(&self, pid: i32) -> bool {
        self.task_dir(pid, pid).join("children").exists()
    }

    fn children_from_files(&self, pid: i32) -> Result<Vec<i32>> {
        let mut kids = Vec::new();
        for tid in self.threads(pid)? {
            let path = self.task_dir(pid, tid).join("children");
            let text = match read_proc_file(&path, pid) {
                Ok(text) => text,
                Err(Error::NoProcess { .. }) => continue, // the thread exited meanwhile
                Err(e) => return Err(e),
            };
            for word in text.split_whitespace() {
                let kid = word
                    .parse()
                    .map_err(|_| Error::parse(&path, 1, format!("bad pid `{word}`")))?;
                if !kids.contains(&kid) {
                    kids.push(kid);
                }
            }
        }
        Ok(kids)
    }

    /// Parent -> children over every process in the table, children in pid order.
    fn ppid_map(&self) -> Result<HashMap<i32, Vec<i32>>> {
        let pids = numeric_entries(&self.root).map_err(|e| Error::io(&self.root, e))?;
        let mut map: HashMap<i32, Vec<i32>> = HashMap::new();
        for pid in pids {
            match self.stat(pid) {
                Ok(stat) => map.entry(stat.ppid).or_default().push(pid),
                Err(Error::NoProcess { .. }) => continue, // exited during the scan
                Err(e) => return Err(e),
            }
        }
        Ok(map)
    }

    fn task_dir(&self, pid: i32, tid: i32) -> PathBuf {
        self.root
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
    }
}

/// Parses the text of `/proc/PID/stat`. The comm is everything between the first '(' and the
/// LAST ')', since a program may name itself `a) R 1 (b`.
pub fn parse_stat(text: &str) -> std::result::Result<Stat, String> {
    let open = text.find('(').ok_or("no '(' before comm")?;
    let close = text.rfind(')').ok_or("no ')' after comm")?;
    if close < open {
        return Err("')' before '('".into());
    }
    let pid = text[..open]
        .trim()
        .parse()
        .map_err(|_| "bad pid (field 1)")?;
    let comm = text[open + 1..close].to_string();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> std::result::Result<&str, String> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| format!("missing field {n}"))
    };
    let num = |n: usize| -> std::result::Result<u64, String> {
        field(n)?
            .parse()
            .map_err(|_| format!("bad number in field {n}"))
    };
    let int = |n: usize| -> std::result::Result<i32, String> {
        field(n)?
            .parse()
            .map_err(|_| format!("bad number in field {n}"))
    };
    let state = field(3)?.chars().next().ok_or("empty state (field 3)")?;
    Ok(Stat {
        pid,
        comm,
        state,
        ppid: int(4)?,
        pgid: int(5)?,
        session: int(6)?,
        flags: u32::try_from(num(9)?).map_err(|_| "flags (field 9) out of range")?,
        cpu_ticks: num(14)? + num(15)?,
        start_time: num(22)?,
    })
}

/// Reads a file under `/proc/PID`; "not found" and ESRCH mean the process (or thread) is gone.
fn read_proc_file(path: &Path, pid: i32) -> Result<String> {
    fs::read_to_string(path).map_err(|e| proc_error(path, pid, e))
}

fn proc_error(path: &Path, pid: i32, e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        Error::NoProcess { pid }
    } else {
        Error::io(path, e)
    }
}

/// The entries of `dir` whose names are numbers (pids or tids).
fn numeric_entries(dir: &Path) -> io::Result<Vec<i32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        if let Some(n) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(n);
        }
    }
    // Directory order is arbitrary; sorted output makes walks reproducible.
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A procfs-shaped directory tree in a temporary directory.
    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn reader(&self) -> ProcReader {
            ProcReader::with_root(self.dir.path())
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.dir.path().join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }

        /// A process with one thread (tid = pid) and the given stat fields.
        fn process(&self, pid: i32, comm: &str, state: char, ppid: i32, start: u64) {
            let stat = stat_line(pid, comm, state, ppid, start);
            self.write(&format!("{pid}/stat"), &stat);
            self.write(&format!("{pid}/task/{pid}/stat"), &stat);
        }
    }

    fn stat_line(pid: i32, comm: &str, state: char, ppid: i32, start: u64) -> String {
        // Fields 4..: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        // cutime cstime priority nice threads itreal starttime vsize ...
        format!(
            "{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1 4194304 10 0 0 0 7 5 0 0 20 0 1 0 \
             {start} 1000 10 18446744073709551615\n"
        )
    }

    #[test]
    fn stat_parses_comm_with_spaces_and_parens() {
        let f = Fixture::new();
        f.process(42, "we) R 1 (ird x", 'S', 7, 12345);
        let s = f.reader().stat(42).unwrap();
        assert_eq!(s.comm, "we) R 1 (ird x");
        assert_eq!(
            (s.pid, s.state, s.ppid, s.pgid, s.session),
            (42, 'S', 7, 42, 42)
        );
        assert_eq!((s.cpu_ticks, s.start_time, s.flags), (12, 12345, 4194304));
        assert!(!s.is_kernel_thread());
        assert_eq!(
            s.id(),
            ProcId {
                pid: 42,
                start_time: 12345
            }
        );
    }

    #[test]
    fn stat_errors_name_the_file() {
        let f = Fixture::new();
        f.write("9/stat", "9 (short) R 1 2\n");
        let err = f.reader().stat(9).unwrap_err().to_string();
        assert!(
            err.contains("9/stat") && err.contains("missing field"),
            "{err}"
        );
        assert!(matches!(
            f.reader().stat(10),
            Err(Error::NoProcess { pid: 10 })
        ));
    }

    #[test]
    fn kernel_thread_flag() {
        let s = parse_stat(
            "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 3 0 0 18446744073709551615",
        )
        .unwrap();
        assert!(s.is_kernel_thread());
    }

    #[test]
    fn uid_and_io() {
        let f = Fixture::new();
        f.write(
            "5/status",
            "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n",
        );
        f.write(
            "5/io",
            "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\n\
             cancelled_write_bytes: 7\n",
        );
        let r = f.reader();
        assert_eq!(r.uid(5).unwrap(), 1000);
        let io = r.io(5).unwrap();
        assert_eq!(
            io,
            IoCounters {
                rchar: 1,
                wchar: 2,
                syscr: 3,
                syscw: 4,
                read_bytes: 5,
                write_bytes: 6,
                cancelled_write_bytes: 7,
            }
        );
        f.write("6/io", "rchar: 1\nwchar: lots\n");
        let err = r.io(6).unwrap_err().to_string();
        assert!(err.contains("6/io:2:"), "{err}");
    }

    #[test]
    fn stop_settled_counts_blocked_threads_with_a_stop_on_the_way() {
        let f = Fixture::new();
        let status = |pending: &str| {
            format!("Name:\tx\nSigPnd:\t0\nShdPnd:\t{pending}\nSigCgt:\t0\nUid:\t0\n")
        };
        f.process(3, "stopped", 'T', 1, 1);
        f.process(4, "running", 'R', 1, 1);
        f.process(5, "vfork parent, stop pending", 'D', 1, 1);
        f.write("5/status", &status("0000000000040000"));
        f.process(6, "blocked, nothing pending", 'D', 1, 1);
        f.write("6/status", &status("0000000000000000"));
        f.process(7, "group stop under way", 'T', 1, 1);
        f.write("7/task/8/stat", &stat_line(8, "t2", 'D', 1, 1));
        let r = f.reader();
        let settled: Vec<bool> = (3..=7).map(|p| r.stop_settled(p).unwrap()).collect();
        assert_eq!(settled, vec![true, false, true, false, true]);
    }

    #[test]
    fn signal_masks_are_read_from_status() {
        let f = Fixture::new();
        f.write(
            "5/status",
            "Name:\tx\nSigQ:\t0/1\nSigPnd:\t0000000000000200\nShdPnd:\t0000000000000800\n\
             SigBlk:\t0\nSigIgn:\t0\nSigCgt:\t0000000000000a00\n",
        );
        f.write(
            "6/status",
            "Name:\tx\nSigPnd:\t0\nShdPnd:\tzz\nSigCgt:\t0\n",
        );
        f.write("7/status", "Name:\tx\nSigPnd:\t0\n");
        let r = f.reader();
        assert_eq!(
            r.signal_masks(5).unwrap(),
            SignalMasks {
                thread_pending: 1 << 9,
                shared_pending: 1 << 11,
                caught: (1 << 9) | (1 << 11),
            }
        );
        // 0x200 is bit 9: signal 10.
        assert!(SignalMasks::has(1 << 9, 10));
        assert!(!SignalMasks::has(1 << 9, 9) && !SignalMasks::has(1 << 9, 11));
        assert!(SignalMasks::has(1, 1) && SignalMasks::has(1 << 63, 64));
        for out_of_range in [0, -1, 65, i32::MAX] {
            assert!(!SignalMasks::has(u64::MAX, out_of_range), "{out_of_range}");
        }
        let err = r.signal_masks(6).unwrap_err().to_string();
        assert!(
            err.contains("6/status:3:") && err.contains("ShdPnd"),
            "{err}"
        );
        let err = r.signal_masks(7).unwrap_err().to_string();
        assert!(err.contains("7/status"), "{err}");
    }

    #[test]
    fn the_blocking_syscall_is_its_number() {
        let f = Fixture::new();
        f.write(
            "5/syscall",
            "61 0xffffffff 0x7ffd 0x0 0x0 0x0 0x0 0x7ffd 0x7f6f\n",
        );
        f.write("6/syscall", "running\n");
        f.write("7/syscall", "-1 0x7ffd 0x7f6f\n");
        f.write("8/syscall", "\n");
        let r = f.reader();
        assert_eq!(r.blocking_syscall(5).unwrap(), Some(61));
        assert_eq!(r.blocking_syscall(6).unwrap(), None);
        assert_eq!(r.blocking_syscall(7).unwrap(), None);
        let err = r.blocking_syscall(8).unwrap_err().to_string();
        assert!(err.contains("8/syscall:1:"), "{err}");
        assert!(matches!(
            r.blocking_syscall(9),
            Err(Error::NoProcess { pid: 9 })
        ));
    }

    #[test]
    fn a_sleeping_process_shows_its_syscall() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let r = ProcReader::new();
        // Once it has started, sleep blocks in clock_nanosleep (nanosleep on older libcs).
        let sleeping = [libc::SYS_clock_nanosleep, libc::SYS_nanosleep];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = None;
        while !seen.is_some_and(|nr| sleeping.contains(&nr)) && std::time::Instant::now() < deadline
        {
            seen = r.blocking_syscall(pid).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            seen.is_some_and(|nr| sleeping.contains(&nr)),
            "last seen blocked in {seen:?}"
        );
    }

    #[test]
    fn cpu_ns_sums_threads() {
        let f = Fixture::new();
        f.write("7/task/7/schedstat", "100 5 2\n");
        f.write("7/task/8/schedstat", "23 5 2\n");
        assert_eq!(f.reader().cpu_ns(7).unwrap(), 123);
    }

    #[test]
    fn threads_now_is_cpu_ns_and_thread_states_from_one_listing() {
        let f = Fixture::new();
        f.process(7, "main", 'R', 1, 1);
        f.write("7/task/7/schedstat", "100 5 2\n");
        f.write("7/task/8/stat", &stat_line(8, "worker", 'D', 1, 1));
        f.write("7/task/8/schedstat", "23 5 2\n");
        // Listed, then gone before its files were read.
        fs::create_dir_all(f.dir.path().join("7/task/9")).unwrap();
        let r = f.reader();
        let now = r.threads_now(7).unwrap();
        assert_eq!(
            now,
            ThreadsNow {
                cpu_ns: 123,
                states: vec!['R', 'D']
            }
        );
        assert_eq!(now.cpu_ns, r.cpu_ns(7).unwrap());
        assert_eq!(now.states, r.thread_states(7).unwrap());
        f.write("7/task/8/schedstat", "lots\n");
        let err = r.threads_now(7).unwrap_err().to_string();
        assert!(err.contains("7/task/8/schedstat:1:"), "{err}");
        f.write("7/task/8/schedstat", "23 5 2\n");
        f.write("7/task/8/stat", "8 (worker\n");
        let err = r.threads_now(7).unwrap_err().to_string();
        assert!(err.contains("7/task/8/stat:1:"), "{err}");
        assert!(matches!(
            r.threads_now(10),
            Err(Error::NoProcess { pid: 10 })
        ));
    }

    /// What one listing saves over two on a real process (printed; `--nocapture` shows it):
    /// this test process with eight threads of its own parked on a barrier.
    #[test]
    fn threads_now_on_a_real_process_costs_one_listing() {
        use std::sync::{Arc, Barrier};
        use std::time::Instant;
        const PARKED: usize = 8;
        let done = Arc::new(Barrier::new(PARKED + 1));
        let parked: Vec<_> = (0..PARKED)
            .map(|_| {
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    done.wait();
                })
            })
            .collect();
        let r = ProcReader::new();
        let me = std::process::id() as i32;
        let n = 200u32;
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n) / 1e3
        };
        // Alternated, best of five: other tests and helpers share the CPU.
        let (mut two_us, mut one_us, mut list_us) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..5 {
            two_us = two_us.min(time(&mut || {
                std::hint::black_box(r.cpu_ns(me).unwrap());
                std::hint::black_box(r.thread_states(me).unwrap());
            }));
            one_us = one_us.min(time(&mut || {
                std::hint::black_box(r.threads_now(me).unwrap());
            }));
            list_us = list_us.min(time(&mut || {
                std::hint::black_box(r.threads(me).unwrap());
            }));
        }
        let now = r.threads_now(me).unwrap();
        done.wait();
        for t in parked {
            t.join().unwrap();
        }
        // The parked threads and this one, at least (other tests' threads come and go).
        assert!(now.states.len() > PARKED, "{now:?}");
        assert!(now.cpu_ns > 0, "{now:?}");
        eprintln!(
            "per process of {} threads: cpu_ns + thread_states {two_us:.1} us, \
             threads_now {one_us:.1} us (the listing alone {list_us:.1} us)",
            now.states.len()
        );
    }

    #[test]
    fn children_from_files_union_over_threads() {
        let f = Fixture::new();
        f.process(10, "root", 'S', 1, 1);
        f.write("10/task/10/children", "11 12 ");
        f.write("10/task/13/children", "14 12");
        f.process(11, "a", 'S', 10, 2);
        f.write("11/task/11/children", "15");
        f.process(15, "b", 'S', 11, 3);
        f.write("15/task/15/children", "");
        f.write("12/task/12/children", "");
        f.write("14/task/14/children", "");
        let r = f.reader();
        assert_eq!(r.children(10).unwrap(), vec![11, 12, 14]);
        assert_eq!(r.descendants(10).unwrap(), vec![10, 11, 12, 14, 15]);
    }

    #[test]
    fn children_from_ppid_scan_without_children_files() {
        let f = Fixture::new();
        f.process(1, "init", 'S', 0, 1);
        f.process(20, "root", 'S', 1, 5);
        f.process(21, "kid", 'R', 20, 6);
        f.process(22, "kid", 'S', 20, 7);
        f.process(23, "grandkid", 'S', 22, 8);
        f.process(30, "other", 'S', 1, 9);
        f.write("self", "not a process"); // non-numeric entries are ignored
        let r = f.reader();
        assert_eq!(r.children(20).unwrap(), vec![21, 22]);
        assert_eq!(r.descendants(20).unwrap(), vec![20, 21, 22, 23]);
        assert_eq!(r.descendants_of(&[21, 22]).unwrap(), vec![21, 22, 23]);
    }

    #[test]
    fn real_proc_of_this_process() {
        let r = ProcReader::new();
        let me = std::process::id() as i32;
        let s = r.stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert_eq!(s.ppid, std::os::unix::process::parent_id() as i32);
        assert!(s.start_time > 0);
        assert_eq!(r.uid(me).unwrap(), unsafe { libc::getuid() });
        assert!(r.threads(me).unwrap().contains(&me));
        assert!(r.io(me).unwrap().rchar > 0);
        // cpu_ns sums the live threads, so this test process (whose other test threads come and
        // go) would not do: a spinning child of its own has one thread that never exits.
        let mut spinner = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = spinner.id() as i32;
        let before = r.cpu_ns(pid).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while r.cpu_ns(pid).unwrap() <= before && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let after = r.cpu_ns(pid).unwrap();
        spinner.kill().unwrap();
        spinner.wait().unwrap();
        assert!(
            after > before,
            "a spinning child's CPU clock stood still for 20 s"
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let kid = child.id() as i32;
        assert!(r.children(me).unwrap().contains(&kid));
        assert!(r.descendants(me).unwrap().starts_with(&[me]));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
