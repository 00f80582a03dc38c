"""E1's side-by-side table, JSON and plot from the runs' results."""
import json
import os

import e1
import metrics
from e1 import EXPECTED, HALVES, TASKS
from workload import MODES, TACT_MODES

PAPER = ("Sullivan & Seltzer 1999, section 6.2 / Fig. 8 (lottery scheduling, five Dhrystones for 200 s "
         "on one 200 MHz Pentium Pro): a graph of iterations and no numbers; \"the relative levels of "
         "progress of the clients match their relative funding levels ... the clients funded by currency A "
         "are unaffected\" when B3 wakes")


def band_of(mode):
    """The spec's pass band for a mode's kind: the user-level engine (signals) or kernel weights."""
    return metrics.SPEC_BAND["user-level" if mode == "tact-signals" else "cgroup"]


def analyse(results):
    """{mode: aggregate} over each mode's successful runs, plus the static settings' predictions and
    the measurement cross-checks."""
    out = {}
    for mode in MODES:
        rs = [r for r in results if r["mode"] == mode and "shares" in r]
        if not rs:
            continue
        a = metrics.aggregate(rs, band_of(mode))
        a["band"] = band_of(mode)
        pred = e1.predicted(mode)
        if pred:
            a["predicted"] = {h: {t: float(v) for t, v in pred[h].items()} for h in HALVES}
        a["schedstat_max_abs_diff"] = max(r["schedstat_max_abs_diff"] for r in rs)
        a["work_cv"] = max(r["work_cv"] for r in rs if r.get("work_cv") is not None) if any(
            r.get("work_cv") is not None for r in rs) else None
        out[mode] = a
    return out


def pct(x, digits=1):
    return "-" if x is None else f"{100 * x:.{digits}f}"


