//go:build kafka

package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster/preflight"
)

// TestPreflight: Apache Kafka passes every check of the preflight, the smoke transactions
// included (cluster/preflight's tests run it on kfake, whole and without EndTxn).
func TestPreflight(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := preflight.Run(ctx, preflight.Options{Client: []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, Bootstrap: c.Bootstrap()})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Table())
	if !rep.OK() || rep.Brokers != c.Info().Brokers {
		t.Fatalf("preflight of Kafka %s: ok %v, %d brokers; missing %v, not tried %v", c.Info().Version, rep.OK(), rep.Brokers, rep.Missing(), rep.NotTried())
	}
	if a := rep.Advisories(); len(a) > 0 {
		t.Errorf("preflight of Kafka %s: advisory checks %v did not pass", c.Info().Version, a)
	}
}
