//! `tact tune --psi-cgroup DIR`: with `tcc:psi=1`, PSI is read from a cgroup v2 directory's
//! `memory.pressure` and `io.pressure` instead of `/proc/pressure`; a DIR that cannot serve is
//! refused before the command runs.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::tune_output as tune;
use common::*;

/// Pressure files in a cgroup v2 directory's form, with memory and io stalls at 50%.
fn fixture(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let lines = "some avg10=50.00 avg60=0.00 avg300=0.00 total=1\n\
                 full avg10=50.00 avg60=0.00 avg300=0.00 total=1\n";
    for file in ["memory.pressure", "io.pressure"] {
        fs::write(dir.join(file), lines).unwrap();
    }
}

/// Refused before the command ran: tact's status for a bad option, the message on one line.
fn assert_refused(dir: &Path, out: &Output, says: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    for s in says {
        assert!(err.contains(s), "{s:?} in {err}");
    }
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.join("ran").exists(), "the command ran: {err}");
}

#[test]
fn the_cgroups_files_are_read_instead_of_the_machines() {
    let dir = tempfile::tempdir().unwrap();
    let stalls = dir.path().join("cg");
    fixture(&stalls);
    let cg = stalls.to_str().unwrap();
    let run = ["--", "sh", "-c", "touch ran"];
    let out = tune(
        dir.path(),
        &[
            &["--policy", "tcc:psi=1", "--psi-cgroup", cg, "-v"],
            &run[..],
        ]
        .concat(),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(dir.path().join("ran").exists());
    let start = err.lines().next().unwrap();
    assert!(
        start.starts_with("tact: tune: ") && start.ends_with(&format!("; PSI from cgroup {cg}")),
        "{err}"
    );
    // The files are the cgroup's: one that is not a pressure file stops tact, naming it.
    fs::remove_file(dir.path().join("ran")).unwrap();
    fs::write(stalls.join("io.pressure"), "nonsense\n").unwrap();
    let out = tune(
        dir.path(),
        &[&["--policy", "tcc:psi=1", "--psi-cgroup", cg], &run[..]].concat(),
    );
    assert_refused(
        dir.path(),
        &out,
        &[&format!(
            "tact: --psi-cgroup {cg}: reading PSI: {cg}/io.pressure"
        )],
    );
    // Without --psi-cgroup the start names the machine's files (when the kernel has them).
    if Path::new("/proc/pressure/memory").exists() {
        let out = tune(dir.path(), &[&["--policy", "tcc:psi=1"], &run[..]].concat());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.lines()
                .next()
                .unwrap()
                .ends_with("; PSI from /proc/pressure (the whole machine's)"),
            "{err}"
        );
    }
}

#[test]
fn psi_cgroup_without_psi_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stalls = dir.path().join("cg");
    fixture(&stalls);
    let cg = stalls.to_str().unwrap();
    for policy in ["tcc", "tcc:psi=0", "static:2"] {
        let out = tune(
            dir.path(),
            &[
                "--policy",
                policy,
                "--psi-cgroup",
                cg,
                "--",
                "sh",
                "-c",
                "touch ran",
            ],
        );
        assert_refused(
            dir.path(),
            &out,
            &["tact: --psi-cgroup needs --policy tcc:psi=1"],
        );
    }
    // With --freeze the controller waits for the pool; the option is refused before it starts.
    let out = tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "tree",
            "--psi-cgroup",
            cg,
            "--",
            "sh",
            "-c",
            "touch ran",
        ],
    );
    assert_refused(
        dir.path(),
        &out,
        &["tact: --psi-cgroup needs --policy tcc:psi=1"],
    );
}

#[test]
fn a_directory_without_pressure_files_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent");
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    for cg in [&absent, &empty] {
        for extra in [&[][..], &["--freeze", "--completions", "tree"][..]] {
            let out = tune(
                dir.path(),
                &[
                    &[
                        "--policy",
                        "tcc:psi=1",
                        "--psi-cgroup",
                        cg.to_str().unwrap(),
                    ],
                    extra,
                    &["--", "sh", "-c", "touch ran"],
                ]
                .concat(),
            );
            assert_refused(
                dir.path(),
                &out,
                &[&format!(
                    "{}: No such file",
                    cg.join("memory.pressure").display()
                )],
            );
            let err = stderr(&out);
            // Neither is in a cgroup v1 hierarchy; the cause is said once.
            assert!(!err.contains("cgroup v1"), "{err}");
            assert_eq!(err.matches("No such file").count(), 1, "{err}");
        }
    }
}

/// A cgroup v1 hierarchy's mount directory, if this machine has one.
fn a_v1_mount() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split(' ').next() == Some("cgroup"))
            .then(|| pre.split(' ').nth(4).map(PathBuf::from))
            .flatten()
    })
}

#[test]
fn a_cgroup_v1_directory_is_refused_pointing_at_the_unified_hierarchy() {
    let Some(mount) = a_v1_mount() else {
        eprintln!("skipped: no cgroup v1 hierarchy here");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The hierarchy's root, and a directory in it that does not exist.
    let absent = mount.join(format!("tact-test-psicg-absent-{}", std::process::id()));
    for cg in [&mount, &absent] {
        let out = tune(
            dir.path(),
            &[
                "--policy",
                "tcc:psi=1",
                "--psi-cgroup",
                cg.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "touch ran",
            ],
        );
        assert_refused(
            dir.path(),
            &out,
            &[
                &cg.join("memory.pressure").display().to_string(),
                &format!("{} is in a cgroup v1 hierarchy", cg.display()),
                "unified (cgroup2) hierarchy",
                "even with no controllers enabled",
            ],
        );
    }
}

#[test]
fn a_real_cgroup2_directory_is_read() {
    let Some(cg) = cgroup2_dir().filter(|d| d.join("memory.pressure").exists()) else {
        eprintln!("skipped: no cgroup v2 directory with pressure files here");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cg = cg.to_str().unwrap();
    let out = tune(
        dir.path(),
        &[
            "--policy",
            "tcc:psi=1",
            "--psi-cgroup",
            cg,
            "--",
            "sh",
            "-c",
            "touch ran",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(dir.path().join("ran").exists());
    assert!(err.contains(&format!("; PSI from cgroup {cg}\n")), "{err}");
}
