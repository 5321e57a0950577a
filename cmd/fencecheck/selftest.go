package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/fencecheck/fencecheck/scenarios/selftest"
	"github.com/spf13/cobra"
)

func newSelftest() *cobra.Command {
	var (
		list      bool
		seeds     int
		tries     int
		parallel  int
		noMutants bool
		f         runFlags
	)
	c := &cobra.Command{
		Use:   "selftest",
		Short: "Prove the checker has teeth: broken transports must come out invalid, the real one valid",
		Long: `selftest runs each deliberately broken transport ("mutants", see --list) in its scenario
(steady, or one made to provoke its bug), and the real transport in each of those scenarios,
once per seed. It passes
(exit 0) only if every mutant's run is judged invalid on every seed, naming a guarantee it
breaks, and every run of the real transport is valid. A checker that passes a broken
transport proves nothing.

At the end it prints one row per mutant: the guarantees the checker found violated, the
scenario, the seeds tried and caught, and the median time to detect: from the run's start to
the completion of the first operation that shows a violation.

On a loaded machine a run can miss for want of time: a fence that did not happen before the
run ended, a mutant's race not run into. --tries N makes such a run again on a fresh seed, up
to N runs per seed asked for: a mutant passes once caught, the transport under test once
valid; an invalid run of the transport under test fails at once. The table counts every run.

--transport runs another transport where the real one runs, e.g. an implementation of your
own behind the exec protocol (docs/exec-protocol.md): --transport exec:'CMD ARGS'. With
--no-mutants only that transport's runs are made.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			out := c.OutOrStdout()
			if list {
				for _, m := range scenarios.Mutants() {
					fmt.Fprintf(out, "%-20s %s\n%-20s must break: %s (scenario %s)\n", m.Name, m.Summary, "", strings.Join(m.Guarantees, ", "), m.Scenario)
				}
				fmt.Fprintln(out, "\nmade for regressions (--transport mutant:NAME accepts them; selftest does not run them: they show a dependency's race, at the rate it allows):")
				for _, m := range scenarios.RegressionMutants() {
					fmt.Fprintf(out, "%-20s %s\n%-20s can break: %s (scenario %s)\n", m.Name, m.Summary, "", strings.Join(m.Guarantees, ", "), m.Scenario)
				}
				return nil
			}
			if parallel < 0 {
				return usageErr("--parallel %d: want 1 or more (0: the default)", parallel)
			}
			if strings.HasPrefix(f.transport, "mutant:") {
				return usageErr("--transport %s: selftest runs the mutants itself; want real or exec:COMMAND", f.transport)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			started := time.Now()
			res, err := selftest.Run(ctx, selftest.Options{
				Transport: f.transport, NoMutants: noMutants, Seed: f.seed, Seeds: seeds, Tries: tries, Parallel: parallel,
				Duration: f.duration, Prepare: func(s *scenarios.Scenario) error { return f.apply(c, s) },
				Run: harness.Options{Root: f.out, Console: c.ErrOrStderr(), CheckTimeout: f.checkTimeout, StatusEvery: statusEvery(c)},
				Out: out, Progress: c.ErrOrStderr(),
			})
			if errors.Is(err, selftest.ErrUsage) {
				return usageErr("%v", err)
			}
			if err != nil {
				return harnessErr(err)
			}
			if ctx.Err() != nil {
				return &exitError{code: checker.ExitCode(checker.VerdictInconclusive), err: fmt.Errorf("selftest interrupted")}
			}
			if len(res.Mutants) > 0 {
				res.WriteTable(out)
			}
			fmt.Fprintf(out, "selftest took %s\n", time.Since(started).Round(time.Second))
			if !res.Passed() {
				return &exitError{code: 1, err: fmt.Errorf("selftest: %d seed(s) did not come out as expected (%d runs, %d made again)", res.Failed, res.Runs, res.Missed)}
			}
			if noMutants {
				fmt.Fprintf(out, "selftest passed: the %s transport valid in %d scenario(s) on %d seed(s) each\n", f.transport, len(res.Reals), seeds)
				return nil
			}
			fmt.Fprintf(out, "selftest passed: %d mutants caught on %d seed(s) each, the %s transport valid in %d scenario(s)\n", len(res.Mutants), seeds, f.transport, len(res.Reals))
			return nil
		},
	}
	c.Flags().BoolVar(&list, "list", false, "list the mutants and what each must break, and exit")
	c.Flags().StringVar(&f.transport, "transport", "real", "the transport that must come out valid: real, or exec:COMMAND (an adapter; see docs/exec-protocol.md)")
	c.Flags().BoolVar(&noMutants, "no-mutants", false, "run only the --transport runs, not the mutants")
	c.Flags().StringVar(&f.cluster, "cluster", "", "cluster kind (default embedded)")
	c.Flags().IntVar(&f.txnVersion, "txn-version", 0, "transaction.version of the cluster: 1 or 2 (default: 2 on kfake and Kafka 4.x, 1 on 3.x)")
	c.Flags().StringVar(&f.kafkaVersion, "kafka-version", "", "Kafka release for a local cluster (default: what make kafka fetched)")
	c.Flags().DurationVar(&f.duration, "duration", 8*time.Second, "how long each run lasts")
	c.Flags().Uint64Var(&f.seed, "seed", 1, "seed of each transport's first run; the others use the next seeds")
	c.Flags().IntVar(&seeds, "seeds", 1, "runs per transport, on seeds --seed, --seed+1, ...")
	c.Flags().IntVar(&tries, "tries", 1, "runs each seed may take: a mutant not caught, or the transport under test inconclusive, is run again on a fresh seed (--seed + i + k×--seeds)")
	c.Flags().IntVar(&parallel, "parallel", 0, fmt.Sprintf("runs at a time (default %d on the embedded cluster, whose runs mostly wait on lease timers; 1 on Kafka clusters, whose timing a second run would disturb)", selftest.EmbeddedParallel))
	c.Flags().StringVar(&f.out, "out", "runs", "folder of run directories")
	c.Flags().DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
	f.count, f.repeat = 1, 1
	return c
}
