package checker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// pipeHistory builds pipeline histories for the checker's tests: input records sent, member
// transactions, and the final reads.
type pipeHistory struct {
	events []history.Event
	id     int64
	t      int64
}

func newPipeHistory(promises ...string) *pipeHistory {
	return &pipeHistory{events: []history.Event{{Type: history.TypeHeader, Meta: &history.Meta{
		Workload: history.WorkloadPipeline, Promises: promises,
		Pipeline: &history.PipelineMeta{Group: "g", Input: "in", Output: "out", Partitions: 2},
	}}}}
}

// op appends an invoke and, unless typ is 0, its completion; it returns the op's id.
func (b *pipeHistory) op(kind history.Kind, member string, args *history.PipeArgs, typ history.EventType, res *history.PipeResult, errClass string) int64 {
	b.id++
	b.t += 10
	b.events = append(b.events, history.Event{Type: history.TypeInvoke, ID: b.id, Time: b.t, Process: "p1", Member: member, Kind: kind, Args: history.Args{Pipe: args}})
	if typ != 0 {
		b.t += 10
		e := history.Event{Type: typ, ID: b.id, Time: b.t, Error: errClass}
		if typ == history.TypeOK {
			e.Result.Pipe = res
		}
		b.events = append(b.events, e)
	}
	return b.id
}

// send sends n input records to partition p, at offsets 0..n-1.
func (b *pipeHistory) send(p int32, n int) {
	for o := range n {
		b.op(history.KindSend, "", &history.PipeArgs{ID: fmt.Sprintf("i%d-%d", p, o)}, history.TypeOK,
			&history.PipeResult{Sent: &history.PipeOffset{Partition: p, Offset: int64(o)}}, "")
	}
}

// txn records a transaction of member over input p/[from,to) that commits offset `offset`.
func (b *pipeHistory) txn(member string, p int32, from, to, offset int64, typ history.EventType, errClass string) int64 {
	return b.op(history.KindTxn, member, &history.PipeArgs{Group: "g", MemberID: member, Generation: 1,
		Inputs: []history.PipeRange{{Partition: p, From: from, To: to}}, Offsets: []history.PipeOffset{{Partition: p, Offset: offset}}},
		typ, &history.PipeResult{Token: &history.Token{ProducerID: 1, Epoch: 0}}, errClass)
}

// outputs makes the outputs of txn for input p/[from,to), at output offsets from next on.
func outputs(txn int64, p int32, from, to int64, next *int64) []history.PipeOutput {
	var out []history.PipeOutput
	for o := from; o < to; o++ {
		out = append(out, history.PipeOutput{Partition: p, Offset: *next, In: history.PipeOffset{Partition: p, Offset: o}, ID: fmt.Sprintf("i%d-%d", p, o), Txn: txn})
		*next++
	}
	return out
}

// final appends the final reads: outs and the committed offsets.
func (b *pipeHistory) final(outs []history.PipeOutput, committed ...history.PipeOffset) {
	b.op(history.KindFinalOutput, "", nil, history.TypeOK, &history.PipeResult{Outputs: outs}, "")
	b.op(history.KindFinalOffsets, "", nil, history.TypeOK, &history.PipeResult{Offsets: committed}, "")
}

func (b *pipeHistory) check(t *testing.T) *checker.Results {
	t.Helper()
	hb := history.NewBuilder(0)
	for i := range b.events {
		if err := hb.Add(&b.events[i]); err != nil {
			t.Fatal(err)
		}
	}
	res, err := checker.Check(context.Background(), hb.History(), checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkOf(res *checker.Results, name string) checker.Result {
	for _, r := range append(res.Checks, res.Coverage...) {
		if r.Name == name {
			return r
		}
	}
	return checker.Result{}
}

// valid is a clean run: partition 0's 4 records in two transactions of m1, partition 1's 2
// in one of m2, every offset committed.
func valid() (*pipeHistory, []history.PipeOutput) {
	b := newPipeHistory()
	b.send(0, 4)
	b.send(1, 2)
	var next0, next1 int64
	t1 := b.txn("m1", 0, 0, 2, 2, history.TypeOK, "")
	t2 := b.txn("m1", 0, 2, 4, 4, history.TypeOK, "")
	t3 := b.txn("m2", 1, 0, 2, 2, history.TypeOK, "")
	outs := append(append(outputs(t1, 0, 0, 2, &next0), outputs(t2, 0, 2, 4, &next0)...), outputs(t3, 1, 0, 2, &next1)...)
	return b, outs
}

func TestPipelineValidRun(t *testing.T) {
	b, outs := valid()
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4}, history.PipeOffset{Partition: 1, Offset: 2})
	res := b.check(t)
	if res.Verdict != checker.VerdictValid {
		t.Fatalf("verdict %s, want valid: %+v %+v", res.Verdict, res.Checks, res.Coverage)
	}
	var names []string
	for _, r := range res.Checks {
		names = append(names, r.Name)
	}
	if got, want := strings.Join(names, " "), strings.Join(append(checker.PipelineGuarantees, checker.WellFormed), " "); got != want {
		t.Errorf("checks %s, want %s (no lease guarantee judges a pipeline)", got, want)
	}
}

