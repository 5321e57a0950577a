#!/usr/bin/env bash
# mk/tansu.sh: start one Tansu broker on loopback, probe it with `fencecheck probe`, and run a
# scenario on it through --cluster external with broker commands that kill and restart it.
# Called by `make tansu-check` with TANSU (the broker binary), FENCECHECK (the fencecheck
# binary) and OUT (where the files go). Fails unless the probe says what Tansu cannot do
# (exit 1) and the run's verdict is error: a verdict about fencing on a broker that cannot fence
# would be wrong either way.
set -euo pipefail
: "${TANSU:?}" "${FENCECHECK:?}" "${OUT:?}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/fencecheck-tansu-XXXXXX")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# The broker commands: start (restart) in its own session so a command's process group ending
# does not take it along; kill by the pid file.
# The sqlite URL's path is relative (Tansu drops a leading slash): start in the folder.
cat >"$dir/start.sh" <<SH
#!/usr/bin/env bash
cd "$dir" || exit 1
setsid "$TANSU" broker --storage-engine=sqlite://tansu.db \\
  --kafka-listener-url=tcp://127.0.0.1:$port --kafka-advertised-listener-url=tcp://127.0.0.1:$port \\
  >>"$dir/tansu.log" 2>&1 </dev/null &
echo \$! >"$dir/pid"
SH
chmod +x "$dir/start.sh"
cat >"$OUT/broker-commands.yaml" <<YAML
# Tansu on 127.0.0.1:$port, started by mk/tansu.sh
kill: kill -9 \$(cat $dir/pid)
restart: $dir/start.sh
YAML

stop() {
	if [ -f "$dir/pid" ]; then kill -9 "$(cat "$dir/pid")" 2>/dev/null || true; fi
	cp "$dir/tansu.log" "$OUT/tansu.log" 2>/dev/null || true
	rm -rf "$dir"
}
trap stop EXIT

"$dir/start.sh"
up=0
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
	sleep 0.1
done
if [ "$up" != 1 ]; then
	echo "tansu-check: Tansu did not listen on 127.0.0.1:$port within 10 s; its log:" >&2
	cat "$dir/tansu.log" >&2
	exit 1
fi
echo "tansu $("$TANSU" --version 2>/dev/null || echo '?') on 127.0.0.1:$port (log: $OUT/tansu.log)"

echo "== fencecheck probe --bootstrap 127.0.0.1:$port"
set +e
"$FENCECHECK" probe --bootstrap "127.0.0.1:$port" | tee "$OUT/probe.txt"
probe=${PIPESTATUS[0]}
echo "== fencecheck run kill-coordinator --cluster external (exit code of probe: $probe)"
timeout 300 "$FENCECHECK" run kill-coordinator --cluster external --bootstrap "127.0.0.1:$port" \
	--broker-commands "$OUT/broker-commands.yaml" --duration 10s --seed 1 --out "$OUT/runs" | tee "$OUT/run.txt"
run=${PIPESTATUS[0]}
set -e
echo "probe exit $probe (1: the broker cannot do everything), run exit $run (255: verdict error)"
if [ "$probe" != 1 ] || [ "$run" != 255 ]; then
	echo "tansu-check: want probe exit 1 and run exit 255 on a broker without EndTxn" >&2
	exit 1
fi
