#!/usr/bin/env python3
"""bench/tune: tact's concurrency controller (TCC) against static pools and the limiters people
use today, on a service whose throughput bends at a knee. Spec: /work/shared/specs/concurrency.md,
section 5 (X1-X6 and "Modern baselines"); issue 6.

The service (tune-service, pinned to one CPU) spins a Pareto service time per request, does its
mode's extra work, then waits out a Pareto delay; the driver (tune-drive, pinned to the other CPU)
runs a tact_lib::tune::Pool under one controller, with endless input. Scenarios (--scenario, in
this order by default), each against its own service:

  cpu         X1: the service's core is the bottleneck
  memory      X2: the service in a memory cgroup (tact-test-tune-<pid>) that too many workers
              overcommit (anonymous memory with swap, page-cache refaults of a mapped file without)
  disk        X3: one random 4 KiB O_DIRECT read per request of a >= 1 GiB file in /var/tmp
  net         X4: the service in a network namespace behind a veth shaped to 50 mbit (tbf),
              64 KiB replies
  competitor  X5: once TCC is steady, a competing program on the service's CPU starts, then stops
  pools       X6: two pools (two drivers) share one service, the second starting later
  x7          X7: the paper's Vegas comparison (front 1 ms, service 2 ms, 25 ms delay; the
              service's core is the bottleneck). Not in the default list (about 20 min more):
              --scenario x7.
  memory-switch
              X2 as the spec runs it, with spec section 6 item 3's PSI targets: the service
              starts in cpu mode, TCC (without and with `tcc:psi=1`) runs to Steady, then the
              service switches to mapped file slices sized so that the count at the switch
              overcommits its memory cgroup 1.5x. Not in the default list (about 10 min):
              --scenario memory-switch.
  dask        Spec section 6's Dask mode: X1 with the service's times x4 and dask_drive.py
              as the driver (a LocalCluster; tact.dask.AdaptiveSubmitter bounds the tasks in
              flight, static sweep included). Only tcc and tcc+util run; with cpu in the same run
              (--scenario cpu,dask) its G1 and G2 are checked against in-process X1's, +-3
              points. Not in the default list (about 22 min; 12 with --policies tcc).

The first four run a static sweep (the throughput curve and its references X*_max, X*_95), TCC
with its defaults, TCC in paper mode (`tcc:fast=false,slow_start=false`) and the five baselines.
The policy `tcc+util` ("tcc + util hint": `tcc:util=0.9`, tune-drive --bottleneck reporting the
scenario's bottleneck as the table measures it: the service's CPU on cpu, competitor and pools,
the capped device's reads over the cap (or its io_ticks without a cap) on disk, the shaped link's
bits over its rate on net) runs everywhere but memory, which has no utilization to report, and x7.
On pools, `tcc+turns` and `tcc+util+turns` run the pair with both drivers on one
`--coordinate` key (turn-taking, spec section 6 item 4: one pool explores at a time), without
and with the hint; they run nowhere else (one pool has nobody to take turns with).
On x7, `vegas+` and `vegas++` (the paper's Vegas revisions) run after the baselines, and only
there; Vegas++'s X1 (tasks/s at one worker, "measured offline") is the static:1 run's throughput
from the same bench run, so the sweep must include size 1.
On cpu, `tcc@workers-file` and `tcc@jobserver` run tact's TCC as `tact tune` with the driver as
its unmodified command (`tune-drive --external`): told the count through a workers file or as
make's jobserver, counted by the completions it writes into a counter file (spec section 6:
external mode within +-3 points of in-process on X1's G1 and G2).
Per scenario: a table, JSON and a plot; at the end a summary of the issue's targets. See
bench/tune/README.md.
"""
import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import switch  # noqa: E402
from common.lifecycle import T0, Cleanup, log, take_lock  # noqa: E402
from common.procs import terminate_tree  # noqa: E402

CLEANUP = Cleanup()
DEFAULT_LOCK = "/tmp/tact-bench.lock"
BASELINES = ["aimd", "vegas", "gradient2", "envoy", "hill"]
PAPER_SPEC = "tcc:fast=false,slow_start=false"
# TCC with the bottleneck hint: the driver reports the scenario's bottleneck (hint_source).
HINT = "tcc+util"
HINT_SPEC = "tcc:util=0.9"
HINT_LABEL = "tcc + util hint"
# Memory has no utilization (util_memory): thrash is judged by refaults, not a fraction.
HINT_SCENARIOS = ("cpu", "disk", "net", "competitor", "pools", "dask")
# The pools pair taking turns (tune-drive --coordinate): plain TCC and TCC with the hint.
TURNS = "tcc+turns"
HINT_TURNS = "tcc+util+turns"
TURNS_POLICIES = (TURNS, HINT_TURNS)
# Spec §6: external mode must meet G1 and G2 within +-3 points of in-process on X1. These rows run
# tune-drive as `tact tune`'s command (`tune-drive --external`): tact's TCC tells it the count
# through a workers file or as make's jobserver, and counts its completions from a counter file.
EXT_FILE = "tcc@workers-file"
EXT_JOBSERVER = "tcc@jobserver"
EXTERNAL_POLICIES = (EXT_FILE, EXT_JOBSERVER)
EXTERNAL_SCENARIOS = ("cpu",)
EXTERNAL_POINTS = 3
TCC_POLICIES = ("tcc", HINT) + TURNS_POLICIES
ALL_SCENARIOS = ["cpu", "memory", "disk", "net", "competitor", "pools"]
# X7's policies: Vegas++ gets "x1=" from the sweep's static:1 run (resolve_spec).
VEGAS_PLUS, VEGAS_PP = "vegas+", "vegas++"
VEGAS_POLICIES = (VEGAS_PLUS, VEGAS_PP)
X7_BAND = (0.90, 0.95)       # X7: TCC's web CPU with every row
X7_GAP = 0.10                # X7: TCC > Vegas++ > Vegas+ by at least 10 points each
TAG = f"tact-test-tune-{os.getpid()}"

# Issue targets for tact (spec section 5).
TARGET_REL_MAX = 0.95
UTIL_BAND = (0.85, 0.95)
RETURN_TOLERANCE = 0.15      # X5: the count comes back within +-15% ...
RETURN_CYCLES = 2            # ... within two cycles after the competitor leaves
COMPETE_CYCLES = 2           # X5: the count falls within two cycles: the competitor stays that long
SHARE_BAND = (0.40, 0.60)    # X6: each pool within 40-60% of the sum
REFAULT_STEADY_MAX = 0.01    # X2: steady refaults below 1% of the peak

COARSE = "1-16,20,24,32,48,64"
QUICK_SIZES = "1,2,4,8,16,32"

# Each scenario's service: front/service/delay means (ms), sweep sizes, what its bottleneck is.
SCENARIOS = {
    "cpu": dict(title="X1 CPU bottleneck", front_ms=1.0, service_ms=1.3, delay_ms=5.0, sizes="1-64",
                bottleneck="service CPU"),
    "memory": dict(title="X2 memory bottleneck", front_ms=1.0, service_ms=1.3, delay_ms=5.0, sizes=COARSE,
                   bottleneck="memory (refaults)"),
    "disk": dict(title="X3 disk bottleneck", front_ms=1.0, service_ms=2.0, delay_ms=20.0, sizes=COARSE,
                 bottleneck="disk (reads/cap or io_ticks)"),
    "net": dict(title="X4 network bottleneck", front_ms=1.5, service_ms=1.0, delay_ms=5.0, sizes=COARSE,
                bottleneck="link (tx_bytes*8/rate)"),
    "competitor": dict(title="X5 competitor mid-run", front_ms=1.0, service_ms=1.3, delay_ms=5.0, sizes="",
                       bottleneck="service CPU"),
    "pools": dict(title="X6 two pools, one service", front_ms=1.0, service_ms=1.5, delay_ms=5.0, sizes=COARSE,
                  bottleneck="service CPU"),
    "x7": dict(title="X7 versus Vegas", front_ms=1.0, service_ms=2.0, delay_ms=25.0, sizes=COARSE,
               bottleneck="service CPU"),
    # Spec §6's Dask mode: X1 with dask_drive.py as the driver (the static sweep and TCC both
    # through tact.dask.AdaptiveSubmitter on a LocalCluster). Dask spends 2.5-3.5 ms of the front's
    # core per task of its own, which made the front X1's bottleneck (a first probe peaked at about
    # 390/s, half what the service at 1.3 ms serves); X1's service and delay x4 put the knee back on the service's
    # core with the front ~70% busy there (X1's in-process front: ~78%). A cycle then takes ~3x
    # X1's wall time (about 190 tasks/s against 620-750), so TCC's run does too (time_scale); the
    # static runs get 2 s of warm-up for the cluster to settle.
    "dask": dict(title="X1 on a Dask LocalCluster", front_ms=1.0, service_ms=5.2, delay_ms=20.0, sizes=COARSE,
                 bottleneck="service CPU", driver="dask", time_scale=3.0, static_warmup=2.0),
    # X2's web 1 ms; the delay halved from the spec's 50 ms so that the knee (~30 workers) lies well
    # below n_max 64, and the front at 0.5 ms so that the driver's one core is not the bottleneck.
    "memory-switch": dict(title="X2 memory switch mid-run", front_ms=0.5, service_ms=1.0, delay_ms=25.0,
                          sizes="", bottleneck="memory (refaults)"),
}
SCENARIO_NAMES = ALL_SCENARIOS + ["x7", "memory-switch", "dask"]
# memory-switch: the rows, PSI off and on (tune-drive hands TCC to the pool by type, so it reads PSI).
SWITCH_ROWS = (("tcc", "tcc"), ("tcc + psi", "tcc:psi=1"))
SWITCH_BIN_S = 2.0           # throughput and refault rates after the switch, in bins of this many s

PRESETS = {
    # a smoke test of every scenario's pipeline (~9 min); TCC barely reaches Steady, if at all
    "quick": dict(static_seconds=1.0, static_warmup=0.3, tcc_seconds=12.0, tcc_warmup=3.0,
                  paper_seconds=5.0, paper_warmup=1.0, adaptive_seconds=2.0, adaptive_warmup=1.0,
                  compete_seconds=40.0, compete_warmup=3.0, compete_hold=3.0, compete_on=10.0,
                  compete_deadline=20.0, compete_base_seconds=6.0, compete_steady=5.0,
                  pools_alone=6.0, pools_together=12.0, pools_warmup=2.0, pools_second_warmup=2.0,
                  pools_base_alone=2.0, pools_base_together=4.0, vegas_seconds=12.0, vegas_warmup=3.0,
                  switch_deadline=20.0, switch_hold=5.0, switch_after=30.0, switch_reps=1,
                  quick_sizes=QUICK_SIZES),
    # the default (~60 min). TCC (slow start and fast mode on) reached Steady 45 s after its start
    # on X1 on a loaded machine, so 180 s measured after a 20 s warm-up leave it mostly steady;
    # paper mode dwells longer per configuration and may need most of its 200 s.
    "default": dict(static_seconds=3.0, static_warmup=0.5, tcc_seconds=180.0, tcc_warmup=20.0,
                    paper_seconds=180.0, paper_warmup=20.0, adaptive_seconds=30.0, adaptive_warmup=5.0,
                    # X5: TCC's steady state is fixed at compete_steady s there (the spec's and the
                    # model's 50 s; tact's default is 10x the last cycle, 60-900 s, which puts the
                    # second cycle with the competitor 11-17 min after the first). The competitor
                    # stays until TCC ended two cycles (cycles took 35-140 s on the rig) plus
                    # compete_hold s, at most compete_on s. On the driver's clock that leaves
                    # >= 320 s after it for two cycles more: deadline 150 + hold 30 + on 400 + 320
                    # = warmup 20 + compete_seconds 880.
                    compete_seconds=880.0, compete_warmup=20.0, compete_hold=30.0, compete_on=400.0,
                    compete_deadline=150.0, compete_base_seconds=45.0, compete_steady=50.0,
                    pools_alone=60.0, pools_together=100.0, pools_warmup=20.0, pools_second_warmup=10.0,
                    pools_base_alone=20.0, pools_base_together=30.0,
                    # Vegas+/++ decide once per 1,000 completions: from 2 workers to X7's ~11 takes
                    # about a minute, so they get a longer warm-up than the other baselines.
                    vegas_seconds=180.0, vegas_warmup=60.0,
                    # memory-switch: TCC to Steady (at most switch_deadline s), switch_hold s of it,
                    # the switch, then switch_after s to re-explore and hold a steady state; per
                    # row and repetition (rows: PSI off, on).
                    # TCC took 97 s to its first Steady on the loaded development machine.
                    switch_deadline=120.0, switch_hold=15.0, switch_after=150.0, switch_reps=1,
                    quick_sizes=None),
}
# Process start and teardown per driver run, on top of its warm-up and measured seconds.
RUN_OVERHEAD_S = 0.4
# Setting up a scenario: its service, and for memory/disk the file's creation (once) or cache drop.
SCENARIO_OVERHEAD_S = 3.0


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


def scenario_sizes(name, p, args):
    if args.sizes is not None:
        return parse_sizes(args.sizes)
    if name in ("competitor", "memory-switch"):
        return []
    return parse_sizes(p["quick_sizes"] or SCENARIOS[name]["sizes"])


def spec_of(pol):
    return {HINT: HINT_SPEC, TURNS: "tcc", HINT_TURNS: HINT_SPEC}.get(pol, pol)


def is_hint_spec(spec):
    """The hint row's spec, alone or with options appended (X5's compete_spec)."""
    return spec == HINT_SPEC or spec.startswith(HINT_SPEC + ",")


