//go:build kafka

package local_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestAdapterPipelineConformance runs the pipeline conformance suite on each adapter of
// adapters/ that serves pipelines (internal/adapters: kafka-clients, Sarama, KafkaJS), one adapter process per
// member, on the shared TV2 cluster. An adapter's member is run as the plain kind (its pause
// points are on the wire). make test runs the Java adapter's under the classic protocol; the
// consumer protocol, whose zombie test waits for the cluster's 6 s session, and the other
// adapters' members (Sarama's, also adding its offsets by group id alone) are long tests.
func TestAdapterPipelineConformance(t *testing.T) {
	c := sharedCluster(t)
	bootstrap := strings.Join(c.Bootstrap(), ",")
	for _, client := range adapters.Clients {
		if !client.Pipelines {
			continue
		}
		t.Run(client.Name, func(t *testing.T) {
			argv := testenv.Adapter(t, client.Name)
			for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
				t.Run(protocol, func(t *testing.T) {
					if !client.ServesProtocol(protocol) {
						t.Skipf("the %s adapter's member speaks %v only", client.Name, client.GroupProtocols)
					}
					if protocol != pipeline.ProtocolClassic || client.Name != "java" {
						// make test's Kafka lane runs the Java adapter's member under the
						// classic protocol; the other adapters' (Sarama's: 61 s; KafkaJS's: 52 to 76 s) are long
						// tests, and run on kfake in make test (transport/lineproto).
						testenv.Long(t)
					}
					pipelinetest.Run(t, pipelinetest.Env{Bootstrap: bootstrap, Kind: pipeline.KindPlain, Protocol: protocol,
						SessionTimeout: 2 * time.Second, Replication: 3, GroupIDOnly: client.GroupIDOnly, SelfDriven: client.SelfDriven,
						New: adapterMember(argv)})
				})
			}
			if client.GroupIDOnlyArgs != nil {
				// The same member adding its offsets by group id alone: its zombie commits.
				// A long test: make test's Kafka lane runs the member that sends its metadata.
				t.Run("group-id-only/classic", func(t *testing.T) {
					testenv.Long(t)
					pipelinetest.Run(t, pipelinetest.Env{Bootstrap: bootstrap, Kind: pipeline.KindPlain, Protocol: pipeline.ProtocolClassic,
						SessionTimeout: 2 * time.Second, Replication: 3, GroupIDOnly: true,
						New: adapterMember(append(slices.Clone(argv), client.GroupIDOnlyArgs...))})
				})
			}
		})
	}
}

// adapterMember starts an adapter's member for the pipeline suite, as the plain kind only.
func adapterMember(argv []string) func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error) {
	return func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error) {
		if kind != pipeline.KindPlain {
			return nil, fmt.Errorf("%w: kind %q: the adapter serves one member, run as %s", transport.ErrInvalidConfig, kind, pipeline.KindPlain)
		}
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}
