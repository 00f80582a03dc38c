//! `tact attach`: regulate a process that is already running, until it exits or tact is stopped.

use anyhow::Result;

use super::events::Events;
use super::job::Mode;
use super::polite::Ended;
use crate::cli::AttachArgs;

pub fn attach(args: &AttachArgs, verbose: bool) -> Result<i32> {
    // Errors from here on name the pid ("process 42 does not exist", "refusing to regulate ...").
    let command = tact_linux::ProcReader::new().cmdline(args.pid)?;
    // `--idle disk` means the disk the process works on; one whose working directory tact may
    // not read gets `/`'s, and says so through the device it names.
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", args.pid)).unwrap_or_else(|_| "/".into());
    let mode = Mode::from_args(&args.polite, &args.idle, &cwd, true, verbose)?;
    let mut events = Events::new()?;
    let mut job = mode.start(args.pid, &command)?;
    let ended = job.regulate(&mut events);
    let summary = job.finish();
    let code = match ended? {
        Ended::Exited => 0,
        Ended::Interrupted(sig) => {
            // tact resumed what it stopped; a stop of someone else's (the user's SIGSTOP) it
            // leaves in place, and says so rather than "running".
            let now = match tact_linux::ProcReader::new().stat(args.pid) {
                Ok(s) if s.is_stopped() => "is stopped (tact did not stop it, and leaves it so)",
                Ok(s) if !s.is_dead() => "is running",
                _ => "has exited",
            };
            eprintln!(
                "tact: stopped regulating on {}; process {} {now}",
                sig.signal, args.pid
            );
            128 + sig.signal as i32
        }
    };
    eprintln!("{summary}");
    Ok(code)
}
