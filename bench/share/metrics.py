"""Pure computations of bench/share (stdlib only, no I/O): share distributions, the baselines'
knobs, the spec's per-cycle metrics (proportional-share.md section 5), feasible shares, line fits
and the scalability threshold. `self_test()` checks them against hand-computed values."""
import math
import statistics

# --------------------------------------------------------------------------
# workloads (paper, Table 1)

DISTS = ("linear", "equal", "skewed")


def shares_of(dist, n):
    """linear 1,3,..,2n-1; equal n x n; skewed (n-1) x 1 and n^2-(n-1). Each totals n^2."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if dist == "linear":
        return [2 * i + 1 for i in range(n)]
    if dist == "equal":
        return [n] * n
    if dist == "skewed":
        return [1] * (n - 1) + [n * n - (n - 1)]
    raise ValueError(f"unknown distribution {dist!r}")


# --------------------------------------------------------------------------
# the baselines' knobs

def nice_levels(shares):
    """nice_i = min(19, round(log_1.25(share_max / share_i))) (spec section 5)."""
    smax = max(shares)
    return [min(19, int(round(math.log(smax / s, 1.25)))) for s in shares]


def cpulimit_limits(shares, cpus):
    """cpulimit -l per process: 100 * C * share_i / S percent of one CPU, as cpulimit wants an
    integer >= 1. Returns (limits, exact values) so clamping can be reported."""
    S = sum(shares)
    exact = [100.0 * cpus * s / S for s in shares]
    return [max(1, int(round(x))) for x in exact], exact


V1_MIN, V1_MAX = 2, 262144
V2_MIN, V2_MAX = 1, 10000


def cgroup_weights(shares, version=1):
    """v1 cpu.shares = max(2, share_i * k) with k = min(1024, 262144 // share_max) (1024 per share
    where it fits: finer weights); v2 cpu.weight = share_i * k clamped to 1..10000, k =
    max(1, 10000 // share_max) (spec section 5: v2 cpu.weight = share_i; scaling keeps the ratios).
    Returns (weights, k)."""
    smax = max(shares)
    if version == 1:
        k = max(1, min(1024, V1_MAX // smax))
        return [min(V1_MAX, max(V1_MIN, s * k)) for s in shares], k
    k = max(1, min(100, V2_MAX // smax))
    return [min(V2_MAX, max(V2_MIN, s * k)) for s in shares], k


def feasible_shares(shares, par, cpus):
    """Surplus-fair weight readjustment (spec section 4, conserving mode): cap any entity with
    share_i/S > par_i/C at exactly par_i/C of the group, split the rest among the others by
    share, repeat. Returns phi (fractions of the group, summing to 1)."""
    n = len(shares)
    capped = [False] * n
    phi = [0.0] * n
    while True:
        free = 1.0 - sum(par[i] / cpus for i in range(n) if capped[i])
        rest = sum(shares[i] for i in range(n) if not capped[i])
        changed = False
        for i in range(n):
            if capped[i]:
                phi[i] = par[i] / cpus
            else:
                phi[i] = free * shares[i] / rest if rest > 0 else 0.0
        for i in range(n):
            if not capped[i] and phi[i] > par[i] / cpus + 1e-12:
                capped[i] = True
                changed = True
        if not changed:
            return phi


# --------------------------------------------------------------------------
# per-cycle metrics (spec section 5)

def cycle_errors(fractions, consumed):
    """One cycle: consumed[i] ns of each entity, fractions[i] its target fraction of the group
    (share_i/S). Returns (abs_err list ns, rel_err list, rms)."""
    total = sum(consumed)
    abs_err, rel_err = [], []
    for f, c in zip(fractions, consumed):
        e = f * total
        abs_err.append(c - e)
        rel_err.append((c - e) / e if e > 0 else 0.0)
    rms = math.sqrt(sum(r * r for r in rel_err) / len(rel_err)) if rel_err else 0.0
    return abs_err, rel_err, rms


def summarize_cycles(fractions, cycles, drop, quantum_ns, shares=None):
    """cycles: list of per-cycle consumed vectors (ns). Drops the first `drop` cycles and returns
    the workload figure (mean RMS over the rest), the per-cycle RMS series (all cycles), the
    per-process RMS of RelErr over the kept cycles, and max |AbsErr| in quanta."""
    rms_all, rel_by_proc = [], [[] for _ in fractions]
    max_abs_q = 0.0
    for n, c in enumerate(cycles):
        abs_err, rel_err, rms = cycle_errors(fractions, c)
        rms_all.append(rms)
        if n >= drop:
            for i, r in enumerate(rel_err):
                rel_by_proc[i].append(r)
            if quantum_ns:
                max_abs_q = max(max_abs_q, max(abs(a) for a in abs_err) / quantum_ns)
    kept = rms_all[drop:]
    out = {
        "cycles_total": len(cycles), "cycles_dropped": min(drop, len(cycles)),
        "cycles_used": len(kept),
        "rms_series": rms_all,
        "mean_rms": statistics.fmean(kept) if kept else None,
        "median_cycle_rms": statistics.median(kept) if kept else None,
        "max_cycle_rms": max(kept) if kept else None,
        "per_process_rms": [math.sqrt(statistics.fmean([r * r for r in rs])) if rs else None
                            for rs in rel_by_proc],
        "max_abs_err_quanta": max_abs_q if kept else None,
    }
    if shares is not None and kept:
        ones = [out["per_process_rms"][i] for i, s in enumerate(shares) if s == 1]
        if ones and len(ones) < len(shares):
            big = max(range(len(shares)), key=lambda i: shares[i])
            out["one_share_rms_mean"] = statistics.fmean(ones)
            out["one_share_rms_sd"] = statistics.pstdev(ones) if len(ones) > 1 else 0.0
            out["big_share_rms"] = out["per_process_rms"][big]
    return out


def interpolate(prev, cur, frac):
    """Member values at a fraction `frac` of the way from sample `prev` to sample `cur`."""
    return [p + (c - p) * frac for p, c in zip(prev, cur)]


def warmup_cycles(cycle_cpu_s, paper=False, cap=4, window_s=1.0):
    """Cycles dropped as warm-up. The paper drops 4. Outside --full, runs with long cycles drop
    only the cycles that cover the first `window_s` of group CPU (at least 1): 4 at 0.25 s cycles,
    2 at 0.5 s, 1 at >= 1 s, so a 4 s cycle is not spent 4 times on warm-up."""
    if paper:
        return cap
    return max(1, min(cap, int(math.ceil(window_s / cycle_cpu_s - 1e-9))))


# --------------------------------------------------------------------------
# fits

def fit_line(xs, ys):
    """Least squares y = a*x + b. Returns (a, b, r2) or None with fewer than 2 distinct xs."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    a = sxy / sxx
    b = my - a * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (a * x + b)) ** 2 for x, y in zip(xs, ys))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return a, b, r2


