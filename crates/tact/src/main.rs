//! The tact binary: wires probes (tact-linux), engines (tact-core) and actuators into jobs.

mod cli;
mod daemon;
mod demo;
mod jobs;
mod paths;
mod share;
mod tickets;
mod trace;
mod tune;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use jobs::run::TACT_FAILED;

fn main() -> ExitCode {
    let cli = Cli::parse();
    jobs::setup_logging(cli.verbose);
    let result = match &cli.command {
        Command::Guard => return guard(),
        Command::Work(args) => demo::work(args).map(|()| 0),
        // Runs once per job: no look for crash records, which a job's wrapper has no part in.
        Command::ExecWrap(args) => tune::exec_wrap::run(args, cli.verbose),
        Command::Recover => recover(true).map(|()| 0),
        command => {
            if let Err(e) = recover(false) {
                tracing::warn!("could not check for processes a crashed tact left stopped: {e:#}");
            }
            match command {
                Command::Run(args) => jobs::run::run(args, cli.verbose),
                Command::Attach(args) => jobs::attach::attach(args, cli.verbose),
                Command::Demo(args) => demo::run(args).map(|()| 0),
                Command::Daemon(args) => daemon::run(args),
                Command::Status(args) => daemon::status::run(args),
                Command::Share(args) => share::run(args),
                Command::Tune(args) => tune::run(args, cli.verbose),
                Command::Tickets(args) => tickets::run(args),
                Command::Guard | Command::Work(_) | Command::ExecWrap(_) | Command::Recover => {
                    unreachable!("handled above")
                }
            }
        }
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("tact: {e:#}");
            ExitCode::from(TACT_FAILED as u8)
        }
    }
}

/// Resume what dead regulators left stopped (DESIGN.md invariant 1). `report`: say what was done
/// even when nothing was (for `tact recover` itself).
fn recover(report: bool) -> anyhow::Result<()> {
    let dir = paths::runtime_dir()?;
    let r = tact_linux::state::recover(&dir)?;
    for id in &r.resumed {
        eprintln!(
            "tact: resumed process {} that a crashed tact left stopped",
            id.pid
        );
    }
    for (path, why) in &r.unreadable {
        eprintln!("tact: cannot read crash record {}: {why}", path.display());
    }
    if report && r.resumed.is_empty() {
        eprintln!("tact: nothing to recover in {}", dir.display());
    }
    Ok(())
}

fn guard() -> ExitCode {
    match tact_linux::guard::inherited_socket().and_then(tact_linux::guard::serve) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tact guard: {e}");
            ExitCode::FAILURE
        }
    }
}
