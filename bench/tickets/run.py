#!/usr/bin/env python3
"""bench/tickets: experiment E1 of the tickets spec (section 5), hierarchical CPU shares, for
`tact tickets run`, side by side with what a user would do instead (issue 7).

Five CPU-bound spinners, currencies A and B funded equally from the base, A2 = 2 x A1, B2 = 2 x B1,
B3 = 3 x B1 asleep for the first half; all pinned to one CPU. Expected shares: first half 1/6, 1/3,
1/6, 1/3, 0; second half 1/6, 1/3, 1/12, 1/6, 1/4. Modes, interleaved per rep (order rotated):
  tact          tact tickets run SETUP --backend cgroup --cgroup-parent .../tact-test-tickets-<pid>/r<k>
  tact-signals  tact tickets run SETUP --backend signals (skipped with the reason if tact refuses it)
  flat-cgroup   one v1 cpu cgroup per task, cpu.shares = tickets x 10, no currencies
  nice          nice levels for the awake-all proportions (weights 1024/1.25^n)
  none          no control
Every figure comes from CPU times this harness reads itself (/proc/PID/stat utime+stime). See
bench/tickets/README.md.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import e1  # noqa: E402
import metrics  # noqa: E402
import report  # noqa: E402
from common.lifecycle import DEFAULT_LOCK, T0, Cleanup, log, take_lock  # noqa: E402
from common.procs import kill_leftovers  # noqa: E402
from workload import (BASELINES, MODES, TACT_MODES, Cgroups, Run, Slots, detect_cgroup_v1,  # noqa: E402
                      parse_stat, set_child_subreaper)

CLEANUP = Cleanup()
SPIN_C = os.path.join(REPO, "bench", "share", "spin.c")
PERIOD_S = 0.1          # the harness's sampling period
SERIES_EVERY = 5        # keep every 5th sample (0.5 s) in the JSON, for the plot
START_TIMEOUT_S = 20.0
TACT_GRACE_EST = 1.0    # s per tact run beyond the measurement: its SIGTERM teardown
PRESETS = {"quick": dict(reps=1, seconds=20.0), "default": dict(reps=5, seconds=60.0),
           "full": dict(reps=5, seconds=200.0)}


def sh_out(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"<{e}>"


def detect_tact(path):
    """(version, None) if `tact tickets run` exists with the contract's options, else (None, why)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, f"no executable at {path} (make build, or --tact PATH)"
    r = subprocess.run([path, "tickets", "run", "--help"], capture_output=True, text=True, timeout=20)
    text = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        first = text.splitlines()[0] if text else f"exit {r.returncode}"
        return None, f"`tact tickets` is not in {path} (`tact tickets run --help`: {first})"
    need = [f for f in ("--backend", "--cgroup-parent", "--duration", "--json-log") if f not in text]
    if need:
        return None, f"`{path} tickets run` has no {', '.join(need)} (see bench/tickets/README.md)"
    return sh_out([path, "--version"]), None


def environment():
    rel = platform.release()
    m = re.match(r"(\d+)\.(\d+)", rel)
    ver = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            autogroup = int(f.read())
    except OSError:
        autogroup = None
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    return {"kernel": rel, "scheduler": "EEVDF" if ver >= (6, 6) else "CFS", "cpus": os.cpu_count(),
            "sched_autogroup_enabled": autogroup, "loadavg_start": load, "euid": os.geteuid(),
            "clk_tck": os.sysconf("SC_CLK_TCK"), "python": platform.python_version()}


class Env:
    pass


# --------------------------------------------------------------------------
# one run

