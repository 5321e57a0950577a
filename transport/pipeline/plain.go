package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
)

// plain is a member on kgo's consumer and transactional producer that runs the loop the Java
// client's users write: a rebalance waits while polled records are being processed
// (kgo.BlockRebalanceOnPoll, as a rebalance waits for poll() in kafka-clients), and the
// member itself sends AddOffsetsToTxn and TxnOffsetCommit with the member id and generation
// its batch was polled under (sendOffsetsToTransaction(offsets, groupMetadata)). A member
// whose generation was superseded meanwhile (it was frozen past its session or rebalance
// timeout) has its offsets refused and aborts.
//
// Under the classic protocol the metadata a batch carries is that of the member's last
// assignment kgo handed it (OnPartitionsAssigned), not kgo's GroupMetadata: kgo stores a new
// member id and generation as soon as a JoinGroup is answered, while the partitions the new
// generation takes away are invalidated only later, in a revoke that waits for the member's
// polled batch, so GroupMetadata can name a generation under which the member does not own
// the records it polled (docs/regressions.md, "rejoin-stale-generation": the rejoin after a
// JoinGroup answered UNKNOWN_MEMBER_ID). kafka-clients has no such window: the generation moves only
// inside poll(), which drops revoked partitions' records before it returns. Neither has kgo under
// KIP-848, where the batch carries GroupMetadata read after the poll: kgo gives its whole
// assignment up before it joins again after a fence, and the coordinator keeps a member's epoch
// while a partition it takes away is still listed by the member (same entry,
// TestKgoConsumerFenceDropsOldAssignment).
type plain struct {
	cfg Config
	cl  *kgo.Client
	// flaw is the mutant's name (Mutants); "" for the real member.
	flaw string
	// inputID is the input topic's id, which TxnOffsetCommit v6 (KIP-1319) names the topic
	// by; looked up once.
	inputID [16]byte
	// producers are the producers per input partition under Config.TxnIDPerPartition (cl is
	// then the consumer only); nil otherwise: cl produces.
	producers *partitionProducers
	// assigned is the member id and generation of the last assignment kgo handed the member
	// (classic protocol): what its batches are stamped with. Nil before the first.
	assigned atomic.Pointer[groupMeta]
}

// groupMeta is a member id and generation.
type groupMeta struct {
	memberID   string
	generation int32
}

func newPlain(_ context.Context, cfg Config, flaw string) (*plain, error) {
	m := &plain{cfg: cfg, flaw: flaw}
	opts, err := clientOpts(cfg)
	if cfg.TxnIDPerPartition {
		// The member's client consumes; each input partition's producer is its own.
		var conn []kgo.Opt
		if conn, err = transport.ClientOptions(cfg.Conn); err == nil {
			m.producers = newPartitionProducers(cfg, append(slices.Clone(conn), producerOpts(cfg)...))
			opts = append(conn, groupOpts(cfg)...)
		}
	}
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.BlockRebalanceOnPoll())
	// What the member does on an assignment, before kgo fetches where to start.
	var onAssigned []func(context.Context, *kgo.Client, map[string][]int32)
	if cfg.Protocol == ProtocolClassic {
		// kgo calls OnPartitionsAssigned at every session's start, once the partitions the
		// session took away are revoked, with the session's member id and generation stored;
		// with the callback registered it waits for the polled batch (BlockRebalanceOnPoll),
		// so the generation recorded here cannot move while a batch is transacted.
		onAssigned = append(onAssigned, func(_ context.Context, cl *kgo.Client, _ map[string][]int32) {
			id, gen := cl.GroupMetadata()
			m.assigned.Store(&groupMeta{memberID: id, generation: gen})
		})
	}
	var adjust func(map[int32]kgo.Offset)
	switch flaw {
	case mutantReadUncommitted:
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted())) // the last one counts
	case mutantUnstableFetch:
		var fetch func(context.Context, *kgo.Client, map[string][]int32)
		fetch, adjust = unstableStart(cfg)
		onAssigned = append(onAssigned, fetch)
	}
	if ps := m.producers; ps != nil {
		onAssigned = append(onAssigned, func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
			ps.assigned(ctx, assigned[cfg.Input])
			cl.ResumeFetchPartitions(map[string][]int32{cfg.Input: assigned[cfg.Input]})
		})
		gone := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { ps.revoked(lost[cfg.Input]) }
		opts = append(opts, kgo.OnPartitionsRevoked(gone), kgo.OnPartitionsLost(gone))
	}
	if len(onAssigned) > 0 {
		opts = append(opts, kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
			for _, f := range onAssigned {
				f(ctx, cl, assigned)
			}
		}))
	}
	made := newMadeClient()
	opts = append(opts, reportStarts(cfg, made, adjust))
	if m.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Err: err, Stage: transport.StageLocal}
	}
	made.set(m.cl)
	return m, nil
}

// producer returns the client that produces b's transaction: the member's own, or under
// Config.TxnIDPerPartition the producer of b's one input partition.
func (m *plain) producer(b Batch) (*kgo.Client, error) {
	if m.producers == nil {
		return m.cl, nil
	}
	p := b.Records[0].Partition
	for _, r := range b.Records {
		if r.Partition != p {
			return nil, errMixedBatch
		}
	}
	return m.producers.get(p)
}

