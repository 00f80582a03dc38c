//! A job under regulation, by progress (`--polite`, the default) or by idle time (`--idle`):
//! what `tact run` and `tact attach` share.

use std::path::Path;

use anyhow::Result;
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::JobTree;

use super::events::Events;
use super::idle::IdleSettings;
use super::idle_job::IdleJob;
use super::polite::{Ended, PoliteJob, Settings};
use crate::cli::{IdleArgs, PoliteArgs};

/// The settings of either mode, decided before the job starts.
pub enum Mode {
    // Boxed: the polite settings are twice the size of the idle ones.
    Polite(Box<Settings>),
    Idle(IdleSettings),
}

impl Mode {
    /// `cwd`: the job's working directory; `attach`: the job lives on after tact (restore what
    /// tact changed in it).
    pub fn from_args(
        polite: &PoliteArgs,
        idle: &IdleArgs,
        cwd: &Path,
        attach: bool,
        verbose: bool,
    ) -> Result<Mode> {
        Ok(if idle.resources.is_empty() {
            Mode::Polite(Box::new(Settings::from_args(polite, verbose)?))
        } else {
            Mode::Idle(IdleSettings::from_args(idle, polite, cwd, attach, verbose)?)
        })
    }

    /// Takes charge of the tree rooted at `pid`, which runs `command` (its argv).
    pub fn start(self, pid: i32, command: &[String]) -> Result<Job> {
        Ok(match self {
            Mode::Polite(s) => Job::Polite(Box::new(PoliteJob::new(*s, pid, command)?)),
            Mode::Idle(s) => Job::Idle(Box::new(IdleJob::new(s, pid, command)?)),
        })
    }
}

/// The name a job goes by in `tact status`: `--name`, else its program's file name (not the
/// whole command line's last '/'-component: `rsync -a /srv/ /mnt/backup/` showed as `backup`).
pub fn shown_name(name: Option<&str>, command: &[String]) -> String {
    name.map_or_else(
        || {
            let argv0 = command.first().map_or("", String::as_str);
            Path::new(argv0)
                .file_name()
                .map_or(argv0.to_string(), |f| f.to_string_lossy().into_owned())
        },
        str::to_string,
    )
}

/// Boxed: a job lives as long as tact and is moved around only at its start.
pub enum Job {
    Polite(Box<PoliteJob>),
    Idle(Box<IdleJob>),
}

impl Job {
    /// Regulates until the root exits or a signal arrives; the job is running when this
    /// returns, whether it returns an error or not.
    pub fn regulate(&mut self, events: &mut Events) -> Result<Ended> {
        match self {
            Job::Polite(j) => j.regulate(events),
            Job::Idle(j) => j.regulate(events),
        }
    }

    /// The job's root process, to wait for its exit.
    pub fn root(&self) -> &PidFd {
        match self {
            Job::Polite(j) => j.root(),
            Job::Idle(j) => j.root(),
        }
    }

    /// The job's process tree as regulation found it (members whose parent exited included),
    /// to pass signals on to.
    pub fn tree(&mut self) -> &mut JobTree {
        match self {
            Job::Polite(j) => j.tree(),
            Job::Idle(j) => j.tree(),
        }
    }

    /// Clean exit (the guard leaves, the crash record goes); returns the summary line for
    /// stderr. Call after `regulate`.
    pub fn finish(self) -> String {
        match self {
            Job::Polite(j) => {
                let sources = j.sources();
                j.finish().line(&sources)
            }
            Job::Idle(j) => j.finish().line(),
        }
    }
}
