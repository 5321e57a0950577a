package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// A Deviation is one way kfake is known to answer differently from Apache Kafka in what
// fencing rests on. Probe runs it on a cluster and reports whether the cluster showed the
// deviation, and what it answered.
type Deviation struct {
	Name  string
	Probe func(t *testing.T, c cluster.Cluster) (shown bool, answer string)
}

// Deviations are kfake's known deviations from Apache Kafka (docs/regressions.md#kfake-deviations).
// On the kfake that go.mod pins each shows; on Kafka 4.1.2 none does.
var Deviations = []Deviation{
	{Name: "stale-epoch-init", Probe: staleEpochInit},
	{Name: "tv2-phantom-transaction", Probe: phantomTransaction},
	{Name: "read-committed-aborted-at-fetch-limit", Probe: abortedAtFetchLimit},
	{Name: "add-partitions-batched-ignored", Probe: addPartitionsBatched},
	{Name: "create-topics-config-source-unset", Probe: createConfigSource},
	{Name: "describe-topic-partitions-null-elr", Probe: describePartitionsNullELR},
	// Last, the two probes that restart a broker: after kfake's controller (its highest node
	// id) restarts, kfake creates no topic (the last deviation), and the partition leader the
	// first restarts is sometimes the controller, so a probe after it could not create its
	// topic (add-partitions-batched-ignored failed so in a CI run).
	{Name: "epoch-end-undefined-after-leader-change", Probe: epochEndAfterLeaderChange},
	{Name: "create-topics-not-controller-after-restart", Probe: createAfterRestart},
}

// CheckDeviations runs every Deviation on c and requires each to show (want true: kfake) or
// none to (want false: Apache Kafka). A kfake that no longer shows one fails here: then the
// deviation is fixed upstream, and the docs and the transport's workaround can go.
func CheckDeviations(t *testing.T, c cluster.Cluster, want bool) {
	for _, d := range Deviations {
		t.Run(d.Name, func(t *testing.T) {
			shown, answer := d.Probe(t, c)
			t.Logf("%s: %s", d.Name, answer)
			if shown != want {
				t.Errorf("deviation %s shown=%v, want %v; the cluster answered: %s", d.Name, shown, want, answer)
			}
		})
	}
}

func probeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// initProducer builds a transactional client of process 1 and inits its producer id.
func initProducer(t *testing.T, ctx context.Context, c cluster.Cluster, txnID string) (*kgo.Client, int64, int16) {
	t.Helper()
	cl := Client(t, c, 1, kgo.TransactionalID(txnID), kgo.TransactionTimeout(30*time.Second))
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("init producer id of %s: %v", txnID, err)
	}
	return cl, id, epoch
}

// staleEpochInit: a producer re-initialises with the producer id and epoch it held before a
// successor's InitProducerId (the KIP-360 recovery path). Kafka answers that the stale epoch is
// fenced; kfake bumps the epoch and hands the deposed producer the role again.
func staleEpochInit(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	txnID := fmt.Sprintf("fc-dev-init-%d", time.Now().UnixNano())
	_, id, old := initProducer(t, ctx, c, txnID)
	_, id2, cur := initProducer(t, ctx, c, txnID)
	raw := Client(t, c, 2)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txnID
	req.TransactionTimeoutMillis = 30000
	req.ProducerID, req.ProducerEpoch = id, old
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		t.Fatalf("InitProducerId with the stale epoch: %v", err)
	}
	answer := fmt.Sprintf("InitProducerId(id %d, stale epoch %d; the successor holds id %d epoch %d) answered %s, id %d epoch %d",
		id, old, id2, cur, errName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	return resp.ErrorCode == 0, answer
}

