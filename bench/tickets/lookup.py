#!/usr/bin/env python3
"""E5's phone-lookup server: opens its SQLite database read-only and answers random point queries
(`SELECT number FROM phone WHERE id = ?`) in a loop, counting them in slot INDEX of the harness's
slot file (workload.py's Slots: {pid, queries, 0, 0}). SQLite's own cache is a few pages: the
working set lives in the kernel's page cache, charged to this process's memory cgroup (spec E5:
Linux's unified page cache avoids the report's double buffering). It first reads its database
once in 1 MiB reads, as a server warms its cache, so that the window measures the steady state
and not how fast random misses fill an empty cache. Then it marks SQLite's file descriptor
POSIX_FADV_RANDOM: a miss reads its one page, with no readahead around it (spec E3's MADV_RANDOM).

    lookup.py DB ROWS INDEX SLOTS OWNER_PID SECONDS

Exits after SECONDS, or as soon as OWNER_PID (the harness) is gone."""
import mmap
import os
import random
import sqlite3
import struct
import sys
import time

SLOT_BYTES = 32


def main():
    db, rows, index, slots, owner, seconds = sys.argv[1:7]
    rows, index, owner, seconds = int(rows), int(index), int(owner), float(seconds)
    with open(db, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    # immutable: a read-only filesystem, no locks or journal to look at.
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    con.execute("PRAGMA cache_size = 8")
    con.execute("PRAGMA mmap_size = 0")
    con.execute("SELECT count(*) FROM sqlite_master").fetchone()   # SQLite opens the file lazily
    path = os.path.realpath(db)
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == path:
                os.posix_fadvise(int(fd), 0, 0, os.POSIX_FADV_RANDOM)
        except OSError:
            pass   # the listing's own descriptor, gone
    sfd = os.open(slots, os.O_RDWR)
    slot = mmap.mmap(sfd, os.fstat(sfd).st_size)
    rng = random.Random(index)
    query = "SELECT number FROM phone WHERE id = ?"
    n = 0
    deadline = time.monotonic() + seconds
    struct.pack_into("<qq", slot, index * SLOT_BYTES, os.getpid(), 0)
    while True:
        con.execute(query, (rng.randrange(rows) + 1,)).fetchone()
        n += 1
        struct.pack_into("<q", slot, index * SLOT_BYTES + 8, n)
        if n % 256 == 0:
            if time.monotonic() > deadline:
                return 0
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                return 0


if __name__ == "__main__":
    sys.exit(main())
