package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios/campaign"
	"github.com/fencecheck/fencecheck/scenarios/suite"
	"github.com/spf13/cobra"
)

type suiteFlags struct {
	out, baseline, lock string
	runner              string // K/N: run only runner K's shares of the N-runner plan
	groups, systems     []string
	budget, duration    time.Duration
	repeats             int
	noReuse             bool
	checkTimeout        time.Duration
}

func newSuite() *cobra.Command {
	var f suiteFlags
	c := &cobra.Command{
		Use:   "suite NAME|FILE",
		Short: "Run a suite: scenarios × systems, one index.html, junit.xml and suite.json (built-in: " + strings.Join(suite.Names(), ", ") + ")",
		Long: `suite runs a suite file (or a built-in suite: ` + strings.Join(suite.Names(), ", ") + `): every scenario of its groups on
every one of its systems (cluster kind, Kafka version, transaction version), each cell repeated
as the file says, with per-cell exceptions, within the file's time budget. It writes one suite
directory (--out, default suites/<name>/<UTC time>): index.html (the grid of scenario × system,
failures first, a report link per run and the command that repeats each cell), junit.xml (one
testsuite per cell), suite.json, summary.md, and the run directories under runs/.

Runs on one system share one cluster, unless their scenario kills, pauses, restarts or
isolates brokers; those start their own (--no-reuse: every run starts its own). --group and
--system run a share of the suite (a CI matrix job); --runner K/N runs the shares that
"fencecheck suite plan --runners N" gives runner K (a CI matrix of N jobs, each a runner,
given the same suite and flags, runs every share once). "fencecheck suite merge" joins the
suite directories.
--baseline DIR marks each cell against a previous suite directory: new failure, fixed, still
failing; a cell whose repeats disagree is marked flaky.

Progress goes to stderr. Ctrl-C stops the run in progress (healed and checked as usual) and
writes the suite directory with what finished; the cells left are "not run".
Exit code: the worst verdict, as for run (0 valid, 1 invalid, 2 unknown or inconclusive, also
when a cell was not run, 255 harness error, 254 a bad suite file or flag).`,
		Example: `  fencecheck suite nightly
  fencecheck suite nightly --group links --system kfake-tv2 --out parts/links-kfake-tv2
  fencecheck suite matrix --runner 3/8 --out parts/runner-3
  fencecheck suite my-suite.yaml --duration 10s --baseline suites/nightly/last
  fencecheck suite merge parts/* --out nightly --summary "$GITHUB_STEP_SUMMARY"`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return runSuite(c, args[0], f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.out, "out", "", "suite directory (default suites/<name>/<UTC time>)")
	f.shapeFlags(c, "run")
	fl.StringVar(&f.baseline, "baseline", "", "previous suite directory: mark new failures, fixed and still failing cells")
	fl.StringVar(&f.lock, "lock", "", "hold an exclusive flock on this file during each run")
	fl.StringVar(&f.runner, "runner", "", "K/N: run only the shares suite plan --runners N gives runner K (one job of an N-job CI matrix)")
	fl.DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
	c.AddCommand(newSuiteMerge(), newSuiteShow(), newSuitePlan())
	return c
}

func newSuitePlan() *cobra.Command {
	var f suiteFlags
	var runners int
	c := &cobra.Command{
		Use:   "plan NAME|FILE",
		Short: "Estimate a suite's time before running it: per share, on one machine against the budget, and on N runners",
		Long: `plan prints what suite would run and how long it should take, without running anything:
a line per share (a group on a system, what one CI matrix job runs with --group and
--system), the whole suite on one machine against its budget (and the cells that would start
after it), and the wall time on --runners machines running one share each at a time, longest
first, with each runner's shares.

A cell's estimate is the mean time of its runs in --baseline (a previous suite directory, or a
merged one) times its repeats; a cell that did not run there is the model's: the workload's
duration plus what the cluster kind costs around it (the start of a cluster of its own, the
heal and final reads, longer after broker faults), measured on a 2-core machine.`,
		Example: `  fencecheck suite plan matrix --runners 8
  fencecheck suite plan nightly --baseline nightly-last --runners 4
  fencecheck suite plan my-suite.yaml --group links --duration 10s`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if runners < 0 {
				return usageErr("--runners %d: want 0 (one machine only) or more", runners)
			}
			file, err := loadSuite(c, args[0], f)
			if err != nil {
				return err
			}
			cells, err := file.Plan(f.noReuse)
			if err != nil {
				return usageErr("%v", err)
			}
			var past *suite.Report
			if f.baseline != "" {
				if past, err = suite.Load(f.baseline); err != nil {
					return usageErr("--baseline: %v", err)
				}
			}
			return suite.PrintPlan(c.OutOrStdout(), file, file.Estimate(cells, past), runners)
		},
	}
	f.shapeFlags(c, "plan")
	fl := c.Flags()
	fl.StringVar(&f.baseline, "baseline", "", "a previous suite directory whose run times estimate the cells it ran")
	fl.IntVar(&runners, "runners", 8, "also plan the shares on this many runners (0: one machine only)")
	return c
}

