package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newSelftest) }

func newSelftest() *cobra.Command {
	var list bool
	var f runFlags
	c := &cobra.Command{
		Use:   "selftest",
		Short: "Prove the checker has teeth: broken transports must come out invalid, the real one valid",
		Long: `selftest runs the steady scenario (high contention, no faults) once with the real transport
and once with each deliberately broken transport ("mutants", see --list). It passes (exit 0)
only if every mutant's run is judged invalid, naming a guarantee it breaks, and the real
transport's run is valid. A checker that passes a broken transport proves nothing.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			out := c.OutOrStdout()
			if list {
				for _, m := range scenarios.Mutants() {
					fmt.Fprintf(out, "%-20s %s\n%-20s must break: %s\n", m.Name, m.Summary, "", strings.Join(m.Guarantees, ", "))
				}
				return nil
			}
			s, _, err := scenarios.Builtin("steady")
			if err != nil {
				return harnessErr(err)
			}
			if err := f.apply(c, s); err != nil {
				return usageErr("%v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			type want struct {
				transport  string
				guarantees []string // nil: valid
			}
			runs := []want{{transport: "real"}}
			for _, m := range scenarios.Mutants() {
				runs = append(runs, want{transport: "mutant:" + m.Name, guarantees: m.Guarantees})
			}
			failed := 0
			for _, w := range runs {
				res, err := scenarios.Run(ctx, s, scenarios.Options{Root: f.out, Seed: f.seed, Transport: w.transport,
					Console: c.ErrOrStderr(), CheckTimeout: f.checkTimeout, StatusEvery: statusEvery(c),
					Command: commandLine(s.Name, s, runFlags{transport: w.transport})})
				if err != nil {
					return harnessErr(err)
				}
				if ctx.Err() != nil {
					return &exitError{code: checker.ExitCode(checker.VerdictInconclusive), err: fmt.Errorf("selftest interrupted")}
				}
				ok, why := judgeSelftest(res.Results, w.guarantees)
				mark := "PASS"
				if !ok {
					mark = "FAIL"
					failed++
				}
				fmt.Fprintf(out, "%s  %-28s %-8s %s  (%s)\n", mark, w.transport, res.Results.Verdict, why, res.Dir)
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("selftest: %d of %d runs did not come out as expected", failed, len(runs))}
			}
			fmt.Fprintf(out, "selftest passed: %d mutants caught, the real transport valid\n", len(runs)-1)
			return nil
		},
	}
	c.Flags().BoolVar(&list, "list", false, "list the mutants and what each must break, and exit")
	c.Flags().StringVar(&f.cluster, "cluster", "", "cluster kind (default embedded)")
	c.Flags().DurationVar(&f.duration, "duration", 20*time.Second, "how long each run lasts")
	c.Flags().Uint64Var(&f.seed, "seed", 1, "root seed of every run")
	c.Flags().StringVar(&f.out, "out", reports.DefaultRoot, "folder of run directories")
	c.Flags().DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
	f.count = 1
	return c
}

// judgeSelftest says whether res is what the run should give: valid for the real transport;
// invalid, with at least one of the mutant's guarantees violated, for a mutant.
func judgeSelftest(res *checker.Results, guarantees []string) (bool, string) {
	if guarantees == nil {
		return res.Verdict == checker.VerdictValid, "want valid"
	}
	var broke []string
	for _, c := range res.Checks {
		if c.Verdict == checker.VerdictInvalid && !c.Advisory {
			broke = append(broke, c.Name)
		}
	}
	for _, g := range guarantees {
		for _, b := range broke {
			if b == g {
				return true, "caught: " + strings.Join(broke, ", ")
			}
		}
	}
	if len(broke) == 0 {
		return false, "want invalid (" + strings.Join(guarantees, " or ") + "): nothing was caught"
	}
	return false, "want " + strings.Join(guarantees, " or ") + " violated, got " + strings.Join(broke, ", ")
}
