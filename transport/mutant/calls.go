package mutant

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The mutants in this file each replace one call of the real transport by a wrapper that
// gets one detail wrong.

// newLocalJoinSeq numbers the registrations of each role with a counter of this process's
// own, as a transport that keeps "the next join sequence" in memory would, instead of
// returning the offset the broker gave the record. Two processes hand out the same join
// sequence, and neither matches the log.
func newLocalJoinSeq(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	var (
		mu   sync.Mutex
		next = map[transport.Role]int64{}
	)
	m := &Transport{BrokerTransport: tr}
	m.register = func(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error) {
		if _, err := tr.Register(ctx, role, member); err != nil {
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		seq := next[role]
		next[role]++
		return seq, nil
	}
	return m, nil
}

// resendAttempt is how long resend-registration waits for the answer to an append before it
// sends the registration again: shorter than a process's first append takes (connection,
// producer id, produce; tens of milliseconds on the embedded cluster).
const resendAttempt = 5 * time.Millisecond

// newResendRegistration sends a registration again when the answer to the first append is
// late, as a client with a per-attempt deadline and an application-level retry would. The
// first append is already on its way and is not withdrawn by giving up on its answer: it
// lands, and the member is registered twice.
func newResendRegistration(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	type answer struct {
		seq int64
		err error
	}
	m := &Transport{BrokerTransport: tr}
	m.register = func(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error) {
		first := make(chan answer, 1) // buffered: the first attempt finishes on its own
		go func() {
			seq, err := tr.Register(ctx, role, member)
			first <- answer{seq, err}
		}()
		select {
		case a := <-first:
			return a.seq, a.err
		case <-time.After(resendAttempt):
			return tr.Register(ctx, role, member) // the bug: a second append of the same registration
		}
	}
	return m, nil
}

// newDescribeLocal answers Describe from this process's own belief (HeldToken) when it holds
// the role, and asks the coordinator only otherwise: a shortcut that saves a request and
// reports a deposed holder that has not yet noticed its loss as the holder.
func newDescribeLocal(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	m := &Transport{BrokerTransport: tr}
	m.describe = func(ctx context.Context, role transport.Role) (transport.FencingToken, bool, error) {
		if tok, ok := tr.HeldToken(role); ok {
			return tok, true, nil
		}
		return tr.Describe(ctx, role)
	}
	return m, nil
}

// newSwallowCommit ignores an error of the commit (EndTxn) of a lease or work write, as code
// that treats the produce's acknowledgement as the write and the commit as housekeeping
// would: a write whose transaction was fenced or aborted at commit is reported written.
func newSwallowCommit(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	swallow := func(err error) error {
		var te *transport.Error
		if errors.As(err, &te) && te.Stage == transport.StageCommit {
			return nil
		}
		return err
	}
	return writesThrough(tr, swallow), nil
}

// writesThrough is tr with the error of every lease and work write passed through edit.
func writesThrough(tr *transport.BrokerTransport, edit func(error) error) *Transport {
	m := &Transport{BrokerTransport: tr}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		return edit(tr.WriteLease(ctx, role, tok, l))
	}
	m.writeFenced = func(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
		return edit(tr.WriteFenced(ctx, role, tok, recs...))
	}
	return m
}

// newUnknownCommitFails reports a write whose commit was sent but not confirmed (its answer
// lost or late, or an error after kgo may have retried it) as failed: it says the commit
// failed before the commit was requested (StageSend), so Classify calls it Fail instead of
// Unknown. The client bug of a commit of unknown outcome answered as failed; it shows only
// when the commit's answer is lost and the commit landed.
func newUnknownCommitFails(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	failed := func(err error) error {
		var te *transport.Error
		if errors.As(err, &te) && te.Stage == transport.StageCommit {
			lie := *te
			lie.Stage = transport.StageSend
			return &lie
		}
		return err
	}
	return writesThrough(tr, failed), nil
}

