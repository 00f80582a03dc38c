//! tact as the GNU make jobserver of the command: a pipe holding one byte per job slot, which
//! the command finds through MAKEFLAGS in one of make's two styles (`--jobserver-style`):
//!
//! - pipe: an anonymous pipe passed as inherited file descriptors (`--jobserver-auth=R,W`),
//!   which every GNU make since 4.2 reads (and `--jobserver-fds=R,W`, older ones). make 4.3,
//!   Debian 12's, knows only this one; make closes the descriptors for recipes it does not take
//!   for recursive makes, and so does any program that closes what it inherits.
//! - fifo: a named pipe in a private directory (`--jobserver-auth=fifo:PATH`), make 4.4's
//!   default, which every process that sees MAKEFLAGS can open by name. make 4.3 stops with
//!   "invalid --jobserver-auth string" on it; ninja 1.13 reads nothing else on POSIX (it
//!   ignores a pipe).
//!
//! `auto` picks fifo for ninja by its name, and for a make (named `make` or `gmake`) whose
//! `--version` says GNU Make 4.4 or later: the fifo survives recipes and tools that close the
//! descriptors they inherit. Any other command, or a make that cannot tell, gets a pipe.
//!
//! make runs its first job in an implicit slot and takes a byte from the pipe for every further
//! job, writing it back when a job ends, so a count of n puts n − 1 tokens in circulation. tact
//! grows the count by writing tokens and shrinks it by reading tokens back as make returns them
//! (never taking one a job holds). At any moment FIONREAD tells how many tokens sit unclaimed,
//! so make's jobs in flight are the tokens issued minus those, plus the implicit slot. Both
//! styles are one kernel pipe buffer behind tact's own two descriptors, so all of this is the
//! same code for both.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use tact_core::tune::Load;

use super::private_dir::PrivateDir;

/// The most jobs a jobserver can run: one per byte of a pipe's default capacity (64 KiB), plus
/// make's implicit slot. Writing more tokens would block tact.
pub const MAX_JOBS: usize = 65_537;

/// The byte make 4.3 writes for a token (any byte would do; make writes back what it read).
const TOKEN: u8 = b'+';

/// Programs that read the fifo style only (by the name they run as): ninja 1.13 ignores a
/// pipe jobserver on POSIX, and older ninjas read no jobserver at all, so a fifo costs them
/// nothing.
const FIFO_ONLY: [&str; 2] = ["ninja", "ninja-build"];

/// Names GNU make runs as; `auto` asks such a command its version.
const MAKES: [&str; 2] = ["make", "gmake"];

/// The first GNU make that reads the fifo style (its own default there).
const FIFO_MAKE: (u32, u32) = (4, 4);

/// How long `make --version` may take before `auto` gives up on it and picks a pipe.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// How the command finds the jobserver: make's `--jobserver-style`, plus `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Style {
    /// fifo for ninja and GNU make 4.4 or later (asked with --version), else pipe
    Auto,
    /// inherited descriptors: every GNU make reads them
    Pipe,
    /// a named pipe: make 4.4 and later, ninja 1.13 and later, cargo's jobserver crate
    Fifo,
}

impl Style {
    /// Whether `command` (the program tact runs) gets a fifo.
    fn fifo_for(self, command: &str) -> bool {
        match self {
            Style::Pipe => false,
            Style::Fifo => true,
            Style::Auto => auto_picks_fifo(command, make_version),
        }
    }
}

/// `auto`'s choice for `command`: a fifo for ninja, and for a make whose `version` (asked only
/// of a command named make or gmake) is GNU Make 4.4 or later.
fn auto_picks_fifo(command: &str, version: impl FnOnce(&str) -> Option<(u32, u32)>) -> bool {
    let Some(name) = Path::new(command).file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    FIFO_ONLY.contains(&name)
        || (MAKES.contains(&name) && version(command).is_some_and(|v| v >= FIFO_MAKE))
}

