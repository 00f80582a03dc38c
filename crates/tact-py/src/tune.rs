//! `tact._tact.Controller`: a concurrency controller (TCC or a baseline, tact-core's
//! [`Policy`]) for pools written in Python. The pure-Python `tact.AdaptiveExecutor`,
//! `tact.AdaptiveSemaphore` and `tact.dask.AdaptiveSubmitter` drive it; it can also be driven by
//! hand, with times on the caller's monotonic clock. `tact._tact.Bottleneck` is the meter those
//! pools read for TCC's bottleneck hint when given a source as a string (`docs/tune.md`, "The
//! bottleneck hint"). With TCC's `psi` on, the controller also reads pressure stall information
//! for those pools (`Controller.read_pressure`, `docs/tune.md` "PSI as a saturation hint"): the
//! machine's, or with `psi_cgroup` a cgroup v2 directory's, as `tact tune --psi-cgroup` does,
//! through the same function as `tact tune` and tact-lib's pools.
//!
//! Every call into the controller releases the GIL: TCC's decisions sort samples and run
//! sequential tests, and the pool's worker threads should go on meanwhile. So does a meter's
//! reading, which reads files under `/proc` or `/sys`.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOSError, PyRuntimeWarning, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList};
use serde::Serialize;
use serde_json::{Map, Value};
use tact_core::tune::{
    policy_from_spec, tcc_params_from_spec, Event, Load, Policy, Pressure, Status, Tcc, Transition,
    TuneParams,
};
use tact_lib::tune::warm::{self, Keyed, WarmStore};
use tact_lib::tune::{CoordinateMode, Turns};
use tact_linux::probe::bottleneck::{self as probe, BottleneckSpec, FORMS};
use tact_linux::probe::psi::{cgroup_v1_hint, PsiReader, PSI_PERIOD};

use crate::settings;

/// The policy behind a controller. TCC is kept concrete for its detailed `status()`; the
/// `Policy` trait has no status.
enum Engine {
    Tcc(Box<Tcc>),
    Other {
        spec: String,
        policy: Box<dyn Policy + Send>,
    },
}

impl Engine {
    fn policy(&mut self) -> &mut dyn Policy {
        match self {
            Engine::Tcc(t) => t.as_mut(),
            Engine::Other { policy, .. } => policy.as_mut(),
        }
    }

    fn target(&self) -> usize {
        match self {
            Engine::Tcc(t) => t.target(),
            Engine::Other { policy, .. } => policy.target(),
        }
    }
}

