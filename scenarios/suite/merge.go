package suite

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/fencecheck/fencecheck/checker"
)

// Mark compares rep's cells with base's (same scenario and system) and sets each cell's
// Mark: new failure (it fails now and passed, or did not exist, in base), fixed (it failed in
// base and is valid now) or still failing (it fails in both). A cell fails when it ran and is
// not valid; a cell that did not run, here or in base, gets no mark. Flakiness (verdicts that
// differ across one cell's repeats) is the cell's own and is set when it finishes.
func Mark(rep, base *Report) {
	type key struct{ scenario, system string }
	before := map[key]*Cell{}
	for i := range base.Cells {
		c := &base.Cells[i]
		before[key{c.Scenario, c.System}] = c
	}
	for i := range rep.Cells {
		c := &rep.Cells[i]
		c.Mark = ""
		if c.Status != StatusRan {
			continue
		}
		b, ok := before[key{c.Scenario, c.System}]
		if ok && b.Status != StatusRan {
			continue
		}
		switch {
		case c.failing() && (!ok || !b.failing()):
			c.Mark = MarkNewFailure
		case c.failing():
			c.Mark = MarkStillFailing
		case ok && b.failing():
			c.Mark = MarkFixed
		}
	}
}

// MergeOptions configure Merge.
type MergeOptions struct {
	// Out is the merged suite directory (created); it links to the run directories where
	// they are, so it is best made beside or above the suite directories.
	Out string
	// Baseline is a previous (merged or single) suite directory to mark against; "" for none.
	Baseline string
	// Command is the merge's command line, stored with the suites' own.
	Command string
}

// Merge reads the suite directories dirs (the shares of one nightly, e.g. one per CI job)
// and writes one suite directory with their cells: index.html, junit.xml, suite.json and
// summary.md. Runs stay where they are; links point at them. The same cell in two
// directories becomes one cell with the runs of both (so its flakiness covers all of them).
func Merge(dirs []string, opts MergeOptions) (*Report, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no suite directory to merge")
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("merge folder: %w", err)
	}
	out := &Report{}
	type key struct{ scenario, system string }
	index := map[key]int{}
	var end time.Time
	for _, dir := range dirs {
		r, err := Load(dir)
		if err != nil {
			return nil, err
		}
		rel := relOrAbs(opts.Out, dir)
		out.Merged = append(out.Merged, rel)
		if out.Suite == "" {
			out.Suite, out.Description, out.Budget = r.Suite, r.Description, r.Budget
		} else if r.Suite != out.Suite && !slices.Contains([]string{out.Suite}, r.Suite) {
			out.Suite += "+" + r.Suite
		}
		for _, c := range r.Commands {
			if !slices.Contains(out.Commands, c) {
				out.Commands = append(out.Commands, c)
			}
		}
		if out.Started.IsZero() || r.Started.Before(out.Started) {
			out.Started = r.Started
		}
		if e := r.Started.Add(time.Duration(r.Seconds * float64(time.Second))); e.After(end) {
			end = e
		}
		if r.Stopped != "" {
			out.Stopped = joinNote(out.Stopped, fmt.Sprintf("%s: %s", rel, r.Stopped))
		}
		for _, s := range r.Systems {
			if !slices.ContainsFunc(out.Systems, func(x System) bool { return x.Name == s.Name }) {
				out.Systems = append(out.Systems, s)
			}
		}
		for _, c := range r.Cells {
			for j := range c.Runs {
				if c.Runs[j].Dir != "" {
					c.Runs[j].Dir = rebase(opts.Out, dir, c.Runs[j].Dir)
					c.Runs[j].Command = repeatCommand(opts.Out, c.Runs[j])
				}
			}
			c.finish() // its repeat command, from the rebased runs
			k := key{c.Scenario, c.System}
			n, seen := index[k]
			if !seen {
				index[k] = len(out.Cells)
				c.Mark = ""
				out.Cells = append(out.Cells, c)
				continue
			}
			m := &out.Cells[n]
			switch {
			case c.Status == StatusRan:
				m.Runs = append(m.Runs, c.Runs...)
				if m.Status != StatusRan {
					m.Note, m.Cluster = "", c.Cluster
				}
				m.finish()
			case m.Status != StatusRan && c.Status == StatusNotRun:
				m.Status, m.Note = c.Status, c.Note // not run beats skipped: it was meant to run
			}
		}
	}
	if opts.Command != "" {
		out.Commands = append(out.Commands, opts.Command)
	}
	out.Seconds = end.Sub(out.Started).Seconds()
	out.summarize()
	if opts.Baseline != "" {
		base, err := Load(opts.Baseline)
		if err != nil {
			return nil, err
		}
		out.Baseline = relOrAbs(opts.Out, opts.Baseline)
		Mark(out, base)
	}
	return out, Write(opts.Out, out)
}

// rebase turns run, relative to the suite directory dir, into a path relative to out.
func rebase(out, dir, run string) string {
	if path.IsAbs(run) {
		return run
	}
	return relOrAbs(out, filepath.Join(dir, filepath.FromSlash(run)))
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Exit is the exit code of a suite: that of its worst verdict (see Report.Verdict).
func Exit(rep *Report) int { return checker.ExitCode(rep.Verdict) }
