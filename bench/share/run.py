#!/usr/bin/env python3
"""bench/share: the ALPS paper's experiments (Newhouse & Pasquale 2007) for `tact share`, side by
side with the tools people use today. Spec: /work/shared/specs/proportional-share.md, section 5.

Parts (each a side-by-side comparison of modes in the same run, interleaved, order rotated per rep):
  main   the 27 workloads: share distributions linear (1,3,5,..), equal (n x n), skewed
         ((n-1) x 1 and n^2-(n-1)) for n = 5, 10, 20, quanta 10/20/40 ms; single-threaded CPU-bound
         spinners, pinned all to one CPU (the paper's uniprocessor) and unpinned on all CPUs
  io     A:B:C = 1:2:3, Q = 10 ms, B sleeps 240 ms after each 80 ms of CPU: per-cycle fractions
         while B is ready (expect 1:2:3) and asleep (expect A/C 25/75)
  multi  three instances, groups {7,8,9}, {4,5,6}, {1,2,3} started in turn: within-group error
  scal   equal shares of 5, N = 5, 10, 20, ... per quantum: overhead per N, fit U_Q(N), solve
         U_Q(N*) = 100/(N*+1); loss of control when RMS > 10% or overruns > 1% of quanta

Modes: kernel (no control), nice (nice_i = min(19, round(log_1.25(share_max/share_i)))),
cpulimit (one per process, -l 100*C*share_i/S), cgroup (one child cgroup per process,
cpu.shares = max(2, share_i*k)), tact-basic (--basic --backend signals), tact-opt (--backend
signals), tact-cgroup (--backend cgroup), tact-cons (unpinned only: --mode conserving).

Every per-process CPU time is read by this harness itself (see recorder.py); tact's log is only
used for what the harness cannot see (overruns). See bench/share/README.md.
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import metrics  # noqa: E402
from metrics import (DISTS, feasible_shares, fit_line, shares_of, slope, solve_nstar,  # noqa: E402
                     summarize_cycles, warmup_cycles)
from recorder import make_reader, record_cycles, record_series  # noqa: E402
from common.lifecycle import T0, Cleanup, log, take_lock  # noqa: E402
from common.procs import kill_leftovers  # noqa: E402
import workload  # noqa: E402
from workload import (ALL_MODES, BASELINE_MODES, CONTROLLER_MODES, TACT_ARGS, CpuCgroups,  # noqa: E402
                      Slots, detect_cpu_cgroup, detect_cpuacct_v1, set_child_subreaper, start, tact_footer,
                      tact_log_summary)

CLEANUP = Cleanup()
PARTS = ["main", "io", "multi", "scal"]
DEFAULT_LOCK = "/tmp/tact-bench.lock"

# the paper's figures (ALPS, FreeBSD 4.8 on a 2.2 GHz Pentium 4; Figures 5-8, 11, Tables 3)
PAPER_NSTAR_PRED = {10: 39, 20: 54, 40: 75}
PAPER_NSTAR_OBS = {10: 40, 20: 60, 40: 90}
PAPER_U = {10: (.0639, .0604), 20: (.0338, .0340), 40: (.0172, .0160)}
PAPER_MULTI = "0.3-1.0% / 0.0-3.3% / 0.3-1.3% per phase, avg 0.93%"


def paper_figure(dist, n, q):
    if (dist, n, q) == ("linear", 5, 10):
        return "2.05 (basic)"
    if (dist, n, q) == ("skewed", 20, 40):
        return "1sh 31.2 sd3.1, big 0.36"
    if dist == "skewed":
        return ">5 (Fig.5: quantization)"
    return "<5 (Fig.5/7)"


# --------------------------------------------------------------------------
# presets

PRESETS = {
    # ~2 minutes with the baselines: the 5-process workloads at 10 ms, short everything
    "quick": dict(
        main_pinned=[(d, 5, 10) for d in DISTS], main_unpinned=[("skewed", 5, 10)],
        reps=1, unpinned_reps=1, cycles=4, cap=2.0, min_cycles=1, hard=10.0, paper_drop=False,
        io_seconds=2.5, io_pins=["pinned"], multi_phases=(1.5, 1.5, 3.0), multi_pins=["pinned"],
        multi_q=20, multi_modes=["cgroup", "tact-opt", "tact-cgroup"],
        scal_q=[10], scal_n=[5, 20], scal_pins=["pinned"], scal_modes=["cpulimit", "tact-opt"],
        scal_cycles=4, scal_cap=2.0, scal_hard=6.0, scal_stop_after=0),
    # the default `make bench-share`: about 55 minutes on a 2-core machine with all 8 modes. A run
    # measures up to 32 cycles or 5 s: at Q = 10 ms a 5-process cycle lasts 0.25 s, and 6 cycles (the
    # old window) left every mode's per-cycle RMS at the mercy of one or two spiky cycles
    "default": dict(
        main_pinned=[(d, n, q) for d in DISTS for n in (5, 10) for q in (10, 20, 40)]
        + [(d, 20, 10) for d in DISTS],
        main_unpinned=[(d, 5, q) for d in DISTS for q in (10, 20, 40)] + [(d, 20, 10) for d in DISTS],
        reps=2, unpinned_reps=2, cycles=32, cap=5.0, min_cycles=1, hard=30.0, paper_drop=False,
        io_seconds=6.0, io_pins=["pinned"], multi_phases=(8.0, 8.0, 16.0), multi_pins=["pinned"],
        multi_q=20, multi_modes=["cgroup", "tact-opt", "tact-cgroup"],
        scal_q=[10, 20, 40], scal_n=[5, 10, 20, 40, 80], scal_pins=["pinned"],
        scal_modes=["cpulimit", "tact-opt"], scal_cycles=6, scal_cap=4.0, scal_hard=12.0,
        scal_stop_after=0),
    # the paper's protocol: 200 cycles (first 4 dropped), 3 runs, all 27 workloads, both pinnings
    "full": dict(
        main_pinned=[(d, n, q) for d in DISTS for n in (5, 10, 20) for q in (10, 20, 40)],
        main_unpinned=[(d, n, q) for d in DISTS for n in (5, 10, 20) for q in (10, 20, 40)],
        reps=3, unpinned_reps=3, cycles=196, cap=float("inf"), min_cycles=196, hard=float("inf"),
        paper_drop=True,
        io_seconds=40.0, io_pins=["pinned", "unpinned"], multi_phases=(60.0, 60.0, 180.0),
        multi_pins=["pinned", "unpinned"], multi_q=20,
        multi_modes=["kernel", "cgroup", "tact-opt", "tact-cgroup"],
        scal_q=[10, 20, 40], scal_n=[5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 120, 140, 160, 180, 200],
        scal_pins=["pinned", "unpinned"], scal_modes=["cpulimit", "tact-basic", "tact-opt"],
        scal_cycles=20, scal_cap=float("inf"), scal_hard=600.0, scal_stop_after=2),
}


# --------------------------------------------------------------------------
# environment

def sh_out(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout + r.stderr).strip()
    except Exception as e:
        return f"<{e}>"


def kernel_config():
    rel = platform.release()
    for path in (f"/boot/config-{rel}", "/proc/config.gz"):
        try:
            if path.endswith(".gz"):
                import gzip
                with gzip.open(path, "rt") as f:
                    return f.read(), path
            with open(path) as f:
                return f.read(), path
        except OSError:
            continue
    return None, None


def environment(args, cg_info):
    cfg, cfg_path = kernel_config()
    hz = None
    preempt = None
    extra = {}
    if cfg:
        m = re.search(r"^CONFIG_HZ=(\d+)", cfg, re.M)
        hz = int(m.group(1)) if m else None
        for opt in ("CONFIG_SCHED_AUTOGROUP", "CONFIG_SCHED_CLASS_EXT", "CONFIG_FAIR_GROUP_SCHED",
                    "CONFIG_CFS_BANDWIDTH", "CONFIG_SCHEDSTATS", "CONFIG_NO_HZ_FULL"):
            m = re.search(rf"^{opt}=(\w+)", cfg, re.M)
            extra[opt] = m.group(1) if m else "n"
        preempt = [o for o in ("CONFIG_PREEMPT_NONE", "CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT",
                               "CONFIG_PREEMPT_LAZY", "CONFIG_PREEMPT_DYNAMIC")
                   if re.search(rf"^{o}=y", cfg, re.M)]
    rel = platform.release()
    mm = re.match(r"(\d+)\.(\d+)", rel)
    ver = (int(mm.group(1)), int(mm.group(2))) if mm else (0, 0)
    sched = "EEVDF (fair class, Linux >= 6.6)" if ver >= (6, 6) else "CFS"
    try:
        with open("/sys/kernel/debug/sched/preempt") as f:
            extra["preempt_dynamic"] = f.read().strip()
    except OSError:
        pass
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            autogroup = int(f.read().strip())
    except OSError:
        autogroup = None
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "kernel": rel, "kernel_version": platform.version(), "scheduler": sched, "hz": hz,
        "hz_source": cfg_path, "sched_autogroup_enabled": autogroup, "preempt": preempt,
        "kernel_config": extra, "cpus": os.cpu_count(), "cpu_model": model,
        "python": platform.python_version(), "euid": os.geteuid(),
        "cpulimit": sh_out([args.cpulimit, "--help"]).splitlines()[0] if shutil.which(args.cpulimit) else None,
        "cgroup": cg_info, "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "clock": args.clock,
    }


# --------------------------------------------------------------------------
# tact detection

def detect_tact(path):
    """Which `tact share` options the binary has (from --help). Returns (flags, version, error)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return set(), None, f"no executable at {path} (make build, or --tact PATH)"
    try:
        r = subprocess.run([path, "share", "--help"], capture_output=True, text=True, timeout=20)
    except Exception as e:
        return set(), None, f"{path} share --help: {e}"
    text = r.stdout + r.stderr
    if r.returncode != 0:
        return set(), None, f"`{path} share` not available: {text.strip().splitlines()[0] if text.strip() else r.returncode}"
    flags = set(re.findall(r"(--[a-z][a-z0-9-]*)", text))
    version = sh_out([path, "--version"])
    return flags, version, None


