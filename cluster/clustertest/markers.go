package clustertest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// The probes of this file drive one transaction with raw requests, so that they choose what
// each request carries and when it is sent, and shape one broker-to-broker path with the
// cluster's peer links. Each needs a cluster with peer links (local, containers) and at least
// two brokers: the partition's leader and the transaction's coordinator must differ, so that
// what passes between them crosses a link.

// txnSetup is one probe's topic, transactional id and the two brokers it involves.
type txnSetup struct {
	ctx         context.Context
	c           cluster.Cluster
	raw         *kgo.Client
	topic       string
	txnID       string
	leader      int32 // leads topic's partition 0
	coordinator int32 // coordinates txnID; never leader
	tv          int16 // the cluster's finalized transaction.version
}

// newTxnSetup creates a one-partition topic and picks a transactional id whose coordinator is
// not the partition's leader (trying ids until one hashes elsewhere). The raw client speaks
// the request versions of the cluster's transaction version: a TV2 client (Produce 12, EndTxn
// 5, the produce adds its partition) on a TV2 cluster, a TV1 client (AddPartitionsToTxn 3,
// Produce 11, EndTxn 4) otherwise. Fetch stays at 12, the last version that names topics.
func newTxnSetup(t *testing.T, ctx context.Context, c cluster.Cluster, prefix string, apart bool) *txnSetup {
	t.Helper()
	s := &txnSetup{ctx: ctx, c: c, topic: fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())}
	if v, err := FinalizedFeature(ctx, Admin(t, c), "transaction.version"); err == nil {
		s.tv = v
	}
	s.tv = max(s.tv, 1) // 3.x has no transaction.version feature: its transactions are version 1
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Fetch.Int16(), 12)
	if s.tv >= 2 {
		vs.SetMaxKeyVersion(kmsg.Produce.Int16(), 12)
		vs.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 5)
	} else {
		vs.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
		vs.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
		vs.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	}
	// Requests wait on delayed peer links: give each up to 30 s.
	s.raw = Client(t, c, 1, kgo.MaxVersions(vs), kgo.RequestTimeoutOverhead(30*time.Second), kgo.RetryTimeout(30*time.Second))
	CreateTopic(t, c, s.topic)
	// A new topic's leader is known to every broker a moment after CreateTopics returns.
	s.leader = -1
	if _, err := Eventually(30*time.Second, func() error {
		bs, err := c.Brokers(ctx, cluster.RoleQuery{Partitions: []cluster.TopicPartition{{Topic: s.topic, Partition: 0}}})
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.Has(cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: s.topic, Partition: 0}) {
				s.leader = b.ID
				return nil
			}
		}
		return fmt.Errorf("no leader of %s/0 in %+v", s.topic, bs)
	}); err != nil {
		t.Fatal(err)
	}
	var replicas map[int32][]int32 // the replicas of each transaction-log partition
	if apart {
		replicas = txnLogReplicas(t, ctx, c)
	}
	for i := 0; i < 256; i++ {
		id := fmt.Sprintf("%s-%d", s.topic, i)
		if apart && slices.Contains(replicas[txnLogPartition(id, len(replicas))], s.leader) {
			continue
		}
		coord, err := Coordinator(ctx, c, id)
		if err != nil {
			t.Fatal(err)
		}
		if coord != s.leader {
			s.txnID, s.coordinator = id, coord
			return s
		}
	}
	t.Fatalf("no transactional id of 256 is coordinated away from %s, the leader of %s/0 (apart from its replicas: %v)", links.BrokerName(s.leader), s.topic, apart)
	return nil
}

// txnLogReplicas are the replicas of each partition of the transaction log.
func txnLogReplicas(t *testing.T, ctx context.Context, c cluster.Cluster) map[int32][]int32 {
	t.Helper()
	tds, err := Admin(t, c).ListTopics(ctx, "__transaction_state")
	if err != nil {
		t.Fatal(err)
	}
	td, ok := tds["__transaction_state"]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		t.Fatalf("the transaction log's metadata: %v %v", ok, td.Err)
	}
	out := map[int32][]int32{}
	for p, pd := range td.Partitions {
		out[p] = pd.Replicas
	}
	return out
}

// txnLogPartition is the transaction-log partition of txnID among n, as Kafka computes it:
// the absolute value of the id's Java hash code (0 for the least int) modulo n.
func txnLogPartition(txnID string, n int) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(txnID)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(n)
}

