"""The load generator's record files (loadgen.c: a 32-byte header { magic, count, resends, lost }
and one { start_ns, end_ns } per completed request, CLOCK_MONOTONIC) and what the benchmark
computes from them: completions and latencies inside the measured window, and a UDP flow's
resends over its whole run."""
import os
import statistics
import struct

MAGIC = 0x32656C6469746361  # "actidle2"
HEADER = 32
CAPACITY = 1 << 21


def header(path):
    """(count, resends, lost) of a record file, or None if the process never created it. resends:
    the UDP requests sent again after 200 ms without an answer (each time); lost: the completed
    ones among them whose datagrams the sink lacked (loadgen.c)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER)
    except FileNotFoundError:
        return None
    if len(head) < HEADER:
        return None
    magic, n, resends, lost = struct.unpack("<4Q", head)
    if magic != MAGIC:
        raise ValueError(f"{path}: not a loadgen record file")
    return n, resends, lost


def read(path):
    """[(start_ns, end_ns)] of one record file; [] if the process never created it."""
    head = header(path)
    if head is None:
        return []
    n = head[0]
    with open(path, "rb") as f:
        f.seek(HEADER)
        data = f.read(16 * n)
    vals = struct.unpack(f"<{2 * n}Q", data[:16 * n])
    return list(zip(vals[0::2], vals[1::2]))


def window(recs, t0_ns, t1_ns):
    """Throughput (completions per second) and latency (mean and p95, seconds) of the requests
    that completed inside [t0, t1)."""
    inside = [(s, e) for s, e in recs if t0_ns <= e < t1_ns]
    lat = sorted((e - s) / 1e9 for s, e in inside)
    out = {"n": len(inside), "rate": len(inside) / ((t1_ns - t0_ns) / 1e9)}
    if lat:
        out["lat_mean"] = statistics.fmean(lat)
        out["lat_p95"] = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    return out


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "r")
        with open(p, "wb") as f:
            f.write(struct.pack("<4Q", MAGIC, 3, 2, 1) + struct.pack("<6Q", 0, 10, 10, 30, 30, 2_000_000_000))
            f.write(b"\0" * 64)  # capacity beyond the count is ignored
        recs = read(p)
        assert recs == [(0, 10), (10, 30), (30, 2_000_000_000)], recs
        assert header(p) == (3, 2, 1)
        w = window(recs, 0, 1_000_000_000)
        assert w["n"] == 2 and w["rate"] == 2.0 and abs(w["lat_mean"] - 15e-9) < 1e-15, w
        assert read(os.path.join(tmp, "missing")) == [] and header(os.path.join(tmp, "missing")) is None
