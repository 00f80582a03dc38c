//! `tact tune --freeze` on real pools: a Python `multiprocessing.Pool` and a shell pool whose
//! workers loop over tasks (sleep a little, bump a shared counter). tact keeps the target's
//! count of workers running and the rest stopped, loses no task, and leaves no worker stopped
//! after it exits, is terminated or is killed.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;
use tact_linux::{ProcId, ProcReader};

/// TCC deciding on a few completions, so that a run of a few seconds moves the count.
const QUICK_TCC: &str = "tcc:n_star=3,batch_min=1,dwell=300ms,max_dwell=300ms";

/// A pool of `argv[1]` workers running `argv[4]` tasks of `argv[2]` seconds each (asleep, or
/// on the CPU when negative) (forever
/// without it); the main process writes the count of finished tasks to `argv[3]` (atomically)
/// after each. The fork context: the workers are the main process's children.
const PY_POOL: &str = r#"
import multiprocessing as mp, os, sys, time
def task(i):
    secs = float(sys.argv[2])
    if secs < 0:  # a task on the CPU: never between tasks while there is work
        end = time.process_time() - secs
        while time.process_time() < end:
            pass
    else:
        time.sleep(secs)
    return i
if __name__ == "__main__":
    n, out = int(sys.argv[1]), sys.argv[3]
    tasks = int(sys.argv[4]) if len(sys.argv) > 4 else 10**9
    done = 0
    with mp.get_context("fork").Pool(n) as pool:
        for _ in pool.imap_unordered(task, range(tasks)):
            done += 1
            with open(out + ".tmp", "w") as f:
                f.write(f"{done}\n")
            os.rename(out + ".tmp", out)
"#;

/// A shell pool of `$1` workers that ignore SIGTERM (so that they outlive tact and the main
/// shell, to be looked at after): each loops over tasks, a 50 ms sleep and a bump of the
/// counter file `n` under a lock. The main shell takes SIGTERM 2 s after it came (`term`).
const SH_POOL: &str = r#"
trap 'touch term; sleep 2; exit 3' TERM
i=0
while [ $i -lt "$1" ]; do
  ( trap '' TERM
    while :; do
      sleep 0.05
      flock lock sh -c 'n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n.tmp; mv n.tmp n'
    done ) &
  i=$((i+1))
done
touch ready
wait
"#;

fn tact_in(dir: &Path) -> std::process::Command {
    let mut c = tact();
    c.env("TACT_RUNTIME_DIR", dir.join("rt"))
        .current_dir(dir)
        .arg("tune");
    c
}

fn tune(dir: &Path, args: &[&str]) -> Output {
    tact_in(dir).args(args).output().unwrap()
}

/// tact in the background, its stderr in `tact.err` (not a pipe: workers that outlive tact
/// would hold it open).
fn spawn_tune(dir: &Path, args: &[&str]) -> Child {
    tact_in(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join("tact.err")).unwrap())
        .spawn()
        .unwrap()
}

fn spawned_stderr(dir: &Path) -> String {
    fs::read_to_string(dir.join("tact.err")).unwrap()
}

fn write_pool(dir: &Path) {
    fs::write(dir.join("pool.py"), PY_POOL).unwrap();
    fs::write(dir.join("pool.sh"), SH_POOL).unwrap();
}

