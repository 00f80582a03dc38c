#!/usr/bin/env python3
"""bench/tune: tact's concurrency controller (TCC) against static pools and the limiters people
use today, on a service with a throughput knee. Spec: /work/shared/specs/concurrency.md, section 5
(scenario X1 and "Modern baselines").

The service (tune-service, pinned to one CPU: the bottleneck) spins a Pareto service time per
request, then waits out a Pareto delay; the driver (tune-drive, pinned to the other CPU) runs a
tact_lib::tune::Pool under one controller, with endless input; each task spins the front's own
service time and makes one request. The harness runs, against one service:

  static   every size in --sizes (default 1..64), short runs: the throughput curve, and the
           references X*_max (best size) and X*_95 (best size with service CPU <= 95%)
  tcc      TCC with its defaults, long enough to reach Steady (--tcc-seconds)
  fast     an additional, clearly labelled TCC row with shorter dwell caps (--fast-tcc)
  aimd, vegas, gradient2, envoy   the baselines (--adaptive-seconds each)

and reports per controller: throughput relative to X*_max and X*_95, service CPU utilization,
the worker count (time-weighted mean, min-max, sd), p99 latency; for TCC also the same over its
Steady periods. See bench/tune/README.md.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

from common.lifecycle import T0, Cleanup, log, take_lock  # noqa: E402
from common.procs import terminate_tree  # noqa: E402

CLEANUP = Cleanup()
DEFAULT_LOCK = "/tmp/tact-bench.lock"
BASELINES = ["aimd", "vegas", "gradient2", "envoy"]

# Issue targets for tact (spec section 5, X1 and the modern baselines).
TARGET_REL_MAX = 0.95
UTIL_BAND = (0.85, 0.95)

PRESETS = {
    # ~2 minutes: a coarse static curve, short adaptive runs (a smoke test of the pipeline)
    "quick": dict(sizes="1,2,3,4,6,8,12,16,24,32", static_seconds=2.0, static_warmup=0.5,
                  tcc_seconds=30.0, tcc_warmup=5.0, fast_tcc="tcc:dwell=2s", fast_seconds=20.0,
                  fast_warmup=5.0, adaptive_seconds=8.0, adaptive_warmup=2.0),
    # the default: every static size 1..64 (~6 min), TCC for 10 minutes after a 30 s warm-up
    "default": dict(sizes="1-64", static_seconds=4.0, static_warmup=1.0,
                    tcc_seconds=600.0, tcc_warmup=30.0, fast_tcc="tcc:dwell=5s", fast_seconds=180.0,
                    fast_warmup=20.0, adaptive_seconds=60.0, adaptive_warmup=10.0),
}
# Process start and teardown per driver run, on top of its warm-up and measured seconds.
RUN_OVERHEAD_S = 0.4


def parse_sizes(text):
    """'1-16,24,32' -> [1, ..., 16, 24, 32]."""
    out = set()
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", tok)
        if not m:
            raise ValueError(f"bad size {tok!r} (expected N or A-B)")
        a = int(m.group(1))
        b = int(m.group(2) or a)
        if a < 1 or b < a:
            raise ValueError(f"bad size range {tok!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def plan_runs(p, sizes, policies):
    """[(label, spec, warmup, seconds)] in run order."""
    runs = [(f"static:{n}", f"static:{n}", p["static_warmup"], p["static_seconds"]) for n in sizes]
    for pol in policies:
        if pol == "tcc":
            runs.append(("tcc", "tcc", p["tcc_warmup"], p["tcc_seconds"]))
        else:
            runs.append((pol, pol, p["adaptive_warmup"], p["adaptive_seconds"]))
    if p["fast_tcc"]:
        runs.append((f"{p['fast_tcc']} (fast)", p["fast_tcc"], p["fast_warmup"], p["fast_seconds"]))
    return runs


def estimate(runs):
    return sum(w + s + RUN_OVERHEAD_S for _, _, w, s in runs)


# --------------------------------------------------------------------------
# running

def build(cargo):
    log("cargo build --release -p tact-bench-tune")
    subprocess.run([cargo, "build", "--release", "-p", "tact-bench-tune"], cwd=REPO, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "release")


def start_service(bindir, cpu, args, outdir):
    cmd = ["taskset", "-c", str(cpu), os.path.join(bindir, "tune-service"), "--listen", "127.0.0.1:0",
           "--service-ms", str(args.service_ms), "--delay-ms", str(args.delay_ms), "--seed", str(args.seed),
           "--mode", args.mode]
    err = open(os.path.join(outdir, "service.log"), "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    CLEANUP.push("service", lambda: terminate_tree(proc.pid))
    line = proc.stdout.readline().strip()
    if not line.startswith("listening "):
        raise SystemExit(f"tune-service did not start: {line!r} (see {err.name})")
    addr = line.split()[1]
    log(f"service {addr} (pid {proc.pid}, CPU {cpu}): {args.service_ms} ms CPU + {args.delay_ms} ms delay, "
        f"mode {args.mode}")
    return proc, addr


def run_driver(bindir, cpu, addr, label, spec, warmup, seconds, args, outdir):
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
    path = os.path.join(outdir, "runs", f"{safe}.json")
    n_max = max(args.max, int(spec.split(":")[1]) if spec.startswith("static:") else 0)
    cmd = ["taskset", "-c", str(cpu), os.path.join(bindir, "tune-drive"), "--policy", spec, "--addr", addr,
           "--seconds", str(seconds), "--warmup", str(warmup), "--front-ms", str(args.front_ms),
           "--max", str(n_max), "--seed", str(args.seed), "--json", path]
    if args.init:
        cmd += ["--init", str(args.init)]
    t = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=warmup + seconds + 120)
    except subprocess.TimeoutExpired:
        return {"label": label, "spec": spec, "error": "timed out"}
    if r.returncode != 0 or not os.path.exists(path):
        return {"label": label, "spec": spec, "error": (r.stderr or r.stdout).strip()[-400:]}
    with open(path) as f:
        rec = json.load(f)
    rec.update(label=label, spec=spec, wall_s=time.monotonic() - t)
    log(r.stdout.strip())
    return rec


# --------------------------------------------------------------------------
# analysis

def slim(rec):
    """What the report keeps of a run (the full record stays in runs/)."""
    out = {k: rec.get(k) for k in ("label", "spec", "warmup_s", "seconds", "window", "steady",
                                   "first_steady_s", "errors", "init", "max", "error")}
    if not rec.get("spec", "").startswith("static:"):
        out["targets"] = rec.get("targets")
        out["trace"] = rec.get("trace")
        # [at, completions, service CPU s, target]; already in this form when re-reporting
        out["samples"] = [[s["at"], s["completions"], s["service_cpu"], s["target"]] if isinstance(s, dict)
                          else s for s in rec.get("samples", [])]
    return out


def references(static):
    """X*_max and X*_95 from the static runs: (size, throughput, util) each, or None."""
    ok = [r for r in static if not r.get("error")]
    if not ok:
        return None, None

    def point(r):
        return (int(r["spec"].split(":")[1]), r["window"]["throughput"], r["window"]["service_util"])

    best = max(ok, key=lambda r: r["window"]["throughput"])
    under = [r for r in ok if (r["window"]["service_util"] or 0) <= UTIL_BAND[1]]
    best95 = max(under, key=lambda r: r["window"]["throughput"]) if under else None
    return point(best), (point(best95) if best95 else None)


def fmt(x, spec="{:.1f}", none="-"):
    return none if x is None else spec.format(x)


def pct(x):
    return fmt(None if x is None else 100 * x, "{:.1f}%")


def row_of(name, period, xmax, x95):
    if not period:
        return [name, "-", "-", "-", "-", "-", "-"]
    thr = period["throughput"]
    c = period.get("count") or {}
    lat = period.get("latency") or {}
    return [name, f"{thr:.0f}",
            pct(thr / xmax[1]) if xmax else "-",
            pct(thr / x95[1]) if x95 else "-",
            pct(period.get("service_util")),
            (f"{c['mean']:.1f} [{c['min']}-{c['max']}] sd {c['stdev']:.1f}" if c else "-"),
            fmt(lat.get("p99_ms"), "{:.1f}")]


def table_text(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r))
    return "\n".join([line(head), "  ".join("-" * x for x in w)] + [line(r) for r in rows])


def targets(results, xmax, x95):
    """The issue's targets for tact's default row: [(criterion, value, verdict)]."""
    by = {r["label"]: r for r in results}
    tcc = by.get("tcc")
    if not tcc or tcc.get("error") or not xmax:
        return []
    # Steady periods are what TCC is judged on (spec X1); the whole window when it never got there.
    p = tcc.get("steady") or tcc["window"]
    where = "steady" if tcc.get("steady") else "window (never steady)"
    thr, util = p["throughput"], p.get("service_util")
    out = [(f"throughput >= {TARGET_REL_MAX:.0%} of X*_max ({where})", pct(thr / xmax[1]),
            "PASS" if thr >= TARGET_REL_MAX * xmax[1] else "miss")]
    if x95:
        out.append((f"throughput vs X*_95 ({where})", pct(thr / x95[1]), "info"))
    out.append((f"service CPU {UTIL_BAND[0]:.0%}-{UTIL_BAND[1]:.0%} ({where})", pct(util),
                "PASS" if util is not None and UTIL_BAND[0] <= util <= UTIL_BAND[1] else "miss"))
    for b in BASELINES:
        r = by.get(b)
        if not r or r.get("error"):
            continue
        bp = r["window"]
        bu = bp.get("service_util") or 0
        # Better: more throughput, or the baseline saturates the bottleneck (> 95%) while tact
        # stays within its band at no less than 95% of the baseline's throughput.
        better = thr > bp["throughput"] or (bu > UTIL_BAND[1] and util is not None and util <= UTIL_BAND[1]
                                            and thr >= 0.95 * bp["throughput"])
        out.append((f"better than {b}", f"{thr:.0f}/s at {pct(util)} vs {bp['throughput']:.0f}/s at {pct(bu)}",
                    "PASS" if better else "miss"))
    return out


def report(results, cfg, env, outdir, elapsed):
    static = [r for r in results if r["spec"].startswith("static:")]
    adaptive = [r for r in results if not r["spec"].startswith("static:")]
    xmax, x95 = references(static)
    lines = [f"bench/tune (spec X1): front {cfg['front_ms']} ms, service {cfg['service_ms']} ms CPU + "
             f"{cfg['delay_ms']} ms delay (Pareto k=2.5); service on CPU {cfg['service_cpu']}, driver on CPU "
             f"{cfg['driver_cpu']}; preset {cfg['preset']}",
             f"{env['kernel']}, {env['cpus']} CPUs, load average {env['loadavg_start']} -> {env.get('loadavg_end')}"]
    if xmax:
        lines.append(f"X*_max = {xmax[1]:.0f}/s at static:{xmax[0]} (service CPU {pct(xmax[2])}); "
                     + (f"X*_95 = {x95[1]:.0f}/s at static:{x95[0]} (service CPU {pct(x95[2])})"
                        if x95 else "X*_95: no static size kept the service CPU <= 95%"))
    head = ["controller", "thr/s", "vs X*_max", "vs X*_95", "svc CPU", "count mean [min-max] sd", "p99 ms"]
    rows = []
    for r in adaptive:
        if r.get("error"):
            rows.append([r["label"], "error: " + r["error"].splitlines()[-1][:60] if r["error"] else "error",
                         "", "", "", "", ""])
            continue
        rows.append(row_of(r["label"], r["window"], xmax, x95))
        if r.get("steady"):
            first = r.get("first_steady_s")
            rows.append(row_of(f"  {r['label']} steady {r['steady']['seconds']:.0f}s"
                               + (f" (from {first:.0f}s)" if first is not None else ""), r["steady"], xmax, x95))
        elif r["spec"].startswith("tcc"):
            rows.append([f"  {r['label']} never reached Steady", "", "", "", "", "", ""])
    for ref, name in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            r = next(x for x in static if x["spec"] == f"static:{ref[0]}")
            rows.append(row_of(f"static:{ref[0]} ({name})", r["window"], xmax, x95))
    lines += ["", table_text(head, rows)]
    curve = [f"{r['spec'].split(':')[1]}:{r['window']['throughput']:.0f}/{pct(r['window']['service_util'])}"
             for r in static if not r.get("error")]
    if curve:
        lines += ["", "static curve (size:throughput/service CPU): " + "  ".join(curve)]
    tt = targets(results, xmax, x95)
    if tt:
        lines += ["", "targets (tact = the default tcc row):",
                  table_text(["criterion", "tact", "verdict"], [list(t) for t in tt])]
    errs = [r for r in results if r.get("error")]
    if errs:
        lines += ["", f"{len(errs)} run(s) failed: " + "; ".join(f"{r['label']}: {r['error'][-120:]}" for r in errs[:4])]
    text = "\n".join(lines)
    print(text)
    print(f"\ntotal {elapsed:.0f} s")
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text + "\n")
    out = {"config": cfg, "env": env, "elapsed_s": elapsed,
           "x_max": xmax and dict(zip(("size", "throughput", "service_util"), xmax)),
           "x_95": x95 and dict(zip(("size", "throughput", "service_util"), x95)),
           "targets": [dict(zip(("criterion", "value", "verdict"), t)) for t in tt],
           "results": [slim(r) for r in results]}
    path = os.path.join(outdir, "results.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    files = plot(static, adaptive, xmax, x95, outdir)
    log(f"wrote {path}, {os.path.join(outdir, 'table.txt')}" + "".join(", " + x for x in files))


COLORS = {"tcc": "tab:green", "aimd": "tab:orange", "vegas": "tab:purple", "gradient2": "tab:brown",
          "envoy": "tab:pink"}


def plot(static, adaptive, xmax, x95, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("plot skipped: matplotlib not installed (pip install -r bench/requirements.txt)")
        return []
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(11, 9))
    st = sorted((int(r["spec"].split(":")[1]), r["window"]) for r in static if not r.get("error"))
    if st:
        ax.plot([n for n, _ in st], [w["throughput"] for _, w in st], "k.-", lw=1, label="static pool")
        ux = ax.twinx()
        ux.plot([n for n, _ in st], [100 * (w["service_util"] or 0) for _, w in st], color="0.6", ls=":",
                lw=1, label="service CPU (static)")
        ux.axhspan(100 * UTIL_BAND[0], 100 * UTIL_BAND[1], color="tab:green", alpha=0.08)
        ux.set_ylabel("service CPU % (static; band 85-95%)")
        ux.set_ylim(0, 105)
    for ref, name in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            ax.axhline(ref[1], color="0.5", lw=0.6, ls="--")
            ax.annotate(f"{name} (static:{ref[0]})", (1, ref[1]), fontsize=7, va="bottom")
    for r in adaptive:
        if r.get("error") or not r["window"].get("count"):
            continue
        for period, marker, suffix in ((r["window"], "o", ""), (r.get("steady"), "*", " steady")):
            if not period or not period.get("count"):
                continue
            c = period["count"]
            col = COLORS.get(r["spec"].split(":")[0], "tab:blue")
            if "(fast)" in r["label"]:
                col = "tab:olive"
            ax.errorbar([c["mean"]], [period["throughput"]], xerr=[[c["mean"] - c["min"]], [c["max"] - c["mean"]]],
                        fmt=marker, color=col, ms=8 if marker == "*" else 6, capsize=3,
                        label=f"{r['label']}{suffix}")
    ax.set_xlabel("workers (static size; controllers: time-weighted mean, bars min-max)")
    ax.set_ylabel("completions/s")
    ax.set_title("throughput vs concurrency: static sizes and each controller")
    ax.legend(fontsize=7, loc="lower right")
    for r in adaptive:
        if r.get("error") or not r.get("targets"):
            continue
        end = r["warmup_s"] + r["seconds"]
        pts = r["targets"] + [[end, r["targets"][-1][1]]]
        col = COLORS.get(r["spec"].split(":")[0], "tab:blue")
        if "(fast)" in r["label"]:
            col = "tab:olive"
        bx.step([p[0] for p in pts], [p[1] for p in pts], where="post", color=col, lw=1.2 if r["spec"] == "tcc" else 0.8,
                label=r["label"])
        if r["spec"] == "tcc":
            steady_start = None
            for tr in r.get("trace") or []:
                at = tr["at"]["secs"] + tr["at"]["nanos"] / 1e9 if isinstance(tr["at"], dict) else tr["at"]
                if tr["to"] == "steady" and tr["from"] != "steady":
                    steady_start = at
                elif tr["from"] == "steady" and steady_start is not None:
                    bx.axvspan(steady_start, at, color="tab:green", alpha=0.1)
                    steady_start = None
            if steady_start is not None:
                bx.axvspan(steady_start, end, color="tab:green", alpha=0.1)
    for ref, name in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            bx.axhline(ref[0], color="0.5", lw=0.6, ls="--")
            bx.annotate(f"{name} size", (0, ref[0]), fontsize=7, va="bottom")
    bx.set_xlabel("s since the pool's start (tcc: Steady periods shaded)")
    bx.set_ylabel("target workers")
    bx.set_title("targets over time")
    bx.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path = os.path.join(outdir, "tune.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# --------------------------------------------------------------------------

def environment(cpus):
    env = {"kernel": f"Linux {platform.release()}", "cpus": len(cpus),
           "loadavg_start": open("/proc/loadavg").read().split()[:3], "python": platform.python_version()}
    try:
        env["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip()
    except OSError:
        pass
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="~2-minute smoke run: coarse sizes, short runs")
    ap.add_argument("--sizes", help="static sizes, e.g. 1-64 or 1-16,20,24,32 ('' for none)")
    ap.add_argument("--policies", default="tcc," + ",".join(BASELINES),
                    help="adaptive controllers in run order (tcc, aimd, vegas, gradient2, envoy, or any spec)")
    ap.add_argument("--fast-tcc", help="an additional, labelled TCC row with this spec ('' for none; "
                    "default tcc:dwell=5s)")
    for name, what in (("static", "each static size"), ("tcc", "TCC"), ("fast", "the fast TCC row"),
                       ("adaptive", "each baseline")):
        ap.add_argument(f"--{name}-seconds", type=float, help=f"measured seconds of {what}")
        ap.add_argument(f"--{name}-warmup", type=float, help=f"warm-up seconds of {what}")
    ap.add_argument("--front-ms", type=float, default=1.0, help="front service time, ms CPU (X1: 1)")
    ap.add_argument("--service-ms", type=float, default=1.3, help="web service time, ms CPU (X1: 1.3)")
    ap.add_argument("--delay-ms", type=float, default=5.0, help="web delay, ms (X1: 5)")
    ap.add_argument("--mode", default="cpu", help="the service's mode: cpu, memory:MiB, disk:FILE")
    ap.add_argument("--max", type=int, default=64, help="n_max of the adaptive controllers")
    ap.add_argument("--init", type=int, help="n_init of the controllers (default: the online CPUs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--service-cpu", type=int, default=1)
    ap.add_argument("--driver-cpu", type=int, default=0)
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in target/release")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tune"))
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="wait while this file exists, hold it while running "
                    "('' to skip)")
    ap.add_argument("--from-results", metavar="FILE", help="run nothing: report again on a results.partial.jsonl")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its duration, then exit")
    args = ap.parse_args()

    outdir = os.path.abspath(args.out)
    os.makedirs(os.path.join(outdir, "runs"), exist_ok=True)
    if args.from_results:
        with open(args.from_results) as f:
            lines = [json.loads(x) for x in f if x.strip()]
        report(lines[1:], lines[0]["config"], lines[0]["env"], outdir, lines[0].get("elapsed_s", 0))
        return 0

    preset = "quick" if args.quick else "default"
    p = dict(PRESETS[preset])
    for k in ("sizes", "fast_tcc") + tuple(f"{a}_{b}" for a in ("static", "tcc", "fast", "adaptive")
                                            for b in ("seconds", "warmup")):
        if getattr(args, k, None) is not None:
            p[k] = getattr(args, k)
    try:
        sizes = parse_sizes(p["sizes"])
    except ValueError as e:
        ap.error(f"--sizes: {e}")
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    runs = plan_runs(p, sizes, policies)
    est = estimate(runs)
    cpus = sorted(os.sched_getaffinity(0))
    for c in (args.service_cpu, args.driver_cpu):
        if c not in cpus:
            ap.error(f"CPU {c} is not available here ({cpus})")
    log(f"preset {preset}: {len(sizes)} static sizes x {p['static_warmup']}+{p['static_seconds']} s, "
        + ", ".join(f"{lab} {w:.0f}+{s:.0f} s" for lab, _, w, s in runs if not lab.startswith("static:")))
    log(f"estimated duration: {est / 60:.1f} min (+ the build)")
    if args.dry_run:
        return 0
    if not shutil.which("taskset"):
        raise SystemExit("taskset not found (util-linux)")

    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/tune")
    bindir = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release") \
        if args.no_build else build(args.cargo)
    env = environment(cpus)
    cfg = dict(p, preset=preset, policies=policies, front_ms=args.front_ms, service_ms=args.service_ms,
               delay_ms=args.delay_ms, mode=args.mode, max=args.max, init=args.init, seed=args.seed,
               service_cpu=args.service_cpu, driver_cpu=args.driver_cpu, estimate_s=round(est))
    _, addr = start_service(bindir, args.service_cpu, args, outdir)
    partial = os.path.join(outdir, "results.partial.jsonl")
    with open(partial, "w") as f:
        f.write(json.dumps({"config": cfg, "env": env}) + "\n")
    results = []
    for i, (label, spec, warmup, seconds) in enumerate(runs):
        log(f"[{i + 1}/{len(runs)}] {label}: {warmup:g}+{seconds:g} s")
        rec = run_driver(bindir, args.driver_cpu, addr, label, spec, warmup, seconds, args, outdir)
        if rec.get("error"):
            log(f"{label} failed: {rec['error']}")
        results.append(rec)
        with open(partial, "a") as f:
            f.write(json.dumps(slim(rec)) + "\n")
    env["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    report([slim(r) for r in results], cfg, env, outdir, time.monotonic() - T0)
    CLEANUP.run()
    os.unlink(partial)
    return 0


if __name__ == "__main__":
    sys.exit(main())
