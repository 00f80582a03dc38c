//! `tact run`: start a command and regulate it; exit with its status.

use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};

use anyhow::{bail, Context, Result};
use tact_linux::actuate::cgroup_join::JoinCheck;

use super::events::{unblock_signals_in_child, Events, Received};
use super::job::{Job, Mode};
use super::pass_on::Reached;
use super::polite::Ended;
use crate::cli::RunArgs;

/// Exit status when tact itself fails (as `timeout` and `env` do), so it differs from the
/// command's own failures.
pub const TACT_FAILED: i32 = 125;

pub fn run(args: &RunArgs, verbose: bool) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let mode = Mode::from_args(&args.polite, &args.idle, &cwd, false, verbose)?;
    let mut events = Events::new()?;
    let (cmd, cmd_args) = args.command.split_first().expect("clap requires a command");
    let mut command = Command::new(cmd);
    command.args(cmd_args);
    unblock_signals_in_child(&mut command);
    // `--idle cpu`'s cgroup is the job's from its first instruction, and `--idle net`'s marking
    // matches the cgroup a socket is created in: the job must be there before it runs.
    let joined = match &mode {
        Mode::Idle(idle) => idle.join_before_exec(&mut command)?,
        Mode::Polite(_) => None,
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            // tact's failure, not the command's: the command never ran.
            if let Some(why) = joined.as_ref().and_then(JoinCheck::failure) {
                bail!("the job could not join its idle cgroup, so it was not started: {why}");
            }
            return Ok(cannot_start(cmd, e));
        }
    };
    // The same command line shares a calibrated target from run to run (`--name` to choose).
    let mut job = match mode.start(child.id() as i32, &args.command) {
        Ok(job) => job,
        Err(e) => {
            // A command that finished before tact could attach needed no regulating.
            if let Some(status) = child.try_wait()? {
                return Ok(exit_code(status));
            }
            // Never started regulating: the command is ours, so it goes too.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let ended = job.regulate(&mut events);
    let after = match ended {
        Ok(Ended::Exited) => Ok(None),
        Ok(Ended::Interrupted(sig)) => {
            pass_on_until_exit(&mut job, &mut events, sig).map(|()| None)
        }
        Err(e) => {
            // The command runs on (regulate leaves it running): say why now, not when it ends,
            // and keep passing signals on meanwhile, or a Ctrl-C would wait in tact's blocked
            // mask for as long as the command runs.
            eprintln!("tact: {e:#}; {cmd} runs on unregulated, and tact exits {TACT_FAILED}");
            wait_passing_on(&mut job, &mut events).map(|()| Some(TACT_FAILED))
        }
    };
    let summary = job.finish();
    let status = child.wait()?;
    let failed = after?;
    eprintln!("{summary}");
    Ok(failed.unwrap_or_else(|| exit_code(status)))
}

/// Waits for the command's exit, passing on any signal that comes meanwhile.
fn wait_passing_on(job: &mut Job, events: &mut Events) -> Result<()> {
    match events.ready_or_signal(job.root().as_fd())? {
        None => Ok(()),
        Some(sig) => pass_on_until_exit(job, events, sig),
    }
}

/// Interrupted: pass the signal on to the whole job ([`super::pass_on`]'s rule) and wait for
/// the command, regulating no more. Another signal meanwhile is passed on the same way. When the
/// command exits, the tree is looked at once more, and members that appeared since (forked by a
/// member while the signal was on its way) get the last signal too. A child the command itself
/// forked in that moment is out of reach once the command exits: it is reparented, and
/// [`tact_linux::JobTree`] finds members only through members.
fn pass_on_until_exit(job: &mut Job, events: &mut Events, mut sig: Received) -> Result<()> {
    let mut reached = Reached::new();
    loop {
        reached.pass_on(job.tree(), sig, true);
        match events.ready_or_signal(job.root().as_fd())? {
            None => {
                reached.pass_on(job.tree(), sig, false);
                return Ok(());
            }
            Some(next) => sig = next,
        }
    }
}

/// Starts `command` (named `name` in messages), or says on stderr why it could not and gives the
/// shell's exit code for that: 127 when it is not found, 126 when it cannot run.
pub fn spawn(command: &mut Command, name: &str) -> std::result::Result<Child, i32> {
    command.spawn().map_err(|e| cannot_start(name, e))
}

/// Says on stderr why `name` could not start, and gives the shell's exit code for it.
pub fn cannot_start(name: &str, e: std::io::Error) -> i32 {
    if e.kind() == ErrorKind::NotFound {
        eprintln!("tact: {name}: command not found");
        127
    } else {
        eprintln!("tact: {name}: cannot run: {e}");
        126
    }
}

/// The command's exit code, or 128 + signal number as a shell reports a killed command.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
