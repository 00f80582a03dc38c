"""What tact.testpoint() costs a Python program (bench/library/cost.py runs it with .venv/bin/python).

    python cost_py.py fast N STATE_DIR   N calls that are not due (200 ms period), the best of 5
                                         rounds, and an empty Python function call for reference
    python cost_py.py due N STATE_DIR    N due testpoints (1 ms period), each after 5 ms of sleep,
                                         as the Rust fastpath example: bootstrap 10, no probation,
                                         suspensions capped at 1 ms; the first 20 are not timed

Prints one JSON object.
"""
import json
import sys
import time

import tact


def best_per_call(n, f, *args):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f(*args)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def empty(index, *metrics):
    pass


def main():
    mode, n, state_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "fast":
        tact.configure(testpoint="200ms", state_dir=state_dir)
        tact.testpoint(0, 1)
        base = best_per_call(n, empty, 0, 4096)
        fast = best_per_call(n, tact.testpoint, 0, 4096)
        print(json.dumps({"fast_ns": fast, "empty_call_ns": base}))
    elif mode == "due":
        tact.configure(testpoint="1ms", state_dir=state_dir, bootstrap=10, probation=0,
                       max_suspension="1ms")
        tact.testpoint(0, 1)
        took = []
        for i in range(n + 20):
            time.sleep(0.005)
            t0 = time.perf_counter_ns()
            tact.testpoint(0, 1)
            if i >= 20:
                took.append(time.perf_counter_ns() - t0)
        took.sort()
        st = tact.stats() or {}
        print(json.dumps({"due_ns": took[len(took) // 2], "due_p90_ns": took[len(took) * 9 // 10],
                          "testpoints": st.get("testpoints"), "suspensions": st.get("suspensions")}))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
