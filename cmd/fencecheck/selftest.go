package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newSelftest) }

func newSelftest() *cobra.Command {
	var (
		list      bool
		seeds     int
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
			if seeds < 1 {
				return usageErr("--seeds %d: want 1 or more", seeds)
			}
			if parallel < 0 {
				return usageErr("--parallel %d: want 1 or more (0: the default)", parallel)
			}
			if f.transport == "" {
				f.transport = "real"
			}
			if strings.HasPrefix(f.transport, "mutant:") {
				return usageErr("--transport %s: selftest runs the mutants itself; want real or exec:COMMAND", f.transport)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			started := time.Now()
			// The real transport runs in every scenario a mutant uses: a scenario that the real
			// transport fails would prove nothing about the mutants.
			var reals, rows []*selftestRow
			for _, m := range scenarios.Mutants() {
				if !slices.ContainsFunc(reals, func(r *selftestRow) bool { return r.scenario == m.Scenario }) {
					reals = append(reals, &selftestRow{transport: f.transport, scenario: m.Scenario})
				}
				if !noMutants {
					rows = append(rows, &selftestRow{transport: "mutant:" + m.Name, scenario: m.Scenario, guarantees: m.Guarantees})
				}
			}
			// Every (transport, seed) is one job; the scenarios are built and checked first, so
			// a bad flag fails before any run starts.
			var jobs []selftestJob
			for _, row := range slices.Concat(reals, rows) {
				s, err := selftestScenario(row.scenario)
				if err != nil {
					return harnessErr(err)
				}
				if err := f.apply(c, s); err != nil {
					return usageErr("%v", err)
				}
				s.Duration = scenarios.Duration(f.duration)
				for i := range seeds {
					jobs = append(jobs, selftestJob{row: row, s: s, seed: f.seed + uint64(i)})
				}
			}
			width := parallel
			if width == 0 {
				width = 1
				if jobs[0].s.Cluster.Kind == scenarios.KindEmbedded {
					width = selftestEmbeddedParallel
				}
			}
			opts := scenarios.Options{Root: f.out, Console: c.ErrOrStderr(), CheckTimeout: f.checkTimeout, StatusEvery: statusEvery(c)}
			if width > 1 {
				// The phase and status lines of runs side by side would interleave into noise:
				// each run says only that it finished, in its PASS or FAIL line.
				opts.Console, opts.StatusEvery = nil, 0
				fmt.Fprintf(c.ErrOrStderr(), "selftest: %d runs, %d at a time\n", len(jobs), width)
			}
			failed, runs, err := runSelftestJobs(ctx, out, jobs, width, opts)
			if err != nil {
				return harnessErr(err)
			}
			if ctx.Err() != nil {
				return &exitError{code: checker.ExitCode(checker.VerdictInconclusive), err: fmt.Errorf("selftest interrupted")}
			}
			if len(rows) > 0 {
				printSelftestTable(out, rows)
			}
			fmt.Fprintf(out, "selftest took %s\n", time.Since(started).Round(time.Second))
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("selftest: %d of %d runs did not come out as expected", failed, runs)}
			}
			if noMutants {
				fmt.Fprintf(out, "selftest passed: the %s transport valid in %d scenario(s) on %d seed(s) each\n", f.transport, len(reals), seeds)
				return nil
			}
			fmt.Fprintf(out, "selftest passed: %d mutants caught on %d seed(s) each, the %s transport valid in %d scenario(s)\n", len(rows), seeds, f.transport, len(reals))
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
	c.Flags().IntVar(&parallel, "parallel", 0, fmt.Sprintf("runs at a time (default %d on the embedded cluster, whose runs mostly wait on lease timers; 1 on Kafka clusters, whose timing a second run would disturb)", selftestEmbeddedParallel))
	c.Flags().StringVar(&f.out, "out", "runs", "folder of run directories")
	c.Flags().DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
	f.count, f.repeat = 1, 1
	return c
}

// selftestEmbeddedParallel is how many embedded runs selftest makes at a time by default. An
// embedded run spends most of its time waiting on lease timers (about 5% of a core, measured
// by the soak), so four side by side still leave the machine mostly idle.
const selftestEmbeddedParallel = 4

// selftestJob is one run of selftest: a transport's scenario on one seed.
type selftestJob struct {
	row  *selftestRow
	s    *scenarios.Scenario
	seed uint64
}

