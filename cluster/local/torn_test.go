//go:build kafka

package local_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
)

// tornSessionTimeout is the controller's broker session timeout of the torn-transaction
// cluster. The restarted coordinator must come back while the controller still holds its old
// registration (which refuses the new one, so the old metadata, naming it leader at the same
// epoch, stands): with the default 9 s the restart of a JVM on a loaded machine races the
// timeout, which is why pipeline-kill-txn-coordinator tore a transaction only 2 times in 14.
const tornSessionTimeout = 60 * time.Second

// TestTornTxnAfterCoordinatorRestart: a transaction coordinator killed while its PREPARE_COMMIT
// sits above the high watermark, and started again within the controller's broker session
// timeout, comes back as leader of its __transaction_state partition at the same leader epoch,
// loads the unreplicated PREPARE_COMMIT (the load reads to the log end, not to the high
// watermark) and sends COMMIT markers; when the controller then fences its old registration,
// the new leader's log lacks the PREPARE_COMMIT, and the new coordinator aborts the
// transaction. A marker the restarted coordinator delivered stays: the transaction is torn,
// committed on one partition and aborted on the other (docs/regressions.md#torn-txn-after-coordinator-restart).
//
// The test passes when the transaction is torn, as it is on an affected release, and fails
// when it comes out whole (a fixed release, or a missed window, which the preconditions it
// checks along the way tell apart). Its own three-broker cluster (80-125 s); a long test:
// make regressions runs it on each release of PROBE_RELEASES. The release is
// FENCECHECK_KAFKA_HOME's.
func TestTornTxnAfterCoordinatorRestart(t *testing.T) {
	testenv.Long(t)
	needKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := local.New(ctx, local.Options{Logger: testLogger(t), Dir: os.Getenv("FENCECHECK_TEST_KAFKA_DIR"), Configs: map[string]string{
		"broker.session.timeout.ms": strconv.Itoa(int(tornSessionTimeout / time.Millisecond)),
		// The followers of the coordinator's partition are cut off from it for up to the
		// session timeout: an ISR shrink to the leader alone would commit its tail (the
		// high watermark would pass the PREPARE_COMMIT), so keep them in the ISR.
		"replica.lag.time.max.ms": "600000",
		// The restarted broker's registration is refused until the old session expires; its
		// default 60 s to register, counted from its start, races that (on 3.9.1 it gave up
		// and exited first).
		"initial.broker.registration.timeout.ms": "300000",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	defer c.Network().HealAll(context.Background())
	r := tornTxn(ctx, t, c)
	t.Logf("Kafka %s (TV%d): %s", c.Info().Version, c.Info().TxnVersion, r)
	if !r.Torn() {
		t.Errorf("the transaction was not torn (committed records: %d on %s, %d on %s): fixed, or the window was missed (%s)",
			r.visibleA, links.BrokerName(r.y1), r.visibleB, links.BrokerName(r.y2), r)
	}
}

// tornResult is what tornTxn saw.
type tornResult struct {
	coord, y1, y2      int32 // the coordinator; the leaders of output partitions A and B (y2 the active controller)
	txnPartition       int32 // the coordinator's __transaction_state partition
	restartLEO, hwm    int64 // from the restarted coordinator's "starts at leader epoch" line: log end and high watermark
	restartEpoch       int32 // the leader epoch it came back at
	sentCommit         bool  // the restarted coordinator logged "Sending txn markers" with COMMIT for the id
	movedAfter         time.Duration
	dropped            string // how the restarted coordinator dropped its marker for A
	newLeader          int32
	newEpoch           int32
	final              string // the transaction's state on the new coordinator
	visibleA, visibleB int    // the transaction's records a read_committed consumer sees
}

// Torn reports a transaction committed on B and aborted on A.
func (r tornResult) Torn() bool { return r.visibleA != r.visibleB }

func (r tornResult) String() string {
	return fmt.Sprintf("coordinator %s (__transaction_state-%d) restarted as leader at epoch %d, log end %d above high watermark %d, sent COMMIT markers %v; leadership moved to %s at epoch %d %v after the restart; marker for A %s; final state %s; committed records on A (%s) %d, on B (%s) %d",
		links.BrokerName(r.coord), r.txnPartition, r.restartEpoch, r.restartLEO, r.hwm, r.sentCommit,
		links.BrokerName(r.newLeader), r.newEpoch, r.movedAfter.Round(time.Millisecond), r.dropped, r.final,
		links.BrokerName(r.y1), r.visibleA, links.BrokerName(r.y2), r.visibleB)
}

// tornTxn sets the tear up on c (a fresh three-broker cluster) and returns what it saw; it
// fails t when a precondition does not hold.
func tornTxn(ctx context.Context, t *testing.T, c *local.Cluster) tornResult {
	var r tornResult
	adminCl, err := cluster.NewAdminClient(c.Bootstrap(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)

	// The active controller y2 must stay reachable by the restarted coordinator (it registers
	// there), so the coordinator is another broker.
	var ctrl int32
	if _, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
		ctrl, err = activeController(ctx, adminCl)
		return err
	}); err != nil {
		t.Fatalf("active controller: %v", err)
	}
	var txnID string
	for i := 0; txnID == ""; i++ {
		id := fmt.Sprintf("fencecheck-torn-%d", i)
		var coord int32
		if _, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
			coord, err = clustertest.Coordinator(ctx, c, id)
			return err
		}); err != nil {
			t.Fatalf("coordinator of %s: %v", id, err)
		}
		if coord != ctrl {
			txnID, r.coord = id, coord
		}
	}
	r.y2 = ctrl
	for _, id := range c.Network().BrokerIDs() {
		if id != r.coord && id != r.y2 {
			r.y1 = id
		}
	}
	r.txnPartition = txnStatePartition(txnID, 8) // kraft's transaction.state.log.num.partitions
	if l, epoch, err := partitionLeader(ctx, adminCl, r.y2, "__transaction_state", r.txnPartition); err != nil || l != r.coord {
		t.Fatalf("leader of __transaction_state-%d = %d (epoch %d, %v), want the coordinator %s", r.txnPartition, l, epoch, err, links.BrokerName(r.coord))
	}
	t.Logf("transactional id %s: coordinator %s (__transaction_state-%d), active controller %s, other broker %s",
		txnID, links.BrokerName(r.coord), r.txnPartition, links.BrokerName(r.y2), links.BrokerName(r.y1))

	// Output partition A on y1, B on y2, neither on the coordinator.
	topic := "fencecheck-torn"
	createAssigned(ctx, t, adminCl, topic, [][]int32{{r.y1, r.y2}, {r.y2, r.y1}})

	// Its own client, not clustertest.Client: it is closed before the kill, so that it retries
	// nothing the test does not send itself.
	p, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.Dialer(processLinks(t, c, 7)),
		kgo.TransactionalID(txnID), kgo.TransactionTimeout(20*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	pClosed := false
	defer func() {
		if !pClosed {
			p.Close()
		}
	}()
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// Both records acked, so both partitions are in the transaction's replicated state.
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("txn")},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// Under TV2 the epoch the producer runs at is the one InitProducerId gave; kgo may have
	// moved it since, so read it again.
	if pid, epoch, err = p.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}

	// Hold back the followers of the coordinator's partition: from here its appends stay above
	// the high watermark.
	peer := func(from, to int32) *links.Link {
		for _, l := range c.Network().Links() {
			if l.Kind() == links.LinkPeer && l.From() == from && l.Broker() == to {
				return l
			}
		}
		t.Fatalf("no peer link %s→%s", links.BrokerName(from), links.BrokerName(to))
		return nil
	}
	for _, l := range []*links.Link{peer(r.y1, r.coord), peer(r.y2, r.coord)} {
		if err := l.Disable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	segment := filepath.Join(c.Dir(), links.BrokerName(r.coord), "data", fmt.Sprintf("__transaction_state-%d", r.txnPartition), "00000000000000000000.log")
	before := fileSize(t, segment)

	// EndTxn(commit) sent once, straight to the coordinator: a client's retry could reach the
	// next coordinator and commit the transaction there.
	endDone := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, true
		resp, err := req.RequestWith(ctx, adminCl.Broker(int(r.coord)))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			if err == nil {
				err = errors.New("EndTxn answered without error")
			}
		}
		endDone <- err
	}()
	// The PREPARE_COMMIT is in the coordinator's segment once it grows.
	if took, err := clustertest.Eventually(30*time.Second, func() error {
		select {
		case err := <-endDone:
			return fmt.Errorf("EndTxn answered before the kill: %w", err)
		default:
		}
		if n := fileSize(t, segment); n <= before {
			return fmt.Errorf("segment %d bytes, %d before the EndTxn", n, before)
		}
		return nil
	}); err != nil {
		t.Fatalf("PREPARE_COMMIT not appended: %v (after %v)", err, took)
	}
	// The coordinator's markers must reach B (y2) and not A (y1).
	if err := peer(r.coord, r.y1).Disable(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close() // no client retries from here
	pClosed = true
	restarted := time.Now()
	restartDone := make(chan error, 1)
	go func() { restartDone <- c.Restart(ctx, r.coord) }() // kill, start again at once
	t.Logf("%s killed and started again with its PREPARE_COMMIT above the high watermark", links.BrokerName(r.coord))

	// The controller moves the leadership off the coordinator when its old session ends.
	var lastErr error
	if took, err := clustertest.Eventually(tornSessionTimeout+2*time.Minute, func() error {
		l, e, err := partitionLeader(ctx, adminCl, r.y2, "__transaction_state", r.txnPartition)
		if err != nil {
			lastErr = err
			return err
		}
		if l == r.coord || l < 0 {
			return fmt.Errorf("leader %d at epoch %d", l, e)
		}
		r.newLeader, r.newEpoch = l, e
		return nil
	}); err != nil {
		t.Fatalf("the leadership of __transaction_state-%d stayed on %s: %v (%v; after %v)", r.txnPartition, links.BrokerName(r.coord), err, lastErr, took)
	}
	r.movedAfter = time.Since(restarted)
	// The deposed coordinator still holds its marker for A and retries it until it drops it.
	// Healed earlier, the link lets that retry through and A commits too (seen on 4.1.2: a
	// COMMIT with coordinator epoch 0 appended 0.2 s before the drop), so wait for the drop. It
	// takes one of two ways: a queued marker is removed when the partition is unloaded, one in
	// flight is cancelled when its answer (a failed connection counts) finds the broker no
	// longer coordinator.
	dropped := regexp.MustCompile(`(I am no longer the coordinator for ` + regexp.QuoteMeta(txnID) + `;|Removing .*transactionalId=` + regexp.QuoteMeta(txnID) + `,.* for txn partition)`)
	if took, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
		m := dropped.FindSubmatch(brokerLog(t, c, r.coord))
		if m == nil {
			return fmt.Errorf("no line matching %q in its log", dropped)
		}
		r.dropped = "cancelled in flight"
		if bytes.HasPrefix(m[1], []byte("Removing")) {
			r.dropped = "removed from the queue on unload"
		}
		return nil
	}); err != nil {
		t.Fatalf("%s did not give its markers up: %v (after %v)", links.BrokerName(r.coord), err, took)
	}
	if err := c.Network().HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-restartDone; err != nil {
		t.Fatalf("restart of %s: %v", links.BrokerName(r.coord), err)
	}
	readRestartLog(t, c, &r, txnID)

	// The new coordinator ends the transaction (its timeout has passed).
	if _, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
		ds, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return err
		}
		d, err := ds.On(txnID, nil)
		if err != nil {
			return err
		}
		if err := d.Err; err != nil {
			return err
		}
		r.final = d.State
		if d.State != "CompleteAbort" && d.State != "CompleteCommit" && d.State != "Empty" {
			return fmt.Errorf("state %s", d.State)
		}
		return nil
	}); err != nil {
		t.Fatalf("the transaction did not end: %v", err)
	}
	r.visibleA, r.visibleB = committedRecords(ctx, t, c, topic)
	return r
}

