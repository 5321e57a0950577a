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
