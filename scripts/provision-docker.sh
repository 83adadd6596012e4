#!/usr/bin/env bash
# Provision what the Docker tests need, unattended and idempotently:
#   1. a Docker engine that answers `docker info` (installs Debian's docker.io and starts
#      dockerd in the background when none answers);
#   2. the docdelta base image, built from debootstrap + `docker import` because no container
#      registry is reachable here. It is tagged by a hash of its recipe, so it is built once per
#      machine, and aliased as docdelta-base:latest, the default image of the Docker tests;
#   3. Debian's docker-registry (the CNCF distribution registry), which the tests of published
#      images run on 127.0.0.1 in place of ghcr.io (tests/registry.py).
# Prints the base image tag on its last line. Fast (< 1 s) when everything is already there.
set -euo pipefail

SUITE=bookworm
INCLUDE=python3,git,ca-certificates
AGENT_UID=1000
# Everything that changes the image's content goes into the recipe, hence into the tag.
RECIPE="v1 suite=$SUITE variant=minbase include=$INCLUDE user=agent:$AGENT_UID workspace=/workspace"
TAG="docdelta-base:$(printf '%s' "$RECIPE" | sha256sum | cut -c1-16)"
ALIAS=docdelta-base:latest
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/docdelta-dockerd.log}

log() { printf 'provision-docker: %s\n' "$*" >&2; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "$1 needs root; run this script as root (or with sudo)"
    exit 1
  fi
}

ensure_engine() {
  if docker info >/dev/null 2>&1; then
    return
  fi
  need_root "starting a Docker engine"
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    log "starting dockerd (log: $DOCKERD_LOG)"
    # setsid: the engine must outlive this script and the shell that ran it.
    setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 120); do
    if docker info >/dev/null 2>&1; then
      return
    fi
    sleep 0.5
  done
  log "dockerd did not answer within 60 s; last lines of $DOCKERD_LOG:"
  tail -n 20 "$DOCKERD_LOG" >&2 || true
  exit 1
}

# The Debian mirror apt is configured with (deb822 .sources or one-line .list), so the build
# uses the same reachable host as apt instead of a hardcoded one.
debian_mirror() {
  local files=() f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v suite="$SUITE" '
    /^deb[ \t]/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i+1) == suite) { print $i; exit } break } }
    /^URIs:/ { uris = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite && uris != "") { print uris; exit } }
    /^$/ { uris = "" }
  ' "${files[@]}"
}

build_base_image() {
  need_root "building the base image"
  command -v debootstrap >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  local mirror rootfs
  mirror=$(debian_mirror)
  if [ -z "$mirror" ]; then
    log "no apt source for '$SUITE' found in /etc/apt/sources.list*; add one or set a mirror there"
    exit 1
  fi
  rootfs=$(mktemp -d /var/tmp/docdelta-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  log "building $TAG from $mirror (about a minute)"
  debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" "$mirror" >/dev/null
  # The unprivileged user agents run as, and the workspace they own.
  echo "agent:x:$AGENT_UID:$AGENT_UID:docdelta agent:/home/agent:/bin/sh" >>"$rootfs/etc/passwd"
  echo "agent:x:$AGENT_UID:" >>"$rootfs/etc/group"
  echo "agent:*:19000:0:99999:7:::" >>"$rootfs/etc/shadow"
  mkdir -p "$rootfs/home/agent" "$rootfs/workspace"
  chown "$AGENT_UID:$AGENT_UID" "$rootfs/home/agent" "$rootfs/workspace"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change "LABEL org.docdelta.role=base org.docdelta.recipe=\"$RECIPE\"" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$TAG" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
}

ensure_registry() {
  if command -v docker-registry >/dev/null 2>&1; then
    return
  fi
  need_root "installing docker-registry"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
  # The package starts a registry on :5000 where systemd runs; the tests start their own.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
}

ensure_engine
ensure_registry
if ! docker image inspect "$TAG" >/dev/null 2>&1; then
  build_base_image
fi
docker tag "$TAG" "$ALIAS"
echo "$TAG"
