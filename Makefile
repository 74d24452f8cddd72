# rainier-queue developer commands. `make test` is exactly what CI runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: help install demo check lint typecheck pytest test counts clean bench fuzz

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python  ## create .venv and install the package with its test and lint tools
	$(BIN)/pip install --quiet -e '.[dev]'

demo: install  ## run the quickstart: a burst of jobs through a worker on SQLite, no server needed
	$(BIN)/python examples/quickstart/run.py

lint:  ## ruff: formatting and lint
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck:  ## mypy --strict over the package and the tests
	$(BIN)/mypy

pytest:  ## the test suite
	$(BIN)/pytest

check: lint typecheck pytest  ## everything CI checks, on an installed .venv

test: install check  ## set up and run every check, as CI does

counts:  ## contract and fault tests each driver runs, and what it skips, with the reasons
	$(BIN)/python -m tests.contract.counts

clean:  ## remove caches and the venv
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

BENCH_ARGS ?=
bench: install  ## the comparison with peers: throughput, latency, memory (<15 min; BENCH_ARGS=...)
	scripts/services.sh postgres mariadb redis
	RQBENCH_COMMAND="make bench$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')" \
		$(BIN)/python -m bench.compare.run $(BENCH_ARGS)

fuzz: install  ## the read-path fuzz tests, long profile (RAINIER_QUEUE_FUZZ=long)
	RAINIER_QUEUE_FUZZ=long $(BIN)/pytest tests/foreign/test_fuzz.py
