"""The load generator's record files (loadgen.c: a 16-byte header { magic, count } and one
{ start_ns, end_ns } per completed request, CLOCK_MONOTONIC) and what the benchmark computes
from them: completions and latencies inside the measured window."""
import os
import statistics
import struct

MAGIC = 0x31656C6469746361
CAPACITY = 1 << 21


def read(path):
    """[(start_ns, end_ns)] of one record file; [] if the process never created it."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            if len(head) < 16:
                return []
            magic, n = struct.unpack("<QQ", head)
            if magic != MAGIC:
                raise ValueError(f"{path}: not a loadgen record file")
            data = f.read(16 * n)
    except FileNotFoundError:
        return []
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
            f.write(struct.pack("<QQ", MAGIC, 3) + struct.pack("<6Q", 0, 10, 10, 30, 30, 2_000_000_000))
            f.write(b"\0" * 64)  # capacity beyond the count is ignored
        recs = read(p)
        assert recs == [(0, 10), (10, 30), (30, 2_000_000_000)], recs
        w = window(recs, 0, 1_000_000_000)
        assert w["n"] == 2 and w["rate"] == 2.0 and abs(w["lat_mean"] - 15e-9) < 1e-15, w
        assert read(os.path.join(tmp, "missing")) == []
