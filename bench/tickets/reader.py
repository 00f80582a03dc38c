#!/usr/bin/env python3
"""E3's disk client: random 4 KiB O_DIRECT reads of its own region of a block device, one request
outstanding (a synchronous pread at a time), counting them in slot INDEX of the harness's slot file
(bench/tickets/workload.py's Slots: {pid, reads, 0, 0}). O_DIRECT stands for the spec's dropped
caches and MADV_RANDOM: no page cache, no readahead, every read reaches the device.

    reader.py DEV INDEX REGION_BYTES SLOTS OWNER_PID SECONDS

Exits after SECONDS, or as soon as OWNER_PID (the harness) is gone."""
import mmap
import os
import random
import struct
import sys
import time

PAGE = 4096
SLOT_BYTES = 32


def main():
    dev, index, region, slots, owner, seconds = sys.argv[1:7]
    index, region, owner, seconds = int(index), int(region), int(owner), float(seconds)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, PAGE)              # page-aligned, as O_DIRECT needs
    sfd = os.open(slots, os.O_RDWR)
    slot = mmap.mmap(sfd, os.fstat(sfd).st_size)
    rng = random.Random(index)
    base, pages = index * region, region // PAGE
    pid, n = os.getpid(), 0
    deadline = time.monotonic() + seconds
    struct.pack_into("<qq", slot, index * SLOT_BYTES, pid, 0)
    while True:
        os.preadv(fd, [buf], base + rng.randrange(pages) * PAGE)
        n += 1
        struct.pack_into("<q", slot, index * SLOT_BYTES + 8, n)
        if n % 64 == 0:
            if time.monotonic() > deadline:
                return 0
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                return 0


if __name__ == "__main__":
    sys.exit(main())
