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
# The engine is this checkout's alone: its socket, data and state live in $FENCECHECK_DOCKER_DIR
# (default /tmp/fencecheck-docker-<12 hex digits of the SHA-256 of the checkout's path>, so two
# checkouts on one machine run two engines and never stop each other's; cluster/containers
# derives the same default), it never touches a system Docker, and it creates no bridge
# network (--bridge=none, no iptables): containers run with host networking on loopback, so no
# traffic goes to private-range addresses. Needs root (dockerd does).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd -P)"
DIR="${FENCECHECK_DOCKER_DIR:-/tmp/fencecheck-docker-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)}"
SOCK="$DIR/docker.sock"
HOST="unix://$SOCK"
START_TIMEOUT="${FENCECHECK_DOCKER_START_TIMEOUT:-60}"

say() { echo "engine: $*" >&2; }

answers() { docker -H "$HOST" version >/dev/null 2>&1; }

# Processes of this engine: dockerd and containerd name files under $DIR/ in their arguments,
# and the container shims are started with -address under $DIR/. (The slash keeps one
# checkout's folder from matching another engine's whose name it prefixes.)
engine_pids() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    case "$cmd" in
      *dockerd*"$DIR/"* | *containerd*"$DIR/"*) echo "${p#/proc/}" ;;
    esac
  done
}

mounts_under() { awk -v d="$DIR" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r; }

# Network interfaces, from /sys (no tool needed). `start` records them in $LINKS_BEFORE (beside
# $DIR, which `stop` deletes); `check-clean` reports any that appeared since.
LINKS_BEFORE="$DIR.interfaces"
interfaces() { ls /sys/class/net | sort; }

install() {
  command -v dockerd >/dev/null && command -v docker >/dev/null && return
  if [ "$(id -u)" != 0 ]; then
    say "dockerd is not installed and this is not root: install Debian's docker.io, or run as root"
    exit 1
  fi
  say "installing docker.io (apt-get)"
  apt-get update -qq
  # policy-rc.d exiting 101: the package must not start the system's own dockerd. An existing
  # one is put back afterwards, also when the install fails.
  local rc=/usr/sbin/policy-rc.d
  [ ! -e "$rc" ] || mv "$rc" "$rc.fencecheck-saved"
  trap 'rm -f "'"$rc"'"; [ ! -e "'"$rc"'.fencecheck-saved" ] || mv "'"$rc"'.fencecheck-saved" "'"$rc"'"' EXIT
  printf '#!/bin/sh\nexit 101\n' >"$rc"
  chmod +x "$rc"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
}

# close_fds closes every file descriptor above stderr in this shell (`start` runs in a subshell
# for it, see the end of this file).
close_fds() {
  local fd self=$BASHPID
  for fd in $(ls "/proc/$self/fd"); do
    # 255: bash's own copy of this script, closed on exec anyway.
    [ "$fd" -le 2 ] || [ "$fd" = 255 ] || eval "exec $fd>&-" 2>/dev/null || true
  done
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
  interfaces >"$LINKS_BEFORE"
  say "starting dockerd at $HOST (log $DIR/dockerd.log)"
  # setsid: the daemon must outlive make's shell, and a Ctrl-C in the terminal must not reach it
  # before `stop` has removed the containers. close_fds: nor may it keep the caller's open files
  # (a lock held by `flock LOCK make test`, make's jobserver pipe) for as long as it runs.
  close_fds
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
    ids=$(docker -H "$HOST" ps -aq) || true
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
    deadline=$((SECONDS + 10))
    while [ -n "$(engine_pids)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    [ -z "$(engine_pids)" ] || say "could not stop pids $(engine_pids | xargs); check-clean will name them"
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
  if [ -f "$LINKS_BEFORE" ]; then
    x=$(interfaces | comm -13 "$LINKS_BEFORE" -)
  else # no record of before: any interface a Docker engine makes
    x=$(interfaces | grep -E '^(docker|br-|veth)' || true)
  fi
  [ -z "$x" ] || { say "network interfaces that appeared with the engine: $(echo $x)"; bad=1; }
  [ $bad = 1 ] || rm -f "$LINKS_BEFORE"
  [ $bad = 0 ] && say "clean: no daemon, container, mount, interface or folder of $DIR"
  return $bad
}

case "${1:-}" in
  start) (start) ;;
  stop) stop ;;
  check-clean) check_clean ;;
  host) echo "$HOST" ;;
  *)
    echo "usage: $0 start|stop|check-clean|host" >&2
    exit 2
    ;;
esac