// broker is the raw client's connection to broker id.
func (s *txnSetup) broker(id int32) *kgo.Broker { return s.raw.Broker(int(id)) }

// initProducer asks the coordinator for a producer id with the given transaction timeout,
// again while it answers with a retriable coordinator error.
func (s *txnSetup) initProducer(t *testing.T, timeout time.Duration) (int64, int16) {
	t.Helper()
	var last error
	for wait := time.Now().Add(30 * time.Second); time.Now().Before(wait); time.Sleep(200 * time.Millisecond) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &s.txnID
		req.TransactionTimeoutMillis = int32(timeout / time.Millisecond)
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(s.ctx, s.broker(s.coordinator))
		if err == nil && resp.ErrorCode == 0 {
			return resp.ProducerID, resp.ProducerEpoch
		}
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			if !retriableCoordinator(resp.ErrorCode) {
				t.Fatalf("InitProducerId of %s: %v", s.txnID, err)
			}
		}
		last = err
	}
	t.Fatalf("InitProducerId of %s: %v", s.txnID, last)
	return 0, 0
}

// addPartition is a TV1 client's AddPartitionsToTxn for the topic's partition (a TV2 client's
// produce adds it).
func (s *txnSetup) addPartition(id int64, epoch int16) (int16, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = s.txnID, id, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = s.topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(s.ctx, s.broker(s.coordinator))
	if err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode, nil
			}
		}
	}
	return 0, nil
}

// produce sends one transactional record (sequence seq) to the partition's leader, waiting for
// every in-sync replica, and returns the partition's error code.
func (s *txnSetup) produce(id int64, epoch int16, seq int32, value string) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &s.txnID
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = s.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = txnBatch(id, epoch, seq, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(s.ctx, s.broker(s.leader))
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce answered %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// endTxn sends EndTxn to the coordinator.
func (s *txnSetup) endTxn(id int64, epoch int16, commit bool) (int16, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = s.txnID, id, epoch, commit
	resp, err := req.RequestWith(s.ctx, s.broker(s.coordinator))
	if err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

// describe is the transaction's state as its coordinator reports it.
func (s *txnSetup) describe() string {
	st, err := describeTxn(s.ctx, s.raw, s.txnID)
	if err != nil {
		return "describe: " + err.Error()
	}
	return st.State
}

// awaitState polls DescribeTransactions until the state is want, for up to d, and returns
// the states seen in order (each once).
func (s *txnSetup) awaitState(want string, d time.Duration) (states []string, reached bool) {
	for wait := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		st := s.describe()
		if len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
		if st == want {
			return states, true
		}
		if time.Now().After(wait) {
			return states, false
		}
	}
}

// peerLinks are the peer links the dialing broker from has to broker to (from -1: from any).
func (s *txnSetup) peerLinks(from, to int32) []*links.Link {
	var out []*links.Link
	for _, l := range s.c.Network().Links() {
		if l.Kind() == links.LinkPeer && l.Broker() == to && (from < 0 || l.From() == from) {
			out = append(out, l)
		}
	}
	return out
}

// addToxic adds t to every link and removes it when the test ends (the returned function
// removes it earlier).
func addToxic(t *testing.T, ls []*links.Link, tox links.Toxic) func() {
	t.Helper()
	if len(ls) == 0 {
		t.Fatal("no peer link to shape: the cluster routes no broker-to-broker traffic through proxies")
	}
	for _, l := range ls {
		if err := l.AddToxic(context.Background(), tox); err != nil {
			t.Fatalf("toxic %s on %s: %v", tox.Name, l, err)
		}
	}
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		for _, l := range ls {
			_ = l.RemoveToxic(context.Background(), tox.Name)
		}
	}
	t.Cleanup(remove)
	return remove
}

// brokerLog is broker id's log so far ("" when the cluster keeps none).
func brokerLog(c cluster.Cluster, id int32) string {
	dir := c.Info().LogsDir
	if dir == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(dir, links.BrokerName(id)+".log"))
	return string(b)
}

// txnBatch is a version-2 record batch of one transactional record.
func txnBatch(id int64, epoch int16, seq int32, value []byte) []byte {
	rec := kmsg.Record{Value: value}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the length varint of 0 takes one byte
	records := rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0x10, // transactional
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           id,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           1,
		Records:              records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))                                          // Length: what follows it
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC: from Attributes on
	return out
}

