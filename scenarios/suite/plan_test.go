package suite

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEstimateModel: without a past suite, a cell is its workload's duration plus what its
// cluster kind costs around it, a shared cluster starts once per system on one machine and
// once per share, and the cells that would start after the budget are named.
func TestEstimateModel(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte(`name: est
budget: 50s
duration: 10s
groups:
  - {name: links, scenarios: [steady, holder-partition]}
  - {name: brokers, scenarios: [kill-coordinator]}
systems:
  - {name: k, cluster: embedded}
  - {name: l, cluster: local, kafka_version: 4.1.2}
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	est := f.Estimate(cells, nil)
	want := map[string]time.Duration{
		"links/k":   2 * (10*time.Second + 500*time.Millisecond),
		"brokers/k": 10*time.Second + 500*time.Millisecond,
		// One shared cluster start, two runs with the local tail.
		"links/l": 4*time.Second + 2*(10*time.Second+1500*time.Millisecond),
		// A cluster of its own and the broker fault's tail.
		"brokers/l": 10*time.Second + 1500*time.Millisecond + 5*time.Second + 4*time.Second,
	}
	var sum time.Duration
	for _, s := range est.Shares {
		if s.Time != want[s.Group+"/"+s.System] {
			t.Errorf("share %s/%s: %v, want %v", s.Group, s.System, s.Time, want[s.Group+"/"+s.System])
		}
		sum += s.Time
	}
	if len(est.Shares) != len(want) || est.Total != sum {
		t.Errorf("%d shares, total %v; want %d shares and their sum %v (one shared start per system here)", len(est.Shares), est.Total, len(want), sum)
	}
	// A 50 s budget: the three cells on k take 31.5 s, l's shared start and steady end at 47 s,
	// so holder-partition on l starts in time and kill-coordinator, at 58.5 s, after it.
	if !slices.Equal(est.Cut, []string{"kill-coordinator × l"}) {
		t.Errorf("cut %v, want only kill-coordinator on l", est.Cut)
	}
	var out bytes.Buffer
	if err := PrintPlan(&out, f, est, 2); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"links/l", "does not fit: 1 cells would not run, from kill-coordinator × l", "on 2 runners"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan output lacks %q:\n%s", s, out.String())
		}
	}
}

// TestEstimateFromPast: a cell a past suite ran is the mean of its runs there times its
// repeats, whatever the model says.
func TestEstimateFromPast(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte("name: past\nbudget: 1h\nrepeats: 3\nscenarios: [steady, zombie-holder]\nsystems: [{name: k, cluster: embedded}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	past := &Report{Cells: []Cell{{Scenario: "steady", System: "k", Runs: []CellRun{{Seconds: 20}, {Seconds: 40}}}}}
	est := f.Estimate(cells, past)
	if len(est.Shares) != 1 {
		t.Fatalf("shares %+v, want one", est.Shares)
	}
	var zombie time.Duration
	for _, c := range cells {
		if c.Scenario == "zombie-holder" {
			zombie, _ = cellTime(c, nil)
		}
	}
	if s := est.Shares[0]; s.Time != 90*time.Second+zombie || s.Timed != 1 || s.Runs != 6 {
		t.Errorf("share %+v, want 90s (3 × the mean 30s) + zombie-holder's model %v, 1 cell timed, 6 runs", s, zombie)
	}
}

// TestSchedule: every share goes to one runner, the wall time is the busiest runner's, and
// longest-first packing meets the lower bound when the shares divide evenly.
func TestSchedule(t *testing.T) {
	var shares []Share
	for _, m := range []int{5, 4, 3, 3, 2, 2, 1} {
		shares = append(shares, Share{Time: time.Duration(m) * time.Minute})
	}
	wall, jobs := Schedule(shares, 2)
	if wall != 10*time.Minute {
		t.Errorf("wall %v on 2 runners, want 10m (20m of shares)", wall)
	}
	var seen []int
	for _, js := range jobs {
		seen = append(seen, js...)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("shares assigned %v, want each once", seen)
	}
	if wall, _ := Schedule(shares, 100); wall != 5*time.Minute {
		t.Errorf("wall %v on more runners than shares, want the longest share, 5m", wall)
	}
}

// TestSelectRunner: the runners of a plan, each selecting its own shares from the same suite,
// run every cell of the suite exactly once between them (the matrix on 8 runners, and on more
// runners than it has shares), each the shares PrintPlan lists for it; a group whose cells are
// all skipped stays in runner 1's grid; K/N out of range is an error.
func TestSelectRunner(t *testing.T) {
	cellsOf := func(f *File) []string {
		t.Helper()
		cells, err := f.Plan(false)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cells {
			out = append(out, c.Group+"/"+c.Scenario+"×"+c.System+":"+string(c.Status))
		}
		return out
	}
	for _, n := range []int{8, 50} {
		full, err := Find("matrix")
		if err != nil {
			t.Fatal(err)
		}
		want := cellsOf(full)
		planned, err := full.Plan(false)
		if err != nil {
			t.Fatal(err)
		}
		est := full.Estimate(planned, nil)
		_, jobs := Schedule(est.Shares, n)
		var got []string
		for k := 1; k <= n; k++ {
			f, _ := Find("matrix")
			shares, err := f.SelectRunner(k, n, false, nil)
			if err != nil {
				t.Fatalf("runner %d/%d: %v", k, n, err)
			}
			var wantShares []Share
			for _, i := range jobs[k-1] {
				wantShares = append(wantShares, est.Shares[i])
			}
			if !slices.Equal(shares, wantShares) {
				t.Errorf("runner %d/%d selects %v, the plan gives it %v", k, n, shares, wantShares)
			}
			got = append(got, cellsOf(f)...)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%d runners plan %d cells between them, the suite %d: every cell once is wanted", n, len(got), len(want))
		}
	}

	src := []byte(`name: sparse
budget: 1h
duration: 10s
groups:
  - {name: a, scenarios: [steady, holder-partition]}
  - {name: b, scenarios: [kill-coordinator]}
systems:
  - {name: k, cluster: embedded}
  - {name: l, cluster: local, kafka_version: 4.1.2}
cells:
  - {scenario: steady, system: k, skip: "not today"}
  - {scenario: holder-partition, system: k, skip: "not today"}
`)
	f, err := Parse("s.yaml", "", src)
	if err != nil {
		t.Fatal(err)
	}
	all := cellsOf(f)
	var got []string
	for k := 1; k <= 2; k++ {
		g, _ := Parse("s.yaml", "", src)
		if _, err := g.SelectRunner(k, 2, false, nil); err != nil {
			t.Fatal(err)
		}
		cells := cellsOf(g)
		if k == 1 && !slices.Contains(cells, "a/steady×k:skipped") {
			t.Errorf("runner 1 of 2 plans %v: the skipped group a on k belongs to no share and should be in runner 1's grid", cells)
		}
		got = append(got, cells...)
	}
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Errorf("two runners plan %v, the suite %v", got, all)
	}
	for _, kn := range [][2]int{{0, 8}, {9, 8}, {1, 0}} {
		if _, err := f.SelectRunner(kn[0], kn[1], false, nil); err == nil || !strings.Contains(err.Error(), "K/N") {
			t.Errorf("runner %d of %d: %v, want an error saying K/N", kn[0], kn[1], err)
		}
	}
}
