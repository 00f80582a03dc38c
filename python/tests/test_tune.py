"""tact.Controller, tact.AdaptiveExecutor and tact.AdaptiveSemaphore.

Concurrency is measured by the tasks themselves (a counter they raise while they run), and bounds
are checked against targets; nothing here depends on how fast the machine is. "static:N" is the
scripted policy: its target never moves, so the bound it gives is exact.
"""

import asyncio
import heapq
import math
import os
import threading
import time
import warnings
from concurrent.futures import CancelledError, wait
from pathlib import Path
from typing import List

import pytest

import tact

#: Generous: a loaded 2-core machine can be many times slower than an idle one.
TIMEOUT = 60

POLICIES = ["tcc", "static:3", "aimd", "vegas", "gradient2", "envoy", "hill"]


# Controller


@pytest.mark.parametrize(
    "params, words",
    [
        (dict(p=0.5, q=0.1), ["condition (1)", "nearest valid"]),
        (dict(p=0.25, q=0.14, w=0.1), ["condition (2)", "w = 0.1"]),
        (dict(alpha=0.9), ["alpha"]),
        (dict(n_star=1), ["n_star"]),
        (dict(n_init=9, n_max=8), ["n_init"]),
        (dict(bogus=1), ["bogus", "valid ones are"]),
        (dict(dwell="soon"), ["dwell"]),
    ],
)
def test_bad_params_raise_value_error_naming_the_condition(params, words):
    with pytest.raises(ValueError) as err:
        tact.Controller(**params)
    for word in words:
        assert word in str(err.value)


def test_unfriendly_params_are_accepted_when_asked_for():
    c = tact.Controller(p=0.5, q=0.1, allow_unfriendly=True, n_init=2, n_max=8)
    assert c.target == 2


def test_bad_policies_and_events_raise_value_error():
    with pytest.raises(ValueError, match="unknown policy"):
        tact.Controller("fastest")
    with pytest.raises(ValueError, match="keyword parameters are TCC's"):
        tact.Controller("static:3", p=0.3)
    with pytest.raises(ValueError, match="n_max"):
        tact.Controller(n_max=0)
    # An n_init above n_max is refused with a spec as without one (a spec used to clamp it).
    with pytest.raises(ValueError, match="n_init = 100: must be at most n_max = 8"):
        tact.Controller("tcc:q=0.2", n_init=100, n_max=8)
    # An n_min in the spec above the largest count: refused, not a Rust panic.
    with pytest.raises(ValueError, match="must be at least n_min"):
        tact.Controller("tcc:n_min=100", n_max=8)
    c = tact.Controller(n_max=4)
    with pytest.raises(ValueError, match="now"):
        c.on_tick(-1.0)
    with pytest.raises(ValueError, match="latency"):
        c.on_complete(1.0, 1, 0, float("nan"))
    with pytest.raises(TypeError, match="remove must be a bool"):
        tact.Controller(remove=1)


def test_params_set_tcc_fields():
    c = tact.Controller(n_init=3, n_max=16, batch_min=4, dwell="2s", steady_min=1.5)
    s = c.status()
    assert s["policy"] == "tcc" and s["phase"] == "base"
    assert s["target"] == c.target == 3
    assert s["batch_size"] == 4
    assert tact.Controller("static:5", n_max=8).status() == {"policy": "static:5", "target": 5}


def drive(c: tact.Controller, n_max: int, completions: int) -> List[int]:
    """A closed system with a bottleneck of capacity 4: n tasks in flight each take
    10 ms * max(1, n/4), so throughput stops growing past 4. Returns every target seen."""
    now, seen, running = 0.0, [c.target], []

    def service(n: int) -> float:
        return 0.01 * max(1.0, n / 4)

    def fill(now: float) -> None:
        while len(running) < c.target:
            heapq.heappush(running, now + service(c.target))

    fill(now)
    seen.append(c.on_start(now, len(running), 1) or c.target)
    next_tick = 0.1
    for _ in range(completions):
        done = heapq.heappop(running)
        while next_tick < done:
            seen.append(c.on_tick(next_tick) or c.target)
            next_tick += 0.1
        now = done
        if len(running) < c.target:
            fill(now)
        new = c.on_complete(now, len(running), 1, service(len(running)))
        seen.append(new or c.target)
        if new is not None:
            fill(now)
            seen.append(c.on_start(now, len(running), 1) or c.target)
    return seen


@pytest.mark.parametrize("policy", POLICIES)
def test_target_stays_within_bounds(policy):
    n_max = 16
    if policy == "tcc":
        c = tact.Controller(n_init=2, n_max=n_max, n_star=5, batch_min=4, dwell=0.5)
    else:
        c = tact.Controller(policy, n_init=2, n_max=n_max)
    seen = drive(c, n_max, 5000)
    assert all(1 <= t <= n_max for t in seen), sorted(set(seen))
    if policy == "tcc":
        # It explored: several counts, with a trace of the transitions.
        assert len(set(seen)) > 2
        trace = c.drain_trace()
        assert trace and {"from", "to", "reason", "target_from", "target_to"} <= trace[0].keys()
        assert all(1 <= t["target_to"] <= n_max for t in trace)
        assert c.drain_trace() == []
    if policy == "static:3":
        assert set(seen) == {3}


# AdaptiveExecutor


def mark(directory: str, i: int) -> int:
    """Runs once per i or fails: the marker file must not exist yet."""
    with open(os.path.join(directory, f"{i}"), "x"):
        pass
    return i * i


