#!/usr/bin/env bash
# docker/engine.sh: a private Docker engine for fencecheck's `containers` backend.
#
#   docker/engine.sh start        install docker.io if missing, start dockerd, wait until it answers
#   docker/engine.sh stop         remove every container, stop dockerd and containerd, unmount and
#                                 delete the engine's folder
#   docker/engine.sh check-clean  fail (exit 1, naming each) if a container, daemon, shim, mount,
#                                 network interface or folder of the engine is left
#   docker/engine.sh host         print the DOCKER_HOST value of the engine
#
# The engine is this project's alone: its socket, data and state live in $FENCECHECK_DOCKER_DIR
# (default /tmp/fencecheck-docker), it never touches a system Docker, and it creates no bridge
# network (--bridge=none, no iptables): containers run with host networking on loopback, so no
# traffic goes to private-range addresses. Needs root (dockerd does).
set -euo pipefail

DIR="${FENCECHECK_DOCKER_DIR:-/tmp/fencecheck-docker}"
SOCK="$DIR/docker.sock"
HOST="unix://$SOCK"
START_TIMEOUT="${FENCECHECK_DOCKER_START_TIMEOUT:-60}"

say() { echo "engine: $*" >&2; }

answers() { docker -H "$HOST" version >/dev/null 2>&1; }

# Processes of this engine: dockerd and containerd name $DIR in their arguments, and the
# container shims are started with -address under $DIR.
engine_pids() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case "$cmd" in
      *dockerd*"$DIR"* | *containerd*"$DIR"*) echo "${p#/proc/}" ;;
    esac
  done
}

mounts_under() { awk -v d="$DIR" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r; }

# Interfaces a Docker engine would create with a bridge network; ours must never have them.
docker_links() { ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -E '^(docker[0-9]*|br-|veth)' || true; }

install() {
  command -v dockerd >/dev/null && command -v docker >/dev/null && return
  if [ "$(id -u)" != 0 ]; then
    say "dockerd is not installed and this is not root: install Debian's docker.io, or run as root"
    exit 1
  fi
  say "installing docker.io (apt-get)"
  apt-get update -qq
  # policy-rc.d 101: the package must not start the system's own dockerd.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  rm -f /usr/sbin/policy-rc.d
}

start() {
  if answers; then
    say "already running at $HOST"
    return
  fi
  install
  if [ "$(id -u)" != 0 ]; then
    say "dockerd needs root"
    exit 1
  fi
  mkdir -p "$DIR"
  say "starting dockerd at $HOST (log $DIR/dockerd.log)"
  # setsid: the daemon must outlive make's shell, and a Ctrl-C in the terminal must not reach it
  # before `stop` has removed the containers.
  setsid dockerd \
    --host "$HOST" \
    --data-root "$DIR/data" \
    --exec-root "$DIR/exec" \
    --pidfile "$DIR/dockerd.pid" \
    --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    --userland-proxy=false \
    </dev/null >"$DIR/dockerd.log" 2>&1 &
  local deadline=$((SECONDS + START_TIMEOUT))
  until answers; do
    if ! kill -0 $! 2>/dev/null; then
      say "dockerd exited while starting; last lines of $DIR/dockerd.log:"
      tail -20 "$DIR/dockerd.log" >&2
      exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      say "dockerd did not answer within ${START_TIMEOUT}s; last lines of $DIR/dockerd.log:"
      tail -20 "$DIR/dockerd.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  say "ready: export DOCKER_HOST=$HOST"
}

stop() {
  if answers; then
    local ids
    ids=$(docker -H "$HOST" ps -aq)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      docker -H "$HOST" rm -f $ids >/dev/null || true
    fi
  fi
  local pids
  pids=$(engine_pids)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while [ -n "$(engine_pids)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    pids=$(engine_pids)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    while [ -n "$(engine_pids)" ]; do sleep 0.1; done
  fi
  local m
  for m in $(mounts_under); do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$DIR"
  say "stopped; $DIR removed"
}

check_clean() {
  local bad=0 x
  x=$(engine_pids)
  if [ -n "$x" ]; then
    for p in $x; do say "left running: pid $p: $({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)"; done
    bad=1
  fi
  x=$(mounts_under)
  [ -z "$x" ] || { say "left mounted: $x"; bad=1; }
  [ ! -e "$DIR" ] || { say "left on disk: $DIR"; bad=1; }
  x=$(docker_links)
  [ -z "$x" ] || { say "network interfaces left: $x"; bad=1; }
  [ $bad = 0 ] && say "clean: no daemon, container, mount, interface or folder of $DIR"
  return $bad
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  check-clean) check_clean ;;
  host) echo "$HOST" ;;
  *)
    echo "usage: $0 start|stop|check-clean|host" >&2
    exit 2
    ;;
esac