/// Refuses a make (named make or gmake) given a `-j` of its own on the command line: make then
/// runs that many jobs itself ("-jN forced in submake: resetting jobserver mode"), or all of
/// them with a bare `-j`, and tact's count governs nothing. A `-j` in MAKEFLAGS is dropped
/// instead (see [`makeflags`]): the user did not write it for this run.
pub fn check_jobs_option(command: &[String]) -> Result<()> {
    let Some((program, args)) = command.split_first() else {
        return Ok(());
    };
    if !is_make(program) {
        return Ok(());
    }
    if let Some(option) = jobs_option(args) {
        bail!(
            "{program} {option}: tact is make's jobserver and sets how many jobs run at once; \
             with a -j of its own make ignores the jobserver. Remove {option} (--max N sets the \
             most jobs tact allows, --init N where it starts)"
        );
    }
    Ok(())
}

/// Whether `command` runs as GNU make (by its name).
pub fn is_make(command: &str) -> bool {
    let name = Path::new(command).file_name().and_then(|n| n.to_str());
    name.is_some_and(|n| MAKES.contains(&n))
}

/// make's short options that take an argument (the rest of the word, else the next word), and
/// those whose argument is optional (only the rest of the word), as GNU make's getopt reads them.
const SHORT_ARG: &str = "CfIoWE";
const SHORT_OPTIONAL: &str = "lO";
/// make's long options that take the next word as their argument when given without `=`.
const LONG_ARG: [&str; 10] = [
    "directory",
    "file",
    "makefile",
    "include-dir",
    "old-file",
    "assume-old",
    "what-if",
    "new-file",
    "assume-new",
    "eval",
];

/// The first word of make's arguments that sets its job count: `-j`, `-jN`, `-kj4`, `--jobs`,
/// `--jobs=N`. Words after `--`, and arguments of other options, are not options.
fn jobs_option(args: &[String]) -> Option<&str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            return None;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            if name == "jobs" {
                return Some(word);
            }
            if !value && LONG_ARG.contains(&name) {
                words.next();
            }
            continue;
        }
        // A target, a variable assignment, or `-` alone.
        let Some(short) = word.strip_prefix('-') else {
            continue;
        };
        for (i, c) in short.char_indices() {
            if c == 'j' {
                return Some(word);
            }
            if SHORT_ARG.contains(c) {
                if i + c.len_utf8() == short.len() {
                    words.next();
                }
                break;
            }
            if SHORT_OPTIONAL.contains(c) {
                break;
            }
        }
    }
    None
}

/// The GNU make version of `make` (run as `make --version`, found as the command will be, on
/// every run: an upgrade takes effect at once); None when it does not run, does not finish
/// within [`VERSION_TIMEOUT`], or is not GNU make.
fn make_version(make: &str) -> Option<(u32, u32)> {
    let mut child = Command::new(make)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    // make prints a few hundred bytes, well within the pipe's buffer: it exits without a reader.
    while child.try_wait().ok()?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    parse_make_version(&text)
}