def one_run(env, mode, rep, seq):
    tag = f"{seq:03d}-{mode}"
    run = Run(env, mode, tag)
    item = CLEANUP.push(f"run {tag}", run.teardown)
    res = {"mode": mode, "rep": rep, "seconds": env.seconds}
    awake = [t for t in e1.TASKS if t != e1.SLEEPER]
    samples, sched, iters = [], [], []
    started = False
    try:
        run.start()
        run.wait_started(awake, START_TIMEOUT_S)
        started = True
        t0 = time.monotonic()
        t_end = t0 + env.seconds
        t_wake = None
        k = 0
        while True:
            t, cpu, ss, it = run.sample()
            samples.append((t, cpu))
            sched.append((t, ss))
            iters.append((t, it))
            if t_wake is None and not run.adopt([e1.SLEEPER]):
                t_wake = time.monotonic()   # its spinner has started: from the next sample on it counts
            if t >= t_end:
                break
            why = run.dead_launcher()
            if why:
                raise RuntimeError(f"during the run: {why}")
            k += 1
            time.sleep(max(0.0, min(t0 + k * PERIOD_S, t_end) - time.monotonic()))
        run.affinity_notes()
        if t_wake is None:
            raise RuntimeError(f"{e1.SLEEPER} never started")
        res.update(t_wake=t_wake - t0, knobs=run.knobs)
        win = metrics.halves(t0, t_wake, samples[-1][0], env.settle, env.exclude)
        res["windows"] = {h: (a - t0, b - t0) for h, (a, b) in win.items()}
        res["shares"], res["cpu_s"], sched_shares = {}, {}, {}
        for h, (a, b) in win.items():
            res["shares"][h], res["cpu_s"][h] = metrics.window_shares(samples, a, b)
            sched_shares[h], _ = metrics.window_shares(sched, a, b)
        res["shares_schedstat"] = sched_shares
        res["schedstat_max_abs_diff"] = max(abs(res["shares"][h][t] - sched_shares[h][t])
                                            for h in e1.HALVES for t in e1.TASKS)
        res["work_cv"] = work_cv(iters, sched, win)
        res["series"] = [[round(t - t0, 3), [round(c.get(x, 0.0), 3) for x in e1.TASKS]]
                         for t, c in samples[::SERIES_EVERY]]
    except (RuntimeError, ValueError, OSError) as e:
        res["error"] = str(e)
        res["started"] = started
    finally:
        CLEANUP.pop(item)
        if mode in TACT_MODES:
            res["tact_output"] = run.tact_output()
            res["tact_summary"], res["tact_log_lines"] = tact_log(run.files.get("json_log"))
        res["notes"] = run.notes
    return res


def work_cv(iters, sched, win):
    """Spread (CV) across the tasks of iterations per CPU-second over both windows: shows that CPU
    time is work (equal per task) in this run."""
    rates = []
    for t in e1.TASKS:
        n = c = 0.0
        for a, b in win.values():
            ia, ib = metrics.value_at(iters, a), metrics.value_at(iters, b)
            ca, cb = metrics.value_at(sched, a), metrics.value_at(sched, b)
            n += ib[t] - ia[t]
            c += cb[t] - ca[t]
        if c > 0.5:
            rates.append(n / c)
    return statistics.pstdev(rates) / statistics.fmean(rates) if len(rates) > 1 else None


def tact_log(path):
    """tact's final {"summary": ...} record and the number of per-interval records."""
    summary, lines = None, 0
    try:
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                lines += 1
                if isinstance(rec, dict) and "summary" in rec:
                    summary = rec["summary"]
    except (OSError, TypeError):
        pass
    return summary, lines


# --------------------------------------------------------------------------
# self-test: the arithmetic on synthetic data

