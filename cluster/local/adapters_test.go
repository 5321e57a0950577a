//go:build kafka

package local_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// TestAdapterConformance runs the conformance suite on each adapter of adapters/ (the seed's
// transport on kafka-clients, librdkafka, Sarama, KafkaJS, kafka-python and krabka) behind the exec protocol,
// against the shared TV2 cluster through one process's links. A client that speaks TV1
// whatever the cluster finalized is held to TV1's epochs. TestTransportConformance runs the
// Java adapter on a cluster formatted with transaction.version 1 too. make test builds the
// adapters; with FENCECHECK_REQUIRE_KAFKA=1 a missing build fails the test.
//
// The Java adapter's suite runs first, alone: it starts a JVM per transport, which takes a
// core for a second or two, and the suite bounds a failing Start by its request timeout
// (lineproto's test of the same name keeps even kfake's adapters one at a time for that).
// The other clients' adapters (a Python, a Node and a Go process per transport, each up in a
// fraction of a second) then run side by side, each through its own process's links: their
// suites mostly wait on the brokers.
func TestAdapterConformance(t *testing.T) {
	c := sharedCluster(t)
	for i, client := range adapters.Clients {
		t.Run(client.Name, func(t *testing.T) {
			if client.PipelinesOnly {
				t.Skipf("the %s adapter serves pipelines only: TestAdapterPipelineConformance runs it", client.Name)
			}
			if client.Name != "java" {
				t.Parallel()
			}
			argv := testenv.Adapter(t, client.Name)
			tv, pin := client.Speaks(2)
			transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(c.Bootstrap(), ","), Dial: processLinks(t, c, 91+i),
				TransactionVersion: tv, PinTransactionVersion: pin, New: lineprotoStart(argv)})
		})
	}
}

// lineprotoStart starts an exec-protocol adapter for the conformance suite.
func lineprotoStart(argv []string) func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
	return func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
		tr, err := lineproto.Start(ctx, argv, cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
}
