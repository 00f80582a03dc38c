"""Types of the native module (crates/tact-py); see the package docstring for the overview."""

import os
from datetime import timedelta
from types import TracebackType
from typing import Any, Dict, List, Optional, Type, Union

from . import IdleStatus, Stats
from .tune import ControllerStatus, Pressure, Transition

_Duration = Union[str, float, timedelta]

def testpoint(index: int, *metrics: float) -> None:
    """Reports progress made since the calling thread's previous testpoint and returns when the
    thread may go on (see the package docstring). ``index`` selects a metric set (0 for most
    programs, one per phase of work); ``metrics`` are progress increments, ints or floats >= 0,
    as many as the index had before. Raises ValueError on NaN, infinite or negative progress, no
    metric, or a changed metric count."""

def set_priority(priority: int) -> None:
    """Sets the calling thread's priority: a higher one always runs first when eligible.
    Raises ValueError outside -100..100 (the tact daemon's range)."""

def stats() -> Optional[Stats]:
    """What the calling thread's unit has been through; None before its first testpoint."""

def flush() -> None:
    """Saves the calibrated targets now (also done every 5 minutes and at exit)."""

def configure(
    testpoint: Optional[_Duration] = None,
    *,
    name: Optional[str] = None,
    state_dir: Optional[Union[str, os.PathLike[str]]] = None,
    bootstrap: Optional[int] = None,
    probation: Optional[_Duration] = None,
    max_suspension: Optional[_Duration] = None,
    disabled: Optional[bool] = None,
) -> None:
    """Sets up regulation for this process; must come before the first testpoint,
    set_priority() or Regulator (RuntimeError otherwise). Arguments left None keep the
    environment's setting or the default. ``testpoint`` lies in 1 ms..60 s and
    ``max_suspension`` is at least it (ValueError naming the argument otherwise)."""

class Regulator:
    """A regulated unit of its own, closed by a ``with`` block or close()."""

    def __init__(self, priority: int = 0) -> None: ...
    def testpoint(self, index: int, *metrics: float) -> None: ...
    def set_priority(self, priority: int) -> None: ...
    @property
    def priority(self) -> int: ...
    def stats(self) -> Optional[Stats]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Regulator": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Controller:
    """A concurrency controller: the pool reports what it did, the controller answers with the
    number of tasks to run at once. ``policy`` is ``"tcc"`` or a spec (``"tcc:p=0.25,q=0.14"``,
    ``"static:8"``, ``"aimd"``, ``"vegas"``, ``"gradient2"``, ``"envoy"``, ``"hill"``, ``"vegas+"``,
    ``"vegas++:x1=RATE"`` with RATE tasks/s at one worker, measured offline); ``params`` are TCC's
    parameters (TuneParams fields; durations as seconds, strings or timedeltas), with
    ``policy="tcc"`` only. ``n_init`` defaults to the online CPUs (at most ``n_max``). Times are
    float seconds on the caller's monotonic clock; each event method returns the new target when
    it changed. With ``psi=True`` (or ``"tcc:psi=1"``) the controller reads ``/proc/pressure``
    for ``read_pressure()``; a kernel without PSI turns that off with a RuntimeWarning; with
    ``psi_cgroup=DIR`` as well it reads the cgroup v2 directory DIR's ``memory.pressure`` and
    ``io.pressure`` instead (``tact tune --psi-cgroup``), and a DIR whose files cannot be read, or
    one given without ``psi=True``, raises ValueError; ``status()["psi_source"]`` says which. With
    ``saturation_unseen=True`` the caller says its loads are a guess (it cannot see whether its
    pool is saturated): TCC then also counts a gap between completions longer than ten mean gaps
    as starvation, with no busy time and no sample across it (baselines ignore it). With
    ``coordinate="KEY"`` TCC takes turns with the other pools and ``tact tune`` runs on KEY
    (``coordinate_mode="turns"``: one measures at a time, through a lock file; ``"epoch"``:
    cycles start at multiples of ``epoch`` seconds, 60 by default), checked on every
    ``on_tick`` and ``on_hint``; ``turns(now)`` counts them. With ``key="NAME"`` (TCC only) a
    count recorded under NAME becomes TCC's warm start (at most ``n_max``; a ``warm`` parameter
    given wins), and each entry into Steady records TCC's count there, in ``key_dir`` (default
    ``tact tune --key``'s directory: ``$XDG_STATE_HOME/tact/tune``, root's
    ``/var/lib/tact/tune``, else ``~/.local/state/tact/tune``); a record that cannot be used,
    and the first write that fails, are a RuntimeWarning each. Raises ValueError on an unknown
    policy or parameter, parameters that break TCC's friendliness conditions, a bad
    coordination key, a key that is not a plain file name (letters, digits, ``.``, ``_``,
    ``-``), or a key with another policy; OSError when the lock directory cannot be used."""

    def __init__(
        self,
        policy: str = "tcc",
        *,
        n_init: Optional[int] = None,
        n_max: int = 64,
        saturation_unseen: bool = False,
        coordinate: Optional[str] = None,
        coordinate_mode: str = "turns",
        epoch: Optional[float] = None,
        key: Optional[str] = None,
        key_dir: Optional[Union[str, os.PathLike[str]]] = None,
        psi_cgroup: Optional[Union[str, os.PathLike[str]]] = None,
        **params: Any,
    ) -> None: ...
    def on_complete(
        self, now: float, in_flight: int, queued: int, latency: Optional[float] = None
    ) -> Optional[int]:
        """A task that did its work ended. One that failed is no completion (failed work is
        not throughput): report ``on_start`` if another task took its place, else ``on_load``,
        as tact's pools do."""
    def on_start(self, now: float, in_flight: int, queued: int) -> Optional[int]: ...
    def on_load(self, now: float, in_flight: int, queued: int) -> Optional[int]: ...
    def on_tick(self, now: float) -> Optional[int]: ...
    def on_hint(self, now: float, utilization: float) -> Optional[int]:
        """The bottleneck's mean utilization in [0, 1] since the previous report (TCC's
        bottleneck hint; baselines ignore it). Raises ValueError when it is not finite."""
    def on_pressure(
        self,
        now: float,
        *,
        memory_some: float = 0.0,
        memory_full: float = 0.0,
        io_full: float = 0.0,
    ) -> Optional[int]:
        """PSI readings as fractions in [0, 1] (TCC's PSI rules with ``psi=True``: memory or io
        ``full`` above ``psi_full`` revokes the add step being measured, memory ``some`` above
        ``psi_some`` ends a steady state early; baselines ignore them). Raises ValueError when
        one is not finite."""
    def read_pressure(self) -> Optional[Pressure]:
        """The machine's PSI readings (``/proc/pressure``, avg10 as fractions), with the GIL
        released, when the controller takes them (``psi=True``) and one is due (at most one a
        second); else None. A reading that fails turns PSI off with one RuntimeWarning."""
    @property
    def psi(self) -> bool:
        """Whether ``read_pressure`` reads PSI: ``psi=True`` and the files could be read."""
    @property
    def target(self) -> int: ...
    def status(self) -> ControllerStatus: ...
    def turns(self, now: float) -> Optional[Dict[str, Any]]:
        """With ``coordinate``: ``key``, ``turns`` granted, seconds ``waited`` for them and
        ``held``, whether one is ``holding`` now, and the other instances' completions
        passed to the policy, ``peer_completions``; None without."""
    def drain_trace(self) -> List[Transition]: ...

