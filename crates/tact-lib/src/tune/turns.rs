//! Several controllers on one bottleneck take turns (spec `concurrency.md` §6 item 4,
//! `docs/tune.md` "Several instances on one bottleneck"). Two TCC instances that explore at once
//! each see the other's moves as noise, and the one that happens to climb first keeps the larger
//! share; one explorer at a time is the case Theorem 1 covers.
//!
//! Instances name the bottleneck they share with a key. [`Turns`] is the host's side of
//! [`Policy::coordinate`], [`Policy::wants_turn`] and [`Policy::grant_turn`], in one of two
//! modes ([`CoordinateMode`]):
//!
//! - **turns**: the turn is an exclusive `flock(2)` on the file `KEY.lock` in the lock directory
//!   ([`lock_dir`]). While the policy wants a turn, the host tries to take the lock (never
//!   blocking) on each check; once it has it, it grants the turn; it unlocks as soon as the
//!   policy no longer wants it. The kernel drops the lock when the process dies, so a crashed
//!   instance never keeps the others waiting.
//! - **epoch**: no lock; the turn is granted at every boundary of a shared epoch, a multiple of
//!   the period on `CLOCK_REALTIME` (the same for every process on the machine, whatever its
//!   time namespace, and across machines whose clocks NTP keeps together). Waiting cycles then
//!   start together instead of queueing for turns; in tact-sim's model of 2–4 instances they
//!   escalated more than with turns (`docs/tune.md`, "In the simulator").
//!
//! Hosts call [`Turns::check`] on their ticks, under the lock that orders their events.
//!
//! While an instance holds the turn, the other instances' completions count as its samples
//! ([`Policy::on_peer_completions`]), so that an add step that only takes share from them gains
//! nothing. They come through `KEY.done` in the lock directory, in both modes: eight bytes every
//! instance adds its own completions to ([`Turns::completed`], one atomic add on a shared
//! mapping); each read of it ([`Turns::peers`], also part of every check) passes what the others
//! added since the previous one.
//!
//! The policy also learns how many instances share the key ([`Policy::set_instances`]; its
//! fair share is 1/k). Each instance registers a file in `KEY.live/` in the lock directory and
//! holds an exclusive `flock(2)` on it for its life ([`Registry`]); a count lists the directory
//! and tries each file's lock: a file whose lock can be taken belongs to an instance that is
//! gone (the kernel dropped its lock when it died) and is removed. So a crashed instance stops
//! counting at the next count, and nothing needs a clean exit.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tact_core::tune::Policy;

/// The epoch mode's period when not told: TCC's shortest steady timeout (60 s), so that a
/// cycle that comes due waits at most about as long as a steady state lasts anyway.
pub const DEFAULT_EPOCH: Duration = Duration::from_secs(60);

/// The longest key: its lock file's name (`KEY.lock`) stays within NAME_MAX (255 bytes).
const KEY_MAX: usize = 200;

/// How instances that share a key take turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinateMode {
    /// One explorer at a time: an exclusive lock per key.
    Turns,
    /// Every waiting instance starts its cycle at the next multiple of this period on the
    /// machine's real-time clock: nobody queues for a turn.
    Epoch(Duration),
}

/// Why a coordinator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CoordinateError {
    #[error(
        "coordination key {0:?}: a key names a file in the lock directory: give a non-empty name \
         of at most {KEY_MAX} bytes, without '/', other than '.' and '..' (e.g. the service's \
         host and port: db-5432)"
    )]
    BadKey(String),
    #[error("epoch mode needs a period of at least a millisecond")]
    BadEpoch,
    #[error("cannot use the lock directory {}: {source}", path.display())]
    Dir { path: PathBuf, source: io::Error },
    #[error("cannot open the lock file {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot share completions through {}: {source}", path.display())]
    Count { path: PathBuf, source: io::Error },
    #[error("cannot register the instance in {}: {source}", path.display())]
    Register { path: PathBuf, source: io::Error },
}

/// Checks a key: it becomes a file name in the lock directory.
pub fn check_key(key: &str) -> Result<(), CoordinateError> {
    let bad = key.is_empty()
        || key.len() > KEY_MAX
        || key == "."
        || key == ".."
        || key.contains(['/', '\0']);
    if bad {
        return Err(CoordinateError::BadKey(key.to_owned()));
    }
    Ok(())
}

/// The lock directory: `$TACT_RUNTIME_DIR/tune` when that is set (tests, independent groups of
/// instances, as for tact's other runtime files), else `/run/tact/tune` for root, else
/// `$XDG_RUNTIME_DIR/tact/tune` (the user's private runtime directory, when it is set to an
/// absolute path), else `/tmp/tact-UID/tune`. Instances coordinate only with others that use
/// the same directory: the same user, or root with root.
pub fn lock_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    lock_dir_for(euid, var("TACT_RUNTIME_DIR"), var("XDG_RUNTIME_DIR"))
}

