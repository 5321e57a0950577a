// Package mutant holds deliberately broken transports. Each breaks one thing the seed's
// transport must get right; `fencecheck selftest` runs them to prove that the checker notices:
// a harness whose checker passes a broken transport proves nothing.
package mutant

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/internal/knobs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A mutant is a real BrokerTransport with one call broken.
type mutant struct {
	name, summary string
	// guarantees the checker must report as violated when this mutant runs under contention.
	guarantees []string
	// scenario is the built-in scenario selftest runs it in; "" is steady.
	scenario string
	build    func(ctx context.Context, tr *transport.BrokerTransport) (*Transport, error)
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
	{
		name:       "cached-producer",
		summary:    "acquires a role by reusing the producer of its first acquire, without a new InitProducerId, so a deposed member that acquires again gets its old token back and fences no one",
		guarantees: []string{"token-monotonic"},
		build:      newCachedProducer,
	},
	{
		name:       "process-producer",
		summary:    "writes every role's leases and work in transactions of one producer per process (a transactional id per process, not per role), which no role's acquire fences, so a deposed holder's writes are accepted",
		guarantees: []string{"fenced-stale-write", "log-token-order"},
		build:      newProcessProducer,
	},
	{
		name:       "read-uncommitted",
		summary:    "reads at read_uncommitted up to the high watermark, so reads return records of open transactions and of fenced holders' aborted ones",
		guarantees: []string{"read-prefix", "no-zombie-commit"},
		scenario:   "zombie-reads",
		build:      newReadUncommitted,
	},
	{
		name:       "drop-last-record",
		summary:    "leaves the last record out of every read (a scan that stops one short of its end), which only a read of a settled log, after the final read, can tell from an earlier prefix",
		guarantees: []string{"read-prefix"},
		build:      newDropLastRecord,
	},
	{
		name:       "local-join-seq",
		summary:    "returns a join sequence from a counter of its own instead of the offset the broker gave the registration",
		guarantees: []string{"registration-order"},
		build:      newLocalJoinSeq,
	},
	{
		name:       "resend-registration",
		summary:    "appends a registration again when the first append is slow to answer (a 5 ms per-attempt deadline), and the first append lands too: the member is registered twice",
		guarantees: []string{"registration-order"},
		build:      newResendRegistration,
	},
	{
		name:       "describe-local",
		summary:    "answers Describe from this process's own belief (HeldToken) when it holds the role, so a deposed holder that has not noticed yet is reported as the holder",
		guarantees: []string{"describe-consistent"},
		scenario:   "zombie-reads",
		build:      newDescribeLocal,
	},
	{
		name:       "swallow-commit",
		summary:    "ignores an error of the commit (EndTxn) of a lease or work write, so a write whose transaction was fenced or aborted at commit is reported written",
		guarantees: []string{"no-lost-write", "fenced-stale-write"},
		scenario:   "zombie-reads",
		build:      newSwallowCommit,
	},
	{
		name:       "unknown-commit-fails",
		summary:    "reports a lease or work write whose commit (EndTxn) was not confirmed as failed, as code that reads any commit error as \"not committed\" would: when the commit did land, the history says a committed write failed",
		guarantees: []string{"no-zombie-commit"},
		scenario:   "lost-commit",
		build:      newUnknownCommitFails,
	},
	{
		name:       "split-txn",
		summary:    "writes a work write of several records as two transactions, the first half committed before the second begins (as a client that flushes in batches), so a fence between them leaves half a write in the log",
		guarantees: []string{"no-torn-txn"},
		scenario:   "split-work",
		build:      newSplitTxn,
	},
	{
		name:       "stamp-current-epoch",
		summary:    "stamps each lease with the producer's current epoch instead of the minted token; on TV2 every commit bumps it, so the log names holdings that never existed",
		guarantees: []string{"log-token-order"},
		build:      newStampCurrentEpoch,
	},
}

// regressionMutants are broken transports that exist to show a bug of a dependency that the
// real transport works around (scenarios/regressions). They are not in selftest: what they
// show is the dependency's bug, at the rate its race allows, not a promise the checker must
// catch every time.
var regressionMutants = []mutant{
	{
		name:       "no-warm-up",
		summary:    "produces a new producer's first record to a topic without the warm-up, so franz-go v1.22.3's first-metadata race can acknowledge a record its EndTransaction then aborts (TV2) or never commits (TV1)",
		guarantees: []string{"no-lost-write"},
		scenario:   "regression/first-metadata-race",
		build: func(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
			knobs.DisableWarmUp(tr)
			return &Transport{BrokerTransport: tr}, nil
		},
	},
	{
		name:       "no-confirm",
		summary:    "returns Describe's answer without asking other brokers whether the broker that answered is still the coordinator, so a coordinator cut from its peers can name a deposed holder (Apache Kafka answers from its old state)",
		guarantees: []string{"describe-consistent"},
		scenario:   "regression/deposed-coordinator-describe",
		build: func(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
			knobs.DisableConfirm(tr)
			return &Transport{BrokerTransport: tr}, nil
		},
	},
}

