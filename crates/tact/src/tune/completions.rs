//! Counting the jobs an unmodified program finishes, by watching its processes (or a counter
//! file it keeps, or the reports of jobs run through `tact exec-wrap`), and how many it runs
//! right now.
//!
//! There is no unprivileged way to be told of every exit in another process's tree (the proc
//! connector and BPF need privileges), so the tree is polled: a process seen at one poll and
//! gone at a later one finished. A job that starts and ends between two polls is missed; the
//! poll period (a few milliseconds) is far below the length of the jobs worth tuning. Jobs that
//! report themselves ([`super::wrap`]) are all counted, with exact latencies.
//!
//! A recursive make's sub-makes are not jobs: a jobserver token stands for one recipe, and a
//! sub-make runs its own recipes with tokens of the same jobserver. So with `children`, a child
//! named make or gmake, or one that runs such a make (the shell of `cd sub && $(MAKE)`, which
//! stays the sub-make's parent), is looked through: its children are the jobs (and so on down),
//! and its own exit counts nothing. Counting the sub-makes instead, a two-level build finished
//! "2 jobs" and TCC never had a sample to decide by.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tact_linux::probe::proc::ProcReader;
use tact_linux::{ProgressMeter, ProgressSource};

use super::jobserver::is_make;
use super::wrap::Listener;

/// What counts as one finished job (`--completions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counting {
    /// A direct child of the command's process exits (make's recipes, parallel's jobs), or of a
    /// make below it (a recursive make's recipes; the sub-make itself is not a job).
    Children,
    /// Any process below the command exits (recursive makes, scripts that fork).
    Tree,
    /// The last number in a file the program keeps rises.
    File(PathBuf),
    /// A job run through `tact exec-wrap` reports its end.
    Wrap,
}

/// `--completions`: `children`, `tree`, `file:PATH` or `wrap`.
pub fn parse_counting(s: &str) -> Result<Counting, String> {
    match s {
        "children" => Ok(Counting::Children),
        "tree" => Ok(Counting::Tree),
        "wrap" => Ok(Counting::Wrap),
        _ => match s.strip_prefix("file:") {
            Some(path) if !path.is_empty() => Ok(Counting::File(path.into())),
            _ => Err(format!(
                "`{s}` is not a completion source (valid: children, tree, file:PATH, wrap)"
            )),
        },
    }
}

impl Counting {
    /// Refuses, before the command starts, a counter file that can never be read (one that
    /// does not exist yet is fine when its directory exists: the program creates it), and a
    /// command that is itself `tact exec-wrap` (it would report the whole run as one job).
    pub fn check(&self, command: &[String]) -> Result<()> {
        let path = match self {
            Counting::File(path) => path,
            Counting::Wrap => return check_wrapped(command),
            Counting::Children | Counting::Tree => return Ok(()),
        };
        match std::fs::read(path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                if !dir.is_dir() {
                    bail!(
                        "--completions file:{}: directory {} does not exist",
                        path.display(),
                        dir.display()
                    );
                }
                Ok(())
            }
            Err(e) => bail!("--completions file:{}: cannot read it: {e}", path.display()),
        }
    }
}

/// `--completions wrap` counts the command's jobs: wrapping the command itself counts one.
fn check_wrapped(command: &[String]) -> Result<()> {
    let program = command.first().map(|c| Path::new(c).file_name());
    if program == Some(Some("tact".as_ref()))
        && command.get(1).map(String::as_str) == Some("exec-wrap")
    {
        bail!(
            "--completions wrap: the command is `tact exec-wrap` itself, which would report the \
             whole run as one job; wrap each of its jobs instead (e.g. make SHELL='tact \
             exec-wrap /bin/sh', xargs ... tact exec-wrap -- CMD)"
        );
    }
    Ok(())
}

/// How often a job is looked at again: its name (a child of make is named make from its fork
/// until its exec, and a shell may exec a make) and whether it runs a make (`sh -c 'cd sub &&
/// make'`). A sub-make is recognised within this long, while a poll in between reads only the
/// makes' children and the new processes' names.
const RECHECK: Duration = Duration::from_millis(20);

