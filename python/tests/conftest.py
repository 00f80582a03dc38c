"""Helpers: tact's configuration is process-wide, so every test that regulates anything runs its
program in a fresh interpreter, with its state kept under the test's temporary directory."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, Optional

import pytest

# Imported by every program: a CPU-bound step that holds the GIL, as real work does.
PRELUDE = """\
import json, sys, threading, time
import tact

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def report(**values):
    print(json.dumps(values), flush=True)
"""

#: Generous: a loaded 2-core machine may run a program several times slower than an idle one.
TIMEOUT = 60


def clean_env(state: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACT_")}
    env["TACT_STATE_DIR"] = str(state)
    return env


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no report\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


RunPy = Callable[..., dict]


@pytest.fixture
def run_py(tmp_path: Path) -> RunPy:
    """Runs a program (after PRELUDE) in a fresh interpreter, with `STATE` bound to a state
    directory; returns the JSON object it reported last. With `script`, the program is that file
    under the temporary directory (as `python script.py`) rather than `python -c`."""
    state = tmp_path / "state"

    def run(code: str, script: Optional[str] = None) -> dict:
        program = PRELUDE + f"STATE = {str(state)!r}\n" + textwrap.dedent(code)
        if script is None:
            argv = ["-c", program]
        else:
            path = tmp_path / script
            path.write_text(program)
            argv = [str(path)]
        proc = subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=clean_env(state),
        )
        return last_json(proc)

    return run
