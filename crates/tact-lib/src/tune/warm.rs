//! Warm start per workload key (spec concurrency.md §6, "Beyond the paper" 1): the count TCC
//! settles on (each entry into Steady) is recorded under a key, and the next run with the same
//! key starts its first cycle from it (`TuneParams::warm`) instead of climbing from `n_init`.
//! `tact tune --key`, tact-lib's pools and limiters ([`PoolBuilder::key`](super::PoolBuilder::key))
//! and the Python executors (`key="NAME"`) share the store: one JSON file per key in
//! [`default_dir`]. A key names a workload, not a command: the same `make` in two trees settles
//! on different counts, so no host derives one.

use std::ffi::OsString;
use std::fs;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tact_core::tune::{Phase, Policy, Tcc, TuneParams};

/// The longest key: its file's name (`KEY.json`, and the temporary one) stays within NAME_MAX.
const KEY_MAX: usize = 200;

/// What a key's file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// The count of the last entry into Steady.
    steady_count: usize,
    /// The command that reached it, for a person reading the directory.
    command: String,
}

/// A key that is not a plain file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a key: use letters, digits, '.', '_' and '-' (at most {KEY_MAX}, not \
     starting with '.'), e.g. kernel-build"
)]
pub struct KeyError(pub String);

/// A key's count could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot record key {key} in {}: {error}", path.display())]
pub struct SaveError {
    pub key: String,
    pub path: PathBuf,
    pub error: io::Error,
}

/// Checks a key: a file name of letters, digits, `.`, `_` and `-`, not starting with `.` (so
/// never `..`, a hidden file or a path), at most 200 bytes.
pub fn check_key(key: &str) -> Result<(), KeyError> {
    let valid = !key.is_empty()
        && key.len() <= KEY_MAX
        && !key.starts_with('.')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(KeyError(key.to_owned()))
    }
}

/// Where keys are kept: `$XDG_STATE_HOME/tact/tune` when that is set, else root's
/// `/var/lib/tact/tune` (like the daemon's tickets), else `~/.local/state/tact/tune`.
pub fn default_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    dir_for(
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
        root,
    )
}

fn dir_for(state_home: Option<OsString>, home: Option<OsString>, root: bool) -> PathBuf {
    let base = match state_home.filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("tact"),
        None if root => PathBuf::from("/var/lib/tact"),
        None => PathBuf::from(home.unwrap_or_else(|| "/".into())).join(".local/state/tact"),
    };
    base.join("tune")
}

/// Stores made by this process so far: each gets a temporary file of its own, so that two
/// hosts of one process saving the same key at once do not write into one file.
static STORES: AtomicU64 = AtomicU64::new(0);

/// One key's file.
#[derive(Debug)]
pub struct WarmStore {
    key: String,
    path: PathBuf,
    /// Written first, then renamed over `path`: a run that dies mid-write, or two runs saving
    /// at once, never leave half a file.
    temp: PathBuf,
    command: String,
}

/// What [`WarmStore::load`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    /// A count recorded by an earlier run.
    Count(usize),
    /// No file yet: a cold start.
    Nothing,
    /// A file that cannot be used, and why: a cold start, and the next Steady replaces it.
    Unusable(String),
}

impl WarmStore {
    /// `key`'s file in `dir`; `command` is what the file says reached the count.
    pub fn new(dir: &Path, key: &str, command: &[String]) -> Result<Self, KeyError> {
        check_key(key)?;
        let n = STORES.fetch_add(1, Ordering::Relaxed);
        Ok(WarmStore {
            key: key.to_owned(),
            path: dir.join(format!("{key}.json")),
            temp: dir.join(format!(".{key}.json.tact-{}-{n}.tmp", std::process::id())),
            command: command.join(" "),
        })
    }

    /// `key`'s file in `dir`, recording this process's command line (a library host's program).
    pub fn for_this_process(dir: &Path, key: &str) -> Result<Self, KeyError> {
        let command: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        WarmStore::new(dir, key, &command)
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn load(&self) -> Loaded {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => return Loaded::Nothing,
            Err(e) => return Loaded::Unusable(format!("cannot read it: {e}")),
        };
        match serde_json::from_str::<Saved>(&text) {
            Ok(saved) if saved.steady_count >= 1 => Loaded::Count(saved.steady_count),
            Ok(_) => Loaded::Unusable("its steady_count is 0".to_string()),
            Err(e) => Loaded::Unusable(format!("not a tact tune record ({e})")),
        }
    }

