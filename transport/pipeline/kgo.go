package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport"
)

// clientOpts returns the options both members' clients share: the connection's, the group's
// and the producer's with the member's transactional id.
func clientOpts(cfg Config) ([]kgo.Opt, error) {
	opts, err := transport.ClientOptions(cfg.Conn)
	if err != nil {
		return nil, err
	}
	opts = append(opts, groupOpts(cfg)...)
	return append(opts, append(producerOpts(cfg), kgo.TransactionalID(cfg.TransactionalID))...), nil
}

// groupOpts are a member's consumer options: read committed, no auto-commit (offsets are
// committed only in the transactions), the group's timings and protocol. kgo always fetches a
// group's offsets stable when it is assigned partitions.
func groupOpts(cfg Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Input),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		// kgo's default (3 s) would outlast a short session.
		kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
	}
	if cfg.Protocol == ProtocolConsumer {
		// KIP-848: the coordinator assigns; kgo needs a balancer the server side knows.
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	return opts
}

// producerOpts are a member's transactional producer's options but its transactional id:
// the transaction timeout, output partition = input partition.
func producerOpts(cfg Config) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionTimeout(cfg.Conn.LeaseDuration),
		kgo.DefaultProduceTopic(cfg.Output),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
}

// poll returns at most max records cl polled, and kgo's group metadata after the poll (the
// plain member stamps its batches with its last assignment's instead: see plain).
func poll(ctx context.Context, cl *kgo.Client, max int) (Batch, error) {
	fs := cl.PollRecords(ctx, max)
	if fs.IsClientClosed() {
		return Batch{}, kgo.ErrClientClosed
	}
	var b Batch
	var errs []error
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) {
		b.Records = append(b.Records, Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
	})
	b.MemberID, b.Generation = cl.GroupMetadata()
	switch {
	case len(b.Records) > 0:
		return b, nil
	case len(errs) > 0:
		return b, errors.Join(errs...)
	case ctx.Err() != nil:
		return b, ctx.Err()
	}
	return b, nil
}

// madeClient is the member's client once New has it. The option that reports a member's
// fetches is given to kgo before the client exists, and kgo may join the group and fetch its
// offsets before New's goroutine stores the client (a stall of that goroutine between
// NewClient's return and the store is enough): the report waits for the store.
type madeClient struct {
	cl    *kgo.Client
	ready chan struct{}
}

func newMadeClient() *madeClient { return &madeClient{ready: make(chan struct{})} }

// set stores cl, once, and wakes the reports waiting for it.
func (m *madeClient) set(cl *kgo.Client) {
	m.cl = cl
	close(m.ready)
}

// wait returns the client once set, or nil when ctx ends first.
func (m *madeClient) wait(ctx context.Context) *kgo.Client {
	select {
	case <-m.ready:
		return m.cl
	case <-ctx.Done():
		return nil
	}
}

// reportStarts returns the option that tells cfg.Fetched where the member starts after its
// client fetched the group's offsets on an assignment: kgo's answer, changed first by adjust
// when not nil (a mutant's). kgo calls it from its own goroutines once the fetch is answered,
// before it reads from there; made gives the client, for the group metadata, once New has
// stored it (kgo's context ends if the client is closed first).
func reportStarts(cfg Config, made *madeClient, adjust func(map[int32]kgo.Offset)) kgo.Opt {
	return kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
		in := offsets[cfg.Input]
		if adjust != nil {
			adjust(in)
		}
		if len(in) == 0 || cfg.Fetched == nil {
			return offsets, nil
		}
		// A partition without a committed offset starts where the reset offset says: the
		// input's start, which is 0 (the input is never truncated).
		f := Fetch{Starts: map[int32]int64{}, Generation: -1}
		for p, o := range in {
			f.Starts[p] = max(0, o.EpochOffset().Offset)
		}
		if cl := made.wait(ctx); cl != nil {
			f.MemberID, f.Generation = cl.GroupMetadata()
		}
		cfg.Fetched(f)
		return offsets, nil
	})
}

// records returns outs as records of the output topic.
func records(outs []Output) []*kgo.Record {
	rs := make([]*kgo.Record, len(outs))
	for i, o := range outs {
		rs[i] = &kgo.Record{Partition: o.Partition, Key: o.Key, Value: o.Value}
	}
	return rs
}

// token returns cl's producer (id, epoch), or zero when it has none.
func token(ctx context.Context, cl *kgo.Client) transport.FencingToken {
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil || id < 0 {
		return transport.FencingToken{}
	}
	return transport.FencingToken{ProducerID: id, Epoch: epoch}
}

// isFencing reports whether err says the member was fenced: by the group (its generation or
// member epoch superseded, or the coordinator no longer knows it) or by its producer's epoch.
func isFencing(err error) bool {
	for _, e := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.FencedInstanceID,
		kerr.StaleMemberEpoch, kerr.FencedMemberEpoch, kerr.ProducerFenced, kerr.InvalidProducerEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// committed fetches the group's committed offsets of the input partitions, stable (KIP-447): an
// answer that a transaction committing offsets for a partition is still open is asked again
// until it is not, or ctx ends. A partition without a committed offset is absent. Without
// stable (a mutant) it takes what the coordinator has committed now.
func committed(ctx context.Context, cl *kgo.Client, group, topic string, partitions []int32, stable bool) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	fctx := ctx
	if stable {
		fctx = kadm.RequireStable(ctx)
	}
	for {
		resp, err := adm.FetchOffsets(fctx, group)
		if err == nil {
			out := map[int32]int64{}
			unstable := false
			for _, p := range partitions {
				o, ok := resp.Lookup(topic, p)
				switch {
				case !ok:
				case errors.Is(o.Err, kerr.UnstableOffsetCommit):
					unstable = true
				case o.Err != nil:
					return nil, o.Err
				case o.At >= 0:
					out[p] = o.At
				}
			}
			if !unstable {
				return out, nil
			}
		} else if !errors.Is(err, kerr.UnstableOffsetCommit) && !kerr.IsRetriable(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
