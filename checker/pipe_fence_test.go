package checker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// at appends an operation with explicit times: invoked at call, completed at ret (typ 0: never).
func (b *pipeHistory) at(kind history.Kind, member string, args *history.PipeArgs, call, ret int64, typ history.EventType, res *history.PipeResult) int64 {
	b.id++
	b.events = append(b.events, history.Event{Type: history.TypeInvoke, ID: b.id, Time: call, Process: "p1", Member: member, Kind: kind, Args: history.Args{Pipe: args}})
	if typ != 0 {
		e := history.Event{Type: typ, ID: b.id, Time: ret}
		if typ == history.TypeOK {
			e.Result.Pipe = res
		}
		b.events = append(b.events, e)
	}
	return b.id
}

// fetchAt records member (at gen) starting partition p at start after a fetch answered at
// ret; a rewind's began at call, an assignment's is recorded at its answer.
func (b *pipeHistory) fetchAt(member string, gen int32, p int32, start int64, rewind bool, call, ret int64) int64 {
	if !rewind {
		call = ret
	}
	return b.at(history.KindFetch, member, &history.PipeArgs{Group: "g", MemberID: member, Generation: gen, Rewind: rewind}, call, ret, history.TypeOK,
		&history.PipeResult{Offsets: []history.PipeOffset{{Partition: p, Offset: start}}})
}

// txnAt records a transaction of member at gen over p/[from,to), committing offset to,
// invoked at call, sending its offsets from sent, completed at ret with typ.
func (b *pipeHistory) txnAt(member string, gen int32, p int32, from, to, call, sent, ret int64, typ history.EventType) int64 {
	return b.at(history.KindTxn, member, &history.PipeArgs{Group: "g", MemberID: member, Generation: gen,
		Inputs: []history.PipeRange{{Partition: p, From: from, To: to}}, Offsets: []history.PipeOffset{{Partition: p, Offset: to}}},
		call, ret, typ, &history.PipeResult{Token: &history.Token{ProducerID: 1}, OffsetsAt: sent})
}

// handover is partition 0 of 6 records passed from m1 (generation 1) to m2 (generation 2):
// m1 fetches at 5 and commits [0,2) by 20; m2 is given the partition and fetches at 30,
// starting at 2, and commits [2,4) by 50. It returns the outputs so far, the next output
// offset and m2's fetch.
func handover() (*pipeHistory, []history.PipeOutput, *int64, int64) {
	b := newPipeHistory()
	b.send(0, 6)
	next := new(int64)
	b.fetchAt("m1", 1, 0, 0, false, 0, 1000)
	t1 := b.txnAt("m1", 1, 0, 0, 2, 1010, 1015, 1020, history.TypeOK)
	f2 := b.fetchAt("m2", 2, 0, 2, false, 0, 1030)
	t2 := b.txnAt("m2", 2, 0, 2, 4, 1040, 1045, 1050, history.TypeOK)
	return b, append(outputs(t1, 0, 0, 2, next), outputs(t2, 0, 2, 4, next)...), next, f2
}

func TestFencesValidHandover(t *testing.T) {
	b, outs, _, _ := handover()
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4})
	res := b.check(t)
	for _, name := range []string{checker.EOSGenerationFencing, checker.EOSStableFetch} {
		r := checkOf(res, name)
		if r.Verdict != checker.VerdictValid || r.Details["fetches_checked"] != 2 {
			t.Errorf("%s: %s %v %+v, want valid with 2 fetches checked", name, r.Verdict, r.Details, r.Anomalies)
		}
	}
	if res.Verdict != checker.VerdictValid {
		t.Errorf("verdict %s, want valid", res.Verdict)
	}
}

// A zombie: m1, still at generation 1, begins to send its offsets after m2 was given the
// partition and fetched, and its transaction commits.
func TestGenerationFencingZombieCommits(t *testing.T) {
	b, outs, next, f2 := handover()
	zombie := b.txnAt("m1", 1, 0, 4, 6, 1060, 1065, 1070, history.TypeOK)
	outs = append(outs, outputs(zombie, 0, 4, 6, next)...)
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 6})
	res := b.check(t)
	r := checkOf(res, checker.EOSGenerationFencing)
	if r.Verdict != checker.VerdictInvalid || len(r.Anomalies) != 1 {
		t.Fatalf("generation fencing %s %+v, want one anomaly", r.Verdict, r.Anomalies)
	}
	a := r.Anomalies[0]
	if !slices.Equal(a.Ops, []int64{f2, zombie}) {
		t.Errorf("anomaly names ops %v, want the zombie txn op %d and m2's fetch", a.Ops, zombie)
	}
	if !strings.Contains(a.Explanation, "generation 1") || !strings.Contains(a.Explanation, "m2 was given the partition at generation 2") {
		t.Errorf("explanation %q", a.Explanation)
	}
	// The zombie's offsets are above m2's start but were sent after the fetch: that is the
	// group's fault, not the fetch's.
	if sf := checkOf(res, checker.EOSStableFetch); sf.Verdict != checker.VerdictValid {
		t.Errorf("stable fetch %s %+v, want valid", sf.Verdict, sf.Anomalies)
	}
}