// runSelftestJobs runs the jobs, width at a time, judging each into its row and printing a
// PASS or FAIL line for each as it finishes. It returns how many runs were judged and how
// many of them failed; a harness error stops the jobs not yet started, and the first one is
// returned once the started ones have ended.
func runSelftestJobs(ctx context.Context, out io.Writer, jobs []selftestJob, width int, opts scenarios.Options) (failed, runs int, err error) {
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range min(width, len(jobs)) {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == len(jobs) || err != nil || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				j := jobs[next]
				next++
				mu.Unlock()

				o := opts
				o.Seed, o.Transport = j.seed, j.row.transport
				res, runErr := scenarios.Run(ctx, j.s, o)

				mu.Lock()
				switch {
				case runErr != nil:
					if err == nil {
						err = runErr
					}
				case ctx.Err() == nil: // an interrupted run proves nothing either way
					runs++
					ok, why := j.row.add(res.Results)
					mark := "PASS"
					if !ok {
						mark = "FAIL"
						failed++
					}
					fmt.Fprintf(out, "%s  %-28s %-13s seed %-4d %-8s %s  (%s)\n", mark, j.row.transport, j.row.scenario, j.seed, res.Results.Verdict, why, res.Dir)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed, runs, err
}

// selftestScenario returns the scenario name: one made for a mutant, or a built-in one.
func selftestScenario(name string) (*scenarios.Scenario, error) {
	if b, ok := scenarios.MutantScenario(name); ok {
		return scenarios.Parse(name+".yaml", b)
	}
	s, _, err := scenarios.Builtin(name)
	return s, err
}

// selftestRow is what selftest learned of one transport over its seeds.
type selftestRow struct {
	transport, scenario string
	guarantees          []string // nil: the real transport, which must be valid
	tried, caught       int
	broke               []string        // every guarantee found violated, in the order of checker.Guarantees
	detect              []time.Duration // per caught run: run start to the first violating operation
}

// add judges one run's results and records them: a mutant's run must be invalid with at
// least one of its guarantees violated, the real transport's valid.
func (r *selftestRow) add(res *checker.Results) (bool, string) {
	r.tried++
	ok, why, broke := judgeSelftest(res, r.guarantees)
	if r.guarantees == nil || !ok {
		return ok, why
	}
	r.caught++
	first := int64(-1)
	for _, c := range res.Checks {
		if slices.Contains(broke, c.Name) {
			if !slices.Contains(r.broke, c.Name) {
				r.broke = append(r.broke, c.Name)
			}
			if c.FirstAt > 0 && (first < 0 || c.FirstAt < first) {
				first = c.FirstAt
			}
		}
	}
	if first >= 0 {
		r.detect = append(r.detect, time.Duration(first))
	}
	return ok, why
}

// median is the median time to detect, or "-" when no caught run had one.
func (r *selftestRow) median() string {
	if len(r.detect) == 0 {
		return "-"
	}
	d := slices.Clone(r.detect)
	slices.Sort(d)
	m := d[len(d)/2]
	if len(d)%2 == 0 {
		m = (d[len(d)/2-1] + m) / 2
	}
	return m.Round(10 * time.Millisecond).String()
}

func printSelftestTable(out io.Writer, rows []*selftestRow) {
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MUTANT\tCAUGHT BY\tSCENARIO\tSEEDS\tCAUGHT\tMEDIAN DETECT")
	for _, r := range rows {
		broke := strings.Join(r.broke, ", ")
		if broke == "" {
			broke = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", strings.TrimPrefix(r.transport, "mutant:"), broke, r.scenario, r.tried, r.caught, r.median())
	}
	w.Flush()
}

// judgeSelftest says whether res is what the run should give: valid for the real transport;
// invalid, with at least one of the mutant's guarantees violated, for a mutant. broke lists
// every guarantee found violated.
func judgeSelftest(res *checker.Results, guarantees []string) (ok bool, why string, broke []string) {
	for _, c := range res.Checks {
		if c.Verdict == checker.VerdictInvalid && !c.Advisory {
			broke = append(broke, c.Name)
		}
	}
	if guarantees == nil {
		return res.Verdict == checker.VerdictValid, "want valid", broke
	}
	for _, g := range guarantees {
		if slices.Contains(broke, g) {
			return true, "caught: " + strings.Join(broke, ", "), broke
		}
	}
	if len(broke) == 0 {
		return false, "want invalid (" + strings.Join(guarantees, " or ") + "): nothing was caught", broke
	}
	return false, "want " + strings.Join(guarantees, " or ") + " violated, got " + strings.Join(broke, ", "), broke
}