fn lock_dir_for(euid: u32, tact: Option<PathBuf>, runtime: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = tact {
        return dir.join("tune");
    }
    if euid == 0 {
        return PathBuf::from("/run/tact/tune");
    }
    match runtime.filter(|dir| dir.is_absolute()) {
        Some(dir) => dir.join("tact/tune"),
        None => PathBuf::from(format!("/tmp/tact-{euid}/tune")),
    }
}

/// Creates the lock directory (0755 for root, whose is under /run; else 0700) and checks that
/// it is ours: under /tmp anyone could have made it first, and could then hold every lock.
fn make_dir(dir: &Path) -> Result<(), CoordinateError> {
    // SAFETY: as in lock_dir.
    let euid = unsafe { libc::geteuid() };
    let dir_err = |source| CoordinateError::Dir {
        path: dir.to_owned(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(if euid == 0 { 0o755 } else { 0o700 })
        .create(dir)
        .map_err(dir_err)?;
    let meta = std::fs::metadata(dir).map_err(dir_err)?;
    if meta.uid() != euid {
        return Err(dir_err(io::Error::other(format!(
            "it belongs to uid {}, not to you (uid {euid})",
            meta.uid()
        ))));
    }
    Ok(())
}

/// The turn of one key: an exclusive `flock(2)` on `DIR/KEY.lock`. Each `TurnLock` has its own
/// open file, so two in one process exclude each other as two processes do.
#[derive(Debug)]
pub struct TurnLock {
    file: File,
    path: PathBuf,
    held: bool,
}

/// Opens (creating it 0644 if needed, never truncating) a file every instance on a key shares.
fn open_shared(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
}

impl TurnLock {
    /// The lock of `key` in `dir`, created if needed.
    pub fn open_in(dir: &Path, key: &str) -> Result<TurnLock, CoordinateError> {
        check_key(key)?;
        make_dir(dir)?;
        let path = dir.join(format!("{key}.lock"));
        let file = open_shared(&path).map_err(|source| CoordinateError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(TurnLock {
            file,
            path,
            held: false,
        })
    }

    /// Takes the lock if nobody holds it; never blocks. True when this lock holds it now.
    pub fn try_lock(&mut self) -> io::Result<bool> {
        if self.held {
            return Ok(true);
        }
        // SAFETY: flock on a descriptor this struct owns.
        let rc = unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            self.held = true;
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
            _ => Err(e),
        }
    }

    /// Gives the lock up (nothing when not held).
    pub fn unlock(&mut self) -> io::Result<()> {
        if !self.held {
            return Ok(());
        }
        // SAFETY: as in try_lock.
        if unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.held = false;
        Ok(())
    }

    pub fn held(&self) -> bool {
        self.held
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The completions of every instance on a key: the first eight bytes of `DIR/KEY.done`, mapped
/// shared and added to as one `AtomicU64`. The file only ever grows (to eight bytes, by whoever
/// finds it shorter), so a mapping never loses its page. Its value means nothing by itself: each
/// reader keeps the value it last saw.
struct SharedCount {
    count: NonNull<AtomicU64>,
    path: PathBuf,
}

// SAFETY: the mapping lives as long as the struct and is only ever accessed atomically.
unsafe impl Send for SharedCount {}
// SAFETY: as for Send.
unsafe impl Sync for SharedCount {}

const COUNT_LEN: usize = std::mem::size_of::<AtomicU64>();

impl SharedCount {
    /// The count of `key` in `dir` (which [`make_dir`] made), created at zero if needed.
    fn open(dir: &Path, key: &str) -> Result<SharedCount, CoordinateError> {
        let path = dir.join(format!("{key}.done"));
        let err = |source| CoordinateError::Count {
            path: path.clone(),
            source,
        };
        let file = open_shared(&path).map_err(err)?;
        let meta = file.metadata().map_err(err)?;
        if !meta.is_file() {
            return Err(err(io::Error::other("not a regular file")));
        }
        // Two instances that both find it empty both grow it to the same length: no count is
        // lost, as none was added before the file had its length.
        if meta.len() < COUNT_LEN as u64 {
            file.set_len(COUNT_LEN as u64).map_err(err)?;
        }
        // SAFETY: a fresh shared mapping of the file's first bytes, which exist now; the
        // descriptor may close afterwards, the mapping keeps the file.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                COUNT_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(err(io::Error::last_os_error()));
        }
        let count = NonNull::new(at.cast::<AtomicU64>()).expect("mmap never maps at 0");
        Ok(SharedCount { count, path })
    }

    fn get(&self) -> &AtomicU64 {
        // SAFETY: page-aligned, mapped for the struct's life, and written only atomically.
        unsafe { self.count.as_ref() }
    }

    fn add(&self, n: u64) {
        self.get().fetch_add(n, Ordering::Relaxed);
    }

    fn load(&self) -> u64 {
        self.get().load(Ordering::Relaxed)
    }
}

impl Drop for SharedCount {
    fn drop(&mut self) {
        // SAFETY: the mapping open() made; nothing refers to it after the struct.
        unsafe { libc::munmap(self.count.as_ptr().cast(), COUNT_LEN) };
    }
}

impl std::fmt::Debug for SharedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCount")
            .field("path", &self.path)
            .field("count", &self.load())
            .finish()
    }
}

/// How often [`Turns::check`] counts the live instances (host time): a count lists a directory
/// and tries a lock per instance, too much for every tick; an instance that joins or dies is
/// seen within this.
const COUNT_EVERY: Duration = Duration::from_secs(1);

/// The live instances of one key: `DIR/KEY.live/`, one file per instance, each held under an
/// exclusive `flock(2)` by its instance for as long as the [`Registry`] lives.
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    /// This instance's file, open for the registration's life: its description holds the lock.
    _lock: File,
    path: PathBuf,
}