// markers counts the commit and abort markers of producer id in the partition's log up to its
// high watermark, asking the leader.
func (s *txnSetup) markers(id int64) (commits, aborts int, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = s.topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = 0, -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(s.ctx, s.broker(s.leader))
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, errors.New("fetch answered no partition")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, 0, kerr.ErrorForCode(p.ErrorCode)
	}
	for raw := p.RecordBatches; len(raw) >= 12; {
		n := 12 + int(binary.BigEndian.Uint32(raw[8:]))
		if n > len(raw) {
			break // a partial batch at the end of the answer
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:n]); err != nil {
			return 0, 0, err
		}
		raw = raw[n:]
		if b.Attributes&0x20 == 0 || b.ProducerID != id {
			continue
		}
		var r kmsg.Record
		if err := r.ReadFrom(b.Records); err != nil {
			return 0, 0, err
		}
		// A control record's key: version (int16), type (int16): 0 abort, 1 commit.
		if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:]) == 1 {
			commits++
		} else {
			aborts++
		}
	}
	return commits, aborts, nil
}

// awaitLeader waits until the partition's leader answers DescribeProducers for it (with no
// transaction of producer id yet).
func (s *txnSetup) awaitLeader(t *testing.T, id int64) {
	t.Helper()
	if _, err := Eventually(30*time.Second, func() error {
		_, err := s.txnEnded(id)
		if errors.Is(err, errNotActive) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("producer %d is already active on %s/0", id, s.topic)
		}
		return err
	}); err != nil {
		t.Fatalf("%s/0 on its leader %s: %v", s.topic, links.BrokerName(s.leader), err)
	}
}

// errNotActive: the partition's leader knows no state of the producer.
var errNotActive = errors.New("the producer is not active on the partition")

// txnEnded reports whether the partition's leader no longer has an open transaction of
// producer id (DescribeProducers answers from the leader's producer state, whether or not the
// marker is replicated yet).
func (s *txnSetup) txnEnded(id int64) (bool, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = s.topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(s.ctx, s.broker(s.leader))
	if err != nil {
		return false, err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				return false, kerr.ErrorForCode(p.ErrorCode)
			}
			for _, ap := range p.ActiveProducers {
				if ap.ProducerID == id {
					return ap.CurrentTxnStartOffset < 0, nil
				}
			}
		}
	}
	return false, fmt.Errorf("producer %d on %s/0: %w", id, s.topic, errNotActive)
}

// ProduceAfterAbort is what ProduceAfterTimeoutAbort measured.
type ProduceAfterAbort struct {
	Leader, Coordinator int32
	TV                  int16
	Token               [2]int64      // the producer id and epoch of the transaction
	AddTook             time.Duration // the TV1 AddPartitionsToTxn (0 under TV2)
	Produce             string        // the late Produce's answer
	ProduceTook         time.Duration
	Append              string // the leader's log line for the refused append ("" when the refusal came before the append)
	States              []string
	// Bug: the answer was INVALID_TXN_STATE from the log append (KAFKA-19690).
	Bug bool
	// AtAppend: the refusal came from the log append, the window the fix is about.
	AtAppend bool
}

// String says what a ProduceAfterAbort measured, on one line.
func (p ProduceAfterAbort) String() string {
	where := "before the append (the stale epoch was refused by the verification)"
	if p.AtAppend {
		where = "at the append: " + p.Append
	}
	return fmt.Sprintf("TV%d, leader b%d, coordinator b%d, transaction (%d, %d): add took %v; the Produce answered %s after %v, %s; states %s",
		p.TV, p.Leader, p.Coordinator, p.Token[0], p.Token[1], p.AddTook.Round(time.Millisecond), p.Produce,
		p.ProduceTook.Round(time.Millisecond), where, strings.Join(p.States, " → "))
}

// Timing of ProduceAfterTimeoutAbort.
const (
	// txnTimeout is the transaction timeout the producer asks for.
	txnTimeout = 2 * time.Second
	// produceAt is when the late Produce is sent, counted from the AddPartitionsToTxn that
	// opened the transaction: before the transaction times out, so that the coordinator
	// answers its verification Ongoing, at the producer's epoch.
	produceAt = 1500 * time.Millisecond
	// slowVerification delays the coordinator's answers to the leader, the verification
	// among them, past the timeout abort: the coordinator looks for timed-out transactions
	// every second, so it has aborted the transaction by txnTimeout + 1 s, and its marker
	// reaches the leader at once.
	slowVerification = 4 * time.Second
)

