//! `tact tune`: run an unmodified program (make, GNU parallel, xargs) under a concurrency
//! controller (TCC, spec concurrency.md §6 "External mode"). tact tells the program how many
//! jobs it may run at once, as its make jobserver, through a file it re-reads, with signals,
//! or by freezing a fixed pool's surplus workers, counts the jobs it finishes by watching its
//! processes (or from their own reports, through `tact exec-wrap`), and feeds those events to
//! the controller.

pub mod bottleneck;
pub mod completions;
pub mod exec_wrap;
mod freeze;
mod jobserver;
mod pressure;
mod private_dir;
mod report;
mod signals;
mod warm;
mod workers_file;
mod wrap;

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bottleneck::Bottleneck;
use tact_core::tune::{
    policy_from_spec, tcc_params_from_spec, Event as PolicyEvent, Load, Phase, Policy,
};
use tact_lib::tune::{CoordinateMode, Turns, DEFAULT_EPOCH};
use tact_linux::actuate::pidfd::PidFd;
use tact_linux::JobTree;

use crate::cli::TuneArgs;
use crate::jobs::events::{unblock_signals_in_child, Event, Events, Received};
use crate::jobs::pass_on::Reached;
use crate::jobs::run::{exit_code, spawn, TACT_FAILED};
use completions::Completions;
use freeze::{Discovery, Freezer};
use jobserver::Jobserver;
pub use jobserver::Style as JobserverStyle;
use pressure::{PressureMeter, PSI_PERIOD};
use report::{start_line, Report, Summary};
use signals::Signals;
pub use warm::parse_key;
use warm::{Loaded, WarmStore};
use workers_file::WorkersFile;

/// How often the jobserver's pipe and the command's children are looked at: make takes and
/// returns tokens within microseconds, so occupancy is read often (it costs one ioctl and one
/// small /proc read).
const POLL_JOBSERVER: Duration = Duration::from_millis(2);
/// The same for a workers file, or when the whole tree is walked (a few reads per process).
const POLL_TREE: Duration = Duration::from_millis(5);
/// How often the command's processes are looked at while its pool starts (`--freeze`).
const POLL_DISCOVERY: Duration = Duration::from_millis(50);
/// The shortest period of the bottleneck's readings: `/proc/stat` moves in 10 ms ticks and
/// diskstats' io_ticks in milliseconds, so shorter intervals are mostly rounding.
const HINT_PERIOD: Duration = Duration::from_millis(100);

/// `--coordinate-mode`: how instances that share a bottleneck key take turns
/// (`tact_lib::tune::turns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TurnMode {
    /// one instance measures at a time (a lock per key): the better of the two with 2 to 4
    /// instances in tact's simulator
    Turns,
    /// rounds start at shared epochs (multiples of --epoch): nobody queues for a turn, but each
    /// instance measures the others' steps too
    Epoch,
}