/// An exclusive lock on `file` without blocking: Ok(false) when someone else holds one.
fn try_flock(file: &File, how: libc::c_int) -> io::Result<bool> {
    // SAFETY: flock on a descriptor the caller owns.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}

impl Registry {
    /// Registers this instance under `key` in `dir` (which [`make_dir`] made). The file is
    /// created and locked under a hidden name and then renamed into place, so a count never
    /// sees it unlocked (and never removes a live instance's file as a dead one's).
    pub fn register_in(dir: &Path, key: &str) -> Result<Registry, CoordinateError> {
        check_key(key)?;
        make_dir(dir)?;
        let dir = dir.join(format!("{key}.live"));
        make_dir(&dir)?;
        let err = |path: &Path, source| CoordinateError::Register {
            path: path.to_owned(),
            source,
        };
        // pid and a clock reading: unique among the live (pids are) and the dead (time moves).
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{}-{stamp}", std::process::id());
        let hidden = dir.join(format!(".{name}"));
        let path = dir.join(&name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&hidden)
            .map_err(|e| err(&hidden, e))?;
        if !try_flock(&file, libc::LOCK_EX).map_err(|e| err(&hidden, e))? {
            return Err(err(&hidden, io::Error::other("a fresh file is locked")));
        }
        std::fs::rename(&hidden, &path).map_err(|e| err(&path, e))?;
        Ok(Registry {
            dir,
            _lock: file,
            path,
        })
    }

    /// The live instances, this one included. A file whose lock can be taken is a dead
    /// instance's: it is removed (and not counted). A file that cannot be opened or locked for
    /// another reason counts as live: a count too high only makes the fair share smaller.
    pub fn count(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 1;
        };
        let mut live = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path == self.path {
                live += 1;
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with('.') {
                // Being registered (or left by a crash between create and rename).
                continue;
            }
            let dead = File::open(&path)
                .and_then(|f| try_flock(&f, libc::LOCK_SH))
                .unwrap_or(false);
            if dead {
                // Its lock died with its owner. Removing it while holding the lock is safe: no
                // instance ever locks a file it did not create.
                let _ = std::fs::remove_file(&path);
            } else {
                live += 1;
            }
        }
        live.max(1)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // A clean exit removes the file at once; the lock goes when `file` closes.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What happened to the turn, for logs and traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnKind {
    /// The policy has a cycle due and waits for the turn.
    Wait,
    /// The turn was granted: the waiting cycle starts.
    Grant,
    /// The policy is back in its steady state: the turn is given up.
    Release,
}

/// One change of the turn, at host time `at`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TurnEvent {
    pub at: Duration,
    pub kind: TurnKind,
    /// A grant: how long the policy waited for it. A release: how long the turn was held.
    pub took: Duration,
}

/// Turns so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct TurnStats {
    /// Turns granted.
    pub turns: u64,
    /// Time spent waiting for them, the current wait included.
    pub waited: Duration,
    /// Time spent holding them, the current turn included.
    pub held: Duration,
    /// The policy holds the turn now.
    pub holding: bool,
    /// The other instances' completions passed to the policy (it counts them only while it
    /// holds the turn).
    pub peer_completions: u64,
}

