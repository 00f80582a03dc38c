#!/usr/bin/env python3
"""bench/tickets E3: disk shares (tickets spec section 5, E3; issue 7: "five readers each with one
request outstanding, one with a 50% hard share: about 4:1 progress").

Five readers of their own 16 MiB regions of one emulated disk, random 4 KiB O_DIRECT reads, one
request outstanding each (reader.py). The disk is bench/idle's rig (disk.py: a FUSE file served one
read at a time with a fixed service time, under a loop device) with the bfq scheduler and
low_latency=0. R holds a hard 50% of the disk; S1..S4 split the soft half at 1/8 each. Modes,
interleaved per rep (order rotated):
  tact         tact tickets run SETUP --backend cgroup: R `{from="base", disk=500, hard=true}`,
               S* `{from="base", disk=100}` (soft, from the base's soft half): blkio.bfq.weight 1000:250
  flat-cgroup  one v1 blkio cgroup per reader, blkio.bfq.weight 800:200 (the spec's weights)
  ionice       best-effort levels R 0, S* 6 (bfq weights (8 - level) x 10 = 80:20)
  none         no control: 1:1
Measured: reads each reader completed (its own counter) over [t0 + settle, t0 + S]; the ratio
R : mean(S*) (target 3.6-4.4), the soft readers' spread (each within 10% of their mean), and the
disk's busy time from /proc/diskstats (the spec asks >= 90%). See bench/tickets/README.md.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "idle"))

from common.cgroups import remove_stale, remove_tree  # noqa: E402
from common.lifecycle import DEFAULT_LOCK, T0, Cleanup, log, take_lock  # noqa: E402
from common.procs import kill_leftovers, parse_mounts  # noqa: E402
from workload import CGROUP_PREFIX, Slots, set_child_subreaper  # noqa: E402

TASKS = ["R", "S1", "S2", "S3", "S4"]
RESERVED = "R"
SOFT = TASKS[1:]
EXPECTED = {"R": 0.5, **{t: 0.125 for t in SOFT}}
TARGET = (3.6, 4.4)
SPREAD = 0.10
BUSY = 0.90
MODES = ["tact", "flat-cgroup", "ionice", "none"]
FLAT_WEIGHTS = {"R": 800, **{t: 200 for t in SOFT}}
IONICE_LEVELS = {"R": 0, **{t: 6 for t in SOFT}}
REGION = 16 << 20
PERIOD_S = 0.25
START_TIMEOUT_S = 30.0
TACT_GRACE_S = 8.0
PRESETS = {"quick": dict(reps=1, seconds=20.0), "default": dict(reps=3, seconds=40.0)}
PAPER = ("Sullivan & Seltzer 1999, section 6.4: when the reserved client had touched all 4096 pages, "
         "the others had touched about 1000 each (4.1:1)")
CLEANUP = Cleanup()


def setup_toml(commands):
    """The setup file of the tact mode: R a hard half of the base's disk tickets, S* soft."""
    out = []
    for t in TASKS:
        disk = "{ from = \"base\", disk = 500, hard = true }" if t == RESERVED else "{ from = \"base\", disk = 100 }"
        out.append(f'[[job]]\nname = "{t}"\ncommand = "{commands[t]}"\n'
                   f'funding = [{disk}, {{ from = "base", cpu = 100 }}]\n')
    return "\n".join(out)


def predicted(mode):
    """Shares the mode's static weights give five always-busy readers."""
    w = {"tact": {"R": 1000, **{t: 250 for t in SOFT}}, "flat-cgroup": FLAT_WEIGHTS,
         "ionice": {t: (8 - lvl) * 10 for t, lvl in IONICE_LEVELS.items()},
         "none": {t: 1 for t in TASKS}}[mode]
    total = sum(w.values())
    return {t: w[t] / total for t in TASKS}


