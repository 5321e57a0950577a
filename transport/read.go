package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicInfo is what reads and writes need to know of a topic.
type topicInfo struct {
	id         [16]byte
	partitions int32
}

// coordinationTopic returns the coordination topic, creating it on first use.
func (t *BrokerTransport) coordinationTopic(ctx context.Context, op Op, role Role) (*topicInfo, error) {
	// Once the topic is known no request is made, so no deadline is needed: its timer was a
	// cost every lease write paid.
	if info := t.knownTopic(t.cfg.Topic); info != nil {
		return info, nil
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	info, err := t.ensureTopic(ctx, t.cfg.Topic, t.cfg.TopicPartitions)
	if err != nil {
		kind := ErrAdmin
		if errors.Is(err, ErrInvalidConfig) {
			kind = ErrInvalidConfig
		}
		return nil, &Error{Op: op, Role: role, Kind: kind, Stage: StageLocal, Err: err}
	}
	return info, nil
}

// EnsureTopic creates topic with the given partition count (and the configured replication)
// unless it exists, and returns its partition count. fencecheck's workload uses it for the
// work topic. Errors wrap ErrAdmin.
func (t *BrokerTransport) EnsureTopic(ctx context.Context, topic string, partitions int32) (int32, error) {
	if err := t.checkOpen(OpStart, ""); err != nil {
		return 0, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	info, err := t.ensureTopic(ctx, topic, partitions)
	if err != nil {
		return 0, &Error{Op: OpStart, Kind: ErrAdmin, Stage: StageSend, Err: err}
	}
	return info.partitions, nil
}

// knownTopic returns what ensureTopic cached of topic, or nil.
func (t *BrokerTransport) knownTopic(topic string) *topicInfo {
	t.topicsMu.Lock()
	defer t.topicsMu.Unlock()
	return t.topics[topic]
}

// ensureTopic creates topic if needed and caches its id and partition count. It asks first
// whether the topic exists, so a process that only reads never needs the controller (which
// may be the broker a fault took away); "already exists" is success too: another process may
// have created it meanwhile.
func (t *BrokerTransport) ensureTopic(ctx context.Context, topic string, partitions int32) (*topicInfo, error) {
	t.topicsMu.Lock()
	defer t.topicsMu.Unlock()
	if info := t.topics[topic]; info != nil {
		return info, nil
	}
	if md, err := t.adm.Metadata(ctx, topic); err == nil {
		if d, ok := md.Topics[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
			info := &topicInfo{id: d.ID, partitions: int32(len(d.Partitions))}
			t.topics[topic] = info
			return info, nil
		}
	}
	resp, err := t.adm.CreateTopic(ctx, partitions, t.cfg.TopicReplication, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("create topic %q: %w", topic, err)
	}
	info, err := t.describeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	t.topics[topic] = info
	return info, nil
}

// describeTopic reads a topic's id and partition count, waiting out the moment after creation
// when brokers do not know the topic yet.
func (t *BrokerTransport) describeTopic(ctx context.Context, topic string) (*topicInfo, error) {
	for {
		md, err := t.adm.Metadata(ctx, topic)
		if err == nil {
			d, ok := md.Topics[topic]
			switch {
			case !ok:
				err = kerr.UnknownTopicOrPartition
			case d.Err != nil:
				err = d.Err
			case len(d.Partitions) == 0:
				return nil, fmt.Errorf("%w: topic %q reports no partition", ErrInvalidConfig, topic)
			default:
				return &topicInfo{id: d.ID, partitions: int32(len(d.Partitions))}, nil
			}
		}
		if perr := pause(ctx, 50*time.Millisecond); perr != nil {
			return nil, fmt.Errorf("describe topic %q: %w (last answer: %v)", topic, perr, err)
		}
	}
}

// ReadRoleRecords returns role's registrations and leases, in offset order, as committed: it
// scans the role's partition at read_committed from the log start to the last stable offset
// taken when the scan starts, and does not wait for records appended meanwhile. Records whose
// key does not decode or names another role are dropped: they belong to other writers.
//
// Errors: ErrClient when the metadata read, the offset lookup or a fetch fails; ErrRecord
// when a record of role does not decode; ErrInvalidConfig when the topic has no partition.
func (t *BrokerTransport) ReadRoleRecords(ctx context.Context, role Role) (RoleRecords, error) {
	if err := t.checkOpen(OpRead, role); err != nil {
		return RoleRecords{}, err
	}
	info, err := t.coordinationTopic(ctx, OpRead, role)
	if err != nil {
		return RoleRecords{}, err
	}
	recs, err := t.scan(ctx, t.cfg.Topic, info, PartitionFor(role, info.partitions))
	if err != nil {
		return RoleRecords{}, &Error{Op: OpRead, Role: role, Kind: ErrClient, Stage: StageSend, Err: err}
	}
	var out RoleRecords
	for _, r := range recs {
		if k, err := DecodeKey(r.Key); err != nil || k != role {
			continue
		}
		v, err := DecodeValue(r.Value)
		if err != nil {
			return RoleRecords{}, &Error{Op: OpRead, Role: role, Kind: ErrRecord, Stage: StageSend,
				Err: fmt.Errorf("offset %d: %w", r.Offset, err)}
		}
		switch v.Kind {
		case KindRegistration:
			out.Registrations = append(out.Registrations, Registration{Member: v.Member, JoinSeq: r.Offset})
		case KindLease:
			out.Leases = append(out.Leases, LeaseRecord{Lease: v.Lease, Token: v.Token, Offset: r.Offset})
		}
	}
	return out, nil
}

// ReadPartition returns the committed records of one partition of topic, in offset order,
// with the scan rules of ReadRoleRecords but no decoding. fencecheck's final reads of the
// work topic use it. Errors wrap ErrClient.
func (t *BrokerTransport) ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error) {
	if err := t.checkOpen(OpRead, ""); err != nil {
		return nil, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	t.topicsMu.Lock()
	info := t.topics[topic]
	t.topicsMu.Unlock()
	if info == nil {
		var err error
		if info, err = t.describeTopic(ctx, topic); err != nil {
			return nil, &Error{Op: OpRead, Kind: ErrClient, Stage: StageSend, Err: err}
		}
	}
	recs, err := t.scan(ctx, topic, info, partition)
	if err != nil {
		return nil, &Error{Op: OpRead, Kind: ErrClient, Stage: StageSend, Err: err}
	}
	return recs, nil
}

// scan reads partition p of topic at read_committed from the log start offset to the last
// stable offset captured first. kgo's consumer cannot tell when it has passed the last
// control markers below the LSO, so the scan sends raw fetches and decodes them with
// kgo.ProcessFetchPartition, which drops aborted batches and markers.
func (t *BrokerTransport) scan(ctx context.Context, topic string, info *topicInfo, p int32) ([]*kgo.Record, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	start, err := t.partitionOffset(ctx, topic, p, -2, 0)
	if err != nil {
		return nil, fmt.Errorf("start offset: %w", err)
	}
	end, err := t.partitionOffset(ctx, topic, p, -1, 1)
	if err != nil {
		return nil, fmt.Errorf("last stable offset: %w", err)
	}

	var out []*kgo.Record
	offset := start
	leader := int32(-1)
	for offset < end {
		if leader < 0 {
			if leader, err = t.leaderOf(ctx, topic, p); err != nil {
				return nil, err
			}
		}
		fp, next, err := t.fetch(ctx, leader, topic, info, p, offset)
		if err == nil {
			err = fp.Err
		}
		if err != nil {
			// A moved leader or a lost connection is worth another try within the deadline.
			leader = -1
			if perr := pause(ctx, 50*time.Millisecond); perr != nil {
				return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, p, offset, err)
			}
			continue
		}
		for _, r := range fp.Records {
			if r.Offset >= end {
				break
			}
			out = append(out, r)
		}
		if next <= offset { // nothing new below the LSO yet: ask again
			if err := pause(ctx, 10*time.Millisecond); err != nil {
				return nil, fmt.Errorf("fetch %s/%d stalled at offset %d before %d: %w", topic, p, offset, end, err)
			}
			continue
		}
		offset = next
	}
	return out, nil
}

func (t *BrokerTransport) leaderOf(ctx context.Context, topic string, p int32) (int32, error) {
	md, err := t.adm.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok || pd.Err != nil || pd.Leader < 0 {
		return -1, fmt.Errorf("no leader for %s/%d", topic, p)
	}
	return pd.Leader, nil
}

// partitionOffset returns one offset of partition p of topic, asked of its leader alone:
// timestamp -2 is the log start offset, -1 with isolation 1 (read_committed) the last stable
// offset. kgo routes the request by its metadata cache. kadm lists every partition of the
// topic, asking every broker that leads one: three times the requests of a read on a
// three-broker cluster, which a fleet's looks multiply.
func (t *BrokerTransport) partitionOffset(ctx context.Context, topic string, p int32, timestamp int64, isolation int8) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = p
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.admin)
	if err != nil {
		return 0, fmt.Errorf("%s/%d: %w", topic, p, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != topic || rp.Partition != p {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, fmt.Errorf("%s/%d: %w", topic, p, err)
			}
			return rp.Offset, nil
		}
	}
	return 0, fmt.Errorf("%s/%d: missing from the answer", topic, p)
}

