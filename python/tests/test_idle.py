"""tact.IdleGate on this machine's loopback interface and root disk: admission when quiet, waiting
while a foreground floods the link (which also shows the GIL is released meanwhile: the flood is
a Python thread), own bytes, and errors. The exact timing of the gate is tested in Rust, in
virtual time (crates/tact-lib/tests/idle_gate.rs)."""

import os
import socket
import threading
import time
from datetime import timedelta

import pytest

import tact

#: Generous: a loaded 2-core machine may delay anything.
TIMEOUT = 60


class Flood:
    """A Python thread sending 8 KiB datagrams to a sink on 127.0.0.1 every millisecond."""

    def __init__(self) -> None:
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.bind(("127.0.0.1", 0))
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        payload = bytes(8192)
        while not self._stop.is_set():
            try:
                out.sendto(payload, self.sink.getsockname())
            except OSError:
                pass  # the sink's buffer is full: lo counted the datagram anyway
            self.sent += 1
            time.sleep(0.001)
        out.close()

    def __enter__(self) -> "Flood":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sink.close()


def send(nbytes: int) -> None:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(nbytes // 8192):
        out.sendto(bytes(8192), sink.getsockname())
    out.close()
    sink.close()


def test_quiet_loopback_admits_and_the_block_ends_the_request():
    gate = tact.IdleGate(interface="lo", preempt="10ms")
    assert gate.acquire(timeout=TIMEOUT), gate.status()
    gate.done(0)
    with gate:
        assert gate.status()["outstanding"]
    s = gate.status()
    assert not s["outstanding"]
    assert s["acquired"] == 2
    assert s["resource"] == "interface lo"
    assert s["pi"] == pytest.approx(0.01)
    assert s["auto"] is False
    assert set(s["counters"]["x"]) == {"idle", "fg", "bg", "pi"}


def test_entering_waits_while_a_python_thread_floods_the_link():
    gate = tact.IdleGate(interface="lo", preempt=timedelta(seconds=2))
    with Flood() as flood:
        start = flood.sent
        admitted = gate.acquire(timeout=4)
        sent_meanwhile = flood.sent - start
    assert not admitted, gate.status()
    # The flood kept running during the wait: the GIL was released.
    assert sent_meanwhile > 100
    s = gate.status()
    assert s["fg_bytes"] > 1 << 20
    assert s["state"] in ("fg", "pi")
    assert s["waited"] >= 4


def test_reported_own_bytes_are_not_foreground_and_unreported_ones_are():
    gate = tact.IdleGate(interface="lo", preempt="10ms")
    for _ in range(20):
        with gate:
            send(64 * 8192)
            gate.done(64 * 8192)
    s = gate.status()
    assert s["own_bytes"] == 20 * 64 * 8192
    # Other traffic on lo is possible, but nowhere near the program's own 10 MiB.
    assert s["fg_bytes"] < s["own_bytes"] // 4, s
    with gate:
        send(128 * 8192)
    s2 = gate.status()
    assert s2["fg_bytes"] - s["fg_bytes"] >= 128 * 8192, s2
    assert s2["counters"]["preempted"] >= 1


def test_a_disk_by_path_admits_between_other_programs_requests():
    # Plain priority (PI 0): this machine's disk is shared with other programs, some of which
    # may keep it busy for minutes, but not without millisecond gaps.
    gate = tact.IdleGate(os.path.dirname(os.path.abspath(__file__)), preempt=0)
    s = gate.status()
    assert s["resource"].startswith("disk "), s
    assert gate.acquire(timeout=TIMEOUT), gate.status()
    gate.done(4096)
    assert gate.status()["own_bytes"] == 4096


def test_preempt_defaults_to_auto_from_100ms():
    s = tact.IdleGate(interface="lo").status()
    assert s["auto"] and s["pi"] == pytest.approx(0.1)
    assert tact.IdleGate(interface="lo", preempt="auto").status()["auto"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"device": "nosuchdisk0"}, "unknown block device `nosuchdisk0`"),
        # A mistyped path, not the disk of `/`.
        (
            {"device": "/nonexistent/typo"},
            "unknown block device `/nonexistent/typo` \\(no such file or directory",
        ),
        ({"interface": "nosuchif0"}, "unknown network interface `nosuchif0`"),
        ({}, "needs a resource to watch"),
        ({"device": "vda", "interface": "lo"}, "watches one resource"),
        ({"interface": "lo", "preempt": "-50ms"}, "cannot be negative"),
        ({"interface": "lo", "preempt": -0.05}, "cannot be negative"),
        ({"interface": "lo", "preempt": "soon"}, "preempt `soon`"),
        ({"interface": "lo", "threshold": -1}, "threshold = -1: must not be negative"),
    ],
)
def test_bad_settings_raise_value_error_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tact.IdleGate(**kwargs)


def test_misuse_raises_runtime_error():
    gate = tact.IdleGate(interface="lo", preempt=0)
    with pytest.raises(RuntimeError, match="no background request is outstanding"):
        gate.done(10)
    with pytest.raises(TypeError, match="preempt must be"):
        tact.IdleGate(interface="lo", preempt=[1])
    with gate:
        with pytest.raises(RuntimeError, match="still outstanding"):
            with gate:
                pass
        with pytest.raises(ValueError, match="nbytes = -1"):
            gate.done(-1)
    assert not gate.status()["outstanding"]


def test_api_is_exported_and_documented():
    assert "IdleGate" in tact.__all__ and "IdleStatus" in tact.__all__
    assert tact.IdleGate.__doc__ and "with gate:" in tact.IdleGate.__doc__
    assert set(tact.IdleStatus.__annotations__) >= {"state", "pi", "waited", "counters"}
