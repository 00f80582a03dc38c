//! `tact tickets run` with a `[memory] arena` on cgroup v1 (root only; skipped otherwise): the
//! arena's size becomes the limit of the jobs' parent, and while a protected job is short of its
//! floor the feedback loop limits the unprotected one (never the protected one), so the protected
//! job keeps its working set in page cache; the run says the loop is not work-conserving, and
//! removes every cgroup it made.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

const MIB: u64 = 1 << 20;
const ARENA: u64 = 48 * MIB;

/// p (a hard 24 MiB floor) rereads a 20 MiB file, u (no memory tickets) a 96 MiB one: u alone
/// would push p's pages out of the 48 MiB arena. The files are written with O_DIRECT, so their
/// pages are charged to the job that reads them, not to the test.
fn setup(dir: &Path) -> String {
    let reader = |name: &str, mib: u32| {
        let f = dir.join(name);
        format!(
            "exec sh -c 'dd if=/dev/zero of={f} bs=1M count={mib} oflag=direct status=none; \
             exec timeout 60 sh -c \"while :; do cat {f} > /dev/null; done\"'",
            f = f.display()
        )
    };
    format!(
        r#"
[memory]
arena = "48MiB"

[[job]]
name = "p"
command = '''{p}'''
funding = [{{ from = "base", mem = "24MiB", hard = true }}, {{ from = "base", cpu = 100 }}]

[[job]]
name = "u"
command = '''{u}'''
funding = [{{ from = "base", cpu = 100 }}]
"#,
        p = reader("p.data", 20),
        u = reader("u.data", 96)
    )
}

#[test]
fn the_v1_arena_loop_limits_the_unprotected_job_and_the_protected_one_keeps_its_pages() {
    use tact_linux::actuate::cgroup_knobs::Controller;
    let Some(V1Parents {
        cgroups: parents,
        mounts,
    }) = v1_parents("tickets-arena", &[Controller::Memory])
    else {
        return;
    };
    let mem_mount = &mounts[0];
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let setup_file = dir.path().join("setup.toml");
    std::fs::write(&setup_file, setup(dir.path())).unwrap();
    let mut c = tact();
    c.args(["tickets", "run"])
        .arg(&setup_file)
        .args(["--backend", "cgroup", "--duration", "120s"])
        .arg("--cgroup-parent")
        .arg(&parents[0].0)
        .env("TACT_RUNTIME_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let top = mem_mount
        .join(parents[0].0.file_name().unwrap())
        .join(format!("tact-tickets-{}", child.id()));
    let read = |file: &str| -> u64 {
        std::fs::read_to_string(top.join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    wait_for(Duration::from_secs(60), "the arena's limit", || {
        read("memory.limit_in_bytes") == ARENA
    });
    // Both files written and read once: p holds most of its 20 MiB.
    wait_for(
        Duration::from_secs(60),
        "p's file in its page cache",
        || read("job0/memory.usage_in_bytes") >= 16 * MIB,
    );
    // From now on: p's usage, and whether u was ever limited below the arena and p ever at all.
    let (mut samples, mut p_held, mut u_limited, mut p_limited) = (0, 0, false, false);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        samples += 1;
        if read("job0/memory.usage_in_bytes") >= 18 * MIB {
            p_held += 1;
        }
        u_limited |= read("job1/memory.limit_in_bytes") < ARENA;
        p_limited |= read("job0/memory.limit_in_bytes") < ARENA;
        std::thread::sleep(Duration::from_millis(100));
    }
    // SIGTERM ends the run and its jobs.
    kill(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(u_limited, "the loop never limited u: {stderr}");
    assert!(!p_limited, "p is below its floor and was limited: {stderr}");
    assert!(
        p_held * 10 >= samples * 8,
        "p held 18 MiB in {p_held} of {samples} samples: {stderr}"
    );
    assert!(
        stderr.contains("arena of 50331648 bytes") && stderr.contains("not work-conserving"),
        "{stderr}"
    );
    for p in &parents {
        assert!(
            p.leftovers().is_empty(),
            "left in {:?}: {:?}",
            p.0,
            p.leftovers()
        );
    }
}
