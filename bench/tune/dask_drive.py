#!/usr/bin/env python3
"""dask_drive: tune-drive's run with the pool replaced by a Dask cluster (spec concurrency.md §6,
"Dask mode (a LocalCluster plus a shared bottleneck service)").

A LocalCluster of one worker with --max threads, in this process (processes=False: the front's
core is this process's, as tune-drive's), runs one task per item of an endless input;
tact.dask.AdaptiveSubmitter keeps the policy's count of them in flight (`tcc`, `tcc:KEY=V,..`,
`static:N`: the same submitter for the controlled row and the static sweep). Each task spins a
Pareto front time (k = 2.5, mean --front-ms) in thread CPU time and makes one request to
tune-service over its worker thread's kept-alive connection, as tune-drive's tasks do.

Every --sample-ms the driver reads the service's CPU time (`S`), its own CPU time and the target.
It prints `started`, `target AT N` and `steady AT N` lines as tune-drive does, and writes the
same record (--json): the window's and the Steady periods' figures, defined as tune-drive's
(bench/tune/src/summary.rs), so that run.py reports both drivers alike.

Needs `tact` (make python) and `distributed` (python/requirements-dev.txt) in the interpreter.
"""
import argparse
import hashlib
import json
import logging
import math
import os
import random
import socket
import sys
import threading
import time

from run import rates, steady_intervals

SHAPE = 2.5  # the front's Pareto shape, as tune-drive's (bench/tune/src/pareto.rs)
LATE_S = 30.0  # how long after the window the driver waits for its last results
SPIN_BLOCK = bytes(16 << 10)  # one step of the front's spin: tens of microseconds of hashing


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb")


def task(item):
    """One request: the front's CPU time, then `R` over this worker thread's connection. Returns
    (start, end) in time.monotonic(). Dask pickles the function even for thread workers, so it
    keeps its connection on the thread object rather than in a module global."""
    addr, front_s = item
    start = time.monotonic()
    end_cpu = time.thread_time() + front_s
    while time.thread_time() < end_cpu:
        # hashlib drops the GIL on buffers over 2 KiB: the front's CPU time, spent as a real
        # task's C code would spend it, without holding up the cluster's own threads (a pure
        # Python spin would hold the GIL for up to its 5 ms switch interval at a time).
        hashlib.sha256(SPIN_BLOCK)
    me = threading.current_thread()
    for attempt in (0, 1):
        conn = getattr(me, "tune_conn", None)
        if conn is None:
            conn = me.tune_conn = connect(addr)
        try:
            conn[0].sendall(b"R\n")
            if conn[1].readline().startswith(b"K"):
                return start, time.monotonic()
            raise ConnectionError("the service answered no K")
        except OSError:
            me.tune_conn = None
            if attempt:
                raise


def service_cpu(conn):
    """The service's process CPU time, s (the `S` request)."""
    conn[0].sendall(b"S\n")
    return int(conn[1].readline().split()[0]) / 1e9


# ---------------------------------------------------------------------------------------------
# The record's figures, as bench/tune/src/summary.rs defines them; the CPU shares and the Steady
# periods with the harness's own helpers (run.rates, run.steady_intervals).

def percentile(xs, p):
    rank = math.ceil(p / 100 * len(xs))
    return xs[min(max(rank, 1), len(xs)) - 1]


def count_of(targets, intervals):
    """Time-weighted statistics of the target over the intervals."""
    def at(t):
        n = targets[0][1]
        for when, m in targets:
            if when > t:
                break
            n = m
        return n
    pieces = []
    for a, b in intervals:
        t, n = a, at(a)
        for when, m in targets:
            if a < when < b:
                pieces.append((n, when - t))
                t, n = when, m
        pieces.append((n, b - t))
    pieces = [p for p in pieces if p[1] > 0]
    total = sum(d for _, d in pieces)
    if total <= 0:
        return None
    mean = sum(n * d for n, d in pieces) / total
    var = sum((n - mean) ** 2 * d for n, d in pieces) / total
    pieces.sort()
    acc, median = 0.0, pieces[-1][0]
    for n, d in pieces:
        acc += d
        if acc >= total / 2:
            median = n
            break
    return dict(mean=mean, median=median, min=pieces[0][0], max=pieces[-1][0], stdev=math.sqrt(var))


def period(intervals, completions, samples, targets):
    lat = sorted(lat for at, lat in completions if any(a <= at < b for a, b in intervals))
    seconds = sum(b - a for a, b in intervals)
    # Each cumulative counter's increase per second, interpolated between samples.
    cpu = rates([(x["at"], x) for x in samples], intervals)
    ms = 1000.0
    return dict(
        seconds=seconds, completions=len(lat), throughput=len(lat) / seconds if seconds > 0 else 0.0,
        service_util=cpu.get("service_cpu"), driver_util=cpu.get("driver_cpu"),
        latency=dict(mean_ms=sum(lat) / len(lat) * ms, p50_ms=percentile(lat, 50) * ms,
                     p90_ms=percentile(lat, 90) * ms, p99_ms=percentile(lat, 99) * ms) if lat else None,
        count=count_of(targets, intervals))


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", required=True, help="tcc, tcc:KEY=V,.. or static:N")
    ap.add_argument("--addr", required=True, help="the service's address (as tune-service prints it)")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured seconds, after the warm-up")
    ap.add_argument("--warmup", type=float, default=10.0, help="warm-up seconds (run, not measured)")
    ap.add_argument("--front-ms", type=float, default=1.0, help="mean front time per task, ms of thread CPU")
    ap.add_argument("--max", type=int, default=64, help="the cluster's threads and the controller's n_max")
    ap.add_argument("--init", type=int, help="TCC's starting count (default: the online CPUs)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the front times")
    ap.add_argument("--sample-ms", type=int, default=500, help="sampling period of the CPU clocks, ms")
    ap.add_argument("--bottleneck", metavar="SRC",
                    help="report this source's utilization to TCC (its hint, tcc:util=U): tact tune "
                         "--bottleneck's forms, e.g. cpu:1 for the service's CPU")
    ap.add_argument("--json", help="write the record here")
    args = ap.parse_args(argv)
    if not (args.seconds > 0 and args.warmup >= 0 and args.front_ms >= 0 and args.max >= 1):
        ap.error("--seconds and --max must be positive, --warmup and --front-ms non-negative")
    return args


