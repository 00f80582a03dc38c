"""E1's processes under each mode, the harness's CPU readings of them, and their teardown.

Modes: `tact` / `tact-signals` (`tact tickets run` with the cgroup / signals backend), `flat-cgroup`
(one v1 cpu cgroup per task, cpu.shares from the tickets), `nice` (levels for the awake-all
proportions), `none`. Every task is `sh -c '[sleep H;] exec spin ...'`, bench/share's spinner
(built from bench/share/spin.c), pinned with the controller to one CPU.

Safety (DESIGN.md invariants 3 and 5): signals go only to processes this harness started, through
Popen or through pidfds taken after checking that the pid descends from a process we started; the
harness is a child subreaper, so spinners whose tact died are still reaped; cgroups are made only
under `tact-test-tickets-<pid>` in the cpu (and cpuacct) hierarchy and removed on every exit path.
"""
import ctypes
import mmap
import os
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common.procs import _read_ppid_map, kill_tree, parse_mounts, read_state  # noqa: E402
from common.cgroups import remove_stale, remove_tree  # noqa: E402

import e1  # noqa: E402

CGROUP_PREFIX = "tact-test-tickets-"
SLOT_BYTES = 32
CLK_TCK = os.sysconf("SC_CLK_TCK")
TACT_MODES = {"tact": "cgroup", "tact-signals": "signals"}
MODES = ["tact", "tact-signals", "flat-cgroup", "nice", "none"]
BASELINES = ["flat-cgroup", "nice", "none"]
TACT_GRACE_S = 8.0   # tact's own teardown gives its jobs 5 s between SIGTERM and SIGKILL


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def set_child_subreaper():
    """Orphaned descendants (spinners whose tact exited) are reparented to this process."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except OSError:
        return False


# --------------------------------------------------------------------------
# what the harness reads

def parse_stat(data):
    """(state, utime + stime in s) from the bytes of /proc/PID/stat (comm may hold spaces and
    parentheses: fields are counted after the last ')')."""
    rest = data[data.rfind(b")") + 2:].split()
    # after ')': state is field 3 of the man page, utime 14 and stime 15
    return rest[0].decode(), (int(rest[11]) + int(rest[12])) / CLK_TCK


def read_cpu(pid):
    """(utime + stime in s, sum_exec_runtime in s from /proc/PID/schedstat) or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            _, cpu = parse_stat(f.read())
        with open(f"/proc/{pid}/schedstat") as f:
            ns = int(f.read().split()[0])
        return cpu, ns / 1e9
    except (OSError, ValueError, IndexError):
        return None


class Slots:
    """spin.c's shared file of 32-byte slots {pid, iterations, phase, reserved}, one per task."""

    def __init__(self, path, count):
        self.path = path
        with open(path, "wb") as f:
            f.write(b"\0" * (count * SLOT_BYTES))
        self.fd = os.open(path, os.O_RDWR)
        self.map = mmap.mmap(self.fd, count * SLOT_BYTES)
        self.count = count

    def clear(self):
        self.map[:] = b"\0" * (self.count * SLOT_BYTES)

    def pid(self, i):
        return struct.unpack_from("<q", self.map, i * SLOT_BYTES)[0]

    def iterations(self, i):
        return struct.unpack_from("<q", self.map, i * SLOT_BYTES + 8)[0]

    def close(self):
        try:
            self.map.close()
            os.close(self.fd)
        except (OSError, ValueError):
            pass


# --------------------------------------------------------------------------
# cgroups

def detect_cgroup_v1(mounts_text):
    """(cpu mount with cpu.shares, separate cpuacct mount or None), or (None, None)."""
    cpu = acct = None
    for fstype, mp, opts in parse_mounts(mounts_text):
        o = opts.split(",")
        if fstype == "cgroup" and "cpu" in o and os.path.exists(os.path.join(mp, "cpu.shares")):
            cpu = mp
        elif fstype == "cgroup" and "cpuacct" in o and "cpu" not in o:
            acct = mp
    return cpu, (acct if cpu else None)


