#!/usr/bin/env bash
# docker/with-engine.sh CMD [ARG...]: run CMD with the project's Docker engine up (docker/engine.sh)
# and DOCKER_HOST pointing at it; afterwards stop the engine and check that nothing of it is
# left, also when CMD fails or this script gets SIGINT or SIGTERM (then CMD's whole process group
# is stopped first). KEEP_ENGINE=1 leaves the engine running.
#
# Exit status: CMD's; 1 when CMD passed but the engine did not go cleanly; 130 / 143 after
# SIGINT / SIGTERM.
set -uo pipefail

ENGINE="$(dirname "$0")/engine.sh"
child=""

finish() {
  local st=$1
  trap - INT TERM
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    # CMD runs in its own session (setsid below): stop all of it, test binaries included.
    kill -TERM -- "-$child" 2>/dev/null
    local deadline=$((SECONDS + 30))
    while kill -0 "$child" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL -- "-$child" 2>/dev/null
  fi
  if [ "${KEEP_ENGINE:-0}" != 1 ]; then
    if ! { "$ENGINE" stop && "$ENGINE" check-clean; }; then
      [ "$st" != 0 ] || st=1
    fi
  fi
  exit "$st"
}
trap 'finish 130' INT
trap 'finish 143' TERM

"$ENGINE" start || finish 1
DOCKER_HOST="$("$ENGINE" host)"
export DOCKER_HOST

# A session of its own, so a signal here can stop every process CMD started; in a script
# (no job control) the background child is not a group leader, so setsid keeps its pid.
setsid "$@" &
child=$!
wait "$child"
finish $?