fn counter(dir: &Path) -> u64 {
    fs::read_to_string(dir.join("n"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The children of `pid` (the pool's workers) with their identities.
fn workers(pid: i32) -> Vec<ProcId> {
    let r = ProcReader::new();
    r.children(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| r.stat(c).ok().map(|s| s.id()))
        .collect()
}

/// The process whose children are the pool's workers: the first with more than one child
/// from tact's child whose command line holds `script` down (tact's other child is its guard).
fn pool_process(tact: i32, script: &str) -> Option<i32> {
    let r = ProcReader::new();
    let mut pid = *children_matching(tact, script).first()?;
    loop {
        match r.children(pid).ok()?.as_slice() {
            [only] => pid = *only,
            [] => return None,
            _ => return Some(pid),
        }
    }
}

/// How many of `ids` are still the processes they were and stopped (state T).
fn stopped(ids: &[ProcId]) -> usize {
    let r = ProcReader::new();
    ids.iter()
        .filter(|id| {
            r.stat(id.pid)
                .is_ok_and(|s| s.start_time == id.start_time && s.is_stopped())
        })
        .count()
}

/// SIGKILL to each of `ids` that is still the process it was (the test started them all).
fn kill_ids(ids: &[ProcId]) {
    let r = ProcReader::new();
    for id in ids {
        if r.stat(id.pid).is_ok_and(|s| s.start_time == id.start_time) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(id.pid), Signal::SIGKILL);
        }
    }
}

#[test]
fn a_static_count_keeps_that_many_workers_running_and_loses_no_task() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    // Behind a shell that does not exec it (`; exit`): tact finds the pool below the wrapper.
    // 150 tasks of 0.1 s: the pool runs them 5 at once until it has settled (0.5 s), then 2 at
    // once, some 6 s; the last ones possibly held by frozen workers.
    let mut t = spawn_tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--policy",
            "static:2",
            "--json-log",
            "tune.jsonl",
            "--",
            "sh",
            "-c",
            "python3 pool.py 5 0.1 n 150; exit $?",
        ],
    );
    let root = t.id() as i32;
    let mut ids = Vec::new();
    wait_for(Duration::from_secs(60), "3 of 5 workers stopped", || {
        ids = pool_process(root, "pool.py")
            .map(workers)
            .unwrap_or_default();
        ids.len() == 5 && stopped(&ids) == 3
    });
    // Well into the run the count holds: exactly 3 stopped whenever one looks, while tasks
    // go on.
    let then = counter(dir.path());
    wait_for(Duration::from_secs(60), "ten more tasks", || {
        counter(dir.path()) >= then + 10
    });
    for _ in 0..5 {
        assert_eq!(stopped(&ids), 3, "workers stopped: {ids:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(counter(dir.path()) < 150, "the pool ended too soon to tell");
    let status = t.wait().unwrap();
    let err = spawned_stderr(dir.path());
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(counter(dir.path()), 150, "every task ran once");
    assert_eq!(stopped(&ids), 0, "a worker was left stopped");
    let log = json_log(&dir.path().join("tune.jsonl"));
    let frozen: Vec<u64> = of_kind(&log, "frozen")
        .iter()
        .map(|l| l["frozen"].as_u64().unwrap())
        .collect();
    assert!(frozen.contains(&3), "{frozen:?}");
    assert!(frozen.iter().all(|&f| f <= 3), "{frozen:?}");
    let end = of_kind(&log, "end")[0];
    assert_eq!(end["frozen_max"], 3, "{end}");
    assert_eq!(end["completions"], 150, "{end}");
    assert!(err.contains("workers frozen: at most 3 of 5"), "{err}");
    // The crash records are gone with the clean exit.
    let records = fs::read_dir(dir.path().join("rt")).map_or(0, |d| d.count());
    assert_eq!(records, 0);
}

/// Starts the shell pool of `n` under `--freeze --policy static:2` and waits until `n - 2` of
/// its workers are stopped; returns tact and the workers.
fn shell_pool_held_at_two(dir: &Path, n: usize) -> (Child, Vec<ProcId>) {
    write_pool(dir);
    let t = spawn_tune(
        dir,
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--policy",
            "static:2",
            "--",
            "sh",
            "pool.sh",
            &n.to_string(),
        ],
    );
    let root = t.id() as i32;
    let mut ids = Vec::new();
    wait_for(Duration::from_secs(60), "the pool to be held at 2", || {
        ids = pool_process(root, "pool.sh")
            .map(workers)
            .unwrap_or_default();
        ids.len() == n && stopped(&ids) == n - 2
    });
    (t, ids)
}

#[test]
fn sigterm_to_tact_continues_every_frozen_worker() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, ids) = shell_pool_held_at_two(dir.path(), 4);
    kill(t.id() as i32, Signal::SIGTERM);
    // While the command takes its time to exit, its workers already run, to take the signal.
    wait_for(Duration::from_secs(20), "the command to take it", || {
        dir.path().join("term").exists()
    });
    let before = counter(dir.path());
    assert!(t.try_wait().unwrap().is_none(), "tact exited already");
    assert_eq!(stopped(&ids), 0, "a worker was still stopped");
    let status = t.wait().unwrap();
    // The workers ignore it and live on, all running.
    assert_eq!(status.code(), Some(3), "{}", spawned_stderr(dir.path()));
    assert_eq!(stopped(&ids), 0, "a worker was left stopped");
    let all_four = ids.len();
    wait_for(Duration::from_secs(20), "the workers to go on", || {
        counter(dir.path()) >= before + 2 * all_four as u64
    });
    assert_eq!(stopped(&ids), 0);
    kill_ids(&ids);
}

