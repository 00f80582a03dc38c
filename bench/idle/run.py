#!/usr/bin/env python3
"""bench/idle: idletime scheduling (Eggert 2004; spec idletime.md §7) on disk, network and CPU for
`tact run --idle`, side by side with the tools people use today. Issue 5's benchmark.

Rigs (see disk.py, net.py, cpu.py): a loop device over a single-server FUSE file, 20 ms per 4 KiB
read (fusedisk.py); network namespaces with a 100 Mbit/s bottleneck (tbf, or with --net-shaper
tact-htb tact's own htb tree); one CPU shared by two pinned processes. On each, the thesis's load
generator (loadgen.c): fg busy for i x 100 ms of every 100 ms cycle with closed-loop requests,
greedy bg, both one request outstanding.

Modes, interleaved per intensity in the same run:
  alone         fg without bg: r(i), and at i = 1 r_max and the service time τ
  none          fg and bg, no control (fair share)
  nice          bg under `nice -n 19`
  ionice        bg under `ionice -c3` (disk: BFQ's idle class where the loop device has BFQ)
  sched-idle    bg under `chrt -i 0` (net: CPU priority, no effect on the link; claim 2)
  tact p=Nms    `tact run --idle RESOURCE --preempt Nms -- bg` (p = 0: a plain priority queue)
  tact auto     `tact run --idle RESOURCE --preempt auto -- bg`
  tact          cpu: `tact run --idle cpu -- bg` (SCHED_IDLE)

Normalisation (the thesis's): fg by r(i), bg by r_max; "bg of idle" is bg / (r_max - r(i)), the
share of the capacity fg leaves idle that bg used. Targets (issue 5): at the best fixed PI, fg >= 90%
of alone and bg >= 70% of idle, on disk and network; auto within 5 points of the best fixed PI.
The model's prediction (model.py, from the measured τ and r(i)) is drawn beside the measurement.

Needs root (loop devices, a FUSE mount, network namespaces, tc). See bench/idle/README.md.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import model  # noqa: E402
import records  # noqa: E402
import test_udp  # noqa: E402
from common.lifecycle import DEFAULT_LOCK, Cleanup, log, take_lock  # noqa: E402
from common.procs import terminate_tree  # noqa: E402
from cpu import CpuRig  # noqa: E402
from disk import DiskRig  # noqa: E402
from net import PROTOS as NET_PROTOS  # noqa: E402
from net import SHAPERS as NET_SHAPERS  # noqa: E402
from net import NetRig  # noqa: E402
from net import rig_name as net_rig_name  # noqa: E402

CLEANUP = Cleanup()
RIGS = ["disk", "net", "cpu"]
# `--rigs net` is one rig per `--net-proto`: `net` (TCP) and `net-udp`, in this order in the tables.
NET_RIGS = [net_rig_name(p) for p in NET_PROTOS]
RIG_ORDER = ["disk", *NET_RIGS, "cpu"]
WRAP = {"none": [], "nice": ["nice", "-n", "19"], "ionice": ["ionice", "-c3"], "sched-idle": ["chrt", "-i", "0"]}
FG_TARGET, BG_TARGET, AUTO_POINTS = 0.90, 0.70, 0.05
LEAD_S = 1.0      # between spawning a point's processes and its common start (tact starts meanwhile)
GRACE_S = 10.0    # past the end (+ the PI) before a point's processes are terminated
SPEC_I = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
SPEC_P = [0, 5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200]

PRESETS = {
    # ~2 minutes: one intensity, two fixed PIs and auto per rig
    "quick": dict(reps=1,
                  disk=dict(i=[0.5], p=[0, 40], seconds=4.0, warm=1.0),
                  net=dict(i=[0.5], p=[0, 5], seconds=3.0, warm=0.5),
                  cpu=dict(i=[0.5], seconds=3.0, warm=0.5)),
    # `make bench-idle`: ~20 minutes on a quiet 2-core machine
    "default": dict(reps=1,
                    disk=dict(i=[0.1, 0.3, 0.5, 0.7, 0.9], p=[0, 10, 20, 30, 40, 60, 80, 120], seconds=10.0, warm=2.0),
                    net=dict(i=[0.2, 0.4, 0.6, 0.8], p=[0, 1, 2, 5, 10, 20, 50], seconds=6.0, warm=1.0),
                    cpu=dict(i=[0.2, 0.5, 0.8], seconds=5.0, warm=1.0)),
    # the spec's grid, 5 x 30 s per point (days)
    "full": dict(reps=5,
                 disk=dict(i=SPEC_I, p=SPEC_P, seconds=33.0, warm=3.0),
                 net=dict(i=SPEC_I, p=[0, 0.5, 1, 2, 5, 10, 20, 50, 100], seconds=33.0, warm=3.0),
                 cpu=dict(i=SPEC_I, seconds=33.0, warm=3.0)),
}


# --------------------------------------------------------------------------
# the plan

def mode_label(m):
    if m["mode"] != "tact":
        return m["mode"]
    if m.get("pi") is None:
        return "tact"
    return "tact auto" if m["pi"] == "auto" else f"tact p={m['pi']:g}ms"


def modes_of(rig_name, rig_cls, pis, tact_ok):
    out = [{"mode": "alone"}] + [{"mode": b} for b in rig_cls.baselines]
    if tact_ok:
        if rig_name == "cpu":
            out.append({"mode": "tact", "pi": None})
        else:
            out += [{"mode": "tact", "pi": p} for p in pis] + [{"mode": "tact", "pi": "auto"}]
    return out


def make_plan(params, rigs, tact_ok):
    """[(rig, rep, intensity, mode)] in run order: per rep and rig, r_max first (alone at i = 1),
    then each intensity's modes with the order rotated per rep and intensity."""
    classes = {"disk": DiskRig, "cpu": CpuRig, **{n: NetRig for n in NET_RIGS}}
    plan = []
    for rep in range(params["reps"]):
        for rig in rigs:
            p = params[rig]
            modes = modes_of(rig, classes[rig], p.get("p", []), tact_ok)
            plan.append((rig, rep, 1.0, {"mode": "alone"}))
            for k, i in enumerate(p["i"]):
                rot = (rep + k) % len(modes)
                for m in modes[rot:] + modes[:rot]:
                    if not (i == 1.0 and m["mode"] == "alone"):
                        plan.append((rig, rep, i, m))
    return plan