/// A concurrency controller: the pool reports what it did, the controller answers with the number
/// of tasks to run at once (its target). Times are float seconds on the caller's monotonic clock
/// (any origin, e.g. time.monotonic()).
///
/// policy: "tcc" (throughput-guided, the default), or a spec of tact-core's `policy_from_spec`:
///     "tcc:p=0.25,q=0.14,w=0.39", "static:8" (alias "fixed:8"), "aimd", "vegas", "gradient2",
///     "envoy", "hill", "vegas+", "vegas++:x1=RATE" (RATE: tasks/s at one worker, measured offline).
/// n_init: the target to start with (default: the online CPUs, at most n_max).
/// n_max: the largest target.
/// params: TCC parameters, with policy="tcc" only (tact_core::tune::TuneParams fields, e.g.
///     p=0.25, q=0.14, w=0.39, n_star=10, dwell="5s"); durations as seconds, strings ("500ms")
///     or timedeltas.
///
/// With psi=True (TCC), the controller reads the machine's /proc/pressure for
/// `read_pressure()`; a kernel without PSI turns it off with a RuntimeWarning.
/// psi_cgroup=DIR (a str or os.PathLike; with psi=True only): read the cgroup v2 directory DIR's
/// memory.pressure and io.pressure instead, as `tact tune --psi-cgroup DIR` does, so that only
/// the stalls of the processes in it count (those of the bottleneck, or the pool's own). Unlike
/// /proc/pressure, a directory named is no fallback: files that cannot be read now raise.
/// `status()["psi_source"]` says where PSI is read.
///
/// saturation_unseen=True: the caller cannot see whether its pool is saturated, so the loads it
/// reports are a guess (say, always "all busy"). TCC then also counts a gap between completions
/// longer than ten mean gaps as starvation (spec §6's gap rule, `Policy::saturation_unseen`): no
/// busy time and no sample across it. Baselines have no busy clock and ignore it.
///
/// coordinate="KEY": take turns with the other pools and `tact tune` runs that share the
/// bottleneck under KEY (`docs/tune.md`, "Several instances on one bottleneck"): TCC starts a
/// new cycle of measuring only when it has the turn, checked on every `on_tick` and `on_hint`.
/// coordinate_mode: "turns" (one instance at a time, through a lock file; the default) or
/// "epoch" (cycles start at multiples of `epoch` seconds, 60 by default, on the real-time
/// clock, without queueing for a turn; `docs/tune.md` compares the two). `turns()` tells the
/// turns taken.
///
/// key="NAME": warm start per workload key, shared with `tact tune --key` and tact-lib's pools
/// (`docs/tune.md`, "Pools in Rust"): a count recorded under NAME becomes TCC's warm start
/// (`warm`: the first cycle starts at its cut, without slow start; lowered to n_max), and each
/// entry into Steady records TCC's count under NAME, in key_dir (default: `$XDG_STATE_HOME/tact/
/// tune`, root's `/var/lib/tact/tune`, else `~/.local/state/tact/tune`). A record that cannot be
/// used, and the first write that fails, are a RuntimeWarning each: the controller starts cold,
/// or goes on unrecorded. A `warm` parameter of the caller's own wins over the record.
/// `status()` shows the `warm` start and the last `steady_count`.
///
/// Raises ValueError on an unknown policy or parameter, or parameters that break TCC's
/// friendliness conditions (the message names the condition and the nearest valid values), a
/// bad coordination key, a key that is not a plain file name, or a key with a policy other than
/// TCC (only TCC has a steady count), psi_cgroup without psi=True (TCC), or a psi_cgroup whose
/// files cannot be read (naming the file, and pointing a cgroup v1 directory at the unified
/// hierarchy); OSError when the lock directory cannot be used.
#[pyclass(frozen, module = "tact._tact")]
pub(crate) struct Controller {
    engine: Mutex<Engine>,
    /// `coordinate`'s turns; locked inside the engine's lock.
    turns: Mutex<Option<Turns>>,
    /// `key`'s record of TCC's steady counts; locked inside the engine's lock.
    keyed: Mutex<Option<Keyed>>,
    /// Where TCC's `psi` reads PSI, and when it last did; None when `psi` is off or PSI could
    /// not be read. A lock of its own: a reading must not hold up the engine.
    psi: Mutex<Option<Psi>>,
}

struct Psi {
    reader: PsiReader,
    /// Where it reads, for `status()`: "/proc/pressure" or "cgroup DIR".
    source: String,
    read: Option<Instant>,
}

