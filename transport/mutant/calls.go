package mutant

import (
	"context"
	"errors"
	"slices"
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

// resendAttempt is how long resend-registration waits for an append before it sends the
// registration again: shorter than a first append takes (metadata, producer id, produce), so
// the first registration of a process always goes out twice.
const resendAttempt = 5 * time.Millisecond

// newResendRegistration retries a registration whose answer is late by appending it again,
// as a client with a per-attempt deadline and an application-level retry loop would. The
// first append is not cancelled by giving up on it: it lands, and the member is registered
// twice.
func newResendRegistration(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	m := &Transport{BrokerTransport: tr}
	m.register = func(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error) {
		for range 3 {
			actx, cancel := context.WithTimeout(ctx, resendAttempt)
			seq, err := tr.Register(actx, role, member)
			cancel()
			if err == nil || ctx.Err() != nil {
				return seq, err
			}
		}
		return tr.Register(ctx, role, member)
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
	m := &Transport{BrokerTransport: tr}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		return swallow(tr.WriteLease(ctx, role, tok, l))
	}
	m.writeFenced = func(ctx context.Context, role transport.Role, tok transport.FencingToken, recs ...*kgo.Record) error {
		return swallow(tr.WriteFenced(ctx, role, tok, recs...))
	}
	return m, nil
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

// newOtherRoleProducer writes a lease on the producer of another role this process holds,
// when it holds one, as a transport that keeps one transactional producer per process rather
// than per role would. That producer's epoch says nothing about this role, so the broker
// accepts the lease of a holder a competitor has deposed.
func newOtherRoleProducer(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	var (
		mu    sync.Mutex
		roles []transport.Role // every role this process acquired, in order
	)
	m := &Transport{BrokerTransport: tr}
	m.acquire = func(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
		mu.Lock()
		if !slices.Contains(roles, role) {
			roles = append(roles, role)
		}
		mu.Unlock()
		return tr.AcquireEpoch(ctx, role)
	}
	m.writeLease = func(ctx context.Context, role transport.Role, tok transport.FencingToken, l transport.Lease) error {
		if held, ok := tr.HeldToken(role); !ok || held != tok {
			return notHeld(role)
		}
		mu.Lock()
		others := slices.Clone(roles)
		mu.Unlock()
		for _, other := range others {
			otherTok, ok := tr.HeldToken(other)
			if other == role || !ok {
				continue
			}
			rec, err := leaseRecord(ctx, tr, role, tok, l)
			if err != nil {
				return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
			}
			err = tr.WriteFenced(ctx, other, otherTok, rec)
			var te *transport.Error
			if errors.As(err, &te) {
				te.Role = role
			}
			return err
		}
		return tr.WriteLease(ctx, role, tok, l)
	}
	return m, nil
}
