package explore

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestTuplesFromHistory: a history's tuples name each operation kind and outcome (with a
// failure's class), the same inside each fault window (a Kafka-aware fault with its request
// type), whether each window took hold, and the token changes of a role's acquires and
// describes.
func TestTuplesFromHistory(t *testing.T) {
	b := history.NewBuilder(16)
	tok := func(pid int64, epoch int16) *history.Token { return &history.Token{ProducerID: pid, Epoch: epoch} }
	events := []history.Event{
		{Type: history.TypeHeader, Meta: &history.Meta{Scenario: "unit"}},
		{Type: history.TypeInvoke, Time: 10, ID: 1, Client: 1, Process: "p1", Member: "m1", Role: "r1", Kind: history.KindAcquire},
		{Type: history.TypeOK, Time: 20, ID: 1, Client: 1, Result: history.Result{Token: tok(7, 1)}},
		{Type: history.TypeFaultStart, Time: 30, Fault: 1, Kind: "drop-response", Spec: "drop-response endtxn of p1 first 1"},
		{Type: history.TypeInvoke, Time: 40, ID: 2, Client: 1, Process: "p1", Member: "m1", Role: "r1", Kind: history.KindWork,
			Args: history.Args{Token: *tok(7, 1), WriteID: "w2", Log: history.WorkLog(0)}},
		{Type: history.TypeInfo, Time: 50, ID: 2, Client: 1, Error: "timeout"},
		{Type: history.TypeFaultEnd, Time: 60, Fault: 1, TookHold: true},
		{Type: history.TypeFaultStart, Time: 61, Fault: 2, Kind: "partition", Spec: "partition p2 from all"},
		{Type: history.TypeFaultEnd, Time: 62, Fault: 2},
		{Type: history.TypeInvoke, Time: 70, ID: 3, Client: 2, Process: "p2", Member: "m2", Role: "r1", Kind: history.KindAcquire},
		{Type: history.TypeOK, Time: 80, ID: 3, Client: 2, Result: history.Result{Token: tok(7, 2)}},
		{Type: history.TypeInvoke, Time: 90, ID: 4, Client: 2, Process: "p2", Member: "m2", Role: "r1", Kind: history.KindAcquire},
		{Type: history.TypeOK, Time: 95, ID: 4, Client: 2, Result: history.Result{Token: tok(9, 0)}},
		{Type: history.TypeInvoke, Time: 96, ID: 5, Client: 3, Process: "p3", Role: "r1", Kind: history.KindDescribe},
		{Type: history.TypeOK, Time: 97, ID: 5, Client: 3, Result: history.Result{Held: true, Token: tok(9, 0)}},
		{Type: history.TypeInvoke, Time: 98, ID: 6, Client: 3, Process: "p3", Role: "r1", Kind: history.KindDescribe},
		{Type: history.TypeFail, Time: 99, ID: 6, Client: 3, Error: "admin"},
	}
	for i := range events {
		if err := b.Add(&events[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	got := tuples{}
	fromHistory(got, b.History())
	want := []string{
		"fault drop-response endtxn took-hold",
		"fault partition missed",
		"op acquire ok",
		"op describe fail admin",
		"op describe ok",
		"op work info timeout",
		"op-in-fault work info drop-response endtxn",
		"state acquire epoch-bump",
		"state acquire new-producer-id",
		"state describe held",
	}
	if s := got.sorted(); !slices.Equal(s, want) {
		t.Errorf("tuples\n%q\nwant\n%q", s, want)
	}
}

// TestFaultWhatNamesAFreezePoint: a freeze at a pause point is a fault of its own in the
// feedback, so that the search tries a member frozen with its offsets pending as well as one
// frozen at its default point.
func TestFaultWhatNamesAFreezePoint(t *testing.T) {
	for spec, want := range map[string]string{
		"freeze holder of in0 with point=before-commit": "freeze before-commit",
		"freeze holder of in0":                          "freeze",
		"drop-response endtxn of p1 first 1":            "drop-response endtxn",
	} {
		kind, _, _ := strings.Cut(spec, " ")
		if got := faultWhat(history.Fault{Kind: history.Kind(kind), Spec: spec}); got != want {
			t.Errorf("faultWhat(%q) = %q, want %q", spec, got, want)
		}
	}
}
