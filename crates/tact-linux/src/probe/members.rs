//! Members of share principals (spec proportional-share §2, "Principals"): the processes of
//! `uid:U` (real uid from `/proc/PID/status`) and of `cgroup:PATH` (`cgroup.procs`). `tree:PID`
//! is [`crate::JobTree`]. A scan never includes tact itself, its ancestors (otherwise `uid:` of the
//! invoking user would stop the user's shell), pids the caller excludes (the watchdog), PID 1,
//! kernel threads or zombies.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use crate::error::{Error, Result};
use crate::probe::proc::ProcReader;

/// Lists the members of principal selectors in a procfs.
#[derive(Debug, Clone)]
pub struct MemberScan {
    reader: ProcReader,
    exclude: HashSet<i32>,
}

impl MemberScan {
    /// Scans the real `/proc`, leaving out this process and its ancestors.
    pub fn new() -> Result<MemberScan> {
        Self::with_reader(ProcReader::new(), std::process::id() as i32)
    }

    /// Scans `reader`'s procfs, leaving out `me` and its ancestors (found by following ppids).
    pub fn with_reader(reader: ProcReader, me: i32) -> Result<MemberScan> {
        let mut exclude = HashSet::from([1]);
        let mut pid = me;
        while pid > 0 && exclude.insert(pid) {
            pid = match reader.stat(pid) {
                Ok(stat) => stat.ppid,
                Err(Error::NoProcess { .. }) => break, // an ancestor exited during the walk
                Err(e) => return Err(e),
            };
        }
        exclude.insert(me);
        Ok(MemberScan { reader, exclude })
    }

    /// Leaves `pid` out of every scan too (tact's watchdog).
    pub fn exclude(&mut self, pid: i32) {
        self.exclude.insert(pid);
    }

    /// The pids left out: this process, its ancestors, PID 1 and those added with `exclude`.
    pub fn excluded(&self) -> &HashSet<i32> {
        &self.exclude
    }

    /// `uid:U`: every process whose real uid is `uid`, in pid order.
    pub fn uid(&self, uid: u32) -> Result<Vec<i32>> {
        let root = self.reader.root();
        let mut pids = Vec::new();
        for pid in numeric_entries(root)? {
            if self.exclude.contains(&pid) {
                continue;
            }
            match self.reader.uid(pid) {
                Ok(u) if u == uid => {}
                Ok(_) | Err(Error::NoProcess { .. }) => continue,
                Err(e) => return Err(e),
            }
            if self.eligible(pid)? {
                pids.push(pid);
            }
        }
        Ok(pids)
    }

    /// `cgroup:DIR`: the processes in `DIR/cgroup.procs` (that cgroup only, not its children),
    /// in pid order.
    pub fn cgroup(&self, dir: &Path) -> Result<Vec<i32>> {
        let path = dir.join("cgroup.procs");
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let mut pids = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let pid: i32 = line
                .parse()
                .map_err(|_| Error::parse(&path, i + 1, format!("bad pid `{line}`")))?;
            if !self.exclude.contains(&pid) && self.eligible(pid)? {
                pids.push(pid);
            }
        }
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    /// Not a kernel thread, not exited.
    fn eligible(&self, pid: i32) -> Result<bool> {
        match self.reader.stat(pid) {
            Ok(s) => Ok(!s.is_kernel_thread() && !s.is_dead()),
            Err(Error::NoProcess { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The entries of `dir` whose names are pids, sorted.
fn numeric_entries(dir: &Path) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A process with the given parent, real uid, state and flags.
    fn process(root: &Path, pid: i32, ppid: i32, uid: u32, state: char, flags: u32) {
        write(
            root,
            &format!("{pid}/stat"),
            &format!(
                "{pid} (p{pid}) {state} {ppid} {pid} {pid} 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 \
                 {pid} 0 0\n"
            ),
        );
        write(
            root,
            &format!("{pid}/status"),
            &format!("Name:\tp{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        );
    }

    #[test]
    fn uid_and_cgroup_leave_out_tact_and_its_ancestors() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        process(root, 1, 0, 1000, 'S', 0); // init (uid made to match, still left out)
        process(root, 2, 0, 0, 'S', 0x0020_0000); // kthreadd
        process(root, 100, 1, 1000, 'S', 0); // login shell: tact's ancestor
        process(root, 200, 100, 1000, 'S', 0); // tact
        process(root, 201, 200, 1000, 'S', 0); // its watchdog
        process(root, 300, 1, 1000, 'R', 0); // the user's work
        process(root, 301, 300, 1000, 'Z', 0); // exited
        process(root, 400, 1, 1001, 'R', 0); // someone else's
        write(root, "self", "not a pid");
        let mut scan = MemberScan::with_reader(ProcReader::with_root(root), 200).unwrap();
        scan.exclude(201);
        assert_eq!(scan.uid(1000).unwrap(), vec![300]);
        assert_eq!(scan.uid(1001).unwrap(), vec![400]);
        assert_eq!(scan.uid(0).unwrap(), Vec::<i32>::new());
        let excluded: Vec<i32> = {
            let mut v: Vec<i32> = scan.excluded().iter().copied().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(excluded, vec![1, 100, 200, 201]);

        let cg = root.join("cg");
        write(root, "cg/cgroup.procs", "400\n200\n300\n999\n2\n");
        assert_eq!(scan.cgroup(&cg).unwrap(), vec![300, 400]);
        write(root, "cg/cgroup.procs", "400\nx\n");
        let err = scan.cgroup(&cg).unwrap_err().to_string();
        assert!(err.contains("cg/cgroup.procs:2:"), "{err}");
    }
}