// phantomTransaction (TV2): a fenced producer's Produce is refused, and on kfake it still
// registers its partition in the transactional id's transaction, which the successor never
// began. That transaction stays ongoing until it times out; its abort bumps the epoch and
// fences the successor. Kafka leaves the transaction empty.
func phantomTransaction(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	if v, err := FinalizedFeature(ctx, Admin(t, c), "transaction.version"); err != nil || v < 2 {
		t.Skipf("needs transaction.version 2 (finalized %d, %v)", v, err)
	}
	txnID := fmt.Sprintf("fc-dev-phantom-%d", time.Now().UnixNano())
	topic := txnID
	CreateTopic(t, c, topic)
	zombie, _, _ := initProducer(t, ctx, c, txnID)
	initProducer(t, ctx, c, txnID) // the successor fences the zombie and begins nothing
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	perr := zombie.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("zombie")}).FirstErr()
	cancel()
	if perr == nil {
		t.Fatalf("the fenced producer's produce succeeded")
	}
	resp, err := describeTxn(ctx, Client(t, c, 2), txnID)
	if err != nil {
		t.Fatalf("describe %s: %v", txnID, err)
	}
	answer := fmt.Sprintf("the fenced produce failed (%v); DescribeTransactions then says state %s with %d topic(s)", perr, resp.State, len(resp.Topics))
	return len(resp.Topics) > 0, answer
}

// abortedAtFetchLimit: a read_committed Fetch whose request-level byte limit (MaxBytes) ends
// the answer in the middle of a partition. The answer carries the batches taken so far; Kafka
// also lists the aborted transactions among them, so the client drops the aborted records.
// kfake leaves the list out when the request limit is what stopped it, so a read_committed
// client delivers an aborted record as committed.
func abortedAtFetchLimit(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	txnID := fmt.Sprintf("fc-dev-fetchlimit-%d", time.Now().UnixNano())
	topic := txnID
	CreateTopic(t, c, topic)
	cl, _, _ := initProducer(t, ctx, c, txnID)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(commit))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	// The aborted record is at offset 0 (its abort marker at 1), the committed one at 2. A
	// one-byte request limit lets the answer take the first batch and stops at the second.
	topics, err := Admin(t, c).ListTopics(ctx, topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, topics[topic].Err)
	}
	leader := topics[topic].Partitions[0].Leader
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1
	req.IsolationLevel = 1 // read_committed
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID // the client picks the version: names or ids
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, Client(t, c, 2).Broker(int(leader)))
	if err != nil {
		t.Fatalf("fetch %s from its leader %d: %v", topic, leader, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer without the partition: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch %s answered %v with %d bytes of batches", topic, err, len(p.RecordBatches))
	}
	answer := fmt.Sprintf("a read_committed Fetch with MaxBytes 1 answered %d bytes of batches (the aborted one first) and %d aborted transaction(s), LSO %d",
		len(p.RecordBatches), len(p.AbortedTransactions), p.LastStableOffset)
	return len(p.AbortedTransactions) == 0, answer
}

// addPartitionsBatched: AddPartitionsToTxn v4 and later carry a batch of transactions, each
// with its own transactional id (KIP-890's verification; Kafka reserves these versions for
// brokers and, under an authorizer, asks for CLUSTER_ACTION; there is none here). Kafka adds
// the partition to the transaction; kfake reads only the fields of v0-3, answers without an
// error and adds nothing, so a client that sends v5 (@platformatic/kafka 2.12.1 does) then has
// every transactional Produce refused INVALID_TXN_STATE.
func addPartitionsBatched(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	txnID := fmt.Sprintf("fc-dev-addparts-%d", time.Now().UnixNano())
	topic := txnID
	CreateTopic(t, c, topic)
	_, id, epoch := initProducer(t, ctx, c, txnID)
	raw := Client(t, c, 2)
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType = 1 // transaction
	find.CoordinatorKeys = []string{txnID}
	found, err := find.RequestWith(ctx, raw)
	if err != nil || len(found.Coordinators) != 1 || found.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find the coordinator of %s: %v %+v", txnID, err, found)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = txnID, id, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	tx.Topics = append(tx.Topics, rt)
	req.Transactions = append(req.Transactions, tx)
	// Straight to the coordinator: the client's own routing of this request is a client's
	// (v3 at most); a broker's request is sent as both sides' newest version, v5.
	resp, err := req.RequestWith(ctx, raw.Broker(int(found.Coordinators[0].NodeID)))
	if err != nil {
		t.Fatalf("AddPartitionsToTxn v4+ for %s: %v", txnID, err)
	}
	if resp.Version < 4 {
		t.Skipf("AddPartitionsToTxn went out as v%d: the cluster does not list v4", resp.Version)
	}
	var codes []string
	for _, tr := range resp.Transactions {
		for _, to := range tr.Topics {
			for _, p := range to.Partitions {
				codes = append(codes, errName(p.ErrorCode))
			}
		}
	}
	state, err := describeTxn(ctx, raw, txnID)
	if err != nil {
		t.Fatalf("describe %s: %v", txnID, err)
	}
	answer := fmt.Sprintf("AddPartitionsToTxn v%d (one transaction, %s/0) answered %s with partition results %v; DescribeTransactions then says state %s with %d topic(s)",
		resp.Version, topic, errName(resp.ErrorCode), codes, state.State, len(state.Topics))
	return len(state.Topics) == 0, answer
}

