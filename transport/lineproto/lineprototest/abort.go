package lineprototest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// AbortBeforeAnswer is what AbortBeforeAddPartitionsAnswer saw.
type AbortBeforeAnswer struct {
	Wire   *Wire
	Result pipeline.Result // the transaction whose AddPartitionsToTxn was held
	// The transaction's AddPartitionsToTxn and EndTxn requests and their answers, as the
	// client wrote and read them; a zero Seq is one that did not happen.
	AddRequest, EndRequest, AddAnswer, EndAnswer Event
}

// EndTxnFirst reports whether the client wrote its EndTxn before it read the answer to the
// transaction's AddPartitionsToTxn.
func (a AbortBeforeAnswer) EndTxnFirst() bool {
	return a.EndRequest.Seq > 0 && (a.AddAnswer.Seq == 0 || a.EndRequest.Seq < a.AddAnswer.Seq)
}

// AbortBeforeAddPartitionsAnswer is librdkafka #4849's sequence without a timeout, through a
// pipeline member of the adapter argv on the cluster at bootstrap: the member's first
// transaction produces its output, and the recorder holds the AddPartitionsToTxn that
// registers the output's partition, so the answer does not come; the transact call's bound
// (3 s, well inside the 30 s request and socket timeouts) runs out while the output waits for
// the registration, and the member aborts, as a member whose call ran out of time does. The
// hold ends when the client writes its EndTxn on the connection of the held request (then the
// broker gets both, in the order written) or when the transact call returns. The topics,
// group and transactional id are named by the time, so runs on one cluster do not meet.
//
// A member whose init_transactions had not finished within the bound sends no
// AddPartitionsToTxn; such a transaction is asked again, up to five times.
func AbortBeforeAddPartitionsAnswer(t testing.TB, argv []string, bootstrap string) AbortBeforeAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := fmt.Sprintf("rdk4849-%d", time.Now().UnixNano())
	in, out := name+"-in", name+"-out"
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{in, out} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	w := NewWire()
	conn := transport.NewConfig(bootstrap, 60*time.Second) // the transaction timeout
	// librdkafka's socket, message and request timeouts: the held request must not time out
	// between the bound's end and the EndTxn, a margin of 27 s for a loaded machine. No run
	// waits for them: the hold ends at the EndTxn or at the transact call's return.
	conn.RequestTimeout = 30 * time.Second
	conn.Dial = w.Dial
	m, err := lineproto.StartMember(ctx, argv, pipeline.Config{Conn: conn, Group: name, Input: in, Output: out,
		TransactionalID: name + "/a", SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	add, end := int16(kmsg.AddPartitionsToTxn), int16(kmsg.EndTxn)
	var got AbortBeforeAnswer
	got.Wire = w
	for try := 1; ; try++ {
		b := PollBatch(ctx, t, m)
		mark := len(w.Events())
		w.HoldNext(add, end)
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		got.Result = m.Transact(tctx, b, []pipeline.Output{{Partition: 0, Value: []byte("y")}})
		tcancel()
		w.Release()
		evs := w.Events()[mark:]
		for _, e := range evs {
			if e.Answer || e.Key != add {
				continue
			}
			got.AddRequest = e
			break
		}
		if got.AddRequest.Seq == 0 {
			t.Logf("try %d sent no AddPartitionsToTxn (%v: %v); again", try, got.Result.Outcome, got.Result.Err)
			if try == 5 || got.Result.Restart {
				t.Fatalf("no transaction sent an AddPartitionsToTxn in %d tries: %v", try, got.Result.Err)
			}
			continue
		}
		break
	}
	// The answers come after the release; the member's answer came after the abort's end, so
	// both are in (a broker answers a connection's requests in order) unless the connection died.
	for _, e := range w.Events() {
		switch {
		case e.Seq <= got.AddRequest.Seq:
		case !e.Answer && e.Key == end && e.Conn == got.AddRequest.Conn && got.EndRequest.Seq == 0:
			got.EndRequest = e
		case e.Answer && e.Key == add && e.Corr == got.AddRequest.Corr && e.Conn == got.AddRequest.Conn:
			got.AddAnswer = e
		case e.Answer && e.Key == end && e.Corr == got.EndRequest.Corr && e.Conn == got.AddRequest.Conn && got.EndRequest.Seq > 0:
			got.EndAnswer = e
		}
	}
	t.Logf("on the wire (AddPartitionsToTxn, EndTxn):\n%s", w.Log(add, end))
	t.Logf("the transaction: %v, restart %v: %v", got.Result.Outcome, got.Result.Restart, got.Result.Err)
	return got
}

// CheckAbortBeforeAddPartitionsAnswer asserts what librdkafka 2.16.0 does in
// AbortBeforeAddPartitionsAnswer, and what the broker makes of it: the client writes EndTxn
// on the connection of its unanswered AddPartitionsToTxn (librdkafka counts a registration
// as made when it is sent, rdkafka_txnmgr.c, and sends EndTxn once the count is not zero);
// the broker, handling one connection's requests in order, registers the partition and then
// aborts the transaction, both answered NONE; librdkafka ignores the late registration's
// answer ("outdated") and the abort succeeds, so the member needs no restart. It fails if a
// librdkafka release waits for the answer before it sends EndTxn (#4849 fixed), and if the
// broker answers EndTxn before the registration or with an error (harm on this broker).
func CheckAbortBeforeAddPartitionsAnswer(t testing.TB, got AbortBeforeAnswer) {
	t.Helper()
	if !got.EndTxnFirst() {
		t.Fatalf("EndTxn %v, AddPartitionsToTxn answered %v: want the EndTxn written before the AddPartitionsToTxn answer "+
			"(librdkafka 2.16.0, #4849); did a librdkafka release fix it?", got.EndRequest, got.AddAnswer)
	}
	if got.EndRequest.Conn != got.AddRequest.Conn {
		t.Fatalf("EndTxn on connection %d, AddPartitionsToTxn on %d: want one connection (librdkafka's coordinator connection)",
			got.EndRequest.Conn, got.AddRequest.Conn)
	}
	if got.AddAnswer.Seq == 0 || got.EndAnswer.Seq == 0 || got.EndAnswer.Seq < got.AddAnswer.Seq {
		t.Fatalf("answers: AddPartitionsToTxn %v, EndTxn %v; want both, the AddPartitionsToTxn first", got.AddAnswer, got.EndAnswer)
	}
	if got.AddAnswer.Code != 0 || got.EndAnswer.Code != 0 {
		t.Fatalf("answers: AddPartitionsToTxn %v, EndTxn %v; want both NONE (the broker handles the connection's requests in order)",
			got.AddAnswer, got.EndAnswer)
	}
	msg := ""
	if got.Result.Err != nil {
		msg = got.Result.Err.Error()
	}
	if got.Result.Outcome != transport.Fail || got.Result.Restart || strings.Contains(msg, "abort_transaction") {
		t.Fatalf("the transaction: %v, restart %v (%s); want fail with a clean abort and no restart",
			got.Result.Outcome, got.Result.Restart, msg)
	}
}
