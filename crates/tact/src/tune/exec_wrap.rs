//! `tact exec-wrap -- PROG ARGS`: runs one job and reports its start and end to the `tact tune
//! --completions wrap` above it (see [`super::wrap`]), then exits as PROG did. Used as the job
//! command (`xargs tact exec-wrap -- gzip`) or as make's shell (`make SHELL='tact exec-wrap
//! /bin/sh'`: make splits a SHELL of several words and runs `tact exec-wrap /bin/sh -c LINE`).
//!
//! Outside tact (no socket named, or none listening) it execs PROG: the wrapped command works
//! the same, at the cost of one exec.

use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tact_linux::actuate::pidfd::PidFd;

use super::wrap::{Message, Reporter, SOCKET_ENV};
use super::{pass_on, Interrupted};
use crate::cli::ExecWrapArgs;
use crate::jobs::events::{unblock_signals_in_child, Event, Events};
use crate::jobs::run::{cannot_start, exit_code, spawn};

/// How long a wait for the job lasts before it is simply renewed (signals and the job's exit
/// end it at once).
const WAIT: Duration = Duration::from_secs(3600);

pub fn run(args: &ExecWrapArgs, verbose: bool) -> Result<i32> {
    let (prog, prog_args) = args.command.split_first().expect("clap requires a command");
    let mut command = Command::new(prog);
    command.args(prog_args);
    let Some(reporter) = reporter(verbose) else {
        // Returns only if PROG could not be run.
        let e = command.exec();
        return Ok(cannot_start(prog, e));
    };
    // From here on tact's termination signals come as events, to be passed on to the job.
    let mut events = Events::new()?;
    unblock_signals_in_child(&mut command);
    reporter.send(Message::Start);
    let start = Instant::now();
    let code = match spawn(&mut command, prog) {
        Ok(mut child) => {
            // Our unreaped child: its pid cannot name another process before we wait for it.
            let job = match PidFd::open(child.id() as i32).context("cannot open a pidfd on the job")
            {
                Ok(job) => job,
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            };
            wait(&job, &mut events)?;
            exit_code(child.wait()?)
        }
        // A job that could not start is a job that failed (127, 126).
        Err(code) => code,
    };
    reporter.send(Message::End {
        latency: start.elapsed(),
        code,
    });
    Ok(code)
}

/// The connection to tact, when tact named its socket and listens there.
fn reporter(verbose: bool) -> Option<Reporter> {
    let Some(path) = std::env::var_os(SOCKET_ENV) else {
        if verbose {
            eprintln!(
                "tact: exec-wrap: ${SOCKET_ENV} is not set (not below `tact tune --completions \
                 wrap`): the job runs unreported"
            );
        }
        return None;
    };
    match Reporter::connect(Path::new(&path)) {
        Ok(r) => Some(r),
        Err(e) => {
            if verbose {
                eprintln!(
                    "tact: exec-wrap: cannot reach tact at {}: {e:#}; the job runs unreported",
                    Path::new(&path).display()
                );
            }
            None
        }
    }
}

/// Waits for the job to exit, passing a signal for the wrapper on to the whole of the job by
/// the rule every tact command follows ([`crate::jobs::pass_on`], through [`super::pass_on`]):
/// make or xargs ending its job ends the shell's pipeline and any member that called setsid
/// too, and a Ctrl-C goes on to the members outside the terminal's process group. When the job
/// has exited, members that appeared meanwhile get the last signal.
fn wait(job: &PidFd, events: &mut Events) -> Result<()> {
    let mut interrupted: Option<Interrupted> = None;
    loop {
        match events.wait(job.as_fd(), WAIT)? {
            Event::Ready => {
                if let Some(i) = &mut interrupted {
                    i.reached.pass_on(&mut i.tree, i.sig, false);
                }
                return Ok(());
            }
            Event::Signal(sig) => pass_on(&mut interrupted, job, sig),
            Event::Timeout => {}
        }
    }
}
