//! tune-drive as an unmodified program under `tact tune` (spec concurrency.md §6: external mode
//! must meet G1 and G2 within ±3 points of in-process on X1). The driver then runs no controller:
//! `tact tune` decides the count and tells it the way it tells any program, and counts what it
//! finishes from a counter file (`--completions file:PATH`).
//!
//! - [`Gate::WorkersFile`]: the count is the number in a file that tact rewrites (`tact tune
//!   --workers-file`), reread every [`REREAD`], as GNU parallel rereads its `-j FILE` between
//!   jobs. Worker i runs tasks while i is below it, and finishes its task under way when it
//!   falls.
//! - [`Gate::Jobserver`]: tact is make's jobserver (`tact tune --jobserver`, either style), and
//!   the driver a client as make's recipes are: one implicit slot, and a token from the
//!   jobserver for every task beyond it, given back when the task ends.
//!
//! Either way the driver writes its completions into the counter file every [`COUNTER_EVERY`],
//! and reads tact's `--json-log` at its end for the controller's counts and transitions
//! ([`tact_log`]), so that its record has the same steady periods and count statistics as an
//! in-process run's.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tact_core::tune::Transition;

/// How often the workers file is reread (tact itself polls its command every 5 ms).
pub const REREAD: Duration = Duration::from_millis(5);

/// How often the counter file is rewritten.
pub const COUNTER_EVERY: Duration = Duration::from_millis(2);

/// How `tact tune` tells the driver its count: `workers-file:PATH` or `jobserver`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    WorkersFile(PathBuf),
    Jobserver,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("workers-file", path)) if !path.is_empty() => {
                Ok(Mode::WorkersFile(PathBuf::from(path)))
            }
            None if s == "jobserver" => Ok(Mode::Jobserver),
            _ => Err(format!(
                "expected workers-file:PATH or jobserver, got {s:?}"
            )),
        }
    }
}

/// What lets a worker run its next task.
enum Gate {
    /// The count in the workers file, and its history as seen ((s since `origin`, count)).
    WorkersFile {
        count: Mutex<usize>,
        changed: Condvar,
        seen: Mutex<Vec<(f64, usize)>>,
    },
    /// Worker 0 holds the implicit slot; the others take a token per task.
    Jobserver(jobserver::Client),
}

/// `n` worker threads running `task` as the gate allows, until [`Workers::stop`].
pub struct Workers {
    gate: Arc<Gate>,
    running: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts the workers and, for a workers file, its reader. For the jobserver, reads the
    /// client from the environment (`MAKEFLAGS`, as `tact tune` sets it); an error when there is
    /// none, since the driver would then run one task at a time and say nothing.
    pub fn start(
        mode: &Mode,
        n: usize,
        origin: Instant,
        task: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Workers> {
        let gate = Arc::new(match mode {
            Mode::WorkersFile(_) => Gate::WorkersFile {
                count: Mutex::new(0),
                changed: Condvar::new(),
                seen: Mutex::new(Vec::new()),
            },
            Mode::Jobserver => {
                // SAFETY: the descriptors MAKEFLAGS names are tact's pipe (or it names a fifo),
                // inherited and never closed by this process; with check_pipe the crate
                // refuses descriptors that are not pipes, such as a number this process reused
                // for its socket had they not been inherited.
                let env = unsafe { jobserver::Client::from_env_ext(true) };
                Gate::Jobserver(env.client.context(
                    "--external jobserver: no jobserver in MAKEFLAGS (run under `tact tune --jobserver`)",
                )?)
            }
        });
        let running = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        if let Mode::WorkersFile(path) = mode {
            let (gate, stop, path) = (Arc::clone(&gate), Arc::clone(&stop), path.clone());
            handles.push(
                std::thread::Builder::new()
                    .name("workers-file".into())
                    .spawn(move || reread(&gate, &stop, &path, n, origin))?,
            );
        }
        for i in 0..n {
            let (gate, running, stop, task) = (
                Arc::clone(&gate),
                Arc::clone(&running),
                Arc::clone(&stop),
                Arc::clone(&task),
            );
            let handle = std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || work(i, &gate, &running, &stop, &*task))?;
            // A jobserver worker may block in acquire() at the end, where nothing gives it a
            // token: it is not joined (the process ends with it).
            if matches!(mode, Mode::WorkersFile(_)) || i == 0 {
                handles.push(handle);
            }
        }
        Ok(Workers {
            gate,
            running,
            stop,
            handles,
        })
    }

