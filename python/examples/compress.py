"""Compresses files with zlib as background work that defers to everything else on the machine.

    python examples/compress.py FILE_OR_DIR... [--out DIR] [--level 9]

Each file is read and compressed in 1 MiB chunks; after each chunk the program tells tact how many
bytes it compressed. When its throughput drops (something more important is using the CPU or the
disk) tact suspends it inside testpoint() until the machine is free again. The second run starts
with the throughput learnt by the first (see `tact.stats()["phase"]`).
"""

import argparse
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Iterator

import tact

CHUNK = 1 << 20


def files(paths: "list[Path]") -> Iterator[Path]:
    for p in paths:
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*") if f.is_file())
        else:
            yield p


def compress(src: Path, dst: Path, level: int) -> int:
    """Compresses one file; returns its size."""
    done = 0
    z = zlib.compressobj(level)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(CHUNK):
            fout.write(z.compress(chunk))
            done += len(chunk)
            # Progress since the last call: the bytes of this chunk. Blocks while tact says defer.
            tact.testpoint(0, len(chunk))
        fout.write(z.flush())
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", default=None, help="output directory (default: discard output)")
    ap.add_argument("--level", type=int, default=9)
    ap.add_argument("--testpoint", default="100ms", help="testpoint period")
    args = ap.parse_args()
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        ap.error(f"no such file or directory: {', '.join(missing)}")
    # The persistence key defaults to this script's path; a name keeps it across moves.
    tact.configure(testpoint=args.testpoint, name="example-compress")

    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    start, total = time.monotonic(), 0
    for src in files(paths):
        dst = out / (src.name + ".z") if out else Path(os.devnull)
        total += compress(src, dst, args.level)

    elapsed = time.monotonic() - start
    s = tact.stats() or {}
    print(
        f"compressed {total / 1e6:.1f} MB in {elapsed:.1f} s; phase {s.get('phase')}, "
        f"{s.get('suspensions', 0)} suspensions, {s.get('suspended', 0.0):.1f} s suspended",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