#[pymethods]
impl Controller {
    #[new]
    #[pyo3(signature = (
        policy = "tcc", *, n_init = None, n_max = 64, saturation_unseen = false,
        coordinate = None, coordinate_mode = "turns", epoch = None, key = None, key_dir = None,
        psi_cgroup = None, **params
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        policy: &str,
        n_init: Option<i64>,
        n_max: i64,
        saturation_unseen: bool,
        coordinate: Option<&str>,
        coordinate_mode: &str,
        epoch: Option<f64>,
        key: Option<&str>,
        key_dir: Option<PathBuf>,
        psi_cgroup: Option<PathBuf>,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let n_max: usize = crate::convert::count("n_max", n_max)?;
        if n_max == 0 {
            return Err(PyValueError::new_err("n_max = 0: at least one worker"));
        }
        let n_init = match n_init {
            // Plain "tcc" validates it with its parameters; a spec ("tcc:q=0.2", "static:4")
            // would clamp it into range, so it is refused here as it is there.
            Some(n) => match crate::convert::count("n_init", n)? {
                n if n > n_max && policy.trim() != "tcc" => {
                    return Err(PyValueError::new_err(format!(
                        "n_init = {n}: must be at most n_max = {n_max}"
                    )))
                }
                n => n,
            },
            None => online_cpus().min(n_max),
        };
        let store = store(key, key_dir)?;
        let (mut engine, keyed, unusable) = build(policy, n_init, n_max, params, store)?;
        // A spec such as "tcc:psi=1" gives an opaque policy: its parameters say whether it
        // takes PSI, as for `tact tune`.
        let wants_psi = match &engine {
            Engine::Tcc(tcc) => tcc.params().psi,
            Engine::Other { spec, .. } => tcc_params_from_spec(spec, n_init, n_max)
                .ok()
                .flatten()
                .is_some_and(|p| p.psi),
        };
        // Before anything is told or made (a warning, coordination's lock file): a refused
        // psi_cgroup leaves no trace.
        let psi = psi_reader(py, wants_psi, psi_cgroup)?;
        if let Some(why) = unusable {
            warn(py, &format!("tact: {why}"))?;
        }
        if saturation_unseen {
            // Before the first event, as the trait asks.
            engine.policy().saturation_unseen();
        }
        let mut turns = coordinated(coordinate, coordinate_mode, epoch)?;
        if let Some(turns) = &mut turns {
            turns.start(engine.policy());
        }
        Ok(Controller {
            engine: Mutex::new(engine),
            turns: Mutex::new(turns),
            keyed: Mutex::new(keyed),
            psi: Mutex::new(psi),
        })
    }

    /// A task finished; in_flight and queued count the pool after it handled the completion
    /// (including tasks it started in its place). latency: the task's run time in seconds, for
    /// latency-based policies (TCC ignores it). Returns the new target if it changed.
    #[pyo3(signature = (now, in_flight, queued, latency = None))]
    fn on_complete(
        &self,
        py: Python<'_>,
        now: f64,
        in_flight: usize,
        queued: usize,
        latency: Option<f64>,
    ) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        let latency = latency.map(|l| seconds("latency", l)).transpose()?;
        let event = Event::Complete {
            at,
            load: Load::new(in_flight, queued),
            latency,
        };
        self.with_policy(py, |policy| {
            let peers = self.share(policy, at);
            policy.on_event(event).or(peers)
        })
    }

    /// Workers took tasks outside a completion (after a target increase, when input arrived).
    fn on_start(
        &self,
        py: Python<'_>,
        now: f64,
        in_flight: usize,
        queued: usize,
    ) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        let load = Load::new(in_flight, queued);
        self.with_policy(py, |policy| policy.on_start(at, load))
    }

    /// Only the queue changed (input arrived, or ran out).
    fn on_load(
        &self,
        py: Python<'_>,
        now: f64,
        in_flight: usize,
        queued: usize,
    ) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        let load = Load::new(in_flight, queued);
        self.with_policy(py, |policy| policy.on_load(at, load))
    }

    /// Time passed (call it every 100 ms or so, so that timeouts fire while completions are rare).
    fn on_tick(&self, py: Python<'_>, now: f64) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        self.with_policy(py, |policy| {
            let asked = policy.on_tick(at);
            self.turn(policy, at).or(asked)
        })
    }

    /// The bottleneck's mean utilization in [0, 1] since the previous report (TCC's bottleneck
    /// hint, used below its `util` target; baselines ignore it). Values outside [0, 1] are
    /// clamped by TCC.
    fn on_hint(&self, py: Python<'_>, now: f64, utilization: f64) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        finite_fraction("utilization", utilization)?;
        self.with_policy(py, |policy| {
            let asked = policy.on_hint(at, utilization);
            self.turn(policy, at).or(asked)
        })
    }

    /// Pressure stall readings for TCC's PSI rules (psi=True): fractions of the last ten seconds
    /// in [0, 1] during which some task waited for memory (memory_some), or every task waited for
    /// memory (memory_full) or I/O (io_full). Readings above psi_full (memory or io full) revoke
    /// the add step being measured; memory_some above psi_some ends a steady state early.
    /// Baselines, and TCC with psi off, ignore them. Returns the new target if it changed.
    #[pyo3(signature = (now, *, memory_some = 0.0, memory_full = 0.0, io_full = 0.0))]
    fn on_pressure(
        &self,
        py: Python<'_>,
        now: f64,
        memory_some: f64,
        memory_full: f64,
        io_full: f64,
    ) -> PyResult<Option<usize>> {
        let at = seconds("now", now)?;
        finite_fraction("memory_some", memory_some)?;
        finite_fraction("memory_full", memory_full)?;
        finite_fraction("io_full", io_full)?;
        let p = Pressure {
            memory_some,
            memory_full,
            io_full,
        };
        self.with_policy(py, |policy| policy.on_pressure(at, p))
    }

    /// The pressure stall readings (the avg10 figures of memory `some` and `full` and io `full`,
    /// as fractions; keyword arguments of `on_pressure`) of /proc/pressure, or psi_cgroup's
    /// memory.pressure and io.pressure, when the controller is TCC with psi=True and a reading
    /// is due (at most one a second); None otherwise. It reads files: pools call it outside
    /// their locks. A reading that fails turns PSI off with one RuntimeWarning.
    fn read_pressure<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // The lock is taken and released without the GIL: a thread holding it must never wait
        // for the GIL while another holds the GIL and waits for it.
        let reading = py.detach(|| {
            let mut psi = self.psi.lock().unwrap_or_else(PoisonError::into_inner);
            let meter = psi.as_mut()?;
            let now = Instant::now();
            if meter.read.is_some_and(|r| now - r < PSI_PERIOD) {
                return None;
            }
            meter.read = Some(now);
            let reading = meter.reader.tcc_pressure();
            if reading.is_err() {
                *psi = None;
            }
            Some(reading)
        });
        match reading {
            None => Ok(None),
            Some(Ok(p)) => pressure(py, &p).map(Some),
            Some(Err(e)) => psi_off(py, &e).map(|()| None),
        }
    }

    /// Whether `read_pressure` reads PSI: psi=True, and the files could be read so far.
    #[getter]
    fn psi(&self) -> bool {
        self.psi
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The number of tasks the pool should run now.
    #[getter]
    fn target(&self) -> usize {
        self.lock().target()
    }

    /// A snapshot of the controller (tact.ControllerStatus): for TCC its state, cycle, batch
    /// size, samples and batches being measured, throughput, the cycle's best, busy seconds and
    /// counters, the latest PSI reading, where `read_pressure` reads it ("psi_source":
    /// "/proc/pressure", "cgroup DIR", or None when it reads none) and the steps it decided, its
    /// warm start and its last steady count; for other policies only "policy" and "target" (and
    /// "psi_source" when a spec such as "tcc:psi=1" reads PSI).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // Without the GIL, as every lock here (see `read_pressure`).
        let source = py.detach(|| {
            let psi = self.psi.lock().unwrap_or_else(PoisonError::into_inner);
            psi.as_ref().map(|p| p.source.clone())
        });
        let d = PyDict::new(py);
        match &*self.lock() {
            Engine::Tcc(t) => {
                d.set_item("policy", "tcc")?;
                status(&d, &t.status())?;
                d.set_item("warm", t.params().warm)?;
                d.set_item("psi_source", source)?;
            }
            Engine::Other { spec, policy } => {
                d.set_item("policy", spec)?;
                d.set_item("target", policy.target())?;
                if source.is_some() {
                    d.set_item("psi_source", source)?;
                }
            }
        }
        Ok(d)
    }

    /// With coordinate: the key, the turns granted ("turns"), the seconds spent waiting for
    /// them ("waited") and holding them ("held"), whether it holds one now ("holding"), and the
    /// other instances' completions passed to the policy ("peer_completions"); None without. `now` on the clock of the other calls.
    fn turns<'py>(&self, py: Python<'py>, now: f64) -> PyResult<Option<Bound<'py, PyDict>>> {
        let at = seconds("now", now)?;
        // Without the GIL, as every lock here (see `read_pressure`).
        let stats = py.detach(|| {
            let guard = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().map(|t| (t.key().to_owned(), t.stats(at)))
        });
        let Some((key, s)) = stats else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("key", key)?;
        d.set_item("turns", s.turns)?;
        d.set_item("waited", s.waited.as_secs_f64())?;
        d.set_item("held", s.held.as_secs_f64())?;
        d.set_item("holding", s.holding)?;
        d.set_item("peer_completions", s.peer_completions)?;
        Ok(Some(d))
    }

    /// The state transitions since the last call, oldest first, as dicts (tact.Transition).
    fn drain_trace<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let trace = self.with_policy(py, |policy| policy.drain_trace())?;
        let list = PyList::empty(py);
        for t in &trace {
            list.append(transition(py, t)?)?;
        }
        Ok(list)
    }
}

