package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// cell is what a table cell says of one mutant and one method over its seeds.
type cell struct {
	attempts, found int
	// median is the median time to detect over every attempt, a miss counting as longer than
	// any find; ok is false when the middle attempt was a miss ("not reached").
	median     time.Duration
	ok         bool
	medianRuns float64
	loads      []string
	budget     time.Duration
}

// summarize folds the attempts of one mutant and one method into a cell. A miss counts as
// longer than every find: the median is a time only when more than half the attempts (the
// middle one, or both middle ones) found the mutant.
func summarize(as []attempt) cell {
	c := cell{attempts: len(as)}
	type t struct {
		found bool
		wall  time.Duration
		runs  int
	}
	var ts []t
	for _, a := range as {
		if a.Found {
			c.found++
		}
		ts = append(ts, t{a.Found, a.Wall, a.Runs})
		c.loads = append(c.loads, a.Load)
		c.budget = max(c.budget, a.Budget)
	}
	slices.SortFunc(ts, func(x, y t) int {
		if x.found != y.found {
			if x.found {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.wall, y.wall)
	})
	n := len(ts)
	if n == 0 {
		return c
	}
	lo, hi := ts[(n-1)/2], ts[n/2]
	if lo.found && hi.found {
		c.ok = true
		c.median = (lo.wall + hi.wall) / 2
		c.medianRuns = float64(lo.runs+hi.runs) / 2
	}
	return c
}

// writeTable writes the markdown table of the attempts: a row per mutant, a column per
// method, each cell found/attempts, the median time to detect and the median runs it took,
// and the range of the load averages the attempts saw.
func writeTable(w io.Writer, as []attempt) {
	var mutants, meths []string
	by := map[[2]string][]attempt{}
	for _, a := range as {
		if !slices.Contains(mutants, a.Mutant) {
			mutants = append(mutants, a.Mutant)
		}
		if !slices.Contains(meths, a.Method) {
			meths = append(meths, a.Method)
		}
		k := [2]string{a.Mutant, a.Method}
		by[k] = append(by[k], a)
	}
	slices.SortFunc(meths, func(a, b string) int { return cmp.Compare(slices.Index(methods, a), slices.Index(methods, b)) })
	fmt.Fprintf(w, "| mutant | %s | load average (1-min, start-end of each attempt) |\n", strings.Join(meths, " | "))
	fmt.Fprintf(w, "|---|%s---|\n", strings.Repeat("---|", len(meths)))
	for _, m := range mutants {
		var cells, loads []string
		for _, meth := range meths {
			k := [2]string{m, meth}
			if len(by[k]) == 0 {
				cells = append(cells, "-") // not measured
				continue
			}
			c := summarize(by[k])
			cells = append(cells, c.String())
			loads = append(loads, c.loadRange())
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", m, strings.Join(cells, " | "), strings.Join(loads, " / "))
	}
}

// String is the cell as the table shows it: "4/5, 31 s (2 runs)" or "1/5, not reached (10m)".
func (c cell) String() string {
	if !c.ok {
		return fmt.Sprintf("%d/%d, not reached (%v)", c.found, c.attempts, c.budget)
	}
	runs := "runs"
	if c.medianRuns == 1 {
		runs = "run"
	}
	return fmt.Sprintf("%d/%d, %.0f s (%g %s)", c.found, c.attempts, c.median.Seconds(), c.medianRuns, runs)
}

// loadRange is the lowest and highest load average the cell's attempts saw.
func (c cell) loadRange() string {
	var v []float64
	for _, l := range c.loads {
		for _, f := range strings.Split(l, "-") {
			var x float64
			if _, err := fmt.Sscan(f, &x); err == nil {
				v = append(v, x)
			}
		}
	}
	if len(v) == 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f–%.0f", slices.Min(v), slices.Max(v))
}

func writeTableFile(path string, as []attempt) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	writeTable(f, as)
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
