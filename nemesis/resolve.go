package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// pickRole returns role, or one of Env.Roles at random when role is "".
func (n *Nemesis) pickRole(role string) (string, error) {
	if role != "" {
		return role, nil
	}
	if len(n.env.Roles) == 0 {
		return "", fmt.Errorf("a random role: the env lists no roles: %w", ErrNoTarget)
	}
	n.rand(func(r *rand.Rand) { role = n.env.Roles[r.IntN(len(n.env.Roles))] })
	return role, nil
}

func (n *Nemesis) roleKeys(role string) (RoleKeys, error) {
	if n.env.Resolve == nil {
		return RoleKeys{}, fmt.Errorf("role %q: the env has no Resolve function: %w", role, ErrNoTarget)
	}
	k, err := n.env.Resolve(role)
	if err != nil {
		return RoleKeys{}, fmt.Errorf("role %q: %w", role, err)
	}
	return k, nil
}

// choose picks from candidates as a random or subset selector says, with the run's RNG.
func choose[T any](n *Nemesis, sel Selector, cands []T, what string) ([]T, error) {
	k := sel.count()
	var out []T
	n.rand(func(r *rand.Rand) {
		if sel.Kind == SelectSubset && len(cands) > 0 {
			k = 1 + r.IntN(len(cands))
		}
		if k > len(cands) {
			return
		}
		perm := r.Perm(len(cands))[:k]
		// Keep id order, so targets read the same whatever the permutation.
		for i := range cands {
			for _, p := range perm {
				if p == i {
					out = append(out, cands[i])
				}
			}
		}
	})
	if out == nil {
		return nil, fmt.Errorf("%s: want %d, %d free: %w", what, k, len(cands), ErrNoTarget)
	}
	return out, nil
}

// pickProcesses resolves sel to process numbers; random picks consider only those free says.
func (n *Nemesis) pickProcesses(sel Selector, free func(p int) bool) ([]int, error) {
	if n.env.Processes == 0 {
		return nil, fmt.Errorf("processes: the env has none: %w", ErrNoTarget)
	}
	switch sel.Kind {
	case SelectAll:
		out := make([]int, n.env.Processes)
		for i := range out {
			out[i] = i + 1
		}
		return out, nil
	case SelectIDs:
		for _, p := range sel.IDs {
			if p < 1 || p > n.env.Processes {
				return nil, fmt.Errorf("process p%d: processes are p1..p%d: %w", p, n.env.Processes, ErrNoTarget)
			}
		}
		return sel.IDs, nil
	case SelectHolder:
		if n.env.Freezer == nil {
			return nil, fmt.Errorf("processes %q: the run has no workload to ask who holds a role: %w", sel, ErrNoTarget)
		}
		role, err := n.pickRole(sel.Role)
		if err != nil {
			return nil, err
		}
		m, ok := n.env.Freezer.Holder(role)
		if !ok {
			return nil, fmt.Errorf("processes %q: nobody holds %s now: %w", sel, role, ErrNoTarget)
		}
		return []int{m.Process}, nil
	case SelectRandom, SelectSubset:
		var cands []int
		for p := 1; p <= n.env.Processes; p++ {
			if free(p) {
				cands = append(cands, p)
			}
		}
		return choose(n, sel, cands, "processes "+sel.String())
	}
	return nil, fmt.Errorf("processes %q: %w", sel, ErrInvalidSpec)
}