// TestPipelineAnomalies: each guarantee catches the anomaly it names, and only the guarantees
// that must.
func TestPipelineAnomalies(t *testing.T) {
	p0 := func(o int64) history.PipeOffset { return history.PipeOffset{Partition: 0, Offset: o} }
	p1 := history.PipeOffset{Partition: 1, Offset: 2}
	for _, tc := range []struct {
		name  string
		build func() *pipeHistory
		want  []string // the guarantees violated
	}{
		{"an output lost below the committed offset", func() *pipeHistory {
			b, outs := valid()
			b.final(append(outs[:1:1], outs[2:]...), p0(4), p1) // input 0/1's output gone
			return b
		}, []string{checker.EOSNoLoss, checker.EOSOffsetsMatchOutput}}, // its txn torn: offsets-match-output
		{"a duplicate: a zombie's transaction committed the same inputs again", func() *pipeHistory {
			b, outs := valid()
			var next int64 = 6
			z := b.txn("zombie", 0, 2, 4, 4, history.TypeOK, "")
			b.final(append(outs, outputs(z, 0, 2, 4, &next)...), p0(4), p1)
			return b
		}, []string{checker.EOSNoDuplicate, checker.EOSOrder}},
		{"outputs committed without their offsets", func() *pipeHistory {
			b, outs := valid()
			b.final(outs, p0(2), p1) // the second transaction's offsets were not committed
			return b
		}, []string{checker.EOSOffsetsMatchOutput}},
		{"a transaction that committed the wrong offset", func() *pipeHistory {
			b := newPipeHistory()
			b.send(0, 2)
			var next int64
			t1 := b.txn("m1", 0, 0, 2, 1, history.TypeOK, "") // offset 1, but it consumed 0 and 1
			b.final(outputs(t1, 0, 0, 2, &next), p0(1))
			return b
		}, []string{checker.EOSOffsetsMatchOutput}},
		{"a committed offset far past the input (checked without walking to it)", func() *pipeHistory {
			b, outs := valid()
			b.final(outs, p0(1<<40), p1)
			return b
		}, []string{checker.EOSOffsetsMatchOutput}},
		{"outputs out of input order", func() *pipeHistory {
			b, outs := valid()
			outs[0].Offset, outs[1].Offset = outs[1].Offset, outs[0].Offset
			b.final(outs, p0(4), p1)
			return b
		}, []string{checker.EOSOrder}},
		{"a transaction reported aborted whose outputs are committed", func() *pipeHistory {
			b := newPipeHistory()
			b.send(0, 2)
			var next int64
			t1 := b.txn("m1", 0, 0, 2, 2, history.TypeFail, history.ErrorFenced)
			b.final(outputs(t1, 0, 0, 2, &next), p0(2))
			return b
		}, []string{checker.EOSTxnOutcome}},
		{"an output of an input record written in an aborted transaction", func() *pipeHistory {
			b := newPipeHistory()
			b.send(0, 2)
			// i0-2 landed at 0/2 in a transaction that was aborted (its marker at 0/3);
			// i0-4 at 0/4.
			b.op(history.KindSend, "", &history.PipeArgs{ID: "i0-2"}, history.TypeFail, nil, history.ErrorAborted)
			b.op(history.KindSend, "", &history.PipeArgs{ID: "i0-4"}, history.TypeOK, &history.PipeResult{Sent: &history.PipeOffset{Partition: 0, Offset: 4}}, "")
			t1 := b.op(history.KindTxn, "m1", &history.PipeArgs{Group: "g", MemberID: "m1", Generation: 1,
				Inputs:  []history.PipeRange{{Partition: 0, From: 0, To: 3}, {Partition: 0, From: 4, To: 5}},
				Offsets: []history.PipeOffset{p0(5)}}, history.TypeOK, &history.PipeResult{Token: &history.Token{ProducerID: 1}}, "")
			var next int64
			outs := outputs(t1, 0, 0, 3, &next)
			outs = append(outs, history.PipeOutput{Partition: 0, Offset: next, In: p0(4), ID: "i0-4", Txn: t1})
			b.final(outs, p0(5))
			return b
		}, []string{checker.EOSReadCommitted}},
		{"an output of an input record never written", func() *pipeHistory {
			b, outs := valid()
			outs[3].ID = "forged"
			b.final(outs, p0(4), p1)
			return b
		}, []string{checker.EOSReadCommitted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.build().check(t)
			if res.Verdict != checker.VerdictInvalid {
				t.Errorf("verdict %s, want invalid", res.Verdict)
			}
			for _, g := range checker.PipelineGuarantees {
				r := checkOf(res, g)
				want := strings.Contains(strings.Join(tc.want, " "), g)
				if got := r.Verdict == checker.VerdictInvalid; got != want {
					t.Errorf("%s: %s %v, want invalid: %v", g, r.Verdict, r.Anomalies, want)
				}
			}
			if wf := checkOf(res, checker.WellFormed); wf.Verdict != checker.VerdictValid {
				t.Errorf("well-formed: %s %v", wf.Verdict, wf.Anomalies)
			}
		})
	}
}

