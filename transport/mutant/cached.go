package mutant

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ownProducer is a transactional producer a mutant builds and keeps itself, with the real
// transport's options and its write path (warm-up included, so that franz-go's first-metadata
// race is not what a mutant shows).
type ownProducer struct {
	cfg   transport.Config
	txnID string
	mu    sync.Mutex // one transaction at a time, as in the real transport
	cl    *kgo.Client
	token transport.FencingToken // what its InitProducerId minted
	warm  map[string]bool
}

// init builds the producer and sends InitProducerId, unless that was done before: then it
// returns the token minted then. Call with p.mu held.
func (p *ownProducer) init(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
	if p.cl != nil {
		return p.token, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(baseOpts(p.cfg),
		kgo.TransactionalID(p.txnID),
		kgo.TransactionTimeout(p.cfg.LeaseDuration),
		kgo.DefaultProduceTopic(p.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)...)
	if err != nil {
		return transport.FencingToken{}, &transport.Error{Op: transport.OpAcquire, Role: role, Kind: transport.ErrProducer, Stage: transport.StageLocal, Err: err}
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		cl.Close()
		return transport.FencingToken{}, &transport.Error{Op: transport.OpAcquire, Role: role, Kind: transport.ErrClient, Stage: transport.StageSend, Err: err}
	}
	p.cl, p.token, p.warm = cl, transport.FencingToken{ProducerID: id, Epoch: epoch}, map[string]bool{}
	return p.token, nil
}

// write writes recs of role in one transaction and commits it, as the real WriteFenced does.
// Call with p.mu held, after init.
func (p *ownProducer) write(ctx context.Context, role transport.Role, recs ...*kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	fail := func(stage transport.Stage, err error) error {
		kind := transport.ErrProducer
		switch {
		case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.InvalidTxnState):
			kind = transport.ErrFenced
		case ctx.Err() != nil:
			kind = transport.ErrClient
		}
		if stage == transport.StageSend {
			_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		return &transport.Error{Op: transport.OpWrite, Role: role, Kind: kind, Stage: stage, Err: err}
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrProducer, Stage: transport.StageLocal, Err: err}
	}
	for _, rec := range recs {
		if !p.warm[rec.Topic] {
			_ = p.cl.ProduceSync(ctx, &kgo.Record{Topic: rec.Topic, Partition: math.MaxInt32}).FirstErr()
			p.warm[rec.Topic] = true
		}
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fail(transport.StageSend, err)
	}
	err := p.cl.EndTransaction(ctx, kgo.TryCommit)
	switch {
	case errors.Is(err, kerr.OperationNotAttempted):
		return fail(transport.StageSend, err)
	case err != nil:
		return fail(transport.StageCommit, err)
	}
	return nil
}

func (p *ownProducer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cl != nil {
		p.cl.Close()
	}
}

// newCachedProducer acquires a role by reusing the producer it built on its first acquire of
// the role, without a new InitProducerId, as a transport that caches producers by
// transactional id would. A member that was deposed and acquires again is handed its old
// token: no epoch is minted and no competitor is fenced.
func newCachedProducer(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	cfg := tr.Config()
	var (
		mu    sync.Mutex
		roles = map[transport.Role]*ownProducer{}
	)
	producer := func(role transport.Role) *ownProducer {
		mu.Lock()
		defer mu.Unlock()
		p := roles[role]
		if p == nil {
			p = &ownProducer{cfg: cfg, txnID: transport.TransactionalID(cfg.Topic, role)}
			roles[role] = p
		}
		return p
	}
	m := &Transport{BrokerTransport: tr}
	m.acquire = func(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
		p := producer(role)
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.init(ctx, role) // the bug: after the first, the cached producer's token
	}
	m.writeFenced = func(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
		p := producer(role)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cl == nil || p.token != tok {
			return notHeld(role)
		}
		return p.write(ctx, role, recs...)
	}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		rec, err := leaseRecord(ctx, tr, role, tok, l)
		if err != nil {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
		}
		return m.writeFenced(ctx, role, tok, rec)
	}
	m.close = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range roles {
			p.close()
		}
		return nil
	}
	return m, nil
}

// newProcessProducer acquires each role as the real transport does, but writes every role's
// leases and work in transactions of one producer per process, whose transactional id names
// the process rather than a role (a common mistake with Kafka transactions). No role's acquire
// fences that producer, so the writes of a holder that a competitor deposed are accepted.
func newProcessProducer(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	cfg := tr.Config()
	p := &ownProducer{cfg: cfg, txnID: cfg.Topic + "/process/" + cfg.ClientID}
	m := &Transport{BrokerTransport: tr, close: func(context.Context) error { p.close(); return nil }}
	m.writeFenced = func(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
		if held, ok := tr.HeldToken(role); !ok || held != tok { // the local check the real transport makes
			return notHeld(role)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, err := p.init(ctx, role); err != nil {
			var te *transport.Error
			if errors.As(err, &te) {
				te.Op = transport.OpWrite
			}
			return err
		}
		return p.write(ctx, role, recs...)
	}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		rec, err := leaseRecord(ctx, tr, role, tok, l)
		if err != nil {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
		}
		return m.writeFenced(ctx, role, tok, rec)
	}
	return m, nil
}

// baseOpts are the client options the mutants' own clients share: those of the real
// transport that matter on a plaintext cluster (the embedded one selftest uses).
func baseOpts(cfg transport.Config) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...), kgo.ClientID(cfg.ClientID + "-mutant"),
		kgo.DisableClientMetrics(), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(cfg.RequestTimeout),
		kgo.RetryTimeout(cfg.RequestTimeout), kgo.MetadataMinAge(cfg.RequestTimeout / 20)}
	if cfg.Dial != nil {
		opts = append(opts, kgo.Dialer(cfg.Dial))
	}
	return opts
}
