//go:build kafka

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/transport"
)

// TestDeposedCoordinatorDescribe cuts a role's transaction coordinator from its peers while a
// transport that has described the role (and so cached that coordinator) keeps describing it.
// A second transport acquires the role through the new coordinator, and the isolated broker
// still answers DescribeTransactions from its old state. It counts the Describes invoked after
// that acquire returned, during the isolation and for 3 s after the heal, that named a deposed
// holder, were refused, or named the current holder.
//
//   - "describer reaches every broker": the transport must refuse every stale answer, because
//     the other brokers name the new coordinator.
//   - "describer reaches only the isolated broker": its links to the other brokers are cut
//     too, so nothing can confirm the answer. No Describe may fail for that (a link fault
//     must not turn every Describe into an error); the stale answers it then returns are
//     what the confirmation leaves open, and are logged, not judged.
//
// It runs only with FENCECHECK_DEPOSED_DESCRIBE=1: it isolates a broker of the shared cluster
// twice, for about 20 s each.
func TestDeposedCoordinatorDescribe(t *testing.T) {
	if os.Getenv("FENCECHECK_DEPOSED_DESCRIBE") != "1" {
		t.Skip("set FENCECHECK_DEPOSED_DESCRIBE=1: it isolates a broker of the shared cluster twice, for about 20 s each")
	}
	c := sharedCluster(t)
	t.Run("describer reaches every broker", func(t *testing.T) {
		cut, healed := deposedDescribes(t, c, false)
		if n := cut.stale + healed.stale; n > 0 {
			t.Errorf("%d Describes named a deposed holder", n)
		}
		if cut.refused == 0 || cut.failed+healed.failed > 0 {
			t.Errorf("during the cut %d Describes were refused, %d failed otherwise; want some refused, none failed", cut.refused, cut.failed+healed.failed)
		}
	})
	t.Run("describer reaches only the isolated broker", func(t *testing.T) {
		cut, _ := deposedDescribes(t, c, true)
		if cut.refused > 0 || cut.failed > 0 {
			t.Errorf("during the cut %d Describes were refused and %d failed with no other broker reachable; want every one answered", cut.refused, cut.failed)
		}
	})
}

// describeCounts sorts the Describes invoked after the second transport's acquire returned.
type describeCounts struct {
	stale   int // named an older token, or no holder
	refused int // refused by the transport (NOT_COORDINATOR)
	failed  int // failed otherwise
	current int // named the acquired token or a later epoch of it
}

func (n describeCounts) String() string {
	return fmt.Sprintf("%d named a deposed holder, %d refused (NOT_COORDINATOR), %d failed otherwise, %d current",
		n.stale, n.refused, n.failed, n.current)
}

