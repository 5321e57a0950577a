package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/spf13/cobra"
)

func newCheck() *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "check DIR",
		Short: "Re-check a stored run offline and rewrite its results and report",
		Long: `check reads DIR/history.jsonl (no Kafka needed), judges it against every guarantee,
and rewrites DIR/results.json, DIR/report.html and DIR/junit.xml. DIR is a run directory,
for example runs/latest. The exit code is the run's verdict.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := reports.Dir(args[0])
			if _, err := os.Stat(dir.History()); err != nil {
				return usageErr("%s is not a run directory: %v", args[0], err)
			}
			res, err := checkDir(c.Context(), dir, checker.Options{Timeout: timeout, Logger: slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))})
			if err != nil {
				return harnessErr(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %s (exit %d)\n", dir, res.Verdict, res.ExitCode)
			printFailures(c, res)
			return verdictExit(res.Verdict)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", checker.DefaultTimeout, "bound of each role's linearizability search (a search that runs out is unknown, never valid)")
	return c
}

// checkDir checks a run directory's history and writes results.json, the porcupine
// visualizations of failing roles, report.html and junit.xml.
func checkDir(ctx context.Context, dir reports.Dir, opts checker.Options) (*checker.Results, error) {
	info, err := dir.ReadRunInfo()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	h, err := history.ReadFile(dir.History())
	if err != nil {
		return nil, err
	}
	opts.Visualize = checker.DirVisualizer(dir.Linear())
	res, err := checker.Check(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	if info != nil && info.Interrupted {
		// As the run itself judged it: a history cut short proves less than the scenario
		// promised, so re-checking it must not turn it valid.
		res.Verdict = checker.Worst(res.Verdict, checker.VerdictInconclusive)
		if res.Error == "" {
			res.Error = "interrupted before the scenario's duration"
		}
		res.ExitCode = checker.ExitCode(res.Verdict)
	}
	if err := res.WriteFile(dir.Results()); err != nil {
		return nil, err
	}
	if err := dir.Write(info, res, h, nil); err != nil {
		return res, err
	}
	return res, nil
}

func printFailures(c *cobra.Command, res *checker.Results) {
	for _, r := range append(append([]checker.Result{}, res.Checks...), res.Coverage...) {
		if r.Verdict == checker.VerdictValid {
			continue
		}
		fmt.Fprintf(c.OutOrStdout(), "  %s: %s", r.Name, r.Verdict)
		if r.Advisory {
			fmt.Fprint(c.OutOrStdout(), " (advisory)")
		}
		fmt.Fprintln(c.OutOrStdout())
		for i, a := range r.Anomalies {
			if i == 3 {
				fmt.Fprintf(c.OutOrStdout(), "    ... %d more in results.json\n", len(r.Anomalies)-3)
				break
			}
			fmt.Fprintf(c.OutOrStdout(), "    - %s\n", a.Explanation)
		}
		// A coverage requirement names what it missed (fault-took-hold: the steps).
		if missed, ok := r.Details["missed"].([]string); ok {
			for _, m := range missed {
				fmt.Fprintf(c.OutOrStdout(), "    - missed %s\n", m)
			}
		}
	}
}

func newReport() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a stored run's report.html and junit.xml from its results",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := reports.Dir(args[0])
			if _, err := os.Stat(dir.Results()); err != nil {
				return usageErr("%s has no results.json (run `fencecheck check %s` first): %v", args[0], args[0], err)
			}
			if err := dir.Render(); err != nil {
				return harnessErr(err)
			}
			fmt.Fprintln(c.OutOrStdout(), dir.Report())
			return nil
		},
	}
}
