//! The tickets model in `tact daemon`, through the `tact tickets` client commands: the E1 funding
//! round trip, access control by peer credentials, refused bad input leaving the model unchanged,
//! persistence across a restart, and a corrupt state file refused at start.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{tickets_at, tickets_daemon, tickets_ok, wait_for, AS_NOBODY};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(20);

/// A daemon on a socket and a tickets state in one temporary directory; killed when dropped.
struct Daemon {
    child: Child,
    dir: Option<tempfile::TempDir>,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        // Other users (the `nobody` peer) must reach the socket of root's daemon.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Daemon::start_in(dir)
    }

    fn start_in(dir: tempfile::TempDir) -> Daemon {
        let child = daemon_command(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Daemon {
            child,
            dir: Some(dir),
        };
        let socket = d.socket();
        common::wait_until_listening(&mut d.child, &socket, PATIENCE, String::new);
        d
    }

    fn socket(&self) -> PathBuf {
        self.dir.as_ref().expect("until stopped").path().join("s")
    }

    /// Runs `tact tickets ARGS --socket S` (as `as_user`, a command prefix, if given).
    fn tickets_as(&self, as_user: &[&str], args: &[&str]) -> (i32, String, String) {
        tickets_at(&self.socket(), as_user, args)
    }

    fn tickets(&self, args: &[&str]) -> (i32, String, String) {
        self.tickets_as(&[], args)
    }

    /// Runs a command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        tickets_ok(&self.socket(), args)
    }

    fn show(&self) -> Value {
        serde_json::from_str(&self.ok(&["show", "--json"])).unwrap()
    }

    /// Stops the daemon, keeping its directory.
    fn stop(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.dir.take().expect("stopped once")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon_command(dir: &Path) -> Command {
    // These tests are about the model; daemon_tickets_enforce.rs tests its cgroups.
    let mut c = tickets_daemon(dir, &["--no-tickets-enforce"]);
    c.stderr(Stdio::piped());
    c
}

/// Processes to attach (sleeping, unless made otherwise); killed when dropped.
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn new(n: usize) -> Sleepers {
        Sleepers(
            (0..n)
                .map(|_| Command::new("sleep").arg("600").spawn().unwrap())
                .collect(),
        )
    }

    fn pid(&self, i: usize) -> String {
        self.0[i].id().to_string()
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// E1's funding (spec §5): base→A = base→B = 1000; A→A1 100, A→A2 200; B→B1 100, B→B2 200,
/// B→B3 300, the jobs being five sleeping processes.
fn e1(d: &Daemon) -> Sleepers {
    let jobs = Sleepers::new(5);
    for c in ["A", "B"] {
        d.ok(&["create", c]);
        let ticket = d.ok(&["fund", c, "--from", "base", "--cpu", "1000"]);
        assert!(ticket.trim().starts_with('t'), "{ticket}");
    }
    for (i, (from, cpu)) in [
        ("A", "100"),
        ("A", "200"),
        ("B", "100"),
        ("B", "200"),
        ("B", "300"),
    ]
    .into_iter()
    .enumerate()
    {
        let out = d.ok(&["attach", &jobs.pid(i), "--from", from, "--cpu", cpu]);
        assert!(
            out.starts_with(&format!("pid:{} funded by t", jobs.pid(i))),
            "{out}"
        );
    }
    jobs
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn e1_funding_explained_through_the_daemon() {
    let d = Daemon::start();
    let jobs = e1(&d);
    // R* and the guaranteed share of each job: A's half split 1:2, B's half 1:2:3.
    let expected = [
        (1000.0 / 3.0, 1.0 / 6.0),
        (2000.0 / 3.0, 1.0 / 3.0),
        (1000.0 / 6.0, 1.0 / 12.0),
        (1000.0 / 3.0, 1.0 / 6.0),
        (500.0, 1.0 / 4.0),
    ];
    for (i, (guaranteed, share)) in expected.into_iter().enumerate() {
        let e: Value = serde_json::from_str(&d.ok(&["explain", &jobs.pid(i), "--json"])).unwrap();
        let resources = e["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 1, "only cpu is funded: {e}");
        let cpu = &resources[0];
        assert_eq!(cpu["resource"], "cpu");
        assert!(
            close(cpu["guaranteed"].as_f64().unwrap(), guaranteed),
            "{cpu}"
        );
        assert!(
            close(cpu["guaranteed_share"].as_f64().unwrap(), share),
            "{cpu}"
        );
        let hops = cpu["paths"][0]["hops"].as_array().unwrap();
        let chain: Vec<&str> = hops.iter().map(|h| h["issuer"].as_str().unwrap()).collect();
        let currency = if i < 2 { "A" } else { "B" };
        assert_eq!(chain[..2], ["base", currency], "{cpu}");
        // A sleeping process does not compete: no rights now, whatever it is guaranteed.
        assert_eq!(cpu["competing"], false);
        assert_eq!(cpu["rights"].as_f64().unwrap(), 0.0);
    }
    let text = d.ok(&["explain", &jobs.pid(4)]);
    assert!(text.contains("R* = 500.000"), "{text}");
    assert!(text.contains("guaranteed share 25.00%"), "{text}");
    let show = d.show();
    let b = show["currencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "B")
        .unwrap();
    assert_eq!(b["issued"].as_array().unwrap().len(), 3, "{b}");
    assert_eq!(show["clients"].as_array().unwrap().len(), 5);
    // Detached, a process is no client; an exited one is dropped on the next request.
    d.ok(&["detach", &jobs.pid(0)]);
    drop(jobs);
    let show = d.show();
    assert_eq!(show["clients"].as_array().unwrap().len(), 0, "{show}");
}

#[test]
fn refusals_name_what_is_wrong_and_change_nothing() {
    let d = Daemon::start();
    let _jobs = e1(&d);
    let before = d.show();

    // A cycle: B funded from A while A... is funded from B.
    d.ok(&["fund", "A", "--from", "B", "--cpu", "10"]);
    let with_edge = d.show();
    let (code, _, err) = d.tickets(&["fund", "B", "--from", "A", "--cpu", "10"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("would close a cycle"), "{err}");
    assert!(err.contains("funding B from A"), "names, not ids: {err}");
    assert_eq!(d.show(), with_edge);
    let ticket = with_edge["currencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "A")
        .unwrap()["held"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["issuer"] == "B")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    d.ok(&["unfund", &format!("t{ticket}")]);
    assert_eq!(d.show(), before);

    // A negative amount never reaches the model; malformed input exits 2.
    let (code, _, err) = d.tickets(&["fund", "A", "--from", "base", "--cpu", "-5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("amount: must be an integer from 1"), "{err}");
    // An unknown currency.
    let (code, _, err) = d.tickets(&["fund", "A", "--from", "nosuch", "--cpu", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("issuer: unknown currency \"nosuch\""), "{err}");
    // An exchange the offerer cannot cover: more than its R*.
    let (code, _, err) = d.tickets(&[
        "offer",
        &_jobs.pid(0),
        "--give",
        "cpu:400",
        "--want",
        "disk:1",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("above its guaranteed rights"), "{err}");
    assert_eq!(d.show(), before);

    // Another user, through the socket's peer credentials.
    let setpriv = Path::new("/usr/bin/setpriv");
    if !nix::unistd::geteuid().is_root() || !setpriv.exists() {
        eprintln!("skipping the non-root peer: needs root and setpriv to run a client as nobody");
        return;
    }
    let (code, _, err) = d.tickets_as(&AS_NOBODY, &["fund", "A", "--from", "base", "--cpu", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("permission denied") && err.contains("needs f (fund) on currency A"),
        "{err}"
    );
    let (code, _, err) = d.tickets_as(&AS_NOBODY, &["destroy", "B"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("needs c (change) on currency B"), "{err}");
    let (code, _, err) = d.tickets_as(&AS_NOBODY, &["create", "Q", "--owner", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("permission denied"), "{err}");
    let (code, _, err) = d.tickets_as(&AS_NOBODY, &["detach", &_jobs.pid(0)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("needs root"), "{err}");
    // Reading is anyone's.
    let (code, out, err) = d.tickets_as(&AS_NOBODY, &["show", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), before);
    assert_eq!(d.show(), before);
}

#[test]
fn the_model_survives_a_restart() {
    let d = Daemon::start();
    let jobs = e1(&d);
    d.ok(&["fund", "A", "--from", "base", "--disk", "300", "--hard"]);
    let queued = d.ok(&[
        "offer",
        &jobs.pid(1),
        "--give",
        "cpu:10",
        "--want",
        "disk:20",
    ]);
    assert!(queued.starts_with("queued as o0"), "{queued}");
    let before = d.show();
    let offers = d.ok(&["offers", "--json"]);
    let dir = d.stop();
    let d = Daemon::start_in(dir);
    assert_eq!(d.show(), before);
    assert_eq!(d.ok(&["offers", "--json"]), offers);
    // And it goes on from there: ids are not reused.
    let t = d.ok(&["fund", "B", "--from", "base", "--disk", "5"]);
    let max_before = before["currencies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["held"].as_array().unwrap())
        .map(|t| t["id"].as_u64().unwrap())
        .max()
        .unwrap();
    let new: u64 = t.trim().trim_start_matches('t').parse().unwrap();
    assert!(new > max_before, "{new} after {max_before}");
}

/// `explain` shows what a client actually got next to its rights: its part of the CPU time all
/// clients used lately. A spinner gets all of it, a sleeper none.
#[test]
fn explain_measures_what_clients_used() {
    let d = Daemon::start();
    // Killed when dropped, like the sleepers.
    let spinner = Sleepers(vec![Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap()]);
    let sleeper = Sleepers::new(1);
    let spin = spinner.pid(0);
    d.ok(&["attach", &spin]);
    d.ok(&["attach", &sleeper.pid(0)]);
    let cpu = |pid: &str| -> Value {
        let e: Value = serde_json::from_str(&d.ok(&["explain", pid, "--json"])).unwrap();
        e["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "cpu")
            .unwrap()
            .clone()
    };
    let measured = |pid: &str| -> Option<f64> {
        cpu(pid)
            .get("measured")
            .map(|m| m["share"].as_f64().unwrap())
    };
    // Each request is a look at the clients; shares need two looks with CPU used in between.
    let mut shares = (None, None);
    wait_for(PATIENCE, "a measured share", || {
        std::thread::sleep(Duration::from_millis(300));
        shares = (measured(&spin), measured(&sleeper.pid(0)));
        shares.0.is_some()
    });
    let (spun, slept) = (shares.0.unwrap(), shares.1.unwrap_or(0.0));
    assert!(spun > 0.9 && slept < 0.1, "spinner {spun}, sleeper {slept}");
    // The same look at the threads tells activity: a spinner's (runnable or running) competes,
    // a sleeper's does not.
    assert_eq!(cpu(&spin)["competing"], true);
    assert_eq!(cpu(&sleeper.pid(0))["competing"], false);
    let text = d.ok(&["explain", &spin]);
    assert!(text.contains("measured: "), "{text}");
}

/// `accept` takes the other side of a queued offer; `issue` and `revoke` are `fund` and `unfund`.
#[test]
fn accept_takes_a_queued_offer_and_issue_revoke_are_fund_unfund() {
    let d = Daemon::start();
    let jobs = e1(&d);
    let ticket = d.ok(&["issue", "B", "--from", "base", "--disk", "1000"]);
    let taker = Sleepers::new(1);
    d.ok(&[
        "attach",
        &taker.pid(0),
        "--from",
        "B",
        "--cpu",
        "100",
        "--disk",
        "100",
    ]);
    let queued = d.ok(&[
        "offer",
        &jobs.pid(1),
        "--give",
        "cpu:10",
        "--want",
        "disk:20",
    ]);
    assert!(queued.starts_with("queued as o0"), "{queued}");

    let (code, _, err) = d.tickets(&["accept", "o7", "--pid", &taker.pid(0)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no queued offer o7"), "{err}");

    let out = d.ok(&["accept", "o0", "--pid", &taker.pid(0)]);
    assert!(out.starts_with("accepted o0:"), "{out}");
    assert!(out.contains("is in force"), "{out}");
    let offers: Value = serde_json::from_str(&d.ok(&["offers", "--json"])).unwrap();
    assert_eq!(offers["offers"].as_array().unwrap().len(), 0, "{offers}");
    let exchanges = offers["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 1, "{offers}");
    // `a` gave `give` to `b`: the taker gave the disk the offer wanted.
    assert_eq!(exchanges[0]["a"], format!("pid:{}", taker.pid(0)));
    assert_eq!(exchanges[0]["b"], format!("pid:{}", jobs.pid(1)));
    assert_eq!(exchanges[0]["give"]["resource"], "disk", "{offers}");

    // The disk ticket goes with `revoke`, and B's tickets issued to the taker lose their value.
    d.ok(&["revoke", ticket.trim()]);
    let show = d.show();
    let b = show["currencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "B")
        .unwrap()
        .clone();
    assert!(
        b["held"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| format!("t{}", t["id"]) != ticket.trim()),
        "{b}"
    );
}

#[test]
fn a_corrupt_state_file_stops_the_daemon_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("tickets.json");
    std::fs::write(&state, "{\"format\": 1, \"system\": [").unwrap();
    let out = daemon_command(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("the tickets state {} is corrupt", state.display())),
        "{err}"
    );
    assert!(
        !dir.path().join("s").exists(),
        "it must not take the socket"
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "{\"format\": 1, \"system\": [",
        "and must leave the file alone"
    );
}
