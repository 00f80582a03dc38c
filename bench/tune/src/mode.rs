//! The service's bottleneck modes: what a request does besides spinning its CPU time and waiting
//! out its delay. The driver (or anyone) can switch modes while the service runs (`M SPEC`), the
//! way the paper's experiments move the bottleneck mid-run.
//!
//! Two memory modes, because overcommitting memory needs swap to degrade rather than crash:
//! `memory:MiB` allocates anonymous memory (with swap, an overcommitted limit swaps); `mapped:FILE:MiB`
//! maps a file slice per connection (without swap, an overcommitted memory limit evicts and
//! refaults page cache instead of OOM-killing the service).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::str::FromStr;

use tact_sim::SimRng;

const PAGE: usize = 4096;
const BLOCK: usize = 4096;

/// `cpu`, `memory:MiB`, `mapped:FILE:MiB` or `disk:FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Nothing more: the CPU the service spins is the bottleneck.
    Cpu,
    /// Each request also touches this many MiB of fresh anonymous memory, one write per page, so
    /// enough concurrent requests overcommit memory (spec X2).
    Memory(usize),
    /// Each request also maps its connection's own MiB-sized slice of this file and reads one
    /// byte per page, so the working set grows with the number of connections (one per driver
    /// worker): once it exceeds the memory limit, every request refaults its slice from disk.
    Mapped(PathBuf, usize),
    /// Each request also reads one random 4 KiB block of this file with O_DIRECT, so the disk is
    /// the bottleneck whatever the page cache holds (spec X3).
    Disk(PathBuf),
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s.split_once(':') {
            None if s == "cpu" => Ok(Mode::Cpu),
            Some(("memory", mib)) => match mib.parse::<usize>() {
                Ok(m) if m > 0 => Ok(Mode::Memory(m)),
                _ => Err(format!(
                    "mode {s:?}: memory needs a positive whole number of MiB"
                )),
            },
            Some(("mapped", rest)) => match rest.rsplit_once(':') {
                Some((path, mib)) if !path.is_empty() => match mib.parse::<usize>() {
                    Ok(m) if m > 0 => Ok(Mode::Mapped(PathBuf::from(path), m)),
                    _ => Err(format!(
                        "mode {s:?}: mapped needs a positive whole number of MiB"
                    )),
                },
                _ => Err(format!("mode {s:?}: expected mapped:FILE:MiB")),
            },
            Some(("disk", path)) if !path.is_empty() => Ok(Mode::Disk(PathBuf::from(path))),
            _ => Err(format!(
                "unknown mode {s:?} (expected cpu, memory:MiB, mapped:FILE:MiB or disk:FILE)"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Cpu => write!(f, "cpu"),
            Mode::Memory(m) => write!(f, "memory:{m}"),
            Mode::Mapped(p, m) => write!(f, "mapped:{}:{m}", p.display()),
            Mode::Disk(p) => write!(f, "disk:{}", p.display()),
        }
    }
}

/// A mode made ready to run: the disk mode's file is opened once, not per request.
#[derive(Debug)]
pub enum Extra {
    Cpu,
    Memory {
        bytes: usize,
    },
    Mapped {
        file: File,
        bytes: usize,
        slices: u64,
    },
    Disk {
        file: File,
        blocks: u64,
    },
}

/// O_DIRECT needs a buffer aligned to the device's block size; 4 KiB covers every common one.
#[repr(align(4096))]
struct Block([u8; BLOCK]);

impl Extra {
    pub fn open(mode: &Mode) -> io::Result<Extra> {
        Ok(match mode {
            Mode::Cpu => Extra::Cpu,
            Mode::Memory(mib) => Extra::Memory { bytes: mib << 20 },
            Mode::Mapped(path, mib) => {
                let file = File::open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let bytes = mib << 20;
                let slices = file.metadata()?.len() / bytes as u64;
                if slices == 0 {
                    return Err(io::Error::other(format!(
                        "{}: smaller than one {mib} MiB slice",
                        path.display()
                    )));
                }
                Extra::Mapped {
                    file,
                    bytes,
                    slices,
                }
            }
            Mode::Disk(path) => {
                let file = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let blocks = file.metadata()?.len() / BLOCK as u64;
                if blocks == 0 {
                    return Err(io::Error::other(format!(
                        "{}: smaller than one 4 KiB block",
                        path.display()
                    )));
                }
                Extra::Disk { file, blocks }
            }
        })
    }