class Cgroups:
    """tact-test-tickets-<pid> in the cpu hierarchy (and the cpuacct one, where tact's cgroup
    backend may mirror its groups to count usage), one r<k> per run."""

    def __init__(self, cpu_mount, acct_mount):
        self.name = f"{CGROUP_PREFIX}{os.getpid()}"
        self.tops = [os.path.join(m, self.name) for m in (cpu_mount, acct_mount) if m]
        for top in self.tops:
            os.mkdir(top)
        self.seq = 0

    def new_run(self):
        """(cpu r<k>, cpuacct r<k> or None)."""
        self.seq += 1
        paths = [os.path.join(top, f"r{self.seq}") for top in self.tops]
        for p in paths:
            os.mkdir(p)
        return paths[0], (paths[1] if len(paths) > 1 else None)

    @staticmethod
    def child(parent, name, shares):
        path = os.path.join(parent, name)
        os.mkdir(path)
        _write(os.path.join(path, "cpu.shares"), f"{shares}\n")
        return path

    def remove(self):
        for top in self.tops:
            if os.path.isdir(top):
                remove_tree(top)

    @staticmethod
    def remove_stale(mount):
        """Empty tact-test-tickets-<dead pid> trees left by a harness that was SIGKILLed."""
        return remove_stale(mount, CGROUP_PREFIX)


# --------------------------------------------------------------------------
# one run

def _is_descendant(pid, ancestor, ppids):
    for _ in range(64):
        if pid == ancestor:
            return True
        pid = ppids.get(pid)
        if not pid:
            return False
    return False


def _child_setup(cpu, join=None, nice=0):
    """In the child before exec: SIGTERM if the harness dies, pin to `cpu`, join a cgroup, nice."""
    def setup():
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        os.sched_setaffinity(0, {cpu})
        if join:
            _write(join, f"{os.getpid()}\n")
        if nice:
            os.nice(nice)
    return setup


