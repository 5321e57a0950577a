package main

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/explore"
	"github.com/spf13/cobra"
)

// DefaultExploreRoot is where explore's output folders go unless --out names one.
const DefaultExploreRoot = "explore"

func newExplore() *cobra.Command {
	var f runFlags
	var opts explore.Options
	c := &cobra.Command{
		Use:   "explore SCENARIO|FILE --budget D",
		Short: "Search fault schedules for a failing run, guided by what the runs observed",
		Long: `explore searches for a fault schedule that breaks a guarantee. It runs the scenario (a
built-in name or a file; its own faults are dropped, so start from one without, such as
steady or pipeline-steady) once as it is, for a short while (--probe), then one scripted
schedule after another for the scenario's whole duration: each either drawn fresh (one to --max-faults faults of the nemesis's kinds, the Kafka-aware ones
included, with targets, times, durations and parameters) or a mutation of a schedule it kept
(another target, time, duration, fault kind or request type; a fault added, removed or taken
from another kept schedule).

Each run's feedback is a set of tuples: the (request type, error code) answers the links
saw, each operation kind and outcome (also while each kind of fault was open), the
transaction and group state changes the history shows, which faults took hold, every
coverage promise and every guarantee's verdict. A schedule whose run reached a tuple no
earlier run reached is kept in the corpus and mutated later.

The search stops at the first invalid run and shrinks it with fencecheck shrink
(--shrink-budget; 0 leaves it to you), or when --budget or --runs is spent, or on Ctrl-C (the
run in progress heals, reads and checks; what was found is kept). It writes to --out
(default explore/<scenario>/<time>): runs/ (every run's directory), corpus/ (each kept
schedule as a scenario file: fencecheck run FILE --seed SEED repeats it), explore.json
(every run, every tuple and the run that reached it first), summary.md, and shrink/.

--seed makes the search repeatable: run n runs with seed S+n, and the choices are the
seed's; which schedules are kept depends on the runs' feedback, which a real cluster's
timing moves, so a search repeats exactly only while its runs answer the same way.
The cluster, shape and transport flags are run's.

Exit codes: 0 the search ended without an invalid run, 1 a run was invalid, 2 interrupted,
254 usage, 255 harness error.`,
		Example: `  fencecheck explore steady --budget 10m
  fencecheck explore steady --budget 10m --transport mutant:unknown-commit-fails --seed 7
  fencecheck explore pipeline-steady --runs 40 --faults drop-response,delay,hold,partition
  fencecheck explore steady --budget 1h --cluster local --shrink-budget 20m`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := scenarios.Find(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			f.count, f.repeat = 1, 1
			if err := f.apply(c, s); err != nil {
				return usageErr("%s: %v", s.Name, err)
			}
			if opts.Budget < 0 {
				return usageErr("--budget %v: want a positive duration such as 10m", opts.Budget)
			}
			if c.Flags().Changed("max-faults") && opts.MaxFaults < 1 {
				return usageErr("--max-faults %d: want 1 or more", opts.MaxFaults)
			}
			if opts.Probe < 0 {
				return usageErr("--probe %v: want a duration such as 10s, or 0 for the default", opts.Probe)
			}
			if opts.ShrinkBudget < 0 {
				return usageErr("--shrink-budget %v: want a duration such as 10m, or 0 for no shrink", opts.ShrinkBudget)
			}
			if !c.Flags().Changed("budget") && opts.Runs == 0 {
				return usageErr("explore needs a bound: --budget D (such as 10m) or --runs N")
			}
			if opts.Out == "" {
				opts.Out = filepath.Join(DefaultExploreRoot, s.Name, time.Now().UTC().Format("20060102T150405Z"))
			}
			opts.Seed, opts.Transport, opts.CheckTimeout = f.seed, f.transport, f.checkTimeout
			opts.Progress = c.OutOrStdout()
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := explore.Run(ctx, s, opts)
			switch {
			case errors.Is(err, explore.ErrOptions), errors.Is(err, scenarios.ErrScenario):
				return usageErr("%v", err)
			case err != nil:
				return harnessErr(err)
			case res.Stopped == explore.StoppedError:
				if strings.Contains(res.Error, scenarios.ErrScenario.Error()) {
					return usageErr("%s", res.Error)
				}
				return harnessErr(errors.New(res.Error))
			case res.Invalid != nil:
				return verdictExit(checker.VerdictInvalid)
			case res.Stopped == explore.StoppedInterrupted:
				return verdictExit(checker.VerdictInconclusive)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.DurationVar(&opts.Budget, "budget", 0, "time for the search: no run starts after it (the shrink has its own, --shrink-budget)")
	fl.IntVar(&opts.Runs, "runs", 0, "at most N runs, the first without faults included (0: no bound but --budget); bounds the search by work, so it goes as far on a loaded machine")
	fl.Uint64Var(&f.seed, "seed", 0, "the search's seed: run n runs with seed S+n; 0 picks one (printed and in explore.json)")
	fl.StringVar(&opts.Out, "out", "", "output folder (default explore/<scenario>/<UTC time>)")
	fl.StringSliceVar(&opts.Faults, "faults", nil, "fault kinds to draw, comma-separated (default: every one the cluster can do: "+strings.Join(explore.FaultNames(), ", ")+")")
	fl.IntVar(&opts.MaxFaults, "max-faults", 0, "most faults in one schedule (default: one per 5 s of the scenario's duration, at least 3)")
	fl.DurationVar(&opts.Probe, "probe", 0, "how long run 0, the scenario without faults, runs (default: a quarter of the scenario's duration, at least three of its workload's handoff periods and 8s; the scenario's duration runs all of it)")
	fl.DurationVar(&opts.ShrinkBudget, "shrink-budget", 10*time.Minute, "budget of fencecheck shrink on the first invalid run; 0: no shrink")
	f.addScenarioFlags(fl)
	return c
}
