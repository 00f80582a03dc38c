//! `tact daemon` enforcing its tickets model with cgroups (root, a cpu controller; skipped
//! otherwise): attached clients in their own leaves with cpu.shares ∝ their rights, following
//! activity; detach and daemon exit moving them back and removing the tree, nothing stopped.
//! And the initial model of `--tickets-setup`: applied, refused with status 2, or set aside for a
//! persisted state.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use common::{tickets_daemon, tickets_ok, wait_for};
use nix::sys::signal::Signal;
use serde_json::Value;
use tact_linux::actuate::cgroup_knobs::{Controller, Hierarchies};
use tact_linux::ProcReader;

const PATIENCE: Duration = Duration::from_secs(30);

/// Why the daemon cannot make cgroups here, if it cannot.
fn cannot_make_cgroups() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    match Hierarchies::detect().map(|h| h.get(Controller::Cpu).is_ok()) {
        Ok(true) => None,
        Ok(false) => Some("no cpu cgroup controller".into()),
        Err(e) => Some(format!("cannot read the cgroup mounts: {e}")),
    }
}

/// Why the daemon cannot enforce in its own cgroup here, if it cannot. The daemon, the test's
/// child, makes its tree in its own cgroup: on cgroup v2 the kernel gives the children of a
/// cgroup that holds processes no controllers unless it is the root, so there the test must run
/// in the root cgroup (a VM: tools/v2vm), not in a session scope.
fn cannot_enforce() -> Option<String> {
    use tact_linux::actuate::cgroup_cpu::{CgroupVersion, CpuHierarchy};
    if let Some(why) = cannot_make_cgroups() {
        return Some(why);
    }
    let hier = CpuHierarchy::detect().ok()?;
    let own = hier.own_cgroup().ok()?;
    (hier.version == CgroupVersion::V2 && own != hier.cpu.dir).then(|| {
        format!(
            "on cgroup v2 the daemon's tree in its own cgroup needs the root cgroup (the kernel \
             refuses controllers below another cgroup that holds a process); the test runs in {}",
            own.display()
        )
    })
}