/// `--coordinate`'s KEY: a file name in the lock directory.
pub fn parse_coordinate_key(s: &str) -> Result<String, String> {
    tact_lib::tune::turns::check_key(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// `--coordinate`'s turns, set up before the command starts: a lock directory that cannot be
/// used fails the run early.
fn turns(args: &TuneArgs) -> Result<Option<Turns>> {
    let Some(key) = &args.coordinate else {
        return Ok(None);
    };
    let mode = match (args.coordinate_mode, args.epoch) {
        (TurnMode::Turns, Some(_)) => {
            bail!("--epoch is the epoch mode's period: add --coordinate-mode epoch")
        }
        (TurnMode::Turns, None) => CoordinateMode::Turns,
        (TurnMode::Epoch, epoch) => CoordinateMode::Epoch(epoch.unwrap_or(DEFAULT_EPOCH)),
    };
    let turns = Turns::new(key, mode).with_context(|| format!("--coordinate {key}"))?;
    Ok(Some(turns))
}

pub fn run(args: &TuneArgs, verbose: bool) -> Result<i32> {
    let receiver = args
        .signals
        .then(|| signals::receiver(&args.command, args.signals_start))
        .transpose()?;
    args.completions.check(&args.command)?;
    if !(args.freeze || args.signals || args.workers_file.is_some()) {
        jobserver::check_jobs_option(&args.command)?;
    }
    if args.freeze {
        freeze::check(&args.completions)?;
    }
    let store = args
        .key
        .as_ref()
        .map(|key| WarmStore::new(&warm::default_dir(), key, &args.command))
        .transpose()?;
    // Opened before the command starts, so that a CPU or PSI file that is missing fails early.
    let bottleneck = args.bottleneck.as_ref().map(Bottleneck::open).transpose()?;
    let mut turns = turns(args)?;
    if let (Some(t), true) = (&turns, verbose) {
        match t.lock_path() {
            Some(path) => eprintln!("tact: tune: taking turns through {}", path.display()),
            None => eprintln!("tact: tune: taking turns at epochs on {}", t.key()),
        }
    }
    let mut report = Report::new(args.json_log.as_deref(), verbose)?;
    // A pool's size bounds the count, so with --freeze the controller waits for the pool;
    // its spec is checked now all the same, and so is a --psi-cgroup (whether PSI is on does
    // not depend on the counts).
    let (mut controller, n_max) = if args.freeze {
        check_spec(args)?;
        if let Some(dir) = &args.psi_cgroup {
            pressure_meter(&args.policy, 1, 1, Some(dir))?;
        }
        (None, 0)
    } else {
        let (n_init, n_max) = counts(args)?;
        let c = controller(
            args,
            store.as_ref(),
            n_init,
            n_max,
            &mut report,
            Duration::ZERO,
        )?;
        (Some(c), n_max)
    };
    // Signals are read from a signalfd from now on, before anything exists that only tact's
    // own exit removes (the jobserver's fifo); the command starts with them unblocked.
    let mut events = Events::new()?;
    let mut completions = Completions::new(&args.completions)?;
    // The jobserver and a workers file exist before the command starts (it may read the file
    // once at its start); signals and freezing need its process, so they come after.
    let setup = match (&controller, &args.workers_file, receiver) {
        (None, _, _) => Setup::Freeze,
        (Some(c), Some(path), _) => {
            let file = WorkersFile::new(path)?;
            file.write(c.policy.target())?;
            Setup::Ready(Actuator::File(file))
        }
        (Some(_), None, Some(receiver)) => Setup::Signals(receiver),
        (Some(c), None, None) => {
            if n_max > jobserver::MAX_JOBS {
                bail!(
                    "--max {n_max}: a make jobserver runs at most {} jobs at once",
                    jobserver::MAX_JOBS
                );
            }
            Setup::Ready(Actuator::Jobserver(Jobserver::new(
                c.policy.target(),
                args.jobserver_style,
                &args.command[0],
            )?))
        }
    };
    let poll_every = match (&setup, &args.completions) {
        (Setup::Ready(Actuator::Jobserver(_)), completions::Counting::Children) => POLL_JOBSERVER,
        // Reading wrapped jobs' reports costs one poll(2) whatever their number.
        (_, completions::Counting::Wrap) => POLL_JOBSERVER,
        _ => POLL_TREE,
    };

    let (cmd, cmd_args) = args.command.split_first().expect("clap requires a command");
    let mut command = Command::new(cmd);
    command.args(cmd_args);
    unblock_signals_in_child(&mut command);
    if let Setup::Ready(Actuator::Jobserver(js)) = &setup {
        js.prepare(&mut command);
    }
    completions.prepare(&mut command);
    if let Some(c) = &controller {
        eprintln!("{}", c.start);
    }
    let mut child = match spawn(&mut command, cmd) {
        Ok(child) => child,
        Err(code) => return Ok(code),
    };
    let start = Instant::now();
    let pid = child.id() as i32;
    // Our unreaped child: its pid cannot name another process before we wait for it.
    let root = match PidFd::open(pid).context("cannot open a pidfd on the command") {
        Ok(root) => root,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    // Jobs finished before the controller started (while a pool settled): counted, not fed to it.
    let mut done = 0;
    let actuator = match setup {
        Setup::Ready(actuator) => actuator,
        Setup::Signals(receiver) => {
            let target = controller.as_ref().expect("built").policy.target();
            match signals_to(&root, cmd, receiver, target, start) {
                Ok(actuator) => actuator,
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            }
        }
        Setup::Freeze => {
            let pool = freeze_pool(
                args,
                &mut child,
                &root,
                &mut events,
                store.as_ref(),
                &mut report,
                start,
            );
            match pool {
                Ok(Pool::Ready(c, freezer)) => {
                    controller = Some(c);
                    match completions.poll(pid, Instant::now()) {
                        Ok(early) => done = early.len() as u64,
                        Err(e) => {
                            // Dropped, the freezer continues the workers it stopped.
                            drop(freezer);
                            return given_up(e, &mut child, &root, &mut events, cmd);
                        }
                    }
                    Actuator::Freeze(freezer)
                }
                Ok(Pool::Exited(status)) => return Ok(exit_code(status)),
                // The command goes on as it is; tact waits for it, as after a failure below.
                Err(e) => return given_up(e, &mut child, &root, &mut events, cmd),
            }
        }
    };
    let Controller {
        mut policy,
        pressure,
        start: _,
    } = controller.expect("built before the loop");
    let sight = Sight::of(&actuator, &args.completions);
    if !matches!(sight, Sight::Jobs | Sight::Tokens) {
        policy.saturation_unseen();
    }
    if let Some(turns) = &mut turns {
        turns.start(policy.as_mut());
    }
    let mut tuner = Tuner {
        policy,
        actuator,
        sight,
        completions,
        pid,
        report,
        start,
        done,
        load: Load::default(),
        bottleneck,
        sampled: None,
        pressure,
        pressed: None,
        store,
        turns,
    };

    let status = match tuner.drive(&mut child, &root, &mut events, poll_every, args.tick) {
        Ok(status) => status,
        Err(e) => {
            // Dropped, the actuator gives up the pipe's tokens and continues frozen workers,
            // now rather than when the command ends (the guard's lease would do it in 10 s).
            drop(tuner);
            return given_up(e, &mut child, &root, &mut events, cmd);
        }
    };
    // The last jobs ended before the command did.
    tuner.poll(Instant::now())?;
    let code = exit_code(status);
    let wall = start.elapsed();
    let line = tuner.report.finish(&Summary {
        completions: tuner.done,
        wall,
        status: code,
        turns: tuner.turns.as_ref().map(|t| (t.key(), t.stats(wall))),
    })?;
    eprintln!("{line}");
    if let Some(note) = tuner.completions.note() {
        eprintln!("{note}");
    }
    Ok(code)
}

/// Tuning failed while the command runs: the command goes on with the count it has (the
/// caller has dropped the actuator, which continues frozen workers); tact waits for it as `tact
/// run` does, passing signals on meanwhile (a plain wait left them in the blocked mask).
fn given_up(
    e: anyhow::Error,
    child: &mut Child,
    root: &PidFd,
    events: &mut Events,
    cmd: &str,
) -> Result<i32> {
    eprintln!("tact: {e:#}; tuning stopped, waiting for {cmd} to exit");
    let mut interrupted: Option<Interrupted> = None;
    while child.try_wait()?.is_none() {
        if let Some(sig) = events.ready_or_signal(root.as_fd())? {
            pass_on(&mut interrupted, root, sig);
        }
    }
    last_look(&mut interrupted);
    Ok(TACT_FAILED)
}

/// The controller and what feeds it besides completions.
struct Controller {
    policy: Box<dyn Policy + Send>,
    /// What `tcc:psi=1` reads.
    pressure: Option<PressureMeter>,
    /// How the run starts ([`start_line`]), printed as the command starts: an error before
    /// that is then the only line tact prints.
    start: String,
}

/// Builds the controller for counts in `n_init..=n_max`, from `--key`'s record when there is
/// one, and logs its first target at `at`.
fn controller(
    args: &TuneArgs,
    store: Option<&WarmStore>,
    n_init: usize,
    n_max: usize,
    report: &mut Report,
    at: Duration,
) -> Result<Controller> {
    let (spec, warm) = warm_start(&args.policy, store, n_max)?;
    // The message alone: its sources repeat in it.
    let policy = policy_from_spec(&spec, n_init, n_max)
        .map_err(|e| anyhow!("--policy {}: {e}", args.policy))?;
    let pressure = pressure_meter(&spec, n_init, n_max, args.psi_cgroup.as_deref())?;
    let tcc = tcc_params_from_spec(&spec, n_init, n_max).ok().flatten();
    if let Some(store) = store {
        // The count TCC starts from: the record's, or a warm= of the user's own, which wins.
        report.key(store.key(), store.path(), tcc.as_ref().and_then(|p| p.warm))?;
    }
    let target = policy.target();
    let mut start = start_line(&driving(args), target, n_max, &spec, tcc.as_ref());
    if let Some(meter) = &pressure {
        start = format!("{start}; PSI from {}", meter.source());
    }
    if let (Some(store), Some(count)) = (store, warm) {
        // TCC's first cycle is a normal one from that count: its base at the count's cut.
        eprintln!(
            "tact: tune: --key {}: warm start from {count} jobs at once, the steady count \
             recorded last; the first cycle measures {target} first",
            store.key()
        );
    }
    report.target(at, target, 0, Load::default())?;
    Ok(Controller {
        policy,
        pressure,
        start,
    })
}

/// How tact tells the command its count, for the start line.
fn driving(args: &TuneArgs) -> String {
    if args.freeze {
        "stopping the pool's surplus workers (--freeze)".to_string()
    } else if let Some(path) = &args.workers_file {
        format!("the workers file {}", path.display())
    } else if args.signals {
        "SIGUSR1/SIGUSR2 for each job more or fewer".to_string()
    } else if jobserver::is_make(&args.command[0]) {
        "make's jobserver".to_string()
    } else {
        "a make jobserver".to_string()
    }
}

/// With `--freeze`, before the command starts: `--init` and `--max` agree, a `--key` comes
/// with TCC, and the policy spec is one tact can build (a `static:N` above `--max` is refused
/// now, one above the pool's size once the pool is there).
fn check_spec(args: &TuneArgs) -> Result<()> {
    let max = args.max.map_or(usize::from(u16::MAX), |m| m as usize);
    let init = args.init.map_or(1, |n| n as usize);
    if init > max {
        bail!("--init {init} is above --max {max}");
    }
    if let Some(key) = &args.key {
        keyed_policy(&args.policy, key)?;
    }
    policy_from_spec(&args.policy, init, max)
        .map(drop)
        .map_err(|e| anyhow!("--policy {}: {e}", args.policy))
}

/// What `--freeze` found once the command started.
enum Pool {
    Ready(Controller, Box<Freezer>),
    /// The command exited before its pool settled.
    Exited(ExitStatus),
}

/// Waits for the command's pool to settle (passing signals on meanwhile), then builds the
/// controller for its size and the freezer.
fn freeze_pool(
    args: &TuneArgs,
    child: &mut Child,
    root: &PidFd,
    events: &mut Events,
    store: Option<&WarmStore>,
    report: &mut Report,
    start: Instant,
) -> Result<Pool> {
    let cmd = &args.command[0];
    let mut discovery = Discovery::new(root.pid(), args.freeze_depth.map(|d| d as usize));
    let mut interrupted: Option<Interrupted> = None;
    let (depth, size) = loop {
        if let Some(status) = child.try_wait()? {
            last_look(&mut interrupted);
            eprintln!("tact: tune: --freeze: {cmd} exited before its pool of workers settled");
            return Ok(Pool::Exited(status));
        }
        if let Event::Signal(sig) = events.wait(root.as_fd(), POLL_DISCOVERY)? {
            pass_on(&mut interrupted, root, sig);
        }
        // Interrupted, the command is on its way out: nothing to freeze any more.
        if interrupted.is_some() {
            continue;
        }
        if let Some(found) = discovery.look(Instant::now())? {
            break found;
        }
    };
    let (n_init, n_max) = freeze::counts(args.init, args.max, size);
    for (given, name) in [(args.max, "--max"), (args.init, "--init")] {
        if let Some(n) = given.filter(|&n| n as usize > size) {
            eprintln!(
                "tact: tune: --freeze: {cmd} runs {size} workers; {name} {n} counts as {size}"
            );
        }
    }
    let at = start.elapsed();
    let c = controller(args, store, n_init, n_max, report, at)?;
    eprintln!("{}", c.start);
    let freezer = Freezer::new(
        root.pid(),
        depth,
        size,
        c.policy.target(),
        args.freeze_wait,
        Instant::now(),
    )?;
    Ok(Pool::Ready(c, Box::new(freezer)))
}

/// The policy spec with `--key`'s recorded steady count as TCC's warm start, and that count.
/// Without a key, or with a `warm=` of the user's own, the spec as given; a record tact cannot
/// use is reported and ignored (the run starts cold and replaces it at its first Steady).
fn warm_start(
    spec: &str,
    store: Option<&WarmStore>,
    n_max: usize,
) -> Result<(String, Option<usize>)> {
    let Some(store) = store else {
        return Ok((spec.to_string(), None));
    };
    let options = keyed_policy(spec, store.key())?;
    if options
        .split(',')
        .any(|pair| pair.split('=').next().is_some_and(|k| k.trim() == "warm"))
    {
        return Ok((spec.to_string(), None));
    }
    // A bad spec is refused with its own message where the policy is built.
    let n_min = tcc_params_from_spec(spec, 1, n_max)
        .ok()
        .flatten()
        .map_or(1, |p| p.n_min);
    let count = match store.load() {
        // A smaller --max than the run that recorded it bounds it too, and a larger n_min
        // raises it, as the library's hosts do (`Keyed::start`).
        Loaded::Count(n) => n.min(n_max).max(n_min),
        Loaded::Nothing => return Ok((spec.to_string(), None)),
        Loaded::Unusable(why) => {
            tracing::warn!(
                "--key {}: ignoring {}: {why}",
                store.key(),
                store.path().display()
            );
            eprintln!(
                "tact: tune: --key {}: ignoring {}: {why}; starting cold",
                store.key(),
                store.path().display()
            );
            return Ok((spec.to_string(), None));
        }
    };
    let spec = match options {
        "" => format!("tcc:warm={count}"),
        options => format!("tcc:warm={count},{options}"),
    };
    Ok((spec, Some(count)))
}

/// The options of a policy spec given with `--key`, which must be TCC's.
fn keyed_policy<'a>(spec: &'a str, key: &str) -> Result<&'a str> {
    let (name, options) = match spec.trim().split_once(':') {
        Some((name, options)) => (name.trim(), options.trim()),
        None => (spec.trim(), ""),
    };
    if name != "tcc" {
        bail!("--key {key}: warm start is TCC's; --policy {spec} has no steady count to record");
    }
    Ok(options)
}

/// The PSI reader when the spec turns TCC's `psi` on: `--psi-cgroup`'s directory, else the
/// machine's. PSI the kernel does not offer turns the feature off (spec §6 item 3), which the
/// user is told now: the run goes on by throughput. A directory the user named is no such
/// fallback: one that cannot be read, or one given without `psi`, is an error.
fn pressure_meter(
    spec: &str,
    n_init: usize,
    n_max: usize,
    cgroup: Option<&Path>,
) -> Result<Option<PressureMeter>> {
    let wanted = tcc_params_from_spec(spec, n_init, n_max)
        .ok()
        .flatten()
        .is_some_and(|p| p.psi);
    match (wanted, cgroup) {
        (false, None) => Ok(None),
        (false, Some(_)) => bail!("--psi-cgroup needs --policy tcc:psi=1"),
        (true, Some(dir)) => PressureMeter::cgroup(dir).map(Some),
        (true, None) => match PressureMeter::machine() {
            Ok(meter) => Ok(Some(meter)),
            Err(e) => {
                eprintln!(
                    "tact: tune: tcc:psi=1: cannot read /proc/pressure ({e:#}); PSI is off for \
                     this run, TCC judges by throughput alone"
                );
                Ok(None)
            }
        },
    }
}

/// `--signals`' actuator: it sends through its own pidfd on the command's process.
fn signals_to(
    root: &PidFd,
    cmd: &str,
    receiver: signals::Receiver,
    target: usize,
    now: Instant,
) -> Result<Actuator> {
    let fd = root
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate the command's pidfd")?;
    Ok(Actuator::Signals(Signals::new(
        PidFd::from_owned(fd, root.pid()),
        cmd,
        receiver,
        target,
        now,
    )))
}

/// `--init` and `--max`, with their defaults from the CPUs tact may run on (its affinity and a
/// cgroup CPU quota: under `taskset -c 0` one).
fn counts(args: &TuneArgs) -> Result<(usize, usize)> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let init = args.init.map(|n| n as usize);
    let max = match args.max {
        Some(max) => max as usize,
        None => (4 * cpus).max(8).max(init.unwrap_or(0)),
    };
    let init = init.unwrap_or(cpus.min(max));
    if init > max {
        bail!("--init {init} is above --max {max}");
    }
    Ok((init, max))
}

