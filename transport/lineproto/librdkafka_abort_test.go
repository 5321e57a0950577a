package lineproto_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/lineproto/lineprototest"
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
		return lineprototest.CopyOne(ctx, t, cl, m, "in", []byte{byte(i)}, 2*time.Minute)
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

// TestLibrdkafkaEndTxnBeforeAddPartitionsAnswer pins librdkafka #4849's wire order without any
// timeout (docs/regressions.md "librdkafka-endtxn-before-addpartitions"): a member whose
// transact call runs out of time while its first transaction's AddPartitionsToTxn is
// unanswered aborts, and librdkafka 2.16.0 writes EndTxn before that answer, on the same
// connection. kfake, like Apache Kafka (cluster/local's long test of the same name), handles a
// connection's requests in order, so the partition is registered first and the abort succeeds:
// harmless here. The test fails once a librdkafka release waits for the answer.
func TestLibrdkafkaEndTxnBeforeAddPartitionsAnswer(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv, c := librdkafkaOnKfake(t)
	got := lineprototest.AbortBeforeAddPartitionsAnswer(t, argv, c.ListenAddrs()[0])
	lineprototest.CheckAbortBeforeAddPartitionsAnswer(t, got)
}

// TestLibrdkafkaAbortAfterConcurrentTransactions shows librdkafka #4849 failing without any
// timeout (docs/regressions.md "librdkafka-endtxn-before-addpartitions"): right after a
// commit, the coordinator answers the next transaction's AddPartitionsToTxn
// CONCURRENT_TRANSACTIONS while it still completes the committed one (Kafka does until the
// commit's markers are written). librdkafka 2.16.0 keeps counting such a refused registration
// as possibly made (rd_kafka_txn_handle_AddPartitionsToTxn counts every error but a few back
// up), so an abort before a retry is answered sends EndTxn(abort) for a transaction the
// coordinator never saw; it answers INVALID_TXN_STATE (the producer's last transaction was
// committed, as Kafka's CompleteCommit state answers an abort), and librdkafka makes that
// fatal. Here kfake answers every AddPartitionsToTxn of the second transaction
// CONCURRENT_TRANSACTIONS until the EndTxn comes, and the transact call's 3 s bound runs out
// while the output waits for its registration. The test passes while the bug is there and
// fails once a librdkafka release aborts cleanly (it should not send EndTxn, or should take
// INVALID_TXN_STATE on an abort whose registrations were all refused as an abort of nothing).
func TestLibrdkafkaAbortAfterConcurrentTransactions(t *testing.T) {
	if testenv.Race {
		t.Skip("under -race: the plain run covers it (the adapter is another process)")
	}
	argv, c := librdkafkaOnKfake(t)
	var armed atomic.Bool
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if armed.Load() {
			return concurrentTransactions(r.(*kmsg.AddPartitionsToTxnRequest)), nil, true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		armed.Store(false) // the coordinator has completed the committed transaction
		return nil, nil, false
	})
	addr := c.ListenAddrs()[0]
	cl := inAndOut(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := lineprototest.NewWire()
	conn := transport.NewConfig(addr, 10*time.Second)
	conn.RequestTimeout = 6 * time.Second // longer than the call's bound: no request times out
	conn.Dial = w.Dial
	m, err := lineproto.StartMember(ctx, argv, pipeline.Config{Conn: conn, Group: "g", Input: "in", Output: "out",
		TransactionalID: "g/a", SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	transact := func(i int, bound time.Duration) pipeline.Result {
		return lineprototest.CopyOne(ctx, t, cl, m, "in", []byte{byte(i)}, bound)
	}
	if res := transact(0, time.Minute); res.Outcome != transport.OK {
		t.Fatalf("the first transaction: %v (%v); want ok", res.Outcome, res.Err)
	}
	mark := len(w.Events())
	armed.Store(true)
	res := transact(1, 3*time.Second)
	add, end := int16(kmsg.AddPartitionsToTxn), int16(kmsg.EndTxn)
	var adds, refused, endCode int
	endCode = -1
	for _, e := range w.Events()[mark:] {
		switch {
		case e.Key == add && !e.Answer:
			adds++
		case e.Key == add && e.Answer && e.Code == kerr.ConcurrentTransactions.Code:
			refused++
		case e.Key == add && e.Answer:
			t.Fatalf("an AddPartitionsToTxn of the second transaction answered %v; want each CONCURRENT_TRANSACTIONS", e)
		case e.Key == end && e.Answer:
			endCode = int(e.Code)
		}
	}
	lines := strings.Split(strings.TrimSpace(lineprototest.Tail(w, mark, add, end)), "\n")
	if len(lines) > 7 {
		lines = append(append(lines[:2:2], "..."), lines[len(lines)-4:]...)
	}
	t.Logf("on the wire, the second transaction: %d AddPartitionsToTxn, %d answered CONCURRENT_TRANSACTIONS:\n%s",
		adds, refused, strings.Join(lines, "\n"))
	msg := ""
	if res.Err != nil {
		msg = res.Err.Error()
	}
	t.Logf("the transaction: %v, restart %v: %s", res.Outcome, res.Restart, msg)
	if adds == 0 || refused == 0 {
		t.Fatalf("%d AddPartitionsToTxn sent, %d refused: want the registration refused", adds, refused)
	}
	if endCode != int(kerr.InvalidTxnState.Code) || res.Outcome != transport.Fail || !res.Restart ||
		!strings.Contains(msg, "abort_transaction: INVALID_TXN_STATE") {
		t.Fatalf("EndTxn answered %d; the transaction %v, restart %v (%s): want EndTxn(abort) sent and refused "+
			"INVALID_TXN_STATE, made fatal (librdkafka 2.16.0, #4849); did a librdkafka release fix it?",
			endCode, res.Outcome, res.Restart, msg)
	}
}
