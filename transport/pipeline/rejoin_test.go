package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
)

// TestRejoinedMemberStampsPolledGeneration is the regression of findings.md's lead "two members
// committed the same input records under one generation after one was removed and rejoined"
// (Kafka 3.9.2, m3 and m4 on input partition 3). The interleaving, made deterministic on kfake:
//
//  1. Member a owns the one input partition in generation 1 and polls a batch, which holds
//     its rebalance (kgo.BlockRebalanceOnPoll).
//  2. Member b joins. a's heartbeats are answered REBALANCE_IN_PROGRESS, so kgo's revoke waits
//     for the batch; the rebalance times out, the coordinator removes a, and generation 2 gives
//     the partition to b. The test answers a's heartbeats itself from b's join on: what it
//     stands for is that no heartbeat of a reached the coordinator between a's removal and
//     its AllowRebalance (under load, as in the lead), so kgo's heartbeat loop ends on
//     REBALANCE_IN_PROGRESS, not UNKNOWN_MEMBER_ID, and kgo rejoins without onLost: the
//     cooperative revoke at the session's end gives nothing up, and the partition's cursor
//     stays live.
//  3. a's batch is refused (its member id is gone), a aborts, rewinds and allows the rebalance.
//     Its JoinGroup with the old member id is answered UNKNOWN_MEMBER_ID; kgo joins again
//     without one, as a new member, and generation 3 keeps the partition with b. kgo stores
//     a's new member id and generation 3 when the JoinGroup is answered; the lost partition's
//     cursor is invalidated only after SyncGroup, in a prerevoke that waits for polled
//     batches. The test holds a's SyncGroup there.
//  4. a polls: records of the partition it lost, read from its generation-1 position.
//
// The batch must not be stamped with generation 3, under which a does not own the partition,
// and its transaction must not commit: b copies the same records. Before the fix the plain
// member stamped a batch with kgo's GroupMetadata read after PollRecords returned (3), the
// coordinator took the offsets (it checks the member id and generation, not ownership), and
// both members committed the records; that member is kept as a flaw (mutantStampAfterPoll),
// and the test requires it to commit them, so that the scenario is shown to reach the window
// on every run.
func TestRejoinedMemberStampsPolledGeneration(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		r := rejoinScenario(t, "")
		if r.stale.MemberID != r.oldID || r.stale.Generation != r.oldGen {
			t.Errorf("a's batch of the partition it owned only in generation %d (as %s) is stamped %s, generation %d",
				r.oldGen, r.oldID, r.stale.MemberID, r.stale.Generation)
		}
		if r.res.Outcome == transport.OK {
			t.Errorf("a committed offsets %d..%d of a partition b owns, under generation %d, after b committed them: both copies committed",
				r.stale.Records[0].Offset, r.stale.Records[len(r.stale.Records)-1].Offset, r.stale.Generation)
		} else if !errors.Is(r.res.Err, ErrFenced) {
			t.Errorf("a's stale batch was refused, but not fenced: %v", r.res.Err)
		}
	})
	t.Run(mutantStampAfterPoll, func(t *testing.T) {
		r := rejoinScenario(t, mutantStampAfterPoll)
		if r.stale.MemberID != r.newID || r.stale.Generation != r.newGen || r.res.Outcome != transport.OK {
			t.Errorf("the member that stamps after the poll no longer commits the records b committed "+
				"(batch stamped %s, generation %d; a rejoined as %s, generation %d; a's transaction %v, %v): "+
				"the scenario does not reach the window", r.stale.MemberID, r.stale.Generation, r.newID, r.newGen, r.res.Outcome, r.res.Err)
		}
	})
}

// rejoined is what the rejoin scenario saw: a's identity before and after its rejoin, the
// batch it polled in between and its transaction's result.
type rejoined struct {
	oldID, newID   string
	oldGen, newGen int32
	stale          Batch
	res            Result
}