/// A daemon with its socket, state and stderr in one temporary directory; killed when dropped.
struct Daemon {
    child: Child,
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start(extra: &[&str]) -> Daemon {
        Daemon::start_in(tempfile::tempdir().unwrap(), extra)
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Daemon {
        let child = daemon(dir.path(), extra).spawn().unwrap();
        let mut d = Daemon { child, dir };
        let (socket, stderr) = (d.dir.path().join("s"), d.dir.path().join("stderr"));
        common::wait_until_listening(&mut d.child, &socket, PATIENCE, || {
            fs::read_to_string(&stderr).unwrap_or_default()
        });
        d
    }

    fn ok(&self, args: &[&str]) -> String {
        tickets_ok(&self.dir.path().join("s"), args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        serde_json::from_str(&self.ok(&args)).unwrap()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// SIGTERM, then waits for the exit; its status.
    fn terminate(&mut self) -> i32 {
        common::kill(self.child.id() as i32, Signal::SIGTERM);
        let mut status = None;
        wait_for(PATIENCE, "the daemon to exit", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap().code().unwrap_or(-1)
    }
}

impl Daemon {
    /// Kills the daemon, keeping its directory.
    fn stop(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon(dir: &Path, extra: &[&str]) -> Command {
    let mut c = tickets_daemon(dir, extra);
    c.stderr(fs::File::create(dir.join("stderr")).unwrap());
    c
}

/// Processes that spin until their stop file exists, then sleep (same pid); killed when dropped.
struct Spinners {
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Spinners {
    fn new(n: usize) -> Spinners {
        let dir = tempfile::tempdir().unwrap();
        let children = (0..n)
            .map(|i| {
                let stop = dir.path().join(format!("stop{i}"));
                let script = format!(
                    "while [ ! -e {} ]; do :; done; exec sleep 600",
                    stop.display()
                );
                Command::new("sh").arg("-c").arg(script).spawn().unwrap()
            })
            .collect();
        Spinners { children, dir }
    }

    fn pid(&self, i: usize) -> u32 {
        self.children[i].id()
    }

    fn sleep(&self, i: usize) {
        fs::write(self.dir.path().join(format!("stop{i}")), "").unwrap();
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The directories a tree called `name` would have in each hierarchy this process is in (the
/// daemon, its child, makes its tree in its own cgroups); those left are removed when dropped.
struct TreeDirs(Vec<PathBuf>);

impl TreeDirs {
    /// New empty cgroups `name` at the root of each hierarchy of the daemon's tree (one on v2),
    /// the cpu one first.
    fn made_at_the_roots(name: &str) -> TreeDirs {
        let h = Hierarchies::detect().unwrap();
        let mounts = Controller::ALL.into_iter().filter_map(|c| h.get(c).ok());
        let mut dirs = Vec::new();
        for mount in mounts.map(|m| &m.mount).chain(h.cpuacct.as_ref()) {
            let dir = mount.dir.join(name);
            if !dirs.contains(&dir) {
                fs::create_dir(&dir).unwrap();
                dirs.push(dir);
            }
        }
        TreeDirs(dirs)
    }

    fn of(name: &str) -> TreeDirs {
        let text = fs::read_to_string("/proc/self/cgroup").unwrap();
        let mut dirs = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            let (Some(controllers), Some(path)) = (controllers, path) else {
                continue;
            };
            for c in controllers.split(',') {
                let mount = Path::new("/sys/fs/cgroup").join(c.trim_start_matches("name="));
                let dir = mount.join(path.trim_start_matches('/')).join(name);
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        TreeDirs(dirs)
    }

    fn existing(&self) -> Vec<&PathBuf> {
        self.0.iter().filter(|d| d.is_dir()).collect()
    }
}

impl Drop for TreeDirs {
    fn drop(&mut self) {
        for top in &self.0 {
            if let Ok(entries) = fs::read_dir(top) {
                for e in entries.filter_map(Result::ok).filter(|e| e.path().is_dir()) {
                    let _ = fs::remove_dir(e.path());
                }
            }
            let _ = fs::remove_dir(top);
        }
    }
}

/// Client `pid` of a `show --json` reply.
fn client(show: &Value, pid: u32) -> &Value {
    show["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .unwrap_or_else(|| panic!("no client {pid} in {show}"))
}

/// The cpu knob of client `pid`: its file and the weight written, if any.
fn cpu_knob(show: &Value, pid: u32) -> Option<(PathBuf, u64)> {
    let k = &client(show, pid)["knobs"]["cpu"];
    Some((PathBuf::from(k["file"].as_str()?), k["value"].as_u64()?))
}

fn competing(show: &Value, pid: u32) -> bool {
    client(show, pid)["rights"]["cpu"]["competing"] == true
}

fn read_u64(file: &Path) -> u64 {
    fs::read_to_string(file).unwrap().trim().parse().unwrap()
}

/// Whether `pid`'s cgroups (`/proc/PID/cgroup`) include one under `name`.
fn in_tree(pid: u32, name: &str) -> bool {
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .any(|l| l.contains(&format!("/{name}/")))
}

#[test]
fn clients_get_cgroups_weighted_by_their_rights_until_detached_or_the_daemon_exits() {
    if let Some(why) = cannot_enforce() {
        eprintln!("skipped: {why}");
        return;
    }
    let name = format!("tact-test-d1-{}", std::process::id());
    let dirs = TreeDirs::of(&name);
    let mut d = Daemon::start(&["--tickets-cgroup", &name]);
    d.ok(&["create", "A"]);
    d.ok(&["fund", "A", "--from", "base", "--cpu", "1000"]);
    let spin = Spinners::new(2);
    let (p1, p2) = (spin.pid(0), spin.pid(1));
    assert!(
        dirs.existing().is_empty(),
        "no tree before the first client"
    );
    d.ok(&["attach", &p1.to_string(), "--from", "A", "--cpu", "100"]);
    d.ok(&["attach", &p2.to_string(), "--from", "A", "--cpu", "300"]);

    // Both spin: R = 250 and 750 of A's 1000, so cpu.shares 1:3.
    let mut show = Value::Null;
    wait_for(PATIENCE, "both clients competing, 1:3", || {
        show = d.json(&["show"]);
        let knobs = (cpu_knob(&show, p1), cpu_knob(&show, p2));
        competing(&show, p1)
            && competing(&show, p2)
            && matches!(knobs, (Some((_, a)), Some((_, b))) if a * 3 <= b + 3 && b <= a * 3 + 3)
    });
    assert_eq!(show["enforced"], true, "{show}");
    let (f1, w1) = cpu_knob(&show, p1).unwrap();
    let (f2, w2) = cpu_knob(&show, p2).unwrap();
    let ratio = w1 as f64 / w2 as f64;
    assert!((ratio - 1.0 / 3.0).abs() < 0.01 / 3.0, "{w1}:{w2}");
    for (file, pid, w) in [(&f1, p1, w1), (&f2, p2, w2)] {
        assert!(
            file.ends_with("cpu.shares") || file.ends_with("cpu.weight"),
            "{file:?}"
        );
        assert!(file.to_string_lossy().contains(&name), "{file:?}");
        assert_eq!(read_u64(file), w, "{file:?} holds what show reports");
        let procs = fs::read_to_string(file.parent().unwrap().join("cgroup.procs")).unwrap();
        assert!(
            procs.lines().any(|l| l == pid.to_string()),
            "{pid} in {procs}"
        );
        assert!(in_tree(pid, &name));
    }

    // p2 sleeps: its R goes to 0, and p1, A's only competitor, gets all of A's value.
    spin.sleep(1);
    wait_for(
        PATIENCE,
        "p2 to stop competing and p1's weight to grow",
        || {
            show = d.json(&["show"]);
            !competing(&show, p2) && cpu_knob(&show, p1).is_some_and(|(_, w)| w > w1)
        },
    );
    let grown = cpu_knob(&show, p1).unwrap().1;
    assert_eq!(read_u64(&f1), grown);
    let explain = d.json(&["explain", &p2.to_string()]);
    let cpu = &explain["resources"][0];
    assert_eq!(cpu["resource"], "cpu", "{explain}");
    assert_eq!(cpu["competing"], false, "{explain}");
    assert_eq!(cpu["rights"], 0.0, "{explain}");
    assert!(cpu["knob"]["value"].as_u64().is_some(), "{explain}");
    assert_eq!(explain["enforced"], true);
    let text = d.ok(&["explain", &p1.to_string()]);
    assert!(text.contains("enforced as "), "{text}");

    // Detached: back where it came from, its leaf gone.
    d.ok(&["detach", &p1.to_string()]);
    assert!(!in_tree(p1, &name), "detach moves the process back at once");
    assert!(!f1.parent().unwrap().exists(), "{f1:?}'s cgroup is removed");

    // The daemon's exit moves p2 back and removes the tree; nothing is stopped.
    assert_eq!(d.terminate(), 0, "{}", d.stderr());
    assert!(!in_tree(p2, &name));
    assert!(dirs.existing().is_empty(), "left: {:?}", dirs.existing());
    let reader = ProcReader::new();
    for pid in [p1, p2] {
        let stat = reader.stat(pid as i32).unwrap();
        assert!(
            !stat.is_dead() && !stat.is_stopped(),
            "{pid}: {}",
            stat.state
        );
    }
}

/// `--cgroup-parent DIR`: the tree is made in DIR (on v1 in each controller's tree), which stays
/// when the tree goes; a DIR that is not a cgroup, or on v1 one missing from a controller's tree,
/// stops the daemon at the start with status 2 and the reason.
#[test]
fn a_cgroup_parent_holds_the_tree_and_a_parent_it_cannot_use_stops_the_daemon() {
    if let Some(why) = cannot_make_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let refused = |parent: &Path| -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut child = daemon(dir.path(), &["--cgroup-parent", parent.to_str().unwrap()])
            .spawn()
            .unwrap();
        let mut status = None;
        wait_for(PATIENCE, "the daemon to refuse its parent", || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        let stderr = fs::read_to_string(dir.path().join("stderr")).unwrap();
        assert_eq!(status.unwrap().code(), Some(2), "{stderr}");
        assert!(!dir.path().join("s").exists(), "no socket bound: {stderr}");
        stderr
    };
    let not_a_cgroup = tempfile::tempdir().unwrap();
    let err = refused(not_a_cgroup.path());
    assert!(err.contains("not a cgroup directory"), "{err}");

    let (pname, tname) = (
        format!("tact-test-dp-{}", std::process::id()),
        format!("tact-test-d2-{}", std::process::id()),
    );
    let parents = TreeDirs::made_at_the_roots(&pname);
    let cpu_parent = parents.0[0].clone();
    if parents.0.len() > 1 {
        // v1: in the cpu hierarchy only, for a moment.
        let others = &parents.0[1..];
        for d in others {
            fs::remove_dir(d).unwrap();
        }
        let err = refused(&cpu_parent);
        assert!(err.contains("make it there too"), "{err}");
        for d in others {
            fs::create_dir(d).unwrap();
        }
    }
    // v2, run from a cgroup other than the root (the daemon's own then holds processes): no
    // parent given, the daemon serves the model unapplied and says what to do.
    if cannot_enforce().is_some() {
        let hier = tact_linux::actuate::cgroup_cpu::CpuHierarchy::detect().unwrap();
        let d = Daemon::start(&["--tickets-cgroup", &tname]);
        wait_for(PATIENCE, "the daemon to say it does not enforce", || {
            d.stderr().contains("served but not enforced")
        });
        let err = d.stderr();
        assert!(err.contains("--cgroup-parent"), "{err}");
        let own = hier.own_cgroup().unwrap();
        assert!(err.contains(&own.display().to_string()), "{err}");
    }
    let tree = TreeDirs(parents.0.iter().map(|p| p.join(&tname)).collect());
    let spin = Spinners::new(1);
    let pid = spin.pid(0);
    let mut d = Daemon::start(&[
        "--tickets-cgroup",
        &tname,
        "--cgroup-parent",
        cpu_parent.to_str().unwrap(),
    ]);
    // Said at the start (the socket is bound first).
    let named = format!("/{pname}/{tname} (made at the first attach)");
    wait_for(PATIENCE, "the daemon to say where its tree goes", || {
        d.stderr().contains(&named)
    });
    d.ok(&["create", "A"]);
    d.ok(&["fund", "A", "--from", "base", "--cpu", "1000"]);
    d.ok(&["attach", &pid.to_string(), "--from", "A", "--cpu", "100"]);
    let mut show = Value::Null;
    wait_for(PATIENCE, "the client's cpu knob", || {
        show = d.json(&["show"]);
        cpu_knob(&show, pid).is_some()
    });
    let (file, _) = cpu_knob(&show, pid).unwrap();
    assert!(file.starts_with(cpu_parent.join(&tname)), "{file:?}");
    assert!(in_tree(pid, &format!("{pname}/{tname}")));
    assert_eq!(d.terminate(), 0, "{}", d.stderr());
    assert!(!in_tree(pid, &pname), "moved back at the exit");
    let left = tree.existing();
    assert!(left.is_empty(), "left: {left:?}\n{}", d.stderr());
    assert_eq!(
        parents.existing().len(),
        parents.0.len(),
        "the parent stays"
    );
}

#[test]
fn the_initial_setup_is_applied_refused_or_set_aside_for_a_saved_state() {
    let dir = tempfile::tempdir().unwrap();
    let setup = dir.path().join("setup.toml");
    fs::write(
        &setup,
        "[[currency]]\nname = \"A\"\nfunding = [{ from = \"base\", cpu = 600 }]\n\
         [[currency]]\nname = \"B\"\nfunding = [{ from = \"A\", cpu = 10, hard = true }]\n",
    )
    .unwrap();
    let setup_arg = setup.to_str().unwrap();
    let d = Daemon::start(&["--no-tickets-enforce", "--tickets-setup", setup_arg]);
    let show = d.json(&["show"]);
    let names = currency_names(&show);
    assert!(
        names.contains(&"A".into()) && names.contains(&"B".into()),
        "{names:?}"
    );
    assert_eq!(show["enforced"], false);
    assert!(
        show["enforcement"]
            .as_str()
            .unwrap()
            .contains("not enforced"),
        "{show}"
    );
    let text = d.ok(&["show", "B"]);
    assert!(text.contains("not enforced"), "{text}");
    assert!(text.contains("10h cpu A"), "B holds A's hard 10: {text}");
    // A change saves the state, which wins over the setup from then on.
    d.ok(&["create", "C"]);
    let state = d.stop();
    let other = state.path().join("other.toml");
    fs::write(
        &other,
        "[[currency]]\nname = \"Z\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
    )
    .unwrap();
    let d = Daemon::start_in(
        state,
        &[
            "--no-tickets-enforce",
            "--tickets-setup",
            other.to_str().unwrap(),
        ],
    );
    let show = d.json(&["show"]);
    let names = currency_names(&show);
    assert!(
        names.contains(&"C".into()) && !names.contains(&"Z".into()),
        "{names:?}"
    );
    assert!(
        d.stderr().contains("persisted state wins"),
        "{}",
        d.stderr()
    );

    // A bad setup stops the daemon before it binds its socket, naming the file and table.
    for (text, names) in [
        (
            "[[job]]\nname = \"J\"\ncommand = \"true\"\nfunding = [{ from = \"base\", cpu = 1 }]\n",
            "[[job]] \"J\"",
        ),
        (
            "[[currency]]\nname = \"A\"\nfunding = [{ from = \"base\", cpu = 0 }]\n",
            "funding[0].cpu = 0",
        ),
    ] {
        let bad = tempfile::tempdir().unwrap();
        let file = bad.path().join("bad.toml");
        fs::write(&file, text).unwrap();
        let out = daemon(bad.path(), &["--tickets-setup", file.to_str().unwrap()])
            .output()
            .unwrap();
        let err = fs::read_to_string(bad.path().join("stderr")).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("bad.toml") && err.contains(names), "{err}");
        assert!(!bad.path().join("s").exists(), "no socket was bound");
    }
}

/// The names of the currencies in a `show --json` reply.
fn currency_names(show: &Value) -> Vec<String> {
    (show["currencies"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// v1 memory protection is `memory.soft_limit_in_bytes`, which is not a floor: the daemon says so
/// once, when it first writes a client's memory rights there. (The first write for a new client
/// carries no protection, its rights still 0; the caveat was marked told by that write and never
/// said.)
#[test]
fn a_v1_daemon_says_once_that_the_soft_limit_is_not_a_floor() {
    if let Some(why) = cannot_make_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let h = Hierarchies::detect().unwrap();
    match h.get(Controller::Memory) {
        Ok(m) if m.version == tact_linux::actuate::cgroup_cpu::CgroupVersion::V1 => {}
        _ => {
            eprintln!("skipped: no cgroup v1 memory controller");
            return;
        }
    }
    let (pname, tname) = (
        format!("tact-test-dmp-{}", std::process::id()),
        format!("tact-test-dm-{}", std::process::id()),
    );
    // Under new cgroups of our own: the test's memory cgroup is not ours to write in.
    let parents = TreeDirs::made_at_the_roots(&pname);
    let _tree = TreeDirs(parents.0.iter().map(|p| p.join(&tname)).collect());
    let spin = Spinners::new(1);
    let pid = spin.pid(0);
    let mut d = Daemon::start(&[
        "--tickets-cgroup",
        &tname,
        "--cgroup-parent",
        parents.0[0].to_str().unwrap(),
    ]);
    d.ok(&["create", "A"]);
    d.ok(&["fund", "A", "--from", "base", "--cpu", "1000"]);
    d.ok(&["fund", "A", "--from", "base", "--mem", "64MiB"]);
    d.ok(&[
        "attach",
        &pid.to_string(),
        "--from",
        "A",
        "--cpu",
        "100",
        "--mem",
        "16MiB",
    ]);
    let mut show = Value::Null;
    wait_for(PATIENCE, "the client's memory protection written", || {
        show = d.json(&["show"]);
        let k = &client(&show, pid)["knobs"]["mem"];
        k["value"].as_u64().is_some_and(|v| v > 0)
    });
    let file = client(&show, pid)["knobs"]["mem"]["file"].clone();
    assert!(
        file.as_str()
            .unwrap()
            .ends_with("memory.soft_limit_in_bytes"),
        "{file}"
    );
    assert_eq!(d.terminate(), 0, "{}", d.stderr());
    let err = d.stderr();
    assert_eq!(
        err.matches("memory.soft_limit_in_bytes is not a floor")
            .count(),
        1,
        "{err}"
    );
}
