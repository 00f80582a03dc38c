"""Regulation seen from Python: suspension on a rate drop, turns between threads, priorities, the
GIL released while waiting, Regulator objects, and targets that persist between runs.

Each program runs in a fresh interpreter with 20 ms testpoints. Assertions are about states and
orderings with wide margins, as the machine may be loaded."""


def test_rate_drop_is_suspended(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=10, probation=0, state_dir=STATE)

        def work(seconds, per_ms):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                spin(0.001)
                tact.testpoint(0, per_ms)

        work(1.0, 20)
        before = tact.stats()
        work(1.5, 1)       # the same work now yields a twentieth of the progress
        report(before=before, after=tact.stats())
        """
    )
    before, after = out["before"], out["after"]
    assert before["phase"] == "regulated", before
    assert after["suspensions"] > before["suspensions"], out
    assert after["suspended"] > before["suspended"], out
    assert after["testpoints"] > before["testpoints"] > 10, out


def test_phases_alternate_without_errors(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=5, probation=0, state_dir=STATE)
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            spin(0.0005)
            tact.testpoint(0, 4096)
            spin(0.0005)
            tact.testpoint(1, 3, 1)
        report(stats=tact.stats())
        """
    )
    assert out["stats"]["testpoints"] >= 5, out
    assert out["stats"]["phase"] == "regulated", out


def test_threads_take_turns(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=1000, state_dir=STATE)
        lock = threading.Lock()
        inside, peak = 0, 0
        turns = [0, 0]
        stop = time.monotonic() + 1.0

        def worker(k):
            global inside, peak
            tact.testpoint(0, 1)
            while time.monotonic() < stop:
                with lock:
                    inside += 1
                    peak = max(peak, inside)
                time.sleep(0.002)      # releases the GIL: only tact keeps the other thread out
                with lock:
                    inside -= 1
                turns[k] += 1
                tact.testpoint(0, 1)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report(peak=peak, turns=turns)
        """
    )
    assert out["peak"] == 1, out
    assert min(out["turns"]) > 0, out


def test_higher_priority_gets_more_turns(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=1000, state_dir=STATE)
        turns, waited = {}, {}
        stop = time.monotonic() + 1.0

        def worker(name, priority):
            tact.set_priority(priority)
            tact.testpoint(0, 1)
            n = 0
            while time.monotonic() < stop:
                time.sleep(0.002)
                n += 1
                tact.testpoint(0, 1)
            turns[name] = n
            waited[name] = tact.stats()["waited"]

        threads = [threading.Thread(target=worker, args=a) for a in [("low", 0), ("high", 5)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report(turns=turns, waited=waited)
        """
    )
    turns, waited = out["turns"], out["waited"]
    assert turns["high"] > 3 * max(turns["low"], 1), out
    assert waited["low"] > 0.5 > waited["high"], out


def test_gil_is_released_while_waiting_for_a_turn(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=1000, state_dir=STATE)
        holding, done, through = threading.Event(), threading.Event(), threading.Event()

        def holder():
            tact.testpoint(0, 1)     # takes the run token and keeps it until the thread exits
            holding.set()
            done.wait()

        def waiter():
            tact.testpoint(0, 1)     # waits for the holder's turn to end
            through.set()

        h = threading.Thread(target=holder)
        h.start()
        holding.wait()
        w = threading.Thread(target=waiter)
        w.start()
        time.sleep(0.1)
        count, end = 0, time.monotonic() + 0.3
        while time.monotonic() < end:  # needs the GIL, which the waiting thread must not keep
            count += 1
        waiting = not through.is_set()
        done.set()
        h.join()
        w.join()
        report(count=count, waiting=waiting)
        """
    )
    assert out["waiting"], out
    assert out["count"] > 10_000, out


def test_regulator_context_manager_frees_its_turn(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=1000, state_dir=STATE)
        through = threading.Event()

        def other():
            tact.testpoint(0, 1)
            through.set()

        with tact.Regulator(priority=2) as r:
            r.testpoint(0, 1)            # takes the run token
            t = threading.Thread(target=other)
            t.start()
            time.sleep(0.2)
            blocked = not through.is_set()
            stats, priority = r.stats(), r.priority
        start = time.monotonic()
        through.wait(30)
        latency = time.monotonic() - start
        t.join()
        errors = []
        try:
            r.testpoint(0, 1)
        except RuntimeError as e:
            errors.append(str(e))
        report(blocked=blocked, latency=latency, stats=stats, priority=priority, errors=errors)
        """
    )
    assert out["blocked"], out
    # Without the release at exit, the other thread would wait for the hung threshold (10 s).
    assert out["latency"] < 3.0, out
    assert out["priority"] == 2 and out["stats"]["priority"] == 2, out
    assert out["errors"] == ["this Regulator is closed"], out


def test_exit_with_a_thread_waiting_for_its_turn(run_py):
    out = run_py(
        """
        tact.configure(testpoint="20ms", bootstrap=1000, state_dir=STATE)
        tact.testpoint(0, 1)             # the main thread takes the run token and keeps it
        started = threading.Event()

        def waiter():
            started.set()
            tact.testpoint(0, 1)         # waits, without the GIL, until the process exits

        threading.Thread(target=waiter, daemon=True).start()
        started.wait()
        time.sleep(0.1)
        report(exiting=True)
        """
    )
    assert out == {"exiting": True}  # and the interpreter exited cleanly (run_py checks)


PERSIST = """
tact.configure(testpoint="20ms", bootstrap=10, probation=0)   # state: TACT_STATE_DIR
tact.testpoint(0, 1)
first = tact.stats()
end = time.perf_counter() + 0.8
while time.perf_counter() < end:
    spin(0.001)
    tact.testpoint(0, 10)
report(first=first, last=tact.stats())
"""


def test_second_run_starts_calibrated(run_py, tmp_path):
    one = run_py(PERSIST, script="nightly.py")
    assert one["first"]["phase"] == "bootstrap", one
    assert one["last"]["phase"] == "regulated", one
    saved = list((tmp_path / "state" / "polite").glob("*.json"))
    assert [p.name.startswith("nightly.py-") and p.name.endswith("-py.json") for p in saved] == [
        True
    ], saved
    two = run_py(PERSIST, script="nightly.py")
    assert two["first"]["phase"] == "regulated", two
    assert two["first"]["bootstrap_done"] is None, two