// fetchBatchRoom is what a fetch's request limit allows beyond its partition's: far more than
// the one batch that may cross the partition's limit (a broker answers with at least one
// whole batch, and a batch may be up to message.max.bytes, 1 MiB by default).
const fetchBatchRoom = 64 << 20

func (t *BrokerTransport) fetch(ctx context.Context, leader int32, topic string, info *topicInfo, p int32, offset int64) (kgo.FetchPartition, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(t.cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	// The request's limit is the partition's plus room for the batch that crosses it, so the
	// partition's limit is what cuts a long log: kfake
	// leaves the aborted transactions out of a read_committed answer that the request's limit
	// cut, and its aborted records then read as committed
	// (docs/regressions.md#kfake-deviations, read-committed-aborted-at-fetch-limit).
	req.MaxBytes = int32(min(int64(t.cfg.FetchPartitionMax)+fetchBatchRoom, math.MaxInt32))
	req.IsolationLevel = 1
	req.SessionEpoch = -1 // no fetch session: every request is self-contained
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = info.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = t.cfg.FetchPartitionMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	resp, err := req.RequestWith(ctx, t.admin.Broker(int(leader)))
	if err != nil {
		return kgo.FetchPartition{}, offset, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kgo.FetchPartition{}, offset, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			part := &resp.Topics[i].Partitions[j]
			if part.Partition != p {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         offset,
				IsolationLevel: kgo.ReadCommitted(),
				Topic:          topic,
				Partition:      p,
			}, part, kgo.DefaultDecompressor(), nil)
			return fp, next, nil
		}
	}
	return kgo.FetchPartition{}, offset, fmt.Errorf("fetch response has no %s/%d", topic, p)
}

