package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/workload/pipeline"
)

// Options configure Run.
type Options struct {
	// Out is the suite directory. Required.
	Out string
	// Console receives the progress lines. Default: discard.
	Console io.Writer
	// Command is the command line that ran the suite (stored in suite.json and the index).
	Command string
	// NoReuse gives every run a cluster of its own (to measure what sharing saves).
	NoReuse bool
	// CheckTimeout bounds each role's porcupine search. Default checker.DefaultTimeout.
	CheckTimeout time.Duration
	// Baseline is a previous suite directory to compare with (marks); "" for none.
	Baseline string
	// Lock, when set, is held around each run (see the soak's --lock); nil: none.
	Lock func(ctx context.Context) (unlock func(), err error)
}

// plannedCell is a cell with what it needs to run.
type plannedCell struct {
	Cell
	arg       string // how `fencecheck run` names the scenario
	s         *scenarios.Scenario
	repeats   int
	transport string
	seed      uint64 // every run's, when set
	shared    bool
	key       string // the cluster spec; cells with one key can share a cluster
}

// Plan expands the suite into its cells, in run order: system by system, the cells that can
// share a cluster first. A scenario that a system cannot run is skipped with the reason.
func (f *File) Plan(noReuse bool) ([]*plannedCell, error) {
	var out []*plannedCell
	for _, sys := range f.Systems {
		var shared, own []*plannedCell
		for _, g := range f.Groups {
			if f.keep != nil && !f.keep[[2]string{g.Name, sys.Name}] {
				continue // another runner's share
			}
			for _, arg := range g.Scenarios {
				s, err := f.scenario(arg)
				if err != nil {
					return nil, fmt.Errorf("%w: %w", ErrSuite, err)
				}
				ex := f.exception(s.Name, sys.Name)
				c := &plannedCell{Cell: Cell{Group: g.Name, Scenario: s.Name, System: sys.Name, Status: StatusNotRun},
					arg: f.scenarioArg(arg), s: s, repeats: f.Repeats, transport: f.Transport}
				if sys.Transport != "" {
					c.transport = sys.Transport
				}
				if ex.Repeats > 0 {
					c.repeats = ex.Repeats
				}
				if ex.Transport != "" {
					c.transport = ex.Transport
				}
				if ex.Expect != checker.VerdictValid {
					c.Expect = ex.Expect
				}
				c.seed = ex.Seed
				s.UseCluster(sys.Cluster)
				if sys.KafkaVersion != "" {
					s.Cluster.KafkaVersion = sys.KafkaVersion
				}
				if sys.TransactionVersion != 0 {
					s.Cluster.TransactionVersion = sys.TransactionVersion
				}
				if sys.Brokers != 0 {
					s.Cluster.Brokers = sys.Brokers
				}
				if sys.GroupProtocol != "" && s.Workload.IsPipeline() {
					// A copy: the scenario's pipeline settings may be the catalogue's own.
					var cfg pipeline.Config
					if s.Workload.Pipeline != nil {
						cfg = *s.Workload.Pipeline
					}
					cfg.Protocol = sys.GroupProtocol
					s.Workload.Pipeline = &cfg
				}
				switch {
				case ex.Duration > 0:
					s.Duration = ex.Duration
				case f.Duration > 0:
					s.Duration = f.Duration
				}
				if err := s.Validate(); err != nil {
					return nil, fmt.Errorf("%w: scenario %s on system %s: %w", ErrSuite, s.Name, sys.Name, err)
				}
				switch err := s.Supports(s.Cluster.Kind); {
				case len(g.Systems) > 0 && !slices.Contains(g.Systems, sys.Name):
					c.Status, c.Note = StatusSkipped, "group "+g.Name+" runs on "+strings.Join(g.Systems, ", ")
				case ex.Skip != "":
					c.Status, c.Note = StatusSkipped, ex.Skip
				case s.Workload.IsPipeline() && !servesPipelines(c.transport):
					c.Status, c.Note = StatusSkipped, "the adapter serves leases only: its client runs no pipeline member behind the exec protocol yet"
				case s.Workload.IsPipeline() && !servesProtocol(c.transport, groupProtocol(s)):
					c.Status, c.Note = StatusSkipped, "the adapter's client has no "+groupProtocol(s)+" group protocol"
				case !s.Workload.IsPipeline() && !servesLeases(c.transport):
					c.Status, c.Note = StatusSkipped, "the adapter serves pipelines only: its client (Kafka Streams) is a pipeline, not a lease transport"
				case err != nil:
					c.Status, c.Note = StatusSkipped, err.Error()
				}
				c.shared = !noReuse && scenarios.SharesCluster(s)
				c.key = fmt.Sprintf("%+v", s.Cluster)
				if c.shared {
					shared = append(shared, c)
				} else {
					own = append(own, c)
				}
			}
		}
		out = append(out, shared...)
		out = append(out, own...)
	}
	return out, nil
}