/// The command's process tree once tact has passed a signal on to it, with the members reached.
struct Interrupted {
    tree: JobTree,
    reached: Reached,
    /// The latest signal passed on: the one a last look gives.
    sig: Received,
}

/// A signal for tact goes on to every process of the command ([`crate::jobs::pass_on`]'s rule):
/// a shell's children too, not only the command's own process, which may not pass it on. tact
/// carries on until the command exits, and exits with its status. The tree is looked for only
/// now: following it all along would cost a pidfd per job, and make's jobs are many and short.
fn pass_on(interrupted: &mut Option<Interrupted>, root: &PidFd, sig: Received) {
    if let Some(i) = interrupted {
        i.sig = sig;
        i.reached.pass_on(&mut i.tree, sig, true);
        return;
    }
    match JobTree::attach(root.pid()) {
        Ok(tree) => {
            let i = interrupted.insert(Interrupted {
                tree,
                reached: Reached::new(),
                sig,
            });
            i.reached.signal(&i.tree, sig, true);
        }
        // The command exited meanwhile, or cannot be followed (it runs as another user, as a
        // setuid program does): its own process at least, unless the terminal reached it.
        Err(e) => {
            tracing::debug!("cannot follow the command's processes: {e}");
            if !sig.from_terminal {
                if let Err(e) = root.send_signal(sig.signal as i32) {
                    tracing::warn!("cannot pass {} on: {e}", sig.signal);
                }
            }
        }
    }
}

