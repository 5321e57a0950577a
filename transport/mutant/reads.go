package mutant

import (
	"context"
	"fmt"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newReadUncommitted reads at read_uncommitted, up to the high watermark, as a scan written
// with a consumer's defaults would: a read returns the records of transactions that are still
// open and of transactions that will be (or were) aborted, a fenced holder's among them.
func newReadUncommitted(_ context.Context, tr *transport.BrokerTransport) (*Transport, error) {
	cfg := tr.Config()
	cl, err := kgo.NewClient(baseOpts(cfg)...)
	if err != nil {
		return nil, err
	}
	s := &uncommittedScan{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}
	m := &Transport{BrokerTransport: tr, close: func(context.Context) error { cl.Close(); return nil }}
	m.readRole = func(ctx context.Context, role transport.Role) (transport.RoleRecords, error) {
		partitions, err := tr.EnsureTopic(ctx, cfg.Topic, cfg.TopicPartitions)
		if err != nil {
			return transport.RoleRecords{}, readErr(role, err)
		}
		recs, err := s.scan(ctx, cfg.Topic, transport.PartitionFor(role, partitions))
		if err != nil {
			return transport.RoleRecords{}, readErr(role, err)
		}
		var out transport.RoleRecords
		for _, r := range recs {
			if k, err := transport.DecodeKey(r.Key); err != nil || k != role {
				continue
			}
			v, err := transport.DecodeValue(r.Value)
			if err != nil {
				return transport.RoleRecords{}, readErr(role, fmt.Errorf("offset %d: %w", r.Offset, err))
			}
			switch v.Kind {
			case transport.KindRegistration:
				out.Registrations = append(out.Registrations, transport.Registration{Member: v.Member, JoinSeq: r.Offset})
			case transport.KindLease:
				out.Leases = append(out.Leases, transport.LeaseRecord{Lease: v.Lease, Token: v.Token, Offset: r.Offset})
			}
		}
		return out, nil
	}
	m.readPart = func(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error) {
		recs, err := s.scan(ctx, topic, partition)
		if err != nil {
			return nil, readErr("", err)
		}
		return recs, nil
	}
	return m, nil
}

func readErr(role transport.Role, err error) error {
	return &transport.Error{Op: transport.OpRead, Role: role, Kind: transport.ErrClient, Stage: transport.StageSend, Err: err}
}

// uncommittedScan is read-uncommitted's scan: the real one's, with the isolation level and
// the end offset changed.
type uncommittedScan struct {
	cfg transport.Config
	cl  *kgo.Client
	adm *kadm.Client
}

// scan reads partition p of topic at read_uncommitted from the log start to the high
// watermark captured first.
func (s *uncommittedScan) scan(ctx context.Context, topic string, p int32) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	md, err := s.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("metadata of %s: %v", topic, td.Err)
	}
	pd, ok := td.Partitions[p]
	if !ok || pd.Err != nil || pd.Leader < 0 {
		return nil, fmt.Errorf("no leader for %s/%d", topic, p)
	}
	starts, err := s.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := s.adm.ListEndOffsets(ctx, topic) // the bug, part one: the high watermark, not the LSO
	if err != nil {
		return nil, err
	}
	start, ok1 := starts.Lookup(topic, p)
	end, ok2 := ends.Lookup(topic, p)
	if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
		return nil, fmt.Errorf("offsets of %s/%d: %v, %v", topic, p, start.Err, end.Err)
	}
	var out []*kgo.Record
	for offset := start.Offset; offset < end.Offset; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = int32(s.cfg.FetchMaxWait / time.Millisecond)
		req.MinBytes = 1
		req.MaxBytes = s.cfg.FetchPartitionMax
		req.IsolationLevel = 0 // the bug, part two: read_uncommitted
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, offset, -1, -1
		rp.PartitionMaxBytes = s.cfg.FetchPartitionMax
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, s.cl.Broker(int(pd.Leader)))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, p, offset, err)
		}
		next := offset
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				part := &resp.Topics[i].Partitions[j]
				if part.Partition != p {
					continue
				}
				fp, n := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
					Offset: offset, IsolationLevel: kgo.ReadUncommitted(), Topic: topic, Partition: p,
				}, part, kgo.DefaultDecompressor(), nil)
				if fp.Err != nil {
					return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, p, offset, fp.Err)
				}
				for _, r := range fp.Records {
					if r.Offset < end.Offset {
						out = append(out, r)
					}
				}
				next = n
			}
		}
		if next <= offset {
			select { // nothing new yet: ask again
			case <-ctx.Done():
				return nil, fmt.Errorf("fetch %s/%d stalled at offset %d before %d: %w", topic, p, offset, end.Offset, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		offset = next
	}
	return out, nil
}
