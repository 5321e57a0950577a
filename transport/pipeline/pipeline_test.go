package pipeline_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestConformanceKfake runs the conformance suite for each member on kfake, with a minimum
// session timeout low enough for the zombie test's 2 s.
func TestConformanceKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "500"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, kind := range pipeline.Kinds {
		t.Run(kind, func(t *testing.T) {
			pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: kind})
		})
	}
}