@pytest.mark.parametrize("kind, n", [("thread", 200), ("process", 40)])
def test_every_task_runs_exactly_once_with_its_result(kind, n, tmp_path: Path):
    with tact.AdaptiveExecutor(4, kind=kind, n_init=2) as ex:
        futures = [ex.submit(mark, str(tmp_path), i) for i in range(n)]
        done, not_done = wait(futures, timeout=TIMEOUT)
        assert not not_done
    assert [f.result() for f in futures] == [i * i for i in range(n)]
    assert sorted(int(p.name) for p in tmp_path.iterdir()) == list(range(n))
    assert ex.in_flight == 0 and ex.queued == 0


class Meter:
    """Counts the tasks running at once, as they see it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.reached = threading.Event()

    def enter(self, at: int = 0) -> int:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            if self.running >= at:
                self.reached.set()
            return self.running

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


def test_static_target_bounds_running_tasks_exactly():
    meter = Meter()

    def task(i: int) -> int:
        meter.enter(at=3)
        try:
            # The first tasks wait until three run at once: the bound is reached, not only kept.
            meter.reached.wait(TIMEOUT)
            time.sleep(0.002)
        finally:
            meter.leave()
        return i

    with tact.AdaptiveExecutor(16, policy="static:3") as ex:
        assert list(ex.map(task, range(60), timeout=TIMEOUT)) == list(range(60))
    assert meter.peak == 3
    assert ex.targets == [(0.0, 3)]


@pytest.mark.parametrize("policy", ["tcc", "aimd"])
def test_running_tasks_never_exceed_a_target_in_force(policy):
    """A task starts only after the executor dispatched it with fewer than the target in flight;
    after a shrink the surplus finishes, so the bound is the largest target applied so far."""
    meter = Meter()
    violations = []
    params = dict(n_star=5, batch_min=4, dwell=0.5) if policy == "tcc" else {}
    ex = tact.AdaptiveExecutor(8, policy=policy, n_init=2, **params)

    def task(i: int) -> int:
        running = meter.enter()
        try:
            bound = max(t for _, t in ex.targets)
            if running > bound:
                violations.append((running, bound))
            time.sleep(0.001)
        finally:
            meter.leave()
        return i

    with ex:
        assert sorted(ex.map(task, range(400), timeout=TIMEOUT)) == list(range(400))
    assert violations == []
    assert meter.peak <= 8
    assert all(1 <= t <= 8 for _, t in ex.targets)
    times = [t for t, _ in ex.targets]
    assert times == sorted(times)


def test_a_raising_task_fails_its_future_only():
    def task(i: int) -> int:
        if i % 7 == 3:
            raise ValueError(f"task {i}")
        return i

    with tact.AdaptiveExecutor(4, policy="static:2") as ex:
        futures = [ex.submit(task, i) for i in range(30)]
        wait(futures, timeout=TIMEOUT)
        for i, f in enumerate(futures):
            if i % 7 == 3:
                assert isinstance(f.exception(), ValueError) and str(f.exception()) == f"task {i}"
            else:
                assert f.result() == i
        # Still working.
        assert ex.submit(task, 100).result(timeout=TIMEOUT) == 100


def boom(i: int) -> int:
    raise ConnectionError(f"overloaded {i}")


def nap_then_fail(i: int) -> int:
    time.sleep(0.002)
    raise ConnectionError(f"overloaded {i}")


def nap(i: int) -> int:
    time.sleep(0.002)
    return i


def test_a_raising_task_is_failed_work_not_a_completion():
    # Failed work must not look like throughput: a service that fails fast when overloaded
    # would look faster the more it is loaded. TCC settles for max(target, batch_min) = 2
    # completions, then takes each as a sample (its raw samples are completions), so 300
    # successes give it samples or decisions, and 300 failures must give it neither.
    # shutdown(wait=True) returns once the pool has counted every task (a future resolves just
    # before its task is counted).
    def run(fn):
        ex = tact.AdaptiveExecutor(8, n_init=2, batch_min=1, n_star=3)
        for i in range(300):
            ex.submit(fn, i)
        ex.shutdown(wait=True)
        return ex, ex.status()

    ex, s = run(nap)
    assert (s["completed"], s["failed"]) == (300, 0)
    assert s["samples"] > 0 or ex.trace()
    ex, s = run(nap_then_fail)
    assert (s["completed"], s["failed"]) == (0, 300)
    assert (s["samples"], s["batches"], ex.trace(), ex.targets) == (0, 0, [], [(0.0, 2)])
    ex = tact.AdaptiveExecutor(4, policy="static:2")
    for i in range(5):
        ex.submit(nap_then_fail, i)
    ex.submit(abs, 1)
    ex.shutdown(wait=True)
    s = ex.status()
    assert (s["policy"], s["failed"], s["completed"]) == ("static:2", 5, 1)


def test_negative_counts_raise_value_error_naming_them():
    with pytest.raises(ValueError, match=r"max_workers = -1: must be at least 1"):
        tact.AdaptiveExecutor(max_workers=-1)
    with pytest.raises(ValueError, match=r"n_init = -2: must not be negative"):
        tact.AdaptiveExecutor(4, n_init=-2)
    with pytest.raises(ValueError, match=r"max_permits = 0"):
        tact.AdaptiveSemaphore(0)
    # An n_init out of range shows the range, its top as the caller gave it.
    with pytest.raises(
        ValueError, match=r"n_init = 100: must lie in \[n_min, max_workers\] = \[1, 64\]"
    ):
        tact.AdaptiveExecutor(64, n_init=100)
    with pytest.raises(ValueError, match="n_max: the largest count is max_permits here"):
        tact.AdaptiveSemaphore(4, n_max=10)
    with pytest.raises(ValueError, match="n_max = -1: must not be negative"):
        tact.Controller(n_max=-1)


def test_shutdown_wait_drains_the_queue():
    ex = tact.AdaptiveExecutor(4, policy="static:1")
    futures = [ex.submit(time.sleep, 0.005) for _ in range(20)]
    assert ex.queued > 0
    ex.shutdown(wait=True)
    assert all(f.done() and not f.cancelled() for f in futures)
    with pytest.raises(RuntimeError):
        ex.submit(time.sleep, 0)


def test_shutdown_without_wait_still_runs_every_task():
    ex = tact.AdaptiveExecutor(4, policy="static:1")
    futures = [ex.submit(abs, -i) for i in range(20)]
    ex.shutdown(wait=False)
    assert [f.result(timeout=TIMEOUT) for f in futures] == list(range(20))


def test_shutdown_cancel_futures_cancels_only_the_queued():
    gate = threading.Event()
    ex = tact.AdaptiveExecutor(4, policy="static:1")
    first = ex.submit(gate.wait, TIMEOUT)
    rest = [ex.submit(abs, -i) for i in range(5)]
    # The first holds the only slot, so the rest are queued.
    assert ex.queued == 5
    threading.Timer(0.05, gate.set).start()
    ex.shutdown(wait=True, cancel_futures=True)
    assert first.result() is True
    assert all(f.cancelled() for f in rest)
    with pytest.raises(CancelledError):
        rest[0].result()


def test_a_cancelled_queued_future_is_skipped():
    gate = threading.Event()
    with tact.AdaptiveExecutor(4, policy="static:1") as ex:
        first = ex.submit(gate.wait, TIMEOUT)
        skipped = ex.submit(abs, -1)
        kept = ex.submit(abs, -2)
        assert skipped.cancel()
        gate.set()
        assert kept.result(timeout=TIMEOUT) == 2
    assert first.result() is True and skipped.cancelled()


def test_process_map():
    with tact.AdaptiveExecutor(2, kind="process", policy="static:2") as ex:
        assert list(ex.map(abs, range(-10, 0), timeout=TIMEOUT)) == list(range(10, 0, -1))


def test_bad_kind():
    with pytest.raises(ValueError, match="kind"):
        tact.AdaptiveExecutor(4, kind="fiber")


# AdaptiveSemaphore


def test_semaphore_bounds_concurrency_by_the_target():
    async def main() -> int:
        sem = tact.AdaptiveSemaphore(16, policy="static:3")
        running = peak = 0

        async def task() -> None:
            nonlocal running, peak
            async with sem:
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0.001)
                running -= 1

        await asyncio.wait_for(asyncio.gather(*(task() for _ in range(40))), TIMEOUT)
        assert sem.held == 0 and sem.queued == 0
        return peak

    # All 40 start in one loop iteration: three take a permit, the rest wait.
    assert asyncio.run(main()) == 3


def test_semaphore_counts_a_body_that_raised_as_failed_not_completed():
    async def main() -> tact.ControllerStatus:
        sem = tact.AdaptiveSemaphore(8, n_init=2)
        for i in range(6):
            with pytest.raises(ConnectionError):
                async with sem:
                    raise ConnectionError(i)
        async with sem:
            pass
        await sem.acquire()
        sem.release(failed=True)
        assert sem.held == 0
        return sem.status()

    s = asyncio.run(main())
    assert (s["failed"], s["completed"]) == (7, 1)

    # As for the executor: 300 failures give TCC no sample and no decision.
    async def failing() -> tact.AdaptiveSemaphore:
        sem = tact.AdaptiveSemaphore(8, n_init=2, batch_min=1, n_star=3)

        async def task() -> None:
            async with sem:
                await asyncio.sleep(0.002)
                raise ConnectionError("overloaded")

        await asyncio.gather(*(task() for _ in range(300)), return_exceptions=True)
        return sem

    sem = asyncio.run(failing())
    s = sem.status()
    assert (s["failed"], s["completed"], s["samples"], s["batches"]) == (300, 0, 0, 0)
    assert (sem.trace(), sem.targets) == ([], [(0.0, 2)])


def test_semaphore_waiters_proceed_in_order():
    async def main() -> None:
        sem = tact.AdaptiveSemaphore(4, policy="static:1")
        order = []
        await sem.acquire()

        async def task(i: int) -> None:
            async with sem:
                order.append(i)
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(task(i)) for i in range(10)]
        await asyncio.sleep(0)
        assert sem.queued == 10 and sem.locked()
        sem.release()
        await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        assert order == list(range(10))

    asyncio.run(main())


def test_semaphore_cancelled_waiter_loses_no_permit():
    async def main() -> None:
        sem = tact.AdaptiveSemaphore(4, policy="static:1")
        await sem.acquire()
        waiting = asyncio.create_task(sem.acquire())
        after = asyncio.create_task(sem.acquire())
        await asyncio.sleep(0)
        assert sem.queued == 2
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert sem.queued == 1
        sem.release()
        assert await asyncio.wait_for(after, TIMEOUT) is True
        assert sem.held == 1
        sem.release()
        assert sem.held == 0 and not sem.locked()
        with pytest.raises(ValueError):
            sem.release()

    asyncio.run(main())


def test_semaphore_with_tcc_keeps_within_targets():
    async def main() -> None:
        sem = tact.AdaptiveSemaphore(8, n_init=2, n_star=5, batch_min=4, dwell=0.2)
        running = 0
        violations = []

        async def task() -> None:
            nonlocal running
            async with sem:
                running += 1
                bound = max(t for _, t in sem.targets)
                if running > bound:
                    violations.append((running, bound))
                await asyncio.sleep(0.001)
                running -= 1

        await asyncio.wait_for(asyncio.gather(*(task() for _ in range(600))), TIMEOUT)
        assert violations == []
        assert all(1 <= t <= 8 for _, t in sem.targets)
        assert sem.status()["policy"] == "tcc"

    asyncio.run(main())


# The bottleneck hint


def hinted_workload():
    """A service whose throughput with n calls in flight is 500 (1 - e^(-n/8)) per second: a 25%
    step gains less than TCC's q = 14% from about 8 calls on, where the paper stops. Returns the
    task (it sleeps its service time) and TCC's parameters for short measurements."""

    def task(pool) -> None:
        n = max(1, pool.in_flight)
        time.sleep(n / (500.0 * (1.0 - math.exp(-n / 8.0))))

    params = dict(n_init=4, n_star=5, batch_min=4, dwell=1.0, max_dwell=1.0)
    return task, params