/// The command exited: if a signal was passed on, a last look at its tree gives it to members
/// forked while it was on its way.
fn last_look(interrupted: &mut Option<Interrupted>) {
    if let Some(i) = interrupted {
        i.reached.pass_on(&mut i.tree, i.sig, false);
    }
}

/// An actuator ready before the command starts, or what `--signals` knows of the command
/// (signals need its process), or `--freeze` (which needs its pool).
enum Setup {
    Ready(Actuator),
    Signals(signals::Receiver),
    Freeze,
}

/// How the count reaches the program.
enum Actuator {
    Jobserver(Jobserver),
    File(WorkersFile),
    Signals(Signals),
    /// Boxed: far larger than the others.
    Freeze(Box<Freezer>),
}

impl Actuator {
    fn apply(&mut self, target: usize, now: Instant) -> Result<()> {
        match self {
            Actuator::Jobserver(js) => js.set_target(target),
            Actuator::File(f) => f.write(target),
            Actuator::Signals(s) => s.set_target(target, now),
            Actuator::Freeze(f) => f.set_target(target, now),
        }
    }

    /// The program's occupancy. Without a jobserver, the jobs running are the command's live
    /// children (a pool's thawed workers), or the target when they are not its jobs, and no
    /// queue is visible, so the pool counts as saturated exactly when they reach the target.
    fn load(&self, target: usize, running: usize, sight: Sight) -> Result<Load> {
        match self {
            Actuator::Jobserver(js) => js.load(target, sight == Sight::Tokens || running > 0),
            Actuator::File(_) | Actuator::Signals(_) if sight == Sight::Unseen => {
                Ok(Load::new(target, 0))
            }
            Actuator::File(_) | Actuator::Signals(_) => Ok(Load::new(running, 0)),
            Actuator::Freeze(f) => Ok(f.load()),
        }
    }

