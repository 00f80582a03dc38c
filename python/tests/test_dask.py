"""tact.dask.AdaptiveSubmitter on an in-process Dask cluster (the workers are threads of this
process, so tasks can count how many of them run at once)."""

import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

distributed = pytest.importorskip("distributed")

from tact.dask import AdaptiveSubmitter  # noqa: E402

#: Generous: a loaded 2-core machine can be many times slower than an idle one.
TIMEOUT = 60


@pytest.fixture(scope="module")
def client() -> Iterator["distributed.Client"]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as client:
        yield client


class Meter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def enter(self) -> int:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            return self.running

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


# Dask pickles task functions even for thread workers: the tasks are module-level functions
# (pickled by name) that reach the test's state through these globals.
METER = Meter()
VIOLATIONS: list = []
SUBMITTER: list = []
GATE = threading.Event()


def collect(sub: AdaptiveSubmitter) -> list:
    """Iterates with a deadline, so that a hang fails the test rather than the run."""
    out = []
    deadline = time.monotonic() + TIMEOUT
    for result in sub:
        out.append(result)
        assert time.monotonic() < deadline, "the submitter did not finish in time"
    return out


def metered(i: int) -> int:
    sub = SUBMITTER[0]
    running = METER.enter()
    try:
        # A task runs only once submitted; the submitter submits only below the target, and
        # after a shrink lets the surplus finish: the bound is the largest target so far.
        bound = max(t for _, t in sub.targets)
        if running > bound or sub.in_flight > bound:
            VIOLATIONS.append((running, sub.in_flight, bound))
        time.sleep(0.002)
    finally:
        METER.leave()
    return i * i


@pytest.mark.parametrize("policy", ["static:3", "tcc"])
def test_all_results_and_in_flight_within_target(client, policy):
    global METER
    METER = Meter()
    VIOLATIONS.clear()
    params = dict(n_init=2, n_star=5, batch_min=4, dwell=0.2) if policy == "tcc" else {}
    sub = AdaptiveSubmitter(client, metered, range(200), policy=policy, max_in_flight=8, **params)
    SUBMITTER[:] = [sub]
    results = collect(sub)
    assert sorted(results) == [i * i for i in range(200)]
    assert VIOLATIONS == []
    assert sub.in_flight == 0
    assert all(1 <= t <= 8 for _, t in sub.targets)
    if policy == "static:3":
        assert METER.peak <= 3 and sub.targets == [(0.0, 3)]


def fail_at_five(i: int) -> int:
    if i == 5:
        raise ValueError("five")
    return i


def test_a_failing_task_raises_in_turn_and_iteration_goes_on(client):
    sub = AdaptiveSubmitter(client, fail_at_five, range(20), policy="static:2")
    results, errors = [], []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            results.append(next(sub))
        except StopIteration:
            break
        except ValueError as e:
            errors.append(str(e))
    assert errors == ["five"]
    assert sorted(results) == [i for i in range(20) if i != 5]


def test_a_failing_input_is_raised_to_the_consumer(client):
    def items() -> Iterator[int]:
        yield 1
        raise KeyError("input")

    with AdaptiveSubmitter(client, abs, items(), policy="static:2") as sub:
        with pytest.raises(KeyError):
            collect(sub)


def gated(i: int) -> int:
    GATE.wait(TIMEOUT)
    return i


def test_a_task_that_does_not_serialize_is_raised_to_the_consumer(client):
    lock = threading.Lock()
    with AdaptiveSubmitter(client, lambda i: lock, range(3), policy="static:2") as sub:
        with pytest.raises(TypeError):
            collect(sub)


def test_close_cancels_what_is_in_flight(client):
    GATE.clear()
    with AdaptiveSubmitter(client, gated, range(100), policy="static:2") as sub:
        iterator = iter(sub)
        first = threading.Thread(target=lambda: next(iterator, None))
        first.start()
        deadline = time.monotonic() + TIMEOUT
        while sub.in_flight < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sub.in_flight == 2
    assert sub.in_flight == 0
    GATE.set()
    first.join(TIMEOUT)
    assert not first.is_alive()
    assert list(sub) == []


def test_bad_client_and_params(client):
    with pytest.raises(TypeError, match="distributed.Client"):
        AdaptiveSubmitter(object(), abs, [])
    with pytest.raises(ValueError, match="condition"):
        AdaptiveSubmitter(client, abs, [], p=0.5, q=0.1)


def test_missing_distributed_gives_a_clear_error():
    # A fresh interpreter where importing distributed fails; `import tact` itself must work.
    program = (
        "import sys\n"
        "sys.modules['distributed'] = None\n"
        "import tact, tact.dask\n"
        "try:\n"
        "    tact.dask.AdaptiveSubmitter(None, abs, [])\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'distributed'" in out.stdout


def slow_square(i: int) -> int:
    time.sleep(0.25)
    return i * i


def test_the_bottleneck_is_read_on_the_consumers_ticks(client):
    threads = []

    def source() -> float:
        threads.append(threading.current_thread().name)
        return 0.3

    # Tasks of 250 ms: the consumer waits past its 100 ms ticks, and each tick reads the source.
    sub = AdaptiveSubmitter(
        client, slow_square, range(6), max_in_flight=2, n_init=2, bottleneck=source
    )
    assert sorted(collect(sub)) == [i * i for i in range(6)]
    assert threads and set(threads) == {threading.current_thread().name}
    with pytest.raises(ValueError, match="net:IF@RATE"):
        AdaptiveSubmitter(client, abs, [], bottleneck="gpu:0")