/// The host's side of the coordination of one policy.
#[derive(Debug)]
pub struct Turns {
    key: String,
    mode: Mode,
    /// Since when the policy waits for the turn, or holds it.
    waiting: Option<Duration>,
    holding: Option<Duration>,
    stats: TurnStats,
    events: Vec<TurnEvent>,
    /// The key's completions, shared with the other instances: its value at the last read, and
    /// this instance's own additions since then.
    done: SharedCount,
    seen: u64,
    own: u64,
    /// This instance's registration, the live instances at the last count and when that was.
    registry: Registry,
    instances: usize,
    counted: Option<Duration>,
}

#[derive(Debug)]
enum Mode {
    Turns(TurnLock),
    /// The period, and the index of the epoch the last check fell in.
    Epoch(Duration, Option<u128>),
}

/// Events kept between two drains: a host that never drains them keeps the latest.
const EVENTS_MAX: usize = 1024;

impl Turns {
    /// A coordinator for `key` (checked: [`check_key`]) in [`lock_dir`]; its files are opened
    /// now, so a directory that cannot be used fails before the work starts.
    pub fn new(key: &str, mode: CoordinateMode) -> Result<Turns, CoordinateError> {
        Turns::new_in(&lock_dir(), key, mode)
    }

    /// A coordinator whose files are in `dir` rather than [`lock_dir`] (tests, separate groups).
    pub fn new_in(dir: &Path, key: &str, mode: CoordinateMode) -> Result<Turns, CoordinateError> {
        check_key(key)?;
        let mode = match mode {
            CoordinateMode::Turns => Mode::Turns(TurnLock::open_in(dir, key)?),
            CoordinateMode::Epoch(p) if p < Duration::from_millis(1) => {
                return Err(CoordinateError::BadEpoch)
            }
            CoordinateMode::Epoch(p) => {
                make_dir(dir)?;
                Mode::Epoch(p, None)
            }
        };
        let done = SharedCount::open(dir, key)?;
        let registry = Registry::register_in(dir, key)?;
        let instances = registry.count();
        // The first read counts from now: what the others (or an earlier run of this one) added
        // before is nobody's completions of this run.
        let seen = done.load();
        Ok(Turns {
            key: key.to_owned(),
            mode,
            waiting: None,
            holding: None,
            stats: TurnStats::default(),
            events: Vec::new(),
            done,
            seen,
            own: 0,
            registry,
            instances,
            counted: None,
        })
    }