def figures(reads):
    """Shares, the ratio R : mean(S*), and the soft readers' largest relative distance from their
    mean, from the reads each completed in the window."""
    total = sum(reads.values())
    soft_mean = statistics.fmean(reads[t] for t in SOFT)
    return {"reads": reads, "shares": {t: reads[t] / total if total else 0.0 for t in TASKS},
            "ratio": reads[RESERVED] / soft_mean if soft_mean else None,
            "soft_spread": max(abs(reads[t] / soft_mean - 1) for t in SOFT) if soft_mean else None}


def verdict(fig, busy):
    ok_ratio = fig["ratio"] is not None and TARGET[0] <= fig["ratio"] <= TARGET[1]
    ok_spread = fig["soft_spread"] is not None and fig["soft_spread"] <= SPREAD
    return {"ratio": ok_ratio, "spread": ok_spread, "busy": busy is not None and busy >= BUSY,
            "pass": ok_ratio and ok_spread}


def at(samples, t):
    """The counts of the last sample at or before t."""
    best = samples[0]
    for s in samples:
        if s[0] <= t:
            best = s
    return best


def diskstats_ticks(dev):
    name = os.path.basename(dev)
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if len(p) > 12 and p[2] == name:
                return int(p[12])
    return None


# --------------------------------------------------------------------------
# one run

class Blkio:
    """tact-test-tickets-<pid> in the cpu, cpuacct and blkio hierarchies (v1), one r<k> per run:
    --cgroup-parent names the cpu one, and tact uses the same path in the others."""

    def __init__(self, mounts):
        self.tops = {k: os.path.join(m, f"{CGROUP_PREFIX}{os.getpid()}") for k, m in mounts.items() if m}
        for top in self.tops.values():
            os.mkdir(top)
        self.seq = 0

    def new_run(self):
        self.seq += 1
        paths = {k: os.path.join(top, f"r{self.seq}") for k, top in self.tops.items()}
        for p in paths.values():
            os.mkdir(p)
        return paths

    def leftovers(self, paths):
        return [os.path.join(r, d) for p in paths.values() for r, ds, _ in os.walk(p) for d in ds]

    def remove(self):
        for top in self.tops.values():
            if os.path.isdir(top):
                remove_tree(top)


def v1_mounts():
    with open("/proc/mounts") as f:
        text = f.read()
    found = {}
    for fstype, mp, opts in parse_mounts(text):
        o = opts.split(",")
        if fstype != "cgroup":
            continue
        for key in ("cpu", "cpuacct", "blkio"):
            if key in o and key not in found:
                found[key] = mp
    return found


def child_setup(join=None):
    def setup():
        import ctypes
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if join:
            with open(join, "w") as f:
                f.write(f"{os.getpid()}\n")
    return setup