/// Tuning that fails while the command runs (a --json-log that cannot be written) leaves the
/// command running with its count, and tact waits for it still passing signals on: a SIGTERM
/// reaches the pool's main shell (it sat in tact's blocked mask until the command ended).
#[test]
fn after_tuning_fails_a_signal_still_reaches_the_command() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    let mut t = spawn_tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--json-log",
            "/dev/full",
            "--",
            "sh",
            "pool.sh",
            "4",
        ],
    );
    let root = t.id() as i32;
    wait_for(Duration::from_secs(60), "tuning to stop", || {
        spawned_stderr(dir.path()).contains("tuning stopped")
    });
    let ids = wait_for_some(Duration::from_secs(20), "the pool's workers", || {
        let ids = pool_process(root, "pool.sh")
            .map(workers)
            .unwrap_or_default();
        (ids.len() == 4).then_some(ids)
    });
    kill(root, Signal::SIGTERM);
    wait_for(Duration::from_secs(20), "the command to take it", || {
        dir.path().join("term").exists()
    });
    let status = t.wait().unwrap();
    assert_eq!(status.code(), Some(125), "{}", spawned_stderr(dir.path()));
    assert_eq!(stopped(&ids), 0, "a worker was left stopped");
    kill_ids(&ids);
}

#[test]
fn the_guard_continues_frozen_workers_when_tact_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, ids) = shell_pool_held_at_two(dir.path(), 4);
    let sh = pool_process(t.id() as i32, "pool.sh").expect("the pool's shell");
    let sh_id = ProcReader::new().stat(sh).unwrap().id();
    kill(t.id() as i32, Signal::SIGKILL);
    t.wait().unwrap();
    wait_for(
        Duration::from_secs(10),
        "the guard to continue them",
        || stopped(&ids) == 0,
    );
    // And they go on working.
    let before = counter(dir.path());
    wait_for(Duration::from_secs(20), "the workers to go on", || {
        counter(dir.path()) >= before + 8
    });
    kill_ids(&ids);
    kill_ids(&[sh_id]);
}

#[test]
fn a_moving_policy_reaches_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    // From 1 TCC must try 2 (slow start doubles), whatever it then judges.
    let out = tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--init",
            "1",
            "--policy",
            QUICK_TCC,
            "--json-log",
            "tune.jsonl",
            "--",
            "python3",
            "pool.py",
            "6",
            "0.05",
            "n",
            "150",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(counter(dir.path()), 150, "every task ran once");
    let log = json_log(&dir.path().join("tune.jsonl"));
    let targets: Vec<u64> = of_kind(&log, "target")
        .iter()
        .map(|l| l["target"].as_u64().unwrap())
        .collect();
    assert_eq!(targets[0], 1, "{targets:?}");
    assert!(
        targets.iter().all(|&t| t <= 6),
        "above the pool: {targets:?}"
    );
    let highest = *targets.iter().max().unwrap();
    assert!(highest > 1, "the policy never moved: {targets:?}");
    let frozen: Vec<u64> = of_kind(&log, "frozen")
        .iter()
        .map(|l| l["frozen"].as_u64().unwrap())
        .collect();
    // First 5 of 6 held, then fewer as the count rose.
    assert!(frozen.contains(&5), "{frozen:?}");
    assert!(
        frozen.iter().any(|&f| f <= 6 - highest && f < 5),
        "the pool never ran {highest}: frozen counts {frozen:?}, targets {targets:?}"
    );
}

