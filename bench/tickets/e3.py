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
import os
import statistics
import sys
import tomllib

from diskrig import Run, arg_parser, base_config, check_host, chosen_modes, finish, log, prepare, run_all, save

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
PERIOD_S = 0.25
PRESETS = {"quick": dict(reps=1, seconds=20.0), "default": dict(reps=3, seconds=40.0)}
PAPER = ("Sullivan & Seltzer 1999, section 6.4: when the reserved client had touched all 4096 pages, "
         "the others had touched about 1000 each (4.1:1)")


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


def busy(samples, settle):
    """The disk's busy fraction (its io_ticks, ms, over the time between) from the first sample
    at or after settle to the last; samples hold (counts, io_ticks)."""
    a, b = next((s for s in samples if s[0] >= settle), None), samples[-1]
    if a is None or a[1][1] is None or b[1][1] is None or b[0] <= a[0]:
        return None
    return (b[1][1] - a[1][1]) / 1000 / (b[0] - a[0])


# --------------------------------------------------------------------------
# one run

def one_run(env, mode, rep, seq):
    res = {"mode": mode, "rep": rep, "seconds": env.seconds, "notes": []}
    with Run(env, res, f"{seq:03d}-{mode}") as run:
        cmd = {t: run.reader(i) for i, t in enumerate(TASKS)}
        if mode == "tact":
            run.start_tact(setup_toml({t: "exec " + " ".join(cmd[t]) for t in TASKS}))
        else:
            if mode == "flat-cgroup":
                run.new_cgroups()
                res["knobs"] = {"blkio.bfq.weight": FLAT_WEIGHTS}
            if mode == "ionice":
                res["knobs"] = {"ionice -c2 -n": IONICE_LEVELS}
            for t in TASKS:
                if mode == "flat-cgroup":
                    run.start(cmd[t], [run.cgroup("blkio", t, {"blkio.bfq.weight": FLAT_WEIGHTS[t]})])
                elif mode == "ionice":
                    run.start(["ionice", "-c2", "-n", str(IONICE_LEVELS[t])] + cmd[t])
                else:
                    run.start(cmd[t])
        run.wait_started(len(TASKS), "readers")
        samples = run.sample(PERIOD_S, lambda: ([env.slots.iterations(i) for i in range(len(TASKS))],
                                                diskstats_ticks(env.dev)))
        a, b = at(samples, env.settle), samples[-1]
        reads = {x: b[1][0][i] - a[1][0][i] for i, x in enumerate(TASKS)}
        res.update(figures(reads))
        res["window"] = (a[0], b[0])
        res["busy"] = busy(samples, env.settle)
        res["verdict"] = verdict(res, res["busy"])
        res["series"] = [[round(s[0], 2), s[1][0]] for s in samples[::2]]
    return res


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


def plot(ax, bx, results, analysis):
    """Left: the median shares per mode; right: the ratio over 2 s windows in each mode's first run."""
    modes = list(analysis)
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


def write(results, config, env, failures, outdir):
    analysis = analyse(results)
    return save(outdir, "e3", table(analysis, config, env, failures),
                {"experiment": "E3", "config": config, "env": env, "failures": failures, "expected": EXPECTED,
                 "paper": PAPER, "analysis": analysis, "runs": results},
                (13, 4.2), lambda ax, bx: plot(ax, bx, results, analysis))


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
    ticks = [(0.0, ([0], 0)), (1.5, ([1], 0)), (2.5, ([2], 400)), (12.5, ([9], 9900))]
    assert abs(busy(ticks, 2.0) - 0.95) < 1e-12 and busy(ticks, 13.0) is None
    assert busy([(0.0, ([0], None)), (3.0, ([1], 10))], 0.0) is None
    print("e3 self-test: ok")
    return 0


def main():
    ap = arg_parser(__doc__, MODES, "1 rep of 20 s per mode, about 2 min")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    preset = PRESETS["quick" if args.quick else "default"]
    reps, seconds = args.reps or preset["reps"], args.seconds or preset["seconds"]
    modes = chosen_modes(ap, args, MODES)
    mounts = check_host("E3", args, modes)
    env, envinfo = prepare("e3", args, mounts, TASKS, seconds)
    config = base_config(args, env, reps, modes, PERIOD_S)
    log(f"E3: {', '.join(modes)}, {reps} rep(s) of {seconds:g} s on {envinfo['disk']}; "
        f"about {reps * len(modes) * (seconds + 4) / 60:.1f} min")
    results, failures = run_all(
        reps, lambda rep: modes[rep % len(modes):] + modes[:rep % len(modes)],
        lambda mode, rep, seq: one_run(env, mode, rep, seq), lambda mode: mode,
        lambda r: f"ratio {r['ratio']:.2f}, soft spread {100 * r['soft_spread']:.1f}%, "
                  f"busy {100 * (r['busy'] or 0):.0f}%, reads " + " ".join(f"{t} {r['reads'][t]}" for t in TASKS))
    return finish("e3", args.out, results, envinfo, lambda envinfo: write(results, config, envinfo, failures, args.out))


if __name__ == "__main__":
    sys.exit(main())
