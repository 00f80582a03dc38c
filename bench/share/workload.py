"""Processes and cgroups of bench/share: the spinners, the modes that control them (kernel alone,
nice, cpulimit, cgroup v1 cpu.shares / v2 cpu.weight, tact share), and their teardown.

Safety rules (DESIGN.md, invariants 3 and 5): signals go only to processes this harness started,
through pidfds taken while they were provably ours (a direct child, or a descendant of a tact we
started); the harness is a child subreaper, so a spinner whose tact died is reparented to it and
can still be reaped; cgroups are created only under `tact-test-share-<pid>` in the cpu hierarchy
and removed on every exit path. The memory hierarchy is never touched.
"""
import ctypes
import mmap
import os
import re
import shlex
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common.procs import _read_ppid_map, descendants, parse_mounts, read_state  # noqa: E402

from metrics import cgroup_weights, cpulimit_limits, nice_levels  # noqa: E402
from common.cgroups import remove_stale, remove_tree  # noqa: E402

CGROUP_PREFIX = "tact-test-share-"
SLOT_BYTES = 32
SLOTS = 4096

BASELINE_MODES = ["kernel", "nice", "cpulimit", "cgroup"]
TACT_MODES = ["tact-basic", "tact-opt", "tact-cgroup", "tact-cons"]
ALL_MODES = BASELINE_MODES + TACT_MODES
CONTROLLER_MODES = {"cpulimit", "tact-basic", "tact-opt", "tact-cgroup", "tact-cons", "tact-noio"}

# what each tact mode passes and which `tact share` options it needs
TACT_ARGS = {
    "tact-basic": (["--basic", "--backend", "signals"], ["--job", "--quantum", "--basic", "--backend"]),
    "tact-opt": (["--backend", "signals"], ["--job", "--quantum", "--backend"]),
    "tact-cgroup": (["--backend", "cgroup"], ["--job", "--backend"]),
    "tact-cons": (["--backend", "signals", "--mode", "conserving"],
                  ["--job", "--quantum", "--backend", "--mode"]),
    # I/O test only: the blocked-entity heuristic off (spec: `io` parameter), if the CLI has it
    "tact-noio": (["--backend", "signals", "--no-io"], ["--job", "--quantum", "--backend", "--no-io"]),
}


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _read(path):
    with open(path) as f:
        return f.read()


def set_child_subreaper():
    """Orphaned descendants (spinners whose tact exited) are reparented to this process, so they
    stay reapable and their pids cannot be reused while we hold them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except OSError:
        return False


def _pdeathsig_term(join_procs=None):
    """In the child before exec: SIGTERM when the harness dies; join a cgroup if asked."""
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    if join_procs:
        with open(join_procs, "w") as f:
            f.write(f"{os.getpid()}\n")


def cpu_clock_id(pid):
    """clock_getcpuclockid(pid): the process's CPU-time clock, all threads, in ns."""
    return ((~pid) << 3) | 2


def cpulist(cpus):
    return ",".join(str(c) for c in sorted(cpus))


# --------------------------------------------------------------------------
# slots shared with the spinners

class Slots:
    """A file of 32-byte slots {pid, iterations, phase, reserved} mapped by every spinner."""

    def __init__(self, path, count=SLOTS):
        self.path = path
        with open(path, "wb") as f:
            f.write(b"\0" * (count * SLOT_BYTES))
        self.fd = os.open(path, os.O_RDWR)
        self.map = mmap.mmap(self.fd, count * SLOT_BYTES)
        self.count = count

    def clear(self, first, n):
        if first + n > self.count:
            raise ValueError(f"{first + n} slots needed, {self.count} available")
        self.map[first * SLOT_BYTES:(first + n) * SLOT_BYTES] = b"\0" * (n * SLOT_BYTES)

    def pid(self, i):
        return struct.unpack_from("<q", self.map, i * SLOT_BYTES)[0]

    def iterations(self, i):
        return struct.unpack_from("<q", self.map, i * SLOT_BYTES + 8)[0]

    def phase(self, i):
        return struct.unpack_from("<q", self.map, i * SLOT_BYTES + 16)[0]

    def close(self):
        try:
            self.map.close()
            os.close(self.fd)
        except (OSError, ValueError):
            pass


# --------------------------------------------------------------------------
# cgroups (cpu controller), detected from /proc/mounts

