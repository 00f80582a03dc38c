#!/usr/bin/env python3
"""bench/library: MS Manners Figure 9 (Douceur & Bolosky, SOSP 1999, section 9.5) for tact-lib.

One program (crates/tact-lib/examples/two_disks.rs) runs two regulated threads, each reading
its own "disk" with O_DIRECT in 1 MiB chunks and calling tact_lib::testpoint(0, &[bytes]);
thread A has the higher priority. The two disks are emulated: two loop devices over files in
/var/tmp, each made a bottleneck of its own by a read-bandwidth limit (cgroup v1
blkio.throttle.read_bps_device, or cgroup v2 io.max) in a cgroup created for the run, which
holds the program and the foreground loads, so they share each device's bandwidth.

Schedule (the paper's dummy loads): quiet (the regulators bootstrap here), foreground dd on
disk A, on disk B, on both, CPU load on both cores, quiet again. The same schedule runs once
with the threads regulated by tact and once unregulated (no testpoint), and the foreground's
dd throughput is measured in both and alone.

Spec claim (progress-regulation.md, section 6, "Thread isolation"): the higher-priority unit is
favoured; work shifts to the idle disk; both back off under CPU load or with both disks busy.

Needs root, losetup and a cgroup read-bandwidth limit; see bench/library/README.md.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from common.procs import kill_tree, parse_mounts  # noqa: E402
from util import DEFAULT_LOCK, REPO, Cleanup, log, run_cargo, take_lock, target_dir  # noqa: E402

CLEANUP = Cleanup()
CGROUP_PREFIX = "tact-test-library-"
IMAGE_PREFIX = "tact-bench-library-disk"

# name, loads; lengths come from the command line
SCHEDULE = [
    ("quiet", ()),
    ("fg-A", ("A",)),
    ("fg-B", ("B",)),
    ("fg-both", ("A", "B")),
    ("cpu", ("cpu",)),
    ("quiet-end", ()),
]

PAPER = {
    "quiet": "higher priority (A) favoured",
    "fg-A": "work shifts to the idle disk (B)",
    "fg-B": "A runs; B backs off",
    "fg-both": "both back off",
    "cpu": "both back off",
    "quiet-end": "A favoured again",
}


# --------------------------------------------------------------------------
# cgroup read-bandwidth limits (detected, never assumed)

def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class ThrottleV1:
    """cgroup v1 blkio: blkio.throttle.read_bps_device "MAJ:MIN BPS"."""
    kind = "cgroup v1 blkio (blkio.throttle.read_bps_device)"

    def __init__(self, mount):
        self.mount = mount

    def prepare(self, cleanup):
        pass

    def create(self, name):
        path = os.path.join(self.mount, name)
        os.mkdir(path)
        return path

    def limit(self, cg, majmin, bps):
        _write(os.path.join(cg, "blkio.throttle.read_bps_device"), f"{majmin} {int(bps)}\n")

    def limits(self, cg):
        return _read(os.path.join(cg, "blkio.throttle.read_bps_device")).split("\n")


class ThrottleV2:
    """cgroup v2 io controller: io.max "MAJ:MIN rbps=N". The controller must be enabled in
    the root's cgroup.subtree_control; if it is not, it is enabled for the run and disabled
    again afterwards."""
    kind = "cgroup v2 io (io.max rbps)"

    def __init__(self, mount):
        self.mount = mount

    def prepare(self, cleanup):
        ctl = os.path.join(self.mount, "cgroup.subtree_control")
        if "io" not in _read(ctl).split():
            _write(ctl, "+io")
            log(f"enabled the io controller in {ctl} for the run")

            def restore():
                try:
                    _write(ctl, "-io")
                except OSError as e:
                    print(f"could not disable io in {ctl} again ({e}); harmless", file=sys.stderr)
            cleanup.push("io controller", restore)

    def create(self, name):
        path = os.path.join(self.mount, name)
        os.mkdir(path)
        return path

    def limit(self, cg, majmin, bps):
        _write(os.path.join(cg, "io.max"), f"{majmin} rbps={int(bps)}\n")

    def limits(self, cg):
        return _read(os.path.join(cg, "io.max")).split("\n")


def detect_throttle(mounts_text, prefix=""):
    """The read-bandwidth limit this machine offers: v1 blkio throttling first (on a hybrid
    machine the io controller lives there), else v2 io.max. `prefix` roots every path (fixture
    trees in tests). Returns (throttle or None, notes)."""
    notes = []
    mounts = parse_mounts(mounts_text)
    for fstype, mp, opts in mounts:
        if fstype == "cgroup" and "blkio" in opts.split(","):
            root = prefix + mp
            if os.path.exists(os.path.join(root, "blkio.throttle.read_bps_device")):
                return ThrottleV1(root), notes
            notes.append(f"v1 blkio at {mp} has no blkio.throttle.read_bps_device "
                         "(kernel without CONFIG_BLK_DEV_THROTTLING)")
    if not any(f == "cgroup" and "blkio" in o.split(",") for f, _, o in mounts):
        notes.append("no cgroup v1 blkio hierarchy mounted")
    for fstype, mp, opts in mounts:
        if fstype == "cgroup2":
            root = prefix + mp
            try:
                controllers = _read(os.path.join(root, "cgroup.controllers")).split()
            except OSError as e:
                notes.append(f"cgroup2 at {mp}: {e}")
                continue
            if "io" in controllers:
                return ThrottleV2(root), notes
            notes.append(f"cgroup2 at {mp} lacks the io controller (controllers: "
                         f"{' '.join(controllers) or 'none'}; on a hybrid machine it is bound to v1)")
    if not any(f == "cgroup2" for f, _, _ in mounts):
        notes.append("no cgroup2 hierarchy mounted")
    return None, notes


def self_test():
    """Exercises detection and the limit writes of both cgroup versions on fixture trees."""
    with tempfile.TemporaryDirectory() as tmp:
        # v1 (this machine's layout)
        os.makedirs(f"{tmp}/sys/fs/cgroup/blkio")
        open(f"{tmp}/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device", "w").close()
        os.makedirs(f"{tmp}/sys/fs/cgroup/unified")
        _write(f"{tmp}/sys/fs/cgroup/unified/cgroup.controllers", "")
        mounts = ("cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n"
                  "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
        t, notes = detect_throttle(mounts, tmp)
        assert isinstance(t, ThrottleV1), (t, notes)
        cg = t.create("tact-test-library-1")
        t.limit(cg, "7:3", 40e6)
        assert _read(f"{cg}/blkio.throttle.read_bps_device") == "7:3 40000000\n"
        # v1 without throttling, v2 without io: nothing, with reasons
        os.unlink(f"{tmp}/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device")
        t, notes = detect_throttle(mounts, tmp)
        assert t is None and len(notes) == 2, notes
        assert "CONFIG_BLK_DEV_THROTTLING" in notes[0] and "lacks the io" in notes[1], notes
        # pure v2 with io available but not enabled in the root's subtree_control
        os.makedirs(f"{tmp}/v2")
        _write(f"{tmp}/v2/cgroup.controllers", "cpuset cpu io memory pids\n")
        _write(f"{tmp}/v2/cgroup.subtree_control", "cpu memory\n")
        t, notes = detect_throttle("cgroup2 /v2 cgroup2 rw,nsdelegate 0 0\n", tmp)
        assert isinstance(t, ThrottleV2), (t, notes)
        c = Cleanup()
        t.prepare(c)
        assert _read(f"{tmp}/v2/cgroup.subtree_control") == "+io"
        c.run()
        assert _read(f"{tmp}/v2/cgroup.subtree_control") == "-io"
        cg = t.create("tact-test-library-2")
        t.limit(cg, "7:4", 41943040)
        assert _read(f"{cg}/io.max") == "7:4 rbps=41943040\n"
        # nothing at all
        t, notes = detect_throttle("proc /proc proc rw 0 0\n", tmp)
        assert t is None and len(notes) == 2, notes
        # mounts parsing: escaped spaces
        assert parse_mounts("cgroup2 /a\\040b cgroup2 rw 0 0")[0][1] == "/a b"
    # analysis helpers
    assert overlap(0, 2, 1, 3) == 1 and overlap(0, 1, 2, 3) == 0
    chunks = [{"thread": "A", "t_start": 0.0, "t_end": 1.0, "bytes": 100},
              {"thread": "A", "t_start": 1.5, "t_end": 2.0, "bytes": 50}]
    d = thread_window(chunks, [], "A", 0.5, 2.0)
    assert abs(d["duty"] - 1.0 / 1.5) < 1e-9 and abs(d["bytes"] - 100) < 1e-9, d
    print("self-test: 1 passed, 0 failed")


# --------------------------------------------------------------------------
# machine setup: images, loop devices, cgroup

def require_root_and_tools():
    if os.geteuid() != 0:
        raise SystemExit("bench/library needs root (loop devices, cgroups): run it with sudo")
    missing = [t for t in ("losetup", "dd") if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"missing tools: {', '.join(missing)} (apt-get install util-linux coreutils)")
    if not os.path.exists("/dev/loop-control"):
        subprocess.run(["modprobe", "loop"], capture_output=True)
        if not os.path.exists("/dev/loop-control"):
            raise SystemExit("no /dev/loop-control: this kernel has no loop device support "
                             "(modprobe loop failed)")


def ensure_image(path, size):
    """A file of `size` bytes of non-zero data, written once (a marker file says it is
    complete) and reused by later runs."""
    marker = path + ".filled"
    if (os.path.exists(path) and os.path.getsize(path) == size and os.path.exists(marker)
            and _read(marker).strip() == str(size)):
        return "reused"
    for p in (marker, path):
        if os.path.exists(p):
            os.unlink(p)
    log(f"writing {size >> 20} MiB of non-zero data to {path}")
    block = bytearray(os.urandom(1 << 20))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for i in range(size >> 20):
            block[:8] = (i + 1).to_bytes(8, "little")
            os.write(fd, block)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    _write(marker, f"{size}\n")
    return "written"


def detach_stale(images):
    """Loop devices left on our own image files by a run that was killed hard."""
    for img in images:
        r = subprocess.run(["losetup", "-j", img], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            dev = line.split(":", 1)[0]
            if dev.startswith("/dev/loop"):
                log(f"detaching {dev}, left on {img} by an earlier run")
                subprocess.run(["losetup", "-d", dev], capture_output=True)


def remove_stale_cgroups(mount):
    for name in os.listdir(mount):
        if not name.startswith(CGROUP_PREFIX):
            continue
        pid = name[len(CGROUP_PREFIX):]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            path = os.path.join(mount, name)
            if not _read(os.path.join(path, "cgroup.procs")).split():
                log(f"removing {path}, left by an earlier run")
                os.rmdir(path)


def attach_loop(img, cleanup):
    r = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", img],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log(f"losetup --direct-io=on failed ({r.stderr.strip()}); attaching without direct I/O")
        r = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"losetup {img}: {r.stderr.strip()}")
    dev = r.stdout.strip()
    cleanup.push(f"losetup -d {dev}",
                 lambda: subprocess.run(["losetup", "-d", dev], check=True, capture_output=True))
    name = os.path.basename(dev)
    majmin = _read(f"/sys/block/{name}/dev").strip()
    try:
        dio = _read(f"/sys/block/{name}/loop/dio").strip() == "1"
    except OSError:
        dio = None
    return {"dev": dev, "majmin": majmin, "direct_io": dio, "image": img}


class Cgroup:
    def __init__(self, throttle, cleanup):
        self.throttle = throttle
        self.path = throttle.create(f"{CGROUP_PREFIX}{os.getpid()}")
        self.procs = os.path.join(self.path, "cgroup.procs")
        cleanup.push(f"cgroup {self.path}", self.remove)

    def wrap(self, cmd):
        """`cmd` started so that it moves itself into the cgroup before it execs (a shell that
        writes its own pid, then execs: unlike preexec_fn, safe with the harness's threads)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs] + list(cmd)

    def pids(self):
        try:
            return [int(p) for p in _read(self.procs).split()]
        except OSError:
            return []

    def remove(self):
        # Only processes this run started (and their children) are in this cgroup.
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        os.rmdir(self.path)


# --------------------------------------------------------------------------
# loads

def read_rchar(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Procs:
    """Processes this run started, killed by pid (with their children) on every exit path."""

    def __init__(self, cleanup):
        self.live = set()
        cleanup.push("processes", self.kill_all)

    def spawn(self, cmd, **kw):
        p = subprocess.Popen(cmd, **kw)
        self.live.add(p)
        return p

    def kill(self, p, sig=signal.SIGKILL):
        if p.poll() is None:
            kill_tree(p.pid, sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_tree(p.pid, signal.SIGKILL)
            p.wait()
        self.live.discard(p)

    def kill_all(self):
        for p in list(self.live):
            self.kill(p)


class DdLoop:
    """Foreground: dd reading a device with O_DIRECT in 1 MiB blocks, restarted whenever it
    reaches the end; bytes read are sampled from /proc/PID/io (rchar) every 100 ms."""

    def __init__(self, dev, cgroup, procs):
        self.dev, self.cgroup, self.procs = dev, cgroup, procs
        self.samples = []  # (monotonic time, cumulative bytes)
        self.total = 0
        self.stop_evt = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.t_start = time.monotonic()
        self.samples.append((self.t_start, 0))
        self.thread.start()
        return self

    def _loop(self):
        try:
            while not self.stop_evt.is_set():
                p = self.procs.spawn(self.cgroup.wrap(["dd", f"if={self.dev}", "of=/dev/null", "bs=1M",
                                                        "iflag=direct"]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                base = self.total
                while p.poll() is None and not self.stop_evt.wait(0.1):
                    r = read_rchar(p.pid)
                    if r is not None:
                        self.samples.append((time.monotonic(), base + r))
                if p.poll() is None:  # stopped by us
                    r = read_rchar(p.pid)
                    t = time.monotonic()
                    self.procs.kill(p)
                    if r is not None:
                        self.total = base + r
                    self.samples.append((t, self.total))
                    break
                err = p.stderr.read().decode(errors="replace")
                self.procs.live.discard(p)
                m = re.search(r"^(\d+) bytes", err, re.M)
                if p.returncode != 0 or not m:
                    raise RuntimeError(f"dd {self.dev} failed ({p.returncode}): {err.strip()}")
                self.total = base + int(m.group(1))
                self.samples.append((time.monotonic(), self.total))
        except Exception as e:
            self.error = e

    def stop(self):
        self.stop_evt.set()
        self.thread.join()
        self.t_end = time.monotonic()
        if self.error:
            raise self.error
        secs = self.t_end - self.t_start
        return {"dev": self.dev, "bytes": self.total, "seconds": secs,
                "mb_s": self.total / secs / 1e6 if secs > 0 else 0.0}


class CpuLoad:
    """Dummy CPU load on every core: stress-ng --cpu N if installed, else N Python busy loops."""

    def __init__(self, cores, cgroup, procs):
        self.cores, self.cgroup, self.procs = cores, cgroup, procs
        self.ps = []

    def start(self):
        self.t_start = time.monotonic()
        if shutil.which("stress-ng"):
            self.tool = f"stress-ng --cpu {self.cores}"
            self.ps = [self.procs.spawn(self.cgroup.wrap(["stress-ng", "--cpu", str(self.cores),
                                                            "--quiet"]),
                                        stdout=subprocess.DEVNULL)]
        else:
            self.tool = f"{self.cores} x python3 busy loop"
            self.ps = [self.procs.spawn(self.cgroup.wrap([sys.executable, "-c", "while True: pass"]))
                       for _ in range(self.cores)]
        return self

    def stop(self):
        for p in self.ps:
            self.procs.kill(p, signal.SIGTERM)
        self.t_end = time.monotonic()
        return {"tool": self.tool, "seconds": self.t_end - self.t_start}


# --------------------------------------------------------------------------
# runs

def measure_alone(disks, cgroup, procs, seconds):
    """The foreground dd alone on each disk: the bandwidth the emulated disk gives one reader."""
    out = {}
    for name, d in disks.items():
        loop = DdLoop(d["dev"], cgroup, procs).start()
        time.sleep(seconds)
        out[name] = loop.stop()
        log(f"foreground alone on disk {name} ({d['dev']}): {out[name]['mb_s']:.1f} MB/s")
    return out


def run_schedule(label, regulated, args, binary, disks, cgroup, procs, lengths, out_dir):
    trace = os.path.join(out_dir, f"trace-{label}.jsonl")
    state_dir = tempfile.mkdtemp(prefix="tact-bench-library-state-")
    item = CLEANUP.push(f"rm {state_dir}", lambda: shutil.rmtree(state_dir, ignore_errors=True))
    total = sum(lengths)
    cmd = [binary, disks["A"]["dev"], disks["B"]["dev"], "--duration", f"{total + 0.5:.1f}s",
           "--priorities", args.priorities, "--out", trace, "--testpoint", args.testpoint,
           "--bootstrap", str(args.bootstrap), "--probation", "0s", "--nice", str(args.nice),
           "--passes", str(args.passes), "--chunk", "1MiB", "--warmup", args.warmup]
    if not regulated:
        cmd.append("--unregulated")
    # A fresh state (nothing calibrated is loaded), and no tact daemon: this measures the
    # in-process supervisor alone, even on a machine where a daemon runs.
    env = dict(os.environ, TACT_STATE_DIR=state_dir, TACT_NAME="bench-library-two-disks",
               TACT_SOCKET=os.path.join(state_dir, "no-daemon.sock"))
    env.pop("TACT_DISABLE", None)
    log(f"run '{label}': {' '.join(cmd)}")
    stderr_path = os.path.join(out_dir, f"two_disks-{label}.log")
    with open(stderr_path, "w") as errf:
        t_launch = time.monotonic()
        prog = procs.spawn(cgroup.wrap(cmd), stdout=errf, stderr=subprocess.STDOUT, env=env)
        phases = []
        t_next = t_launch
        for (name, loads), length in zip(SCHEDULE, lengths):
            t_start = time.monotonic()
            running = {}
            for load in loads:
                if load == "cpu":
                    running[load] = CpuLoad(os.cpu_count() or 2, cgroup, procs).start()
                else:
                    running[load] = DdLoop(disks[load]["dev"], cgroup, procs).start()
            t_next += length
            while time.monotonic() < t_next:
                if prog.poll() is not None:
                    raise SystemExit(f"two_disks exited early ({prog.returncode}); see {stderr_path}")
                time.sleep(min(0.2, max(0.0, t_next - time.monotonic())))
            fg = {load: r.stop() for load, r in running.items()}
            samples = {load: r.samples for load, r in running.items() if isinstance(r, DdLoop)}
            t_end = time.monotonic()
            phases.append({"name": name, "t_start": t_start, "t_end": t_end, "loads": list(loads),
                           "fg": fg, "fg_samples": samples})
            desc = ", ".join(f"fg {k} {v['mb_s']:.1f} MB/s" for k, v in fg.items() if k != "cpu")
            log(f"  phase {name:9s} {t_end - t_start:5.1f} s {('(' + desc + ')') if desc else ''}")
        try:
            prog.wait(timeout=20)
        except subprocess.TimeoutExpired:
            log("two_disks did not exit after its duration; killing it")
            procs.kill(prog)
        procs.live.discard(prog)
        if prog.returncode != 0:
            raise SystemExit(f"two_disks failed ({prog.returncode}); see {stderr_path}")
    CLEANUP.pop(item)
    with open(trace) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {"label": label, "regulated": regulated, "t_launch": t_launch, "phases": phases,
            "records": records, "trace": trace}


# --------------------------------------------------------------------------
# analysis

def overlap(a0, a1, b0, b1):
    return max(0.0, min(a1, b1) - max(a0, b0))


def thread_window(chunks, waits, thread, w0, w1):
    """Duty cycle (fraction of [w0, w1] the thread was executing, holding the token),
    throughput, and the time it spent suspended and waiting for the other thread's turn."""
    length = max(w1 - w0, 1e-9)
    run_s = 0.0
    nbytes = 0.0
    for c in chunks:
        if c["thread"] != thread:
            continue
        o = overlap(c["t_start"], c["t_end"], w0, w1)
        if o > 0:
            run_s += o
            nbytes += c["bytes"] * o / max(c["t_end"] - c["t_start"], 1e-9)
    susp = wait = 0.0
    for w in waits:
        if w["thread"] != thread:
            continue
        o = overlap(w["t_start"], w["t_end"], w0, w1)
        if o > 0:
            frac = o / max(w["t_end"] - w["t_start"], 1e-9)
            susp += w["suspended"] * frac
            wait += w["waited"] * frac
    return {"duty": run_s / length, "mb_s": nbytes / length / 1e6, "bytes": nbytes,
            "suspended_frac": min(1.0, susp / length), "waiting_frac": min(1.0, wait / length)}


def reaction(chunks, waits, thread, t0, t1):
    """Seconds from the phase's start to the thread's first suspension (its reaction to a
    load), and to its first second of running at least 80% of the time (its recovery)."""
    susp = [w["t_start"] for w in waits if w["thread"] == thread and w["suspended"] > 0
            and t0 <= w["t_start"] < t1]
    busy = None
    mine = [c for c in chunks if c["thread"] == thread and c["t_end"] > t0 and c["t_start"] < t1]
    t = t0
    while t + 1.0 <= t1:
        if thread_window(mine, [], thread, t, t + 1.0)["duty"] >= 0.8:
            busy = t - t0
            break
        t += 0.25
    return {"first_suspension_s": (min(susp) - t0) if susp else None, "first_busy_second_s": busy}


def analyse(run, settle):
    recs = run["records"]
    chunks = [r for r in recs if r["kind"] == "chunk"]
    waits = [r for r in recs if r["kind"] == "wait"]
    start = next((r for r in recs if r["kind"] == "start"), {})
    staged = bool(start.get("staged_calibration"))
    # Both threads calibrated one after the other; the priorities apply from the first final one.
    final = [r["t"] for r in recs if r["kind"] == "priority" and r.get("final")]
    calibrated_at = min(final) if final else None
    out = []
    for ph in run["phases"]:
        t0, t1 = ph["t_start"], ph["t_end"]
        s0 = min(t0 + settle, t1)
        if ph["name"] == "quiet" and staged:
            # The priorities apply once both units have calibrated.
            s0 = min(max(s0, calibrated_at or t1), t1)
        row = {"name": ph["name"], "seconds": t1 - t0, "steady_from": s0 - t0, "threads": {},
               "fg": {k: v for k, v in ph["fg"].items()}}
        for th in ("A", "B"):
            row["threads"][th] = {"phase": thread_window(chunks, waits, th, t0, t1),
                                  "steady": thread_window(chunks, waits, th, s0, t1),
                                  **reaction(chunks, waits, th, t0, t1)}
        out.append(row)
    summaries = {r["thread"]: r for r in recs if r["kind"] == "summary"}
    return {"phases": out, "summary": summaries,
            "calibrated_after": (calibrated_at - run["t_launch"]) if calibrated_at else None}


def verdicts(tact_rows):
    """The paper's qualitative claim, phase by phase, from the steady duty cycles."""
    d = {r["name"]: (r["threads"]["A"]["steady"]["duty"], r["threads"]["B"]["steady"]["duty"])
         for r in tact_rows}
    quiet_sum = sum(d["quiet"]) or 1.0
    out = {}
    for name, (a, b) in d.items():
        if name in ("quiet", "quiet-end", "fg-B"):
            ok = a >= 0.5 and a >= 3 * b
            why = f"A {a:.2f} >= 0.5 and >= 3 x B {b:.2f}"
        elif name == "fg-A":
            ok = b >= 0.5 and b >= 3 * a
            why = f"B {b:.2f} >= 0.5 and >= 3 x A {a:.2f}"
        else:
            ok = (a + b) <= 0.5 * quiet_sum
            why = f"A+B {a + b:.2f} <= half of quiet's {quiet_sum:.2f}"
        out[name] = {"pass": ok, "rule": why, "paper": PAPER[name]}
    return out


def series(run, step=1.0):
    """Duty and throughput per `step` s of each thread, and foreground MB/s, from t_launch."""
    t0 = run["t_launch"]
    end = run["phases"][-1]["t_end"]
    n = int((end - t0) / step) + 1
    duty = {"A": [0.0] * n, "B": [0.0] * n}
    mbs = {"A": [0.0] * n, "B": [0.0] * n}
    for c in run["records"]:
        if c["kind"] != "chunk":
            continue
        a, b = c["t_start"] - t0, c["t_end"] - t0
        rate = c["bytes"] / max(b - a, 1e-9)
        i = max(0, int(a / step))
        while i < n and i * step < b:
            o = overlap(a, b, i * step, (i + 1) * step)
            duty[c["thread"]][i] += o / step
            mbs[c["thread"]][i] += rate * o / step / 1e6
            i += 1
    fg = {"A": [None] * n, "B": [None] * n}
    for ph in run["phases"]:
        for disk, samples in ph["fg_samples"].items():
            for (ta, ba), (tb, bb) in zip(samples, samples[1:]):
                i = int((tb - t0) / step)
                if 0 <= i < n and tb > ta:
                    fg[disk][i] = (fg[disk][i] or 0.0)
                    fg[disk][i] += (bb - ba) / 1e6 / step
    return {"t": [i * step for i in range(n)], "duty": duty, "mb_s": mbs, "fg_mb_s": fg}


def plot(runs, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tact = runs["tact"]
    t0 = tact["t_launch"]
    colors = {"quiet": "#ffffff", "fg-A": "#fde0c5", "fg-B": "#c5e3fd", "fg-both": "#e3c5fd",
              "cpu": "#fdc5c5", "quiet-end": "#ffffff"}

    def shade(ax, run, labels=False):
        for ph in run["phases"]:
            a, b = ph["t_start"] - run["t_launch"], ph["t_end"] - run["t_launch"]
            ax.axvspan(a, b, color=colors[ph["name"]], alpha=0.8, lw=0)
            ax.axvline(a, color="#999999", lw=0.5)
            if labels:
                ax.text((a + b) / 2, 1.02, ph["name"], ha="center", va="bottom", fontsize=8,
                        transform=ax.get_xaxis_transform())

    fig, axes = plt.subplots(3, 1, figsize=(12, 9), sharex=True,
                             gridspec_kw={"height_ratios": [1.2, 1, 1]})
    # Figure 9 style: loads on top, each thread's execution below.
    ax = axes[0]
    shade(ax, tact, labels=True)
    rows = [("fg on A", 4), ("fg on B", 3), ("CPU load", 2), ("thread A (prio high)", 1),
            ("thread B (prio low)", 0)]
    for ph in tact["phases"]:
        a, b = ph["t_start"] - t0, ph["t_end"] - t0
        for load, y in (("A", 4), ("B", 3), ("cpu", 2)):
            if load in ph["loads"]:
                ax.broken_barh([(a, b - a)], (y + 0.1, 0.8), color="#555555")
    for th, y, col in (("A", 1, "tab:blue"), ("B", 0, "tab:orange")):
        bars = [(c["t_start"] - t0, c["t_end"] - c["t_start"]) for c in tact["records"]
                if c["kind"] == "chunk" and c["thread"] == th]
        ax.broken_barh(bars, (y + 0.1, 0.8), color=col)
    ax.set_yticks([y + 0.5 for _, y in rows], [n for n, _ in rows], fontsize=8)
    ax.set_ylim(0, 5)
    fig.suptitle("tact-lib: two regulated threads on two throttled disks (MS Manners Figure 9); "
                 "top: execution trace", fontsize=10)
    # duty cycles
    ax = axes[1]
    shade(ax, tact)
    s = series(tact, 1.0)
    ax.plot(s["t"], s["duty"]["A"], color="tab:blue", label="thread A (priority high)")
    ax.plot(s["t"], s["duty"]["B"], color="tab:orange", label="thread B (priority low)")
    if tact.get("calibrated_after"):
        ax.axvline(tact["calibrated_after"], color="k", ls=":", lw=1)
        ax.text(tact["calibrated_after"], 1.05, " both calibrated: priorities apply", fontsize=7)
    ax.set_ylabel("duty cycle (1 s bins)")
    ax.set_ylim(0, 1.15)
    ax.legend(loc="upper right", fontsize=8)
    # foreground throughput, tact vs unregulated
    ax = axes[2]
    shade(ax, tact)
    top = 1.0
    for label, ls in (("tact", "-"), ("unregulated", "--")):
        if label not in runs:
            continue
        s = series(runs[label], 1.0)
        for disk, col in (("A", "tab:red"), ("B", "tab:green")):
            ys = s["fg_mb_s"][disk]
            top = max([top] + [y for y in ys if y is not None])
            ax.plot(s["t"], [y if y is not None else float("nan") for y in ys], color=col, ls=ls,
                    label=f"foreground dd on {disk}, {label}")
    ax.set_ylabel("foreground MB/s")
    ax.set_ylim(0, top * 1.3)
    ax.set_xlabel("seconds since start")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    path = os.path.join(out_dir, "duty.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fmt_table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def report(results):
    tact = {r["name"]: r for r in results["analysis"]["tact"]["phases"]}
    unreg = {r["name"]: r for r in results["analysis"].get("unregulated", {"phases": []})["phases"]}
    ver = results["verdicts"]
    rows = []
    for name, _ in SCHEDULE:
        t = tact[name]["threads"]
        u = unreg.get(name, {}).get("threads")
        rows.append([
            name,
            f"{t['A']['steady']['duty']:.2f} / {t['B']['steady']['duty']:.2f}",
            f"{t['A']['phase']['duty']:.2f} / {t['B']['phase']['duty']:.2f}",
            f"{t['A']['phase']['mb_s']:.1f} / {t['B']['phase']['mb_s']:.1f}",
            f"{u['A']['phase']['mb_s']:.1f} / {u['B']['phase']['mb_s']:.1f}" if u else "-",
            PAPER[name],
            ("PASS" if ver[name]["pass"] else "FAIL") + f" ({ver[name]['rule']})",
        ])
    print("\nRegulated threads (A = high priority, B = low); duty = fraction of wall time executing "
          "(holding the run token)")
    print(fmt_table(rows, ["phase", "tact duty A/B (steady)", "tact duty A/B (phase)",
                           "tact MB/s A/B", "unreg MB/s A/B", "paper (Fig. 9)", "verdict"]))
    alone = results.get("fg_alone", {})
    rows = []
    for name, _ in SCHEDULE:
        for disk in ("A", "B"):
            tf = tact[name]["fg"].get(disk)
            if not tf:
                continue
            uf = unreg.get(name, {}).get("fg", {}).get(disk)
            base = alone.get(disk, {}).get("mb_s")

            def slow(x):
                return f"{(base / x - 1) * 100:+.0f}%" if base and x else "-"
            rows.append([name, disk, f"{base:.1f}" if base else "-",
                         f"{uf['mb_s']:.1f}" if uf else "-", slow(uf["mb_s"]) if uf else "-",
                         f"{tf['mb_s']:.1f}", slow(tf["mb_s"])])
    print("\nForeground dd (O_DIRECT, 1 MiB): MB/s and slowdown (time to read the same data) vs alone")
    print(fmt_table(rows, ["phase", "disk", "alone", "unregulated", "slowdown", "tact", "slowdown"]))
    print("paper: unregulated +90% median, MS Manners +7% (library) to +12% (Groveler)")

    def sec(v):
        return f"{v:.1f} s" if v is not None else "never"
    print("\nReaction and recovery under tact (from the phase's start):")
    for name, th in (("fg-A", "A"), ("fg-B", "B"), ("fg-both", "A"), ("fg-both", "B"),
                     ("cpu", "A"), ("cpu", "B")):
        r = tact[name]["threads"][th]
        print(f"  {name:8s} thread {th}: first suspension after {sec(r['first_suspension_s'])}")
    for name, th in (("fg-A", "B"), ("fg-B", "A"), ("quiet-end", "A")):
        r = tact[name]["threads"][th]
        print(f"  {name:8s} thread {th}: first second running >= 80% after "
              f"{sec(r['first_busy_second_s'])}")


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "bench/out/library"))
    ap.add_argument("--phase", type=float, default=20.0, help="seconds per phase (default 20)")
    ap.add_argument("--first-phase", type=float, default=25.0,
                    help="seconds of the first, quiet phase, where both threads bootstrap (default 25)")
    ap.add_argument("--alone", type=float, default=5.0,
                    help="seconds of foreground alone per disk, the baseline (default 5)")
    ap.add_argument("--testpoint", default="100ms")
    ap.add_argument("--bootstrap", type=int, default=50,
                    help="evaluated testpoints of each thread's bootstrap (default 50: 5 s at 100 ms)")
    ap.add_argument("--priorities", default="1,0", help="priorities of threads A,B")
    ap.add_argument("--warmup", default="1s",
                    help="unregulated reading of each thread before it registers (default 1s)")
    ap.add_argument("--nice", type=int, default=19, help="CPU nice of the regulated threads")
    ap.add_argument("--passes", type=int, default=20,
                    help="checksum passes over each chunk: the threads' CPU work (default 20, "
                         "a few ms per 1 MiB chunk)")
    ap.add_argument("--bps", type=float, default=40e6,
                    help="read bandwidth of each emulated disk, bytes/s (default 40e6)")
    ap.add_argument("--size-mib", type=int, default=2048, help="size of each disk image")
    ap.add_argument("--image-dir", default="/var/tmp")
    ap.add_argument("--remove-images", action="store_true",
                    help="delete the disk images at the end (default: keep them for the next run)")
    ap.add_argument("--skip-unregulated", action="store_true")
    ap.add_argument("--two-disks", help="prebuilt two_disks example (default: build it)")
    ap.add_argument("--cargo", default="cargo")
    ap.add_argument("--lock", default=DEFAULT_LOCK,
                    help="wait while this file exists, then hold it during the run ('' to skip)")
    ap.add_argument("--self-test", action="store_true",
                    help="check cgroup v1/v2 detection and the analysis on fixtures, then exit")
    args = ap.parse_args()

    if args.self_test:
        self_test()
        return
    require_root_and_tools()
    with open("/proc/mounts") as f:
        throttle, notes = detect_throttle(f.read())
    if throttle is None:
        raise SystemExit(
            "no cgroup read-bandwidth limit on this machine, so the two loop devices cannot be made "
            "independent bottlenecks:\n  - " + "\n  - ".join(notes) +
            "\nWithout it both 'disks' are the same physical disk, and Figure 9's isolation cannot "
            "be shown honestly; this benchmark refuses to run rather than report a fake result.")
    os.makedirs(args.out, exist_ok=True)
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/library")

    binary = args.two_disks
    if not binary:
        run_cargo(args.cargo, "build", "--release", "-p", "tact-lib", "--example", "two_disks")
        binary = os.path.join(target_dir(), "release", "examples", "two_disks")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"{binary}: not an executable")

    size = args.size_mib << 20
    images = {d: os.path.join(args.image_dir, f"{IMAGE_PREFIX}-{d.lower()}-{args.size_mib}M.img")
              for d in ("A", "B")}
    detach_stale(images.values())
    remove_stale_cgroups(throttle.mount)
    image_state = {d: ensure_image(p, size) for d, p in images.items()}
    if args.remove_images:
        for p in images.values():
            CLEANUP.push(f"rm {p}", lambda p=p: [os.unlink(x) for x in (p, p + ".filled")
                                                 if os.path.exists(x)])
    disks = {d: attach_loop(p, CLEANUP) for d, p in images.items()}
    throttle.prepare(CLEANUP)
    cgroup = Cgroup(throttle, CLEANUP)
    for d in disks.values():
        throttle.limit(cgroup.path, d["majmin"], args.bps)
    procs = Procs(CLEANUP)
    log(f"throttle: {throttle.kind}, cgroup {cgroup.path}: "
        f"{'; '.join(x for x in throttle.limits(cgroup.path) if x.strip())}")
    for d, info in disks.items():
        log(f"disk {d}: {info['dev']} ({info['majmin']}) over {info['image']} "
            f"[{image_state[d]}], direct I/O {info['direct_io']}")

    lengths = [args.first_phase] + [args.phase] * (len(SCHEDULE) - 1)
    results = {
        "config": {k: v for k, v in vars(args).items() if k not in ("self_test",)},
        "machine": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                    "throttle": throttle.kind, "cgroup": cgroup.path,
                    "disks": disks, "cpu_load": "stress-ng" if shutil.which("stress-ng") else "python3 busy loops"},
        "schedule": [{"name": n, "loads": list(l), "seconds": s} for (n, l), s in zip(SCHEDULE, lengths)],
        "paper": PAPER,
    }
    results["fg_alone"] = measure_alone(disks, cgroup, procs, args.alone)
    runs = {"tact": run_schedule("tact", True, args, binary, disks, cgroup, procs, lengths, args.out)}
    if not args.skip_unregulated:
        time.sleep(1)
        runs["unregulated"] = run_schedule("unregulated", False, args, binary, disks, cgroup, procs,
                                           lengths, args.out)
    settle = min(5.0, args.phase / 4)
    results["analysis"] = {k: analyse(r, settle) for k, r in runs.items()}
    runs["tact"]["calibrated_after"] = results["analysis"]["tact"]["calibrated_after"]
    results["verdicts"] = verdicts(results["analysis"]["tact"]["phases"])
    results["series"] = {k: series(r, 1.0) for k, r in runs.items()}
    results["phases"] = {k: [{kk: vv for kk, vv in ph.items() if kk != "fg_samples"}
                             for ph in r["phases"]] for k, r in runs.items()}
    results["t_launch"] = {k: r["t_launch"] for k, r in runs.items()}
    results["traces"] = {k: r["trace"] for k, r in runs.items()}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    try:
        png = plot(runs, args.out)
        log(f"wrote {png}")
    except ImportError as e:
        log(f"no plot: {e} (make bench-library installs matplotlib into .venv)")
    report(results)
    log(f"wrote {os.path.join(args.out, 'results.json')}")
    CLEANUP.run()


if __name__ == "__main__":
    main()
