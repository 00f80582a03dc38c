"""Measures what a testpoint that is not due costs, against an empty Python function call.

    .venv/bin/python python/examples/fastpath.py

A testpoint is due once per period (here 1 s, so almost no call of the loop is); the others only
add progress, holding the GIL. The per-call figures include the loop and the call itself.
"""

import time

import tact

N = 2_000_000


def per_call(f, *args) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(N):
            f(*args)
        best = min(best, (time.perf_counter_ns() - start) / N)
    return best


def nothing(index, *metrics):
    pass


def main() -> None:
    tact.configure(testpoint="1s", state_dir="/tmp/tact-fastpath-state")
    base = per_call(nothing, 0, 4096)
    rows = [("empty Python function", base)]
    # One unit at a time: the regulator leaves before the thread's own unit starts.
    with tact.Regulator() as r:
        r.testpoint(0, 1)
        rows.append(("Regulator.testpoint(0, 4096)", per_call(r.testpoint, 0, 4096)))
    tact.testpoint(0, 1)
    rows.append(("tact.testpoint(0, 4096)", per_call(tact.testpoint, 0, 4096)))
    tact.testpoint(1, 1, 1)
    rows.append(("tact.testpoint(1, 4096.0, 3)", per_call(tact.testpoint, 1, 4096.0, 3)))

    def alternate(_):
        tact.testpoint(0, 4096)
        tact.testpoint(1, 4096.0, 3)

    # A change of index hands the progress over without the GIL (see crates/tact-py/src/batch.rs).
    rows.append(("alternating indices 0, 1", (per_call(alternate, None) - base) / 2))
    for name, ns in rows:
        print(f"{name:32} {ns:7.1f} ns/call  ({ns - base:+.1f} ns over an empty call)")


if __name__ == "__main__":
    main()