// sharedCluster is a cluster that consecutive cells of one system use.
type sharedCluster struct {
	key   string
	label string
	cl    cluster.Cluster
	err   error // the start failed: every cell of this key gets the error
	logF  *os.File
}

func (sc *sharedCluster) close() {
	if sc == nil {
		return
	}
	if sc.cl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = sc.cl.Close(ctx)
		cancel()
	}
	if sc.logF != nil {
		sc.logF.Close()
	}
}

// Run runs the suite's cells and writes the suite directory after every cell, so that an
// interrupted suite (ctx cancelled) keeps what finished: the run in progress is healed,
// checked and listed as interrupted, and the cells left are "not run". No run starts once the
// budget is spent. The error is non-nil only when nothing could be written.
func Run(ctx context.Context, f *File, opts Options) (*Report, error) {
	if opts.Console == nil {
		opts.Console = io.Discard
	}
	cells, err := f.Plan(opts.NoReuse)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("suite folder: %w", err)
	}
	began := time.Now()
	rep := &Report{Suite: f.Name, Description: strings.TrimSpace(f.Description), Started: began.UTC(),
		Budget: f.Budget.String(), Systems: f.Systems}
	if opts.Command != "" {
		rep.Commands = []string{opts.Command}
	}
	for _, c := range cells {
		rep.Cells = append(rep.Cells, c.Cell)
	}
	var base *Report
	if opts.Baseline != "" {
		if base, err = Load(opts.Baseline); err != nil {
			return nil, err
		}
		rep.Baseline = relOrAbs(opts.Out, opts.Baseline)
	}
	write := func() error {
		rep.Seconds = time.Since(began).Seconds()
		rep.summarize()
		if base != nil {
			Mark(rep, base)
		}
		return Write(opts.Out, rep)
	}
	if err := write(); err != nil {
		return nil, err
	}

	total := 0
	for _, c := range cells {
		if c.Status == StatusNotRun {
			total += c.repeats
		}
	}
	fmt.Fprintf(opts.Console, "suite %s: %d cells, %d runs, budget %s → %s\n", f.Name, len(cells), total, human(f.Budget.D()), opts.Out)
	est := f.Estimate(cells, base)
	fmt.Fprintf(opts.Console, "        estimate %s on this machine (budget %s)\n", human(est.Total), human(f.Budget.D()))
	if n := len(est.Cut); n > 0 {
		fmt.Fprintf(opts.Console, "        at the estimate %d cells start after the budget, from %s: they would be left not run (fencecheck suite plan)\n", n, est.Cut[0])
	}
	var sc *sharedCluster
	defer func() { sc.close() }()
	clusters := map[string]int{} // shared clusters started per system
	done := 0
	for i, c := range cells {
		if c.Status == StatusSkipped {
			fmt.Fprintf(opts.Console, "        %s × %s skipped: %s\n", c.Scenario, c.System, c.Note)
			continue
		}
		if sc != nil && (!c.shared || sc.key != c.key) {
			sc.close() // the system's shared cells are done: free it before the next one starts
			sc = nil
		}
		for n := 0; n < c.repeats; n++ {
			if ctx.Err() != nil {
				rep.Stopped = "interrupted"
				break
			}
			if time.Since(began) >= f.Budget.D() {
				rep.Stopped = fmt.Sprintf("budget %v spent", f.Budget)
				break
			}
			var shared cluster.Cluster
			c.Cluster = "own"
			if c.shared {
				if sc == nil {
					clusters[c.System]++
					label := fmt.Sprintf("%s#%d", c.System, clusters[c.System])
					fmt.Fprintf(opts.Console, "        starting shared cluster %s\n", label)
					sc = startShared(ctx, c, label, opts.Out)
					if sc.err != nil && ctx.Err() != nil { // Ctrl-C while it started: not its fault
						sc.close()
						sc = nil
						rep.Stopped = "interrupted"
						break
					}
				}
				c.Cluster = "shared " + sc.label
				if sc.err != nil {
					done++
					why := "error: shared cluster " + sc.label + ": " + sc.err.Error()
					c.Runs = append(c.Runs, CellRun{Verdict: checker.VerdictError, Why: []string{why}, Expected: c.Expect})
					fmt.Fprintf(opts.Console, "[%d/%d] %s × %s: %s\n", done, total, c.Scenario, c.System, why)
					continue
				}
				shared = sc.cl
			}
			done++
			fmt.Fprintf(opts.Console, "[%d/%d] %s × %s (%s cluster) ...\n", done, total, c.Scenario, c.System, c.Cluster)
			r, err := runOne(ctx, c, shared, opts)
			if err != nil {
				return rep, err
			}
			c.Runs = append(c.Runs, r)
			fmt.Fprintf(opts.Console, "[%d/%d] %s × %s: %s in %.0fs → %s\n", done, total, c.Scenario, c.System, r.label(),
				r.Seconds, filepath.Join(opts.Out, r.Dir))
			if shared != nil && (r.Verdict == checker.VerdictError || r.Interrupted) {
				// The shared cluster may be what failed: the next cell gets a new one.
				sc.close()
				sc = nil
			}
		}
		c.finish()
		if c.Status == StatusNotRun && rep.Stopped != "" {
			c.Note = rep.Stopped
		}
		rep.Cells[i] = c.Cell
		if err := write(); err != nil {
			return rep, err
		}
	}
	for i := range rep.Cells {
		if rep.Cells[i].Status == StatusNotRun && rep.Cells[i].Note == "" {
			rep.Cells[i].Note = rep.Stopped
		}
	}
	return rep, write()
}