// deposedDescribes runs the isolation of TestDeposedCoordinatorDescribe and returns its counts:
// of the Describes invoked while the links were cut, and of those invoked after the heal. With
// cutDescriber, the describing transport's links to every broker but the isolated one are cut
// along with the peer links.
func deposedDescribes(t *testing.T, c *local.Cluster, cutDescriber bool) (cut, healed describeCounts) {
	ctx := context.Background()
	bootstrap := strings.Join(c.Bootstrap(), ",")
	topic := fmt.Sprintf("fencecheck-deposed-%d", time.Now().UnixNano()) // the role's transactional id too
	const describerProcess = 91                                          // links of its own
	dial := processLinks(t, c, describerProcess)
	start := func(dial cluster.DialFunc) *transport.BrokerTransport {
		cfg := transport.NewConfig(bootstrap, 10*time.Second)
		cfg.Topic = topic
		cfg.Dial = dial
		tr, err := transport.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close(context.Background()) })
		return tr
	}
	describer, first := start(dial), start(nil)
	role := transport.Role("r1")
	id := transport.TransactionalID(describer.Config().Topic, role)
	old, err := first.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	if tok, held, err := describer.Describe(ctx, role); err != nil || !held || tok.Compare(old) < 0 {
		t.Fatalf("Describe before the cut = (%v, %v, %v), want at least %v held", tok, held, err, old)
	}

	cl, err := cluster.NewAdminClient(c.Bootstrap(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = id
	req.CoordinatorKeys = []string{id}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	x := resp.NodeID
	if len(resp.Coordinators) > 0 {
		x = resp.Coordinators[0].NodeID
	}

	var severed []*links.Link
	for _, l := range c.Network().Links() {
		switch {
		case l.Kind() == links.LinkPeer && (l.From() == x || l.Broker() == x):
			severed = append(severed, l)
		case cutDescriber && l.Kind() == links.LinkProcess && l.Process() == describerProcess && l.Broker() != x:
			severed = append(severed, l)
		}
	}
	for _, l := range severed {
		if err := l.Disable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cutAt := time.Now()
	var healedAt time.Time
	defer func() {
		if healedAt.IsZero() {
			_ = c.Network().HealAll(context.Background())
		}
	}()
	t.Logf("%s, the coordinator of %s, severed: %v", links.BrokerName(x), id, severed)

	// The second transport acquires through whichever broker its client finds; it succeeds
	// once the coordinator has moved and the new one has loaded the role.
	second := start(nil)
	type result struct {
		tok transport.FencingToken
		err error
	}
	acquired := make(chan result, 1)
	go func() {
		for time.Since(cutAt) < 60*time.Second {
			tok, err := second.AcquireEpoch(ctx, role)
			if err == nil {
				acquired <- result{tok, nil}
				return
			}
		}
		acquired <- result{err: errors.New("no acquire succeeded within 60 s of the cut")}
	}()

	var mint transport.FencingToken // the second transport's token, once mintedAt is set
	var mintedAt time.Time
	var lastStale, lastRefused time.Time
	for {
		select {
		case r := <-acquired:
			if r.err != nil {
				t.Fatal(r.err)
			}
			mint, mintedAt = r.tok, time.Now()
			t.Logf("the second transport acquired %v %v after the cut", mint, mintedAt.Sub(cutAt).Round(time.Millisecond))
		default:
		}
		if !mintedAt.IsZero() && healedAt.IsZero() && time.Since(mintedAt) > 5*time.Second {
			if err := c.Network().HealAll(ctx); err != nil {
				t.Fatal(err)
			}
			healedAt = time.Now()
			t.Logf("healed %v after the cut", healedAt.Sub(cutAt).Round(time.Millisecond))
		}
		if !healedAt.IsZero() && time.Since(healedAt) > 3*time.Second {
			break
		}
		invoked := time.Now()
		minted, judged := mint, !mintedAt.IsZero() // an acquire returned before this Describe was invoked
		n := &cut
		if !healedAt.IsZero() {
			n = &healed
		}
		tok, held, err := describer.Describe(ctx, role)
		switch {
		case !judged:
		case errors.Is(err, kerr.NotCoordinator):
			n.refused++
			lastRefused = invoked
		case err != nil:
			n.failed++
		case !held || tok.Compare(minted) < 0:
			if n.stale++; cut.stale+healed.stale <= 3 {
				t.Logf("Describe invoked %v after the cut = (%v, %v): the role was acquired with %v before",
					invoked.Sub(cutAt).Round(time.Millisecond), tok, held, minted)
			}
			lastStale = invoked
		default:
			n.current++
		}
		time.Sleep(50 * time.Millisecond) // pacing, not synchronisation
	}
	t.Logf("Describes after the acquire, while cut: %v", cut)
	t.Logf("Describes in the 3 s after the heal: %v", healed)
	if lastRefused.After(cutAt) {
		t.Logf("the last refused Describe was invoked %v after the heal", lastRefused.Sub(healedAt).Round(time.Millisecond))
	}
	if lastStale.After(cutAt) {
		t.Logf("the last Describe that named a deposed holder was invoked %v after the heal", lastStale.Sub(healedAt).Round(time.Millisecond))
	}
	hctx, cancel := context.WithTimeout(ctx, clustertest.RecoverTimeout)
	defer cancel()
	if err := cluster.WaitHealthy(hctx, c, nil); err != nil {
		t.Fatal(err)
	}
	return cut, healed
}
