//go:build !kafka

package nemesis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/nemesis"
)

// inertIsolator is an embedded cluster whose Isolate "succeeds" and changes nothing: a user's
// isolate command that exits 0 and isolates nothing. Brokers reports what it was told.
type inertIsolator struct {
	*embedded.Cluster
	mu       sync.Mutex
	isolated map[int32]bool
	calls    []string
}

func (c *inertIsolator) Isolate(_ context.Context, id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isolated[id] = true
	c.calls = append(c.calls, "isolate "+links.BrokerName(id))
	return nil
}

func (c *inertIsolator) Unisolate(_ context.Context, id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.isolated, id)
	c.calls = append(c.calls, "unisolate "+links.BrokerName(id))
	return nil
}

func (c *inertIsolator) Brokers(ctx context.Context, q cluster.RoleQuery) ([]cluster.Broker, error) {
	bs, err := c.Cluster.Brokers(ctx, q)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range bs {
		if c.isolated[bs[i].ID] {
			bs[i].State = cluster.StateIsolated
		}
	}
	return bs, err
}

// TestIsolateByCommand: on a cluster without peer links that isolates by its own means
// (cluster.Isolator: an external cluster's commands), isolate calls it, and takes hold only
// when the other brokers drop the broker from their metadata, not because the call returned
// nil; recovery and heal-all's sweep unisolate.
func TestIsolateByCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	c := &inertIsolator{Cluster: k, isolated: map[int32]bool{}}
	f := newFixtureOn(t, c, embeddedTiming, 1, func(e *nemesis.Env) { e.WaitTimeout = 2 * time.Second })

	inj, err := f.n.Inject(ctx, nemesis.Spec{Fault: "isolate", Target: nemesis.Target{Brokers: nemesis.IDs(1)}})
	if !errors.Is(err, nemesis.ErrNotHeld) {
		t.Fatalf("isolate by a command that isolates nothing: %v, want ErrNotHeld", err)
	}
	if d := inj.Window().Desc; !strings.Contains(d, "isolate command") {
		t.Errorf("window %q does not say the command isolates", d)
	}
	if err := inj.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	ws := f.rec.windows(t)
	if len(ws) != 1 || ws[0].TookHold {
		t.Fatalf("windows %+v, want one that did not take hold", ws)
	}

	// A broker left isolated outside any injection (a step cut short): heal-all's sweep
	// unisolates it, seeing its state.
	if err := c.Isolate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.n.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	got := strings.Join(c.calls, ", ")
	c.mu.Unlock()
	if want := "isolate b1, unisolate b1, isolate b2, unisolate b2"; got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
}
