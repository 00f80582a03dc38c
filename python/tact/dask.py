"""Tuned submission to a Dask cluster: :class:`AdaptiveSubmitter` keeps at most the controller's
target of tasks in flight, which bounds the load on a resource downstream of the workers (a
database, a service) that no single worker sees.

Needs ``distributed`` (``pip install distributed``); ``import tact`` does not.
"""

import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from .tune import TICK, BottleneckSource, ControllerStatus, Transition, _Readings, _Tuning


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as e:
        raise ImportError(
            "tact.dask.AdaptiveSubmitter needs Dask's distributed scheduler: "
            "pip install 'distributed'"
        ) from e
    return distributed


class AdaptiveSubmitter:
    """Runs ``fn(item)`` on the cluster of ``client`` for each item of ``iterable``, keeping at
    most the controller's target of futures in flight (and never more than ``max_in_flight``).
    Iterating over it yields the results in completion order.

    Submission starts with the first ``next()``. From then on, done callbacks (on Dask's callback
    thread) time each completion from its submission, refill from ``iterable`` and report to the
    controller, whether or not the consumer is reading; results wait in order of completion. The
    consumer ticks the controller: every 100 ms while it waits, and in ``next()`` once 100 ms
    have passed since the last tick however often results come. A task that raises raises its
    exception from ``next()`` in its turn; iteration may go on after it. It is no completion for the
    controller (failed work is not throughput): ``status()`` counts it as ``failed``. If the input
    iterator raises, or a task cannot be submitted (``fn`` or an item does not serialize),
    submission stops and ``next()`` raises that error; the tasks in flight still yield their
    results. ``close()`` (or leaving a ``with`` block) stops submitting and cancels the futures in
    flight.

    policy, bottleneck, coordinate, key and params: as for :class:`tact.AdaptiveExecutor`
    (``n_init`` sets the first target; a key's count is at most ``max_in_flight``); the
    bottleneck, and PSI with ``psi=True``, are read on the consumer's ticks, with the submitter's
    lock released. With ``coordinate``, those ticks also take and give back the turn, so a
    consumer that stops reading keeps a turn it holds until it reads again (or the submitter is
    dropped); ``turns()`` counts them.
    ``targets`` lists the (seconds since creation, target) changes, ``trace()`` the controller's
    state transitions, ``in_flight`` the futures submitted and not yet done.
    """

    def __init__(
        self,
        client: Any,
        fn: Callable[[Any], Any],
        iterable: Iterable[Any],
        *,
        policy: str = "tcc",
        max_in_flight: int = 256,
        bottleneck: Optional[BottleneckSource] = None,
        **params: Any,
    ) -> None:
        distributed = _distributed()
        if not isinstance(client, distributed.Client):
            raise TypeError(f"client must be a distributed.Client, not {type(client).__name__}")
        self._tuning = _Tuning(policy, max_in_flight, params, bottleneck, "max_in_flight")
        self._client = client
        self._fn = fn
        self._items = iter(iterable)
        self._exhausted = False
        self._started = False
        self._closed = False
        # Futures in flight, by key, with their submission time.
        self._running: Dict[str, Tuple[Any, float]] = {}
        # Finished futures, in order of completion.
        self._finished: Deque[Any] = deque()
        # Why submission stopped early (the input iterator raised, or a task would not
        # serialize), raised to the consumer once.
        self._error: Optional[Exception] = None
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        # When the consumer ticks next (on the controller's clock), once started.
        self._next_tick = 0.0

    @property
    def target(self) -> int:
        return self._tuning.target

    @property
    def targets(self) -> List[Tuple[float, int]]:
        with self._lock:
            return list(self._tuning.targets)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    def trace(self) -> List[Transition]:
        with self._lock:
            return self._tuning.trace()

    def status(self) -> ControllerStatus:
        """As :meth:`tact.AdaptiveExecutor.status`: ``failed`` counts the tasks that raised,
        which the controller does not count as completions."""
        with self._lock:
            return self._tuning.status()

    def turns(self) -> Optional[Dict[str, Any]]:
        """With ``coordinate``: as :meth:`tact.AdaptiveExecutor.turns`; None without."""
        return self._tuning.turns()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        with self._lock:
            if not self._started:
                self._started = True
                now = self._tuning.now()
                self._next_tick = now + TICK
                if self._fill():
                    new = self._tuning.controller.on_start(now, len(self._running), self._queued())
                    self._grow(now, new)
            while True:
                # Results wake the consumer without a tick: a steady stream of them must not
                # hold off TCC's timeouts, nor the turns of coordinate.
                if self._tuning.now() >= self._next_tick:
                    self._tick()
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                if self._finished:
                    future = self._finished.popleft()
                    break
                if self._closed or (self._exhausted and not self._running):
                    raise StopIteration
                self._ready.wait(max(0.0, self._next_tick - self._tuning.now()))
        # Outside the lock: gathering a result may wait for the cluster.
        return future.result()

    def close(self) -> None:
        """Stops submitting and cancels the futures still in flight. Idempotent."""
        with self._lock:
            self._closed = True
            running = [future for future, _ in self._running.values()]
            self._running.clear()
            self._finished.clear()
            self._ready.notify_all()
        if running:
            self._client.cancel(running)

    def __enter__(self) -> "AdaptiveSubmitter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Under self._lock.

    def _queued(self) -> int:
        # The controller needs to know whether work waits, not how much: 1 stands for "more".
        return 0 if self._exhausted else 1

    def _fill(self) -> int:
        """Submits items while fewer than the target are in flight; how many."""
        submitted = 0
        while (
            not self._exhausted and not self._closed and len(self._running) < self._tuning.target
        ):
            try:
                item = next(self._items)
                # pure=False: equal items are separate tasks, each with its own key.
                future = self._client.submit(self._fn, item, pure=False)
            except StopIteration:
                self._exhausted = True
                break
            except Exception as e:  # the input or the submission failed: stop, tell the consumer
                self._exhausted = True
                self._error = e
                self._ready.notify_all()
                break
            self._running[future.key] = (future, time.monotonic())
            future.add_done_callback(self._done)
            submitted += 1
        return submitted

    def _tick(self) -> None:
        readings: _Readings = (None, None)
        if self._tuning.reads:
            # The source and PSI read files or take long: done callbacks go on meanwhile.
            self._lock.release()
            try:
                readings = self._tuning.read()
            finally:
                self._lock.acquire()
        now = self._tuning.now()
        self._next_tick = now + TICK
        self._grow(now, self._tuning.tick(now, readings))

    def _grow(self, now: float, new: Optional[int]) -> None:
        while self._tuning.changed(now, new) and self._fill():
            new = self._tuning.controller.on_start(now, len(self._running), self._queued())

    # On Dask's callback thread.

    def _done(self, future: Any) -> None:
        finished = time.monotonic()
        with self._lock:
            entry = self._running.pop(future.key, None)
            if entry is None:  # closed meanwhile
                return
            now = self._tuning.now()
            self._finished.append(future)
            took = self._fill() > 0
            # An error, or a future cancelled behind the submitter's back: no work done.
            failed = future.status != "finished"
            new = self._tuning.ended(
                now, len(self._running), self._queued(), finished - entry[1], failed, took
            )
            self._grow(now, new)
            self._ready.notify_all()
