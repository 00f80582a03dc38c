"""The network rig: network namespaces this run creates and deletes, and a 100 Mbit/s bottleneck.

`--net-shaper tbf` (the default, the tables in docs/idle.md up to 26 Nov):

    bg ns  (bg sender) --veth--> fg ns (fg sender, router, tact) --veth, tbf 100 Mbit/s--> sink ns

tbf on the fg namespace's egress toward the sink is the bottleneck both flows share, one FIFO
(claim 1's fair share with no control). A request is one TCP write of `size` bytes to the sink,
which answers one byte; one request outstanding per flow. With `proto="udp"` (`--net-proto`) a
request is the same `size` bytes as datagrams of at most 1472 bytes (no fragmentation), answered
by one small datagram once all arrived, and sent again whole after 200 ms without an answer
(loadgen.c); the rig is the same, in namespaces and links of its own (`-u` in their names), so
that `--net-proto both` measures TCP and UDP in one run. The bg sender has a namespace of its
own, so `tact run --idle net:IFACE` running in the fg namespace sees the bottleneck interface's
traffic (fg + bg) and the job's own traffic exactly in /proc/PID/net/dev of the job (tact-linux's
NetReader::job_counters); fg activity is the difference.

The bg sender is unmodified (it sets no DSCP) in every mode: the tree tact grafts under tbf (its
default under a tbf root, docs/idle.md) classifies by DSCP LE, and tact marks the bg sender's
packets, which the fg namespace forwards from the bg namespace, at the ingress of the veth they
enter through (docs/idle.md, "A job in a network namespace of its own"). The baselines send the
same unmarked packets as before the marking moved to tact (until 26 Nov the bg sender marked its
own socket, `loadgen -t 4`, which tbf's bfifo ignored).

With UDP the own-traffic count and the marking are the same: the job's namespace counts its
datagrams and the sink's answers, and the ingress chain marks every IP packet, whatever the
protocol. Under tact-htb, where the job's class counts what it sends (every protocol) and its TCP
sockets what it receives, the sink's answers to the job (one 50-byte frame a request, under
40 kB/s) count as foreground: less than θ (4 KiB) in any probe interval up to 100 ms.

The two counters are read at different points of the path: the job's bytes when they leave the bg
namespace, the bottleneck's when tbf releases them, up to one request later, so a gate that takes
the difference per poll sees the tail of a bg request as fg; a gate has to carry the deficit over.

`--net-shaper tact-htb`: the bottleneck is tact's own htb tree (`--net-rate`), so its job class
below the foreground class is measured too:

    fg ns (fg sender, bg sender, tact) --veth, htb 100 Mbit/s--> sink ns

Here the bg sender runs in the fg namespace, beside tact, in every mode: tact marks the job's
packets DSCP LE with an nftables rule in its own namespace that matches the cgroup of the socket
that sends them, on the output path, and its gate takes the job's traffic from the job's class
(`own_traffic: htb_class`), the source this rig measures. (Packets forwarded from a bg namespace
tact marks too, at the veth's ingress, as in the tbf rig.) tact's points get the link with its
kernel default qdisc (noqueue), on which tact builds its tree and which it restores at its end;
every other point (alone, no control, nice, SCHED_IDLE) runs over a plain htb of tact's layout
without the job's class and filters (root 1: default 10, 1:1 and 1:10 at rate = ceil = R, prio
0, quantum 1514), so every mode shares one 100 Mbit/s htb. The cgroup2 hierarchy, which tact needs for the marking and which
`ip netns exec` hides with its fresh /sys, is mounted at /sys/fs/cgroup in tact's private mount
namespace (as tests/idle_net_kernel.rs does).

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


SHAPERS = ("tbf", "tact-htb")
PROTOS = ("tcp", "udp")
# The htb quantum of tact's tree (tact-linux actuate/htb.rs QUANTUM): one Ethernet frame.
HTB_QUANTUM = 1514


def rig_name(proto):
    """The rig's name in the plan, results.json and the tables: `net` (TCP, as before UDP came) or
    `net-udp`."""
    return "net" if proto == "tcp" else f"net-{proto}"


class NetRig:
    baselines = ["none", "sched-idle", "nice"]
    unit = "requests/s"

    def __init__(self, loadgen, rate_mbit, size, procs, shaper="tbf", proto="tcp"):
        if shaper not in SHAPERS:
            raise ValueError(f"net shaper {shaper!r}: one of {', '.join(SHAPERS)}")
        if proto not in PROTOS:
            raise ValueError(f"net proto {proto!r}: one of {', '.join(PROTOS)}")
        self.loadgen = loadgen
        self.rate = rate_mbit
        self.size = size
        self.procs = procs
        self.shaper = shaper
        self.proto = proto
        self.name = rig_name(proto)
        self.kind = "net" if proto == "tcp" else "udp"  # loadgen's KIND
        pid = os.getpid()
        kinds = ("fg", "bg", "sink") if shaper == "tbf" else ("fg", "sink")
        # The UDP rig's own namespaces and links (`-u`, `tiu`, `tiv`), beside the TCP rig's.
        u = "" if proto == "tcp" else "u"
        self.ns = {k: f"{NS_PREFIX}{pid}-{u}{k}" for k in kinds}
        self.link = f"tiu{pid}" if u else f"tis{pid}"  # the bottleneck, in the fg namespace (<= 15 chars)
        self.bg_link = f"tiv{pid}" if u else f"tib{pid}"  # bg's veth, in the fg namespace (tbf)
        self.plain_htb_up = False
        # tact's own tree at the same rate (tact-htb); with tbf, tact grafts its tree under tbf
        # (at twice tbf's rate, so that tbf still shapes) and puts tbf's bfifo back at its end.
        self.tact_args = ["--net-rate", f"{rate_mbit}mbit"] if shaper == "tact-htb" else []
        self.info = {"rate_mbit": rate_mbit, "request_bytes": size, "namespaces": dict(self.ns),
                     "bottleneck": self.link, "shaper": shaper, "proto": proto}

    def setup(self, cleanup):
        remove_stale()
        for k, ns in self.ns.items():
            sh("ip", "netns", "add", ns)
            cleanup.push(f"netns {ns}", lambda ns=ns: sh("ip", "netns", "del", ns))
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        fg, sink = self.ns["fg"], self.ns["sink"]
        sink_sink = f"{self.link}p"
        sh("ip", "-n", fg, "link", "add", self.link, "type", "veth", "peer", "name", sink_sink, "netns", sink)
        addrs = [(fg, self.link, "10.201.1.1/24"), (sink, sink_sink, "10.201.1.2/24")]
        if "bg" in self.ns:
            bg, bg_fg, bg_bg = self.ns["bg"], self.bg_link, f"{self.bg_link}p"
            sh("ip", "-n", fg, "link", "add", bg_fg, "type", "veth", "peer", "name", bg_bg, "netns", bg)
            addrs += [(fg, bg_fg, "10.201.2.1/24"), (bg, bg_bg, "10.201.2.2/24")]
        for ns, dev, addr in addrs:
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        if "bg" in self.ns:
            sh("ip", "-n", bg, "route", "add", "default", "via", "10.201.2.1")
            sh("ip", "-n", sink, "route", "add", "10.201.2.0/24", "via", "10.201.1.1")
            sh("ip", "netns", "exec", fg, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
            # A small bucket (a few frames) so that tbf, not its burst allowance, sets each
            # request's service time; limit = rate x latency bounds the queue (one request per
            # flow fits).
            sh("tc", "-n", fg, "qdisc", "add", "dev", self.link, "root", "tbf", "rate", f"{self.rate}mbit",
               "burst", "5kb", "latency", "50ms")
        else:
            self.prepare(tact_mode=False)
        self.info["qdisc"] = sh("tc", "-n", fg, "qdisc", "show", "dev", self.link).strip()
        if self.shaper == "tact-htb":
            self.info["classes"] = sh("tc", "-n", fg, "class", "show", "dev", self.link).strip()
        sink_proc = self.procs.spawn(["ip", "netns", "exec", sink, self.loadgen, "sink", str(PORT)])
        self.info["sink_pid"] = sink_proc.pid
        self.resource = f"net:{self.link}"
        self.target = f"10.201.1.2:{PORT}"
        log(f"{self.name} rig ({self.shaper}, {self.proto}): namespaces "
            + ", ".join(f"{ns} ({k})" for k, ns in self.ns.items())
            + f"; {self.info['qdisc']} on {self.link}")

    def root_qdisc(self):
        return sh("tc", "-n", self.ns["fg"], "qdisc", "show", "dev", self.link, "root").strip()

    def prepare(self, tact_mode):
        """Before every point (tact-htb only): tact's points get the link with its kernel default
        qdisc, to build tact's tree on; the others the plain htb. A root qdisc that is neither
        (a tree tact left behind) stops the run rather than measure over it."""
        if self.shaper != "tact-htb" or (self.plain_htb_up and not tact_mode):
            return
        fg, dev = self.ns["fg"], self.link
        if self.plain_htb_up:
            sh("tc", "-n", fg, "qdisc", "del", "dev", dev, "root")
            self.plain_htb_up = False
        root = self.root_qdisc()
        if " 0: root" not in root:
            raise RuntimeError(f"{dev}: root qdisc {root!r}, expected the kernel's default (tact's tree left?)")
        if tact_mode:
            return
        rate = f"{self.rate}mbit"
        sh("tc", "-n", fg, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
        for parent, classid, prio in (("1:", "1:1", []), ("1:1", "1:10", ["prio", "0"])):
            sh("tc", "-n", fg, "class", "add", "dev", dev, "parent", parent, "classid", classid, "htb",
               "rate", rate, "ceil", rate, *prio, "quantum", str(HTB_QUANTUM))
        self.plain_htb_up = True

    def check_tact_start(self, start):
        """tact-htb: tact's `start` log object must show its tree at the rig's rate, the job's
        packets marked, and the job's class as its own traffic; anything less is not the rig
        asked for, so the run stops."""
        if self.shaper != "tact-htb":
            return
        gate = next((g for g in (start or {}).get("gates", []) if g.get("resource") == self.resource), {})
        kernel = gate.get("kernel") or {}
        if (kernel.get("htb_rate_bits") != self.rate * 1_000_000 or not kernel.get("marking")
                or gate.get("own_traffic") != "htb_class"):
            raise RuntimeError(f"tact did not set up its htb tree and marking on {self.link}: {gate or start}")

    def fg(self, intensity, start_ns, seconds, out):
        return ["ip", "netns", "exec", self.ns["fg"], self.loadgen, "fg", self.kind, self.target, "-i", str(intensity),
                "-s", str(start_ns), "-d", str(seconds), "-o", out, "-b", str(self.size)]

    def bg(self, start_ns, seconds, out):
        # Unmodified in both rigs: tact marks its packets (the module's docstring).
        return [self.loadgen, "bg", self.kind, self.target, "-s", str(start_ns), "-d", str(seconds), "-o", out,
                "-b", str(self.size)]

    def place_bg(self, cmd):
        return ["ip", "netns", "exec", self.ns.get("bg", self.ns["fg"])] + cmd

    def place_controller(self, cmd):
        if self.shaper == "tact-htb":
            # `ip netns exec` mounts a fresh /sys, which hides the host's cgroup2 hierarchy.
            cmd = ["sh", "-c", 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"', "sh"] + cmd
        return ["ip", "netns", "exec", self.ns["fg"]] + cmd

    def place_job(self, cmd):
        # tact-htb: the job stays in tact's namespace, where tact marks its sockets.
        return cmd if self.shaper == "tact-htb" else self.place_bg(cmd)
