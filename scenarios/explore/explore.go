// Package explore is `fencecheck explore`: a search over fault schedules guided by what runs
// observed. It starts from a scenario (its own faults, if any, dropped), runs it, and then
// runs schedules it draws or mutates from those it kept: a schedule is kept in the corpus
// when its run reached a feedback tuple (feedback.go) no earlier run reached. It stops at the
// first invalid run and hands it to `fencecheck shrink`, or when its budget or its number of
// runs is spent, and writes its corpus (the kept schedules as scenario files) and a summary.
//
// The search's choices come from its seed; which schedules are kept depends on the runs'
// feedback, which a real cluster's timing moves, so a seed repeats the search exactly only
// as long as the runs answer the same way. Each run repeats on its own: its scenario file and
// seed are in the corpus and the summary.
package explore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/fencecheck/fencecheck/scenarios/shrink"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// Options configure a search.
type Options struct {
	// Out is the output folder: runs/ (every run's directory), corpus/ (the kept schedules as
	// scenario files), explore.json and summary.md, and shrink/ when a run was invalid.
	// Required.
	Out string
	// Budget bounds the search in time: no run starts after it is spent (the one running
	// finishes). 0: no bound but Runs. A shrink after an invalid run has a budget of its own
	// (ShrinkBudget).
	Budget time.Duration
	// Runs bounds the search by work: at most this many runs, the first (the scenario without
	// faults) included. 0: no bound but Budget. A test, or a measurement that must go as far
	// on a loaded machine as on an idle one, sets Runs.
	Runs int
	// Seed is the search's seed; 0 picks one (Result.Seed says which). Run n (from 0) runs
	// with seed Seed+n.
	Seed uint64
	// Transport is the transport under test, as harness.Options.Transport.
	Transport string
	// CheckTimeout bounds each role's porcupine search in each run (checker default if 0).
	CheckTimeout time.Duration
	// Faults are the fault kinds drawn (default: every one the scenario's cluster kind can
	// do). FaultNames lists them.
	Faults []string
	// MaxFaults is the most faults a schedule holds. Default: one per 5 s of the scenario's
	// duration, at least 3.
	MaxFaults int
	// ShrinkBudget is the budget of the shrink of an invalid run; 0: no shrink (the invalid
	// run is named, and `fencecheck shrink DIR` shrinks it later).
	ShrinkBudget time.Duration
	// Probe is how long run 0, the scenario without faults, runs its workload. 0: the rule
	// of ProbeDuration (a quarter of the scenario's duration, at least three of the
	// workload's handoff periods and 8 s); the scenario's duration or more: all of it, as
	// before the probe was short. The schedules run for the scenario's whole duration.
	Probe time.Duration
	// Progress receives one line per run and the summary. Default: discard.
	Progress io.Writer

	// run and shrink replace the real runs and the shrink in the package's tests.
	run    func(ctx context.Context, s *scenarios.Scenario, seed uint64) (*observation, error)
	shrink func(ctx context.Context, dir string) (string, error)
}

// observation is what one run gave the search.
type observation struct {
	Dir         string
	Verdict     checker.Verdict
	Broken      []string // the guarantees an invalid run broke
	Tuples      tuples
	Interrupted bool
}

// ErrOptions marks options a search cannot start with (a usage error).
var ErrOptions = errors.New("invalid explore options")

// FaultNames returns the fault kinds explore can draw, in the order it knows them.
func FaultNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

