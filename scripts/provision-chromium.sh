#!/usr/bin/env bash
# Provision the headless browser the HTML-report test drives (tests/integration/test_html_browser.py):
# Chromium from Debian's package when missing, unattended and idempotently; Playwright (the dev
# extra) drives it through its executable path, so no browser is downloaded. Fast when present.
set -euo pipefail

log() { printf 'provision-chromium: %s\n' "$*" >&2; }

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "chromium is missing and installing it needs root: run 'sudo apt-get install chromium'"
    exit 1
  fi
  log "installing chromium"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
chromium --headless --no-sandbox --disable-gpu --dump-dom about:blank >/dev/null 2>&1 || {
  log "chromium is installed but cannot start headless"
  exit 1
}
chromium --version 2>/dev/null
