package suite

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencecheck/fencecheck/scenarios"
)

// What a run costs besides its workload, by cluster kind, for the estimate when no past suite
// timed the cell. Measured on the 2-core machine (docs/nightly.md, "The plan"): a cluster's
// start (local: BenchmarkStart with the start cache; containers: `fencecheck cluster up`), and
// what follows the workload (heal, the final reads, the check, the report), longer after a
// broker fault, whose brokers come back first.
var (
	startCost = map[string]time.Duration{
		scenarios.KindEmbedded:   0,
		scenarios.KindLocal:      4 * time.Second,
		scenarios.KindContainers: 9 * time.Second,
		scenarios.KindExternal:   0,
	}
	tailCost = map[string]time.Duration{
		scenarios.KindEmbedded:   500 * time.Millisecond,
		scenarios.KindLocal:      1500 * time.Millisecond,
		scenarios.KindContainers: 1500 * time.Millisecond,
		scenarios.KindExternal:   1500 * time.Millisecond,
	}
)

// brokerTail is what a broker fault adds to a run's tail on a real cluster: its brokers are
// restarted or resumed and the cluster must be healthy before the final reads. execCost is what
// a transport behind the exec protocol adds to a run, an adapter process per member: measured
// against the built-in transport's shares (docs/nightly.md, "The full matrix on 8 runners"),
// the Java adapter added 3.2 s a run, Sarama 2.8, librdkafka 0.7–1.5 and KafkaJS 0.6; the
// largest is the model's, so a plan errs long.
const (
	brokerTail = 5 * time.Second
	execCost   = 3 * time.Second
)

// Share is one group of a suite on one system, what a CI matrix job runs (--group G --system
// S), with its estimated time.
type Share struct {
	Group, System string
	Cells, Runs   int
	// Timed is how many of the cells' estimates come from a past suite's runs rather than
	// from the model.
	Timed int
	Time  time.Duration
}

// Estimate is a suite's planned time: per share, and in all on one machine.
type Estimate struct {
	Shares []Share
	// Total is the suite's time on one machine, running its cells in plan order with one
	// shared cluster per system (fewer starts than the shares, which start one each).
	Total time.Duration
	// Cut names the cells that, at the estimate, would start after the budget: the suite
	// leaves them "not run" on one machine.
	Cut []string
	// Budget is the suite's.
	Budget time.Duration
}

// cellTime estimates one cell: from past, the mean of its runs there times the repeats; else
// the model (the workload's duration, the tail, and a cluster start per run unless it shares).
// timed reports which.
func cellTime(c *plannedCell, past *Report) (d time.Duration, timed bool) {
	if past != nil {
		for _, pc := range past.Cells {
			if pc.Scenario != c.Scenario || pc.System != c.System || len(pc.Runs) == 0 {
				continue
			}
			var sum float64
			for _, r := range pc.Runs {
				sum += r.Seconds
			}
			return time.Duration(sum / float64(len(pc.Runs)) * float64(c.repeats) * float64(time.Second)), true
		}
	}
	kind := c.s.Cluster.Kind
	run := c.s.Duration.D() + tailCost[kind]
	if !scenarios.SharesCluster(c.s) && kind != scenarios.KindEmbedded {
		run += brokerTail
	}
	if !c.shared {
		run += startCost[kind]
	}
	if strings.HasPrefix(c.transport, "exec:") {
		run += execCost
	}
	return time.Duration(c.repeats) * run, false
}

// Estimate plans the cells Plan returned, timing each from past when it ran there (nil: the
// model alone).
func (f *File) Estimate(cells []*plannedCell, past *Report) Estimate {
	est := Estimate{Budget: f.Budget.D()}
	index := map[[2]string]int{}
	started := map[[2]string]bool{} // shared clusters started: per system on one machine, per share in CI
	for _, c := range cells {
		if c.Status == StatusSkipped {
			continue
		}
		key := [2]string{c.Group, c.System}
		i, ok := index[key]
		if !ok {
			i = len(est.Shares)
			index[key] = i
			est.Shares = append(est.Shares, Share{Group: c.Group, System: c.System})
		}
		sh := &est.Shares[i]
		d, timed := cellTime(c, past)
		if c.shared {
			kind := c.s.Cluster.Kind
			if !started[key] {
				started[key] = true
				sh.Time += startCost[kind]
			}
			if sys := [2]string{"", c.System}; !started[sys] {
				started[sys] = true
				est.Total += startCost[kind]
			}
		}
		if est.Total >= est.Budget {
			est.Cut = append(est.Cut, c.Scenario+" × "+c.System)
		}
		sh.Cells++
		sh.Runs += c.repeats
		sh.Time += d
		if timed {
			sh.Timed++
		}
		est.Total += d
	}
	return est
}

