package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios/harness"
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
			res, err := harness.Check(c.Context(), dir, harness.CheckOptions{Timeout: timeout, Unreadable: true,
				Logger: slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))})
			switch {
			case errors.Is(err, harness.ErrUnreadableHistory):
				return usageErr("%s is not a run directory fencecheck can check (nothing was written): %v", args[0], err)
			case err != nil:
				return harnessErr(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %s (exit %d)\n", dir, res.Verdict, res.ExitCode)
			printFailures(c, res)
			if res.Verdict == checker.VerdictError && res.Error != "" {
				return harnessErr(errors.New(res.Error)) // say why, not only the exit code
			}
			return verdictExit(res.Verdict)
		},
	}
	c.Flags().DurationVar(&timeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search (a search that runs out is unknown, never valid)")
	// The name every other command uses; --timeout was check's own until it joined them.
	c.Flags().DurationVar(&timeout, "timeout", checker.DefaultTimeout, "the same as --check-timeout")
	_ = c.Flags().MarkDeprecated("timeout", "use --check-timeout, as run, suite and soak do")
	return c
}

// printFailures prints what is wrong with a checked run: a history whose last line was cut
// short, and every check and coverage requirement that is not valid with its first
// anomalies.
func printFailures(c *cobra.Command, res *checker.Results) {
	if res.History.Truncated {
		fmt.Fprintf(c.OutOrStdout(), "  history: line %d, the last, was cut short (the run was killed while writing it) and was skipped\n",
			res.History.TruncatedLine)
	}
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
			if _, err := os.Stat(dir.History()); err != nil {
				return usageErr("%s is not a run directory: %v", args[0], err)
			}
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
