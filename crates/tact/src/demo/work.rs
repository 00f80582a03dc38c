//! The demo's built-in workloads, run as `tact __work fg ...` and `tact __work bg ...`.
//!
//! - `fg DIR ops N` / `fg DIR secs S`: a small "database commit" loop: append a 4 KiB record to a
//!   log and `fdatasync` it, N times or for S seconds. Prints `OPS SECONDS` on stdout.
//! - `bg DIR COUNTER`: a bulk writer: 1 MiB buffered writes with an `fdatasync` every 16 MiB, into
//!   a file it rewrites from the start every 512 MiB. Keeps the bytes written so far in COUNTER
//!   (rewritten in place every 50 ms). Runs until killed, its parent dies, or 5 minutes pass.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Size of one foreground commit record.
pub const RECORD: usize = 4096;
/// Size of one background write.
const CHUNK: usize = 1 << 20;
/// The background job syncs its data after this many bytes.
const SYNC_EVERY: u64 = 16 << 20;
/// The background file is rewritten from the start after this many bytes.
const WRAP: u64 = 512 << 20;
/// The background job updates its counter file this often.
const COUNTER_EVERY: Duration = Duration::from_millis(50);
/// A background job left behind by a crashed demo stops by itself after this long.
const BG_LIFETIME: Duration = Duration::from_secs(300);

pub const FG_LOG: &str = "fg-commit.log";
pub const BG_DATA: &str = "bg-bulk.dat";

pub fn work(kind: &str, args: &[String]) -> Result<()> {
    match (kind, args) {
        ("fg", [dir, mode, n]) => {
            let limit = match mode.as_str() {
                "ops" => Limit::Ops(n.parse().context("fg ops: not a count")?),
                "secs" => Limit::Secs(Duration::from_secs_f64(n.parse().context("fg secs: not a number")?)),
                _ => bail!("fg: mode must be `ops` or `secs`"),
            };
            let (ops, elapsed) = foreground(Path::new(dir), limit)?;
            println!("{ops} {:.6}", elapsed.as_secs_f64());
            Ok(())
        }
        ("bg", [dir, counter, mode]) => background(Path::new(dir), Path::new(counter), mode == "direct"),
        _ => bail!("no such workload: {kind} {}", args.join(" ")),
    }
}

enum Limit {
    Ops(u64),
    Secs(Duration),
}

fn foreground(dir: &Path, limit: Limit) -> Result<(u64, Duration)> {
    let path = dir.join(FG_LOG);
    let log = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut record = [0u8; RECORD];
    let start = Instant::now();
    let mut ops = 0u64;
    loop {
        match limit {
            Limit::Ops(n) if ops >= n => break,
            Limit::Secs(s) if start.elapsed() >= s => break,
            _ => {}
        }
        record[..8].copy_from_slice(&ops.to_le_bytes());
        log.write_all_at(&record, ops * RECORD as u64).context("commit: write")?;
        log.sync_data().context("commit: fdatasync")?;
        ops += 1;
    }
    let elapsed = start.elapsed();
    drop(log);
    let _ = std::fs::remove_file(&path);
    Ok((ops, elapsed))
}

fn background(dir: &Path, counter: &Path, direct: bool) -> Result<()> {
    // Die with the demo (or with the `tact run` between us), whatever happens to it.
    // SAFETY: prctl with these arguments has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let path: PathBuf = dir.join(BG_DATA);
    use std::os::unix::fs::OpenOptionsExt;
    let flags = if direct { libc::O_DIRECT } else { 0 };
    let mut data = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(flags)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let count_file =
        OpenOptions::new().write(true).open(counter).with_context(|| format!("cannot open {}", counter.display()))?;
    let layout = std::alloc::Layout::from_size_align(CHUNK, 4096).unwrap();
    // SAFETY: non-zero size; the buffer lives for the whole process.
    let chunk: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(std::alloc::alloc(layout), CHUNK) };
    for (i, b) in chunk.iter_mut().enumerate() { *b = (i * 7 + 13) as u8; }
    let chunk: &[u8] = chunk;
    let start = Instant::now();
    let mut last_count = start;
    let mut written = 0u64;
    let mut since_sync = 0u64;
    let mut pos = 0u64;
    publish(&count_file, written)?;
    while start.elapsed() < BG_LIFETIME {
        data.write_all(chunk).context("bulk write")?;
        written += CHUNK as u64;
        since_sync += CHUNK as u64;
        pos += CHUNK as u64;
        if since_sync >= SYNC_EVERY {
            data.sync_data().context("bulk fdatasync")?;
            since_sync = 0;
        }
        if pos >= WRAP {
            data = OpenOptions::new().write(true).custom_flags(flags).open(&path)?;
            pos = 0;
        }
        if last_count.elapsed() >= COUNTER_EVERY {
            publish(&count_file, written)?;
            last_count = Instant::now();
        }
    }
    Ok(())
}

/// Fixed width, so rewriting in place never leaves a longer old number behind.
fn publish(f: &File, n: u64) -> Result<()> {
    f.write_all_at(format!("{n:020}\n").as_bytes(), 0).context("cannot update the counter")
}

/// Reads a counter written by `publish` (0 before the first write).
pub fn read_counter(path: &Path) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}
