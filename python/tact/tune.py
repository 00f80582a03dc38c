"""Pools whose concurrency a controller tunes: a ``concurrent.futures`` executor and an asyncio
semaphore.

Both hold tasks back in a queue of their own and let only as many run at once as the controller's
target (``tact._tact.Controller``: TCC, the throughput-guided controller, by default). They report
every start, completion (with its run time) and queue change to it, and tick it every 100 ms so
that its timeouts fire while completions are rare. A task that raised is not a completion: failed
work is not throughput (a service that fails fast when overloaded would otherwise look faster the
more it is overloaded). It counts in ``status()["failed"]``, and the controller hears of it only
as the start of the task that takes its place, or as a change of the queue, as tact-lib's pool
reports a task that panicked. A new target applies at task boundaries: a
larger one starts queued tasks at once, a smaller one lets the surplus finish and starts nothing in
their place. No task is ever cancelled or dropped by the pool.

Given a ``bottleneck`` source, each also reports the utilization of the resource the pool saturates
to TCC (its bottleneck hint, ``docs/tune.md``): below TCC's ``util`` target (0.9) an add step that
gains less than q is still taken, so the pool climbs to the resource's ~90% rather than stopping
at 75-85% as the throughput rule alone does.

With ``psi=True`` (a TCC parameter), each also reads the machine's pressure stall information
(``/proc/pressure``) at most once a second and reports it to TCC (``docs/tune.md``, "PSI as a
saturation hint"): memory or I/O ``full`` stalls above ``psi_full`` (5%) revoke an add step the
throughput would take, memory ``some`` stalls above ``psi_some`` (10%) end a steady state early.
A kernel without PSI turns it off with a RuntimeWarning. With ``psi_cgroup=DIR`` as well, the
readings are those of a cgroup v2 directory (its ``memory.pressure`` and ``io.pressure``, as
``tact tune --psi-cgroup DIR`` reads them), so that only the stalls of the processes in it count.
"""

import asyncio
import functools
import math
import threading
import time
import warnings
import weakref
from collections import deque
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, List, Literal, Optional, Tuple, TypedDict, Union

from ._tact import Bottleneck, Controller

#: Seconds between ticks of the controller.
TICK = 0.1

#: Shortest period between readings of a bottleneck source (tact-lib's ``HINT_PERIOD``): the
#: kernel's CPU counters move in 10 ms ticks, so shorter intervals only read noise.
HINT_PERIOD = 0.1

#: A bottleneck source: ``tact tune --bottleneck``'s forms (``"cpu:1"``, ``"psi:io"``,
#: ``"disk:vda"``, ``"disk:vda@iops=300"``, ``"net:eth0@1gbit,rx"``), or a callable returning the
#: resource's mean utilization in [0, 1] since its previous call (None: no reading this time).
BottleneckSource = Union[str, Callable[[], Optional[float]]]

_Phase = Literal["steady", "base", "add", "max", "remove"]


class Pressure(TypedDict):
    """PSI readings as fractions in [0, 1] of the last ten seconds (avg10 / 100), as
    ``Controller.read_pressure()`` gives them and ``Controller.on_pressure()`` takes them."""

    memory_some: float
    memory_full: float
    io_full: float


class ControllerStatus(TypedDict, total=False):
    """``Controller.status()``. Every policy gives ``policy`` (its spec) and ``target``; TCC
    (``policy == "tcc"``) gives the rest."""

    policy: str
    target: int
    phase: _Phase
    #: Exploration cycle, 0 the first.
    cycle: int
    #: Batch size, raw samples and complete batches of the configuration being measured.
    batch_size: int
    samples: int
    batches: int
    #: Its trimmed throughput (completions per busy second), once it has a batch.
    throughput: Optional[float]
    #: The cycle's best configuration so far: (target, throughput).
    best: Optional[Tuple[int, float]]
    #: Seconds the pool was saturated (all target workers busy, or work queued).
    busy: float
    saturated: bool
    settling: bool
    forced_decisions: int
    clock_regressions: int
    trace_dropped: int
    #: The count of the last entry into Steady (what ``key`` records); None before the first.
    steady_count: Optional[int]
    #: The count TCC warm-started from (``key``'s record, or a ``warm`` given); None: cold.
    warm: Optional[int]
    #: The bottleneck's mean utilization over the configuration being measured, when a
    #: ``bottleneck`` source covered at least half of its busy time.
    utilization: Optional[float]
    #: Steps the bottleneck hint decided (add steps it accepted, removals it undid).
    hinted: int
    #: The latest PSI reading (kept whether or not ``psi`` lets it act); None before any.
    pressure: Optional[Pressure]
    #: Where ``Controller.read_pressure()`` reads PSI: ``"/proc/pressure"`` or ``"cgroup DIR"``
    #: (``psi_cgroup``); None when it reads none (``psi`` off, or turned off by a reading that
    #: failed). Other policies give it only when a spec such as ``"tcc:psi=1"`` reads PSI.
    psi_source: Optional[str]
    #: Steps PSI decided (add steps it revoked, steady states it ended), with ``psi=True``.
    psi: int
    #: The pools' own counts (not ``Controller.status()``'s): tasks that returned, which the
    #: controller counts as completions, and tasks that raised, which it does not.
    completed: int
    failed: int


