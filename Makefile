# tact: build, test, benchmark, demo. `make test` is the project's test command (and what CI runs).
CARGO ?= cargo
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: build test check-v2 python bench bench-polite bench-quick bench-library bench-share bench-tune bench-idle bench-tickets demo lint clean

build:
	$(CARGO) build --release -p tact
	@echo "built target/release/tact"

test: python
	$(CARGO) test --workspace --all-targets
	$(PY) -m pytest -q python/tests bench/tune

# tact's cgroup v2 paths on a real kernel (tools/v2vm/README.md): boots Debian's 6.1 kernel under
# qemu (TCG) with cgroup2 as the only hierarchy and runs tools/v2vm/tests/all.sh (share, idle,
# tickets, delegated and populated cgroups, polite, tune --psi-cgroup, disk tickets) against
# target/release/tact. Needs tools/v2vm/setup.sh run once as root; about 3.5 minutes on 2 cores.
# Not part of `make test`.
check-v2: build
	tools/v2vm/run.sh all

# The Python package `tact` (python/): maturin builds crates/tact-py into .venv, in place.
python: $(PY)
	$(PY) -m pip install -q -r python/requirements-dev.txt
	cd python && VIRTUAL_ENV=$(abspath $(VENV)) $(abspath $(VENV))/bin/maturin develop --release

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# `make bench` runs every benchmark below, one after another: about 5.5 hours.
#
# bench-polite needs PostgreSQL, pgbench and zstd (see bench/polite/README.md) and root (it drops
# the page cache between repetitions). About 70 minutes; bench-quick is a 5-minute smoke run.
# The configuration of the table in docs/polite.md: two 30 s pgbench bursts with 30 s gaps against
# tar | zstd -9 -T3 -B1MiB over a 4.4 GB tree, tact at 100 ms testpoints, 5 interleaved reps.
BENCH_POLITE := --testpoint 100ms --reps 5 --tree-mb 4400 --scale 50 --burst-seconds 30 --gap 30 \
	--bursts 2 --bootstrap 20 --zstd-threads 3 --zstd-block 1MiB

bench: build $(PY)
	$(MAKE) bench-polite
	$(CARGO) run -q --release -p tact-sim --example polite_claims -- bench/out/polite-sim.json
	$(MAKE) bench-library
	$(CARGO) run -q --release -p tact-sim --example share_claims -- bench/out/share-sim.json
	$(MAKE) bench-share
	$(CARGO) run -q --release -p tact-sim --example tune_claims -- bench/out/tune-sim.json
	$(MAKE) bench-tune
	$(MAKE) bench-idle
	$(MAKE) bench-tickets

# bench/library (see bench/library/README.md): MS Manners Figure 9 with tact-lib, two regulated
# threads on two emulated disks (loop devices throttled by a cgroup), tact vs unregulated; then the
# cost of a testpoint in Rust, C and Python. Needs root, losetup, and cgroup v1 blkio throttling or
# v2 io.max; about 6 minutes (the first run also writes two 2 GiB images to /var/tmp). Both scripts
# wait while $(BENCH_LOCK) exists and hold it while they run; `make bench-library BENCH_LOCK=`
# skips that (when you hold the lock yourself).
BENCH_LOCK ?= /tmp/tact-bench.lock

bench-library: $(PY)
	$(PY) bench/library/run.py --cargo "$(CARGO)" --lock "$(BENCH_LOCK)" --out bench/out/library
	$(PY) bench/library/cost.py --cargo "$(CARGO)" --lock "$(BENCH_LOCK)" --out bench/out/library

# bench/share (see bench/share/README.md): the ALPS paper's experiments for `tact share` (21 of its 27
# share workloads pinned and 12 unpinned, all 27 with --full; the I/O test, three instances, scalability) side by side with the kernel alone, nice,
# cpulimit and cgroup cpu.shares. Needs root (cgroups) and cpulimit (apt-get install -y cpulimit).
# About 55 minutes on an idle 2-core machine with every mode; `make bench-share BENCH_SHARE=--quick`
# is a 2-minute smoke run,
# BENCH_SHARE=--full the paper's 200-cycle protocol (days). Waits for $(BENCH_LOCK) like bench-library.
BENCH_SHARE ?=

bench-share: build $(PY)
	$(PY) bench/share/run.py --tact target/release/tact --lock "$(BENCH_LOCK)" --out bench/out/share $(BENCH_SHARE)

