//! `tact tickets`: CPU, disk and memory rights from currencies and tickets (spec tickets.md;
//! Sullivan & Seltzer), given in a setup file and enforced on real jobs.
//!
//! - [`setup`]: the setup file (TOML) read into a tickets model, with errors naming the field.
//! - [`show`]: `check` and `explain`, as tables or JSON.
//! - [`enforce`]: `run`: starts the jobs, enforces with a backend, ends them, reports.
//! - [`rights`]: activity to rights to a backend's weights, per resource, interval by interval.
//! - [`cgroup`]: the cgroup backend: one cgroup per job with CPU and disk weights ∝ its rights
//!   and its memory rights as protection.
//! - [`disk`]: which jobs have disk I/O outstanding, and which disks the disk weights act on.
//! - [`signals`]: the signals backend: `tact share`'s ALPS with shares ∝ the CPU rights.
//! - [`report`]: the per-interval JSON log and the final table.
//! - [`client`]: the subcommands that change and query the daemon's live model.

pub(crate) mod cgroup;
mod client;
pub(crate) mod disk;
mod enforce;
mod report;
pub(crate) mod rights;
pub(crate) mod setup;
pub(crate) mod show;
pub(crate) mod signals;

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::{TicketsArgs, TicketsCommand};
use setup::{Machine, Setup};

/// The exit status for a setup file or job name that is wrong (as for a bad command line).
pub(crate) const BAD_SETUP: i32 = crate::cli::USAGE_FAILED as i32;

pub fn run(args: &TicketsArgs) -> Result<i32> {
    let machine = this_machine()?;
    if let Some(result) = client::run(&args.command, machine.page_size) {
        return result;
    }
    let load = |path: &Path| {
        Setup::load(path, &machine).map_err(|e| {
            eprintln!("tact: {e}");
        })
    };
    match &args.command {
        TicketsCommand::Check { setup, json } => {
            let Ok(setup) = load(setup) else {
                return Ok(BAD_SETUP);
            };
            print!("{}", show::check(&setup, *json));
            Ok(0)
        }
        TicketsCommand::Explain {
            target,
            job: Some(job),
            json,
            ..
        } => {
            let path = Path::new(target);
            let Ok(setup) = load(path) else {
                return Ok(BAD_SETUP);
            };
            let Some(j) = setup.job(job) else {
                let names: Vec<&str> = setup.jobs.iter().map(|j| j.name.as_str()).collect();
                eprintln!(
                    "tact: {}: no job {job:?} (its jobs: {})",
                    path.display(),
                    names.join(", ")
                );
                return Ok(BAD_SETUP);
            };
            print!("{}", show::explain(&setup, j, *json));
            Ok(0)
        }
        TicketsCommand::Run(run) => {
            let Ok(setup) = load(&run.setup) else {
                return Ok(BAD_SETUP);
            };
            if setup.jobs.is_empty() {
                eprintln!("tact: {}: no [[job]] to run", run.setup.display());
                return Ok(BAD_SETUP);
            }
            enforce::run(setup, run)
        }
        _ => unreachable!("the daemon's subcommands are client::run's"),
    }
}

/// The page size, and the memory tact may reserve: spec §4, MemTotal less the kernel's
/// unreclaimable memory (unreclaimable slab, kernel stacks, page tables) and the free headroom
/// the kernel keeps (`vm.min_free_kbytes`).
pub(crate) fn this_machine() -> Result<Machine> {
    // SAFETY: sysconf has no preconditions.
    let page_size = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("cannot read /proc/meminfo")?;
    let kib = |key: &str| -> i64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let headroom: i64 = std::fs::read_to_string("/proc/sys/vm/min_free_kbytes")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let reservable =
        kib("MemTotal") - kib("SUnreclaim") - kib("KernelStack") - kib("PageTables") - headroom;
    Ok(Machine {
        page_size,
        reservable_mem: reservable.max(0) * 1024,
    })
}