    /// The live instances on the key at the last count, this one included.
    pub fn instances(&self) -> usize {
        self.instances
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Where the lock is, in turns mode.
    pub fn lock_path(&self) -> Option<&Path> {
        match &self.mode {
            Mode::Turns(lock) => Some(lock.path()),
            Mode::Epoch(..) => None,
        }
    }

    /// Tells the policy that its cycles wait for turns: call it once, before the first event.
    /// Tells the policy that its cycles wait for turns, and how many instances share the key:
    /// call it once, before the first event.
    pub fn start(&mut self, policy: &mut dyn Policy) {
        policy.coordinate();
        policy.set_instances(self.instances);
    }

    /// Counts the live instances when [`COUNT_EVERY`] has passed since the last count, and tells
    /// the policy when the number changed.
    fn recount(&mut self, policy: &mut dyn Policy, now: Duration) {
        if self
            .counted
            .is_some_and(|t| now.saturating_sub(t) < COUNT_EVERY)
        {
            return;
        }
        self.counted = Some(now);
        let k = self.registry.count();
        if k != self.instances {
            self.instances = k;
            policy.set_instances(k);
        }
    }

    /// The host's own `n` completions: added to the key's shared count for the others to see
    /// (one atomic add), and left out of this instance's next [`peers`](Self::peers).
    pub fn completed(&mut self, n: u64) {
        if n > 0 {
            self.done.add(n);
            self.own += n;
        }
    }

    /// Passes the other instances' completions since the last read to the policy, at host time
    /// `now` ([`Policy::on_peer_completions`]); the new target when they changed it. One atomic
    /// load: hosts call it before each of their own events and on every check, so they arrive
    /// in small batches. TCC takes a batch as that many samples at once, sharing the busy
    /// time since its previous sample equally: a configuration's samples and busy time, hence
    /// the throughput it is judged by, stay whole, and trimming drops no batch's whole span.
    pub fn peers(&mut self, policy: &mut dyn Policy, now: Duration) -> Option<usize> {
        let total = self.done.load();
        let own = std::mem::take(&mut self.own);
        // A count below the last one was reset under us (never by tact): start again from it.
        let since = total.saturating_sub(self.seen);
        self.seen = total;
        let peers = since.saturating_sub(own);
        if peers == 0 {
            return None;
        }
        self.stats.peer_completions += peers;
        policy.on_peer_completions(now, u32::try_from(peers).unwrap_or(u32::MAX))
    }

    /// One check at host time `now`: recounts the live instances now and then (telling the
    /// policy of a change, [`Policy::set_instances`]), passes the other instances' completions on
    /// ([`peers`](Self::peers)), gives the turn up when the policy no longer wants it, asks for
    /// it when it does, and grants it when it came. Returns the policy's new target when that
    /// changed it. A lock that fails (it never should: the file is open) counts as taken by
    /// someone else, and is retried on the next check.
    pub fn check(&mut self, policy: &mut dyn Policy, now: Duration) -> Option<usize> {
        self.recount(policy, now);
        let peers = self.peers(policy, now);
        let boundary = match &mut self.mode {
            Mode::Epoch(period, last) => {
                let index = epoch_index(SystemTime::now(), *period);
                let crossed = last.is_some_and(|l| index > l);
                *last = Some(index);
                crossed
            }
            Mode::Turns(_) => false,
        };
        self.check_with(policy, now, boundary).or(peers)
    }

    /// [`check`](Self::check) with the epoch's boundary given (whether one passed since the last
    /// check; turns mode ignores it).
    fn check_with(
        &mut self,
        policy: &mut dyn Policy,
        now: Duration,
        boundary: bool,
    ) -> Option<usize> {
        let wants = policy.wants_turn();
        if let Some(since) = self.holding {
            if wants {
                // A no-op while its cycle runs; but a cycle that came due before this tick saw
                // the last one end (a shift right after Steady) starts here, on the turn it
                // holds: nothing else would grant it, and the lock would never be released.
                return policy.grant_turn(now);
            }
            if let Mode::Turns(lock) = &mut self.mode {
                if let Err(e) = lock.unlock() {
                    tracing::warn!("{}: cannot unlock: {e}", lock.path().display());
                }
            }
            self.holding = None;
            self.stats.held += now.saturating_sub(since);
            self.push(now, TurnKind::Release, now.saturating_sub(since));
            return None;
        }
        if !wants {
            return None;
        }
        let since = match self.waiting {
            Some(since) => since,
            None => {
                self.waiting = Some(now);
                self.push(now, TurnKind::Wait, Duration::ZERO);
                now
            }
        };
        let granted = match &mut self.mode {
            Mode::Turns(lock) => lock.try_lock().unwrap_or_else(|e| {
                tracing::warn!("{}: cannot lock: {e}", lock.path().display());
                false
            }),
            Mode::Epoch(..) => boundary,
        };
        if !granted {
            return None;
        }
        let waited = now.saturating_sub(since);
        self.waiting = None;
        self.holding = Some(now);
        self.stats.turns += 1;
        self.stats.waited += waited;
        self.push(now, TurnKind::Grant, waited);
        policy.grant_turn(now)
    }

    fn push(&mut self, at: Duration, kind: TurnKind, took: Duration) {
        if self.events.len() >= EVENTS_MAX {
            self.events.remove(0);
        }
        self.events.push(TurnEvent { at, kind, took });
    }

    /// The turns so far, at host time `now` (which counts the current wait or turn).
    pub fn stats(&self, now: Duration) -> TurnStats {
        let mut s = self.stats;
        if let Some(since) = self.waiting {
            s.waited += now.saturating_sub(since);
        }
        if let Some(since) = self.holding {
            s.held += now.saturating_sub(since);
            s.holding = true;
        }
        s
    }

    /// The turn's changes since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<TurnEvent> {
        std::mem::take(&mut self.events)
    }
}