# --------------------------------------------------------------------------
# runs

class Env:
    pass


def stop_check_for(run):
    def check():
        return run.dead_controller()
    return check


def drop_for(cycle_cpu_s, params):
    if params.get("drop") is not None:
        return params["drop"]
    return warmup_cycles(cycle_cpu_s, paper=params["paper_drop"])


def execute(env, mode, pinned, groups, q_ms, rec_kwargs, io_member=None):
    """Starts the workload, records, tears down on every path. Returns (run, record or None, error)."""
    run = None
    item = None
    try:
        run, per_group = start(env, mode, pinned, groups, q_ms, io_member)
        item = CLEANUP.push(f"run {mode}", run.teardown)
        members = [m for g in per_group for m in g]
        ctl_pids = run.controller_pids()
        iters = lambda: [env.slots.iterations(m.slot) for m in members]  # noqa: E731
        rec = record_cycles(members, [m.share for m in members], q_ms * 1_000_000,
                            clock=env.clock, ctl_pids=ctl_pids, stop_check=stop_check_for(run),
                            iters_fn=iters, **rec_kwargs)
        return run, rec, rec.get("error")
    except Exception as e:
        return run, None, f"{type(e).__name__}: {e}"
    finally:
        if item:
            CLEANUP.pop(item)
        elif run:
            run.teardown()


def run_info(run, mode):
    out = {"notes": list(run.notes) if run else [], "knobs": run.knobs if run else {}}
    if run is None:
        return out
    out["left_stopped"] = run.left_stopped
    if mode.startswith("tact-"):
        out["tact"] = []
        for c in run.controllers:
            info = {"name": c.name, "rc": c.returncode}
            for suffix in (".out", ".err"):
                p = run.files.get(c.name + suffix)
                if p:
                    try:
                        with open(p, errors="replace") as f:
                            text = f.read()
                    except OSError:
                        continue
                    info["stdout" if suffix == ".out" else "stderr"] = text[-3000:]
                    if suffix == ".err":
                        info["footer"] = tact_footer(text)
            lp = run.files.get(c.name + ".jsonl")
            if lp:
                info["log"] = tact_log_summary(lp)
            out["tact"].append(info)
    return out


def cycles_from(rec):
    prev = [0] * rec["members"]
    out = []
    for s in rec["snaps"]:
        out.append([b - a for a, b in zip(prev, s[1])])
        prev = s[1]
    return out


def window(rec, drop):
    """The measured window: from the end of the last dropped cycle to the last boundary (or the
    whole recording when no cycle is left after the warm-up)."""
    snaps = rec["snaps"]
    if len(snaps) > drop and drop >= 1:
        a, b = snaps[drop - 1], snaps[-1]
        return dict(t0=a[0], t1=b[0], cpu0=sum(a[1]), cpu1=sum(b[1]), ctl0=a[2], ctl1=b[2],
                    it0=a[3], it1=b[3], raw0=a[4], raw1=b[4], kind="cycles")
    return dict(t0=rec["t0"], t1=rec["end_t"], cpu0=rec["start_total_ns"], cpu1=sum(rec["end_vals"]),
                ctl0=rec["ctl0"], ctl1=rec["ctl_end"], it0=None, it1=rec["end_iters"], raw0=None,
                raw1=rec["end_vals"], kind="whole recording")


def analyse_cycles(rec, shares, q_ms, drop, cpus):
    n = len(shares)
    S = sum(shares)
    fr = [s / S for s in shares]
    cyc = cycles_from(rec)
    out = summarize_cycles(fr, cyc, drop, q_ms * 1e6, shares)
    w = window(rec, drop)
    dt = max(1e-9, w["t1"] - w["t0"])
    out["window_s"] = dt
    out["window_kind"] = w["kind"]
    out["overhead"] = (w["ctl1"] - w["ctl0"]) / 1e9 / dt
    out["controller_cpu_s"] = (w["ctl1"] - w["ctl0"]) / 1e9
    out["group_cpu_rate"] = (w["cpu1"] - w["cpu0"]) / 1e9 / dt
    out["utilization"] = out["group_cpu_rate"] / min(cpus, n)
    wall = rec["t_end"] - rec["t0"]
    out["record_s"] = wall
    out["recorder_cpu"] = rec["recorder_cpu_ns"] / 1e9 / wall if wall > 0 else None
    out["polls"] = rec["polls"]
    out["poll_ms"] = rec["poll_s"] * 1e3
    out["stop_reason"] = rec["stop_reason"]
    out["merged_first"] = rec["merged_first"]
    out["multi_boundary_polls"] = rec["multi_boundary_polls"]
    snaps = rec["snaps"]
    if len(snaps) >= 2:
        durs = [b[0] - a[0] for a, b in zip(snaps, snaps[1:])]
        out["cycle_wall_s_mean"] = statistics.fmean(durs)
    out["cycle_cpu_s"] = S * q_ms / 1e3
    out["group_cpu_per_cycle"] = [sum(c) for c in cyc]
    out["consumed_ms"] = [[round(x / 1e6, 3) for x in c] for c in cyc]
    # work check: iterations per CPU-ns of every member over the window
    if w["it0"] is not None:
        rates = [(i1 - i0) / (c1 - c0) for i0, i1, c0, c1 in zip(w["it0"], w["it1"], w["raw0"], w["raw1"])
                 if c1 > c0]
        if len(rates) >= 2 and statistics.fmean(rates) > 0:
            out["work_iters_per_ns"] = statistics.fmean(rates)
            out["work_cv"] = statistics.pstdev(rates) / statistics.fmean(rates)
        out["work_rate_giter_s"] = sum(i1 - i0 for i0, i1 in zip(w["it0"], w["it1"])) / dt / 1e9
    if cpus > 1:
        phi = feasible_shares(shares, [1] * n, cpus)
        s2 = summarize_cycles(phi, cyc, drop, q_ms * 1e6)
        out["phi"] = phi
        out["mean_rms_vs_phi"] = s2["mean_rms"]
    return out


def main_part(env, params, configs, pinned, reps, modes, results, save):
    C = 1 if pinned else len(env.cpus)
    pin = "pinned" if pinned else "unpinned"
    for rep in range(1, reps + 1):
        for dist, n, q in configs:
            shares = shares_of(dist, n)
            S = sum(shares)
            drop = drop_for(S * q / 1e3, params)
            rk = dict(drop=drop, target=params["cycles"], cap_s=params["cap"], min_cycles=params["min_cycles"],
                      hard_s=params["hard"], poll_s=params["poll"])
            ms = [m for m in modes if m != "tact-cons" or not pinned]
            k = (rep - 1) % len(ms)
            for mode in ms[k:] + ms[:k]:
                if mode in env.skip:
                    continue
                group = [(f"p{i}s{s}", s) for i, s in enumerate(shares)]
                t = time.monotonic()
                run, rec, err = execute(env, mode, pinned, [group], q, rk)
                r = {"part": "main", "dist": dist, "n": n, "q_ms": q, "pin": pin, "mode": mode, "rep": rep,
                     "shares": shares, "drop": drop, "cpus": C, "error": err}
                r.update(run_info(run, mode))
                if rec is not None:
                    r.update(analyse_cycles(rec, shares, q, drop, C))
                series = [((t or {}).get("log") or {}).get("rms_series") for t in r.get("tact") or []]
                if series and series[0] and len(series[0]) > drop:
                    # tact's own per-cycle RMS (its --json-log), same warm-up dropped (spec 6:
                    # achieved vs target within 0.5 points of the independent recorder)
                    r["tact_reported_mean_rms"] = statistics.fmean(series[0][drop:])
                r["wall"] = round(time.monotonic() - t, 2)
                results.append(r)
                save()
                note_failure(env, mode, r)
                log(f"main {pin} rep {rep} {dist}-{n} Q={q}ms {mode}: " + brief(r))


def brief(r):
    if r.get("error") and r.get("mean_rms") is None:
        return f"ERROR {r['error'][:300]}"
    parts = []
    if r.get("mean_rms") is not None:
        parts.append(f"mean RMS {r['mean_rms'] * 100:.2f}% over {r['cycles_used']} cycles")
    else:
        parts.append(f"no measured cycle ({r.get('cycles_total', 0)} cycles)")
    if r.get("one_share_rms_mean") is not None:
        parts.append(f"1-share {r['one_share_rms_mean'] * 100:.1f}%")
    if r.get("overhead"):
        parts.append(f"overhead {r['overhead'] * 100:.3f}%")
    if r.get("group_cpu_rate") is not None:
        parts.append(f"group {r['group_cpu_rate']:.2f} CPU")
    if r.get("left_stopped"):
        parts.append(f"LEFT STOPPED {len(r['left_stopped'])}")
    if r.get("error"):
        parts.append(f"error: {r['error'][:200]}")
    return ", ".join(parts) + f" ({r['wall']:.1f} s)"


def note_failure(env, mode, r):
    """A tact mode that fails before recording anything (an option the binary does not have yet,
    say) is skipped for the rest of the run, with the reason."""
    if mode.startswith("tact-") and r.get("error") and r.get("cycles_total") is None:
        env.failures[mode] = env.failures.get(mode, 0) + 1
        if env.failures[mode] >= 2:
            env.skip[mode] = f"failed twice before recording: {r['error'][:300]}"
            log(f"{mode}: skipped from now on ({env.skip[mode]})")


