"""Process-tree helpers shared by tact benchmarks (stdlib only).

Everything here reads /proc directly and signals only the pids it is given
(or their descendants), never processes by name.
"""
import os
import signal
import sys
import time


def _read_ppid_map():
    """Return {pid: ppid} for every process currently visible in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        # comm may contain spaces/parens: split after the last ')'
        rp = data.rfind(b")")
        fields = data[rp + 2:].split()
        try:
            out[int(name)] = int(fields[1])
        except (IndexError, ValueError):
            continue
    return out


def descendants(root, include_root=True, ppids=None):
    """Pids of root's process tree (root first)."""
    if ppids is None:
        ppids = _read_ppid_map()
    children = {}
    for pid, ppid in ppids.items():
        children.setdefault(ppid, []).append(pid)
    result = [root] if include_root else []
    stack = [root]
    while stack:
        p = stack.pop()
        for c in children.get(p, ()):
            result.append(c)
            stack.append(c)
    return result


def read_io(pid):
    """(rchar, wchar, read_bytes, write_bytes) of one process, or None if gone."""
    try:
        with open(f"/proc/{pid}/io") as f:
            vals = {}
            for line in f:
                k, _, v = line.partition(":")
                vals[k] = int(v)
        return (vals.get("rchar", 0), vals.get("wchar", 0),
                vals.get("read_bytes", 0), vals.get("write_bytes", 0))
    except (OSError, ValueError):
        return None


def read_state(pid):
    """Single-letter /proc state (R, S, D, T, Z...) or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        rp = data.rfind(b")")
        return data[rp + 2:rp + 3].decode()
    except OSError:
        return None


class TreeIoSampler:
    """Cumulative rchar+wchar of a process tree.

    Exited processes keep their last-seen value, so the total is monotonic.
    When a parent reaps a child, Linux adds the child's I/O counters to the
    parent's /proc/PID/io; that is subtracted again here (per-parent offset),
    so nothing is counted twice.
    `exclude_root` drops the root's own counters (e.g. a supervisor such as
    tact, whose /proc reads are not the job's progress).
    """

    def __init__(self, root, exclude_root=False):
        self.root = root
        self.exclude_root = exclude_root
        self.last = {}          # pid -> own rchar+wchar (max seen)
        self.last_disk = {}     # pid -> own read_bytes+write_bytes (max seen)
        self.raw = {}           # pid -> (prog, disk) raw last seen (alive pids)
        self.parent = {}        # pid -> ppid
        self.off = {}           # pid -> (prog, disk) inherited from reaped children
        self.stopped = 0        # processes in state T at last sample
        self.alive = 0

    def sample(self):
        ppids = _read_ppid_map()
        pids = descendants(self.root, include_root=True, ppids=ppids)
        stopped = 0
        alive = set()
        for pid in pids:
            st = read_state(pid)
            if st is None or st == "Z":
                continue
            v = read_io(pid)
            if v is None:
                continue
            alive.add(pid)
            self.parent[pid] = ppids.get(pid)
            if st in ("T", "t"):
                stopped += 1
            self.raw[pid] = (v[0] + v[1], v[2] + v[3])
        # children gone since last sample: their totals move into the parent
        for g in [p for p in self.raw if p not in alive]:
            gp, gd = self.raw.pop(g)
            par = self.parent.get(g)
            if par in alive:
                op, od = self.off.get(par, (0, 0))
                self.off[par] = (op + gp, od + gd)
        for pid in alive:
            if self.exclude_root and pid == self.root:
                continue
            rp, rd = self.raw[pid]
            op, od = self.off.get(pid, (0, 0))
            if rp - op > self.last.get(pid, 0):
                self.last[pid] = rp - op
            if rd - od > self.last_disk.get(pid, 0):
                self.last_disk[pid] = rd - od
        self.stopped = stopped
        self.alive = len(alive) - (1 if self.exclude_root and self.root in alive else 0)
        return sum(self.last.values()), sum(self.last_disk.values())


def kill_tree(root, sig=signal.SIGKILL, include_root=True):
    """Send sig to root and all its descendants (by pid). SIGCONT first so
    stopped processes handle SIGTERM too."""
    pids = descendants(root, include_root=include_root)
    for pid in reversed(pids):
        try:
            if sig != signal.SIGKILL:
                os.kill(pid, signal.SIGCONT)
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            pass
    return pids


def terminate_tree(root, grace=3.0):
    """SIGTERM the tree, then SIGKILL whatever is left after `grace` s."""
    kill_tree(root, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if len(descendants(root)) <= 1 and read_state(root) in (None, "Z"):
            return
        time.sleep(0.05)
    kill_tree(root, signal.SIGKILL)


def parse_mounts(text):
    """(fstype, mountpoint, options) of every line of /proc/mounts (`\\040` is a space)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4:
            out.append((f[2], f[1].replace("\\040", " "), f[3]))
    return out


def kill_leftovers():
    """Whatever this harness started and is still alive (a harness that is a child subreaper also
    adopts the orphans of a tact it started): SIGCONT + SIGKILL by pid, then reap."""
    left = descendants(os.getpid(), include_root=False)
    for pid in left:
        for s in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, s)
            except (ProcessLookupError, PermissionError):
                pass
    if left:
        print(f"killed {len(left)} leftover process(es) this harness started: {left}", file=sys.stderr)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.02)
        except ChildProcessError:
            break