class Run:
    """One run: its processes (started by start()), the CPU samples, and an idempotent teardown."""

    def __init__(self, env, mode, tag):
        self.env = env
        self.mode = mode
        self.tag = tag
        self.launchers = {}     # task -> Popen (baselines) or {"tact": Popen}
        self.members = {}       # task -> (pid, pidfd)
        self.cg = (None, None)
        self.notes = []
        self.knobs = {}
        self.files = {}
        self.torn_down = False

    def task_command(self, task):
        i = e1.TASKS.index(task)
        cmd = f"exec {self.env.spin} -w {os.getpid()} {self.env.slots.path} {i}"
        if task == e1.SLEEPER:
            cmd = f"sleep {self.env.seconds / 2:.3f}; {cmd}"
        return cmd

    def start(self):
        env = self.env
        env.slots.clear()
        if self.mode in TACT_MODES:
            self._start_tact()
            return
        joins = {t: None for t in e1.TASKS}
        nices = {t: 0 for t in e1.TASKS}
        if self.mode == "flat-cgroup":
            self.cg = env.cgroups.new_run()
            shares = e1.flat_cgroup_shares()
            self.knobs["cpu.shares"] = shares
            for t in e1.TASKS:
                joins[t] = os.path.join(Cgroups.child(self.cg[0], t, shares[t]), "cgroup.procs")
        elif self.mode == "nice":
            nices = e1.nice_choice()
            self.knobs["nice"] = nices
        for t in e1.TASKS:
            self.launchers[t] = subprocess.Popen(
                ["sh", "-c", self.task_command(t)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, close_fds=True,
                preexec_fn=_child_setup(env.pin_cpu, joins[t], nices[t]))

    def _start_tact(self):
        env = self.env
        setup = os.path.join(env.tmp, f"{self.tag}.toml")
        _write(setup, e1.setup_toml({t: self.task_command(t) for t in e1.TASKS}))
        jlog = os.path.join(env.tmp, f"{self.tag}.jsonl")
        cmd = [env.tact, "tickets", "run", setup, "--backend", TACT_MODES[self.mode],
               "--duration", f"{int(env.seconds + 10)}s", "--json-log", jlog]
        join = None
        if self.mode == "tact" and env.cgroups is not None:
            # tact's cgroups under ours: its cpu groups via --cgroup-parent, and whatever it makes
            # under its own cpuacct cgroup (a usage mirror) lands in ours because it starts there
            self.cg = env.cgroups.new_run()
            cmd += ["--cgroup-parent", self.cg[0]]
            if self.cg[1]:
                join = os.path.join(self.cg[1], "cgroup.procs")
        cmd += env.tact_extra
        self.knobs["tact_cmd"] = " ".join(cmd)
        self.files = {"setup": setup, "json_log": jlog, "out": os.path.join(env.tmp, f"{self.tag}.out"),
                      "err": os.path.join(env.tmp, f"{self.tag}.err")}
        with open(self.files["out"], "wb") as out, open(self.files["err"], "wb") as err:
            self.launchers["tact"] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                                      close_fds=True, preexec_fn=_child_setup(env.pin_cpu, join))

    def tact_output(self, limit=3000):
        out = {}
        for k in ("out", "err"):
            try:
                with open(self.files[k], errors="replace") as f:
                    out[k] = f.read()[-limit:]
            except (OSError, KeyError):
                pass
        return out

    def dead_launcher(self):
        """A reason if a launcher (tact, or a task's sh) has exited during the run."""
        for name, p in self.launchers.items():
            if p.poll() is not None:
                why = f"{name} exited with {p.returncode}"
                if name == "tact":
                    why += ": " + (self.tact_output(800).get("err", "").strip() or "(no output)")
                return why
        return None

    def adopt(self, tasks):
        """Takes a pidfd of each task whose spinner has published its pid, after checking that the
        pid descends from a launcher; returns the tasks still missing."""
        missing = [t for t in tasks if t not in self.members and not self.env.slots.pid(e1.TASKS.index(t))]
        new = [t for t in tasks if t not in self.members and t not in missing]
        if new:
            ppids = _read_ppid_map()
            roots = [p.pid for p in self.launchers.values()]
            for t in new:
                pid = self.env.slots.pid(e1.TASKS.index(t))
                fd = os.pidfd_open(pid)
                if not any(_is_descendant(pid, r, ppids) for r in roots):
                    os.close(fd)
                    raise RuntimeError(f"{t}: pid {pid} in the slot file is not a descendant of this run")
                self.members[t] = (pid, fd)
        return missing

    def wait_started(self, tasks, timeout):
        deadline = time.monotonic() + timeout
        while self.adopt(tasks):
            why = self.dead_launcher()
            if why:
                raise RuntimeError(f"before all spinners started: {why}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"spinners {self.adopt(tasks)} not started after {timeout:.0f} s")
            time.sleep(0.01)

    def sample(self):
        """(t, {task: utime+stime s}, {task: schedstat s}, {task: iterations}) of the started tasks."""
        t = time.monotonic()
        cpu, sched, iters = {}, {}, {}
        for task, (pid, _) in self.members.items():
            v = read_cpu(pid)
            if v is None or read_state(pid) in (None, "Z"):
                raise RuntimeError(f"{task} (pid {pid}) exited during the run")
            cpu[task], sched[task] = v
            iters[task] = self.env.slots.iterations(e1.TASKS.index(task))
        return t, cpu, sched, iters

    def affinity_notes(self):
        for task, (pid, _) in self.members.items():
            try:
                aff = os.sched_getaffinity(pid)
            except OSError:
                continue
            if aff != {self.env.pin_cpu}:
                self.notes.append(f"{task}: affinity {sorted(aff)}, expected [{self.env.pin_cpu}]")

    def teardown(self):
        if self.torn_down:
            return
        self.torn_down = True
        tact = self.launchers.get("tact")
        if tact is not None and tact.poll() is None:
            tact.send_signal(signal.SIGTERM)  # tact resumes what it stopped, ends its jobs, prints its summary
            try:
                tact.wait(timeout=TACT_GRACE_S)
            except subprocess.TimeoutExpired:
                self.notes.append(f"tact ignored SIGTERM for {TACT_GRACE_S:.0f} s: SIGKILL")
                tact.kill()
                tact.wait()
        if tact is not None:
            time.sleep(0.05)
            stopped = [t for t, (pid, _) in self.members.items() if read_state(pid) in ("T", "t")]
            if stopped:
                self.notes.append(f"SAFETY: left stopped after tact exited: {', '.join(stopped)}")
        for task, (pid, fd) in self.members.items():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    signal.pidfd_send_signal(fd, sig)
                except OSError:
                    pass
        for name, p in self.launchers.items():
            if name != "tact" and p.poll() is None:
                kill_tree(p.pid)   # B3's sh may still have its `sleep` child
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.notes.append(f"{name} (pid {p.pid}) did not exit after SIGKILL")
        # spinners reparented to us (subreaper) after their tact exited
        deadline = time.monotonic() + 5
        pending = [pid for pid, _ in self.members.values()]
        while pending and time.monotonic() < deadline:
            left = []
            for pid in pending:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        left.append(pid)
                except ChildProcessError:
                    if read_state(pid) not in (None, "Z"):
                        left.append(pid)
            pending = left
            if pending:
                time.sleep(0.02)
        for _, fd in self.members.values():
            try:
                os.close(fd)
            except OSError:
                pass
        for path in self.cg:
            if not path:
                continue
            if self.mode in TACT_MODES:
                left = sorted(os.path.relpath(r, path) for r, _, _ in os.walk(path) if r != path)
                if left:
                    self.notes.append(f"tact left cgroups under {path}: {', '.join(left[:8])}")
            try:
                remove_tree(path)
            except OSError as e:
                self.notes.append(f"cgroup {path}: {e}")
        self.cg = (None, None)