impl Controller {
    /// Checks the turn after a tick (coordinate); the new target when a grant changed it.
    fn turn(&self, policy: &mut dyn Policy, at: Duration) -> Option<usize> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        turns.as_mut()?.check(policy, at)
    }

    /// Before a completion (coordinate): passes the other instances' completions since the
    /// last read on, and adds this one to the count they see.
    fn share(&self, policy: &mut dyn Policy, at: Duration) -> Option<usize> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        let turns = turns.as_mut()?;
        let peers = turns.peers(policy, at);
        turns.completed(1);
        peers
    }

    fn lock(&self) -> MutexGuard<'_, Engine> {
        // A panic inside a policy would be a bug there; its state is still the best we have.
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call` on the policy without the GIL (see the module's notes): every call into the
    /// policy goes through here. With a key, an entry into Steady is recorded then; a write that
    /// fails is a RuntimeWarning, once (an error when warnings are turned into errors).
    fn with_policy<R: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&mut dyn Policy) -> R + Send,
    ) -> PyResult<R> {
        let (answer, failed) = py.detach(|| {
            let mut engine = self.lock();
            let answer = call(engine.policy());
            let failed = match &*engine {
                Engine::Tcc(tcc) => {
                    let mut keyed = self.keyed.lock().unwrap_or_else(PoisonError::into_inner);
                    keyed.as_mut().and_then(|k| k.watch(tcc))
                }
                Engine::Other { .. } => None,
            };
            (answer, failed)
        });
        if let Some(e) = failed {
            warn(py, &format!("tact: {e}; going on without recording"))?;
        }
        Ok(answer)
    }
}

/// Where `read_pressure` reads, as `tact tune`'s `pressure_meter` chooses: psi_cgroup's
/// directory, else the machine's /proc/pressure. PSI the kernel does not offer turns the
/// feature off with one warning: the pool runs by throughput alone. A directory the caller
/// named is no such fallback: one given without psi, or whose files cannot be read, raises.
fn psi_reader(py: Python<'_>, wanted: bool, cgroup: Option<PathBuf>) -> PyResult<Option<Psi>> {
    match (wanted, cgroup) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(PyValueError::new_err("psi_cgroup needs psi=True (TCC)")),
        (true, Some(dir)) => {
            let reader = PsiReader::cgroup(&dir);
            let source = format!("cgroup {}", dir.display());
            // One reading now, as for /proc/pressure, so that the error comes at construction;
            // the statfs too reads outside the GIL.
            py.detach(|| match reader.tcc_pressure() {
                Ok(_) => Ok(Some(Psi {
                    reader,
                    source,
                    read: None,
                })),
                Err(e) => Err(unreadable_cgroup(&dir, &e)),
            })
            .map_err(PyValueError::new_err)
        }
        (true, None) => {
            let reader = PsiReader::new();
            match py.detach(|| reader.tcc_pressure()) {
                Ok(_) => Ok(Some(Psi {
                    reader,
                    source: "/proc/pressure".to_string(),
                    read: None,
                })),
                Err(e) => psi_off(py, &e).map(|()| None),
            }
        }
    }
}

/// `tact tune --psi-cgroup`'s error, with `psi_cgroup` for the option: the file that could not be
/// read, and for a directory in a cgroup v1 hierarchy (which has no pressure files) where the
/// same processes' pressure is.
fn unreadable_cgroup(dir: &Path, e: &tact_linux::Error) -> String {
    let hint = cgroup_v1_hint(dir).map_or(String::new(), |h| format!("; {h}"));
    format!("psi_cgroup {}: reading PSI: {e}{hint}", dir.display())
}

/// Says that PSI is off for this controller.
fn psi_off(py: Python<'_>, e: &tact_linux::Error) -> PyResult<()> {
    warn(
        py,
        &format!(
            "tact: psi=True: cannot read PSI ({e}); PSI is off, TCC judges by throughput alone"
        ),
    )
}

/// A RuntimeWarning (an error when warnings are turned into errors).
fn warn(py: Python<'_>, msg: &str) -> PyResult<()> {
    let msg = CString::new(msg).map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &msg, 1)
}

fn pressure<'py>(py: Python<'py>, p: &Pressure) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("memory_some", p.memory_some)?;
    d.set_item("memory_full", p.memory_full)?;
    d.set_item("io_full", p.io_full)?;
    Ok(d)
}

/// `key`'s store in `key_dir` (default: `tact tune --key`'s directory).
fn store(key: Option<&str>, key_dir: Option<PathBuf>) -> PyResult<Option<WarmStore>> {
    let Some(key) = key else {
        if key_dir.is_some() {
            return Err(PyValueError::new_err("key_dir goes with key=NAME"));
        }
        return Ok(None);
    };
    let dir = key_dir.unwrap_or_else(warm::default_dir);
    WarmStore::for_this_process(&dir, key)
        .map(Some)
        .map_err(|e| PyValueError::new_err(format!("key: {e}")))
}

/// The one place a policy name becomes a controller. With a key's store, TCC warm-starts from
/// its record; also returns the record's keeper, and why a record could not be used.
fn build(
    policy: &str,
    n_init: usize,
    n_max: usize,
    params: Option<&Bound<'_, PyDict>>,
    store: Option<WarmStore>,
) -> PyResult<(Engine, Option<Keyed>, Option<String>)> {
    let value_error = |e: &dyn std::fmt::Display| PyValueError::new_err(e.to_string());
    let spec = policy.trim();
    let tcc_params = if spec == "tcc" {
        let p = TuneParams {
            n_init,
            n_max,
            ..TuneParams::default()
        };
        Some(match params {
            Some(params) => with_overrides(p, params)?,
            None => p,
        })
    } else if params.is_some_and(|p| !p.is_empty()) {
        return Err(PyValueError::new_err(format!(
            "keyword parameters are TCC's: use policy=\"tcc\" with them, not {spec:?}"
        )));
    } else if let Some(store) = &store {
        // With a key, a spec such as "tcc:q=0.05" is built as TCC kept by type, whose steady
        // count the controller sees; any other policy has none.
        let p = tcc_params_from_spec(spec, n_init, n_max).map_err(|e| value_error(&e))?;
        Some(p.ok_or_else(|| {
            PyValueError::new_err(format!(
                "key {:?}: warm start is TCC's; policy {spec:?} has no steady count to record",
                store.key()
            ))
        })?)
    } else {
        None
    };
    let Some(mut p) = tcc_params else {
        let policy = policy_from_spec(spec, n_init, n_max).map_err(|e| value_error(&e))?;
        let engine = Engine::Other {
            spec: spec.to_string(),
            policy,
        };
        return Ok((engine, None, None));
    };
    let (keyed, unusable) = match store {
        Some(store) => {
            let (keyed, unusable) = Keyed::start(store, &mut p, n_max);
            (Some(keyed), unusable)
        }
        None => (None, None),
    };
    let tcc = Tcc::new(p).map_err(|e| value_error(&e))?;
    Ok((Engine::Tcc(Box::new(tcc)), keyed, unusable))
}

/// `params` with the fields named in `kwargs` replaced. TuneParams is (de)serializable, so the
/// fields and their types come from serde: a new field needs no change here.
fn with_overrides(params: TuneParams, kwargs: &Bound<'_, PyDict>) -> PyResult<TuneParams> {
    let Value::Object(mut fields) = to_json(&params)? else {
        unreachable!("TuneParams serializes as a struct");
    };
    for (key, value) in kwargs.iter() {
        let key: String = key.extract()?;
        let Some(default) = fields.get(&key) else {
            return Err(PyValueError::new_err(format!(
                "unknown TCC parameter {key:?}: valid ones are {}",
                names(&fields)
            )));
        };
        let new = field_value(&key, default, &value)?;
        fields.insert(key, new);
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| PyValueError::new_err(format!("invalid TCC parameters: {e}")))
}

/// A Python value for a field whose default is `default`, converted to that field's JSON type.
fn field_value(key: &str, default: &Value, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let wrong = |what: &str| PyTypeError::new_err(format!("{key} must be {what}"));
    match default {
        Value::Bool(_) => {
            let b = value.cast::<PyBool>().map_err(|_| wrong("a bool"))?;
            Ok(Value::Bool(b.is_true()))
        }
        // Durations serialize as {secs, nanos}.
        Value::Object(_) => to_json(&settings::duration(key, value)?),
        Value::Number(n) if n.is_f64() => {
            let x: f64 = value.extract().map_err(|_| wrong("a number"))?;
            serde_json::Number::from_f64(x)
                .map(Value::Number)
                .ok_or_else(|| PyValueError::new_err(format!("{key} = {x}: must be finite")))
        }
        Value::Number(_) => {
            if value.is_instance_of::<PyBool>() {
                return Err(wrong("an integer >= 0"));
            }
            let n: u64 = value.extract().map_err(|_| wrong("an integer >= 0"))?;
            Ok(Value::from(n))
        }
        // An optional count (`warm`, none by default): None or an integer.
        Value::Null if value.is_none() => Ok(Value::Null),
        Value::Null => field_value(key, &Value::from(0u64), value),
        _ => Err(wrong("a value of its type")),
    }
}

fn to_json(value: &impl Serialize) -> PyResult<Value> {
    serde_json::to_value(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn names(fields: &Map<String, Value>) -> String {
    fields
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The turns `coordinate`, `coordinate_mode` and `epoch` ask for.
fn coordinated(key: Option<&str>, mode: &str, epoch: Option<f64>) -> PyResult<Option<Turns>> {
    let Some(key) = key else {
        if epoch.is_some() || mode != "turns" {
            return Err(PyValueError::new_err(
                "coordinate_mode and epoch go with coordinate=KEY",
            ));
        }
        return Ok(None);
    };
    let mode = match (mode, epoch) {
        ("turns", None) => CoordinateMode::Turns,
        ("turns", Some(_)) => {
            return Err(PyValueError::new_err(
                "epoch is the epoch mode's period: add coordinate_mode=\"epoch\"",
            ))
        }
        ("epoch", e) => CoordinateMode::Epoch(match e {
            Some(e) => seconds("epoch", e)?,
            None => tact_lib::tune::DEFAULT_EPOCH,
        }),
        (other, _) => {
            return Err(PyValueError::new_err(format!(
                "coordinate_mode {other:?}: \"turns\" or \"epoch\""
            )))
        }
    };
    Turns::new(key, mode).map(Some).map_err(|e| match e {
        tact_lib::tune::CoordinateError::Dir { .. }
        | tact_lib::tune::CoordinateError::Open { .. } => PyOSError::new_err(e.to_string()),
        e => PyValueError::new_err(e.to_string()),
    })
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A time or a latency in seconds, finite and >= 0.
fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!(
            "{name} = {value}: must be a finite number of seconds >= 0"
        ))
    })
}

/// A reading that must be a finite number; TCC clamps it to [0, 1].
fn finite_fraction(name: &str, value: f64) -> PyResult<()> {
    if value.is_finite() {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "{name} = {value}: must be a finite number (a fraction in [0, 1])"
    )))
}

/// The serde name of a unit enum variant (Phase, Reason), as the JSON traces spell it.
fn name(value: &impl Serialize) -> PyResult<String> {
    match to_json(value)? {
        Value::String(s) => Ok(s),
        other => Err(PyValueError::new_err(format!("not a name: {other}"))),
    }
}

fn status(d: &Bound<'_, PyDict>, s: &Status) -> PyResult<()> {
    d.set_item("phase", name(&s.phase)?)?;
    d.set_item("target", s.target)?;
    d.set_item("cycle", s.cycle)?;
    d.set_item("batch_size", s.batch_size)?;
    d.set_item("samples", s.samples)?;
    d.set_item("batches", s.batches)?;
    d.set_item("throughput", s.throughput)?;
    d.set_item("best", s.best)?;
    d.set_item("busy", s.busy.as_secs_f64())?;
    d.set_item("saturated", s.saturated)?;
    d.set_item("settling", s.settling)?;
    d.set_item("forced_decisions", s.forced_decisions)?;
    d.set_item("clock_regressions", s.clock_regressions)?;
    d.set_item("trace_dropped", s.trace_dropped)?;
    d.set_item("steady_count", s.steady_count)?;
    d.set_item("utilization", s.utilization)?;
    d.set_item("hinted", s.hinted)?;
    let p = s
        .pressure
        .as_ref()
        .map(|p| pressure(d.py(), p))
        .transpose()?;
    d.set_item("pressure", p)?;
    d.set_item("psi", s.psi)?;
    Ok(())
}

fn transition<'py>(py: Python<'py>, t: &Transition) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("at", t.at.as_secs_f64())?;
    d.set_item("busy", t.busy.as_secs_f64())?;
    d.set_item("cycle", t.cycle)?;
    d.set_item("from", name(&t.from)?)?;
    d.set_item("to", name(&t.to)?)?;
    d.set_item("reason", name(&t.reason)?)?;
    d.set_item("target_from", t.target_from)?;
    d.set_item("target_to", t.target_to)?;
    d.set_item("throughput", t.throughput)?;
    d.set_item("batches", t.batches)?;
    d.set_item("forced", t.forced)?;
    d.set_item("hinted", t.hinted)?;
    d.set_item("psi", t.psi)?;
    Ok(d)
}

/// A meter of the resource a pool saturates, for TCC's bottleneck hint; `spec` in `tact tune
/// --bottleneck`'s forms: "cpu:1", "cpu:0,2-3", "psi:io", "disk:vda", "disk:vda@iops=300",
/// "net:eth0@1gbit", "net:eth0@1gbit,rx".
///
/// Raises ValueError on a malformed spec (naming the forms) and on a CPU, PSI file, device or
/// interface this machine lacks (naming the ones it has), so a wrong source fails before a pool
/// starts.
#[pyclass(frozen, module = "tact._tact")]
pub(crate) struct Bottleneck {
    spec: BottleneckSpec,
    meter: Mutex<probe::Bottleneck>,
}

