//go:build kafka

package local_test

import (
	"os"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
)

// TestKafkaFaults runs every Kafka-aware fault action on the shared cluster.
func TestKafkaFaults(t *testing.T) { clustertest.KafkaFaults(t, sharedCluster(t)) }

// TestKfakeDeviations: Apache Kafka shows none of kfake's known deviations (cluster/embedded's
// TestKfakeDeviations shows kfake still does). It restarts a broker of the shared cluster.
func TestKfakeDeviations(t *testing.T) {
	clustertest.CheckDeviations(t, sharedCluster(t), false)
}

// TestEpochExhaustion drives a transactional id past epoch 32,766 on Kafka: the producer id
// rotates, and a commit with the last token before the rotation is refused. It takes minutes
// (one replicated InitProducerId per epoch), so it runs only with FENCECHECK_EPOCH_EXHAUSTION=1
// (make regressions).
func TestEpochExhaustion(t *testing.T) {
	needExhaustion(t)
	x := clustertest.EpochExhaustion(t, sharedCluster(t), 20*time.Minute)
	t.Logf("%d InitProducerId calls in %v: (%d,%d) -> (%d,%d), ordered %v; the stale commit: %s",
		x.Calls, x.Took.Round(time.Millisecond), x.Before[0], x.Before[1], x.After[0], x.After[1], x.Ordered, x.StaleFencedWith)
	if !x.StaleFenced {
		t.Errorf("a commit with the pre-rotation token (%d,%d) was accepted", x.Before[0], x.Before[1])
	}
	if !x.Ordered {
		t.Errorf("the token after the rotation (%d,%d) sorts before the one before it (%d,%d)", x.After[0], x.After[1], x.Before[0], x.Before[1])
	}
}

// TestRotationRetryAfterFailover (KAFKA-20357): a retry of the InitProducerId that rotated an
// exhausted producer id must get the rotated token, on the coordinator that rotated it and
// after its broker restarted. Kafka without the fix fences the retry after the restart. It
// takes minutes, so it runs only with FENCECHECK_EPOCH_EXHAUSTION=1 (make regressions); the
// figures per release are in docs/regressions.md#rotation-retry-after-failover.
func TestRotationRetryAfterFailover(t *testing.T) {
	needExhaustion(t)
	r := clustertest.RotationRetryAfterFailover(t, sharedCluster(t), 20*time.Minute)
	t.Logf("%s", r)
	if r.FalseFence {
		t.Errorf("KAFKA-20357: the retry of the rotating InitProducerId (%d, %d) after the coordinator's restart answered %s, want (%d, %d)",
			r.Before[0], r.Before[1], r.RetryAfter, r.After[0], r.After[1])
	}
}

// TestTimeoutAbortAtExhaustion (KAFKA-20090): a transaction at the exhausted epoch that times
// out, followed by a late EndTxn(abort) with that epoch, must end aborted, and a successor
// must acquire the transactional id. Kafka without the fix can leave the transaction Ongoing.
// Transaction version 2 only; FENCECHECK_EPOCH_EXHAUSTION=1 as above.
func TestTimeoutAbortAtExhaustion(t *testing.T) {
	needExhaustion(t)
	x := clustertest.TimeoutAbortAtExhaustion(t, sharedCluster(t), 20*time.Minute)
	t.Logf("%s", x)
	if x.Stuck {
		t.Errorf("KAFKA-20090: after the timeout abort at (%d, %d) and a late EndTxn(abort), the transaction is %s and a successor's InitProducerId answered %s",
			x.Token[0], x.Token[1], x.Final, x.Acquire)
	}
}

// needExhaustion skips a test that drives an epoch to exhaustion (minutes on Kafka) unless
// FENCECHECK_EPOCH_EXHAUSTION=1 (make regressions).
func needExhaustion(t *testing.T) {
	t.Helper()
	if os.Getenv("FENCECHECK_EPOCH_EXHAUSTION") != "1" {
		t.Skip("set FENCECHECK_EPOCH_EXHAUSTION=1 (make regressions): it takes minutes")
	}
}
