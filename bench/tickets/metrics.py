"""E1's arithmetic on CPU-time series: per-half shares, relative errors, A's change between halves,
aggregation over repetitions and the verdicts. Pure (checked by `run.py --self-test`)."""
import statistics

from e1 import EXPECTED, HALVES, TASKS

ISSUE_BAND = 0.05        # issue 7: every task within 5% (relative) of its expected share in each half
SPEC_BAND = {"cgroup": 0.10, "user-level": 0.15}   # spec E1, pinned: cgroups / the user-level engine
A_CHANGE_BAND = 0.05     # A1 and A2 each change by less than 5% between halves
A_TASKS = ["A1", "A2"]


def value_at(samples, t):
    """Every task's cumulative CPU at time t, interpolated linearly between the two samples around
    it. samples: [(t, {task: cpu_s})] in time order; t must lie within them."""
    if not samples or t < samples[0][0] or t > samples[-1][0]:
        raise ValueError(f"t={t:.3f} outside the samples")
    for (ta, va), (tb, vb) in zip(samples, samples[1:]):
        if ta <= t <= tb:
            f = 0.0 if tb == ta else (t - ta) / (tb - ta)
            return {k: va.get(k, 0.0) + f * (vb.get(k, 0.0) - va.get(k, 0.0)) for k in TASKS}
    return dict(samples[-1][1])


def window_shares(samples, t_a, t_b):
    """(shares, cpu) over [t_a, t_b]: each task's CPU in the window and its fraction of the group's."""
    a, b = value_at(samples, t_a), value_at(samples, t_b)
    cpu = {k: max(0.0, b[k] - a[k]) for k in TASKS}
    total = sum(cpu.values())
    if total <= 0:
        raise ValueError(f"no CPU used in [{t_a:.1f}, {t_b:.1f}]")
    return {k: cpu[k] / total for k in TASKS}, cpu


def halves(t0, t_wake, t_end, settle, exclude):
    """The two measurement windows: [t0 + settle, t_wake - exclude/2] and [t_wake + exclude/2,
    t_end] (the spec excludes `exclude` seconds around the switch)."""
    w = {"first": (t0 + settle, t_wake - exclude / 2), "second": (t_wake + exclude / 2, t_end)}
    for h, (a, b) in w.items():
        if b - a < 1.0:
            raise ValueError(f"{h} half too short: [{a - t0:.1f}, {b - t0:.1f}] s")
    return w


def rel_err(measured, expected):
    """(measured - expected) / expected; None where nothing is expected (B3 asleep)."""
    return None if expected == 0 else (measured - float(expected)) / float(expected)


def figures(shares):
    """One rep's figures from {half: {task: share}}: per-task relative errors, mean and max |error|
    over the tasks with an expected share, and the change of A1 and A2 between halves."""
    out = {"err": {}, "mean_abs_err": {}, "max_abs_err": {}}
    for h in HALVES:
        errs = {t: rel_err(shares[h][t], EXPECTED[h][t]) for t in TASKS}
        out["err"][h] = errs
        vals = [abs(e) for e in errs.values() if e is not None]
        out["mean_abs_err"][h] = statistics.fmean(vals)
        out["max_abs_err"][h] = max(vals)
    out["a_change"] = {t: (shares["second"][t] - shares["first"][t]) / shares["first"][t] for t in A_TASKS}
    return out


def spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "mean": statistics.fmean(vals), "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0, "n": len(vals)}


def verdicts(fig, band):
    """Against the issue (every task within 5%, A changes < 5%), the spec's band for the mode's kind
    (every task within `band`) and A's isolation alone, for one set of figures."""
    worst = max(fig["max_abs_err"].values())
    a_worst = max(abs(v) for v in fig["a_change"].values())
    return {"issue": worst <= ISSUE_BAND and a_worst < A_CHANGE_BAND, "spec": worst <= band,
            "a_unaffected": a_worst < A_CHANGE_BAND}


def aggregate(reps, band):
    """Over a mode's reps (each {"shares": {half: {task: share}}}): median [min-max] of every share,
    the figures of the median shares, each rep's figures, and the verdicts of the median and the
    number of reps that pass each."""
    out = {"reps": len(reps), "shares": {}, "per_rep": []}
    for h in HALVES:
        out["shares"][h] = {t: spread([r["shares"][h][t] for r in reps]) for t in TASKS}
    med = {h: {t: out["shares"][h][t]["median"] for t in TASKS} for h in HALVES}
    out["median_figures"] = figures(med)
    per = [figures(r["shares"]) for r in reps]
    out["per_rep"] = per
    out["spread"] = {
        "mean_abs_err": {h: spread([f["mean_abs_err"][h] for f in per]) for h in HALVES},
        "max_abs_err": {h: spread([f["max_abs_err"][h] for f in per]) for h in HALVES},
        "a_change": {t: spread([f["a_change"][t] for f in per]) for t in A_TASKS},
    }
    out["verdict"] = verdicts(out["median_figures"], band)
    passing = [verdicts(f, band) for f in per]
    out["reps_passing"] = {k: sum(1 for v in passing if v[k]) for k in ("issue", "spec", "a_unaffected")}
    return out