    fn reclaim_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            Actuator::Jobserver(js) if js.reclaiming() => Some(js.wait_fd()),
            _ => None,
        }
    }

    /// How soon to come back for work [`Actuator::catch_up`] could not finish yet.
    fn retry_in(&self) -> Option<Duration> {
        match self {
            Actuator::Signals(s) if s.owing() => Some(signals::RETRY),
            _ => None,
        }
    }

    /// Finishes a change of the count that cannot happen at once: takes back tokens make
    /// returned, sends the next signal once the program took the last, freezes surplus
    /// workers as they reach the end of a task.
    fn catch_up(&mut self, now: Instant) -> Result<()> {
        match self {
            Actuator::Jobserver(js) => js.reclaim(),
            Actuator::File(_) => Ok(()),
            Actuator::Signals(s) => s.flush(now),
            Actuator::Freeze(f) => f.catch_up(now),
        }
    }

    /// A signal is about to be passed on to the command: frozen workers must be able to take
    /// it, so they are continued, for good.
    fn release(&mut self) -> Result<()> {
        match self {
            Actuator::Freeze(f) => f.release(),
            _ => Ok(()),
        }
    }

    /// `n` jobs finished (a frozen pool watches for stalls).
    fn completed(&mut self, n: usize, now: Instant) {
        if let Actuator::Freeze(f) = self {
            f.completed(n, now);
        }
    }

    /// A frozen pool's counts, when they changed since the last call.
    fn frozen(&mut self) -> Option<freeze::Frozen> {
        match self {
            Actuator::Freeze(f) => f.changed(),
            _ => None,
        }
    }
}