/// A live process of the command's tree.
#[derive(Debug, Clone, Copy)]
struct Seen {
    ppid: i32,
    /// The poll that found it (its lifetime is measured from there, to within a poll period).
    since: Instant,
    /// With `children`: it is a make, or runs one, so it is no job and its children are
    /// looked at.
    through: bool,
    /// It is no make but ran one (the shell of `cd sub && $(MAKE)`): looked through until it
    /// exits. Between its make's exit and its own it runs none, and judged afresh then it
    /// would end as a job (one too many, in CI's recursive-make test).
    ran_make: bool,
    /// When it was last looked at.
    named: Instant,
}

/// Counts finished jobs of the tree rooted at the command's process, and its running jobs.
pub struct Completions {
    reader: ProcReader,
    /// Watch every descendant, not only the root's children.
    deep: bool,
    /// The processes alive at the last poll (the root excluded).
    alive: HashMap<i32, Seen>,
    /// The counter file and how much of it was counted.
    file: Option<(ProgressMeter, u64)>,
    /// A counter-file error was reported (once; later ones are the same story).
    file_warned: bool,
    /// The socket wrapped jobs report to: with it, the tree is not looked at.
    wrap: Option<Listener>,
}

impl Completions {
    /// Call before the command starts: a counter file is read now, so that what it holds
    /// already is not counted, while everything in a file created later is; wrapped jobs'
    /// socket listens from now on.
    pub fn new(counting: &Counting) -> Result<Self> {
        let reader = ProcReader::new();
        let mut file_warned = false;
        let file = match counting {
            Counting::File(path) => {
                let source = ProgressSource::File(path.clone());
                let mut meter = ProgressMeter::new(reader.clone(), vec![source]);
                let mut counted = 0;
                read_counter(&mut meter, &mut counted, &mut file_warned);
                Some((meter, counted))
            }
            Counting::Children | Counting::Tree | Counting::Wrap => None,
        };
        let wrap = match counting {
            Counting::Wrap => Some(Listener::open()?),
            _ => None,
        };
        Ok(Completions {
            reader,
            deep: *counting == Counting::Tree,
            alive: HashMap::new(),
            file,
            file_warned,
            wrap,
        })
    }

    /// Tells the command where wrapped jobs report.
    pub fn prepare(&self, command: &mut Command) {
        if let Some(wrap) = &self.wrap {
            wrap.prepare(command);
        }
    }

    /// Looks at the tree of `root` (and the counter file) at `now` and returns one entry per
    /// job finished since the last call: its lifetime as seen, or none from a counter file.
    /// Call once more after the command exited, to count its last jobs.
    pub fn poll(&mut self, root: i32, now: Instant) -> Result<Vec<Option<Duration>>> {
        if let Some(wrap) = &mut self.wrap {
            return Ok(wrap.drain()?.into_iter().map(Some).collect());
        }
        let mut alive = if self.deep {
            self.tree(root, now)?
        } else {
            self.jobs(root, now)?
        };
        self.keep_unlisted(root, now, &mut alive)?;
        // A make's exit is no job's end (with `tree`, every process's is).
        let exited: Vec<Option<Duration>> = self
            .alive
            .iter()
            .filter(|(pid, seen)| !alive.contains_key(pid) && !seen.through)
            .map(|(_, seen)| Some(now.saturating_duration_since(seen.since)))
            .collect();
        self.alive = alive;
        match &mut self.file {
            None => Ok(exited),
            Some((meter, counted)) => {
                let n = read_counter(meter, counted, &mut self.file_warned);
                Ok(vec![None; n as usize])
            }
        }
    }

    /// Keeps in `alive` the processes seen at the last poll that this listing missed but that
    /// still live under the same parent. A `/proc/PID/task/TID/children` file may skip a live
    /// child while an older sibling exits (the kernel walks the list by position between
    /// reads; 4 skips in 265,000 reads of a shell forking short jobs here): counted as ended,
    /// such a job counted again at its real end (31 of 30 recipes in CI's recursive-make test).
    /// With `children`, only a job of the root or of a make looked through is kept: the
    /// children of a process that turned out to be a job are part of that job.
    fn keep_unlisted(&self, root: i32, now: Instant, alive: &mut HashMap<i32, Seen>) -> Result<()> {
        for (&pid, seen) in &self.alive {
            if alive.contains_key(&pid) {
                continue;
            }
            let parent_through = seen.ppid == root
                || alive
                    .get(&seen.ppid)
                    .or_else(|| self.alive.get(&seen.ppid))
                    .is_some_and(|parent| parent.through);
            if !(self.deep || parent_through) {
                continue;
            }
            if self.look(pid, now)?.is_some_and(|s| s.ppid == seen.ppid) {
                alive.insert(pid, *seen);
            }
        }
        Ok(())
    }

