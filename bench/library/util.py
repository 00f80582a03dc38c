"""Helpers shared by bench/library/run.py and cost.py (stdlib only): gentle cargo builds and the
repository's paths; logs, cleanup and the benchmark lock come from bench/common/lifecycle.py."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench"))
from common.lifecycle import DEFAULT_LOCK, Cleanup, log, take_lock  # noqa: E402,F401 (re-exported)

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