// Run searches from base, a scenario ready to run (flags applied, validated). Its error is
// non-nil only when the search could not start or write its output; an interrupted search
// (ctx) returns what it found with Result.Stopped "interrupted".
func Run(ctx context.Context, base *scenarios.Scenario, opts Options) (*Result, error) {
	if opts.Out == "" {
		return nil, fmt.Errorf("%w: no output folder", ErrOptions)
	}
	if opts.Runs < 0 {
		return nil, fmt.Errorf("%w: --runs %d: want 0 (no bound) or more", ErrOptions, opts.Runs)
	}
	if opts.Budget <= 0 && opts.Runs <= 0 {
		return nil, fmt.Errorf("%w: --budget or --runs must bound the search", ErrOptions)
	}
	if opts.MaxFaults == 0 {
		// A fault every 5 s or so, as the random schedules of the catalogue have.
		opts.MaxFaults = max(3, int(base.Duration.D()/(5*time.Second)))
	}
	if opts.MaxFaults < 1 {
		return nil, fmt.Errorf("%w: --max-faults %d: want 1 or more", ErrOptions, opts.MaxFaults)
	}
	if opts.Probe < 0 {
		return nil, fmt.Errorf("%w: --probe %v: want 0 (the rule) or a duration", ErrOptions, opts.Probe)
	}
	for _, f := range opts.Faults {
		if !slices.Contains(FaultNames(), f) {
			hint := ""
			if near := nemesis.Closest(f, FaultNames()); near != "" {
				hint = "did you mean " + near + "? "
			}
			return nil, fmt.Errorf("%w: --faults: %q is not a fault explore draws; %sit draws %s", ErrOptions, f, hint, strings.Join(FaultNames(), ", "))
		}
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()>>1 + 1
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Transport == "" {
		opts.Transport = "real"
	}
	if opts.run == nil {
		opts.run = realRun(opts)
	}
	if opts.shrink == nil {
		opts.shrink = realShrink(opts)
	}
	base, err := clone(base)
	if err != nil {
		return nil, err
	}
	base.Nemesis = scenarios.NemesisSpec{} // the search writes the schedules
	base.OnKafka = nil
	e := &search{opts: opts, base: base, rng: newRand(opts.Seed), seen: map[string]int{}, ran: map[string]bool{},
		started: time.Now()}
	e.res = &Result{Scenario: base.Name, Seed: opts.Seed, Transport: opts.Transport, Cluster: base.Cluster.Kind,
		Budget: Duration(opts.Budget), MaxRuns: opts.Runs, Out: opts.Out}
	if err := e.menu(); err != nil {
		return nil, err
	}
	e.m.tookHold = map[string]bool{}
	e.res.Faults = e.m.kinds
	e.say("explore %s: seed %d, %s cluster, transport %s, %s, run 0 without faults for %v → %s", base.Name, opts.Seed, base.Cluster.Kind, opts.Transport, e.bound(), e.probe(), opts.Out)
	if err := e.loop(ctx); err != nil {
		return nil, err
	}
	if err := e.write(); err != nil {
		return e.res, err
	}
	e.summarize()
	if inv := e.res.Invalid; inv != nil && opts.ShrinkBudget > 0 && ctx.Err() == nil {
		e.say("shrink       %s (budget %v): fencecheck shrink %s", inv.Dir, opts.ShrinkBudget, scenarios.ShellQuote(inv.Dir))
		out, err := opts.shrink(ctx, inv.Dir)
		inv.Shrink = out
		if err != nil {
			inv.ShrinkError = err.Error()
			e.say("shrink       failed: %v", err)
		}
		if err := e.write(); err != nil {
			return e.res, err
		}
	}
	return e.res, nil
}

// newRand is the search's random stream for seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6578706c6f7265)) }

// search is one search in progress.
type search struct {
	opts    Options
	base    *scenarios.Scenario
	rng     *rand.Rand
	m       menu
	seen    map[string]int  // every tuple reached, and the run that reached it first
	ran     map[string]bool // every schedule run, in its one-line form
	corpus  []schedule
	weights []int // each kept schedule's weight as a parent (see weight)
	res     *Result
	started time.Time
}

func (e *search) say(format string, args ...any) { fmt.Fprintf(e.opts.Progress, format+"\n", args...) }

func (e *search) bound() string {
	var parts []string
	if e.opts.Budget > 0 {
		parts = append(parts, "budget "+e.opts.Budget.String())
	}
	if e.opts.Runs > 0 {
		parts = append(parts, fmt.Sprintf("at most %d runs", e.opts.Runs))
	}
	return strings.Join(parts, ", ")
}

// menu fixes what the search draws from, from the scenario and the cluster kind.
func (e *search) menu() error {
	s := e.base
	m := menu{duration: s.Duration.D(), maxFaults: e.opts.MaxFaults, brokers: s.Cluster.Brokers}
	if m.brokers == 0 {
		m.brokers = 3 // the cluster's default
	}
	if s.Workload.IsPipeline() {
		cfg, err := s.Workload.PipelineConfig()
		if err != nil {
			return fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
		}
		m.processes = cfg.Processes
		m.points = pipeline.Points(cfg.Member)
		m.session = cfg.SessionTimeout.D()
		for p := range cfg.Partitions {
			m.roles = append(m.roles, fmt.Sprintf("in%d", p))
		}
	} else {
		m.processes = s.Workload.Processes
		for i := range s.Workload.Roles {
			m.roles = append(m.roles, fmt.Sprintf("r%d", i+1))
		}
	}
	// The random mix's request types, and FindCoordinator (whose loss sends a client looking
	// for its coordinator again); learnAPIs narrows them to those the first run was answered
	// on.
	m.apis = append(nemesis.MixAPIs(), "findcoordinator")
	peer := s.Cluster.Kind == scenarios.KindLocal || s.Cluster.Kind == scenarios.KindContainers
	for _, k := range kinds {
		switch {
		case len(e.opts.Faults) > 0 && !slices.Contains(e.opts.Faults, k.name):
		case k.name == "isolate" && !peer:
		case k.cat == catBroker && s.Cluster.Kind == scenarios.KindExternal && s.Cluster.BrokerCommands == "":
			// An external cluster's brokers are killed and paused by its commands only.
		case k.cat == catBroker && s.Workload.IsPipeline() && s.Cluster.Kind == scenarios.KindEmbedded:
			// A broker that dies or stalls moves partition leaders, and kfake answers the
			// consumers' OffsetForLeaderEpoch for the last epoch wrongly until the new one is
			// written, so the members start their partitions over (docs/findings.md): the
			// catalogue's pipeline scenarios that kill brokers require leader-epochs, which
			// the embedded cluster refuses, and so does explore.
		default:
			m.kinds = append(m.kinds, k.name)
		}
	}
	if len(m.kinds) == 0 {
		return fmt.Errorf("%w: --faults: none of %s can run on the %s cluster", ErrOptions, strings.Join(e.opts.Faults, ", "), s.Cluster.Kind)
	}
	if m.duration < 4*time.Second {
		return fmt.Errorf("%w: --duration %v: want at least 4s, so that faults fit after the warm-up", ErrOptions, m.duration)
	}
	e.m = m
	return nil
}

// learnAPIs narrows the Kafka-aware faults' request types to those the first run was
// answered on: a fault on a request nobody sends could never take hold.
func (e *search) learnAPIs(t tuples) {
	var sent []string
	for tuple := range t {
		if f := strings.Fields(tuple); len(f) == 3 && f[0] == "answer" && slices.Contains(e.m.apis, f[1]) {
			sent = append(sent, f[1])
		}
	}
	slices.Sort(sent)
	if sent = slices.Compact(sent); len(sent) > 0 {
		e.m.apis = sent
	}
}

// noteTookHold records the faults the run saw take hold ("fault drop-response endtxn
// took-hold"), so that the draws move on to those no run has tried yet. A pipeline's freeze
// is tried once it made a zombie ("state zombie freeze before-commit") in zombieRuns runs,
// not when it took hold: a freeze that ended before the group moved the member's partition
// reached nothing a freeze is for, and what a zombie shows is a race (see zombieRuns).
func (e *search) noteTookHold(t tuples) {
	for tuple := range t {
		if f, ok := strings.CutPrefix(tuple, "state zombie "); ok {
			if e.m.zombies == nil {
				e.m.zombies = map[string]int{}
			}
			if e.m.zombies[f]++; e.m.zombies[f] >= zombieRuns {
				e.m.tookHold[f] = true
			}
			continue
		}
		if what, ok := strings.CutPrefix(tuple, "fault "); ok {
			if f, ok := strings.CutSuffix(what, " took-hold"); ok && (e.m.session <= 0 || !strings.HasPrefix(f, "freeze")) {
				e.m.tookHold[f] = true
			}
		}
	}
}

// next draws the next schedule: a fresh one now and then (and while the corpus holds only
// the schedule without faults), else a mutation of a kept one; never one already run (a
// mutation may undo itself), unless a hundred draws found nothing else. While the search is
// still covering its menu (some fault has never taken hold), three schedules in four are
// fresh and hold as many faults as a schedule may, most of them untried (menu.pickFault):
// the search first tries every fault on every request type, then follows the feedback.
func (e *search) next() (sc schedule, parent int, what []string) {
	for try := range 100 {
		covering := e.m.covering()
		if len(e.corpus) <= 1 || covering && e.rng.IntN(4) != 0 || !covering && e.rng.IntN(5) == 0 {
			sc, parent, what = nil, -1, []string{"fresh"}
			n := 1 + e.rng.IntN(e.m.maxFaults)
			if covering {
				n = e.m.maxFaults
			}
			sc = e.m.freshSchedule(e.rng, n)
		} else {
			parent = e.pickParent()
			sc, what = e.m.mutate(e.rng, e.corpus[parent], e.corpus)
		}
		if e.m.valid(sc) == nil && (!e.ran[sc.String()] || try >= 99) {
			return sc, parent, what
		}
	}
	return nil, -1, []string{"none valid"}
}

// weight is how often a kept schedule is picked as a parent, against the others: one, plus
// one for each tuple it reached first that says what the clients, the brokers or the
// checker saw (answers, outcomes, state changes, verdicts, an event a promise names
// happening), up to ten more. A tuple that only says a fault of a new kind took hold earns
// nothing: every fault kind's first try reaches one, and a schedule that changed nothing
// else is not worth more mutations than another; nor does a promise not kept (an event that
// did not happen). A promise first kept does earn: a pipeline run whose transaction was
// aborted, or a lease run whose zombie was fenced, reached the state the bugs of aborts and
// zombies need (a member that skips its rewind shows only after an abort). The schedule
// without faults (run 0) reaches everything first and weighs one.
//
// A schedule that made a pipeline's zombie first ("state zombie freeze before-commit")
// weighs ten more, past the cap: a zombie needs a freeze on the right member, long enough
// and early enough for the group to move its partition, and the bugs of a pipeline's
// fencing (a new owner that starts below the zombie's pending offsets) show only there and
// only with the right timing, so its mutations (another time, another partition, one fault
// less) are worth more tries than any other schedule's.
func weight(n int, newTuples []string) int {
	w := 1
	if n == 0 {
		return w
	}
	bonus := 0
	for _, t := range newTuples {
		c, _, _ := strings.Cut(t, " ")
		if strings.HasPrefix(t, "state zombie ") {
			bonus = zombieWeight
		}
		if c != "fault" && (c != "promise" || strings.HasSuffix(t, " kept")) && w < 11 {
			w++
		}
	}
	return w + bonus
}

// zombieWeight is what a schedule that made a zombie first weighs more (weight).
const zombieWeight = 10

// zombieRuns is in how many runs a pipeline's freeze must make a zombie to count as tried.
// More than one: what a zombie shows is a race. In kfake's group the partition mostly moves
// as the frozen member thaws, and the new owner's offset fetch races the zombie's commit; a
// member that fetches without require_stable starts below the zombie's offsets only when its
// fetch comes first (in the runs measured, 8 of 11 zombies at before-commit).
const zombieRuns = 3

// pickParent picks a kept schedule by weight.
func (e *search) pickParent() int {
	total := 0
	for _, w := range e.weights {
		total += w
	}
	r := e.rng.IntN(total)
	for i, w := range e.weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(e.weights) - 1
}

// loop runs the scenario without faults, then schedule after schedule, until a bound, an
// invalid run or ctx stops it. Its error is the first run's when the harness refused the
// scenario (a bad transport, a cluster kind it cannot run on): a usage error, with nothing
// written.
func (e *search) loop(ctx context.Context) error {
	for n := 0; ; n++ {
		switch {
		case ctx.Err() != nil:
			e.res.Stopped = StoppedInterrupted
			return nil
		case e.opts.Runs > 0 && n >= e.opts.Runs:
			e.res.Stopped = StoppedRuns
			return nil
		case e.opts.Budget > 0 && time.Since(e.started) >= e.opts.Budget:
			e.res.Stopped = StoppedBudget
			return nil
		}
		var sc schedule
		parent, what := -1, []string{"the scenario without faults"}
		if n > 0 {
			sc, parent, what = e.next()
		}
		s, err := clone(e.base)
		if err != nil {
			e.res.Error = err.Error()
			e.res.Stopped = StoppedError
			return nil
		}
		s.Name = fmt.Sprintf("%s-e%d", e.base.Name, n)
		s.Nemesis.Script = sc.Lines()
		if n == 0 {
			s.Duration = scenarios.Duration(e.probe())
		}
		if e.ran != nil {
			e.ran[sc.String()] = true
		}
		seed := e.opts.Seed + uint64(n)
		began := time.Now()
		obs, err := e.opts.run(ctx, s, seed)
		rec := RunRecord{N: n, Name: s.Name, Seed: seed, Schedule: s.Nemesis.Script, Parent: parent, Mutations: what,
			Duration: Duration(s.Duration.D()), Took: Duration(time.Since(began))}
		if err != nil && n == 0 && errors.Is(err, scenarios.ErrScenario) {
			return err
		}
		if err != nil {
			rec.Error = err.Error()
			e.res.Runs = append(e.res.Runs, rec)
			e.say("run %-4d %s  error: %v", n, e.clock(), err)
			if errors.Is(err, scenarios.ErrScenario) || ctx.Err() != nil {
				e.res.Error = err.Error()
				e.res.Stopped = StoppedError
				if ctx.Err() != nil {
					e.res.Stopped = StoppedInterrupted
				}
				return nil
			}
			continue
		}
		rec.Dir, rec.Verdict = obs.Dir, string(obs.Verdict)
		if obs.Interrupted {
			// Cut short: what it reached is not what its schedule reaches.
			rec.Interrupted = true
			e.res.Runs = append(e.res.Runs, rec)
			e.res.Stopped = StoppedInterrupted
			return nil
		}
		if n == 0 {
			e.learnAPIs(obs.Tuples)
		}
		e.noteTookHold(obs.Tuples)
		for _, t := range obs.Tuples.sorted() {
			if _, ok := e.seen[t]; !ok {
				e.seen[t] = n
				rec.New = append(rec.New, t)
			}
		}
		if len(rec.New) > 0 {
			rec.Kept = true
			e.corpus = append(e.corpus, sc)
			e.weights = append(e.weights, weight(n, rec.New))
			rec.File = filepath.Join(corpusDir, s.Name+".yaml")
			if err := e.writeCorpus(s, &rec); err != nil {
				e.res.Error = err.Error()
				e.res.Stopped = StoppedError
				e.res.Runs = append(e.res.Runs, rec)
				return nil
			}
		}
		e.res.Runs = append(e.res.Runs, rec)
		// Rewritten after every run, so that a search killed outright leaves what it found.
		if err := e.write(); err != nil {
			e.res.Error = err.Error()
			e.res.Stopped = StoppedError
			return nil
		}
		kept := ""
		if rec.Kept {
			kept = fmt.Sprintf(" (+%d, kept)", len(rec.New))
		}
		e.say("run %-4d %s  corpus %d  tuples %d%s  %s  %s", n, e.clock(), len(e.corpus), len(e.seen), kept, obs.Verdict, sc)
		if obs.Verdict == checker.VerdictInvalid {
			e.res.Invalid = &Invalid{Run: n, Dir: obs.Dir, Broken: obs.Broken, Schedule: s.Nemesis.Script,
				Command: "fencecheck run " + scenarios.ShellQuote(obs.Dir) + fmt.Sprintf(" --seed %d", seed)}
			e.res.Stopped = StoppedInvalid
			return nil
		}
	}
}

// probe is run 0's duration: Options.Probe, else ProbeDuration; never more than the
// scenario's.
func (e *search) probe() time.Duration {
	d := e.opts.Probe
	if d == 0 {
		d = ProbeDuration(e.base)
	}
	return min(d, e.base.Duration.D())
}

// ProbeDuration is how long run 0 (the scenario without faults) runs by default: a quarter
// of the scenario's duration, but at least probeHandoffs of the workload's handoff periods (a
// lease member's mean interval between contentions, a pipeline member's mean stay in the
// group) and at least probeMin, and never more than the scenario's duration.
//
// Run 0 is a probe, not a search step. It gives the baseline feedback (the request types the
// Kafka-aware faults are drawn on, the tuples no fault is needed for) and catches what shows
// without any fault; every later run runs the scenario's whole duration with a schedule, where
// a bug that shows without faults can show too (less often, measured: docs/explore.md). A run
// 0 of the whole duration cost a whole run before the first fault. The lower bounds
// keep the probe a run of the workload as it is meant to run: members hand their roles (a
// pipeline's partitions) over a few times, so fences, rebalances and the final reads and
// checks that follow them mean what they mean in any run. What the probe gives up: a bug
// that shows at a rate over time (a handoff landing between a write's two halves, an abort
// that a member does not rewind) is less likely in the probe than in a whole run, and is
// then left to the first schedules; and a tuple that only a longer run without faults
// reaches is credited to the first schedule that reaches it.
func ProbeDuration(s *scenarios.Scenario) time.Duration {
	var period time.Duration
	if s.Workload.IsPipeline() {
		if cfg, err := s.Workload.PipelineConfig(); err == nil {
			period = cfg.Restart.D()
		}
	} else {
		period = s.Workload.Load.Contend.D()
	}
	d := max(s.Duration.D()/4, probeHandoffs*period, probeMin)
	return min(d, s.Duration.D())
}

// The lower bounds of the probe's duration (ProbeDuration).
const (
	probeHandoffs = 3
	probeMin      = 8 * time.Second
)

func (e *search) clock() string {
	el := time.Since(e.started).Round(time.Second)
	if e.opts.Budget > 0 {
		return fmt.Sprintf("%v/%v", el, e.opts.Budget)
	}
	return el.String()
}

// clone is a deep copy of s, through its file form.
func clone(s *scenarios.Scenario) (*scenarios.Scenario, error) {
	b, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	c, err := scenarios.Parse(s.Name+".yaml", b)
	if err != nil {
		return nil, fmt.Errorf("scenario %s as a file: %w", s.Name, err)
	}
	return c, nil
}

// realRun runs s through the harness, with the answers observed, and reads its feedback.
func realRun(opts Options) func(ctx context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
	return func(ctx context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		out, err := harness.Run(ctx, s, harness.Options{Root: filepath.Join(opts.Out, runsDir), Seed: seed,
			CheckTimeout: opts.CheckTimeout, Transport: opts.Transport, Observe: true})
		if err != nil {
			return nil, err
		}
		promises := checker.Promises()
		if s.Workload.IsPipeline() {
			promises = checker.PipelinePromises()
		}
		obs := &observation{Dir: string(out.Dir), Verdict: out.Results.Verdict, Interrupted: out.Interrupted}
		for _, c := range out.Results.Checks {
			if c.Verdict == checker.VerdictInvalid && !c.Advisory {
				obs.Broken = append(obs.Broken, c.Name)
			}
		}
		// A run without a readable history (its cluster never came up) still counts: its
		// answers and results are its feedback.
		obs.Tuples, _ = observe(ctx, out.Dir, out.Answers, out.Results, promises)
		return obs, nil
	}
}

// realShrink shrinks an invalid run through `fencecheck shrink`'s own entry point, into
// Out/shrink.
func realShrink(opts Options) func(ctx context.Context, dir string) (string, error) {
	return func(ctx context.Context, dir string) (string, error) {
		o, err := shrink.Load(dir)
		if err != nil {
			return "", err
		}
		out := filepath.Join(opts.Out, shrinkDir)
		_, err = shrink.Run(ctx, o, shrink.Options{Out: out, Budget: opts.ShrinkBudget, Progress: opts.Progress,
			CheckTimeout: opts.CheckTimeout})
		return out, err
	}
}