/// (major, minor) from `make --version`'s first line, "GNU Make 4.4.1"; None for anything else.
fn parse_make_version(text: &str) -> Option<(u32, u32)> {
    let version = text.lines().next()?.strip_prefix("GNU Make ")?.trim();
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Where the command finds the tokens.
enum Channel {
    /// The pipe's read end as the command inherits it (the write end is `Jobserver::write`).
    Pipe(OwnedFd),
    /// A named pipe in a private directory, removed with it.
    Fifo(PrivateDir),
}

/// Creates `tact-jobserver-XXXXXX/fifo` in the temporary directory ($TMPDIR, else /tmp).
fn create_fifo() -> Result<PrivateDir> {
    let base = std::env::temp_dir();
    // MAKEFLAGS is split at whitespace, and make reads no quoting in it.
    if base
        .to_str()
        .is_none_or(|b| b.contains(char::is_whitespace))
    {
        bail!(
            "--jobserver-style fifo: the temporary directory {} has whitespace or is not \
             UTF-8, which MAKEFLAGS cannot carry; set TMPDIR to another",
            base.display()
        );
    }
    // From here on, dropping it removes what exists of it.
    let fifo = PrivateDir::create("tact-jobserver", "fifo", "jobserver fifo")?;
    nix::unistd::mkfifo(fifo.entry(), Mode::S_IRUSR | Mode::S_IWUSR)
        .with_context(|| format!("cannot create the fifo {}", fifo.entry().display()))?;
    Ok(fifo)
}

pub struct Jobserver {
    channel: Channel,
    /// tact's write end: the pipe's, which the command inherits too, or tact's open of the fifo.
    write: File,
    /// tact's own, non-blocking read end. Reading back a token races with make for it, so
    /// tact's reads must never block; setting O_NONBLOCK on the pipe's shared end would change
    /// make's reads too, which a separate open file description does not.
    take: File,
    /// Tokens tact has put in circulation and not taken back.
    issued: usize,
    /// Tokens that should be in circulation: the target minus make's implicit slot.
    want: usize,
}

impl Jobserver {
    /// A jobserver in `style` for `command` (the program tact runs), holding target − 1 tokens.
    pub fn new(target: usize, style: Style, command: &str) -> Result<Self> {
        let (channel, write, take) = if style.fifo_for(command) {
            let fifo = create_fifo()?;
            // The read end first: a non-blocking open for reading succeeds with no writer,
            // and then the open for writing finds a reader and does not block. Both stay open
            // while tact runs, so clients never see an end of file, nor block opening.
            let take = open_nonblocking(fifo.entry())?;
            let write = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(fifo.entry())
                .with_context(|| format!("cannot open {} for writing", fifo.entry().display()))?;
            (Channel::Fifo(fifo), write, take)
        } else {
            let (read, write) =
                nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create the jobserver pipe")?;
            let take = open_nonblocking(Path::new(&format!("/proc/self/fd/{}", read.as_raw_fd())))?;
            (Channel::Pipe(read), File::from(write), take)
        };
        let mut js = Jobserver {
            channel,
            write,
            take,
            issued: 0,
            want: 0,
        };
        js.set_target(target)?;
        Ok(js)
    }

    /// Tells the command where the jobserver is, keeping the user's MAKEFLAGS; with a pipe,
    /// lets it inherit the pipe's ends.
    pub fn prepare(&self, command: &mut Command) {
        let old = std::env::var("MAKEFLAGS").ok();
        let r = match &self.channel {
            Channel::Fifo(fifo) => {
                let path = fifo
                    .entry()
                    .to_str()
                    .expect("checked to be UTF-8 when created");
                command.env("MAKEFLAGS", makeflags(old.as_deref(), Auth::Fifo(path)));
                return;
            }
            Channel::Pipe(read) => read.as_raw_fd(),
        };
        let w = self.write.as_raw_fd();
        command.env("MAKEFLAGS", makeflags(old.as_deref(), Auth::Fds(r, w)));
        // SAFETY: fcntl is async-signal-safe, and nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                for fd in [r, w] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Sets the number of jobs make may run: writes the missing tokens now; takes surplus ones
    /// back as they come free (see [`Jobserver::reclaim`]).
    pub fn set_target(&mut self, target: usize) -> Result<()> {
        self.want = target.saturating_sub(1);
        if self.issued < self.want {
            let more = vec![TOKEN; self.want - self.issued];
            self.write
                .write_all(&more)
                .context("cannot write jobserver tokens")?;
            self.issued = self.want;
        }
        self.reclaim()
    }

    /// More tokens are out than the target allows: wait for the pipe to become readable.
    pub fn reclaiming(&self) -> bool {
        self.issued > self.want
    }

    /// The read end to wait on while [`Jobserver::reclaiming`].
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.take.as_fd()
    }

    /// Takes back surplus tokens that sit in the pipe; make may win the race for any of them.
    pub fn reclaim(&mut self) -> Result<()> {
        while self.issued > self.want {
            let mut buf = vec![0u8; self.issued - self.want];
            match self.take.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.issued -= n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("cannot read jobserver tokens back"),
            }
        }
        Ok(())
    }

    /// Tokens in the pipe that no job holds.
    pub fn free(&self) -> Result<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer, which is valid for the call.
        let rc = unsafe { libc::ioctl(self.take.as_raw_fd(), libc::FIONREAD, &mut n) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("FIONREAD on the jobserver pipe");
        }
        Ok(n.max(0) as usize)
    }

    /// make's occupancy: jobs holding tokens, plus the implicit slot while it is `implicit`ly
    /// held (make runs any job: the command has a live child; or a program that runs its jobs
    /// in threads runs at all). make keeps no visible queue, so "work waits" is inferred: every
    /// token taken and the target reached (queued = 1), else none.
    pub fn load(&self, target: usize, implicit: bool) -> Result<Load> {
        let free = self.free()?;
        let in_flight = self.issued.saturating_sub(free) + usize::from(implicit);
        let queued = usize::from(free == 0 && in_flight >= target);
        Ok(Load::new(in_flight, queued))
    }
}

