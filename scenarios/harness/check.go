package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/reports"
)

// CheckOptions configure Check.
type CheckOptions struct {
	// Timeout bounds each role's porcupine search. Default checker.DefaultTimeout.
	Timeout time.Duration
	// Logger receives the checker's progress. Nil discards.
	Logger *slog.Logger
	// Harness are failures of the harness during the run (the cluster never came up, a heal
	// failed, the run panicked): the verdict becomes error unless the history shows a
	// violation.
	Harness []error
	// NoHistory says the run failed before it opened its history, so a missing or unreadable
	// one is that failure's consequence (already in Harness), not another one.
	NoHistory bool
	// Unreadable makes a history that cannot be read an error of Check (wrapping
	// ErrUnreadableHistory), with nothing written: `fencecheck check` on a directory that is
	// not a run's. A run's own check leaves it unset and records the error verdict.
	Unreadable bool
}

// ErrUnreadableHistory is Check's error, with CheckOptions.Unreadable, for a history it cannot
// read.
var ErrUnreadableHistory = errors.New("the history cannot be read")

// Check is the one check pipeline, used by a run when it ends and by `fencecheck check` on a
// stored run: it reads dir's history, judges it (checker.Check), folds in opts' harness
// failures and, when run.json says so, the interruption, and writes results.json, the
// porcupine visualizations of failing roles, report.html and junit.xml. So a stored run
// re-checked comes out as the run did. A history that cannot be read, or a checker that
// refuses it, or a run.json that cannot be read (a missing one is tolerated), gives results
// with the error verdict, written like any other (unless opts.Unreadable). The error is
// non-nil only when something cannot be written, or for opts.Unreadable; the results are
// returned unless the history was refused.
func Check(ctx context.Context, dir reports.Dir, opts CheckOptions) (*checker.Results, error) {
	harness := slices.Clone(opts.Harness)
	info, err := dir.ReadRunInfo()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		harness = append(harness, err) // judged all the same, without what run.json says
	}
	var res *checker.Results
	h, histErr := history.ReadFile(dir.History())
	if histErr != nil && opts.Unreadable {
		return nil, fmt.Errorf("%w: %w", ErrUnreadableHistory, histErr)
	}
	if histErr != nil {
		if !opts.NoHistory {
			harness = append(harness, histErr)
		}
		res = &checker.Results{Format: checker.ResultsFormat, Verdict: checker.VerdictError}
	} else {
		res, err = checker.Check(ctx, h, checker.Options{Timeout: opts.Timeout, Logger: opts.Logger,
			Visualize: dir.Visualize})
		if err != nil {
			harness = append(harness, fmt.Errorf("check: %w", err))
			res = &checker.Results{Format: checker.ResultsFormat, Verdict: checker.VerdictError, Run: h.Meta}
		}
	}
	res.SetHarnessError(errors.Join(harness...))
	if info != nil && info.Interrupted {
		res.Verdict = checker.Worst(res.Verdict, checker.VerdictInconclusive)
		if res.Error == "" {
			res.Error = "interrupted before the scenario's duration"
		}
	}
	res.ExitCode = checker.ExitCode(res.Verdict)
	if err := res.WriteFile(dir.Results()); err != nil {
		return res, err
	}
	return res, dir.Write(info, res, h, histErr)
}
