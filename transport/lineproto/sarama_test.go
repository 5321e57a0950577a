package lineproto_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/lineproto/lineprototest"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestSaramaTxnOffsetCommitOnTheWire records what the Sarama adapter's pipeline member sends
// in its TxnOffsetCommit, as the broker (kfake) decodes it: Sarama v1.61.1 at Config.Version
// 3.9 sends version 3 and, through AddOffsetsToTxnWithGroupMetadata (the adapter's default),
// the member id and generation of the session the batch was polled under; through
// AddOffsetsToTxn(offsets, groupID) (--offsets group-id) generation -1 and no member id, which
// the group coordinator does not fence (KIP-447). It fails if a Sarama release changes either
// (docs/clients.md, "Pipelines through Sarama").
func TestSaramaTxnOffsetCommitOnTheWire(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv := testenv.Adapter(t, "sarama")
	client, _ := adapters.Lookup("sarama")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type sent struct {
		version    int16
		generation int32
		memberID   string
		group      string
	}
	var mu sync.Mutex
	var seen []sent
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.TxnOffsetCommitRequest)
		mu.Lock()
		seen = append(seen, sent{req.Version, req.Generation, req.MemberID, req.Group})
		mu.Unlock()
		return nil, nil, false // kfake answers it
	})
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		// wantMember: the batch's member id and generation are sent; else none.
		wantMember bool
	}{
		{"group metadata (default)", nil, true},
		{"group id alone (--offsets group-id)", client.GroupIDOnlyArgs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte(tc.name)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			group := "g-" + strings.Fields(tc.name)[2]
			cfg := pipeline.Config{Conn: transport.NewConfig(addr, 10*time.Second), Group: group, Input: "in", Output: "out",
				TransactionalID: group + "/a", SessionTimeout: 2 * time.Second}
			m, err := lineproto.StartMember(ctx, append(slices.Clone(argv), tc.args...), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			b := lineprototest.PollBatch(ctx, t, m)
			mu.Lock()
			seen = nil
			mu.Unlock()
			if res := m.Transact(ctx, b, []pipeline.Output{{Partition: 0, Value: []byte("x")}}); res.Outcome != transport.OK {
				t.Fatalf("transact: %v (%v)", res.Outcome, res.Err)
			}
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			want := sent{version: 3, generation: -1, group: group}
			if tc.wantMember {
				want.generation, want.memberID = b.Generation, b.MemberID
			}
			if len(got) != 1 || got[0] != want || b.Generation < 1 || b.MemberID == "" {
				t.Fatalf("TxnOffsetCommit requests %+v for a batch polled as member %q, generation %d; want one, %+v", got, b.MemberID, b.Generation, want)
			}
			t.Logf("TxnOffsetCommit v%d, generation %d, member id %q", got[0].version, got[0].generation, got[0].memberID)
		})
	}
}