#: A state transition of TCC (``Controller.drain_trace()``); "from" is a keyword, hence this form.
Transition = TypedDict(
    "Transition",
    {
        "at": float,
        "busy": float,
        "cycle": int,
        "from": _Phase,
        "to": _Phase,
        "reason": str,
        "target_from": int,
        "target_to": int,
        "throughput": Optional[float],
        "batches": int,
        "forced": bool,
        "hinted": bool,
        "psi": bool,
    },
)


class _Hint:
    """A bottleneck source, read at most every ``HINT_PERIOD``. A string opens its meter at once,
    so a malformed one or a device the machine lacks raises ValueError before any worker
    starts."""

    def __init__(self, source: BottleneckSource) -> None:
        if isinstance(source, str):
            self._read: Callable[[], Optional[float]] = Bottleneck(source).sample
        elif callable(source):
            self._read = source
        else:
            raise TypeError(
                "bottleneck must be a string such as 'cpu:1' or 'disk:vda', or a callable "
                f"returning the utilization, not {type(source).__name__}"
            )
        self._source = source
        self._last: Optional[float] = None
        self._failed = False

    def read(self) -> Optional[float]:
        """The utilization when a reading is due and the source gives one. Runs the source, so
        hosts call it outside their locks. A source that raises or returns something other than
        a finite number gives no reading (TCC then turns the hint off), with one warning."""
        now = time.monotonic()
        if self._last is not None and now - self._last < HINT_PERIOD:
            return None
        self._last = now
        try:
            u = self._read()
            if u is None:
                return None
            u = float(u)
            if not math.isfinite(u):
                raise ValueError(f"{u} is not a utilization")
        except Exception as e:  # a failing source must not stop the pool's ticks
            if not self._failed:
                self._failed = True
                warnings.warn(
                    f"tact: bottleneck {self._source!r} failed ({e!r}); the hint is off while "
                    "it gives no readings",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return None
        return u


class _Tuning:
    """A controller with the pool's clock (seconds since the pool was made) and the record of its
    targets and transitions. Not thread-safe: its owner serializes the calls."""

    def __init__(
        self,
        policy: str,
        n_max: int,
        params: Dict[str, Any],
        bottleneck: Optional[BottleneckSource] = None,
        bound: str = "max_workers",
    ) -> None:
        if isinstance(n_max, int) and not isinstance(n_max, bool) and n_max < 1:
            raise ValueError(f"{bound} = {n_max}: must be at least 1")
        if "n_max" in params:
            raise ValueError(f"n_max: the largest count is {bound} here")
        try:
            self.controller = Controller(policy, n_max=n_max, **params)
        except ValueError as e:
            # The controller names its limit n_max; the caller gave it as `bound`.
            raise ValueError(str(e).replace("n_max", bound)) from None
        self.hint = _Hint(bottleneck) if bottleneck is not None else None
        self.origin = time.monotonic()
        self.target: int = self.controller.target
        self.targets: List[Tuple[float, int]] = [(0.0, self.target)]
        self._trace: List[Transition] = []
        self.completed = 0
        self.failed = 0

    def now(self) -> float:
        return time.monotonic() - self.origin

    @property
    def reads(self) -> bool:
        """Whether a tick may read anything: a bottleneck source, or PSI (``psi=True``)."""
        return self.hint is not None or self.controller.psi

    def read(self) -> "_Readings":
        """The bottleneck's utilization and the PSI readings, each when one is due (see
        ``_Hint.read`` and ``Controller.read_pressure``); call it outside the owner's lock."""
        utilization = self.hint.read() if self.hint is not None else None
        return utilization, self.controller.read_pressure()

    def tick(self, now: float, readings: "_Readings") -> Optional[int]:
        """Time passed, with the bottleneck's utilization and the PSI readings when there are
        some."""
        utilization, pressure = readings
        if utilization is None:
            new = self.controller.on_tick(now)
        else:
            new = self.controller.on_hint(now, utilization)
        if pressure is not None:
            answer = self.controller.on_pressure(now, **pressure)
            new = new if answer is None else answer
        return new

    def changed(self, now: float, new: Optional[int]) -> bool:
        """Records a target the controller answered with; whether there was one."""
        if new is None:
            return False
        self.target = new
        self.targets.append((now, new))
        return True

    def ended(
        self,
        now: float,
        in_flight: int,
        queued: int,
        latency: Optional[float],
        failed: bool,
        took: bool,
    ) -> Optional[int]:
        """A task ended, with ``in_flight`` and ``queued`` as they are after it (and after
        ``took``: whether another task took its place). One that raised is no completion: the
        controller sees the start that replaced it, or the load, as tact-lib's pool reports a
        task that panicked."""
        if not failed:
            self.completed += 1
            return self.controller.on_complete(now, in_flight, queued, latency)
        self.failed += 1
        if took:
            return self.controller.on_start(now, in_flight, queued)
        return self.controller.on_load(now, in_flight, queued)

    def status(self) -> ControllerStatus:
        """The controller's status, with the pool's counts of completed and failed tasks."""
        status: ControllerStatus = self.controller.status()
        status["completed"] = self.completed
        status["failed"] = self.failed
        return status

    def trace(self) -> List[Transition]:
        self._trace.extend(self.controller.drain_trace())
        return list(self._trace)

    def turns(self) -> Optional[Dict[str, Any]]:
        """With ``coordinate``: the controller's turns now (``tact.Controller.turns``)."""
        return self.controller.turns(self.now())


#: What a tick read outside the owner's lock: (utilization, PSI readings).
_Readings = Tuple[Optional[float], Optional[Pressure]]


class _Task:
    __slots__ = ("future", "fn", "args", "kwargs", "started")

    def __init__(self, future: Future, fn: Callable, args: tuple, kwargs: dict) -> None:
        self.future = future
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.started = 0.0


class AdaptiveExecutor(Executor):
    """A ``concurrent.futures.Executor`` that runs at most the controller's target of tasks at
    once, on a thread or process pool of ``max_workers``.

    policy: ``"tcc"`` (default) or a spec such as ``"static:8"``, ``"aimd"``, ``"vegas"``,
        ``"gradient2"``, ``"envoy"``, ``"hill"``, ``"vegas+"``, ``"vegas++:x1=RATE"`` (see
        ``tact.Controller``).
    kind: ``"thread"`` or ``"process"`` (then functions and arguments must pickle).
    bottleneck: a source of the utilization of the resource the tasks saturate, for TCC's
        bottleneck hint: a string in ``tact tune --bottleneck``'s forms (``"cpu:1"``,
        ``"psi:io"``, ``"disk:vda"``, ``"disk:vda@iops=300"``, ``"net:eth0@1gbit,rx"``), or a
        callable returning the mean utilization in [0, 1] since its previous call (or None). The
        executor's ticker thread calls it at most every 100 ms; ``util`` (a TCC parameter, 0.9)
        is the target. A malformed string, or a CPU or device this machine lacks, raises
        ValueError here. ``status()`` shows the mean ``utilization`` and the ``hinted`` steps.
    coordinate: a key naming the bottleneck this executor shares with other pools or ``tact
        tune`` runs (e.g. ``"db-5432"``): they take turns measuring, so that none mistakes the
        others' steps for its own (``docs/tune.md``, "Several instances on one bottleneck").
        ``coordinate_mode="turns"`` (default; one at a time) or ``"epoch"`` (with ``epoch``
        seconds, 60 by default: cycles start together instead of queueing for turns;
        ``docs/tune.md`` compares the two). ``turns()`` counts them.
    key: a name for the workload (e.g. ``"thumbnails"``), shared with ``tact tune --key`` and
        tact-lib's pools: a count TCC settled on under this key before becomes its warm start
        (its first cycle starts at that count's cut, without slow start; at most
        ``max_workers``), and each entry into Steady records the count, in ``key_dir`` (default
        ``$XDG_STATE_HOME/tact/tune``, else ``~/.local/state/tact/tune``, for root
        ``/var/lib/tact/tune``). TCC only (ValueError
        with another policy). A record that cannot be used, or written, is a RuntimeWarning:
        the executor starts cold, or goes on unrecorded. ``status()`` shows ``warm`` and
        ``steady_count``.
    params: ``n_init`` (the first target; default the online CPUs) and TCC's parameters;
        ``psi=True`` has the ticker thread read ``/proc/pressure`` at most once a second, outside
        the executor's lock, for TCC's PSI rules (``status()`` shows the latest ``pressure``
        and the ``psi`` steps); ``psi_cgroup`` (a path: str or ``os.PathLike``), with
        ``psi=True`` only, has it read that cgroup v2 directory's ``memory.pressure`` and
        ``io.pressure`` instead (``tact tune --psi-cgroup``), e.g. the cgroup of a database the
        tasks load: then only its processes' stalls count. A ``psi_cgroup`` given without
        ``psi=True``, or whose files cannot be read, raises ValueError here (naming the file;
        for a cgroup v1 directory, which has none, pointing at the unified hierarchy).
        ``status()["psi_source"]`` says where PSI is read.

    ``targets`` lists the (seconds since creation, target) changes, ``trace()`` the controller's
    state transitions. A task's reported latency is the time from its dispatch to the pool until its
    result came back. A task that raised is no completion (failed work is not throughput):
    ``status()`` counts it as ``failed``. After the target shrinks, tasks already running finish (up
    to the old target run meanwhile); the pool starts no new task until fewer than the new target
    run.
    """

    def __init__(
        self,
        max_workers: int = 64,
        *,
        policy: str = "tcc",
        kind: str = "thread",
        bottleneck: Optional[BottleneckSource] = None,
        **params: Any,
    ) -> None:
        if kind not in ("thread", "process"):
            raise ValueError(f"kind must be 'thread' or 'process', not {kind!r}")
        # The controller checks its parameters, and the bottleneck opens, before any worker
        # exists.
        self._tuning = _Tuning(policy, max_workers, params, bottleneck)
        self._pool: Executor = (
            ThreadPoolExecutor(max_workers, thread_name_prefix="tact-executor")
            if kind == "thread"
            else ProcessPoolExecutor(max_workers)
        )
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queue: Deque[_Task] = deque()
        self._in_flight = 0
        self._shutdown = False
        self._closed = False
        self._stop = threading.Event()
        # The ticker holds the executor weakly: an executor dropped without shutdown() stops it.
        threading.Thread(
            target=_tick_executor,
            args=(weakref.ref(self), self._stop),
            name="tact-executor-tick",
            daemon=True,
        ).start()

    @property
    def target(self) -> int:
        """The number of tasks the controller lets run now."""
        return self._tuning.target

    @property
    def targets(self) -> List[Tuple[float, int]]:
        """Target changes so far: (seconds since the executor was made, target), the first at 0."""
        with self._lock:
            return list(self._tuning.targets)

    @property
    def in_flight(self) -> int:
        """Tasks dispatched to the pool and not finished."""
        return self._in_flight

    @property
    def queued(self) -> int:
        """Tasks waiting for the target to let them run."""
        return len(self._queue)

    def trace(self) -> List[Transition]:
        """The controller's state transitions so far, oldest first."""
        with self._lock:
            return self._tuning.trace()

    def status(self) -> ControllerStatus:
        """The controller's status, with ``completed`` (tasks that returned) and ``failed``
        (tasks that raised, which the controller does not count as completions)."""
        with self._lock:
            return self._tuning.status()

    def turns(self) -> Optional[Dict[str, Any]]:
        """With ``coordinate``: the turns taken, the seconds waited for them and held (see
        ``tact.Controller.turns``); None without."""
        return self._tuning.turns()

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.append(_Task(future, fn, args, kwargs))
            now = self._tuning.now()
            picked = self._pick()
            if picked:
                new = self._tuning.controller.on_start(now, self._in_flight, len(self._queue))
            else:
                new = self._tuning.controller.on_load(now, self._in_flight, len(self._queue))
            picked += self._grow(now, new)
        self._dispatch(picked)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Accepts no more tasks. cancel_futures cancels the queued ones (those running finish);
        otherwise every submitted task still runs. wait: return once all have finished."""
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft().future.cancel()
            idle = self._idle_now()
        if wait:
            with self._idle:
                self._idle.wait_for(self._idle_now)
            self._close(wait=True)
        elif idle:
            self._close(wait=False)
        # Otherwise the last task to finish closes the pool (see _done).

    # Everything below runs under self._lock unless it says otherwise.

    def _idle_now(self) -> bool:
        return not self._in_flight and not self._queue

    def _pick(self) -> List[_Task]:
        """Takes queued tasks while fewer than the target are in flight (skipping cancelled ones)."""
        picked = []
        while self._queue and self._in_flight < self._tuning.target:
            task = self._queue.popleft()
            if task.future.set_running_or_notify_cancel():
                self._in_flight += 1
                picked.append(task)
        return picked

    def _grow(self, now: float, new: Optional[int]) -> List[_Task]:
        """Applies a new target: starts what it allows and tells the controller, which may answer
        with another target."""
        picked: List[_Task] = []
        while self._tuning.changed(now, new):
            more = self._pick()
            if not more:
                break
            picked += more
            new = self._tuning.controller.on_start(now, self._in_flight, len(self._queue))
        return picked

    def _tick(self) -> None:
        # Runs on the ticker thread, outside the lock: the source may read files or take long,
        # and completions need the lock meanwhile.
        readings = self._tuning.read()
        with self._lock:
            now = self._tuning.now()
            picked = self._grow(now, self._tuning.tick(now, readings))
        self._dispatch(picked)

    # Without the lock: the pool may run a done callback at once, in this thread.

    def _dispatch(self, tasks: List[_Task]) -> None:
        for task in tasks:
            task.started = time.monotonic()
            try:
                inner = self._pool.submit(task.fn, *task.args, **task.kwargs)
            except BaseException as e:  # a broken process pool: the task fails, others go on
                failed: Future = Future()
                failed.set_exception(e)
                self._done(task, failed)
            else:
                inner.add_done_callback(functools.partial(self._done, task))

    def _done(self, task: _Task, inner: Future) -> None:
        latency = time.monotonic() - task.started
        # Resolve the caller's future first, so that shutdown(wait=True) returns only after all
        # futures are resolved.
        error = inner.exception()
        if error is None:
            task.future.set_result(inner.result())
        else:
            task.future.set_exception(error)
        with self._lock:
            # Read under the lock, so that the controller sees its events in time order.
            now = self._tuning.now()
            self._in_flight -= 1
            picked = self._pick()
            new = self._tuning.ended(
                now, self._in_flight, len(self._queue), latency, error is not None, bool(picked)
            )
            picked += self._grow(now, new)
            if self._idle_now():
                self._idle.notify_all()
            close = self._shutdown and self._idle_now()
        self._dispatch(picked)
        if close:
            self._close(wait=False)

    def _close(self, wait: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._pool.shutdown(wait=wait)


def _tick_executor(ref: "weakref.ref[AdaptiveExecutor]", stop: threading.Event) -> None:
    while not stop.wait(TICK):
        executor = ref()
        if executor is None:
            return
        executor._tick()
        del executor


class AdaptiveSemaphore:
    """An asyncio semaphore whose number of permits the controller sets, up to ``max_permits``.

    ``async with sem:`` (or ``await sem.acquire()`` ... ``sem.release()``) around each task.
    Waiters get permits in the order they asked. A release counts as a completion, timed from the
    same task's acquire, unless the ``async with`` body raised (or was cancelled), or
    ``release(failed=True)`` says the task failed: failed work is not throughput, and ``status()``
    counts it as ``failed``. A smaller target takes effect as permits are released: holders keep
    theirs, and no waiter gets one until fewer than the target are held.

    policy, bottleneck, coordinate, key and params: as for :class:`AdaptiveExecutor` (a key's
    count is at most ``max_permits``); a callable ``bottleneck`` runs in the event loop (the
    semaphore's ticker task, while the semaphore is in use), so it must not block; with
    ``psi=True`` that task also reads ``/proc/pressure`` (or ``psi_cgroup``'s files), at most
    once a second (a few small files). With ``coordinate``, that task's ticks also take and
    give back the turn, so a semaphore left idle keeps a turn it holds until it is used again;
    ``turns()`` counts them. Use it from one event loop.
    """

    def __init__(
        self,
        max_permits: int = 64,
        *,
        policy: str = "tcc",
        bottleneck: Optional[BottleneckSource] = None,
        **params: Any,
    ) -> None:
        self._tuning = _Tuning(policy, max_permits, params, bottleneck, "max_permits")
        self._held = 0
        self._waiters: Deque[asyncio.Future] = deque()
        # Acquire times per task, for latencies; tasks that end drop out.
        self._starts: "weakref.WeakKeyDictionary[asyncio.Task, List[float]]" = (
            weakref.WeakKeyDictionary()
        )
        self._ticker: Optional[asyncio.Task] = None

    @property
    def target(self) -> int:
        return self._tuning.target

    @property
    def targets(self) -> List[Tuple[float, int]]:
        """Target changes so far: (seconds since the semaphore was made, target)."""
        return list(self._tuning.targets)

    @property
    def held(self) -> int:
        """Permits held now."""
        return self._held

    @property
    def queued(self) -> int:
        """Tasks waiting for a permit."""
        return len(self._waiters)

    def locked(self) -> bool:
        """Whether acquire() would wait."""
        return bool(self._waiters) or self._held >= self._tuning.target

    def trace(self) -> List[Transition]:
        return self._tuning.trace()

    def status(self) -> ControllerStatus:
        """As :meth:`AdaptiveExecutor.status`."""
        return self._tuning.status()

    def turns(self) -> Optional[Dict[str, Any]]:
        """With ``coordinate``: as :meth:`AdaptiveExecutor.turns`; None without."""
        return self._tuning.turns()

    async def acquire(self) -> bool:
        ctl = self._tuning.controller
        if not self.locked():
            self._held += 1
            now = self._tuning.now()
            self._grow(now, ctl.on_start(now, self._held, len(self._waiters)))
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            now = self._tuning.now()
            self._grow(now, ctl.on_load(now, self._held, len(self._waiters)))
            self._ensure_ticker()
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    # Granted as the task was cancelled: pass the permit on.
                    self._held -= 1
                    self._handover(self._tuning.now())
                else:
                    self._waiters.remove(waiter)
                    now = self._tuning.now()
                    self._grow(now, ctl.on_load(now, self._held, len(self._waiters)))
                raise
        self._ensure_ticker()
        task = asyncio.current_task()
        if task is not None:
            self._starts.setdefault(task, []).append(time.monotonic())
        return True

    def release(self, *, failed: bool = False) -> None:
        """Gives the permit back. ``failed``: the task did not do its work (it raised), so this
        is no completion."""
        if self._held <= 0:
            raise ValueError("AdaptiveSemaphore released more times than acquired")
        latency = None
        task = asyncio.current_task()
        starts = self._starts.get(task) if task is not None else None
        if starts:
            latency = time.monotonic() - starts.pop()
        self._held -= 1
        now = self._tuning.now()
        took = self._wake() > 0
        new = self._tuning.ended(now, self._held, len(self._waiters), latency, failed, took)
        self._grow(now, new)

    async def __aenter__(self) -> "AdaptiveSemaphore":
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: Any, *exc: Any) -> None:
        self.release(failed=exc_type is not None)

    def _wake(self) -> int:
        """Grants permits to the first waiters while fewer than the target are held."""
        woken = 0
        while self._waiters and self._held < self._tuning.target:
            waiter = self._waiters.popleft()
            if waiter.done():  # cancelled, not yet removed
                continue
            waiter.set_result(True)
            self._held += 1
            woken += 1
        return woken

    def _handover(self, now: float) -> None:
        if self._wake():
            ctl = self._tuning.controller
            self._grow(now, ctl.on_start(now, self._held, len(self._waiters)))

    def _grow(self, now: float, new: Optional[int]) -> None:
        ctl = self._tuning.controller
        while self._tuning.changed(now, new) and self._wake():
            new = ctl.on_start(now, self._held, len(self._waiters))

    def _ensure_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        # Runs while the semaphore is in use, so an idle one leaves no task behind.
        while self._held or self._waiters:
            await asyncio.sleep(TICK)
            readings = self._tuning.read()
            now = self._tuning.now()
            self._grow(now, self._tuning.tick(now, readings))
