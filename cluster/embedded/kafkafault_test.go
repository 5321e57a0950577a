package embedded_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/embedded"
)

func TestKafkaFaults(t *testing.T) {
	clustertest.KafkaFaults(t, start(t, embedded.Options{}))
}
