"""cgroup v1 directories the benchmarks create under tact-test-* (stdlib only): removal deepest
first, and clean-up of trees a SIGKILLed harness left behind."""
import errno
import os
import time

from common.lifecycle import log


def remove_tree(path, wait=3.0):
    """rmdir deepest first; a cgroup still emptying (EBUSY) is retried for `wait` s."""
    deadline = time.monotonic() + wait
    dirs = [root for root, _, _ in os.walk(path)]
    for d in sorted(dirs, key=lambda p: -p.count("/")):
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def remove_stale(mount, prefix):
    """Remove `prefix<pid>` trees under `mount` whose harness pid is dead and that hold no process
    (a tree that still does is logged and left alone). Returns the removed paths."""
    removed = []
    try:
        names = os.listdir(mount)
    except OSError:
        return removed
    for name in names:
        pid = name[len(prefix):]
        if not (name.startswith(prefix) and pid.isdigit()) or os.path.exists(f"/proc/{pid}"):
            continue
        path = os.path.join(mount, name)
        busy = False
        for root, _, _ in os.walk(path):
            try:
                with open(os.path.join(root, "cgroup.procs")) as f:
                    busy = busy or bool(f.read().split())
            except OSError:
                pass
        if busy:
            log(f"left alone: {path} (from dead pid {pid}) still holds processes")
            continue
        try:
            remove_tree(path, wait=0)
            removed.append(path)
        except OSError as e:
            log(f"could not remove {path}: {e}")
    return removed
