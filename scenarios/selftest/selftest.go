// Package selftest proves the checker has teeth: each deliberately broken transport (a
// mutant) runs in the scenario made to provoke its bug and must come out invalid on one of the
// guarantees it names, on every seed; the transport under test runs in each of those
// scenarios and must come out valid. A checker that passes a broken transport proves nothing.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/campaign"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/fencecheck/fencecheck/transport/lineproto"
)

// ErrUsage is matched by the errors of Options that cannot run (Prepare's, a bad seed count).
var ErrUsage = errors.New("selftest")

// Options configures a selftest.
type Options struct {
	// Transport is the transport that must come out valid: "real" (default) or exec:COMMAND.
	Transport string
	// NoMutants makes only Transport's runs.
	NoMutants bool
	// Seed is each transport's first seed; Seeds runs per transport use Seed, Seed+1, ...
	Seed  uint64
	Seeds int
	// Tries is how many runs each seed asked for may take (0 or 1: one). A run that misses (a
	// mutant not caught on one of its guarantees, the transport under test inconclusive) is
	// made again on a fresh seed until one hits or Tries runs have missed; a run of the
	// transport under test that is invalid (or worse) fails at once. Seed i's runs use
	// Seed+i, Seed+i+Seeds, Seed+i+2*Seeds, ...: every run has its own seed.
	Tries int
	// Parallel is how many runs at a time; 0: EmbeddedParallel on the embedded cluster, else 1.
	Parallel int
	// Duration is each run's.
	Duration time.Duration
	// Prepare applies the command line's settings (cluster kind, versions) to each scenario
	// before any run starts; its error is a usage error.
	Prepare func(*scenarios.Scenario) error
	// Run are the options of every run (Root, Console, CheckTimeout, StatusEvery); Seed and
	// Transport are each run's own. Side by side runs get no Console.
	Run harness.Options
	// Out receives a PASS or FAIL line per run; Progress how many runs there are. Default: discard.
	Out, Progress io.Writer
}

// Result is what a selftest learned: a row per mutant and per scenario of the transport under
// test, and how many of the runs came out as they should not.
type Result struct {
	Mutants, Reals []*Row
	// Runs counts the runs judged; Missed the ones made again on a fresh seed (Tries);
	// Failed the seeds whose runs did not come out as they should.
	Runs, Missed, Failed int
}

// Passed reports whether every seed came out as it should.
func (r *Result) Passed() bool { return r.Failed == 0 }

// Run plans every (transport, seed) run, checks every scenario with Prepare first (so a bad
// flag fails before any run starts) and runs them. ctx ending stops the runs (the started
// ones are healed and checked, and not judged); the caller tells an interrupted selftest by
// ctx. A harness error stops the runs not yet started and is returned.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Seeds < 1 {
		return nil, fmt.Errorf("%w: --seeds %d: want 1 or more", ErrUsage, opts.Seeds)
	}
	if opts.Tries < 0 {
		return nil, fmt.Errorf("%w: --tries %d: want 1 or more", ErrUsage, opts.Tries)
	}
	if opts.Transport == "" {
		opts.Transport = "real"
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	// The real transport runs in every scenario a mutant uses: a scenario that the real
	// transport fails would prove nothing about the mutants.
	res := &Result{}
	pipelines := true // whether the transport under test serves pipelines
	if command, ok := strings.CutPrefix(opts.Transport, "exec:"); ok {
		var err error
		if pipelines, err = servesPipelines(ctx, command); err != nil {
			return nil, err
		}
	}
	for _, m := range scenarios.Mutants() {
		if !pipelines && scenarios.IsPipelineMutant(m.Name) {
			continue // an adapter that serves leases only: no transport under test for a pipeline
		}
		if !slices.ContainsFunc(res.Reals, func(r *Row) bool { return r.scenario == m.Scenario }) {
			res.Reals = append(res.Reals, &Row{transport: opts.Transport, scenario: m.Scenario})
		}
		if !opts.NoMutants {
			res.Mutants = append(res.Mutants, &Row{transport: "mutant:" + m.Name, scenario: m.Scenario, guarantees: m.Guarantees})
		}
	}
	var jobs []job
	for _, row := range slices.Concat(res.Reals, res.Mutants) {
		s, err := scenario(row.scenario)
		if err != nil {
			return nil, err
		}
		if opts.Prepare != nil {
			if err := opts.Prepare(s); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUsage, err)
			}
		}
		s.Duration = scenarios.Duration(opts.Duration)
		for i := range opts.Seeds {
			jobs = append(jobs, job{row: row, s: s, seeds: trySeeds(opts.Seed, i, opts.Seeds, opts.Tries)})
		}
	}
	width := opts.Parallel
	if width == 0 {
		width = 1
		if jobs[0].s.Cluster.Kind == scenarios.KindEmbedded {
			width = EmbeddedParallel
		}
	}
	run := opts.Run
	if width > 1 {
		// The phase and status lines of runs side by side would interleave into noise: each
		// run says only that it finished, in its PASS or FAIL line.
		run.Console, run.StatusEvery = nil, 0
		fmt.Fprintf(opts.Progress, "selftest: %d runs, %d at a time\n", len(jobs), width)
	}
	var err error
	res.Failed, res.Runs, res.Missed, err = runJobs(ctx, opts.Out, jobs, width, run, harness.Run)
	return res, err
}

