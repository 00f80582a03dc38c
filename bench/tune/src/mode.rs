//! The service's bottleneck modes: what a request does besides spinning its CPU time and waiting
//! out its delay. The driver (or anyone) can switch modes while the service runs (`M SPEC`), the
//! way the paper's experiments move the bottleneck mid-run.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::str::FromStr;

use tact_sim::SimRng;

const PAGE: usize = 4096;
const BLOCK: usize = 4096;

/// `cpu`, `memory:MiB` or `disk:FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Nothing more: the CPU the service spins is the bottleneck.
    Cpu,
    /// Each request also touches this many MiB of fresh anonymous memory, one write per page, so
    /// enough concurrent requests overcommit memory (spec X2).
    Memory(usize),
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
            Some(("disk", path)) if !path.is_empty() => Ok(Mode::Disk(PathBuf::from(path))),
            _ => Err(format!(
                "unknown mode {s:?} (expected cpu, memory:MiB or disk:FILE)"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Cpu => write!(f, "cpu"),
            Mode::Memory(m) => write!(f, "memory:{m}"),
            Mode::Disk(p) => write!(f, "disk:{}", p.display()),
        }
    }
}

/// A mode made ready to run: the disk mode's file is opened once, not per request.
#[derive(Debug)]
pub enum Extra {
    Cpu,
    Memory { bytes: usize },
    Disk { file: File, blocks: u64 },
}

/// O_DIRECT needs a buffer aligned to the device's block size; 4 KiB covers every common one.
#[repr(align(4096))]
struct Block([u8; BLOCK]);

impl Extra {
    pub fn open(mode: &Mode) -> io::Result<Extra> {
        Ok(match mode {
            Mode::Cpu => Extra::Cpu,
            Mode::Memory(mib) => Extra::Memory { bytes: mib << 20 },
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

    /// Does one request's share of the mode's work.
    pub fn run(&self, rng: &mut SimRng) -> io::Result<()> {
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
            Extra::Disk { file, blocks } => {
                let mut buf = Box::new(Block([0; BLOCK]));
                let block = (rng.uniform() * *blocks as f64) as u64 % blocks;
                file.read_exact_at(&mut buf.0, block * BLOCK as u64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for s in ["cpu", "memory:64", "disk:/var/tmp/x"] {
            assert_eq!(s.parse::<Mode>().unwrap().to_string(), s);
        }
        for bad in ["", "gpu", "memory:0", "memory:x", "disk:", "cpu:1"] {
            assert!(bad.parse::<Mode>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn memory_and_missing_disk() {
        let mut rng = SimRng::new(1);
        Extra::open(&Mode::Memory(1))
            .unwrap()
            .run(&mut rng)
            .unwrap();
        let err = Extra::open(&Mode::Disk("/nonexistent/tune-bench".into())).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/tune-bench"), "{err}");
    }
}
