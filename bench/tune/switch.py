"""The pure parts of the memory-switch scenario (spec X2 with the switch at time T, and §6 item 3's
PSI targets), kept apart from run.py so that they run without root, a cgroup or a service:
`python bench/tune/switch.py`, `run.py --self-test`, or pytest.

Counters are cumulative series [(t, value)] on the driver's clock; values between two points are
interpolated, as run.py's `rates` does for the other scenarios.
"""
import math

OVERCOMMIT = 1.5             # X2: the count at T overcommits memory 1.5x
DROP_MIN = 10.0              # X2: throughput drops >= 10x ...
RECOVER_MIN = 0.50           # ... then recovers to >= 50% of the pre-switch level
COUNT_BAND = (0.50, 0.80)    # ... with 50-80% of the pre-switch count
REFAULT_STEADY_MAX = 0.01    # X2: steady refaults < 1% of the peak
PSI_REFAULTS_MAX = 0.20      # §6.3: refaults during re-exploration <= 20% of a PSI-off run
PSI_STEADY_TOL = 0.03        # §6.3: steady throughput within 3%


def slice_mib(count, room_mib, ratio=OVERCOMMIT):
    """M, the MiB each connection maps after the switch, so that `count` connections need at least
    `ratio` times the `room_mib` the limit leaves them: ceil(ratio * room / count), at least 1."""
    if count < 1 or room_mib <= 0:
        raise ValueError(f"slice_mib: count {count} and room {room_mib} MiB must be positive")
    return max(1, math.ceil(ratio * room_mib / count))


def overcommit(count, mib, room_mib):
    """How far `count` slices of `mib` MiB overcommit `room_mib`: 1.0 = exactly full."""
    return count * mib / room_mib


