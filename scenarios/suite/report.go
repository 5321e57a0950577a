package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fencecheck/fencecheck/checker"
)

// File names of a suite directory.
const (
	IndexFile   = "index.html"
	JUnitFile   = "junit.xml"
	JSONFile    = "suite.json"
	SummaryFile = "summary.md"
	RunsDir     = "runs"
	ClustersDir = "clusters"
)

// Cell statuses.
const (
	StatusRan     = "ran"     // at least one run finished (see Runs)
	StatusSkipped = "skipped" // an exception, or the system cannot run the scenario (Note says why)
	StatusNotRun  = "not run" // the budget ran out or the suite was interrupted first
)

// Baseline marks (Cell.Mark).
const (
	MarkNewFailure   = "new failure"
	MarkFixed        = "fixed"
	MarkStillFailing = "still failing"
)

// Report is suite.json: what a suite (or a merge of suites) ran and found.
type Report struct {
	Suite       string    `json:"suite"`
	Description string    `json:"description,omitempty"`
	Commands    []string  `json:"commands,omitempty"`
	Started     time.Time `json:"started"`
	Seconds     float64   `json:"seconds"`
	Budget      string    `json:"budget,omitempty"`
	// Stopped says why cells were left unrun: the budget, or an interruption.
	Stopped string `json:"stopped,omitempty"`
	// Verdict is the worst of every cell that ran; cells not run count as inconclusive (the
	// suite did not show what it set out to). ExitCode is its exit code.
	Verdict  checker.Verdict `json:"verdict"`
	ExitCode int             `json:"exit_code"`
	Systems  []System        `json:"systems"`
	Cells    []Cell          `json:"cells"`
	// Baseline is the suite directory the marks compare against, if any.
	Baseline string `json:"baseline,omitempty"`
	// Merged lists the suite directories a merge read, relative to this one.
	Merged []string `json:"merged,omitempty"`
}

// Cell is one scenario on one system.
type Cell struct {
	Group    string          `json:"group"`
	Scenario string          `json:"scenario"`
	System   string          `json:"system"`
	Status   string          `json:"status"`
	Verdict  checker.Verdict `json:"verdict,omitempty"` // worst over Runs; "" unless Status is ran
	Note     string          `json:"note,omitempty"`    // why skipped or not run
	Seconds  float64         `json:"seconds"`
	// Cluster says where the cell ran: "shared kfake-tv2#1" (a cluster shared with the other
	// cells that name it) or "own" (each run started its own, for broker faults).
	Cluster string `json:"cluster,omitempty"`
	// Repeat is the command that repeats the cell's first failing run (else its first run)
	// with its seed.
	Repeat string `json:"repeat,omitempty"`
	// Expect is the verdict the cell's runs must give, when not valid (a regression's); the
	// cell's Verdict is then valid when every run gave it (see CellRun.judged).
	Expect checker.Verdict `json:"expect,omitempty"`
	// Flaky: the verdict differs across the repeats of this cell.
	Flaky bool `json:"flaky,omitempty"`
	// Mark compares the cell with the baseline: new failure, fixed, still failing (or none).
	Mark string    `json:"mark,omitempty"`
	Runs []CellRun `json:"runs,omitempty"`
}

// CellRun is one run of a cell.
type CellRun struct {
	// Dir is the run directory, relative to the suite directory.
	Dir     string          `json:"dir"`
	Seed    uint64          `json:"seed"`
	Verdict checker.Verdict `json:"verdict"`
	Seconds float64         `json:"seconds"`
	Command string          `json:"command"`
	Why     []string        `json:"why,omitempty"` // the failing checks of a run that is not valid
	// Expected is the verdict the run had to give, when not valid (Cell.Expect).
	Expected    checker.Verdict `json:"expected,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

// judged is what the run counts as in its cell: its verdict, or, for a run that had to give
// Expected, valid when it did, inconclusive when an expected violation did not show (the
// regression proved nothing), and its own verdict otherwise (an error stays an error; an
// unexpected violation stays invalid).
func (r CellRun) judged() checker.Verdict {
	switch {
	case r.Expected == "":
		return r.Verdict
	case r.Verdict == r.Expected:
		return checker.VerdictValid
	case r.Expected == checker.VerdictInvalid && r.Verdict == checker.VerdictValid:
		return checker.VerdictInconclusive
	}
	return r.Verdict
}

// label is the run's verdict, with what it had to give when that was not valid: "invalid, as
// expected", "valid, expected invalid".
func (r CellRun) label() string {
	switch {
	case r.Expected == "":
		return string(r.Verdict)
	case r.Verdict == r.Expected:
		return string(r.Verdict) + ", as expected"
	}
	return fmt.Sprintf("%s, expected %s", r.Verdict, r.Expected)
}

// failing reports whether a cell that ran is not valid.
func (c *Cell) failing() bool { return c.Status == StatusRan && c.Verdict != checker.VerdictValid }

// finish computes the cell's verdict, flakiness and repeat command from its runs.
func (c *Cell) finish() {
	if len(c.Runs) == 0 {
		return
	}
	c.Status = StatusRan
	var vs []checker.Verdict
	c.Seconds = 0
	c.Repeat = c.Runs[0].Command
	repeatSet := false
	for _, r := range c.Runs {
		vs = append(vs, r.judged())
		c.Seconds += r.Seconds
		if r.judged() != checker.VerdictValid && !repeatSet {
			c.Repeat, repeatSet = r.Command, true
		}
	}
	c.Verdict = checker.Worst(vs...)
	slices.Sort(vs)
	c.Flaky = len(slices.Compact(vs)) > 1
}

// summarize sets the report's verdict and exit code from its cells.
func (r *Report) summarize() {
	worst := checker.VerdictValid
	for _, c := range r.Cells {
		switch c.Status {
		case StatusRan:
			worst = checker.Worst(worst, c.Verdict)
		case StatusNotRun:
			worst = checker.Worst(worst, checker.VerdictInconclusive)
		}
	}
	r.Verdict, r.ExitCode = worst, checker.ExitCode(worst)
}

// severity orders cells for the grid and the lists: failures first (invalid, error, unknown,
// inconclusive), then not run, valid and skipped.
func (c *Cell) severity() int {
	switch c.Status {
	case StatusSkipped:
		return 0
	case StatusNotRun:
		return 2
	}
	switch c.Verdict {
	case checker.VerdictValid:
		return 1
	case checker.VerdictInconclusive:
		return 3
	case checker.VerdictUnknown:
		return 4
	case checker.VerdictError:
		return 5
	}
	return 6
}

// Load reads a suite directory's suite.json.
func Load(dir string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a suite directory: %w", dir, err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, JSONFile), err)
	}
	return &r, nil
}