def solve_nstar(a, b):
    """N* with U(N*) = a*N* + b (percent) equal to 100/(N*+1): the positive root of
    a N^2 + (a+b) N + (b-100) = 0 (paper section 5.2)."""
    if a <= 0:
        if b >= 100:
            return 0.0
        return None if b <= 0 else 100.0 / b - 1  # flat overhead: b = 100/(N+1)
    disc = (a + b) ** 2 - 4 * a * (b - 100)
    return (-(a + b) + math.sqrt(disc)) / (2 * a)


def slope(ts, ys):
    f = fit_line(ts, ys)
    return f[0] if f else None


# --------------------------------------------------------------------------

def self_test():
    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    ok(shares_of("linear", 5) == [1, 3, 5, 7, 9], "linear-5")
    ok(shares_of("equal", 10) == [10] * 10, "equal-10")
    ok(shares_of("skewed", 20) == [1] * 19 + [381], "skewed-20")
    for d in DISTS:
        for n in (5, 10, 20):
            ok(sum(shares_of(d, n)) == n * n, f"{d}-{n} totals n^2")
    ok(nice_levels([1, 3, 5, 7, 9]) == [10, 5, 3, 1, 0], nice_levels([1, 3, 5, 7, 9]))
    ok(nice_levels([1, 1, 1, 1, 21]) == [14, 14, 14, 14, 0], nice_levels([1, 1, 1, 1, 21]))
    ok(nice_levels([1] * 19 + [381])[0] == 19, "skewed-20 clamps at 19")
    lim, exact = cpulimit_limits([1, 3, 5, 7, 9], 1)
    ok(lim == [4, 12, 20, 28, 36] and abs(sum(exact) - 100) < 1e-9, lim)
    lim, exact = cpulimit_limits([1] * 19 + [381], 1)
    ok(lim[0] == 1 and abs(exact[0] - 0.25) < 1e-12 and lim[-1] == 95, lim)
    w, k = cgroup_weights([1, 3, 5, 7, 9])
    ok(k == 1024 and w == [1024, 3072, 5120, 7168, 9216], w)
    w, k = cgroup_weights([1] * 19 + [381])
    ok(k == 688 and w[0] == 688 and w[-1] == 381 * 688 <= V1_MAX, (w, k))
    w, k = cgroup_weights([1] * 19 + [381], 2)
    ok(k == 26 and w[0] == 26 and w[-1] == 9906, (w, k))
    phi = feasible_shares([1, 1, 1, 1, 21], [1] * 5, 2)
    ok(all(abs(a - b) < 1e-12 for a, b in zip(phi, [1 / 8] * 4 + [1 / 2])), phi)  # {1,1,1,1,4}
    phi = feasible_shares([1, 3, 5, 7, 9], [1] * 5, 2)
    ok(abs(sum(phi) - 1) < 1e-12 and abs(phi[0] - 1 / 25) < 1e-12, phi)  # feasible: unchanged
    # metrics: a perfect cycle, and one where the 1-share process gets twice its entitlement
    fr = [s / 25 for s in (1, 3, 5, 7, 9)]
    _, rel, rms = cycle_errors(fr, [10, 30, 50, 70, 90])
    ok(rms < 1e-12 and max(abs(r) for r in rel) < 1e-12, rms)
    _, rel, rms = cycle_errors([0.5, 0.5], [3, 1])
    ok(abs(rel[0] - 0.5) < 1e-12 and abs(rel[1] + 0.5) < 1e-12 and abs(rms - 0.5) < 1e-12, rel)
    s = summarize_cycles([0.5, 0.5], [[9, 1]] * 4 + [[1, 1], [3, 1]], 4, 2, shares=[1, 1])
    ok(s["cycles_used"] == 2 and abs(s["mean_rms"] - 0.25) < 1e-12, s)
    ok(abs(s["per_process_rms"][0] - math.sqrt(0.125)) < 1e-12, s["per_process_rms"])
    ok(abs(s["max_abs_err_quanta"] - 0.5) < 1e-12, s["max_abs_err_quanta"])
    s = summarize_cycles([0.25, 0.25, 0.5], [[1, 1, 2], [2, 1, 2]], 1, 1, shares=[1, 1, 2])
    ok(abs(s["one_share_rms_mean"] - 0.4) < 1e-9 and abs(s["one_share_rms_sd"] - 0.2) < 1e-9
       and abs(s["big_share_rms"] - 0.2) < 1e-9, s)
    ok(interpolate([0, 10], [10, 30], 0.5) == [5, 20], "interpolate")
    ok(warmup_cycles(0.25) == 4 and warmup_cycles(0.5) == 2 and warmup_cycles(4.0) == 1, "warmup")
    ok(warmup_cycles(16.0, paper=True) == 4, "paper warmup")
    a, b, r2 = fit_line([5, 10, 20], [1.0, 2.0, 4.0])
    ok(abs(a - 0.2) < 1e-12 and abs(b) < 1e-12 and abs(r2 - 1) < 1e-12, (a, b))
    # the paper's fits and predicted thresholds 39 / 54 / 75
    for (a, b), want in (((.0639, .0604), 39), ((.0338, .0340), 54), ((.0172, .0160), 75)):
        ok(abs(solve_nstar(a, b) - want) < 1.0, (a, b, solve_nstar(a, b)))
    print(f"metrics self-test: {checks} checks passed")
    return checks
