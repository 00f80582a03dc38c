//! `tact demo`: shows, in under a minute and with nothing but this binary, what tact does that
//! `nice` cannot.
//!
//! A foreground workload (dependent lookups in an in-memory index, see `work.rs`) is timed alone,
//! then against a background job (a backup verifier streaming a page-cached file) three ways:
//! unregulated, under `nice -n 19`, and under `tact run --polite`. The two jobs compete for the
//! memory bus and the shared cache, not for a CPU (each has a core), so `nice` has nothing to
//! arbitrate, while the background job's own progress drops whenever the foreground runs, which
//! is exactly what tact watches.

mod work;

use std::fs::{self, File};
use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cli::{DemoArgs, WorkArgs};

/// How long the background job runs alone before the foreground starts, in every scenario: long
/// enough for tact's bootstrap (`BOOTSTRAP` testpoints of `TESTPOINT`) to calibrate its target.
const WARMUP: Duration = Duration::from_millis(2500);
const BOOTSTRAP: &str = "10";
const TESTPOINT: &str = "200ms";
/// Longest single suspension: the demo's foreground runs are only seconds long.
const MAX_SUSPEND: &str = "4s";
/// How often the progress line is refreshed on a terminal.
const TICK: Duration = Duration::from_millis(100);

pub fn work(args: &WorkArgs) -> Result<()> {
    work::work(&args.kind, &args.args)
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

fn check_interrupted() -> Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!(Interrupted);
    }
    Ok(())
}

#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

pub fn run(args: &DemoArgs) -> Result<()> {
    catch_signals();
    let started = Instant::now();
    let exe =
        std::env::current_exe().context("cannot find the tact binary to run the workloads")?;
    let parent = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir(),
    };
    let scratch = Scratch::create(&parent)?;
    let mut out = Progress::new();
    let result = demo(args, &exe, &scratch, &mut out);
    out.clear();
    // Children first (they hold files open), then the files.
    drop(scratch);
    match result {
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("tact demo: interrupted; background jobs stopped and scratch files removed");
            std::process::exit(130);
        }
        Err(e) => Err(e),
        Ok(report) => {
            print!("{report}");
            println!("(demo took {:.0} s)", started.elapsed().as_secs_f64());
            Ok(())
        }
    }
}

/// One scenario's measurements.
struct Outcome {
    name: &'static str,
    fg: Duration,
    /// Background bytes done while the foreground ran.
    bg_bytes: Option<u64>,
    /// Suspensions tact imposed while the foreground ran, and the time they covered.
    suspensions: Option<(u32, f64)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Bg {
    Unregulated,
    Nice,
    Tact,
}

fn demo(args: &DemoArgs, exe: &Path, scratch: &Scratch, out: &mut Progress) -> Result<String> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    out.line("[0/4] preparing: writing the background job's 256 MiB input file");
    let input = scratch.dir.join("backup.img");
    write_input(&input)?;
    check_interrupted()?;

    // Foreground alone: how many lookups fit in --length.
    let title = "[1/4] foreground alone";
    out.line(&format!(
        "{title}: calibrating its work to {}",
        fmt_secs(args.length)
    ));
    let fg = spawn_fg(
        exe,
        &["secs", &format!("{}", args.length.as_secs_f64())],
        scratch,
    )?;
    let (ops, alone) = wait_fg(fg, scratch, out, title, None)?;
    if ops == 0 {
        bail!("the foreground workload did no work");
    }
    let mut rows = vec![Outcome {
        name: "foreground alone",
        fg: alone,
        bg_bytes: None,
        suspensions: None,
    }];

    for (i, (kind, name)) in [
        (Bg::Unregulated, "+ background, unregulated"),
        (Bg::Nice, "+ background, nice -n 19"),
        (Bg::Tact, "+ background, tact run --polite"),
    ]
    .into_iter()
    .enumerate()
    {
        let title = format!("[{}/4] {name}", i + 2);
        rows.push(scenario(
            exe, scratch, out, &title, name, kind, &input, ops, alone,
        )?);
    }
    Ok(report(&rows, ops, cores))
}