// TestPipelineFailsClosed: a pipeline history without its final reads is never valid; a
// history of a workload the checker does not know is refused; a lease promise is refused in a
// pipeline history; a quiet run is inconclusive on what it promised.
func TestPipelineFailsClosed(t *testing.T) {
	b, _ := valid()
	res := b.check(t)
	if res.Verdict == checker.VerdictValid {
		t.Errorf("no final reads: verdict valid")
	}
	for _, g := range checker.PipelineGuarantees {
		if r := checkOf(res, g); r.Verdict != checker.VerdictUnknown {
			t.Errorf("%s without final reads: %s, want unknown", g, r.Verdict)
		}
	}

	h := history.NewBuilder(0)
	if err := h.Add(&history.Event{Type: history.TypeHeader, Format: 2, Meta: &history.Meta{Workload: "streams"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := checker.Check(context.Background(), h.History(), checker.Options{}); !errors.Is(err, checker.ErrOptions) || !strings.Contains(err.Error(), "streams") {
		t.Errorf("unknown workload: %v, want an options error naming it", err)
	}

	b = newPipeHistory(checker.CoverHandoff)
	hb := history.NewBuilder(0)
	for i := range b.events {
		hb.Add(&b.events[i])
	}
	if _, err := checker.Check(context.Background(), hb.History(), checker.Options{}); !errors.Is(err, checker.ErrOptions) {
		t.Errorf("lease promise in a pipeline history: %v, want an options error", err)
	}

	b = newPipeHistory(checker.CoverRebalance, checker.CoverTxnAborted)
	bb, outs := valid()
	b.events = append(b.events, bb.events[1:]...)
	b.id, b.t = bb.id, bb.t
	b.final(outs, history.PipeOffset{Partition: 0, Offset: 4}, history.PipeOffset{Partition: 1, Offset: 2})
	res = b.check(t)
	if res.Verdict != checker.VerdictInconclusive || checkOf(res, checker.CoverRebalance).Verdict != checker.VerdictInconclusive ||
		checkOf(res, checker.CoverTxnAborted).Verdict != checker.VerdictInconclusive {
		t.Errorf("a run without a rebalance or a fence: %s, %+v", res.Verdict, res.Coverage)
	}
}

// TestPipelineLossNamesTheSkip: a lost input record's anomaly names the committed transaction
// that consumed past it, so that the report and selftest's time to detect have an operation.
func TestPipelineLossNamesTheSkip(t *testing.T) {
	b := newPipeHistory()
	b.send(0, 6)
	var next int64
	t1 := b.txn("m1", 0, 0, 2, 2, history.TypeOK, "")
	b.txn("m1", 0, 2, 4, 4, history.TypeFail, "") // aborted, and its batch skipped after
	t3 := b.txn("m1", 0, 4, 6, 6, history.TypeOK, "")
	b.final(append(outputs(t1, 0, 0, 2, &next), outputs(t3, 0, 4, 6, &next)...), history.PipeOffset{Partition: 0, Offset: 6})
	res := b.check(t)
	r := checkOf(res, checker.EOSNoLoss)
	if len(r.Anomalies) != 2 {
		t.Fatalf("eos-no-loss: %d anomalies, want 2 (inputs 0/2 and 0/3): %+v", len(r.Anomalies), r.Anomalies)
	}
	for _, a := range r.Anomalies {
		if len(a.Ops) != 1 || a.Ops[0] != t3 {
			t.Errorf("anomaly %q names ops %v, want txn op %d, the first committed one past it", a.Explanation, a.Ops, t3)
		}
	}
	if r.FirstAt <= 0 {
		t.Errorf("eos-no-loss FirstAt %d, want the skipping transaction's completion", r.FirstAt)
	}
}

// TestPipelineInputEnds: with the input's end offsets in the final reads, a committed offset
// past the last record the harness wrote (a position past an aborted record and its marker)
// is not flagged, and one past the end is.
func TestPipelineInputEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed int64
		invalid   bool
	}{
		{"committed past the last record, at the end", 4, false},
		{"committed past the end", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPipeHistory()
			b.send(0, 2) // 0/0, 0/1; an aborted record at 0/2 and its marker at 0/3
			b.op(history.KindSend, "", &history.PipeArgs{ID: "i0-2"}, history.TypeFail, nil, history.ErrorAborted)
			var next int64
			t1 := b.txn("m1", 0, 0, 2, 2, history.TypeOK, "")
			outs := outputs(t1, 0, 0, 2, &next)
			b.op(history.KindFinalOutput, "", nil, history.TypeOK, &history.PipeResult{Outputs: outs}, "")
			b.op(history.KindFinalOffsets, "", nil, history.TypeOK, &history.PipeResult{
				Offsets: []history.PipeOffset{{Partition: 0, Offset: tc.committed}}, InputEnds: []history.PipeOffset{{Partition: 0, Offset: 4}}}, "")
			r := checkOf(b.check(t), checker.EOSOffsetsMatchOutput)
			if got := r.Verdict == checker.VerdictInvalid; got != tc.invalid {
				t.Errorf("eos-offsets-match-output %s %v, want invalid: %v", r.Verdict, r.Anomalies, tc.invalid)
			}
		})
	}
}

