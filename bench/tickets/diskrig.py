"""What bench/tickets' disk experiments (E3 e3.py, E4 e4.py) share: the host they need, the
environment of a session (the benchmark lock, bench/idle's emulated disk with bfq and
low_latency=0, v1 cgroups, the slot file), one run's tasks (started under `tact tickets run` or
directly into cgroups) with their sampling and teardown, and the session's loop and output files.

Safety: the harness is a child subreaper and every task gets SIGTERM when it dies
(PR_SET_PDEATHSIG); cgroups are made only as `tact-test-tickets-<pid>/r<k>` in the cpu, cpuacct and
blkio hierarchies and removed after every run; bench/common's Cleanup undoes the rest (disk, slot
file, temporary directory, lock) on every exit path.
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
# this directory (workload.py), bench/common (the harnesses' lifecycle) and bench/idle (its
# emulated disk, disk.py)
sys.path[:0] = [HERE, BENCH, os.path.join(BENCH, "idle")]

from common.cgroups import remove_stale, remove_tree  # noqa: E402
from common.lifecycle import DEFAULT_LOCK, Cleanup, log, take_lock  # noqa: E402
from common.procs import kill_leftovers, parse_mounts  # noqa: E402
from workload import CGROUP_PREFIX, Slots, set_child_subreaper  # noqa: E402

REGION = 16 << 20           # each reader's own part of the disk
START_TIMEOUT_S = 30.0
TACT_GRACE_S = 8.0          # tact gives its jobs 5 s between SIGTERM and SIGKILL
CLEANUP = Cleanup()


# --------------------------------------------------------------------------
# the session

def arg_parser(doc, modes, quick_help):
    """The options E3 and E4 share; each adds its own before parsing."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--reps", type=int)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--settle", type=float, default=2.0, help="s left out at the start (default 2)")
    ap.add_argument("--modes", default="all", help="comma list of " + ", ".join(modes) + ", or all")
    ap.add_argument("--service-ms", type=float, default=2.0, help="the emulated disk's time per read (default 2)")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tickets"))
    ap.add_argument("--lock", default=DEFAULT_LOCK, help="the benchmark lock ('' skips it)")
    ap.add_argument("--self-test", action="store_true")
    return ap


def chosen_modes(ap, args, modes):
    chosen = modes if args.modes == "all" else [m.strip() for m in args.modes.split(",")]
    bad = [m for m in chosen if m not in modes]
    if bad:
        ap.error(f"unknown mode(s) {', '.join(bad)}")
    return chosen


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


def check_host(experiment, args, modes):
    """Stops with the reason unless this host can run the experiment; its v1 cgroup mounts."""
    if os.geteuid() != 0:
        raise SystemExit(f"bench/tickets {experiment} needs root (a loop device, the bfq scheduler, cgroups)")
    mounts = v1_mounts()
    if "blkio" not in mounts or "cpu" not in mounts:
        raise SystemExit(f"bench/tickets {experiment} needs cgroup v1 cpu and blkio hierarchies (this harness "
                         "does not handle v2)")
    if "tact" in modes and not (os.path.isfile(args.tact) and os.access(args.tact, os.X_OK)):
        raise SystemExit(f"no tact at {args.tact} (make build, or --tact PATH), or --modes without tact")
    return mounts


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def prepare(name, args, mounts, tasks, seconds):
    """Takes the lock and sets up the session (each step registered with CLEANUP): the
    environment of the runs and the host's description for the output."""
    from disk import DiskRig   # bench/idle's emulated disk

    env = argparse.Namespace(seconds=seconds, settle=args.settle, tact=os.path.abspath(args.tact))
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, f"bench/tickets {name}")
    set_child_subreaper()
    CLEANUP.push("descendants", kill_leftovers)
    env.tmp = tempfile.mkdtemp(prefix=f"tact-bench-tickets-{name}-{os.getpid()}-")
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(env.tmp, ignore_errors=True))
    rig = DiskRig(None, args.service_ms, 4096)
    rig.setup(CLEANUP)
    env.dev = rig.dev
    if "[bfq]" not in rig.info["scheduler"]:
        raise SystemExit(f"{env.dev}: the bfq scheduler is not available (scheduler: {rig.info['scheduler']})")
    # bfq's low_latency boosts newly active queues, which would blur the weights under test.
    with open(f"/sys/block/{os.path.basename(env.dev)}/queue/iosched/low_latency", "w") as f:
        f.write("0\n")
    for m in mounts.values():
        for p in remove_stale(m, CGROUP_PREFIX):
            log(f"removed {p}, left by an earlier run")
    env.cgroups = RunCgroups({k: mounts.get(k) for k in ("cpu", "cpuacct", "blkio")})
    CLEANUP.push("cgroups", env.cgroups.remove)
    env.slots = Slots(os.path.join(env.tmp, "slots"), len(tasks))
    CLEANUP.push("slots", env.slots.close)
    envinfo = {"kernel": os.uname().release, "cpus": os.cpu_count(), "disk": (
        f"{env.dev} over bench/idle's FUSE disk ({args.service_ms:g} ms a read), bfq low_latency=0"),
        "rig": rig.info, "loadavg_start": loadavg()}
    return env, envinfo


