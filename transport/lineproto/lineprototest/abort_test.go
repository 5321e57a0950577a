package lineprototest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func check(t *testing.T, got AbortBeforeAnswer) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		CheckAbortBeforeAddPartitionsAnswer(f, got)
	}()
	<-done
	return f.failed
}

// TestCheckAbortBeforeAddPartitionsAnswer shows that the check fails on what a fixed
// librdkafka or a harmed broker would show: it passes only librdkafka 2.16.0's order with
// both answers NONE and a clean abort.
func TestCheckAbortBeforeAddPartitionsAnswer(t *testing.T) {
	add, end := int16(kmsg.AddPartitionsToTxn), int16(kmsg.EndTxn)
	abortFailed := pipeline.Result{Outcome: transport.Fail, Err: errors.New("produce: 1 output(s) not delivered within the call's bound")}
	rdk2160 := AbortBeforeAnswer{Result: abortFailed,
		AddRequest: Event{Seq: 1, Conn: 6, Key: add, Corr: 4},
		EndRequest: Event{Seq: 2, Conn: 6, Key: end, Corr: 5},
		AddAnswer:  Event{Seq: 4, Conn: 6, Answer: true, Key: add, Corr: 4},
		EndAnswer:  Event{Seq: 5, Conn: 6, Answer: true, Key: end, Corr: 5}}
	if msg := check(t, rdk2160); msg != "" {
		t.Fatalf("librdkafka 2.16.0's order failed the check: %s", msg)
	}
	fixed := rdk2160
	fixed.AddAnswer.Seq, fixed.EndRequest.Seq, fixed.EndAnswer.Seq = 2, 3, 4
	harmed := rdk2160
	harmed.EndAnswer.Code = kerr.InvalidTxnState.Code
	harmed.Result = pipeline.Result{Outcome: transport.Fail, Restart: true,
		Err: errors.New("produce: not delivered; abort_transaction: INVALID_TXN_STATE")}
	reordered := rdk2160
	reordered.EndAnswer.Seq = 3
	otherConn := rdk2160
	otherConn.EndRequest.Conn, otherConn.EndAnswer.Conn = 7, 7
	for name, got := range map[string]AbortBeforeAnswer{"a client that waits for the answer": fixed,
		"EndTxn refused, the abort fatal": harmed, "EndTxn answered first": reordered, "EndTxn on another connection": otherConn} {
		if msg := check(t, got); msg == "" {
			t.Errorf("%s passed the check", name)
		} else {
			t.Logf("%s: %s", name, msg)
		}
	}
}
