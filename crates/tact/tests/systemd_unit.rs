//! The shipped system unit (contrib/systemd/tact.service) against the root daemon's defaults as
//! `tact daemon --help` states them: under the unit's `ProtectSystem=strict` every directory
//! the daemon writes by default must be made writable by the unit (`RuntimeDirectory=`,
//! `StateDirectory=`, `ReadWritePaths=`), or the daemon fails there at run time (the tickets
//! state in /var/lib/tact was read-only until 00558cd: every change to the model was refused).

use std::path::{Path, PathBuf};
use std::process::Command;

const UNIT: &str = include_str!("../../../contrib/systemd/tact.service");

/// The values of `key=` lines of the unit, each split at whitespace.
fn values(key: &str) -> Vec<String> {
    UNIT.lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{key}=")))
        .flat_map(|v| v.split_whitespace().map(str::to_string))
        .collect()
}

/// The directories the unit makes writable under `ProtectSystem=strict`.
fn writable() -> Vec<PathBuf> {
    let under = |key: &str, base: &str| -> Vec<PathBuf> {
        values(key)
            .into_iter()
            .map(|v| Path::new(base).join(v))
            .collect()
    };
    let mut dirs = under("RuntimeDirectory", "/run");
    dirs.extend(under("StateDirectory", "/var/lib"));
    dirs.extend(values("ReadWritePaths").into_iter().map(PathBuf::from));
    dirs
}

/// The root daemon's default path of the file named `file` in `tact daemon --help`.
fn root_default(help: &str, file: &str) -> PathBuf {
    let word = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .find(|w| w.starts_with('/') && w.ends_with(file) && !w.contains('$'))
        .unwrap_or_else(|| panic!("no root default for {file} in:\n{help}"));
    PathBuf::from(word)
}

#[test]
fn the_system_unit_lets_the_root_daemon_write_its_default_paths() {
    assert_eq!(
        values("ProtectSystem"),
        ["strict"],
        "the test reads a strict unit"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tact"))
        .args(["daemon", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let writable = writable();
    for file in ["daemon.sock", "tickets.json"] {
        let path = root_default(&help, file);
        let dir = path.parent().unwrap();
        assert!(
            writable.iter().any(|w| dir.starts_with(w)),
            "{} (the root daemon's default {file}) is read-only under the unit: writable are \
             only {writable:?}",
            dir.display()
        );
    }
}
