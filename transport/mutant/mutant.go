// Package mutant holds deliberately broken transports. Each breaks one thing the seed's
// transport must get right; `fencecheck selftest` runs them to prove that the checker notices:
// a harness whose checker passes a broken transport proves nothing.
package mutant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A mutant is a real BrokerTransport with one call broken.
type mutant struct {
	name, summary string
	// guarantees the checker must report as violated when this mutant runs under contention.
	guarantees []string
	build      func(ctx context.Context, tr *transport.BrokerTransport) (*Transport, error)
}

var mutants = []mutant{
	{
		name:       "lease-outside-txn",
		summary:    "writes the lease on a plain producer, outside any transaction, so the broker's epoch check never sees it and a deposed holder keeps renewing",
		guarantees: []string{"fenced-stale-write", "log-token-order"},
		build:      newLeaseOutsideTxn,
	},
	{
		name:       "ack-fenced",
		summary:    "reports a lease write the broker fenced as written, so the deposed holder believes it still leads",
		guarantees: []string{"no-lost-write"},
		build: func(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
			m := &Transport{BrokerTransport: tr}
			m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
				err := tr.WriteLease(ctx, role, tok, l)
				if errors.Is(err, transport.ErrFenced) {
					return nil
				}
				return err
			}
			return m, nil
		},
	},
	{
		name:       "describe-token",
		summary:    "reads the minted token back with a second request (DescribeTransactions, 100 ms later, as over a slow link) instead of from its own producer, so a competitor that mints in between hands this member the competitor's token",
		guarantees: []string{"token-monotonic"},
		build: func(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
			m := &Transport{BrokerTransport: tr}
			m.acquire = func(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
				tok, err := tr.AcquireEpoch(ctx, role)
				if err != nil {
					return tok, err
				}
				select {
				case <-time.After(describeWindow):
				case <-ctx.Done():
					return tok, nil
				}
				d, held, err := tr.Describe(ctx, role)
				if err != nil || !held {
					return tok, nil
				}
				return d, nil
			}
			return m, nil
		},
	},
}

// describeWindow is how long describe-token's read-back comes after its mint: a slow link's
// round trip. A competitor that mints within it hands its token to this member. With no delay
// the race needs two mints of one role within about half a millisecond, which a 12 s steady
// run does not reliably produce; the mutant widens the window so that selftest can require
// the checker to catch it.
const describeWindow = 100 * time.Millisecond

// Info is a mutant as `fencecheck selftest --list` shows it.
type Info struct {
	Name, Summary string
	// Guarantees are those the checker must find violated.
	Guarantees []string
}

// List returns every mutant.
func List() []Info {
	out := make([]Info, 0, len(mutants))
	for _, m := range mutants {
		out = append(out, Info{Name: m.name, Summary: m.summary, Guarantees: slices.Clone(m.guarantees)})
	}
	return out
}

// Transport is a BrokerTransport with one call replaced.
type Transport struct {
	*transport.BrokerTransport
	// The replaced calls; nil ones are the real transport's.
	acquire    func(ctx context.Context, role transport.Role) (transport.FencingToken, error)
	writeLease func(ctx context.Context, role transport.Role, token transport.FencingToken, lease transport.Lease) error
	close      func(ctx context.Context) error
}

// AcquireEpoch runs the mutant's acquire, if it breaks that.
func (m *Transport) AcquireEpoch(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
	if m.acquire == nil {
		return m.BrokerTransport.AcquireEpoch(ctx, role)
	}
	return m.acquire(ctx, role)
}

// WriteLease runs the mutant's lease write, if it breaks that.
func (m *Transport) WriteLease(ctx context.Context, role transport.Role, token transport.FencingToken, lease transport.Lease) error {
	if m.writeLease == nil {
		return m.BrokerTransport.WriteLease(ctx, role, token, lease)
	}
	return m.writeLease(ctx, role, token, lease)
}

// Close closes what the mutant opened and the transport.
func (m *Transport) Close(ctx context.Context) error {
	var err error
	if m.close != nil {
		err = m.close(ctx)
	}
	return errors.Join(err, m.BrokerTransport.Close(ctx))
}

// Start starts the mutant name on cfg.
func Start(ctx context.Context, name string, cfg transport.Config) (*Transport, error) {
	i := slices.IndexFunc(mutants, func(m mutant) bool { return m.name == name })
	if i < 0 {
		var names []string
		for _, m := range mutants {
			names = append(names, m.name)
		}
		return nil, fmt.Errorf("no mutant %q (mutants: %s)", name, strings.Join(names, ", "))
	}
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := mutants[i].build(ctx, tr)
	if err != nil {
		tr.Close(ctx)
		return nil, err
	}
	return m, nil
}

// newLeaseOutsideTxn writes leases with a plain idempotent producer of its own: it checks the
// token locally as the real transport does, and then never asks the broker to.
func newLeaseOutsideTxn(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	cfg := tr.Config()
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...), kgo.ClientID(cfg.ClientID + "-mutant"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics(), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.RequestTimeout)}
	if cfg.Dial != nil {
		opts = append(opts, kgo.Dialer(cfg.Dial))
	}
	plain, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	var (
		once       sync.Once
		partitions int32
		topicErr   error
	)
	m := &Transport{BrokerTransport: tr, close: func(context.Context) error { plain.Close(); return nil }}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		if held, ok := tr.HeldToken(role); !ok || held != tok {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrNotHeld, Stage: transport.StageLocal}
		}
		once.Do(func() { partitions, topicErr = tr.EnsureTopic(ctx, cfg.Topic, cfg.TopicPartitions) })
		if topicErr != nil {
			return topicErr
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel()
		rec := &kgo.Record{Topic: cfg.Topic, Partition: transport.PartitionFor(role, partitions), Key: transport.EncodeKey(role),
			Value: transport.AppendValue(nil, transport.Value{Kind: transport.KindLease, Token: tok, Member: l.Holder, Lease: l})}
		if err := plain.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrClient, Stage: transport.StageCommit, Err: err}
		}
		return nil
	}
	return m, nil
}