// shapeFlags defines the flags that change what a suite runs, which loadSuite applies, for
// suite and suite plan (verb: "run" or "plan").
func (f *suiteFlags) shapeFlags(c *cobra.Command, verb string) {
	fl := c.Flags()
	fl.StringSliceVar(&f.groups, "group", nil, verb+" only these groups of the suite (repeatable; default all)")
	fl.StringSliceVar(&f.systems, "system", nil, verb+" only on these systems of the suite (repeatable; default all)")
	fl.DurationVar(&f.budget, "budget", 0, "total time budget: no run starts after it (default: the suite's)")
	fl.DurationVar(&f.duration, "duration", 0, "how long each run's workload runs (default: the suite's, else each scenario's)")
	fl.IntVar(&f.repeats, "repeats", 0, "runs per cell (default: the suite's; cell exceptions still win)")
	fl.BoolVar(&f.noReuse, "no-reuse", false, "start a cluster for every run instead of sharing one per system")
}

// loadSuite finds the suite arg names and applies the flags that change it: the share
// (--group, --system), --budget, --duration and --repeats.
func loadSuite(c *cobra.Command, arg string, f suiteFlags) (*suite.File, error) {
	file, err := suite.Find(arg)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if err := file.Select(f.groups, f.systems); err != nil {
		return nil, usageErr("%v", err)
	}
	set := c.Flags().Changed
	if set("budget") {
		if f.budget <= 0 {
			return nil, usageErr("--budget %v: want a positive duration", f.budget)
		}
		file.Budget = suite.Duration(f.budget)
	}
	if set("duration") {
		if f.duration <= 0 {
			return nil, usageErr("--duration %v: want a positive duration", f.duration)
		}
		file.Duration = suite.Duration(f.duration)
	}
	if set("repeats") {
		if f.repeats < 1 {
			return nil, usageErr("--repeats %d: want 1 or more", f.repeats)
		}
		file.Repeats = f.repeats
	}
	return file, nil
}

func runSuite(c *cobra.Command, arg string, f suiteFlags) error {
	file, err := loadSuite(c, arg, f)
	if err != nil {
		return err
	}
	if f.runner != "" {
		k, n, shares, err := selectRunner(file, f)
		if err != nil {
			return err
		}
		if len(file.SystemNames()) == 0 {
			fmt.Fprintf(c.ErrOrStderr(), "runner %d of %d: the plan gives this runner nothing to run (suite %s has fewer shares than runners); no suite directory written\n", k, n, file.Name)
			return nil
		}
		var names []string
		for _, s := range shares {
			names = append(names, s.Group+"/"+s.System)
		}
		what := strings.Join(names, ", ")
		if what == "" {
			what = "no share, only the cells that are skipped everywhere" // runner 1 keeps those
		}
		fmt.Fprintf(c.ErrOrStderr(), "runner %d of %d: %s\n", k, n, what)
	}
	if f.out == "" {
		f.out = filepath.Join("suites", file.Name, time.Now().UTC().Format("20060102T150405Z"))
	}
	opts := suite.Options{Out: f.out, Console: c.ErrOrStderr(), NoReuse: f.noReuse, Baseline: f.baseline,
		CheckTimeout: f.checkTimeout, Command: "fencecheck " + strings.Join(os.Args[1:], " ")}
	if f.lock != "" {
		opts.Lock = func(ctx context.Context) (func(), error) {
			return campaign.Lock(ctx, f.lock, func() { fmt.Fprintf(c.ErrOrStderr(), "        waiting for the lock %s\n", f.lock) })
		}
	}
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := suite.Run(ctx, file, opts)
	if err != nil {
		if errors.Is(err, suite.ErrSuite) {
			return usageErr("%v", err)
		}
		return harnessErr(err)
	}
	return suiteExit(c, rep, f.out)
}

