#!/usr/bin/env python3
"""bench/polite: MS Manners Figure 3 / Figure 7 style experiment for `tact run --polite`.

Foreground (high importance): PostgreSQL 15 from Debian, started here in a
temporary directory on a Unix socket only, loaded by pgbench in bursts (a fixed
number of transactions, then an idle gap of fixed length, several times).
Background (low importance): `tar -cf - TREE | zstd -q -9 -T2 [-B SIZE] > OUT` over a
generated, deterministic tree of files, read cold (page cache dropped).

Modes, interleaved within each repetition (order rotated every rep):
  fg-alone     foreground schedule only
  bg-alone     background only (alone rate and completion time)
  unregulated  both, background started plainly
  nice         both, background under `nice -n 19 ionice -c3`
  tact         both, background under `tact run --polite --progress io --probation 0`

The harness samples rchar+wchar of the background's process tree from /proc
every ~100 ms on its own (independent of tact) and reports per run:
  slowdown   = sum(burst times) / sum(burst times of fg-alone, same rep) - 1
  completion = background wall time
  efficiency = background progress during the foreground's gaps
               / (bg-alone rate of the same rep * gap time)
  interference share = background progress during bursts / progress during
               the schedule (paper, section 7: 6%)

See bench/polite/README.md.
"""
import argparse
import atexit
import hashlib
import json
import os
import platform
import pwd
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import Pool

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common.lifecycle import DEFAULT_LOCK, take_lock  # noqa: E402
from common.procs import TreeIoSampler, descendants, kill_tree, terminate_tree  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
PG_BIN_DEFAULT = "/usr/lib/postgresql/15/bin"
ALL_MODES = ["fg-alone", "bg-alone", "unregulated", "nice", "tact"]
BG_MODES = ["bg-alone", "unregulated", "nice", "tact"]
FG_MODES = ["fg-alone", "unregulated", "nice", "tact"]

PAPER = {
    "fg-alone": "-",
    "bg-alone": "bg alone 410 s",
    "unregulated": "fg +90% (SQL)",
    "nice": "no appreciable change vs unregulated",
    "tact": "fg +7-12%, E~38%, interference 6%",
}

T0 = time.monotonic()


def log(msg):
    el = time.monotonic() - T0
    print(f"[{el:7.1f}s] {msg}", flush=True)


# --------------------------------------------------------------------------
# cleanup

class Cleanup:
    def __init__(self):
        self.actions = []  # (name, fn), run LIFO
        self.done = False

    def push(self, name, fn):
        self.actions.append((name, fn))
        return (name, fn)

    def remove(self, item):
        try:
            self.actions.remove(item)
        except ValueError:
            pass

    def run(self):
        if self.done:
            return
        self.done = True
        while self.actions:
            name, fn = self.actions.pop()
            try:
                fn()
            except Exception as e:  # keep cleaning
                print(f"cleanup {name}: {e}", file=sys.stderr)


CLEANUP = Cleanup()


def _on_signal(signum, frame):
    print(f"\nsignal {signum}: cleaning up", file=sys.stderr, flush=True)
    CLEANUP.run()
    sys.exit(128 + signum)


# --------------------------------------------------------------------------
# small helpers