// Schedule assigns the shares to runners, each share to the runner that is free first,
// longest share first (how a CI matrix with that many parallel jobs runs them, at best), and
// returns the wall time and each runner's shares (indexes into shares).
func Schedule(shares []Share, runners int) (time.Duration, [][]int) {
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(shares[b].Time, shares[a].Time) })
	load := make([]time.Duration, max(runners, 1))
	jobs := make([][]int, len(load))
	for _, i := range order {
		r := slices.Index(load, slices.Min(load))
		load[r] += shares[i].Time
		jobs[r] = append(jobs[r], i)
	}
	return slices.Max(load), jobs
}

// SelectRunner keeps of f only what runner k of n runs (1 ≤ k ≤ n): the shares that Schedule
// gives it over f's estimate (timed from past when not nil), the runners as PrintPlan lists
// them. So n CI jobs given the same suite, flags and past run every share exactly once between
// them. A group and system whose cells are all skipped cost nothing and belong to no share:
// runner 1 keeps them, so that the merged grid still shows them. It returns the runner's
// shares; none when the suite has fewer shares than runners (f then plans no cell, or only
// skipped ones on runner 1).
func (f *File) SelectRunner(k, n int, noReuse bool, past *Report) ([]Share, error) {
	if n < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("runner %d of %d: want K/N with 1 ≤ K ≤ N (for example 3/8)", k, n)
	}
	cells, err := f.Plan(noReuse)
	if err != nil {
		return nil, err
	}
	est := f.Estimate(cells, past)
	_, jobs := Schedule(est.Shares, n)
	keep := map[[2]string]bool{}
	groups, systems := map[string]bool{}, map[string]bool{}
	add := func(group, system string) {
		keep[[2]string{group, system}], groups[group], systems[system] = true, true, true
	}
	var mine []Share
	for _, i := range jobs[k-1] {
		mine = append(mine, est.Shares[i])
		add(est.Shares[i].Group, est.Shares[i].System)
	}
	if k == 1 {
		inShare := map[[2]string]bool{}
		for _, s := range est.Shares {
			inShare[[2]string{s.Group, s.System}] = true
		}
		for _, c := range cells {
			if !inShare[[2]string{c.Group, c.System}] {
				add(c.Group, c.System)
			}
		}
	}
	f.keep = keep
	f.Groups = slices.DeleteFunc(f.Groups, func(g Group) bool { return !groups[g.Name] })
	f.Systems = slices.DeleteFunc(f.Systems, func(s System) bool { return !systems[s.Name] })
	return mine, nil
}

// PrintPlan writes the estimate: a line per share, the suite on one machine against its
// budget, and the wall time on runners (0: none) with what each runner runs.
func PrintPlan(w io.Writer, f *File, est Estimate, runners int) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "share (group/system)\tcells\truns\testimate\tfrom\n")
	timed, cells := 0, 0
	for _, s := range est.Shares {
		from := "model"
		switch {
		case s.Timed == s.Cells:
			from = "past suite"
		case s.Timed > 0:
			from = fmt.Sprintf("past suite (%d of %d)", s.Timed, s.Cells)
		}
		timed, cells = timed+s.Timed, cells+s.Cells
		fmt.Fprintf(tw, "%s/%s\t%d\t%d\t%s\t%s\n", s.Group, s.System, s.Cells, s.Runs, human(s.Time), from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fits := "fits"
	if len(est.Cut) > 0 {
		fits = fmt.Sprintf("does not fit: %d cells would not run, from %s", len(est.Cut), est.Cut[0])
	}
	fmt.Fprintf(w, "suite %s: %d shares, %d cells (%d timed from a past suite); one machine: %s (budget %s: %s)\n",
		f.Name, len(est.Shares), cells, timed, human(est.Total), human(est.Budget), fits)
	if runners > 0 {
		wall, jobs := Schedule(est.Shares, runners)
		fmt.Fprintf(w, "on %d runners, each share a job, longest first: %s\n", runners, human(wall))
		for r, js := range jobs {
			var names []string
			var t time.Duration
			for _, i := range js {
				names = append(names, est.Shares[i].Group+"/"+est.Shares[i].System)
				t += est.Shares[i].Time
			}
			fmt.Fprintf(w, "  runner %d (%s): %s\n", r+1, human(t), strings.Join(names, ", "))
		}
	}
	return nil
}

// human prints an estimate as precisely as it is meant: "2m46s" under ten minutes, "24m" and
// "3h09m" above.
func human(d time.Duration) string {
	if d < 10*time.Minute {
		return d.Round(time.Second).String()
	}
	m := int(d.Round(time.Minute).Minutes())
	if m < 60 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