def compete_spec(pol, p):
    """X5's spec of a policy: TCC's steady state fixed at compete_steady s (0: its own timeout)."""
    spec = spec_of(pol)
    if pol not in TCC_POLICIES or not p["compete_steady"]:
        return spec
    t = f"{p['compete_steady']:g}s"
    return spec + ("," if ":" in spec else ":") + f"steady_min={t},steady_max={t}"


def label_of(pol):
    return {HINT: HINT_LABEL, TURNS: "tcc + turns", HINT_TURNS: HINT_LABEL + " + turns",
            EXT_FILE: "tact tune --workers-file", EXT_JOBSERVER: "tact tune --jobserver"}.get(pol, pol)


def scenario_policies(name, policies):
    """The hint needs a bottleneck with a utilization (not memory's); turns need two pools; Vegas+
    and Vegas++ are X7's; the external rows X1's (the spec's comparison); Dask mode runs TCC
    alone, with and without the hint (its check is against in-process TCC)."""
    if name == "dask":
        return [pol for pol in policies if pol in ("tcc", HINT)]
    return [pol for pol in policies if (pol != HINT or name in HINT_SCENARIOS)
            and (pol not in TURNS_POLICIES or name == "pools")
            and (pol not in VEGAS_POLICIES or name == "x7")
            and (pol not in EXTERNAL_POLICIES or name in EXTERNAL_SCENARIOS)]


def plan(name, p, args, policies):
    """[(label, spec, warmup, seconds)] of a sweep scenario, in run order."""
    sc = SCENARIOS[name]
    static_warmup = max(p["static_warmup"], sc.get("static_warmup", 0.0))
    runs = [(f"static:{n}", f"static:{n}", static_warmup, p["static_seconds"])
            for n in scenario_sizes(name, p, args)]
    scale = sc.get("time_scale", 1.0)
    for pol in scenario_policies(name, policies):
        if pol == HINT:
            runs.append((HINT_LABEL, HINT_SPEC, scale * p["tcc_warmup"], scale * p["tcc_seconds"]))
        elif pol == "tcc":
            runs.append(("tcc", "tcc", scale * p["tcc_warmup"], scale * p["tcc_seconds"]))
            if args.paper and name != "dask":
                runs.append(("tcc (paper mode)", PAPER_SPEC, p["paper_warmup"], p["paper_seconds"]))
        elif pol in VEGAS_POLICIES:
            runs.append((pol, pol, p["vegas_warmup"], p["vegas_seconds"]))
        elif pol in EXTERNAL_POLICIES:
            runs.append((label_of(pol), pol, p["tcc_warmup"], p["tcc_seconds"]))
        else:
            runs.append((pol, pol, p["adaptive_warmup"], p["adaptive_seconds"]))
    return runs


def resolve_spec(spec, results):
    """Vegas++ without its X1 takes the throughput of static:1 from the same sweep: (spec, error)."""
    if spec != VEGAS_PP:
        return spec, None
    one = next((r for r in results if r["spec"] == "static:1" and not r.get("error")), None)
    if not one:
        return spec, "vegas++ needs X1: run the sweep with size 1 (or give vegas++:x1=RATE)"
    return f"{VEGAS_PP}:x1={one['window']['throughput']:.2f}", None


def switch_seconds(p):
    """memory-switch: one driver's run, s (the switch comes at Steady + hold, at the latest at the
    deadline + hold, so at least switch_after s follow it)."""
    return p["switch_deadline"] + p["switch_hold"] + p["switch_after"]


def estimate(name, p, args, policies):
    over = SCENARIO_OVERHEAD_S
    if name == "memory-switch":
        # Each run has its own fresh service (about 1 s with the cache drop).
        return over + int(p["switch_reps"]) * len(SWITCH_ROWS) * (switch_seconds(p) + RUN_OVERHEAD_S + 1.0)
    policies = scenario_policies(name, policies)
    if name == "competitor":
        base = [b for b in policies if b not in TCC_POLICIES]
        tccs = len(policies) - len(base)
        return over + tccs * (p["compete_warmup"] + p["compete_seconds"]) + len(base) * (
            min(p["compete_warmup"], p["adaptive_warmup"]) + p["compete_base_seconds"] + RUN_OVERHEAD_S)
    if name == "pools":
        static = sum(p["static_warmup"] + p["static_seconds"] + RUN_OVERHEAD_S
                     for _ in scenario_sizes(name, p, args))
        pairs = sum((p["pools_warmup"] + p["pools_alone"] + p["pools_together"]) if b in TCC_POLICIES else
                    (min(p["pools_warmup"], p["adaptive_warmup"]) + p["pools_base_alone"] + p["pools_base_together"])
                    for b in policies)
        return over + static + pairs + 2 * RUN_OVERHEAD_S * len(policies)
    return over + sum(w + s + RUN_OVERHEAD_S for _, _, w, s in plan(name, p, args, policies))


# --------------------------------------------------------------------------
# the environment each scenario needs: files, a memory cgroup, a network namespace

def run_cmd(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {(r.stderr or r.stdout).strip()}")
    return r


def data_file(path, size_mib):
    """Creates the benchmark's data file once (real bytes, not a sparse file, so reads reach the
    device) and reuses it afterwards."""
    size = size_mib << 20
    if os.path.exists(path) and os.path.getsize(path) >= size:
        return path
    log(f"creating {path} ({size_mib} MiB, once)")
    chunk = os.urandom(1 << 20)
    with open(path + ".part", "wb") as f:
        for _ in range(size_mib):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".part", path)
    return path


def drop_cache(path):
    """Evicts the file's clean pages, so the service's cgroup is charged for the pages it faults
    in (pages cached earlier stay charged to whoever read them, beyond our limit's reach)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def block_device(path):
    """The /proc/diskstats name of the whole device holding `path` (a partition's parent)."""
    st = os.stat(path)
    node = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(node):
        raise RuntimeError(f"{path}: no block device behind {os.major(st.st_dev)}:{os.minor(st.st_dev)} "
                           "(overlay or network file system?); use --data-file on a local disk")
    real = os.path.realpath(node)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def io_ticks(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if x[2] == dev:
                return {"io_ms": int(x[12]), "reads": int(x[3])}
    raise RuntimeError(f"{dev} not in /proc/diskstats")


def has_swap():
    with open("/proc/swaps") as f:
        return len(f.read().strip().splitlines()) > 1


class MemoryCgroup:
    """A memory cgroup of our own (v1 under /sys/fs/cgroup/memory, or v2), removed on cleanup.

    Its pressure (`psi_path`): on v2 the cgroup's own memory.pressure and io.pressure. v1 has no
    pressure files, but on a machine that also mounts the unified hierarchy (systemd's hybrid
    layout, /sys/fs/cgroup/unified) every cgroup2 directory has them, controllers or not, and the
    kernel accounts a task's stalls to its cgroup2 directory whatever its v1 cgroups: a directory
    there holding the same processes gives the service's own pressure. Without either, None: the
    machine's /proc/pressure."""

    def __init__(self, limit_mib):
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers") and \
            "memory" in open("/sys/fs/cgroup/cgroup.controllers").read().split()
        self.v2 = v2
        self.path = f"/sys/fs/cgroup/{TAG}" if v2 else f"/sys/fs/cgroup/memory/{TAG}"
        os.mkdir(self.path)
        self.item = CLEANUP.push("memory cgroup", lambda: rmdir_retry(self.path))
        limit = str(limit_mib << 20)
        with open(os.path.join(self.path, "memory.max" if v2 else "memory.limit_in_bytes"), "w") as f:
            f.write(limit)
        self.limit_mib = limit_mib
        self.unified = None if v2 else unified_cgroup()

    @property
    def psi_path(self):
        return self.path if self.v2 else self.unified

    def wrap(self, cmd):
        """`cmd`, entering the cgroup (and the unified one) before it execs, so that all its memory
        is charged here and its stalls counted there."""
        enter = " && ".join(f"echo $$ > {d}/cgroup.procs" for d in (self.path, self.unified) if d)
        return ["sh", "-c", f'{enter} && exec "$@"', "sh"] + cmd

    def stat(self):
        out = {}
        with open(os.path.join(self.path, "memory.stat")) as f:
            for line in f:
                k, v = line.split()
                out[k] = int(v)
        refault = out.get("workingset_refault_file", out.get("workingset_refault", 0)) + \
            out.get("workingset_refault_anon", 0)
        res = {"refaults": refault, "majfaults": out.get("pgmajfault", 0), "pgpgin": out.get("pgpgin", 0)}
        psi = os.path.join(self.psi_path, "memory.pressure") if self.psi_path else "/proc/pressure/memory"
        try:
            with open(psi) as f:
                for line in f:
                    kind, *_, total = line.split()
                    res[f"psi_{kind}_us"] = int(total.split("=")[1])
        except (OSError, IndexError, ValueError):
            pass
        return res


def psi_source(cg):
    """Where the service's pressure is read, in words for the notes."""
    if cg.v2:
        return f"the cgroup's own {cg.path}/memory.pressure and io.pressure (tune-drive --psi-cgroup)"
    if cg.unified:
        return (f"the service's own, from {cg.unified}/memory.pressure and io.pressure: cgroup v1 has no "
                "pressure files, and the service is also in that cgroup2 directory of the hybrid layout "
                "(no controllers; tune-drive --psi-cgroup)")
    return ("system-wide /proc/pressure: cgroup v1 has no per-cgroup pressure and no unified hierarchy is "
            "mounted, so the controller reads the whole machine's memory and io stalls")


class IopsCgroup:
    """A blkio (v1) or io (v2) cgroup of our own that caps the service's read IOPS on one device,
    as spec X3 does with io.max: a fast virtual disk is otherwise never the bottleneck at one 4 KiB
    read per request. Removed on cleanup."""

    def __init__(self, dev, iops):
        with open(f"/sys/block/{dev}/dev") as f:
            majmin = f.read().strip()
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers") and \
            "io" in open("/sys/fs/cgroup/cgroup.controllers").read().split()
        self.path = f"/sys/fs/cgroup/{TAG}-io" if v2 else f"/sys/fs/cgroup/blkio/{TAG}"
        os.mkdir(self.path)
        self.item = CLEANUP.push("io cgroup", lambda: rmdir_retry(self.path))
        name, value = ("io.max", f"{majmin} riops={iops}") if v2 else \
            ("blkio.throttle.read_iops_device", f"{majmin} {iops}")
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)
        self.v2, self.iops = v2, iops

    def wrap(self, cmd):
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"] + cmd


def unified_cgroup():
    """A directory of our own in the hybrid layout's cgroup2 mount (no controllers: only its
    pressure files are used), removed on cleanup; None without that mount or PSI."""
    root = "/sys/fs/cgroup/unified"
    if not os.path.exists(os.path.join(root, "cgroup.procs")):
        return None
    path = os.path.join(root, TAG)
    os.mkdir(path)
    CLEANUP.push("unified cgroup", lambda: rmdir_retry(path))
    if not os.path.exists(os.path.join(path, "memory.pressure")):
        return None
    return path


def rmdir_retry(path):
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)  # the killed service's exit is still being accounted
    raise RuntimeError(f"could not remove {path}")


class NetNamespace:
    """The service's network namespace behind a veth pair, its egress shaped by tbf; deleted on
    cleanup (deleting the namespace also deletes the veth pair)."""
    def __init__(self, rate_mbit):
        self.ns = TAG
        # A /30 of its own per run (by pid), so that concurrent runs do not share addresses.
        net = os.getpid() % 250
        self.HOST, self.PEER = f"10.213.{net}.1", f"10.213.{net}.2"
        short = str(os.getpid())[-8:]
        self.host_if, self.peer_if = f"tth{short}", f"ttp{short}"
        self.rate_bps = rate_mbit * 1_000_000
        run_cmd(["ip", "netns", "add", self.ns])
        self.item = CLEANUP.push("netns", self.remove)
        run_cmd(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if])
        run_cmd(["ip", "link", "set", self.peer_if, "netns", self.ns])
        run_cmd(["ip", "addr", "add", f"{self.HOST}/30", "dev", self.host_if])
        run_cmd(["ip", "link", "set", self.host_if, "up"])
        n = ["ip", "-n", self.ns]
        run_cmd(n + ["addr", "add", f"{self.PEER}/30", "dev", self.peer_if])
        run_cmd(n + ["link", "set", self.peer_if, "up"])
        run_cmd(n + ["link", "set", "lo", "up"])
        # The service's replies leave through this qdisc: the shaped link is the bottleneck.
        run_cmd(["ip", "netns", "exec", self.ns, "tc", "qdisc", "add", "dev", self.peer_if, "root", "tbf",
                 "rate", f"{rate_mbit}mbit", "burst", "64kb", "latency", "50ms"])

    def wrap(self, cmd):
        return ["ip", "netns", "exec", self.ns] + cmd

    def stat(self):
        r = run_cmd(["ip", "-n", self.ns, "-j", "-s", "link", "show", "dev", self.peer_if])
        st = json.loads(r.stdout)[0]["stats64"]
        return {"tx_bytes": st["tx"]["bytes"], "tx_dropped": st["tx"]["dropped"]}

    def remove(self):
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        run_cmd(["ip", "netns", "del", self.ns])


# --------------------------------------------------------------------------
# running

def build(cargo):
    log("cargo build --release -p tact-bench-tune -p tact")
    # tact itself for the external rows (`tact tune -- tune-drive --external ...`).
    subprocess.run([cargo, "build", "--release", "-p", "tact-bench-tune", "-p", "tact"], cwd=REPO, check=True)
    return os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release")