// startShared starts the cluster a run of c would, with its log and broker logs in the suite
// directory's clusters/<label>/.
func startShared(ctx context.Context, c *plannedCell, label, out string) *sharedCluster {
	sc := &sharedCluster{key: c.key, label: label}
	dir := filepath.Join(out, ClustersDir, label)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		sc.err = err
		return sc
	}
	var err error
	if sc.logF, err = os.Create(filepath.Join(dir, "cluster.log")); err != nil {
		sc.err = err
		return sc
	}
	log := slog.New(slog.NewTextHandler(sc.logF, nil)).With("cluster", label)
	cl, err := harness.StartCluster(ctx, c.s.Cluster, filepath.Join(dir, "logs"), log)
	if err != nil {
		sc.err = err // and no cluster: cl may be a typed nil
		return sc
	}
	sc.cl = cl
	return sc
}

// runOne runs c once with a fresh seed, on shared when not nil.
func runOne(ctx context.Context, c *plannedCell, shared cluster.Cluster, opts Options) (CellRun, error) {
	if opts.Lock != nil {
		unlock, err := opts.Lock(ctx)
		if err != nil {
			return CellRun{Verdict: checker.VerdictInconclusive, Interrupted: true, Why: []string{"interrupted waiting for the lock"}}, nil
		}
		defer unlock()
	}
	began := time.Now()
	out, err := harness.Run(ctx, c.s, harness.Options{
		Root: filepath.Join(opts.Out, RunsDir), Console: io.Discard, CheckTimeout: opts.CheckTimeout,
		Transport: c.transport, Cluster: shared, Seed: c.seed,
	})
	if errors.Is(err, scenarios.ErrScenario) {
		// What the plan could not see, such as a system's adapter that is not built: this
		// cell's error, and the suite goes on.
		return CellRun{Verdict: checker.VerdictError, Why: []string{"error: " + err.Error()}, Expected: c.Expect}, nil
	}
	if err != nil {
		return CellRun{}, err
	}
	return CellRun{
		Dir: relOrAbs(opts.Out, string(out.Dir)), Seed: out.Seed, Verdict: out.Results.Verdict,
		Seconds: time.Since(began).Seconds(), Command: out.Command, Why: out.Results.NotValid(),
		Interrupted: out.Interrupted, Expected: c.Expect,
	}, nil
}

