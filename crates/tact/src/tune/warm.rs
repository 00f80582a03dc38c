//! `--key NAME`: warm start per workload key (spec concurrency.md §6, "Beyond the paper" 1).
//! tact records the count TCC settles on (each entry into Steady) under the key, and the next
//! run with the same key starts its first cycle from it (`TuneParams::warm`) instead of
//! climbing from `--init`. A key names a workload, not a command: the same `make` in two trees
//! settles on different counts, so tact does not derive one.

use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// What a key's file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    /// The count of the last entry into Steady.
    steady_count: usize,
    /// The command that reached it, for a person reading the directory.
    command: String,
}

/// `--key`: a file name of letters, digits, `.`, `_` and `-`, not starting with `.` (so never
/// `..`, a hidden file or a path), at most 200 bytes.
pub fn parse_key(s: &str) -> Result<String, String> {
    let valid = !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a key: use letters, digits, '.', '_' and '-' (at most 200, not \
             starting with '.'), e.g. kernel-build"
        ))
    }
}

/// Where keys are kept: `$XDG_STATE_HOME/tact/tune` when that is set, else root's
/// `/var/lib/tact/tune` (like the daemon's tickets), else `~/.local/state/tact/tune`.
pub fn default_dir() -> PathBuf {
    dir_for(
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
        nix::unistd::geteuid().is_root(),
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

/// One key's file.
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
    /// A file tact cannot use, and why: a cold start, and the next Steady replaces it.
    Unusable(String),
}

impl WarmStore {
    pub fn new(dir: &Path, key: &str, command: &[String]) -> Self {
        WarmStore {
            key: key.to_string(),
            path: dir.join(format!("{key}.json")),
            temp: dir.join(format!(".{key}.json.tact-{}.tmp", std::process::id())),
            command: command.join(" "),
        }
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
    pub fn save(&self, count: usize) -> Result<()> {
        let saved = Saved {
            steady_count: count,
            command: self.command.clone(),
        };
        let text = serde_json::to_string(&saved).expect("a count and a string serialize");
        let dir = self.path.parent().expect("a key's file is in a directory");
        fs::create_dir_all(dir)
            .and_then(|()| fs::write(&self.temp, format!("{text}\n")))
            .and_then(|()| fs::rename(&self.temp, &self.path))
            .with_context(|| {
                format!(
                    "cannot record --key {} in {}",
                    self.key,
                    self.path.display()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> WarmStore {
        WarmStore::new(
            dir,
            "build-1.x",
            &["make".into(), "-C".into(), "src".into()],
        )
    }

    #[test]
    fn keys_are_plain_file_names() {
        for good in ["build", "kernel-build", "a.b_c-1", "X"] {
            assert_eq!(parse_key(good).as_deref(), Ok(good));
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
            assert!(parse_key(bad).is_err(), "{bad:?} accepted");
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
        assert!(
            format!("{e:#}").contains("file/tune/build-1.x.json"),
            "{e:#}"
        );
    }
}