    /// Every live process below `root`.
    fn tree(&self, root: i32, now: Instant) -> Result<HashMap<i32, Seen>> {
        let pids = match self.reader.descendants(root) {
            Ok(pids) => pids,
            // The root exited and was reaped: everything seen is gone.
            Err(tact_linux::Error::NoProcess { .. }) => Vec::new(),
            Err(e) => return Err(e).context("cannot list the command's processes"),
        };
        let mut alive = HashMap::with_capacity(pids.len());
        for pid in pids.into_iter().filter(|&p| p != root) {
            if let Some(seen) = self.alive.get(&pid) {
                alive.insert(pid, *seen);
            } else if let Some(seen) = self.look(pid, now)? {
                alive.insert(
                    pid,
                    Seen {
                        through: false,
                        ..seen
                    },
                );
            }
        }
        Ok(alive)
    }

    /// The live children of `root`, and of every make among them, and so on down: the jobs,
    /// and the makes looked through.
    fn jobs(&self, root: i32, now: Instant) -> Result<HashMap<i32, Seen>> {
        let mut alive: HashMap<i32, Seen> = HashMap::new();
        let mut parents = vec![root];
        while let Some(parent) = parents.pop() {
            let pids = match self.reader.children(parent) {
                Ok(pids) => pids,
                // Gone since it was seen (the root too, once reaped): its children with it.
                Err(tact_linux::Error::NoProcess { .. }) => continue,
                Err(e) => return Err(e).context("cannot list the command's processes"),
            };
            // A make's child is named make from its fork until its exec: one seen so may have
            // exec'd a recipe's shell and forked that shell's first command before its children
            // were listed, which would count that command as a job too (one job too many under
            // load in CI). So its children count only if it is still a make (or runs one) after
            // the listing; otherwise it is the job.
            if parent != root {
                let before = alive.get(&parent).copied();
                match self.look_through(parent, now, before.as_ref())? {
                    Some(again) if again.through => {}
                    Some(again) => {
                        if let Some(seen) = alive.get_mut(&parent) {
                            *seen = Seen {
                                since: seen.since,
                                ..again
                            };
                        }
                        continue;
                    }
                    None => continue,
                }
            }
            for pid in pids {
                let seen = match self.alive.get(&pid) {
                    // Looked at recently as a job: still one (a make's name is read every
                    // poll, so that a fork on its way to exec another program becomes a job).
                    Some(seen) if !seen.through && now < seen.named + RECHECK => Some(*seen),
                    Some(seen) => self.look_through(pid, now, Some(seen))?.map(|named| Seen {
                        since: seen.since,
                        ..named
                    }),
                    None => self.look_through(pid, now, None)?,
                };
                let Some(seen) = seen else { continue };
                if seen.through {
                    parents.push(pid);
                }
                alive.insert(pid, seen);
            }
        }
        Ok(alive)
    }

    /// [`Self::look`], and whether a process that is no make runs one among its children (or
    /// ran one when it was looked at `before`).
    fn look_through(&self, pid: i32, now: Instant, before: Option<&Seen>) -> Result<Option<Seen>> {
        let Some(seen) = self.look(pid, now)? else {
            return Ok(None);
        };
        if seen.through {
            return Ok(Some(seen));
        }
        if before.is_some_and(|b| b.ran_make) {
            return Ok(Some(Seen {
                through: true,
                ran_make: true,
                ..seen
            }));
        }
        let children = match self.reader.children(pid) {
            Ok(children) => children,
            Err(tact_linux::Error::NoProcess { .. }) => return Ok(None),
            Err(e) => return Err(e).context("cannot list the command's processes"),
        };
        let mut through = false;
        for child in children {
            through |= self.look(child, now)?.is_some_and(|c| c.through);
        }
        Ok(Some(Seen {
            through,
            ran_make: through,
            ..seen
        }))
    }