class Probe:
    """Samples a scenario's cumulative counters (`read() -> {name: value}`) every `period` s
    while a run goes, stamped with time.monotonic()."""

    def __init__(self, read, period=0.5):
        self.read, self.period = read, period
        self.samples = []
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        try:
            self.samples.append((time.monotonic(), self.read()))
        except (OSError, RuntimeError, ValueError) as e:
            log(f"probe: {e}")

    def _loop(self):
        while True:
            self._sample()
            if self.stop_ev.wait(self.period):
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.thread.join()
        # One more after the run, so the samples cover its window's end.
        self._sample()


def rates(samples, intervals):
    """Per-second rates of each counter over `intervals` (in the samples' time base): the sum of
    the interpolated increments over the sum of the lengths."""
    if len(samples) < 2 or not intervals:
        return {}

    def at(t, key):
        if t < samples[0][0] or t > samples[-1][0]:
            return None
        for (a, va), (b, vb) in zip(samples, samples[1:]):
            if a <= t <= b:
                return va[key] + (vb[key] - va[key]) * ((t - a) / (b - a) if b > a else 0)
        return None

    out = {}
    for key in samples[0][1]:
        total, span = 0.0, 0.0
        for a, b in intervals:
            x, y = at(a, key), at(b, key)
            if x is None or y is None:
                break
            total += y - x
            span += b - a
        else:
            if span > 0:
                out[key] = total / span
    return out


class Service:
    def __init__(self, bindir, cpu, sc, listen, outdir, wrap=None, mode="cpu", reply_bytes=0, seed=1):
        cmd = ["taskset", "-c", str(cpu), os.path.join(bindir, "tune-service"), "--listen", listen,
               "--service-ms", str(sc["service_ms"]), "--delay-ms", str(sc["delay_ms"]), "--seed", str(seed),
               "--mode", mode, "--reply-bytes", str(reply_bytes)]
        if wrap:
            cmd = wrap(cmd)
        self.log_path = os.path.join(outdir, "service.log")
        err = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        self.item = CLEANUP.push("service", lambda: terminate_tree(self.proc.pid))
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"tune-service did not start: {line!r} (see {self.log_path})")
        self.addr = line.split()[1]
        log(f"service {self.addr} (pid {self.proc.pid}, CPU {cpu}): {sc['service_ms']} ms CPU + "
            f"{sc['delay_ms']} ms delay, mode {mode}" + (f", {reply_bytes} B replies" if reply_bytes else ""))

    def stop(self):
        CLEANUP.pop(self.item)


def hint_source(sc, args):
    """tune-drive's --bottleneck: the quantity the scenario's table calls utilization (util_cpu,
    util_disk, util_net), as the driver can read it."""
    return sc.get("hint_source") or f"cpu:{args.service_cpu}"


class Driver:
    """One tune-drive run, started now; its stdout events are read as they come."""

    def __init__(self, bindir, cpu, addr, label, spec, warmup, seconds, args, sc, outdir, on_steady=None,
                 coordinate=None, psi_cgroup=None):
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
        # Per scenario: every sweep has its static:N and tcc runs.
        runs = os.path.join(outdir, "runs", sc["name"])
        os.makedirs(runs, exist_ok=True)
        self.path = os.path.join(runs, f"{safe}.json")
        self.label, self.spec, self.warmup, self.seconds = label, spec, warmup, seconds
        n_max = max(args.max, int(spec.split(":")[1]) if spec.startswith("static:") else 0)
        drive = ["--addr", addr, "--seconds", str(seconds), "--warmup", str(warmup), "--front-ms", str(sc["front_ms"]),
                 "--max", str(n_max), "--seed", str(args.seed), "--json", self.path]
        if args.init:
            drive += ["--init", str(args.init)]
        env = None
        if sc.get("driver") == "dask":
            cmd = [dask_python(), os.path.join(HERE, "dask_drive.py"), "--policy", spec] + drive
        elif spec in EXTERNAL_POLICIES:
            cmd = external_cmd(bindir, spec, self.path, n_max, args) + drive
            # Nothing of an outer make's (`make bench-tune`) reaches tact or the driver.
            env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
            env["TACT_RUNTIME_DIR"] = os.path.join(outdir, "runtime")
        else:
            cmd = [os.path.join(bindir, "tune-drive"), "--policy", spec] + drive
        # Both on the driver's CPU: tact polling its command counts against the front, as it would.
        cmd = ["taskset", "-c", str(cpu)] + cmd
        if is_hint_spec(spec):
            cmd += ["--bottleneck", hint_source(sc, args)]
        if psi_cgroup:
            cmd += ["--psi-cgroup", psi_cgroup]
        if coordinate:
            # The lock file goes in the run's own directory (tact's TACT_RUNTIME_DIR/tune).
            cmd += ["--coordinate", coordinate]
            env = dict(os.environ, TACT_RUNTIME_DIR=os.path.join(outdir, "runtime"))
        self.t_launch = time.monotonic()
        self.t0 = None  # time.monotonic() of the pool's clock origin ("started")
        self.started = threading.Event()
        self.target = None  # the pool's target at its latest sample ("target AT N")
        self.on_steady = on_steady
        self.lines = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.item = CLEANUP.push(f"driver {label}", lambda: terminate_tree(self.proc.pid))
        self.err = []
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)]
        for t in self.readers:
            t.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line == "started":
                self.t0 = time.monotonic()
                self.started.set()
            elif line.startswith("steady "):
                _, at, n = line.split()
                if self.on_steady:
                    self.on_steady(float(at), int(n))
            elif line.startswith("target "):
                self.target = int(line.split()[2])
            elif line:
                self.lines.append(line)

    def now(self):
        """Seconds on the driver's clock."""
        return time.monotonic() - (self.t0 if self.t0 is not None else self.t_launch)

    def wait(self):
        try:
            self.proc.wait(timeout=self.warmup + self.seconds + 120)
        except subprocess.TimeoutExpired:
            CLEANUP.pop(self.item)
            return {"label": self.label, "spec": self.spec, "error": "timed out"}
        for t in self.readers:
            t.join()
        # anyhow's message, without the backtrace RUST_BACKTRACE may add
        err = "".join(self.err).split("\nStack backtrace:")[0]
        CLEANUP.pop(self.item, run=False)
        if self.proc.returncode != 0 or not os.path.exists(self.path):
            return {"label": self.label, "spec": self.spec, "error": (err or "").strip()[-400:] or "failed"}
        with open(self.path) as f:
            rec = json.load(f)
        rec.update(label=self.label, spec=self.spec, wall_s=time.monotonic() - self.t_launch)
        if self.lines:
            log(self.lines[-1])
        return rec