#[pymethods]
impl Bottleneck {
    #[new]
    fn new(py: Python<'_>, spec: &str) -> PyResult<Self> {
        let spec: BottleneckSpec = spec.trim().parse().map_err(|e: probe::BadSpec| {
            let e = e.to_string();
            // Some messages say only what is wrong with one form: add the list.
            let msg = if e.contains(FORMS) {
                format!("bottleneck: {e}")
            } else {
                format!("bottleneck {spec:?}: {e}; the forms are {FORMS}")
            };
            PyValueError::new_err(msg)
        })?;
        let meter = py
            .detach(|| probe::Bottleneck::open(&spec))
            .map_err(|e| PyValueError::new_err(format!("bottleneck {spec}: {e}")))?;
        Ok(Bottleneck {
            spec,
            meter: Mutex::new(meter),
        })
    }

    /// The utilization since the previous reading (the first covers the time since the meter
    /// was made); None when nothing can be said yet. Time fractions (cpu, psi, disk busy) are
    /// at most 1; rates against a cap given (IOPS, a link's rate) exceed 1 when the cap is below
    /// what the device or link does. Raises OSError when the counters cannot be read.
    fn sample(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        py.detach(|| {
            let mut meter = self.meter.lock().unwrap_or_else(PoisonError::into_inner);
            meter.sample()
        })
        .map_err(|e| PyOSError::new_err(format!("bottleneck {}: {e}", self.spec)))
    }

    /// The spec, as `tact tune` writes it.
    #[getter]
    fn spec(&self) -> String {
        self.spec.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Bottleneck({:?})", self.spec.to_string())
    }
}
