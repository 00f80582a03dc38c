//! What the user asked `tact share` for: `--job SHARES=COMMAND`, `--pid SHARES=PID` and
//! `--user SHARES=USER`, checked with errors that name the argument.

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
    /// Every process of this user (spec proportional-share §2, `uid:U`), found again every
    /// second. `name` is the account's name, or the uid when it has none.
    User { uid: u32, name: String },
}

impl JobSpec {
    /// What the tables and the log call it.
    pub fn label(&self) -> String {
        match (&self.name, &self.what) {
            (Some(name), _) => name.clone(),
            (None, What::Command(c)) => c.clone(),
            (None, What::Pid(p)) => format!("pid {p}"),
            (None, What::User { name, .. }) => format!("user {name}"),
        }
    }

    /// How the user gave it, for errors: `--job 3=make`, `--pid 1=42`, `job A1`.
    pub fn origin(&self) -> String {
        match (&self.name, &self.what) {
            (Some(name), _) => format!("job {name}"),
            (None, What::Command(c)) => format!("--job {}={c}", self.shares),
            (None, What::Pid(p)) => format!("--pid {}={p}", self.shares),
            (None, What::User { name, .. }) => format!("--user {}={name}", self.shares),
        }
    }

    /// Whether it is a user principal: it lasts as long as tact runs (its processes come and go),
    /// and only the signals backend serves it.
    pub fn is_user(&self) -> bool {
        matches!(self.what, What::User { .. })
    }
}

/// Every `--job`, then every `--pid`, then every `--user`, in the order given.
pub fn parse(jobs: &[String], pids: &[String], users: &[String]) -> Result<Vec<JobSpec>> {
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
    for arg in users {
        let (shares, user) = split("--user", arg, "SHARES=USER")?;
        let (uid, name) =
            resolve_user(user.trim()).map_err(|why| anyhow::anyhow!("--user {arg:?}: {why}"))?;
        let twice = specs
            .iter()
            .any(|s| matches!(s.what, What::User { uid: u, .. } if u == uid));
        if twice {
            bail!("--user {arg:?}: user {name} (uid {uid}) is given twice");
        }
        specs.push(JobSpec {
            shares,
            what: What::User { uid, name },
            name: None,
        });
    }
    if specs.is_empty() {
        bail!(
            "nothing to share: give at least one --job SHARES=COMMAND, --pid SHARES=PID or \
             --user SHARES=USER"
        );
    }
    Ok(specs)
}

/// A user name, or a numeric uid (which needs no account: processes may run under any uid), as
/// the uid and the name to show.
fn resolve_user(user: &str) -> std::result::Result<(u32, String), String> {
    if user.is_empty() {
        return Err("the user after `=` is empty".into());
    }
    if let Ok(uid) = user.parse::<u32>() {
        let name = match nix::unistd::User::from_uid(uid.into()) {
            Ok(Some(account)) => account.name,
            _ => uid.to_string(),
        };
        return Ok((uid, name));
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(account)) => Ok((account.uid.as_raw(), account.name)),
        Ok(None) => Err(format!("no user named {user:?}")),
        Err(e) => Err(format!("cannot look up user {user:?}: {e}")),
    }
}

/// Whether a tact with real uid `uid` and effective uid `euid` may name user `target`: root any
/// user, others only themselves (DESIGN.md invariant 3; the rule `JobTree` applies to each
/// process).
pub fn may_name_user(uid: u32, euid: u32, target: u32) -> bool {
    euid == 0 || target == uid || target == euid
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

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn err(jobs: &[&str], pids: &[&str]) -> String {
        user_err(jobs, pids, &[])
    }

    fn user_err(jobs: &[&str], pids: &[&str], users: &[&str]) -> String {
        parse(&strings(jobs), &strings(pids), &strings(users))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_jobs_and_pids_in_order() {
        let specs = parse(
            &["1=sleep 1".into(), "3=a=b".into()],
            &["2= 42".into()],
            &[],
        )
        .unwrap();
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

    #[test]
    fn users_by_name_or_uid() {
        let specs = parse(
            &[],
            &["1=7".into()],
            &["2=root".into(), "3= 4000123 ".into()],
        )
        .unwrap();
        assert_eq!(
            specs[1..],
            [
                JobSpec {
                    shares: 2,
                    what: What::User {
                        uid: 0,
                        name: "root".into(),
                    },
                    name: None,
                },
                JobSpec {
                    shares: 3,
                    what: What::User {
                        uid: 4000123,
                        name: "4000123".into(),
                    },
                    name: None,
                },
            ]
        );
        assert!(specs[1].is_user() && !specs[0].is_user());
        assert_eq!(specs[1].label(), "user root");
        assert_eq!(specs[1].origin(), "--user 2=root");
        // A uid with an account is shown by its name.
        let by_uid = parse(&[], &[], &["1=0".into()]).unwrap();
        assert_eq!(by_uid[0].label(), "user root");
    }

    #[test]
    fn bad_users_are_named() {
        let e = user_err(&[], &[], &["1=no-such-user-tact"]);
        assert!(
            e.contains("--user \"1=no-such-user-tact\": no user named"),
            "{e}"
        );
        assert!(user_err(&[], &[], &["1="]).contains("user after `=` is empty"));
        assert!(user_err(&[], &[], &["root"]).contains("expected SHARES=USER"));
        assert!(user_err(&[], &[], &["0=root"]).contains("between 1 and"));
        let e = user_err(&[], &[], &["1=root", "2=0"]);
        assert!(e.contains("user root (uid 0) is given twice"), "{e}");
        assert!(user_err(&[], &[], &["1=-5"]).contains("no user named \"-5\""));
    }

    #[test]
    fn only_root_names_other_users() {
        assert!(may_name_user(0, 0, 1000));
        assert!(may_name_user(1000, 0, 65534)); // setuid root
        assert!(may_name_user(1000, 1000, 1000));
        assert!(!may_name_user(1000, 1000, 65534));
        assert!(!may_name_user(1000, 1000, 0));
    }
}