// selectRunner keeps of file the shares --runner K/N gives runner K, scheduled as suite plan
// does: with the same flags, and timed from --baseline when given. SelectRunner checks the
// range of K and N; this only reads them.
func selectRunner(file *suite.File, f suiteFlags) (k, n int, shares []suite.Share, err error) {
	ks, ns, ok := strings.Cut(f.runner, "/")
	k, kerr := strconv.Atoi(ks)
	n, nerr := strconv.Atoi(ns)
	if !ok || kerr != nil || nerr != nil {
		return 0, 0, nil, usageErr("--runner %s: want K/N, runner K of N (for example 3/8)", f.runner)
	}
	var past *suite.Report
	if f.baseline != "" {
		if past, err = suite.Load(f.baseline); err != nil {
			return 0, 0, nil, usageErr("--baseline: %v", err)
		}
	}
	if shares, err = file.SelectRunner(k, n, f.noReuse, past); err != nil {
		return 0, 0, nil, usageErr("--runner %s: %v", f.runner, err)
	}
	return k, n, shares, nil
}

// suiteExit prints where the index is and exits with the suite's worst verdict.
func suiteExit(c *cobra.Command, rep *suite.Report, dir string) error {
	fmt.Fprintf(c.OutOrStdout(), "suite %s: %s (exit %d); index: %s\n", rep.Suite, rep.Verdict, rep.ExitCode,
		filepath.Join(dir, suite.IndexFile))
	for _, cell := range rep.Cells {
		if cell.Status == suite.StatusRan && cell.Verdict != checker.VerdictValid {
			fmt.Fprintf(c.OutOrStdout(), "  %s on %s: %s; repeat: %s\n", cell.Scenario, cell.System, cell.Verdict, cell.Repeat)
		}
	}
	if rep.ExitCode != 0 {
		return &exitError{code: rep.ExitCode}
	}
	return nil
}

func newSuiteMerge() *cobra.Command {
	var out, baseline, summary, linkBase string
	c := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Merge suite directories (the shares of a CI matrix) into one index, one JUnit file and a Markdown summary",
		Long: `merge reads the suite directories DIR... (each written by fencecheck suite, e.g. one per CI
job) and writes --out: one index.html, one junit.xml (one testsuite per cell), suite.json and
summary.md (the grid, and for each failure a link to its report and the repeat command). Run
directories stay where they are; the merged files link to them, so put --out beside the
directories (CI: download every job's artifact into one folder). --summary FILE appends the
Markdown to FILE as well (GitHub Actions: $GITHUB_STEP_SUMMARY), with links prefixed by
--link-base. Exit code: the merged suite's worst verdict.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("%s needs at least one suite directory (see %s --help)", c.CommandPath(), c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return usageErr("%s: --out is required", c.CommandPath())
			}
			rep, err := suite.Merge(args, suite.MergeOptions{Out: out, Baseline: baseline,
				Command: "fencecheck " + strings.Join(os.Args[1:], " ")})
			if err != nil {
				return usageErr("%v", err)
			}
			if summary != "" {
				fh, err := os.OpenFile(summary, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err != nil {
					return harnessErr(fmt.Errorf("--summary: %w", err))
				}
				_, err = fh.Write(suite.Summary(rep, linkBase))
				if cerr := fh.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return harnessErr(fmt.Errorf("--summary: %w", err))
				}
			}
			return suiteExit(c, rep, out)
		},
	}
	c.Flags().StringVar(&out, "out", "", "the merged suite directory (required)")
	c.Flags().StringVar(&baseline, "baseline", "", "previous suite directory: mark new failures, fixed and still failing cells")
	c.Flags().StringVar(&summary, "summary", "", "also append the Markdown summary to this file (e.g. $GITHUB_STEP_SUMMARY)")
	c.Flags().StringVar(&linkBase, "link-base", "", "prefix of the report links in --summary (default: relative to --out)")
	return c
}

func newSuiteShow() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a suite file (a built-in one by name) with its defaults filled in, as YAML",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f, err := suite.Find(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			b, err := f.Marshal()
			if err != nil {
				return harnessErr(err)
			}
			_, err = c.OutOrStdout().Write(b)
			return err
		},
	}
}
