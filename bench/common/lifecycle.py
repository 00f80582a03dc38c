"""What every benchmark needs around its measurements (stdlib only): timestamped logs, cleanup on
every exit path, and the machine's benchmark lock, so that two benchmarks never measure at once."""
import atexit
import os
import signal
import sys
import time

DEFAULT_LOCK = "/tmp/tact-bench.lock"

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


class Cleanup:
    """Actions run last-in first-out, once, on normal exit, on an exception, and on SIGINT,
    SIGTERM and SIGHUP (install() registers the handlers and atexit)."""

    def __init__(self):
        self.actions = []
        self.done = False

    def push(self, name, fn):
        item = (name, fn)
        self.actions.append(item)
        return item

    def pop(self, item, run=True):
        """Removes an action (running it first if `run`)."""
        try:
            self.actions.remove(item)
        except ValueError:
            return
        if run:
            self._call(*item)

    @staticmethod
    def _call(name, fn):
        try:
            fn()
        except Exception as e:  # keep cleaning up
            print(f"cleanup ({name}): {e}", file=sys.stderr, flush=True)

    def run(self):
        if self.done:
            return
        self.done = True
        while self.actions:
            self._call(*self.actions.pop())

    def install(self):
        atexit.register(self.run)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        # Further signals must not interrupt the cleanup itself.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        print(f"\nsignal {signum}: cleaning up", file=sys.stderr, flush=True)
        self.run()
        os._exit(128 + signum)


def take_lock(path, cleanup, who, wait=True, poll=30.0):
    """Waits while another benchmark or build holds `path` (polling every `poll` s; with `wait`
    false, exits instead), then creates it for this run, tagged with `who`; the cleanup removes it
    if it is still ours. A lock left by a benchmark that died is removed. An empty path skips the
    lock."""
    if not path:
        return
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            try:
                with open(path) as f:
                    holder = f.read().strip()
            except OSError:
                holder = "?"
            pid = holder.split()[0] if holder.split() else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}") and "bench/" in holder:
                log(f"{path} was left by a benchmark that died (pid {pid}): removing it")
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                continue
            if not wait:
                raise SystemExit(f"{path} exists ({holder}): another benchmark is running")
            log(f"{path} exists ({holder}): another benchmark is running; waiting (polling every {poll:.0f} s)")
            time.sleep(poll)
    tag = f"{os.getpid()} {who} {' '.join(sys.argv[1:])}\n"
    os.write(fd, tag.encode())
    os.close(fd)

    def release():
        try:
            with open(path) as f:
                mine = f.read() == tag
        except OSError:
            return
        if mine:
            os.unlink(path)

    cleanup.push("lock", release)