    /// A process found alive at `now`, with its name read (`through`: it is a make); None when
    /// it has exited.
    fn look(&self, pid: i32, now: Instant) -> Result<Option<Seen>> {
        match self.reader.stat(pid) {
            Ok(s) if !s.is_dead() => Ok(Some(Seen {
                ppid: s.ppid,
                since: now,
                through: is_make(&s.comm),
                ran_make: false,
                named: now,
            })),
            // Exited between the listing and the read: never seen alive, not counted.
            Ok(_) | Err(tact_linux::Error::NoProcess { .. }) => Ok(None),
            Err(e) => Err(e).context("cannot read a process of the command"),
        }
    }

    /// Jobs running as of the last poll: wrapped jobs started and not ended, else the live
    /// children of `root` (with `children`, those of the makes below it instead of the makes;
    /// helpers count too: a program that keeps helper processes runs that many more "jobs"
    /// than it works on).
    pub fn running(&self, root: i32) -> usize {
        match &self.wrap {
            Some(wrap) => wrap.running(),
            None if self.deep => self.alive.values().filter(|s| s.ppid == root).count(),
            None => self.alive.values().filter(|s| !s.through).count(),
        }
    }

    /// What to tell the user at the end about the jobs counted (wrapped jobs only).
    pub fn note(&self) -> Option<String> {
        self.wrap.as_ref().and_then(Listener::note)
    }
}

