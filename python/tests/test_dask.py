"""tact.dask.AdaptiveSubmitter on an in-process Dask cluster (the workers are threads of this
process, so tasks can count how many of them run at once)."""

import itertools
import json
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


def drain(sub, error):
    """Every result the submitter yields and every `error` it raises, until it ends (or TIMEOUT)."""
    results, errors = [], []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            results.append(next(sub))
        except StopIteration:
            break
        except error as e:
            errors.append(e)
    return results, errors


def test_a_failing_task_raises_in_turn_and_iteration_goes_on(client):
    sub = AdaptiveSubmitter(client, fail_at_five, range(20), policy="static:2")
    results, errors = drain(sub, ValueError)
    assert [str(e) for e in errors] == ["five"]
    assert sorted(results) == [i for i in range(20) if i != 5]


def fail_odd(i: int) -> int:
    if i % 2:
        raise ConnectionError("overloaded")
    return i


def test_a_failing_task_is_failed_work_not_a_completion(client):
    sub = AdaptiveSubmitter(client, fail_odd, range(20), n_init=2, max_in_flight=4)
    results, errors = drain(sub, ConnectionError)
    assert (sorted(results), len(errors)) == (list(range(0, 20, 2)), 10)
    s = sub.status()
    assert (s["completed"], s["failed"]) == (10, 10)


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


def tiny(i: int) -> int:
    time.sleep(0.001)
    return i


#: TCC that goes Base -> Max -> Steady at its only count (as test_tune.py's SETTLING).
SETTLING = dict(remove=False, n_star=3, batch_min=1, dwell=0.1, max_dwell=0.1)
#: ... and stays there (test_tune.py's NO_SHIFT says why).
SETTLING_ONCE = dict(SETTLING, shift=1000.0, shift_hard=1000.0)


def test_a_settled_submitter_records_its_count_and_the_next_starts_from_it(client, tmp_path):
    keyed = dict(key="rows", key_dir=tmp_path, **SETTLING)
    with AdaptiveSubmitter(
        client, tiny, itertools.count(), max_in_flight=4, n_init=4, **keyed
    ) as sub:
        assert sub.status()["warm"] is None
        deadline = time.monotonic() + TIMEOUT
        for _ in sub:
            if sub.status()["phase"] == "steady":
                break
            assert time.monotonic() < deadline, sub.status()
        assert sub.status()["steady_count"] == 4
    assert json.loads((tmp_path / "rows.json").read_text())["steady_count"] == 4
    # The next submitter with the key starts TCC's first cycle at 4's cut (3), not at n_init 1.
    sub = AdaptiveSubmitter(
        client, abs, [], max_in_flight=16, n_init=1, key="rows", key_dir=tmp_path
    )
    assert sub.status()["warm"] == 4
    assert sub.targets == [(0.0, 3)]


def test_two_submitters_on_one_key_never_explore_at_once(client, tmp_path, monkeypatch):
    monkeypatch.setenv("TACT_RUNTIME_DIR", str(tmp_path))
    subs = [
        AdaptiveSubmitter(
            client, tiny, itertools.count(), max_in_flight=4, n_init=4, coordinate="d",
            **SETTLING_ONCE,
        )
        for _ in range(2)
    ]
    assert subs[0].turns()["key"] == "d"
    stop = threading.Event()

    def consume(sub: AdaptiveSubmitter) -> None:
        # Results come every few ms, far more often than the 100 ms ticks: the consumer must
        # tick all the same for the turns to move.
        with sub:
            for _ in sub:
                if stop.is_set():
                    return

    consumers = [threading.Thread(target=consume, args=(s,)) for s in subs]
    for c in consumers:
        c.start()

    def state(sub: AdaptiveSubmitter) -> tuple:
        """(holding, exploring: granted and not in Steady), and whether it is done."""
        t, st = sub.turns(), sub.status()
        steady = st["phase"] == "steady"
        return (t["holding"], t["turns"] > 0 and not steady), t["turns"] == 1 and steady

    # The consumers change the states meanwhile, and each submitter holds and explores once, in
    # one stretch: the first is read before and after the second, and counts as holding or
    # exploring only if it did at both reads, so an overlap is one the sample saw.
    samples = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            (a1, a_done), (b, b_done), (a2, _) = state(subs[0]), state(subs[1]), state(subs[0])
            samples.append([(a1[0] and a2[0], a1[1] and a2[1]), b])
            if a_done and b_done:
                break
            assert time.monotonic() < deadline, samples[-1]
            time.sleep(0.002)
    finally:
        stop.set()
        for c in consumers:
            c.join(TIMEOUT)
    assert not any(a[0] and b[0] for a, b in samples), "both held the turn"
    assert not any(a[1] and b[1] for a, b in samples), "both explored at once"
    assert any(a[1] for a, _ in samples) and any(b[1] for _, b in samples)
    assert AdaptiveSubmitter(client, abs, []).turns() is None
