"""dask_drive.py: its record's figures on hand-made inputs, and a short run against a stand-in for
tune-service (its protocol in Python) that counts the requests it serves at once."""

import json
import socketserver
import threading
import time

import pytest

pytest.importorskip("distributed")

import dask_drive  # noqa: E402

SERVICE_S = 0.005  # the stand-in's time per request (a sleep)
CPU_NS_PER_REQUEST = 1_000_000  # the CPU time it reports per request served


class StandIn(socketserver.ThreadingTCPServer):
    """tune-service's protocol: `R` -> `K` after SERVICE_S, `S` -> `CPU_NS REQUESTS MODE`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.running = self.peak = self.served = 0

    @property
    def addr(self):
        host, port = self.server_address
        return f"{host}:{port}"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        srv = self.server
        for line in self.rfile:
            if line.strip() == b"R":
                with srv.lock:
                    srv.running += 1
                    srv.peak = max(srv.peak, srv.running)
                time.sleep(SERVICE_S)
                with srv.lock:
                    srv.running -= 1
                    srv.served += 1
                self.wfile.write(b"K\n")
            else:
                with srv.lock:
                    n = srv.served
                self.wfile.write(f"{n * CPU_NS_PER_REQUEST} {n} cpu\n".encode())


@pytest.fixture
def service():
    srv = StandIn()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_static_run_keeps_its_count_in_flight_and_records_it(service, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert dask_drive.main(["--policy", "static:3", "--addr", service.addr, "--warmup", "0.5",
                            "--seconds", "2", "--front-ms", "0.5", "--max", "8", "--sample-ms", "100",
                            "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    # Three in flight, never more: the submitter's bound reaches the service.
    assert service.peak == 3
    w = rec["window"]
    assert rec["errors"] == 0
    assert w["count"] == dict(mean=3.0, median=3, min=3, max=3, stdev=0.0)
    assert w["completions"] > 0 and w["throughput"] == pytest.approx(w["completions"] / 2.0)
    # The stand-in reports 1 ms of CPU per request: its utilization is the throughput's ms.
    assert w["service_util"] == pytest.approx(w["throughput"] * 1e-3, rel=0.25)
    assert w["latency"]["p50_ms"] >= SERVICE_S * 1e3
    assert rec["steady"] is None and rec["trace"] == []
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "started" and lines[1].startswith("target ") and lines[1].endswith(" 3")


def test_tcc_starts_at_its_init_and_stays_within_max(service, tmp_path):
    out = tmp_path / "run.json"
    assert dask_drive.main(["--policy", "tcc", "--init", "2", "--addr", service.addr, "--warmup", "0",
                            "--seconds", "2", "--front-ms", "0.2", "--max", "6", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["targets"][0] == [0.0, 2]
    assert all(1 <= n <= 6 for _, n in rec["targets"])
    assert service.peak <= 6


def test_the_hint_row_reads_its_source_and_a_bad_one_is_refused(service, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert dask_drive.main(["--policy", "tcc:util=0.9", "--bottleneck", "cpu:0", "--addr", service.addr,
                            "--warmup", "0", "--seconds", "1", "--front-ms", "0.2", "--max", "4",
                            "--json", str(out)]) == 0
    assert json.loads(out.read_text())["bottleneck"] == "cpu:0"
    with pytest.raises(SystemExit) as e:
        dask_drive.main(["--policy", "tcc:util=0.9", "--bottleneck", "nosuch:1", "--addr", service.addr,
                         "--seconds", "1"])
    assert "nosuch" in str(e.value.code)
    with pytest.raises(SystemExit) as e:
        dask_drive.main(["--policy", "tcc:q=0.01", "--addr", service.addr, "--seconds", "1"])
    assert "Theorem 1" in str(e.value.code)


def test_figures_over_intervals():
    # Two pieces of one second: the target 2 for 0.5 s and 4 for 1.5 s.
    targets = [(0.0, 2), (1.5, 4)]
    samples = [dict(at=float(t), service_cpu=0.5 * t, driver_cpu=0.1 * t) for t in range(4)]
    completions = [(0.5, 0.01), (1.2, 0.02), (2.5, 0.03), (3.5, 0.04)]
    p = dask_drive.period([(1.0, 2.0), (2.5, 3.0)], completions, samples, targets)
    assert p["seconds"] == 1.5 and p["completions"] == 2 and p["throughput"] == pytest.approx(2 / 1.5)
    assert p["service_util"] == pytest.approx(0.5) and p["driver_util"] == pytest.approx(0.1)
    assert p["count"]["mean"] == pytest.approx((2 * 0.5 + 4 * 1.0) / 1.5)
    assert (p["count"]["min"], p["count"]["median"], p["count"]["max"]) == (2, 4, 4)
    assert p["latency"]["p99_ms"] == pytest.approx(30.0)
    # Outside the samples there is no utilization.
    assert dask_drive.period([(3.0, 5.0)], completions, samples, targets)["service_util"] is None


def test_steady_intervals_are_clipped_to_the_window():
    trace = [dict(at=1.0, **{"from": "base", "to": "steady"}),
             dict(at=4.0, **{"from": "steady", "to": "base"}),
             dict(at=6.0, **{"from": "max", "to": "steady"})]
    assert dask_drive.steady_intervals(trace, 2.0, 8.0) == [(2.0, 4.0), (6.0, 8.0)]
    assert dask_drive.steady_intervals(trace, 4.0, 6.0) == []


def test_specs_become_the_submitters_parameters():
    assert dask_drive.params_of("static:4", 2) == ("static:4", {})
    assert dask_drive.params_of("tcc", 2) == ("tcc", {"n_init": 2})
    assert dask_drive.params_of("tcc:q=0.2,fast=false,w=3", 2) == (
        "tcc", {"n_init": 2, "q": 0.2, "fast": False, "w": 3})


@pytest.mark.parametrize("bad", [["--seconds", "0"], ["--max", "0"], ["--front-ms", "-1"]])
def test_bad_arguments_are_refused(bad, capsys):
    with pytest.raises(SystemExit) as e:
        dask_drive.main(["--policy", "tcc", "--addr", "127.0.0.1:1"] + bad)
    assert e.value.code == 2
    assert "must be" in capsys.readouterr().err