/// tact's non-blocking open of a pipe's read end (see [`Jobserver::take`]).
fn open_nonblocking(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open the jobserver pipe through {}", path.display()))
}

/// Where MAKEFLAGS tells the command the jobserver is.
#[derive(Clone, Copy)]
enum Auth<'a> {
    /// Inherited descriptors: read end, write end.
    Fds(i32, i32),
    /// The fifo's path.
    Fifo(&'a str),
}

/// The MAKEFLAGS the command gets: the user's flags without any `-j` or jobserver of their own,
/// then tact's `-j` and jobserver (for a pipe, `--jobserver-fds=R,W` too, the same for make
/// < 4.2), then the user's variable definitions (after ` -- `), which must stay last.
fn makeflags(old: Option<&str>, auth: Auth) -> String {
    let old = old.unwrap_or("").trim();
    let (flags, vars) = match old.strip_prefix("-- ") {
        Some(vars) => ("", Some(vars)),
        None => match old.split_once(" -- ") {
            Some((flags, vars)) => (flags, Some(vars)),
            None => (old, None),
        },
    };
    let mut words: Vec<String> = flags
        .split_whitespace()
        .filter(|w| {
            !(w.starts_with("-j")
                || w.starts_with("--jobserver-auth=")
                || w.starts_with("--jobserver-fds=")
                || w.starts_with("--jobs"))
        })
        .map(str::to_string)
        .collect();
    words.push("-j".into());
    match auth {
        Auth::Fds(r, w) => {
            words.push(format!("--jobserver-fds={r},{w}"));
            words.push(format!("--jobserver-auth={r},{w}"));
        }
        // Alone: make and ninja take the last jobserver word they see, so a pipe's
        // descriptors beside it could not serve make 4.3 and ninja both.
        Auth::Fifo(path) => words.push(format!("--jobserver-auth=fifo:{path}")),
    }
    let mut out = words.join(" ");
    if let Some(vars) = vars {
        out.push_str(" -- ");
        out.push_str(vars);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_make_with_its_own_job_count_is_refused() {
        for (words, option) in [
            (&["make", "-j4"][..], "-j4"),
            (&["make", "-j"], "-j"),
            (&["/usr/bin/gmake", "all", "-j", "8"], "-j"),
            (&["make", "-kj4"], "-kj4"),
            (&["make", "--jobs"], "--jobs"),
            (&["make", "--jobs=3", "all"], "--jobs=3"),
            (&["make", "-C", "src", "-sj2"], "-sj2"),
        ] {
            let e = check_jobs_option(&argv(words)).unwrap_err().to_string();
            assert!(
                e.contains(&format!(" {option}: tact is make's jobserver")),
                "{e}"
            );
            assert!(e.contains(&format!("Remove {option} (--max N")), "{e}");
        }
        for words in [
            &["make", "all", "V=1"][..],
            &["make", "-C", "-j"],
            &["make", "-Cj"],
            &["make", "-f", "-j4"],
            &["make", "--directory", "-j"],
            &["make", "--directory=x", "-k"],
            &["make", "-O-j"],
            &["make", "--", "-j"],
            &["make", "--jobserver-style=fifo"],
            &["xargs", "-j4"],
            &["ninja", "-j4"],
        ] {
            assert!(check_jobs_option(&argv(words)).is_ok(), "{words:?}");
        }
    }

    #[test]
    fn makeflags_keep_the_users_flags_and_variables() {
        let ours = "-j --jobserver-fds=3,4 --jobserver-auth=3,4";
        let pipe = Auth::Fds(3, 4);
        assert_eq!(makeflags(None, pipe), ours);
        // A leading bundle of single-letter flags stays first, where make looks for it.
        assert_eq!(makeflags(Some("ks"), pipe), format!("ks {ours}"));
        assert_eq!(
            makeflags(Some("k -j8 --jobserver-auth=5,6 -- CC=clang"), pipe),
            format!("k {ours} -- CC=clang")
        );
        assert_eq!(makeflags(Some("-- V=1"), pipe), format!("{ours} -- V=1"));
    }

    #[test]
    fn makeflags_name_the_fifo_alone() {
        let fifo = Auth::Fifo("/tmp/tact-jobserver-a1b2c3/fifo");
        let ours = "-j --jobserver-auth=fifo:/tmp/tact-jobserver-a1b2c3/fifo";
        assert_eq!(makeflags(None, fifo), ours);
        // The user's jobserver of either style goes, and no descriptors come with the fifo.
        assert_eq!(
            makeflags(
                Some("ks -j4 --jobserver-fds=5,6 --jobserver-auth=fifo:/tmp/GMfifo9 -- V=1"),
                fifo
            ),
            format!("ks {ours} -- V=1")
        );
    }

    #[test]
    fn auto_gives_ninja_a_fifo_and_everything_else_a_pipe() {
        for cmd in ["ninja", "/usr/bin/ninja", "ninja-build"] {
            assert!(Style::Auto.fifo_for(cmd), "{cmd}");
            assert!(!Style::Pipe.fifo_for(cmd), "{cmd}");
        }
        for cmd in ["cargo", "ninjax", "./ninja.sh", "./make.sh", ""] {
            assert!(!Style::Auto.fifo_for(cmd), "{cmd}");
            assert!(Style::Fifo.fifo_for(cmd), "{cmd}");
        }
    }

    #[test]
    fn auto_gives_a_make_a_fifo_from_4_4_on() {
        let asked = |v: Option<(u32, u32)>| {
            move |cmd: &str| {
                assert!(cmd.ends_with("make"), "{cmd} asked its version");
                v
            }
        };
        for cmd in ["make", "/usr/bin/gmake", "./make"] {
            assert!(auto_picks_fifo(cmd, asked(Some((4, 4)))), "{cmd}");
            assert!(auto_picks_fifo(cmd, asked(Some((5, 0)))), "{cmd}");
            assert!(!auto_picks_fifo(cmd, asked(Some((4, 3)))), "{cmd}");
            assert!(!auto_picks_fifo(cmd, asked(Some((3, 81)))), "{cmd}");
            assert!(!auto_picks_fifo(cmd, asked(None)), "{cmd}");
        }
        // Nothing else is asked.
        for cmd in ["ninja", "cargo", "bmake", "make.sh"] {
            let fifo = auto_picks_fifo(cmd, |c: &str| panic!("{c} asked its version"));
            assert_eq!(fifo, cmd == "ninja", "{cmd}");
        }
    }

    #[test]
    fn make_versions_parse_from_the_first_line() {
        let cases = [
            (
                "GNU Make 4.3\nBuilt for x86_64-pc-linux-gnu\n",
                Some((4, 3)),
            ),
            ("GNU Make 4.4\n", Some((4, 4))),
            ("GNU Make 4.4.1\nCopyright (C) 1988-2023\n", Some((4, 4))),
            ("GNU Make 3.81\n", Some((3, 81))),
            ("GNU Make 4\n", None),
            ("GNU Make 4.x\n", None),
            ("make: unknown option -- -\n", None),
            ("bmake 20240711\nGNU Make 4.4\n", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_make_version(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_make_that_cannot_tell_its_version_is_none() {
        assert_eq!(make_version("/nonexistent/make"), None);
        assert_eq!(make_version("false"), None);
    }

    /// The read and write ends a client such as make uses: the inherited descriptors, or its
    /// own opens of the fifo by name.
    fn client_ends(js: &Jobserver) -> (File, File) {
        match &js.channel {
            Channel::Pipe(read) => (
                File::from(read.try_clone().unwrap()),
                js.write.try_clone().unwrap(),
            ),
            Channel::Fifo(fifo) => (
                File::open(fifo.entry()).unwrap(),
                OpenOptions::new().write(true).open(fifo.entry()).unwrap(),
            ),
        }
    }

    /// The same sequence of takes and returns gives the same counts in either style.
    fn tokens_follow_the_target(style: Style) {
        let mut js = Jobserver::new(4, style, "make").unwrap();
        assert_eq!(
            js.free().unwrap(),
            3,
            "4 jobs: 3 tokens plus the implicit slot"
        );
        assert_eq!(js.load(4, false).unwrap(), Load::new(0, 0));

        // Two jobs take tokens (as make would).
        let (mut make_reads, mut make_writes) = client_ends(&js);
        let mut held = [0u8; 2];
        make_reads.read_exact(&mut held).unwrap();
        assert_eq!(js.load(4, true).unwrap(), Load::new(3, 0));

        // Shrinking to 2 takes the free token at once, and one held token only when returned.
        js.set_target(2).unwrap();
        assert_eq!(js.free().unwrap(), 0);
        assert!(js.reclaiming());
        assert_eq!(js.load(2, true).unwrap(), Load::new(3, 1));
        js.reclaim().unwrap();
        assert!(
            js.reclaiming(),
            "no token is free: nothing is taken from a job"
        );
        make_writes.write_all(&held[..1]).unwrap();
        js.reclaim().unwrap();
        assert!(!js.reclaiming());
        assert_eq!(js.load(2, true).unwrap(), Load::new(2, 1));

        // Growing again writes tokens.
        js.set_target(5).unwrap();
        assert_eq!(js.free().unwrap(), 3);
    }

    #[test]
    fn tokens_follow_the_target_and_surplus_comes_back_when_free() {
        tokens_follow_the_target(Style::Pipe);
    }

    #[test]
    fn a_fifos_tokens_are_counted_as_a_pipes() {
        tokens_follow_the_target(Style::Fifo);
    }

    #[test]
    fn the_fifo_is_private_and_goes_with_the_jobserver() {
        let js = Jobserver::new(3, Style::Auto, "/usr/bin/ninja").unwrap();
        let Channel::Fifo(fifo) = &js.channel else {
            panic!("auto gives ninja a fifo");
        };
        let (dir, path) = (fifo.dir().to_path_buf(), fifo.entry().to_path_buf());
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_fifo());
        assert_eq!(
            meta.permissions().mode() & 0o077,
            0,
            "{:o}",
            meta.permissions().mode()
        );
        let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700, "{dir_mode:o}");

        let mut command = Command::new("true");
        js.prepare(&mut command);
        let flags = command
            .get_envs()
            .find(|(k, _)| *k == "MAKEFLAGS")
            .and_then(|(_, v)| v)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            flags.contains(&format!(" --jobserver-auth=fifo:{}", path.display())),
            "{flags}"
        );
        assert!(!flags.contains("--jobserver-fds"), "{flags}");

        drop(js);
        assert!(!path.exists() && !dir.exists(), "{} is left", dir.display());
    }
}
