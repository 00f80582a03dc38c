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
# (it drops the page cache between repetitions). About 30 minutes; bench-quick is a 3-minute smoke run.
bench: build $(PY)
	$(PY) bench/polite/run.py --tact target/release/tact --reps 5 --out bench/out/polite
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
