//! Progress of unmodified programs (spec 5.1): counters summed over a job's process tree and
//! turned into cumulative totals that never run backwards, whatever the members do.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::probe::proc::{ProcId, ProcReader};

/// Where a job's progress is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressSource {
    /// `io`: rchar + wchar (syscall bytes, page-cache hits included, so a job whose data is
    /// cached still shows progress).
    Io,
    /// `io-read`: rchar.
    IoRead,
    /// `io-write`: wchar.
    IoWrite,
    /// `io-storage`: read_bytes + write_bytes (device traffic only; written bytes count when
    /// they are dirtied, also those the kernel later drops unwritten: the job did the work).
    IoStorage,
    /// cancelled_write_bytes: written bytes the kernel dropped before they reached the device (a
    /// file deleted or truncated while its pages were dirty). Not a progress metric (`--progress`
    /// does not take it): `tact run --idle disk` takes them back from the job's device bytes.
    IoCancelled,
    /// `cpu`: nanoseconds on CPU (schedstat field 1). Only for CPU-bound jobs doing constant work
    /// per CPU-second: CPU time rises under cache contention.
    Cpu,
    /// `file:PATH`: the last number in a file the program keeps up to date.
    File(PathBuf),
}

impl FromStr for ProgressSource {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "io" => ProgressSource::Io,
            "io-read" => ProgressSource::IoRead,
            "io-write" => ProgressSource::IoWrite,
            "io-storage" => ProgressSource::IoStorage,
            "cpu" => ProgressSource::Cpu,
            _ => match s.strip_prefix("file:") {
                Some(path) if !path.is_empty() => ProgressSource::File(path.into()),
                _ => return Err(Error::UnknownSource(s.to_string())),
            },
        })
    }
}

impl fmt::Display for ProgressSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressSource::Io => f.write_str("io"),
            ProgressSource::IoRead => f.write_str("io-read"),
            ProgressSource::IoWrite => f.write_str("io-write"),
            ProgressSource::IoStorage => f.write_str("io-storage"),
            ProgressSource::IoCancelled => f.write_str("io-cancelled"),
            ProgressSource::Cpu => f.write_str("cpu"),
            ProgressSource::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

impl ProgressSource {
    /// Whether this source is counted per process (as opposed to once per job).
    fn per_member(&self) -> bool {
        !matches!(self, ProgressSource::File(_))
    }
}

/// The last counts seen for one tree member, one per source (unused for `file:` sources).
#[derive(Debug)]
struct MemberCounts {
    ppid: i32,
    last: Vec<u64>,
}

/// Cumulative progress of a job's tree since the meter's first sample, one total per source.
///
/// Rules, so that the totals never run backwards:
/// * members present at the first sample start from their current counts;
/// * a member first seen later was born during the job and contributes all its counts;
/// * a member that exits keeps what it contributed;
/// * a counter that drops (a thread exited and took its schedstat with it) rebases that member
///   and contributes nothing for that sample.
///
/// `/proc/PID/io` of a parent includes the counts of the children it has waited for. When a
/// member exits and its last known parent is a member, the parent's baseline is raised by the
/// child's last counts, so that what was counted through the child is not counted again. What
/// remains inexact: (a) a child reaped between the meter reading it and reading its parent in
/// the same sample is counted twice for that sample (the parent then rebases, so the error does
/// not grow); (b) io of a member reaped by a process outside the tree after its last sample is
/// lost; (c) `cpu` loses the time of threads and processes that exit between samples, since
/// schedstat is not folded into anything. A cgroup's `io.stat`/`cpu.stat` has none of these.
#[derive(Debug)]
pub struct ProgressMeter {
    reader: ProcReader,
    sources: Vec<ProgressSource>,
    members: HashMap<ProcId, MemberCounts>,
    /// Last value of each `file:` source (None until first read), indexed like `sources`.
    files: Vec<Option<f64>>,
    totals: Vec<f64>,
    /// `sample` was called before (even if it failed): a file readable only from now on was
    /// created during the job.
    called: bool,
    /// Members were read before: members seen from now on were born during the job.
    started: bool,
}

impl ProgressMeter {
    /// A meter of `sources`, reading processes through `reader`.
    pub fn new(reader: ProcReader, sources: Vec<ProgressSource>) -> Self {
        let n = sources.len();
        ProgressMeter {
            reader,
            sources,
            members: HashMap::new(),
            files: vec![None; n],
            totals: vec![0.0; n],
            called: false,
            started: false,
        }
    }

