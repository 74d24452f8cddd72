# rainier-queue developer commands. `make test` is exactly what CI runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: help install browser demo check lint typecheck pytest test counts clean bench bench-quick fuzz venv-python

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# A .venv left by another Python (an older one, or not the PYTHON asked for)
# fails in confusing ways later; say so before using it.
venv-python: $(BIN)/python
	@have=$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	ok=$$($(BIN)/python -c 'import sys; print(int(sys.version_info >= (3, 11)))'); \
	if [ "$$ok" != 1 ]; then \
		echo "error: $(VENV) runs Python $$have, and rainier-queue needs 3.11 or newer;" \
		     "run 'make clean', then this again (PYTHON=python3.11 to pick one)"; exit 1; fi; \
	if [ "$(origin PYTHON)" = "command line" ]; then \
		want=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
		if [ "$$have" != "$$want" ]; then \
			echo "error: $(VENV) runs Python $$have, not the $$want of PYTHON=$(PYTHON);" \
			     "run 'make clean', then this again"; exit 1; fi; fi

# pip runs again only when pyproject.toml changed since the last install.
$(VENV)/.installed-base: pyproject.toml | venv-python
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | venv-python
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@ $(VENV)/.installed-base

install: venv-python $(VENV)/.installed-dev  ## create .venv and install the package with its test and lint tools
	@test -x $(CHROMIUM) || echo "note: no $(CHROMIUM): the dashboard's browser tests (tests/web) skip; 'make browser' installs it"

# The dashboard's tests (tests/web) drive Debian's Chromium through Playwright, which
# cannot download a browser of its own here: the system package is the browser.
CHROMIUM ?= /usr/bin/chromium
browser:  ## install Debian's chromium for the dashboard's browser tests (as root; .ci/run does it)
	@if [ -x $(CHROMIUM) ]; then echo "$(CHROMIUM) is installed"; else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

demo: venv-python $(VENV)/.installed-base  ## run the quickstart: a burst of jobs through a worker on SQLite, no server needed
	$(BIN)/python examples/quickstart/run.py

lint:  ## ruff (formatting and lint) and lint-imports (the layers in pyproject.toml)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck:  ## mypy --strict over the package and the tests
	$(BIN)/mypy

pytest:  ## the test suite (its 2-minute scheduler acceptance test runs beside the rest)
	BIN=$(BIN) scripts/pytest.sh

check: lint typecheck pytest  ## everything CI checks, on an installed .venv

test: install check  ## set up and run every check, as CI does

counts: install  ## contract and fault tests each driver runs, and what it skips, with the reasons
	$(BIN)/python -m tests.contract.counts

clean:  ## remove caches, the venv, the demo's database and built packages
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis dist
	rm -f examples/quickstart/demo.db examples/quickstart/demo.db-wal examples/quickstart/demo.db-shm

BENCH_ARGS ?=
bench: install  ## the comparison with peers and the grid of settings (about 20 min on 2 cores; BENCH_ARGS=...)
	scripts/services.sh postgres mariadb redis nats rabbitmq
	RQBENCH_COMMAND="make bench$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')" \
		$(BIN)/python -m bench.compare.run $(BENCH_ARGS)

bench-quick: install  ## the comparison, every workload but memory, small and once (a few minutes)
	scripts/services.sh postgres mariadb redis nats rabbitmq
	RQBENCH_COMMAND="make bench-quick" $(BIN)/python -m bench.compare.run --quick $(BENCH_ARGS)

fuzz: install  ## the read-path fuzz tests, long profile (RAINIER_QUEUE_FUZZ=long)
	RAINIER_QUEUE_FUZZ=long $(BIN)/pytest tests/foreign/test_fuzz.py
