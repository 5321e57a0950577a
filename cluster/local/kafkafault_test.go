package local_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
)

// TestKafkaFaults runs every Kafka-aware fault action on the shared cluster.
func TestKafkaFaults(t *testing.T) { clustertest.KafkaFaults(t, sharedCluster(t)) }
