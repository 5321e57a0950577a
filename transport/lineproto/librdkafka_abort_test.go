package lineproto_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// TestLibrdkafkaAbortAfterTimedOutAddPartitions shows a librdkafka 2.16.0 bug (librdkafka
// #4849's family; docs/findings.md, docs/regressions.md "librdkafka-abort-unregistered"): when
// a transaction's AddPartitionsToTxn times out in flight (its answer does not come within
// socket.timeout.ms), librdkafka drops the connection, fails the transaction's message
// (_MSG_TIMED_OUT, abortable), and abort_transaction() then sends EndTxn(abort) on a new
// connection without knowing whether the partition was ever added. The coordinator, which has
// not seen the AddPartitionsToTxn yet, holds no transaction for the producer and answers
// INVALID_TXN_STATE, which librdkafka makes fatal: the producer is lost, where the abort of an
// abortable error should have succeeded. Here kfake holds the member's second
// AddPartitionsToTxn for three request timeouts before handling it. The test passes while the
// bug is there (the abort fails fatally and the member asks for a restart) and fails once a
// librdkafka release aborts cleanly: then move the finding to fixed.
func TestLibrdkafkaAbortAfterTimedOutAddPartitions(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv, c := librdkafkaOnKfake(t)
	const rt = 2 * time.Second
	var armed, held, shown atomic.Bool
	release := make(chan struct{})
	defer close(release)
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if armed.CompareAndSwap(true, false) {
			held.Store(true)
			shown.Store(true)
			// Handled late, not lost: the request reaches the coordinator after the abort.
			c.SleepControl(func() {
				select {
				case <-release:
				case <-time.After(3 * rt):
				}
			})
			held.Store(false)
			return nil, nil, false
		}
		if held.Load() {
			// librdkafka's retries of it, on its new connection, while the first is held: a
			// retriable refusal, so that the partition stays unregistered until the
			// transaction's message times out, whichever of librdkafka's timeout scans comes
			// first (the coordinator's answer to a request of a producer whose earlier request
			// it is still working on).
			return concurrentTransactions(r.(*kmsg.AddPartitionsToTxnRequest)), nil, true
		}
		return nil, nil, false
	})
	addr := c.ListenAddrs()[0]
	cl := inAndOut(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := transport.NewConfig(addr, 10*time.Second) // the transaction timeout: longer than the hold
	conn.RequestTimeout = rt
	m, err := lineproto.StartMember(ctx, argv, pipeline.Config{Conn: conn, Group: "g", Input: "in", Output: "out",
		TransactionalID: "g/a", SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	transact := func(i int) pipeline.Result {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		var b pipeline.Batch
		for len(b.Records) == 0 && ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			b, _ = m.Poll(pctx)
			pcancel()
		}
		return m.Transact(ctx, b, []pipeline.Output{{Partition: 0, Value: []byte("x")}})
	}
	if res := transact(0); res.Outcome != transport.OK {
		t.Fatalf("the first transaction: %v (%v); want ok", res.Outcome, res.Err)
	}
	armed.Store(true)
	res := transact(1)
	if !shown.Load() {
		t.Fatal("the second transaction sent no AddPartitionsToTxn")
	}
	msg := ""
	if res.Err != nil {
		msg = res.Err.Error()
	}
	if res.Outcome != transport.Fail || !res.Restart || !strings.Contains(msg, "abort_transaction: INVALID_TXN_STATE") {
		t.Fatalf("the transaction whose AddPartitionsToTxn timed out: %v, restart %v (%s); want fail with a fatal "+
			"INVALID_TXN_STATE from abort_transaction and a restart (librdkafka 2.16.0's bug); did a librdkafka release fix it?",
			res.Outcome, res.Restart, msg)
	}
	t.Logf("shown: %s", msg)
}

// concurrentTransactions answers every partition of req CONCURRENT_TRANSACTIONS (retriable).
func concurrentTransactions(req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			sp.ErrorCode = kerr.ConcurrentTransactions.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