// leaseRecord is the record WriteLease writes for role, stamped with stamp.
func leaseRecord(ctx context.Context, tr *transport.BrokerTransport, role transport.Role, stamp transport.FencingToken, l transport.Lease) (*kgo.Record, error) {
	cfg := tr.Config()
	partitions, err := tr.EnsureTopic(ctx, cfg.Topic, cfg.TopicPartitions) // cached after the first call
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: cfg.Topic, Partition: transport.PartitionFor(role, partitions), Key: transport.EncodeKey(role),
		Value: transport.AppendValue(nil, transport.Value{Kind: transport.KindLease, Token: stamp, Member: l.Holder, Lease: l})}, nil
}

// notHeld is the real transport's answer to a write under a token this process does not hold.
func notHeld(role transport.Role) error {
	return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrNotHeld, Stage: transport.StageLocal}
}

// newStampCurrentEpoch stamps each lease record with the producer's current epoch instead of
// the minted token, as code that reads "the token" from the producer at write time would. On
// a TV2 cluster every commit bumps that epoch, so from the second lease of a holding on, the
// log says the lease was written by a holding that never existed. (On TV1 the epoch does not
// move and the mutant is harmless: run it on a TV2 cluster, such as the embedded one.)
func newStampCurrentEpoch(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	m := &Transport{BrokerTransport: tr}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		if held, ok := tr.HeldToken(role); !ok || held != tok {
			return notHeld(role)
		}
		stamp := tok
		if cl := tr.BoundProducer(role); cl != nil {
			if id, epoch, err := cl.ProducerID(ctx); err == nil {
				stamp = transport.FencingToken{ProducerID: id, Epoch: epoch}
			}
		}
		rec, err := leaseRecord(ctx, tr, role, stamp, l)
		if err != nil {
			return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
		}
		return tr.WriteFenced(ctx, role, tok, rec)
	}
	return m, nil
}

// newDropLastRecord leaves the last record out of every read, as a scan that stops one short
// of its end offset would (an off-by-one on "the offset of the last record" against "the
// offset after it"). During the run every such read is still a prefix of the log; only a read
// of a settled log, after the final read, shows that records are missing.
func newDropLastRecord(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	m := &Transport{BrokerTransport: tr}
	m.readRole = func(ctx context.Context, role transport.Role) (transport.RoleRecords, error) {
		rr, err := tr.ReadRoleRecords(ctx, role)
		if err != nil {
			return rr, err
		}
		nr, nl := len(rr.Registrations), len(rr.Leases)
		switch {
		case nl > 0 && (nr == 0 || rr.Leases[nl-1].Offset > rr.Registrations[nr-1].JoinSeq):
			rr.Leases = rr.Leases[:nl-1]
		case nr > 0:
			rr.Registrations = rr.Registrations[:nr-1]
		}
		return rr, nil
	}
	m.readPart = func(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error) {
		recs, err := tr.ReadPartition(ctx, topic, partition)
		if len(recs) > 0 {
			recs = recs[:len(recs)-1]
		}
		return recs, err
	}
	return m, nil
}

// newSplitTxn writes the records of a fenced write of several records in two transactions on
// the producer bound to the token: the first half, committed, then the rest. Each is a real
// WriteFenced, fenced like any, so a deposed holder still writes nothing; but a holder
// deposed between the two (or while the second is open) leaves the first half committed and
// the rest aborted: a torn transaction, which only no-torn-txn names. A write of one record
// is written as the real transport writes it.
func newSplitTxn(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	m := &Transport{BrokerTransport: tr}
	m.writeFenced = func(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
		if len(recs) < 2 {
			return tr.WriteFenced(ctx, role, tok, recs...)
		}
		half := (len(recs) + 1) / 2
		if err := tr.WriteFenced(ctx, role, tok, recs[:half]...); err != nil {
			return err
		}
		return tr.WriteFenced(ctx, role, tok, recs[half:]...)
	}
	return m, nil
}