// TestFold: the stateful variant's outputs carry the fold of their partition's input up to
// their record (ids i0-N fold to N's sum: the send helper's ids "i0-0", "i0-1" parse as 0, so
// the sums here are 0 and only the counts tell); one applied twice is off by one.
func TestFold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stateful bool
		bump     bool // the last output of partition 0 counts a record twice
		want     checker.Verdict
	}{
		{"every aggregate the fold of its prefix", true, false, checker.VerdictValid},
		{"a record applied twice", true, true, checker.VerdictInvalid},
		{"a run that is not stateful", false, false, checker.VerdictNotCovered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, outs := valid()
			b.events[0].Meta.Pipeline.Stateful = tc.stateful
			for i := range outs {
				if tc.stateful {
					outs[i].Count = outs[i].In.Offset + 1
				}
			}
			if tc.bump {
				outs[3].Count++
			}
			b.final(outs, history.PipeOffset{Partition: 0, Offset: 4}, history.PipeOffset{Partition: 1, Offset: 2})
			r := checkOf(b.check(t), checker.EOSFold)
			if r.Verdict != tc.want {
				t.Fatalf("%s %+v %v, want %s", r.Verdict, r.Anomalies, r.Details, tc.want)
			}
			if tc.bump && (len(r.Anomalies) != 1 || !strings.Contains(r.Anomalies[0].Explanation, "count 5 and sum 0, but the committed input up to it folds to count 4")) {
				t.Errorf("anomalies %+v, want output 0/3's count named", r.Anomalies)
			}
		})
	}
}

// A member may commit its consumer's position past offsets that hold no input record (an
// aborted record and its abort marker): Kafka Streams commits the position when its task has
// nothing buffered. A transaction's offsets past its inputs are judged only where they skip
// a record that landed.
func TestPipelineOffsetsPastNoInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sent  int // records sent to partition 0, from offset 0
		valid bool
	}{
		{"past a marker and an aborted record", 2, true},
		{"past a record that landed", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPipeHistory()
			b.send(0, tc.sent)
			var next int64
			t1 := b.txn("m1", 0, 0, 2, 4, history.TypeOK, "")
			b.op(history.KindFinalOutput, "", nil, history.TypeOK, &history.PipeResult{Outputs: outputs(t1, 0, 0, 2, &next)}, "")
			b.op(history.KindFinalOffsets, "", nil, history.TypeOK, &history.PipeResult{
				Offsets:   []history.PipeOffset{{Partition: 0, Offset: 4}},
				InputEnds: []history.PipeOffset{{Partition: 0, Offset: 4}}}, "")
			r := checkOf(b.check(t), checker.EOSOffsetsMatchOutput)
			if got := r.Verdict == checker.VerdictValid; got != tc.valid {
				t.Fatalf("%s: %s, want valid %v: %+v", checker.EOSOffsetsMatchOutput, r.Verdict, tc.valid, r.Anomalies)
			}
		})
	}
}