def value_of(text):
    """A spec value as the controller's keyword takes it: a bool, an int, a float, or the text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def params_of(policy, init):
    """The submitter's policy and keyword parameters: a TCC spec's KEY=V pairs become parameters
    (with n_init); any other policy goes as it is."""
    if not (policy == "tcc" or policy.startswith("tcc:")):
        return policy, {}
    params = {"n_init": init}
    for kv in filter(None, policy[len("tcc:"):].split(",")):
        k, _, v = kv.partition("=")
        params[k] = value_of(v)
    return "tcc", params


def main(argv=None):
    args = parse_args(argv)
    try:
        from distributed import Client, LocalCluster
        from tact.dask import AdaptiveSubmitter
    except ImportError as e:
        sys.exit(f"dask_drive: {e} (make python installs tact and distributed into .venv)")
    init = args.init or os.cpu_count() or 1
    policy, params = params_of(args.policy, init)
    stats = connect(args.addr)
    rng = random.Random(args.seed)
    scale = args.front_ms / 1000 * (SHAPE - 1) / SHAPE

    def items():
        while True:
            yield args.addr, scale * rng.paretovariate(SHAPE)

    cluster = LocalCluster(processes=False, n_workers=1, threads_per_worker=args.max, dashboard_address=None,
                           silence_logs=logging.ERROR)
    client = Client(cluster)
    completions, samples, errors = [], [], [0]
    end_s = args.warmup + args.seconds
    stop = threading.Event()
    # The submitter's clock (its targets and trace) starts when it is made: the run's origin.
    origin = time.monotonic()
    try:
        sub = AdaptiveSubmitter(client, task, items(), policy=policy, max_in_flight=args.max,
                                bottleneck=args.bottleneck, **params)
    except ValueError as e:  # a bad policy, parameter or bottleneck source
        client.close()
        cluster.close()
        sys.exit(f"dask_drive: {e}")
    print("started", flush=True)

    def sample():
        last_target, seen = None, 0
        while True:
            at = time.monotonic() - origin
            target = sub.targets[-1][1]
            # Completions as the submitter's done callbacks count them (this run's loop may lag).
            samples.append(dict(at=at, completions=sub.status()["completed"], service_cpu=service_cpu(stats),
                                driver_cpu=time.process_time(), target=target))
            if target != last_target:
                print(f"target {at:.3f} {target}", flush=True)
                last_target = target
            trace = sub.trace()
            for t in trace[seen:]:
                if t["to"] == "steady" and t["from"] != "steady":
                    print(f"steady {t['at']:.3f} {t['target_to']}", flush=True)
            seen = len(trace)
            if stop.wait(args.sample_ms / 1000):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    it = iter(sub)
    # Results come in completion order, but this loop may read them late while the cluster's
    # threads keep the core busy: it stops at the first task that ended after the window (or
    # when nothing has come for LATE_S), so that no completion inside it goes uncounted.
    while time.monotonic() - origin < end_s + LATE_S:
        try:
            start, end = next(it)
        except StopIteration:
            break
        except Exception as e:  # a failed request: counted, the run goes on
            if errors[0] == 0:
                print(f"dask_drive: request failed: {e}", file=sys.stderr)
            errors[0] += 1
            continue
        completions.append((end - origin, end - start))
        if end - origin >= end_s:
            break
    stop.set()
    sampler.join()
    # A last sample at the window's end, so the CPU figures cover it.
    samples.append(dict(at=time.monotonic() - origin, completions=sub.status()["completed"],
                        service_cpu=service_cpu(stats), driver_cpu=time.process_time(),
                        target=sub.targets[-1][1]))
    sub.close()
    client.close()
    cluster.close()

    targets, trace = sub.targets, sub.trace()
    w = [(args.warmup, end_s)]
    steady = steady_intervals(trace, *w[0])
    rec = dict(policy=args.policy, addr=args.addr, warmup_s=args.warmup, seconds=args.seconds,
               front_ms=args.front_ms, max=args.max, init=init, seed=args.seed, bottleneck=args.bottleneck,
               driver=f"dask LocalCluster (processes=False, 1 worker x {args.max} threads)",
               window=period(w, completions, samples, targets),
               steady=period(steady, completions, samples, targets) if steady else None,
               first_steady_s=next((t["at"] for t in trace if t["to"] == "steady"), None),
               errors=errors[0], targets=targets, trace=trace, samples=samples)
    win = rec["window"]
    print(f"{args.policy}: {win['throughput']:.1f}/s over {args.seconds:g} s, service CPU "
          f"{(win['service_util'] or 0) * 100:.1f}%, {errors[0]} errors", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
