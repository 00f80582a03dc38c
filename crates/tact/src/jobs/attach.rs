//! `tact attach`: regulate a process that is already running, until it exits or tact is stopped.

use anyhow::Result;

use super::events::Events;
use super::polite::{Ended, PoliteJob, Settings};
use crate::cli::AttachArgs;

pub fn attach(args: &AttachArgs, verbose: bool) -> Result<i32> {
    let settings = Settings::from_args(&args.polite, verbose)?;
    let mut events = Events::new()?;
    // Errors from here on name the pid ("process 42 does not exist", "refusing to regulate ...").
    let program = tact_linux::ProcReader::new().cmdline(args.pid)?.join(" ");
    let mut job = PoliteJob::new(settings, args.pid, &program)?;
    let ended = job.regulate(&mut events);
    let sources = job.sources();
    let summary = job.finish();
    let code = match ended? {
        Ended::Exited => 0,
        Ended::Interrupted(sig) => {
            eprintln!(
                "tact: stopped regulating on {}; process {} is running",
                sig.signal, args.pid
            );
            128 + sig.signal as i32
        }
    };
    eprintln!("{}", summary.line(&sources));
    Ok(code)
}