def detect_cpu_cgroup(mounts_text, prefix=""):
    """(version, mount) of a hierarchy with the cpu controller, or (None, reason). v1 first (this
    machine: /sys/fs/cgroup/cpu); v2 only if cpu is already enabled in the root's
    cgroup.subtree_control (the harness does not change the root's controllers)."""
    notes = []
    for fstype, mp, opts in parse_mounts(mounts_text):
        if fstype == "cgroup" and "cpu" in opts.split(","):
            root = prefix + mp
            if os.path.exists(os.path.join(root, "cpu.shares")):
                return (1, root), None
            notes.append(f"v1 cpu hierarchy at {mp} has no cpu.shares")
    for fstype, mp, opts in parse_mounts(mounts_text):
        if fstype == "cgroup2":
            root = prefix + mp
            try:
                sub = _read(os.path.join(root, "cgroup.subtree_control")).split()
            except OSError as e:
                notes.append(f"cgroup2 at {mp}: {e}")
                continue
            if "cpu" in sub:
                return (2, root), None
            notes.append(f"cgroup2 at {mp}: cpu not enabled in cgroup.subtree_control")
    return (None, None), "; ".join(notes) or "no cgroup hierarchy with the cpu controller mounted"


def detect_cpuacct_v1(mounts_text, prefix=""):
    """A v1 cpuacct hierarchy mounted apart from cpu (this machine), or None. tact's cgroup
    backend mirrors its cgroups there, under its own cpuacct cgroup, to count usage."""
    for fstype, mp, opts in parse_mounts(mounts_text):
        o = opts.split(",")
        if fstype == "cgroup" and "cpuacct" in o and "cpu" not in o:
            return prefix + mp
    return None


class CpuCgroups:
    """tact-test-share-<pid> under the cpu hierarchy; per run r<k>/[g<j>/]p<i> children; and, for
    tact's cgroup backend on a v1 machine with a separate cpuacct hierarchy, the same
    tact-test-share-<pid>/r<k> there, where tact is started so that its usage mirror lands in it."""

    def __init__(self, version, mount, name=None, acct_mount=None):
        self.version = version
        self.mount = mount
        self.name = name or f"{CGROUP_PREFIX}{os.getpid()}"
        self.top = os.path.join(mount, self.name)
        os.mkdir(self.top)
        if version == 2:
            _write(os.path.join(self.top, "cgroup.subtree_control"), "+cpu")
        self.acct_mount = acct_mount if version == 1 else None
        self.acct_top = None
        self.seq = 0

    def new_run(self):
        self.seq += 1
        path = os.path.join(self.top, f"r{self.seq}")
        os.mkdir(path)
        if self.version == 2:
            _write(os.path.join(path, "cgroup.subtree_control"), "+cpu")
        return path

    def new_acct_run(self):
        """cpuacct/tact-test-share-<pid>/r<k> for the run just made by new_run(), or None."""
        if not self.acct_mount:
            return None
        if self.acct_top is None:
            self.acct_top = os.path.join(self.acct_mount, self.name)
            os.mkdir(self.acct_top)
        path = os.path.join(self.acct_top, f"r{self.seq}")
        os.mkdir(path)
        return path

    def child(self, parent, name, weight, inner=False):
        path = os.path.join(parent, name)
        os.mkdir(path)
        _write(os.path.join(path, "cpu.shares" if self.version == 1 else "cpu.weight"), f"{weight}\n")
        if inner and self.version == 2:
            _write(os.path.join(path, "cgroup.subtree_control"), "+cpu")
        return path

    def procs(self, path):
        return os.path.join(path, "cgroup.procs")

    def remove(self):
        for top in (self.top, self.acct_top):
            if top and os.path.isdir(top):
                remove_tree(top)

    @staticmethod
    def remove_stale(mount):
        """Empty tact-test-share-<dead pid> trees left by a run that was SIGKILLed."""
        return remove_stale(mount, CGROUP_PREFIX)


# --------------------------------------------------------------------------
# members and runs

