package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
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

// createAfterRestart: after the broker with the highest id (kfake's controller) is killed and started again, CreateTopics on the
// controller the metadata names. kfake answers NOT_CONTROLLER; Kafka creates the topic.
func createAfterRestart(t *testing.T, c cluster.Cluster) (bool, string) {
	ctx := probeCtx(t)
	ctx, cancel := context.WithTimeout(ctx, 2*RecoverTimeout)
	defer cancel()
	// kfake's controller is its highest node id; restart that one.
	broker := int32(c.Info().Brokers - 1)
	if err := c.Kill(ctx, broker); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, broker); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitHealthy(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
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
	answer := fmt.Sprintf("CreateTopics after restarting %s answered %v", cluster.BrokerName(broker), errOrOK(last))
	return errors.Is(last, kerr.NotController), answer
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

// Exhaustion is what EpochExhaustion measured: the token before and after the producer id
// rotated, how many InitProducerId calls it took and how long.
type Exhaustion struct {
	Before, After   [2]int64 // producer id, epoch
	Ordered         bool     // After > Before as (producer id, epoch)
	Calls           int
	Took            time.Duration
	StaleFenced     bool   // a commit with the pre-rotation token was refused
	StaleFencedWith string // what the broker answered it
}

// EpochExhaustion drives a transactional id's epoch to exhaustion (Short.MaxValue - 1) with
// InitProducerId calls on the KIP-360 path (each names the current id and epoch, so the
// coordinator bumps it), until the coordinator hands out a new producer id. Then the holder of
// the last token before the rotation commits (EndTxn): it must be refused. Ordered reports
// whether the new token compares greater than the old one as (producer id, epoch), the order
// a fencing token's user would compare them in.
func EpochExhaustion(t *testing.T, c cluster.Cluster, limit time.Duration) Exhaustion {
	ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
	defer cancel()
	txnID := fmt.Sprintf("fc-exhaust-%d", time.Now().UnixNano())
	topic := txnID
	CreateTopic(t, c, topic)
	raw := Client(t, c, 2)
	init := func(id int64, epoch int16) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = id, epoch
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatalf("InitProducerId(%d, %d): %v", id, epoch, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("InitProducerId(%d, %d): %v", id, epoch, err)
		}
		return resp
	}
	var x Exhaustion
	start := time.Now()
	r := init(-1, -1)
	id, epoch := r.ProducerID, r.ProducerEpoch
	x.Calls = 1
	for {
		if time.Since(start) > limit {
			t.Fatalf("epoch %d of %d after %v and %d calls: exhaustion not reached within %v", epoch, 32766, time.Since(start), x.Calls, limit)
		}
		r := init(id, epoch)
		x.Calls++
		if r.ProducerID != id {
			x.Before, x.After = [2]int64{id, int64(epoch)}, [2]int64{r.ProducerID, int64(r.ProducerEpoch)}
			break
		}
		id, epoch = r.ProducerID, r.ProducerEpoch
	}
	x.Took = time.Since(start)
	// The deposed holder's commit: EndTxn with the last token before the rotation.
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID, req.ProducerEpoch = x.Before[0], int16(x.Before[1])
	req.Commit = true
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		t.Fatalf("EndTxn with the pre-rotation token: %v", err)
	}
	x.StaleFenced = resp.ErrorCode != 0
	x.StaleFencedWith = errName(resp.ErrorCode)
	x.Ordered = x.After[0] > x.Before[0] || (x.After[0] == x.Before[0] && x.After[1] > x.Before[1])
	return x
}
