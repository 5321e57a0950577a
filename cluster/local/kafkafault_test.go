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
	if os.Getenv("FENCECHECK_EPOCH_EXHAUSTION") != "1" {
		t.Skip("set FENCECHECK_EPOCH_EXHAUSTION=1 (make regressions): it takes minutes")
	}
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