// A zombie whose transaction was refused is what fencing is for: no anomaly.
func TestGenerationFencingZombieRefused(t *testing.T) {
	b, outs, _, _ := handover()
	b.txnAt("m1", 1, 0, 4, 6, 1060, 1065, 1070, history.TypeFail)
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4})
	res := b.check(t)
	if r := checkOf(res, checker.EOSGenerationFencing); r.Verdict != checker.VerdictValid {
		t.Errorf("generation fencing %s %+v, want valid", r.Verdict, r.Anomalies)
	}
}

// m1 sent its offsets for [2,4) before m2's fetch was answered, and committed after: a stable
// fetch waits for them, so m2 must not start at 2.
func TestStableFetchPendingOffsets(t *testing.T) {
	b := newPipeHistory()
	b.send(0, 6)
	next := new(int64)
	b.fetchAt("m1", 1, 0, 0, false, 0, 1000)
	t1 := b.txnAt("m1", 1, 0, 0, 2, 1010, 1015, 1020, history.TypeOK)
	zombie := b.txnAt("m1", 1, 0, 2, 4, 1021, 1025, 1045, history.TypeOK) // pending from 1025
	f := b.fetchAt("m2", 2, 0, 2, false, 0, 1030)
	t3 := b.txnAt("m2", 2, 0, 2, 4, 1040, 1046, 1050, history.TypeOK)
	outs := append(append(outputs(t1, 0, 0, 2, next), outputs(zombie, 0, 2, 4, next)...), outputs(t3, 0, 2, 4, next)...)
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4})
	res := b.check(t)
	r := checkOf(res, checker.EOSStableFetch)
	if r.Verdict != checker.VerdictInvalid || len(r.Anomalies) != 1 {
		t.Fatalf("stable fetch %s %+v, want one anomaly", r.Verdict, r.Anomalies)
	}
	if a := r.Anomalies[0]; !slices.Equal(a.Ops, []int64{zombie, f}) || !strings.Contains(a.Explanation, "did not wait for them") {
		t.Errorf("anomaly %+v, want ops [%d %d] and the pending offsets named", a, zombie, f)
	}
	if gf := checkOf(res, checker.EOSGenerationFencing); gf.Verdict != checker.VerdictValid {
		t.Errorf("generation fencing %s %+v, want valid: the offsets were sent before the fetch", gf.Verdict, gf.Anomalies)
	}
}

// A rewind that starts below what was committed before it began.
func TestStableFetchRewindBelowCommitted(t *testing.T) {
	b := newPipeHistory()
	b.send(0, 4)
	next := new(int64)
	b.fetchAt("m1", 1, 0, 0, false, 0, 1000)
	t1 := b.txnAt("m1", 1, 0, 0, 2, 1010, 1015, 1020, history.TypeOK)
	f := b.fetchAt("m1", 1, 0, 0, true, 1030, 1035)
	b.final(outputs(t1, 0, 0, 2, next), history.PipeOffset{Partition: 0, Offset: 2})
	res := b.check(t)
	r := checkOf(res, checker.EOSStableFetch)
	if r.Verdict != checker.VerdictInvalid || len(r.Anomalies) != 1 || !slices.Equal(r.Anomalies[0].Ops, []int64{t1, f}) ||
		!strings.Contains(r.Anomalies[0].Explanation, "before the fetch began") {
		t.Fatalf("stable fetch %s %+v, want one anomaly naming txn %d and fetch %d", r.Verdict, r.Anomalies, t1, f)
	}
}

// A member that rewinds a partition it no longer owns says nothing of who owns it: its
// generation (5, after it rejoined) is above the owner's (3), whose later commit is fine.
func TestStableFetchRewindOfALostPartition(t *testing.T) {
	b := newPipeHistory()
	b.send(0, 4)
	next := new(int64)
	b.fetchAt("m2", 3, 0, 0, false, 0, 1000)
	b.fetchAt("m1", 5, 0, 0, true, 1001, 1002)
	t1 := b.txnAt("m2", 3, 0, 0, 2, 1010, 1015, 1020, history.TypeOK)
	b.final(outputs(t1, 0, 0, 2, next), history.PipeOffset{Partition: 0, Offset: 2})
	res := b.check(t)
	for _, name := range []string{checker.EOSGenerationFencing, checker.EOSStableFetch} {
		if r := checkOf(res, name); r.Verdict != checker.VerdictValid {
			t.Errorf("%s %s %+v, want valid", name, r.Verdict, r.Anomalies)
		}
	}
}

