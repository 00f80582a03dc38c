#!/usr/bin/env python3
"""bench/tickets E5: a memory-for-disk exchange between two database servers under memory pressure
(tickets spec section 5, E5; issue 7: "memory for disk between two database-like servers ... under
memory pressure in a test cgroup, where the smaller one's working set fits after the exchange").

Two phone-lookup servers (lookup.py, Python's sqlite3, random point queries): *small* on a database
calibrated to SMALL_PAGES pages (it fits only with its floor + about 700 pages, spec E5's calibration)
and *big* on a 64 MiB one, with four iohogs (E3's reader.py: 4 KiB O_DIRECT reads of their own region,
one outstanding) on the same disk: bench/idle's emulated disk (one read at a time, --service-ms each,
bfq, low_latency=0) serving an ext4 image that holds the two databases, mounted
read-only. All six are jobs of `tact tickets run --backend cgroup` with `[memory] arena`: each holds
1000 CPU and 1000 disk tickets, and each server a hard memory floor of 1375 pages.

Scaling: the spec's 16 MiB machine had "about 11.1 MiB reservable", the rest being the kernel's;
here the arena holds those 11.1 MiB as page cache (ARENA_PAGES = 2841 pages, of which the two
floors reserve 2750) plus what the six processes' own memory takes (Python's anonymous memory,
measured at the start: the spec's servers were C programs), and each floor is 1375 pages plus its
server's own memory, so that the page-cache arithmetic is the spec's.

Runs (one per grid point, the exchange in place from the start; the spec's mid-run offer is left
out): `baseline` (no exchange), `m<M>-d<D>` (small gives big D disk tickets for M pages of big's
memory), and what a user would do instead, with the same memory cgroup around the six and equal
blkio.bfq.weight, no floors and no loop: `flat-lru` (one child each, no limits: the kernel's LRU
decides) and `flat-equal` (each server's child limited to half of what the hogs leave). Measured over [warm-up, warm-up + window]: each
server's queries (slot counts), small's and big's page cache (memory.stat total_cache, sampled every
0.5 s), and each job's disk bytes (read_bytes of /proc/PID/io). See bench/tickets/README.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path[:0] = [HERE, BENCH, os.path.join(BENCH, "idle")]

from common.cgroups import remove_stale, remove_tree  # noqa: E402
from common.lifecycle import DEFAULT_LOCK, Cleanup, log, take_lock  # noqa: E402
from common.procs import kill_leftovers, parse_mounts  # noqa: E402
from diskrig import RunCgroups, join_cgroups, stop_tact  # noqa: E402
from workload import CGROUP_PREFIX, Slots, set_child_subreaper  # noqa: E402

PAGE = 4096
ARENA_PAGES = 2841           # spec E5: "about 11.1 MiB reservable" of 16 MiB
FLOOR_PAGES = 1375           # spec E5: each server's hard pages
SMALL_PAGES = 1900           # fits with floor + 700 (2075) and not with floor + 400 (1775)
BIG_PAGES = 16384            # 64 MiB
ROWS_PER_PAGE = 100000 / 886  # lookup rows of ~36 bytes in 4 KiB pages (measured)
REGION = 16 << 20            # each iohog's region of the disk
IMAGE_BYTES = 160 << 20
FLAT = ["flat-lru", "flat-equal"]
SERVERS = ["small", "big"]
HOGS = ["H1", "H2", "H3", "H4"]
JOBS = SERVERS + HOGS
PERIOD_S = 0.5
PRESETS = {"quick": dict(grid=[(700, 400)], warmup=15.0, window=12.0),
           "default": dict(grid=[(100, 400), (400, 400), (700, 400), (700, 200), (700, 600)],
                           warmup=30.0, window=45.0)}
PAPER = ("Sullivan & Seltzer 1999, section 6.6: small gains whenever m >= 400 and by more than 1000% at "
         "m = 700 or 800, where its whole database fits; big gains whenever d >= 600")
CLEANUP = Cleanup()


def sh(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout.strip()


def write(path, text):
    with open(path, "w") as f:
        f.write(f"{text}\n")


def build_image(tmp):
    """An ext4 image with small.db and big.db; (image, rows per database, pages per database)."""
    import sqlite3
    image, mnt = os.path.join(tmp, "e5.img"), os.path.join(tmp, "build")
    with open(image, "wb") as f:
        f.truncate(IMAGE_BYTES)
    sh("mkfs.ext4", "-q", "-F", "-b", "4096", image)
    os.mkdir(mnt)
    sh("mount", "-o", "loop", image, mnt)
    rows, pages = {}, {}
    try:
        for name, target in (("small", SMALL_PAGES), ("big", BIG_PAGES)):
            n = int(target * ROWS_PER_PAGE)
            path = os.path.join(mnt, f"{name}.db")
            con = sqlite3.connect(path)
            con.execute("PRAGMA page_size = 4096")
            con.execute("CREATE TABLE phone (id INTEGER PRIMARY KEY, name TEXT, number TEXT)")
            con.executemany("INSERT INTO phone VALUES (?, ?, ?)",
                            ((i, f"name{i:08d}", f"+1-555-{i:07d}") for i in range(1, n + 1)))
            con.commit()
            con.close()
            rows[name], pages[name] = n, os.path.getsize(path) // PAGE
    finally:
        sh("umount", mnt)
    return image, rows, pages


class Disk:
    """bench/idle's FUSE disk serving the image, a read-only loop device over it with bfq, and the
    filesystem mounted read-only (each step undone by CLEANUP)."""

    def __init__(self, tmp, image, service_ms):
        self.file = os.path.join(tmp, "disk")
        open(self.file, "w").close()
        server = subprocess.Popen([sys.executable, os.path.join(BENCH, "idle", "fusedisk.py"), self.file,
                                   str(IMAGE_BYTES), str(service_ms), image],
                                  stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)

        def stop():
            if server.poll() is None:
                server.kill()
            server.wait()
        CLEANUP.push("fusedisk", stop)
        if server.stdout.readline().decode().strip() != "mounted":
            raise SystemExit("fusedisk did not mount")
        CLEANUP.push("umount disk", lambda: subprocess.run(["umount", "-l", self.file]))
        self.dev = sh("losetup", "-f", "--show", "-r", "--direct-io=on", self.file)
        CLEANUP.push("losetup -d", lambda: subprocess.run(["losetup", "-d", self.dev]))
        q = f"/sys/block/{os.path.basename(self.dev)}/queue"
        with open(f"{q}/scheduler") as f:
            if "bfq" not in f.read():
                raise SystemExit(f"{self.dev}: no bfq scheduler")
        write(f"{q}/scheduler", "bfq")
        write(f"{q}/iosched/low_latency", "0")
        self.mnt = os.path.join(tmp, "fs")
        os.mkdir(self.mnt)
        sh("mount", "-t", "ext4", "-o", "ro,noload", self.dev, self.mnt)
        CLEANUP.push("umount fs", lambda: subprocess.run(["umount", "-l", self.mnt]))
        self.info = {"device": self.dev, "service_ms": service_ms, "scheduler": "bfq, low_latency=0"}


def drop_caches():
    write("/proc/sys/vm/drop_caches", "1")


def v1_mounts():
    with open("/proc/mounts") as f:
        text = f.read()
    found = {}
    for fstype, mp, opts in parse_mounts(text):
        if fstype == "cgroup":
            for key in ("cpu", "cpuacct", "blkio", "memory"):
                if key in opts.split(",") and key not in found:
                    found[key] = mp
    return found


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def mem_stat(d):
    out = {}
    with open(os.path.join(d, "memory.stat")) as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def resident_pages(path):
    """How many of the file's pages are in the page cache (mincore over a mapping of it, which
    faults nothing in): for small.db, which only small reads, the part of its database it holds."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # Private and writable only so that ctypes can take its address; nothing is written.
        m = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        vec = ctypes.create_string_buffer((size + PAGE - 1) // PAGE)
        head = ctypes.c_char.from_buffer(m)
        try:
            if libc.mincore(ctypes.addressof(head), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del head
        return sum(b & 1 for b in vec.raw)
    finally:
        m.close()


def read_bytes(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Session:
    def __init__(self, args, disk, rows):
        self.args, self.disk, self.rows = args, disk, rows
        self.tmp = tempfile.mkdtemp(prefix=f"tact-bench-tickets-e5-{os.getpid()}-")
        CLEANUP.push("tmpdir", lambda: shutil.rmtree(self.tmp, ignore_errors=True))
        self.slots = Slots(os.path.join(self.tmp, "slots"), len(JOBS))
        CLEANUP.push("slots", self.slots.close)
        self.cgroups = RunCgroups({k: v for k, v in v1_mounts().items()})
        CLEANUP.push("cgroups", self.cgroups.remove)
        # Before the cgroups go (last in, first out): a run's processes may still be in them.
        CLEANUP.push("descendants", kill_leftovers)
        self.life = args.warmup + args.window + 60

    def argv(self, job):
        i = JOBS.index(job)
        if job in SERVERS:
            return [sys.executable, os.path.join(HERE, "lookup.py"), os.path.join(self.disk.mnt, f"{job}.db"),
                    str(self.rows[job]), str(i), self.slots.path, str(os.getpid()), f"{self.life:.0f}"]
        return [sys.executable, os.path.join(HERE, "reader.py"), self.disk.dev, str(i), str(REGION),
                self.slots.path, str(os.getpid()), f"{self.life:.0f}"]

    def own_memory(self):
        """Each kind of process's own (anonymous) memory: one server and one hog run briefly in a
        memory cgroup of their own; the most total_rss seen."""
        paths = self.cgroups.new_run()
        out = {}
        for job in ("small", "H1"):
            d = os.path.join(paths["memory"], job)
            os.mkdir(d)
            self.slots.clear()
            p = subprocess.Popen(self.argv(job), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 preexec_fn=join_cgroups([os.path.join(d, "cgroup.procs")]))
            most = 0
            for _ in range(30):
                time.sleep(0.1)
                most = max(most, mem_stat(d)["total_rss"])
            p.kill()
            p.wait()
            out["server" if job == "small" else "hog"] = most
        for p in paths.values():
            remove_tree(p)
        return out

    def run(self, point, own):
        """One run: point is None (baseline), "flat-lru", "flat-equal", or (m, d)."""
        args, slots = self.args, self.slots
        slots.clear()
        drop_caches()
        paths = self.cgroups.new_run()
        res = {"point": point_label(point), "notes": []}
        procs, tact, err, jlog = [], None, None, None
        arena = ARENA_PAGES * PAGE + 2 * own["server"] + 4 * own["hog"]
        floor = FLOOR_PAGES * PAGE + own["server"]
        res["arena_bytes"], res["floor_bytes"] = arena, floor
        try:
            if point in FLAT:
                write(os.path.join(paths["memory"], "memory.limit_in_bytes"), arena)
                equal = (arena - 4 * own["hog"]) // 2
                mem_dirs = {}
                for job in JOBS:
                    joins = []
                    for k in ("memory", "blkio", "cpu"):
                        d = os.path.join(paths[k], job)
                        os.mkdir(d)
                        joins.append(os.path.join(d, "cgroup.procs"))
                    write(os.path.join(paths["blkio"], job, "blkio.bfq.weight"), 100)
                    if point == "flat-equal" and job in SERVERS:
                        write(os.path.join(paths["memory"], job, "memory.limit_in_bytes"), equal)
                    mem_dirs[job] = os.path.join(paths["memory"], job)
                    procs.append(subprocess.Popen(self.argv(job), stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, preexec_fn=join_cgroups(joins)))
            else:
                setup = os.path.join(self.tmp, f"{res['point']}.toml")
                with open(setup, "w") as f:
                    f.write(setup_text(self, point, arena, floor))
                jlog = os.path.join(self.tmp, f"{res['point']}.jsonl")
                err = open(os.path.join(self.tmp, f"{res['point']}.err"), "w+b")
                argv = [args.tact, "tickets", "run", setup, "--backend", "cgroup", "--duration",
                        f"{int(self.life)}s", "--json-log", jlog, "--cgroup-parent", paths["cpu"]]
                tact = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                        preexec_fn=join_cgroups([os.path.join(paths["cpuacct"], "cgroup.procs")]))
                mem_dirs = None
            deadline = time.monotonic() + 30
            while not all(slots.pid(i) > 0 and slots.iterations(i) > 0 for i in range(len(JOBS))):
                if time.monotonic() > deadline or (tact is not None and tact.poll() is not None):
                    raise RuntimeError("the jobs did not all start")
                time.sleep(0.05)
            pids = [slots.pid(i) for i in range(len(JOBS))]
            if mem_dirs is None:
                top = os.path.join(paths["memory"], f"tact-tickets-{tact.pid}")
                mem_dirs = {job: os.path.join(top, f"job{i}") for i, job in enumerate(JOBS)}
            res.update(measure(self, pids, mem_dirs))
        except (RuntimeError, OSError, ValueError) as e:
            res["error"] = str(e)
        finally:
            if tact is not None:
                stop_tact(tact, err, jlog, res)
            for p in procs:
                p.kill()
                p.wait()
            for p in paths.values():
                remove_tree(p)
        return res


def setup_text(s, point, arena, floor):
    lines = [f"[memory]\narena = {arena}\n"]
    for job in JOBS:
        lines.append(f"[[job]]\nname = \"{job}\"\ncommand = \"exec {' '.join(s.argv(job))}\"\n"
                     f"funding = [{{ from = \"base\", cpu = 1000, disk = 1000 }}"
                     + (f", {{ from = \"base\", mem = {floor}, hard = true }}" if job in SERVERS else "")
                     + "]\n")
    if point is not None:
        m, d = point
        lines.append(f"[[exchange]]\na = \"small\"\na_gives = {{ disk = {d} }}\nb = \"big\"\n"
                     f"b_gives = {{ mem = \"{m}pages\" }}\n")
    return "\n".join(lines)


def measure(s, pids, mem_dirs):
    """Counts and disk bytes at warm-up and at its end; page cache sampled in between."""
    args, slots = s.args, s.slots
    t0 = time.monotonic()
    time.sleep(args.warmup)
    q0 = [slots.iterations(i) for i in range(len(JOBS))]
    b0 = [read_bytes(p) for p in pids]
    t1 = time.monotonic()
    cache = {j: [] for j in SERVERS}
    usage = {j: [] for j in SERVERS}
    resident = []
    small_db = os.path.join(s.disk.mnt, "small.db")
    while time.monotonic() - t1 < args.window:
        resident.append(resident_pages(small_db))
        for j in SERVERS:
            st = mem_stat(mem_dirs[j])
            cache[j].append(st["total_cache"])
            usage[j].append(read_int(os.path.join(mem_dirs[j], "memory.usage_in_bytes")))
        time.sleep(PERIOD_S)
    span = time.monotonic() - t1
    q1 = [slots.iterations(i) for i in range(len(JOBS))]
    b1 = [read_bytes(p) for p in pids]
    disk = [(b - a) if a is not None and b is not None else 0 for a, b in zip(b0, b1)]
    total = sum(disk) or 1
    return {"started_s": t1 - t0, "window_s": span,
            "qps": {j: (q1[i] - q0[i]) / span for i, j in enumerate(JOBS) if j in SERVERS},
            "cache_pages": {j: statistics.mean(cache[j]) / PAGE for j in SERVERS},
            "small_db_resident_pages": statistics.mean(resident),
            "usage_bytes": {j: statistics.mean(usage[j]) for j in SERVERS},
            "disk_share": {j: disk[i] / total for i, j in enumerate(JOBS)}}


def point_label(point):
    if point is None:
        return "baseline"
    if point in FLAT:
        return point
    return f"m{point[0]}-d{point[1]}"


def analyse(results, db_pages):
    base = next((r for r in results if r["point"] == "baseline" and "error" not in r), None)
    rows = []
    for r in results:
        if "error" in r:
            rows.append({"point": r["point"], "error": r["error"]})
            continue
        row = {"point": r["point"], "qps": r["qps"], "cache_pages": r["cache_pages"],
               "disk_share": r["disk_share"],
               "small_db_resident": r["small_db_resident_pages"],
               "small_fits": r["small_db_resident_pages"] >= 0.95 * db_pages["small"]}
        if base is not None:
            row["gain_pct"] = {j: 100 * (r["qps"][j] / base["qps"][j] - 1) if base["qps"][j] else None
                               for j in SERVERS}
        rows.append(row)
    return rows


def table(rows, db_pages, envinfo):
    out = [f"E5 memory-for-disk exchange ({envinfo['note']})",
           f"small.db {db_pages['small']} pages, big.db {db_pages['big']} pages; arena "
           f"{envinfo['arena_bytes']} bytes = {ARENA_PAGES} pages + the processes' own memory; floors "
           f"{envinfo['floor_bytes']} bytes = 1375 pages + a server's own memory",
           "tact's v1 arena loop is not work-conserving: memory held for a floor stays unused while its "
           "job does not fill it",
           f"{'point':<12}{'small q/s':>10}{'gain':>10}{'big q/s':>9}{'gain':>8}{'small.db in cache':>18}{'fits':>6}"
           f"{'disk % small/big/hogs':>26}"]
    for r in rows:
        if "error" in r:
            out.append(f"{r['point']:<12} error: {r['error']}")
            continue
        g = r.get("gain_pct", {})
        fmt = lambda v: "-" if v is None else f"{v:+.0f}%"  # noqa: E731
        ds = r["disk_share"]
        hogs = "/".join(f"{100 * ds[h]:.0f}" for h in HOGS)
        out.append(f"{r['point']:<12}{r['qps']['small']:>10.0f}{fmt(g.get('small')):>10}{r['qps']['big']:>9.0f}"
                   f"{fmt(g.get('big')):>8}{r['small_db_resident']:>14.0f}/{db_pages['small']:<4}"
                   f"{'yes' if r['small_fits'] else 'no':>5}{100 * ds['small']:>7.0f}/{100 * ds['big']:.0f}/{hogs}")
    out.append(f"paper: {PAPER}")
    return "\n".join(out) + "\n"


def plot(path, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"no plot: {e}"
    ok = [r for r in rows if "error" not in r]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [r["point"] for r in ok]
    x = range(len(ok))
    ax.bar([i - 0.2 for i in x], [r["qps"]["small"] for r in ok], 0.4, label="small")
    ax.bar([i + 0.2 for i in x], [r["qps"]["big"] for r in ok], 0.4, label="big")
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels, rotation=30)
    ax.set_ylabel("queries/s over the window")
    ax.legend()
    bx.bar(list(x), [r["small_db_resident"] for r in ok])
    bx.set_xticks(list(x), labels, rotation=30)
    bx.set_ylabel("pages of small.db in the page cache")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def self_test():
    rows = analyse([{"point": "baseline", "qps": {"small": 100, "big": 50}, "cache_pages": {"small": 1500, "big": 2000},
                     "small_db_resident_pages": 1400, "disk_share": dict.fromkeys(JOBS, 1 / 6)},
                    {"point": "m700-d400", "qps": {"small": 2000, "big": 55}, "cache_pages": {"small": 1890, "big": 1200},
                     "small_db_resident_pages": 1890, "disk_share": dict.fromkeys(JOBS, 1 / 6)}], {"small": 1900})
    assert abs(rows[1]["gain_pct"]["small"] - 1900) < 1e-9 and rows[1]["small_fits"] and not rows[0]["small_fits"]
    assert abs(rows[1]["gain_pct"]["big"] - 10) < 1e-9
    print("e5 self-test ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="baseline, flat-lru, flat-equal and m=700 d=400, ~3 min")
    ap.add_argument("--warmup", type=float)
    ap.add_argument("--window", type=float)
    ap.add_argument("--service-ms", type=float, default=2.0)
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "tickets"))
    ap.add_argument("--lock", default=DEFAULT_LOCK)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    preset = PRESETS["quick" if args.quick else "default"]
    args.warmup = args.warmup or preset["warmup"]
    args.window = args.window or preset["window"]
    args.tact = os.path.abspath(args.tact)
    if os.geteuid() != 0:
        raise SystemExit("bench/tickets e5 needs root (cgroups, a loop device, mount)")
    mounts = v1_mounts()
    if any(k not in mounts for k in ("cpu", "cpuacct", "blkio", "memory")):
        raise SystemExit("bench/tickets e5 needs cgroup v1 cpu, cpuacct, blkio and memory hierarchies")
    if not os.access(args.tact, os.X_OK):
        raise SystemExit(f"no tact at {args.tact} (make build, or --tact PATH)")
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/tickets e5")
    set_child_subreaper()
    CLEANUP.push("descendants", kill_leftovers)
    for m in mounts.values():
        for p in remove_stale(m, CGROUP_PREFIX):
            log(f"removed {p}, left by an earlier run")
    tmp = tempfile.mkdtemp(prefix=f"tact-test-e5-{os.getpid()}-", dir="/var/tmp")
    CLEANUP.push("image", lambda: shutil.rmtree(tmp, ignore_errors=True))
    log("building the databases")
    image, rows, db_pages = build_image(tmp)
    disk = Disk(tmp, image, args.service_ms)
    s = Session(args, disk, rows)
    own = s.own_memory()
    log(f"small.db {db_pages['small']} pages, big.db {db_pages['big']} pages; own memory {own}")
    points = [None] + FLAT + [tuple(p) for p in preset["grid"]]
    results = []
    for p in points:
        log(f"run {point_label(p)}")
        r = s.run(p, own)
        results.append(r)
        if "error" in r:
            log(f"  failed: {r['error']}\n{r.get('tact_stderr', '')}")
        else:
            log(f"  q/s small {r['qps']['small']:.0f} big {r['qps']['big']:.0f}; small's cache "
                f"{r['cache_pages']['small']:.0f} pages")
    rows_out = analyse(results, db_pages)
    envinfo = {"kernel": os.uname().release, "cpus": os.cpu_count(), "disk": disk.info, "own_memory": own,
               "arena_bytes": results[0].get("arena_bytes"), "floor_bytes": results[0].get("floor_bytes"),
               "note": f"warm-up {args.warmup:g} s, window {args.window:g} s, one run per point, "
                       f"load average {os.getloadavg()[0]:.1f} (shared machine)"}
    text = table(rows_out, db_pages, envinfo)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "e5.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "e5.json"), "w") as f:
        json.dump({"config": vars(args), "env": envinfo, "db_pages": db_pages, "rows": rows,
                   "analysis": rows_out, "results": results, "paper": PAPER}, f, indent=1, default=str)
    why = plot(os.path.join(args.out, "e5.png"), rows_out)
    print(text + (why + "\n" if why else ""))
    CLEANUP.run()
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