def sh_out(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, **kw).stdout.strip()
    except Exception as e:
        return f"<{e}>"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def mm(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def disk_of(path):
    """Block device name (whole disk) holding path, or None."""
    try:
        st = os.stat(path)
        maj, mnr = os.major(st.st_dev), os.minor(st.st_dev)
        real = os.path.realpath(f"/sys/dev/block/{maj}:{mnr}")
        if os.path.exists(os.path.join(real, "partition")):
            real = os.path.dirname(real)
        return os.path.basename(real)
    except OSError:
        return None


def read_scheduler(dev):
    try:
        with open(f"/sys/block/{dev}/queue/scheduler") as f:
            s = f.read().strip()
        m = re.search(r"\[(\S+)\]", s)
        return (m.group(1) if m else s), s
    except OSError:
        return None, None


def set_scheduler(dev, sched):
    with open(f"/sys/block/{dev}/queue/scheduler", "w") as f:
        f.write(sched)


# --------------------------------------------------------------------------
# background input tree (deterministic, cached)

def _vocab():
    r = random.Random(1)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    w = []
    for _ in range(20000):
        n = r.choice([2, 3, 3, 4, 4, 5, 5, 6, 7, 8, 9, 11])
        w.append("".join(r.choices(letters, weights=range(26, 0, -1), k=n)))
    return w


def _pool_chunk(seed, size=8 << 20):
    V = _vocab()
    r = random.Random(1000 + seed)
    out = []
    n = 0
    while n < size:
        line = " ".join(r.choices(V, k=r.randint(4, 14)))
        if r.random() < 0.3:
            line += " %d %08x" % (r.getrandbits(20), r.getrandbits(32))
        line += "\n"
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


def make_tree(root, total_mb, log_fn):
    """Text-like files (zstd ratio ~2.3), 16 KiB-2 MiB, 64 files a directory.
    Content: random slices of a 256 MiB (or smaller) pool of pseudo-words,
    each with a unique header; fully determined by total_mb."""
    tmp = root + ".partial"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    total = total_mb << 20
    pool_chunks = max(2, min(32, total // (8 << 20)))
    t = time.monotonic()
    with Pool(min(os.cpu_count() or 1, 4)) as p:
        pool = b"".join(p.map(_pool_chunk, range(pool_chunks)))
    log_fn(f"tree: generated {len(pool) >> 20} MiB text pool in {time.monotonic() - t:.1f}s")
    r = random.Random(42)
    written = 0
    i = 0
    while written < total:
        size = int(2 ** r.uniform(14, 21))
        size = min(size, total - written)
        off = r.randrange(0, len(pool) - size) if len(pool) > size else 0
        d = os.path.join(tmp, f"d{i // 64:04d}")
        if i % 64 == 0:
            os.makedirs(d)
        header = f"# file {i} size {size} seed {r.getrandbits(64):016x}\n".encode()
        with open(os.path.join(d, f"f{i:06d}.txt"), "wb") as f:
            f.write(header)
            f.write(pool[off:off + max(0, size - len(header))])
        written += size
        i += 1
    os.sync()
    os.rename(tmp, root)
    log_fn(f"tree: {i} files, {written >> 20} MiB in {time.monotonic() - t:.1f}s at {root}")


# --------------------------------------------------------------------------
# PostgreSQL

class Postgres:
    def __init__(self, pg_bin, base, port, scale, log_fn):
        self.pg_bin = pg_bin
        self.base = base
        self.data = os.path.join(base, "data")
        self.sock = base
        self.port = port
        self.scale = scale
        self.log = log_fn
        self.logfile = os.path.join(base, "postgres.log")
        self.user = "bench"
        self.db = "bench"
        self.running = False
        self.run_as = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    self.run_as = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            if self.run_as is None:
                raise SystemExit("running as root but no 'postgres' or 'nobody' user to run the server")

    def _pre(self):
        if self.run_as is not None:
            os.setgid(self.run_as.pw_gid)
            os.setgroups([])
            os.setuid(self.run_as.pw_uid)

    def _srv(self, args, check=True, timeout=300):
        env = dict(os.environ, LC_ALL="C", LANG="C")
        r = subprocess.run(args, preexec_fn=self._pre, capture_output=True, text=True,
                           env=env, cwd=self.base, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
                               + self.tail_log())
        return r

    def tail_log(self):
        try:
            with open(self.logfile) as f:
                return "\n--- postgres.log (tail) ---\n" + "".join(f.readlines()[-20:])
        except OSError:
            return ""

    def conn_args(self):
        return ["-h", self.sock, "-p", str(self.port), "-U", self.user]

    def init(self):
        if self.run_as is not None:
            os.chown(self.base, self.run_as.pw_uid, self.run_as.pw_gid)
        os.chmod(self.base, 0o755)  # root's pgbench must reach the socket
        self._srv([f"{self.pg_bin}/initdb", "-D", self.data, "-U", self.user, "--auth=trust",
                   "-E", "UTF8", "--locale=C"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"""
# bench/polite
listen_addresses = ''
unix_socket_directories = '{self.sock}'
port = {self.port}
fsync = on
synchronous_commit = on
full_page_writes = on
wal_sync_method = fdatasync
shared_buffers = 1GB
max_connections = 30
# no checkpoint inside a run: every run starts right after CHECKPOINT
checkpoint_timeout = 1h
max_wal_size = 16GB
log_checkpoints = on
""")
        self.start()
        self.psql("postgres", f"CREATE DATABASE {self.db}")
        t = time.monotonic()
        r = subprocess.run(["pgbench", "-i", "-q", "-s", str(self.scale)] + self.conn_args() + [self.db],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pgbench -i failed:\n{r.stderr}")
        size = self.psql(self.db, f"SELECT pg_database_size('{self.db}')")
        self.log(f"postgres: pgbench -i -s {self.scale} in {time.monotonic() - t:.1f}s, "
                 f"database {int(size) >> 20} MiB")
        return int(size)

    def start(self):
        self._srv([f"{self.pg_bin}/pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "120",
                   "start"])
        self.running = True

    def stop(self, mode="fast"):
        if not self.running:
            return
        self._srv([f"{self.pg_bin}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "120", "stop"],
                  check=False)
        self.running = False

    def kill_hard(self):
        """Last resort at exit: SIGQUIT/SIGKILL the postmaster we started (pid file)."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGQUIT)
            for _ in range(50):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def psql(self, db, sql):
        r = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql]
                           + self.conn_args(), capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"psql {sql!r} failed: {r.stderr}")
        return r.stdout.strip()

    def reset(self, drop):
        """Same starting state for every run: truncate history, vacuum the small
        tables (what pgbench does without -n), checkpoint, restart the server
        with empty shared buffers, and drop the page cache."""
        self.psql(self.db, "TRUNCATE pgbench_history")
        self.psql(self.db, "VACUUM pgbench_branches")
        self.psql(self.db, "VACUUM pgbench_tellers")
        self.psql(self.db, "CHECKPOINT")
        self.stop()
        dropped = drop_caches() if drop else False
        self.start()
        return dropped

    def pgbench(self, clients, jobs, tx):
        args = ["pgbench", "-n", "-c", str(clients), "-j", str(jobs), "-t", str(tx)] \
            + self.conn_args() + [self.db]
        t = time.monotonic()
        r = subprocess.run(args, capture_output=True, text=True)
        el = time.monotonic() - t
        if r.returncode != 0:
            raise RuntimeError(f"pgbench failed ({r.returncode}): {r.stderr[-2000:]}")
        m = re.search(r"tps = ([\d.]+) \(without initial", r.stdout)
        lat = re.search(r"latency average = ([\d.]+) ms", r.stdout)
        return el, (float(m.group(1)) if m else None), (float(lat.group(1)) if lat else None)


# --------------------------------------------------------------------------
# one run

class Sampler(threading.Thread):
    def __init__(self, root, exclude_root, t_origin, interval):
        super().__init__(daemon=True)
        self.s = TreeIoSampler(root, exclude_root=exclude_root)
        self.t_origin = t_origin
        self.interval = interval
        self.samples = []   # (t, rchar+wchar, read_bytes+write_bytes, n_stopped, n_alive)
        self.seen = set()
        self.halt = threading.Event()

    def run(self):
        nxt = time.monotonic()
        while not self.halt.is_set():
            prog, disk = self.s.sample()
            self.seen.update(self.s.last.keys())
            self.samples.append((round(time.monotonic() - self.t_origin, 4), prog, disk,
                                 self.s.stopped, self.s.alive))
            nxt += self.interval
            delay = nxt - time.monotonic()
            if delay > 0:
                self.halt.wait(delay)
            else:
                nxt = time.monotonic()

    def stop(self):
        self.halt.set()
        self.join(timeout=5)
        prog, disk = self.s.sample()
        self.samples.append((round(time.monotonic() - self.t_origin, 4), prog, disk, 0, 0))


def bg_command(mode, cfg, out_file, state_dir, tact_log):
    pipe = (f"tar -cf - -C {cfg['tree_parent']} {cfg['tree_name']} "
            f"| zstd -q -{cfg['zstd_level']} -T{cfg['zstd_threads']}"
            f"{' -B' + cfg['zstd_block'] if cfg.get('zstd_block') else ''} > {out_file}")
    if mode in ("bg-alone", "unregulated"):
        return ["sh", "-c", pipe], False
    if mode == "nice":
        return ["nice", "-n", "19", "ionice", "-c3", "sh", "-c", pipe], False
    if mode == "tact":
        cmd = [cfg["tact"], "run", "--polite", "--progress", "io", "--probation", "0",
               "--state-dir", state_dir, "--json-log", tact_log]
        if cfg.get("testpoint"):
            cmd += ["--testpoint", cfg["testpoint"]]
        return cmd + ["--", "sh", "-c", pipe], True
    raise ValueError(mode)


def run_one(mode, rep, cfg, pg, tmp, outdir):
    res = {"mode": mode, "rep": rep}
    res["caches_dropped"] = pg.reset(cfg["drop_caches"])
    out_file = os.path.join(tmp, "bg-out.tar.zst")
    state_dir = os.path.join(tmp, f"tact-state-{mode}-{rep}")
    tact_log = os.path.join(outdir, "tact-logs", f"rep{rep}.jsonl")
    if mode == "tact":
        os.makedirs(os.path.dirname(tact_log), exist_ok=True)
        os.makedirs(state_dir, exist_ok=True)
    has_bg = mode in BG_MODES
    has_fg = mode in FG_MODES

    t_origin = time.monotonic()
    bg = None
    stderr_f = open(os.path.join(tmp, "bg.stderr"), "w+")
    if has_bg:
        cmd, excl = bg_command(mode, cfg, out_file, state_dir, tact_log)
        res["bg_cmd"] = cmd
        bg = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr_f, start_new_session=True)
    else:
        # fg-alone: sample a sleeping child so the harness's own /proc scanning
        # load is the same in every mode.
        bg = subprocess.Popen(["sleep", "100000"], start_new_session=True)
        excl = False
    root_pid = bg.pid
    sampler = Sampler(root_pid, excl, t_origin, cfg["sample_interval"])
    sampler.start()

    def _cleanup_bg():
        sampler.halt.set()
        if bg.poll() is None:
            terminate_tree(root_pid)
        for pid in sampler.seen:  # anything of ours that was reparented
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    token = CLEANUP.push(f"bg {mode} rep {rep}", _cleanup_bg)

    bursts = []
    burst_stats = []
    bg_end = None
    try:
        if has_fg:
            if has_bg:
                # bootstrap: tact calibrates on an uncontended start (100
                # testpoints x 200 ms = 20 s by default); same wait in every mode.
                t_end = t_origin + cfg["bootstrap"]
                while time.monotonic() < t_end:
                    time.sleep(0.1)
                    if bg.poll() is not None and bg_end is None:
                        bg_end = time.monotonic() - t_origin
            for b in range(cfg["bursts"]):
                s = time.monotonic() - t_origin
                el, tps, lat = pg.pgbench(cfg["clients"], cfg["jobs"], cfg["burst_tx"])
                e = time.monotonic() - t_origin
                bursts.append([round(s, 4), round(e, 4)])
                burst_stats.append({"seconds": round(el, 4), "tps": tps, "latency_ms": lat})
                log(f"  rep {rep} {mode:11s} burst {b + 1}/{cfg['bursts']}: {el:6.2f}s "
                    f"({tps or 0:.0f} tps){'  [bg finished]' if bg.poll() is not None else ''}")
                gap_end = time.monotonic() + cfg["gap"]
                while time.monotonic() < gap_end:
                    time.sleep(0.05)
                    if has_bg and bg_end is None and bg.poll() is not None:
                        bg_end = time.monotonic() - t_origin
            sched_end = time.monotonic() - t_origin
        else:
            sched_end = None
        if has_bg:
            deadline = t_origin + cfg["bg_timeout"]
            while bg.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if bg.poll() is None:
                log(f"  rep {rep} {mode}: background still running after {cfg['bg_timeout']}s, killing")
                terminate_tree(root_pid)
                res["bg_timed_out"] = True
            if bg_end is None:
                bg_end = time.monotonic() - t_origin
            res["bg_exit"] = bg.wait()
            res["bg_completion"] = round(bg_end, 3)
        else:
            terminate_tree(root_pid)
            bg.wait()
    finally:
        sampler.stop()
        CLEANUP.remove(token)
        _cleanup_bg()
    stderr_f.seek(0)
    err = stderr_f.read()[-2000:]
    stderr_f.close()
    if err.strip():
        res["bg_stderr_tail"] = err
    if os.path.exists(out_file):
        res["bg_output_bytes"] = os.path.getsize(out_file)
        os.unlink(out_file)
    if has_bg and res.get("bg_exit") not in (0, None):
        log(f"  rep {rep} {mode}: background exited with {res['bg_exit']}: {err.strip()[-500:]}")
    res["bursts"] = bursts
    res["burst_stats"] = burst_stats
    res["burst_times"] = [s["seconds"] for s in burst_stats]
    res["fg_total"] = round(sum(res["burst_times"]), 4) if has_fg else None
    res["schedule_end"] = sched_end
    res["samples"] = [list(s) for s in sampler.samples] if has_bg else []
    if has_bg:
        res["bg_progress_total"] = sampler.samples[-1][1]
    if mode == "tact" and os.path.exists(tact_log):
        res["tact_log"] = os.path.relpath(tact_log, outdir)
    shutil.rmtree(state_dir, ignore_errors=True)
    return res


# --------------------------------------------------------------------------
# analysis

def cum_at(samples, t):
    """Cumulative progress at time t, linear interpolation on (t, prog)."""
    if not samples:
        return 0.0
    if t <= samples[0][0]:
        return float(samples[0][1])
    lo, hi = 0, len(samples) - 1
    if t >= samples[hi][0]:
        return float(samples[hi][1])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if samples[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    t0, p0 = samples[lo][0], samples[lo][1]
    t1, p1 = samples[hi][0], samples[hi][1]
    return p0 + (p1 - p0) * (t - t0) / (t1 - t0) if t1 > t0 else float(p1)


def analyse(results, cfg):
    by = {}
    for r in results:
        by.setdefault(r["rep"], {})[r["mode"]] = r
    for rep, runs in by.items():
        alone = runs.get("bg-alone")
        fga = runs.get("fg-alone")
        alone_rate = None
        if alone and alone.get("bg_completion"):
            alone_rate = alone["bg_progress_total"] / alone["bg_completion"]
            alone["bg_rate"] = alone_rate
        for mode, r in runs.items():
            if fga and r.get("fg_total") and mode != "fg-alone":
                r["slowdown"] = r["fg_total"] / fga["fg_total"] - 1
                r["burst_slowdowns"] = [b / a - 1 for b, a in zip(r["burst_times"], fga["burst_times"])]
            if mode == "fg-alone":
                r["slowdown"] = 0.0
            if mode in ("unregulated", "nice", "tact") and r.get("samples"):
                S = r["samples"]
                end_bg = r["bg_completion"]
                gaps = []
                for i, (s, e) in enumerate(r["bursts"]):
                    g_end = r["bursts"][i + 1][0] if i + 1 < len(r["bursts"]) else r["schedule_end"]
                    gaps.append((e, g_end))
                gap_prog = sum(cum_at(S, min(b, end_bg)) - cum_at(S, min(a, end_bg)) for a, b in gaps)
                gap_time = sum(max(0.0, min(b, end_bg) - min(a, end_bg)) for a, b in gaps)
                burst_prog = sum(cum_at(S, min(e, end_bg)) - cum_at(S, min(s, end_bg)) for s, e in r["bursts"])
                burst_time = sum(max(0.0, min(e, end_bg) - min(s, end_bg)) for s, e in r["bursts"])
                r["gap_time"] = gap_time
                r["gap_progress"] = gap_prog
                r["burst_progress"] = burst_prog
                r["bg_done_before_schedule_end"] = end_bg < (r["schedule_end"] or 0)
                r["interference_share"] = burst_prog / (burst_prog + gap_prog) if burst_prog + gap_prog > 0 else None
                if alone_rate:
                    r["efficiency"] = gap_prog / (alone_rate * gap_time) if gap_time > 0 else None
                    r["burst_duty"] = burst_prog / (alone_rate * burst_time) if burst_time > 0 else None
                if alone and alone.get("bg_completion"):
                    r["bg_completion_vs_alone"] = r["bg_completion"] / alone["bg_completion"] - 1
    return by


def fmt_range(xs, pct=False, unit=""):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    m = median(xs)
    lo, hi = mm(xs)
    if pct:
        return f"{m * 100:+.1f}% [{lo * 100:+.1f}..{hi * 100:+.1f}]"
    return f"{m:.1f}{unit} [{lo:.1f}..{hi:.1f}]"


def fmt_pct(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    lo, hi = mm(xs)
    return f"{median(xs) * 100:.0f}% [{lo * 100:.0f}..{hi * 100:.0f}]"


def summarize(results, modes):
    summ = {}
    for mode in modes:
        rs = [r for r in results if r["mode"] == mode]
        if not rs:
            continue
        g = lambda k: [r.get(k) for r in rs]  # noqa: E731
        summ[mode] = {
            "n": len(rs),
            "fg_total": g("fg_total"), "slowdown": g("slowdown"),
            "bg_completion": g("bg_completion"), "efficiency": g("efficiency"),
            "interference_share": g("interference_share"), "burst_duty": g("burst_duty"),
            "bg_rate": g("bg_rate"),
        }
        for k in list(summ[mode]):
            if isinstance(summ[mode][k], list):
                vals = [v for v in summ[mode][k] if v is not None]
                summ[mode][k + "_median"] = median(vals)
                summ[mode][k + "_min"], summ[mode][k + "_max"] = mm(vals)
    return summ


def table(results, modes):
    head = ["mode", "n", "fg burst total s", "fg slowdown", "bg completion s", "bg efficiency",
            "interf. share", "paper"]
    rows = [head]
    for mode in modes:
        rs = [r for r in results if r["mode"] == mode]
        if not rs:
            continue
        rows.append([
            mode, str(len(rs)),
            fmt_range([r.get("fg_total") for r in rs]),
            fmt_range([r.get("slowdown") for r in rs], pct=True) if mode != "fg-alone" else "(baseline)",
            fmt_range([r.get("bg_completion") for r in rs]),
            fmt_pct([r.get("efficiency") for r in rs]),
            fmt_pct([r.get("interference_share") for r in rs]),
            PAPER.get(mode, ""),
        ])
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def plots(results, modes, outdir, cfg):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("plots skipped: matplotlib not installed (pip install -r bench/requirements.txt)")
        return []
    files = []
    # 1. progress rate over time, first rep with data, one panel per bg mode
    pm = [m for m in ("bg-alone", "unregulated", "nice", "tact") if m in modes]
    reps = sorted({r["rep"] for r in results})
    if pm and reps:
        fig, axes = plt.subplots(len(pm), 1, figsize=(11, 2.4 * len(pm)), sharex=True, squeeze=False)
        rep = reps[0]
        for ax, mode in zip(axes[:, 0], pm):
            r = next((x for x in results if x["mode"] == mode and x["rep"] == rep), None)
            if not r or not r.get("samples"):
                ax.set_title(f"{mode}: no data")
                continue
            S = r["samples"]
            ts, rates = [], []
            step = 5  # ~0.5 s windows
            for i in range(step, len(S), step):
                dt = S[i][0] - S[i - step][0]
                if dt > 0:
                    ts.append(S[i][0])
                    rates.append((S[i][1] - S[i - step][1]) / dt / 1e6)
            ax.plot(ts, rates, lw=0.8, color="tab:blue")
            for s, e in r.get("bursts", []):
                ax.axvspan(s, e, color="tab:red", alpha=0.15, lw=0)
            if r.get("bg_completion"):
                ax.axvline(r["bg_completion"], color="k", ls="--", lw=0.8)
            extra = ""
            if r.get("slowdown") is not None and mode != "bg-alone":
                extra = f"  fg slowdown {r['slowdown'] * 100:+.0f}%"
            if r.get("efficiency") is not None:
                extra += f"  E={r['efficiency'] * 100:.0f}%"
            ax.set_title(f"{mode} (rep {rep}){extra}", fontsize=9)
            ax.set_ylabel("bg MB/s\n(rchar+wchar)", fontsize=8)
        axes[-1, 0].set_xlabel("seconds since background start (red: pgbench bursts; dashed: bg done)")
        fig.tight_layout()
        f = os.path.join(outdir, "progress.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    # 2. bars: slowdown and efficiency, medians with min-max
    bm = [m for m in ("unregulated", "nice", "tact") if m in modes
          and any(r["mode"] == m and r.get("slowdown") is not None for r in results)]
    if bm:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, key, title, ref in ((a1, "slowdown", "foreground slowdown (%)", [(5, "target 5%"), (30, "unreg. >= 30%")]),
                                    (a2, "efficiency", "background efficiency (%)", [(60, "target 60%"), (38, "paper 38%")])):
            meds, lo, hi = [], [], []
            for m in bm:
                xs = [r.get(key) for r in results if r["mode"] == m and r.get(key) is not None]
                md = median(xs) * 100 if xs else 0
                meds.append(md)
                lo.append(md - (min(xs) * 100 if xs else 0))
                hi.append((max(xs) * 100 if xs else 0) - md)
            ax.bar(bm, meds, yerr=[lo, hi], capsize=4, color=["tab:red", "tab:orange", "tab:green"][:len(bm)])
            for y, lab in ref:
                ax.axhline(y, color="gray", ls=":", lw=1)
                ax.text(len(bm) - 0.5, y, lab, fontsize=7, va="bottom", ha="right", color="gray")
            ax.set_title(title + f", median [min-max], n={cfg['reps']}", fontsize=9)
        fig.tight_layout()
        f = os.path.join(outdir, "summary.png")
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files


# --------------------------------------------------------------------------

def report(results, cfg, env, modes, tact_error, run_seconds, outdir):
    """Analyse the runs and write the table, results.json and the plots (also for --from-results)."""

    by = analyse(results, cfg)
    summ = summarize(results, modes)
    tab = table(results, modes)
    print()
    print(f"bench/polite: {cfg['reps']} rep(s); burst = {cfg['clients']}x{cfg['burst_tx']} pgbench tx, "
          f"gap {cfg['gap']}s, {cfg['bursts']} bursts, bootstrap {cfg['bootstrap']}s; "
          f"bg = tar|zstd -{cfg['zstd_level']} -T{cfg['zstd_threads']}"
          f"{' -B' + cfg['zstd_block'] if cfg.get('zstd_block') else ''} over {cfg['tree_mb']} MiB; "
          f"scheduler {env['io_scheduler']}; caches {'dropped' if cfg['drop_caches'] else 'NOT dropped'} before each run")
    print(tab)
    alone = summ.get("bg-alone", {})
    if alone.get("bg_rate_median"):
        print(f"bg alone rate (rchar+wchar): {alone['bg_rate_median'] / 1e6:.1f} MB/s median; "
              f"bg alone completion {alone['bg_completion_median']:.1f}s")
    fa = summ.get("fg-alone", {})
    if fa.get("fg_total_median"):
        print(f"fg alone: {fa['fg_total_median'] / cfg['bursts']:.2f}s per burst median")
    checks = []
    u = summ.get("unregulated", {}).get("slowdown_median")
    if u is not None:
        checks.append(("unregulated slowdown >= 30% (scenario is hard enough)", u >= 0.30, f"{u * 100:+.1f}%"))
    tsl = summ.get("tact", {}).get("slowdown_median")
    if tsl is not None:
        checks.append(("tact slowdown <= 5%", tsl <= 0.05, f"{tsl * 100:+.1f}%"))
    te = summ.get("tact", {}).get("efficiency_median")
    if te is not None:
        checks.append(("tact efficiency >= 60%", te >= 0.60, f"{te * 100:.0f}%"))
    for name, ok, val in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {val}")
    if tact_error:
        print("  [SKIP] " + tact_error)
    for r in results:
        if r.get("bg_done_before_schedule_end"):
            print(f"  note: rep {r['rep']} {r['mode']}: background finished before the foreground schedule "
                  f"ended; gaps after that are not counted (use a bigger --tree-mb)")
    print(f"run time: {run_seconds:.0f}s for the runs, {time.monotonic() - T0:.0f}s total")

    outjson = os.path.join(outdir, "results.json")
    with open(outjson, "w") as f:
        json.dump({"config": cfg, "env": env, "modes": modes, "tact_error": tact_error,
                   "run_seconds": run_seconds, "total_seconds": time.monotonic() - T0,
                   "summary": summ, "checks": [{"name": n, "pass": o, "value": v} for n, o, v in checks],
                   "paper": PAPER, "runs": results}, f, indent=1)
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(tab + "\n")
    files = plots(results, modes, outdir, cfg)
    log(f"wrote {outjson}, {os.path.join(outdir, 'table.txt')}" + "".join(", " + x for x in files))


def complete_reps(runs, modes):
    """The runs of the repetitions in which every mode finished (a stopped run leaves a partial one)."""
    done = {}
    for r in runs:
        done.setdefault(r["rep"], set()).add(r["mode"])
    return [r for r in runs if done[r["rep"]] >= set(modes)]


def from_results(path, outdir):
    """Report on a saved results.json or results.partial.json, counting only complete reps."""
    with open(path) as f:
        saved = json.load(f)
    present = {r["mode"] for r in saved["runs"]}
    modes = [m for m in ALL_MODES if m in present]
    runs = complete_reps(saved["runs"], modes)
    if not runs:
        sys.exit(f"{path}: no repetition has every mode ({', '.join(modes)}) finished")
    reps = sorted({r["rep"] for r in runs})
    cfg = dict(saved["config"], reps=len(reps))
    log(f"from {path}: {len(reps)} complete rep(s) {reps} of modes {', '.join(modes)}")
    os.makedirs(outdir, exist_ok=True)
    report(runs, cfg, saved["env"], modes, None, sum(r.get("wall", 0) for r in runs), outdir)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--from-results", metavar="FILE",
                    help="run nothing: report (table, JSON, plots into --out) on a saved results.json or "
                         "results.partial.json of a stopped run, counting only complete repetitions")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "polite"))
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 rep, small sizes, short schedule")
    ap.add_argument("--tact", default=os.environ.get("TACT", os.path.join(REPO, "target", "release", "tact")),
                    help="tact binary (default $TACT or target/release/tact)")
    ap.add_argument("--testpoint", default=None, help="pass --testpoint to tact (e.g. 200ms)")
    ap.add_argument("--modes", default=",".join(ALL_MODES), help="comma list of " + ",".join(ALL_MODES))
    ap.add_argument("--workdir", default="/var/tmp", help="where the temporary cluster and output go")
    ap.add_argument("--tree-cache", default="/var/tmp/tact-bench-polite-tree",
                    help="generated input tree is kept here between invocations")
    ap.add_argument("--no-keep-tree", action="store_true", help="delete the generated tree at exit")
    ap.add_argument("--tree-mb", type=int, default=None)
    ap.add_argument("--zstd-level", type=int, default=None)
    ap.add_argument("--zstd-threads", type=int, default=2,
                    help="zstd -T (2 = both cores: with -T1 this 2-core VM showed only ~+18%% slowdown)")
    ap.add_argument("--zstd-block", default=None,
                    help="zstd -B job size, e.g. 1MiB: zstd's default multi-megabyte jobs make the "
                         "background's progress lumpy at the testpoint scale (a chunk read at "
                         "400 MB/s, then a second of compressing at 4 MB/s)")
    ap.add_argument("--scale", type=int, default=None, help="pgbench scale")
    ap.add_argument("--clients", type=int, default=16,
                    help="pgbench -c (16: with 4 clients the fg is fsync-latency bound and a busy "
                         "background even speeds it up on this VM)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--burst-tx", type=int, default=None,
                    help="pgbench -t per client per burst (default: calibrated to --burst-seconds)")
    ap.add_argument("--burst-seconds", type=float, default=None, help="target fg-alone burst length")
    ap.add_argument("--gap", type=float, default=None, help="idle gap after each burst, s (default = burst-seconds)")
    ap.add_argument("--bursts", type=int, default=None)
    ap.add_argument("--bootstrap", type=float, default=None,
                    help="seconds between background start and first burst")
    ap.add_argument("--bg-timeout", type=float, default=900)
    ap.add_argument("--sample-interval", type=float, default=0.1)
    ap.add_argument("--no-drop-caches", action="store_true")
    ap.add_argument("--scheduler", default=None,
                    help="switch the disk's I/O scheduler (e.g. bfq) for the run; restored at exit")
    ap.add_argument("--pg-bin", default=PG_BIN_DEFAULT)
    ap.add_argument("--port", type=int, default=54329)
    ap.add_argument("--lock", default=DEFAULT_LOCK,
                    help="wait while this file exists (another benchmark measures), then hold it during "
                         "the run ('' to skip)")
    args = ap.parse_args()
    if args.from_results:
        return from_results(args.from_results, args.out)

    q = args.quick
    # Full: tact's default bootstrap is 100 testpoints x 200 ms = 20 s, so the
    # foreground starts 25 s after the background. Quick: tact gets
    # --testpoint 100ms (bootstrap 100 testpoints, ~14 s measured) and the foreground starts after 16 s.
    preset = dict(tree_mb=2200 if q else 4400, zstd_level=9, scale=20 if q else 50,
                  burst_seconds=4.0 if q else 6.0, bursts=2 if q else 3,
                  bootstrap=16.0 if q else 25.0)
    if q and args.testpoint is None:
        args.testpoint = "100ms"
    if q:
        args.reps = 1
    cfg = {
        "reps": args.reps, "quick": q,
        "tree_mb": args.tree_mb or preset["tree_mb"],
        "zstd_level": args.zstd_level or preset["zstd_level"],
        "zstd_threads": args.zstd_threads,
        "zstd_block": args.zstd_block,
        "scale": args.scale or preset["scale"],
        "clients": args.clients, "jobs": args.jobs,
        "burst_seconds": args.burst_seconds or preset["burst_seconds"],
        "bursts": args.bursts or preset["bursts"],
        "bootstrap": args.bootstrap if args.bootstrap is not None else preset["bootstrap"],
        "bg_timeout": args.bg_timeout, "sample_interval": args.sample_interval,
        "drop_caches": not args.no_drop_caches,
        "tact": os.path.abspath(args.tact), "testpoint": args.testpoint,
    }
    cfg["gap"] = args.gap if args.gap is not None else cfg["burst_seconds"]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in ALL_MODES:
            ap.error(f"unknown mode {m}")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    atexit.register(CLEANUP.run)
    take_lock(args.lock, CLEANUP, "bench/polite")

    # ---- preflight
    missing = [t for t in ("pgbench", "psql", "tar", "zstd", "nice", "ionice", "sh") if not shutil.which(t)]
    if not os.path.exists(f"{args.pg_bin}/postgres"):
        missing.append(f"{args.pg_bin}/postgres")
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}  (apt-get install -y postgresql postgresql-contrib zstd)")
    tact_error = None
    if "tact" in modes:
        if not (os.path.isfile(cfg["tact"]) and os.access(cfg["tact"], os.X_OK)):
            tact_error = (f"tact mode: binary not found or not executable at {cfg['tact']} "
                          f"(build it with `cargo build --release -p tact`, or pass --tact PATH / set $TACT); "
                          f"tact mode SKIPPED, exit status will be 3")
            print("ERROR: " + tact_error, file=sys.stderr, flush=True)
            modes = [m for m in modes if m != "tact"]

    outdir = os.path.abspath(args.out)
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tact-polite-", dir=args.workdir)
    os.chmod(tmp, 0o755)  # the server runs as another user below it
    CLEANUP.push("tmpdir", lambda: shutil.rmtree(tmp, ignore_errors=True))

    dev = disk_of(args.workdir)
    sched, sched_line = read_scheduler(dev) if dev else (None, None)
    env = {
        "kernel": platform.release(), "cpus": os.cpu_count(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1),
        "disk": dev, "io_scheduler": sched, "io_scheduler_line": sched_line,
        "pgbench": sh_out(["pgbench", "--version"]), "postgres": sh_out([f"{args.pg_bin}/postgres", "--version"]),
        "zstd": sh_out(["zstd", "--version"]), "tar": sh_out(["tar", "--version"]).splitlines()[0],
        "python": platform.python_version(), "euid": os.geteuid(),
        "tact": cfg["tact"] if "tact" in modes else None,
        "all_schedulers": {d: read_scheduler(d)[1] for d in sorted(os.listdir("/sys/block"))
                           if read_scheduler(d)[1] and not d.startswith(("loop", "ram"))},
    }
    if args.scheduler and dev:
        old = sched
        set_scheduler(dev, args.scheduler)
        CLEANUP.push("restore scheduler", lambda: set_scheduler(dev, old))
        env["io_scheduler"] = read_scheduler(dev)[0]
        log(f"I/O scheduler of {dev}: switched {old} -> {env['io_scheduler']} (restored at exit)")
    log(f"disk {dev}: I/O scheduler {env['io_scheduler']} ({sched_line}); "
        f"ionice -c3 only has an effect under bfq")
    if cfg["drop_caches"]:
        if drop_caches():
            log("page cache: dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every run")
        else:
            cfg["drop_caches"] = False
            log("page cache: CANNOT drop (not root?); runs start with a warm cache")
    else:
        log("page cache: not dropped (--no-drop-caches)")

    # ---- input tree
    key = hashlib.sha1(f"v1-{cfg['tree_mb']}".encode()).hexdigest()[:8]
    tree = f"{args.tree_cache}-{cfg['tree_mb']}M-{key}"
    if not os.path.isdir(tree):
        log(f"tree: generating {cfg['tree_mb']} MiB at {tree}")
        make_tree(tree, cfg["tree_mb"], log)
    else:
        log(f"tree: reusing {tree}")
    if args.no_keep_tree:
        CLEANUP.push("tree", lambda: shutil.rmtree(tree, ignore_errors=True))
    else:
        log(f"tree: kept after the run (delete with: rm -rf {tree}, or use --no-keep-tree)")
    cfg["tree"] = tree
    cfg["tree_parent"], cfg["tree_name"] = os.path.dirname(tree), os.path.basename(tree)

    # ---- postgres
    pg = Postgres(args.pg_bin, os.path.join(tmp, "pg"), args.port, cfg["scale"], log)
    os.makedirs(pg.base)
    CLEANUP.push("postgres", lambda: (pg.stop("immediate"), pg.kill_hard()))
    log(f"postgres: initdb + start in {pg.base} (Unix socket only, fsync=on, synchronous_commit=on)")
    env["db_bytes"] = pg.init()

    if args.burst_tx:
        cfg["burst_tx"] = args.burst_tx
    else:
        t_cal = 100
        el, tps, _ = pg.pgbench(cfg["clients"], cfg["jobs"], t_cal)  # warm-up
        while True:
            el, tps, _ = pg.pgbench(cfg["clients"], cfg["jobs"], t_cal)
            if el >= min(2.0, cfg["burst_seconds"] / 2):
                break
            t_cal = int(t_cal * min(10.0, 2.5 / max(el, 0.05)))
        cfg["burst_tx"] = max(10, int(round(t_cal * cfg["burst_seconds"] / el)))
        log(f"calibration: {cfg['clients']}x{t_cal} tx in {el:.2f}s ({tps:.0f} tps) -> "
            f"burst = {cfg['clients']} clients x {cfg['burst_tx']} tx (~{cfg['burst_seconds']}s alone)")
    # The first full-length burst after initdb runs far slower than every later one (38 s
    # against 23 s in the first 5-rep run: the tables' first pass sets hint bits and autovacuum
    # follows), which skewed the first repetition's baseline. Run it once, unmeasured.
    t = time.monotonic()
    pg.pgbench(cfg["clients"], cfg["jobs"], cfg["burst_tx"])
    log(f"warm-up: one unmeasured burst in {time.monotonic() - t:.1f}s")
    log(f"schedule: bootstrap {cfg['bootstrap']}s, {cfg['bursts']} x (burst of "
        f"{cfg['clients']}x{cfg['burst_tx']} tx, gap {cfg['gap']}s); background: tar | zstd -{cfg['zstd_level']} "
        f"-T{cfg['zstd_threads']}{' -B' + cfg['zstd_block'] if cfg.get('zstd_block') else ''} "
        f"over {cfg['tree_mb']} MiB")

    # ---- runs, interleaved, order rotated per rep
    results = []
    t_runs = time.monotonic()
    for rep in range(1, cfg["reps"] + 1):
        k = (rep - 1) % len(modes)
        order = modes[k:] + modes[:k]
        for mode in order:
            log(f"rep {rep}/{cfg['reps']} mode {mode}: start")
            t = time.monotonic()
            r = run_one(mode, rep, cfg, pg, tmp, outdir)
            r["wall"] = round(time.monotonic() - t, 2)
            results.append(r)
            with open(os.path.join(outdir, "results.partial.json"), "w") as f:
                json.dump({"config": cfg, "env": env, "runs": results}, f)
            msg = f"rep {rep}/{cfg['reps']} mode {mode}: done in {r['wall']:.1f}s"
            if r.get("fg_total"):
                msg += f", bursts {r['fg_total']:.1f}s"
            if r.get("bg_completion"):
                msg += f", bg {r['bg_completion']:.1f}s"
            log(msg)
    run_seconds = time.monotonic() - t_runs
    report(results, cfg, env, modes, tact_error, run_seconds, outdir)
    CLEANUP.run()
    return 3 if tact_error else 0


if __name__ == "__main__":
    sys.exit(main())
