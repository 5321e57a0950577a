#!/bin/sh
# mk/regressions.sh: measure every regression of docs/regressions.md (make regressions).
#
# Prints one line per run: the regression, the system, the seed, the verdict and the time from
# the run's start to the first violating operation (the checker's first_at_ns), and at the end
# the figures per regression. Runs on Apache Kafka take the machine's heavy-job lock, one run at
# a time, when LOCK names a lock file (flock).
#
# Variables: SEEDS (default 10) seeds of the first-metadata race and tries of isolate-broker's
# seed 224402 (late-produce runs seed 1 once per system); KAFKA=0 skips the runs on
# Apache Kafka; RELEASES the Kafka releases of the per-release regressions (KAFKA-20785,
# -20357, -20090); OUT (default runs/regressions) the run directories; LOCK (default none).
set -u
SEEDS=${SEEDS:-10}
KAFKA=${KAFKA:-1}
OUT=${OUT:-runs/regressions}
LOCK=${LOCK:-}
GO=${GO:-go}
# The releases the per-release regressions run on (each fetched by make kafka KAFKA_VERSION=V).
RELEASES=${RELEASES:-4.1.2 4.3.1 4.3.2 4.4.0}

mkdir -p "$OUT" bin
$GO build -o bin/fencecheck ./cmd/fencecheck || exit 255
# The first-metadata race needs the race detector's slowdown of kgo's metadata goroutine to
# open its window (docs/regressions.md#first-metadata-race).
$GO build -race -o bin/fencecheck-race ./cmd/fencecheck || exit 255

if [ "$KAFKA" = 1 ]; then
	for v in $RELEASES; do
		${MAKE:-make} -s kafka KAFKA_VERSION="$v" || exit 255
	done
fi

locked() {
	if [ -n "$LOCK" ]; then flock "$LOCK" "$@"; else "$@"; fi
}

# run LABEL BINARY ARGS...: one run; prints LABEL, the verdict and the first violation's time.
run() {
	label=$1
	shift
	log="$OUT/$(echo "$label" | tr ' /' '__').log"
	"$@" --out "$OUT" >"$log" 2>&1
	rc=$?
	dir=$(sed -n 's/^verdict .*report: \(.*\)\/report.html$/\1/p' "$log")
	first=""
	if [ -n "$dir" ] && [ -f "$dir/results.json" ]; then
		first=$(grep -o '"first_at_ns": *[0-9]*' "$dir/results.json" | grep -o '[0-9]*$' | sort -n | head -1)
	fi
	verdict=$(sed -n 's/^verdict *\([a-z]*\).*/\1/p' "$log")
	if [ -n "$first" ]; then
		first="first violation at $(awk "BEGIN { printf \"%.2f s\", $first / 1e9 }")"
	fi
	echo "$label exit=$rc ${verdict:-error} $first ${dir:-$log}"
	if [ -n "$dir" ] && [ -f "$dir/logs/harness.log" ]; then
		grep -o 'delivery[0-9]*="[^"]*"' "$dir/logs/harness.log" | sed 's/^/    /'
	fi
}

seeds() { seq 1 "$SEEDS"; }

echo "== first-metadata-race: franz-go v1.22.3, warm-up off (expected invalid), on (expected valid)"
for s in $(seeds); do
	run "first-metadata-race mutant:no-warm-up embedded seed $s" bin/fencecheck-race run regression/first-metadata-race --transport mutant:no-warm-up --seed "$s"
done
for s in 1 2 3; do
	run "first-metadata-race real embedded seed $s" bin/fencecheck-race run regression/first-metadata-race --seed "$s"
done

echo "== late-produce: what the broker answers a Produce delivered after EndTxn"
for tv in 2 1; do
	run "late-produce embedded TV$tv seed 1" bin/fencecheck run regression/late-produce --txn-version "$tv" --seed 1
	if [ "$KAFKA" = 1 ]; then
		run "late-produce kafka-4.1.2 TV$tv seed 1" locked bin/fencecheck run regression/late-produce --cluster local --txn-version "$tv" --seed 1
	fi