class Bottleneck:
    """A meter of the resource a pool saturates, for TCC's bottleneck hint (what
    ``AdaptiveExecutor(bottleneck="...")`` opens). ``spec`` takes ``tact tune --bottleneck``'s
    forms: ``"cpu:1"``, ``"cpu:0,2-3"``, ``"psi:cpu|io|memory"``, ``"disk:vda"`` (a /dev path or
    a path on the disk too), ``"disk:vda@iops=300"`` (or ``riops=``, ``wiops=``),
    ``"net:eth0@1gbit"`` (what it sends), ``"net:eth0@1gbit,rx"`` (what it receives). Raises
    ValueError on a malformed spec (naming the forms), or a CPU, PSI file, device or interface
    this machine lacks."""

    def __init__(self, spec: str) -> None: ...
    def sample(self) -> Optional[float]:
        """The utilization since the previous reading (the first: since the meter was made), with
        the GIL released; None when nothing can be said yet. Rates against a cap given (IOPS, a
        link's rate) exceed 1 when the cap is too low. Raises OSError when the counters cannot
        be read."""
    @property
    def spec(self) -> str: ...

class IdleGate:
    """A cooperative idle gate for one disk (``device``: a kernel name such as ``"sda"``, a
    /dev path, or any path, meaning the disk under its mount) or network ``interface``: enter
    ``with gate:`` before each background request, one request per block, and report its bytes
    with ``done(nbytes)`` inside the block. Entering waits, with the GIL released, until the
    foreground has left the resource idle for a full preemption interval (``preempt``: ``"auto"``,
    the default, or a duration; 0 is plain priority). Raises ValueError on an unknown device or
    interface, a negative or malformed ``preempt``, or no resource."""

    def __init__(
        self,
        device: Optional[Union[str, os.PathLike[str]]] = None,
        *,
        interface: Optional[str] = None,
        preempt: Optional[_Duration] = None,
        threshold: int = 4096,
    ) -> None: ...
    def acquire(self, timeout: Optional[_Duration] = None) -> bool:
        """Waits for a full idle PI, then admits one background request; False on timeout."""
    def done(self, nbytes: int = 0) -> None:
        """The request completed, having moved ``nbytes`` (not counted as foreground). Raises
        RuntimeError when no request is outstanding."""
    def status(self) -> IdleStatus: ...
    def __enter__(self) -> "IdleGate": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
