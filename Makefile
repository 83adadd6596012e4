# Two set-up commands on a fresh machine: `make demo` and `make test`.
# Each creates its own virtual environment in .venv on first use.
# `make check` is the loop to run before every commit: lint, types and the unit tier, which
# needs nothing external. `make test` is everything CI holds a submission to (tests/README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# The whole suite runs on PYTEST_WORKERS processes (pytest-xdist), a test file per worker so
# a file's module fixtures (servers, images) are built once; CI prints the slowest 25 tests.
PYTEST_WORKERS ?= 2
SUITE := -n $(PYTEST_WORKERS) --dist loadfile --durations=25

.PHONY: demo check test lint typecheck unit suite bench clean bwrap chromium docs

$(BIN)/docdelta: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The local sandbox is bubblewrap: installed from Debian's package when missing (as root).
bwrap:
	bash scripts/provision-bwrap.sh >/dev/null

# The HTML report's browser test drives Debian's chromium (installed when missing, as root).
chromium:
	bash scripts/provision-chromium.sh >/dev/null

demo: $(BIN)/docdelta bwrap
	$(BIN)/docdelta demo --workdir docdelta-demo

lint: $(BIN)/docdelta
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(BIN)/docdelta
	$(BIN)/mypy

# The unit tier: nothing external (no sandbox, no Docker, no network beyond loopback).
unit: $(BIN)/docdelta
	$(BIN)/pytest -q tests/unit

check: lint typecheck unit

# Every tier (CI: .ci/run provisions what each needs and turns any skip into a failure).
suite: $(BIN)/docdelta bwrap chromium
	$(BIN)/pytest -q $(SUITE)

# Everything CI holds a submission to: lint, strict types, the whole test suite.
test: lint typecheck suite

bench: $(BIN)/docdelta
	$(BIN)/python bench/bench_cell.py

clean:
	rm -rf $(VENV) docdelta-demo .mypy_cache .ruff_cache .pytest_cache

# The generated parts of docs/ (Action inputs, CLI reference, config fields, price table).
docs: $(BIN)/docdelta
	$(BIN)/python scripts/gen_docs.py
