"""The disk rig: a non-preemptive single server with a fixed service time (fusedisk.py: a FUSE file
served one read at a time, SERVICE_MS each), under a loop device, so that the rig has a block
device with /proc/diskstats (what `tact run --idle disk:/dev/loopN` watches) and an I/O scheduler
(BFQ when the kernel offers it, for `ionice -c3`). Requests are random O_DIRECT reads (4 KiB by default) of the
loop device, one outstanding per process; the loop device passes them to the server with direct
I/O, and the server's queue is the kernel's FIFO of FUSE requests.

Why not a loop device throttled by blkio.throttle.read_iops_device (bench/library's approach): the
throttle is a rate limiter with 100 ms slices, not a server. At 50 IOPS it let 5 reads pass at once
after every idle spell, then none for the rest of the slice (measured here: median latency 0.05 ms,
p90 100 ms), so fg alone got r_max at any intensity from 0.2 up and left bg no idle capacity.

Nothing touches the machine's real disks: the file under the mount is a mount point, not data."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from common.lifecycle import log

PREFIX = "/var/tmp/tact-test-idle-"
DISK_BYTES = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))


def mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f if len(line.split()) > 1)


def remove_stale():
    """Loop devices and mounts of earlier runs whose harness died."""
    for name in os.listdir("/var/tmp"):
        m = re.fullmatch(r"tact-test-idle-(\d+)\.disk", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        path = os.path.join("/var/tmp", name)
        r = subprocess.run(["losetup", "-j", path], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            dev = line.split(":", 1)[0]
            if dev.startswith("/dev/loop"):
                log(f"detaching {dev}, left on {path} by an earlier run")
                subprocess.run(["losetup", "-d", dev], capture_output=True)
        if mounted(path):
            subprocess.run(["umount", "-l", path], capture_output=True)
        os.unlink(path)


class DiskRig:
    name = "disk"
    baselines = ["none", "ionice", "nice"]
    unit = "reads/s"

    def __init__(self, loadgen, service_ms, size):
        self.loadgen = loadgen
        self.service_ms = service_ms
        self.size = size
        self.info = {"service_ms": service_ms, "request_bytes": size, "server": "fusedisk.py (FUSE, one read at a time)"}

    def setup(self, cleanup):
        if not os.path.exists("/dev/fuse"):
            raise RuntimeError("no /dev/fuse (the disk rig's server is a FUSE file)")
        remove_stale()
        self.file = f"{PREFIX}{os.getpid()}.disk"
        open(self.file, "w").close()
        cleanup.push("mount point", lambda: os.unlink(self.file))
        server = subprocess.Popen([sys.executable, os.path.join(HERE, "fusedisk.py"), self.file, str(DISK_BYTES),
                                   str(self.service_ms)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)

        def stop_server():
            if server.poll() is None:
                server.send_signal(signal.SIGKILL)
            server.wait()
        cleanup.push("fusedisk", stop_server)
        line = server.stdout.readline().decode().strip()
        if line != "mounted":
            raise RuntimeError(f"fusedisk did not mount {self.file} (said {line!r})")
        cleanup.push(f"umount {self.file}", lambda: subprocess.run(["umount", "-l", self.file], check=True))
        r = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", self.file], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"losetup {self.file}: {r.stderr.strip()}")
        self.dev = r.stdout.strip()
        cleanup.push(f"losetup -d {self.dev}",
                     lambda: subprocess.run(["losetup", "-d", self.dev], check=True, capture_output=True))
        name = os.path.basename(self.dev)
        block = Path("/sys/block") / name
        scheduler = block / "queue" / "scheduler"
        if "bfq" in scheduler.read_text():
            scheduler.write_text("bfq")
        self.info.update(device=self.dev, majmin=(block / "dev").read_text().strip(),
                         scheduler=scheduler.read_text().strip(),
                         direct_io=(block / "loop" / "dio").read_text().strip(),
                         file=self.file, bytes=DISK_BYTES)
        self.resource = f"disk:{self.dev}"
        log(f"disk rig: {self.dev} over {self.file} (FUSE, {self.service_ms:g} ms a read), scheduler "
            f"{self.info['scheduler']}, loop direct I/O {self.info['direct_io']}")
        time.sleep(0.1)

    def fg(self, intensity, start_ns, seconds, out):
        return [self.loadgen, "fg", "disk", self.dev, "-i", str(intensity), "-s", str(start_ns), "-d", str(seconds),
                "-o", out, "-r", "1", "-b", str(self.size)]

    def bg(self, start_ns, seconds, out):
        return [self.loadgen, "bg", "disk", self.dev, "-s", str(start_ns), "-d", str(seconds), "-o", out, "-r", "2",
                "-b", str(self.size)]

    def place_bg(self, cmd):
        return cmd

    def place_controller(self, cmd):
        return cmd

    def place_job(self, cmd):
        return cmd
