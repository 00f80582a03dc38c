"""loadgen's UDP requests on loopback, no root and no namespaces: part of `run.py --self-test`, and
runnable alone (`python bench/idle/test_udp.py`, or under pytest).

A UDP request is the request's bytes as datagrams and one answer once all arrived, sent again
after 200 ms without one (loadgen.c). Checked here: requests complete; a datagram left out on
purpose (`loadgen -x N`) is recovered by the resend, and counted as lost; an answer the sink
leaves out (`loadgen sink PORT N`) is recovered too, and counted as a resend but not a loss; a
flow whose sink is gone exits 2 s past its end instead of hanging; the TCP kind still records."""
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import records  # noqa: E402

TIMEOUT_S = 0.2  # loadgen.c UDP_TIMEOUT_NS


def free_port():
    """A port free for both TCP and UDP on loopback (the sink binds both)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as t:
            t.bind(("::", 0))
            port = t.getsockname()[1]
            with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("::", port))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port")


class Sink:
    def __init__(self, loadgen, port, drop_answers=0):
        self.port = port
        cmd = [loadgen, "sink", str(port)] + ([str(drop_answers)] if drop_answers else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        # The sink binds UDP before TCP: once TCP answers, both are up.
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"loadgen sink on port {port} did not come up")
                time.sleep(0.05)

    def stop(self):
        # Its children (the UDP server, one per TCP connection) die with it (PR_SET_PDEATHSIG).
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def flow(loadgen, tmp, kind, port, seconds, *extra):
    """Runs `loadgen bg KIND 127.0.0.1:PORT` for `seconds`; (exit code, records, resends, lost)."""
    out = os.path.join(tmp, f"{kind}.{len(os.listdir(tmp))}.rec")
    p = subprocess.run([loadgen, "bg", kind, f"127.0.0.1:{port}", "-d", str(seconds), "-o", out, *extra],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=seconds + 20)
    head = records.header(out)
    assert head is not None, p.stderr
    return p.returncode, records.read(out), head[1], head[2]


def check(loadgen, tmp):
    port = free_port()
    sink = Sink(loadgen, port)
    try:
        # Requests complete, 16 KiB as 12 datagrams each.
        rc, recs, resends, lost = flow(loadgen, tmp, "udp", port, 1.0)
        assert rc == 0 and len(recs) >= 20, (rc, len(recs))
        assert lost <= resends, (lost, resends)
        # Every 24th datagram left out of a first sending: every other request loses one, and
        # completes only once resent, never before the timeout.
        rc, recs, resends, lost = flow(loadgen, tmp, "udp", port, 1.0, "-x", "24")
        assert rc == 0 and len(recs) >= 2, (rc, len(recs))
        assert resends >= 1 and 1 <= lost <= resends, (resends, lost)
        waited = sum(1 for s, e in recs if (e - s) / 1e9 >= TIMEOUT_S)
        assert waited >= lost - 1, (waited, lost)  # the last one may not have completed
        # The TCP kind on the same sink still records its requests.
        rc, recs, resends, lost = flow(loadgen, tmp, "net", port, 0.3)
        assert rc == 0 and len(recs) >= 10 and resends == lost == 0, (rc, len(recs), resends, lost)
    finally:
        sink.stop()
    # Every other answer left out by the sink: the resend's answer says the sink had it all, so
    # those resends are no loss.
    port = free_port()
    sink = Sink(loadgen, port, drop_answers=2)
    try:
        rc, recs, resends, lost = flow(loadgen, tmp, "udp", port, 1.0)
        assert rc == 0 and len(recs) >= 3, (rc, len(recs))
        assert resends >= 2 and resends - lost >= 1, (resends, lost)
    finally:
        sink.stop()
    # No sink: the flow gives up 2 s past its end, exits 0 and records nothing.
    t0 = time.monotonic()
    rc, recs, resends, lost = flow(loadgen, tmp, "udp", port, 0.3)
    took = time.monotonic() - t0
    assert rc == 0 and recs == [] and resends >= 1 and lost == 0, (rc, recs, resends, lost)
    assert took < 15, took


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        loadgen = os.path.join(tmp, "loadgen")
        subprocess.run(["cc", "-O2", "-Wall", "-o", loadgen, os.path.join(HERE, "loadgen.c")], check=True)
        recs = os.path.join(tmp, "recs")
        os.mkdir(recs)
        check(loadgen, recs)


def test_udp_requests():
    self_test()


if __name__ == "__main__":
    self_test()
    print("test_udp: passed")