def base_config(args, env, reps, modes, period_s):
    return {"reps": reps, "seconds": env.seconds, "settle": env.settle, "modes": modes, "tact": env.tact,
            "service_ms": args.service_ms, "region_bytes": REGION, "period_s": period_s}


def run_all(reps, plan, one, label, summary):
    """Runs `one(item, rep, seq)` for each item of `plan(rep)`, rep after rep, logging as it goes;
    the results, and the failures by the items' labels."""
    results, failures, seq = [], {}, 0
    for rep in range(reps):
        for item in plan(rep):
            seq += 1
            log(f"rep {rep + 1}/{reps}: {label(item)}")
            r = one(item, rep, seq)
            results.append(r)
            for note in r["notes"]:
                log(f"  note: {note}")
            if "error" in r:
                failures[label(item)] = r["error"]
                log(f"  failed: {r['error']}" + (f"\n{r.get('tact_stderr', '')}" if r["mode"] == "tact" else ""))
            else:
                log(f"  {summary(r)}")
    return results, failures


def finish(name, out, results, envinfo, write):
    """Writes the output (`write(envinfo)` returns the table), undoes the session; the exit
    status: 1 when a tact run failed."""
    envinfo["loadavg_end"] = loadavg()
    print(write(envinfo))
    CLEANUP.run()
    log(f"wrote {out}/{name}.txt, {name}.json, {name}.png")
    return 1 if any(r["mode"] == "tact" and "error" in r for r in results) else 0


def save(outdir, name, text, doc, figsize, draw):
    """<name>.txt, .json and, when matplotlib is there and doc["analysis"] is not empty, .png: two
    panels side by side drawn by `draw(left, right)`. The table, with a line saying why there is
    no plot if matplotlib is missing."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{name}.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return text + f"no plot: {e} (pip install -r bench/requirements.txt)\n"
    if doc["analysis"]:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=figsize)
        draw(ax, bx)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, f"{name}.png"), dpi=110)
        plt.close(fig)
    return text


# --------------------------------------------------------------------------
# one run

class RunCgroups:
    """tact-test-tickets-<pid> in the v1 hierarchies given (cpu, cpuacct, blkio; E5 adds memory),
    one r<k> per run: --cgroup-parent names the cpu one, and tact uses the same path in the others."""

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


def join_cgroups(procs_files):
    """In the child before exec: SIGTERM when the harness dies, then join the cgroups."""
    def setup():
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        for path in procs_files:
            with open(path, "w") as f:
                f.write(f"{os.getpid()}\n")
    return setup


def stop_tact(tact, err, jlog, res):
    """Ends a `tact tickets run` (SIGTERM, SIGKILL after TACT_GRACE_S) and records in `res` its
    exit, the end of its stderr (`err`, a file it wrote, closed here) and its JSON log's summary."""
    if tact.poll() is None:
        tact.send_signal(signal.SIGTERM)
    try:
        tact.wait(timeout=TACT_GRACE_S)
    except subprocess.TimeoutExpired:
        tact.kill()
        tact.wait()
        res.setdefault("notes", []).append(f"tact did not exit within {TACT_GRACE_S:g} s of SIGTERM: killed")
    err.seek(0)
    res["tact_stderr"] = err.read().decode(errors="replace")[-3000:]
    err.close()
    res["tact_exit"] = tact.returncode
    res["tact_summary"] = tact_summary(jlog)


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


