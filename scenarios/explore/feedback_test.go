package explore

import (
	"slices"
	"testing"
	"time"

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
// frozen at its default point. The history records a freeze as a member pause (its window's
// kind is member-pause, its spec the step's): before, explore named that window nothing and
// never saw a freeze take hold.
func TestFaultWhatNamesAFreezePoint(t *testing.T) {
	for _, c := range []struct {
		kind       history.Kind
		spec, want string
	}{
		{history.KindMemberPause, "freeze holder of in0 with point=before-commit for 4500ms", "freeze before-commit"},
		{history.KindMemberPause, "freeze holder of in0 for 8s", "freeze"},
		{history.KindMemberPause, "", "freeze"},
		{"freeze", "freeze holder of in0 with point=before-commit", "freeze before-commit"},
		{"drop-response", "drop-response endtxn of p1 first 1", "drop-response endtxn"},
	} {
		if got := faultWhat(history.Fault{Kind: c.kind, Spec: c.spec}); got != c.want {
			t.Errorf("faultWhat(%s %q) = %q, want %q", c.kind, c.spec, got, c.want)
		}
	}
}

// pipeHistory is a pipeline history with a session timeout of 3 s (times in ms): m2 copies
// partition 1 and is frozen at before-commit from 2 s until freezeEnd; m1 fetches the
// committed offsets of fetched (a partition) at fetchAt.
func pipeHistory(t *testing.T, freezeEnd, fetchAt int64, fetched int32) *history.History {
	t.Helper()
	ms := int64(time.Millisecond)
	pipe := func(p int32) history.Args {
		return history.Args{Pipe: &history.PipeArgs{Generation: 1, Inputs: []history.PipeRange{{Partition: p, From: 0, To: 5}}}}
	}
	events := []history.Event{
		{Type: history.TypeHeader, Meta: &history.Meta{Scenario: "unit", Workload: history.WorkloadPipeline,
			Pipeline: &history.PipelineMeta{Partitions: 2, SessionTimeout: 3000 * ms}}},
		{Type: history.TypeInvoke, Time: 1000 * ms, ID: 1, Client: 1, Process: "p1", Member: "m2", Kind: history.KindTxn, Args: pipe(1)},
		{Type: history.TypeOK, Time: 1100 * ms, ID: 1, Client: 1},
		{Type: history.TypeInvoke, Time: 1900 * ms, ID: 2, Client: 1, Process: "p1", Member: "m2", Kind: history.KindTxn, Args: pipe(1)},
		{Type: history.TypeFaultStart, Time: 2000 * ms, Fault: 1, Kind: history.KindMemberPause, Process: "p1", Role: "in1", Member: "m2",
			Step: 1, Spec: "freeze holder of in1 with point=before-commit for 6s"},
		{Type: history.TypeFaultEnd, Time: freezeEnd * ms, Fault: 1, TookHold: true},
		{Type: history.TypeInvoke, Time: fetchAt * ms, ID: 3, Client: 2, Process: "p2", Member: "m1", Kind: history.KindFetch,
			Args: history.Args{Pipe: &history.PipeArgs{Generation: 2}}},
		{Type: history.TypeOK, Time: fetchAt * ms, ID: 3, Client: 2,
			Result: history.Result{Pipe: &history.PipeResult{Offsets: []history.PipeOffset{{Partition: fetched, Offset: 5}}}}},
	}
	b := history.NewBuilder(8)
	for i := range events {
		if err := b.Add(&events[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	return b.History()
}

// TestZombieState: a pipeline member frozen past the session timeout whose partition another
// member fetched the offsets of, while it was frozen or within a session timeout after, made
// a zombie ("state zombie freeze before-commit"); a freeze no longer than the session
// timeout, a fetch of another partition, or one long after the thaw did not. The freeze
// window is a fault of the feedback, and operations in it are named with it. Before, explore
// skipped member-pause windows: no freeze tuple, no zombie.
func TestZombieState(t *testing.T) {
	const zombie = "state zombie freeze before-commit"
	for _, c := range []struct {
		name               string
		freezeEnd, fetchAt int64
		fetched            int32
		want               bool
	}{
		{"fetched while frozen", 8000, 7000, 1, true},
		{"fetched at the thaw", 8000, 8050, 1, true},
		{"fetched within a session timeout after", 8000, 10900, 1, true},
		{"fetched long after", 8000, 11500, 1, false},
		{"another partition", 8000, 7000, 0, false},
		{"frozen for the session timeout only", 5000, 4500, 1, false},
	} {
		got := tuples{}
		fromHistory(got, pipeHistory(t, c.freezeEnd, c.fetchAt, c.fetched))
		if got[zombie] != c.want {
			t.Errorf("%s: %q %v, want %v; tuples %q", c.name, zombie, got[zombie], c.want, got.sorted())
		}
		if !got["fault freeze before-commit took-hold"] {
			t.Errorf("%s: no tuple for the freeze taking hold: %q", c.name, got.sorted())
		}
	}
	got := tuples{}
	fromHistory(got, pipeHistory(t, 8000, 7000, 1))
	if !got["op-in-fault fetch ok freeze before-commit"] {
		t.Errorf("the fetch during the freeze is not named with it: %q", got.sorted())
	}
}
