#!/bin/sh
# mk/regressions.sh: measure every regression of docs/regressions.md (make regressions).
#
# The scenario runs are the built-in suite `regressions` (scenarios/suite/builtin/regressions.yaml):
# each regression on the systems it shows on, with the verdict it must give. Its race group runs
# with a fencecheck built with -race (the first-metadata race needs the race detector's slowdown
# of kgo's metadata goroutine), the rest with an ordinary build; both suite directories are merged
# into $OUT/all (index.html, junit.xml, suite.json). Then, per run, what the broker answered each
# late request (harness.log's "kafka fault removed" lines), and the regressions that are Go tests.
# Runs on Apache Kafka take the machine's heavy-job lock, one run at a time, when LOCK names a lock
# file (flock).
#
# Variables: KAFKA=0 runs only the kfake systems and skips the Go tests on Apache Kafka; RELEASES
# the Kafka releases fetched first and of the per-release Go tests (KAFKA-20357, -20090; the
# suite's own systems are in its file); PROBE_RELEASES those of the KAFKA-19690 and KAFKA-19999
# probes and of the torn-transaction probe (every release served); OUT (default runs/regressions); LOCK (default none).
set -u
KAFKA=${KAFKA:-1}
OUT=${OUT:-runs/regressions}
LOCK=${LOCK:-}
GO=${GO:-go}
# The releases the per-release regressions run on (each fetched by make kafka KAFKA_VERSION=V).
RELEASES=${RELEASES:-4.1.2 4.3.1 4.3.2 4.4.0}
# The releases the KAFKA-19690 and KAFKA-19999 probes run on (seconds each, every release served).
PROBE_RELEASES=${PROBE_RELEASES:-3.9.1 3.9.2 4.0.2 4.1.2 4.2.2 4.3.1 4.3.2 4.4.0}

mkdir -p "$OUT" bin
$GO build -o bin/fencecheck ./cmd/fencecheck || exit 255
$GO build -race -o bin/fencecheck-race ./cmd/fencecheck || exit 255
# group-id-zombie runs through the Sarama adapter (Go module proxy, go.sum), the kafkajs
# group through the KafkaJS adapter (npm, package-lock.json).
${MAKE:-make} -s sarama-adapter kafkajs-adapter || exit 255

if [ "$KAFKA" = 1 ]; then
	for v in $RELEASES $PROBE_RELEASES; do
		${MAKE:-make} -s kafka KAFKA_VERSION="$v" || exit 255
	done
fi

locked() {
	if [ -n "$LOCK" ]; then flock "$LOCK" "$@"; else "$@"; fi
}

echo "== the regressions suite (scenario runs)"
systems=""
if [ "$KAFKA" != 1 ]; then
	systems="--system kfake-tv2 --system kfake-tv1 --system kfake-no-warm-up --system kfake-sarama-group-id --system kfake-sarama --system kfake-kafkajs"
fi
lock=""
if [ -n "$LOCK" ]; then lock="--lock $LOCK"; fi
rm -rf "$OUT/race" "$OUT/rest" "$OUT/all"
# shellcheck disable=SC2086 # the flags are words
bin/fencecheck-race suite regressions --group race $systems --out "$OUT/race"
# shellcheck disable=SC2086
bin/fencecheck suite regressions --group late --group commit-after-timeout-abort --group timeout-and-markers --group marker-retry --group deposed-coordinator \
	--group pipeline --group group-id-zombie --group kafkajs \
	$systems $lock --out "$OUT/rest"
bin/fencecheck suite merge "$OUT/race" "$OUT/rest" --out "$OUT/all"
echo "suite: $OUT/all/index.html"

echo "== what the brokers answered the late requests (harness.log, per run)"
find "$OUT/rest/runs" -name harness.log | sort | while read -r log; do
	answers=$(grep -o 'delivery[0-9]*="[^"]*"' "$log")
	if [ -n "$answers" ]; then
		echo "$(dirname "$(dirname "$log")")"
		echo "$answers" | sed 's/^/    /'
	fi
done