# ---- the I/O test

IO_SHARES = [("A", 1), ("B", 2), ("C", 3)]
IO_B = ("B", (80, 240))


def io_part(env, params, pins, modes, results, save):
    q = 10
    for pin in pins:
        pinned = pin == "pinned"
        C = 1 if pinned else len(env.cpus)
        ms = [m for m in modes if m != "tact-cons" or not pinned]
        # the paper's second run, with the blocked heuristic off (shows the group idling), when
        # the binary has an option for it
        if "tact-opt" in ms and "--no-io" in env.tact_flags:
            ms.append("tact-noio")
        for mode in ms:
            if mode in env.skip:
                continue
            drop = 4
            rk = dict(drop=drop, target=10 ** 9, cap_s=params["io_seconds"], min_cycles=0,
                      hard_s=params["io_seconds"] + 5, poll_s=min(params["poll"], 0.001))
            t = time.monotonic()
            slot_b = 1
            rk["phase_fn"] = lambda: min(2, max(0, env.slots.phase(slot_b)))
            run, rec, err = execute(env, mode, pinned, [IO_SHARES], q, rk, io_member=IO_B)
            r = {"part": "io", "pin": pin, "mode": mode, "rep": 1, "q_ms": q, "shares": [1, 2, 3],
                 "drop": drop, "cpus": C, "error": err}
            r.update(run_info(run, mode))
            if rec is not None:
                r.update(analyse_io(rec, drop))
            r["wall"] = round(time.monotonic() - t, 2)
            results.append(r)
            save()
            note_failure(env, mode, r)
            if r.get("ready_frac"):
                log(f"io {pin} {mode}: ready A:B:C = " + ":".join(f"{x * 100:.1f}" for x in r["ready_frac"])
                    + (f", asleep A/C = {r['asleep_ac'][0] * 100:.1f}/{r['asleep_ac'][1] * 100:.1f}"
                       if r.get("asleep_ac") else "") + f" ({r['n_ready']} ready, {r['n_asleep']} asleep cycles)")
            else:
                log(f"io {pin} {mode}: {brief(r)}")


def analyse_io(rec, drop):
    cyc = cycles_from(rec)
    phases = rec["cycle_phases"]
    ready, asleep, trans = [], [], 0
    series = []
    for i, (c, ph) in enumerate(zip(cyc, phases)):
        tot = sum(c)
        if tot <= 0:
            continue
        f = [x / tot for x in c]
        kind = "ready" if ph[2] == 0 and ph[1] > 0 else ("asleep" if ph[1] == 0 and ph[2] > 0 else "mixed")
        series.append((round(f[0], 4), round(f[1], 4), round(f[2], 4), kind))
        if i < drop:
            continue
        if kind == "ready":
            ready.append(f)
        elif kind == "asleep":
            asleep.append(f)
        else:
            trans += 1
    out = {"cycles_total": len(cyc), "n_ready": len(ready), "n_asleep": len(asleep), "n_mixed": trans,
           "fractions": series, "stop_reason": rec["stop_reason"]}
    if ready:
        out["ready_frac"] = [statistics.fmean(f[i] for f in ready) for i in range(3)]
        out["ready_err_pts"] = max(abs(a - b) * 100 for a, b in zip(out["ready_frac"], (1 / 6, 2 / 6, 3 / 6)))
    if asleep:
        ac = [f[0] / (f[0] + f[2]) for f in asleep if f[0] + f[2] > 0]
        out["asleep_ac"] = [statistics.fmean(ac), 1 - statistics.fmean(ac)]
        out["asleep_b"] = statistics.fmean(f[1] for f in asleep)
        out["asleep_err_pts"] = abs(out["asleep_ac"][0] - 0.25) * 100
    ctl = rec["ctl_end"] - rec["ctl0"]
    wall = rec["end_t"] - rec["t0"]
    out["overhead"] = ctl / 1e9 / wall if wall > 0 else None
    out["group_cpu_rate"] = (sum(rec["end_vals"]) - rec["start_total_ns"]) / 1e9 / wall if wall > 0 else None
    return out


# ---- three instances

MULTI_GROUPS = [[("7", 7), ("8", 8), ("9", 9)], [("4", 4), ("5", 5), ("6", 6)], [("1", 1), ("2", 2), ("3", 3)]]


def multi_part(env, params, pins, modes, results, save):
    phases = params["multi_phases"]
    q = params["multi_q"]
    for pin in pins:
        pinned = pin == "pinned"
        for mode in modes:
            if mode in env.skip:
                continue
            t = time.monotonic()
            r = {"part": "multi", "pin": pin, "mode": mode, "rep": 1, "q_ms": q, "phases_s": list(phases),
                 "error": None}
            try:
                r.update(run_multi(env, mode, pinned, q, phases))
            except Exception as e:
                r["error"] = f"{type(e).__name__}: {e}"
            r["wall"] = round(time.monotonic() - t, 2)
            results.append(r)
            save()
            note_failure(env, mode, r)
            if r.get("avg_err") is not None:
                log(f"multi {pin} {mode}: average within-group error {r['avg_err'] * 100:.2f}% "
                    f"(phases: " + ", ".join(f"{x * 100:.2f}%" if x is not None else "-" for x in r["phase_err"]) + ")")
            else:
                log(f"multi {pin} {mode}: ERROR {r['error']}")


def run_multi(env, mode, pinned, q, phases):
    """Starts group A, then B, then C (one instance / cgroup parent each); samples every member's
    CPU clock every 20 ms; per phase, the regression slope of each member's cumulative CPU gives
    the within-group fractions."""
    runs, members, samples, starts = [], [], [], []
    items = []
    err = None
    slot0 = 0
    try:
        for g, (group, length) in enumerate(zip(MULTI_GROUPS, phases)):
            # each instance is started like a one-group workload, in its own slots
            run = start_at(env, mode, pinned, group, q, slot0 + 8 * g)
            runs.append(run)
            items.append(CLEANUP.push(f"multi {mode} g{g + 1}", run.teardown))
            members += run.members
            starts.append(time.monotonic())
            read = make_reader(members, env.clock)
            labels = [m.label for m in members]

            def check():
                for rr in runs:
                    why = rr.dead_controller()
                    if why:
                        return why
                return None
            s, why = record_series(read, length, 0.02, check)
            samples += [(t, dict(zip(labels, v))) for t, v in s]
            if why:
                err = why
                break
        t_end = time.monotonic()
    finally:
        for it in reversed(items):
            CLEANUP.pop(it)
    out = analyse_multi(samples, starts, t_end, phases)
    out["error"] = err
    out["notes"] = [n for r in runs for n in r.notes]
    out["left_stopped"] = [x for r in runs for x in (r.left_stopped or [])]
    if mode.startswith("tact-"):
        out["tact"] = [t for r in runs for t in (run_info(r, mode).get("tact") or [])]
    return out


def start_at(env, mode, pinned, group, q, slot0):
    run, _ = start(env, mode, pinned, [group], q, slot_base=slot0)
    return run


def analyse_multi(samples, starts, t_end, phases, skip=0.1):
    groups = [[lab for lab, _ in g] for g in MULTI_GROUPS]
    shares = {lab: s for g in MULTI_GROUPS for lab, s in g}
    bounds = starts[1:] + [t_end]
    phase_err, table, group_rates = [], [], []
    all_err = []
    for p, (a, b) in enumerate(zip(starts, bounds)):
        a2 = a + skip * (b - a)
        pts = [(t, v) for t, v in samples if a2 <= t <= b]
        errs = []
        rates = {}
        for g in groups[:p + 1]:
            sl = {}
            for lab in g:
                xs = [t for t, v in pts if lab in v]
                ys = [v[lab] / 1e9 for t, v in pts if lab in v]
                sl[lab] = slope(xs, ys) if len(xs) >= 3 else None
            if any(v is None for v in sl.values()):
                continue
            tot = sum(sl.values())
            S = sum(shares[lab] for lab in g)
            rates[g[0]] = tot
            for lab in g:
                target = shares[lab] / S
                got = sl[lab] / tot if tot > 0 else 0
                e = abs(got - target) / target
                errs.append(e)
                table.append({"phase": p + 1, "process": lab, "target": target, "got": got, "rel_err": e})
        phase_err.append(statistics.fmean(errs) if errs else None)
        all_err += errs
        group_rates.append(rates)
    return {"phase_err": phase_err, "avg_err": statistics.fmean(all_err) if all_err else None,
            "per_process": table, "group_cpu_rates": group_rates,
            "series": [(round(t - starts[0], 3), {k: round(v / 1e9, 4) for k, v in d.items()})
                       for t, d in samples[::5]]}


# ---- scalability

def scal_part(env, params, pins, modes, results, save):
    for pin in pins:
        pinned = pin == "pinned"
        C = 1 if pinned else len(env.cpus)
        for mode in modes:
            for q in params["scal_q"]:
                lost_in_row = 0
                for n in params["scal_n"]:
                    if mode in env.skip:
                        break
                    if n + 8 > workload.SLOTS:
                        break
                    shares = [5] * n
                    S = sum(shares)
                    drop = drop_for(S * q / 1e3, params)
                    rk = dict(drop=drop, target=params["scal_cycles"], cap_s=params["scal_cap"],
                              min_cycles=1, hard_s=params["scal_hard"], poll_s=params["poll"])
                    t = time.monotonic()
                    group = [(f"p{i}", 5) for i in range(n)]
                    run, rec, err = execute(env, mode, pinned, [group], q, rk)
                    r = {"part": "scal", "pin": pin, "mode": mode, "rep": 1, "q_ms": q, "n": n,
                         "shares": shares, "drop": drop, "cpus": C, "error": err}
                    r.update(run_info(run, mode))
                    if rec is not None:
                        a = analyse_cycles(rec, shares, q, drop, C)
                        a.pop("consumed_ms", None)
                        r.update(a)
                    r["lost_control"], r["loss_reason"] = loss_of_control(r)
                    r["wall"] = round(time.monotonic() - t, 2)
                    results.append(r)
                    save()
                    note_failure(env, mode, r)
                    log(f"scal {pin} {mode} Q={q}ms N={n}: " + brief(r)
                        + (f", LOSS OF CONTROL ({r['loss_reason']})" if r["lost_control"] else ""))
                    lost_in_row = lost_in_row + 1 if r["lost_control"] else 0
                    if params["scal_stop_after"] and lost_in_row >= params["scal_stop_after"]:
                        break


