"""Helpers shared by bench/library/run.py and cost.py (stdlib only): cleanup on every exit
path, the machine's benchmark lock, and gentle cargo builds."""
import atexit
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
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


def take_lock(path, cleanup, wait=True, poll=30.0):
    """Waits while another benchmark or build holds `path` (polling every `poll` s), then
    creates it for the duration of this run; the cleanup removes it if it is still ours.
    An empty path skips the lock."""
    if not path:
        return
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            if not wait:
                raise SystemExit(f"{path} exists: another benchmark is running (use --wait-lock)")
            log(f"{path} exists: another benchmark or build is running; waiting (polling every {poll:.0f} s)")
            time.sleep(poll)
    tag = f"{os.getpid()} bench/library {' '.join(sys.argv[1:])}\n"
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


def cargo_cmd(cargo, *args):
    """A cargo command that yields the machine to others: one job, lowest CPU and I/O priority."""
    cmd = []
    if shutil.which("nice"):
        cmd += ["nice", "-n", "19"]
    if shutil.which("ionice"):
        cmd += ["ionice", "-c3"]
    return cmd + cargo.split() + list(args)


def cargo_env():
    env = dict(os.environ)
    env.setdefault("CARGO_BUILD_JOBS", "1")
    return env


def run_cargo(cargo, *args, capture=False):
    cmd = cargo_cmd(cargo, *args)
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, cwd=REPO, env=cargo_env(), check=True, text=True,
                          capture_output=capture)


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