def run_until(ex: tact.AdaptiveExecutor, task, done, timeout: float = TIMEOUT) -> List[dict]:
    """Keeps the executor's queue full until done(status) holds; returns the statuses seen."""
    seen: List[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        status = ex.status()
        seen.append(status)
        if done(status):
            return seen
        assert time.monotonic() < deadline, f"timed out: {status}, targets {ex.targets}"
        while ex.queued < 32:
            ex.submit(task, ex)
        time.sleep(0.01)


def test_executor_takes_steps_below_q_while_a_callable_reports_low_utilization():
    task, params = hinted_workload()
    threads = []

    def source() -> float:
        threads.append(threading.current_thread().name)
        return 0.3

    ex = tact.AdaptiveExecutor(24, bottleneck=source, **params)
    try:
        seen = run_until(ex, task, lambda s: s["hinted"] > 0)
        if all(s["utilization"] is None for s in seen):  # polls too rare on a loaded machine
            seen += run_until(ex, task, lambda s: s["utilization"] is not None)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    # The source ran on the executor's ticker thread only.
    assert threads and set(threads) == {"tact-executor-tick"}
    means = [s["utilization"] for s in seen if s["utilization"] is not None]
    assert means and all(u == pytest.approx(0.3) for u in means), means
    # The hinted step is a "better" that the paper's rule would have refused (or a steady state
    # below the target that climbs again: "room").
    hinted = [t for t in ex.trace() if t["hinted"]]
    reasons = ("better", "ceiling", "lost", "room")
    assert hinted and all(t["reason"] in reasons for t in hinted), hinted
    assert all(1 <= t <= 24 for _, t in ex.targets)


def test_executor_reads_a_cpu_bottleneck():
    task, params = hinted_workload()
    # Long dwell: the first configuration is measured throughout, so its mean shows.
    params.update(dwell=30.0, max_dwell=30.0)
    ex = tact.AdaptiveExecutor(8, bottleneck="cpu:0", **params)
    try:
        status = run_until(ex, task, lambda s: s["utilization"] is not None)[-1]
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    assert 0.0 <= status["utilization"] <= 1.0
    assert tact._tact.Bottleneck(" cpu:0 ").spec == "cpu:0"


@pytest.mark.parametrize("spec", ["gpu:0", "cpu:x", "disk:", "net:eth0", "psi:disk"])
def test_a_malformed_bottleneck_raises_value_error_naming_the_forms(spec):
    with pytest.raises(ValueError, match="net:IF@RATE"):
        tact.AdaptiveExecutor(4, bottleneck=spec)
    with pytest.raises(ValueError, match="net:IF@RATE"):
        tact.AdaptiveSemaphore(4, bottleneck=spec)


def test_a_missing_device_raises_before_any_worker_starts():
    before = {t.name for t in threading.enumerate()}
    for spec, words in [
        ("disk:no-such-disk-tact", "this machine has"),
        ("net:no-such-if-tact@1gbit,rx", "lo"),
        ("cpu:100000", "cpu100000"),
    ]:
        with pytest.raises(ValueError, match=words):
            tact.AdaptiveExecutor(4, bottleneck=spec)
    # Threads of earlier tests may end meanwhile, but none begins.
    assert {t.name for t in threading.enumerate()} <= before
    with pytest.raises(TypeError, match="bottleneck must be"):
        tact.AdaptiveExecutor(4, bottleneck=0.5)


def test_a_failing_source_warns_once_and_the_pool_goes_on():
    calls = []

    def source() -> float:
        calls.append(1)
        raise OSError("gone")

    with pytest.warns(RuntimeWarning, match="gone") as warned:
        with tact.AdaptiveExecutor(4, bottleneck=source, n_init=2) as ex:
            deadline = time.monotonic() + TIMEOUT
            while len(calls) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert ex.submit(abs, -3).result(timeout=TIMEOUT) == 3
    assert len([w for w in warned if issubclass(w.category, RuntimeWarning)]) == 1
    assert ex.status()["utilization"] is None and ex.status()["hinted"] == 0


def test_semaphore_reports_a_callable_bottleneck():
    async def main() -> dict:
        sem = tact.AdaptiveSemaphore(8, bottleneck=lambda: 0.3, n_init=2, dwell=30.0)

        async def task() -> None:
            async with sem:
                await asyncio.sleep(0.005)

        async def load() -> None:
            while True:
                await asyncio.gather(*(task() for _ in range(16)))

        loader = asyncio.create_task(load())
        deadline = time.monotonic() + TIMEOUT
        try:
            while sem.status()["utilization"] is None:
                assert time.monotonic() < deadline, sem.status()
                await asyncio.sleep(0.05)
        finally:
            loader.cancel()
        return sem.status()

    assert asyncio.run(main())["utilization"] == pytest.approx(0.3)


def test_controller_takes_hints():
    c = tact.Controller(n_init=2, n_max=8)
    assert c.on_hint(0.1, 0.5) is None
    assert c.status()["hinted"] == 0
    with pytest.raises(ValueError, match="utilization"):
        c.on_hint(0.2, float("nan"))
    assert tact.Controller("aimd", n_max=8).on_hint(0.1, 0.5) is None


# The gap rule, for a caller whose loads are a guess


def _blind(saturation_unseen: bool):
    """A controller fed as a caller that cannot see its pool feeds it: every load says all
    workers busy with work waiting, and one task ends every 10 ms, past TCC's settling."""
    c = tact.Controller(n_init=2, n_max=8, saturation_unseen=saturation_unseen)
    now = 0.0
    c.on_start(now, 2, 1)
    for _ in range(60):
        now += 0.01
        c.on_complete(now, c.target, 1)
    return c, now


def test_a_long_pause_is_starvation_only_when_the_caller_says_its_loads_are_a_guess():
    """A pause of 100 mean gaps with the loads still saying "saturated": by the caller's word
    it is a second of busy time; with ``saturation_unseen=True`` it is starvation (more than ten
    mean gaps), with no busy time, and the pace after it counts again."""
    for unseen in (False, True):
        c, now = _blind(unseen)
        busy = c.status()["busy"]
        assert c.status()["saturated"]
        c.on_tick(now + 0.5)
        assert c.status()["saturated"] is not unseen, unseen
        now += 1.0
        c.on_complete(now, c.target, 1)
        paused = c.status()["busy"] - busy
        if unseen:
            assert paused == 0.0
        else:
            assert paused == pytest.approx(1.0)
        busy = c.status()["busy"]
        c.on_complete(now + 0.01, c.target, 1)
        assert c.status()["busy"] - busy == pytest.approx(0.01), unseen
    # Baselines have no busy clock: they accept the option and ignore it.
    c = tact.Controller("static:3", n_max=8, saturation_unseen=True)
    assert c.status() == {"policy": "static:3", "target": 3}


# PSI as a saturation hint

HAS_PSI = os.path.exists("/proc/pressure/memory") and os.path.exists("/proc/pressure/io")


def test_status_and_trace_show_psi():
    c = tact.Controller(n_init=2, n_max=8)
    status = c.status()
    assert status["psi"] == 0 and status["pressure"] is None
    # Psi off: the reading is kept and shown, but decides nothing, and nothing is read.
    assert c.on_pressure(0.1, io_full=0.5) is None
    assert c.status()["pressure"] == {"memory_some": 0.0, "memory_full": 0.0, "io_full": 0.5}
    assert c.read_pressure() is None and not c.psi
    with pytest.raises(ValueError, match="memory_full"):
        c.on_pressure(0.2, memory_full=float("inf"))
    assert tact.Controller("aimd", n_max=8).on_pressure(0.1, io_full=0.9) is None


def test_io_stalls_revoke_add_steps_of_a_controller_driven_by_hand():
    """Throughput proportional to the count, so every add step passes the throughput test; io
    ``full`` at 50% (above psi_full, 5%) revokes them, and the transitions say ``psi``."""
    c = tact.Controller(n_init=2, n_max=16, psi=True, n_star=5, batch_min=4, dwell=5.0)
    now = 0.0
    for _ in range(100_000):
        n = c.target
        now += 1.0 / (100.0 * n)
        c.on_complete(now, n, 1, n / 100.0)
        # A reading per completion: each configuration's measurement has fresh ones.
        c.on_pressure(now, io_full=0.5)
        if c.status()["psi"] > 0:
            break
    status = c.status()
    assert status["psi"] > 0, status
    trace = c.drain_trace()
    assert all(isinstance(t["psi"], bool) for t in trace)
    revoked = [t for t in trace if t["psi"]]
    assert revoked and all(
        t["from"] == "add" and t["target_to"] < t["target_from"] for t in revoked
    ), trace


@pytest.mark.skipif(not HAS_PSI, reason="this kernel has no /proc/pressure")
def test_executor_with_psi_reads_the_machines_pressure():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PSI is there: no "PSI is off" warning
        ex = tact.AdaptiveExecutor(4, n_init=2, psi=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while ex.status()["pressure"] is None:
            assert time.monotonic() < deadline, ex.status()
            assert ex.submit(abs, -3).result(timeout=TIMEOUT) == 3
            time.sleep(0.05)
    finally:
        ex.shutdown(wait=True)
    pressure = ex.status()["pressure"]
    assert set(pressure) == {"memory_some", "memory_full", "io_full"}
    assert all(0.0 <= v <= 1.0 for v in pressure.values()), pressure
    # A spec turns it on too, as for `tact tune`.
    assert tact.Controller("tcc:psi=1", n_max=8).psi
    assert not tact.Controller("tcc", n_max=8).psi


def semaphore_status_once_it_read_psi(**params) -> dict:
    """The status() of an AdaptiveSemaphore with psi=True (and `params`) once its ticker has read
    PSI, running 8 short tasks at a time until then."""

    async def main() -> dict:
        sem = tact.AdaptiveSemaphore(8, n_init=2, psi=True, **params)

        async def task() -> None:
            async with sem:
                await asyncio.sleep(0.005)

        deadline = time.monotonic() + TIMEOUT
        while sem.status()["pressure"] is None:
            assert time.monotonic() < deadline, sem.status()
            await asyncio.gather(*(task() for _ in range(8)))
        return sem.status()

    return asyncio.run(main())


@pytest.mark.skipif(not HAS_PSI, reason="this kernel has no /proc/pressure")
def test_semaphore_with_psi_reads_the_machines_pressure():
    status = semaphore_status_once_it_read_psi()
    assert set(status["pressure"]) == {"memory_some", "memory_full", "io_full"}


#: A cgroup's pressure lines: memory and io ``some`` at 20%, ``full`` at 50%.
PRESSURE_LINES = (
    "some avg10=20.00 avg60=0.00 avg300=0.00 total=1\n"
    "full avg10=50.00 avg60=0.00 avg300=0.00 total=1\n"
)
FIXTURE_PRESSURE = {"memory_some": 0.2, "memory_full": 0.5, "io_full": 0.5}


def _cgroup_fixture(dir: Path) -> Path:
    """A directory with a cgroup v2 directory's memory.pressure and io.pressure."""
    dir.mkdir(exist_ok=True)
    for name in ("memory.pressure", "io.pressure"):
        (dir / name).write_text(PRESSURE_LINES)
    return dir


def test_a_psi_cgroup_is_read_instead_of_the_machines(tmp_path: Path):
    cg = _cgroup_fixture(tmp_path / "db.service")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the files read: no "PSI is off" warning
        c = tact.Controller(
            n_init=2, n_max=16, psi=True, psi_cgroup=cg, n_star=5, batch_min=4, dwell=5.0
        )
    assert c.psi
    assert c.status()["psi_source"] == f"cgroup {cg}"
    reading = c.read_pressure()
    assert reading == FIXTURE_PRESSURE
    # The cgroup's io ``full`` at 50% revokes the add steps the throughput would take, as in
    # the hand-driven test above: the reading read is the one that acts.
    now = 0.0
    for _ in range(100_000):
        n = c.target
        now += 1.0 / (100.0 * n)
        c.on_complete(now, n, 1, n / 100.0)
        c.on_pressure(now, **reading)
        if c.status()["psi"] > 0:
            break
    assert c.status()["pressure"] == FIXTURE_PRESSURE
    revoked = [t for t in c.drain_trace() if t["psi"]]
    assert revoked and all(t["from"] == "add" for t in revoked), c.status()
    # A str, and a spec turning psi on, as for the machine's.
    spec = tact.Controller("tcc:psi=1", n_max=8, psi_cgroup=str(cg))
    assert spec.psi and spec.status()["psi_source"] == f"cgroup {cg}"
    assert spec.read_pressure() == FIXTURE_PRESSURE
    # Without a directory, where PSI is read (or that it is not) is said too.
    assert tact.Controller(n_max=8).status()["psi_source"] is None
    if HAS_PSI:
        assert tact.Controller(n_max=8, psi=True).status()["psi_source"] == "/proc/pressure"


def test_a_psi_cgroup_that_cannot_be_used_is_refused(tmp_path: Path, monkeypatch):
    cg = _cgroup_fixture(tmp_path / "cg")
    for kwargs in [dict(), dict(psi=False), dict(policy="aimd"), dict(policy="static:2")]:
        with pytest.raises(ValueError, match=r"^psi_cgroup needs psi=True \(TCC\)$"):
            tact.Controller(n_max=8, psi_cgroup=cg, **kwargs)
    # Each missing file is named; a temporary directory is no cgroup v1 one.
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "memory.pressure").write_text(PRESSURE_LINES)
    for dir, file in [
        (empty, "memory.pressure"),
        (tmp_path / "absent", "memory.pressure"),
        (tmp_path / "half", "io.pressure"),
    ]:
        with pytest.raises(ValueError) as e:
            tact.Controller(n_max=8, psi=True, psi_cgroup=dir)
        msg = str(e.value)
        assert msg.startswith(f"psi_cgroup {dir}: reading PSI: {dir / file}: "), msg
        assert "cgroup v1" not in msg, msg
    (cg / "io.pressure").write_text("full avg10=oops\n")
    with pytest.raises(ValueError, match=r"io\.pressure:1: bad number for avg10"):
        tact.Controller(n_max=8, psi=True, psi_cgroup=cg)
    # Refused before anything is made: coordination's lock file is not.
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path / "run"))
    with pytest.raises(ValueError, match="psi_cgroup"):
        tact.Controller(n_max=8, psi=True, psi_cgroup=empty, coordinate="k")
    assert not (tmp_path / "run").exists()


