# Two set-up commands on a fresh machine: `make demo` and `make test`.
# Each creates its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck unit docker-tests bench clean bwrap chromium docs

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

unit: $(BIN)/docdelta bwrap chromium
	$(BIN)/pytest -q

# Everything CI holds a submission to: lint, strict types, the whole test suite.
test: lint typecheck unit

bench: $(BIN)/docdelta
	$(BIN)/python bench/bench_cell.py

clean:
	rm -rf $(VENV) docdelta-demo .mypy_cache .ruff_cache .pytest_cache

# The generated parts of docs/ (Action inputs, CLI reference, config fields, price table).
docs: $(BIN)/docdelta
	$(BIN)/python scripts/gen_docs.py