#[test]
fn busy_workers_are_frozen_mid_task_after_the_wait_and_their_tasks_still_end() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    // Workers that compute from task to task are never quiet while there is work: after
    // --freeze-wait two of three are stopped mid-task, and continued once the third finds no
    // more work, so that the tasks they hold end.
    let out = tune(
        dir.path(),
        &[
            "--freeze",
            "--freeze-wait",
            "300ms",
            "--completions",
            "file:n",
            "--policy",
            "static:1",
            "--json-log",
            "tune.jsonl",
            "--",
            "python3",
            "pool.py",
            "3",
            "-0.05",
            "n",
            "60",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(counter(dir.path()), 60, "every task ran once");
    let log = json_log(&dir.path().join("tune.jsonl"));
    let frozen = of_kind(&log, "frozen");
    assert!(
        frozen.iter().any(|l| l["mid_task"].as_u64().unwrap() > 0),
        "no worker was frozen mid-task: {frozen:?}"
    );
    assert!(
        frozen.iter().all(|l| l["frozen"].as_u64().unwrap() <= 2),
        "{frozen:?}"
    );
}

#[test]
fn a_killed_frozen_worker_is_forgotten_and_its_replacement_taken_in() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    let mut t = spawn_tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--policy",
            "static:2",
            "--",
            "python3",
            "pool.py",
            "5",
            "0.1",
            "n",
        ],
    );
    let root = t.id() as i32;
    let mut ids = Vec::new();
    wait_for(Duration::from_secs(60), "3 of 5 workers stopped", || {
        ids = pool_process(root, "pool.py")
            .map(workers)
            .unwrap_or_default();
        ids.len() == 5 && stopped(&ids) == 3
    });
    let r = ProcReader::new();
    let victim = *ids
        .iter()
        .find(|id| r.stat(id.pid).is_ok_and(|s| s.is_stopped()))
        .unwrap();
    kill_ids(&[victim]);
    // Python's pool starts a worker in its place; tact takes it in and holds the count at 2.
    let mut now = Vec::new();
    wait_for(
        Duration::from_secs(60),
        "the replacement to be held",
        || {
            now = pool_process(root, "pool.py")
                .map(workers)
                .unwrap_or_default();
            now.len() == 5 && !now.contains(&victim) && stopped(&now) == 3
        },
    );
    assert!(now.iter().any(|id| !ids.contains(id)), "{now:?} {ids:?}");
    kill(root, Signal::SIGTERM);
    let status = t.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "{}",
        spawned_stderr(dir.path())
    );
    assert_eq!(stopped(&now), 0, "a worker was left stopped");
}

#[test]
fn tasks_held_by_workers_frozen_asleep_end_when_the_pool_stalls() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    // Workers asleep in 0.2 s tasks look idle and are frozen holding them; the one left runs
    // the rest, then the pool waits for the held ones: ten mean gaps (some 2 s) later tact
    // swaps a frozen worker in, and again, until every task has ended.
    let mut t = spawn_tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--policy",
            "static:1",
            "--",
            "python3",
            "pool.py",
            "3",
            "0.2",
            "n",
            "20",
        ],
    );
    let root = t.id() as i32;
    let ended = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = t.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > ended {
            kill_tree(root);
            t.wait().unwrap();
            panic!("the pool never ended: {} of 20 tasks", counter(dir.path()));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{}", spawned_stderr(dir.path()));
    assert_eq!(counter(dir.path()), 20, "every task ran once");
}

#[test]
fn what_cannot_work_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i32, &str); 6] = [
        // Workers' exits are not tasks.
        (
            &["--freeze", "--", "touch", "ran"],
            125,
            "--completions file:PATH",
        ),
        (
            &[
                "--freeze",
                "--signals",
                "--completions",
                "tree",
                "--",
                "touch",
                "ran",
            ],
            2,
            "cannot be used with",
        ),
        (
            &["--freeze-depth", "2", "--", "touch", "ran"],
            2,
            "--freeze",
        ),
        (
            &[
                "--freeze",
                "--completions",
                "tree",
                "--max",
                "2",
                "--policy",
                "static:3",
                "--",
                "touch",
                "ran",
            ],
            125,
            "static",
        ),
        (
            &[
                "--freeze",
                "--completions",
                "tree",
                "--key",
                "pool",
                "--policy",
                "static:2",
                "--",
                "touch",
                "ran",
            ],
            125,
            "warm start is TCC's",
        ),
        (
            &[
                "--freeze",
                "--completions",
                "tree",
                "--freeze-depth",
                "0",
                "--",
                "touch",
                "ran",
            ],
            2,
            "--freeze-depth",
        ),
    ];
    for (args, code, says) in cases {
        let out = tune(dir.path(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.path().join("ran").exists(), "{args:?} ran the command");
        if code == 125 {
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
}

#[test]
fn a_count_above_the_pool_stops_tuning_and_the_pool_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    write_pool(dir.path());
    let out = tune(
        dir.path(),
        &[
            "--freeze",
            "--completions",
            "file:n",
            "--policy",
            "static:4",
            "--",
            "python3",
            "pool.py",
            "3",
            "0.05",
            "n",
            "100",
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("static"), "{}", stderr(&out));
    assert!(stderr(&out).contains("tuning stopped"), "{}", stderr(&out));
    assert_eq!(counter(dir.path()), 100, "the pool ran all its tasks");
}