/// How much tact sees of the jobs the program runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sight {
    /// Their number: the jobserver's tokens, wrapped jobs' reports, or the command's children
    /// as its jobs (parallel's, xargs's).
    Jobs,
    /// Nothing: with a counter file the children need not be jobs (the program may run them in
    /// threads or in long-lived workers), so the pool is taken to hold the target.
    Unseen,
    /// The jobserver's tokens with a counter file: the tokens taken are jobs, but the
    /// command's children need not be (a client may run its jobs in threads), so its implicit
    /// slot is taken as held while it runs. Counted by children, a client that runs its
    /// jobs in threads showed one job fewer than the target, never saturated, and TCC took no
    /// step (bench/tune's `tune-drive --external jobserver`).
    Tokens,
    /// `--freeze`: the thawed workers, whether or not each holds a task.
    Workers,
}

impl Sight {
    /// Outside `Jobs` and `Tokens`, saturation is a guess, and TCC applies spec §6's gap rule.
    fn of(actuator: &Actuator, counting: &completions::Counting) -> Sight {
        match (actuator, counting) {
            (Actuator::Freeze(_), _) => Sight::Workers,
            (Actuator::File(_) | Actuator::Signals(_), completions::Counting::File(_)) => {
                Sight::Unseen
            }
            (Actuator::Jobserver(_), completions::Counting::File(_)) => Sight::Tokens,
            _ => Sight::Jobs,
        }
    }
}