    /// The sources, in the order of the totals.
    pub fn sources(&self) -> &[ProgressSource] {
        &self.sources
    }

    /// Reads every source for the current tree `members` (as given by `JobTree::members`,
    /// parents before children) and returns the cumulative totals since the first call. Members
    /// that exited since are skipped; a `file:` source that cannot be read or holds no number is
    /// an error naming the file (the totals are then left as they were). A file that cannot be
    /// read at the first call counts from 0 once it can (it was created during the job); one
    /// that holds no number then (caught mid-rewrite: `echo $n > FILE` empties it first) leaves
    /// the baseline to the next call.
    pub fn sample(&mut self, members: &[ProcId]) -> Result<Vec<f64>> {
        let first_call = !self.called;
        // Read the files first: an error must leave the counts unchanged.
        let mut file_values = vec![None; self.sources.len()];
        for (i, source) in self.sources.iter().enumerate() {
            if let ProgressSource::File(path) = source {
                match last_number_in(path) {
                    Ok(value) => file_values[i] = Some(value),
                    Err(e) => {
                        self.called |= !matches!(e, Error::Parse { .. });
                        return Err(e);
                    }
                }
            }
        }
        self.called = true;
        let seen = self.read_members(members)?;
        let baseline = !self.started;
        self.started = true;

        for (i, value) in file_values.into_iter().enumerate() {
            let Some(value) = value else { continue };
            // A file first readable after the start was created during the job: count it all.
            let last = self.files[i].unwrap_or(if first_call { value } else { 0.0 });
            if value >= last {
                self.totals[i] += value - last;
            }
            self.files[i] = Some(value);
        }

        // Members gone since the last sample: if their parent is still a member, the kernel
        // folds their io into the parent when it reaps them; raise the parent's baseline.
        let seen_ids: HashSet<ProcId> = seen.iter().map(|(id, _, _)| *id).collect();
        let gone: Vec<ProcId> = self
            .members
            .keys()
            .filter(|id| !seen_ids.contains(id))
            .copied()
            .collect();
        for id in gone {
            let child = self.members.remove(&id).expect("key listed above");
            if let Some(parent) = self.members.iter_mut().find(|(p, _)| p.pid == child.ppid) {
                for (i, source) in self.sources.iter().enumerate() {
                    if source.per_member() && *source != ProgressSource::Cpu {
                        parent.1.last[i] += child.last[i];
                    }
                }
            }
        }

        for (id, ppid, counts) in seen {
            let entry = self.members.entry(id).or_insert_with(|| MemberCounts {
                ppid,
                // Present at the start: count from now. Born later: count everything.
                last: if baseline {
                    counts.clone()
                } else {
                    vec![0; counts.len()]
                },
            });
            entry.ppid = ppid;
            for (i, source) in self.sources.iter().enumerate() {
                if !source.per_member() {
                    continue;
                }
                if let Some(delta) = counts[i].checked_sub(entry.last[i]) {
                    self.totals[i] += delta as f64;
                }
                // On a drop this is the rebase: the member restarts from its current count.
                entry.last[i] = counts[i];
            }
        }
        Ok(self.totals.clone())
    }