/// The counter's rise since the last read, in whole jobs. A file that is missing (not created
/// yet) or half-written (no number) counts nothing this time; other failures are reported once.
fn read_counter(meter: &mut ProgressMeter, counted: &mut u64, warned: &mut bool) -> u64 {
    match meter.sample(&[]) {
        Ok(totals) => {
            let total = totals[0].max(0.0) as u64;
            let new = total.saturating_sub(*counted);
            *counted = total.max(*counted);
            new
        }
        Err(tact_linux::Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => 0,
        Err(tact_linux::Error::Parse { .. }) => 0,
        Err(e) => {
            if !std::mem::replace(warned, true) {
                tracing::warn!("--completions: {e}");
            }
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_bad_ones_name_the_choices() {
        assert_eq!(parse_counting("children"), Ok(Counting::Children));
        assert_eq!(parse_counting("tree"), Ok(Counting::Tree));
        assert_eq!(
            parse_counting("file:/tmp/n"),
            Ok(Counting::File("/tmp/n".into()))
        );
        assert_eq!(parse_counting("wrap"), Ok(Counting::Wrap));
        for bad in ["file:", "exits", "", "wrap:x"] {
            let e = parse_counting(bad).unwrap_err();
            assert!(e.contains("children, tree, file:PATH, wrap"), "{e}");
        }
    }

    #[test]
    fn a_counter_file_is_checked_before_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("created-later");
        assert!(Counting::File(later).check(&[]).is_ok());
        let nowhere = dir.path().join("no/such/dir/n");
        let e = Counting::File(nowhere).check(&[]).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = Counting::File(dir.path().into())
            .check(&[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn wrapping_the_command_itself_is_refused() {
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        for wrapped in [
            argv(&["tact", "exec-wrap", "--", "make"]),
            argv(&["/usr/local/bin/tact", "exec-wrap", "make"]),
        ] {
            let e = Counting::Wrap.check(&wrapped).unwrap_err().to_string();
            assert!(e.contains("whole run as one job"), "{e}");
        }
        let make = argv(&["make", "SHELL=tact exec-wrap /bin/sh"]);
        assert!(Counting::Wrap.check(&make).is_ok());
        assert!(Counting::Children
            .check(&argv(&["tact", "exec-wrap", "x"]))
            .is_ok());
    }

    /// A fixture `/proc`: `pid`'s stat (name, state, parent) and its children file.
    fn process(proc: &Path, pid: i32, comm: &str, state: char, ppid: i32, children: &[i32]) {
        let task = proc.join(format!("{pid}/task/{pid}"));
        std::fs::create_dir_all(&task).unwrap();
        let stat = format!(
            "{pid} ({comm}) {state} {ppid} {ppid} 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0"
        );
        std::fs::write(proc.join(format!("{pid}/stat")), stat).unwrap();
        let kids: Vec<String> = children.iter().map(i32::to_string).collect();
        std::fs::write(task.join("children"), kids.join(" ")).unwrap();
    }

    #[test]
    fn a_job_a_listing_skips_while_it_lives_ends_once() {
        for counting in [Counting::Children, Counting::Tree] {
            let dir = tempfile::tempdir().unwrap();
            let proc = dir.path();
            let mut jobs = Completions::new(&counting).unwrap();
            jobs.reader = ProcReader::with_root(proc);
            let t0 = Instant::now();
            let at = |ms| t0 + Duration::from_millis(ms);
            // make (10) runs a sub-make (11) whose recipes are 12 and 13.
            process(proc, 10, "make", 'S', 1, &[11]);
            process(proc, 11, "make", 'S', 10, &[12, 13]);
            process(proc, 12, "sh", 'S', 11, &[]);
            process(proc, 13, "sh", 'S', 11, &[]);
            assert!(jobs.poll(10, at(0)).unwrap().is_empty());
            // The children files skip 13, then the sub-make, all alive: nothing ended.
            process(proc, 11, "make", 'S', 10, &[12]);
            assert!(jobs.poll(10, at(2)).unwrap().is_empty(), "{counting:?}");
            process(proc, 10, "make", 'S', 1, &[]);
            assert!(jobs.poll(10, at(4)).unwrap().is_empty(), "{counting:?}");
            // 12 ends and is reaped, then 13: two jobs, each counted once.
            process(proc, 10, "make", 'S', 1, &[11]);
            process(proc, 11, "make", 'S', 10, &[13]);
            std::fs::remove_dir_all(proc.join("12")).unwrap();
            assert_eq!(jobs.poll(10, at(6)).unwrap().len(), 1, "{counting:?}");
            process(proc, 11, "make", 'S', 10, &[]);
            std::fs::remove_dir_all(proc.join("13")).unwrap();
            assert_eq!(jobs.poll(10, at(8)).unwrap().len(), 1, "{counting:?}");
            assert_eq!(jobs.running(10), usize::from(counting == Counting::Tree));
        }
    }

    #[test]
    fn a_shell_that_ran_a_sub_make_is_no_job_after_the_make_ends() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path();
        let mut jobs = Completions::new(&Counting::Children).unwrap();
        jobs.reader = ProcReader::with_root(proc);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // make (10) runs `cd b && $(MAKE)`: a shell (11) whose make (12) runs recipe 13.
        process(proc, 10, "make", 'S', 1, &[11]);
        process(proc, 11, "sh", 'S', 10, &[12]);
        process(proc, 12, "make", 'S', 11, &[13]);
        process(proc, 13, "sh", 'S', 12, &[]);
        assert!(jobs.poll(10, at(0)).unwrap().is_empty());
        // The recipe ends, then the sub-make: one job.
        std::fs::remove_dir_all(proc.join("13")).unwrap();
        process(proc, 12, "make", 'S', 11, &[]);
        assert_eq!(jobs.poll(10, at(2)).unwrap().len(), 1);
        std::fs::remove_dir_all(proc.join("12")).unwrap();
        process(proc, 11, "sh", 'S', 10, &[]);
        // The shell, still alive a poll after (past RECHECK), and its exit are no job.
        assert!(jobs.poll(10, at(30)).unwrap().is_empty());
        assert_eq!(jobs.running(10), 0);
        std::fs::remove_dir_all(proc.join("11")).unwrap();
        process(proc, 10, "make", 'S', 1, &[]);
        assert!(jobs.poll(10, at(60)).unwrap().is_empty());
    }

    #[test]
    fn the_counter_counts_its_rise_in_whole_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        let mut meter =
            ProgressMeter::new(ProcReader::new(), vec![ProgressSource::File(path.clone())]);
        let (mut counted, mut warned) = (0, false);
        // Missing at first: created by the program later, and then all of it counts.
        assert_eq!(read_counter(&mut meter, &mut counted, &mut warned), 0);
        std::fs::write(&path, "done 3\n").unwrap();
        assert_eq!(read_counter(&mut meter, &mut counted, &mut warned), 3);
        std::fs::write(&path, "").unwrap();
        assert_eq!(read_counter(&mut meter, &mut counted, &mut warned), 0);
        std::fs::write(&path, "done 7\n").unwrap();
        assert_eq!(read_counter(&mut meter, &mut counted, &mut warned), 4);
        assert!(!warned);
    }
}
