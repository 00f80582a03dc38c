#!/usr/bin/env python3
"""A non-preemptive single-server "disk" in user space: a FUSE filesystem whose root is one regular
file of SIZE bytes, served by one thread, one read at a time, each taking SERVICE_MS (on absolute
deadlines, so the service time does not drift). It speaks the FUSE protocol on /dev/fuse directly
(stdlib only); the open reply sets FOPEN_DIRECT_IO, so the kernel never caches or reads ahead and
every read reaches this server. The kernel queues waiting reads in arrival order, and no scheduler
can reorder what the server holds. A loop device over the file gives the rig a block device with
/proc/diskstats and an I/O scheduler (spec idletime.md, "Test machine facts for the emulated
disk"). Content: zeros, or IMAGE's bytes when given (bench/tickets e5.py's filesystem image).

    fusedisk.py MOUNTPOINT SIZE SERVICE_MS [IMAGE]

MOUNTPOINT must be an existing regular file (the mount covers it). The server dies with its parent
(PR_SET_PDEATHSIG); unmount with `umount -l MOUNTPOINT`.
"""
import ctypes
import errno
import os
import struct
import sys
import time

FUSE_GETATTR, FUSE_OPEN, FUSE_READ, FUSE_STATFS, FUSE_RELEASE = 3, 14, 15, 17, 18
FUSE_FLUSH, FUSE_INIT, FUSE_ACCESS, FUSE_INTERRUPT, FUSE_DESTROY, FUSE_FORGET = 25, 26, 34, 36, 38, 2
FUSE_BATCH_FORGET = 42
NO_REPLY = {FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT}
FOPEN_DIRECT_IO = 1
IN_HEADER = struct.Struct("<IIQQIIIHH")   # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct("<IiQ")        # len, error, unique
MAX_WRITE = 128 * 1024
PR_SET_PDEATHSIG = 1


def attr(size):
    # fuse_attr_out: attr_valid, attr_valid_nsec, dummy, then fuse_attr (ino, size, blocks, a/m/ctime,
    # their nsec, mode, nlink, uid, gid, rdev, blksize, flags)
    return struct.pack("<QII", 3600, 0, 0) + struct.pack(
        "<QQQQQQIIIIIIIIII", 1, size, size // 512, 0, 0, 0, 0, 0, 0, 0o100444, 1, 0, 0, 0, 4096, 0)


def serve(fd, size, service_s, image=None):
    buf_size = MAX_WRITE + 4096
    zeros = bytes(1 << 20)
    while True:
        try:
            req = os.read(fd, buf_size)
        except OSError as e:
            if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                continue  # ENOENT: a request interrupted before it was read
            if e.errno == errno.ENODEV:
                return  # unmounted
            raise
        length, opcode, unique, _node, _uid, _gid, _pid, _ext, _pad = IN_HEADER.unpack_from(req)
        body = req[IN_HEADER.size:length]
        if opcode in NO_REPLY:
            continue
        err, out = 0, b""
        if opcode == FUSE_INIT:
            major, minor, max_readahead, _flags = struct.unpack_from("<IIII", body)
            # fuse_init_out (protocol 7.31 layout, 64 bytes): no capability flags asked for
            out = struct.pack("<IIIIHHIIHHII", 7, 31, 0, 0, 1, 1, MAX_WRITE, 1, 32, 0, 0, 0) + bytes(24)
        elif opcode == FUSE_GETATTR:
            out = attr(size)
        elif opcode == FUSE_OPEN:
            out = struct.pack("<QIi", 0, FOPEN_DIRECT_IO, 0)
        elif opcode == FUSE_READ:
            _fh, offset, count = struct.unpack_from("<QQI", body)
            # The single server: one read at a time, each SERVICE_MS from when it was taken up.
            deadline = time.monotonic() + service_s
            n = max(0, min(count, size - offset))
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(left)
            if image is not None:
                out = os.pread(image, n, offset)
            else:
                out = zeros[:n] if n <= len(zeros) else bytes(n)
        elif opcode in (FUSE_RELEASE, FUSE_FLUSH, FUSE_ACCESS):
            pass
        elif opcode == FUSE_STATFS:
            out = struct.pack("<QQQQQIIII", size // 4096, 0, 0, 1, 0, 4096, 255, 4096, 0) + bytes(24)
        elif opcode == FUSE_DESTROY:
            os.write(fd, OUT_HEADER.pack(OUT_HEADER.size, 0, unique))
            return
        else:
            err = -errno.ENOSYS
        try:
            os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(out), err, unique) + out)
        except OSError as e:
            if e.errno != errno.ENOENT:  # ENOENT: the request was interrupted meanwhile
                raise


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    mountpoint, size, service_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    image = os.open(sys.argv[4], os.O_RDONLY) if len(sys.argv) == 5 else None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = f"fd={fd},rootmode=100000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"tact-idle-disk", mountpoint.encode(), b"fuse", 0, opts) != 0:
        e = ctypes.get_errno()
        raise SystemExit(f"fusedisk: mount {mountpoint}: {os.strerror(e)}")
    print("mounted", flush=True)
    serve(fd, size, service_ms / 1000, image)


if __name__ == "__main__":
    main()