    /// The count now: the workers file's, or for the jobserver the tasks running.
    pub fn count(&self) -> usize {
        match &*self.gate {
            Gate::WorkersFile { count, .. } => *count.lock().expect("count"),
            Gate::Jobserver(_) => self.running.load(Ordering::Relaxed),
        }
    }

    /// The workers file's counts as the driver saw them change (none for the jobserver).
    pub fn seen(&self) -> Vec<(f64, usize)> {
        match &*self.gate {
            Gate::WorkersFile { seen, .. } => seen.lock().expect("seen").clone(),
            Gate::Jobserver(_) => Vec::new(),
        }
    }

    /// Stops the workers after their tasks under way.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Gate::WorkersFile { count, changed, .. } = &*self.gate {
            let _held = count.lock().expect("count");
            changed.notify_all();
        }
        for h in self.handles {
            let _ = h.join();
        }
    }
}

fn work(i: usize, gate: &Gate, running: &AtomicUsize, stop: &AtomicBool, task: &dyn Fn()) {
    while !stop.load(Ordering::Relaxed) {
        let token = match gate {
            Gate::WorkersFile { count, changed, .. } => {
                let mut n = count.lock().expect("count");
                while i >= *n && !stop.load(Ordering::Relaxed) {
                    n = changed.wait(n).expect("count");
                }
                None
            }
            Gate::Jobserver(_) if i == 0 => None,
            Gate::Jobserver(client) => match client.acquire() {
                Ok(token) => Some(token),
                Err(e) => {
                    eprintln!("tune-drive: jobserver: {e}");
                    return;
                }
            },
        };
        if stop.load(Ordering::Relaxed) {
            return;
        }
        running.fetch_add(1, Ordering::Relaxed);
        task();
        running.fetch_sub(1, Ordering::Relaxed);
        drop(token);
    }
}

/// The workers file's reader: a missing or unparsable file keeps the count it had (tact writes
/// it whole, by rename, before the command starts).
fn reread(gate: &Gate, stop: &AtomicBool, path: &Path, n: usize, origin: Instant) {
    let Gate::WorkersFile {
        count,
        changed,
        seen,
    } = gate
    else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some(m) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
        {
            let m = m.min(n);
            let mut held = count.lock().expect("count");
            if *held != m {
                *held = m;
                seen.lock()
                    .expect("seen")
                    .push((origin.elapsed().as_secs_f64(), m));
                changed.notify_all();
            }
        }
        std::thread::sleep(REREAD);
    }
}

/// Rewrites `path` with `done`'s value every [`COUNTER_EVERY`] while it changes, whole (written
/// beside it and renamed), so that tact never reads half a number; until `stop`.
pub fn keep_counter(
    path: PathBuf,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    let temp = path.with_extension("tmp");
    let write = move |n: u64| {
        std::fs::write(&temp, format!("{n}\n")).and_then(|()| std::fs::rename(&temp, &path))
    };
    write(0).context("--done-file: cannot write it")?;
    Ok(std::thread::Builder::new()
        .name("done-file".into())
        .spawn(move || {
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                let n = done.load(Ordering::Relaxed);
                if n != last && write(n).is_ok() {
                    last = n;
                }
                std::thread::sleep(COUNTER_EVERY);
            }
            let _ = write(done.load(Ordering::Relaxed));
        })?)
}

/// What `tact tune --json-log` says of its controller, with times in s since tact started the
/// command.
#[derive(Debug, Default)]
pub struct TactLog {
    /// The counts it set ((s, count), its `target` lines).
    pub targets: Vec<(f64, usize)>,
    pub trace: Vec<Transition>,
}