def value_at(points, t):
    """The cumulative series interpolated at t; None outside it."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (a, va), (b, vb) in zip(points, points[1:]):
        if a <= t <= b:
            return va + (vb - va) * ((t - a) / (b - a) if b > a else 0.0)
    return points[-1][1]


def increment(points, a, b):
    """How much the series grew from a to b (e.g. refaults from the switch to the first Steady
    after it); None when either end lies outside it."""
    x, y = value_at(points, a), value_at(points, b)
    return None if x is None or y is None else y - x


def rate_over(points, intervals):
    """The series' growth per second over a union of intervals; None when one lies outside it
    or they are empty."""
    total, span = 0.0, 0.0
    for a, b in intervals:
        d = increment(points, a, b)
        if d is None:
            return None
        total += d
        span += b - a
    return total / span if span > 0 else None


def binned_rates(points, lo, hi, width):
    """[(bin start, rate)] over consecutive bins of `width` s from lo, the last one ending by hi:
    the throughput's trough and the refaults' peak are read from these."""
    out, a = [], lo
    while a + width <= hi + 1e-9:
        r = rate_over(points, [(a, a + width)])
        if r is not None:
            out.append((a, r))
        a += width
    return out


def target_at(targets, t):
    """The target in force at t, from a history [(at, n)]: the initial one, then each change."""
    n = None
    for at, m in targets:
        if at > t:
            break
        n = m
    return n


def ratio(a, b):
    return None if a is None or not b else a / b


def row_verdicts(an):
    """X2's claims on one run's analysis: [(claim, value, ok)], ok None when unmeasured."""
    drop = ratio(an.get("thr_before"), an.get("thr_trough"))
    rec = ratio(an.get("thr_after"), an.get("thr_before"))
    cnt = ratio(an.get("count_after"), an.get("count_before"))
    rf = an.get("refaults_steady_per_s")
    peak = an.get("refaults_peak_per_s")
    return [
        ("drop", drop, None if drop is None else drop >= DROP_MIN),
        ("recovery", rec, None if rec is None else rec >= RECOVER_MIN),
        ("count", cnt, None if cnt is None else COUNT_BAND[0] <= cnt <= COUNT_BAND[1]),
        ("refaults steady/peak", ratio(rf, peak),
         None if rf is None or not peak else rf < REFAULT_STEADY_MAX * peak),
    ]


def psi_verdicts(off, on):
    """§6 item 3 from PSI-off and PSI-on runs (lists of analyses, one per repetition): the
    refaults from the switch to the first Steady after it, summed over the repetitions, on as a
    share of off; the steady throughput after the recovery, mean on over mean off.
    [(claim, value, ok)], ok None when unmeasured (a run that never recovered has no sum)."""
    def total(runs, key):
        vals = [r.get(key) for r in runs]
        return None if not vals or any(v is None for v in vals) else sum(vals)

    def mean(runs, key):
        t = total(runs, key)
        return None if t is None else t / len(runs)

    share = ratio(total(on, "refaults_to_steady"), total(off, "refaults_to_steady"))
    thr = ratio(mean(on, "thr_after"), mean(off, "thr_after"))
    return [
        ("refaults on/off", share, None if share is None else share <= PSI_REFAULTS_MAX),
        ("steady throughput on/off", thr, None if thr is None else abs(thr - 1.0) <= PSI_STEADY_TOL),
    ]


def self_test():
    # Sizing: 48 MiB of room, 5 connections: ceil(14.4) = 15 MiB, 75 MiB wanted, 1.5625x.
    assert slice_mib(5, 48) == 15 and abs(overcommit(5, 15, 48) - 1.5625) < 1e-12
    assert slice_mib(48, 256) == 8 and overcommit(48, 8, 256) == 1.5
    assert slice_mib(1000, 256) == 1                        # never below one MiB
    for c in range(1, 80):
        assert overcommit(c, slice_mib(c, 256), 256) >= OVERCOMMIT
    for bad in ((0, 256), (5, 0)):
        try:
            slice_mib(*bad)
        except ValueError:
            continue
        raise AssertionError(f"slice_mib{bad} accepted")

    # A counter at 100/s until 10 s, then 1000/s: interpolated between the points.
    pts = [(0.0, 0.0), (5.0, 500.0), (10.0, 1000.0), (12.0, 3000.0), (20.0, 11000.0)]
    assert value_at(pts, 2.5) == 250.0 and value_at(pts, 21.0) is None and value_at([], 1) is None
    assert increment(pts, 9.0, 11.0) == 1000.0 - 900.0 + 1000.0
    assert increment(pts, -1.0, 5.0) is None
    assert rate_over(pts, [(0.0, 10.0)]) == 100.0
    assert rate_over(pts, [(0.0, 5.0), (12.0, 20.0)]) == (500.0 + 8000.0) / 13.0
    assert rate_over(pts, [(15.0, 25.0)]) is None and rate_over(pts, []) is None
    bins = binned_rates(pts, 0.0, 20.0, 5.0)
    assert [a for a, _ in bins] == [0.0, 5.0, 10.0, 15.0]
    assert bins[0][1] == 100.0 and bins[3][1] == 1000.0
    assert max(r for _, r in bins) == 1000.0 and binned_rates(pts, 0.0, 4.0, 5.0) == []

    hist = [(0.0, 2), (3.0, 4), (8.0, 3)]
    assert (target_at(hist, 0.0), target_at(hist, 5.0), target_at(hist, 9.0)) == (2, 4, 3)

    an = dict(thr_before=900.0, thr_trough=60.0, thr_after=600.0, count_before=48, count_after=32,
              refaults_steady_per_s=5.0, refaults_peak_per_s=40000.0)
    assert [ok for _, _, ok in row_verdicts(an)] == [True, True, True, True]
    an.update(thr_trough=100.0, count_after=45, refaults_steady_per_s=None)
    assert [ok for _, _, ok in row_verdicts(an)] == [False, True, False, None]

    off = [dict(refaults_to_steady=1000.0, thr_after=600.0), dict(refaults_to_steady=3000.0, thr_after=620.0)]
    on = [dict(refaults_to_steady=300.0, thr_after=605.0), dict(refaults_to_steady=500.0, thr_after=610.0)]
    (_, share, ok1), (_, thr, ok2) = psi_verdicts(off, on)
    assert share == 0.2 and ok1 and abs(thr - 607.5 / 610.0) < 1e-12 and ok2
    on[1]["refaults_to_steady"] = None                    # a run that never recovered
    assert psi_verdicts(off, on)[0][1:] == (None, None)
    print("switch.py self-test: passed")


def test_switch_helpers():
    self_test()


if __name__ == "__main__":
    self_test()
