package explore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/atomicfile"
	"github.com/fencecheck/fencecheck/scenarios"
)

// The output folder's parts.
const (
	runsDir     = "runs"
	corpusDir   = "corpus"
	shrinkDir   = "shrink"
	resultFile  = "explore.json"
	summaryFile = "summary.md"
)

// Why a search stopped (Result.Stopped).
const (
	StoppedInvalid     = "invalid"     // a run was invalid
	StoppedBudget      = "budget"      // Options.Budget was spent
	StoppedRuns        = "runs"        // Options.Runs runs ran
	StoppedInterrupted = "interrupted" // ctx ended (Ctrl-C)
	StoppedError       = "error"       // a run could not start, or the output could not be written
)

// Duration is a time.Duration that reads as "1m2s" in explore.json.
type Duration time.Duration

// MarshalText writes d in Go's form, rounded to milliseconds.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// Result is a search's outcome, also written as explore.json.
type Result struct {
	Scenario  string   `json:"scenario"`
	Seed      uint64   `json:"seed"`
	Transport string   `json:"transport"`
	Cluster   string   `json:"cluster"`
	Faults    []string `json:"faults"` // the fault kinds drawn
	Budget    Duration `json:"budget"`
	MaxRuns   int      `json:"max_runs,omitempty"`
	Out       string   `json:"out"`
	Took      Duration `json:"took"`
	// Stopped says why the search ended (StoppedInvalid, ...); Error what went wrong.
	Stopped string `json:"stopped"`
	Error   string `json:"error,omitempty"`
	// Runs are every run in order; the kept ones' schedules are the corpus.
	Runs []RunRecord `json:"runs"`
	// Tuples are every feedback tuple reached, each with the run that reached it first.
	Tuples []Tuple `json:"tuples"`
	// Invalid is the first invalid run, if any.
	Invalid *Invalid `json:"invalid,omitempty"`
}

// RunRecord is one run of a search.
type RunRecord struct {
	N         int      `json:"n"`
	Name      string   `json:"name"`
	Seed      uint64   `json:"seed"`
	Schedule  []string `json:"schedule"`
	Parent    int      `json:"parent"`    // the run whose schedule was mutated; -1: drawn fresh
	Mutations []string `json:"mutations"` // what changed from the parent
	// Duration is how long its workload ran: the probe's duration for run 0 (Options.Probe),
	// the scenario's for the others.
	Duration Duration `json:"duration"`
	Dir      string   `json:"dir,omitempty"`
	Verdict  string   `json:"verdict,omitempty"`
	New      []string `json:"new,omitempty"` // the tuples it reached first
	Kept     bool     `json:"kept"`
	// File is the kept schedule's scenario file, relative to the output folder.
	File        string   `json:"file,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"`
	Error       string   `json:"error,omitempty"`
	Took        Duration `json:"took"`
}

// Tuple is one feedback tuple and the run that reached it first.
type Tuple struct {
	Tuple string `json:"tuple"`
	Run   int    `json:"run"`
}

// Invalid is the first invalid run and what became of it.
type Invalid struct {
	Run      int      `json:"run"`
	Dir      string   `json:"dir"`
	Broken   []string `json:"broken"`
	Schedule []string `json:"schedule"`
	// Command repeats the run.
	Command string `json:"command"`
	// Shrink is the shrink's output folder; ShrinkError why it failed.
	Shrink      string `json:"shrink,omitempty"`
	ShrinkError string `json:"shrink_error,omitempty"`
}