/// Reads a `tact tune --json-log`.
pub fn tact_log(text: &str) -> Result<TactLog> {
    let mut targets = Vec::new();
    let mut trace = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        let secs = |key: &str| v[key].as_f64().map(Duration::from_secs_f64);
        match v["kind"].as_str() {
            Some("target") => {
                let (Some(t), Some(n)) = (v["t"].as_f64(), v["target"].as_u64()) else {
                    bail!("line {}: a target line without t or target", i + 1);
                };
                targets.push((t, n as usize));
            }
            Some("transition") => {
                let at = secs("t").with_context(|| format!("line {}: no t", i + 1))?;
                trace.push(Transition {
                    at,
                    busy: secs("busy").unwrap_or_default(),
                    cycle: v["cycle"].as_u64().unwrap_or(0),
                    from: field(&v, "from").with_context(|| format!("line {}: from", i + 1))?,
                    to: field(&v, "to").with_context(|| format!("line {}: to", i + 1))?,
                    reason: field(&v, "reason")
                        .with_context(|| format!("line {}: reason", i + 1))?,
                    target_from: v["target_from"].as_u64().unwrap_or(0) as usize,
                    target_to: v["target_to"].as_u64().unwrap_or(0) as usize,
                    throughput: v["throughput"].as_f64(),
                    batches: v["batches"].as_u64().unwrap_or(0) as u32,
                    forced: v["forced"].as_bool().unwrap_or(false),
                    hinted: v["hinted"].as_bool().unwrap_or(false),
                    psi: v["psi"].as_bool().unwrap_or(false),
                });
            }
            _ => {}
        }
    }
    Ok(TactLog { targets, trace })
}

fn field<T: serde::de::DeserializeOwned>(v: &serde_json::Value, key: &str) -> Result<T> {
    Ok(serde_json::from_value(v[key].clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_core::tune::{Phase, Reason};

    #[test]
    fn modes_parse_and_bad_ones_are_named() {
        assert_eq!(
            "workers-file:/tmp/w".parse::<Mode>(),
            Ok(Mode::WorkersFile("/tmp/w".into()))
        );
        assert_eq!("jobserver".parse::<Mode>(), Ok(Mode::Jobserver));
        for bad in ["workers-file:", "jobserver:x", "make", ""] {
            let e = bad.parse::<Mode>().unwrap_err();
            assert!(e.contains("workers-file:PATH"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_log_gives_the_counts_and_the_transitions() {
        let text = r#"{"t":0.0,"kind":"target","target":2,"from":null,"completions":0,"in_flight":0}
{"t":1.5,"kind":"transition","cycle":0,"from":"base","to":"add","reason":"measured","target_from":2,"target_to":4,"throughput":100.5,"batches":30,"forced":false,"hinted":false,"psi":false,"busy":1.4,"completions":300}
{"t":1.5,"kind":"target","target":4,"from":2,"completions":300,"in_flight":2}

{"t":9.0,"kind":"transition","cycle":0,"from":"remove","to":"steady","reason":"lost","target_from":3,"target_to":4,"throughput":null,"batches":12,"forced":true,"hinted":false,"psi":false,"busy":8.0,"completions":900}
{"t":30.0,"kind":"end","completions":4000}
"#;
        let TactLog { targets, trace } = tact_log(text).unwrap();
        assert_eq!(targets, vec![(0.0, 2), (1.5, 4)]);
        assert_eq!(trace.len(), 2);
        assert_eq!(
            (trace[0].from, trace[0].to, trace[0].reason),
            (Phase::Base, Phase::Add, Reason::Measured)
        );
        assert_eq!(trace[0].throughput, Some(100.5));
        let s = &trace[1];
        assert_eq!(
            (s.to, s.at, s.target_to, s.forced),
            (Phase::Steady, Duration::from_secs(9), 4, true)
        );
        assert_eq!(s.throughput, None);
        assert!(tact_log("{\"kind\":\"transition\",\"t\":1}").is_err());
        assert!(tact_log("not json").is_err());
    }
}