done

echo "== late-endtxn: what the broker answers an EndTxn delivered late"
for tv in 1 2; do
	run "late-endtxn embedded TV$tv seed 1" bin/fencecheck run regression/late-endtxn --txn-version "$tv" --seed 1
	if [ "$KAFKA" = 1 ]; then
		run "late-endtxn kafka-4.1.2 TV$tv seed 1" locked bin/fencecheck run regression/late-endtxn --cluster local --txn-version "$tv" --seed 1
	fi
done

echo "== commit-after-timeout-abort (KAFKA-20785): what the broker answers a commit after its timeout abort"
run "commit-after-timeout-abort embedded seed 1" bin/fencecheck run regression/commit-after-timeout-abort --seed 1
if [ "$KAFKA" = 1 ]; then
	for v in $RELEASES; do
		for tv in 2 1; do
			case "$v" in 3.*) [ "$tv" = 2 ] && continue ;; esac
			run "commit-after-timeout-abort kafka-$v TV$tv seed 1" locked bin/fencecheck run regression/commit-after-timeout-abort --cluster local --kafka-version "$v" --txn-version "$tv" --seed 1
		done
	done
fi

echo "== kfake deviations and epoch exhaustion"
$GO test ./cluster/embedded -run 'TestKfakeDeviations|TestEpochExhaustion' -count 1 -v 2>&1 | grep -E 'deviations.go|calls in|^(---|ok|FAIL)'
if [ "$KAFKA" = 1 ]; then
	FENCECHECK_EPOCH_EXHAUSTION=1 locked $GO test ./cluster/local -run 'TestKfakeDeviations|TestEpochExhaustion' -count 1 -v -timeout 30m 2>&1 |
		grep -E 'deviations.go|calls in|kafkafault_test.go|^(---|ok|FAIL)'
	# KAFKA-20357 and KAFKA-20090, per release: each drives an epoch to exhaustion (minutes).
	for v in $RELEASES; do
		case "$v" in 3.*) continue ;; esac
		echo "-- Kafka $v: rotation retry after failover, timeout abort at exhaustion"
		FENCECHECK_KAFKA_HOME="$HOME/.cache/fencecheck/kafka/$v" FENCECHECK_EPOCH_EXHAUSTION=1 locked $GO test ./cluster/local \
			-run 'TestRotationRetryAfterFailover|TestTimeoutAbortAtExhaustion' -count 1 -v -timeout 30m 2>&1 |
			grep -E 'calls in|kafkafault_test.go|^(---|ok|FAIL)'
	done
fi

if [ "$KAFKA" = 1 ]; then
	echo "== deposed-coordinator-describe: isolate-broker seed 224402 on Kafka 4.1.2"
	for i in $(seeds); do
		run "isolate-broker kafka-4.1.2 seed 224402 try $i" locked bin/fencecheck run isolate-broker --cluster local --seed 224402
	done
	echo "== deposed-coordinator-describe on demand: without the confirmation (expected invalid), with it (expected valid)"
	for s in $(seeds); do
		run "deposed-coordinator-describe kafka-4.1.2 mutant:no-confirm seed $s" locked bin/fencecheck run regression/deposed-coordinator-describe --transport mutant:no-confirm --seed "$s"
	done
	for s in 1 2 3; do
		run "deposed-coordinator-describe kafka-4.1.2 real seed $s" locked bin/fencecheck run regression/deposed-coordinator-describe --seed "$s"
	done
	echo "== deposed-coordinator-describe probe: Describes during a coordinator's cut, with the other brokers reachable and not"
	FENCECHECK_DEPOSED_DESCRIBE=1 locked $GO test ./cluster/local -run TestDeposedCoordinatorDescribe -count 1 -v -timeout 10m 2>&1 |
		grep -E 'deposed_test.go|^(---|ok|FAIL)'
fi