def one_run(env, mode, rep, seq):
    tag = f"{seq:03d}-{mode}"
    res = {"mode": mode, "rep": rep, "seconds": env.seconds, "notes": []}
    env.slots.clear()
    life = env.seconds + START_TIMEOUT_S + 15
    cmd = {t: [sys.executable, os.path.join(HERE, "reader.py"), env.dev, str(i), str(REGION), env.slots.path,
               str(os.getpid()), f"{life:.0f}"] for i, t in enumerate(TASKS)}
    procs, paths, tact = [], {}, None
    try:
        if mode == "tact":
            paths = env.cgroups.new_run()
            setup = os.path.join(env.tmp, f"{tag}.toml")
            with open(setup, "w") as f:
                f.write(setup_toml({t: "exec " + " ".join(cmd[t]) for t in TASKS}))
            jlog = os.path.join(env.tmp, f"{tag}.jsonl")
            err = open(os.path.join(env.tmp, f"{tag}.err"), "w+b")
            argv = [env.tact, "tickets", "run", setup, "--backend", "cgroup", "--duration",
                    f"{int(life)}s", "--json-log", jlog, "--cgroup-parent", paths["cpu"]]
            res["knobs"] = {"tact_cmd": " ".join(argv)}
            join = os.path.join(paths["cpuacct"], "cgroup.procs") if "cpuacct" in paths else None
            tact = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    close_fds=True, preexec_fn=child_setup(join))
        else:
            if mode == "flat-cgroup":
                paths = env.cgroups.new_run()
                res["knobs"] = {"blkio.bfq.weight": FLAT_WEIGHTS}
            if mode == "ionice":
                res["knobs"] = {"ionice -c2 -n": IONICE_LEVELS}
            for t in TASKS:
                join, argv = None, cmd[t]
                if mode == "flat-cgroup":
                    d = os.path.join(paths["blkio"], t)
                    os.mkdir(d)
                    with open(os.path.join(d, "blkio.bfq.weight"), "w") as f:
                        f.write(f"{FLAT_WEIGHTS[t]}\n")
                    join = os.path.join(d, "cgroup.procs")
                elif mode == "ionice":
                    argv = ["ionice", "-c2", "-n", str(IONICE_LEVELS[t])] + argv
                procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              close_fds=True, preexec_fn=child_setup(join)))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(env.slots.pid(i) > 0 and env.slots.iterations(i) > 0 for i in range(len(TASKS))):
            if time.monotonic() > deadline:
                raise RuntimeError("the readers did not all start")
            if tact is not None and tact.poll() is not None:
                raise RuntimeError(f"tact exited with {tact.returncode} before its readers started")
            time.sleep(0.05)
        t0 = time.monotonic()
        samples = []
        ticks0 = None
        k = 0
        while True:
            t = time.monotonic()
            samples.append((t - t0, [env.slots.iterations(i) for i in range(len(TASKS))]))
            if ticks0 is None and t - t0 >= env.settle:
                ticks0 = (t, diskstats_ticks(env.dev))
            if t - t0 >= env.seconds:
                break
            k += 1
            time.sleep(max(0.0, t0 + k * PERIOD_S - time.monotonic()))
        t1, ticks1 = time.monotonic(), diskstats_ticks(env.dev)
        a, b = at(samples, env.settle), samples[-1]
        reads = {x: b[1][i] - a[1][i] for i, x in enumerate(TASKS)}
        res.update(figures(reads))
        res["window"] = (a[0], b[0])
        res["busy"] = ((ticks1 - ticks0[1]) / 1000 / (t1 - ticks0[0])
                       if ticks0 and ticks0[1] is not None and ticks1 is not None else None)
        res["verdict"] = verdict(res, res["busy"])
        res["series"] = [[round(s[0], 2), s[1]] for s in samples[::2]]
    except (RuntimeError, OSError, ValueError) as e:
        res["error"] = str(e)
    finally:
        if tact is not None:
            if tact.poll() is None:
                tact.send_signal(signal.SIGTERM)
            try:
                tact.wait(timeout=TACT_GRACE_S)
            except subprocess.TimeoutExpired:
                tact.kill()
                tact.wait()
                res["notes"].append("tact did not exit within 8 s of SIGTERM: killed")
            err.seek(0)
            res["tact_stderr"] = err.read().decode(errors="replace")[-3000:]
            err.close()
            res["tact_exit"] = tact.returncode
            res["tact_summary"] = tact_summary(jlog)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if paths:
            left = env.cgroups.leftovers({k: v for k, v in paths.items()}) if mode == "tact" else []
            if left:
                res["notes"].append(f"tact left cgroups behind: {left}")
            for p in paths.values():
                remove_tree(p)
    return res


def tact_summary(path):
    try:
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if "summary" in rec:
                    return rec["summary"]
    except (OSError, ValueError):
        pass
    return None


# --------------------------------------------------------------------------
# analysis and output