class Run:
    """One run's cgroups and processes: `tact tickets run` with a setup file, or the tasks started
    directly (into cgroups of their own or not). Used as a context manager: an error of the run
    (RuntimeError, OSError, ValueError) is kept in res["error"], the session goes on, and the
    teardown always happens (tact's stderr, exit and summary, and what it left, go into res)."""

    def __init__(self, env, res, tag):
        self.env, self.res, self.tag = env, res, tag
        env.slots.clear()
        # Bounds a task's life should the harness vanish without its SIGTERM.
        self.life = env.seconds + START_TIMEOUT_S + 15
        self.paths, self.procs, self.tact, self.err, self.jlog = {}, [], None, None, None

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        failed = isinstance(exc, (RuntimeError, OSError, ValueError))
        if failed:
            self.res["error"] = str(exc)
        self.teardown()
        return failed

    def reader(self, i):
        """The argv of reader.py as task i (its slot), on its own region of the disk."""
        env = self.env
        return [sys.executable, os.path.join(HERE, "reader.py"), env.dev, str(i), str(REGION), env.slots.path,
                str(os.getpid()), f"{self.life:.0f}"]

    def new_cgroups(self):
        """This run's r<k> in each hierarchy, removed by the teardown."""
        self.paths = self.env.cgroups.new_run()
        return self.paths

    def cgroup(self, hier, task, knobs):
        """The task's cgroup under this run's r<k> in `hier`, with its knobs written; its procs file."""
        d = os.path.join(self.paths[hier], task)
        os.mkdir(d)
        for knob, value in knobs.items():
            with open(os.path.join(d, knob), "w") as f:
                f.write(f"{value}\n")
        return os.path.join(d, "cgroup.procs")

    def start(self, argv, joins=()):
        self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           close_fds=True, preexec_fn=join_cgroups(joins)))

    def start_tact(self, setup_text, prefix=()):
        """tact tickets run on the setup file, its jobs' cgroups under this run's r<k> (made here);
        tact itself joins r<k> in cpuacct, so a usage mirror it makes lands there too."""
        paths = self.new_cgroups()
        setup = os.path.join(self.env.tmp, f"{self.tag}.toml")
        with open(setup, "w") as f:
            f.write(setup_text)
        self.jlog = os.path.join(self.env.tmp, f"{self.tag}.jsonl")
        self.err = open(os.path.join(self.env.tmp, f"{self.tag}.err"), "w+b")
        argv = list(prefix) + [self.env.tact, "tickets", "run", setup, "--backend", "cgroup", "--duration",
                               f"{int(self.life)}s", "--json-log", self.jlog, "--cgroup-parent", paths["cpu"]]
        self.res["knobs"] = {"tact_cmd": " ".join(argv)}
        joins = [os.path.join(paths["cpuacct"], "cgroup.procs")] if "cpuacct" in paths else []
        self.tact = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err,
                                     close_fds=True, preexec_fn=join_cgroups(joins))

    def wait_started(self, count, what):
        """Until each of the `count` slots shows a pid and an iteration; the pids."""
        env = self.env
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(env.slots.pid(i) > 0 and env.slots.iterations(i) > 0 for i in range(count)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {what} did not all start")
            if self.tact is not None and self.tact.poll() is not None:
                raise RuntimeError(f"tact exited with {self.tact.returncode} before its {what} started")
            time.sleep(0.05)
        return [env.slots.pid(i) for i in range(count)]

    def sample(self, period_s, read):
        """`read()` every period_s from now (t0) to t0 + seconds, on a fixed grid so that late
        samples do not drift; [(s since t0, what it read)]."""
        t0 = time.monotonic()
        samples, k = [], 0
        while True:
            t = time.monotonic()
            samples.append((t - t0, read()))
            if t - t0 >= self.env.seconds:
                return samples
            k += 1
            time.sleep(max(0.0, t0 + k * period_s - time.monotonic()))

    def teardown(self):
        res, tact = self.res, self.tact
        if tact is not None:
            stop_tact(tact, self.err, self.jlog, res)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if self.paths:
            left = self.env.cgroups.leftovers(self.paths) if tact is not None else []
            if left:
                res["notes"].append(f"tact left cgroups behind: {left}")
            for p in self.paths.values():
                remove_tree(p)