// rejoinScenario runs the rejoin interleaving with a a plain member with flaw ("" for the real
// one) and b a real one.
func rejoinScenario(t *testing.T, flaw string) rejoined {
	const input, output, group = "in", "out", "g"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, input, output),
		kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "500"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seedRecords(t, ctx, c, input, 20)

	var bFetched atomic.Pointer[Fetch]
	cfg := func(id string) Config {
		// Heartbeats every 2 s; a rebalance waits 3 s for a member to rejoin (and a member
		// that joined 3 s to sync).
		return memberConfig(t, c, group, input, output, id, 6*time.Second, 5, &bFetched)
	}
	outs := func(b Batch, member string) []Output { return outputsOf(b, "/"+member) }

	// 1. a owns the partition and holds a batch.
	a, err := newPlain(ctx, cfg("a"), flaw)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first := pollSome(t, ctx, a)
	oldID, oldGen := first.MemberID, first.Generation
	t.Logf("a polled offsets %d..%d as %s, generation %d", first.Records[0].Offset, first.Records[len(first.Records)-1].Offset, oldID, oldGen)

	// 2. From b's join on, a's heartbeats are answered REBALANCE_IN_PROGRESS.
	synced, polled := holdRejoin(c, oldID, a.cl)

	b, err := newPlain(ctx, cfg("b"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	await(t, ctx, "b assigned the partition", func() bool { return bFetched.Load() != nil })
	t.Logf("b assigned the partition as %s, generation %d", bFetched.Load().MemberID, bFetched.Load().Generation)

	// 3. a's batch is refused; a rejoins as a new member.
	if res := a.Transact(ctx, first, outs(first, "a")); res.Outcome == transport.OK {
		t.Fatalf("precondition: a's batch of generation %d committed after a was removed", oldGen)
	}
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("a did not rejoin")
	}
	newID, newGen := a.cl.GroupMetadata()
	if newID == oldID || newGen <= bFetched.Load().Generation {
		t.Fatalf("precondition: a's group metadata at its SyncGroup is %s, generation %d", newID, newGen)
	}

	// 4. a polls the partition it is losing, its SyncGroup held.
	stale := pollSome(t, ctx, a)
	close(polled)
	t.Logf("a polled offsets %d..%d while rejoined as %s, generation %d; the batch is stamped %s, generation %d",
		stale.Records[0].Offset, stale.Records[len(stale.Records)-1].Offset, newID, newGen, stale.MemberID, stale.Generation)

	// b copies the records.
	for done := false; !done; {
		bb := pollSome(t, ctx, b)
		res := b.Transact(ctx, bb, outs(bb, "b"))
		done = res.Outcome == transport.OK && bb.Records[0].Offset <= stale.Records[0].Offset
		t.Logf("b: offsets %d..%d, generation %d: %v %v", bb.Records[0].Offset, bb.Records[len(bb.Records)-1].Offset, bb.Generation, res.Outcome, res.Err)
	}
	res := a.Transact(ctx, stale, outs(stale, "a"))
	t.Logf("a's transaction of the batch: %v %v", res.Outcome, res.Err)
	return rejoined{oldID: oldID, newID: newID, oldGen: oldGen, newGen: newGen, stale: stale, res: res}
}