// ProduceAfterTimeoutAbort (KAFKA-19690) makes a transactional Produce reach the log after the
// coordinator's timeout abort, with a verification that passed, and reports what the
// partition answered. A Produce that simply arrives late meets a check of its epoch before
// the log append (the coordinator's verification refuses the stale epoch; from 4.1.0 the
// partition refuses it before asking), so the append's own check runs only when the
// verification passed before the abort and the abort marker overtook its answer. The probe
// makes that happen every time: the coordinator's answers to the partition's leader are
// delayed by 4 s (toxiproxy latency, downstream, on the peer link by which the leader reaches
// the coordinator), while the transaction log is replicated by the other brokers without
// delay (a four-broker cluster and a transactional id whose transaction-log partition has no
// replica on the leader), so the abort and its marker are not slowed. A TV1 client opens the
// transaction (timeout 2 s) with AddPartitionsToTxn, and 1.5 s later produces: the
// coordinator answers the verification Ongoing, the answer takes 4 s, the coordinator aborts
// the transaction on its timeout meanwhile and its abort marker is appended first. The append
// then finds no transaction and no verification guard: Kafka without the fix answers
// INVALID_TXN_STATE, with it INVALID_PRODUCER_EPOCH. The leader logs a refused append
// ("Error processing append operation"), not a refused verification, so the log says where
// the answer came from. The cluster must run transaction version 1 (a TV2 client's Produce
// adds its partition, and the coordinator refuses the add while an abort is pending), and
// have peer links and four brokers.
func ProduceAfterTimeoutAbort(t *testing.T, c cluster.Cluster) ProduceAfterAbort {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newTxnSetup(t, ctx, c, "fc-19690", true)
	if s.tv >= 2 {
		t.Skipf("needs a cluster at transaction version 1 (finalized %d): a TV2 client's produce adds its partition", s.tv)
	}
	p := ProduceAfterAbort{Leader: s.leader, Coordinator: s.coordinator, TV: s.tv}
	id, epoch := s.initProducer(t, txnTimeout)
	p.Token = [2]int64{id, int64(epoch)}
	s.awaitLeader(t, id)
	// One whole transaction first, so that the leader's connection for verifications to the
	// coordinator is open before its answers are slowed (a new connection would wait for its
	// ApiVersions answer too). It commits well inside the 2 s timeout.
	if code, err := s.addPartition(id, epoch); err != nil || code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %s", err, codeName(code))
	}
	if code, err := s.produce(id, epoch, 0, "warm"); err != nil || code != 0 {
		t.Fatalf("the first transaction's produce: %v %s", err, codeName(code))
	}
	if code, err := s.endTxn(id, epoch, true); err != nil || code != 0 {
		t.Fatalf("the first transaction's commit: %v %s", err, codeName(code))
	}
	if states, ok := s.awaitState("CompleteCommit", 30*time.Second); !ok {
		t.Fatalf("the first transaction did not complete: %v", states)
	}
	addToxic(t, s.peerLinks(s.leader, s.coordinator), links.Toxic{Name: "fc19690_latency", Type: "latency",
		Stream: links.StreamDownstream, Attributes: map[string]any{"latency": slowVerification.Milliseconds()}})
	start := time.Now()
	code, err := s.addPartition(id, epoch)
	p.AddTook = time.Since(start)
	if err != nil || code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %s", err, codeName(code))
	}
	if p.AddTook >= produceAt {
		t.Fatalf("AddPartitionsToTxn took %v, past the %v the Produce is due: the transaction log was slowed", p.AddTook, produceAt)
	}
	// Deliberate timing, not a wait for a condition: the Produce must reach the coordinator's
	// verification before the transaction times out.
	time.Sleep(time.Until(start.Add(produceAt)))
	before := len(brokerLog(c, s.leader))
	start = time.Now()
	code, err = s.produce(id, epoch, 1, "late")
	p.ProduceTook = time.Since(start)
	switch {
	case err != nil:
		p.Produce = err.Error()
	case code == 0:
		p.Produce = "accepted"
	default:
		p.Produce = codeName(code)
	}
	// The leader logs a refused append, the exception on the next line; a refusal by the
	// verification is not logged.
	_, _ = Eventually(5*time.Second, func() error {
		p.Append = appendError(brokerLog(c, s.leader), before, s.topic)
		if p.Append == "" {
			return errors.New("no refused append logged")
		}
		return nil
	})
	p.AtAppend = p.Append != ""
	p.Bug = code == kerr.InvalidTxnState.Code && p.AtAppend
	p.States, _ = s.awaitState("CompleteAbort", 30*time.Second)
	return p
}

