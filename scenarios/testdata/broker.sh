#!/bin/sh
# broker.sh ACTION ID: the broker commands of a local cluster posing as an external one
# (TestScenariosExternalCommands). It signals the JVM of broker ID, found by its pid file
# $FENCECHECK_PIDS/ID; a restart asks the test, which owns the JVMs, at $FENCECHECK_CONTROL.
# isolate and unisolate take down (bring up) every proxy that carries broker ID's
# inter-broker and controller traffic, on the local cluster's own toxiproxy API at
# $FENCECHECK_TOXIPROXY: proxies named bX-bY-repl and bX-bY-ctrl carry bX's connections to bY.
set -eu
action=$1 id=$2
pid=$(cat "$FENCECHECK_PIDS/$id")
peers() {
	enabled=$1 n=0
	names=$(curl -fsS --noproxy '*' "$FENCECHECK_TOXIPROXY/proxies" | grep -o '"b[0-9]*-b[0-9]*-[a-z]*":' | tr -d '":')
	for name in $names; do
		case $name in
		"b$id"-* | *-"b$id"-*) ;;
		*) continue ;;
		esac
		curl -fsS --noproxy '*' -X POST -d "{\"enabled\": $enabled}" "$FENCECHECK_TOXIPROXY/proxies/$name" >/dev/null
		n=$((n + 1))
	done
	if [ "$n" -eq 0 ]; then
		echo "no peer proxies of b$id at $FENCECHECK_TOXIPROXY" >&2
		exit 1
	fi
	echo "$n peer proxies of b$id enabled=$enabled"
}
case $action in
kill) kill -KILL "$pid" ;;
pause) kill -STOP "$pid" ;;
resume) kill -CONT "$pid" ;;
restart) curl -fsS -X POST "$FENCECHECK_CONTROL/restart/$id" ;;
isolate) peers false ;;
unisolate) peers true ;;
*) echo "unknown action $action" >&2; exit 2 ;;
esac
echo "$action b$id (pid $pid) done"