def tact_counter(r, key):
    """A counter tact reported (max over its instances): from its closing lines on stderr, else
    from its JSON log; None if neither has it."""
    vals = []
    for t in r.get("tact") or []:
        t = t or {}
        v = (t.get("footer") or {}).get(key)
        if v is None:
            v = (t.get("log") or {}).get(key)
        if v is not None:
            vals.append(v)
    return max(vals) if vals else None


def overruns_of(r):
    return tact_counter(r, "overruns")


def loss_of_control(r):
    """For tact: mean RMS > 10% or overruns on > 1% of quanta (spec claim 7). A baseline has no
    such notion (cpulimit's error is its accuracy, not a breakdown): its points are all fitted."""
    if not r["mode"].startswith("tact-"):
        return False, None
    if r.get("mean_rms") is not None and r["mean_rms"] > 0.10:
        return True, f"mean RMS {r['mean_rms'] * 100:.1f}% > 10%"
    ovr, quanta = tact_counter(r, "overruns"), tact_counter(r, "quanta")
    if ovr is not None and quanta:
        if ovr / quanta > 0.01:
            return True, f"overruns {ovr}/{quanta} quanta > 1%"
    return False, None


# --------------------------------------------------------------------------
# summary and report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cell(xs, scale=100.0, fmt="{:.1f}", reps_hint=True):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    m = statistics.median(xs) * scale
    if len(xs) == 1:
        return fmt.format(m)
    lo, hi = min(xs) * scale, max(xs) * scale
    return f"{fmt.format(m)} [{fmt.format(lo)}-{fmt.format(hi)}]"


def table_text(head, rows):
    rows = [head] + rows
    w = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def mark(ok):
    return "PASS" if ok else "miss"


def main_tables(results, modes, pin):
    rs = [r for r in results if r["part"] == "main" and r["pin"] == pin]
    if not rs:
        return "", {}
    ms = [m for m in modes if any(r["mode"] == m for r in rs)]
    configs = []
    for r in rs:
        key = (r["dist"], r["n"], r["q_ms"])
        if key not in configs:
            configs.append(key)
    configs.sort(key=lambda k: (DISTS.index(k[0]), k[1], k[2]))
    out = []
    get = lambda d, n, q, m: [r for r in rs if (r["dist"], r["n"], r["q_ms"], r["mode"]) == (d, n, q, m)]  # noqa: E731
    # 1. mean RMS
    rows = []
    for d, n, q in configs:
        allr = [r for m in ms for r in get(d, n, q, m)]
        cyc = sorted({r.get("cycles_used") for r in allr if r.get("cycles_used") is not None})
        reps = max((r["rep"] for r in allr), default=0)
        drops = sorted({r["drop"] for r in allr})
        cyc_s = (f"{cyc[0]}" if len(cyc) == 1 else f"{cyc[0]}-{cyc[-1]}") if cyc else "0"
        row = [f"{d}-{n}", str(q), f"{cyc_s}x{reps} (-{'/'.join(map(str, drops))})"]
        for m in ms:
            g = get(d, n, q, m)
            c = cell([r.get("mean_rms") for r in g])
            if c == "-" and g and g[0].get("error"):
                c = "err"
            if m.startswith("tact-") and d in ("linear", "equal") and c not in ("-", "err"):
                c += " " + ("ok" if med([r.get("mean_rms") for r in g]) <= 0.05 else "MISS")
            row.append(c)
        row.append(paper_figure(d, n, q))
        rows.append(row)
    title = (f"{pin}{' (all processes on CPU 1, recorder on CPU 0)' if pin == 'pinned' else ' (all CPUs)'}: "
             "mean RMS relative error per cycle, %, median [min-max] over reps; "
             "cycles = measured cycles per rep x reps (-dropped); tact target <= 5% for linear and equal")
    out.append(title + "\n" + table_text(["workload", "Q ms", "cycles"] + ms + ["paper"], rows))
    # 2. skewed: per-process RMS of the 1-share processes (mean, sd across them) and the big one
    rows = []
    for d, n, q in configs:
        if d != "skewed":
            continue
        row = [f"{d}-{n}", str(q)]
        for m in ms:
            g = get(d, n, q, m)
            one = med([r.get("one_share_rms_mean") for r in g])
            sd = med([r.get("one_share_rms_sd") for r in g])
            big = med([r.get("big_share_rms") for r in g])
            if one is None:
                row.append("-")
                continue
            c = f"{one * 100:.1f} sd{sd * 100:.1f} / {big * 100:.2f}"
            if m.startswith("tact-"):
                c += " " + ("ok" if one <= 0.15 else "MISS")
            row.append(c)
        row.append("31.2 sd3.07 / 0.36" if (n, q) == (20, 40) else "")
        rows.append(row)
    if rows:
        out.append(f"{pin}: skewed workloads, per-process RMS of RelErr over the cycles, %: mean over the "
                   "1-share processes, sd across them / the big process; tact target: 1-share <= 15%\n"
                   + table_text(["workload", "Q ms"] + ms + ["paper"], rows))
    # 3. overhead and what else the recorder saw
    cms = [m for m in ms if m in CONTROLLER_MODES]
    rows = []
    for d, n, q in configs:
        row = [f"{d}-{n}", str(q)]
        for m in cms:
            g = get(d, n, q, m)
            c = cell([r.get("overhead") for r in g], fmt="{:.3f}")
            ovr = [overruns_of(r) for r in g]
            if any(o is not None for o in ovr):
                c += f" ovr {max(o for o in ovr if o is not None)}"
            rq = med([tact_counter(r, "reads_per_quantum") for r in g])
            if rq is not None:
                c += f" r/q {rq:.2f}"
            if m.startswith("tact-") and (n, q) == (20, 10) and pin == "pinned" and c != "-":
                c += " " + ("ok" if med([r.get("overhead") for r in g]) <= 0.005 else "MISS")
            row.append(c)
        k = [r for m in ms for r in get(d, n, q, m)]
        row.append(cell([r.get("recorder_cpu") for r in k], fmt="{:.2f}"))
        row.append(cell([r.get("group_cpu_rate") for r in get(d, n, q, "kernel")], scale=1, fmt="{:.2f}"))
        if pin != "pinned":
            kr = med([r.get("group_cpu_rate") for r in get(d, n, q, "kernel")])
            cells = []
            for m in ms:
                u = med([r.get("utilization") for r in get(d, n, q, m)])
                if u is None:
                    continue
                rel = med([r.get("group_cpu_rate") for r in get(d, n, q, m)])
                cells.append(f"{m}:{u * 100:.0f}" + (f"/{rel / kr * 100:.0f}" if kr and rel is not None else ""))
            row.append(" ".join(cells))
        rows.append(row)
    head = ["workload", "Q ms"] + [f"{m} ovh %" for m in cms] + ["recorder %CPU", "kernel group CPUs"]
    if pin != "pinned":
        head.append("group CPU, % of min(C,N) / % of kernel alone's, per mode")
    out.append(f"{pin}: overhead = controller CPU time / wall time over the measured window, % of one CPU "
               "(tact target <= 0.5% at 20 processes, Q = 10 ms; ovr = quanta tact missed, r/q = its reads "
               "per quantum, from its closing lines); recorder = the harness's own CPU\n"
               + table_text(head, rows))
    if pin != "pinned":
        rows = []
        for d, n, q in configs:
            row = [f"{d}-{n}", str(q)]
            for m in ms:
                row.append(cell([r.get("mean_rms_vs_phi") for r in get(d, n, q, m)]))
            rows.append(row)
        out.append(f"{pin}: mean RMS against the feasible shares phi (surplus-fair readjustment for "
                   f"single-threaded processes on {max(r['cpus'] for r in rs)} CPUs; = share_i/S when feasible), %\n"
                   + table_text(["workload", "Q ms"] + ms, rows))
    return "\n\n".join(out), {"configs": configs, "modes": ms}


def io_table(results):
    rs = [r for r in results if r["part"] == "io"]
    if not rs:
        return ""
    rows = []
    for r in rs:
        rf = r.get("ready_frac")
        ac = r.get("asleep_ac")
        ok = None
        if rf and ac:
            ok = r["ready_err_pts"] <= 2 and r["asleep_err_pts"] <= 2
        rows.append([r["pin"], r["mode"],
                     ":".join(f"{x * 100:.1f}" for x in rf) if rf else "-",
                     f"{ac[0] * 100:.1f}/{ac[1] * 100:.1f}" if ac else "-",
                     f"{r.get('n_ready', 0)}/{r.get('n_asleep', 0)}/{r.get('n_mixed', 0)}",
                     f"{r['group_cpu_rate']:.2f}" if r.get("group_cpu_rate") is not None else "-",
                     f"{r['overhead'] * 100:.3f}" if r.get("overhead") is not None else "-",
                     (mark(ok) if r["mode"].startswith("tact-") else ("(yes)" if ok else "(no)")) if ok is not None
                     else (r.get("error") or "-")[:60]])
    return ("I/O test (claim 5): A:B:C = 1:2:3, Q = 10 ms, B sleeps 240 ms after each 80 ms of CPU; "
            "per-cycle fractions of group CPU, mean over the cycles in each phase (first 4 dropped); "
            "expect 16.7:33.3:50.0 while B is ready and A/C 25/75 while it sleeps, within 2 points\n"
            + table_text(["pin", "mode", "B ready A:B:C %", "B asleep A/C %", "cycles ready/asleep/mixed",
                          "group CPUs", "ovh %", "within 2 pts"], rows)
            + "\n(tact-noio: the blocked heuristic off, if the binary has --no-io: the group idles while B sleeps)")


