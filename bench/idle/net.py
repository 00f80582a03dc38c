"""The network rig: three network namespaces this run creates and deletes.

    bg ns  (bg sender) --veth--> fg ns (fg sender, router, tact) --veth, tbf 100 Mbit/s--> sink ns

tbf on the fg namespace's egress toward the sink is the bottleneck both flows share, one FIFO
(claim 1's fair share with no control). A request is one TCP write of `size` bytes to the sink,
which answers one byte; one request outstanding per flow. The bg sender has a namespace of its
own, so `tact run --idle net:IFACE` running in the fg namespace sees the bottleneck interface's
traffic (fg + bg) and the job's own traffic exactly in /proc/PID/net/dev of the job (tact-linux's
NetReader::job_counters); fg activity is the difference.

The two counters are read at different points of the path: the job's bytes when they leave the bg
namespace, the bottleneck's when tbf releases them, up to one request later, so a gate that takes
the difference per poll sees the tail of a bg request as fg; a gate has to carry the deficit over.
Nothing here touches the machine's own interfaces: every link is created inside the namespaces."""
import os
import re
import subprocess

from common.lifecycle import log

NS_PREFIX = "tact-test-idle-"
PORT = 5001


def sh(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r.stdout


def list_netns():
    return [line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()]


def remove_stale():
    for ns in list_netns():
        m = re.fullmatch(re.escape(NS_PREFIX) + r"(\d+)-\w+", ns)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            log(f"deleting network namespace {ns}, left by an earlier run")
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class NetRig:
    name = "net"
    baselines = ["none", "sched-idle", "nice"]
    unit = "requests/s"

    def __init__(self, loadgen, rate_mbit, size, procs):
        self.loadgen = loadgen
        self.rate = rate_mbit
        self.size = size
        self.procs = procs
        pid = os.getpid()
        self.ns = {k: f"{NS_PREFIX}{pid}-{k}" for k in ("fg", "bg", "sink")}
        self.link = f"tis{pid}"  # the bottleneck, in the fg namespace (<= 15 characters)
        self.info = {"rate_mbit": rate_mbit, "request_bytes": size, "namespaces": dict(self.ns),
                     "bottleneck": self.link}

    def setup(self, cleanup):
        remove_stale()
        for k in ("fg", "bg", "sink"):
            sh("ip", "netns", "add", self.ns[k])
            cleanup.push(f"netns {self.ns[k]}", lambda ns=self.ns[k]: sh("ip", "netns", "del", ns))
            sh("ip", "-n", self.ns[k], "link", "set", "lo", "up")
        pid = os.getpid()
        fg, bg, sink = self.ns["fg"], self.ns["bg"], self.ns["sink"]
        bg_fg, bg_bg, sink_sink = f"tib{pid}", f"tib{pid}p", f"tis{pid}p"
        sh("ip", "-n", fg, "link", "add", self.link, "type", "veth", "peer", "name", sink_sink, "netns", sink)
        sh("ip", "-n", fg, "link", "add", bg_fg, "type", "veth", "peer", "name", bg_bg, "netns", bg)
        for ns, dev, addr in ((fg, self.link, "10.201.1.1/24"), (sink, sink_sink, "10.201.1.2/24"),
                              (fg, bg_fg, "10.201.2.1/24"), (bg, bg_bg, "10.201.2.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", bg, "route", "add", "default", "via", "10.201.2.1")
        sh("ip", "-n", sink, "route", "add", "10.201.2.0/24", "via", "10.201.1.1")
        sh("ip", "netns", "exec", fg, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        # A small bucket (a few frames) so that tbf, not its burst allowance, sets each request's
        # service time; limit = rate x latency bounds the queue (one request per flow fits).
        sh("tc", "-n", fg, "qdisc", "add", "dev", self.link, "root", "tbf", "rate", f"{self.rate}mbit",
           "burst", "5kb", "latency", "50ms")
        self.info["qdisc"] = sh("tc", "-n", fg, "qdisc", "show", "dev", self.link).strip()
        sink_proc = self.procs.spawn(["ip", "netns", "exec", sink, self.loadgen, "sink", str(PORT)])
        self.info["sink_pid"] = sink_proc.pid
        self.resource = f"net:{self.link}"
        self.target = f"10.201.1.2:{PORT}"
        log(f"net rig: namespaces {fg} (fg, tact), {bg} (bg), {sink} (sink); "
            f"{self.info['qdisc']} on {self.link}")

    def fg(self, intensity, start_ns, seconds, out):
        return ["ip", "netns", "exec", self.ns["fg"], self.loadgen, "fg", "net", self.target, "-i", str(intensity),
                "-s", str(start_ns), "-d", str(seconds), "-o", out, "-b", str(self.size)]

    def bg(self, start_ns, seconds, out):
        return [self.loadgen, "bg", "net", self.target, "-s", str(start_ns), "-d", str(seconds), "-o", out,
                "-b", str(self.size)]

    def place_bg(self, cmd):
        return ["ip", "netns", "exec", self.ns["bg"]] + cmd

    def place_controller(self, cmd):
        return ["ip", "netns", "exec", self.ns["fg"]] + cmd

    def place_job(self, cmd):
        return self.place_bg(cmd)