    /// Records `count` as the key's steady count, creating the directory if need be.
    pub fn save(&self, count: usize) -> Result<(), SaveError> {
        let saved = Saved {
            steady_count: count,
            command: self.command.clone(),
        };
        let text = serde_json::to_string(&saved).expect("a count and a string serialize");
        let dir = self.path.parent().expect("a key's file is in a directory");
        fs::create_dir_all(dir)
            .and_then(|()| fs::write(&self.temp, format!("{text}\n")))
            .and_then(|()| fs::rename(&self.temp, &self.path))
            .map_err(|error| SaveError {
                key: self.key.clone(),
                path: self.path.clone(),
                error,
            })
    }
}

/// A key's store as an in-process host (a pool, a limiter, the Python controller) holds it
/// around TCC: the warm start when the host is built, then a record at each entry into Steady.
///
/// Hosts watch TCC's phase after every call into it rather than read its trace: the trace is
/// the caller's ([`Pool::drain_trace`](super::Pool::drain_trace)). TCC takes at most one step
/// per call, so no entry into Steady falls between two looks.
#[derive(Debug)]
pub struct Keyed {
    /// None once a write failed: the host goes on unrecorded.
    store: Option<WarmStore>,
    phase: Phase,
}

impl Keyed {
    /// Sets `params.warm` from the key's record, lowered to `params.n_max` and to `limit` (the
    /// host's own ceiling) and raised to `params.n_min`. A `warm` already set is the caller's
    /// own and wins. Also returns why a record could not be used (the host then starts cold
    /// and the next Steady replaces the file), for the host to tell.
    pub fn start(
        store: WarmStore,
        params: &mut TuneParams,
        limit: usize,
    ) -> (Keyed, Option<String>) {
        let mut unusable = None;
        if params.warm.is_none() {
            match store.load() {
                Loaded::Count(n) => {
                    params.warm = Some(n.min(params.n_max).min(limit).max(params.n_min));
                }
                Loaded::Nothing => {}
                Loaded::Unusable(why) => {
                    unusable = Some(format!(
                        "key {}: ignoring {}: {why}; starting cold",
                        store.key(),
                        store.path().display()
                    ));
                }
            }
        }
        let keyed = Keyed {
            store: Some(store),
            phase: Phase::Base,
        };
        (keyed, unusable)
    }

    /// Call after every call into `tcc`: at an entry into Steady, saves its count (the
    /// file is small and written once per cycle, seconds apart, so hosts do it under their
    /// lock). The first write that fails is returned, once, and ends the recording.
    pub fn watch(&mut self, tcc: &Tcc) -> Option<SaveError> {
        let phase = tcc.phase();
        let entered = phase == Phase::Steady && self.phase != Phase::Steady;
        self.phase = phase;
        if !entered {
            return None;
        }
        // At the entry, the target is the steady count (`Status::steady_count`).
        let error = self.store.as_ref()?.save(tcc.target()).err()?;
        self.store = None;
        Some(error)
    }

    /// The key's store, until a write failed.
    pub fn store(&self) -> Option<&WarmStore> {
        self.store.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tact_core::tune::{Event, Load};

    use super::*;

    fn store(dir: &Path) -> WarmStore {
        WarmStore::new(
            dir,
            "build-1.x",
            &["make".into(), "-C".into(), "src".into()],
        )
        .unwrap()
    }

    #[test]
    fn keys_are_plain_file_names() {
        for good in ["build", "kernel-build", "a.b_c-1", "X"] {
            assert_eq!(check_key(good), Ok(()));
        }
        let long = "k".repeat(201);
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "a b",
            "ü",
            long.as_str(),
        ] {
            assert_eq!(check_key(bad), Err(KeyError(bad.to_owned())), "{bad:?}");
            assert!(WarmStore::new(Path::new("/tmp"), bad, &[]).is_err());
        }
    }

