#!/usr/bin/env python3
"""bench/tickets E4: a CPU-for-disk exchange (tickets spec section 5, E4; issue 7: "exchanges: CPU
for disk between a CPU-bound and an I/O-bound task with background load (both gain, the others keep
their minimum of 1/7)").

Seven tasks pinned to one CPU, each funded 1000 CPU and 1000 disk tickets from the base: D and S,
CPU spinners (bench/share/spin.c, for the report's Dhrystones), and I, H1..H4, disk readers with one
4 KiB O_DIRECT read outstanding each (E3's reader.py), on E3's disk (bench/idle's emulated disk with
bfq, low_latency=0). D gives I n disk tickets for n CPU tickets, for each n of a grid, and n = 0 is
the run without the exchange. Modes, per n:
  tact         tact tickets run SETUP --backend cgroup, with [[exchange]] a = "D", a_gives = { disk = n },
               b = "I", b_gives = { cpu = n }
  flat-cgroup  one v1 cpu and blkio cgroup per task with the same rights written by hand: cpu.shares =
               R (1000 + n, 1000, 1000 - n, 1000 ...), blkio.bfq.weight = R scaled so the largest is 1000
Measured from /proc over [t0 + settle, t0 + S]: CPU time (utime + stime of /proc/PID/stat) and disk
bytes (read_bytes of /proc/PID/io) of every task. Reported per n: D's CPU and I's disk progress
against the same mode's n = 0 run (the gains), S's share of the seven tasks' CPU time, the smallest
share of the five readers' bytes among H1..H4 (both against 1/7), and where I's gain peaks. See
bench/tickets/README.md.
"""
import os
import statistics
import subprocess
import sys
import tomllib

from diskrig import REPO, Run, arg_parser, base_config, check_host, chosen_modes, finish, log, prepare, run_all, \
    save
from workload import parse_stat

SPINNERS = ["D", "S"]
READERS = ["I", "H1", "H2", "H3", "H4"]
TASKS = SPINNERS + READERS
GIVER, TAKER = "D", "I"
OTHER_SPINNER = "S"
BACKGROUND = ["H1", "H2", "H3", "H4"]
FUNDING = 1000
FLOOR = 1 / 7
PEAK = (300, 600)
MODES = ["tact", "flat-cgroup"]
BFQ_MAX = 1000
PERIOD_S = 0.5
SPIN_C = os.path.join(REPO, "bench", "share", "spin.c")
PRESETS = {"quick": dict(grid=[200, 600], seconds=20.0, reps=1),
           "default": dict(grid=[100, 200, 400, 600, 800], seconds=60.0, reps=1)}
PAPER = ("Sullivan & Seltzer 1999, section 6.5: D gains at every n, more as n grows; I gains at every n but "
         "less past about 500; the other Dhrystone and the smallest other iohog stay at or above 1/7")


def rights(n):
    """Each task's R for CPU and for disk with D giving I n disk for n CPU (base value)."""
    cpu = {t: FUNDING for t in TASKS}
    disk = dict(cpu)
    cpu[GIVER] += n
    cpu[TAKER] -= n
    disk[GIVER] -= n
    disk[TAKER] += n
    return {"cpu": cpu, "disk": disk}


def flat_weights(n):
    """The flat-cgroup mode's knobs: cpu.shares = R; blkio.bfq.weight = R scaled to 1..1000."""
    r = rights(n)
    top = max(r["disk"].values())
    return {"cpu.shares": {t: max(2, r["cpu"][t]) for t in TASKS},
            "blkio.bfq.weight": {t: max(1, round(BFQ_MAX * r["disk"][t] / top)) for t in TASKS}}


def setup_toml(commands, n):
    out = []
    for t in TASKS:
        out.append(f'[[job]]\nname = "{t}"\ncommand = "{commands[t]}"\n'
                   f'funding = [{{ from = "base", cpu = {FUNDING}, disk = {FUNDING} }}]\n')
    if n > 0:
        out.append(f'[[exchange]]\na = "{GIVER}"\na_gives = {{ disk = {n} }}\nb = "{TAKER}"\n'
                   f'b_gives = {{ cpu = {n} }}\n')
    return "\n".join(out)


