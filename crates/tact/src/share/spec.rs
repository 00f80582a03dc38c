//! What the user asked `tact share` for: `--job SHARES=COMMAND` and `--pid SHARES=PID`, checked
//! with errors that name the argument.

use anyhow::{bail, Result};
use tact_core::share::MAX_SHARE;

/// One job of the group, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub shares: u64,
    pub what: What,
    /// The job's name where it has one (a `tact tickets` setup); `--job` and `--pid` have none.
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Start it with `sh -c`.
    Command(String),
    /// Adopt this running process and its descendants.
    Pid(i32),
}

impl JobSpec {
    /// What the tables and the log call it.
    pub fn label(&self) -> String {
        match (&self.name, &self.what) {
            (Some(name), _) => name.clone(),
            (None, What::Command(c)) => c.clone(),
            (None, What::Pid(p)) => format!("pid {p}"),
        }
    }

    /// How the user gave it, for errors: `--job 3=make`, `--pid 1=42`, `job A1`.
    pub fn origin(&self) -> String {
        match (&self.name, &self.what) {
            (Some(name), _) => format!("job {name}"),
            (None, What::Command(c)) => format!("--job {}={c}", self.shares),
            (None, What::Pid(p)) => format!("--pid {}={p}", self.shares),
        }
    }
}

/// Every `--job` then every `--pid`, in the order given.
pub fn parse(jobs: &[String], pids: &[String]) -> Result<Vec<JobSpec>> {
    let mut specs = Vec::new();
    for arg in jobs {
        let (shares, command) = split("--job", arg, "SHARES=COMMAND")?;
        if command.trim().is_empty() {
            bail!("--job {arg:?}: the command after `=` is empty");
        }
        specs.push(JobSpec {
            shares,
            what: What::Command(command.to_string()),
            name: None,
        });
    }
    for arg in pids {
        let (shares, pid) = split("--pid", arg, "SHARES=PID")?;
        let pid = match pid.trim().parse::<i32>() {
            Ok(p) if p > 0 => p,
            _ => bail!("--pid {arg:?}: {pid:?} is not a process id (a positive integer)"),
        };
        if specs.iter().any(|s| s.what == What::Pid(pid)) {
            bail!("--pid {arg:?}: process {pid} is given twice");
        }
        specs.push(JobSpec {
            shares,
            what: What::Pid(pid),
            name: None,
        });
    }
    if specs.is_empty() {
        bail!("nothing to share: give at least one --job SHARES=COMMAND or --pid SHARES=PID");
    }
    Ok(specs)
}

fn split<'a>(flag: &str, arg: &'a str, form: &str) -> Result<(u64, &'a str)> {
    let Some((shares, rest)) = arg.split_once('=') else {
        bail!("{flag} {arg:?}: expected {form}, e.g. {flag} 3=...");
    };
    let shares = match shares.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_SHARE).contains(&n) => n,
        Ok(_) => bail!("{flag} {arg:?}: shares must be between 1 and {MAX_SHARE}"),
        Err(_) => bail!("{flag} {arg:?}: shares must be a positive integer, got {shares:?}"),
    };
    Ok((shares, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(jobs: &[&str], pids: &[&str]) -> String {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        parse(&s(jobs), &s(pids)).unwrap_err().to_string()
    }

    #[test]
    fn parses_jobs_and_pids_in_order() {
        let specs = parse(&["1=sleep 1".into(), "3=a=b".into()], &["2= 42".into()]).unwrap();
        assert_eq!(
            specs,
            vec![
                JobSpec {
                    shares: 1,
                    what: What::Command("sleep 1".into()),
                    name: None,
                },
                JobSpec {
                    shares: 3,
                    what: What::Command("a=b".into()),
                    name: None,
                },
                JobSpec {
                    shares: 2,
                    what: What::Pid(42),
                    name: None,
                },
            ]
        );
    }

    #[test]
    fn bad_shares_and_targets_are_named() {
        assert!(err(&["0=x"], &[]).contains("between 1 and"));
        assert!(err(&["-1=x"], &[]).contains("positive integer, got \"-1\""));
        assert!(err(&["1.5=x"], &[]).contains("positive integer"));
        assert!(err(&["x"], &[]).contains("expected SHARES=COMMAND"));
        assert!(err(&["2="], &[]).contains("command after `=` is empty"));
        assert!(err(&[], &["1=abc"]).contains("not a process id"));
        assert!(err(&[], &["1=-5"]).contains("not a process id"));
        assert!(err(&[], &["1=7", "2=7"]).contains("given twice"));
        assert!(err(&[], &[]).contains("nothing to share"));
    }
}