echo "== kfake deviations and epoch exhaustion"
$GO test ./cluster/embedded -run 'TestKfakeDeviations|TestEpochExhaustion' -count 1 -v 2>&1 | grep -E 'deviations.go|calls in|^(---|ok|FAIL)'
if [ "$KAFKA" = 1 ]; then
	FENCECHECK_EPOCH_EXHAUSTION=1 locked $GO test -tags kafka ./cluster/local -run 'TestKfakeDeviations|TestEpochExhaustion' -count 1 -v -timeout 30m 2>&1 |
		grep -E 'deviations.go|calls in|kafkafault_test.go|^(---|ok|FAIL)'
	# KAFKA-20357 and KAFKA-20090, per release: each drives an epoch to exhaustion (minutes).
	for v in $RELEASES; do
		case "$v" in 3.*) continue ;; esac
		echo "-- Kafka $v: rotation retry after failover, timeout abort at exhaustion"
		FENCECHECK_KAFKA_HOME="$HOME/.cache/fencecheck/kafka/$v" FENCECHECK_EPOCH_EXHAUSTION=1 locked $GO test -tags kafka ./cluster/local \
			-run 'TestRotationRetryAfterFailover|TestTimeoutAbortAtExhaustion' -count 1 -v -timeout 30m 2>&1 |
			grep -E 'calls in|kafkafault_test.go|^(---|ok|FAIL)'
	done
fi

echo "== KAFKA-18943: Kafka Streams 3.9.0 commits during a revocation (kfake; 3.9.1, 4.0.0 and 4.1.2 must not)"
# The adapter built against each release (Maven Central); the test retries seeds until a run
# reached the window, and fails when 3.9.0 comes out valid or a fixed release invalid.
for v in 3.9.0 3.9.1 4.0.0 4.1.2; do
	${MAKE:-make} -s streams-adapter STREAMS_VERSION="$v" >/dev/null || exit 255
done
$GO test ./scenarios -run TestStreamsRevocationCommitEmbedded -count 1 -v -timeout 20m 2>&1 |
	grep -E 'revocations in the window|window not reached|^ *(---|ok|FAIL)'

if [ "$KAFKA" = 1 ]; then
	# KAFKA-19690 (a Produce whose verification the timeout abort's marker overtakes: a
	# four-broker TV1 cluster of its own) and KAFKA-19999 (a commit marker sent again after its
	# answer was lost), per release: each test fails while its bug is there.
	for v in $PROBE_RELEASES; do
		echo "-- Kafka $v: produce after a timeout abort, marker retry after a lost answer"
		FENCECHECK_KAFKA_HOME="$HOME/.cache/fencecheck/kafka/$v" FENCECHECK_LONG=1 locked $GO test -tags kafka ./cluster/local \
			-run 'TestProduceAfterTimeoutAbort|TestMarkerRetryAfterLostAnswer' -count 1 -v -timeout 15m 2>&1 |
			grep -E 'markers_test.go|^(---|ok|FAIL)'
	done
fi

if [ "$KAFKA" = 1 ]; then
	# The torn transaction of a coordinator restarted within its broker session, per release
	# (a three-broker cluster of its own, 80-125 s): the test passes while Kafka tears the
	# transaction and fails once it comes out whole.
	for v in $PROBE_RELEASES; do
		echo "-- Kafka $v: torn transaction after the coordinator's restart"
		FENCECHECK_KAFKA_HOME="$HOME/.cache/fencecheck/kafka/$v" FENCECHECK_LONG=1 locked $GO test -tags kafka ./cluster/local \
			-run TestTornTxnAfterCoordinatorRestart -count 1 -v -timeout 10m 2>&1 |
			grep -E 'torn_test.go|^(---|ok|FAIL)'
	done
fi

if [ "$KAFKA" = 1 ]; then
	echo "== deposed-coordinator-describe probe: Describes during a coordinator's cut, with the other brokers reachable and not"
	FENCECHECK_DEPOSED_DESCRIBE=1 locked $GO test -tags kafka ./cluster/local -run TestDeposedCoordinatorDescribe -count 1 -v -timeout 10m 2>&1 |
		grep -E 'deposed_test.go|^(---|ok|FAIL)'
fi