def estimate(params, plan):
    return sum(params[rig]["seconds"] + LEAD_S + 0.7 for rig, _, _, _ in plan) + 15 * len(
        {rig for rig, _, _, _ in plan})


# --------------------------------------------------------------------------
# one point

class Procs:
    """Processes this harness started, killed by pid (with their trees) on every exit path."""

    def __init__(self, cleanup):
        self.live = set()
        cleanup.push("processes", self.kill_all)

    def spawn(self, cmd, log_path=None):
        out = open(log_path, "w") if log_path else subprocess.DEVNULL
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if log_path else subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL)
        finally:
            if log_path:
                out.close()
        self.live.add(p)
        return p

    def finish(self, p, deadline):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
            timed_out = False
        except subprocess.TimeoutExpired:
            terminate_tree(p.pid)
            p.wait()
            timed_out = True
        self.live.discard(p)
        return p.returncode, timed_out

    def kill_all(self):
        for p in list(self.live):
            if p.poll() is None:
                terminate_tree(p.pid, grace=1.0)
                p.wait()
            self.live.discard(p)


def tail(path, n=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def bg_command(env, rig, m, start, seconds, out, tag):
    base = rig.bg(start, seconds, out)
    if m["mode"] in WRAP:
        return rig.place_bg(WRAP[m["mode"]] + base)
    cmd = [env.tact, "run", "--idle", rig.resource] + getattr(rig, "tact_args", [])
    if m.get("pi") is not None:
        cmd += ["--preempt", "auto" if m["pi"] == "auto" else f"{m['pi']:g}ms"]
    if "--json-log" in env.tact_flags:
        cmd += ["--json-log", os.path.join(env.tmp, f"{tag}.tact.jsonl")]
    return rig.place_controller(cmd + ["--"] + rig.place_job(base))


def pi_changes(lines):
    """[[t, p in ms]] from the log's `pi` objects: the automatic PI's course over a point."""
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == "pi":
            out.append([round(rec["t"], 3), round(1e3 * rec["pi"], 3)])
    return out


def start_record(lines):
    """The log's `start` object (each gate's PI, own-traffic source and kernel part), or None."""
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == "start":
            return rec
    return None


def run_point(env, rig, rep, i, m, params):
    seconds, warm = params["seconds"], params["warm"]
    env.seq += 1
    tag = f"{env.seq:04d}-{rig.name}"
    fg_out, bg_out = (os.path.join(env.tmp, f"{tag}.{w}.rec") for w in ("fg", "bg"))
    before = rig.start_point() if hasattr(rig, "outside") else None
    if hasattr(rig, "prepare"):
        rig.prepare(tact_mode=m["mode"] == "tact")
    t_spawn = time.monotonic()
    start = time.monotonic_ns() + int(LEAD_S * 1e9)
    started = {}
    started["fg"] = env.procs.spawn(rig.fg(i, start, seconds, fg_out), os.path.join(env.tmp, f"{tag}.fg.log"))
    if m["mode"] != "alone":
        started["bg"] = env.procs.spawn(bg_command(env, rig, m, start, seconds, bg_out, tag),
                                        os.path.join(env.tmp, f"{tag}.bg.log"))
    pi_s = 0.0 if not isinstance(m.get("pi"), (int, float)) else m["pi"] / 1000
    deadline = time.monotonic() + LEAD_S + seconds + GRACE_S + pi_s
    res = {"rig": rig.name, "rep": rep, "intensity": i, "mode": m["mode"], "pi_ms": m.get("pi"),
           "label": mode_label(m), "seconds": seconds, "warm": warm}
    for who, p in started.items():
        rc, timed_out = env.procs.finish(p, deadline)
        res[f"{who}_rc"] = rc
        if timed_out:
            res[f"{who}_timed_out"] = True
        if rc != 0 or timed_out:
            res[f"{who}_output"] = tail(os.path.join(env.tmp, f"{tag}.{who}.log"))
    if before is not None:
        res["outside_cpu"] = rig.outside(before, time.monotonic() - t_spawn)
    t0, t1 = start + int(warm * 1e9), start + int(seconds * 1e9)
    for who, path in (("fg", fg_out), ("bg", bg_out)):
        recs = records.read(path)
        res[who] = records.window(recs, t0, t1)
        head = records.header(path)
        if getattr(rig, "proto", None) == "udp" and head:
            # Over the flow's whole run (warm-up included): resends are rare and not per window.
            res[who]["resends"], res[who]["lost"] = head[1], head[2]
        if len(recs) >= records.CAPACITY:
            res[f"{who}_truncated"] = True
        if os.path.exists(path):
            os.unlink(path)
    if m["mode"] == "tact":
        res["tact_output"] = tail(os.path.join(env.tmp, f"{tag}.bg.log"), 1500)
        jl = os.path.join(env.tmp, f"{tag}.tact.jsonl")
        if os.path.exists(jl):
            with open(jl, errors="replace") as f:
                lines = [x for x in f.read().splitlines() if x.strip()]
            res["tact_log_lines"] = len(lines)
            res["tact_log_last"] = lines[-3:]
            res["tact_pi"] = pi_changes(lines)
            res["tact_start"] = start_record(lines)
            if hasattr(rig, "check_tact_start"):
                rig.check_tact_start(res["tact_start"])
            if env.keep_logs:
                shutil.copy(jl, os.path.join(env.keep_logs, f"{tag}-i{i:g}-{mode_label(m).replace(' ', '-')}.jsonl"))
    for path in (os.path.join(env.tmp, f"{tag}.{w}") for w in ("fg.log", "bg.log", "tact.jsonl")):
        if os.path.exists(path):
            os.unlink(path)
    return res


def measure(env, rig, rep, i, m, params):
    """One point; on a rig that measures outside load (cpu), again while others used its CPU,
    keeping the cleanest attempt."""
    best = None
    for attempt in range(1, getattr(rig, "tries", 1) + 1):
        res = run_point(env, rig, rep, i, m, params)
        res["tries"] = attempt
        if best is None or res["outside_cpu"] < best["outside_cpu"]:
            best = res
        if "outside_cpu" not in res or res["outside_cpu"] <= rig.outside_max:
            break
        log(f"  {rig.name} i={i:g} {mode_label(m)}: other processes took {100 * res['outside_cpu']:.1f}% "
            f"of CPU {rig.cpu}; measuring again")
    return best


# --------------------------------------------------------------------------
# analysis

def mean_of(rs, who, key):
    vals = [r[who][key] for r in rs if key in r.get(who, {})]
    return statistics.fmean(vals) if vals else None


def analyse(results, params):
    """Per rig: the baselines (r(i), r_max, τ) and one row per (intensity, mode) with the means over
    repetitions, normalised; then the targets."""
    out = {}
    for rig in RIG_ORDER:
        rs = [r for r in results if r["rig"] == rig and "error" not in r]
        if not rs:
            continue
        alone = {}
        for r in rs:
            if r["mode"] == "alone":
                alone.setdefault(r["intensity"], []).append(r)
        if 1.0 not in alone:
            continue
        r_max = mean_of(alone[1.0], "fg", "rate")
        tau = mean_of(alone[1.0], "fg", "lat_mean")
        base = {i: (mean_of(v, "fg", "rate"), mean_of(v, "fg", "lat_mean"), mean_of(v, "fg", "lat_p95"))
                for i, v in alone.items()}
        groups = {}
        for r in rs:
            groups.setdefault((r["intensity"], r["label"]), []).append(r)
        rows = []
        for (i, label), v in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if i not in base or not base[i][0]:
                continue
            r_i, lat_i, p95_i = base[i]
            fg, bg = mean_of(v, "fg", "rate") or 0.0, mean_of(v, "bg", "rate") or 0.0
            lat, p95 = mean_of(v, "fg", "lat_mean"), mean_of(v, "fg", "lat_p95")
            bg_lat = mean_of(v, "bg", "lat_mean")
            # With (almost) nothing left idle, bg's share of it is noise: not reported.
            idle = r_max - r_i if r_max - r_i > 0.05 * r_max else None
            row = {"intensity": i, "label": label, "mode": v[0]["mode"], "pi_ms": v[0]["pi_ms"], "reps": len(v),
                   "fg_rate": fg, "bg_rate": bg, "fg_n": fg / r_i, "bg_n": bg / r_max,
                   "bg_idle": bg / idle if idle else None, "idle_rate": r_max - r_i,
                   "lat_x": lat / lat_i if lat and lat_i else None,
                   "p95_x": p95 / p95_i if p95 and p95_i else None,
                   # bg alone would be r_max's requests: each τ long
                   "bg_lat_x": bg_lat / tau if bg_lat and tau else None,
                   "failed": sum(1 for x in v if x.get("fg_rc") or x.get("bg_rc"))}
            if any("resends" in x.get(w, {}) for x in v for w in ("fg", "bg")):
                # UDP: summed over the repetitions, fg and bg apart.
                for w in ("fg", "bg"):
                    for k in ("resends", "lost"):
                        row[f"{w}_{k}"] = sum(x.get(w, {}).get(k, 0) for x in v)
            if isinstance(row["pi_ms"], (int, float)) and rig != "cpu":
                row["model_fg_n"], row["model_bg_n"] = model.predict(i, r_i, row["pi_ms"] / 1000, tau, r_max)
            rows.append(row)
        out[rig] = {"r_max": r_max, "tau_s": tau, "baseline": {str(i): b[0] for i, b in sorted(base.items())},
                    "rows": rows, "targets": targets(rig, rows)}
    return out


def targets(rig, rows):
    """Per intensity: the best fixed PI (most bg of idle among those keeping fg >= 90% of alone),
    whether it meets the 70% bg target, and auto against it. CPU: SCHED_IDLE against the rest."""
    out = []
    for i in sorted({r["intensity"] for r in rows}):
        at = {r["label"]: r for r in rows if r["intensity"] == i}
        if rig == "cpu":
            t = at.get("tact")
            if t:
                out.append({"intensity": i, "mode": "tact", "fg_n": t["fg_n"], "bg_idle": t["bg_idle"],
                            "p95_x": t["p95_x"],
                            "pass": t["fg_n"] >= FG_TARGET and (t["bg_idle"] or 0) >= BG_TARGET})
            continue
        fixed = [r for r in at.values() if r["mode"] == "tact" and isinstance(r["pi_ms"], (int, float))
                 and r["bg_idle"] is not None]
        if not fixed:
            continue
        ok = [r for r in fixed if r["fg_n"] >= FG_TARGET]
        best = max(ok, key=lambda r: (r["bg_idle"], -r["pi_ms"])) if ok else None
        t = {"intensity": i, "best_pi_ms": best["pi_ms"] if best else None,
             "best_fg_n": best["fg_n"] if best else None, "best_bg_idle": best["bg_idle"] if best else None,
             "pass": bool(best and best["bg_idle"] >= BG_TARGET)}
        auto = at.get("tact auto")
        if auto and best:
            t.update(auto_fg_n=auto["fg_n"], auto_bg_idle=auto["bg_idle"],
                     auto_fg_gap=auto["fg_n"] - best["fg_n"], auto_bg_gap=auto["bg_idle"] - best["bg_idle"],
                     auto_pass=auto["fg_n"] >= best["fg_n"] - AUTO_POINTS
                     and auto["bg_idle"] >= best["bg_idle"] - AUTO_POINTS)
        elif auto:
            t.update(auto_fg_n=auto["fg_n"], auto_bg_idle=auto["bg_idle"])
        out.append(t)
    return out


# --------------------------------------------------------------------------
# report

def pct(x):
    return "–" if x is None else f"{100 * x:.0f}"


def resent(row):
    """A UDP cell's resends, fg+bg (the table's note); nothing when none."""
    f, b = row.get("fg_resends", 0), row.get("bg_resends", 0)
    return f" r{f}+{b}" if f or b else ""


def print_tables(summary, skipped, rig_info):
    for rig, s in summary.items():
        unit = {"disk": DiskRig.unit, "cpu": CpuRig.unit}.get(rig, NetRig.unit)
        info = rig_info.get(rig, {})
        # net: tbf or tact-htb, and the protocol (results.json from before UDP has none)
        how = ", ".join(x.upper() if x in NET_PROTOS else x for x in (info.get("shaper"), info.get("proto")) if x)
        print(f"\n## {rig}{f' ({how})' if how else ''}: r_max {s['r_max']:.1f} {unit}, "
              f"τ {1e3 * s['tau_s']:.2f} ms (fg alone at i = 1)\n")
        labels = []
        for r in s["rows"]:
            if r["label"] not in labels and r["label"] != "alone":
                labels.append(r["label"])
        fixed = sorted({r["pi_ms"] for r in s["rows"] if r["mode"] == "tact" and isinstance(r["pi_ms"], (int, float))})
        shown = [x for x in labels if not x.startswith("tact p=")] + [f"tact p={p:g}ms" for p in fixed]
        print("fg % of alone / bg % of the capacity fg leaves idle (fg latency x alone)\n")
        print("| i | r(i) | " + " | ".join(shown) + " |")
        print("|---:|---:|" + "---|" * len(shown))
        for i in sorted({r["intensity"] for r in s["rows"]}):
            at = {r["label"]: r for r in s["rows"] if r["intensity"] == i}
            cells = []
            for label in shown:
                r = at.get(label)
                if not r:
                    cells.append("")
                    continue
                lat = f" ({r['lat_x']:.1f}×)" if r.get("lat_x") else ""
                cells.append(f"{pct(r['fg_n'])}/{pct(r['bg_idle'])}{lat}" + resent(r) + (" !" if r["failed"] else ""))
            print(f"| {i:g} | {s['baseline'].get(str(i), 0):.1f} | " + " | ".join(cells) + " |")
        udp = [r for r in s["rows"] if "fg_resends" in r]
        if udp:
            n = {k: sum(r[f"{w}_{k}"] for r in udp for w in ("fg", "bg")) for k in ("resends", "lost")}
            print(f"\nUDP: r F+B after a cell = requests fg and bg sent again after 200 ms without an answer "
                  f"(over every repetition, warm-up included; none where no r); {n['resends']} resends in all, "
                  f"{n['lost']} of them for datagrams lost (the rest: the answer lost or late). Only "
                  f"completed requests count in the rates and latencies.")
        print()
        for t in s["targets"]:
            if rig == "cpu":
                p95 = f"{t['p95_x']:.2f}×" if t["p95_x"] else "–"
                print(f"- i = {t['intensity']:g}: SCHED_IDLE fg {pct(t['fg_n'])}% of alone (p95 latency "
                      f"{p95} alone), bg {pct(t['bg_idle'])}% of idle: "
                      f"{'PASS' if t['pass'] else 'FAIL'} (≥ {pct(FG_TARGET)} / ≥ {pct(BG_TARGET)})")
                continue
            if t["best_pi_ms"] is None:
                print(f"- i = {t['intensity']:g}: no fixed PI keeps fg ≥ {pct(FG_TARGET)}%: FAIL"
                      + (f"; auto fg {pct(t['auto_fg_n'])}%, bg {pct(t['auto_bg_idle'])}% of idle"
                         if "auto_fg_n" in t else ""))
                continue
            line = (f"- i = {t['intensity']:g}: best fixed p = {t['best_pi_ms']:g} ms: fg {pct(t['best_fg_n'])}%, "
                    f"bg {pct(t['best_bg_idle'])}% of idle: {'PASS' if t['pass'] else 'FAIL'} "
                    f"(≥ {pct(FG_TARGET)} / ≥ {pct(BG_TARGET)})")
            if "auto_pass" in t:
                line += (f"; auto fg {pct(t['auto_fg_n'])}%, bg {pct(t['auto_bg_idle'])}% "
                         f"({100 * t['auto_fg_gap']:+.0f} / {100 * t['auto_bg_gap']:+.0f} points): "
                         f"{'PASS' if t['auto_pass'] else 'FAIL'} (within {pct(AUTO_POINTS)})")
            print(line)
        grid = [r for r in s["rows"] if "model_fg_n" in r]
        if grid:
            ii = sorted({r["intensity"] for r in grid})
            print("\ntact fixed PIs: measured fg/bg (fg by r(i), bg by r_max), *model* below\n")
            print("| p ms | " + " | ".join(f"i={i:g}" for i in ii) + " |")
            print("|---:|" + "---|" * len(ii))
            for p in fixed:
                at = {r["intensity"]: r for r in grid if r["pi_ms"] == p}
                print(f"| {p:g} | " + " | ".join(f"{at[i]['fg_n']:.2f}/{at[i]['bg_n']:.2f}" if i in at else ""
                                                 for i in ii) + " |")
                print("| | " + " | ".join(f"*{at[i]['model_fg_n']:.2f}/{at[i]['model_bg_n']:.2f}*" if i in at
                                          else "" for i in ii) + " |")
    if skipped:
        print("\nSKIPPED: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))


def cell_edges(values, lo, hi, width):
    """The edges of cells centred on sorted `values`: midway between neighbours, the outer ones half the
    nearest gap out (half `width` for a single value, which would otherwise get a cell of no width),
    kept within [lo, hi] so that the axes start at i = 0 and p = 0."""
    v = list(values)
    first = v[1] - v[0] if len(v) > 1 else width
    last = v[-1] - v[-2] if len(v) > 1 else width
    mids = [(a + b) / 2 for a, b in zip(v, v[1:])]
    return [max(lo, v[0] - first / 2)] + mids + [min(hi, v[-1] + last / 2)]


def draw_grid(fig, ax, ii, pp, z, norm, cmap, levels):
    """One panel: z (PIs x intensities) as cells with their values written in, contour lines over it
    where the grid has two or more of both."""
    import numpy as np
    x = cell_edges(ii, 0.0, 1.0, 0.1)
    y = cell_edges(pp, 0.0, float("inf"), max(10.0, 0.4 * pp[0]))
    mesh = ax.pcolormesh(x, y, z, shading="flat", norm=norm, cmap=cmap)
    if len(ii) * len(pp) <= 60:
        # In the middle of each cell, which a cell at the axis's end is not centred on.
        for k, j in ((k, j) for k in range(len(pp)) for j in range(len(ii))):
            if not np.isnan(z[k][j]):
                ax.text((x[j] + x[j + 1]) / 2, (y[k] + y[k + 1]) / 2, f"{z[k][j]:.2f}", ha="center",
                        va="center", fontsize=7, color="black" if norm(z[k][j]) > 0.6 else "white")
    levels = [v for v in levels if np.nanmin(z) < v < np.nanmax(z)] if not np.isnan(z).all() else []
    if len(ii) >= 2 and len(pp) >= 2 and levels:
        cs = ax.contour(ii, pp, z, levels=levels, colors="white", linewidths=0.8)
        ax.clabel(cs, fmt="%g", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, y[-1])
    ticks = [v for v in (0, 0.2, 0.4, 0.6, 0.8, 1, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)
             if norm.vmin <= v <= norm.vmax]
    fig.colorbar(mesh, ax=ax, ticks=ticks, format="%g").minorticks_off()


def plot(summary, outdir):
    """Per rig with fixed PIs: the thesis's contour plots over intensity x PI, normalised: fg and bg
    throughput measured and the model's, and fg and bg latency measured (fg's mean by fg alone's at
    the same i, as the tables' ×; bg's by τ, a request's on the idle resource). Returns the files
    written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        from matplotlib.colors import LogNorm, Normalize
    except ImportError as e:
        log(f"no plot ({e}): pip install -r bench/requirements.txt")
        return []
    files = []
    for rig, s in summary.items():
        grid = [r for r in s["rows"] if "model_fg_n" in r]
        if not grid:
            continue
        ii = sorted({r["intensity"] for r in grid})
        pp = sorted({r["pi_ms"] for r in grid})
        at = {(r["intensity"], r["pi_ms"]): r for r in grid}

        def values(key):
            return np.array([[at[(i, p)].get(key) if (i, p) in at and at[(i, p)].get(key) is not None
                              else np.nan for i in ii] for p in pp], dtype=float)

        share = dict(norm=Normalize(0, 1.05), cmap="viridis", levels=[0.1, 0.3, 0.5, 0.7, 0.9])
        lats = np.concatenate([values("lat_x").ravel(), values("bg_lat_x").ravel()])
        lats = lats[~np.isnan(lats)]
        # Latency ratios run from about 1 to hundreds (bg held for seconds): a log scale from 1.
        low, top = (min(1.0, lats.min()), max(2.0, lats.max())) if lats.size else (1.0, 2.0)
        slow = dict(norm=LogNorm(low, top), cmap="magma", levels=[1.2, 1.5, 2, 3, 5, 10, 30, 100])
        panels = [[("fg_n", "fg throughput / r(i), measured", share),
                   ("bg_n", "bg throughput / r_max, measured", share)],
                  [("model_fg_n", "fg throughput / r(i), model", share),
                   ("model_bg_n", "bg throughput / r_max, model", share)],
                  [("lat_x", "fg latency / fg alone's, measured", slow),
                   ("bg_lat_x", "bg latency / τ, measured", slow)]]
        fig, axes = plt.subplots(3, 2, figsize=(11, 12), sharex=True, sharey=True)
        for row, pair in enumerate(panels):
            for col, (key, what, style) in enumerate(pair):
                ax = axes[row][col]
                draw_grid(fig, ax, ii, pp, values(key), **style)
                ax.set_title(f"{rig}: {what}", fontsize=10)
                if row == len(panels) - 1:
                    ax.set_xlabel("fg intensity i")
                if col == 0:
                    ax.set_ylabel("preemption interval p (ms)")
        resource = "net (UDP)" if rig == "net-udp" else rig
        fig.suptitle(f"tact run --idle {resource}: r_max {s['r_max']:.1f}/s, τ {1e3 * s['tau_s']:.2f} ms")
        fig.tight_layout()
        path = os.path.join(outdir, f"idle-{rig}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files


def report(saved, outdir):
    summary = analyse(saved["results"], saved["config"])
    saved["summary"] = summary
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(saved, f, indent=1, default=str)
    print_tables(summary, saved.get("skipped", {}), saved["config"].get("rig_info", {}))
    for path in plot(summary, outdir):
        log(f"wrote {path}")
    log(f"wrote {os.path.join(outdir, 'results.json')}")


# --------------------------------------------------------------------------
# setup

def detect_tact(path):
    """The `tact run` options of the binary (from --help), or an error saying why none."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return set(), f"no executable at {path} (make build, or --tact PATH)"
    r = subprocess.run([path, "run", "--help"], capture_output=True, text=True, timeout=20)
    flags = set(re.findall(r"(--[a-z][a-z0-9-]*)", r.stdout + r.stderr))
    missing = [f for f in ("--idle", "--preempt") if f not in flags]
    if r.returncode != 0 or missing:
        return flags, f"`tact run` has no {', '.join(missing) or 'help'} yet"
    return flags, None


def self_test():
    model.self_test()
    records.self_test()
    test_udp.self_test()
    plan = make_plan(PRESETS["quick"], RIGS, True)
    assert plan[0] == ("disk", 0, 1.0, {"mode": "alone"}), plan[0]
    assert sum(1 for x in plan if x[0] == "disk") == 1 + 1 + 3 + 2 + 1, plan
    assert {mode_label(m) for r, _, _, m in plan if r == "cpu"} == {"alone", "none", "nice", "tact"}
    both = dict(PRESETS["quick"], **{"net-udp": PRESETS["quick"]["net"]})
    plan = make_plan(both, ["net", "net-udp"], True)
    assert [x for x in plan if x[0] == "net-udp"] == [("net-udp",) + x[1:] for x in plan if x[0] == "net"], plan
    # targets on a hand-made grid: p = 20 keeps fg at 92% with the most bg
    rows = [{"intensity": 0.5, "label": mode_label({"mode": "tact", "pi": p}), "mode": "tact", "pi_ms": p,
             "fg_n": fg, "bg_idle": bg} for p, fg, bg in ((0, 0.6, 0.9), (20, 0.92, 0.75), (40, 0.99, 0.5))]
    rows.append({"intensity": 0.5, "label": "tact auto", "mode": "tact", "pi_ms": "auto", "fg_n": 0.95,
                 "bg_idle": 0.71})
    t = targets("disk", rows)[0]
    assert t["best_pi_ms"] == 20 and t["pass"] and t["auto_pass"], t
    rows[-1]["bg_idle"] = 0.6
    assert not targets("disk", rows)[0]["auto_pass"]
    print("run.py self-test: passed")


def environment(args):
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "euid": os.geteuid(), "loadavg_start": open("/proc/loadavg").read().split()[:3]}


class Env:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="~2.5-minute smoke run: one intensity, two PIs per rig")
    g.add_argument("--full", action="store_true", help="the spec's grid, 5 x 30 s per point (about 22 h)")
    ap.add_argument("--rigs", default=",".join(RIGS), help="comma list of disk,net,cpu")
    ap.add_argument("--reps", type=int, help="repetitions of every point")
    ap.add_argument("--seconds", type=float, help="length of every point, s (the warm-up included)")
    ap.add_argument("--intensities", help="comma list replacing the preset's intensities (disk and net)")
    ap.add_argument("--pis", help="comma list of fixed PIs in ms replacing the preset's (disk and net)")
    ap.add_argument("--service-ms", type=float, default=20.0, help="disk: the server's time per read, ms")
    ap.add_argument("--disk-bytes", type=int, default=4096, help="disk: bytes per read (a multiple of 4096)")
    ap.add_argument("--net-rate", type=int, default=100, help="net: the bottleneck's rate, Mbit/s")
    ap.add_argument("--net-shaper", choices=NET_SHAPERS, default="tbf",
                    help="net: the bottleneck, tbf or tact's own htb tree (tact --net-rate; the other modes "
                         "over a plain htb); see net.py")
    ap.add_argument("--net-size", type=int, default=16384, help="net: bytes per request")
    ap.add_argument("--net-proto", choices=[*NET_PROTOS, "both"], default="tcp",
                    help="net: TCP requests, UDP (datagrams of <= 1472 bytes, one answer; resent after 200 ms), "
                         "or both, each its own rig (net, net-udp) and table")
    ap.add_argument("--cpu", type=int, help="cpu: the CPU both processes share (default: the last)")
    ap.add_argument("--work-ms", type=float, default=1.0, help="cpu: one request's work, ms of an idle CPU")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")),
                    help="tact binary (default $TACT or target/release/tact)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "idle"))
    ap.add_argument("--lock", default=DEFAULT_LOCK,
                    help="wait while this file exists, then hold it during the run ('' to skip)")
    ap.add_argument("--keep-logs", action="store_true",
                    help="keep every tact point's --json-log in OUT/logs (held, released, pi, counters)")
    ap.add_argument("--from-results", metavar="FILE", help="run nothing: report on a saved results.json")
    ap.add_argument("--self-test", action="store_true", help="check the model, records and targets, then exit")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its estimated duration, then exit")
    args = ap.parse_args()

    if args.self_test:
        self_test()
        return 0
    outdir = os.path.abspath(args.out)
    os.makedirs(outdir, exist_ok=True)
    if args.from_results:
        with open(args.from_results) as f:
            report(json.load(f), outdir)
        return 0

    preset = "quick" if args.quick else ("full" if args.full else "default")
    params = json.loads(json.dumps(PRESETS[preset]))
    params["preset"] = preset
    if args.reps:
        params["reps"] = args.reps
    rigs = [r for r in RIGS if r in args.rigs.split(",")]
    if not rigs:
        ap.error(f"--rigs: choose from {','.join(RIGS)}")
    for rig in rigs:
        if args.intensities and rig != "cpu":
            params[rig]["i"] = [float(x) for x in args.intensities.split(",")]
        if args.pis and rig != "cpu":
            params[rig]["p"] = [float(x) if "." in x else int(x) for x in args.pis.split(",")]
        if args.seconds:
            params[rig]["seconds"] = args.seconds
            params[rig]["warm"] = min(params[rig]["warm"], args.seconds / 4)
    tact = os.path.abspath(args.tact)
    tact_flags, tact_err = detect_tact(tact)
    skipped = {"tact": tact_err} if tact_err else {}
    if "net" in rigs and not shutil.which("tc"):
        skipped["net"] = "tc not found (iproute2)"
    if "disk" in rigs and not shutil.which("losetup"):
        skipped["disk"] = "losetup not found (util-linux)"
    rigs = [r for r in rigs if r not in skipped]
    if "net" in rigs:
        protos = NET_PROTOS if args.net_proto == "both" else (args.net_proto,)
        k = rigs.index("net")
        rigs[k:k + 1] = [net_rig_name(p) for p in protos]
        for p in protos:
            params[net_rig_name(p)] = params["net"]
    plan = make_plan(params, rigs, tact_err is None)
    est = estimate(params, plan)
    est_all = estimate(params, make_plan(params, rigs, True))
    for rig in rigs:
        p = params[rig]
        n = sum(1 for x in plan if x[0] == rig)
        log(f"{rig}: {n} points of {p['seconds']:g} s (first {p['warm']:g} s dropped): i = {p['i']}"
            + (f", p = {p['p']} ms" if "p" in p else ""))
    log(f"preset {preset}, {params['reps']} rep(s); estimated duration {est / 60:.1f} min"
        + (f"; {est_all / 60:.1f} min with tact" if est_all > est + 1 else "")
        + (f"; skipped {', '.join(f'{k} ({v})' for k, v in skipped.items())}" if skipped else ""))
    if args.dry_run:
        return 0
    if os.geteuid() != 0:
        raise SystemExit("bench/idle needs root (loop devices, a FUSE mount, network namespaces, tc)")

    # ---- setup (everything from here on is undone on every exit path)
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/idle")
    for d in os.listdir("/dev/shm"):
        m = re.fullmatch(r"tact-bench-idle-(\d+)", d)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            shutil.rmtree(os.path.join("/dev/shm", d), ignore_errors=True)
    env = Env()
    env.tmp = f"/dev/shm/tact-bench-idle-{os.getpid()}"
    os.makedirs(env.tmp)
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(env.tmp, ignore_errors=True))
    env.tact, env.tact_flags, env.seq = tact, tact_flags, 0
    env.keep_logs = os.path.join(outdir, "logs") if args.keep_logs else None
    if env.keep_logs:
        os.makedirs(env.keep_logs, exist_ok=True)
    env.procs = Procs(CLEANUP)
    loadgen = os.path.join(env.tmp, "loadgen")
    subprocess.run(["cc", "-O2", "-Wall", "-o", loadgen, os.path.join(HERE, "loadgen.c")], check=True)
    cpus = sorted(os.sched_getaffinity(0))
    made = {"disk": lambda: DiskRig(loadgen, args.service_ms, args.disk_bytes),
            **{net_rig_name(p): lambda p=p: NetRig(loadgen, args.net_rate, args.net_size, env.procs, args.net_shaper, p)
               for p in NET_PROTOS},
            "cpu": lambda: CpuRig(loadgen, args.cpu if args.cpu is not None else cpus[-1], args.work_ms)}
    live = {}
    for rig in rigs:
        r = made[rig]()
        r.setup(CLEANUP)
        live[rig] = r
    # Processes (the sink) die before the namespaces and devices they use go.
    CLEANUP.push("processes", env.procs.kill_all)
    config = dict(params, rigs=rigs, tact=tact, tact_flags=sorted(tact_flags), estimate_s=round(est),
                  lead_s=LEAD_S, rig_info={k: r.info for k, r in live.items()})
    saved = {"config": config, "env": environment(args), "skipped": skipped, "results": []}

    t_start = time.monotonic()
    for k, (rig, rep, i, m) in enumerate(plan):
        res = measure(env, live[rig], rep, i, m, params[rig])
        saved["results"].append(res)
        fg, bg = res["fg"], res["bg"]
        bad = [w for w in ("fg", "bg") if res.get(f"{w}_rc") or res.get(f"{w}_timed_out")]
        log(f"[{k + 1}/{len(plan)}] {rig} i={i:g} {mode_label(m)}: fg {fg['rate']:.1f}/s"
            + (f" ({1e3 * fg['lat_mean']:.1f} ms)" if "lat_mean" in fg else "") + f", bg {bg['rate']:.1f}/s"
            + (f", outside load {100 * res['outside_cpu']:.1f}% (try {res['tries']})" if "outside_cpu" in res else "")
            + (f", resent fg {fg['resends']} bg {bg.get('resends', 0)}" if "resends" in fg else "")
            + (f"  FAILED: {', '.join(bad)}: " + (res.get(f"{bad[0]}_output") or "").strip()[-300:] if bad else ""))
    saved["env"]["run_seconds"] = time.monotonic() - t_start
    saved["env"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    report(saved, outdir)
    CLEANUP.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
