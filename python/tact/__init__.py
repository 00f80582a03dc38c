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
"""

from typing import Literal, Optional, TypedDict

from ._tact import Controller, Regulator, configure, flush, set_priority, stats, testpoint
from .tune import AdaptiveExecutor, AdaptiveSemaphore, ControllerStatus, Transition

__all__ = [
    "AdaptiveExecutor",
    "AdaptiveSemaphore",
    "Controller",
    "ControllerStatus",
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