// Poll polls; an empty batch lets a waiting rebalance go on at once, a batch holds it until
// Transact ends. Under the classic protocol the batch carries the metadata of the member's
// last assignment (see plain).
func (m *plain) Poll(ctx context.Context) (Batch, error) {
	b, err := poll(ctx, m.cl, m.cfg.MaxPoll)
	if a := m.assigned.Load(); a != nil && m.flaw != mutantStampAfterPoll {
		b.MemberID, b.Generation = a.memberID, a.generation
	}
	if len(b.Records) == 0 {
		m.cl.AllowRebalance()
	}
	return b, err
}

func (m *plain) Transact(ctx context.Context, b Batch, outs []Output) (res Result) {
	defer m.cl.AllowRebalance()
	defer func() {
		if res.Outcome != transport.OK && m.flaw != mutantNoRewind && !m.rewind(ctx, b) {
			res.Restart = true
		}
	}()
	if len(outs) == 0 {
		// kgo sends EndTxn only for a transaction it knows has partitions; the offsets this
		// member adds itself are not among them, so a commit would silently leave the
		// transaction open.
		return Result{Outcome: transport.Fail, Err: errNoOutput}
	}
	prod, err := m.producer(b)
	if err != nil {
		return Result{Outcome: transport.Fail, Err: err}
	}
	if m.producers != nil {
		// A producer fenced, or failed for good, is not used again: the partition waits for
		// its next assignment, or the next use makes another.
		defer func() {
			switch p := b.Records[0].Partition; {
			case errors.Is(res.Err, ErrFenced):
				// The partition is another member's now: stop reading it until it is
				// assigned again, rather than poll and refuse its records in a loop
				// until the group tells this member it lost it.
				m.producers.fenced(p, prod)
				m.cl.PauseFetchPartitions(map[string][]int32{m.cfg.Input: {p}})
			case res.Restart:
				m.producers.drop(b.Records[0].Partition, prod)
				res.Restart = false
			}
		}()
	}
	if err := prod.BeginTransaction(); err != nil {
		return Result{Outcome: transport.Fail, Err: err, Restart: true}
	}
	if err := prod.ProduceSync(ctx, records(outs)...).FirstErr(); err != nil {
		return m.abort(ctx, prod, transport.FencingToken{}, err)
	}
	tok := token(ctx, prod)
	m.cfg.pause(ctx, PointAfterProduce)
	if m.flaw == mutantOffsetsOutsideTxn {
		m.cfg.pause(ctx, PointBeforeCommit)
		return m.commitThenOffsets(ctx, prod, tok, b)
	}
	if err := m.sendOffsets(ctx, prod, tok, b); err != nil {
		return m.abort(ctx, prod, tok, err)
	}
	m.cfg.pause(ctx, PointBeforeCommit)
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if errors.Is(err, kerr.OperationNotAttempted) { // kgo did not send the commit
			return m.abort(ctx, prod, tok, err)
		}
		// kgo's documented answer to a commit of unknown outcome: abort, which bumps the
		// epoch and fences the transaction if it is still open. Whether it had committed
		// stays unknown.
		_ = prod.EndTransaction(ctx, kgo.TryAbort)
		return Result{Outcome: transport.Unknown, Token: tok, Err: err, Restart: true}
	}
	return Result{Outcome: transport.OK, Token: tok}
}

// abort ends the transaction with an abort after cause. No commit was asked, so the
// transaction cannot commit whatever the abort does: the outcome is Fail. An abort that fails
// twice (kgo documents that a retry heals a failed one) leaves the client in its transaction:
// the member must be restarted.
func (m *plain) abort(ctx context.Context, prod *kgo.Client, tok transport.FencingToken, cause error) Result {
	if tok.IsZero() {
		tok = token(ctx, prod)
	}
	res := Result{Outcome: transport.Fail, Token: tok}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Conn.RequestTimeout)
	defer cancel()
	if err := prod.EndTransaction(actx, kgo.TryAbort); err != nil {
		if err2 := prod.EndTransaction(actx, kgo.TryAbort); err2 != nil {
			cause = errors.Join(cause, fmt.Errorf("abort: %w", err2))
			res.Restart = true
		}
	}
	if isFencing(cause) {
		cause = fmt.Errorf("%w: %w", ErrFenced, cause)
	}
	res.Err = cause
	return res
}

