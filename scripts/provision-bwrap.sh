#!/usr/bin/env bash
# Provision the local sandbox, unattended and idempotently: bubblewrap (`bwrap`) installed
# from Debian's package when missing, then proven able to build a sandbox here (user
# namespaces allowed). Fast (< 1 s) when it is already there.
set -euo pipefail

log() { printf 'provision-bwrap: %s\n' "$*" >&2; }

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "bubblewrap is missing and installing it needs root: run 'sudo apt-get install bubblewrap'"
    exit 1
  fi
  log "installing bubblewrap"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
if ! bwrap --unshare-all --unshare-user --die-with-parent --ro-bind /usr /usr \
  --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 -- /usr/bin/true; then
  log "bwrap is installed but cannot build a sandbox: allow unprivileged user namespaces"
  log "(sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap)"
  exit 1
fi
bwrap --version
