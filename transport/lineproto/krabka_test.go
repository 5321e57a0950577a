package lineproto_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// TestKrabkaRawSnappyQuirk shows a finding in krabka 0.7.1 (docs/findings.md): its
// krabka-compression 0.7.0 decodes only xerial-framed snappy, while franz-go writes a snappy
// batch as one raw block (which franz-go and kafka-clients read). A
// krabka consumer decodes a Fetch answer whole, so every poll of a partition holding such a batch
// fails. The control: the same records uncompressed, polled by another member, arrive. It fails
// once a krabka release reads raw snappy: then the finding's row and the suite's uncompressed
// input (pipelinetest, workload/pipeline) can be revisited.
func TestKrabkaRawSnappyQuirk(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv := testenv.Adapter(t, "krabka")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Values that compress well: franz-go keeps a batch uncompressed when snappy does not
	// shrink it.
	value := bytes.Repeat([]byte("fencecheck "), 100)
	poll := func(t *testing.T, codec kgo.CompressionCodec, name string) (pipeline.Batch, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(name+"-in"), kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		for _, topic := range []string{name + "-in", name + "-out"} {
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
		}
		var recs []*kgo.Record
		for range 5 {
			recs = append(recs, &kgo.Record{Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cfg := pipeline.Config{Conn: transport.NewConfig(addr, 10*time.Second), Group: name, Input: name + "-in", Output: name + "-out",
			TransactionalID: name + "/a", SessionTimeout: 2 * time.Second, Protocol: pipeline.ProtocolClassic, MaxPoll: 5}
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		// The member joins its group on its first polls, which answer no records meanwhile:
		// poll until records or an error come, for up to a minute.
		pctx, pcancel := context.WithTimeout(ctx, time.Minute)
		defer pcancel()
		for {
			b, err := m.Poll(pctx)
			switch {
			case len(b.Records) > 0 || (err != nil && pctx.Err() == nil):
				return b, err
			case pctx.Err() != nil:
				return b, fmt.Errorf("no records and no error in a minute: %w", pctx.Err())
			}
		}
	}
	t.Run("uncompressed - polled", func(t *testing.T) {
		b, err := poll(t, kgo.NoCompression(), "plain")
		if err != nil || len(b.Records) == 0 {
			t.Fatalf("poll of uncompressed input: %d records, %v", len(b.Records), err)
		}
	})
	t.Run("raw snappy - every poll fails", func(t *testing.T) {
		b, err := poll(t, kgo.SnappyCompression(), "snappy")
		if err == nil {
			t.Fatalf("krabka polled %d records of a franz-go snappy batch: it reads raw snappy now; update docs/findings.md's row and the suites' uncompressed input", len(b.Records))
		}
		if !strings.Contains(err.Error(), "compression") {
			t.Fatalf("poll of raw snappy input failed, but not on its compression: %v", err)
		}
		t.Logf("poll: %v", err)
	})
}

// TestKrabkaConsumerProtocolPollsStarveHeartbeats shows a finding in krabka 0.7.1
// (docs/findings.md): under the consumer protocol (KIP-848) a member sends a
// ConsumerGroupHeartbeat only after a whole heartbeat interval without a poll. The heartbeat
// task of krabka-client-consumer (consumer_group::run) waits on a tokio sleep of the interval
// that it creates anew on each turn of its loop, and each poll wakes that loop, so every poll
// starts the interval again. A member polled more often than the interval (as a pipeline is)
// sends no heartbeat: a member that joins a group with members gets the empty first
// assignment and never learns of the partitions the others give up, and the others never learn
// that they must give them up. The classic protocol's task ticks on a tokio interval instead,
// which polls do not reset.
//
// Member a joins alone and takes both partitions; member b joins and is answered its epoch
// with no partitions; then both are polled for four heartbeat intervals. kfake sees no
// heartbeat of either meanwhile, and b polls nothing. The test holds only when every
// member's polls came closer together than the interval (it skips otherwise: a load stall
// lets a heartbeat through, and proves nothing either way). It fails once a krabka release
// heartbeats while polled: then the finding's row and internal/adapters' classic-only
// GroupProtocols for krabka can be revisited.
func TestKrabkaConsumerProtocolPollsStarveHeartbeats(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv := testenv.Adapter(t, "krabka")
	// The interval is long beside the polls (about 100 ms apart), so that the machine's load
	// does not decide the outcome; the session outlasts the test, so nobody is dropped.
	const interval = 2 * time.Second
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{
		"group.consumer.heartbeat.interval.ms": fmt.Sprint(interval.Milliseconds()),
		"group.consumer.session.timeout.ms":    "60000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type heartbeat struct {
		at       time.Time
		memberID string
		epoch    int32
	}
	var mu sync.Mutex
	var heartbeats []heartbeat
	c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
		mu.Lock()
		heartbeats = append(heartbeats, heartbeat{time.Now(), req.MemberID, req.MemberEpoch})
		mu.Unlock()
		return nil, nil, false // kfake answers it
	})
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"in", "out"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(2) {
		for range 3 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := func(name string) *lineproto.Member {
		cfg := pipeline.Config{Conn: transport.NewConfig(addr, 10*time.Second), Group: "g", Input: "in", Output: "out",
			TransactionalID: "g/" + name, Protocol: pipeline.ProtocolConsumer}
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	// Each poll waits 100 ms for records; its start is recorded, per member.
	polls := map[*lineproto.Member][]time.Time{}
	poll := func(m *lineproto.Member) pipeline.Batch {
		t.Helper()
		polls[m] = append(polls[m], time.Now())
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer pcancel()
		b, err := m.Poll(pctx)
		if err != nil && pctx.Err() == nil {
			t.Fatalf("poll: %v", err)
		}
		return b
	}
	a := start("a")
	owned := map[int32]bool{}
	for len(owned) < 2 {
		if ctx.Err() != nil {
			t.Fatalf("member a polled partitions %v of 2 in two minutes", owned)
		}
		for _, r := range poll(a).Records {
			owned[r.Partition] = true
		}
	}
	b := start("b")
	// b has joined when a poll reports its member epoch: kfake answered its first heartbeat.
	for joined := false; !joined; {
		if ctx.Err() != nil {
			t.Fatal("member b did not join in two minutes")
		}
		poll(a)
		bb := poll(b)
		joined = bb.Generation > 0
		if len(bb.Records) > 0 {
			t.Fatalf("member b polled %d records at its join: its first assignment had partitions", len(bb.Records))
		}
	}
	// One interval more of polls before the window: whatever a heartbeat before it started
	// (a's during b's start, when nobody polled a) has its answer by then.
	for settle := time.Now(); time.Since(settle) < interval; {
		poll(a)
		poll(b)
	}
	from := time.Now()
	var bRecords int
	for time.Since(from) < 4*interval {
		poll(a)
		bRecords += len(poll(b).Records)
	}
	to := time.Now()
	// Every poll wakes krabka's task somewhere inside the call, so two wakes are at most as
	// far apart as the starts of polls i and i+2. Closer than the interval from an interval
	// before the window on, no sleep of the interval can have ended in it.
	for _, starts := range polls {
		for i := 0; i+2 < len(starts); i++ {
			if gap := starts[i+2].Sub(starts[i]); starts[i].After(from.Add(-interval)) && gap >= interval {
				t.Skipf("inconclusive: polls of one member %v apart (the machine stalled), not under the heartbeat interval %v", gap, interval)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var in, before []string
	for _, h := range heartbeats {
		desc := fmt.Sprintf("%s@%d", h.memberID, h.epoch)
		if h.at.After(from) && h.at.Before(to) {
			in = append(in, desc)
		} else if h.at.Before(from) {
			before = append(before, desc)
		}
	}
	t.Logf("heartbeats before the %v of polls (member id@epoch): %v; in it: %v; b polled %d records in it",
		to.Sub(from).Round(time.Millisecond), before, in, bRecords)
	if len(in) > 0 || bRecords > 0 {
		t.Fatalf("krabka heartbeats while polled now (%d heartbeats in %v of polls closer than the interval %v, b polled %d records): update docs/findings.md's row and consider the consumer protocol for krabka in internal/adapters",
			len(in), to.Sub(from).Round(time.Millisecond), interval, bRecords)
	}
}

// TestKrabkaRemovedMemberCommitsByGroupID shows a finding in krabka 0.7.1 (docs/findings.md):
// under the classic protocol, once the coordinator has removed a member (it stopped polling past
// the rebalance timeout: a zombie) and its heartbeat was answered UNKNOWN_MEMBER_ID, krabka
// forgets the member's id and generation (coordinator::forget_member), and
// Consumer::group_metadata() returns generation -1 and an empty member id: the group-id-only
// shape (ConsumerGroupMetadata::for_group), which the group coordinator does not fence. A
// zombie that then sends its batch's offsets with send_offsets_to_transaction(offsets,
// &consumer.group_metadata()) commits them over the partition's new owner.
//
// Member a polls the input's records and stops (a zombie); member b joins, a is removed after
// the rebalance timeout, and b polls the records. Then a transacts its batch. With the adapter's
// --group-metadata live (group_metadata() at the commit) its TxnOffsetCommit, as kfake decodes
// it, carries generation -1 and no member id, and it commits; a TxnOffsetCommit with a's old
// identity, refused, means a's consumer had not yet heard that it was removed, and a tries
// again, for up to ten seconds. The subtest fails once a krabka release keeps the identity or
// refuses to send offsets without one. The control, the adapter's default (the metadata read
// with the batch's poll): a's TxnOffsetCommit carries its old identity and is refused.
func TestKrabkaRemovedMemberCommitsByGroupID(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv := testenv.Adapter(t, "krabka")
	t.Run("live - the removed member commits by group id", func(t *testing.T) {
		batch, res, sent, groupOffset := removedMemberCommits(t, append(slices.Clone(argv), "--group-metadata", "live"), true)
		if res.Outcome != transport.OK || sent.generation != -1 || sent.memberID != "" {
			t.Fatalf("the removed member's offsets were not committed by group id alone (outcome %v, generation %d, member id %q): krabka keeps a removed member's identity now; update docs/findings.md's row and the adapter's default (adapters/krabka/src/member.rs, GroupMetadata)",
				res.Outcome, sent.generation, sent.memberID)
		}
		if want := batch.Offsets()[0]; groupOffset != want {
			t.Fatalf("group offset of in/0: %d, want the zombie's %d", groupOffset, want)
		}
	})
	t.Run("polled - the removed member is refused", func(t *testing.T) {
		batch, res, sent, groupOffset := removedMemberCommits(t, argv, false)
		if res.Outcome != transport.Fail || sent.generation != batch.Generation || sent.memberID != batch.MemberID {
			t.Fatalf("the removed member's transaction: outcome %v (%v), its TxnOffsetCommit generation %d, member id %q; want fail, and the batch's %d, %q",
				res.Outcome, res.Err, sent.generation, sent.memberID, batch.Generation, batch.MemberID)
		}
		if groupOffset == batch.Offsets()[0] {
			t.Fatalf("group offset of in/0 is the zombie's, %d", groupOffset)
		}
	})
}

// sentIdentity is the group identity a TxnOffsetCommit carried.
type sentIdentity struct {
	generation int32
	memberID   string
}

// removedMemberCommits runs TestKrabkaRemovedMemberCommitsByGroupID's story through the adapter
// argv: it returns the zombie's batch, what became of its transaction, the identity its last
// TxnOffsetCommit carried, and the group's committed offset of the input partition after it.
// With retry, a transaction refused under the batch's own identity is tried again (the zombie's
// consumer may not have heard yet that it was removed).
func removedMemberCommits(t *testing.T, argv []string, retry bool) (pipeline.Batch, pipeline.Result, sentIdentity, int64) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var commits []sentIdentity
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.TxnOffsetCommitRequest)
		mu.Lock()
		commits = append(commits, sentIdentity{req.Generation, req.MemberID})
		mu.Unlock()
		return nil, nil, false // kfake answers it
	})
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string) *lineproto.Member {
		cfg := pipeline.Config{Conn: transport.NewConfig(addr, 10*time.Second), Group: "g", Input: "in", Output: "out",
			TransactionalID: "g/" + name, SessionTimeout: 2 * time.Second, Protocol: pipeline.ProtocolClassic}
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	records := func(m *lineproto.Member) pipeline.Batch {
		t.Helper()
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			b, err := m.Poll(pctx)
			pcancel()
			if err != nil && pctx.Err() == nil {
				t.Fatalf("poll: %v", err)
			}
			if len(b.Records) > 0 {
				return b
			}
		}
		t.Fatal("no records in two minutes")
		return pipeline.Batch{}
	}
	a := start("a")
	batch := records(a)
	// a polls no more: b's join waits for a until the rebalance timeout, and a is removed.
	b := start("b")
	bb := records(b)
	t.Logf("a polled %d records as %s in generation %d; b %d as %s in generation %d",
		len(batch.Records), batch.MemberID, batch.Generation, len(bb.Records), bb.MemberID, bb.Generation)
	var outs []pipeline.Output
	for _, r := range batch.Records {
		outs = append(outs, pipeline.Output{Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	var res pipeline.Result
	var sent sentIdentity
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	for tries := 1; ; tries++ {
		mu.Lock()
		n := len(commits)
		mu.Unlock()
		res = a.Transact(tctx, batch, outs)
		mu.Lock()
		if len(commits) > n {
			sent = commits[len(commits)-1]
		}
		mu.Unlock()
		if !retry || res.Outcome != transport.Fail || res.Restart || sent != (sentIdentity{batch.Generation, batch.MemberID}) || tctx.Err() != nil {
			t.Logf("a's transaction, try %d: %v (%v); its TxnOffsetCommit: generation %d, member id %q", tries, res.Outcome, res.Err, sent.generation, sent.memberID)
			break
		}
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup("in", 0)
	return batch, res, sent, o.At
}
