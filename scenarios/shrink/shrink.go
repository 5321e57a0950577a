package shrink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// Options configure a shrink.
type Options struct {
	// Out is the output folder: the minimal scenario, shrink.json and the candidates' runs
	// (Out/runs). Default: DIR/shrink.
	Out string
	// Budget bounds the whole shrink: the search, the confirmation tries and any second
	// search. The search stops early enough to leave time for the confirmation (estimated
	// from the measured time of the candidates' tries); a confirmation try that would not end
	// within the budget is not started, and one still running at the end is cut off and not
	// counted (Result.Asked says how many were asked). Default 10m.
	Budget time.Duration
	// Tries is how often each candidate runs (seeds S, S+1, ... from the run's seed S).
	// Default 3 on the embedded cluster, 1 on the others (each try starts a real cluster).
	Tries int
	// Confirm is how many fresh tries measure the result's reproduction rate. Default 10 on
	// the embedded cluster, 3 on the others; negative: none. A result that fails fewer than 8
	// in 10 is made more reliable and measured again (see settle).
	Confirm int
	// MinFails is how many of a candidate's tries must fail for it to be kept. Default 1: a
	// candidate fails when any try fails the same guarantee.
	MinFails int
	// Guarantees are the guarantees a try must break to count as failing the same way.
	// Default: every guarantee the original run broke (breaking any one of them counts).
	Guarantees []string
	// Progress receives one line per candidate and the summary. Default: discard.
	Progress io.Writer
	// CheckTimeout bounds each role's porcupine search in each try (checker default if 0).
	CheckTimeout time.Duration
	// Candidates bounds the search by work instead of time: at most this many candidates are
	// tried, counting a second search's (see settle; once they are spent, settle does not go
	// back to an earlier plan). 0: no bound but Budget. A shrink whose search must go as far on
	// any machine (a test, a CI job) sets Candidates and a Budget long enough never to bind: a
	// loaded machine then takes longer to try the same number of candidates instead of trying
	// fewer. Which candidates fail still depends on the runs.
	Candidates int
	// Parallel is how many tries of one candidate (or of the confirmation) run at once.
	// Default 4 on the embedded cluster, whose runs mostly wait on lease timers; 1 on the
	// others, where a second cluster would disturb the timing of the first.
	Parallel int
}

// embeddedParallel is Options.Parallel's default on the embedded cluster.
const embeddedParallel = 4