// writeCorpus writes the kept schedule of rec as a scenario file `fencecheck run` accepts.
func (e *search) writeCorpus(s *scenarios.Scenario, rec *RunRecord) error {
	s.Description = fmt.Sprintf("Kept by fencecheck explore from %s (search seed %d), run %d with seed %d: it reached %d feedback tuples no earlier run had, such as %s. Repeat it: fencecheck run FILE --seed %d.",
		e.base.Name, e.opts.Seed, rec.N, rec.Seed, len(rec.New), strings.Join(rec.New[:min(3, len(rec.New))], "; "), rec.Seed)
	b, err := s.Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(e.opts.Out, rec.File)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

// write writes explore.json and summary.md, each replaced whole (atomicfile).
func (e *search) write() error {
	e.res.Took = Duration(time.Since(e.started))
	e.res.Tuples = e.res.Tuples[:0]
	for t, n := range e.seen {
		e.res.Tuples = append(e.res.Tuples, Tuple{Tuple: t, Run: n})
	}
	slices.SortFunc(e.res.Tuples, func(a, b Tuple) int { return strings.Compare(a.Tuple, b.Tuple) })
	if err := os.MkdirAll(e.opts.Out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(e.res, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(e.opts.Out, resultFile), append(b, '\n')); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(e.opts.Out, summaryFile), []byte(e.res.Markdown()))
}

// categories counts the tuples per category (their first word).
func (r *Result) categories() (names []string, counts map[string]int) {
	counts = map[string]int{}
	for _, t := range r.Tuples {
		c, _, _ := strings.Cut(t.Tuple, " ")
		if counts[c] == 0 {
			names = append(names, c)
		}
		counts[c]++
	}
	slices.Sort(names)
	return names, counts
}

// Kept returns the kept runs.
func (r *Result) Kept() []RunRecord {
	var out []RunRecord
	for _, run := range r.Runs {
		if run.Kept {
			out = append(out, run)
		}
	}
	return out
}

// Markdown is summary.md: what the search covered and kept, and the invalid run.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# fencecheck explore %s\n\n", r.Scenario)
	fmt.Fprintf(&b, "Search seed %d, %s cluster, transport %s. %d runs in %v; stopped: %s.\n\n",
		r.Seed, r.Cluster, r.Transport, len(r.Runs), time.Duration(r.Took).Round(time.Second), r.Stopped)
	if r.Error != "" {
		fmt.Fprintf(&b, "Error: %s\n\n", r.Error)
	}
	if inv := r.Invalid; inv != nil {
		fmt.Fprintf(&b, "## Invalid run\n\nRun %d broke %s: `%s` (report: %s).\n\n", inv.Run, strings.Join(inv.Broken, ", "),
			inv.Command, filepath.Join(inv.Dir, "report.html"))
		for _, line := range inv.Schedule {
			fmt.Fprintf(&b, "    %s\n", line)
		}
		b.WriteString("\n")
		switch {
		case inv.ShrinkError != "":
			fmt.Fprintf(&b, "The shrink failed: %s\n\n", inv.ShrinkError)
		case inv.Shrink != "":
			fmt.Fprintf(&b, "Shrunk into %s (its scenario.yaml and shrink.json).\n\n", inv.Shrink)
		default:
			fmt.Fprintf(&b, "Not shrunk: `fencecheck shrink %s`.\n\n", scenarios.ShellQuote(inv.Dir))
		}
	}
	names, counts := r.categories()
	fmt.Fprintf(&b, "## Covered\n\n%d feedback tuples:", len(r.Tuples))
	for _, n := range names {
		fmt.Fprintf(&b, " %s %d,", n, counts[n])
	}
	b.WriteString(" by category (explore.json lists each with the run that reached it first).\n\n")
	kept := r.Kept()
	fmt.Fprintf(&b, "## Corpus\n\n%d schedules kept, each a scenario file (`fencecheck run FILE --seed SEED`):\n\n", len(kept))
	b.WriteString("| run | file | seed | verdict | new tuples | schedule |\n|---|---|---|---|---|---|\n")
	for _, k := range kept {
		sched := strings.Join(k.Schedule, "; ")
		if sched == "" {
			sched = "no faults"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %d | %s |\n", k.N, k.File, k.Seed, k.Verdict, len(k.New), sched)
	}
	verdicts := map[string]int{}
	for _, run := range r.Runs {
		v := run.Verdict
		if run.Error != "" {
			v = "error"
		}
		verdicts[v]++
	}
	b.WriteString("\n## Verdicts\n\n")
	for _, v := range []checker.Verdict{checker.VerdictValid, checker.VerdictInconclusive, checker.VerdictUnknown, checker.VerdictError, checker.VerdictInvalid} {
		if verdicts[string(v)] > 0 {
			fmt.Fprintf(&b, "- %s: %d\n", v, verdicts[string(v)])
		}
	}
	return b.String()
}

// summarize prints the end of the search.
func (e *search) summarize() {
	r := e.res
	names, counts := r.categories()
	var cats []string
	for _, n := range names {
		cats = append(cats, fmt.Sprintf("%s %d", n, counts[n]))
	}
	e.say("explored     %d runs in %v, stopped: %s; corpus %d; tuples %d (%s)", len(r.Runs),
		time.Duration(r.Took).Round(time.Second), r.Stopped, len(r.Kept()), len(r.Tuples), strings.Join(cats, ", "))
	if inv := r.Invalid; inv != nil {
		e.say("invalid      run %d broke %s: %s", inv.Run, strings.Join(inv.Broken, ", "), inv.Command)
	}
	e.say("summary      %s", filepath.Join(e.opts.Out, summaryFile))
}
