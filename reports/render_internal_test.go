package reports

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1\u2009000", 1001016: "1\u2009001\u2009016", -12345: "-12\u2009345"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestTimeAxisAtTheEdges: end*i/5 overflowed on very large times, labelling the axis with
// negative durations such as -27777h46m40s.
func TestTimeAxisAtTheEdges(t *testing.T) {
	for _, end := range []int64{1, 7, 999, int64(3 * time.Second), history.MaxTime, math.MaxInt64} {
		ticks := axis(end, scale(end))
		if len(ticks) != 6 {
			t.Fatalf("end %d: %d ticks", end, len(ticks))
		}
		prevX, prevD := -1.0, time.Duration(-1)
		for i, tk := range ticks {
			d, err := time.ParseDuration(tk.Label)
			if err != nil || d < 0 || d < prevD || tk.X < prevX {
				t.Errorf("end %d: tick %d is %q at x %.1f after %v at x %.1f (%v)", end, i, tk.Label, tk.X, prevD, prevX, err)
			}
			prevX, prevD = tk.X, d
		}
		if last := ticks[5]; last.X != chartWidth {
			t.Errorf("end %d: last tick at x %.1f, want %.1f", end, last.X, chartWidth)
		}
	}
}

// TestChartsAtTheEdges: a history whose operations complete at the latest time a history may
// carry still draws, with every point inside the chart.
func TestChartsAtTheEdges(t *testing.T) {
	h := &history.History{End: history.MaxTime}
	for i := range int64(4) {
		at := history.MaxTime / 4 * (i + 1)
		h.Append(history.Op{ID: i, Role: "r", Member: "m", Kind: history.KindWriteLease,
			Invoke: at - 1000, Return: at, Type: history.TypeOK, Args: history.Args{Token: history.Token{ProducerID: 1}}})
	}
	for _, c := range charts(h) {
		for _, l := range c.Lines {
			for _, p := range strings.Fields(l.Points) {
				var x, y float64
				if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil || x < labelWidth || x > chartWidth || y < 0 || y > c.Height {
					t.Errorf("%s %s: point %q outside the chart (%v)", c.Title, l.Name, p, err)
				}
			}
		}
		for _, tk := range c.Axis {
			if strings.HasPrefix(tk.Label, "-") {
				t.Errorf("%s: tick %q", c.Title, tk.Label)
			}
		}
	}
}

// TestAnomaliesShowTheirOperationsAndRecords: an anomaly lists the operations it names (one the
// history lacks as such) and the records at its offsets, from all of the log's ok final reads,
// a later read's record winning.
func TestAnomaliesShowTheirOperationsAndRecords(t *testing.T) {
	rec := func(off int64, w string) history.Record {
		return history.Record{Offset: off, Kind: history.RecordLease, Member: "m1", Token: history.Token{ProducerID: 1}, WriteID: w}
	}
	final := func(id int64, recs ...history.Record) history.Op {
		return history.Op{ID: id, Role: "r", Kind: history.KindFinalRead, Type: history.TypeOK, Args: history.Args{Log: history.RoleLog("r")},
			Result: history.Result{Records: recs}}
	}
	h := &history.History{End: 100}
	h.Append(
		history.Op{ID: 3, Role: "r", Member: "m1", Kind: history.KindWriteLease, Type: history.TypeOK, Args: history.Args{WriteID: "w3", Log: history.RoleLog("r")}},
		final(8, rec(0, "w3"), rec(1, "w4")),
		history.Op{ID: 9, Role: "r", Kind: history.KindFinalRead, Type: history.TypeFail, Args: history.Args{Log: history.RoleLog("r")},
			Result: history.Result{Records: []history.Record{rec(2, "failed read")}}},
		final(10, rec(1, "w5")),
	)
	res := &checker.Results{Checks: []checker.Result{{Name: checker.NoLostWrite, Anomalies: []checker.Anomaly{
		{Guarantee: checker.NoLostWrite, Role: "r", Log: "lease:r", Ops: []int64{3, 77}, Offsets: []int64{0, 1, 2}},
	}}}}
	p := newPage(nil, res, h, nil)
	if len(p.Anomalies) != 1 {
		t.Fatalf("%d anomalies", len(p.Anomalies))
	}
	a := p.Anomalies[0]
	if len(a.Ops) != 2 || a.Ops[0].ID != 3 || a.Ops[0].WriteID != "w3" || a.Ops[1].ID != 77 || a.Ops[1].Outcome != "not in the history" {
		t.Errorf("operations %+v", a.Ops)
	}
	if len(a.Offsets) != 3 || a.Offsets[0].WriteID != "w3" || a.Offsets[1].WriteID != "w5" || !a.Offsets[1].Found || a.Offsets[2].Found {
		t.Errorf("records %+v", a.Offsets)
	}
}

