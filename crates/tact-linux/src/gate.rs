//! A start gate: a command tact starts waits, blocked in a `read`, until tact lets it go, so that
//! tact can take charge of it (record it, hand it to the watchdog, open its CPU clock) before it
//! runs. If tact dies first, even by SIGKILL, the kernel closes tact's end of the gate's pipe and
//! the command exits without running.
//!
//! Why not a command born stopped (`kill -STOP $$` in its shell, SIGCONT to let it go): between
//! its stop and the moment the watchdog holds its pidfd, a SIGKILLed tact leaves it stopped for
//! good, and a SIGCONT sent before the stop (by the watchdog, on tact's death) is lost. A pipe's
//! end of file is a state, not an event: it cannot be missed, and the waiting command is never
//! stopped.

use std::io::{PipeReader, PipeWriter, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The descriptor on which the held shell reads the gate (closed before the command runs).
const GATE_FD: RawFd = 3;

/// The exit status of a held command whose gate closed without letting it go (tact died or gave
/// up before starting it); like `env` and `timeout`, 125 means the launcher failed.
pub const NEVER_RAN: i32 = 125;

/// tact's end of a gate. [`Gate::open`] lets the command go; dropping it without opening it
/// (or tact's death) makes the command exit with [`NEVER_RAN`] without running.
#[derive(Debug)]
pub struct Gate {
    go: PipeWriter,
}

/// `sh -c COMMAND_LINE`, held at a gate until the returned [`Gate`] is opened. The caller may
/// configure the command further (environment, more `pre_exec` steps) and spawns it.
///
/// Both ends of the pipe are close-on-exec from their creation, so no other process tact starts
/// (the watchdog, other jobs) keeps the gate open after tact is gone; the held shell gets its end
/// on descriptor 3 and closes it before running the command.
pub fn held_shell(command_line: &str) -> std::io::Result<(Command, Gate)> {
    let (wait, go) = std::io::pipe()?;
    let mut command = Command::new("sh");
    command
        .args(["-c", r#"read -r go <&3 && exec sh -c "$0" 3<&-; exit 125"#])
        .arg(command_line);
    let wait_fd = wait.as_raw_fd();
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec. The closure owns
    // the read end, so it stays open until the command is spawned (and dropped with it).
    unsafe {
        command.pre_exec(move || {
            let _keep: &PipeReader = &wait;
            // dup2 clears close-on-exec on the copy; if the fd already is GATE_FD, clear it by
            // hand.
            let rc = if wait_fd == GATE_FD {
                libc::fcntl(GATE_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(wait_fd, GATE_FD)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((command, Gate { go }))
}

impl Gate {
    /// Lets the held command run. A command that is gone already (killed while held) is not an
    /// error: there is nothing left to let go.
    pub fn open(mut self) {
        // One line; the pipe keeps it even if the shell has not reached its `read` yet. A gone
        // reader gives EPIPE (Rust ignores SIGPIPE), which is the case above.
        let _ = self.go.write_all(b"go\n");
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Stdio};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::probe::proc::ProcReader;

    /// A held command, killed and reaped when the test ends (also when it fails), so that a
    /// failing test leaves no shell waiting forever.
    struct Held(Child);

    impl Drop for Held {
        fn drop(&mut self) {
            if matches!(self.0.try_wait(), Ok(None)) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }

    impl Held {
        fn pid(&self) -> i32 {
            self.0.id() as i32
        }

        /// Waits (generously: the machine may be loaded) for the command to exit; its exit code.
        fn exit_code(&mut self) -> Option<i32> {
            let start = Instant::now();
            loop {
                if let Some(status) = self.0.try_wait().unwrap() {
                    return status.code();
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "held command {} did not exit within 30 s",
                    self.0.id()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn spawn(command_line: &str) -> (Held, Gate) {
        let (mut command, gate) = held_shell(command_line).unwrap();
        let child = command.stdin(Stdio::null()).spawn().unwrap();
        (Held(child), gate)
    }

    #[test]
    fn a_held_command_waits_unstopped_and_runs_once_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let (mut child, gate) = spawn(&format!("echo yes > {}", ran.display()));
        // Held: blocked (never stopped), and the command has not run.
        let reader = ProcReader::new();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            let stat = reader.stat(child.pid()).unwrap();
            assert!(!stat.is_stopped(), "a held command must never be stopped");
            assert!(!stat.is_dead(), "the held command exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!ran.exists());
        gate.open();
        assert_eq!(child.exit_code(), Some(0));
        assert_eq!(std::fs::read_to_string(&ran).unwrap(), "yes\n");
    }

    #[test]
    fn letting_go_before_the_shell_reads_is_not_lost() {
        let (mut child, gate) = spawn("exit 7");
        gate.open();
        assert_eq!(child.exit_code(), Some(7));
    }

    #[test]
    fn a_gate_closed_unopened_ends_the_command_without_running_it() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let (mut child, gate) = spawn(&format!("echo yes > {}", ran.display()));
        // What the kernel does to tact's end when tact dies.
        drop(gate);
        assert_eq!(child.exit_code(), Some(NEVER_RAN));
        assert!(!ran.exists());
    }

    #[test]
    fn no_other_process_keeps_a_gate_open() {
        // The second held shell is started while the first gate is open: had it inherited that
        // gate's write end, the first command would wait for it forever.
        let (mut first, first_gate) = spawn("exit 0");
        let (mut second, second_gate) = spawn("exit 0");
        drop(first_gate);
        assert_eq!(first.exit_code(), Some(NEVER_RAN));
        second_gate.open();
        assert_eq!(second.exit_code(), Some(0));
    }

    #[test]
    fn the_command_does_not_inherit_the_gate() {
        let (mut child, gate) = spawn("if true <&3; then exit 3; fi 2>/dev/null; exit 0");
        gate.open();
        assert_eq!(child.exit_code(), Some(0));
    }

    #[test]
    fn opening_the_gate_of_a_killed_command_is_harmless() {
        let (mut child, gate) = spawn("exit 0");
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        gate.open();
    }
}