def analyse(results):
    out = {}
    for mode in MODES:
        runs = [r for r in results if r["mode"] == mode and "error" not in r]
        if not runs:
            continue
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        ratios = [r["ratio"] for r in runs if r["ratio"] is not None]
        spreads = [r["soft_spread"] for r in runs if r["soft_spread"] is not None]
        busy = [r["busy"] for r in runs if r["busy"] is not None]
        shares = {t: med([r["shares"][t] for r in runs]) for t in TASKS}
        fig = {"ratio": med(ratios), "soft_spread": med(spreads)}
        out[mode] = {"reps": len(runs), "ratio": fig["ratio"], "ratio_range": (min(ratios), max(ratios)) if ratios else None,
                     "soft_spread": fig["soft_spread"], "busy": med(busy), "shares": shares,
                     "predicted_ratio": predicted(mode)["R"] / predicted(mode)["S1"],
                     "verdict": verdict(fig, med(busy)),
                     "reps_passing": sum(r["verdict"]["pass"] for r in runs)}
    return out


def table(analysis, config, env, failures):
    L = [f"E3 disk shares: 5 readers, 4 KiB O_DIRECT random reads, one outstanding each; {env['disk']}; "
         f"{config['reps']} rep(s) x {config['seconds']:g} s, window [t0+{config['settle']:g} s, t0+S]"]
    L.append(f"target: R : mean(S*) in [{TARGET[0]}, {TARGET[1]}], soft readers within {SPREAD:.0%} of their "
             f"mean, disk >= {BUSY:.0%} busy")
    head = f"{'mode':12} {'R':>6} {'S1':>6} {'S2':>6} {'S3':>6} {'S4':>6} {'ratio':>6} {'[min-max]':>12} " \
           f"{'model':>6} {'spread':>7} {'busy':>6}  verdict"
    L.append(head)
    for mode, a in analysis.items():
        rr = a["ratio_range"]
        v = a["verdict"]
        word = "PASS" if v["pass"] else "MISS"
        if mode != "tact":
            word = "(yes)" if v["pass"] else "(no)"
        L.append(f"{mode:12} " + " ".join(f"{100 * a['shares'][t]:5.1f}%" for t in TASKS)
                 + f" {a['ratio']:6.2f} {f'[{rr[0]:.2f}-{rr[1]:.2f}]':>12} {a['predicted_ratio']:6.2f} "
                 + f"{100 * a['soft_spread']:6.1f}% " + (f"{100 * a['busy']:5.1f}%" if a["busy"] is not None else "    -")
                 + f"  {word} ({a['reps_passing']}/{a['reps']} reps)"
                 + ("" if v["busy"] else " [disk under 90% busy]"))
    for m, why in failures.items():
        L.append(f"{m}: failed: {why}")
    L.append("expected shares: R 50%, S* 12.5% each (ratio 4); model: the ratio the mode's static weights give "
             "five always-busy readers")
    L.append("tact: R {from=base, disk=500, hard=true}, S* {from=base, disk=100} -> blkio.bfq.weight 1000:250; "
             "flat-cgroup: blkio.bfq.weight 800:200; ionice: -c2 -n0 for R, -n6 for S* (bfq weights 80:20)")
    L.append(f"report: {PAPER}")
    return "\n".join(L) + "\n"


