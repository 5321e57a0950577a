//go:build kafka

package local_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// brokersSeenBy returns the broker ids in a Metadata response of broker id.
func brokersSeenBy(ctx context.Context, cl *kgo.Client, id int32) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// isolate checks the peer links: with every link bX→* and *→bX down, the
// other brokers fence bX (their metadata drops it) and a process can still
// produce; after healing, bX is back.
func isolate(t *testing.T, c *local.Cluster, x int32) {
	ctx := context.Background()
	const topic = "fencecheck-isolate"
	clustertest.CreateTopic(t, c, topic)
	adminCl, err := cluster.NewAdminClient(c.Bootstrap(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	var others []int32
	for _, id := range c.Network().BrokerIDs() {
		if id != x {
			others = append(others, id)
		}
	}
	seenByAll := func(want bool) error {
		for _, o := range others {
			ids, err := brokersSeenBy(ctx, adminCl, o)
			if err != nil {
				return err
			}
			if slices.Contains(ids, x) != want {
				return fmt.Errorf("%s lists %v", links.BrokerName(o), ids)
			}
		}
		return nil
	}
	if _, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error { return seenByAll(true) }); err != nil {
		t.Fatalf("before the cut: %v", err)
	}

	var cut []*links.Link
	for _, l := range c.Network().Links() {
		if l.Kind() == links.LinkPeer && (l.From() == x || l.Broker() == x) {
			cut = append(cut, l)
		}
	}
	if want := 2 * len(others); len(cut) != want {
		t.Fatalf("%d peer links touch %s, want %d", len(cut), links.BrokerName(x), want)
	}
	for _, l := range cut {
		if err := l.Disable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	healed := false
	defer func() {
		if !healed {
			_ = c.Network().HealAll(context.Background())
		}
	}()
	t.Logf("cut %v", cut)
	took, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
		if err := seenByAll(false); err != nil {
			return fmt.Errorf("%s not fenced yet: %w", links.BrokerName(x), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s fenced by its peers %v after the cut", links.BrokerName(x), took.Round(time.Millisecond))

	p := clustertest.Client(t, c, 6, kgo.RecordDeliveryTimeout(clustertest.CutTimeout))
	took, err = clustertest.Eventually(clustertest.RecoverTimeout, func() error {
		pctx, cancel := context.WithTimeout(ctx, clustertest.CutTimeout)
		defer cancel()
		return clustertest.Produce(pctx, p, topic)
	})
	if err != nil {
		t.Fatalf("p6 produce with %s isolated: %v", links.BrokerName(x), err)
	}
	t.Logf("p6 produced with %s isolated (%v)", links.BrokerName(x), took.Round(time.Millisecond))

	if err := c.Network().HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	took, err = clustertest.Eventually(clustertest.RecoverTimeout, func() error { return seenByAll(true) })
	if err != nil {
		t.Fatalf("after healing: %v", err)
	}
	t.Logf("%s back in its peers' metadata %v after healing", links.BrokerName(x), took.Round(time.Millisecond))
	hctx, cancel := context.WithTimeout(ctx, clustertest.RecoverTimeout)
	defer cancel()
	if err := cluster.WaitHealthy(hctx, c, nil); err != nil {
		t.Fatal(err)
	}
}