// repeatCommand is the command that repeats run r of a suite written to out: its run
// directory (which keeps the scenario as it ran and the transport) and its seed. A merged
// suite rebuilds it for the run directory's place in the merged tree.
func repeatCommand(out string, r CellRun) string {
	return "fencecheck run " + scenarios.ShellQuote(filepath.Join(out, filepath.FromSlash(r.Dir))) + " --seed " + strconv.FormatUint(r.Seed, 10)
}

// relOrAbs is target relative to base when it can be, else target as an absolute path.
func relOrAbs(base, target string) string {
	ab, err1 := filepath.Abs(base)
	at, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return target
	}
	if rel, err := filepath.Rel(ab, at); err == nil {
		return filepath.ToSlash(rel)
	}
	return at
}

// servesLeases reports whether a column's transport can run a lease scenario: any but one of
// adapters/ that serves pipelines only.
func servesLeases(transport string) bool {
	command, ok := strings.CutPrefix(transport, "exec:")
	if !ok {
		return true
	}
	argv, err := lineproto.SplitCommand(command)
	if err != nil || len(argv) == 0 {
		return true
	}
	c, known := adapters.ByProgram(argv[0])
	return !known || !c.PipelinesOnly
}

// servesPipelines reports whether a column's transport can run a pipeline: fencecheck's own
// members, or an exec adapter, unless it is one of adapters/ that serves leases only (an
// unknown adapter is asked when its run starts).
func servesPipelines(transport string) bool {
	command, ok := strings.CutPrefix(transport, "exec:")
	if !ok {
		return true
	}
	argv, err := lineproto.SplitCommand(command)
	if err != nil || len(argv) == 0 {
		return true // the run says what is wrong with it
	}
	c, known := adapters.ByProgram(argv[0])
	return !known || c.Pipelines
}

// groupProtocol is the group protocol a pipeline scenario's members run under.
func groupProtocol(s *scenarios.Scenario) string {
	cfg, err := s.Workload.PipelineConfig()
	if err != nil {
		return "" // Validate has named the field
	}
	return cfg.Protocol
}

// servesProtocol reports whether a column's transport can run a pipeline member under the
// group protocol: fencecheck's own members speak both, an adapter of adapters/ those its
// client has (an unknown adapter is asked when its run starts).
func servesProtocol(transport, protocol string) bool {
	command, ok := strings.CutPrefix(transport, "exec:")
	if !ok || protocol == "" {
		return true
	}
	argv, err := lineproto.SplitCommand(command)
	if err != nil || len(argv) == 0 {
		return true
	}
	c, known := adapters.ByProgram(argv[0])
	return !known || c.ServesProtocol(protocol)
}