def read_proc(pid):
    """(CPU seconds, read_bytes) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            _, cpu = parse_stat(f.read())
        with open(f"/proc/{pid}/io") as f:
            io = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        return cpu, int(io["read_bytes"])
    except (OSError, ValueError, KeyError):
        return None


def figures(cpu, disk):
    """Shares from the CPU seconds and disk bytes each task used in the window: CPU of the seven
    tasks' CPU time, disk of the five readers' bytes."""
    tc = sum(cpu.values())
    td = sum(disk[t] for t in READERS)
    cpu_share = {t: cpu[t] / tc if tc else 0.0 for t in TASKS}
    disk_share = {t: disk[t] / td if td else 0.0 for t in READERS}
    return {"cpu_s": cpu, "disk_bytes": disk, "cpu_share": cpu_share, "disk_share": disk_share,
            "other_spinner_cpu": cpu_share[OTHER_SPINNER],
            "min_background_disk": min(disk_share[t] for t in BACKGROUND)}


def gains(run, base, key=("cpu_share", "disk_share")):
    """D's CPU progress and I's disk progress over the no-exchange run's, minus 1. By default from
    their shares (of the seven tasks' CPU time, of the readers' bytes), which other work on a
    shared machine (on the tasks' CPU, or slowing the emulated disk's server) leaves alone; with
    `key=("cpu_s", "disk_bytes")` from the amounts per second, as on a machine of its own."""
    def rate(r, k, t):
        return r[k][t] / (1.0 if k.endswith("share") else r["window_s"])
    out = {}
    for who, k in ((GIVER, key[0]), (TAKER, key[1])):
        b = rate(base, k, who)
        out[who] = rate(run, k, who) / b - 1 if b > 0 else None
    return out


def analyse(results, grid):
    """Per mode: per n, the median over reps of the gains (against that rep's n = 0 run) and the
    floors; I's peak; the verdicts of the spec's pass."""
    out = {}
    for mode in MODES:
        runs = [r for r in results if r["mode"] == mode and "error" not in r]
        bases = {r["rep"]: r for r in runs if r["n"] == 0}
        if not bases:
            continue
        rows = {}
        for n in [0] + grid:
            here = [r for r in runs if r["n"] == n and r["rep"] in bases]
            if not here:
                continue
            g = [gains(r, bases[r["rep"]]) for r in here]
            per_s = [gains(r, bases[r["rep"]], ("cpu_s", "disk_bytes")) for r in here]
            med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
            rows[n] = {"reps": len(here),
                       "gain_D": med([x[GIVER] for x in g if x[GIVER] is not None]),
                       "gain_I": med([x[TAKER] for x in g if x[TAKER] is not None]),
                       "gain_D_per_s": med([x[GIVER] for x in per_s if x[GIVER] is not None]),
                       "gain_I_per_s": med([x[TAKER] for x in per_s if x[TAKER] is not None]),
                       "cpu_share": {t: med([r["cpu_share"][t] for r in here]) for t in TASKS},
                       "disk_share": {t: med([r["disk_share"][t] for r in here]) for t in READERS},
                       "other_spinner_cpu": med([r["other_spinner_cpu"] for r in here]),
                       "min_background_disk": med([r["min_background_disk"] for r in here])}
        out[mode] = {"rows": rows, **verdict(rows, grid)}
    return out


def verdict(rows, grid):
    ns = [n for n in grid if n in rows]
    peak = max(ns, key=lambda n: rows[n]["gain_I"] if rows[n]["gain_I"] is not None else float("-inf"),
               default=None)
    positive = bool(ns) and all((rows[n]["gain_D"] or 0) > 0 and (rows[n]["gain_I"] or 0) > 0 for n in ns)
    floors = all(rows[n]["other_spinner_cpu"] >= FLOOR and rows[n]["min_background_disk"] >= FLOOR
                 for n in [0] + ns if n in rows)
    # A peak inside [300, 600] can only be seen on a grid with points on both sides of it.
    peak_ok = peak is not None and PEAK[0] <= peak <= PEAK[1] and peak not in (min(ns), max(ns))
    return {"peak_I": peak, "verdict": {"both_gain": positive, "floors": floors, "peak_in_range": peak_ok,
                                        "pass": positive and floors and peak_ok}}


# --------------------------------------------------------------------------
# one run

def one_run(env, mode, n, rep, seq):
    res = {"mode": mode, "n": n, "rep": rep, "seconds": env.seconds, "notes": []}
    pin = ["taskset", "-c", str(env.pin_cpu)]
    with Run(env, res, f"{seq:03d}-{mode}-n{n}") as run:
        cmd = {t: pin + ([env.spin, "-w", str(os.getpid()), env.slots.path, str(i)] if t in SPINNERS
                         else run.reader(i)) for i, t in enumerate(TASKS)}
        if mode == "tact":
            run.start_tact(setup_toml({t: "exec " + " ".join(cmd[t]) for t in TASKS}, n), prefix=pin)
        else:
            knobs = flat_weights(n)
            res["knobs"] = knobs
            run.new_cgroups()
            for t in TASKS:
                run.start(cmd[t], [run.cgroup(hier, t, {knob: knobs[knob][t]})
                                   for hier, knob in (("cpu", "cpu.shares"), ("blkio", "blkio.bfq.weight"))])
        pids = dict(zip(TASKS, run.wait_started(len(TASKS), "tasks")))

        def read():
            now = {x: read_proc(p) for x, p in pids.items()}
            gone = [x for x, v in now.items() if v is None]
            if gone:
                raise RuntimeError(f"{', '.join(gone)} ended during the run")
            return now
        samples = run.sample(PERIOD_S, read)
        a = next(s for s in samples if s[0] >= env.settle)
        b = samples[-1]
        res["window"] = (a[0], b[0])
        res["window_s"] = b[0] - a[0]
        res.update(figures({x: b[1][x][0] - a[1][x][0] for x in TASKS},
                           {x: b[1][x][1] - a[1][x][1] for x in TASKS}))
        res["series"] = [[round(s[0], 2), [[round(s[1][x][0], 3), s[1][x][1]] for x in TASKS]]
                         for s in samples[::2]]
    return res


# --------------------------------------------------------------------------
# output

def pct(x, signed=False):
    if x is None:
        return "     -"
    return f"{100 * x:+6.1f}%" if signed else f"{100 * x:5.1f}%"


def table(analysis, config, env, failures):
    L = [f"E4 CPU-for-disk exchange: D, S spinners and I, H1-H4 readers on CPU {config['pin_cpu']}, each "
         f"{FUNDING} cpu + {FUNDING} disk from the base; D gives I n disk for n cpu; {env['disk']}; "
         f"{config['reps']} rep(s) x {config['seconds']:g} s, window [t0+{config['settle']:g} s, t0+S]"]
    L.append(f"pass: D and I gain at every n, I's gain peaks in n = {PEAK[0]}-{PEAK[1]}, S's CPU share and the "
             f"smallest H disk share >= 1/7 ({100 * FLOOR:.1f}%)")
    L.append(f"{'mode':12} {'n':>4} {'D gain':>7} {'I gain':>7} {'D cpu':>6} {'S cpu':>6} {'I cpu':>6} "
             f"{'I disk':>6} {'min H':>6}  {'per s: D':>8} {'I':>7}")
    for mode, a in analysis.items():
        for n, row in a["rows"].items():
            L.append(f"{mode:12} {n:4d} {pct(row['gain_D'], True)} {pct(row['gain_I'], True)} "
                     f"{pct(row['cpu_share'][GIVER])} {pct(row['other_spinner_cpu'])} "
                     f"{pct(row['cpu_share'][TAKER])} {pct(row['disk_share'][TAKER])} "
                     f"{pct(row['min_background_disk'])}  {pct(row['gain_D_per_s'], True):>8} "
                     f"{pct(row['gain_I_per_s'], True)}")
        v = a["verdict"]
        word = "PASS" if v["pass"] else "MISS"
        if mode != "tact":
            word = "(yes)" if v["pass"] else "(no)"
        L.append(f"{mode:12} {word}: both gain {v['both_gain']}, floors {v['floors']}, I peaks at n = "
                 f"{a['peak_I']} (in {PEAK[0]}-{PEAK[1]} inside the grid: {v['peak_in_range']})")
    for m, why in failures.items():
        L.append(f"{m}: failed: {why}")
    L.append("gains: D's share of the seven tasks' CPU time and I's share of the five readers' bytes over the same "
             "mode's n = 0 run (per s: from CPU seconds and bytes per second instead, which outside load moves)")
    L.append("flat-cgroup: the rights written by hand as cpu.shares = R and blkio.bfq.weight = R x 1000 / max R "
             "(tact compiles the same rights, as cpu.shares scaled to 262144)")
    L.append(f"report: {PAPER}")
    return "\n".join(L) + "\n"


def plot(ax, bx, analysis):
    """Left: D's and I's gains against n; right: the others' shares against their 1/7."""
    for mode, a in analysis.items():
        ns = [n for n in a["rows"] if n > 0]
        ax.plot(ns, [100 * (a["rows"][n]["gain_D"] or 0) for n in ns], "o-", label=f"D ({mode})")
        ax.plot(ns, [100 * (a["rows"][n]["gain_I"] or 0) for n in ns], "s--", label=f"I ({mode})")
        ns = list(a["rows"])
        bx.plot(ns, [100 * a["rows"][n]["other_spinner_cpu"] for n in ns], "o-", label=f"S cpu ({mode})")
        bx.plot(ns, [100 * a["rows"][n]["min_background_disk"] for n in ns], "s--", label=f"min H disk ({mode})")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("n (disk tickets D gives I, for n CPU tickets)")
    ax.set_ylabel("gain over no exchange, %")
    ax.set_title("E4: the participants' gains")
    ax.legend(fontsize=8)
    bx.axhline(100 * FLOOR, color="black", linewidth=1.5)
    bx.set_xlabel("n")
    bx.set_ylabel("share, %")
    bx.set_title("E4: the others (black: 1/7)")
    bx.legend(fontsize=8)


def write(results, config, env, failures, outdir):
    analysis = analyse(results, config["grid"])
    return save(outdir, "e4", table(analysis, config, env, failures),
                {"experiment": "E4", "config": config, "env": env, "failures": failures, "paper": PAPER,
                 "analysis": analysis, "runs": results},
                (12, 4.2), lambda ax, bx: plot(ax, bx, analysis))


# --------------------------------------------------------------------------

def self_test():
    doc = tomllib.loads(setup_toml({t: f"exec /x/{t}" for t in TASKS}, 300))
    assert [j["name"] for j in doc["job"]] == TASKS
    assert all(j["funding"] == [{"from": "base", "cpu": 1000, "disk": 1000}] for j in doc["job"])
    assert doc["exchange"] == [{"a": "D", "a_gives": {"disk": 300}, "b": "I", "b_gives": {"cpu": 300}}]
    assert "exchange" not in tomllib.loads(setup_toml({t: "x" for t in TASKS}, 0))
    r = rights(300)
    assert r["cpu"]["D"] == 1300 and r["cpu"]["I"] == 700 and r["disk"]["D"] == 700 and r["disk"]["I"] == 1300
    assert sum(r["cpu"].values()) == sum(r["disk"].values()) == 7000          # neutral
    w = flat_weights(600)
    assert w["cpu.shares"]["D"] == 1600 and w["cpu.shares"]["I"] == 400
    assert w["blkio.bfq.weight"]["I"] == 1000 and w["blkio.bfq.weight"]["H1"] == 625
    assert w["blkio.bfq.weight"]["D"] == 250
    # figures: S holds 30% of the CPU, the smallest H 15% of the bytes
    cpu = {"D": 6.0, "S": 3.0, "I": 0.4, "H1": 0.15, "H2": 0.15, "H3": 0.15, "H4": 0.15}
    disk = {"D": 0, "S": 0, "I": 400, "H1": 150, "H2": 150, "H3": 150, "H4": 150}
    f = figures(cpu, disk)
    assert abs(f["other_spinner_cpu"] - 0.3) < 1e-12 and abs(f["min_background_disk"] - 0.15) < 1e-12
    assert abs(sum(f["cpu_share"].values()) - 1) < 1e-12 and abs(sum(f["disk_share"].values()) - 1) < 1e-12

    def run(mode, n, d_cpu, i_bytes, h_bytes=200, s_cpu=4.0):
        c = dict(cpu, D=d_cpu, S=s_cpu)
        b = dict(disk, I=i_bytes, H1=h_bytes)
        return {"mode": mode, "n": n, "rep": 0, "window_s": 10.0, **figures(c, b)}
    base = run("tact", 0, 5.0, 200)
    g = gains(run("tact", 200, 6.0, 300), base, ("cpu_s", "disk_bytes"))
    assert abs(g["D"] - 0.2) < 1e-12 and abs(g["I"] - 0.5) < 1e-12, g
    g = gains(run("tact", 200, 6.0, 300), base)
    # D: 6 of 11 CPU seconds against 5 of 10; I: 300 of 950 bytes against 200 of 850
    assert abs(g["D"] - (6 / 11) / (5 / 10) + 1) < 1e-12 and abs(g["I"] - (300 / 950) / (200 / 850) + 1) < 1e-12, g
    grid = [100, 200, 400, 600, 800]
    i_curve = {100: 220, 200: 250, 400: 300, 600: 280, 800: 210}
    results = [base] + [run("tact", n, 5.0 + n / 400, i_curve[n]) for n in grid]
    a = analyse(results, grid)["tact"]
    assert a["peak_I"] == 400 and a["verdict"]["both_gain"] and a["verdict"]["peak_in_range"], a
    assert a["verdict"]["floors"] and a["verdict"]["pass"], a
    # I loses at 800, the peak at the grid's edge, and an H below 1/7: each fails its part
    results[-1] = run("tact", 800, 7.0, 150)
    results[1] = run("tact", 100, 5.2, 400, h_bytes=100)
    a = analyse(results, grid)["tact"]
    v = a["verdict"]
    assert a["peak_I"] == 100 and not v["both_gain"] and not v["peak_in_range"] and not v["floors"], a
    # the quick grid cannot place a peak strictly inside it
    q = analyse([base, run("tact", 200, 5.5, 300), run("tact", 600, 6.5, 250)], [200, 600])["tact"]
    assert q["peak_I"] == 200 and not q["verdict"]["peak_in_range"]
    print("e4 self-test: ok")
    return 0


def main():
    ap = arg_parser(__doc__, MODES, "n = 200, 600 and the baseline, 20 s each")
    ap.add_argument("--grid", help="comma list of n (default 100,200,400,600,800)")
    ap.add_argument("--pin-cpu", type=int, help="the CPU of the tasks (default the last)")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    preset = PRESETS["quick" if args.quick else "default"]
    grid = [int(x) for x in args.grid.split(",")] if args.grid else preset["grid"]
    if any(not 0 < n < FUNDING for n in grid):
        ap.error(f"every n must be in 1..{FUNDING - 1}: I gives n of its {FUNDING} CPU tickets")
    reps, seconds = args.reps or preset["reps"], args.seconds or preset["seconds"]
    modes = chosen_modes(ap, args, MODES)
    mounts = check_host("E4", args, modes)
    cpus = sorted(os.sched_getaffinity(0))
    pin_cpu = cpus[-1] if args.pin_cpu is None else args.pin_cpu
    # The harness and the emulated disk's server (started by prepare) stay off the tasks' CPU.
    others = set(cpus) - {pin_cpu}
    if others:
        os.sched_setaffinity(0, others)
    env, envinfo = prepare("e4", args, mounts, TASKS, seconds)
    env.pin_cpu = pin_cpu
    env.spin = os.path.join(env.tmp, "spin")
    subprocess.run(["cc", "-O2", "-Wall", "-o", env.spin, SPIN_C], check=True)
    config = {"grid": grid, **base_config(args, env, reps, modes, PERIOD_S), "pin_cpu": pin_cpu}
    plan = [(mode, n) for n in [0] + grid for mode in modes]
    log(f"E4: {len(plan)} runs per rep ({', '.join(modes)} x n = 0, {', '.join(map(str, grid))}), {reps} rep(s) "
        f"of {seconds:g} s; about {reps * len(plan) * (seconds + 4) / 60:.1f} min")
    results, failures = run_all(
        reps, lambda rep: plan, lambda item, rep, seq: one_run(env, *item, rep, seq),
        lambda item: f"{item[0]} n={item[1]}",
        lambda r: "cpu " + " ".join(f"{t} {100 * r['cpu_share'][t]:.1f}" for t in TASKS)
                  + " | disk " + " ".join(f"{t} {100 * r['disk_share'][t]:.1f}" for t in READERS))
    return finish("e4", args.out, results, envinfo, lambda envinfo: write(results, config, envinfo, failures, args.out))


if __name__ == "__main__":
    sys.exit(main())