def multi_table(results):
    rs = [r for r in results if r["part"] == "multi"]
    if not rs:
        return ""
    rows = []
    for r in rs:
        pe = r.get("phase_err") or []
        avg = r.get("avg_err")
        gr = r.get("group_cpu_rates") or []
        tot = " | ".join("/".join(f"{v:.2f}" for v in d.values()) for d in gr)
        rows.append([r["pin"], r["mode"]] + [f"{x * 100:.2f}" if x is not None else "-" for x in (pe + [None] * 3)[:3]]
                    + [f"{avg * 100:.2f}" if avg is not None else "-", tot,
                       (mark(avg < 0.02) if r["mode"].startswith("tact-") else "") if avg is not None
                       else (r.get("error") or "")[:60]])
    ph = rs[0]["phases_s"]
    return (f"three instances (claim 6): groups {{7,8,9}}, {{4,5,6}}, {{1,2,3}} started in turn, phases "
            f"{ph[0]:g}/{ph[1]:g}/{ph[2]:g} s, Q = {rs[0]['q_ms']} ms; mean relative within-group error "
            f"of the regression-slope fractions, % (paper: {PAPER_MULTI}); group CPU rates (CPUs) per phase\n"
            + table_text(["pin", "mode", "phase 1", "phase 2", "phase 3", "average", "group CPUs per phase",
                          "avg < 2%"], rows))


def scal_analysis(results):
    rs = [r for r in results if r["part"] == "scal"]
    for r in rs:  # the current rule, also on saved results
        r["lost_control"], r["loss_reason"] = loss_of_control(r)
    out = {}
    for key in sorted({(r["pin"], r["mode"], r["q_ms"]) for r in rs}):
        pts = sorted([r for r in rs if (r["pin"], r["mode"], r["q_ms"]) == key], key=lambda r: r["n"])
        # ALPS loses control past N*; the fit is of the linear part before it (paper 5.2)
        ok = [r for r in pts if r.get("overhead") is not None and not r.get("lost_control")]
        xs = [r["n"] for r in ok]
        ys = [r["overhead"] * 100 for r in ok]
        f = fit_line(xs, ys)
        lost = [r["n"] for r in pts if r.get("lost_control")]
        d = {"points": [(r["n"], r.get("overhead"), r.get("mean_rms"), r.get("lost_control"), r.get("loss_reason"))
                        for r in pts],
             "fit": f, "nstar_pred": solve_nstar(f[0], f[1]) if f else None,
             "first_loss": min(lost) if lost else None, "max_n": max((r["n"] for r in pts), default=None)}
        out[f"{key[0]}/{key[1]}/{key[2]}"] = d
    return out


def scal_table(results):
    sa = scal_analysis(results)
    if not sa:
        return "", sa
    rows = []
    for key, d in sa.items():
        pin, mode, q = key.split("/")
        q = int(q)
        pts = " ".join(f"{n}:{o * 100:.3f}" + ("!" if lost else "") for n, o, _, lost, _ in d["points"] if o is not None)
        f = d["fit"]
        fit = f"{f[0]:.4f}N{f[1]:+.4f} (r2 {f[2]:.2f})" if f else "-"
        ns = d["nstar_pred"]
        if mode.startswith("tact-"):
            obs = f"lost at {d['first_loss']}" if d["first_loss"] else f"held to {d['max_n']}"
        else:
            obs = "RMS " + " ".join(f"{n}:{m * 100:.0f}%" for n, _, m, _, _ in d["points"] if m is not None)
        pa, pb = PAPER_U[q]
        verdict = ""
        if mode.startswith("tact-") and ns is not None:
            verdict = mark(ns >= PAPER_NSTAR_PRED[q] and (d["first_loss"] is None or d["first_loss"] >= PAPER_NSTAR_OBS[q]))
        rows.append([pin, mode, str(q), pts, fit, f"{ns:.0f}" if ns else "-", obs,
                     f"{pa}N+{pb}: N* {PAPER_NSTAR_PRED[q]} pred / {PAPER_NSTAR_OBS[q]} obs", verdict])
    return ("scalability (claim 7): equal shares of 5, N processes; overhead % of one CPU per N "
            "('!' = loss of control: RMS > 10% or overruns > 1% of quanta); U_Q(N) fitted on the points in "
            "control; N* solves U_Q(N*) = 100/(N*+1)\n"
            + table_text(["pin", "mode", "Q ms", "N:overhead%", "fit U_Q(N) %", "N* pred", "observed", "paper",
                          "N* >= paper"], rows)), sa


def targets_table(results, modes):
    """The issue's targets with pass/miss, for every mode (the targets are tact's; the baselines are
    shown for comparison)."""
    rs = [r for r in results if r["part"] == "main" and r["pin"] == "pinned"]
    ms = [m for m in modes if any(r["mode"] == m for r in results)]
    rows = []

    def worst(mode, pred, key):
        by = {}
        for r in rs:
            if r["mode"] == mode and pred(r):
                by.setdefault((r["dist"], r["n"], r["q_ms"]), []).append(r.get(key))
        vals = [(med(v), k) for k, v in by.items() if med(v) is not None]
        return max(vals) if vals else (None, None)

    def row(name, limit, pred, key, applies=lambda m: True, fmt="{:.1f}", scale=100):
        cells = []
        for m in ms:
            if not applies(m):
                cells.append("")
                continue
            v, k = worst(m, pred, key)
            if v is None:
                cells.append("-")
                continue
            tag = ("PASS" if v <= limit else "miss") if m.startswith("tact-") else ("(yes)" if v <= limit else "(no)")
            cells.append(f"{fmt.format(v * scale)} {tag} ({k[0]}-{k[1]} {k[2]}ms)")
        rows.append([name] + cells)

    row("mean RMS <= 5%, linear, every Q (worst)", 0.05, lambda r: r["dist"] == "linear", "mean_rms")
    row("mean RMS <= 5%, equal, every Q (worst)", 0.05, lambda r: r["dist"] == "equal", "mean_rms")
    row("skewed 1-share per-process RMS <= 15% (worst)", 0.15, lambda r: r["dist"] == "skewed", "one_share_rms_mean")
    row("overhead <= 0.5% of a CPU, 20 procs, Q=10ms (worst)", 0.005,
        lambda r: r["n"] == 20 and r["q_ms"] == 10, "overhead", applies=lambda m: m in CONTROLLER_MODES,
        fmt="{:.3f}")
    if not rows or all(all(c in ("", "-") for c in r[1:]) for r in rows):
        return ""
    text = ("targets (issue 4), pinned: the worst workload's median over reps; PASS/miss for tact, "
            "(yes)/(no) for the baselines\n" + table_text(["target"] + ms, rows))
    # claim 3: optimized is cheaper than basic on every workload, accuracy within 0.5 points
    ratios, diffs = [], []
    keys = sorted({(r["dist"], r["n"], r["q_ms"]) for r in rs})
    for k in keys:
        b = [r for r in rs if (r["dist"], r["n"], r["q_ms"]) == k and r["mode"] == "tact-basic"]
        o = [r for r in rs if (r["dist"], r["n"], r["q_ms"]) == k and r["mode"] == "tact-opt"]
        bo, oo = med([r.get("overhead") for r in b]), med([r.get("overhead") for r in o])
        if bo and oo:
            ratios.append((bo / oo, k))
        br, orr = med([r.get("mean_rms") for r in b]), med([r.get("mean_rms") for r in o])
        if br is not None and orr is not None:
            diffs.append((abs(br - orr) * 100, k))
    if ratios:
        lo, hi = min(ratios), max(ratios)
        text += (f"\nclaim 3: basic/optimized overhead ratio {lo[0]:.2f}x ({lo[1][0]}-{lo[1][1]} {lo[1][2]}ms) to "
                 f"{hi[0]:.2f}x (paper 1.8-5.9x): optimized cheaper on every workload: {mark(lo[0] > 1)}")
    own = [(abs(r["tact_reported_mean_rms"] - r["mean_rms"]) * 100, r) for r in rs
           if r.get("tact_reported_mean_rms") is not None and r.get("mean_rms") is not None]
    if own:
        d, r = max(own, key=lambda x: x[0])
        text += (f"\nspec 6: tact's own --json-log mean RMS against the recorder's: at most {d:.2f} points apart "
                 f"({r['mode']} {r['dist']}-{r['n']} {r['q_ms']}ms, {len(own)} runs): within 0.5 points: {mark(d <= 0.5)}")
    if diffs:
        d = max(diffs)
        text += (f"\nclaim 3: |mean RMS optimized - basic| at most {d[0]:.2f} points ({d[1][0]}-{d[1][1]} "
                 f"{d[1][2]}ms): within 0.5 points: {mark(d[0] <= 0.5)}")
    return text