/// The controller wired to the program: events in, targets out.
struct Tuner {
    policy: Box<dyn Policy + Send>,
    actuator: Actuator,
    /// What the occupancy reported to the controller rests on.
    sight: Sight,
    completions: Completions,
    /// The command's process.
    pid: i32,
    report: Report,
    start: Instant,
    /// Jobs finished so far.
    done: u64,
    /// The occupancy last reported to the controller.
    load: Load,
    /// What the bottleneck hint reads (`--bottleneck`), and when it last did.
    bottleneck: Option<Bottleneck>,
    sampled: Option<Instant>,
    /// What `tcc:psi=1` reads, and when it last did.
    pressure: Option<PressureMeter>,
    pressed: Option<Instant>,
    /// Where `--key`'s steady count goes; dropped after a failed write (said once).
    store: Option<WarmStore>,
    /// `--coordinate`'s turns, checked on every tick; completions shared on every poll.
    turns: Option<Turns>,
}

impl Tuner {
    /// Serves the command until it exits: polls it, ticks the controller, passes signals on.
    fn drive(
        &mut self,
        child: &mut Child,
        root: &PidFd,
        events: &mut Events,
        poll_every: Duration,
        tick: Duration,
    ) -> Result<ExitStatus> {
        let mut next_poll = self.start;
        let mut next_tick = self.start + tick;
        let mut interrupted: Option<Interrupted> = None;
        loop {
            if let Some(status) = child.try_wait()? {
                last_look(&mut interrupted);
                return Ok(status);
            }
            let mut timeout = next_poll
                .min(next_tick)
                .saturating_duration_since(Instant::now());
            if let Some(retry) = self.actuator.retry_in() {
                timeout = timeout.min(retry);
            }
            // Waiting on the pipe while tokens are owed wakes tact when make returns one, so
            // that tact can race make for it.
            let fd = self.actuator.reclaim_fd().unwrap_or(root.as_fd());
            match events.wait(fd, timeout)? {
                Event::Signal(sig) => {
                    self.actuator.release()?;
                    pass_on(&mut interrupted, root, sig);
                }
                Event::Ready | Event::Timeout => {}
            }
            let now = Instant::now();
            self.actuator.catch_up(now)?;
            if let Some(f) = self.actuator.frozen() {
                self.report.frozen(now - self.start, f)?;
            }
            if now >= next_poll {
                self.poll(now)?;
                next_poll = now + poll_every;
            }
            if now >= next_tick {
                self.tick(now)?;
                next_tick = now + tick;
            }
        }
    }