def plot(results, analysis, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    modes = list(analysis)
    if not modes:
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.2))
    width = 0.8 / len(modes)
    for k, mode in enumerate(modes):
        xs = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(TASKS))]
        ax.bar(xs, [100 * analysis[mode]["shares"][t] for t in TASKS], width, label=mode)
    for i, t in enumerate(TASKS):
        ax.hlines(100 * EXPECTED[t], i - 0.45, i + 0.45, colors="black", linewidth=2)
    ax.set_xticks(range(len(TASKS)), TASKS)
    ax.set_ylabel("share of the reads, %")
    ax.set_title("E3: median shares (black: expected)")
    ax.legend(fontsize=8)
    for mode in modes:
        r = next(r for r in results if r["mode"] == mode and "series" in r)
        ser = r["series"]
        xs, ys = [], []
        for (ta, va), (tb, vb) in zip(ser, ser[4:]):     # 2 s windows (kept samples every 0.5 s)
            soft = statistics.fmean(vb[i] - va[i] for i in range(1, len(TASKS)))
            if soft > 0:
                xs.append((ta + tb) / 2)
                ys.append((vb[0] - va[0]) / soft)
        bx.plot(xs, ys, label=mode, linewidth=1)
    bx.axhspan(TARGET[0], TARGET[1], color="grey", alpha=0.2)
    bx.set_xlabel("s since the readers started")
    bx.set_ylabel("R : mean(S*) over 2 s")
    bx.set_title("E3: progress ratio over time (grey: target)")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results, config, env, failures, outdir):
    analysis = analyse(results)
    text = table(analysis, config, env, failures)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "e3.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "e3.json"), "w") as f:
        json.dump({"experiment": "E3", "config": config, "env": env, "failures": failures,
                   "expected": EXPECTED, "paper": PAPER, "analysis": analysis, "runs": results}, f, indent=1,
                  default=str)
    try:
        plot(results, analysis, os.path.join(outdir, "e3.png"))
    except ImportError as e:
        text += f"no plot: {e} (pip install -r bench/requirements.txt)\n"
    return text


# --------------------------------------------------------------------------