// Describe asks role's transaction coordinator (DescribeTransactions, KIP-664) which epoch
// holds role now. held is false when the coordinator does not know the transactional id:
// no member ever acquired role. The answer is then confirmed: up to two other brokers are
// asked (FindCoordinator) whether the broker that answered is still the coordinator, because
// a broker cut off from its peers answers from the state it had, naming a deposed holder.
// Brokers that cannot be reached have no say (see confirmCoordinator). The result is
// advisory all the same: a new holder can take role right after the answer, and the fencing
// token, which the broker checks on every write, is the authority.
//
// Errors: ErrAdmin when the coordinator lookup fails or the coordinator reports any other
// fault. A broker that answered while another broker names a different coordinator, or
// none, is a failed lookup: the error wraps kerr.NotCoordinator.
func (t *BrokerTransport) Describe(ctx context.Context, role Role) (FencingToken, bool, error) {
	if err := t.checkOpen(OpDescribe, role); err != nil {
		return FencingToken{}, false, err
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	id := TransactionalID(t.cfg.Topic, role)
	described, err := t.adm.DescribeTransactions(ctx, id)
	fail := func(err error) (FencingToken, bool, error) {
		return FencingToken{}, false, &Error{Op: OpDescribe, Role: role, Kind: ErrAdmin, Stage: StageSend, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	d, ok := described[id]
	var tok FencingToken
	var held bool
	switch {
	case !ok:
		return fail(errors.New("the coordinator's answer does not name the role"))
	case errors.Is(d.Err, kerr.TransactionalIDNotFound):
		// No member ever acquired role: not held, once confirmed.
	case d.Err != nil:
		return fail(d.Err)
	case d.ProducerID >= 0:
		tok, held = FencingToken{ProducerID: d.ProducerID, Epoch: d.ProducerEpoch}, true
	}
	// A broker that lost the coordinator without knowing it answers from its old state, "no
	// holder" included; see confirmCoordinator.
	if t.noConfirm.Load() {
		return tok, held, nil
	}
	if err := t.confirmCoordinator(ctx, id, d.Coordinator); err != nil {
		// Logged with the refused answer: it tells a deposed coordinator's stale answer from a
		// refusal while the coordinator moves.
		t.log.Info("describe: refused the answer of a broker that may not be the coordinator",
			"role", role, "answered_by", d.Coordinator, "held", held, "token", tok.String(), "err", err)
		return fail(err)
	}
	return tok, held, nil
}

// pause waits d, or returns ctx's error if it ends first. It spaces out retries against a
// remote system; it is not used for synchronisation.
func pause(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// WaitStable waits until no transaction is open on partition p of topic: its last stable
// offset has reached its high watermark. A commit is acknowledged before its markers reach the
// partition, so a read right after the writers stopped can miss acknowledged writes; a read
// after WaitStable sees every transaction that was decided. Transactions left open by a dead
// holder end at their timeout (the lease duration), so the wait is bounded by ctx, not by a
// fixed time. Errors wrap ErrClient.
func (t *BrokerTransport) WaitStable(ctx context.Context, topic string, p int32) error {
	if err := t.checkOpen(OpRead, ""); err != nil {
		return err
	}
	fail := func(err error) error { return &Error{Op: OpRead, Kind: ErrClient, Stage: StageSend, Err: err} }
	for {
		// An error the broker calls retriable (a leader moving, whether kgo reports it for the
		// partition or for the request) is asked again; any other ends the wait.
		hw, err := t.partitionOffset(ctx, topic, p, -1, 0)
		if err != nil && !kerr.IsRetriable(err) {
			return fail(fmt.Errorf("high watermark: %w", err))
		}
		lso, lerr := t.partitionOffset(ctx, topic, p, -1, 1)
		if lerr != nil && !kerr.IsRetriable(lerr) {
			return fail(fmt.Errorf("last stable offset: %w", lerr))
		}
		if err == nil && lerr == nil && lso >= hw {
			return nil
		}
		state := fmt.Sprintf("last stable offset %d still below high watermark %d", lso, hw)
		if unknown := errors.Join(err, lerr); unknown != nil {
			state = fmt.Sprintf("offsets not known: %v", unknown)
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return fail(fmt.Errorf("%s/%d: %s: %w", topic, p, state, err))
		}
	}
}
