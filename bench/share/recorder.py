"""The independent recorder of bench/share: reads every member's CPU time itself (never from
tact's log) and ends a cycle each time the group's total CPU passes another S*Q.

- CPU time: the process CPU clock (clock_gettime on clock_getcpuclockid(pid): ns, all threads,
  exact for a running task, 0.7 us per read), or with --clock schedstat the first field of
  /proc/PID/schedstat read with pread on an fd kept open (2.7 us). On this kernel both agree to
  within 10 us (checked by `run.py --self-test`).
- Cycle grid: multiples of S*Q of the group's CPU counted from the members' start (their clocks
  start at 0), which is also where tact's t_c starts, so the recorder's cycles and tact's
  coincide to within a quantum. A boundary that falls between two polls is placed by linear
  interpolation of every member's clock between the two polls (polls are 1 ms apart, or 20x the
  cost of one poll when that is longer), so a boundary is not late by a poll interval.
- The recorder runs in the harness's main thread, pinned to a CPU outside a pinned group; its
  own CPU time (thread clock) over the measured window is reported.
"""
import os
import time

from metrics import interpolate


class MemberGone(Exception):
    pass


def make_reader(members, clock="cpuclock"):
    if clock == "schedstat":
        fds = [m.schedstat_fd for m in members]

        def read():
            try:
                return [int(os.pread(fd, 64, 0).split(None, 1)[0]) for fd in fds]
            except (OSError, ValueError, IndexError) as e:
                raise MemberGone(str(e))
        return read
    ids = [m.clock for m in members]
    cg = time.clock_gettime_ns

    def read():
        try:
            return [cg(i) for i in ids]
        except OSError as e:
            raise MemberGone(str(e))
    return read


def make_ctl_reader(pids):
    """Summed CPU ns of the controller processes; a process that has gone keeps its last value."""
    last = {p: 0 for p in pids}
    cg = time.clock_gettime_ns

    def read():
        for p in pids:
            try:
                last[p] = cg(((~p) << 3) | 2)
            except OSError:
                pass
        return sum(last.values())
    return read


def record_cycles(members, shares, quantum_ns, *, drop, target, cap_s, min_cycles, hard_s,
                  poll_s, clock, ctl_pids, stop_check, iters_fn, phase_fn=None, series_every=None):
    """Records cycles until `drop + target` cycles, or `cap_s` s with at least `drop + min_cycles`
    cycles, or `hard_s` s, or stop_check() returns a reason. Returns the raw record."""
    read = make_reader(members, clock)
    ctl_read = make_ctl_reader(ctl_pids)
    n = len(members)
    L = sum(shares) * quantum_ns
    thr0 = time.thread_time_ns()
    t0 = time.monotonic()
    vals = read()
    start_total = sum(vals)
    next_b = (start_total // L + 1) * L
    merged_first = int(start_total // L)   # boundaries passed before the first poll
    snaps = []                             # per boundary: t, interpolated vals, ctl ns, raw iters
    ctl0 = ctl_read()
    last_t, last_vals = t0, vals
    phase_counts, cycle_phases = [0, 0, 0], []
    series = []
    next_series = t0
    polls = 0
    multi = 0
    poll = poll_s
    cost_acc, cost_n = 0.0, 0
    stop_reason = None
    error = None
    next_check = t0
    while True:
        now = time.monotonic()
        wake = last_t + poll
        if wake > now:
            time.sleep(wake - now)
        ta = time.perf_counter()
        t = time.monotonic()
        try:
            vals = read()
        except MemberGone as e:
            error = f"a member exited during the run ({e})"
            break
        polls += 1
        total = sum(vals)
        crossed = 0
        if phase_fn is not None:
            phase_counts[phase_fn()] += 1
        while total >= next_b:
            ptotal = sum(last_vals)
            frac = (next_b - ptotal) / (total - ptotal) if total > ptotal else 1.0
            bv = interpolate(last_vals, vals, frac)
            snaps.append((last_t + (t - last_t) * frac, bv, ctl_read(), iters_fn(), list(vals)))
            cycle_phases.append(tuple(phase_counts))
            phase_counts = [0, 0, 0]
            next_b += L
            crossed += 1
        if crossed > 1:
            multi += 1
        if series_every and t >= next_series:
            series.append((t - t0, list(vals)))
            next_series = t + series_every
        last_t, last_vals = t, vals
        cost_acc += time.perf_counter() - ta
        cost_n += 1
        if cost_n == 50:  # the recorder must stay cheap: poll at >= 20x the cost of a poll
            poll = max(poll_s, 20 * cost_acc / cost_n)
            cost_acc, cost_n = 0.0, 0
        el = t - t0
        done = len(snaps)
        if done >= drop + target:
            stop_reason = "cycles"
            break
        if el >= cap_s and done >= drop + min_cycles:
            stop_reason = "wall cap"
            break
        if el >= hard_s:
            stop_reason = "hard cap"
            break
        if t >= next_check:
            next_check = t + 0.05
            why = stop_check()
            if why:
                error = why
                break
    t_end = time.monotonic()
    return {
        "t0": t0, "t_end": t_end, "start_total_ns": start_total, "merged_first": merged_first,
        "snaps": snaps, "ctl0": ctl0, "ctl_end": ctl_read(), "end_vals": last_vals, "end_t": last_t,
        "end_iters": iters_fn(), "polls": polls, "multi_boundary_polls": multi, "poll_s": poll,
        "recorder_cpu_ns": time.thread_time_ns() - thr0, "stop_reason": stop_reason, "error": error,
        "cycle_phases": cycle_phases, "series": series, "members": n,
    }


def record_series(read, duration_s, every_s, stop_check, on_sample=None):
    """Samples read() every `every_s` for `duration_s`: [(t_monotonic, vals)]."""
    out = []
    t_end = time.monotonic() + duration_s
    nxt = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= t_end:
            break
        if nxt > now:
            time.sleep(min(nxt, t_end) - now)
            continue
        t = time.monotonic()
        out.append((t, read()))
        nxt = t + every_s
        why = stop_check()
        if why:
            return out, why
    return out, None