def dask_python():
    """The interpreter for dask_drive.py: the repository's .venv (`make python` puts tact and
    distributed there), else this one."""
    venv = os.path.join(REPO, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def check_dask():
    r = subprocess.run([dask_python(), "-c", "import distributed, tact.dask"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"the dask scenario needs tact and distributed in {dask_python()} (make python): "
                         + (r.stderr.strip().splitlines() or ["import failed"])[-1])


def external_cmd(bindir, spec, path, n_max, args):
    """`tact tune` with tact's TCC (its defaults, as the in-process `tcc` row's) and the driver as
    its command, up to the driver's own arguments: the count through a workers file or the
    jobserver, completions from the driver's counter file, tact's log for the record's steady
    periods."""
    base = path[:-len(".json")]
    done, tact_log = base + ".done", base + ".tact.jsonl"
    if spec == EXT_FILE:
        how, ext = ["--workers-file", base + ".workers"], f"workers-file:{base}.workers"
    else:
        how, ext = ["--jobserver"], "jobserver"
    # The in-process driver's default start: the online CPUs (tact's default would be the one
    # CPU of the driver's affinity).
    init = args.init or os.cpu_count() or 1
    cmd = [os.path.join(bindir, "tact"), "tune", "--max", str(n_max), "--init", str(init),
           "--completions", f"file:{done}", "--json-log", tact_log] + how
    return cmd + ["--", os.path.join(bindir, "tune-drive"), "--external", ext, "--done-file", done,
                  "--tact-log", tact_log]


def secs(at):
    return at["secs"] + at["nanos"] / 1e9 if isinstance(at, dict) else at


def steady_intervals(trace, lo, hi):
    """TCC's Steady periods within [lo, hi], from its transitions (as the driver computes them)."""
    out, start = [], None
    for t in trace or []:
        at = secs(t["at"])
        if t["to"] == "steady" and t["from"] != "steady":
            start = at
        elif t["from"] == "steady" and t["to"] != "steady" and start is not None:
            out.append((start, at))
            start = None
    if start is not None:
        out.append((start, hi))
    return [(max(a, lo), min(b, hi)) for a, b in out if min(b, hi) > max(a, lo)]


def attach_probe(rec, probe_samples, t0, util_of):
    """Adds the scenario's bottleneck figures over the window (and TCC's Steady periods)."""
    if rec.get("error") or t0 is None:
        return rec
    shifted = [(t - t0, v) for t, v in probe_samples]
    w = (rec["warmup_s"], rec["warmup_s"] + rec["seconds"])
    rec["window"]["bottleneck"] = util_of(rates(shifted, [w]), rec["window"])
    if rec.get("steady"):
        iv = steady_intervals(rec.get("trace"), *w)
        rec["steady"]["bottleneck"] = util_of(rates(shifted, iv), rec["steady"])
    return rec


def run_one(ctx, label, spec, warmup, seconds):
    # The CPU scenarios need no probe: the driver asks the service for its CPU time itself.
    with Probe(ctx["probe"] or (lambda: {}), period=0.5 if ctx["probe"] else 3600) as probe:
        d = Driver(ctx["bindir"], ctx["args"].driver_cpu, ctx["addr"], label, spec, warmup, seconds,
                   ctx["args"], ctx["sc"], ctx["outdir"])
        rec = d.wait()
    return attach_probe(rec, probe.samples, d.t0, ctx["util_of"])


# --------------------------------------------------------------------------
# each scenario's bottleneck, from the probe's rates and the driver's own figures

def util_cpu(_rates, period):
    return {"util": period.get("service_util")}


def util_disk(cap):
    # With an IOPS cap, the bottleneck is the cap: utilization = reads/s over it; without one, the
    # device's busy time (io_ticks). Both are kept.
    def f(r, period):
        if "io_ms" not in r:
            return {"util": None}
        busy = r["io_ms"] / 1000.0
        return {"util": r["reads"] / cap if cap else busy, "busy": busy, "reads_per_s": r["reads"]}
    return f


def util_net(rate_bps):
    def f(r, period):
        if "tx_bytes" not in r:
            return {"util": None}
        return {"util": r["tx_bytes"] * 8 / rate_bps, "tx_mbit": r["tx_bytes"] * 8 / 1e6,
                "drops_per_s": r["tx_dropped"]}
    return f


def util_memory(r, period):
    # Memory has no utilization to keep in a band: what counts is throughput against thrash, so
    # the figures are refaults, major faults and memory pressure (PSI "some", % of wall time).
    out = {"util": None}
    if "refaults" in r:
        out.update(refaults_per_s=r["refaults"], majfaults_per_s=r["majfaults"],
                   pgpgin_per_s=r["pgpgin"])
    if "psi_some_us" in r:
        out["psi_some"] = r["psi_some_us"] / 1e6
    return out


# --------------------------------------------------------------------------
# scenario setup: (ctx additions, description)

def setup(name, args, p, bindir, outdir):
    sc = dict(SCENARIOS[name], name=name)
    for k in ("front_ms", "service_ms", "delay_ms"):
        if getattr(args, k) is not None:
            sc[k] = getattr(args, k)
    ctx = dict(args=args, bindir=bindir, outdir=outdir, sc=sc, probe=None, util_of=util_cpu, name=name)
    svc = dict(listen="127.0.0.1:0", mode="cpu", reply_bytes=0, wrap=None)
    notes = []
    if name == "memory":
        path = data_file(args.data_file, args.data_mib)
        drop_cache(path)
        limit = args.mem_base_mib + args.mem_slice_mib * args.mem_workers
        cg = MemoryCgroup(limit)
        ctx["cgroup"] = cg
        if has_swap():
            svc["mode"] = f"memory:{args.mem_slice_mib}"
            how = "anonymous memory per request (swap present: overcommit swaps)"
        else:
            svc["mode"] = f"mapped:{path}:{args.mem_slice_mib}"
            how = ("a mapped file slice per connection (no swap: overcommit would OOM-kill anonymous memory, "
                   "so it evicts and refaults page cache instead)")
        svc["wrap"] = cg.wrap
        ctx["probe"], ctx["util_of"] = cg.stat, util_memory
        notes.append(f"memory cgroup {cg.path} ({'v2 memory.max' if cg.v2 else 'v1 memory.limit_in_bytes'}) = "
                     f"{limit} MiB: {args.mem_base_mib} MiB base + {args.mem_workers} x {args.mem_slice_mib} MiB; "
                     f"{how}; PSI: {psi_source(cg)}")
    elif name == "memory-switch":
        path = data_file(args.data_file, args.data_mib)
        drop_cache(path)
        limit = args.mem_base_mib + args.switch_room_mib
        cg = MemoryCgroup(limit)
        ctx.update(cgroup=cg, data=path, room_mib=args.switch_room_mib)
        svc["wrap"] = cg.wrap
        ctx["probe"], ctx["util_of"] = cg.stat, util_memory
        notes.append(f"memory cgroup {cg.path} ({'v2 memory.max' if cg.v2 else 'v1 memory.limit_in_bytes'}) = "
                     f"{limit} MiB: {args.mem_base_mib} MiB base + {args.switch_room_mib} MiB room for the slices; "
                     f"the service starts in cpu mode, at T it switches to mapped:{path}:M with M = "
                     f"ceil({switch.OVERCOMMIT} x room / the count at T) (no swap needed: overcommit evicts and "
                     "refaults page cache); a fresh service per run, the file's cache dropped first")
        notes.append(f"PSI (tcc:psi=1, read by the driver's pool): {psi_source(cg)}")
    elif name == "disk":
        path = data_file(args.data_file, args.data_mib)
        dev = block_device(path)
        svc["mode"] = f"disk:{path}"
        ctx["probe"], ctx["util_of"] = (lambda: io_ticks(dev)), util_disk(args.disk_iops)
        # util_disk's quantity: the device's reads over the cap, or its io_ticks without one.
        sc["hint_source"] = f"disk:{dev}@riops={args.disk_iops}" if args.disk_iops else f"disk:{dev}"
        how = "utilization = io_ticks / wall time"
        if args.disk_iops:
            cg = IopsCgroup(dev, args.disk_iops)
            ctx["cgroup"], svc["wrap"] = cg, cg.wrap
            how = (f"read IOPS capped at {args.disk_iops} ({'v2 io.max' if cg.v2 else 'v1 blkio.throttle'}, "
                   f"{cg.path}); utilization = reads/s over the cap (io_ticks busy in the JSON)")
        notes.append(f"random 4 KiB O_DIRECT reads of {path} ({args.data_mib} MiB) on /dev/{dev}; {how}")
    elif name == "dask":
        check_dask()
        notes.append("driver: dask_drive.py, a LocalCluster in one process (1 worker, --max threads) on the "
                     "driver's CPU; tact.dask.AdaptiveSubmitter bounds the tasks in flight for every row, "
                     "static:N included; X1's service and delay x4 (Dask's own cost per task would make the "
                     "front the bottleneck)")
    elif name == "net":
        ns = NetNamespace(args.rate_mbit)
        ctx["netns"] = ns
        svc.update(listen=f"{ns.PEER}:0", wrap=ns.wrap, reply_bytes=args.reply_kib << 10)
        ctx["probe"], ctx["util_of"] = ns.stat, util_net(ns.rate_bps)
        # util_net's quantity, from the driver's namespace: what the host side of the veth
        # receives is what the shaped side sends (veth counts a packet on both ends).
        sc["hint_source"] = f"net:{ns.host_if}@{args.rate_mbit}mbit,rx"
        notes.append(f"service in netns {ns.ns}, veth {ns.peer_if} shaped by tbf rate {args.rate_mbit}mbit, "
                     f"{args.reply_kib} KiB replies; driver in the root namespace; link use = tx_bytes*8/rate")
    service = Service(bindir, args.service_cpu, sc, svc["listen"], outdir, svc["wrap"], svc["mode"],
                      svc["reply_bytes"], args.seed)
    ctx.update(addr=service.addr, service=service, notes=notes, mode=svc["mode"], svc=svc)
    return ctx


def teardown(ctx):
    ctx["service"].stop()
    for key in ("cgroup", "netns"):
        if key in ctx:
            CLEANUP.pop(ctx[key].item)


# --------------------------------------------------------------------------
# analysis and report

def fmt(x, spec="{:.1f}", none="-"):
    return none if x is None else spec.format(x)


def pct(x):
    return fmt(None if x is None else 100 * x, "{:.1f}%")


def bn(period):
    return ((period or {}).get("bottleneck") or {}).get("util")


def slim(rec):
    """What the report keeps of a run (the full record stays in runs/SCENARIO/)."""
    out = {k: rec.get(k) for k in ("label", "spec", "warmup_s", "seconds", "window", "steady",
                                   "first_steady_s", "errors", "init", "max", "error", "extra", "turns")}
    if not rec.get("spec", "").startswith("static:"):
        out["targets"] = rec.get("targets")
        out["trace"] = rec.get("trace")
        # [at, completions, service CPU s, target]; already in this form when re-reporting
        out["samples"] = [[s["at"], s["completions"], s["service_cpu"], s["target"]] if isinstance(s, dict)
                          else s for s in rec.get("samples", [])]
    return out


def references(static, util_key):
    """X*_max and X*_95 (the best static size with the bottleneck <= 95%, when the scenario has a
    utilization): (size, throughput, util) each, or None."""
    ok = [r for r in static if not r.get("error")]
    if not ok:
        return None, None

    def point(r):
        return (int(r["spec"].split(":")[1]), r["window"]["throughput"], util_key(r["window"]))

    best = max(ok, key=lambda r: r["window"]["throughput"])
    under = [r for r in ok if util_key(r["window"]) is not None and util_key(r["window"]) <= UTIL_BAND[1]]
    best95 = max(under, key=lambda r: r["window"]["throughput"]) if under else None
    return point(best), (point(best95) if best95 else None)


def extra_cell(name, period):
    b = (period or {}).get("bottleneck") or {}
    if name == "memory":
        return (f"{fmt(b.get('refaults_per_s'), '{:.0f}')} rf/s, {fmt(b.get('majfaults_per_s'), '{:.0f}')} mf/s, "
                f"psi {pct(b.get('psi_some'))}")
    if name == "disk":
        return f"{fmt(b.get('reads_per_s'), '{:.0f}')} rd/s, busy {pct(b.get('busy'))}"
    if name == "net":
        return f"{fmt(b.get('tx_mbit'), '{:.1f}')} Mbit/s"
    return ""


def row_of(name, label, period, xmax, x95):
    if not period:
        return [label] + ["-"] * 8
    thr = period["throughput"]
    c = period.get("count") or {}
    lat = period.get("latency") or {}
    # The bottleneck's own column: its utilization (disk, net) or its thrash figures (memory);
    # on the CPU scenarios the service CPU column already is the bottleneck.
    own = pct(bn(period)) if name in ("disk", "net") else extra_cell(name, period) if name == "memory" else ""
    return [label, f"{thr:.0f}",
            pct(thr / xmax[1]) if xmax else "-",
            pct(thr / x95[1]) if x95 else "-",
            pct(period.get("service_util")), own,
            (f"{c['mean']:.1f} [{c['min']}-{c['max']}] sd {c['stdev']:.1f}" if c else "-"),
            fmt(lat.get("p99_ms"), "{:.1f}"),
            extra_cell(name, period) if name in ("disk", "net") else ""]


def table_text(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r))
    return "\n".join([line(head), "  ".join("-" * x for x in w)] + [line(r) for r in rows])


def util_key_of(name):
    if name in ("disk", "net"):
        return bn
    if name == "memory":
        return lambda w: None
    return lambda w: w.get("service_util")


def sweep_targets(name, results, xmax, x95, in_process=None):
    """The issue's targets for tact's default row: [(criterion, value, verdict)]. in_process: X1's
    (results, X*_max, X*_95) from the same bench run, for Dask mode's check."""
    by = {r["label"]: r for r in results}
    out = []
    for label in ("tcc", HINT_LABEL):
        tcc = by.get(label)
        if tcc and not tcc.get("error") and xmax:
            prefix = "" if label == "tcc" else f"{label}: "
            out += [(prefix + c, v, verdict) for c, v, verdict in tcc_targets(name, results, by, tcc, xmax)]
    if name == "dask":
        out += dask_targets(by, xmax, x95, in_process)
    else:
        out += external_targets(by, xmax, x95)
    if name == "x7":
        out += x7_targets(by)
    return out


def g_figures(r, xmax, x95):
    """A row's G1 (steady throughput over X*_95, and over X*_max) and G2 (the service's CPU), each
    over its steady periods (the whole window for a row never steady)."""
    p = r.get("steady") or r["window"]
    g1 = [p["throughput"] / ref[1] for ref in (x95, xmax) if ref]
    return g1, p.get("service_util"), "steady" if r.get("steady") else "window, never steady"


def within_points(r, refs, tcc, refs_in, what):
    """Spec §6: row r's G1 (against refs, its own X*_max and X*_95) and G2 within +-3 points of the
    in-process tcc row's (against refs_in)."""
    (g1, g2, where), (g1_in, g2_in, where_in) = g_figures(r, *refs), g_figures(tcc, *refs_in)
    names = "X*_95, X*_max" if refs[1] else "X*_max"
    d1 = [100 * (a - b) for a, b in zip(g1, g1_in)]
    out = [(f"{r['label']}{what}: G1 (vs {names}) within {EXTERNAL_POINTS} points of in-process ({where}; "
            f"in-process {where_in})",
            ", ".join(f"{pct(a)} vs {pct(b)} ({d:+.1f})" for a, b, d in zip(g1, g1_in, d1)),
            "PASS" if all(abs(d) <= EXTERNAL_POINTS for d in d1) else "FAIL")]
    if g2 is not None and g2_in is not None:
        d2 = 100 * (g2 - g2_in)
        out.append((f"{r['label']}{what}: G2 service CPU within {EXTERNAL_POINTS} points of in-process",
                    f"{pct(g2)} vs {pct(g2_in)} ({d2:+.1f})", "PASS" if abs(d2) <= EXTERNAL_POINTS else "FAIL"))
    return out


def external_targets(by, xmax, x95):
    """Spec §6: each external row within +-3 points of the in-process tcc row on G1 and G2 (one
    sweep: both against the same X*_max and X*_95)."""
    tcc = by.get("tcc")
    if not tcc or tcc.get("error") or not xmax:
        return []
    out = []
    for pol in EXTERNAL_POLICIES:
        r = by.get(label_of(pol))
        if r and not r.get("error"):
            out += within_points(r, (xmax, x95), tcc, (xmax, x95), "")
    return out


def dask_targets(by, xmax, x95, in_process):
    """Spec §6: Dask mode's tcc row within +-3 points of X1's in-process tcc row on G1 and G2, each
    against its own driver's static sweep (Dask's X*_max and X*_95 from dask_drive's static rows,
    X1's from tune-drive's)."""
    tcc = by.get("tcc")
    if not tcc or tcc.get("error") or not xmax:
        return []
    if not in_process:
        return [("tcc (Dask): G1 and G2 within 3 points of in-process", "no X1 in this run "
                 "(--scenario cpu,dask measures both)", "-")]
    results_in, xmax_in, x95_in = in_process
    tcc_in = next((r for r in results_in if r["label"] == "tcc" and not r.get("error")), None)
    if not tcc_in or not xmax_in:
        return [("tcc (Dask): G1 and G2 within 3 points of in-process", "X1's tcc row or sweep failed", "-")]
    return within_points(tcc, (xmax, x95), tcc_in, (xmax_in, x95_in), " (Dask)")


def x7_targets(by):
    """X7: TCC's service CPU over its steady periods 90-95%, Vegas++ ~70% and Vegas+ ~55% over their
    windows (they have no Steady), in that order with gaps >= 10 points."""
    def util(label, steady):
        r = by.get(label)
        if not r or r.get("error"):
            return None
        return ((steady and r.get("steady")) or r["window"]).get("service_util")
    tcc, tcc_all, vpp, vp = util("tcc", True), util("tcc", False), util(VEGAS_PP, False), util(VEGAS_PLUS, False)
    where = "steady" if (by.get("tcc") or {}).get("steady") else "window, never steady"
    out = [(f"x7: tcc service CPU {X7_BAND[0]:.0%}-{X7_BAND[1]:.0%} ({where})", pct(tcc),
            "PASS" if tcc is not None and X7_BAND[0] <= tcc <= X7_BAND[1] else "FAIL"),
           ("x7: vegas++ service CPU (paper ~70%)", pct(vpp), "info"),
           ("x7: vegas+ service CPU (paper ~55%)", pct(vp), "info")]
    for what, t in ((where, tcc), ("whole window", tcc_all)):
        ok = None not in (t, vpp, vp) and t - vpp >= X7_GAP and vpp - vp >= X7_GAP
        out.append((f"x7: tcc ({what}) > vegas++ > vegas+, gaps >= {X7_GAP * 100:.0f} points",
                    f"{pct(t)} > {pct(vpp)} > {pct(vp)}", "PASS" if ok else "FAIL"))
    return out


def tcc_targets(name, results, by, tcc, xmax):
    uk = util_key_of(name)
    # Steady periods are what TCC is judged on (spec X1); the whole window when it never got there.
    p = tcc.get("steady") or tcc["window"]
    where = "steady" if tcc.get("steady") else "window, never steady"
    thr, util = p["throughput"], uk(p)
    out = [(f"throughput >= {TARGET_REL_MAX:.0%} of X*_max ({where})", pct(thr / xmax[1]),
            "PASS" if thr >= TARGET_REL_MAX * xmax[1] else "FAIL")]
    if name == "memory":
        peak = max((r["window"].get("bottleneck", {}).get("refaults_per_s") or 0
                    for r in results if not r.get("error")), default=0)
        rf = (p.get("bottleneck") or {}).get("refaults_per_s")
        if rf is not None and peak > 0:
            out.append((f"refaults < {REFAULT_STEADY_MAX:.0%} of the peak ({where})",
                        f"{rf:.0f}/s vs peak {peak:.0f}/s", "PASS" if rf < REFAULT_STEADY_MAX * peak else "FAIL"))
    else:
        out.append((f"{SCENARIOS[name]['bottleneck']} {UTIL_BAND[0]:.0%}-{UTIL_BAND[1]:.0%} ({where})", pct(util),
                    "PASS" if util is not None and UTIL_BAND[0] <= util <= UTIL_BAND[1] else "FAIL"))
    for b in BASELINES:
        r = by.get(b)
        if not r or r.get("error"):
            continue
        bp = r["window"]
        bu = uk(bp)
        # Better: more throughput, or the baseline saturates the bottleneck (> 95%) while tact
        # stays within its band at no less than 95% of the baseline's throughput.
        better = thr > bp["throughput"] or (bu is not None and bu > UTIL_BAND[1] and util is not None
                                            and util <= UTIL_BAND[1] and thr >= 0.95 * bp["throughput"])
        # Memory has no band: show the service CPU beside the throughputs instead.
        shown = (lambda q: q.get("service_util")) if name == "memory" else uk
        out.append((f"better than {b}",
                    f"{thr:.0f}/s at {pct(shown(p))} vs {bp['throughput']:.0f}/s at {pct(shown(bp))}",
                    "PASS" if better else "FAIL"))
    return out


def sweep_report(name, ctx, results):
    static = [r for r in results if r["spec"].startswith("static:")]
    adaptive = [r for r in results if not r["spec"].startswith("static:")]
    uk = util_key_of(name)
    xmax, x95 = references(static, uk)
    sc = ctx["sc"]
    lines = [f"== {name}: {sc['title']} -- front {sc['front_ms']} ms, service {sc['service_ms']} ms CPU + "
             f"{sc['delay_ms']} ms delay, mode {ctx['mode']}"] + [f"   {n}" for n in ctx["notes"]]
    sizes = [int(r["spec"].split(":")[1]) for r in static]
    if sizes:
        lines.append(f"   static sweep: {len(sizes)} sizes ({'every size ' if sizes == list(range(1, max(sizes) + 1)) else 'coarse: '}"
                     f"{compact(sizes)})")
    if xmax:
        what, u = (("service CPU", next(r["window"].get("service_util") for r in static
                                        if r["spec"] == f"static:{xmax[0]}")) if name == "memory"
                   else (SCENARIOS[name]["bottleneck"], xmax[2]))
        lines.append(f"X*_max = {xmax[1]:.0f}/s at static:{xmax[0]} ({what} {pct(u)}); "
                     + (f"X*_95 = {x95[1]:.0f}/s at static:{x95[0]} ({pct(x95[2])})" if x95 else
                        "X*_95: none (no static size kept the bottleneck measurable and <= 95%)"))
    col = {"memory": "memory", "disk": "disk use", "net": "link use"}.get(name, "")
    head = ["controller", "thr/s", "vs X*_max", "vs X*_95", "svc CPU", col, "count mean [min-max] sd", "p99 ms",
            "" if name not in ("disk", "net") else "rate"]
    rows = []
    for r in adaptive:
        if r.get("error"):
            rows.append([r["label"], "error: " + r["error"].splitlines()[-1][:60]] + [""] * 7)
            continue
        rows.append(row_of(name, r["label"], r["window"], xmax, x95))
        if r.get("steady"):
            first = r.get("first_steady_s")
            rows.append(row_of(name, f"  {r['label']} steady {r['steady']['seconds']:.0f}s"
                               + (f" (from {first:.0f}s)" if first is not None else ""), r["steady"], xmax, x95))
        elif r["spec"].startswith("tcc"):
            rows.append([f"  {r['label']} never reached Steady"] + [""] * 8)
    for ref, rname in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            r = next(x for x in static if x["spec"] == f"static:{ref[0]}")
            rows.append(row_of(name, f"static:{ref[0]} ({rname})", r["window"], xmax, x95))
    lines += ["", table_text(head, rows)]
    curve = [f"{r['spec'].split(':')[1]}:{r['window']['throughput']:.0f}/{pct(uk(r['window']) if name != 'memory' else r['window'].get('service_util'))}"
             for r in static if not r.get("error")]
    if curve:
        lines += ["", f"static curve (size:throughput/{'service CPU' if name == 'memory' else SCENARIOS[name]['bottleneck']}): "
                  + "  ".join(curve)]
    if name == "memory":
        lines.append("refaults/s by size: " + "  ".join(
            f"{r['spec'].split(':')[1]}:{fmt((r['window'].get('bottleneck') or {}).get('refaults_per_s'), '{:.0f}')}"
            for r in static if not r.get("error")))
    tt = sweep_targets(name, results, xmax, x95, ctx.get("in_process"))
    refs = {"x_max": xmax and dict(zip(("size", "throughput", "util"), xmax)),
            "x_95": x95 and dict(zip(("size", "throughput", "util"), x95))}
    return lines, tt, refs, lambda: plot_sweep(name, static, adaptive, xmax, x95, ctx["outdir"])


def compact(sizes):
    out, i = [], 0
    while i < len(sizes):
        j = i
        while j + 1 < len(sizes) and sizes[j + 1] == sizes[j] + 1:
            j += 1
        out.append(f"{sizes[i]}-{sizes[j]}" if j > i else str(sizes[i]))
        i = j + 1
    return ",".join(out)


def mean_target(targets, lo, hi):
    """Time-weighted mean of a target history [(at, n)] over [lo, hi]."""
    if not targets or hi <= lo:
        return None
    total = 0.0
    for (a, n), nxt in zip(targets, targets[1:] + [[float("inf"), None]]):
        s, e = max(a, lo), min(nxt[0], hi)
        if e > s:
            total += n * (e - s)
    return total / (hi - lo)


def samples_rate(samples, lo, hi, idx):
    """Rate of a cumulative sample column ([at, completions, service_cpu, target]) over [lo, hi]."""
    pts = [s for s in samples if lo <= s[0] <= hi]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    return (pts[-1][idx] - pts[0][idx]) / (pts[-1][0] - pts[0][0])


def cycle_at(trace, t):
    c = 0
    for tr in trace or []:
        if secs(tr["at"]) <= t:
            c = tr["cycle"]
    return c


def cycle_ends(trace):
    """TCC's entries into Steady, each the end of a cycle: [(at, count, cycle)]."""
    return [(secs(t["at"]), t["target_to"], t["cycle"]) for t in trace or []
            if t["to"] == "steady" and t["from"] != "steady"]


def competitor_analysis(rec):
    """Counts before/during/after the competitor, the counts at the end of the first
    COMPETE_CYCLES cycles with it and after it, and whether the count came back in time."""
    ex = rec.get("extra") or {}
    on, off = ex.get("on"), ex.get("off")
    if rec.get("error") or on is None or off is None:
        return None
    targets = [list(t) for t in rec["targets"]]
    end = rec["warmup_s"] + rec["seconds"]
    pre = ex.get("pre_count") or mean_target(targets, max(rec["warmup_s"], on - 30), on)
    trace = rec.get("trace") or []
    ends = cycle_ends(trace)
    ends_during = [e for e in ends if on < e[0] <= off][:COMPETE_CYCLES]
    ends_after = [e for e in ends if e[0] > off][:COMPETE_CYCLES]
    # "During" is the steady state the competitor's cycles led to (the last one's end to off);
    # without them (the baselines, or TCC at the cap), its second half.
    during_lo = ends_during[-1][0] if len(ends_during) == COMPETE_CYCLES else on + (off - on) / 2
    ratio = lambda e: e[1] / pre if pre else None
    out = {"on": on, "off": off, "threads": ex.get("threads"), "pre": pre, "during_from": during_lo,
           "ends_during": ends_during, "ends_after": ends_after,
           "fall": ratio(ends_during[-1]) if len(ends_during) == COMPETE_CYCLES else None,
           "back": ratio(ends_after[-1]) if len(ends_after) == COMPETE_CYCLES else None,
           "before": mean_target(targets, max(rec["warmup_s"], on - 30), on),
           "during": mean_target(targets, during_lo, off),
           "after": mean_target(targets, off, end),
           "util_before": samples_rate(rec["samples"], max(rec["warmup_s"], on - 30), on, 2),
           "util_during": samples_rate(rec["samples"], during_lo, off, 2),
           "util_after": samples_rate(rec["samples"], max(off, end - 60), end, 2),
           "thr_before": samples_rate(rec["samples"], max(rec["warmup_s"], on - 30), on, 1),
           "thr_during": samples_rate(rec["samples"], during_lo, off, 1),
           "thr_after": samples_rate(rec["samples"], max(off, end - 60), end, 1)}
    c_off = cycle_at(trace, off)
    returned = None
    if pre:
        near = lambda n: abs(n - pre) <= RETURN_TOLERANCE * pre
        # The count may already sit within the band when the competitor leaves.
        last = [n for at, n in targets if at <= off]
        if last and near(last[-1]):
            returned = (off, last[-1], c_off)
        else:
            returned = next(((at, n, cycle_at(trace, at)) for at, n in targets if at >= off and near(n)), None)
    out.update(cycle_off=c_off, cycle_end=cycle_at(trace, end), returned=returned,
               returned_ok=returned is not None and returned[2] <= c_off + RETURN_CYCLES)
    return out


def ends_text(ends):
    """Cycle-end counts, e.g. "5 (c2, 180s), 4 (c3, 260s)"; "-" when none."""
    return ", ".join(f"{n} (c{c}, {at:.0f}s)" for at, n, c in ends) or "-"


def competitor_report(ctx, results):
    steady = next((r["spec"] for r in results if r.get("spec", "").startswith("tcc")), None)
    lines = [f"== competitor: {SCENARIOS['competitor']['title']} -- service {ctx['sc']['service_ms']} ms CPU + "
             f"{ctx['sc']['delay_ms']} ms delay; tune-compete (bursts {ctx['sc']['service_ms']} ms CPU + "
             f"{ctx['sc']['delay_ms']} ms sleeps per thread) on CPU {ctx['args'].service_cpu}, threads = TCC's "
             f"steady count, on until TCC ended {COMPETE_CYCLES} cycles (+ the hold, within a cap); TCC's spec "
             f"here: {steady}; baselines get a fixed schedule on their own clock; 'during' is from the end "
             f"of cycle {COMPETE_CYCLES} with it (else its second half)"]
    head = ["controller", "on-off s", "thr before/during/after", "count before/during/after", "svc CPU b/d/a",
            f"cycle ends with it (first {COMPETE_CYCLES})", "cycle ends after", "returned"]
    rows, tt = [], []
    for r in results:
        a = competitor_analysis(r)
        if not a:
            rows.append([r["label"], "error: " + (r.get("error") or "no competitor")[-60:], "", "", "", "", "", ""])
            continue
        ret = a["returned"]
        is_tcc = r["spec"].startswith("tcc")
        rows.append([r["label"], f"{a['on']:.0f}-{a['off']:.0f}",
                     "/".join(fmt(a[k], "{:.0f}") for k in ("thr_before", "thr_during", "thr_after")),
                     "/".join(fmt(a[k]) for k in ("before", "during", "after")),
                     "/".join(pct(a[k]) for k in ("util_before", "util_during", "util_after")),
                     ends_text(a["ends_during"]) if is_tcc else "", ends_text(a["ends_after"]) if is_tcc else "",
                     (f"{ret[1]} at {ret[0]:.0f}s, cycle {ret[2]} (left in {a['cycle_off']})" if ret else "no")])
        r["competitor"] = a
        if r["label"] in ("tcc", HINT_LABEL):
            prefix = "" if r["label"] == "tcc" else f"{r['label']}: "
            pre = a["pre"]
            if pre:
                tt.append((prefix + f"count at the end of cycle {COMPETE_CYCLES} with the competitor / before "
                           "(spec: 40-65%)",
                           pct(a["fall"]) if a["fall"] is not None else
                           f"no cycle {COMPETE_CYCLES} before it left ({len(a['ends_during'])} ended)", "info"))
                tt.append((prefix + f"count at the end of cycle {COMPETE_CYCLES} after it / before (spec: +-15%)",
                           pct(a["back"]) if a["back"] is not None else
                           f"no cycle {COMPETE_CYCLES} by the end ({len(a['ends_after'])} ended)", "info"))
                tt.append((prefix + "service CPU (tact's share of the core) during it (spec: 40-55%)",
                           pct(a["util_during"]), "info"))
            never_left = ret is not None and ret[0] == a["off"]
            tt.append((prefix + f"count back within +-{RETURN_TOLERANCE:.0%} of {fmt(pre)} within {RETURN_CYCLES} cycles",
                       (f"{ret[1]} when it left: the count never moved out" if never_left else
                        f"{ret[1]} at {ret[0]:.0f}s, cycle {ret[2]} vs left in {a['cycle_off']}" if ret
                        else f"not back by the end (cycle {a['cycle_end']})"),
                       "PASS" if a["returned_ok"] else "FAIL"))
            tt.append((prefix + "service CPU after it left (spec: 85-95%)", pct(a["util_after"]), "info"))
            if not r.get("extra", {}).get("steady_before"):
                tt.append((prefix + "tcc was steady before the competitor", "no (started at the deadline)", "FAIL"))
    lines += ["", table_text(head, rows)]
    return lines, tt, {}, lambda: plot_timeline("competitor", results, ctx["outdir"])


def pools_analysis(pair):
    a, b = pair["first"], pair["second"]
    if a.get("error") or b.get("error"):
        return None
    lo, hi = pair["together"]
    xa = samples_rate(a["samples"], lo, hi, 1)
    xb = b["window"]["throughput"]
    solo = samples_rate(a["samples"], a["warmup_s"], pair["alone_end"], 1)
    if xa is None:
        return None
    s = xa + xb
    jain = s * s / (2 * (xa * xa + xb * xb)) if s > 0 else None
    ta = [list(t) for t in a["targets"]]
    solo_count = mean_target(ta, a["warmup_s"], pair["alone_end"])
    turns = [r.get("turns") for r in (a, b)]
    return {"turns": turns if all(turns) else None,
            "solo": solo, "solo_count": solo_count, "first": xa, "second": xb, "sum": s,
            "share_first": xa / s if s else None, "share_second": xb / s if s else None, "jain": jain,
            "count_first": mean_target(ta, lo, hi),
            "count_second": (b["window"].get("count") or {}).get("mean")}


def pools_report(ctx, results, pairs):
    static = [r for r in results if r["spec"].startswith("static:")]
    xmax, _ = references(static, lambda w: w.get("service_util"))
    cap = xmax[1] if xmax else None
    sc = ctx["sc"]
    lines = [f"== pools: {SCENARIOS['pools']['title']} -- front {sc['front_ms']} ms, service {sc['service_ms']} ms "
             f"CPU + {sc['delay_ms']} ms delay; both drivers on CPU {ctx['args'].driver_cpu}; capacity = the best "
             "static size's throughput (one driver)"]
    if static:
        lines.append(f"   static sweep (capacity): {len(static)} sizes, coarse ({compact([int(r['spec'].split(':')[1]) for r in static])})")
    if xmax:
        lines.append(f"capacity = {cap:.0f}/s at static:{xmax[0]} (service CPU {pct(xmax[2])})")
    head = ["pair", "alone thr (vs cap)", "together: first/second", "shares", "Jain", "sum vs cap",
            "counts alone; together", "turns (s waited)"]
    rows, tt = [], []
    for pair in pairs:
        an = pools_analysis(pair)
        pair["analysis"] = an
        if not an:
            rows.append([pair["policy"], "error", "", "", "", "", "", ""])
            continue
        rows.append([pair["policy"], f"{fmt(an['solo'], '{:.0f}')} ({pct(an['solo'] / cap) if cap and an['solo'] else '-'})",
                     f"{an['first']:.0f}/{an['second']:.0f}",
                     f"{pct(an['share_first'])}/{pct(an['share_second'])}", fmt(an["jain"], "{:.3f}"),
                     pct(an["sum"] / cap) if cap else "-",
                     f"{fmt(an['solo_count'])}; {fmt(an['count_first'])}/{fmt(an['count_second'])}",
                     "/".join(f"{t['turns']} ({secs(t['waited']):.0f})" for t in an["turns"]) if an["turns"] else "-"])
        if pair["policy"] in ("tcc", HINT_LABEL) + tuple(label_of(t) for t in TURNS_POLICIES):
            prefix = "" if pair["policy"] == "tcc" else f"{pair['policy']}: "
            ok = all(s is not None and SHARE_BAND[0] <= s <= SHARE_BAND[1]
                     for s in (an["share_first"], an["share_second"]))
            tt.append((prefix + f"two pools each {SHARE_BAND[0]:.0%}-{SHARE_BAND[1]:.0%} of the sum",
                       f"{pct(an['share_first'])} / {pct(an['share_second'])}", "PASS" if ok else "FAIL"))
            tt.append((prefix + "Jain index (spec: >= 0.95)", fmt(an["jain"], "{:.3f}"), "info"))
            if cap:
                tt.append((prefix + "sum vs capacity (spec: 85-97%)", pct(an["sum"] / cap), "info"))
                tt.append((prefix + "alone vs capacity (spec: >= 85%)",
                           pct(an["solo"] / cap) if an["solo"] else "-", "info"))
    lines += ["", table_text(head, rows)]
    refs = {"capacity": xmax and dict(zip(("size", "throughput", "util"), xmax))}
    return lines, tt, refs, lambda: plot_timeline("pools", [r for p in pairs for r in (p["first"], p["second"])],
                                                  ctx["outdir"], pairs)


# --------------------------------------------------------------------------
# scenario runners

def run_sweep(ctx, p, policies, partial):
    runs = plan(ctx["name"], p, ctx["args"], policies)
    results = []
    for i, (label, spec, warmup, seconds) in enumerate(runs):
        spec, err = resolve_spec(spec, results)
        if err:
            log(f"{label} skipped: {err}")
            results.append({"label": label, "spec": spec, "error": err})
            partial(results[-1])
            continue
        log(f"[{ctx['name']} {i + 1}/{len(runs)}] {label} ({spec}): {warmup:g}+{seconds:g} s")
        rec = run_one(ctx, label, spec, warmup, seconds)
        if rec.get("error"):
            log(f"{label} failed: {rec['error']}")
        results.append(slim(rec))
        partial(results[-1])
    return results


def start_competitor(ctx, threads):
    cmd = ["taskset", "-c", str(ctx["args"].service_cpu), os.path.join(ctx["bindir"], "tune-compete"),
           "--threads", str(threads), "--burst-ms", str(ctx["sc"]["service_ms"]),
           "--sleep-ms", str(ctx["sc"]["delay_ms"]), "--seed", str(ctx["args"].seed + 7)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return CLEANUP.push("competitor", lambda: terminate_tree(proc.pid))


def run_competitor(ctx, p, policies, partial):
    """TCC until steady (or a deadline), then after compete_hold s the competitor until TCC has
    ended COMPETE_CYCLES cycles with it, plus compete_hold s of the last one's steady state (at
    most compete_on s in all), then the rest of the run; each baseline with a fixed schedule."""
    results, schedule = [], {}
    for pol in scenario_policies("competitor", policies):
        is_tcc = pol in TCC_POLICIES
        warmup = p["compete_warmup"] if is_tcc else min(p["compete_warmup"], p["adaptive_warmup"])
        seconds = p["compete_seconds"] if is_tcc else p["compete_base_seconds"]
        state = {"steady": None, "on": None, "off": None, "entries": []}
        ready, cycled = threading.Event(), threading.Event()

        def on_steady(at, n, state=state, ready=ready, cycled=cycled):
            # Each entry into Steady ends a cycle; the driver's reader thread calls this.
            state["entries"].append(at)
            if state["steady"] is None:
                state["steady"] = (at, n)
                ready.set()
            on = state["on"]
            if on is not None and sum(a > on for a in state["entries"]) >= COMPETE_CYCLES:
                cycled.set()

        spec = compete_spec(pol, p)
        log(f"[competitor] {pol} ({spec}): {warmup:g}+{seconds:g} s")
        d = Driver(ctx["bindir"], ctx["args"].driver_cpu, ctx["addr"], label_of(pol), spec, warmup,
                   seconds, ctx["args"], ctx["sc"], ctx["outdir"], on_steady if is_tcc else None)
        d.started.wait(30)
        if is_tcc:
            # Steady first (or the deadline), then compete_hold s of steady time before it starts.
            ready.wait(max(0.0, p["compete_deadline"] - d.now()))
            pre = state["steady"][1] if state["steady"] else None
            steady_before = pre is not None
            on_at = d.now() + p["compete_hold"]
            # Without a steady count, as many threads as the default n_init (the online CPUs).
            threads = pre or os.cpu_count()
            schedule.update(threads=threads, pre=pre)
        else:
            # The baselines have no Steady: the middle third of the window, the same threads.
            on_at = warmup + seconds / 3
            threads = schedule.get("threads") or os.cpu_count()
            steady_before = None
        time.sleep(max(0.0, on_at - d.now()))
        state["on"] = d.now()
        item = start_competitor(ctx, threads)
        log(f"competitor on at {state['on']:.0f}s: {threads} threads")
        if is_tcc:
            cap = state["on"] + p["compete_on"]
            if cycled.wait(p["compete_on"]):
                log(f"tcc ended {COMPETE_CYCLES} cycles with the competitor at {d.now():.0f}s")
            time.sleep(max(0.0, min(p["compete_hold"], cap - d.now())))
        else:
            time.sleep(seconds / 3)
        CLEANUP.pop(item)
        state["off"] = d.now()
        log(f"competitor off at {state['off']:.0f}s")
        rec = d.wait()
        rec["extra"] = {"on": state["on"], "off": state["off"], "threads": threads,
                        "pre_count": schedule.get("pre") if is_tcc else None,
                        "steady_before": steady_before}
        attach_probe(rec, [], d.t0, util_cpu)
        results.append(slim(rec))
        partial(results[-1])
    return results


def run_pools(ctx, p, policies, partial):
    """A static sweep (the capacity), then per policy a pair: the first driver alone, then the
    second joins; both end together."""
    sweep = run_sweep(ctx, p, [], partial)
    pairs = []
    for pol in scenario_policies("pools", policies):
        is_tcc = pol in TCC_POLICIES
        alone = p["pools_alone"] if is_tcc else p["pools_base_alone"]
        together = p["pools_together"] if is_tcc else p["pools_base_together"]
        w = p["pools_warmup"] if is_tcc else min(p["pools_warmup"], p["adaptive_warmup"])
        w2 = min(p["pools_second_warmup"], together / 3)
        log(f"[pools] {pol} pair: first alone {w:g}+{alone:g} s, then together {together:g} s")
        # One key per pair, so that no pair waits for another's lock.
        key = f"tact-bench-pools-{os.getpid()}-{pol.replace('+', '-')}" if pol in TURNS_POLICIES else None
        first = Driver(ctx["bindir"], ctx["args"].driver_cpu, ctx["addr"], f"{label_of(pol)} first", spec_of(pol),
                       w, alone + together, ctx["args"], ctx["sc"], ctx["outdir"], coordinate=key)
        first.started.wait(30)
        time.sleep(max(0.0, w + alone - first.now()))
        second_at = first.now()
        second = Driver(ctx["bindir"], ctx["args"].driver_cpu, ctx["addr"], f"{label_of(pol)} second", spec_of(pol), w2,
                        max(1.0, w + alone + together - second_at - w2), ctx["args"], ctx["sc"], ctx["outdir"],
                        coordinate=key)
        ra, rb = first.wait(), second.wait()
        if key:
            shutil.rmtree(os.path.join(ctx["outdir"], "runtime"), ignore_errors=True)
        for r in (ra, rb):
            attach_probe(r, [], first.t0 if r is ra else second.t0, util_cpu)
        offset = (second.t0 - first.t0) if (second.t0 and first.t0) else second_at
        if not rb.get("error"):
            # The second driver's clock, moved onto the first's, for the plot.
            rb["extra"] = {"offset": offset}
        pair = {"policy": label_of(pol), "first": slim(ra), "second": slim(rb), "alone_end": w + alone,
                "together": (offset + w2, w + alone + together)}
        pairs.append(pair)
        partial({"pair": pol, "first": pair["first"]["label"], "second": pair["second"]["label"]})
    return sweep, pairs


# --------------------------------------------------------------------------
# memory-switch: X2's switch at time T, PSI off and on

def set_mode(addr, spec):
    """Switches the service's mode (protocol `M SPEC`) over a connection of its own."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(f"M {spec}\n".encode())
        reply = s.makefile().readline().strip()
    if reply != "K":
        raise RuntimeError(f"the service refused mode {spec}: {reply}")


def restart_service(ctx):
    """A fresh service in cpu mode, with the data file's cache dropped: each run starts with no
    slice resident and no refault history."""
    ctx["service"].stop()
    drop_cache(ctx["data"])
    svc, args = ctx["svc"], ctx["args"]
    ctx["service"] = Service(ctx["bindir"], args.service_cpu, ctx["sc"], svc["listen"], ctx["outdir"], svc["wrap"],
                             "cpu", svc["reply_bytes"], args.seed)
    ctx["addr"] = ctx["service"].addr


def run_switch(ctx, p, partial):
    """Per repetition, TCC without and with PSI: a fresh service in cpu mode; once TCC is steady
    (or at switch_deadline s) and switch_hold s later, the service switches to mapped slices of
    M MiB, M sized from the count then; switch_after s or more follow."""
    args, results = ctx["args"], []
    seconds, reps = switch_seconds(p), max(1, int(p["switch_reps"]))
    for rep in range(reps):
        for base, spec in SWITCH_ROWS:
            label = f"{base} #{rep + 1}" if reps > 1 else base
            if results:  # setup's service, started with the cache dropped, serves the first run
                restart_service(ctx)
            ready = threading.Event()

            log(f"[memory-switch {rep + 1}/{reps}] {label} ({spec}): {seconds:g} s, the switch at Steady + "
                f"{p['switch_hold']:g} s (at the latest {p['switch_deadline'] + p['switch_hold']:g} s)")
            with Probe(ctx["probe"], period=0.5) as probe:
                # The pool reads the service's own pressure where the machine has one (psi_source).
                cg = ctx["cgroup"]
                d = Driver(ctx["bindir"], args.driver_cpu, ctx["addr"], label, spec, 0.0, seconds, args, ctx["sc"],
                           ctx["outdir"], lambda at, n, ready=ready: ready.set(),
                           psi_cgroup=cg.psi_path if "psi=1" in spec else None)
                d.started.wait(30)
                ready.wait(max(0.0, p["switch_deadline"] - d.now()))
                time.sleep(p["switch_hold"])
                # Steady by the switch: it may have got there during the hold.
                steady_before = ready.is_set()
                # The count TCC holds now, as the driver's latest sample (0.5 s) saw it.
                count = d.target or args.max
                mib = switch.slice_mib(count, ctx["room_mib"])
                mode = f"mapped:{ctx['data']}:{mib}"
                at = d.now()
                set_mode(ctx["addr"], mode)
                log(f"switch at {at:.1f}s: count {count}{'' if steady_before else ' (no Steady yet)'}, M = {mib} MiB, "
                    f"{count} x {mib} = {count * mib} MiB in {ctx['room_mib']} MiB: "
                    f"{switch.overcommit(count, mib, ctx['room_mib']):.2f}x")
                rec = d.wait()
            attach_probe(rec, probe.samples, d.t0, ctx["util_of"])
            out = dict(slim(rec), psi=rec.get("psi"))
            if not rec.get("error"):
                series = [[round(t - d.t0, 3), v.get("refaults"), v.get("psi_some_us"), v.get("psi_full_us")]
                          for t, v in probe.samples]
                out["extra"] = {"switch_at": at, "count_at_switch": count,
                                "slice_mib": mib, "room_mib": ctx["room_mib"], "mode": mode,
                                "overcommit": switch.overcommit(count, mib, ctx["room_mib"]),
                                "probe": series}
                out["switch"] = switch_analysis(out)
            else:
                log(f"{label} failed: {rec['error']}")
            results.append(out)
            partial(results[-1])
    return results


def switch_analysis(rec):
    """One run's figures around the switch at T: throughput before (its last steady period before T,
    at most 30 s), the trough (the lowest SWITCH_BIN_S bin from T to the first Steady after it)
    and after (TCC's Steady periods from that first Steady on); the counts at T and after; the
    refaults from T to that Steady, their steady rate after it and their peak bin after T; the
    machine's PSI memory "some" and "full" shares from T to that Steady; the steps PSI decided after
    T."""
    ex = rec["extra"]
    t_sw, end = ex["switch_at"], rec["warmup_s"] + rec["seconds"]
    comp = [(s[0], s[1]) for s in rec["samples"]]
    rf = [(t, r) for t, r, _, _ in ex["probe"] if r is not None]
    some = [(t, q) for t, _, q, _ in ex["probe"] if q is not None]
    full = [(t, q) for t, _, _, q in ex["probe"] if q is not None]
    targets, trace = [list(t) for t in rec["targets"]], rec.get("trace") or []
    entries = cycle_ends(trace)
    before = [e for e in entries if e[0] <= t_sw]
    upto = [t for t in trace if secs(t["at"]) <= t_sw]
    recovery = next((e for e in entries if e[0] > t_sw), None)
    rec_at = recovery[0] if recovery else None
    pre_lo = max(before[-1][0] if before else 0.0, t_sw - 30.0, comp[0][0] if comp else 0.0)
    post_hi = rec_at if rec_at is not None else end
    bins = switch.binned_rates(comp, t_sw, max(post_hi, t_sw + SWITCH_BIN_S), SWITCH_BIN_S)
    after = steady_intervals(trace, rec_at, end) if rec_at is not None else []
    span = sum(b - a for a, b in after)
    rf_bins = switch.binned_rates(rf, t_sw, end, SWITCH_BIN_S)
    share = lambda pts: switch.rate_over(pts, [(t_sw, post_hi)])
    return {"switch_at": t_sw, "steady_at_switch": bool(upto) and upto[-1]["to"] == "steady",
            "recovered_at": rec_at, "reexplore_s": None if rec_at is None else rec_at - t_sw,
            "steady_after_s": span,
            "count_before": switch.target_at(targets, t_sw),
            "count_after": sum(mean_target(targets, a, b) * (b - a) for a, b in after) / span if span else None,
            "thr_before": switch.rate_over(comp, [(pre_lo, t_sw)]) if t_sw > pre_lo else None,
            "thr_trough": min((r for _, r in bins), default=None),
            "thr_after": switch.rate_over(comp, after) if after else None,
            "refaults_to_steady": switch.increment(rf, t_sw, rec_at) if rec_at is not None else None,
            "refaults_to_end": switch.increment(rf, t_sw, end),
            "refaults_steady_per_s": switch.rate_over(rf, after) if after else None,
            "refaults_peak_per_s": max((r for _, r in rf_bins), default=None),
            # us of stall per s of wall time, as a fraction
            "psi_some_to_steady": None if share(some) is None else share(some) / 1e6,
            "psi_full_to_steady": None if share(full) is None else share(full) / 1e6,
            "psi_steps_after": sum(1 for t in trace if t.get("psi") and secs(t["at"]) > t_sw)}


def switch_cells(an):
    """A run's analysis as the table's claim cells: drop, recovery, count, steady refaults."""
    v = {k: x for k, x, _ in switch.row_verdicts(an)}
    return {"drop": f"{fmt(an['thr_before'], '{:.0f}')} -> {fmt(an['thr_trough'], '{:.0f}')}/s "
                    f"({fmt(v['drop'], '{:.1f}x')})",
            "recovery": f"{fmt(an['thr_after'], '{:.0f}')}/s ({pct(v['recovery'])})",
            "count": f"{fmt(an['count_before'], '{}')} -> {fmt(an['count_after'])} ({pct(v['count'])})",
            "refaults": (f"{fmt(an['refaults_steady_per_s'], '{:.1f}')}/s vs peak "
                         f"{fmt(an['refaults_peak_per_s'], '{:.0f}')}/s ({fmt(v['refaults steady/peak'], '{:.2%}')})")}


def switch_report(ctx, results):
    sc, ok = ctx["sc"], [r for r in results if r.get("switch")]
    lines = [f"== memory-switch: {sc['title']} -- front {sc['front_ms']} ms, service {sc['service_ms']} ms CPU + "
             f"{sc['delay_ms']} ms delay; spec X2: front 8 ms, web 1 ms, 50 ms delay (here the delay is halved so "
             "the knee lies below n_max, and the front shortened so the driver's one core keeps up)"]
    lines += [f"   {n}" for n in ctx["notes"]]
    head = ["run", "M MiB (overcommit)", "count T -> after", "thr before/trough/after", "re-explore s",
            "refaults T->Steady", "rf/s steady vs peak", "PSI some/full T->Steady", "psi steps"]
    rows = []
    for r in results:
        an = r.get("switch")
        if not an:
            rows.append([r["label"], "error: " + (r.get("error") or "?").splitlines()[-1][:70]] + [""] * 7)
            continue
        ex = r["extra"]
        rows.append([r["label"], f"{ex['slice_mib']} ({ex['overcommit']:.2f}x of {ex['room_mib']})"
                     + ("" if an["steady_at_switch"] else ", not steady at T"),
                     f"{fmt(an['count_before'], '{}')} -> {fmt(an['count_after'])}",
                     "/".join(fmt(an[k], "{:.0f}") for k in ("thr_before", "thr_trough", "thr_after")),
                     fmt(an["reexplore_s"], "{:.0f}", "never steady"),
                     fmt(an["refaults_to_steady"], "{:.0f}",
                         f"({fmt(an['refaults_to_end'], '{:.0f}')} to the end)"),
                     f"{fmt(an['refaults_steady_per_s'], '{:.1f}')} / {fmt(an['refaults_peak_per_s'], '{:.0f}')}",
                     f"{pct(an['psi_some_to_steady'])}/{pct(an['psi_full_to_steady'])}",
                     str(an["psi_steps_after"])])
    lines += ["", table_text(head, rows)]
    # Side by side with the spec: X2's claims per run, then section 6 item 3 from the pairs.
    by = {base: [r for r in ok if r["spec"] == spec] for base, spec in SWITCH_ROWS}
    cols = [base for base, _ in SWITCH_ROWS]
    claims = [("drop", f"throughput drops >= {switch.DROP_MIN:.0f}x", "1,011 -> 58/s (17x)"),
              ("recovery", f"recovers to >= {switch.RECOVER_MIN:.0%} of before", "625/s (62%)"),
              ("count", f"with {switch.COUNT_BAND[0]:.0%}-{switch.COUNT_BAND[1]:.0%} of the count", "69 -> 44 (64%)"),
              ("refaults", f"steady refaults < {switch.REFAULT_STEADY_MAX:.0%} of peak", "< 1%")]
    tt, trows = [], []
    for key, claim, spec_fig in claims:
        cells = []
        for base in cols:
            cells.append("; ".join(switch_cells(r["switch"])[key] for r in by[base]) or "-")
            for r in by[base]:
                verdict = dict((k, o) for k, _, o in switch.row_verdicts(r["switch"]))[
                    "refaults steady/peak" if key == "refaults" else key]
                tt.append((f"{r['label']}: X2 {claim}", switch_cells(r["switch"])[key],
                           {True: "PASS", False: "FAIL", None: "FAIL (unmeasured)"}[verdict]))
        trows.append([f"X2: {claim}", spec_fig] + cells)
    psi_rows = switch.psi_verdicts([r["switch"] for r in by[cols[0]]], [r["switch"] for r in by[cols[1]]])
    (_, share, ok_share), (_, thr, ok_thr) = psi_rows
    n_pairs = min(len(by[cols[0]]), len(by[cols[1]]))
    sums = lambda rs: "+".join(fmt(r["switch"]["refaults_to_steady"], "{:.0f}", "never") for r in rs) or "-"
    trows.append([f"6.3: refaults T->Steady, on <= {switch.PSI_REFAULTS_MAX:.0%} of off",
                  "sim: 15.6%", sums(by[cols[0]]), f"{sums(by[cols[1]])} ({pct(share)} of off)"])
    thr_cells = [" ".join(fmt(r["switch"]["thr_after"], "{:.0f}") for r in by[b]) or "-" for b in cols]
    trows.append([f"6.3: steady throughput within {switch.PSI_STEADY_TOL:.0%}", "sim: 100.0%", thr_cells[0],
                  f"{thr_cells[1]} ({pct(thr)} of off)"])
    verdict = lambda o: {True: "PASS", False: "FAIL", None: "FAIL (unmeasured)"}[o]
    if n_pairs:
        tt.append((f"6.3: refaults T->Steady with PSI <= {switch.PSI_REFAULTS_MAX:.0%} of without ({n_pairs} pairs)",
                   pct(share), verdict(ok_share)))
        tt.append((f"6.3: steady throughput with PSI within {switch.PSI_STEADY_TOL:.0%} ({n_pairs} pairs)",
                   pct(thr), verdict(ok_thr)))
    lines += ["", table_text(["claim", "spec [sim]", cols[0], cols[1]], trows)]
    refs = {"psi": {"refaults_share": share, "steady_throughput_ratio": thr, "pairs": n_pairs}}
    return lines, tt, refs, lambda: plot_switch(results, ctx["outdir"])


# --------------------------------------------------------------------------
# plots

COLORS = {"tcc": "tab:green", EXT_FILE: "darkgreen", EXT_JOBSERVER: "limegreen", "aimd": "tab:orange", "vegas": "tab:purple", "gradient2": "tab:brown",
          "envoy": "tab:pink", "hill": "tab:gray", VEGAS_PLUS: "tab:red", VEGAS_PP: "darkviolet"}


def color(r):
    if "paper" in r["label"]:
        return "tab:olive"
    if "turns" in r["label"]:
        return "tab:red" if r["spec"] == HINT_SPEC else "tab:blue"
    if is_hint_spec(r["spec"]):
        return "tab:cyan"
    return COLORS.get(r["spec"].split(":")[0], "tab:blue")


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        log("plot skipped: matplotlib not installed (pip install -r bench/requirements.txt)")
        return None


def shade_steady(ax, r, end):
    for a, b in steady_intervals(r.get("trace"), 0, end):
        ax.axvspan(a, b, color="tab:green", alpha=0.1)


def plot_sweep(name, static, adaptive, xmax, x95, outdir):
    plt = pyplot()
    if not plt:
        return []
    uk = util_key_of(name) if name != "memory" else (lambda w: w.get("service_util"))
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(11, 9))
    st = sorted((int(r["spec"].split(":")[1]), r["window"]) for r in static if not r.get("error"))
    if st:
        ax.plot([n for n, _ in st], [w["throughput"] for _, w in st], "k.-", lw=1, label="static pool")
        ux = ax.twinx()
        ux.plot([n for n, _ in st], [100 * (uk(w) or 0) for _, w in st], color="0.6", ls=":", lw=1)
        ux.axhspan(100 * UTIL_BAND[0], 100 * UTIL_BAND[1], color="tab:green", alpha=0.08)
        what = "service CPU" if name == "memory" else SCENARIOS[name]["bottleneck"]
        ux.set_ylabel(f"{what} % (static; band 85-95%)")
        ux.set_ylim(0, 105)
    for ref, rname in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            ax.axhline(ref[1], color="0.5", lw=0.6, ls="--")
            ax.annotate(f"{rname} (static:{ref[0]})", (1, ref[1]), fontsize=7, va="bottom")
    for r in adaptive:
        if r.get("error") or not r["window"].get("count"):
            continue
        for period, marker, suffix in ((r["window"], "o", ""), (r.get("steady"), "*", " steady")):
            if not period or not period.get("count"):
                continue
            c = period["count"]
            # A time-weighted mean of a constant count can round to just below it (6.999...
            # against 7): matplotlib refuses a negative bar.
            bars = [[max(0.0, c["mean"] - c["min"])], [max(0.0, c["max"] - c["mean"])]]
            ax.errorbar([c["mean"]], [period["throughput"]], xerr=bars,
                        fmt=marker, color=color(r), ms=8 if marker == "*" else 6, capsize=3,
                        label=f"{r['label']}{suffix}")
    ax.set_xlabel("workers (static size; controllers: time-weighted mean, bars min-max)")
    ax.set_ylabel("completions/s")
    ax.set_title(f"{SCENARIOS[name]['title']}: throughput vs concurrency")
    ax.legend(fontsize=7, loc="lower right")
    for r in adaptive:
        if r.get("error") or not r.get("targets"):
            continue
        end = r["warmup_s"] + r["seconds"]
        pts = r["targets"] + [[end, r["targets"][-1][1]]]
        bx.step([q[0] for q in pts], [q[1] for q in pts], where="post", color=color(r),
                lw=1.2 if r["spec"] == "tcc" else 0.8, label=r["label"])
        if r["spec"] == "tcc":
            shade_steady(bx, r, end)
    for ref, rname in ((xmax, "X*_max"), (x95, "X*_95")):
        if ref:
            bx.axhline(ref[0], color="0.5", lw=0.6, ls="--")
            bx.annotate(f"{rname} size", (0, ref[0]), fontsize=7, va="bottom")
    bx.set_xlabel("s since the pool's start (tcc: Steady periods shaded)")
    bx.set_ylabel("target workers")
    bx.set_title("targets over time")
    bx.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path = os.path.join(outdir, f"tune-{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_timeline(name, runs, outdir, pairs=None):
    """Targets (and throughput) over time, one panel per run: the competitor's on/off, or the two
    pools of each pair on the first one's clock."""
    plt = pyplot()
    if not plt:
        return []
    groups = [[p["first"], p["second"]] for p in pairs] if pairs else [[r] for r in runs]
    fig, axes = plt.subplots(len(groups), 1, figsize=(11, 2.6 * len(groups) + 1), squeeze=False)
    for ax, group in zip(axes[:, 0], groups):
        tx = ax.twinx()  # one throughput axis per panel, shared by its runs
        tx.set_ylabel("completions/s (faint)", fontsize=7)
        for k, r in enumerate(group):
            if r.get("error") or not r.get("targets"):
                continue
            off = (r.get("extra") or {}).get("offset", 0) if pairs else 0
            end = r["warmup_s"] + r["seconds"]
            pts = r["targets"] + [[end, r["targets"][-1][1]]]
            ax.step([q[0] + off for q in pts], [q[1] for q in pts], where="post", color=color(r),
                    ls="-" if k == 0 else "--", label=f"{r['label']} target")
            thr = [(b[0] + off, (b[1] - a[1]) / (b[0] - a[0])) for a, b in zip(r["samples"], r["samples"][1:])
                   if b[0] > a[0]]
            if thr:
                tx.plot([x for x, _ in thr], [y for _, y in thr], color=color(r), alpha=0.25, lw=0.6,
                        ls="-" if k == 0 else "--")
            if r["spec"].startswith("tcc") and k == 0:
                shade_steady(ax, r, end)
            ex = r.get("extra") or {}
            if ex.get("on") is not None:
                ax.axvspan(ex["on"], ex["off"], color="tab:red", alpha=0.08, label="competitor")
        ax.set_ylabel("target workers")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("s since the (first) pool's start; tcc Steady shaded green")
    fig.suptitle(SCENARIOS[name]["title"])
    fig.tight_layout()
    path = os.path.join(outdir, f"tune-{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_switch(results, outdir):
    """Per run: throughput and the target around the switch (TCC's Steady shaded), and the cgroup's
    refaults with the machine's PSI memory "some" share, in SWITCH_BIN_S bins."""
    plt = pyplot()
    runs = [r for r in results if r.get("switch")]
    if not plt or not runs:
        return []
    fig, axes = plt.subplots(len(runs), 2, figsize=(13, 2.8 * len(runs) + 1), squeeze=False)
    for (ax, bx), r in zip(axes, runs):
        end, t_sw = r["warmup_s"] + r["seconds"], r["extra"]["switch_at"]
        comp = [(q[0], q[1]) for q in r["samples"]]
        thr = switch.binned_rates(comp, 0.0, end, SWITCH_BIN_S)
        ax.plot([a + SWITCH_BIN_S / 2 for a, _ in thr], [y for _, y in thr], color=color(r), lw=1)
        ax.set_ylabel("completions/s")
        ax.set_title(f"{r['label']}: M = {r['extra']['slice_mib']} MiB at {t_sw:.0f}s", fontsize=9)
        tx = ax.twinx()
        pts = r["targets"] + [[end, r["targets"][-1][1]]]
        tx.step([q[0] for q in pts], [q[1] for q in pts], where="post", color="0.3", lw=0.8)
        tx.set_ylabel("target workers", fontsize=8)
        shade_steady(ax, r, end)
        probe = r["extra"]["probe"]
        rf = switch.binned_rates([(t, v) for t, v, _, _ in probe if v is not None], 0.0, end, SWITCH_BIN_S)
        bx.plot([a + SWITCH_BIN_S / 2 for a, _ in rf], [max(y, 0.1) for _, y in rf], color="tab:red", lw=1)
        bx.set_yscale("log")
        bx.set_ylabel("refaults/s (log)")
        px = bx.twinx()
        for i, (kind, ls) in enumerate((("some", "-"), ("full", ":")), start=2):
            psi = switch.binned_rates([(q[0], q[i] / 1e4) for q in probe if q[i] is not None], 0.0, end,
                                      SWITCH_BIN_S)
            px.plot([a + SWITCH_BIN_S / 2 for a, _ in psi], [y for _, y in psi], color="tab:purple", lw=0.8,
                    ls=ls, alpha=0.7, label=f"PSI memory {kind}")
        px.set_ylabel("PSI memory % (machine; full dotted)", fontsize=8)
        for x in (ax, bx):
            x.axvline(t_sw, color="k", ls="--", lw=0.8)
    for x in axes[-1]:
        x.set_xlabel("s since the pool's start (switch dashed; Steady shaded green)")
    fig.suptitle(SCENARIOS["memory-switch"]["title"])
    fig.tight_layout()
    path = os.path.join(outdir, "tune-memory-switch.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# --------------------------------------------------------------------------

def environment(cpus):
    env = {"kernel": f"Linux {platform.release()}", "cpus": len(cpus),
           "loadavg_start": open("/proc/loadavg").read().split()[:3], "python": platform.python_version(),
           "swap": has_swap()}
    try:
        env["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip()
    except OSError:
        pass
    return env


def report_scenario(name, ctx, data):
    if name == "competitor":
        lines, tt, refs, plotter = competitor_report(ctx, data["results"])
    elif name == "pools":
        lines, tt, refs, plotter = pools_report(ctx, data["results"], data["pairs"])
    elif name == "memory-switch":
        lines, tt, refs, plotter = switch_report(ctx, data["results"])
    else:
        lines, tt, refs, plotter = sweep_report(name, ctx, data["results"])
    errs = [r for r in data["results"] if r.get("error")]
    if errs:
        lines += ["", f"{len(errs)} run(s) failed: " + "; ".join(f"{r['label']}: {r['error'][-120:]}" for r in errs[:4])]
    text = "\n".join(lines)
    print(text, flush=True)
    outdir = ctx["outdir"]
    with open(os.path.join(outdir, f"table-{name}.txt"), "w") as f:
        f.write(text + "\n")
    out = {"scenario": name, "service": ctx["sc"], "mode": ctx["mode"], "notes": ctx["notes"], **refs,
           "targets": [dict(zip(("criterion", "value", "verdict"), t)) for t in tt], "results": data["results"]}
    if "pairs" in data:
        out["pairs"] = data["pairs"]
    with open(os.path.join(outdir, f"results-{name}.json"), "w") as f:
        json.dump(out, f, indent=1)
    files = plotter()
    log(f"wrote results-{name}.json, table-{name}.txt" + "".join(", " + os.path.basename(x) for x in files))
    return text, tt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=",".join(ALL_SCENARIOS),
                    help=f"comma list of {', '.join(SCENARIO_NAMES)} (default: all but x7, memory-switch and dask, "
                    "in that order)")
    ap.add_argument("--quick", action="store_true", help="~9-minute smoke run of every scenario")
    ap.add_argument("--sizes", help="static sizes for every scenario, e.g. 1-64 or 1-16,20,24 ('' for none; "
                    f"default: cpu 1-64, the others {COARSE})")
    ap.add_argument("--policies", default=f"tcc,{EXT_FILE},{EXT_JOBSERVER},{HINT},{TURNS},{HINT_TURNS},"
                    + ",".join(BASELINES) + f",{VEGAS_PLUS},{VEGAS_PP}",
                    help=f"adaptive controllers in run order (tcc, {HINT}, aimd, vegas, gradient2, envoy, hill, or "
                    f"any spec; pools only: {TURNS}, {HINT_TURNS}, the pair on one --coordinate key; x7 only: "
                    f"{VEGAS_PLUS}, {VEGAS_PP} (X1 from static:1); cpu only: {EXT_FILE}, {EXT_JOBSERVER}, tact's "
                    "TCC as `tact tune` with the driver as its command, told the count by a workers file or as "
                    "make's jobserver)")
    ap.add_argument("--no-paper", dest="paper", action="store_false",
                    help=f"skip the TCC (paper mode) row ({PAPER_SPEC})")
    for key in PRESETS["default"]:
        if key != "quick_sizes":
            ap.add_argument("--" + key.replace("_", "-"), type=float, help=f"override the preset's {key}")
    ap.add_argument("--front-ms", type=float, help="front service time, ms CPU (default: the scenario's)")
    ap.add_argument("--service-ms", type=float, help="web service time, ms CPU (default: the scenario's)")
    ap.add_argument("--delay-ms", type=float, help="web delay, ms (default: the scenario's)")
    ap.add_argument("--data-file", default="/var/tmp/tact-tune-data.bin",
                    help="the disk and memory scenarios' file (created once, reused)")
    ap.add_argument("--data-mib", type=int, default=1024, help="its size, MiB (>= 1024 for X3)")
    ap.add_argument("--mem-slice-mib", type=int, default=16, help="memory: MiB per connection (request)")
    ap.add_argument("--mem-workers", type=int, default=3, help="memory: connections the limit holds")
    ap.add_argument("--mem-base-mib", type=int, default=24, help="memory: the limit's share for the service itself")
    ap.add_argument("--switch-room-mib", type=int, default=96,
                    help="memory-switch: the limit's room for the slices (the limit = base + room)")
    ap.add_argument("--disk-iops", type=int, default=300,
                    help="disk: the service's read IOPS cap (spec X3's io.max; 0 for none: io_ticks)")
    ap.add_argument("--rate-mbit", type=int, default=50, help="net: tbf rate")
    ap.add_argument("--reply-kib", type=int, default=64, help="net: reply size")
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
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its duration, then exit")
    ap.add_argument("--self-test", action="store_true", help="check the memory-switch helpers, then exit")
    args = ap.parse_args()
    if args.self_test:
        switch.self_test()
        return 0

    scenarios = [s.strip() for s in args.scenario.split(",") if s.strip()]
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error(f"--scenario: unknown {s!r} (expected {', '.join(SCENARIO_NAMES)})")
    preset = "quick" if args.quick else "default"
    p = dict(PRESETS[preset])
    for key in p:
        v = getattr(args, key, None)
        if v is not None:
            p[key] = v
    if args.sizes is not None:
        try:
            parse_sizes(args.sizes)
        except ValueError as e:
            ap.error(f"--sizes: {e}")
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    log(f"controllers: {', '.join(policies)}")
    est = {s: estimate(s, p, args, policies) for s in scenarios}
    for s in scenarios:
        n = len(scenario_sizes(s, p, args))
        log(f"{s}: {n} static sizes, about {est[s] / 60:.1f} min")
    total = sum(est.values())
    log(f"preset {preset}: estimated duration {total / 60:.1f} min (+ the build, + creating the data file once)")
    if args.dry_run:
        return 0
    if not shutil.which("taskset"):
        raise SystemExit("taskset not found (util-linux)")
    needs_root = [s for s in scenarios if s in ("memory", "memory-switch", "net") or (s == "disk" and args.disk_iops)]
    if needs_root and os.geteuid() != 0:
        raise SystemExit(f"scenarios {', '.join(needs_root)} need root (a memory cgroup, a network namespace)")
    cpus = sorted(os.sched_getaffinity(0))
    for c in (args.service_cpu, args.driver_cpu):
        if c not in cpus:
            ap.error(f"CPU {c} is not available here ({cpus})")

    outdir = os.path.abspath(args.out)
    os.makedirs(outdir, exist_ok=True)
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/tune")
    bindir = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release") \
        if args.no_build else build(args.cargo)
    env = environment(cpus)
    cfg = dict(p, preset=preset, scenarios=scenarios, policies=policies, paper=PAPER_SPEC if args.paper else None,
               max=args.max, init=args.init, seed=args.seed, service_cpu=args.service_cpu,
               driver_cpu=args.driver_cpu, estimate_s=round(total))
    partial_path = os.path.join(outdir, "results.partial.jsonl")
    with open(partial_path, "w") as f:
        f.write(json.dumps({"config": cfg, "env": env}) + "\n")

    def partial(rec):
        with open(partial_path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    texts, summary = [], []
    x1 = None  # X1's results and references, for Dask mode's check against in-process
    for name in scenarios:
        t = time.monotonic()
        ctx = setup(name, args, p, bindir, outdir)
        ctx["in_process"] = x1
        try:
            if name == "competitor":
                data = {"results": run_competitor(ctx, p, policies, partial)}
            elif name == "pools":
                sweep, pairs = run_pools(ctx, p, policies, partial)
                data = {"results": sweep, "pairs": pairs}
            elif name == "memory-switch":
                data = {"results": run_switch(ctx, p, partial)}
            else:
                data = {"results": run_sweep(ctx, p, policies, partial)}
        finally:
            teardown(ctx)
        text, tt = report_scenario(name, ctx, data)
        if name == "cpu":
            x1 = (data["results"], *references([r for r in data["results"] if r["spec"].startswith("static:")],
                                                util_key_of(name)))
        texts.append(text)
        summary += [(name, *row) for row in tt]
        log(f"{name} took {time.monotonic() - t:.0f} s (estimated {est[name]:.0f} s)")
    env["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    elapsed = time.monotonic() - T0
    head = [f"bench/tune (issue 6): preset {preset}; service on CPU {args.service_cpu}, driver on CPU "
            f"{args.driver_cpu}; {env['kernel']}, {env['cpus']} CPUs, swap {'yes' if env['swap'] else 'no'}, "
            f"load average {' '.join(env['loadavg_start'])} -> {' '.join(env['loadavg_end'])}; total {elapsed:.0f} s"]
    stable = table_text(["scenario", "target", "tact", "verdict"], [list(r) for r in summary]) if summary else \
        "(no targets: no tcc run)"
    text = "\n".join(head + ["", "targets (tact = the default tcc row):", stable])
    print("\n" + text)
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write("\n\n".join(texts + [text]) + "\n")
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"config": cfg, "env": env, "elapsed_s": elapsed,
                   "targets": [dict(zip(("scenario", "criterion", "value", "verdict"), r)) for r in summary],
                   "scenarios": {s: f"results-{s}.json" for s in scenarios}}, f, indent=1)
    CLEANUP.run()
    os.unlink(partial_path)
    log(f"wrote {os.path.join(outdir, 'table.txt')}, results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