def signed(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def cell(sp, reps):
    if sp is None:
        return "-"
    if reps > 1:
        return f"{pct(sp['median'])} [{pct(sp['min'])}-{pct(sp['max'])}]"
    return pct(sp["median"])


def verdict_word(mode, ok):
    if mode in TACT_MODES:
        return "PASS" if ok else "MISS"
    return "(yes)" if ok else "(no)"


def table(analysis, config, env, skipped, failures):
    L = []
    L.append(f"E1 hierarchical CPU shares (tickets spec section 5, issue 7): {len(TASKS)} CPU-bound tasks pinned to "
             f"CPU {config['pin_cpu']} (harness on CPU {config['harness_cpu']}), runs of {config['seconds']:g} s, "
             f"{e1.SLEEPER} asleep the first half; {config['reps']} rep(s) per mode, modes interleaved")
    L.append(f"windows: first half [start+{config['settle']:g} s, switch-{config['exclude'] / 2:g} s], second half "
             f"[switch+{config['exclude'] / 2:g} s, end]; share = a task's utime+stime (/proc/PID/stat) / the "
             f"group's, in the window")
    L.append("funding: base->A = base->B = 1000; A1 100, A2 200 of A; B1 100, B2 200, B3 300 of B")
    L.append(f"{env.get('kernel')}, {env.get('scheduler')}, autogroup={env.get('sched_autogroup_enabled')}, "
             f"load average {' '.join(env.get('loadavg_start', []))} at start, "
             f"{' '.join(env.get('loadavg_end', []))} at end; tact: {config.get('tact_version') or '-'}")
    L.append("")
    L.append("Shares of the group's CPU, %: median [min-max] over reps (err: relative error of the median)")
    hdr = f"{'mode':<13}{'task':<6}" + "".join(
        f"| {h + ' half':<11}{'exp':>6} {'measured':>20} {'err':>8} " for h in HALVES)
    L.append(hdr)
    L.append("-" * len(hdr))
    for mode, a in analysis.items():
        for i, t in enumerate(TASKS):
            row = f"{mode if i == 0 else '':<13}{t:<6}"
            for h in HALVES:
                e = a["median_figures"]["err"][h][t]
                row += f"| {'':<11}{pct(float(EXPECTED[h][t])):>6} {cell(a['shares'][h][t], a['reps']):>20} " \
                       f"{signed(e) if e is not None else 'asleep':>8} "
            L.append(row)
        if a.get("predicted"):
            L.append(f"{'':<13}{'model':<6}" + "".join(
                f"| {'weights give':<11}" + " ".join(pct(a['predicted'][h][t]) for t in TASKS).rjust(35) + " "
                for h in HALVES))
        L.append("")
    L.append("Summary: |relative error| over the tasks, mean/max, of the median shares; A's change between halves")
    hdr = (f"{'mode':<13}{'first':>13}{'second':>13}{'A1 chg':>9}{'A2 chg':>9}  {'issue 5%':<9}"
           f"{'spec band':<15}{'A < 5%':<8}{'reps ok issue/spec/A':<22}")
    L.append(hdr)
    L.append("-" * len(hdr))
    for mode, a in analysis.items():
        f = a["median_figures"]
        v = a["verdict"]
        n = a["reps"]
        rp = a["reps_passing"]
        L.append(f"{mode:<13}"
                 + "".join(f"{pct(f['mean_abs_err'][h]) + '/' + pct(f['max_abs_err'][h]):>13}" for h in HALVES)
                 + "".join(f"{signed(f['a_change'][t]):>9}" for t in metrics.A_TASKS)
                 + f"  {verdict_word(mode, v['issue']):<9}"
                 + f"{verdict_word(mode, v['spec']) + ' (+-' + format(100 * a['band'], '.0f') + '%)':<15}"
                 + f"{verdict_word(mode, v['a_unaffected']):<8}"
                 + f"{rp['issue']}/{n} {rp['spec']}/{n} {rp['a_unaffected']}/{n}")
    for mode in MODES:
        if mode in skipped:
            L.append(f"{mode:<13}SKIPPED: {skipped[mode]}")
        elif mode in failures and mode not in analysis:
            L.append(f"{mode:<13}FAILED: {failures[mode]}")
    L.append("")
    L.append("PASS/MISS for tact, (yes)/(no) for the baselines; issue 7: every task within 5% of its expected "
             "share in each half and A1, A2 change < 5%; spec: +-10% with kernel weights, +-15% with the "
             "user-level engine")
    nice = e1.nice_choice()
    L.append("nice: levels for the awake-all proportions 2:4:1:2:3, n = round(log_1.25(max/share)): "
             + ", ".join(f"{t} {nice[t]}" for t in TASKS) + " (kernel weights "
             + ":".join(str(e1.NICE_WEIGHTS[nice[t]]) for t in TASKS) + ")")
    fl = e1.flat_cgroup_shares()
    L.append("flat-cgroup: one cgroup per task, cpu.shares " + ":".join(str(fl[t]) for t in TASKS)
             + " (the tickets x 10, no currencies)")
    checks = [f"{m} {pct(a['schedstat_max_abs_diff'], 2)}" for m, a in analysis.items()]
    L.append("cross-check, largest |share by utime+stime - share by schedstat| in points: " + ", ".join(checks))
    works = [f"{m} {pct(a['work_cv'], 2)}%" for m, a in analysis.items() if a.get("work_cv") is not None]
    if works:
        L.append("work check, spread (CV) of iterations per CPU-second across the tasks, worst run: " + ", ".join(works))
    L.append(f"report: {PAPER}")
    return "\n".join(L) + "\n"


def plot(results, analysis, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(analysis)
    if not modes:
        return
    nrow = 1 + (len(modes) + 1) // 2
    fig, axes = plt.subplots(nrow, 2, figsize=(13, 3.6 * nrow), squeeze=False)
    width = 0.8 / len(modes)
    for col, h in enumerate(HALVES):
        ax = axes[0][col]
        for k, mode in enumerate(modes):
            sp = analysis[mode]["shares"][h]
            xs = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(TASKS))]
            med = [100 * sp[t]["median"] for t in TASKS]
            lo = [100 * (sp[t]["median"] - sp[t]["min"]) for t in TASKS]
            hi = [100 * (sp[t]["max"] - sp[t]["median"]) for t in TASKS]
            ax.bar(xs, med, width, yerr=[lo, hi], capsize=2, label=mode)
        for i, t in enumerate(TASKS):
            ax.hlines(100 * float(EXPECTED[h][t]), i - 0.45, i + 0.45, colors="black", linewidth=2)
        ax.set_xticks(range(len(TASKS)), TASKS)
        ax.set_ylabel("share of the group's CPU, %")
        ax.set_title(f"{h} half (black: expected)")
        if col == 0:
            ax.legend(fontsize=8)
    colors = {t: c for t, c in zip(TASKS, plt.rcParams["axes.prop_cycle"].by_key()["color"])}
    for k, mode in enumerate(modes):
        ax = axes[1 + k // 2][k % 2]
        r = next(r for r in results if r["mode"] == mode and "series" in r)
        ser = r["series"]
        for i, t in enumerate(TASKS):
            xs, ys = [], []
            for (ta, va), (tb, vb) in zip(ser, ser[4:]):   # 2 s windows (samples every 0.5 s)
                tot = sum(vb) - sum(va)
                if tot > 0:
                    xs.append((ta + tb) / 2)
                    ys.append(100 * (vb[i] - va[i]) / tot)
            ax.plot(xs, ys, color=colors[t], label=t, linewidth=1)
            for h, (a, b) in r["windows"].items():
                ax.hlines(100 * float(EXPECTED[h][t]), a, b, colors=colors[t], linestyles="dashed", linewidth=0.8)
        ax.axvline(r["t_wake"], color="grey", linewidth=0.8)
        ax.set_title(f"{mode}, rep {r['rep']}: 2 s shares (dashed: expected)")
        ax.set_xlabel("s since the start")
        ax.set_ylabel("%")
        if k == 0:
            ax.legend(fontsize=8, ncol=5)
    for k in range(len(modes), 2 * (nrow - 1)):
        axes[1 + k // 2][k % 2].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results, config, env, skipped, failures, outdir, elapsed):
    analysis = analyse(results)
    text = table(analysis, config, env, skipped, failures)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "e1.txt"), "w") as f:
        f.write(text)
    doc = {"experiment": "E1", "config": config, "env": env, "skipped": skipped, "failures": failures,
           "expected": {h: {t: float(v) for t, v in EXPECTED[h].items()} for h in HALVES},
           "paper": PAPER, "analysis": analysis, "runs": results, "elapsed_s": elapsed}
    with open(os.path.join(outdir, "e1.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    try:
        plot(results, analysis, os.path.join(outdir, "e1.png"))
    except ImportError as e:
        text += f"no plot: {e} (pip install -r bench/requirements.txt)\n"
    return text