def self_test():
    doc = tomllib.loads(setup_toml({t: f"exec /x/reader {i}" for i, t in enumerate(TASKS)}))
    assert [j["name"] for j in doc["job"]] == TASKS
    assert doc["job"][0]["funding"][0] == {"from": "base", "disk": 500, "hard": True}
    assert doc["job"][1]["funding"][0] == {"from": "base", "disk": 100}
    for mode in ("tact", "flat-cgroup", "ionice"):
        p = predicted(mode)
        assert abs(p["R"] / p["S1"] - 4.0) < 1e-12, (mode, p)
    assert predicted("none")["R"] == 0.2
    f = figures({"R": 4100, "S1": 1000, "S2": 1050, "S3": 950, "S4": 1000})
    assert abs(f["ratio"] - 4.1) < 1e-12 and abs(f["soft_spread"] - 0.05) < 1e-12
    assert verdict(f, 0.95) == {"ratio": True, "spread": True, "busy": True, "pass": True}
    g = figures({"R": 1000, "S1": 1000, "S2": 1000, "S3": 1000, "S4": 1300})
    v = verdict(g, 0.5)
    assert not v["ratio"] and not v["spread"] and not v["busy"] and not v["pass"]
    runs = [{"mode": "tact", **figures({"R": r, "S1": 1000, "S2": 1000, "S3": 1000, "S4": 1000}), "busy": 0.97}
            for r in (3900, 4000, 4600)]
    for r in runs:
        r["verdict"] = verdict(r, r["busy"])
    a = analyse(runs)["tact"]
    assert a["ratio"] == 4.0 and a["ratio_range"] == (3.9, 4.6) and a["reps_passing"] == 2 and a["verdict"]["pass"]
    samples = [(0.0, [0]), (0.5, [5]), (1.0, [9])]
    assert at(samples, 0.7) == (0.5, [5]) and at(samples, -1) == (0.0, [0])
    print("e3 self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 rep of 20 s per mode, about 2 min")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--settle", type=float, default=2.0, help="s left out at the start (default 2)")
    ap.add_argument("--modes", default="all", help="comma list of " + ", ".join(MODES) + ", or all")
    ap.add_argument("--service-ms", type=float, default=2.0, help="the emulated disk's time per read (default 2)")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tickets"))
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="the benchmark lock ('' skips it)")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    preset = PRESETS["quick" if args.quick else "default"]
    reps, seconds = args.reps or preset["reps"], args.seconds or preset["seconds"]
    modes = MODES if args.modes == "all" else [m.strip() for m in args.modes.split(",")]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {', '.join(bad)}")
    if os.geteuid() != 0:
        raise SystemExit("bench/tickets E3 needs root (a loop device, the bfq scheduler, cgroups)")
    mounts = v1_mounts()
    if "blkio" not in mounts or "cpu" not in mounts:
        raise SystemExit("bench/tickets E3 needs cgroup v1 cpu and blkio hierarchies (this harness does not "
                         "handle v2)")
    if "tact" in modes and not (os.path.isfile(args.tact) and os.access(args.tact, os.X_OK)):
        raise SystemExit(f"no tact at {args.tact} (make build, or --tact PATH), or --modes without tact")
    from disk import DiskRig   # bench/idle's emulated disk

    env = argparse.Namespace(seconds=seconds, settle=args.settle, tact=os.path.abspath(args.tact))
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/tickets e3")
    set_child_subreaper()
    CLEANUP.push("descendants", kill_leftovers)
    env.tmp = tempfile.mkdtemp(prefix=f"tact-bench-tickets-e3-{os.getpid()}-")
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(env.tmp, ignore_errors=True))
    rig = DiskRig(None, args.service_ms, 4096)
    rig.setup(CLEANUP)
    env.dev = rig.dev
    iosched = f"/sys/block/{os.path.basename(env.dev)}/queue/iosched"
    if "[bfq]" not in rig.info["scheduler"]:
        raise SystemExit(f"{env.dev}: the bfq scheduler is not available (scheduler: {rig.info['scheduler']})")
    with open(os.path.join(iosched, "low_latency"), "w") as f:
        f.write("0\n")
    for m in mounts.values():
        for p in remove_stale(m, CGROUP_PREFIX):
            log(f"removed {p}, left by an earlier run")
    env.cgroups = Blkio({k: mounts.get(k) for k in ("cpu", "cpuacct", "blkio")})
    CLEANUP.push("cgroups", env.cgroups.remove)
    env.slots = Slots(os.path.join(env.tmp, "slots"), len(TASKS))
    CLEANUP.push("slots", env.slots.close)
    config = {"reps": reps, "seconds": seconds, "settle": args.settle, "modes": modes, "tact": env.tact,
              "service_ms": args.service_ms, "region_bytes": REGION, "period_s": PERIOD_S}
    envinfo = {"kernel": os.uname().release, "cpus": os.cpu_count(), "disk": (
        f"{env.dev} over bench/idle's FUSE disk ({args.service_ms:g} ms a read), bfq low_latency=0"),
        "rig": rig.info, "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    log(f"E3: {', '.join(modes)}, {reps} rep(s) of {seconds:g} s on {envinfo['disk']}; "
        f"about {reps * len(modes) * (seconds + 4) / 60:.1f} min")
    results, failures, seq = [], {}, 0
    for rep in range(reps):
        for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
            seq += 1
            log(f"rep {rep + 1}/{reps}: {mode}")
            r = one_run(env, mode, rep, seq)
            results.append(r)
            for n in r["notes"]:
                log(f"  note: {n}")
            if "error" in r:
                failures[mode] = r["error"]
                log(f"  {mode} failed: {r['error']}" + (f"\n{r.get('tact_stderr', '')}" if mode == "tact" else ""))
            else:
                log(f"  ratio {r['ratio']:.2f}, soft spread {100 * r['soft_spread']:.1f}%, "
                    f"busy {100 * (r['busy'] or 0):.0f}%, reads " + " ".join(f"{t} {r['reads'][t]}" for t in TASKS))
    envinfo["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    text = write(results, config, envinfo, failures, args.out)
    print(text)
    CLEANUP.run()
    log(f"wrote {args.out}/e3.txt, e3.json, e3.png")
    return 1 if "tact" in failures else 0


if __name__ == "__main__":
    sys.exit(main())
