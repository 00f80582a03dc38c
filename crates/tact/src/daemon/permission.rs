//! Who may do what (DESIGN.md invariant 3): a user registers only processes they own and
//! controls only jobs they registered; root may do both for anyone. The peer's uid comes from
//! the socket (SO_PEERCRED), never from the message.

use tact_linux::ProcReader;
use tact_proto::{ErrorCode, JobId};

/// A refused request: the reply's `code` and `error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// May a peer running as `peer_uid` register process `pid`? It must exist and, unless the peer
/// is root, have the peer's uid as its real uid (read from `/proc/PID/status` under `procs`'s root).
pub fn may_register(procs: &ProcReader, peer_uid: u32, pid: i32) -> Result<(), Refusal> {
    let owner = match procs.uid(pid) {
        Ok(uid) => uid,
        Err(tact_linux::Error::NoProcess { .. }) => {
            return Err(Refusal::new(
                ErrorCode::Invalid,
                format!("pid: process {pid} does not exist"),
            ))
        }
        Err(e) => {
            return Err(Refusal::new(
                ErrorCode::Invalid,
                format!("pid: cannot tell who owns process {pid}: {e}"),
            ))
        }
    };
    if peer_uid == 0 || owner == peer_uid {
        return Ok(());
    }
    Err(Refusal::new(
        ErrorCode::Permission,
        format!(
            "pid: process {pid} belongs to uid {owner}, not to you (uid {peer_uid}); \
             registering another user's process needs root"
        ),
    ))
}

/// May a peer running as `peer_uid` change or remove job `job`, registered by `owner`? `what`
/// names the operation for the message.
pub fn may_control(peer_uid: u32, owner: u32, job: JobId, what: &str) -> Result<(), Refusal> {
    if peer_uid == 0 || peer_uid == owner {
        return Ok(());
    }
    Err(Refusal::new(
        ErrorCode::Permission,
        format!(
            "job: job {job} belongs to uid {owner}, not to you (uid {peer_uid}); \
             {what} another user's job needs root"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A procfs-shaped tree with processes 10 (uid 1000) and 20 (uid 0).
    fn fake_proc() -> (tempfile::TempDir, ProcReader) {
        let dir = tempfile::tempdir().unwrap();
        for (pid, uid) in [(10, 1000), (20, 0)] {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(
                d.join("status"),
                format!("Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
            )
            .unwrap();
        }
        let reader = ProcReader::with_root(dir.path());
        (dir, reader)
    }

    #[test]
    fn users_register_their_own_processes_and_root_any() {
        let (_dir, procs) = fake_proc();
        assert_eq!(may_register(&procs, 1000, 10), Ok(()));
        assert_eq!(may_register(&procs, 0, 10), Ok(()));
        assert_eq!(may_register(&procs, 0, 20), Ok(()));
        let refused = may_register(&procs, 1000, 20).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Permission);
        assert!(
            refused
                .message
                .starts_with("pid: process 20 belongs to uid 0")
                && refused.message.contains("needs root"),
            "{}",
            refused.message
        );
        let refused = may_register(&procs, 1001, 10).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Permission);
    }

    #[test]
    fn unknown_and_unreadable_processes_are_refused_even_for_root() {
        let (dir, procs) = fake_proc();
        let refused = may_register(&procs, 0, 30).unwrap_err();
        assert_eq!(refused.message, "pid: process 30 does not exist");
        std::fs::create_dir(dir.path().join("40")).unwrap();
        std::fs::write(dir.path().join("40/status"), "Name:\tx\n").unwrap();
        let refused = may_register(&procs, 0, 40).unwrap_err();
        assert!(refused
            .message
            .starts_with("pid: cannot tell who owns process 40"));
    }

    #[test]
    fn control_is_for_the_owner_and_root() {
        assert_eq!(
            may_control(1000, 1000, 3, "changing the priority of"),
            Ok(())
        );
        assert_eq!(may_control(0, 1000, 3, "removing"), Ok(()));
        let refused = may_control(1001, 1000, 3, "removing").unwrap_err();
        assert_eq!(refused.code, ErrorCode::Permission);
        assert!(refused
            .message
            .contains("removing another user's job needs root"));
    }
}
