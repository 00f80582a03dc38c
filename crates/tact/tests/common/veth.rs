//! Two network namespaces joined by a veth pair, with a sink program in the far one: the rig of
//! the tests of `tact run --idle net` with the job in tact's own namespace.

use std::process::{Child, Command, Stdio};

use super::ip;

/// tact and the job run in `near` (`SUBNET.1` on `near_if`); `far` (`SUBNET.2`) runs a sink.
/// Deleted, sink first, on drop.
pub struct Link {
    pub near: String,
    pub near_if: String,
    pub far: String,
    sink: Child,
}

impl Link {
    /// `what` names the test file's namespaces (`tact-test-WHAT-...`; its first letter goes in
    /// the interfaces' names), `tag` (one letter) tells apart the links of tests that run at
    /// once, `subnet` is a /24's first three octets, and `sink` the far end's python program.
    pub fn new(what: &str, tag: char, subnet: &str, sink: &str) -> Link {
        let id = std::process::id();
        let near = format!("tact-test-{what}-n{tag}-{id}");
        let far = format!("tact-test-{what}-f{tag}-{id}");
        let w = &what[..1];
        let (near_if, far_if) = (format!("t{w}n{tag}{id}"), format!("t{w}f{tag}{id}"));
        ip(&["netns", "add", &near]);
        ip(&["netns", "add", &far]);
        ip(&[
            "-n", &near, "link", "add", &near_if, "type", "veth", "peer", "name", &far_if, "netns",
            &far,
        ]);
        ip(&[
            "-n",
            &near,
            "addr",
            "add",
            &format!("{subnet}.1/24"),
            "dev",
            &near_if,
        ]);
        ip(&[
            "-n",
            &far,
            "addr",
            "add",
            &format!("{subnet}.2/24"),
            "dev",
            &far_if,
        ]);
        for (ns, dev) in [(&near, &near_if), (&far, &far_if)] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        // `ip netns exec` execs python in place: the child's pid is the sink's.
        let sink = Command::new("ip")
            .args(["netns", "exec", &far, "python3", "-c", sink])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Link {
            near,
            near_if,
            far,
            sink,
        }
    }

    /// A command run in the near namespace.
    pub fn near(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.near]);
        c
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.sink.kill();
        let _ = self.sink.wait();
        for ns in [&self.near, &self.far] {
            Command::new("ip").args(["netns", "del", ns]).output().ok();
        }
    }
}
