//! Where a client looks for the daemon when a user has no private directory for one of their
//! own: a `$TMPDIR/tact-<uid>` that another user created first is never used, and the client
//! goes on to the system daemon's socket instead of failing.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::libc;

/// Runs `check` in a child process as uid and gid `id` and returns its exit status.
fn as_user(id: u32, check: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only changes its ids and environment, runs `check` and _exits; this
    // test binary has no other test running threads that could hold a lock it needs.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // SAFETY: plain system calls.
                let ok = unsafe {
                    libc::setgroups(0, std::ptr::null()) == 0
                        && libc::setresgid(id, id, id) == 0
                        && libc::setresuid(id, id, id) == 0
                };
                if ok {
                    check()
                } else {
                    90
                }
            }))
            .unwrap_or(91);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for the child this test forked.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert!(libc::WIFEXITED(status), "child status {status:#x}");
            libc::WEXITSTATUS(status)
        }
    }
}

#[test]
fn another_users_tmp_directory_means_no_own_daemon_not_an_error() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to be another user");
        return;
    }
    let nobody = 65534;
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Root's directory where nobody's would go: not nobody's to use.
    let theirs = base.path().join(format!("tact-{nobody}"));
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    let tmp = base.path().to_path_buf();
    let code = as_user(nobody, move || {
        std::env::remove_var("XDG_RUNTIME_DIR");
        std::env::remove_var(tact_proto::SOCKET_ENV);
        std::env::set_var("TMPDIR", &tmp);
        // The daemon itself refuses the directory...
        if tact_proto::daemon_socket_path(None).is_ok() {
            return 3;
        }
        // ... and a client goes on to the system daemon.
        match tact_proto::socket_path(None) {
            Ok(p) if p == Path::new(tact_proto::SYSTEM_SOCKET) => 0,
            Ok(_) => 1,
            Err(_) => 2,
        }
    });
    assert_eq!(
        code, 0,
        "1: another path, 2: an error, 3: the daemon took it"
    );
    assert!(
        std::fs::read_dir(&theirs).unwrap().next().is_none(),
        "nothing was made in another user's directory"
    );
}