class Member:
    def __init__(self, label, share, slot, pid, pidfd):
        self.label = label
        self.share = share
        self.slot = slot
        self.pid = pid
        self.pidfd = pidfd
        self.clock = cpu_clock_id(pid)
        self.stat_fd = None
        self.schedstat_fd = None

    def open_proc(self, schedstat=False):
        self.stat_fd = os.open(f"/proc/{self.pid}/stat", os.O_RDONLY)
        if schedstat:
            self.schedstat_fd = os.open(f"/proc/{self.pid}/schedstat", os.O_RDONLY)

    def state(self):
        try:
            data = os.pread(self.stat_fd, 512, 0)
            return data[data.rfind(b")") + 2:data.rfind(b")") + 3].decode()
        except (OSError, TypeError):
            return None

    def affinity(self):
        try:
            for line in _read(f"/proc/{self.pid}/status").splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            return None

    def close(self):
        for fd in (self.pidfd, self.stat_fd, self.schedstat_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.pidfd = self.stat_fd = self.schedstat_fd = None


def is_descendant(pid, ancestor, ppids=None):
    ppids = ppids or _read_ppid_map()
    seen = 0
    while pid and seen < 64:
        if pid == ancestor:
            return True
        pid = ppids.get(pid)
        seen += 1
    return False


class Run:
    """One run's processes and cgroups; `teardown()` is idempotent and safe from a signal
    handler."""

    def __init__(self, env, mode, pinned):
        self.env = env
        self.mode = mode
        self.pinned = pinned
        self.members = []
        self.spinners = []      # Popen of spinners started directly
        self.controllers = []   # Popen of tact / cpulimit
        self.cg_run = None
        self.cg_acct_run = None
        self.files = {}         # name -> path of logs (tact stdout/stderr, json log)
        self.notes = []
        self.knobs = {}
        self.left_stopped = None
        self.torn_down = False
        self.t_start = time.monotonic()

    # ---- spinners
    def spin_cmd(self, slot, cpus=None, cgroup_procs=None, io=None, nice=None):
        cmd = []
        if nice:
            cmd += ["nice", "-n", str(nice)]
        cmd.append(self.env.spin)
        if cpus:
            cmd += ["-a", cpulist(cpus)]
        if cgroup_procs:
            cmd += ["-g", cgroup_procs]
        if io:
            cmd += ["-b", f"{io[0]}:{io[1]}"]
        cmd += ["-w", str(os.getpid())]  # exits if the harness is SIGKILLed
        return cmd + [self.env.slots.path, str(slot)]

    def spawn_spinner(self, cmd):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, close_fds=True)
        self.spinners.append(p)
        return p

    def spawn_controller(self, cmd, name, join_procs=None):
        out = open(os.path.join(self.env.tmp, f"{name}.out"), "wb")
        err = open(os.path.join(self.env.tmp, f"{name}.err"), "wb")
        self.files[name + ".out"] = out.name
        self.files[name + ".err"] = err.name
        try:
            # SIGTERM when the harness dies, even by SIGKILL: tact then resumes what it stopped
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True,
                                 preexec_fn=(lambda: _pdeathsig_term(join_procs)))
        finally:
            out.close()
            err.close()
        p.name = name
        self.controllers.append(p)
        return p

    def adopt(self, labels_shares, slot0, launcher_pid, timeout=10.0):
        """Waits until every slot has a pid, then takes a pidfd of each after checking it is a
        descendant of `launcher_pid` (our spinner, or a tact we started)."""
        deadline = time.monotonic() + timeout
        n = len(labels_shares)
        while True:
            pids = [self.env.slots.pid(slot0 + i) for i in range(n)]
            if all(pids):
                break
            for c in self.controllers + self.spinners:
                if c.poll() is not None and (c in self.controllers or c.returncode != 0):
                    raise RuntimeError(f"{' '.join(c.args[:3])}... exited with {c.returncode} before all "
                                       f"spinners started{self._stderr_tail(c)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {sum(1 for p in pids if p)}/{n} spinners started in {timeout:.0f} s")
            time.sleep(0.005)
        ppids = _read_ppid_map()
        out = []
        for i, ((label, share), pid) in enumerate(zip(labels_shares, pids)):
            fd = os.pidfd_open(pid)
            if not is_descendant(pid, launcher_pid, ppids) and not is_descendant(pid, launcher_pid):
                os.close(fd)
                raise RuntimeError(f"slot {slot0 + i}: pid {pid} is not a descendant of {launcher_pid}")
            m = Member(label, share, slot0 + i, pid, fd)
            m.open_proc(self.env.clock == "schedstat")
            out.append(m)
        self.members.extend(out)
        return out

    def _stderr_tail(self, p, limit=600):
        name = getattr(p, "name", None)
        try:
            if name:
                text = _read(self.files[name + ".err"])
            elif p.stderr is not None:
                text = p.stderr.read().decode(errors="replace")
            else:
                return ""
        except (OSError, KeyError, ValueError):
            return ""
        text = text.strip()
        return f": {text[-limit:]}" if text else ""

    def controller_pids(self):
        """Controllers and their non-member descendants (e.g. a tact watchdog), for overhead."""
        member = {m.pid for m in self.members}
        out = []
        ppids = _read_ppid_map()
        for c in self.controllers:
            if c.poll() is None:
                out += [p for p in descendants(c.pid, ppids=ppids) if p not in member]
        return out

    def controllers_alive(self):
        return [c for c in self.controllers if c.poll() is None]

    def dead_controller(self):
        for c in self.controllers:
            if c.poll() is not None:
                return f"{c.name} exited with {c.returncode}{self._stderr_tail(c)}"
        return None

    # ---- teardown
    def teardown(self, grace=3.0):
        if self.torn_down:
            return
        self.torn_down = True
        # 1. controllers: SIGTERM (tact resumes what it stopped and exits; cpulimit sends
        #    SIGCONT to its target), SIGKILL after the grace period
        for c in self.controllers:
            if c.poll() is None:
                try:
                    c.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for c in self.controllers:
            try:
                c.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.notes.append(f"{c.name} ignored SIGTERM for {grace:.0f} s: SIGKILL")
                c.kill()
                c.wait()
        # 2. invariant 1 of DESIGN.md: nothing left stopped by a controller that has exited
        if self.controllers and self.members:
            time.sleep(0.05)
            self.left_stopped = [m.label for m in self.members if m.state() in ("T", "t")]
            if self.left_stopped:
                self.notes.append(f"left stopped after the controller exited: {', '.join(self.left_stopped)}")
        # 3. spinners: SIGCONT + SIGKILL through their pidfds, or the Popen of direct ones
        for m in self.members:
            if m.pidfd is not None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        signal.pidfd_send_signal(m.pidfd, sig)
                    except ProcessLookupError:
                        pass
                    except OSError:
                        pass
        for p in self.spinners:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
        # 4. reap: direct children, then spinners reparented to us (subreaper)
        for p in self.spinners:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.notes.append(f"spinner {p.pid} did not exit after SIGKILL")
        deadline = time.monotonic() + 5
        pending = [m.pid for m in self.members if m.pid not in {p.pid for p in self.spinners}]
        while pending and time.monotonic() < deadline:
            left = []
            for pid in pending:
                try:
                    r, _ = os.waitpid(pid, os.WNOHANG)
                    if r == 0:
                        left.append(pid)
                except ChildProcessError:
                    # reaped by its tact, or not our child yet: gone from /proc means done
                    if read_state(pid) not in (None, "Z") and os.path.exists(f"/proc/{pid}"):
                        left.append(pid)
            pending = left
            if pending:
                time.sleep(0.02)
        for m in self.members:
            m.close()
        for p in self.spinners:
            if p.stderr:
                p.stderr.close()
        # 5. cgroups of this run (and whatever tact's cgroup backend left in them)
        for attr in ("cg_run", "cg_acct_run"):
            path = getattr(self, attr)
            if not path:
                continue
            if self.mode.startswith("tact-"):
                left = [os.path.relpath(r, path) for r, _, _ in os.walk(path) if r != path]
                if left:
                    self.notes.append(f"tact left cgroups under {path}: {', '.join(sorted(left)[:8])}")
            try:
                remove_tree(path)
            except OSError as e:
                self.notes.append(f"cgroup {path}: {e}")
            setattr(self, attr, None)


