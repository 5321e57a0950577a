package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport"
)

// PartitionTransactionalID is the transactional id of input partition p's producer when
// Config.TxnIDPerPartition is set: prefix (Config.TransactionalID) and the partition.
func PartitionTransactionalID(prefix string, p int32) string {
	return prefix + "-" + strconv.Itoa(int(p))
}

// errPartitionLost refuses a transaction of a partition whose producer was fenced since the
// member was last assigned it: another member's producer of the same transactional id took
// over, so the partition is no longer this member's.
var errPartitionLost = errors.New("the partition's producer was fenced: another member owns it")

// errMixedBatch refuses a batch of several input partitions when each has its own producer:
// one transaction has one producer.
var errMixedBatch = errors.New("a transactional id per input partition needs a batch of one partition")

// partitionProducers are the plain member's transactional producers under
// Config.TxnIDPerPartition, the older style of exactly-once (Kafka Streams' exactly_once
// before KIP-447, Flink's sink): one producer per input partition, all members using the same
// transactional id for it. A member assigned a partition makes its producer at once
// (InitProducerId bumps the id's epoch), which fences the previous owner's producer and
// aborts its open transaction, before the member fetches where to start; a revoked or lost
// partition's producer is closed; a fenced one is dropped and the partition refused until it
// is assigned again (a member that made it again would fence the new owner in turn).
type partitionProducers struct {
	cfg  Config
	opts []kgo.Opt // every producer's options but its transactional id
	mu   sync.Mutex
	by   map[int32]*kgo.Client
	lost map[int32]bool
}

func newPartitionProducers(cfg Config, opts []kgo.Opt) *partitionProducers {
	return &partitionProducers{cfg: cfg, opts: opts, by: map[int32]*kgo.Client{}, lost: map[int32]bool{}}
}

// assigned makes and initializes the producers of partitions: the fence of their previous
// owners. A producer that cannot be initialized now is made again on first use.
func (ps *partitionProducers) assigned(ctx context.Context, partitions []int32) {
	for _, p := range partitions {
		ps.mu.Lock()
		delete(ps.lost, p)
		if old := ps.by[p]; old != nil {
			old.Close()
		}
		cl, err := ps.make(p)
		if err != nil {
			ps.mu.Unlock()
			continue
		}
		ps.by[p] = cl
		ps.mu.Unlock()
		ictx, cancel := context.WithTimeout(ctx, ps.cfg.Conn.RequestTimeout)
		_, _, err = cl.ProducerID(ictx)
		cancel()
		if err != nil {
			ps.cfg.Conn.Logger.Warn("pipeline member: init the producer of an assigned partition", "partition", p, "err", err)
		}
	}
}

// revoked closes the producers of partitions.
func (ps *partitionProducers) revoked(partitions []int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range partitions {
		if cl := ps.by[p]; cl != nil {
			cl.Close()
			delete(ps.by, p)
		}
	}
}

// get returns partition p's producer, making it if the member has none (a producer that
// failed is made again), unless p's producer was fenced since it was assigned.
func (ps *partitionProducers) get(p int32) (*kgo.Client, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.lost[p] {
		return nil, fmt.Errorf("%w: input partition %d: %w", ErrFenced, p, errPartitionLost)
	}
	if cl := ps.by[p]; cl != nil {
		return cl, nil
	}
	cl, err := ps.make(p)
	if err != nil {
		return nil, err
	}
	ps.by[p] = cl
	return cl, nil
}

// fenced drops partition p's producer cl, fenced, and refuses p until it is assigned again.
func (ps *partitionProducers) fenced(p int32, cl *kgo.Client) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by[p] == cl {
		delete(ps.by, p)
		ps.lost[p] = true
	}
	cl.Close()
}

// drop closes partition p's producer cl, which cannot go on: the next use makes another.
func (ps *partitionProducers) drop(p int32, cl *kgo.Client) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by[p] == cl {
		delete(ps.by, p)
	}
	cl.Close()
}

func (ps *partitionProducers) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for p, cl := range ps.by {
		cl.Close()
		delete(ps.by, p)
	}
}

// make returns a new producer of partition p; the caller holds mu.
func (ps *partitionProducers) make(p int32) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(ps.opts, kgo.TransactionalID(PartitionTransactionalID(ps.cfg.TransactionalID, p)))...)
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Err: err, Stage: transport.StageLocal}
	}
	return cl, nil
}
