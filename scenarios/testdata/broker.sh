#!/bin/sh
# broker.sh ACTION ID: the broker commands of a local cluster posing as an external one
# (TestScenariosExternalCommands). It signals the JVM of broker ID, found by its pid file
# $FENCECHECK_PIDS/ID; a restart asks the test, which owns the JVMs, at $FENCECHECK_CONTROL.
set -eu
action=$1 id=$2
pid=$(cat "$FENCECHECK_PIDS/$id")
case $action in
kill) kill -KILL "$pid" ;;
pause) kill -STOP "$pid" ;;
resume) kill -CONT "$pid" ;;
restart) curl -fsS -X POST "$FENCECHECK_CONTROL/restart/$id" ;;
*) echo "unknown action $action" >&2; exit 2 ;;
esac
echo "$action b$id (pid $pid) done"
