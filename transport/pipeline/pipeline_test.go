package pipeline_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestConformanceKfake runs the conformance suite for each member and group protocol on kfake,
// with session timeouts short enough for the zombie test: the classic protocol's minimum
// below the members' 2 s, and the consumer protocol's own (the group's, not the member's) 2 s.
func TestConformanceKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{
		"group.min.session.timeout.ms":         "500",
		"group.consumer.session.timeout.ms":    "2000",
		"group.consumer.heartbeat.interval.ms": "500",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, kind := range pipeline.Kinds {
		for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
			t.Run(kind+"/"+protocol, func(t *testing.T) {
				pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: kind, Protocol: protocol})
			})
		}
	}
}