// Known reports whether name is a mutant Start can build: one of List's, or one made for a
// regression.
func Known(name string) bool {
	return slices.ContainsFunc(allMutants(), func(m mutant) bool { return m.name == name })
}

// Names lists every mutant Start can build, those of List and those made for regressions.
func Names() []string {
	var out []string
	for _, m := range allMutants() {
		out = append(out, m.name)
	}
	return out
}

func allMutants() []mutant { return slices.Concat(mutants, regressionMutants) }

// describeWindow is how long describe-token's read-back comes after its mint: a slow link's
// round trip. A competitor that mints within it hands its token to this member. With no delay
// the race needs two mints of one role within about half a millisecond, which a 12 s steady
// run does not reliably produce; the mutant widens the window so that selftest can require
// the checker to catch it.
const describeWindow = 100 * time.Millisecond

// Description is a mutant as `fencecheck selftest --list` shows it.
type Description struct {
	Name, Summary string
	// Guarantees are those the checker must find violated (at least one of them).
	Guarantees []string
	// Scenario is the built-in scenario that provokes what the mutant breaks: steady (no
	// faults, high contention) unless the mutant needs a fault.
	Scenario string
}

// List returns every mutant selftest runs.
func List() []Description { return describe(mutants) }

// RegressionList returns the mutants made for regressions: accepted by Start, not run by
// selftest (see regressionMutants).
func RegressionList() []Description { return describe(regressionMutants) }

func describe(ms []mutant) []Description {
	out := make([]Description, 0, len(ms))
	for _, m := range ms {
		out = append(out, Description{Name: m.name, Summary: m.summary, Guarantees: slices.Clone(m.guarantees), Scenario: cmp.Or(m.scenario, "steady")})
	}
	return out
}

// Transport is a BrokerTransport with one call replaced.
type Transport struct {
	*transport.BrokerTransport
	// The replaced calls; nil ones are the real transport's.
	acquire     func(ctx context.Context, role transport.Role) (transport.FencingToken, error)
	writeLease  func(ctx context.Context, role transport.Role, token transport.FencingToken, lease transport.Lease) error
	writeFenced func(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error
	register    func(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error)
	describe    func(ctx context.Context, role transport.Role) (transport.FencingToken, bool, error)
	readRole    func(ctx context.Context, role transport.Role) (transport.RoleRecords, error)
	readPart    func(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error)
	close       func(ctx context.Context) error
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

// WriteFenced runs the mutant's fenced write, if it breaks that.
func (m *Transport) WriteFenced(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error {
	if m.writeFenced == nil {
		return m.BrokerTransport.WriteFenced(ctx, role, token, recs...)
	}
	return m.writeFenced(ctx, role, token, recs...)
}

// Register runs the mutant's registration, if it breaks that.
func (m *Transport) Register(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error) {
	if m.register == nil {
		return m.BrokerTransport.Register(ctx, role, member)
	}
	return m.register(ctx, role, member)
}

// Describe runs the mutant's describe, if it breaks that.
func (m *Transport) Describe(ctx context.Context, role transport.Role) (transport.FencingToken, bool, error) {
	if m.describe == nil {
		return m.BrokerTransport.Describe(ctx, role)
	}
	return m.describe(ctx, role)
}

// ReadRoleRecords runs the mutant's read of a role, if it breaks that.
func (m *Transport) ReadRoleRecords(ctx context.Context, role transport.Role) (transport.RoleRecords, error) {
	if m.readRole == nil {
		return m.BrokerTransport.ReadRoleRecords(ctx, role)
	}
	return m.readRole(ctx, role)
}

// ReadPartition runs the mutant's read of a partition, if it breaks that.
func (m *Transport) ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error) {
	if m.readPart == nil {
		return m.BrokerTransport.ReadPartition(ctx, topic, partition)
	}
	return m.readPart(ctx, topic, partition)
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
	all := allMutants()
	i := slices.IndexFunc(all, func(m mutant) bool { return m.name == name })
	if i < 0 {
		return nil, fmt.Errorf("no mutant %q (mutants: %s)", name, strings.Join(Names(), ", "))
	}
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := all[i].build(ctx, tr)
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

//go:embed scenarios/*.yaml
var scenarioFiles embed.FS

// Scenario returns the YAML of the scenario named name if it is one of those made for the
// mutants (not in the catalogue: they exist to provoke one mutant's bug); ok is false for
// any other name, such as a built-in scenario's.
func Scenario(name string) (yaml []byte, ok bool) {
	b, err := scenarioFiles.ReadFile("scenarios/" + name + ".yaml")
	return b, err == nil
}