// TestPipelineView: a pipeline run's report has a row per input partition with its records,
// committed offset, outputs, transactions by outcome and owners in time order (consecutive
// transactions of one member and generation as one span), and its fault windows; the lease
// sections (exposure, liveness, timelines) are left out.
func TestPipelineView(t *testing.T) {
	b := history.NewBuilder(0)
	tok := history.Token{ProducerID: 1}
	evs := []history.Event{{Type: history.TypeHeader, Meta: &history.Meta{Workload: history.WorkloadPipeline,
		Pipeline: &history.PipelineMeta{Partitions: 2}}}}
	id := int64(0)
	add := func(kind history.Kind, member string, gen int32, args *history.PipeArgs, typ history.EventType, res *history.PipeResult, at int64) {
		id++
		if args != nil {
			args.Generation = gen
		}
		evs = append(evs, history.Event{Type: history.TypeInvoke, ID: id, Time: at, Process: "p1", Member: member, Kind: kind, Args: history.Args{Pipe: args}},
			history.Event{Type: typ, ID: id, Time: at + int64(time.Millisecond), Result: history.Result{Pipe: res}, Error: map[bool]string{true: "fenced"}[typ == history.TypeFail]})
	}
	txn := func(p int32, from, to int64) *history.PipeArgs {
		return &history.PipeArgs{Inputs: []history.PipeRange{{Partition: p, From: from, To: to}}}
	}
	for o := range int64(3) {
		add(history.KindSend, "", 0, &history.PipeArgs{ID: "i"}, history.TypeOK, &history.PipeResult{Sent: &history.PipeOffset{Partition: 0, Offset: o}}, o)
	}
	add(history.KindTxn, "m1", 1, txn(0, 0, 1), history.TypeOK, &history.PipeResult{Token: &tok}, int64(time.Second))
	add(history.KindTxn, "m1", 1, txn(0, 1, 2), history.TypeOK, &history.PipeResult{Token: &tok}, int64(2*time.Second))
	add(history.KindTxn, "m1", 1, txn(0, 2, 3), history.TypeFail, nil, int64(3*time.Second))
	add(history.KindTxn, "m2", 2, txn(0, 2, 3), history.TypeOK, &history.PipeResult{Token: &tok}, int64(4*time.Second))
	add(history.KindFinalOffsets, "", 0, nil, history.TypeOK, &history.PipeResult{Offsets: []history.PipeOffset{{Partition: 0, Offset: 3}}}, int64(5*time.Second))
	evs = append(evs, history.Event{Type: history.TypeFaultStart, Fault: 1, Time: int64(2500 * time.Millisecond), Kind: history.KindMemberPause, Desc: "freeze m1"},
		history.Event{Type: history.TypeFaultEnd, Fault: 1, Time: int64(3500 * time.Millisecond), TookHold: true})
	for i := range evs {
		if err := b.Add(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	p := newPage(nil, &checker.Results{Verdict: checker.VerdictValid}, b.History(), nil)
	if !p.IsPipeline || len(p.Pipeline) != 2 || len(p.Timelines) != 0 {
		t.Fatalf("pipeline %v, %d rows, %d timelines", p.IsPipeline, len(p.Pipeline), len(p.Timelines))
	}
	r := p.Pipeline[0]
	if r.Sent != 3 || r.Committed != "3" || r.TxnsOK != 3 || r.TxnsFailed != 1 ||
		strings.Join(r.Owners, " → ") != "p1/m1 gen 1 (1s–2s) → p1/m2 gen 2 (4s–4s)" {
		t.Errorf("partition 0: %+v", r)
	}
	if r1 := p.Pipeline[1]; r1.Sent != 0 || r1.Committed != "none" || len(r1.Owners) != 0 {
		t.Errorf("partition 1: %+v", r1)
	}
	if len(p.PipelineFaults) != 1 || p.PipelineFaults[0].Start != "2.5s" || !p.PipelineFaults[0].TookHold {
		t.Errorf("faults %+v", p.PipelineFaults)
	}
	html, err := HTML(nil, &checker.Results{Verdict: checker.VerdictValid}, b.History(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="pipeline"`, "p1/m1 gen 1 (1s–2s) → p1/m2 gen 2 (4s–4s)", `id="faults"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(string(html), "Split-brain exposure") {
		t.Error("a pipeline report shows the lease run's exposure")
	}
}

// TestWriteOfSeveralRecordsIsNamedSo: an anomaly's operation and records say how many records
// a write carried and which of them a record is; a one-record write's read as before.
func TestWriteOfSeveralRecordsIsNamedSo(t *testing.T) {
	op := history.Op{ID: 17, Kind: history.KindWork, Args: history.Args{WriteID: "w17", Records: 3}}
	if got := opView(&op).WriteID; got != "w17 (3 records)" {
		t.Errorf("op: %q", got)
	}
	op.Args.Records = 0
	if got := opView(&op).WriteID; got != "w17" {
		t.Errorf("one-record op: %q", got)
	}
	if got := recordWriteID(&history.Record{WriteID: "w17", Index: 1, Count: 3}); got != "w17, record 1 of 3" {
		t.Errorf("record: %q", got)
	}
	if got := recordWriteID(&history.Record{WriteID: "w18"}); got != "w18" {
		t.Errorf("one-record record: %q", got)
	}
}
