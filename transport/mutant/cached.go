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

// cachedProducers is cached-producer's own producers: one transactional producer per role,
// built (and InitProducerId sent) on the first acquire of the role and kept for good.
type cachedProducers struct {
	cfg   transport.Config
	mu    sync.Mutex
	roles map[transport.Role]*cachedRole
}

type cachedRole struct {
	mu     sync.Mutex // one call on the role at a time, as in the real transport
	client *kgo.Client
	token  transport.FencingToken // what its InitProducerId minted
	warm   map[string]bool
}

// newCachedProducer acquires a role by reusing the producer it built on its first acquire of
// the role, without a new InitProducerId, as a transport that caches producers by
// transactional id would. A member that was deposed and acquires again is handed its old
// token: no epoch is minted and no competitor is fenced.
func newCachedProducer(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	c := &cachedProducers{cfg: tr.Config(), roles: map[transport.Role]*cachedRole{}}
	m := &Transport{BrokerTransport: tr, acquire: c.acquire, close: c.close}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		rec, err := leaseRecord(ctx, tr, role, tok, l)
		if err != nil {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
		}
		return c.write(ctx, role, tok, rec)
	}
	m.writeFenced = c.write
	return m, nil
}

func (c *cachedProducers) role(role transport.Role) *cachedRole {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.roles[role]
	if r == nil {
		r = &cachedRole{warm: map[string]bool{}}
		c.roles[role] = r
	}
	return r
}

func (c *cachedProducers) acquire(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
	r := c.role(role)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.token, nil // the bug: the cached producer's token, no InitProducerId
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(baseOpts(c.cfg),
		kgo.TransactionalID(transport.TransactionalID(c.cfg.Topic, role)),
		kgo.TransactionTimeout(c.cfg.LeaseDuration),
		kgo.DefaultProduceTopic(c.cfg.Topic),
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
	r.client, r.token = cl, transport.FencingToken{ProducerID: id, Epoch: epoch}
	return r.token, nil
}

// write writes recs in one transaction on the role's cached producer, as the real
// WriteFenced does (warm-up included, so that franz-go's first-metadata race is not what
// this mutant shows).
func (c *cachedProducers) write(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
	r := c.role(role)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil || r.token != tok {
		return notHeld(role)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
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
			_ = r.client.EndTransaction(ctx, kgo.TryAbort)
		}
		return &transport.Error{Op: transport.OpWrite, Role: role, Kind: kind, Stage: stage, Err: err}
	}
	if err := r.client.BeginTransaction(); err != nil {
		return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrProducer, Stage: transport.StageLocal, Err: err}
	}
	for _, rec := range recs {
		if !r.warm[rec.Topic] {
			_ = r.client.ProduceSync(ctx, &kgo.Record{Topic: rec.Topic, Partition: math.MaxInt32}).FirstErr()
			r.warm[rec.Topic] = true
		}
	}
	if err := r.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fail(transport.StageSend, err)
	}
	err := r.client.EndTransaction(ctx, kgo.TryCommit)
	switch {
	case errors.Is(err, kerr.OperationNotAttempted):
		return fail(transport.StageSend, err)
	case err != nil:
		return fail(transport.StageCommit, err)
	}
	return nil
}

func (c *cachedProducers) close(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.roles {
		if r.client != nil {
			r.client.Close()
		}
	}
	return nil
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
