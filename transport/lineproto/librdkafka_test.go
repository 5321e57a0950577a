package lineproto_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/lineproto/lineprototest"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestLibrdkafkaPipelineOnTheWire records what the librdkafka adapter's pipeline member sends,
// as the broker (kfake) decodes it, under both group protocols: librdkafka 2.16.0's
// TxnOffsetCommit through send_offsets_to_transaction(offsets, consumer_group_metadata())
// carries the member id and generation (the KIP-848 member epoch under the consumer protocol)
// the batch was polled under, so the group coordinator fences a zombie by them; and every
// OffsetFetch of the group (the assignment's, and the rewind's consumer.committed() after a
// transaction that did not commit) sets require_stable (KIP-447), since the consumer reads
// read_committed. It fails if a librdkafka release changes either (docs/clients.md, "Pipelines
// through librdkafka").
func TestLibrdkafkaPipelineOnTheWire(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv, c := librdkafkaOnKfake(t)
	type commit struct {
		version    int16
		generation int32
		memberID   string
		group      string
	}
	type fetch struct {
		version int16
		stable  bool
	}
	var mu sync.Mutex
	var commits []commit
	var fetches []fetch
	refuse := false // answer the next TxnOffsetCommit UNKNOWN_MEMBER_ID: the transaction fails and rewinds
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.TxnOffsetCommitRequest)
		mu.Lock()
		defer mu.Unlock()
		commits = append(commits, commit{req.Version, req.Generation, req.MemberID, req.Group})
		if !refuse {
			return nil, nil, false // kfake answers it
		}
		refuse = false
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.UnknownMemberID.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.OffsetFetchRequest)
		mu.Lock()
		fetches = append(fetches, fetch{req.Version, req.RequireStable})
		mu.Unlock()
		return nil, nil, false
	})
	addr := c.ListenAddrs()[0]
	cl := inAndOut(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	poll := func(m pipeline.Member) pipeline.Batch {
		t.Helper()
		return lineprototest.PollBatch(ctx, t, m)
	}
	for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
		t.Run(protocol, func(t *testing.T) {
			group := "g-" + protocol
			cfg := pipeline.Config{Conn: transport.NewConfig(addr, 10*time.Second), Group: group, Input: "in", Output: "out",
				TransactionalID: group + "/a", SessionTimeout: 2 * time.Second, Protocol: protocol}
			m, err := lineproto.StartMember(ctx, argv, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("first")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			b := poll(m)
			mu.Lock()
			commits, fetches = nil, nil
			mu.Unlock()
			if res := m.Transact(ctx, b, []pipeline.Output{{Partition: 0, Value: []byte("x")}}); res.Outcome != transport.OK {
				t.Fatalf("transact: %v (%v)", res.Outcome, res.Err)
			}
			mu.Lock()
			got := slices.Clone(commits)
			mu.Unlock()
			if len(got) != 1 || got[0].version < 3 || got[0].generation != b.Generation || got[0].memberID != b.MemberID ||
				got[0].group != group || b.Generation < 1 || b.MemberID == "" {
				t.Fatalf("TxnOffsetCommit requests %+v for a batch polled as member %q, generation %d; want one of v3 or later with both", got, b.MemberID, b.Generation)
			}
			t.Logf("TxnOffsetCommit v%d, generation %d, member id %q", got[0].version, got[0].generation, got[0].memberID)

			// A transaction whose offsets the group refuses: the member aborts and rewinds with
			// consumer.committed(), an OffsetFetch that must be stable.
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("second")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			b = poll(m)
			mu.Lock()
			fetches, refuse = nil, true
			mu.Unlock()
			res := m.Transact(ctx, b, []pipeline.Output{{Partition: 0, Value: []byte("y")}})
			mu.Lock()
			fs := slices.Clone(fetches)
			mu.Unlock()
			if res.Outcome != transport.Fail || res.Err == nil || res.Restart || len(fs) == 0 {
				t.Fatalf("transact with its offsets refused: %v (%v), restart %v, %d OffsetFetch during it; want fail, kind fenced, no restart, a rewind's fetch", res.Outcome, res.Err, res.Restart, len(fs))
			}
			for _, f := range fs {
				if f.version < 7 || !f.stable {
					t.Fatalf("the rewind's OffsetFetch requests %+v; want v7 or later with require_stable", fs)
				}
			}
			t.Logf("rewind: %v; OffsetFetch %+v", res.Err, fs)
			if again := poll(m); again.Records[0].Offset != b.Records[0].Offset {
				t.Fatalf("after the rewind the member polled offset %d; want %d again", again.Records[0].Offset, b.Records[0].Offset)
			}
		})
	}
}

// librdkafkaOnKfake is the librdkafka member's wire tests' setup: the adapter and a one-broker
// kfake with the pipeline suite's group settings, closed when the test ends.
func librdkafkaOnKfake(t *testing.T) ([]string, *kfake.Cluster) {
	t.Helper()
	argv := testenv.Adapter(t, "librdkafka")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return argv, c
}

// inAndOut creates the one-partition topics "in" and "out" on the cluster at addr and returns
// a client of it that produces to the partition a record names; it closes when the test ends.
func inAndOut(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, topic := range []string{"in", "out"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}