    /// Counts finished jobs and reads the occupancy: one `Complete` per finished job (with its
    /// lifetime as seen, when known, for latency-based policies), else a
    /// `Start` when more jobs run, or a `Load` when only the rest changed. With
    /// `--coordinate`, the other instances' completions since the last poll come first, and the
    /// finished jobs are added to the count they see.
    fn poll(&mut self, now: Instant) -> Result<()> {
        let at = now - self.start;
        let finished = self.completions.poll(self.pid, now)?;
        self.done += finished.len() as u64;
        self.actuator.completed(finished.len(), now);
        let running = self.completions.running(self.pid);
        let load = self
            .actuator
            .load(self.policy.target(), running, self.sight)?;
        if let Some(turns) = &mut self.turns {
            let changed = turns.peers(self.policy.as_mut(), at);
            turns.completed(finished.len() as u64);
            self.apply(at, changed, load)?;
        }
        for latency in &finished {
            let changed = self.policy.on_event(PolicyEvent::Complete {
                at,
                load,
                latency: *latency,
            });
            self.apply(at, changed, load)?;
        }
        if finished.is_empty() && load != self.load {
            let changed = if load.in_flight > self.load.in_flight {
                self.policy.on_start(at, load)
            } else {
                self.policy.on_load(at, load)
            };
            self.apply(at, changed, load)?;
        }
        self.load = load;
        Ok(())
    }

    /// Time passes for the controller, with the bottleneck's utilization and the pressure
    /// readings when they are due.
    fn tick(&mut self, now: Instant) -> Result<()> {
        let at = now - self.start;
        let changed = match self.utilization(now, at)? {
            Some(u) => self.policy.on_hint(at, u),
            None => self.policy.on_tick(at),
        };
        self.apply(at, changed, self.load)?;
        if let Some(p) = self.stalls(now) {
            let changed = self.policy.on_pressure(at, p);
            self.apply(at, changed, self.load)?;
        }
        if let Some(turns) = &mut self.turns {
            let changed = turns.check(self.policy.as_mut(), at);
            for event in turns.drain_events() {
                self.report.turn(&event, turns.key())?;
            }
            self.apply(at, changed, self.load)?;
        }
        Ok(())
    }

    /// A PSI reading at most every [`PSI_PERIOD`]. One that fails turns PSI off with a warning.
    fn stalls(&mut self, now: Instant) -> Option<tact_core::tune::Pressure> {
        let meter = self.pressure.as_ref()?;
        if self
            .pressed
            .is_some_and(|s| now.saturating_duration_since(s) < PSI_PERIOD)
        {
            return None;
        }
        self.pressed = Some(now);
        match meter.read() {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("tcc:psi=1: {e:#}; going on without PSI");
                eprintln!("tact: tune: tcc:psi=1: {e:#}; going on without PSI");
                self.pressure = None;
                None
            }
        }
    }

    /// A reading of the bottleneck at most every [`HINT_PERIOD`], logged. A reading that fails
    /// turns the hint off with a warning: the controller goes on by throughput alone.
    fn utilization(&mut self, now: Instant, at: Duration) -> Result<Option<f64>> {
        let Some(meter) = self.bottleneck.as_mut() else {
            return Ok(None);
        };
        if self
            .sampled
            .is_some_and(|s| now.saturating_duration_since(s) < HINT_PERIOD)
        {
            return Ok(None);
        }
        self.sampled = Some(now);
        match meter.sample() {
            Ok(Some(u)) => {
                self.report.hint(at, meter.spec(), u)?;
                Ok(Some(u))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                tracing::warn!("--bottleneck: {e}; going on without the hint");
                eprintln!("tact: tune: --bottleneck: {e}; going on without the hint");
                self.bottleneck = None;
                Ok(None)
            }
        }
    }

    /// Records a steady count under `--key` at once: a run cut short by a signal or a crash
    /// still leaves what it learned. A failed write is told and tuning goes on without it.
    fn record(&mut self, count: usize) {
        let Some(store) = &self.store else {
            return;
        };
        if let Err(e) = store.save(count) {
            tracing::warn!("{e:#}");
            eprintln!("tact: tune: {e:#}; going on without recording");
            self.store = None;
        }
    }

    /// Logs the controller's transitions, and puts a new target in force.
    fn apply(&mut self, at: Duration, changed: Option<usize>, load: Load) -> Result<()> {
        for tr in self.policy.drain_trace() {
            self.report.transition(&tr, self.done)?;
            if tr.to == Phase::Steady {
                self.record(tr.target_to);
            }
        }
        if let Some(target) = changed {
            self.actuator.apply(target, self.start + at)?;
            self.report.target(at, target, self.done, load)?;
        }
        Ok(())
    }
}