// activeController asks the metadata quorum for its leader.
func activeController(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	tp := kmsg.NewDescribeQuorumRequestTopic()
	tp.Topic = "__cluster_metadata"
	pp := kmsg.NewDescribeQuorumRequestTopicPartition()
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	pr := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
		return -1, err
	}
	if pr.LeaderID < 0 {
		return -1, errors.New("no quorum leader")
	}
	return pr.LeaderID, nil
}

// txnStatePartition is the __transaction_state partition of id: Java's String.hashCode, its
// absolute value (0 for the minimum), modulo the partition count.
func txnStatePartition(id string, partitions int32) int32 {
	var h int32
	for _, u := range utf16Units(id) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}

// partitionLeader is the leader and leader epoch of topic's partition in broker from's
// metadata.
func partitionLeader(ctx context.Context, cl *kgo.Client, from int32, topic string, partition int32) (int32, int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.Broker(int(from)))
	if err != nil {
		return -1, -1, err
	}
	for _, tp := range resp.Topics {
		if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
			return -1, -1, err
		}
		for _, p := range tp.Partitions {
			if p.Partition == partition {
				return p.Leader, p.LeaderEpoch, kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return -1, -1, fmt.Errorf("%s-%d not in %s's metadata", topic, partition, links.BrokerName(from))
}

// createAssigned creates topic with one partition per replica list, the first replica its
// preferred leader, and waits until every partition has that leader.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, rs := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for i, rs := range replicas {
		if _, err := clustertest.Eventually(clustertest.RecoverTimeout, func() error {
			l, _, err := partitionLeader(ctx, cl, rs[0], topic, int32(i))
			if err == nil && l != rs[0] {
				err = fmt.Errorf("leader %d, want %d", l, rs[0])
			}
			return err
		}); err != nil {
			t.Fatalf("%s-%d: %v", topic, i, err)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// restartLeaderLine is the partition leader's line as it takes a partition over, from 3.9 on.
var restartLeaderLine = regexp.MustCompile(`Leader (\S+) with topic id \S+ starts at leader epoch (\d+) from offset (\d+) with partition epoch \d+, high watermark (\d+)`)

// readRestartLog reads the restarted coordinator's log from its last start: the epoch, log
// end and high watermark it took its partition over at, and whether it sent COMMIT markers
// for txnID.
func readRestartLog(t *testing.T, c *local.Cluster, r *tornResult, txnID string) {
	t.Helper()
	f, err := os.Open(filepath.Join(c.Info().LogsDir, links.BrokerName(r.coord)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// The last start is after the last "starts at leader epoch" line of an earlier start; the
	// simplest bound is the last match of our partition, which the restart writes.
	want := fmt.Sprintf("__transaction_state-%d", r.txnPartition)
	last := -1
	for i, l := range lines {
		if m := restartLeaderLine.FindStringSubmatch(l); m != nil && m[1] == want {
			last = i
			r.restartEpoch = int32(atoi(m[2]))
			r.restartLEO, r.hwm = int64(atoi(m[3])), int64(atoi(m[4]))
		}
	}
	if last < 0 {
		t.Logf("%s never logged itself leader of %s", links.BrokerName(r.coord), want)
		return
	}
	for _, l := range lines[last:] {
		if strings.Contains(l, "Sending txn markers for") && strings.Contains(l, txnID+",") && strings.Contains(l, "COMMIT") {
			r.sentCommit = true
		}
	}
}

// brokerLog is broker id's log, every start of it.
func brokerLog(t *testing.T, c *local.Cluster, id int32) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Info().LogsDir, links.BrokerName(id)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// committedRecords counts the transaction's records ("txn") that a read_committed consumer
// sees on partitions 0 and 1 of topic. It writes a plain record to each partition after the
// transaction ended and reads until both show, so it has read everything before them.
func committedRecords(ctx context.Context, t *testing.T, c *local.Cluster, topic string) (a, b int) {
	t.Helper()
	w := clustertest.Client(t, c, 8, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for part := range int32(2) {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("end record: %v", err)
		}
	}
	rd := clustertest.Client(t, c, 9, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	counts := [2]int{}
	ends := [2]bool{}
	rctx, cancel := context.WithTimeout(ctx, clustertest.RecoverTimeout)
	defer cancel()
	for !ends[0] || !ends[1] {
		fs := rd.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read_committed: the end records did not show (%v, %v)", ends, rctx.Err())
		}
		fs.EachRecord(func(rec *kgo.Record) {
			switch string(rec.Value) {
			case "txn":
				counts[rec.Partition]++
			case "end":
				ends[rec.Partition] = true
			}
		})
	}
	return counts[0], counts[1]
}