func describeTxn(ctx context.Context, cl *kgo.Client, txnID string) (kmsg.DescribeTransactionsResponseTransactionState, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txnID}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.DescribeTransactionsResponseTransactionState{}, err
	}
	if len(resp.TransactionStates) != 1 {
		return kmsg.DescribeTransactionsResponseTransactionState{}, fmt.Errorf("%d states in the answer", len(resp.TransactionStates))
	}
	s := resp.TransactionStates[0]
	if err := kerr.ErrorForCode(s.ErrorCode); err != nil {
		return s, err
	}
	return s, nil
}

// epochEndAfterLeaderChange: a partition's records are written under leader epoch 0; its
// leader is killed and started again, so the leader epoch moves on, and nothing more is
// written. Asked where epoch 0 ends (OffsetForLeaderEpoch, KIP-320), Kafka answers the log end
// offset, where the next epoch started; kfake answers UNDEFINED (-1) until a batch of a later
// epoch is written. A consumer that validates its position after the leader change (franz-go
// does) then takes the log for truncated and resets to its reset offset: an exactly-once
// pipeline copies the partition again from the start.
func epochEndAfterLeaderChange(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	ctx, cancel := context.WithTimeout(ctx, 2*RecoverTimeout)
	defer cancel()
	topic := fmt.Sprintf("fc-dev-epoch-%d", time.Now().UnixNano())
	CreateTopic(t, c, topic)
	cl := Client(t, c, 1, kgo.DefaultProduceTopic(topic))
	const written = 10
	for range written {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	bs, err := c.Brokers(ctx, cluster.RoleQuery{Partitions: []cluster.TopicPartition{{Topic: topic, Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	leader := int32(-1)
	for _, b := range bs {
		if b.Has(cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: topic, Partition: 0}) {
			leader = b.ID
		}
	}
	if leader < 0 {
		t.Fatalf("no leader of %s/0 among %v", topic, bs)
	}
	restartBroker(t, ctx, c, leader)
	adm := Admin(t, c)
	var o kadm.OffsetForLeaderEpoch
	for {
		var r kadm.OffsetForLeaderEpochRequest
		r.Add(topic, 0, 0)
		res, err := adm.OffsetForLeaderEpoch(ctx, r)
		if err == nil {
			o = res[topic][0]
			err = o.Err
		}
		if err == nil || !kerr.IsRetriable(err) {
			if err != nil {
				t.Fatalf("OffsetForLeaderEpoch: %v", err)
			}
			break
		}
		select { // a new leader not known everywhere yet
		case <-ctx.Done():
			t.Fatalf("OffsetForLeaderEpoch: %v (%v)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	answer := fmt.Sprintf("after %s (the leader) restarted, OffsetForLeaderEpoch said epoch 0 of %s/0 (%d records) ends at %d (leader epoch %d)",
		links.BrokerName(leader), topic, written, o.EndOffset, o.LeaderEpoch)
	return o.EndOffset < 0, answer
}

// createAfterRestart: after the broker with the highest id (kfake's controller) is killed and started again, CreateTopics on the
// controller the metadata names. kfake answers NOT_CONTROLLER; Kafka creates the topic.
func createAfterRestart(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	ctx, cancel := context.WithTimeout(ctx, 2*RecoverTimeout)
	defer cancel()
	// kfake's controller is its highest node id; restart that one.
	broker := int32(c.Info().Brokers - 1)
	restartBroker(t, ctx, c, broker)
	topic := fmt.Sprintf("fc-dev-create-%d", time.Now().UnixNano())
	// A fresh client, as a process that starts after the restart and creates its topic.
	adm := Admin(t, c)
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		resp, err := adm.CreateTopic(ctx, 1, int16(min(3, c.Info().Brokers)), nil, topic)
		if err == nil {
			err = resp.Err
		}
		if last = err; err == nil || !kerr.IsRetriable(err) || errors.Is(err, kerr.NotController) {
			break
		}
		time.Sleep(time.Second)
	}
	answer := fmt.Sprintf("CreateTopics after restarting %s answered %v", links.BrokerName(broker), errOrOK(last))
	return errors.Is(last, kerr.NotController), answer
}

// createConfigSource: CreateTopics (v5+) answers the new topic's configs, each with its source
// (DescribeConfigs' ConfigSource). Kafka says where each comes from (the one the request set:
// DYNAMIC_TOPIC_CONFIG); kfake leaves every source at -1, which no ConfigSource is, and
// kafka-clients' admin throws on it ("id should be positive, id: -1"): Kafka Streams then
// cannot create its changelog topics on kfake. Found by the Kafka Streams adapter.
func createConfigSource(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	cl := Client(t, c, 1)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = fmt.Sprintf("fc-dev-config-source-%d", time.Now().UnixNano())
	rt.NumPartitions, rt.ReplicationFactor = 1, int16(min(3, c.Info().Brokers))
	policy := "compact"
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", &policy
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %+v", resp.Topics)
	}
	if resp.GetVersion() < 5 {
		t.Skipf("CreateTopics v%d answers no configs", resp.GetVersion())
	}
	unset := 0
	var sources []string
	for _, c := range resp.Topics[0].Configs {
		if c.Source < 0 {
			unset++
		}
		if c.Name == "cleanup.policy" {
			sources = append(sources, fmt.Sprintf("cleanup.policy source %d", c.Source))
		}
	}
	answer := fmt.Sprintf("CreateTopics v%d answered %d configs, %d with source -1; %v", resp.GetVersion(), len(resp.Topics[0].Configs), unset, sources)
	return unset > 0, answer
}

// describePartitionsNullELR: DescribeTopicPartitions (KIP-966) answers each partition's
// eligible leader replicas and last known ELR. Kafka answers empty arrays when there are
// none; kfake answers null, and kafka-clients' admin (describeTopics, which Kafka Streams
// calls to validate its internal topics) throws a NullPointerException on it. Found by the
// Kafka Streams adapter.
func describePartitionsNullELR(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	topic := fmt.Sprintf("fc-dev-elr-%d", time.Now().UnixNano())
	if _, err := Admin(t, c).CreateTopic(ctx, 1, int16(min(3, c.Info().Brokers)), nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	cl := Client(t, c, 1)
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	req.ResponsePartitionLimit = 100
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Skipf("DescribeTopicPartitions: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		t.Fatalf("DescribeTopicPartitions: %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	answer := fmt.Sprintf("DescribeTopicPartitions v%d: partition 0's EligibleLeaderReplicas null=%v, LastKnownELR null=%v",
		resp.GetVersion(), p.EligibleLeaderReplicas == nil, p.LastKnownELR == nil)
	return p.EligibleLeaderReplicas == nil, answer
}

// restartBroker kills broker id, starts it again and waits until the cluster is healthy.
func restartBroker(t *testing.T, ctx context.Context, c cluster.Cluster, id int32) {
	t.Helper()
	if err := c.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitHealthy(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
}

func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "no error"
}

func errOrOK(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