// sendOffsets adds the group's offsets to the transaction and commits b's offsets in it with
// b's group metadata.
func (m *plain) sendOffsets(ctx context.Context, prod *kgo.Client, tok transport.FencingToken, b Batch) error {
	txnID := m.cfg.TransactionalID
	if m.producers != nil {
		txnID = PartitionTransactionalID(txnID, b.Records[0].Partition)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID = txnID
	add.ProducerID, add.ProducerEpoch = tok.ProducerID, tok.Epoch
	add.Group = m.cfg.Group
	addResp, err := add.RequestWith(ctx, prod)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = txnID
	req.Group = m.cfg.Group
	req.ProducerID, req.ProducerEpoch = tok.ProducerID, tok.Epoch
	req.MemberID, req.Generation = b.MemberID, b.Generation
	if m.flaw == mutantGroupIDOnly {
		req.MemberID, req.Generation = "", -1
	}
	if m.inputID == ([16]byte{}) {
		topics, err := kadm.NewClient(m.cl).ListTopics(ctx, m.cfg.Input)
		if err == nil {
			err = topics.Error()
		}
		if err != nil {
			return fmt.Errorf("the input topic's id: %w", err)
		}
		m.inputID = topics[m.cfg.Input].ID
	}
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = m.cfg.Input, m.inputID
	offsets := b.Offsets()
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch = p, offsets[p], -1
		if m.flaw == mutantOffByOne {
			tp.Offset--
		}
		t.Partitions = append(t.Partitions, tp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, prod)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var errs []error
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				topic := rt.Topic
				if topic == "" { // v6 answers name the topic by its id only
					topic = m.cfg.Input
				}
				errs = append(errs, fmt.Errorf("TxnOffsetCommit %s[%d]: %w", topic, rp.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// commitThenOffsets is the offsets-outside-txn mutant's end of a transaction: it commits the
// outputs, then the offsets with a plain OffsetCommit (with the group's metadata, as a
// consumer's own commit carries).
func (m *plain) commitThenOffsets(ctx context.Context, prod *kgo.Client, tok transport.FencingToken, b Batch) Result {
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		_ = prod.EndTransaction(ctx, kgo.TryAbort)
		return Result{Outcome: transport.Unknown, Token: tok, Err: err}
	}
	offsets := map[int32]kgo.EpochOffset{}
	for p, o := range b.Offsets() {
		offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	// The outputs committed whatever becomes of the offsets: the mutant does not look.
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.cfg.Input: offsets}, nil)
	return Result{Outcome: transport.OK, Token: tok}
}

// rewind sets the position of b's partitions back to the group's committed offsets, fetched
// stable: the records of a transaction that did not commit are polled again. A partition
// with no committed offset goes back to its first record of b (the group starts at the
// beginning). It has its own bound, the request timeout, since the caller's context may be
// what ended the transaction. It reports false when the offsets could not be fetched: the
// position is then past b, and the member must be restarted (a new member starts at the
// committed offsets) rather than skip b.
func (m *plain) rewind(ctx context.Context, b Batch) bool {
	first := map[int32]int64{}
	for _, r := range b.Records {
		if o, ok := first[r.Partition]; !ok || r.Offset < o {
			first[r.Partition] = r.Offset
		}
	}
	parts := slices.Sorted(maps.Keys(first))
	began := time.Now()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Conn.RequestTimeout)
	defer cancel()
	at, err := committed(rctx, m.cl, m.cfg.Group, m.cfg.Input, parts, m.flaw != mutantUnstableFetch)
	if err != nil {
		m.cfg.Conn.Logger.Warn("pipeline member: cannot fetch the committed offsets to rewind to", "group", m.cfg.Group, "err", err)
		return false
	}
	set, starts := map[int32]kgo.EpochOffset{}, map[int32]int64{}
	for _, p := range parts {
		o, ok := at[p]
		if !ok {
			o = first[p]
		}
		set[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		starts[p] = o
	}
	f := Fetch{Starts: starts, Rewind: true, Began: began}
	f.MemberID, f.Generation = m.cl.GroupMetadata()
	m.cfg.fetched(f)
	m.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{m.cfg.Input: set})
	return true
}

// Close leaves the group without waiting for a polled batch to be transacted: with
// BlockRebalanceOnPoll a plain Close would wait for it forever.
func (m *plain) Close() {
	m.cl.CloseAllowingRebalance()
	if m.producers != nil {
		m.producers.close()
	}
}

// unstableStart is the unstable-fetch mutant's start on newly assigned partitions: kgo always
// fetches stable, so the mutant fetches the offsets itself, without require_stable, when it is
// assigned partitions (before kgo's own fetch), and starts there instead of where kgo's
// fetch says, as a client that fetched unstable would. It returns what fetches on an
// assignment, and the adjustment of kgo's starts (see reportStarts).
func unstableStart(cfg Config) (func(context.Context, *kgo.Client, map[string][]int32), func(map[int32]kgo.Offset)) {
	var mu sync.Mutex
	taken := map[int32]int64{}
	return func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
			if len(assigned[cfg.Input]) == 0 {
				return
			}
			at, err := committed(ctx, cl, cfg.Group, cfg.Input, assigned[cfg.Input], false)
			if err != nil {
				return // kgo's own offsets, then
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range assigned[cfg.Input] {
				o, ok := at[p]
				if !ok {
					o = -1
				}
				taken[p] = o
			}
		}, func(offsets map[int32]kgo.Offset) {
			mu.Lock()
			defer mu.Unlock()
			for p := range offsets {
				switch o, ok := taken[p]; {
				case !ok:
				case o < 0:
					offsets[p] = kgo.NewOffset().AtStart()
				default:
					offsets[p] = kgo.NewOffset().At(o)
				}
				delete(taken, p)
			}
		}
}
