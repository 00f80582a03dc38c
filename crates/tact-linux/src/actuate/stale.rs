//! Sweeping cgroups that a SIGKILLed tact left behind.
//!
//! tact names its per-run cgroup directories after its own pid (`tact-share-PID`,
//! `tact-PID-idle`, `tact-tickets-PID`) and removes them on every exit path it controls. A
//! SIGKILL is not one: the watchdog resumes stopped jobs, but the directories stay. The next tact
//! that creates one in the same place sweeps them: a directory whose owner is gone and that holds
//! no process any more is removed, bottom-up. One that still holds processes (a job that outlived
//! its tact) is left alone, and so is every name without a pid, a `tact-test-*` directory (tests
//! clean their own), and any directory whose pid is alive (a reused pid only delays the sweep).

use std::fs;
use std::io;
use std::path::Path;

use super::cgroup_cpu::read_procs;

/// Removes the stale tact directories directly under `base`; returns the ones removed. Errors are
/// swallowed: a sweep is housekeeping, and whatever it cannot remove stays as it was.
pub fn sweep(base: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner(&name) else { continue };
        if alive(pid) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if remove_if_empty(&entry.path()) {
            removed.push(name);
        }
    }
    removed
}

/// Whether `dir` lies in a stale tact directory directly under `base`: one a dead tact made (the
/// processes a restarted daemon finds there came from somewhere it cannot know).
pub fn is_inside(base: &Path, dir: &Path) -> bool {
    let Ok(rest) = dir.strip_prefix(base) else {
        return false;
    };
    rest.components()
        .next()
        .and_then(|c| owner(&c.as_os_str().to_string_lossy()))
        .is_some_and(|pid| !alive(pid))
}

/// The pid in a tact-made directory name: `tact-` then dash-separated parts, exactly one of which
/// is a number. `tact-test-*` names belong to tests.
fn owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("tact-")?;
    if rest.starts_with("test-") {
        return None;
    }
    let mut pids = rest.split('-').filter_map(|p| p.parse::<i32>().ok());
    match (pids.next(), pids.next()) {
        (Some(pid), None) if pid > 0 => Some(pid),
        _ => None,
    }
}

/// Whether a process with this pid exists (signal 0: EPERM means it does, as someone else's).
pub(crate) fn alive(pid: i32) -> bool {
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e != nix::errno::Errno::ESRCH,
    }
}

/// Removes `dir` and its sub-cgroups when none of them holds a process; true when it is gone.
fn remove_if_empty(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) && !remove_if_empty(&entry.path()) {
            return false;
        }
    }
    if !read_procs(dir).is_ok_and(|pids| pids.is_empty()) {
        return false;
    }
    match fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::owner;

    #[test]
    fn owners_are_read_from_tact_names_only() {
        assert_eq!(owner("tact-share-4242"), Some(4242));
        assert_eq!(owner("tact-4242-idle"), Some(4242));
        assert_eq!(owner("tact-tickets-4242"), Some(4242));
        assert_eq!(owner("tact-tickets-4242-probe"), Some(4242));
        assert_eq!(owner("tact-test-share-4242"), None);
        assert_eq!(owner("tact-tickets"), None);
        assert_eq!(owner("tact-1-2"), None);
        assert_eq!(owner("tact-share-0"), None);
        assert_eq!(owner("user.slice"), None);
        assert_eq!(owner("tactile-4242"), None);
    }
}
