package embedded_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKafkaFaults(t *testing.T) {
	clustertest.KafkaFaults(t, start(t, embedded.Options{}))
}

// TestKfakeDeviations: the kfake go.mod pins still shows each of its known deviations from
// Kafka (cluster/local's TestKfakeDeviations shows Kafka does not).
func TestKfakeDeviations(t *testing.T) {
	clustertest.CheckDeviations(t, start(t, embedded.Options{}), true)
}

// TestEpochExhaustion drives a transactional id past epoch 32,766 on kfake: the producer id
// rotates, and a commit with the last token before the rotation is refused.
func TestEpochExhaustion(t *testing.T) {
	x := clustertest.EpochExhaustion(t, start(t, embedded.Options{}), 2*time.Minute)
	t.Logf("%d InitProducerId calls in %v: (%d,%d) -> (%d,%d), ordered %v; the stale commit: %s",
		x.Calls, x.Took.Round(time.Millisecond), x.Before[0], x.Before[1], x.After[0], x.After[1], x.Ordered, x.StaleFencedWith)
	if !x.StaleFenced {
		t.Errorf("a commit with the pre-rotation token (%d,%d) was accepted", x.Before[0], x.Before[1])
	}
}

// TestKfakeRefusesARotationRetry shows a kfake deviation: a retry of the InitProducerId that
// rotated an exhausted producer id (the same producer id and epoch, as a client sends when the
// answer was lost) is refused with INVALID_PRODUCER_ID_MAPPING, on the coordinator that
// rotated it, where Kafka returns the rotated token (and, before KAFKA-20357's fix, refuses it
// only after a failover: cluster/local's TestRotationRetryAfterFailover). The test fails once
// a kfake accepts the retry: then move the pin and drop the row in docs/findings.md.
func TestKfakeRefusesARotationRetry(t *testing.T) {
	r := clustertest.RotationRetryAfterFailover(t, start(t, embedded.Options{}), 2*time.Minute)
	t.Logf("%s", r)
	if r.RetryBeforeOK || !strings.HasPrefix(r.RetryBefore, "INVALID_PRODUCER_ID_MAPPING") {
		t.Errorf("kfake answered the rotation's retry %s, want INVALID_PRODUCER_ID_MAPPING (its known deviation)", r.RetryBefore)
	}
}

// TestKfakeTimeoutAbortAtExhaustionHangs shows a kfake bug the checker's rotation work found in
// its source: when a transaction at the exhausted epoch (32,766) times out, kfake rotates the
// producer id and then aborts the new producer instead of the old, which stays among the open
// transactions, and the coordinator stops answering DescribeTransactions. The control, the same
// timeout at epoch 100, aborts and answers. The test fails once a kfake fixes the bug: then
// move the pin and drop the line in the README's Findings.
func TestKfakeTimeoutAbortAtExhaustionHangs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch int16
		hangs bool
	}{{"control at epoch 100", 100, false}, {"at the exhausted epoch", 32766, true}} {
		t.Run(tc.name, func(t *testing.T) {
			hung, state := timeoutAbortAt(t, tc.epoch)
			if hung != tc.hangs {
				t.Errorf("at epoch %d: DescribeTransactions stopped answering %v, want %v (last state %q)", tc.epoch, hung, tc.hangs, state)
			}
		})
	}
}

// timeoutAbortAt bumps a transactional id to epoch, leaves a transaction with one record open
// for its 1 s timeout, and asks DescribeTransactions until the coordinator has aborted it
// (hung false) or a request gets no answer within 10 s (hung true: kfake answers in
// milliseconds, so 10 s tells a hang from a loaded machine).
func timeoutAbortAt(t *testing.T, epoch int16) (hung bool, state string) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const txnID = "exhausted"
	id, e := int64(-1), int16(-1)
	for e < epoch-1 { // the producer's own InitProducerId makes it epoch
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(txnID)
		req.TransactionTimeoutMillis = 1000
		req.ProducerID, req.ProducerEpoch = id, e
		resp, err := req.RequestWith(ctx, raw)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("InitProducerId(%d, %d): %v", id, e, err)
		}
		id, e = resp.ProducerID, resp.ProducerEpoch
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(time.Second), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := p.ProducerID(ctx); got != epoch {
		t.Fatalf("the producer runs at epoch %d, want %d", got, epoch)
	}
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		resp, err := req.RequestWith(rctx, raw)
		rcancel()
		if err != nil {
			return true, state
		}
		if len(resp.TransactionStates) == 1 {
			state = resp.TransactionStates[0].State
			if state != "Ongoing" {
				return false, state // the timeout aborted it
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the coordinator's state: nothing to wait on
	}
	t.Fatalf("the transaction at epoch %d is still %q 45 s after its 1 s timeout", epoch, state)
	return false, state
}
