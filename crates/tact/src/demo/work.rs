//! The demo's built-in workloads, run as `tact __work fg ...` and `tact __work bg ...`.
//!
//! Both are memory-bound, so on a machine with a core for each they never wait for a CPU (which is
//! all `nice` arbitrates) yet slow each other down through the shared cache and memory bus.
//!
//! - `fg ops N` / `fg secs S`: an in-memory index: dependent random lookups in a 64 MiB table
//!   (each lookup's address comes from the previous one, like walking a B-tree or hash chain), N
//!   of them or as many as fit in S seconds. Prints `OPS SECONDS` on stdout.
//! - `bg FILE COUNTER`: a backup verifier: reads FILE (kept in the page cache) over and over in
//!   1 MiB chunks and checksums it. Keeps the bytes verified so far in COUNTER, rewritten in place
//!   every 50 ms. Runs until killed, its parent dies, or 5 minutes pass.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Entries in the foreground's table (u64 each: 64 MiB, twice this machine's last-level cache).
const TABLE: usize = 8 << 20;
/// Lookups between looks at the clock.
const CHECK_EVERY: u64 = 1 << 16;
/// Size of one background read.
const CHUNK: usize = 1 << 20;
/// The background job updates its counter file this often.
const COUNTER_EVERY: Duration = Duration::from_millis(50);
/// A background job left behind by a crashed demo stops by itself after this long.
const BG_LIFETIME: Duration = Duration::from_secs(300);
/// Size of the file the background job verifies.
pub const BG_FILE_SIZE: u64 = 256 << 20;

pub fn work(kind: &str, args: &[String]) -> Result<()> {
    match (kind, args) {
        ("fg", [mode, n]) => {
            let limit = match mode.as_str() {
                "ops" => Limit::Ops(n.parse().context("fg ops: not a count")?),
                "secs" => Limit::Secs(Duration::from_secs_f64(
                    n.parse().context("fg secs: not a number")?,
                )),
                _ => bail!("fg: mode must be `ops` or `secs`"),
            };
            let (ops, elapsed) = foreground(limit);
            println!("{ops} {:.6}", elapsed.as_secs_f64());
            Ok(())
        }
        ("bg", [file, counter]) => background(Path::new(file), Path::new(counter)),
        _ => bail!("no such workload: {kind} {}", args.join(" ")),
    }
}

enum Limit {
    Ops(u64),
    Secs(Duration),
}

fn foreground(limit: Limit) -> (u64, Duration) {
    // next(x) = (A·x + C) mod 2^k visits every entry once per cycle (Hull–Dobell: C odd, A ≡ 1 mod
    // 4) in an order no prefetcher follows; storing it in the table makes each step a memory load.
    const A: u64 = 6364136223846793005;
    const C: u64 = 1442695040888963407;
    let mask = TABLE as u64 - 1;
    let table: Vec<u64> = (0..TABLE as u64)
        .map(|i| i.wrapping_mul(A).wrapping_add(C) & mask)
        .collect();
    let start = Instant::now();
    let mut x = 0u64;
    let mut ops = 0u64;
    loop {
        let batch = match limit {
            Limit::Ops(n) => CHECK_EVERY.min(n - ops),
            Limit::Secs(s) if start.elapsed() >= s => 0,
            Limit::Secs(_) => CHECK_EVERY,
        };
        if batch == 0 {
            break;
        }
        for _ in 0..batch {
            x = table[x as usize];
        }
        ops += batch;
    }
    std::hint::black_box(x);
    (ops, start.elapsed())
}

fn background(file: &Path, counter: &Path) -> Result<()> {
    // Die with the demo (or with the `tact run` between us), whatever happens to it.
    // SAFETY: prctl with these arguments touches no memory.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let data = File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let size = data.metadata()?.len();
    let count_file = OpenOptions::new()
        .write(true)
        .open(counter)
        .with_context(|| format!("cannot open {}", counter.display()))?;
    let mut buf = vec![0u8; CHUNK];
    let start = Instant::now();
    let mut last_count = start;
    let mut done = 0u64;
    let mut sum = 0u64;
    let mut pos = 0u64;
    publish(&count_file, done)?;
    while start.elapsed() < BG_LIFETIME {
        let n = data.read_at(&mut buf, pos).context("read")?;
        if n == 0 {
            pos = 0;
            continue;
        }
        // A token checksum (a word per page): the copy out of the page cache is the real work.
        for page in buf[..n].chunks(4096) {
            sum = sum.rotate_left(5) ^ u64::from(page[0]);
        }
        pos = (pos + n as u64) % size.max(1);
        done += n as u64;
        if last_count.elapsed() >= COUNTER_EVERY {
            publish(&count_file, done)?;
            last_count = Instant::now();
        }
    }
    std::hint::black_box(sum);
    Ok(())
}

/// Fixed width, so rewriting in place never leaves a longer old number behind.
fn publish(f: &File, n: u64) -> Result<()> {
    f.write_all_at(format!("{n:020}\n").as_bytes(), 0)
        .context("cannot update the counter")
}

/// Reads a counter written by `publish` (0 before the first write).
pub fn read_counter(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