// WriteTable prints one row per mutant: the guarantees the checker found violated, the
// scenario, the seeds tried and caught, and the median time to detect (from the run's start
// to the completion of the first operation that shows a violation).
func (r *Result) WriteTable(out io.Writer) { writeTable(out, r.Mutants) }

// EmbeddedParallel is how many embedded runs selftest makes at a time by default. An
// embedded run spends most of its time waiting on lease timers (about 5% of a core, measured
// by the soak), so four side by side still leave the machine mostly idle.
const EmbeddedParallel = 4

// job is one seed of selftest: a transport's scenario, run on seeds[0] and, while it misses,
// on the next of seeds.
type job struct {
	row   *Row
	s     *scenarios.Scenario
	seeds []uint64
}

// trySeeds is the seeds of the i-th seed's tries: first+i, then Seeds further on each time.
func trySeeds(first uint64, i, seeds, tries int) []uint64 {
	var s []uint64
	for a := range max(tries, 1) {
		s = append(s, first+uint64(i+a*seeds))
	}
	return s
}

// tryFunc makes one run: harness.Run, or a stand-in in the package's tests.
type tryFunc func(context.Context, *scenarios.Scenario, harness.Options) (*harness.Outcome, error)

// runJobs runs the jobs, width at a time, judging each run into its row and printing a
// PASS, MISS (made again on the next seed) or FAIL line for each as it finishes. It returns
// how many jobs failed, how many runs were judged and how many missed; a harness error
// stops the jobs not yet started, and the first one is returned once the started ones have
// ended.
func runJobs(ctx context.Context, out io.Writer, jobs []job, width int, opts harness.Options, try tryFunc) (failed, runs, missed int, err error) {
	var mu sync.Mutex // the rows, the counts and the lines
	err = campaign.Each(ctx, width, len(jobs), func(i int) error {
		j := jobs[i]
		for a, seed := range j.seeds {
			o := opts
			o.Seed, o.Transport = seed, j.row.transport
			res, err := try(ctx, j.s, o)
			if err != nil {
				return err
			}
			if ctx.Err() != nil { // an interrupted run proves nothing either way
				return nil
			}
			mu.Lock()
			runs++
			ok, why := j.row.add(res.Results)
			again := !ok && a+1 < len(j.seeds) && j.row.retryable(res.Results)
			mark := "PASS"
			switch {
			case again:
				mark = "MISS"
				missed++
				why += fmt.Sprintf("; again on seed %d", j.seeds[a+1])
			case !ok:
				mark = "FAIL"
				failed++
			}
			fmt.Fprintf(out, "%s  %-28s %-13s seed %-4d %-8s %s  (%s)\n", mark, j.row.transport, j.row.scenario, seed, res.Results.Verdict, why, res.Dir)
			mu.Unlock()
			if !again {
				return nil
			}
		}
		return nil
	})
	return failed, runs, missed, err
}

// scenario returns the scenario name: one made for a mutant, or a built-in one.
func scenario(name string) (*scenarios.Scenario, error) {
	if b, ok := scenarios.MutantScenario(name); ok {
		return scenarios.Parse(name+".yaml", b)
	}
	s, _, err := scenarios.Builtin(name)
	return s, err
}

// Row is what selftest learned of one transport over its seeds.
type Row struct {
	transport, scenario string
	guarantees          []string // nil: the real transport, which must be valid
	tried, caught       int
	broke               []string        // every guarantee found violated, in the order of checker.Guarantees
	detect              []time.Duration // per caught run: run start to the first violating operation
}

// add judges one run's results and records them: a mutant's run must be invalid with at
// least one of its guarantees violated, the real transport's valid.
func (r *Row) add(res *checker.Results) (bool, string) {
	r.tried++
	ok, why, broke := judge(res, r.guarantees)
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

// retryable says whether a run that did not come out as it should may be made again on
// another seed: a mutant's run always (its bug shows on some schedules, not all); a run of
// the transport under test only when inconclusive (a promised event, such as a fence or a
// fault taking hold, did not happen in time), never when invalid.
func (r *Row) retryable(res *checker.Results) bool {
	return r.guarantees != nil || res.Verdict == checker.VerdictInconclusive
}

// median is the median time to detect, or "-" when no caught run had one.
func (r *Row) median() string {
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

func writeTable(out io.Writer, rows []*Row) {
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MUTANT\tCAUGHT BY\tSCENARIO\tRUNS\tCAUGHT\tMEDIAN DETECT")
	for _, r := range rows {
		broke := strings.Join(r.broke, ", ")
		if broke == "" {
			broke = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", strings.TrimPrefix(r.transport, "mutant:"), broke, r.scenario, r.tried, r.caught, r.median())
	}
	w.Flush()
}

// judge says whether res is what the run should give: valid for the real transport;
// invalid, with at least one of the mutant's guarantees violated, for a mutant. broke lists
// every guarantee found violated.
func judge(res *checker.Results, guarantees []string) (ok bool, why string, broke []string) {
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

// servesPipelines asks the adapter command (an exec transport's) whether it serves pipelines.
func servesPipelines(ctx context.Context, command string) (bool, error) {
	argv, err := lineproto.SplitCommand(command)
	if err != nil {
		return false, fmt.Errorf("--transport exec:%s: %w", command, err)
	}
	_, workloads, err := lineproto.Hello(ctx, argv, slog.New(slog.DiscardHandler))
	if err != nil {
		return false, fmt.Errorf("--transport exec:%s: hello: %w", command, err)
	}
	return slices.Contains(workloads, lineproto.WorkloadPipelines), nil
}