/// Which epoch of `period` the real-time clock is in.
fn epoch_index(now: SystemTime, period: Duration) -> u128 {
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    since.as_nanos() / period.as_nanos().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tact_core::tune::Event;

    #[test]
    fn a_second_holder_fails_until_the_first_releases() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TurnLock::open_in(dir.path(), "db-5432").unwrap();
        let mut b = TurnLock::open_in(dir.path(), "db-5432").unwrap();
        let mut other = TurnLock::open_in(dir.path(), "web").unwrap();
        assert_eq!(a.path(), dir.path().join("db-5432.lock"));
        assert!(a.try_lock().unwrap());
        assert!(
            !b.try_lock().unwrap(),
            "two fds: the second must not get it"
        );
        assert!(!b.try_lock().unwrap());
        assert!(other.try_lock().unwrap(), "another key is another lock");
        a.unlock().unwrap();
        assert!(!a.held());
        assert!(b.try_lock().unwrap());
        assert!(!a.try_lock().unwrap());
        drop(b); // closing the file releases it, as a process's death does
        assert!(a.try_lock().unwrap());
    }

    #[test]
    fn keys_that_are_not_plain_file_names_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "/etc/passwd",
            "a\0b",
            &"k".repeat(201),
        ] {
            let e = check_key(bad).unwrap_err();
            assert!(matches!(e, CoordinateError::BadKey(_)), "{bad:?}");
            assert!(e.to_string().contains("without '/'"), "{e}");
        }
        for good in ["db-5432", "a..b", ".hidden", "x.y:z", &"k".repeat(200)] {
            check_key(good).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            TurnLock::open_in(dir.path(), "../escape"),
            Err(CoordinateError::BadKey(_))
        ));
        assert!(!dir.path().parent().unwrap().join("escape.lock").exists());
    }

    #[test]
    fn the_lock_dir_is_root_s_the_runtime_dir_or_a_private_tmp_dir() {
        let run = Some(PathBuf::from("/run/user/1000"));
        assert_eq!(
            lock_dir_for(0, None, run.clone()),
            Path::new("/run/tact/tune")
        );
        assert_eq!(
            lock_dir_for(1000, None, run.clone()),
            Path::new("/run/user/1000/tact/tune")
        );
        assert_eq!(
            lock_dir_for(1000, None, None),
            Path::new("/tmp/tact-1000/tune")
        );
        // A relative XDG_RUNTIME_DIR is invalid (XDG base directory spec): ignored.
        assert_eq!(
            lock_dir_for(1000, None, Some(PathBuf::from("rel"))),
            Path::new("/tmp/tact-1000/tune")
        );
        let tact = Some(PathBuf::from("/tmp/t"));
        assert_eq!(
            lock_dir_for(0, tact.clone(), run.clone()),
            Path::new("/tmp/t/tune")
        );
        assert_eq!(lock_dir_for(1000, tact, run), Path::new("/tmp/t/tune"));
    }

    #[test]
    fn the_lock_dir_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("tact/tune");
        TurnLock::open_in(&nested, "k").unwrap();
        assert!(nested.join("k.lock").exists());
        // SAFETY: as in lock_dir.
        if unsafe { libc::geteuid() } != 0 {
            let mode = std::fs::metadata(&nested).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
    }

    /// A policy that wants the turn while `due` or exploring, and logs its grants.
    struct Fake {
        coordinated: bool,
        due: bool,
        exploring: bool,
        grants: Vec<Duration>,
        peers: Vec<(Duration, u32)>,
    }

    impl Fake {
        fn new() -> Fake {
            Fake {
                coordinated: false,
                due: false,
                exploring: false,
                grants: Vec::new(),
                peers: Vec::new(),
            }
        }
    }

    impl Policy for Fake {
        fn on_event(&mut self, _: Event) -> Option<usize> {
            None
        }
        fn target(&self) -> usize {
            if self.exploring {
                2
            } else {
                1
            }
        }
        fn coordinate(&mut self) {
            self.coordinated = true;
        }
        fn wants_turn(&self) -> bool {
            self.due || self.exploring
        }
        fn grant_turn(&mut self, now: Duration) -> Option<usize> {
            // As TCC: a grant during its own cycle is a no-op.
            if self.exploring {
                return None;
            }
            self.grants.push(now);
            self.due = false;
            self.exploring = true;
            Some(2)
        }
        fn on_peer_completions(&mut self, now: Duration, count: u32) -> Option<usize> {
            self.peers.push((now, count));
            None
        }
    }

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn two_coordinators_take_turns_and_count_them() {
        let dir = tempfile::tempdir().unwrap();
        let lock = |k| TurnLock::open_in(dir.path(), k).unwrap();
        let turns = || Turns::new_in(dir.path(), "k", CoordinateMode::Turns).unwrap();
        let (mut ca, mut cb) = (turns(), turns());
        let (mut a, mut b) = (Fake::new(), Fake::new());
        ca.start(&mut a);
        assert!(a.coordinated);
        // Nothing due: no lock is taken.
        assert_eq!(ca.check(&mut a, s(0)), None);
        let mut probe = lock("k");
        assert!(
            probe.try_lock().unwrap(),
            "nothing was due: the lock stays free"
        );
        probe.unlock().unwrap();
        a.due = true;
        b.due = true;
        assert_eq!(ca.check(&mut a, s(1)), Some(2));
        assert_eq!(cb.check(&mut b, s(1)), None);
        assert_eq!(cb.check(&mut b, s(2)), None, "b waits while a explores");
        assert_eq!((a.grants.len(), b.grants.len()), (1, 0));
        a.exploring = false; // a is back in its steady state
        assert_eq!(cb.check(&mut b, s(3)), None, "a has not released yet");
        assert_eq!(ca.check(&mut a, s(4)), None);
        assert_eq!(cb.check(&mut b, s(5)), Some(2));
        assert_eq!(b.grants, [s(5)]);
        let sb = cb.stats(s(6));
        assert_eq!(
            (sb.turns, sb.waited, sb.held, sb.holding),
            (1, s(4), s(1), true)
        );
        let sa = ca.stats(s(6));
        assert_eq!(
            (sa.turns, sa.waited, sa.held, sa.holding),
            (1, s(0), s(3), false)
        );
        let kinds = |c: &mut Turns| {
            c.drain_events()
                .iter()
                .map(|e| (e.kind, e.at, e.took))
                .collect::<Vec<_>>()
        };
        use TurnKind::*;
        assert_eq!(
            kinds(&mut ca),
            [
                (Wait, s(1), s(0)),
                (Grant, s(1), s(0)),
                (Release, s(4), s(3))
            ]
        );
        assert_eq!(kinds(&mut cb), [(Wait, s(1), s(0)), (Grant, s(5), s(4))]);
        assert!(ca.drain_events().is_empty());
    }

    #[test]
    fn a_cycle_due_before_the_holder_released_starts_on_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let turns = || Turns::new_in(dir.path(), "k", CoordinateMode::Turns).unwrap();
        let (mut ca, mut cb) = (turns(), turns());
        let (mut a, mut b) = (Fake::new(), Fake::new());
        ca.start(&mut a);
        cb.start(&mut b);
        a.due = true;
        assert_eq!(ca.check(&mut a, s(1)), Some(2));
        assert_eq!(
            ca.check(&mut a, s(2)),
            None,
            "no grant during its own cycle"
        );
        // Between two ticks the cycle ended and the next came due (a shift): a still wants
        // the turn it holds, and gets the due cycle started on it.
        a.exploring = false;
        a.due = true;
        assert_eq!(ca.check(&mut a, s(3)), Some(2));
        assert_eq!(a.grants, [s(1), s(3)]);
        b.due = true;
        assert_eq!(cb.check(&mut b, s(3)), None, "a still holds the turn");
        a.exploring = false;
        assert_eq!(ca.check(&mut a, s(4)), None);
        assert_eq!(
            cb.check(&mut b, s(5)),
            Some(2),
            "released once a wants nothing"
        );
    }

    #[test]
    fn instances_see_each_other_s_completions_never_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let open = |key, mode| Turns::new_in(dir.path(), key, mode).unwrap();
        let mut ca = open("k", CoordinateMode::Turns);
        // Epoch mode shares the same count.
        let mut cb = open("k", CoordinateMode::Epoch(s(60)));
        let mut other = open("web", CoordinateMode::Turns);
        let (mut a, mut b, mut o) = (Fake::new(), Fake::new(), Fake::new());
        let len = std::fs::metadata(dir.path().join("k.done")).unwrap().len();
        assert_eq!(len, 8);
        ca.completed(3);
        cb.completed(2);
        other.completed(7);
        assert_eq!(ca.peers(&mut a, s(1)), None);
        assert_eq!(cb.peers(&mut b, s(1)), None);
        assert_eq!(
            (a.peers.clone(), b.peers.clone()),
            (vec![(s(1), 2)], vec![(s(1), 3)])
        );
        // Nothing new: nothing passed; own completions only: nothing either.
        ca.peers(&mut a, s(2));
        ca.completed(5);
        ca.peers(&mut a, s(3));
        assert_eq!(a.peers, [(s(1), 2)]);
        // A check reads the count too.
        cb.completed(1);
        ca.check(&mut a, s(4));
        cb.check(&mut b, s(4));
        assert_eq!(a.peers, [(s(1), 2), (s(4), 1)]);
        assert_eq!(b.peers, [(s(1), 3), (s(4), 5)]);
        other.peers(&mut o, s(4));
        assert!(o.peers.is_empty(), "another key: {:?}", o.peers);
        assert_eq!(ca.stats(s(5)).peer_completions, 3);
        assert_eq!(cb.stats(s(5)).peer_completions, 8);
    }

    #[test]
    fn a_restarted_instance_counts_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Turns::new_in(dir.path(), "k", CoordinateMode::Turns).unwrap();
        let (mut ca, mut cb) = (open(), open());
        let (mut a, mut b) = (Fake::new(), Fake::new());
        ca.completed(1_000_000);
        drop(ca);
        let mut ca = open();
        assert_eq!(ca.peers(&mut a, s(1)), None);
        assert!(a.peers.is_empty(), "an earlier run's count: {:?}", a.peers);
        cb.completed(4);
        ca.peers(&mut a, s(2));
        assert_eq!(a.peers, [(s(2), 4)]);
        // b, there all along, saw the first run's completions.
        cb.peers(&mut b, s(2));
        assert_eq!(b.peers, [(s(2), 1_000_000)]);
        // The file reset under both (never by tact): no bogus count, and counting goes on.
        let file = OpenOptions::new()
            .write(true)
            .open(dir.path().join("k.done"))
            .unwrap();
        file.set_len(0).unwrap();
        file.set_len(8).unwrap();
        cb.completed(2);
        ca.peers(&mut a, s(3));
        ca.completed(1);
        cb.completed(6);
        ca.peers(&mut a, s(4));
        assert_eq!(a.peers, [(s(2), 4), (s(4), 6)]);
    }

    #[test]
    fn epoch_mode_grants_at_boundaries_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Turns::new_in(dir.path(), "k", CoordinateMode::Epoch(s(10))).unwrap();
        assert_eq!(c.lock_path(), None);
        let mut p = Fake::new();
        p.due = true;
        assert_eq!(c.check_with(&mut p, s(1), false), None);
        assert_eq!(c.check_with(&mut p, s(2), false), None);
        assert_eq!(c.check_with(&mut p, s(3), true), Some(2));
        // Exploring: a boundary grants nothing more.
        assert_eq!(c.check_with(&mut p, s(13), true), None);
        p.exploring = false;
        assert_eq!(c.check_with(&mut p, s(14), false), None);
        // Nothing due: a boundary is no turn.
        assert_eq!(c.check_with(&mut p, s(23), true), None);
        assert_eq!(p.grants, [s(3)]);
        assert_eq!(c.stats(s(30)).turns, 1);
        assert!(matches!(
            Turns::new_in(dir.path(), "k", CoordinateMode::Epoch(Duration::ZERO)),
            Err(CoordinateError::BadEpoch)
        ));
        assert_eq!(epoch_index(SystemTime::UNIX_EPOCH + s(125), s(60)), 2);
    }

    /// A policy on a pool's ticks: explores for `length` after each grant, then has its next
    /// cycle due `length` later; logs each exploration as [grant, end] in real time, which
    /// both pools share.
    struct Timed {
        length: Duration,
        now: Duration,
        exploring: Option<(Duration, std::time::Instant)>,
        due_at: Duration,
        log: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, std::time::Instant)>>>,
    }

    impl Policy for Timed {
        fn on_event(&mut self, e: Event) -> Option<usize> {
            self.now = self.now.max(e.at());
            if let Some((until, began)) = self.exploring.filter(|&(u, _)| self.now >= u) {
                self.log
                    .lock()
                    .unwrap()
                    .push((began, std::time::Instant::now()));
                self.exploring = None;
                self.due_at = until + self.length;
            }
            None
        }
        fn target(&self) -> usize {
            1
        }
        fn wants_turn(&self) -> bool {
            self.exploring.is_some() || self.now >= self.due_at
        }
        fn grant_turn(&mut self, now: Duration) -> Option<usize> {
            // The contract: a grant during its own cycle is a no-op (the holder's host grants
            // on every tick while it wants the turn).
            if self.exploring.is_some() {
                return None;
            }
            self.exploring = Some((now + self.length, std::time::Instant::now()));
            None
        }
    }

    #[test]
    fn pools_on_one_key_explore_one_at_a_time() {
        use crate::tune::Pool;
        use std::sync::{Arc, Mutex};
        use std::time::Instant;
        let dir = tempfile::tempdir().unwrap();
        let pool = |log: &Arc<Mutex<Vec<(Instant, Instant)>>>| {
            let policy = Timed {
                length: Duration::from_millis(150),
                now: Duration::ZERO,
                exploring: None,
                due_at: Duration::ZERO,
                log: Arc::clone(log),
            };
            let turns = Turns::new_in(dir.path(), "k", CoordinateMode::Turns).unwrap();
            Pool::builder()
                .policy(Box::new(policy))
                .tick(Duration::from_millis(10))
                .coordinate(turns)
                .build()
        };
        let logs = [
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        ];
        let pools = [pool(&logs[0]), pool(&logs[1])];
        let deadline = Instant::now() + Duration::from_secs(60);
        while logs.iter().any(|l| l.lock().unwrap().len() < 3) {
            assert!(Instant::now() < deadline, "too few turns: {logs:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in &pools {
            let t = p.turns().unwrap();
            assert!(t.turns >= 3, "{t:?}");
            let events = p.drain_turns();
            assert!(
                events.iter().any(|e| e.kind == TurnKind::Release),
                "{events:?}"
            );
        }
        drop(pools);
        let [a, b] = [&logs[0], &logs[1]].map(|l| l.lock().unwrap().clone());
        // An exploration ends before its pool unlocks; the other's begins after it locked.
        for x in &a {
            for y in &b {
                assert!(x.1 <= y.0 || y.1 <= x.0, "{x:?} and {y:?}: {a:?} {b:?}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "coordinate(k) needs ticks")]
    fn a_pool_without_ticks_cannot_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let turns = Turns::new_in(dir.path(), "k", CoordinateMode::Turns).unwrap();
        crate::tune::Pool::builder()
            .tick(Duration::ZERO)
            .coordinate(turns)
            .build();
    }
}
