"""Polite regulation for Python programs: background work that defers to important work.

A low-importance program (backup, compression, indexing) calls :func:`testpoint` with the
progress it made since its previous call. Most calls return at once; once per testpoint period
(200 ms by default) tact compares the thread's progress rate with a target it calibrated itself
on this machine, and the call blocks while the program should defer:

- while the rate is significantly low: something more important is competing for the CPU, the
  disk or the network (MS Manners, Douceur & Bolosky, SOSP 1999);
- while another regulated thread of the program has its turn: regulated threads take turns, as
  running together they would slow each other down and all back off.

The GIL is released while a testpoint blocks, so unregulated threads keep running. Targets persist
per script under ``$XDG_STATE_HOME/tact/polite/`` so the next run starts calibrated.

Example::

    import zlib, tact

    for chunk in chunks:
        out.write(zlib.compress(chunk))
        tact.testpoint(0, len(chunk))      # progress: bytes compressed since the last call

The environment sets the defaults: ``TACT_TESTPOINT`` (period, e.g. ``100ms``), ``TACT_NAME``
(persistence key), ``TACT_STATE_DIR``, ``TACT_DISABLE=1``. :func:`configure` overrides them
before the first testpoint.

The package also tunes concurrency (the TCC controller, Tang et al.): :class:`AdaptiveExecutor`
(a ``concurrent.futures`` executor), :class:`AdaptiveSemaphore` (asyncio) and
``tact.dask.AdaptiveSubmitter`` run as many tasks at once as give the best throughput without
saturating a bottleneck; :class:`Controller` is the controller itself.

A program that issues its own background I/O can instead ask an :class:`IdleGate` before each
request (Eggert's idletime scheduling): ``with gate:`` waits until the foreground has left the
disk or network interface idle for a full preemption interval, so background requests never
queue in front of foreground ones::

    gate = tact.IdleGate(device="/var/lib/backup", preempt="50ms")
    with gate:
        n = os.preadv(fd, [buf], offset)   # one background request (O_DIRECT)
        gate.done(n)                       # its own bytes are not foreground
"""

from typing import Dict, Literal, Optional, TypedDict

from ._tact import (
    Controller,
    IdleGate,
    Regulator,
    configure,
    flush,
    set_priority,
    stats,
    testpoint,
)
from .tune import AdaptiveExecutor, AdaptiveSemaphore, ControllerStatus, Pressure, Transition

__all__ = [
    "AdaptiveExecutor",
    "AdaptiveSemaphore",
    "Controller",
    "ControllerStatus",
    "IdleCounters",
    "IdleGate",
    "IdleStatus",
    "Pressure",
    "Regulator",
    "Stats",
    "configure",
    "flush",
    "set_priority",
    "stats",
    "testpoint",
    "Transition",
]


class Stats(TypedDict):
    """What a regulated unit has been through, as :func:`stats` and ``Regulator.stats`` give it."""

    #: ``bootstrap``: running unregulated to calibrate its target; ``probation``: regulated with
    #: a duty cap, as the target may have been learnt under load; ``regulated``.
    phase: Literal["bootstrap", "probation", "regulated"]
    #: Testpoints of the bootstrap done so far (None after it).
    bootstrap_done: Optional[int]
    priority: int
    #: Due testpoints: those the regulator judged.
    testpoints: int
    #: Suspensions imposed, and the seconds spent serving them.
    suspensions: int
    suspended: float
    #: Seconds spent waiting for the turn of another regulated unit.
    waited: float
    #: Times the unit lost its turn for not reaching a testpoint within the hung threshold.
    hung: int
    #: Decision of the last due testpoint, and the length of its suspension in seconds (0 unless
    #: ``last == "suspend"``).
    last: Optional[Literal["run", "indeterminate", "suspend"]]
    last_suspension: float


class IdleCounters(TypedDict):
    """The idle gate's event counters (tact-core's X[s][e], thesis T§7.2.2)."""

    #: B[f]: foreground that arrived while a background request was in service.
    preempted: int
    #: P[f]: foreground that arrived inside a preemption interval.
    shielded: int
    #: I[f]: foreground that found the resource idle with no interval running.
    found_idle: int
    #: P[t]: intervals that ran out (background opportunities).
    expired_pis: int
    #: Every f: one per look that saw foreground.
    fg_total: int
    #: preempted / fg_total (0 before any foreground).
    harm: float
    #: The whole table: state ("idle", "fg", "bg", "pi") -> event ("f", "b", "t", "i") -> count.
    x: Dict[str, Dict[str, int]]


class IdleStatus(TypedDict):
    """``IdleGate.status()``; durations in seconds."""

    #: What is watched: ``"disk vda (/var/lib)"``, ``"interface eth0"``.
    resource: str
    state: Literal["idle", "fg", "bg", "pi"]
    #: The current preemption interval, and what is left of a running one.
    pi: float
    pi_left: Optional[float]
    #: Whether the interval is tuned automatically (``preempt="auto"``).
    auto: bool
    #: Whether a background request is outstanding.
    outstanding: bool
    #: Requests admitted; seconds spent waiting to enter, and inside the blocks.
    acquired: int
    waited: float
    busy: float
    #: Bytes reported with done(), and foreground bytes seen.
    own_bytes: int
    fg_bytes: int
    counters: IdleCounters
