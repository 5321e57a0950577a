package embedded_test

import (
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/embedded"
)

func TestKafkaFaults(t *testing.T) {
	clustertest.KafkaFaults(t, start(t, embedded.Options{}))
}

// TestKfakeDeviations: the kfake go.mod pins still shows each of its known deviations from
// Kafka (cluster/local's TestKfakeDeviations shows Kafka does not).
func TestKfakeDeviations(t *testing.T) {
	clustertest.CheckDeviations(t, start(t, embedded.Options{}), true)
}

// TestEpochExhaustion drives a transactional id past epoch 32,766 on kfake: the producer id
// rotates, and a commit with the last token before the rotation is refused.
func TestEpochExhaustion(t *testing.T) {
	x := clustertest.EpochExhaustion(t, start(t, embedded.Options{}), 2*time.Minute)
	t.Logf("%d InitProducerId calls in %v: (%d,%d) -> (%d,%d), ordered %v; the stale commit: %s",
		x.Calls, x.Took.Round(time.Millisecond), x.Before[0], x.Before[1], x.After[0], x.After[1], x.Ordered, x.StaleFencedWith)
	if !x.StaleFenced {
		t.Errorf("a commit with the pre-rotation token (%d,%d) was accepted", x.Before[0], x.Before[1])
	}
}
