package nemesis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencecheck/fencecheck/cluster"
)

// CoordinatorMover is implemented by clusters that can move the transaction coordinator of a
// transactional id without killing a broker. move-coordinator uses it when the cluster has
// it; on kfake it rehashes the coordinators; otherwise it kills the coordinator's broker.
type CoordinatorMover interface {
	MoveCoordinator(ctx context.Context, transactionalID string) error
}

// kfakeCluster is the embedded backend's escape hatch to kfake's fault hooks.
type kfakeCluster interface {
	Kfake() *kfake.Cluster
}

// How move-coordinator moves a coordinator.
const (
	moveByMover  = "move"
	moveByRehash = "rehash"
	moveByKill   = "kill its broker"
)

// moveCoordinator moves the transaction coordinator of a role away from its broker.
type moveCoordinator struct {
	n      *Nemesis
	spec   Spec
	role   string
	txnID  string
	from   cluster.Broker
	how    string // moveBy*
	killed bool
}

func newMoveCoordinator(n *Nemesis, s Spec) Fault { return &moveCoordinator{n: n, spec: s} }

func (f *moveCoordinator) Setup(ctx context.Context) error {
	role, err := f.n.pickRole(f.spec.Target.Role)
	if err != nil {
		return err
	}
	keys, err := f.n.roleKeys(role)
	if err != nil {
		return err
	}
	from, _, err := f.n.brokerByRole(ctx, CoordinatorOf(role))
	if err != nil {
		return err
	}
	f.role, f.txnID, f.from = role, keys.TransactionalID, from
	switch c := f.n.env.Cluster; {
	case implements[CoordinatorMover](c):
		f.how = moveByMover
	case implements[kfakeCluster](c):
		f.how = moveByRehash
	default:
		f.how = moveByKill
	}
	return nil
}

func implements[T any](c cluster.Cluster) bool { _, ok := c.(T); return ok }

func (f *moveCoordinator) Window() Window {
	targets := []string{"txn:" + f.txnID}
	if f.how == moveByKill {
		targets = append(targets, f.from.Name())
	}
	return Window{Kind: historyKind(f.spec.Fault), Targets: targets,
		Desc:   fmt.Sprintf("move the coordinator of %s (transactional id %s) off %s: %s", f.role, f.txnID, f.from.Name(), f.how),
		Target: &Target{Role: f.role}}
}

func (f *moveCoordinator) Inject(ctx context.Context) error {
	c := f.n.env.Cluster
	switch f.how {
	case moveByMover:
		return c.(CoordinatorMover).MoveCoordinator(ctx, f.txnID)
	case moveByRehash:
		// Rehashing moves every coordinator to a hash-chosen broker, which may be the same
		// one: rehash until this one moved (with 3 brokers, 1 in 3 tries stays).
		kc := c.(kfakeCluster).Kfake()
		for range 64 {
			kc.RehashCoordinators()
			if kc.CoordinatorFor(f.txnID) != f.from.ID {
				return nil
			}
		}
		return fmt.Errorf("coordinator of %s stayed on %s after 64 rehashes", f.txnID, f.from.Name())
	}
	if err := c.Kill(ctx, f.from.ID); err != nil {
		return err
	}
	f.killed = true
	return nil
}

// WaitForInjected: the cluster names another broker as the coordinator.
func (f *moveCoordinator) WaitForInjected(ctx context.Context) error {
	return poll(ctx, ErrNotHeld, func() error {
		b, _, err := f.n.brokerByRole(ctx, CoordinatorOf(f.role))
		switch {
		case err != nil:
			return err
		case b.ID == f.from.ID:
			return fmt.Errorf("the coordinator of %s is still %s", f.txnID, b.Name())
		}
		return nil
	})
}

func (f *moveCoordinator) Recover(ctx context.Context) error {
	if !f.killed {
		return nil
	}
	f.killed = false
	return f.n.env.Cluster.Restart(ctx, f.from.ID)
}

// WaitForRecovered: the coordinator of the role is known and answers (and the broker the
// fault killed answers again).
func (f *moveCoordinator) WaitForRecovered(ctx context.Context) error {
	var coord cluster.Broker
	err := poll(ctx, ErrNotRecovered, func() (err error) {
		coord, _, err = f.n.brokerByRole(ctx, CoordinatorOf(f.role))
		return err
	})
	if err != nil {
		return err
	}
	bs := []cluster.Broker{coord}
	if f.how == moveByKill && coord.ID != f.from.ID {
		bs = append(bs, f.from)
	}
	return expectAll(ctx, directPaths(bs), f.n.env.ProbeTimeout, ErrNotRecovered, isAnswered)
}

func (f *moveCoordinator) Cleanup(context.Context) error { return nil }