#[allow(clippy::too_many_arguments)]
fn scenario(
    exe: &Path,
    scratch: &Scratch,
    out: &mut Progress,
    title: &str,
    name: &'static str,
    kind: Bg,
    input: &Path,
    ops: u64,
    alone: Duration,
) -> Result<Outcome> {
    let counter = scratch.dir.join("bg.count");
    fs::write(&counter, "0\n")?;
    let log = scratch.dir.join("tact.jsonl");
    let worker = [
        exe.as_os_str(),
        "__work".as_ref(),
        "bg".as_ref(),
        input.as_os_str(),
        counter.as_os_str(),
    ];
    let mut cmd = match kind {
        Bg::Tact => {
            let mut c = Command::new(exe);
            c.args(["run", "--polite", "--progress", "io", "--probation", "0"])
                .args([
                    "--bootstrap",
                    BOOTSTRAP,
                    "--testpoint",
                    TESTPOINT,
                    "--max-suspend",
                    MAX_SUSPEND,
                ])
                .arg("--state-dir")
                .arg(scratch.dir.join("state"))
                .arg("--json-log")
                .arg(&log)
                .arg("--")
                .args(worker);
            c
        }
        _ => {
            let mut c = Command::new(exe);
            c.args(&worker[1..]);
            if kind == Bg::Nice {
                // SAFETY: setpriority is async-signal-safe.
                unsafe {
                    c.pre_exec(|| {
                        if libc::setpriority(libc::PRIO_PROCESS, 0, 19) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            c
        }
    };
    let stderr = File::create(scratch.dir.join("bg.stderr"))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let bg_started = Instant::now();
    let bg = cmd.spawn().context("cannot start the background job")?;
    let bg_pid = bg.id();
    scratch.adopt(bg, kind == Bg::Tact);

    // The background job runs alone for a while (tact calibrates its target meanwhile).
    let warm_until = bg_started + WARMUP;
    while Instant::now() < warm_until {
        check_interrupted()?;
        scratch.check_alive(bg_pid)?;
        let left = warm_until.saturating_duration_since(Instant::now());
        out.update(&format!(
            "{title}: background warming up alone, {:.1} s",
            left.as_secs_f64()
        ));
        std::thread::sleep(TICK.min(left));
    }
    let c0 = work::read_counter(&counter);
    let fg_start = bg_started.elapsed();
    let fg = spawn_fg(exe, &["ops", &ops.to_string()], scratch)?;
    let (_, took) = wait_fg(fg, scratch, out, title, Some((alone, bg_pid)))?;
    let fg_end = bg_started.elapsed();
    let c1 = work::read_counter(&counter);
    scratch.check_alive(bg_pid)?;
    scratch.stop_children();
    let suspensions = if kind == Bg::Tact {
        Some(count_suspensions(&log, fg_start, fg_end))
    } else {
        None
    };
    Ok(Outcome {
        name,
        fg: took,
        bg_bytes: Some(c1.saturating_sub(c0)),
        suspensions,
    })
}

/// Suspensions decided while the foreground ran (`t` is seconds since tact started, which is
/// within a millisecond of when the demo started it), and the seconds they covered within it.
fn count_suspensions(log: &Path, from: Duration, to: Duration) -> (u32, f64) {
    let (from, to) = (from.as_secs_f64(), to.as_secs_f64());
    let mut n = 0;
    let mut covered = 0.0;
    for line in fs::read_to_string(log).unwrap_or_default().lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(t), Some(s)) = (v["t"].as_f64(), v["suspend"].as_f64()) else {
            continue;
        };
        if s > 0.0 && t + s > from && t < to {
            n += 1;
            covered += (t + s).min(to) - t.max(from);
        }
    }
    (n, covered)
}

fn spawn_fg(exe: &Path, args: &[&str], scratch: &Scratch) -> Result<u32> {
    let child = Command::new(exe)
        .args(["__work", "fg"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the foreground workload")?;
    let pid = child.id();
    scratch.adopt(child, false);
    Ok(pid)
}

/// Waits for the foreground run `pid`, showing progress; returns its (ops, seconds).
fn wait_fg(
    pid: u32,
    scratch: &Scratch,
    out: &mut Progress,
    title: &str,
    contended: Option<(Duration, u32)>,
) -> Result<(u64, Duration)> {
    let start = Instant::now();
    loop {
        check_interrupted()?;
        if let Some(child) = scratch.take_if_exited(pid)? {
            let output = child.wait_with_output()?;
            let text = String::from_utf8_lossy(&output.stdout);
            let mut it = text.split_whitespace();
            let parsed = (|| {
                Some((
                    it.next()?.parse::<u64>().ok()?,
                    it.next()?.parse::<f64>().ok()?,
                ))
            })();
            match parsed {
                Some((ops, secs)) if output.status.success() => {
                    return Ok((ops, Duration::from_secs_f64(secs)))
                }
                _ => bail!(
                    "the foreground workload failed ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            }
        }
        if let Some((_, bg)) = contended {
            scratch.check_alive(bg)?;
        }
        let msg = match contended {
            Some((alone, _)) => format!(
                "{title}: foreground running, {:.1} s (alone it took {:.1} s)",
                start.elapsed().as_secs_f64(),
                alone.as_secs_f64()
            ),
            None => format!(
                "{title}: foreground running, {:.1} s",
                start.elapsed().as_secs_f64()
            ),
        };
        out.update(&msg);
        std::thread::sleep(TICK);
    }
}

/// The background job's input: pseudo-random bytes, written and synced up front so that their
/// write-back does not disturb the measurements; it stays in the page cache.
fn write_input(path: &Path) -> Result<()> {
    let mut f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    // Claim the space before writing, so that a full filesystem is reported at once, with what it
    // has free and the way out, rather than as a bare "No space left on device" halfway through.
    if let Err(nix::errno::Errno::ENOSPC) =
        nix::fcntl::posix_fallocate(f.as_raw_fd(), 0, work::BG_FILE_SIZE as libc::off_t)
    {
        let dir = path.parent().unwrap_or(path);
        let free = nix::sys::statvfs::statvfs(dir)
            .map(|s| {
                format!(
                    "{} MiB free",
                    (s.blocks_available() * s.fragment_size()) >> 20
                )
            })
            .unwrap_or_else(|_| "free space unknown".into());
        bail!(
            "{} has no room for the background job's {} MiB input file ({free}); \
             pass --dir DIR on a filesystem with room",
            dir.display(),
            work::BG_FILE_SIZE >> 20
        );
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..(work::BG_FILE_SIZE >> 20) {
        for w in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf)?;
        check_interrupted()?;
    }
    f.sync_all()
        .with_context(|| format!("cannot write {}", path.display()))
}

fn report(rows: &[Outcome], ops: u64, cores: usize) -> String {
    let mut s = String::new();
    let alone = rows[0].fg.as_secs_f64();
    let slow = |o: &Outcome| o.fg.as_secs_f64() / alone;
    let mb = |o: &Outcome| o.bg_bytes.map(|b| b as f64 / 1e6);
    s += &format!("\nForeground: {ops} dependent lookups in a 64 MiB in-memory index.\n");
    s += "Background: a backup verifier re-reading a 256 MiB file from the page cache.\n\n";
    s += &format!(
        "{:<32} {:>10} {:>9} {:>16}  {}\n",
        "scenario", "foreground", "slowdown", "background work", "tact suspended it"
    );
    for o in rows {
        let work = mb(o).map_or("-".to_string(), |m| format!("{m:.0} MB"));
        let susp = o.suspensions.map_or(String::new(), |(n, secs)| {
            format!("{n} times ({secs:.1} s)")
        });
        s += &format!(
            "{:<32} {:>8.1} s {:>8.2}x {:>16}  {}\n",
            o.name,
            o.fg.as_secs_f64(),
            slow(o),
            work,
            susp
        );
    }
    s += "\n";
    let [_, unreg, nice, tact] = rows else {
        return s;
    };
    let (su, sn, st) = (slow(unreg), slow(nice), slow(tact));
    let (wu, wt) = (mb(unreg).unwrap_or(0.0), mb(tact).unwrap_or(0.0));
    let (n_susp, _) = tact.suspensions.unwrap_or((0, 0.0));
    let mut p = format!(
        "Reading: the unregulated background job made the foreground {su:.2}x slower. This machine has {cores} \
         core{}, ",
        if cores == 1 { "" } else { "s" }
    );
    if sn < su * 0.9 {
        p += &format!(
            "yet under nice -n 19 the foreground was only {sn:.2}x slower: here much of the contention was for CPU \
             time, which nice arbitrates (other processes are probably using the CPUs too)"
        );
    } else if cores >= 2 {
        p += &format!(
            "so each job has a CPU of its own and they compete for the memory bus and the shared cache, which nice \
             does not arbitrate: under nice -n 19 the foreground was still {sn:.2}x slower"
        );
    } else {
        p += &format!("and under nice -n 19 the foreground was still {sn:.2}x slower");
    }
    p += ". ";
    if st < sn * 0.9 && n_susp > 0 {
        p += &format!(
            "tact saw the background job's own progress drop as soon as the foreground started and suspended it \
             {n_susp} times, so the foreground was only {st:.2}x slower; the background job still did {:.0}% of its \
             unregulated work in the same time, running whenever its progress was back on target.",
            if wu > 0.0 { 100.0 * wt / wu } else { 0.0 }
        );
    } else {
        p += &format!(
            "This time tact did not do clearly better (foreground {st:.2}x slower, {n_susp} suspensions): \
             tact acts only when the background job's own progress drops, and here it did not drop by a \
             significant margin, either because the contention was mild on this machine or because other \
             work made the measurements too noisy to judge."
        );
    }
    s += &wrap(&p, 100);
    s += "\n";
    s
}

fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out += word;
        line += word.len();
    }
    out.push('\n');
    out
}

fn fmt_secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The progress line: rewritten in place on a terminal, one plain line per phase otherwise.
struct Progress {
    tty: bool,
    width: usize,
    last_title: String,
}

impl Progress {
    fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
            width: 0,
            last_title: String::new(),
        }
    }

    /// A phase begins.
    fn line(&mut self, msg: &str) {
        if self.tty {
            self.update(msg);
        } else {
            eprintln!("{msg}");
        }
        self.last_title = msg.split(':').next().unwrap_or("").to_string();
    }

    /// Progress within a phase: shown on a terminal; otherwise only a phase's first message.
    fn update(&mut self, msg: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let pad = self.width.saturating_sub(msg.len());
            let _ = write!(err, "\r{msg}{}", " ".repeat(pad));
            self.width = msg.len();
        } else {
            let title = msg.split(':').next().unwrap_or("");
            if title != self.last_title {
                let _ = writeln!(err, "{title}");
                self.last_title = title.to_string();
            }
        }
        let _ = err.flush();
    }

    fn clear(&mut self) {
        if self.tty && self.width > 0 {
            eprint!("\r{}\r", " ".repeat(self.width));
            self.width = 0;
        }
    }
}

/// The scratch directory and the children the demo started; dropping it stops them and removes it.
struct Scratch {
    dir: PathBuf,
    /// (child, is a `tact run` regulator): a regulator gets SIGTERM first, which it passes on to
    /// its job after resuming it.
    children: std::cell::RefCell<Vec<(Child, bool)>>,
}

impl Scratch {
    fn create(parent: &Path) -> Result<Self> {
        if !parent.is_dir() {
            bail!("--dir {}: no such directory", parent.display());
        }
        let dir = parent.join(format!("tact-demo.{}", std::process::id()));
        fs::create_dir(&dir)
            .with_context(|| format!("cannot create the scratch directory {}", dir.display()))?;
        Ok(Scratch {
            dir,
            children: Default::default(),
        })
    }

    fn adopt(&self, child: Child, regulator: bool) {
        self.children.borrow_mut().push((child, regulator));
    }

    /// Removes and returns the child `pid` if it has exited.
    fn take_if_exited(&self, pid: u32) -> Result<Option<Child>> {
        let mut children = self.children.borrow_mut();
        let Some(i) = children.iter().position(|(c, _)| c.id() == pid) else {
            bail!("no child {pid}")
        };
        if children[i].0.try_wait()?.is_some() {
            return Ok(Some(children.remove(i).0));
        }
        Ok(None)
    }

    /// Fails if the background job `pid` has exited, with what it said.
    fn check_alive(&self, pid: u32) -> Result<()> {
        let mut children = self.children.borrow_mut();
        let Some((child, _)) = children.iter_mut().find(|(c, _)| c.id() == pid) else {
            return Ok(());
        };
        if let Some(status) = child.try_wait()? {
            let said = fs::read_to_string(self.dir.join("bg.stderr")).unwrap_or_default();
            bail!(
                "the background job exited early ({status}): {}",
                said.trim()
            );
        }
        Ok(())
    }

    /// Stops every child still running: a regulator by SIGTERM (it resumes its job and passes the
    /// signal on), anything else, or a regulator that does not exit in time, by SIGKILL (the
    /// background worker dies with its parent: it asked for PR_SET_PDEATHSIG).
    fn stop_children(&self) {
        let mut children = self.children.borrow_mut();
        for (child, regulator) in children.iter_mut() {
            if child.try_wait().ok().flatten().is_some() {
                continue;
            }
            if *regulator {
                // SAFETY: kill(2) on the pid of a child we have not reaped yet.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
                let deadline = Instant::now() + Duration::from_secs(3);
                while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        children.clear();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.stop_children();
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("tact demo: cannot remove {}: {e}", self.dir.display());
        }
    }
}