// Shape is what a scenario's size is measured by.
type Shape struct {
	Faults    int `json:"faults"`
	Processes int `json:"processes"`
	Roles     int `json:"roles"`
	Members   int `json:"members"`
	// Partitions is a pipeline run's input partitions (its roles); 0 in a lease run's.
	Partitions int           `json:"partitions,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
}

func (s Shape) String() string {
	if s.Partitions > 0 {
		return fmt.Sprintf("%d faults, %d processes, %d members, %d partitions, %v", s.Faults, s.Processes, s.Members, s.Partitions, s.Duration)
	}
	return fmt.Sprintf("%d faults, %d processes × %d roles × %d members, %v", s.Faults, s.Processes, s.Roles, s.Members, s.Duration)
}

// Candidate is one scenario tried, and how its tries came out.
type Candidate struct {
	N      int      `json:"n"`
	What   string   `json:"what"`
	Shape  Shape    `json:"shape"`
	Fails  int      `json:"fails"`
	Tries  int      `json:"tries"`
	Kept   bool     `json:"kept"`
	Broken []string `json:"broken,omitempty"` // the target guarantees any try broke
	Took   Duration `json:"took"`
}

// Duration is a time.Duration that reads as "1m2s" in shrink.json.
type Duration time.Duration

// MarshalText writes d in Go's form, rounded to milliseconds.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// Result is a shrink's outcome, also written as shrink.json.
type Result struct {
	Origin     string   `json:"origin"` // the run directory shrunk
	Scenario   string   `json:"scenario"`
	Seed       uint64   `json:"seed"`
	Transport  string   `json:"transport"`
	Cluster    string   `json:"cluster"`
	Guarantees []string `json:"guarantees"` // what a try must break
	Before     Shape    `json:"before"`
	After      Shape    `json:"after"`
	// File is the minimal scenario file; Script its fault steps.
	File   string   `json:"file"`
	Script []string `json:"script"`
	// Fails of Tries fresh tries of File broke a target guarantee (0 of 0: not measured).
	// Asked is how many fresh tries were asked (Options.Confirm); fewer ran when the budget
	// ended first.
	Fails int `json:"fails"`
	Tries int `json:"tries"`
	Asked int `json:"asked"`
	// SearchFails of SearchTries tries of the best candidate failed during the search.
	SearchFails int `json:"search_fails"`
	SearchTries int `json:"search_tries"`
	// FailingSeeds are the seeds of File's failing tries (search and confirmation).
	FailingSeeds []uint64 `json:"failing_seeds"`
	// Attempts are the results confirmed before this one, which reproduced too rarely.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Report is the report.html of the smallest failing run.
	Report     string      `json:"report"`
	Candidates []Candidate `json:"candidates"`
	// MaxCandidates is Options.Candidates (0: no bound but the budget).
	MaxCandidates int `json:"max_candidates,omitempty"`
	// Budget is Options.Budget; Took how long the shrink took.
	Budget      Duration `json:"budget"`
	Took        Duration `json:"took"`
	Interrupted bool     `json:"interrupted,omitempty"`
}

// Attempt is a result and its measured reproduction rate.
type Attempt struct {
	Shape  Shape    `json:"shape"`
	Script []string `json:"script"`
	Fails  int      `json:"fails"`
	Tries  int      `json:"tries"`
	Asked  int      `json:"asked"`
}

// plan is a candidate: a scenario whose script is steps.
type plan struct {
	s     scenarios.Scenario
	steps []step
}

func (p plan) shape() Shape {
	w := p.s.Workload
	if w.IsPipeline() {
		c := p.pipeline()
		return Shape{Faults: len(p.steps), Processes: c.Processes, Members: c.Members, Partitions: int(c.Partitions), Duration: p.s.Duration.D()}
	}
	return Shape{Faults: len(p.steps), Processes: w.Processes, Roles: w.Roles, Members: w.MembersPerRole, Duration: p.s.Duration.D()}
}

// scenario returns p as a validated scenario.
func (p plan) scenario() (*scenarios.Scenario, error) {
	s := p.s
	s.Nemesis = scenarios.NemesisSpec{}
	for _, st := range p.steps {
		s.Nemesis.Script = append(s.Nemesis.Script, st.String())
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// shrinker is one search in progress.
type shrinker struct {
	o      *Origin
	opts   Options
	target []string
	began  time.Time
	res    *Result
	best   plan
	// bestFails are the seeds and the report of the best plan's failing tries.
	bestSeeds  []uint64
	bestReport string
	bestFails  int
	bestTries  int
	minFails   int
	// reportStale says bestReport is a run of a shorter version of the best plan.
	reportStale bool
	// kept are the plans kept so far, the original first, so that a result that does not
	// reproduce often enough can go back to the last one every try of which failed.
	kept []kept
	// deadline is when the budget ends.
	deadline time.Time
	// overhead is the longest measured time of a try beyond its scenario's duration (see
	// roundTime); measured is false until a try ran to its end. Tries side by side measure.
	mu       sync.Mutex
	overhead time.Duration
	measured bool
	// wentBack says settle went back to an earlier plan: it does so once.
	wentBack bool
	// run runs one try (try, but for the package's tests of the search and the budget).
	run tryFunc
}

// tryFunc runs scenario s once with seed. A try that ends on its own is done; one cut off by
// ctx is not.
type tryFunc func(ctx context.Context, s *scenarios.Scenario, seed uint64) (tryOut, error)

// kept is a plan the search kept, with its tries.
type kept struct {
	p            plan
	n            int // its candidate number (0: the original run)
	seeds        []uint64
	report       string
	fails, tries int
}

// restore makes k the best plan.
func (sh *shrinker) restore(k kept) {
	sh.reportStale = false
	sh.best, sh.bestSeeds, sh.bestReport, sh.bestFails, sh.bestTries = k.p, k.seeds, k.report, k.fails, k.tries
}

// Run shrinks the failing run o. It writes the best scenario so far to opts.Out after every
// improvement, so an interrupted or killed shrink leaves its best result. When ctx ends
// (Ctrl-C), it stops the running try, writes the best so far with Interrupted set and returns
// it without confirmation tries. The error is non-nil only when nothing could be written.
func Run(ctx context.Context, o *Origin, opts Options) (*Result, error) {
	return run(ctx, o, opts, nil)
}

// run is Run with the tries run by try (nil: real runs through the harness).
func run(ctx context.Context, o *Origin, opts Options, try tryFunc) (*Result, error) {
	if opts.Out == "" {
		opts.Out = filepath.Join(o.Dir, "shrink")
	}
	if abs, err := filepath.Abs(opts.Out); err == nil {
		opts.Out = abs
	}
	embedded := o.Scenario.Cluster.Kind == scenarios.KindEmbedded
	if opts.Budget <= 0 {
		opts.Budget = 10 * time.Minute
	}
	if opts.Tries <= 0 {
		opts.Tries = 1
		if embedded {
			opts.Tries = 3
		}
	}
	if opts.Confirm == 0 {
		opts.Confirm = 3
		if embedded {
			opts.Confirm = 10
		}
	}
	if opts.MinFails <= 0 {
		opts.MinFails = 1
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 1
		if embedded {
			opts.Parallel = embeddedParallel
		}
	}
	if opts.Candidates < 0 {
		return nil, fmt.Errorf("%w: --candidates %d is negative", ErrNotShrinkable, opts.Candidates)
	}
	if opts.MinFails > opts.Tries {
		return nil, fmt.Errorf("%w: --min-fails %d is more than --tries %d", ErrNotShrinkable, opts.MinFails, opts.Tries)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	target := opts.Guarantees
	if len(target) == 0 {
		target = o.Failed
	}
	known := checker.Guarantees
	if o.Scenario.Workload.IsPipeline() {
		known = checker.PipelineGuarantees
	}
	for _, g := range target {
		if !slices.Contains(known, g) {
			return nil, fmt.Errorf("%w: guarantee %q is not one of %s", ErrNotShrinkable, g, strings.Join(known, ", "))
		}
	}
	sh := &shrinker{o: o, opts: opts, target: target, began: time.Now(), run: try}
	if sh.run == nil {
		sh.run = sh.try
	}
	sh.deadline = sh.began.Add(opts.Budget)
	sh.best = plan{s: *o.Scenario, steps: wrap(o.Steps)}
	sh.best.s.Name = o.Scenario.Name + "-min"
	sh.best.s.Promises = nil // coverage is for valid runs; a reproducer needs only the violation
	sh.bestSeeds = []uint64{o.Info.Seed}
	sh.bestFails, sh.bestTries = 1, 1 // the original run
	sh.bestReport = o.Report
	sh.minFails = opts.MinFails
	sh.kept = []kept{{p: sh.best, seeds: sh.bestSeeds, report: sh.bestReport, fails: 1, tries: 1}}
	sh.res = &Result{Origin: o.Dir, Scenario: o.Scenario.Name, Seed: o.Info.Seed, Transport: o.Info.Transport,
		Cluster: o.Scenario.Cluster.Kind, Guarantees: target, Before: sh.best.shape(), Budget: Duration(opts.Budget),
		MaxCandidates: opts.Candidates}
	bound := ""
	if opts.Candidates > 0 {
		bound = fmt.Sprintf(", at most %d candidates", opts.Candidates)
	}
	sh.say("shrinking %s (seed %d, %s, %s cluster): breaks %s; %s; %d tries per candidate, budget %v%s",
		o.Dir, o.Info.Seed, o.Info.Transport, sh.res.Cluster, strings.Join(target, ", "), sh.res.Before, opts.Tries, opts.Budget, bound)
	if err := sh.write(); err != nil {
		return nil, err
	}
	sh.search(ctx)
	if err := sh.write(); err != nil {
		return sh.res, err
	}
	if ctx.Err() == nil && opts.Confirm > 0 {
		if err := sh.settle(ctx); err != nil {
			return sh.res, err
		}
	}
	if ctx.Err() != nil {
		sh.res.Interrupted = true
		sh.say("interrupted: keeping the best so far (%s)", sh.best.shape())
	}
	if err := sh.write(); err != nil {
		return sh.res, err
	}
	sh.say("result       %s: %s; reproduces %s; report %s", sh.res.File, sh.res.After, sh.res.rate(), sh.res.Report)
	return sh.res, nil
}

func (sh *shrinker) say(format string, args ...any) {
	fmt.Fprintf(sh.opts.Progress, "[%6s] %s\n", time.Since(sh.began).Round(time.Second), fmt.Sprintf(format, args...))
}

// tryOut is one try of a scenario.
type tryOut struct {
	seed        uint64
	broken      []string // target guarantees it broke
	report      string
	interrupted bool
	done        bool // the run ended on its own, uninterrupted, and was checked
	notRun      bool // not started: it would not have ended within the budget
}

// try runs s once with seed through the harness.
func (sh *shrinker) try(ctx context.Context, s *scenarios.Scenario, seed uint64) (tryOut, error) {
	out, err := harness.Run(ctx, s, harness.Options{
		Root: filepath.Join(sh.opts.Out, "runs"), Seed: seed, Transport: sh.o.Info.Transport,
		CheckTimeout: sh.opts.CheckTimeout,
	})
	if err != nil {
		return tryOut{}, err
	}
	t := tryOut{seed: seed, report: out.Dir.Report(), interrupted: out.Interrupted, done: !out.Interrupted && out.Results != nil}
	if out.Results != nil {
		for _, g := range Failed(out.Results) {
			if slices.Contains(sh.target, g) {
				t.broken = append(t.broken, g)
			}
		}
	}
	return t, nil
}

// tries runs s once per seed, Options.Parallel at a time, and returns the outcomes in the
// order of seeds. A try is started only when start, if not nil, allows it; the others are
// marked notRun. ok is false when a try could not run, or was not started, or ctx ended, or
// a try was interrupted: then only the outcomes marked done are runs that ended on their
// own, and err says why, if anything but ctx did.
func (sh *shrinker) tries(ctx context.Context, s *scenarios.Scenario, seeds []uint64, start func() bool) (outs []tryOut, ok bool, err error) {
	outs = make([]tryOut, len(seeds))
	errs := make([]error, len(seeds))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(sh.opts.Parallel, len(seeds)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil || start != nil && !start() {
					outs[i] = tryOut{seed: seeds[i], notRun: true}
					continue
				}
				began := time.Now()
				outs[i], errs[i] = sh.run(ctx, s, seeds[i])
				if errs[i] == nil && outs[i].done {
					sh.measure(s.Duration.D(), time.Since(began))
				}
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return outs, false, err
	}
	if ctx.Err() != nil || slices.ContainsFunc(outs, func(t tryOut) bool { return !t.done }) {
		return outs, false, nil
	}
	return outs, true, nil
}

// Estimating time. A round is Parallel tries side by side (or fewer, when fewer are asked):
// each try in it takes about the scenario's duration plus an overhead (cluster start, heal,
// final reads, check, and the slowdown of running tries side by side), measured on every try
// that ran to its end. The longest overhead measured is used, so that estimates err on the
// side of staying within the budget. Before the first try ends, the overhead is a guess:
// firstOverhead on the embedded cluster and on an external one (which is up already),
// firstOverheadReal on local and containers (a real cluster starts and stops in every try).
const (
	firstOverhead     = 5 * time.Second
	firstOverheadReal = time.Minute
)

// measure records that a try of a scenario of duration d ran to its end in took.
func (sh *shrinker) measure(d, took time.Duration) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if o := max(took-d, 0); !sh.measured || o > sh.overhead {
		sh.overhead = o
	}
	sh.measured = true
}

// rounds is how many rounds n tries take.
func (sh *shrinker) rounds(n int) int { return (n + sh.opts.Parallel - 1) / sh.opts.Parallel }

// roundTime estimates how long one round of tries of a scenario of duration d takes.
func (sh *shrinker) roundTime(d time.Duration) time.Duration {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case sh.measured:
		return d + sh.overhead
	case sh.o.Scenario.Cluster.Kind == scenarios.KindEmbedded, sh.o.Scenario.Cluster.Kind == scenarios.KindExternal:
		return d + firstOverhead
	default:
		return d + firstOverheadReal
	}
}

// confirmTime estimates how long confirming p takes: its Confirm fresh tries.
func (sh *shrinker) confirmTime(p plan) time.Duration {
	if sh.opts.Confirm <= 0 {
		return 0
	}
	return time.Duration(sh.rounds(sh.opts.Confirm)) * sh.roundTime(p.s.Duration.D())
}

// reserve is the time the search leaves for what follows it: the confirmation of the best
// plan and, while settle may still go back, the confirmation of the plan it would go back to
// (the best plan itself, when every kept candidate failed every try: the next one kept may
// not). A result that reproduces too rarely is then replaced by a more reliable one rather
// than kept for want of time. Together at most half the budget: a confirmation that needs
// more runs the tries that fit in it.
func (sh *shrinker) reserve() time.Duration {
	r := sh.confirmTime(sh.best)
	if !sh.wentBack {
		back, ok := sh.flaky()
		if !ok {
			back.p = sh.best
		}
		r += sh.confirmTime(back.p)
	}
	return min(r, sh.opts.Budget/2)
}

// fits reports whether candidate p's tries, and then what the search leaves time for (see
// reserve), fit in what is left of the budget.
func (sh *shrinker) fits(p plan) bool {
	need := time.Duration(sh.rounds(sh.opts.Tries))*sh.roundTime(p.s.Duration.D()) + sh.reserve()
	return time.Until(sh.deadline) >= need
}

// eval runs p's tries and keeps p as the best when enough of them fail. It returns false
// without keeping p when ctx ends during a try, or the tries run into the time reserved for
// the confirmation (they are cut off then).
func (sh *shrinker) eval(ctx context.Context, p plan, what string) bool {
	s, err := p.scenario()
	if err != nil {
		return false // a reduction that makes no valid scenario is no candidate
	}
	began := time.Now()
	c := Candidate{N: len(sh.res.Candidates) + 1, What: what, Shape: p.shape()}
	var seeds []uint64
	report := ""
	seedList := make([]uint64, sh.opts.Tries)
	for i := range seedList {
		seedList[i] = sh.o.Info.Seed + uint64(i)
	}
	tctx, cancel := context.WithDeadline(ctx, sh.deadline.Add(-sh.reserve()))
	outs, ok, err := sh.tries(tctx, s, seedList, nil)
	cancel()
	if !ok {
		switch {
		case err != nil && ctx.Err() == nil:
			sh.say("#%d %s: %v", c.N, what, err)
		case ctx.Err() == nil:
			sh.say("#%d %s: cut off after %v, running into the time kept for the fresh tries", c.N, what, time.Since(began).Round(time.Second))
		}
		return false
	}
	for _, t := range outs {
		c.Tries++
		if len(t.broken) > 0 {
			c.Fails++
			seeds = append(seeds, t.seed)
			for _, g := range t.broken {
				if !slices.Contains(c.Broken, g) {
					c.Broken = append(c.Broken, g)
				}
			}
			if report == "" {
				report = t.report
			}
		}
	}
	c.Took = Duration(time.Since(began))
	c.Kept = c.Fails >= sh.minFails
	sh.res.Candidates = append(sh.res.Candidates, c)
	mark := "passes"
	switch {
	case c.Kept:
		mark = "FAILS, kept"
		k := kept{p: p, n: c.N, seeds: seeds, report: report, fails: c.Fails, tries: c.Tries}
		sh.kept = append(sh.kept, k)
		sh.restore(k)
	case c.Fails > 0:
		mark = "fails too rarely"
	}
	sh.say("#%-3d %-34s %s → %d/%d fail, %s; best: %s", c.N, what, c.Shape, c.Fails, c.Tries, mark, sh.best.shape())
	if c.Kept {
		if err := sh.write(); err != nil {
			sh.say("writing the best so far: %v", err)
		}
	}
	return c.Kept
}

// search applies the reductions until none helps, ctx ends, or the next candidate's tries
// would run into the time kept for confirming the best plan.
func (sh *shrinker) search(ctx context.Context) {
	for ctx.Err() == nil {
		progress := false
		for _, r := range sh.best.reductions() {
			for ctx.Err() == nil {
				kept := false
				for _, c := range r(sh.best) {
					if ctx.Err() != nil {
						return
					}
					if sh.spent() {
						sh.say("candidates: all %d tried; the search stops", sh.opts.Candidates)
						return
					}
					if !sh.fits(c.p) {
						left := time.Until(sh.deadline).Round(time.Second)
						if sh.opts.Confirm > 0 {
							sh.say("budget: %v left, kept for the fresh tries; the search stops after %d candidates", left, len(sh.res.Candidates))
						} else {
							sh.say("budget: %v left, too little for another candidate; the search stops after %d candidates", left, len(sh.res.Candidates))
						}
						return
					}
					if sh.eval(ctx, c.p, c.what) {
						kept = true
						break
					}
				}
				if !kept {
					break
				}
				progress = true // and try this reduction again on the new best
			}
		}
		if !progress {
			sh.say("no reduction helps any more after %d candidates", len(sh.res.Candidates))
			return
		}
	}
}

// settle confirms the result and, while it reproduces less often than 8 in 10 and the budget
// leaves time to confirm another result, makes it more reliable and confirms again: first by
// going back to before the first kept candidate that did not fail every try and searching
// again, requiring every try to fail (keeping a candidate when any try fails lets a marginal
// one through); then by doubling the run's duration, up to the original's (most failures
// need a handoff at the wrong moment, and a longer run has more of them).
func (sh *shrinker) settle(ctx context.Context) error {
	for {
		if err := sh.write(); err != nil { // confirm tries the written file
			return err
		}
		sh.confirm(ctx)
		if ctx.Err() != nil || sh.res.Tries == 0 {
			return nil
		}
		want := wantFails(sh.res.Tries)
		if sh.res.Fails >= want {
			return nil
		}
		sh.res.Attempts = append(sh.res.Attempts, Attempt{Shape: sh.best.shape(), Script: sh.res.Script, Fails: sh.res.Fails, Tries: sh.res.Tries, Asked: sh.res.Asked})
		rare := fmt.Sprintf("the result reproduces %d/%d, below %d/%d", sh.res.Fails, sh.res.Tries, want, sh.res.Tries)
		back, ok := sh.flaky()
		if ok && !sh.wentBack && sh.spent() {
			// Going back would keep a larger plan without the second search that makes it
			// smaller again.
			sh.say("%s; all %d candidates were tried, so it cannot go back to #%d and search again", rare, sh.opts.Candidates, back.n)
			sh.wentBack, ok = true, false
		}
		switch d, orig := sh.best.s.Duration.D(), sh.res.Before.Duration; {
		case ok && !sh.wentBack:
			if left := time.Until(sh.deadline); left < min(sh.confirmTime(back.p), sh.opts.Budget/2) {
				sh.say("%s; the budget's %v left is too short to confirm another result: keeping it", rare, left.Round(time.Second))
				return nil
			}
			sh.wentBack = true
			sh.unmeasured()
			sh.say("%s: going back to #%d (%s) and requiring all %d tries to fail", rare, back.n, back.p.shape(), sh.opts.Tries)
			sh.restore(back)
			sh.kept = []kept{back}
			sh.minFails = sh.opts.Tries
			sh.search(ctx)
		case d < orig:
			nd := min(2*d, orig)
			longer := sh.best
			longer.s.Duration = units.Duration(nd)
			if left := time.Until(sh.deadline); left < min(sh.confirmTime(longer), sh.opts.Budget/2) {
				sh.say("%s; the budget's %v left is too short to confirm a %v run: keeping it", rare, left.Round(time.Second), nd)
				return nil
			}
			sh.unmeasured()
			sh.say("%s: running it for %v instead of %v", rare, nd, d)
			sh.best = longer
			sh.bestSeeds, sh.bestFails, sh.bestTries, sh.reportStale = nil, 0, 0, true
		default:
			sh.say("%s, and cannot be made more reliable", rare)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// spent reports whether the search tried as many candidates as Options.Candidates allows.
func (sh *shrinker) spent() bool {
	return sh.opts.Candidates > 0 && len(sh.res.Candidates) >= sh.opts.Candidates
}

// unmeasured clears the result's reproduction rate when the result changes: the rate stays
// with its attempt.
func (sh *shrinker) unmeasured() { sh.res.Fails, sh.res.Tries, sh.res.Asked = 0, 0, 0 }

// wantFails is how many of n fresh tries a result must fail: 8 of 10.
func wantFails(n int) int { return (8*n + 9) / 10 }

// flaky returns the kept plan to go back to when the result reproduces too rarely: the one
// before the first kept candidate that did not fail every try. ok is false when every kept
// candidate failed every try.
func (sh *shrinker) flaky() (kept, bool) {
	for i := 1; i < len(sh.kept); i++ {
		if sh.kept[i].fails < sh.kept[i].tries {
			return sh.kept[i-1], true
		}
	}
	return kept{}, false
}

// confirm measures the written scenario's reproduction rate over fresh seeds. It starts a
// try only when it is expected to end within the budget, and cuts off a try still running
// when the budget ends; neither counts.
func (sh *shrinker) confirm(ctx context.Context) {
	s, err := scenarios.Find(sh.res.File)
	if err != nil {
		sh.say("confirm: %v", err)
		return
	}
	sh.say("confirming %s over %d fresh tries", sh.res.File, sh.opts.Confirm)
	fails, tries := 0, 0
	var seeds []uint64
	report := ""
	seedList := make([]uint64, sh.opts.Confirm)
	for i := range seedList {
		seedList[i] = sh.o.Info.Seed + 1000 + uint64(i)
	}
	// Each try takes about a round: tries run side by side. The estimate learns from the
	// tries that end meanwhile.
	fitsIn := func() bool { return !time.Now().Add(sh.roundTime(s.Duration.D())).After(sh.deadline) }
	cctx, cancel := context.WithDeadline(ctx, sh.deadline)
	// An interrupted confirmation counts the tries that ended before the interrupt.
	outs, _, err := sh.tries(cctx, s, seedList, fitsIn)
	cancel()
	if err != nil && ctx.Err() == nil {
		sh.say("confirm: %v", err)
	}
	skipped := 0
	for i, t := range outs {
		switch {
		case t.notRun:
			skipped++
			continue
		case !t.done:
			if ctx.Err() == nil {
				sh.say("  try %d/%d seed %d: cut off at the end of the budget", i+1, sh.opts.Confirm, t.seed)
			}
			continue
		}
		tries++
		if len(t.broken) > 0 {
			fails++
			seeds = append(seeds, t.seed)
			if report == "" {
				report = t.report
			}
		}
		sh.say("  try %d/%d seed %d: %s", i+1, sh.opts.Confirm, t.seed, verdictWord(t))
	}
	if ctx.Err() == nil && skipped > 0 {
		sh.say("  %d tries not started: they would not have ended within the budget", skipped)
	}
	sh.res.Fails, sh.res.Tries, sh.res.Asked = fails, tries, sh.opts.Confirm
	sh.bestSeeds = append(slices.Clone(sh.bestSeeds), seeds...)
	if (sh.bestReport == sh.o.Report || sh.reportStale) && report != "" {
		sh.bestReport = report // a run of the minimal scenario, not the original or a shorter one
		sh.reportStale = false
	}
}

// rate says how often the result reproduced: "9/10", "7/8 within the budget, 10 asked",
// "not measured".
func (r *Result) rate() string {
	switch {
	case r.Asked == 0:
		return "not measured"
	case r.Tries < r.Asked:
		return fmt.Sprintf("%d/%d within the budget, %d asked", r.Fails, r.Tries, r.Asked)
	default:
		return fmt.Sprintf("%d/%d", r.Fails, r.Tries)
	}
}

func verdictWord(t tryOut) string {
	if len(t.broken) > 0 {
		return "fails " + strings.Join(t.broken, ", ")
	}
	return "passes"
}
