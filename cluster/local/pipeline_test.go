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
// broker settings of docs/clusters.md).
func TestPipelineConformance(t *testing.T) {
	c := sharedCluster(t)
	bootstrap := strings.Join(c.Bootstrap(), ",")
	for _, kind := range pipeline.Kinds {
		for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
			t.Run(kind+"/"+protocol, func(t *testing.T) {
				pipelinetest.Run(t, pipelinetest.Env{Bootstrap: bootstrap, Kind: kind, Protocol: protocol,
					SessionTimeout: 2 * time.Second, Replication: 3})
			})
		}
	}
}
