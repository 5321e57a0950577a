package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios/shrink"
	"github.com/spf13/cobra"
)

func newShrink() *cobra.Command {
	var opts shrink.Options
	c := &cobra.Command{
		Use:   "shrink DIR",
		Short: "Shrink a failing run into the smallest scenario that still breaks the same guarantee",
		Long: `shrink starts from a failing run directory: its expanded scenario (run.json), with a random
fault schedule replaced by the explicit script of the faults the run injected. It then tries
smaller scenarios one at a time (fewer faults, a shorter run, shorter and earlier faults, fewer
processes, roles, members and readers, a lower rate; for a pipeline run fewer processes,
members and input partitions, no restarts, aborted input or state, a lower input rate) and
keeps each one that still breaks one of the guarantees the run broke. Each candidate runs --tries times on seeds S, S+1, ... (S the
run's seed), with the run's transport and cluster kind; it fails when any try fails the same
guarantee (or --min-fails tries).

The result goes to --out (default DIR/shrink): scenario.yaml (the minimal scenario, with a
comment on where it came from, its reproduction rate and the seeds that failed), shrink.json
(every candidate and its failure rate), runs/ (every try) and smallest-failing-run (a link to
the smallest failing run's directory). After the search, --confirm fresh tries measure the
result's reproduction rate. --budget bounds the whole shrink: the search stops early enough
to leave time for the fresh tries (estimated from the candidates' measured tries), and a
fresh try that would not end within the budget is not started; shrink.json says how many
ran ("7/8 within the budget, 10 asked"). --candidates bounds the search by work instead:
on a loaded machine a budget in time buys fewer candidates, so a CI job whose search must go
as far every time sets --candidates and a --budget that never binds. The best result
so far is written after every improvement; Ctrl-C stops the search and keeps it.

Exit codes: 0 a result that reproduced, 2 interrupted or not reproduced in the fresh tries
(or none of them ended within the budget),
254 usage (DIR is not a failing run), 255 harness error.`,
		Example: `  fencecheck shrink runs/latest
  fencecheck shrink runs/chaos/20261201T150038Z-1 --budget 5m --tries 2
  fencecheck shrink runs/latest --guarantee fenced-stale-write --out /tmp/bug`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o, err := shrink.Load(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Progress = c.OutOrStdout()
			res, err := shrink.Run(ctx, o, opts)
			if err != nil {
				if errors.Is(err, shrink.ErrNotShrinkable) {
					return usageErr("%v", err)
				}
				return harnessErr(err)
			}
			if res.Interrupted || res.Asked > 0 && res.Fails == 0 {
				return verdictExit(checker.VerdictInconclusive)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Out, "out", "", "output folder (default DIR/shrink)")
	fl.DurationVar(&opts.Budget, "budget", 10*time.Minute, "time for the whole shrink: the search and the fresh tries")
	fl.IntVar(&opts.Tries, "tries", 0, "tries per candidate (default 3 on the embedded cluster, 1 on the others)")
	fl.IntVar(&opts.Confirm, "confirm", 0, "fresh tries that measure the result's reproduction rate (default 10 on the embedded cluster, 3 on the others; -1: none)")
	fl.IntVar(&opts.Candidates, "candidates", 0, "at most this many candidates (0: no bound but --budget); with a --budget that never binds, the search goes as far on a loaded machine as on an idle one")
	fl.IntVar(&opts.Parallel, "parallel", 0, "tries run at once (default 4 on the embedded cluster, whose runs mostly wait on lease timers; 1 on the others)")
	fl.IntVar(&opts.MinFails, "min-fails", 1, "failing tries a candidate needs to be kept")
	fl.StringSliceVar(&opts.Guarantees, "guarantee", nil, "the guarantee a try must break (repeatable; default: every guarantee the run broke, any one counts)")
	fl.DurationVar(&opts.CheckTimeout, "check-timeout", 0, "bound of each role's porcupine search per try (default: the checker's)")
	return c
}