// MarkerRetryResult is what MarkerRetry measured.
type MarkerRetryResult struct {
	Leader, Coordinator int32
	TV                  int16
	Token               [2]int64
	FirstMarker         time.Duration // from the EndTxn to the leader's transaction ending
	States              []string
	Final               string
	Commits, Aborts     int  // the markers of the producer in the partition's log
	RetryLogged         bool // the leader logged KAFKA-19999's "Idempotent transaction marker retry detected"
	// Retried: the retried marker reached the partition, written again (a third commit
	// marker of the producer: the first transaction's, the second's and its retry) or
	// recognised by the fix.
	Retried   bool
	Successor string
	// Hung: the transaction stayed in PrepareCommit, or the successor could not acquire the
	// transactional id (KAFKA-19999).
	Hung bool
}

// String says what a MarkerRetryResult measured, on one line.
func (m MarkerRetryResult) String() string {
	return fmt.Sprintf("TV%d, leader b%d, coordinator b%d, transaction (%d, %d): the leader ended it %v after the EndTxn; states %s; commit markers of the producer in the log %d (aborts %d); retry logged by the fix: %v; successor's InitProducerId %s",
		m.TV, m.Leader, m.Coordinator, m.Token[0], m.Token[1], m.FirstMarker.Round(time.Millisecond), strings.Join(m.States, " → "),
		m.Commits, m.Aborts, m.RetryLogged, m.Successor)
}

