package transport

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AcquireEpoch mints the epoch of role and fences the member that held it. It builds the
// role's transactional producer (transaction timeout = LeaseDuration), sends InitProducerId,
// and reads the minted pair from that producer: asking the coordinator again would report
// whatever it holds by then, which may be a competitor's token. The producer stays bound to
// the token; any producer this process had for the role is closed first.
//
// Errors: ErrFenced when the coordinator fenced the request; ErrProducer when it refused it;
// ErrClient when a connection failed or the deadline passed. All of these may still have
// minted (Classify says Unknown).
func (t *BrokerTransport) AcquireEpoch(ctx context.Context, role Role) (FencingToken, error) {
	rs, err := t.role(OpAcquire, role)
	if err != nil {
		return FencingToken{}, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.release(rs, rs.held.Load())

	cl, err := kgo.NewClient(t.with(
		kgo.TransactionalID(TransactionalID(t.cfg.Topic, role)),
		kgo.TransactionTimeout(t.cfg.LeaseDuration),
		kgo.DefaultProduceTopic(t.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(t.cfg.RequestTimeout),
	)...)
	if err != nil {
		return FencingToken{}, &Error{Op: OpAcquire, Role: role, Kind: ErrProducer, Stage: StageLocal, Err: err}
	}
	id, epoch, err := cl.ProducerID(ctx) // returns at ctx's end even if the request does not
	if err != nil {
		t.closeClient(cl)
		return FencingToken{}, &Error{Op: OpAcquire, Role: role, Kind: kindOf(err), Stage: StageSend, Err: err}
	}
	tok := FencingToken{ProducerID: id, Epoch: epoch}
	if err := t.checkOpen(OpAcquire, role); err != nil { // Close ran meanwhile: do not leak cl
		t.closeClient(cl)
		return FencingToken{}, err
	}
	rs.held.Store(&holding{token: tok, client: cl, warm: map[string]bool{}, noWarmUp: t.noWarmUp.Load()})
	return tok, nil
}

// WriteLease writes lease to role's partition in one transaction on the producer bound to
// token and commits it. The record carries token (the minted one) so a reader can tell which
// holding wrote it.
//
// Errors: ErrNotHeld (no I/O) when this process holds no epoch for role or holds another;
// ErrFenced when the broker rejects the epoch; ErrClient when the deadline passed or a
// connection failed; ErrProducer otherwise. After any error the holding is gone: its producer
// is closed and HeldToken reports nothing. A transaction whose commit was never requested can
// only be aborted, by the coordinator at the next InitProducerId for the role or at its
// timeout, so its record never becomes visible to a committed read.
func (t *BrokerTransport) WriteLease(ctx context.Context, role Role, token FencingToken, lease Lease) error {
	if err := t.checkOpen(OpWrite, role); err != nil {
		return err
	}
	if held, ok := t.HeldToken(role); !ok || held != token { // before any I/O, even topic lookup
		return &Error{Op: OpWrite, Role: role, Kind: ErrNotHeld, Stage: StageLocal}
	}
	info, err := t.coordinationTopic(ctx, OpWrite, role)
	if err != nil {
		return err
	}
	rec := &kgo.Record{
		Topic:     t.cfg.Topic,
		Partition: PartitionFor(role, info.partitions),
		Key:       EncodeKey(role),
		Value:     AppendValue(nil, Value{Kind: KindLease, Token: token, Member: lease.Holder, Lease: lease}),
	}
	return t.WriteFenced(ctx, role, token, rec)
}

// WriteFenced writes recs in one transaction on the producer bound to token for role and
// commits it, with the errors and outcome rules of WriteLease. Each record must name its
// topic and partition. It is how a holder's application writes are fenced.
func (t *BrokerTransport) WriteFenced(ctx context.Context, role Role, token FencingToken, recs ...*kgo.Record) error {
	rs, err := t.role(OpWrite, role)
	if err != nil {
		return err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h := rs.held.Load()
	if h == nil || h.token != token {
		return &Error{Op: OpWrite, Role: role, Kind: ErrNotHeld, Stage: StageLocal}
	}
	fail := func(kind error, stage Stage, err error) error {
		t.release(rs, h)
		return &Error{Op: OpWrite, Role: role, Kind: kind, Stage: stage, Err: err}
	}

	if err := h.client.BeginTransaction(); err != nil {
		return fail(ErrProducer, StageLocal, err)
	}
	// kgo's in-flight produces and commits ignore ctx; closing the producer is what cuts them
	// off, so the deadline releases the holding (which closes it in the background).
	stop := context.AfterFunc(ctx, func() { t.release(rs, h) })
	defer stop()
	h.warmUp(ctx, recs)
	err = h.client.ProduceSync(ctx, recs...).FirstErr()
	switch {
	case ctx.Err() != nil:
		return fail(ErrClient, StageSend, ctx.Err())
	case err != nil:
		return fail(kindOf(err), StageSend, err)
	}
	err = h.client.EndTransaction(ctx, kgo.TryCommit)
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(ErrClient, StageCommit, fmt.Errorf("%w (%w)", ctx.Err(), err))
	case errors.Is(err, kerr.OperationNotAttempted):
		// kgo refused to send the commit because the producer id had failed.
		return fail(ErrProducer, StageSend, err)
	case err != nil:
		// The EndTxn went out; even a fencing answer may follow an earlier attempt that
		// committed, so its outcome stays unknown (see Classify).
		return fail(kindOf(err), StageCommit, err)
	}
	return nil
}

// Register appends the registration of member to role's partition on the plain producer,
// outside any transaction (a candidate holds no epoch), and returns its offset: the member's
// join sequence. It never returns ErrFenced.
//
// Errors: ErrAdmin when the topic cannot be created or described; ErrProducer when the broker
// refuses the append; ErrClient when a connection fails or the deadline passes.
func (t *BrokerTransport) Register(ctx context.Context, role Role, member MemberID) (int64, error) {
	if err := t.checkOpen(OpRegister, role); err != nil {
		return 0, err
	}
	info, err := t.coordinationTopic(ctx, OpRegister, role)
	if err != nil {
		return 0, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	rec := &kgo.Record{
		Topic:     t.cfg.Topic,
		Partition: PartitionFor(role, info.partitions),
		Key:       EncodeKey(role),
		Value:     AppendValue(nil, Value{Kind: KindRegistration, Member: member}),
	}
	// The plain producer is shared, so a cut-off append is not cancelled by closing it: the
	// record may still land within the delivery timeout, which Classify reports as Unknown.
	err, ok := await(ctx, func() error { return t.admin.ProduceSync(ctx, rec).FirstErr() })
	if !ok || err != nil {
		kind := ErrProducer
		if !ok || isConnection(err) {
			kind = ErrClient
		}
		return 0, &Error{Op: OpRegister, Role: role, Kind: kind, Stage: StageSend, Err: err}
	}
	return rec.Offset, nil
}

// warmUp makes sure the producer has published the partitions of every topic in recs before
// they are produced. franz-go v1.22.3 partitions the records that wait for a topic's first
// metadata into the new partition buffers before it publishes them; a record acknowledged in
// that window is invisible to EndTransaction, which then aborts (TV2) or does nothing (TV1)
// and returns nil: an acknowledged write that is not committed. fencecheck found it as lost
// writes (no-lost-write) under load, on kfake and, with the window widened, on Apache Kafka.
// A first record that cannot be partitioned (partition MaxInt32, refused before anything is
// sent) takes that first-metadata path instead, so the real records are partitioned only
// once the topic's partitions are published. Its error is expected and ignored.
func (h *holding) warmUp(ctx context.Context, recs []*kgo.Record) {
	if h.noWarmUp {
		return
	}
	for _, r := range recs {
		if h.warm[r.Topic] {
			continue
		}
		_ = h.client.ProduceSync(ctx, &kgo.Record{Topic: r.Topic, Partition: math.MaxInt32}).FirstErr()
		h.warm[r.Topic] = true
	}
}
