//go:build kafka

package local_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestPipelineConformance runs the pipeline members' conformance suite on the shared Kafka
// cluster (TV2), under both group protocols. The zombie test waits past a member's session:
// 2 s under the classic protocol, and the cluster's 6 s under the consumer protocol (the
// broker settings of docs/clusters.md). The four run side by side: each test of the suite has
// its own topics and group, the suite mostly waits on sessions and rebalances, and it waits for
// events, never for a time (83 s one after another in make test's Kafka lane).
func TestPipelineConformance(t *testing.T) {
	t.Parallel() // beside the secured tests: see TestSecuredSASLSSL
	c := sharedCluster(t)
	bootstrap := strings.Join(c.Bootstrap(), ",")
	for _, kind := range pipeline.Kinds {
		for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
			t.Run(kind+"/"+protocol, func(t *testing.T) {
				t.Parallel()
				pipelinetest.Run(t, pipelinetest.Env{Bootstrap: bootstrap, Kind: kind, Protocol: protocol,
					SessionTimeout: 2 * time.Second, Replication: 3})
			})
		}
	}
}