// MarkerRetry (KAFKA-19999) makes the transaction coordinator send a commit marker twice with
// the same epoch: the answer to its first WriteTxnMarkers is lost. The toxiproxy link by which
// the coordinator reaches the partition's leader drops everything the leader sends back (a
// downstream black hole), the producer commits, and once the leader shows the transaction
// ended (DescribeProducers: the marker is appended), the link is taken down, which closes the
// coordinator's connection with the marker request in flight, and brought up again clean. The
// coordinator sends the marker again with the same epoch. Kafka with the strict TV2 marker
// check (KAFKA-19446) and without KAFKA-19999's fix refuses the retry INVALID_PRODUCER_EPOCH,
// and the coordinator gives up its markers: the transaction hangs in PrepareCommit and every
// later request of the transactional id is answered CONCURRENT_TRANSACTIONS. With the fix the
// retry is written again (the leader logs "Idempotent transaction marker retry detected");
// before the strict check the lenient epoch check accepts it. Either way the log holds the
// commit marker twice and the transaction completes.
func MarkerRetry(t *testing.T, c cluster.Cluster) MarkerRetryResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newTxnSetup(t, ctx, c, "fc-19999", false)
	m := MarkerRetryResult{Leader: s.leader, Coordinator: s.coordinator, TV: s.tv}
	id, epoch := s.initProducer(t, time.Minute)
	m.Token = [2]int64{id, int64(epoch)}
	s.awaitLeader(t, id)
	if s.tv < 2 {
		if code, err := s.addPartition(id, epoch); err != nil || code != 0 {
			t.Fatalf("AddPartitionsToTxn: %v %s", err, codeName(code))
		}
	}
	// One whole transaction first, so that the coordinator's connection for markers to the
	// leader is open before the leader's answers are dropped (a new connection would wait for
	// its ApiVersions answer, and the first marker would not be sent at all).
	if code, err := s.produce(id, epoch, 0, "first"); err != nil || code != 0 {
		t.Fatalf("the first transaction's produce: %v %s", err, codeName(code))
	}
	if code, err := s.endTxn(id, epoch, true); err != nil || code != 0 {
		t.Fatalf("the first transaction's commit: %v %s", err, codeName(code))
	}
	if states, ok := s.awaitState("CompleteCommit", 30*time.Second); !ok {
		t.Fatalf("the first transaction did not complete: %v", states)
	}
	seq := int32(1)
	if s.tv >= 2 {
		epoch, seq = epoch+1, 0 // TV2: the commit bumped the epoch, and a new epoch starts at sequence 0
	} else if code, err := s.addPartition(id, epoch); err != nil || code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %s", err, codeName(code))
	}
	m.Token = [2]int64{id, int64(epoch)}
	if code, err := s.produce(id, epoch, seq, "committed"); err != nil || code != 0 {
		t.Fatalf("transactional produce: %v %s", err, codeName(code))
	}
	toLeader := s.peerLinks(s.coordinator, s.leader)
	if len(toLeader) != 1 {
		t.Fatalf("%d peer links %s→%s, want 1", len(toLeader), links.BrokerName(s.coordinator), links.BrokerName(s.leader))
	}
	heal := addToxic(t, toLeader, links.Toxic{Name: "fc19999_blackhole", Type: "timeout",
		Stream: links.StreamDownstream, Attributes: map[string]any{"timeout": 0}})
	before := len(brokerLog(c, s.leader))
	start := time.Now()
	if code, err := s.endTxn(id, epoch, true); err != nil || code != 0 {
		t.Fatalf("EndTxn(commit): %v %s", err, codeName(code))
	}
	if _, err := Eventually(20*time.Second, func() error {
		ended, err := s.txnEnded(id)
		if err == nil && !ended {
			err = errors.New("the transaction is still open on the leader")
		}
		return err
	}); err != nil {
		t.Fatalf("the commit marker never reached %s: %v", links.BrokerName(s.leader), err)
	}
	m.FirstMarker = time.Since(start)
	// The marker is in the leader's log and its answer is lost: close the coordinator's
	// connection (a disabled link closes its open connections) and let it reconnect clean.
	l := toLeader[0]
	if err := l.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	heal()
	if err := l.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	m.States, _ = s.awaitState("CompleteCommit", 60*time.Second)
	m.Final = m.States[len(m.States)-1]
	if _, err := Eventually(30*time.Second, func() error {
		var err error
		m.Commits, m.Aborts, err = s.markers(id)
		if err == nil && m.Commits < 3 && m.Final == "CompleteCommit" {
			err = fmt.Errorf("%d commit markers up to the high watermark, want 3 (the first transaction's, the second's and its retry)", m.Commits)
		}
		return err
	}); err != nil {
		t.Logf("markers: %v", err)
	}
	m.RetryLogged = strings.Contains(brokerLog(c, s.leader)[before:], "Idempotent transaction marker retry detected for producer "+fmt.Sprint(id))
	m.Retried = m.Commits >= 3 || m.RetryLogged
	// A successor, as the next holder of the transactional id: InitProducerId, retried while
	// the coordinator answers that the transaction is still completing.
	var answers []string
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &s.txnID
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, s.broker(s.coordinator))
		answer := errOrOK(err)
		if err == nil {
			answer = codeName(resp.ErrorCode)
			if resp.ErrorCode == 0 {
				answer = fmt.Sprintf("(%d, %d)", resp.ProducerID, resp.ProducerEpoch)
			}
		}
		if len(answers) == 0 || answers[len(answers)-1] != answer {
			answers = append(answers, answer)
		}
		if (err == nil && !retriableCoordinator(resp.ErrorCode)) || time.Now().After(wait) {
			m.Hung = err != nil || resp.ErrorCode != 0
			break
		}
	}
	m.Successor = strings.Join(answers, ", then ")
	m.Hung = m.Hung || m.Final != "CompleteCommit"
	return m
}

// appendError finds, in log from offset from on, the leader's line for a refused append to
// topic's partition 0 and returns the exception that follows it ("" when there is none).
func appendError(log string, from int, topic string) string {
	if from > len(log) {
		return ""
	}
	lines := strings.Split(log[from:], "\n")
	for i, line := range lines {
		// 4.x names the partition with its topic id: "partition <id>:<topic>-0".
		if !strings.Contains(line, "Error processing append operation on partition ") || !strings.Contains(line, topic+"-0") {
			continue
		}
		for _, next := range lines[i+1 : min(i+3, len(lines))] {
			if strings.Contains(next, "Exception") {
				return strings.TrimSpace(next)
			}
		}
		return strings.TrimSpace(line)
	}
	return ""
}