def _mountinfo() -> List[List[str]]:
    """/proc/self/mountinfo's lines as (mount point, file system type)."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            mounts.append([pre.split(" ")[4], post.split(" ")[0]])
    return mounts


def test_a_cgroup_v1_directory_is_refused_pointing_at_the_unified_hierarchy():
    v1 = [Path(point) for point, kind in _mountinfo() if kind == "cgroup"]
    if not v1:
        pytest.skip("no cgroup v1 hierarchy here")
    # The hierarchy's root, and a directory in it that does not exist.
    for dir in [v1[0], v1[0] / f"tact-test-psicg-absent-{os.getpid()}"]:
        with pytest.raises(ValueError) as e:
            tact.Controller(n_max=8, psi=True, psi_cgroup=dir)
        msg = str(e.value)
        assert str(dir / "memory.pressure") in msg, msg
        assert f"{dir} is in a cgroup v1 hierarchy" in msg, msg
        assert "unified (cgroup2) hierarchy" in msg, msg


def test_the_processes_own_cgroup2_directory_is_read():
    mounts = [Path(point) for point, kind in _mountinfo() if kind == "cgroup2"]
    with open("/proc/self/cgroup") as f:
        own = [line.strip()[3:] for line in f if line.startswith("0::")]
    cg = mounts[0] / own[0].lstrip("/") if mounts and own else None
    if cg is None or not (cg / "memory.pressure").exists():
        pytest.skip("no cgroup v2 directory with pressure files here")
    c = tact.Controller(n_max=8, psi=True, psi_cgroup=cg)
    assert c.status()["psi_source"] == f"cgroup {cg}"
    reading = c.read_pressure()
    assert set(reading) == set(FIXTURE_PRESSURE)
    assert all(0.0 <= v <= 1.0 for v in reading.values()), reading


def test_the_pools_pass_psi_cgroup_to_their_controller(tmp_path: Path):
    cg = _cgroup_fixture(tmp_path / "cg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex = tact.AdaptiveExecutor(4, n_init=2, psi=True, psi_cgroup=cg)
    try:
        deadline = time.monotonic() + TIMEOUT
        # The ticker thread reads the fixture and reports it.
        while ex.status()["pressure"] is None:
            assert time.monotonic() < deadline, ex.status()
            assert ex.submit(abs, -3).result(timeout=TIMEOUT) == 3
            time.sleep(0.05)
    finally:
        ex.shutdown(wait=True)
    status = ex.status()
    assert status["pressure"] == FIXTURE_PRESSURE
    assert status["psi_source"] == f"cgroup {cg}"
    with pytest.raises(ValueError, match="psi_cgroup needs psi=True"):
        tact.AdaptiveExecutor(4, psi_cgroup=cg)

    status = semaphore_status_once_it_read_psi(psi_cgroup=str(cg))
    assert status["pressure"] == FIXTURE_PRESSURE
    assert status["psi_source"] == f"cgroup {cg}"
    (cg / "io.pressure").unlink()
    with pytest.raises(ValueError, match=r"psi_cgroup .*io\.pressure"):
        tact.AdaptiveSemaphore(8, psi=True, psi_cgroup=cg)


# Turns with other instances on one bottleneck (coordinate=KEY)


def test_two_controllers_on_one_key_take_turns(tmp_path: Path, monkeypatch):
    # The lock directory is $TACT_RUNTIME_DIR/tune: this test's own.
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    a = tact.Controller(n_init=2, n_max=8, coordinate="k")
    b = tact.Controller(n_init=2, n_max=8, coordinate="k")
    assert (tmp_path / "tune" / "k.lock").exists()
    # TCC's first cycle waits for a turn: the first to tick takes it, the other waits.
    a.on_tick(0.1)
    b.on_tick(0.1)
    b.on_tick(0.5)
    ta, tb = a.turns(0.5), b.turns(0.5)
    assert (ta["key"], ta["turns"], ta["holding"]) == ("k", 1, True)
    assert (tb["turns"], tb["holding"]) == (0, False)
    assert tb["waited"] == pytest.approx(0.4)
    # Completions reach the other controller on its next completion or tick, never one's own.
    assert (tmp_path / "tune" / "k.done").exists()
    for i in range(5):
        a.on_complete(0.5 + i / 100, 2, 0)
    b.on_complete(0.55, 2, 0)
    a.on_tick(0.6)
    counts = (a.turns(0.6)["peer_completions"], b.turns(0.6)["peer_completions"])
    assert counts == (1, 5)
    # The kernel drops a lock with its file: a controller gone gives the turn up.
    del a
    b.on_tick(0.6)
    tb = b.turns(0.6)
    assert (tb["turns"], tb["holding"]) == (1, True)
    assert tact.Controller(n_max=8).turns(0.0) is None


def test_bad_coordination_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    for kwargs, words in [
        (dict(coordinate="a/b"), "without '/'"),
        (dict(coordinate=".."), "without '/'"),
        (dict(coordinate="k", epoch=5.0), "epoch mode"),
        (dict(coordinate="k", coordinate_mode="lock"), "coordinate_mode"),
        (dict(epoch=5.0), "go with coordinate"),
    ]:
        with pytest.raises(ValueError, match=words):
            tact.Controller(n_max=8, **kwargs)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path / "file"))
    with pytest.raises(OSError, match="lock directory"):
        tact.Controller(n_max=8, coordinate="k")
    # Epoch mode takes no lock but shares completions through the same directory.
    with pytest.raises(OSError, match="lock directory"):
        tact.Controller(n_max=8, coordinate="e", coordinate_mode="epoch", epoch=0.5)
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    c = tact.Controller(n_max=8, coordinate="e", coordinate_mode="epoch", epoch=0.5)
    assert c.turns(0.0)["turns"] == 0
    assert (tmp_path / "tune" / "e.done").exists() and not (tmp_path / "tune" / "e.lock").exists()


def test_executor_takes_its_turn(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    with tact.AdaptiveExecutor(8, n_init=2, coordinate="ex") as ex:
        assert ex.turns()["key"] == "ex"
        # Nobody else holds the key: the ticker grants TCC's first cycle at its first tick.
        deadline = time.monotonic() + TIMEOUT
        while ex.turns()["turns"] == 0 and time.monotonic() < deadline:
            ex.submit(time.sleep, 0.01).result()
        assert ex.turns()["turns"] == 1
    with tact.AdaptiveExecutor(8) as ex:
        assert ex.turns() is None


def exploring(turns: dict, status: dict) -> bool:
    """Measuring a cycle: granted its first turn (before it, TCC waits at n_init) and not in
    Steady."""
    return turns["turns"] > 0 and status["phase"] != "steady"


#: No throughput shift ends a steady state (with SETTLING's tiny windows, noise would): a cycle
#: that comes due before the host's next check starts on the turn the pool still holds, so
#: noisy shifts would keep one pool cycling on its turn and leave the other waiting.
NO_SHIFT = dict(shift=1000.0, shift_hard=1000.0)


def test_two_semaphores_on_one_key_never_explore_at_once(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    params = dict(n_init=4, coordinate="sem", **SETTLING, **NO_SHIFT)

    async def main() -> list:
        sems = [tact.AdaptiveSemaphore(4, **params) for _ in range(2)]
        # Each sample: per semaphore (holding, exploring), after every task.
        samples = []
        done = asyncio.Event()

        def sample() -> None:
            states = [(s.turns(), s.status()) for s in sems]
            samples.append([(t["holding"], exploring(t, st)) for t, st in states])
            if all(t["turns"] == 1 and st["phase"] == "steady" for t, st in states):
                done.set()

        async def worker(sem: tact.AdaptiveSemaphore) -> None:
            while not done.is_set():
                async with sem:
                    await asyncio.sleep(0.002)
                sample()

        assert sems[0].turns()["key"] == "sem"
        await asyncio.wait_for(
            asyncio.gather(*(worker(s) for s in sems for _ in range(6))), TIMEOUT
        )
        return samples

    samples = asyncio.run(main())
    assert not any(a[0] and b[0] for a, b in samples), "both held the turn"
    assert not any(a[1] and b[1] for a, b in samples), "both explored at once"
    # Each took its turn while the other waited: one explored first, then the other.
    assert any(a[1] for a, _ in samples) and any(b[1] for _, b in samples)
    assert tact.AdaptiveSemaphore(4).turns() is None


# Warm start per workload key (key=NAME)

#: TCC that goes Base -> Max -> Steady at its only count (n_init = n_max, no Remove): a steady
#: count that does not depend on the throughput it measures.
SETTLING = dict(remove=False, n_star=3, batch_min=1, dwell=0.1, max_dwell=0.1)


def _record(key_dir: Path, key: str) -> dict:
    import json

    return json.loads((key_dir / f"{key}.json").read_text())


def test_a_settled_executor_records_its_count_and_the_next_starts_from_it(tmp_path: Path):
    with tact.AdaptiveExecutor(4, n_init=4, key="thumbs", key_dir=tmp_path, **SETTLING) as ex:
        assert ex.status()["warm"] is None
        deadline = time.monotonic() + TIMEOUT
        while ex.status()["phase"] != "steady":
            assert time.monotonic() < deadline, ex.status()
            wait([ex.submit(time.sleep, 0.001) for _ in range(20)])
        assert ex.status()["steady_count"] == 4
    assert _record(tmp_path, "thumbs")["steady_count"] == 4
    # The next executor with the key starts TCC's first cycle at 4's cut (3), not at n_init 1.
    with tact.AdaptiveExecutor(16, n_init=1, key="thumbs", key_dir=tmp_path) as ex:
        assert ex.status()["warm"] == 4
        assert ex.targets == [(0.0, 3)]
    # So does a semaphore; one of at most 2 permits lowers the count; a warm of one's own wins.
    assert tact.AdaptiveSemaphore(16, n_init=1, key="thumbs", key_dir=tmp_path).target == 3
    small = tact.Controller(n_init=1, n_max=2, key="thumbs", key_dir=tmp_path)
    assert small.status()["warm"] == 2
    own = tact.Controller(n_init=1, n_max=16, warm=8, key="thumbs", key_dir=tmp_path)
    assert own.status()["warm"] == 8
    assert tact.Controller(n_max=16, warm=None).status()["warm"] is None
    with pytest.raises(TypeError, match="warm must be an integer"):
        tact.Controller(n_max=16, warm="8")
    # A tcc spec with a key is TCC too.
    spec = tact.Controller("tcc:q=0.14", n_init=1, n_max=16, key="thumbs", key_dir=tmp_path)
    assert spec.status()["warm"] == 4


def test_a_settled_semaphore_records_its_count_and_the_next_starts_from_it(tmp_path: Path):
    async def settle() -> dict:
        sem = tact.AdaptiveSemaphore(4, n_init=4, key="pages", key_dir=tmp_path, **SETTLING)
        assert sem.status()["warm"] is None

        async def worker() -> None:
            while sem.status()["phase"] != "steady":
                async with sem:
                    await asyncio.sleep(0.001)

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(8))), TIMEOUT)
        return sem.status()

    assert asyncio.run(settle())["steady_count"] == 4
    assert _record(tmp_path, "pages")["steady_count"] == 4
    # The next semaphore with the key starts TCC's first cycle at 4's cut (3), not at n_init 1.
    sem = tact.AdaptiveSemaphore(16, n_init=1, key="pages", key_dir=tmp_path)
    assert sem.status()["warm"] == 4
    assert sem.targets == [(0.0, 3)]


def test_a_key_defaults_to_the_state_directory(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    keys = tmp_path / "tact" / "tune"
    keys.mkdir(parents=True)
    (keys / "hand.json").write_text('{"steady_count": 6, "command": "by hand"}')
    c = tact.Controller(n_init=1, n_max=16, key="hand")
    assert c.status()["warm"] == 6
    assert c.target == 4  # 6's cut


def test_bad_keys_are_refused(tmp_path: Path):
    for kwargs, words in [
        (dict(key="../escape"), "is not a key"),
        (dict(key=".hidden"), "is not a key"),
        (dict(key="a b"), "is not a key"),
        (dict(key_dir=str(tmp_path)), "key_dir goes with key"),
        (dict(policy="aimd", key="k"), "warm start is TCC's"),
        (dict(policy="static:2", key="k"), "warm start is TCC's"),
    ]:
        with pytest.raises(ValueError, match=words):
            tact.Controller(n_max=8, key_dir=kwargs.pop("key_dir", tmp_path), **kwargs)
    with pytest.raises(ValueError, match="is not a key"):
        tact.AdaptiveExecutor(4, key="a/b", key_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _settle(c: tact.Controller) -> None:
    """Saturated completions 1 ms apart until TCC is in Steady."""
    for i in range(1, 5000):
        c.on_complete(i / 1000, c.target, 10)
        if c.status()["phase"] == "steady":
            return
    raise AssertionError(c.status())


def test_a_store_that_fails_warns_and_never_fails_the_controller(tmp_path: Path):
    (tmp_path / "bad.json").write_text("seven")
    with pytest.warns(RuntimeWarning, match="ignoring .*bad.json.*starting cold"):
        c = tact.Controller(n_init=2, n_max=2, key="bad", key_dir=tmp_path, **SETTLING)
    assert c.status()["warm"] is None
    _settle(c)
    assert _record(tmp_path, "bad")["steady_count"] == 2, "replaced at the first Steady"

    (tmp_path / "file").write_text("")
    with pytest.warns(RuntimeWarning, match="cannot read it"):
        c = tact.Controller(n_init=2, n_max=2, key="lost", key_dir=tmp_path / "file", **SETTLING)
    with pytest.warns(RuntimeWarning, match="cannot record key lost"):
        _settle(c)
    # Told once: the controller goes on unrecorded.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(5000, 5100):
            c.on_complete(i / 1000, c.target, 10)
    assert (tmp_path / "file").read_text() == ""