// Without fetch operations (an exec transport, an older history) neither check has anything
// to judge: not covered, never valid by default, and the run is not failed for it.
func TestFencesNotCoveredWithoutFetches(t *testing.T) {
	b, outs := valid()
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4}, history.PipeOffset{Partition: 1, Offset: 2})
	res := b.check(t)
	for _, name := range []string{checker.EOSGenerationFencing, checker.EOSStableFetch} {
		if r := checkOf(res, name); r.Verdict != checker.VerdictNotCovered || r.Details["not_covered"] == nil {
			t.Errorf("%s %s %v, want not-covered with the reason", name, r.Verdict, r.Details)
		}
	}
	if res.Verdict != checker.VerdictValid {
		t.Errorf("verdict %s, want valid", res.Verdict)
	}
}

// finalTxns appends the final look at what the run left open.
func (b *pipeHistory) finalTxns(open []history.PipeOpenTxn, ends ...history.PipeEnd) {
	b.op(history.KindFinalTxns, "", nil, history.TypeOK, &history.PipeResult{OpenTxns: open, Ends: ends}, "")
}

func TestTermination(t *testing.T) {
	closed := []history.PipeEnd{{Topic: "in", Partition: 0, Stable: 4, End: 4}, {Topic: "out", Partition: 0, Stable: 5, End: 5}}
	for _, tc := range []struct {
		name    string
		look    func(b *pipeHistory)
		verdict checker.Verdict
		want    []string // the anomalies' explanations contain these, in order
	}{
		{"everything ended", func(b *pipeHistory) { b.finalTxns(nil, closed...) }, checker.VerdictValid, nil},
		{"a transaction left open", func(b *pipeHistory) {
			b.finalTxns([]history.PipeOpenTxn{{TransactionalID: "g-m1", State: "PrepareCommit", ProducerID: 7}},
				history.PipeEnd{Topic: "in", Partition: 0, Stable: 4, End: 4}, history.PipeEnd{Topic: "out", Partition: 0, Stable: 3, End: 5})
		}, checker.VerdictInvalid, []string{"g-m1 (producer 7) still has a transaction PrepareCommit", "last stable offset of out[0] is 3, below its end 5"}},
		{"a history before the look", func(*pipeHistory) {}, checker.VerdictNotCovered, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, outs := valid()
			b.final(outs, history.PipeOffset{Partition: 0, Offset: 4}, history.PipeOffset{Partition: 1, Offset: 2})
			tc.look(b)
			r := checkOf(b.check(t), checker.EOSTermination)
			if r.Verdict != tc.verdict || len(r.Anomalies) != len(tc.want) {
				t.Fatalf("%s %+v, want %s with %d anomalies", r.Verdict, r.Anomalies, tc.verdict, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(r.Anomalies[i].Explanation, w) {
					t.Errorf("anomaly %d: %q, want it to say %q", i, r.Anomalies[i].Explanation, w)
				}
			}
		})
	}
}

// TestTxnAbortedNearFaults: in a run with faults, txn-aborted counts a transaction that ended
// while a fault held or within the members' session timeout after it ended (a zombie's), not
// one aborted in the scramble of the first assignment or of the members leaving.
func TestTxnAbortedNearFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // when the aborted transaction ends
		want checker.Verdict
	}{
		{"before the fault", 1050, checker.VerdictInconclusive},
		{"while it held", 1150, checker.VerdictValid},
		{"within a session after it", 1240, checker.VerdictValid},
		{"long after it", 1500, checker.VerdictInconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, outs, _, _ := handover()
			b.events[0].Meta.Promises = []string{checker.CoverTxnAborted}
			b.events[0].Meta.Pipeline.SessionTimeout = 50
			b.events = append(b.events, history.Event{Type: history.TypeFaultStart, Fault: 1, Time: 1100, Kind: "member-pause"},
				history.Event{Type: history.TypeFaultEnd, Fault: 1, Time: 1200, TookHold: true})
			b.txnAt("m1", 1, 0, 4, 6, tc.at-5, tc.at-3, tc.at, history.TypeFail)
			b.final(outs, history.PipeOffset{Partition: 0, Offset: 4})
			if r := checkOf(b.check(t), checker.CoverTxnAborted); r.Verdict != tc.want {
				t.Errorf("txn-aborted %s %v, want %s", r.Verdict, r.Details, tc.want)
			}
		})
	}
}
