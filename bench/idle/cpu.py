"""The CPU rig: fg and bg pinned to the same CPU (the machine has two; unpinned they would not
compete). A request is a spin of a fixed number of iterations, calibrated at the start to `work`
of an uncontended CPU; fg times every request itself, so its latency against fg alone is the
latency target. SCHED_IDLE (`tact run --idle cpu`) should leave fg its whole CPU while bg takes
what fg leaves; nice 19 still gives bg a weight of 15 against 1024 (about 1.5%) while fg runs."""
import subprocess

from common.lifecycle import log


class CpuRig:
    name = "cpu"
    baselines = ["none", "nice"]
    unit = "work units/s"
    resource = "cpu"

    def __init__(self, loadgen, cpu, work_ms):
        self.loadgen = loadgen
        self.cpu = cpu
        self.work_ms = work_ms
        self.info = {"cpu": cpu, "work_ms": work_ms}

    def setup(self, cleanup):
        out = subprocess.run(["taskset", "-c", str(self.cpu), self.loadgen, "calibrate", str(self.work_ms * 1000)],
                             capture_output=True, text=True, check=True).stdout
        self.iters = int(out.split()[0])
        self.info["iterations"] = self.iters
        log(f"cpu rig: CPU {self.cpu}, a request is {self.iters} iterations (~{self.work_ms} ms uncontended)")

    def fg(self, intensity, start_ns, seconds, out):
        return [self.loadgen, "fg", "cpu", str(self.iters), "-i", str(intensity), "-s", str(start_ns),
                "-d", str(seconds), "-o", out, "-a", str(self.cpu)]

    def bg(self, start_ns, seconds, out):
        return [self.loadgen, "bg", "cpu", str(self.iters), "-s", str(start_ns), "-d", str(seconds), "-o", out,
                "-a", str(self.cpu)]

    def place_bg(self, cmd):
        return cmd

    def place_controller(self, cmd):
        return cmd

    def place_job(self, cmd):
        return cmd