    /// Reads every per-member source of each live member, children before parents so that a
    /// child found gone was reaped before its parent's counters were read.
    fn read_members(&self, members: &[ProcId]) -> Result<Vec<(ProcId, i32, Vec<u64>)>> {
        let needs_io = self.sources.iter().any(|s| {
            matches!(
                s,
                ProgressSource::Io
                    | ProgressSource::IoRead
                    | ProgressSource::IoWrite
                    | ProgressSource::IoStorage
                    | ProgressSource::IoCancelled
            )
        });
        let needs_cpu = self.sources.contains(&ProgressSource::Cpu);
        let mut out = Vec::with_capacity(members.len());
        for &id in members.iter().rev() {
            match self.read_member(id, needs_io, needs_cpu) {
                Ok(Some((ppid, counts))) => out.push((id, ppid, counts)),
                Ok(None) | Err(Error::NoProcess { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// One member's counts, or None if its pid now names another process or it has exited.
    fn read_member(&self, id: ProcId, io: bool, cpu: bool) -> Result<Option<(i32, Vec<u64>)>> {
        let stat = self.reader.stat(id.pid)?;
        if stat.start_time != id.start_time || stat.is_dead() {
            return Ok(None);
        }
        let io = if io {
            Some(self.reader.io(id.pid)?)
        } else {
            None
        };
        let cpu = if cpu { self.reader.cpu_ns(id.pid)? } else { 0 };
        let io = io.unwrap_or_default();
        let counts = self
            .sources
            .iter()
            .map(|s| match s {
                ProgressSource::Io => io.rchar + io.wchar,
                ProgressSource::IoRead => io.rchar,
                ProgressSource::IoWrite => io.wchar,
                ProgressSource::IoStorage => io.read_bytes + io.write_bytes,
                ProgressSource::IoCancelled => io.cancelled_write_bytes,
                ProgressSource::Cpu => cpu,
                ProgressSource::File(_) => 0,
            })
            .collect();
        // Checked after reading: if the pid was recycled meanwhile, these counts are not ours.
        if self.reader.stat(id.pid)?.start_time != id.start_time {
            return Ok(None);
        }
        Ok(Some((stat.ppid, counts)))
    }
}

/// The last number (integer or decimal, optionally signed) in the file at `path`.
fn last_number_in(path: &Path) -> Result<f64> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .filter_map(|word| word.parse::<f64>().ok().filter(|v| v.is_finite()))
        .next_back()
        .ok_or_else(|| Error::parse(path, text.lines().count().max(1), "no number in the file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        /// Writes a process with io counters rchar/wchar and one thread with `cpu` ns.
        fn process(&self, pid: i32, ppid: i32, start: u64, rchar: u64, wchar: u64, cpu: u64) {
            let dir = self.dir.path().join(pid.to_string());
            fs::create_dir_all(dir.join(format!("task/{pid}"))).unwrap();
            fs::write(
                dir.join("stat"),
                format!("{pid} (p) S {ppid} 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0 0\n"),
            )
            .unwrap();
            fs::write(
                dir.join("io"),
                format!(
                    "rchar: {rchar}\nwchar: {wchar}\nsyscr: 0\nsyscw: 0\nread_bytes: {}\n\
                     write_bytes: 0\n",
                    rchar / 2
                ),
            )
            .unwrap();
            fs::write(
                dir.join(format!("task/{pid}/schedstat")),
                format!("{cpu} 0 0\n"),
            )
            .unwrap();
        }

        fn exit(&self, pid: i32) {
            fs::remove_dir_all(self.dir.path().join(pid.to_string())).unwrap();
        }

        fn meter(&self, sources: &[&str]) -> ProgressMeter {
            ProgressMeter::new(
                ProcReader::with_root(self.dir.path()),
                sources.iter().map(|s| s.parse().unwrap()).collect(),
            )
        }
    }

    fn id(pid: i32, start_time: u64) -> ProcId {
        ProcId { pid, start_time }
    }

    #[test]
    fn parse_and_display_round_trip() {
        for s in [
            "io",
            "io-read",
            "io-write",
            "io-storage",
            "cpu",
            "file:/tmp/a:b",
        ] {
            assert_eq!(s.parse::<ProgressSource>().unwrap().to_string(), s);
        }
        let err = "iops".parse::<ProgressSource>().unwrap_err().to_string();
        assert!(!err.contains('\n'));
        assert!(err.contains("`iops`") && err.contains("io-storage") && err.contains("file:PATH"));
        assert!("file:".parse::<ProgressSource>().is_err());
    }

    #[test]
    fn members_at_start_count_from_now_and_newborns_count_everything() {
        let f = Fixture::new();
        f.process(10, 1, 100, 1000, 500, 7);
        let mut m = f.meter(&["io", "io-read", "io-write", "io-storage", "cpu"]);
        assert_eq!(m.sample(&[id(10, 100)]).unwrap(), vec![0.0; 5]);
        f.process(10, 1, 100, 1100, 510, 9);
        f.process(11, 10, 200, 40, 2, 3);
        let t = m.sample(&[id(10, 100), id(11, 200)]).unwrap();
        assert_eq!(t, vec![152.0, 140.0, 12.0, 70.0, 5.0]);
    }

    #[test]
    fn exit_of_a_member_keeps_its_contribution_and_reaping_is_not_double_counted() {
        let f = Fixture::new();
        f.process(10, 1, 100, 0, 0, 0);
        let mut m = f.meter(&["io", "cpu"]);
        m.sample(&[id(10, 100)]).unwrap();
        f.process(11, 10, 200, 300, 0, 50);
        assert_eq!(
            m.sample(&[id(10, 100), id(11, 200)]).unwrap(),
            vec![300.0, 50.0]
        );
        // The child did 20 more bytes, exited, and the parent reaped it: the kernel folded its
        // 320 bytes into the parent's counters. The parent did 5 bytes of its own.
        f.exit(11);
        f.process(10, 1, 100, 325, 0, 10);
        assert_eq!(m.sample(&[id(10, 100)]).unwrap(), vec![325.0, 60.0]);
    }

    #[test]
    fn drops_rebase_and_recycled_pids_are_new_members() {
        let f = Fixture::new();
        f.process(10, 1, 100, 500, 0, 900);
        let mut m = f.meter(&["io", "cpu"]);
        m.sample(&[id(10, 100)]).unwrap();
        // A thread exited: cpu drops. That contributes nothing, and counting restarts from 400.
        f.process(10, 1, 100, 510, 0, 400);
        assert_eq!(m.sample(&[id(10, 100)]).unwrap(), vec![10.0, 0.0]);
        f.process(10, 1, 100, 510, 0, 450);
        assert_eq!(m.sample(&[id(10, 100)]).unwrap(), vec![10.0, 50.0]);
        // Pid 10 now names another process: the old member's identity does not match it.
        f.process(10, 1, 999, 5, 0, 5);
        assert_eq!(m.sample(&[id(10, 100)]).unwrap(), vec![10.0, 50.0]);
    }

    #[test]
    fn file_source_takes_the_last_number() {
        let f = Fixture::new();
        let path = f.dir.path().join("progress");
        fs::write(&path, "done 10 of 200\nitems: 12.5\n").unwrap();
        let mut m = f.meter(&[&format!("file:{}", path.display())]);
        assert_eq!(m.sample(&[]).unwrap(), vec![0.0]);
        fs::write(&path, "items 20\n").unwrap();
        assert_eq!(m.sample(&[]).unwrap(), vec![7.5]);
        fs::write(&path, "items 3\n").unwrap(); // counter reset: rebase
        assert_eq!(m.sample(&[]).unwrap(), vec![7.5]);
        fs::write(&path, "no numbers here\n").unwrap();
        let err = m.sample(&[]).unwrap_err().to_string();
        assert!(
            err.contains("progress") && err.contains("no number"),
            "{err}"
        );
        fs::remove_file(&path).unwrap();
        let err = m.sample(&[]).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        fs::write(&path, "4\n").unwrap();
        assert_eq!(m.sample(&[]).unwrap(), vec![8.5]);
    }

    #[test]
    fn a_file_without_a_number_at_the_start_leaves_the_baseline_to_the_next_read() {
        let f = Fixture::new();
        let path = f.dir.path().join("ms");
        fs::write(&path, "").unwrap();
        let mut m = f.meter(&[&format!("file:{}", path.display())]);
        assert!(m.sample(&[]).is_err());
        fs::write(&path, "1764000000000\n").unwrap();
        assert_eq!(
            m.sample(&[]).unwrap(),
            vec![0.0],
            "the baseline, not progress"
        );
        fs::write(&path, "1764000000250\n").unwrap();
        assert_eq!(m.sample(&[]).unwrap(), vec![250.0]);
    }

    #[test]
    fn file_created_after_the_start_counts_everything() {
        let f = Fixture::new();
        let path = f.dir.path().join("later");
        let mut m = f.meter(&[&format!("file:{}", path.display()), "io"]);
        assert!(m.sample(&[]).is_err());
        fs::write(&path, "30").unwrap();
        assert_eq!(m.sample(&[]).unwrap(), vec![30.0, 0.0]);
    }

    #[test]
    fn real_process_cpu_progress() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let reader = ProcReader::new();
        let pid = child.id() as i32;
        let member = reader.stat(pid).unwrap().id();
        let mut m = ProgressMeter::new(reader, vec![ProgressSource::Cpu, ProgressSource::Io]);
        let first = m.sample(&[member]).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut last = first.clone();
        while last[0] <= 0.0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let now = m.sample(&[member]).unwrap();
            assert!(now[0] >= last[0] && now[1] >= last[1]);
            last = now;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(last[0] > 0.0, "a busy loop made no cpu progress");
        // After the member exited, the totals stay.
        assert_eq!(m.sample(&[member]).unwrap(), last);
    }
}