# --------------------------------------------------------------------------
# starting a workload under a mode

def group_cpus(env, pinned):
    return [env.pin_cpu] if pinned else list(env.cpus)


def start(env, mode, pinned, groups, quantum_ms, io_member=None, slot_base=0):
    """Starts `groups` (a list of lists of (label, share)) under `mode`; each group is one
    controlled set (one tact instance, one cgroup parent). Returns (run, members by group).
    io_member: label of the process that sleeps (the I/O test), with its (cpu_ms, sleep_ms).
    slot_base: the first slot (concurrent runs use disjoint slots)."""
    run = Run(env, mode, pinned)
    try:
        cpus = group_cpus(env, pinned)
        C = len(cpus)
        slot = slot_base
        per_group = []
        if mode in ("cgroup",):
            run.cg_run = env.cgroups.new_run()
        for g, group in enumerate(groups):
            n = len(group)
            env.slots.clear(slot, n)
            shares = [s for _, s in group]
            io = [io_member[1] if io_member and lab == io_member[0] else None for lab, _ in group]
            if mode.startswith("tact-"):
                members = _start_tact(env, run, mode, cpus, group, slot, quantum_ms, io, g)
            else:
                procs_files = [None] * n
                nices = [None] * n
                if mode == "cgroup":
                    parent = run.cg_run
                    if len(groups) > 1:
                        parent = env.cgroups.child(run.cg_run, f"g{g + 1}", 1024 if env.cgroups.version == 1 else 100,
                                                   inner=True)
                    weights, k = cgroup_weights(shares, env.cgroups.version)
                    run.knobs.setdefault("cgroup_weights", []).append(weights)
                    run.knobs["cgroup_k"] = k
                    for i in range(n):
                        procs_files[i] = env.cgroups.procs(env.cgroups.child(parent, f"p{i}", weights[i]))
                if mode == "nice":
                    nices = nice_levels(shares)
                    run.knobs.setdefault("nice", []).append(nices)
                for i, (label, share) in enumerate(group):
                    run.spawn_spinner(run.spin_cmd(slot + i, cpus, procs_files[i], io[i], nices[i]))
                members = run.adopt(group, slot, os.getpid())
                if mode == "cpulimit":
                    limits, exact = cpulimit_limits(shares, C)
                    run.knobs.setdefault("cpulimit", []).append(limits)
                    clamped = [f"{lab} {e:.2f}%->{lim}%" for (lab, _), e, lim in zip(group, exact, limits)
                               if abs(e - lim) > 0.05 * e]
                    if clamped:
                        run.notes.append("cpulimit limits rounded/clamped: " + ", ".join(clamped))
                    for m, lim in zip(members, limits):
                        cmd = ["taskset", "-c", cpulist(cpus), env.cpulimit, "-p", str(m.pid), "-l", str(lim),
                               "-q", "-z"]
                        run.spawn_controller(cmd, f"cpulimit-{m.label}")
            per_group.append(members)
            slot += n
        # the members must sit where we put them
        want = cpulist(cpus)
        for m in run.members:
            aff = m.affinity()
            if mode != "tact-cons" and aff is not None and _cpuset(aff) != set(cpus):
                run.notes.append(f"{m.label}: affinity {aff}, expected {want}")
        return run, per_group
    except BaseException:
        run.teardown()
        raise


