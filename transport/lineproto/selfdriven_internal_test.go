package lineproto

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// TestSelfDrivenMemberPausesInEveryTransaction: a self-driven member (Kafka Streams) makes no
// transact call, so its gateway watches every transaction: each one's first offsets request
// is its after-produce point and a committing EndTxn its before-commit point, and an EndTxn
// arms both again for the next transaction.
func TestSelfDrivenMemberPausesInEveryTransaction(t *testing.T) {
	var points []string
	w := &memberWatch{pause: func(p string) { points = append(points, p) }, topics: map[[16]byte]string{}}
	w.setSelfDriven(true)
	endTxn := func(commit bool) []byte {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(5)
		req.TransactionalID, req.Commit = "g-m1", commit
		return requestFrame(req, 7)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.SetVersion(5)
	commit.TransactionalID, commit.Group = "g-m1", "g"
	commitFrame := requestFrame(commit, 8)
	for txn := range 3 {
		w.request(keyTxnOffsetCommit, 5, commitFrame)
		w.request(keyTxnOffsetCommit, 5, commitFrame) // a retry: same transaction
		w.request(keyEndTxn, 5, endTxn(true))
		if want := 2 * (txn + 1); len(points) != want || points[want-2] != pipeline.PointAfterProduce || points[want-1] != pipeline.PointBeforeCommit {
			t.Fatalf("after transaction %d: pauses %q, want after-produce and before-commit once each per transaction", txn, points)
		}
	}
	w.request(keyTxnOffsetCommit, 5, commitFrame)
	w.request(keyEndTxn, 5, endTxn(false)) // an abort: no before-commit
	if len(points) != 7 || points[6] != pipeline.PointAfterProduce {
		t.Fatalf("pauses %q: an aborting EndTxn paused, or the offsets did not", points)
	}
	w.request(keyTxnOffsetCommit, 5, commitFrame) // the next transaction is armed again
	if len(points) != 8 {
		t.Fatalf("pauses %q: the transaction after an abort did not pause", points)
	}
}

// TestObservedTransactionsAreBoundedOnTheHarnessClock: a self-driven adapter's transaction
// began after the observe request it names as the last it had received (its send time), or
// after the adapter started when it names none; it ended before the answer that reported it.
// Outcomes and errors map as transact's do, and a malformed event is a protocol error.
func TestObservedTransactionsAreBoundedOnTheHarnessClock(t *testing.T) {
	spawned := time.Unix(100, 0)
	p := &adapterProc{spawned: spawned}
	m := &Member{cfg: pipeline.Config{Conn: transport.Config{Logger: slog.New(slog.DiscardHandler)}}}
	t0, t1, t2 := spawned.Add(time.Second), spawned.Add(2*time.Second), spawned.Add(3*time.Second)
	if obs := m.observed(p, 3, t0, t1, &Response{Outcome: OutcomeOK}); len(obs.Events) != 0 || obs.Err != nil {
		t.Fatalf("an empty observation: %+v", obs)
	}
	gen := int32(4)
	r := &Response{Outcome: OutcomeOK, Events: []Event{
		{Type: EventPoll, MemberID: "a", Generation: gen, Records: []Read{{Partition: 1, Offset: 7}}},
		{Type: EventTxn, Ref: "r", Txn: 1, After: 3, MemberID: "a", Generation: gen, TransactionalID: "g-m1",
			Token: &Token{ProducerID: 9, Epoch: 2}, Inputs: []Offset{{Partition: 1, Offset: 7}}, Offsets: []Offset{{Partition: 1, Offset: 8}},
			Outputs: 1, Outcome: OutcomeOK},
		{Type: EventTxn, Ref: "r", Txn: 2, Inputs: []Offset{{Partition: 1, Offset: 8}}, Outcome: OutcomeFail,
			Error: &Error{Kind: "fenced", Message: "CommitFailedException"}},
		{Type: EventTxn, Ref: "r", Txn: 3, After: 4, Inputs: []Offset{{Partition: 1, Offset: 8}}, Outcome: OutcomeUnknown,
			Error: &Error{Kind: "client", Message: "commit timed out"}},
	}}
	obs := m.observed(p, 4, t1, t2, r)
	if obs.Err != nil || len(obs.Events) != 4 {
		t.Fatalf("observation %+v", obs)
	}
	if b := obs.Events[0].Poll; b == nil || b.Generation != gen || len(b.Records) != 1 || b.Records[0].Offset != 7 {
		t.Fatalf("poll event %+v", obs.Events[0])
	}
	ok, fenced, unknown := obs.Events[1].Txn, obs.Events[2].Txn, obs.Events[3].Txn
	if !ok.Began.Equal(t0) || !ok.Ended.Equal(t2) || ok.Result.Outcome != transport.OK || ok.Result.Token != (transport.FencingToken{ProducerID: 9, Epoch: 2}) ||
		ok.Offsets[1] != 8 || ok.Generation != gen {
		t.Fatalf("committed txn %+v: want begun after observe 3 (sent %v), ended by %v", ok, t0, t2)
	}
	if !fenced.Began.Equal(spawned) || fenced.Result.Outcome != transport.Fail || !errors.Is(fenced.Result.Err, pipeline.ErrFenced) {
		t.Fatalf("fenced txn %+v: want begun after the adapter's start, Fail, ErrFenced", fenced)
	}
	if !unknown.Began.Equal(t1) || unknown.Result.Outcome != transport.Unknown {
		t.Fatalf("unknown txn %+v: want begun after observe 4 (sent %v), Unknown", unknown, t1)
	}
	bad := m.observed(p, 5, t2, t2, &Response{Outcome: OutcomeOK, Events: []Event{{Type: EventTxn, Ref: "r", Txn: 4, Outcome: "maybe"}}})
	if !errors.Is(bad.Err, ErrProtocol) || len(bad.Events) != 0 {
		t.Fatalf("a malformed event: %+v, want a protocol error", bad)
	}
}