    /// Does one request's share of the mode's work; `conn` is the connection it came through.
    pub fn run(&self, rng: &mut SimRng, conn: u64) -> io::Result<()> {
        match self {
            Extra::Cpu => Ok(()),
            Extra::Memory { bytes } => {
                let mut mem = vec![0u8; *bytes];
                for page in mem.chunks_mut(PAGE) {
                    page[0] = 1;
                }
                std::hint::black_box(&mem);
                Ok(())
            }
            Extra::Mapped {
                file,
                bytes,
                slices,
            } => touch_slice(file, (conn % slices) * *bytes as u64, *bytes),
            Extra::Disk { file, blocks } => {
                let mut buf = Box::new(Block([0; BLOCK]));
                let block = (rng.uniform() * *blocks as f64) as u64 % blocks;
                file.read_exact_at(&mut buf.0, block * BLOCK as u64)
            }
        }
    }
}

/// Maps `len` bytes of `file` at `offset` and reads one byte per page. Page by page, not with
/// MAP_POPULATE: a populated slice must be resident all at once, and a dozen of them over the
/// limit livelock in reclaim; faulted page by page (fault-around maps cached neighbours in
/// batches), an evicted slice is simply read again from disk: slow, as thrashing is.
fn touch_slice(file: &File, offset: u64, len: usize) -> io::Result<()> {
    let off = libc::off_t::try_from(offset).map_err(io::Error::other)?;
    // SAFETY: a fresh read-only shared mapping of a file we hold open; it is only read through the
    // pointer below, within `len`, and unmapped before returning.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // No readahead: under thrash, pages read ahead are evicted before they are touched, and the
    // wasted reads turn a slowdown into a livelock. Each refault then reads just its page.
    // SAFETY: advice on the mapping made above.
    if unsafe { libc::madvise(ptr, len, libc::MADV_RANDOM) } != 0 {
        let e = io::Error::last_os_error();
        // SAFETY: exactly the mapping made above, not used after this.
        unsafe { libc::munmap(ptr, len) };
        return Err(e);
    }
    let mut sum = 0u8;
    for page in (0..len).step_by(PAGE) {
        // SAFETY: `page < len`, inside the mapping made above.
        sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(ptr.cast::<u8>().add(page)) });
    }
    std::hint::black_box(sum);
    // SAFETY: exactly the mapping made above, no longer used.
    if unsafe { libc::munmap(ptr, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for s in [
            "cpu",
            "memory:64",
            "disk:/var/tmp/x",
            "mapped:/var/tmp/a:b:8",
        ] {
            assert_eq!(s.parse::<Mode>().unwrap().to_string(), s);
        }
        for bad in [
            "",
            "gpu",
            "memory:0",
            "memory:x",
            "disk:",
            "cpu:1",
            "mapped:/x",
            "mapped::4",
            "mapped:/x:0",
        ] {
            assert!(bad.parse::<Mode>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn memory_and_missing_disk() {
        let mut rng = SimRng::new(1);
        Extra::open(&Mode::Memory(1))
            .unwrap()
            .run(&mut rng, 0)
            .unwrap();
        let err = Extra::open(&Mode::Disk("/nonexistent/tune-bench".into())).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/tune-bench"), "{err}");
    }

    #[test]
    fn mapped_reads_each_connections_slice_and_rejects_small_files() {
        let dir = std::env::temp_dir().join(format!("tune-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("slices");
        std::fs::write(&path, vec![7u8; 2 << 20]).unwrap();
        let mut rng = SimRng::new(1);
        let extra = Extra::open(&Mode::Mapped(path.clone(), 1)).unwrap();
        assert!(
            matches!(extra, Extra::Mapped { slices: 2, .. }),
            "{extra:?}"
        );
        // Connection 5 wraps onto slice 1: still inside the file.
        for conn in [0, 1, 5] {
            extra.run(&mut rng, conn).unwrap();
        }
        let err = Extra::open(&Mode::Mapped(path, 4)).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.to_string().contains("smaller than one 4 MiB slice"),
            "{err}"
        );
    }
}