    #[test]
    fn the_directory_follows_xdg_then_root_then_home() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            dir_for(some("/x"), some("/home/u"), true),
            Path::new("/x/tact/tune")
        );
        assert_eq!(
            dir_for(some(""), some("/home/u"), false),
            Path::new("/home/u/.local/state/tact/tune")
        );
        assert_eq!(
            dir_for(None, some("/root"), true),
            Path::new("/var/lib/tact/tune")
        );
    }

    #[test]
    fn a_saved_count_comes_back_and_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("tune");
        let s = store(&keys);
        assert_eq!(s.load(), Loaded::Nothing);
        s.save(7).unwrap();
        assert_eq!(s.load(), Loaded::Count(7));
        s.save(5).unwrap();
        assert_eq!(s.load(), Loaded::Count(5));
        let text = fs::read_to_string(s.path()).unwrap();
        assert!(text.contains("\"command\":\"make -C src\""), "{text}");
        assert_eq!(
            fs::read_dir(&keys).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn an_unusable_file_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        for (text, why) in [
            ("7", "not a tact tune record"),
            (
                "{\"steady_count\": -1, \"command\": \"\"}",
                "not a tact tune record",
            ),
            ("{\"steady_count\": 0, \"command\": \"\"}", "is 0"),
        ] {
            fs::write(s.path(), text).unwrap();
            match s.load() {
                Loaded::Unusable(msg) => assert!(msg.contains(why), "{text}: {msg}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        fs::remove_file(s.path()).unwrap();
        fs::create_dir(s.path()).unwrap();
        assert!(matches!(s.load(), Loaded::Unusable(m) if m.contains("cannot read")));
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_named() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("file"), "").unwrap();
        let e = store(&dir.path().join("file/tune")).save(3).unwrap_err();
        assert!(e.to_string().contains("file/tune/build-1.x.json"), "{e}");
    }

    #[test]
    fn a_record_sets_the_warm_start_within_the_bounds_unless_one_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        s.save(50).unwrap();
        let warm = |given: Option<usize>, limit: usize| {
            let mut p = TuneParams {
                n_min: 2,
                n_max: 40,
                warm: given,
                ..TuneParams::default()
            };
            let (_, unusable) = Keyed::start(store(dir.path()), &mut p, limit);
            assert_eq!(unusable, None);
            p.warm
        };
        assert_eq!(warm(None, usize::MAX), Some(40), "n_max bounds it");
        assert_eq!(warm(None, 8), Some(8), "so does the host's ceiling");
        assert_eq!(warm(Some(3), 8), Some(3), "the caller's own wins");
        s.save(1).unwrap();
        assert_eq!(warm(None, 8), Some(2), "n_min");

        fs::write(s.path(), "seven").unwrap();
        let mut p = TuneParams::default();
        let (_, unusable) = Keyed::start(store(dir.path()), &mut p, 8);
        assert_eq!(p.warm, None);
        assert!(unusable.unwrap().contains("starting cold"));
    }

    /// TCC that goes Base → Max → Steady at its only count (n_init = n_max, no Remove) from
    /// saturated completions 1 ms apart.
    fn settling_tcc(n: usize) -> Tcc {
        Tcc::new(TuneParams {
            n_init: n,
            n_max: n,
            remove: false,
            n_star: 3,
            batch_min: 1,
            dwell: Duration::from_millis(50),
            max_dwell: Duration::from_millis(50),
            ..TuneParams::default()
        })
        .unwrap()
    }

    fn run_to_steady(tcc: &mut Tcc, keyed: &mut Keyed) -> Vec<Option<SaveError>> {
        let mut errors = Vec::new();
        for i in 1..=2_000u64 {
            let load = Load::new(tcc.target(), 10);
            tcc.on_event(Event::Complete {
                at: Duration::from_millis(i),
                load,
                latency: None,
            });
            errors.push(keyed.watch(tcc));
            if tcc.phase() == Phase::Steady {
                return errors;
            }
        }
        panic!("TCC did not settle: {:?}", tcc.status());
    }

    #[test]
    fn an_entry_into_steady_is_saved_and_a_failed_write_told_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut tcc = settling_tcc(3);
        let (mut keyed, _) = Keyed::start(store(dir.path()), &mut TuneParams::default(), 9);
        assert_eq!(store(dir.path()).load(), Loaded::Nothing);
        let errors = run_to_steady(&mut tcc, &mut keyed);
        assert!(errors.iter().all(Option::is_none));
        assert_eq!(store(dir.path()).load(), Loaded::Count(3));

        fs::write(dir.path().join("file"), "").unwrap();
        let mut tcc = settling_tcc(3);
        let bad = store(&dir.path().join("file/tune"));
        let (mut keyed, _) = Keyed::start(bad, &mut TuneParams::default(), 9);
        let errors = run_to_steady(&mut tcc, &mut keyed);
        assert_eq!(errors.iter().filter(|e| e.is_some()).count(), 1);
        assert!(keyed.store().is_none(), "recording stops");
    }
}
