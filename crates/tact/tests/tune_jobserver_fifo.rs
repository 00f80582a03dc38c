//! `tact tune --jobserver-style`: the fifo jobserver (make 4.4's `--jobserver-auth=fifo:PATH`)
//! serving clients that open it by name, its removal on every way out, `auto`'s choice (by name
//! for ninja, by `--version` for make), and bad values. The pipe style's behaviour is tune.rs's.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;

/// A jobserver client as make 4.4 or ninja 1.13 is one: it finds the fifo in MAKEFLAGS, opens
/// it by name (it inherits no descriptor), takes a token (a blocking read), appends `S` to `log`,
/// works 0.2 s, appends `E` and writes the token back. Single small appends, so `log` holds the
/// real order of events.
const WORKER: &str = r#"
import os, sys
import time
auth = [w for w in os.environ["MAKEFLAGS"].split() if w.startswith("--jobserver-auth=")]
style, _, path = auth[-1].partition("=")[2].partition(":")
if style != "fifo":
    sys.exit("not a fifo jobserver: " + auth[-1])
def append(line):
    fd = os.open("log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line)
    os.close(fd)
token = os.read(os.open(path, os.O_RDONLY), 1)
if len(token) != 1:
    sys.exit("the jobserver fifo ended")
append(b"S\n")
time.sleep(0.2)
append(b"E\n")
os.write(os.open(path, os.O_WRONLY), token)
"#;

/// The command: records its MAKEFLAGS in `flags`, starts 12 workers at once, waits for them.
const DRIVER: &str = r#"printf '%s\n' "$MAKEFLAGS" > flags
i=0
while [ $i -lt 12 ]; do python3 ./worker.py & i=$((i+1)); done
wait
"#;

/// `dir` with a `tmp` directory for tact's TMPDIR, where the fifo's directory goes.
fn tmp_of(dir: &Path) -> PathBuf {
    let tmp = dir.join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// `tact tune ARGS` in `dir` with `dir/tmp` as its TMPDIR.
fn tune_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = tact();
    c.env("TACT_RUNTIME_DIR", dir)
        .env("TMPDIR", tmp_of(dir))
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL")
        .env_remove("MFLAGS")
        .current_dir(dir)
        .arg("tune")
        .args(args);
    c
}

fn tune(dir: &Path, args: &[&str]) -> Output {
    tune_cmd(dir, args).output().unwrap()
}

/// What tact left in its TMPDIR (nothing, once it exited).
fn left_in_tmp(dir: &Path) -> Vec<String> {
    fs::read_dir(dir.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The MAKEFLAGS the command recorded.
fn flags(dir: &Path) -> String {
    fs::read_to_string(dir.join("flags")).unwrap()
}

/// The fifo's path in the recorded MAKEFLAGS.
fn fifo_path(flags: &str) -> PathBuf {
    let auth = flags
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--jobserver-auth=fifo:"))
        .unwrap_or_else(|| panic!("no fifo jobserver in {flags}"));
    PathBuf::from(auth)
}

/// (most jobs at once, jobs ended) from the S/E log.
fn concurrency(dir: &Path) -> (usize, usize) {
    let (mut now, mut max, mut ended) = (0i64, 0i64, 0);
    for line in fs::read_to_string(dir.join("log")).unwrap().lines() {
        if line == "S" {
            now += 1;
        } else {
            now -= 1;
            ended += 1;
        }
        max = max.max(now);
    }
    (max as usize, ended)
}

#[test]
fn fifo_clients_hold_at_most_the_tokens_and_the_fifo_goes_with_tact() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("worker.py"), WORKER).unwrap();
    let out = tune(
        dir.path(),
        &[
            "--jobserver-style",
            "fifo",
            "--policy",
            "static:3",
            "--",
            "sh",
            "-c",
            DRIVER,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let flags = flags(dir.path());
    assert!(!flags.contains("--jobserver-fds"), "{flags}");
    let fifo = fifo_path(&flags);
    assert!(
        fifo.starts_with(dir.path().join("tmp")),
        "{}",
        fifo.display()
    );

    // A count of 3 is 2 tokens plus make's implicit slot, which these clients do not use: 2
    // at once, never 3, and 1 would mean a token went missing.
    let (most, ended) = concurrency(dir.path());
    assert_eq!(ended, 12, "every worker got a token and returned it");
    assert_eq!(most, 2, "workers ran {most} at once on 2 tokens");
    assert!(!fifo.exists());
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());
}

#[test]
fn auto_gives_a_command_named_ninja_a_fifo_and_any_other_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    for name in ["ninja", "other"] {
        let script = bin.join(name);
        fs::write(
            &script,
            "#!/bin/sh\nprintf '%s\\n' \"$MAKEFLAGS\" > flags\n",
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }

    let ninja = bin.join("ninja");
    let out = tune(dir.path(), &["--", ninja.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let flags_ninja = flags(dir.path());
    assert!(!fifo_path(&flags_ninja).exists());
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());

    let other = bin.join("other");
    let out = tune(dir.path(), &["--", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let flags_other = flags(dir.path());
    let auth = flags_other
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--jobserver-auth="))
        .unwrap_or_else(|| panic!("no jobserver in {flags_other}"));
    let fds: Vec<&str> = auth.split(',').collect();
    assert!(
        fds.len() == 2 && fds.iter().all(|fd| fd.parse::<u32>().is_ok()),
        "{flags_other}"
    );

    // --jobserver-style pipe overrides auto for ninja.
    let out = tune(
        dir.path(),
        &["--jobserver-style", "pipe", "--", ninja.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !flags(dir.path()).contains("fifo:"),
        "{}",
        flags(dir.path())
    );
}

/// The jobserver style in MAKEFLAGS: "fifo", or "pipe" for a pair of descriptors.
fn style(flags: &str) -> &'static str {
    let auth = flags
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--jobserver-auth="))
        .next_back()
        .unwrap_or_else(|| panic!("no jobserver in {flags}"));
    if auth.starts_with("fifo:") {
        return "fifo";
    }
    let fds: Vec<&str> = auth.split(',').collect();
    assert!(
        fds.len() == 2 && fds.iter().all(|fd| fd.parse::<u32>().is_ok()),
        "{flags}"
    );
    "pipe"
}

#[test]
fn auto_asks_a_make_its_version_and_gives_4_4_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // A make that answers --version with `answer` (shell) and otherwise records its MAKEFLAGS.
    let fake = |name: &str, answer: &str| {
        let script = bin.join(name);
        fs::write(
            &script,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then\n{answer}\nfi\n\
                 printf '%s\\n' \"$MAKEFLAGS\" > flags\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        script
    };
    let cases = [
        // Found on PATH, as the command will be.
        (
            "make",
            "echo 'GNU Make 4.4.1'; echo 'Built for x86_64-pc-linux-gnu'; exit 0",
            "fifo",
        ),
        ("gmake", "echo 'GNU Make 4.4'; exit 0", "fifo"),
        ("make", "echo 'GNU Make 4.3'; exit 0", "pipe"),
        ("make", "echo 'GNU Make 3.81'; exit 0", "pipe"),
        // Not GNU make, or no answer: a pipe, and the command still runs.
        ("make", "echo 'make: unknown option' >&2; exit 2", "pipe"),
        ("make", "exec sleep 60", "pipe"),
    ];
    for (name, answer, want) in cases {
        fake(name, answer);
        let _ = fs::remove_file(dir.path().join("flags"));
        let out = tune_cmd(dir.path(), &["--", name])
            .env("PATH", &path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{answer}: {}", stderr(&out));
        assert_eq!(style(&flags(dir.path())), want, "{name}: {answer}");
        assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());
        fs::remove_file(bin.join(name)).unwrap();
    }
    // By its path, too; an explicit style is not second-guessed.
    let gmake = fake("gmake", "echo 'GNU Make 4.4.1'; exit 0");
    let gmake = gmake.to_str().unwrap();
    for (args, want) in [
        (&["--", gmake][..], "fifo"),
        (&["--jobserver-style", "pipe", "--", gmake][..], "pipe"),
    ] {
        let out = tune(dir.path(), args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(style(&flags(dir.path())), want, "{args:?}");
    }

    // The real make, as its recipes see MAKEFLAGS: a fifo from 4.4 on, else (4.3 here) a pipe.
    fs::write(
        dir.path().join("Makefile"),
        "all:\n\t@printf '%s\\n' \"$$MAKEFLAGS\" > flags\n",
    )
    .unwrap();
    let out = tune(dir.path(), &["--", "make"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let want = if make_version() >= (4, 4) {
        "fifo"
    } else {
        "pipe"
    };
    assert_eq!(style(&flags(dir.path())), want, "make {:?}", make_version());
}

/// GNU make's version, as `make --version` gives it: (major, minor).
fn make_version() -> (u32, u32) {
    let out = Command::new("make").arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GNU Make "))
        .unwrap_or_else(|| panic!("not GNU make: {text}"));
    let mut parts = version.trim().split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap_or(0))
}

#[test]
fn make_takes_the_fifo_from_4_4_and_stops_on_it_before() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    fs::write(
        dir.path().join("M"),
        format!(
            "all: {}\n\nt%:\n\t@echo S >> log; sleep 0.2; echo E >> log; touch $@\n",
            names.join(" ")
        ),
    )
    .unwrap();
    let out = tune(
        dir.path(),
        &[
            "--jobserver-style",
            "fifo",
            "--policy",
            "static:3",
            "--",
            "make",
            "-f",
            "M",
        ],
    );
    let err = stderr(&out);
    if make_version() >= (4, 4) {
        assert_eq!(out.status.code(), Some(0), "{err}");
        let (most, ended) = concurrency(dir.path());
        assert_eq!(ended, 12);
        assert!((2..=3).contains(&most), "make ran {most} jobs at once");
    } else {
        // Why auto gives make 4.3 (Debian 12's) a pipe: it refuses the fifo, and tact exits
        // with its status.
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("invalid --jobserver-auth string"), "{err}");
        assert!(!dir.path().join("log").exists());
    }
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());
}

#[test]
fn the_fifo_goes_when_tact_is_signalled_or_the_command_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"printf '%s\n' "$MAKEFLAGS" > flags; trap 'exit 7' TERM; touch ready
while :; do sleep 0.05; done"#;
    let mut t = tune_cmd(
        dir.path(),
        &["--jobserver-style", "fifo", "--", "sh", "-c", script],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for(Duration::from_secs(20), "the command to start", || {
        dir.path().join("ready").exists()
    });
    let fifo = fifo_path(&flags(dir.path()));
    assert!(fifo.exists(), "the fifo exists while the command runs");
    kill(t.id() as i32, Signal::SIGTERM);
    assert_eq!(t.wait().unwrap().code(), Some(7), "the command's status");
    assert!(!fifo.exists());
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());

    let out = tune(
        dir.path(),
        &["--jobserver-style", "fifo", "--", "./no-such-command"],
    );
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());
}

#[test]
fn a_bad_style_is_refused_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--jobserver-style", "named", "--", "touch", "ran"],
            "invalid value 'named' for '--jobserver-style <STYLE>'",
        ),
        (
            &["--jobserver-style", "named", "--", "touch", "ran"],
            "[possible values: auto, pipe, fifo]",
        ),
        (
            &[
                "--jobserver-style",
                "fifo",
                "--workers-file",
                "j",
                "--",
                "touch",
                "ran",
            ],
            "cannot be used with",
        ),
    ];
    for (args, says) in cases {
        let out = tune(dir.path(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.path().join("ran").exists(), "{args:?} ran the command");
    }
    assert_eq!(left_in_tmp(dir.path()), Vec::<String>::new());
}

#[test]
fn a_tmpdir_makeflags_cannot_carry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("with space");
    fs::create_dir(&spaced).unwrap();
    let out = tune_cmd(
        dir.path(),
        &["--jobserver-style", "fifo", "--", "touch", "ran"],
    )
    .env("TMPDIR", &spaced)
    .output()
    .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("has whitespace"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.path().join("ran").exists());
    assert_eq!(fs::read_dir(&spaced).unwrap().count(), 0);
}