def report(results, cfg, env_info, modes, skipped, outdir, elapsed):
    print()
    e = env_info
    head = [f"bench/share on {e['kernel']} ({e['scheduler']}), HZ={e['hz']}, sched_autogroup_enabled="
            f"{e['sched_autogroup_enabled']}, {e['cpus']} CPUs ({e['cpu_model']}), cgroup: {e['cgroup']}, "
            f"clock: {e['clock']}; preset {cfg['preset']}; load average {' '.join(e.get('loadavg_start', []))} "
            f"at the start",
            f"cycles: a run stops after {cfg['cycles']} measured cycles"
            + (f", or after {cfg['cap']} s with at least {cfg['min_cycles']}" if cfg.get("cap") is not None else "")
            + (f", or at {cfg['hard']} s" if cfg.get("hard") is not None else "") + "; warm-up dropped: "
            + ("the first 4 cycles" if cfg["paper_drop"] else
               "the first 4 cycles, or those covering the first 1 s of group CPU when cycles are longer (at least 1)")]
    for m, why in skipped.items():
        head.append(f"  SKIPPED {m}: {why}")
    wc = [r for r in results if r.get("work_cv") is not None]
    if wc:
        cvs = sorted(r["work_cv"] for r in wc)
        ipn = statistics.median(r["work_iters_per_ns"] for r in wc)
        head.append(f"work check: {ipn:.3f} iterations per CPU-ns; spread across the processes of a run (CV) "
                    f"median {statistics.median(cvs) * 100:.2f}%, max {cvs[-1] * 100:.2f}% over {len(wc)} runs "
                    "(CPU time is work)")
    texts = ["\n".join(head)]
    for pin in ("pinned", "unpinned"):
        t, _ = main_tables(results, modes, pin)
        if t:
            texts.append(t)
    tt = targets_table(results, modes)
    if tt:
        texts.append(tt)
    for t in (io_table(results), multi_table(results)):
        if t:
            texts.append(t)
    st, sa = scal_table(results)
    if st:
        texts.append(st)
    stopped = [r for r in results if r.get("left_stopped")]
    if stopped:
        texts.append("SAFETY: processes left stopped after their controller exited: " +
                     "; ".join(f"{r['part']} {r['mode']} {r.get('dist', '')}-{r.get('n', '')}: {r['left_stopped']}"
                               for r in stopped))
    errs = [r for r in results if r.get("error")]
    if errs:
        texts.append(f"{len(errs)} run(s) reported errors, e.g.: " +
                     "; ".join(f"{r['part']} {r['mode']}: {r['error'][:160]}" for r in errs[:4]))
    full = "\n\n".join(texts)
    print(full)
    print(f"\ntotal {elapsed:.0f} s")
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(full + "\n")
    out = {"config": cfg, "env": env_info, "modes": modes, "skipped": skipped, "elapsed_s": elapsed,
           "scalability": sa, "results": results}
    path = os.path.join(outdir, "results.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=str)
    files = plots(results, modes, outdir, sa)
    log(f"wrote {path}, {os.path.join(outdir, 'table.txt')}" + "".join(", " + x for x in files))


# --------------------------------------------------------------------------
# plots

MODE_COLORS = {"kernel": "tab:gray", "nice": "tab:brown", "cpulimit": "tab:orange", "cgroup": "tab:purple",
               "tact-basic": "tab:blue", "tact-opt": "tab:green", "tact-cgroup": "tab:olive", "tact-cons": "tab:cyan"}


def plots(results, modes, outdir, sa):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("plots skipped: matplotlib not installed (pip install -r bench/requirements.txt)")
        return []
    files = []
    # 1. mean RMS per workload and mode, pinned and unpinned
    pins = [p for p in ("pinned", "unpinned") if any(r["part"] == "main" and r["pin"] == p for r in results)]
    if pins:
        fig, axes = plt.subplots(len(pins), 1, figsize=(14, 4.2 * len(pins)), squeeze=False)
        for ax, pin in zip(axes[:, 0], pins):
            rs = [r for r in results if r["part"] == "main" and r["pin"] == pin]
            cfgs = sorted({(r["dist"], r["n"], r["q_ms"]) for r in rs}, key=lambda k: (DISTS.index(k[0]), k[1], k[2]))
            ms = [m for m in modes if any(r["mode"] == m for r in rs)]
            w = 0.8 / max(1, len(ms))
            for j, m in enumerate(ms):
                xs, ys, lo, hi = [], [], [], []
                for i, c in enumerate(cfgs):
                    v = [r["mean_rms"] * 100 for r in rs if (r["dist"], r["n"], r["q_ms"]) == c and r["mode"] == m
                         and r.get("mean_rms") is not None]
                    if v:
                        md = statistics.median(v)
                        xs.append(i + (j - len(ms) / 2 + 0.5) * w)
                        ys.append(max(md, 1e-3))
                        lo.append(max(md, 1e-3) - max(min(v), 1e-3))
                        hi.append(max(v) - md)
                ax.bar(xs, ys, w, yerr=[lo, hi], label=m, color=MODE_COLORS.get(m), capsize=1.5)
            ax.axhline(5, color="k", ls=":", lw=1)
            ax.set_yscale("log")
            ax.set_xticks(range(len(cfgs)))
            ax.set_xticklabels([f"{d[:3]}-{n}\n{q}ms" for d, n, q in cfgs], fontsize=7)
            ax.set_ylabel("mean RMS rel. error %")
            ax.set_title(f"{pin}: mean RMS relative error per cycle (median, min-max over reps); dotted: 5%", fontsize=9)
            ax.legend(fontsize=7, ncol=len(ms))
        fig.tight_layout()
        f = os.path.join(outdir, "rms.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    # 2. per-cycle RMS series (the paper's Figure 4) for linear-5 at 10 ms, pinned, first rep
    rs = [r for r in results if r["part"] == "main" and r["pin"] == "pinned" and r.get("rms_series")
          and (r["dist"], r["n"], r["q_ms"]) == ("linear", 5, 10) and r["rep"] == 1]
    if rs:
        fig, ax = plt.subplots(figsize=(10, 3.6))
        for r in rs:
            ax.plot(range(1, len(r["rms_series"]) + 1), [x * 100 for x in r["rms_series"]], marker=".",
                    label=r["mode"], color=MODE_COLORS.get(r["mode"]))
        ax.axvline(rs[0]["drop"] + 0.5, color="k", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("cycle (dotted: end of the dropped warm-up)")
        ax.set_ylabel("RMS relative error %")
        ax.set_title("linear-5, Q = 10 ms, pinned: RMS relative error per cycle (paper Fig. 4)", fontsize=9)
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        f = os.path.join(outdir, "cycles.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    # 3. I/O test fractions
    rs = [r for r in results if r["part"] == "io" and r.get("fractions")]
    if rs:
        fig, axes = plt.subplots(len(rs), 1, figsize=(11, 1.9 * len(rs)), sharex=True, squeeze=False)
        for ax, r in zip(axes[:, 0], rs):
            fr = r["fractions"]
            xs = range(1, len(fr) + 1)
            for i, (lab, col) in enumerate((("A", "tab:blue"), ("B", "tab:orange"), ("C", "tab:green"))):
                ax.plot(xs, [f[i] * 100 for f in fr], color=col, lw=1, label=lab)
            for i, f in enumerate(fr):
                if f[3] == "asleep":
                    ax.axvspan(i + 0.5, i + 1.5, color="gray", alpha=0.15, lw=0)
            for y in (16.7, 25, 33.3, 50, 75):
                ax.axhline(y, color="k", ls=":", lw=0.5)
            ax.set_ylabel("% of group")
            ax.set_title(f"I/O test {r['pin']} {r['mode']} (gray: B asleep)", fontsize=8)
            ax.legend(fontsize=7, loc="upper right", ncol=3)
        axes[-1, 0].set_xlabel("cycle (60 ms of group CPU each)")
        fig.tight_layout()
        f = os.path.join(outdir, "io.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    # 4. three instances: cumulative CPU per process (paper Fig. 10)
    rs = [r for r in results if r["part"] == "multi" and r.get("series")]
    if rs:
        fig, axes = plt.subplots(1, len(rs), figsize=(5 * len(rs), 3.8), squeeze=False)
        for ax, r in zip(axes[0], rs):
            labels = sorted({k for _, d in r["series"] for k in d}, key=int)
            for lab in labels:
                pts = [(t, d[lab]) for t, d in r["series"] if lab in d]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1, label=lab)
            ax.set_title(f"{r['pin']} {r['mode']}", fontsize=8)
            ax.set_xlabel("s")
            ax.set_ylabel("cumulative CPU s")
            ax.legend(fontsize=6, ncol=3)
        fig.tight_layout()
        f = os.path.join(outdir, "multi.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    # 5. scalability: overhead vs N with fits and 100/(N+1)
    if sa:
        qs = sorted({int(k.split("/")[2]) for k in sa})
        fig, axes = plt.subplots(1, len(qs), figsize=(5 * len(qs), 3.8), squeeze=False)
        for ax, q in zip(axes[0], qs):
            nmax = 10
            for k, d in sa.items():
                pin, mode, qq = k.split("/")
                if int(qq) != q:
                    continue
                pts = [(n, o * 100) for n, o, _, _, _ in d["points"] if o is not None]
                if not pts:
                    continue
                nmax = max(nmax, max(p[0] for p in pts))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ls="",
                        color=MODE_COLORS.get(mode), label=f"{mode} {pin}")
                lost = [(n, o * 100) for n, o, _, l, _ in d["points"] if o is not None and l]
                if lost:
                    ax.plot([p[0] for p in lost], [p[1] for p in lost], marker="x", ls="", color="r")
                if d["fit"]:
                    a, b, _ = d["fit"]
                    ax.plot([0, nmax], [b, a * nmax + b], color=MODE_COLORS.get(mode), lw=0.8)
            pa, pb = PAPER_U[q]
            xs = list(range(1, int(nmax * 1.1) + 2))
            ax.plot(xs, [pa * x + pb for x in xs], "k--", lw=0.8, label="paper U_Q")
            ax.plot(xs, [100 / (x + 1) for x in xs], "r:", lw=0.8, label="100/(N+1)")
            ax.set_yscale("log")
            ax.set_xlabel("N processes (equal shares of 5)")
            ax.set_ylabel("overhead % of one CPU")
            ax.set_title(f"Q = {q} ms", fontsize=9)
            ax.legend(fontsize=6)
        fig.tight_layout()
        f = os.path.join(outdir, "scalability.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files


# --------------------------------------------------------------------------
# planning

def make_plan(params, parts, pins, sel, run_modes):
    plan = {"main": [], "io": [], "multi": [], "scal": []}
    if "main" in parts:
        for pin, key, rkey in (("pinned", "main_pinned", "reps"), ("unpinned", "main_unpinned", "unpinned_reps")):
            if pin in pins:
                cf = [c for c in params[key] if config_selected(sel, *c)]
                if cf:
                    plan["main"].append((pin, cf, params[rkey]))
    if "io" in parts:
        for pin in params["io_pins"]:
            if pin in pins:
                plan["io"].append((pin, len([m for m in run_modes if m != "tact-cons" or pin != "pinned"])))
    multi_modes = [m for m in params["multi_modes"] if m in run_modes]
    if "multi" in parts and multi_modes:
        for pin in params["multi_pins"]:
            if pin in pins:
                plan["multi"].append((pin, len(multi_modes)))
    scal_modes = [m for m in params["scal_modes"] if m in run_modes]
    if "scal" in parts and scal_modes and params["scal_q"]:
        for pin in params["scal_pins"]:
            if pin in pins:
                plan["scal"].append((pin, len(scal_modes)))
    return plan, multi_modes, scal_modes


def estimate(params, plan, modes_main, cpus):
    """Seconds the plan should take on an otherwise idle machine (cycles at full group speed)."""
    tot = 0.0
    per_run = 0.35
    for pin, configs, reps in plan["main"]:
        C = 1 if pin == "pinned" else cpus
        nm = len([m for m in modes_main if m != "tact-cons" or pin != "pinned"])
        for d, n, q in configs:
            L = n * n * q / 1e3 / C
            drop = drop_for(L * C, params)
            t = min(max(params["cap"], (drop + params["min_cycles"]) * L * 1.05), (drop + params["cycles"]) * L,
                    params["hard"])
            tot += reps * nm * (t + per_run)
    for pin, nm in plan["io"]:
        tot += nm * (params["io_seconds"] + per_run)
    for pin, nm in plan["multi"]:
        tot += nm * (sum(params["multi_phases"]) + 3 * per_run)
    for pin, nm in plan["scal"]:
        C = 1 if pin == "pinned" else cpus
        for q in params["scal_q"]:
            for n in params["scal_n"]:
                L = 5 * n * q / 1e3 / C
                drop = drop_for(L * C, params)
                t = min(max(params["scal_cap"], (drop + 1) * L * 1.05), (drop + params["scal_cycles"]) * L,
                        params["scal_hard"])
                tot += nm * (t + per_run + n * 0.002)
    return tot


def parse_only(tokens):
    """--only: parts (main io multi scal), distributions (linear equal skewed), sizes (n5 n10 n20 or
    linear-5), quanta (q10 q20 q40), pinnings (pinned unpinned). Classes intersect; tokens of one
    class unite."""
    sel = {"part": set(), "dist": set(), "n": set(), "dn": set(), "q": set(), "pin": set()}
    for t in tokens:
        t = t.strip().lower()
        if not t:
            continue
        if t in PARTS:
            sel["part"].add(t)
        elif t in DISTS:
            sel["dist"].add(t)
        elif re.fullmatch(r"n\d+", t):
            sel["n"].add(int(t[1:]))
        elif re.fullmatch(r"q\d+", t):
            sel["q"].add(int(t[1:]))
        elif t in ("pinned", "unpinned"):
            sel["pin"].add(t)
        elif re.fullmatch(r"(linear|equal|skewed)-\d+", t):
            d, n = t.split("-")
            sel["dn"].add((d, int(n)))
        else:
            raise SystemExit(f"--only: unknown token {t!r} (parts {', '.join(PARTS)}; linear/equal/skewed; "
                             "n5/n10/...; linear-5; q10/q20/q40; pinned/unpinned)")
    return sel


def config_selected(sel, d, n, q):
    if sel["dist"] and d not in sel["dist"]:
        return False
    if sel["n"] and n not in sel["n"]:
        return False
    if sel["dn"] and (d, n) not in sel["dn"]:
        return False
    if sel["q"] and q not in sel["q"]:
        return False
    return True


# --------------------------------------------------------------------------
# self-test

def self_test():
    metrics.self_test()
    import tempfile as tf
    with tf.TemporaryDirectory() as tmp:
        os.makedirs(f"{tmp}/sys/fs/cgroup/cpu")
        open(f"{tmp}/sys/fs/cgroup/cpu/cpu.shares", "w").close()
        mounts = ("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
                  "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
                  "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
        (v, mp), why = detect_cpu_cgroup(mounts, tmp)
        assert v == 1 and mp == f"{tmp}/sys/fs/cgroup/cpu", (v, mp, why)
        (v, mp), why = detect_cpu_cgroup("cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n", tmp)
        assert v is None and why, why
        os.makedirs(f"{tmp}/v2")
        with open(f"{tmp}/v2/cgroup.subtree_control", "w") as f:
            f.write("cpu memory\n")
        (v, mp), why = detect_cpu_cgroup("cgroup2 /v2 cgroup2 rw 0 0\n", tmp)
        assert v == 2, why
        log_path = f"{tmp}/log.jsonl"
        with open(log_path, "w") as f:
            f.write('{"cycle": 1, "group": {"overruns": 0, "quanta": 25}}\nnot json\n'
                    '{"cycle": 2, "group": {"overruns": 3, "quanta": 50, "reads": 70}}\n')
        s = tact_log_summary(log_path)
        assert s["lines"] == 2 and s["bad_lines"] == 1 and s["overruns"] == 3 and s["quanta"] == 50, s
    assert parse_only(["io", "linear-5", "q10"])["dn"] == {("linear", 5)}
    f = tact_footer("tact: backend signals: optimized ALPS\n...\ntact: 40 cycles, 1000 quanta (3 missed), 2.50 reads "
                    "and 0.120 signals per quantum\ntact: own CPU 0.050 s over 10.0 s: 0.50% of one CPU\n")
    assert f == {"cycles": 40, "quanta": 1000, "overruns": 3, "reads_per_quantum": 2.5,
                 "signals_per_quantum": 0.12, "own_cpu_s": 0.05, "wall_s": 10.0}, f
    f = tact_footer("tact: 183 cycles, 203 quanta (0 missed), 1 checks between ticks, 9 idle quanta slept through, "
                    "1.44 reads and 0.010 signals per quantum\n")
    assert f == {"cycles": 183, "quanta": 203, "overruns": 0, "checks_between_ticks": 1, "idle_quanta": 9,
                 "reads_per_quantum": 1.44, "signals_per_quantum": 0.01}, f
    assert detect_cpuacct_v1("cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n") == "/sys/fs/cgroup/cpuacct"
    assert detect_cpuacct_v1("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n") is None
    # the two CPU-time sources agree on a live process (this one)
    clk = workload.cpu_clock_id(os.getpid())
    a = time.clock_gettime_ns(clk)
    with open(f"/proc/{os.getpid()}/schedstat") as f:
        b = int(f.read().split()[0])
    c = time.clock_gettime_ns(clk)
    assert a - 1_000_000 <= b <= c + 1_000_000, (a, b, c)
    print("run.py self-test: passed")


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="2-minute smoke run (5-process workloads at 10 ms)")
    g.add_argument("--full", action="store_true",
                   help="the paper's protocol: 200 cycles (first 4 dropped) x 3 runs x 27 workloads x both "
                        "pinnings, + full I/O, multi and scalability parts (days with all modes)")
    ap.add_argument("--modes", default=",".join(ALL_MODES),
                    help="comma list of " + ",".join(ALL_MODES) + " (or 'baselines', 'tact')")
    ap.add_argument("--only", default="", help="comma list: parts (main,io,multi,scal), linear/equal/skewed, "
                    "n5/n10/n20, linear-5, q10/q20/q40, pinned/unpinned")
    ap.add_argument("--reps", type=int, help="repetitions of the main part, pinned (and unpinned)")
    ap.add_argument("--cycles", type=int, help="measured cycles per run (after the warm-up)")
    ap.add_argument("--cap", type=float, help="wall seconds after which a run stops once it has --min-cycles")
    ap.add_argument("--min-cycles", type=int, help="measured cycles a run waits for past --cap")
    ap.add_argument("--hard", type=float, help="wall seconds after which a run stops regardless")
    ap.add_argument("--drop", type=int, help="warm-up cycles dropped (default: 4, fewer for long cycles; "
                    "--full: 4)")
    ap.add_argument("--poll", type=float, default=0.001, help="recorder poll interval, s (default 0.001)")
    ap.add_argument("--clock", choices=["cpuclock", "schedstat"], default="cpuclock",
                    help="per-process CPU time source of the recorder (default cpuclock)")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")),
                    help="tact binary (default $TACT or target/release/tact)")
    ap.add_argument("--tact-arg", action="append", default=[],
                    help="extra argument for every `tact share` (repeatable)")
    ap.add_argument("--cpulimit", default="cpulimit")
    ap.add_argument("--pin-cpu", type=int, help="the CPU of pinned runs (default: the last one)")
    ap.add_argument("--recorder-cpu", type=int, help="the harness's CPU (default: the first one)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "share"))
    ap.add_argument("--lock", default=DEFAULT_LOCK,
                    help="wait while this file exists, then hold it during the run ('' to skip)")
    ap.add_argument("--from-results", metavar="FILE",
                    help="run nothing: report on a saved results.json, or the results.partial.jsonl of a "
                         "stopped run")
    ap.add_argument("--self-test", action="store_true", help="check the metrics and parsers, then exit")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its estimated duration, then exit")
    args = ap.parse_args()

    if args.self_test:
        self_test()
        return 0
    outdir = os.path.abspath(args.out)
    os.makedirs(outdir, exist_ok=True)
    if args.from_results:
        with open(args.from_results) as f:
            if args.from_results.endswith(".jsonl"):
                lines = [json.loads(x) for x in f if x.strip()]
                saved = dict(lines[0], results=lines[1:])
            else:
                saved = json.load(f)
        report(saved["results"], saved["config"], saved["env"], saved["modes"], saved.get("skipped", {}),
               outdir, saved.get("elapsed_s", 0))
        return 0

    preset = "quick" if args.quick else ("full" if args.full else "default")
    params = dict(PRESETS[preset])
    params["preset"] = preset
    for k in ("reps", "cycles", "cap", "min_cycles", "hard"):
        if getattr(args, k) is not None:
            params[k] = getattr(args, k)
    if args.reps is not None:
        params["unpinned_reps"] = args.reps
    params["drop"] = args.drop
    params["poll"] = args.poll
    mode_tokens = [m.strip() for m in args.modes.split(",") if m.strip()]
    modes = []
    for m in mode_tokens:
        if m == "baselines":
            modes += BASELINE_MODES
        elif m == "tact":
            modes += [x for x in ALL_MODES if x.startswith("tact-")]
        elif m in ALL_MODES:
            modes.append(m)
        else:
            ap.error(f"unknown mode {m}")
    modes = [m for m in ALL_MODES if m in modes]
    sel = parse_only(args.only.split(","))
    parts = [p for p in PARTS if not sel["part"] or p in sel["part"]]
    pins = [p for p in ("pinned", "unpinned") if not sel["pin"] or p in sel["pin"]]

    cpus = sorted(os.sched_getaffinity(0))
    env = Env()
    env.cpus = cpus
    env.pin_cpu = args.pin_cpu if args.pin_cpu is not None else cpus[-1]
    env.rec_cpu = args.recorder_cpu if args.recorder_cpu is not None else cpus[0]
    env.clock = args.clock
    env.skip = {}
    env.failures = {}
    env.tact = os.path.abspath(args.tact)
    env.tact_extra = list(args.tact_arg)
    env.cpulimit = shutil.which(args.cpulimit) or args.cpulimit

    # ---- what can run here
    skipped = {}
    if len(cpus) < 2:
        log("only one CPU: the recorder shares it with pinned workloads (results are still comparable)")
    root = os.geteuid() == 0
    with open("/proc/mounts") as f:
        mounts = f.read()
    (cgv, cgmount), cgwhy = detect_cpu_cgroup(mounts)
    acct_mount = detect_cpuacct_v1(mounts) if cgv == 1 else None
    cg_info = f"v{cgv} {cgmount}" if cgv else f"none ({cgwhy})"
    for m in ("cgroup", "tact-cgroup"):
        if m in modes and (not root or not cgv):
            skipped[m] = "needs root" if not root else f"no cpu cgroup hierarchy: {cgwhy}"
    if "cpulimit" in modes and not shutil.which(env.cpulimit):
        skipped["cpulimit"] = f"{args.cpulimit} not found (Debian: apt-get install -y cpulimit)"
    if "nice" in modes and not shutil.which("nice"):
        skipped["nice"] = "nice not found"
    if not shutil.which("taskset") and any(m in modes for m in CONTROLLER_MODES):
        for m in CONTROLLER_MODES & set(modes):
            skipped[m] = "taskset not found (util-linux)"
    tact_modes = [m for m in modes if m.startswith("tact-")]
    env.tact_flags, tact_version, tact_err = detect_tact(env.tact) if tact_modes else (set(), None, None)
    for m in tact_modes:
        if m in skipped:
            continue
        if tact_err:
            skipped[m] = tact_err
            continue
        need = [f for f in TACT_ARGS[m][1] if f not in env.tact_flags]
        if need:
            skipped[m] = f"`tact share` has no {', '.join(need)} yet"
    run_modes = [m for m in modes if m not in skipped]
    env.skip = {}

    # ---- the plan
    if sel["q"]:
        params["scal_q"] = [q for q in params["scal_q"] if q in sel["q"]]
    plan, multi_modes, scal_modes = make_plan(params, parts, pins, sel, run_modes)
    est = estimate(params, plan, run_modes, len(cpus))
    est_all = estimate(params, make_plan(params, parts, pins, sel, modes)[0], modes, len(cpus))
    cfg = {k: (None if isinstance(v, float) and v == float("inf") else v) for k, v in params.items()}
    cfg.update({"modes_requested": modes, "modes_run": run_modes, "parts": parts, "pins": pins,
                "only": args.only, "pin_cpu": env.pin_cpu, "recorder_cpu": env.rec_cpu, "tact": env.tact,
                "tact_version": tact_version, "tact_flags": sorted(env.tact_flags), "tact_extra": env.tact_extra,
                "estimate_s": round(est), "plan": plan})
    log(f"preset {preset}: modes {', '.join(run_modes) or 'none'}"
        + (f"; skipped {', '.join(f'{m} ({w})' for m, w in skipped.items())}" if skipped else ""))
    for pin, cf, reps in plan["main"]:
        log(f"main {pin}: {len(cf)} workloads x {reps} rep(s): "
            + " ".join(f"{d}-{n}/{q}" for d, n, q in cf))
    for part in ("io", "multi", "scal"):
        for pin, nm in plan[part]:
            log(f"{part} {pin}: {nm} mode(s)")
    log(f"estimated duration: {est / 60:.1f} min on an idle machine (longer when others use CPU {env.pin_cpu})"
        + (f"; {est_all / 60:.1f} min once every requested mode runs" if est_all > est + 1 else ""))
    if args.dry_run:
        return 0
    if not run_modes:
        raise SystemExit("no mode can run here: " + "; ".join(f"{m}: {w}" for m, w in skipped.items()))

    # ---- setup (everything from here on is undone on every exit path)
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/share")
    set_child_subreaper()
    try:
        os.sched_setaffinity(0, {env.rec_cpu})
    except OSError as e:
        log(f"could not pin the harness to CPU {env.rec_cpu}: {e}")
    for d in os.listdir(tempfile.gettempdir()):
        m = re.fullmatch(r"tact-bench-share-(\d+)-\w+", d)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            shutil.rmtree(os.path.join(tempfile.gettempdir(), d), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=f"tact-bench-share-{os.getpid()}-")
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(tmp, ignore_errors=True))
    env.tmp = tmp
    env.spin = os.path.join(tmp, "spin")
    subprocess.run(["cc", "-O2", "-Wall", "-o", env.spin, os.path.join(HERE, "spin.c")], check=True)
    env.slots = Slots(os.path.join(tmp, "slots"))
    CLEANUP.push("slots", env.slots.close)
    env.cgroups = None
    if cgv and root and any(m in run_modes for m in ("cgroup", "tact-cgroup")):
        for m in [cgmount] + ([acct_mount] if acct_mount and "tact-cgroup" in run_modes else []):
            for p in CpuCgroups.remove_stale(m):
                log(f"removed {p}, left by an earlier run")
        env.cgroups = CpuCgroups(cgv, cgmount, acct_mount=acct_mount if "tact-cgroup" in run_modes else None)
        CLEANUP.push("cgroups", env.cgroups.remove)
        cg_before = set(os.listdir(cgmount))
    CLEANUP.push("descendants", kill_leftovers)
    env_info = environment(args, cg_info)
    env_info["tact_version"] = tact_version
    log(f"{env_info['kernel']}, {env_info['scheduler']}, HZ={env_info['hz']}, autogroup="
        f"{env_info['sched_autogroup_enabled']}, cgroup {cg_info}; harness on CPU {env.rec_cpu}, "
        f"pinned runs on CPU {env.pin_cpu}")

    results = []
    partial = os.path.join(outdir, "results.partial.jsonl")
    with open(partial, "w") as f:
        f.write(json.dumps({"config": cfg, "env": env_info, "modes": run_modes, "skipped": skipped},
                           default=str) + "\n")
    saved = [0]

    def save():
        # one line per finished run, so a stopped run can still be reported (--from-results)
        with open(partial, "a") as f:
            for r in results[saved[0]:]:
                f.write(json.dumps(r, default=str) + "\n")
        saved[0] = len(results)

    t_runs = time.monotonic()
    if plan["main"]:
        for pin, cf, reps in plan["main"]:
            main_part(env, params, cf, pin == "pinned", reps, run_modes, results, save)
    if plan["io"]:
        io_part(env, params, [p for p, _ in plan["io"]], run_modes, results, save)
    if plan["multi"]:
        multi_part(env, params, [p for p, _ in plan["multi"]], multi_modes, results, save)
    if plan["scal"]:
        scal_part(env, params, [p for p, _ in plan["scal"]], scal_modes, results, save)
    env_info["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    env_info["run_seconds"] = time.monotonic() - t_runs
    if env.cgroups is not None and "tact-cgroup" in run_modes:
        new = sorted(set(os.listdir(cgmount)) - cg_before - {os.path.basename(env.cgroups.top)})
        if new:
            env_info["new_cgroups_at_end"] = new
            log(f"note: cgroups under {cgmount} that did not exist at the start (left by tact's cgroup "
                f"backend, or made by someone else on this machine): {new}")
    skipped.update(env.skip)
    report(results, cfg, env_info, run_modes, skipped, outdir, time.monotonic() - T0)
    CLEANUP.run()
    try:
        os.unlink(partial)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
