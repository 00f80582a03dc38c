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
            eprintln!("tact: {}", chain_text(&e));
            if e.chain().any(|c| c.is::<cli::UsageError>()) {
                ExitCode::from(cli::USAGE_FAILED)
            } else {
                ExitCode::from(TACT_FAILED as u8)
            }
        }
    }
}

/// `e` and its causes, `: `-joined as `{e:#}` does, but without a cause whose text the message
/// before it already ends with: tact-linux's errors print their source (`PATH: ENOENT`) and also
/// give it as their cause, which `{e:#}` printed twice ("... (os error 2): ... (os error 2)").
fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut last = String::new();
    for cause in e.chain() {
        let this = cause.to_string();
        if !text.is_empty() {
            if last.ends_with(&this) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(&this);
        last = this;
    }
    text
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

#[cfg(test)]
mod tests {
    use super::chain_text;
    use anyhow::Context;

    /// A tact-linux error prints its source and gives it as its cause too: the source is said
    /// once (it was "…: No such file or directory (os error 2): No such file or directory (os
    /// error 2)"); causes that add something are kept.
    #[test]
    fn a_cause_the_message_already_ends_with_is_said_once() {
        let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
        let linux = tact_linux::Error::Io {
            path: "/sys/fs/cgroup/cpuacct/x/tact-tickets-1".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        let e = anyhow::Error::new(linux).context("--backend cgroup");
        let text = chain_text(&e);
        assert_eq!(text.matches(&enoent.to_string()).count(), 1, "{text}");
        assert!(text.starts_with("--backend cgroup: "), "{text}");
        let e = anyhow::Error::new(enoent).context("cannot read x");
        let e = Err::<(), _>(e).context("outer").unwrap_err();
        assert_eq!(
            chain_text(&e),
            "outer: cannot read x: No such file or directory (os error 2)"
        );
    }
}