def _cpuset(text):
    out = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def _start_tact(env, run, mode, cpus, group, slot0, quantum_ms, io, g):
    extra, _ = TACT_ARGS[mode]
    extra = list(extra)
    if mode in ("tact-basic", "tact-opt", "tact-noio") and "--mode" in env.tact_flags:
        extra += ["--mode", "strict"]  # the paper's semantics, also unpinned (tact-cons is the other)
    name = f"{mode}-g{g + 1}"
    cmd = ["taskset", "-c", cpulist(cpus), env.tact, "share"]
    if mode != "tact-cgroup":  # the cgroup backend has no quantum (tact refuses --quantum with it)
        cmd += ["--quantum", f"{quantum_ms}ms"]
    cmd += extra
    if "--json-log" in env.tact_flags:
        path = os.path.join(env.tmp, f"{name}.jsonl")
        cmd += ["--json-log", path]
        run.files[name + ".jsonl"] = path
    cmd += env.tact_extra
    join = None
    if mode == "tact-cgroup" and env.cgroups is not None:
        # keep tact's cgroups under tact-test-share-<pid>: its cpu groups via --cgroup-parent,
        # its v1 cpuacct mirror (made under tact's own cpuacct cgroup) by starting it in ours
        if "--cgroup-parent" in env.tact_flags:
            run.cg_run = env.cgroups.new_run()
            cmd += ["--cgroup-parent", run.cg_run]
            run.cg_acct_run = env.cgroups.new_acct_run()
            if run.cg_acct_run:
                join = os.path.join(run.cg_acct_run, "cgroup.procs")
        else:
            run.notes.append("this tact has no --cgroup-parent: its cgroups are made where it chooses")
    for i, (label, share) in enumerate(group):
        spin = run.spin_cmd(slot0 + i, None, None, io[i])
        cmd += ["--job", f"{share}=exec {' '.join(shlex.quote(a) for a in spin)}"]
    p = run.spawn_controller(cmd, name, join)
    run.knobs.setdefault("tact_cmd", []).append(" ".join(shlex.quote(a) for a in cmd[:12]) +
                                                (" ..." if len(cmd) > 12 else ""))
    return run.adopt(group, slot0, p.pid)