// await polls cond until it holds or ctx ends.
// memberConfig is the configuration of test member id ("a", "b", ...) of group on kfake
// cluster c, copying input to output: transactional id group/id, request timeout 5 s, the
// rebalance timeout 3 s, the session timeout and most records a poll as given. Member b's
// offset fetches are stored in bFetched.
func memberConfig(t *testing.T, c *kfake.Cluster, group, input, output, id string, session time.Duration, maxPoll int, bFetched *atomic.Pointer[Fetch]) Config {
	t.Helper()
	conn := transport.NewConfig(c.ListenAddrs()[0], 10*time.Second)
	conn.RequestTimeout = 5 * time.Second
	cfg := Config{Conn: conn, Group: group, Input: input, Output: output, TransactionalID: group + "/" + id,
		SessionTimeout: session, RebalanceTimeout: 3 * time.Second, MaxPoll: maxPoll}
	if id == "b" {
		cfg.Fetched = func(f Fetch) { bFetched.Store(&f) }
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// outputsOf returns an output for each record of b, on its partition, valued
// "partition/offset" and then suffix.
func outputsOf(b Batch, suffix string) []Output {
	var os []Output
	for _, r := range b.Records {
		os = append(os, Output{Partition: r.Partition, Value: fmt.Appendf(nil, "%d/%d%s", r.Partition, r.Offset, suffix)})
	}
	return os
}

// pollSome polls m until it returns records, failing t when ctx ends first.
func pollSome(t *testing.T, ctx context.Context, m Member) Batch {
	t.Helper()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := m.Poll(pctx)
		pcancel()
		if len(b.Records) > 0 {
			return b
		}
		if ctx.Err() != nil {
			t.Fatalf("no records polled: %v", err)
		}
	}
}

// joinOwner starts kgo client b with opts and returns it once the group assigned it some
// partition of topic.
func joinOwner(t *testing.T, ctx context.Context, topic string, opts func(...kgo.Opt) []kgo.Opt) *kgo.Client {
	t.Helper()
	var owns atomic.Bool
	b, err := kgo.NewClient(opts(kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		if len(m[topic]) > 0 {
			owns.Store(true)
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	await(t, ctx, "b assigned the partition", owns.Load)
	return b
}

func await(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestKgoRejoinKeepsLostPartition shows the franz-go side of the rejoin lead with kgo alone
// (docs/regressions.md, "rejoin-stale-generation", has the report text): a classic group member
// whose heartbeat loop ended on REBALANCE_IN_PROGRESS, and whose next JoinGroup is answered
// UNKNOWN_MEMBER_ID (it was removed meanwhile), joins again as a new member without calling
// OnPartitionsLost or invalidating its old assignment. Under BlockRebalanceOnPoll its next
// PollRecords returns records of the partition it owned before, from the position it had,
// while GroupMetadata already names the new generation, under which another member owns the
// partition; and CommitUncommittedOffsets commits them under that generation. kafka-clients
// gives every partition up as lost before it joins with a reset member id
// (ConsumerCoordinator.onJoinPrepare). The test fails once franz-go does the same: then
// update the finding in docs/findings.md.
func TestKgoRejoinKeepsLostPartition(t *testing.T) {
	const topic, group = "in", "g"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic),
		kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "500"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := func(more ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DisableClientMetrics(),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(3 * time.Second), kgo.HeartbeatInterval(2 * time.Second)}, more...)
	}
	seed := seedRecords(t, ctx, c, topic, 20)
	poll := func(cl *kgo.Client) []*kgo.Record {
		t.Helper()
		for {
			rs := cl.PollRecords(ctx, 5).Records()
			if len(rs) > 0 {
				return rs
			}
			if ctx.Err() != nil {
				t.Fatal("no records polled")
			}
			cl.AllowRebalance()
		}
	}

	a, err := kgo.NewClient(opts(kgo.BlockRebalanceOnPoll())...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseAllowingRebalance()
	first := poll(a)
	oldID, oldGen := a.GroupMetadata()
	t.Logf("a polled offsets %d..%d as %s, generation %d", first[0].Offset, first[len(first)-1].Offset, oldID, oldGen)

	synced, polled := holdRejoin(c, oldID, a)

	b := joinOwner(t, ctx, topic, opts)
	bID, bGen := b.GroupMetadata()
	t.Logf("b assigned the partition as %s, generation %d", bID, bGen)

	// a drops its batch and lets the rebalance go on: it rejoins as a new member.
	a.AllowRebalance()
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("a did not rejoin")
	}
	newID, newGen := a.GroupMetadata()
	t.Logf("a rejoined as %s, generation %d", newID, newGen)
	if newID == oldID || newGen <= bGen {
		t.Fatalf("precondition: a's group metadata at its SyncGroup is %s, generation %d", newID, newGen)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	stale := a.PollRecords(pctx, 5).Records()
	pcancel()
	close(polled)
	if len(stale) == 0 {
		t.Fatalf("franz-go no longer returns records of the partition a owned before its rejoin (as %s, generation %d): update docs/findings.md", newID, newGen)
	}
	t.Logf("a polled offsets %d..%d of the partition it owned in generation %d, as %s, generation %d", stale[0].Offset, stale[len(stale)-1].Offset, oldGen, newID, newGen)

	// a commits them: kgo sends its new member id and generation.
	err = a.CommitUncommittedOffsets(ctx)
	a.AllowRebalance()
	offs, ferr := kadmFetch(ctx, seed, group, topic)
	if ferr != nil {
		t.Fatal(ferr)
	}
	t.Logf("a's commit: %v; the group's committed offset of the partition b owns: %d", err, offs)
	if err != nil || offs != stale[len(stale)-1].Offset+1 {
		t.Errorf("franz-go no longer commits a's records of the partition b owns (commit %v, committed offset %d): update docs/findings.md", err, offs)
	}
}

// kadmFetch returns group's committed offset of topic's partition 0, -1 when none.
func kadmFetch(ctx context.Context, cl *kgo.Client, group, topic string) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, kerr.ErrorForCode(p.ErrorCode)
}

// holdRejoin makes c answer every heartbeat of member oldID REBALANCE_IN_PROGRESS, and hold
// the first SyncGroup that client a sends as a new member (another member id than oldID)
// until polled is closed; synced is closed when that SyncGroup arrives.
func holdRejoin(c *kfake.Cluster, oldID string, a *kgo.Client) (synced, polled chan struct{}) {
	c.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.HeartbeatRequest)
		if req.MemberID != oldID {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.Version = req.Version
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	synced, polled = make(chan struct{}), make(chan struct{})
	var holdSync sync.Once
	c.ControlKey(int16(kmsg.SyncGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SyncGroupRequest)
		if id, _ := a.GroupMetadata(); req.MemberID == id && id != oldID {
			holdSync.Do(func() {
				close(synced)
				c.SleepControl(func() { <-polled })
			})
		}
		return nil, nil, false
	})
	return synced, polled
}

// seedRecords writes n records, valued 0 to n-1, to each of topic's partitions on c (partition
// 0 when none is named), and returns the client that wrote them, closed when the test ends.
func seedRecords(t *testing.T, ctx context.Context, c *kfake.Cluster, topic string, n int, partitions ...int32) *kgo.Client {
	t.Helper()
	seed, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(seed.Close)
	if len(partitions) == 0 {
		partitions = []int32{0}
	}
	for _, p := range partitions {
		for i := range n {
			if err := seed.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seed
}

// TestKgoConsumerFenceDropsOldAssignment pins the KIP-848 side of "rejoin-stale-generation"
// (docs/regressions.md): under the consumer protocol kgo gives its whole assignment up before it
// joins again after the coordinator fenced or forgot it, so once a newer member epoch is stored
// no cursor or buffered record of the old assignment is left for a poll to return. The
// interleaving of TestKgoRejoinKeepsLostPartition, under the consumer protocol:
//
//  1. Member a owns the one partition and holds a polled batch (kgo.BlockRebalanceOnPoll), the
//     rest of the partition's records buffered behind it.
//  2. The test answers a's heartbeats itself (standing for heartbeats that do not reach the
//     coordinator), so the coordinator removes a at its session timeout; b joins and is given
//     the partition.
//  3. a's heartbeats reach the coordinator again and are refused; a allows the rebalance. kgo's
//     abandonAssignment calls OnPartitionsLost and invalidates every cursor and buffered fetch,
//     and only then does a join again, as a new member with a newer epoch and nothing assigned.
//
// Then nothing of the partition must be buffered and a poll must return none of its records.
// The test fails if franz-go ever keeps the old cursors across that rejoin, as its classic path
// does (TestKgoRejoinKeepsLostPartition): then the plain member must stamp its batches under
// KIP-848 as it does under the classic protocol.
func TestKgoConsumerFenceDropsOldAssignment(t *testing.T) {
	const topic, group = "in", "g"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic),
		kfake.BrokerConfigs(map[string]string{"group.consumer.session.timeout.ms": "1500", "group.consumer.heartbeat.interval.ms": "500"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seedRecords(t, ctx, c, topic, 20)
	opts := func(more ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DisableClientMetrics(),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, more...)
	}

	// 1. a owns the partition and holds a batch.
	var lost atomic.Int32
	a, err := kgo.NewClient(opts(kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { lost.Add(1) }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseAllowingRebalance()
	var first []*kgo.Record
	for len(first) == 0 {
		if first = a.PollRecords(ctx, 5).Records(); len(first) == 0 {
			if ctx.Err() != nil {
				t.Fatal("no records polled")
			}
			a.AllowRebalance()
		}
	}
	oldID, oldEpoch := a.GroupMetadata()
	await(t, ctx, "a buffers the records after its batch", func() bool { return a.BufferedFetchRecords() > 0 })
	t.Logf("a polled offsets %d..%d as %s, epoch %d; %d records buffered behind them",
		first[0].Offset, first[len(first)-1].Offset, oldID, oldEpoch, a.BufferedFetchRecords())

	// 2. a's heartbeats are answered by the test; b joins and takes the partition.
	var swallow atomic.Bool
	swallow.Store(true)
	c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
		if req.MemberID != oldID || !swallow.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.Version = req.Version
		resp.MemberID = &oldID
		resp.MemberEpoch = oldEpoch
		resp.HeartbeatIntervalMillis = 500
		return resp, nil, true
	})
	b := joinOwner(t, ctx, topic, opts)
	bID, bEpoch := b.GroupMetadata()
	t.Logf("b assigned the partition as %s, epoch %d", bID, bEpoch)

	// 3. a's heartbeats reach the coordinator again; a gives its batch up and rejoins.
	swallow.Store(false)
	a.AllowRebalance()
	await(t, ctx, "a rejoins", func() bool {
		id, epoch := a.GroupMetadata()
		return lost.Load() > 0 && epoch > 0 && (id != oldID || epoch > oldEpoch)
	})
	newID, newEpoch := a.GroupMetadata()
	if newEpoch <= oldEpoch {
		t.Fatalf("precondition: a rejoined as %s at epoch %d, not after its epoch %d", newID, newEpoch, oldEpoch)
	}
	buffered := a.BufferedFetchRecords()
	// A nil context is kgo's way to take what is buffered without waiting.
	stale := a.PollRecords(nil, 5).Records() //nolint:staticcheck // SA1012: kgo documents nil
	a.AllowRebalance()
	t.Logf("a rejoined as %s, epoch %d; %d records buffered, %d returned by a poll", newID, newEpoch, buffered, len(stale))
	if n := buffered; n != 0 || len(stale) > 0 {
		t.Errorf("after its rejoin as %s, epoch %d, a still has %d records of the partition b owns buffered and a poll returned %d: "+
			"franz-go keeps the old assignment across a KIP-848 rejoin; update docs/regressions.md", newID, newEpoch, n, len(stale))
	}
}