def self_test():
    F = Fraction
    exp = e1.EXPECTED
    assert [exp["first"][t] for t in e1.TASKS] == [F(1, 6), F(1, 3), F(1, 6), F(1, 3), 0]
    assert [exp["second"][t] for t in e1.TASKS] == [F(1, 6), F(1, 3), F(1, 12), F(1, 6), F(1, 4)]
    nice = e1.nice_choice()
    assert [nice[t] for t in e1.TASKS] == [3, 0, 6, 3, 1], nice
    fl = e1.predicted("flat-cgroup")
    assert [fl["second"][t] for t in e1.TASKS] == [F(1, 9), F(2, 9), F(1, 9), F(2, 9), F(1, 3)]
    assert fl["first"] == exp["first"]   # without B3, A and B hold equal tickets: flat is right
    nz = e1.predicted("nice")["first"]
    assert abs(float(nz["A2"]) - 1024 / 2348) < 1e-12
    # a setup file that parses, with the contract's fields
    doc = tomllib.loads(e1.setup_toml({t: f"exec /x/spin {i}" for i, t in enumerate(e1.TASKS)}))
    assert [c["name"] for c in doc["currency"]] == ["A", "B"]
    assert doc["job"][4] == {"name": "B3", "command": "exec /x/spin 4", "funding": [{"from": "B", "cpu": 300}]}
    # /proc/PID/stat with a comm holding spaces and parentheses: 7 + 3 ticks
    line = b"42 (a) b (c) R 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 100 0 0"
    clk = os.sysconf("SC_CLK_TCK")
    assert parse_stat(line) == ("R", 10 / clk)

    # synthetic CPU series at exactly the expected shares, B3 waking at 10 s, 0.1 s samples, with
    # a burst of the wrong shares inside the excluded 2 s: the shares come out exact
    def series(s1, s2, t_wake=10.0, t_end=20.0, wrong=None):
        out, cum, t = [], {x: 0.0 for x in e1.TASKS}, 0.0
        while t <= t_end + 1e-9:
            out.append((t, dict(cum)))
            rates = s1 if t < t_wake else s2
            if wrong and abs(t - t_wake) < 0.9:
                rates = wrong
            for x in e1.TASKS:
                cum[x] += 0.1 * float(rates[x])
            t = round(t + 0.1, 10)
        return out

    even = {x: F(1, 5) for x in e1.TASKS}
    s = series(exp["first"], exp["second"], wrong=even)
    win = metrics.halves(0.0, 10.0, 20.0, 1.0, 2.0)
    assert win == {"first": (1.0, 9.0), "second": (11.0, 20.0)}
    for h, (a, b) in win.items():
        sh, _ = metrics.window_shares(s, a, b)
        assert all(abs(sh[x] - float(exp[h][x])) < 1e-9 for x in e1.TASKS), (h, sh)
    # interpolation between samples
    v = metrics.value_at([(0.0, {x: 0.0 for x in e1.TASKS}), (1.0, {x: 2.0 for x in e1.TASKS})], 0.25)
    assert all(abs(v[x] - 0.5) < 1e-12 for x in e1.TASKS)
    # errors: +10% on A1 in the second half (the others keep their CPU)
    sh = {h: {x: float(exp[h][x]) for x in e1.TASKS} for h in e1.HALVES}
    sh["second"]["A1"] *= 1.09
    f = metrics.figures(sh)
    assert abs(f["err"]["second"]["A1"] - 0.09) < 1e-12 and f["err"]["first"]["B3"] is None
    assert abs(f["max_abs_err"]["second"] - 0.09) < 1e-12 and f["max_abs_err"]["first"] == 0
    assert abs(f["mean_abs_err"]["second"] - 0.018) < 1e-12
    assert abs(f["a_change"]["A1"] - 0.09) < 1e-12 and f["a_change"]["A2"] == 0
    v = metrics.verdicts(f, 0.10)
    assert v == {"issue": False, "spec": True, "a_unaffected": False}, v
    v = metrics.verdicts(metrics.figures({h: {x: float(exp[h][x]) for x in e1.TASKS} for h in e1.HALVES}), 0.10)
    assert all(v.values())
    # the flat-cgroup model: A loses a third of its share when B3 wakes, far outside every band
    fm = metrics.figures({h: {x: float(v_) for x, v_ in e1.predicted("flat-cgroup")[h].items()} for h in e1.HALVES})
    assert abs(fm["a_change"]["A1"] + 1 / 3) < 1e-12 and not metrics.verdicts(fm, 0.10)["spec"]
    # aggregation: median and spread over three reps
    reps = [{"shares": {h: {x: float(exp[h][x]) * (1 + d if x == "A2" else 1) for x in e1.TASKS}
                        for h in e1.HALVES}} for d in (0.0, 0.02, 0.08)]
    a = metrics.aggregate(reps, 0.10)
    sp = a["shares"]["first"]["A2"]
    assert abs(sp["median"] - 1.02 / 3) < 1e-12 and abs(sp["max"] - 1.08 / 3) < 1e-12 and sp["n"] == 3
    assert a["reps_passing"] == {"issue": 2, "spec": 3, "a_unaffected": 3}, a["reps_passing"]
    assert a["verdict"]["issue"]
    print("self-test: ok")
    return 0


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 rep of 20 s per mode")
    ap.add_argument("--full", action="store_true", help="the spec's 200 s runs, 5 reps")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--seconds", type=float, help="length of a run (default 60; --full 200; --quick 20)")
    ap.add_argument("--modes", default="all", help="comma list of " + ", ".join(MODES) + ", or baselines, tact, all")
    ap.add_argument("--settle", type=float, default=1.0, help="s left out at the start (default 1)")
    ap.add_argument("--exclude", type=float, default=2.0, help="s left out around the switch (default 2)")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")))
    ap.add_argument("--tact-arg", action="append", default=[], help="appended to every `tact tickets run`")
    ap.add_argument("--pin-cpu", type=int, help="the CPU of the tasks (default the last)")
    ap.add_argument("--harness-cpu", type=int, help="the CPU of this harness (default the first)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tickets"))
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="the benchmark lock ('' skips it)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--from-results", help="report on a saved e1.json or e1.partial.jsonl")
    args = ap.parse_args()
    if args.self_test:
        import e3   # E3 and E4 have their own harnesses (e3.py, e4.py); their arithmetic is checked here too
        import e4
        return self_test() or e3.self_test() or e4.self_test()
    if args.from_results:
        return from_results(args.from_results, args.out)

    preset = PRESETS["quick" if args.quick else "full" if args.full else "default"]
    reps = args.reps or preset["reps"]
    seconds = args.seconds or preset["seconds"]
    if seconds < args.settle + args.exclude + 4:
        ap.error(f"--seconds {seconds:g} leaves halves under 2 s")
    modes = []
    for tok in [m.strip() for m in args.modes.split(",") if m.strip()]:
        if tok == "all":
            modes += MODES
        elif tok == "baselines":
            modes += BASELINES
        elif tok == "tact":
            modes += list(TACT_MODES)
        elif tok in MODES:
            modes.append(tok)
        else:
            ap.error(f"unknown mode {tok}")
    modes = [m for m in MODES if m in modes]
    cpus = sorted(os.sched_getaffinity(0))
    env = Env()
    env.seconds, env.settle, env.exclude = seconds, args.settle, args.exclude
    env.pin_cpu = cpus[-1] if args.pin_cpu is None else args.pin_cpu
    env.harness_cpu = cpus[0] if args.harness_cpu is None else args.harness_cpu
    env.tact = os.path.abspath(args.tact)
    env.tact_extra = list(args.tact_arg)

    skipped = {}
    with open("/proc/mounts") as f:
        cpu_mount, acct_mount = detect_cgroup_v1(f.read())
    for m in ("tact", "flat-cgroup"):
        if m in modes and (os.geteuid() != 0 or not cpu_mount):
            skipped[m] = "needs root" if os.geteuid() != 0 else "no cgroup v1 cpu hierarchy with cpu.shares"
    tact_version = None
    if any(m in TACT_MODES for m in modes):
        tact_version, why = detect_tact(env.tact)
        if why:
            raise SystemExit(f"bench/tickets: {why}.\nThe tact modes run `tact tickets run SETUP --backend "
                             f"cgroup|signals ...` (issue 7; the contract is in bench/tickets/README.md). Build a "
                             f"tact that has it (make build), or run the baselines alone: --modes baselines")
    run_modes = [m for m in modes if m not in skipped]
    per_run = seconds + 2.5 + (TACT_GRACE_EST if any(m in TACT_MODES for m in run_modes) else 0)
    est = reps * len(run_modes) * per_run
    config = {"reps": reps, "seconds": seconds, "settle": args.settle, "exclude": args.exclude,
              "modes_requested": modes, "modes_run": run_modes, "pin_cpu": env.pin_cpu,
              "harness_cpu": env.harness_cpu, "tact": env.tact, "tact_version": tact_version,
              "tact_extra": env.tact_extra, "period_s": PERIOD_S, "estimate_s": round(est)}
    log(f"E1: modes {', '.join(run_modes) or 'none'}, {reps} rep(s) of {seconds:g} s"
        + (f"; skipped {', '.join(f'{m} ({w})' for m, w in skipped.items())}" if skipped else "")
        + f"; about {est / 60:.1f} min")
    if args.dry_run:
        return 0
    if not run_modes:
        raise SystemExit("no mode can run here: " + "; ".join(f"{m}: {w}" for m, w in skipped.items()))

    # ---- setup: everything from here on is undone on every exit path
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/tickets")
    set_child_subreaper()
    CLEANUP.push("descendants", kill_leftovers)
    try:
        os.sched_setaffinity(0, {env.harness_cpu})
    except OSError as e:
        log(f"could not pin the harness to CPU {env.harness_cpu}: {e}")
    env.tmp = tempfile.mkdtemp(prefix=f"tact-bench-tickets-{os.getpid()}-")
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(env.tmp, ignore_errors=True))
    env.spin = os.path.join(env.tmp, "spin")
    subprocess.run(["cc", "-O2", "-Wall", "-o", env.spin, SPIN_C], check=True)
    env.slots = Slots(os.path.join(env.tmp, "slots"), len(e1.TASKS))
    CLEANUP.push("slots", env.slots.close)
    env.cgroups = None
    if cpu_mount and os.geteuid() == 0 and any(m in ("tact", "flat-cgroup") for m in run_modes):
        for mount in (cpu_mount, acct_mount):
            if mount:
                for p in Cgroups.remove_stale(mount):
                    log(f"removed {p}, left by an earlier run")
        env.cgroups = Cgroups(cpu_mount, acct_mount if "tact" in run_modes else None)
        CLEANUP.push("cgroups", env.cgroups.remove)
    env_info = environment()
    env_info["cgroup_v1_cpu"] = cpu_mount
    env_info["tact_version"] = tact_version
    log(f"{env_info['kernel']}, {env_info['scheduler']}, autogroup={env_info['sched_autogroup_enabled']}, "
        f"load {' '.join(env_info['loadavg_start'])}; harness on CPU {env.harness_cpu}, tasks on CPU {env.pin_cpu}")

    os.makedirs(args.out, exist_ok=True)
    partial = os.path.join(args.out, "e1.partial.jsonl")
    with open(partial, "w") as f:
        f.write(json.dumps({"config": config, "env": env_info, "skipped": skipped}) + "\n")
    results, failures, seq = [], {}, 0
    for rep in range(reps):
        order = run_modes[rep % len(run_modes):] + run_modes[:rep % len(run_modes)]
        for mode in order:
            if mode in skipped:
                continue
            seq += 1
            log(f"rep {rep + 1}/{reps}: {mode}")
            r = one_run(env, mode, rep, seq)
            results.append(r)
            with open(partial, "a") as f:
                f.write(json.dumps(r, default=str) + "\n")
            for n in r["notes"]:
                log(f"  note: {n}")
            if "error" in r:
                log(f"  {mode} failed: {r['error']}")
                failures[mode] = r["error"]
                if mode in TACT_MODES and not r["started"]:
                    # tact refused this setup or backend: the reason stands for the rest of the run
                    skipped[mode] = f"tact refused it: {r['error']}"
            else:
                sh = r["shares"]
                log("  " + "  ".join(f"{h}: " + " ".join(f"{t} {100 * sh[h][t]:.1f}" for t in e1.TASKS)
                                     for h in e1.HALVES))
    env_info["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    if "tact-signals" in skipped and "tact-signals" in failures:
        failures.pop("tact-signals")
    text = report.write(results, config, env_info, skipped, failures, args.out, time.monotonic() - T0)
    print(text)
    CLEANUP.run()
    os.unlink(partial)
    log(f"wrote {args.out}/e1.txt, e1.json, e1.png")
    return 1 if "tact" in failures else 0


def from_results(path, outdir):
    with open(path) as f:
        if path.endswith(".jsonl"):
            lines = [json.loads(x) for x in f if x.strip()]
            head, results = lines[0], lines[1:]
            failures = {r["mode"]: r["error"] for r in results if "error" in r}
            doc = {"config": head["config"], "env": head["env"], "skipped": head["skipped"], "failures": failures,
                   "runs": results, "elapsed_s": 0}
        else:
            doc = json.load(f)
    print(report.write(doc["runs"], doc["config"], doc["env"], doc["skipped"], doc["failures"], outdir,
                       doc.get("elapsed_s", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