# --------------------------------------------------------------------------
# what tact share prints at the end (on stderr)

# tact's closing line; the parts between "missed)" and "reads" come and go with the features in use
# ("N checks between ticks", "N idle quanta slept through"), so they are matched one by one.
FOOTER_RE = re.compile(r"(\d+) cycles, (\d+) quanta \((\d+) missed\)((?:, \d+ [a-z ]+?)*), ([\d.]+) reads and "
                       r"([\d.]+) signals per quantum")
FOOTER_EXTRA = {"checks between ticks": "checks_between_ticks", "idle quanta slept through": "idle_quanta"}
OWN_RE = re.compile(r"own CPU ([\d.]+) s over ([\d.]+) s")


def tact_footer(text):
    """{cycles, quanta, overruns, checks_between_ticks, idle_quanta, reads_per_quantum,
    signals_per_quantum, own_cpu_s, wall_s} from the lines `tact: N cycles, M quanta (K missed), [C
    checks between ticks, I idle quanta slept through,] R reads and S signals per quantum` and `tact:
    own CPU X s over Y s` (signals backend), as far as present."""
    out = {}
    m = None
    for m in FOOTER_RE.finditer(text or ""):
        pass
    if m:
        out.update(cycles=int(m.group(1)), quanta=int(m.group(2)), overruns=int(m.group(3)),
                   reads_per_quantum=float(m.group(5)), signals_per_quantum=float(m.group(6)))
        for part in m.group(4).split(", "):
            count, _, what = part.partition(" ")
            if what in FOOTER_EXTRA:
                out[FOOTER_EXTRA[what]] = int(count)
    m = None
    for m in OWN_RE.finditer(text or ""):
        pass
    if m:
        out.update(own_cpu_s=float(m.group(1)), wall_s=float(m.group(2)))
    return out


# --------------------------------------------------------------------------
# tact's JSON log: pick out what the harness can use without knowing the schema

def tact_log_summary(path, keep_last=1):
    """Lines, the last record, and the largest numeric value of every key that names an overrun,
    a read, a signal, a quantum or lost time (the spec's report fields), wherever it is nested."""
    out = {"lines": 0, "bad_lines": 0}
    found = {}

    def walk(obj, prefix=""):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{prefix}{k}.")
        elif isinstance(obj, list):
            for v in obj:
                walk(v, prefix)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            key = prefix[:-1]
            leaf = key.rsplit(".", 1)[-1].lower()
            if any(w in leaf for w in ("overrun", "read", "signal", "quant", "lost", "tact_cpu", "own_cpu")):
                found[key] = max(found.get(key, obj), obj)

    import json
    last = None
    rms = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    out["bad_lines"] += 1
                    continue
                out["lines"] += 1
                last = rec
                walk(rec)
                if isinstance(rec, dict) and isinstance(rec.get("rms"), (int, float)):
                    rms.append(rec["rms"])
    except OSError as e:
        out["error"] = str(e)
        return out
    out["max_by_key"] = found
    if rms:
        out["rms_series"] = rms
    if last is not None:
        text = json.dumps(last)
        out["last"] = last if len(text) < 4000 else text[:4000] + "..."
    overruns = [v for k, v in found.items() if "overrun" in k.lower()]
    quanta = [v for k, v in found.items() if "quant" in k.rsplit(".", 1)[-1].lower() and "overrun" not in k.lower()]
    if overruns:
        out["overruns"] = max(overruns)
    if quanta:
        out["quanta"] = max(quanta)
    return out