# bench/tune (see bench/tune/README.md): TCC against every static pool size 1-64 (coarser on the
# other scenarios), TCC in the paper's mode, AIMD, Vegas, Gradient2, Envoy and .NET hill climbing on a service with a
# throughput knee: CPU (spec X1), memory (a memory cgroup under tact-test-*), disk (a blkio IOPS
# cap), network (tbf 50 Mbit/s between namespaces), a competitor that comes and goes (X5) and two
# pools sharing the service (X6); on X1 also tact tune with the driver as its command. Needs root
# and iproute2. About 2 hours (run.py --dry-run);
# `make bench-tune BENCH_TUNE=--quick` is a 9-minute smoke run, BENCH_TUNE='--scenario cpu' one
# scenario. Waits for $(BENCH_LOCK) like bench-library.
BENCH_TUNE ?=

bench-tune: $(PY)
	$(PY) bench/tune/run.py --cargo "$(CARGO)" --lock "$(BENCH_LOCK)" --out bench/out/tune $(BENCH_TUNE)

# bench/idle (see bench/idle/README.md): idletime scheduling (issue 5) on a 20 ms single-server
# disk (a loop device over a FUSE file), a tbf 100 Mbit/s link between network namespaces and one
# shared CPU; intensity x preemption interval for tact run --idle (fixed and auto PI) side by side
# with no control, nice 19, ionice -c3 (BFQ) and SCHED_IDLE. Needs root (FUSE mount, loop device,
# namespaces, tc). About 21 minutes; `make bench-idle BENCH_IDLE=--quick` is a 2.5-minute smoke
# run, BENCH_IDLE=--full the spec's grid (about 22 hours). Waits for $(BENCH_LOCK) like bench-library.
BENCH_IDLE ?=

bench-idle: build $(PY)
	$(PY) bench/idle/run.py --tact target/release/tact --lock "$(BENCH_LOCK)" --out bench/out/idle $(BENCH_IDLE)

# bench/tickets (see bench/tickets/README.md): the tickets spec's experiments (issue 7), each side
# by side with what users do instead, all with `tact tickets run`:
#  e1  hierarchical CPU shares, cgroup and signals backends against a flat cgroup per task, nice
#      levels and no control; five spinners pinned to one CPU, B3 asleep the first half. About 27
#      min (5 reps of 60 s per mode); BENCH_TICKETS=--quick 2 min, --full the spec's 200 s runs (85 min).
#  e3  disk shares, one reader with a 50% hard share against four (bfq on an emulated 2 ms disk),
#      against flat blkio weights, ionice and no control: about 9 min (BENCH_TICKETS_E3=--quick 2).
#  e4  a CPU-for-disk exchange over n = 100..800, against the same rights written by hand: about
#      13 min (BENCH_TICKETS_E4=--quick 3).
#  e5  a memory-for-disk exchange between two SQLite servers in a 16 MiB arena, against one flat
#      memory cgroup: about 12 min (BENCH_TICKETS_E5=--quick 3).
# TICKETS_EXPERIMENTS picks some (default all, about an hour). Needs root (cgroups). Each waits for
# $(BENCH_LOCK) like bench-library.
BENCH_TICKETS ?=
BENCH_TICKETS_E3 ?=
BENCH_TICKETS_E4 ?=
BENCH_TICKETS_E5 ?=
TICKETS_EXPERIMENTS ?= e1 e3 e4 e5
TICKETS_ARGS = --tact target/release/tact --lock "$(BENCH_LOCK)" --out bench/out/tickets

bench-tickets: build $(PY)
	$(if $(filter e1,$(TICKETS_EXPERIMENTS)),$(PY) bench/tickets/run.py $(TICKETS_ARGS) $(BENCH_TICKETS))
	$(if $(filter e3,$(TICKETS_EXPERIMENTS)),$(PY) bench/tickets/e3.py $(TICKETS_ARGS) $(BENCH_TICKETS_E3))
	$(if $(filter e4,$(TICKETS_EXPERIMENTS)),$(PY) bench/tickets/e4.py $(TICKETS_ARGS) $(BENCH_TICKETS_E4))
	$(if $(filter e5,$(TICKETS_EXPERIMENTS)),$(PY) bench/tickets/e5.py $(TICKETS_ARGS) $(BENCH_TICKETS_E5))

bench-polite: build $(PY)
	$(PY) bench/polite/run.py --tact target/release/tact --lock "$(BENCH_LOCK)" $(BENCH_POLITE) \
		--out bench/out/polite

bench-quick: build $(PY)
	$(PY) bench/polite/run.py --tact target/release/tact --lock "$(BENCH_LOCK)" --quick \
		--out bench/out/polite-quick

demo: build
	target/release/tact demo

$(PY): bench/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -r bench/requirements.txt
	touch $(PY)

clean:
	$(CARGO) clean
	rm -rf $(VENV) bench/out
