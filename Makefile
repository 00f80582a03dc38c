# tact: build, test, benchmark, demo. `make test` is the project's test command (and what CI runs).
CARGO ?= cargo
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: build test bench bench-quick demo lint clean

build:
	$(CARGO) build --release -p tact
	@echo "built target/release/tact"

test:
	$(CARGO) test --workspace --all-targets

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The polite benchmark needs PostgreSQL, pgbench and zstd (see bench/polite/README.md) and root
# (it drops the page cache between repetitions). About 70 minutes; bench-quick is a 5-minute smoke run.
# The configuration of the table in docs/polite.md: two 30 s pgbench bursts with 30 s gaps against
# tar | zstd -9 -T3 -B1MiB over a 4.4 GB tree, tact at 100 ms testpoints, 5 interleaved reps.
BENCH_POLITE := --testpoint 100ms --reps 5 --tree-mb 4400 --scale 50 --burst-seconds 30 --gap 30 \
	--bursts 2 --bootstrap 20 --zstd-threads 3 --zstd-block 1MiB

bench: build $(PY)
	$(PY) bench/polite/run.py --tact target/release/tact $(BENCH_POLITE) --out bench/out/polite
	$(CARGO) run -q --release -p tact-sim --example polite_claims -- bench/out/polite-sim.json

bench-quick: build $(PY)
	$(PY) bench/polite/run.py --tact target/release/tact --quick --out bench/out/polite-quick

demo: build
	target/release/tact demo

$(PY): bench/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -r bench/requirements.txt
	touch $(PY)

clean:
	$(CARGO) clean
	rm -rf $(VENV) bench/out
