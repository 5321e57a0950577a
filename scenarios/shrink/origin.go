// Package shrink turns a failing run directory into the smallest scenario that still fails
// the same way: it replays the run's faults as an explicit script, then removes and shortens
// faults, the run and the workload one candidate at a time, keeping a candidate only when a
// try of it breaks one of the guarantees the original run broke (see docs/bug-report.md).
package shrink

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
)

// ErrNotShrinkable marks a run directory that cannot be shrunk: unreadable, or not invalid on
// any guarantee. It is a usage error.
var ErrNotShrinkable = errors.New("cannot shrink")

// Origin is the failing run a shrink starts from.
type Origin struct {
	// Dir is the run directory.
	Dir string
	// Info is its run.json.
	Info *reports.RunInfo
	// Scenario is the scenario as it ran, with a random schedule replaced by the explicit
	// script of the faults the run injected (same faults, times and targets).
	Scenario *scenarios.Scenario
	// Steps is Scenario's script, parsed.
	Steps []nemesis.Step
	// Failed are the guarantees the run was invalid on (non-advisory checks).
	Failed []string
	// Report is the run's report.html.
	Report string
}

// Load reads a run directory: run.json (the expanded scenario, the seed and the transport),
// results.json (which guarantees failed) and, for a random schedule, history.jsonl (the fault
// windows that make the explicit script).
func Load(dir string) (*Origin, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	d := reports.Dir(dir)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrNotShrinkable, dir, fmt.Sprintf(format, args...))
	}
	if _, err := d.ReadRunInfo(); err != nil {
		return nil, bad("%v", err)
	}
	sc, info, err := scenarios.FromRun(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotShrinkable, err)
	}
	s := *sc
	res, err := checker.ReadResultsFile(d.Results())
	if err != nil {
		return nil, bad("%v (check the run first: fencecheck check %s)", err, dir)
	}
	failed := Failed(res)
	if len(failed) == 0 {
		return nil, bad("the run is %s, not invalid on any guarantee: there is no failure to shrink", res.Verdict)
	}
	o := &Origin{Dir: dir, Info: info, Failed: failed, Report: d.Report()}
	if s.Nemesis.Random != nil {
		h, err := history.ReadFile(d.History())
		if err != nil {
			return nil, bad("%v", err)
		}
		steps, err := Explicit(&s, h)
		if err != nil {
			return nil, bad("%v", err)
		}
		s.Nemesis = scenarios.NemesisSpec{Script: stepLines(steps)}
	}
	sched, _, err := s.Nemesis.Schedule()
	if err != nil {
		return nil, bad("%v", err)
	}
	o.Steps = sched.Script
	if err := s.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	o.Scenario = &s
	return o, nil
}

// Failed returns the names of the non-advisory checks res is invalid on, sorted.
func Failed(res *checker.Results) []string {
	var out []string
	for _, c := range res.Checks {
		if c.Verdict == checker.VerdictInvalid && !c.Advisory {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func stepLines(steps []nemesis.Step) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st.String()
	}
	return out
}

// Explicit turns the fault windows of h, a run of s with a random schedule, into script steps
// that replay the same faults at the same times on the same targets: each window's recorded
// spec (history.Fault.Spec: the fault as injected, its parameters and duration, its targets
// resolved to what it acted on), at the window's start counted from the workload's start (the
// first operation's invocation) and rounded to 100 ms. A history without recorded specs (one
// written before fencecheck recorded them) cannot be replayed: the error says to run again.
func Explicit(s *scenarios.Scenario, h *history.History) ([]nemesis.Step, error) {
	if s.Nemesis.Random == nil {
		return nil, errors.New("not a random schedule")
	}
	start := int64(-1)
	for i := range h.Len() {
		if start < 0 || h.Op(i).Invoke < start {
			start = h.Op(i).Invoke
		}
	}
	if start < 0 {
		start = 0
	}
	var steps []nemesis.Step
	for _, f := range h.Faults {
		if f.Spec == "" {
			return nil, fmt.Errorf("fault window %d (%s %s) records no spec to replay: the history was written by an older fencecheck; run the scenario again and shrink that run",
				f.ID, f.Kind, strings.Join(f.Targets, " "))
		}
		spec, err := nemesis.ParseSpec(f.Spec)
		if err != nil {
			return nil, fmt.Errorf("fault window %d: its spec %q: %w", f.ID, f.Spec, err)
		}
		at := max(time.Duration(f.Start-start), 0).Round(100 * time.Millisecond)
		steps = append(steps, nemesis.Step{At: units.Duration(at), Spec: spec})
	}
	return steps, nil
}
