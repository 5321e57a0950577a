//go:build kafka

package local_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// TestTransportConformance runs the transport's conformance suite against Apache Kafka: on
// the shared TV2 cluster through one process's proxy links, with TV2 negotiated and with TV1
// pinned by the client, and on a one-node cluster formatted with transaction.version 1 (there
// also through every adapter, long tests; see TestAdapterConformance for every adapter on TV2).
func TestTransportConformance(t *testing.T) {
	// The shared cluster is started by the first subtest that needs it, so that -run of the TV1
	// cluster's subtests alone starts only the one-node TV1 cluster.
	var (
		bootstrap string
		dial      cluster.DialFunc
	)
	shared := func(t *testing.T) (string, cluster.DialFunc) {
		if dial == nil {
			c := sharedCluster(t)
			bootstrap, dial = strings.Join(c.Bootstrap(), ","), processLinks(t, c, 90)
		}
		return bootstrap, dial
	}
	t.Run("TV2 cluster", func(t *testing.T) {
		bootstrap, dial := shared(t)
		transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Dial: dial, TransactionVersion: 2,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 pinned by the client on a TV2 cluster", func(t *testing.T) {
		bootstrap, dial := shared(t)
		transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Dial: dial, TransactionVersion: 1,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 cluster", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		tv1, err := local.New(ctx, local.Options{Brokers: 1, TxnVersion: 1, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("start a TV1 cluster: %v", err)
		}
		defer tv1.Close(context.WithoutCancel(ctx))
		t.Run("Go transport", func(t *testing.T) {
			transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(tv1.Bootstrap(), ","), TransactionVersion: 1,
				Replication: 1, New: transporttest.Start})
		})
		// The Java adapter on the same TV1 cluster: kafka-clients follows the cluster's
		// finalized transaction.version, so this is the only way it runs TV1 (it refuses a pin
		// on a TV2 cluster). A long test: 53 s, one JVM per transport; make test runs the
		// same suite through it on TV2 (TestAdapterConformance).
		t.Run("Java adapter", func(t *testing.T) {
			testenv.Long(t)
			argv := testenv.Adapter(t, "java")
			transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(tv1.Bootstrap(), ","), TransactionVersion: 1,
				Replication: 1, New: lineprotoStart(argv)})
		})
		// Every other adapter on the same TV1 cluster, side by side as in
		// TestAdapterConformance: krabka follows the cluster as kafka-clients does, so this is
		// where it runs TV1; the TV1 clients meet the cluster they were written for. Long
		// tests: make test runs each on the shared TV2 cluster, where the TV1 clients' wire is
		// the same.
		t.Run("adapters", func(t *testing.T) {
			testenv.Long(t)
			for _, client := range adapters.Clients {
				if client.Name == "java" {
					continue
				}
				t.Run(client.Name, func(t *testing.T) {
					t.Parallel()
					argv := testenv.Adapter(t, client.Name)
					tv, pin := client.Speaks(1)
					transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(tv1.Bootstrap(), ","), TransactionVersion: tv,
						PinTransactionVersion: pin, Replication: 1, New: lineprotoStart(argv)})
				})
			}
		})
	})
}