// pickBrokers resolves sel to brokers, and says how it picked them ("coordinator of r (b2)").
// Random picks consider only running brokers that free accepts.
func (n *Nemesis) pickBrokers(ctx context.Context, sel Selector, free func(cluster.Broker) bool) ([]cluster.Broker, string, error) {
	switch sel.Kind {
	case SelectCoordinator, SelectLeader, SelectGroupCoordinator:
		b, how, err := n.brokerByRole(ctx, sel)
		if err != nil {
			return nil, "", err
		}
		return []cluster.Broker{b}, fmt.Sprintf("%s (%s)", how, b.Name()), nil
	}
	bs, err := n.env.Cluster.Brokers(ctx, cluster.RoleQuery{})
	if len(bs) == 0 {
		return nil, "", fmt.Errorf("brokers: %w", errors.Join(err, ErrNoTarget))
	}
	var out []cluster.Broker
	switch sel.Kind {
	case SelectAll:
		out = bs
	case SelectIDs:
		for _, id := range sel.IDs {
			b, ok := cluster.Find(bs, int32(id))
			if !ok {
				return nil, "", fmt.Errorf("broker b%d: brokers are %s: %w", id, brokerNames(bs), ErrNoTarget)
			}
			out = append(out, b)
		}
	case SelectRandom, SelectSubset:
		var cands []cluster.Broker
		for _, b := range bs {
			if (b.State == cluster.StateRunning || b.State == cluster.StateUnknown) && free(b) {
				cands = append(cands, b)
			}
		}
		if out, err = choose(n, sel, cands, "brokers "+sel.String()); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", fmt.Errorf("brokers %q: %w", sel, ErrInvalidSpec)
	}
	return out, brokerNames(out), nil
}

// ownerWait bounds how long a step aimed at the coordinator of a role waits for the role to
// have a transactional id (a pipeline's input partition, an owner).
const ownerWait = 10 * time.Second

// brokerByRole finds the coordinator or the leader a selector names.
func (n *Nemesis) brokerByRole(ctx context.Context, sel Selector) (cluster.Broker, string, error) {
	role, err := n.pickRole(sel.Role)
	if err != nil {
		return cluster.Broker{}, "", err
	}
	keys, err := n.roleKeys(role)
	if err != nil {
		return cluster.Broker{}, "", err
	}
	if sel.Kind == SelectCoordinator && keys.TransactionalID == "" {
		// A pipeline's input partition has a transactional id once a member owns it, which
		// on a cold cluster can be seconds after the run starts: the step waits for one, as a
		// freeze waits for a holder.
		wctx, cancel := context.WithTimeout(ctx, ownerWait)
		err = poll(wctx, ErrNoTarget, func() error {
			if keys, err = n.roleKeys(role); err == nil && keys.TransactionalID == "" {
				err = fmt.Errorf("coordinator of %s: the role had no transactional id for %v (no member owned it)", role, ownerWait)
			}
			return err
		})
		cancel()
		if err != nil {
			return cluster.Broker{}, "", err
		}
	}
	var q cluster.RoleQuery
	var want cluster.BrokerRole
	switch sel.Kind {
	case SelectCoordinator:
		q.TransactionalIDs = []string{keys.TransactionalID}
		want = cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: keys.TransactionalID}
	case SelectGroupCoordinator:
		if keys.Group == "" {
			return cluster.Broker{}, "", fmt.Errorf("group-coordinator of %s: the role has no consumer group (a pipeline run's roles have one): %w", role, ErrNoTarget)
		}
		q.Groups = []string{keys.Group}
		want = cluster.BrokerRole{Kind: cluster.RoleGroupCoordinator, Key: keys.Group}
	default:
		q.Partitions = []cluster.TopicPartition{{Topic: keys.Topic, Partition: keys.Partition}}
		want = cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: keys.Topic, Partition: keys.Partition}
	}
	how := string(sel.Kind) + " of " + role
	bs, err := n.env.Cluster.Brokers(ctx, q)
	for _, b := range bs {
		if b.Has(want) {
			return b, how, nil
		}
	}
	return cluster.Broker{}, "", fmt.Errorf("%s: %w", how, errors.Join(err, ErrNoTarget))
}

func brokerNames(bs []cluster.Broker) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name()
	}
	return strings.Join(names, ",")
}

func processNames(ps []int) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = links.ProcessName(p)
	}
	return strings.Join(names, ",")
}

// linkTarget is a link's target name in windows: "p1->b2", "b1->b2".
func linkTarget(l *links.Link) string { return strings.ReplaceAll(l.Name(), "→", "->") }
