#!/usr/bin/env python3
"""bench/library/cost.py: what a testpoint costs in Rust, C and Python.

- fast path: a call that is not due (sooner than the testpoint period): progress is only added up
- full testpoint: a due call: the supervisor's lock, a regulator step (sign test, calibration),
  and a turn of the run token (no suspension timed)

Rust: `cargo run --release -p tact-lib --example fastpath` (crates/tact-lib/examples/fastpath.rs).
C: bench/library/cost.c compiled against crates/tact-c (tact.h, target/release/libtact.a).
Python: bench/library/cost_py.py through .venv, if `import tact` works there (`make python`).

Overhead of regulation, as a fraction of a program's time: one full testpoint per 100 ms (the
benchmark's period; the paper asks for a testpoint every few hundred ms), plus the fast-path
calls in between (shown for 1,000 calls per period, one every 100 us). Target: well under 1%.
Writes bench/out/library/cost.json and prints a table.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from util import DEFAULT_LOCK, REPO, Cleanup, log, run_cargo, take_lock, target_dir  # noqa: E402

PERIOD_NS = 100e6
FAST_CALLS_PER_PERIOD = 1000
CLEANUP = Cleanup()


def overhead(full_ns, fast_ns):
    out = {}
    if full_ns is not None:
        out["one_testpoint_per_100ms"] = full_ns / PERIOD_NS
        if fast_ns is not None:
            out["plus_1000_fast_calls_per_100ms"] = (full_ns + FAST_CALLS_PER_PERIOD * fast_ns) / PERIOD_NS
    return out


def rust(cargo):
    """Runs the fastpath example and parses its lines."""
    example = os.path.join(REPO, "crates/tact-lib/examples/fastpath.rs")
    if not os.path.exists(example):
        return {"skipped": "crates/tact-lib/examples/fastpath.rs is missing"}
    with tempfile.TemporaryDirectory(prefix="tact-cost-rs-") as state:
        saved = os.environ.get("TACT_SOCKET")
        os.environ["TACT_SOCKET"] = os.path.join(state, "no-daemon.sock")
        try:
            r = run_cargo(cargo, "run", "-q", "--release", "-p", "tact-lib", "--example",
                          "fastpath", capture=True)
        finally:
            if saved is None:
                del os.environ["TACT_SOCKET"]
            else:
                os.environ["TACT_SOCKET"] = saved
    text = r.stdout
    out = {"raw": text.strip().splitlines()}
    pats = {
        "fast_ns": r"fast path \(thread unit, not due\):\s*([\d.]+) ns",
        "fast_handle_3_metrics_ns": r"fast path \(handle, 3 metrics\):\s*([\d.]+) ns",
        "fast_precise_clock_ns": r"fast path \(handle, 20 ms period\):\s*([\d.]+) ns",
        "disabled_ns": r"disabled:\s*([\d.]+) ns",
        "due_ns": r"due testpoint[^:]*:\s*([\d.]+) ns/call median",
        "due_p90_ns": r"median, ([\d.]+) ns at the 90th",
    }
    for k, p in pats.items():
        m = re.search(p, text)
        out[k] = float(m.group(1)) if m else None
    m = re.search(r"\((\d+) due, (\d+) suspensions\)", text)
    if m:
        out["due_testpoints"], out["due_suspensions"] = int(m.group(1)), int(m.group(2))
    out["what"] = ("thread unit, 200 ms period (coarse clock); due: 1 ms period after 5 ms sleeps, "
                   "bootstrap 10, regulated, suspensions capped at 1 ms")
    return out


def c(cargo, build_dir):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return {"skipped": "no C compiler (cc)"}
    run_cargo(cargo, "build", "--release", "-p", "tact-c")
    lib = os.path.join(target_dir(), "release", "libtact.a")
    if not os.path.exists(lib):
        return {"skipped": f"{lib} was not built"}
    exe = os.path.join(build_dir, "cost-c")
    cmd = [cc, "-O2", "-o", exe, os.path.join(HERE, "cost.c"),
           "-I", os.path.join(REPO, "crates/tact-c/include"), lib, "-lpthread", "-ldl", "-lm"]
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    state = tempfile.mkdtemp(prefix="tact-cost-c-")
    CLEANUP.push(f"rm {state}", lambda: shutil.rmtree(state, ignore_errors=True))
    env = dict(os.environ, TACT_STATE_DIR=state, TACT_NAME="bench-library-cost-c",
               TACT_SOCKET=os.path.join(state, "no-daemon.sock"))
    env.pop("TACT_DISABLE", None)
    env.pop("TACT_TESTPOINT", None)

    def run(args, **extra):
        r = subprocess.run([exe] + args, env=dict(env, **extra), capture_output=True, text=True,
                           check=True, timeout=300)
        return r.stdout.split()

    fast = min(float(run(["fast", "20000000"])[1]) for _ in range(3))
    disabled = min(float(run(["fast", "20000000"], TACT_DISABLE="1")[1]) for _ in range(3))
    # The C interface cannot shorten the bootstrap (100 testpoints, each of which also reads PSI):
    # a first run calibrates and saves its target at exit, and the timed run loads it and is
    # regulated from its first due testpoint, like a program run for the second time.
    due_env = {"TACT_TESTPOINT": "1ms", "TACT_NAME": "bench-library-cost-c-due"}
    run(["due", "110"], **due_env)
    due = run(["due", "80"], **due_env)
    return {"fast_ns": fast, "disabled_ns": disabled, "due_ns": float(due[1]),
            "due_p90_ns": float(due[2]),
            "what": ("tact_testpoint(), 200 ms period, best of 3 x 20M calls; due: 1 ms period after "
                     "5 ms sleeps, 80 due calls of a run that loaded the target a first run saved (regulated)")}


def python(py):
    if not os.path.exists(py):
        return {"skipped": f"{py} not found (make python)"}
    r = subprocess.run([py, "-c", "import tact"], capture_output=True, text=True)
    if r.returncode != 0:
        return {"skipped": f"`import tact` fails in {py} (make python): "
                           f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}"}
    state = tempfile.mkdtemp(prefix="tact-cost-py-")
    CLEANUP.push(f"rm {state}", lambda: shutil.rmtree(state, ignore_errors=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACT_")}
    env["TACT_SOCKET"] = os.path.join(state, "no-daemon.sock")

    def run(*args):
        r = subprocess.run([py, os.path.join(HERE, "cost_py.py"), *args, state], env=env,
                           capture_output=True, text=True, check=True, timeout=300)
        return json.loads(r.stdout)

    fast = run("fast", "2000000")
    due = run("due", "200")
    return {"fast_ns": fast["fast_ns"], "empty_call_ns": fast["empty_call_ns"],
            "fast_over_empty_call_ns": fast["fast_ns"] - fast["empty_call_ns"],
            "due_ns": due["due_ns"], "due_p90_ns": due["due_p90_ns"],
            "due_testpoints": due.get("testpoints"), "due_suspensions": due.get("suspensions"),
            "what": ("tact.testpoint(0, 4096), 200 ms period, best of 5 x 2M calls (the loop and "
                     "call included); due: as Rust (1 ms, bootstrap 10, suspensions <= 1 ms)")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "bench/out/library"))
    ap.add_argument("--cargo", default="cargo")
    ap.add_argument("--python", default=os.path.join(REPO, ".venv/bin/python"))
    ap.add_argument("--lock", default=DEFAULT_LOCK,
                    help="wait while this file exists, then hold it during the run ('' to skip)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    CLEANUP.install()
    take_lock(args.lock, CLEANUP, "bench/library")
    results = {"period_ms": PERIOD_NS / 1e6, "fast_calls_per_period": FAST_CALLS_PER_PERIOD}
    for name, fn in (("rust", lambda: rust(args.cargo)), ("c", lambda: c(args.cargo, args.out)),
                     ("python", lambda: python(args.python))):
        try:
            results[name] = fn()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, ValueError,
                IndexError) as e:
            detail = getattr(e, "stderr", None) or ""
            results[name] = {"skipped": f"failed: {e} {detail.strip()[-500:]}"}
        r = results[name]
        if "skipped" not in r:
            r["overhead"] = overhead(r.get("due_ns"), r.get("fast_ns"))
    with open(os.path.join(args.out, "cost.json"), "w") as f:
        json.dump(results, f, indent=1)

    def ns(v):
        return f"{v:,.1f}" if isinstance(v, (int, float)) else "-"

    def pct(v):
        return f"{v * 100:.4f}%" if isinstance(v, (int, float)) else "-"
    rows = []
    for name in ("rust", "c", "python"):
        r = results[name]
        if "skipped" in r:
            rows.append([name, "skipped: " + r["skipped"], "", "", "", "", "", ""])
            continue
        o = r["overhead"]
        susp = (f"{r['due_suspensions']}/{r['due_testpoints']}" if r.get("due_testpoints") is not None
                else "-")
        rows.append([name, ns(r.get("fast_ns")), ns(r.get("disabled_ns")), ns(r.get("due_ns")),
                     ns(r.get("due_p90_ns")), susp, pct(o.get("one_testpoint_per_100ms")),
                     pct(o.get("plus_1000_fast_calls_per_100ms"))])
    header = ["language", "fast path ns", "disabled ns", "full testpoint ns (median)", "p90 ns",
              "suspended/due", "overhead @1 tp/100 ms", "+1000 fast calls/100 ms"]
    widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header))]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    if "python" in results and "empty_call_ns" in results["python"]:
        p = results["python"]
        print(f"(python: an empty Python function call with the same arguments takes "
              f"{p['empty_call_ns']:.1f} ns; the testpoint adds {p['fast_over_empty_call_ns']:.1f} ns)")
    print("p90 of a full testpoint may include a suspension (capped at 1 ms in these runs); "
          "the overhead uses the median")
    print("target: overhead well under 1% (spec: library <= 0.5% when uncontended)")
    log(f"wrote {os.path.join(args.out, 'cost.json')}")
    CLEANUP.run()


if __name__ == "__main__":
    main()
