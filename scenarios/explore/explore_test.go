package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/scenarios"
)

// The tests of this file run the search's mechanics with a scripted run in place of the
// harness (Options.run): its feedback is a function of the schedule, or a table, so that what
// the search keeps and how it goes on is deterministic. realrun_test.go runs it for real.

func steady(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Find("steady")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// byKinds is a run whose feedback is the fault kinds and request types of its schedule: a
// schedule with a kind or request type no earlier one had reaches a new tuple.
func byKinds(calls *[]*scenarios.Scenario) func(context.Context, *scenarios.Scenario, uint64) (*observation, error) {
	return func(_ context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		*calls = append(*calls, s)
		t := tuples{}
		t.add("op", "work", "ok")
		for _, line := range s.Nemesis.Script {
			st, err := nemesis.ParseStep(line)
			if err != nil {
				return nil, err
			}
			t.add("fault", st.Fault, st.Params.API)
		}
		return &observation{Dir: fmt.Sprintf("runs/%s/%d", s.Name, seed), Verdict: checker.VerdictValid, Tuples: t}, nil
	}
}

func noShrink(context.Context, string) (string, error) { return "", errors.New("no shrink expected") }

// TestSameSeedSameSchedules: a search is its seed's. Two searches with one seed and the same
// feedback run the same schedules with the same seeds; another seed runs others.
func TestSameSeedSameSchedules(t *testing.T) {
	search := func(seed uint64) []string {
		var calls []*scenarios.Scenario
		res, err := Run(context.Background(), steady(t), Options{Out: t.TempDir(), Runs: 25, Seed: seed, run: byKinds(&calls), shrink: noShrink})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) != 25 || len(calls) != 25 || res.Stopped != StoppedRuns {
			t.Fatalf("%d runs (%d calls), stopped %q: want 25, stopped by --runs", len(res.Runs), len(calls), res.Stopped)
		}
		var out []string
		for i, r := range res.Runs {
			if r.Seed != seed+uint64(i) {
				t.Errorf("run %d ran with seed %d, want %d", i, r.Seed, seed+uint64(i))
			}
			out = append(out, strings.Join(r.Schedule, "; "))
		}
		if out[0] != "" {
			t.Errorf("the first run's schedule %q: want the scenario without faults", out[0])
		}
		return out
	}
	a, b, c := search(7), search(7), search(8)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 ran different schedules twice:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if slices.Equal(a, c) {
		t.Error("seeds 7 and 8 ran the same schedules")
	}
	distinct := map[string]bool{}
	for _, s := range a {
		distinct[s] = true
	}
	if len(distinct) != len(a) {
		t.Errorf("%d distinct schedules in %d runs: a schedule ran twice:\n%s", len(distinct), len(a), strings.Join(a, "\n"))
	}
}

// TestKeepsOnlyWhatReachedNewTuples: a run that reached a tuple no earlier run reached keeps
// its schedule (in the corpus, as a scenario file fencecheck run accepts); one that did not,
// does not.
func TestKeepsOnlyWhatReachedNewTuples(t *testing.T) {
	feedback := [][]string{{"op work ok"}, {"op work ok"}, {"op work ok", "answer endtxn NOT_COORDINATOR"}, {"answer endtxn NOT_COORDINATOR"}, {"state describe none"}}
	want := []bool{true, false, true, false, true}
	out := t.TempDir()
	run := func(_ context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		n := int(seed - 100)
		tu := tuples{}
		for _, x := range feedback[n] {
			tu[x] = true
		}
		return &observation{Dir: "runs/" + s.Name, Verdict: checker.VerdictValid, Tuples: tu}, nil
	}
	res, err := Run(context.Background(), steady(t), Options{Out: out, Runs: len(feedback), Seed: 100, run: run, shrink: noShrink})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Runs {
		if r.Kept != want[i] {
			t.Errorf("run %d (feedback %v): kept %v, want %v", i, feedback[i], r.Kept, want[i])
		}
		path := filepath.Join(out, corpusDir, r.Name+".yaml")
		_, statErr := os.Stat(path)
		if r.Kept != (statErr == nil) {
			t.Errorf("run %d: kept %v, corpus file %s: %v", i, r.Kept, path, statErr)
		}
		if r.Kept {
			// The corpus file is a scenario as fencecheck run reads it, with the run's schedule.
			s, err := scenarios.Find(path)
			if err != nil {
				t.Fatalf("corpus file %s: %v", path, err)
			}
			if !slices.Equal(s.Nemesis.Script, r.Schedule) {
				t.Errorf("corpus file %s: script %q, want the run's %q", path, s.Nemesis.Script, r.Schedule)
			}
		}
	}
	if len(res.Tuples) != 3 || res.Tuples[0] != (Tuple{Tuple: "answer endtxn NOT_COORDINATOR", Run: 2}) {
		t.Errorf("tuples %v: want 3, the answer first reached by run 2", res.Tuples)
	}
}

// TestStopsAtInvalid: the first invalid run ends the search; its corpus and summary are
// written, and the run is handed to the shrink.
func TestStopsAtInvalid(t *testing.T) {
	out := t.TempDir()
	var calls []*scenarios.Scenario
	kinds := byKinds(&calls)
	run := func(ctx context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		obs, err := kinds(ctx, s, seed)
		if err == nil && len(calls) == 4 {
			obs.Verdict, obs.Broken = checker.VerdictInvalid, []string{"no-zombie-commit"}
		}
		return obs, err
	}
	var shrunk []string
	shrink := func(_ context.Context, dir string) (string, error) {
		shrunk = append(shrunk, dir)
		return filepath.Join(out, shrinkDir), nil
	}
	res, err := Run(context.Background(), steady(t), Options{Out: out, Runs: 50, Seed: 3, run: run, shrink: shrink, ShrinkBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != StoppedInvalid || len(res.Runs) != 4 || res.Invalid == nil || res.Invalid.Run != 3 {
		t.Fatalf("stopped %q after %d runs, invalid %+v: want stopped at run 3", res.Stopped, len(res.Runs), res.Invalid)
	}
	if !slices.Equal(shrunk, []string{res.Runs[3].Dir}) {
		t.Errorf("shrunk %v, want the invalid run %s", shrunk, res.Runs[3].Dir)
	}
	if res.Invalid.Shrink != filepath.Join(out, shrinkDir) || !strings.Contains(res.Invalid.Command, "--seed 6") {
		t.Errorf("invalid %+v: want the shrink's folder and the command with the run's seed 6", res.Invalid)
	}
	sum, err := os.ReadFile(filepath.Join(out, summaryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Run 3 broke no-zombie-commit", "Shrunk into", "corpus/steady-e0.yaml"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
	}
	js, err := os.ReadFile(filepath.Join(out, resultFile))
	if err != nil || !strings.Contains(string(js), `"stopped": "invalid"`) {
		t.Errorf("explore.json (%v) does not say the search stopped at an invalid run:\n%s", err, js)
	}
	// Without a shrink budget, the invalid run is named and left alone.
	calls = nil
	res, err = Run(context.Background(), steady(t), Options{Out: t.TempDir(), Runs: 50, Seed: 3, run: run, shrink: noShrink})
	if err != nil || res.Invalid == nil || res.Invalid.Shrink != "" || res.Invalid.ShrinkError != "" {
		t.Errorf("without --shrink-budget: err %v, invalid %+v: want the invalid run, not shrunk", err, res.Invalid)
	}
}

// TestInterruptedKeepsWhatItHas: a search whose context ends stops before the next run, says
// it was interrupted and writes what it found.
func TestInterruptedKeepsWhatItHas(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls []*scenarios.Scenario
	kinds := byKinds(&calls)
	run := func(ctx context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		if len(calls) == 2 {
			cancel() // Ctrl-C during the third run, which the harness ends interrupted
			obs, err := kinds(ctx, s, seed)
			obs.Interrupted, obs.Verdict = true, checker.VerdictInconclusive
			return obs, err
		}
		return kinds(ctx, s, seed)
	}
	out := t.TempDir()
	res, err := Run(ctx, steady(t), Options{Out: out, Runs: 50, Seed: 1, run: run, shrink: noShrink})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != StoppedInterrupted || len(res.Runs) != 3 || !res.Runs[2].Interrupted || res.Runs[2].Kept {
		t.Fatalf("stopped %q after %d runs: want interrupted after 3, the last not kept", res.Stopped, len(res.Runs))
	}
	if _, err := os.Stat(filepath.Join(out, corpusDir, "steady-e1.yaml")); err != nil {
		t.Errorf("the corpus before the interruption: %v", err)
	}
}

// TestBadOptions: options a search cannot start with are errors naming the flag.
func TestBadOptions(t *testing.T) {
	short := steady(t)
	short.Duration = scenarios.Duration(3e9)
	for _, c := range []struct {
		s    *scenarios.Scenario
		opts Options
		want string
	}{
		{steady(t), Options{Out: t.TempDir()}, "--budget or --runs"},
		{steady(t), Options{Out: t.TempDir(), Runs: -1}, "--runs -1"},
		{steady(t), Options{Out: t.TempDir(), Runs: 1, Faults: []string{"kil"}}, `--faults: "kil" is not a fault explore draws; did you mean kill?`},
		{steady(t), Options{Out: t.TempDir(), Runs: 1, Faults: []string{"isolate"}}, "--faults: none of isolate can run on the embedded cluster"},
		{steady(t), Options{Out: t.TempDir(), Runs: 1, MaxFaults: -2}, "--max-faults -2"},
		{steady(t), Options{Out: t.TempDir(), Runs: 1, Probe: -time.Second}, "--probe -1s"},
		{short, Options{Out: t.TempDir(), Runs: 1}, "--duration 3s"},
	} {
		c.opts.run, c.opts.shrink = byKinds(new([]*scenarios.Scenario)), noShrink
		_, err := Run(context.Background(), c.s, c.opts)
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %+v: error %v, want ErrOptions naming %q", c.opts, err, c.want)
		}
	}
}

// TestDrawnSchedulesAreValid: every schedule the search draws or mutates, over many draws,
// is one the nemesis parses and the scenario accepts, for a lease and a pipeline scenario, and
// draws every fault kind of its menu.
func TestDrawnSchedulesAreValid(t *testing.T) {
	for _, name := range []string{"steady", "pipeline-steady"} {
		t.Run(name, func(t *testing.T) {
			base, err := scenarios.Find(name)
			if err != nil {
				t.Fatal(err)
			}
			e := &search{opts: Options{MaxFaults: 3}, base: base, rng: newRand(5)}
			e.opts.MaxFaults = 3
			if err := e.menu(); err != nil {
				t.Fatal(err)
			}
			e.corpus, e.weights = []schedule{nil}, []int{1}
			drawn := map[string]bool{}
			for i := range 400 {
				sc, _, what := e.next()
				if len(sc) == 0 || len(sc) > 3 {
					t.Fatalf("draw %d (%v): %d steps, want 1 to 3", i, what, len(sc))
				}
				s, err := clone(base)
				if err != nil {
					t.Fatal(err)
				}
				s.Nemesis.Script = sc.Lines()
				if err := s.Validate(); err != nil {
					t.Fatalf("draw %d (%v): %v", i, what, err)
				}
				if err := e.m.valid(sc); err != nil {
					t.Fatalf("draw %d (%v): %v", i, what, err)
				}
				for _, st := range sc {
					drawn[st.Kind] = true
					if st.At < 1e9 || st.At > s.Duration.D() {
						t.Errorf("draw %d: step %q outside the run", i, st)
					}
				}
				if i%3 == 0 {
					e.corpus, e.weights = append(e.corpus, sc), append(e.weights, 1+i%5)
				}
			}
			for _, k := range e.m.kinds {
				if !drawn[k] {
					t.Errorf("fault kind %s never drawn in 400 schedules", k)
				}
			}
		})
	}
}

// TestRefusedScenarioWritesNothing: a scenario the harness refuses at the first run (a bad
// transport) is the search's error, a usage error, and leaves no output folder behind.
func TestRefusedScenarioWritesNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	run := func(context.Context, *scenarios.Scenario, uint64) (*observation, error) {
		return nil, fmt.Errorf("%w: no such mutant", scenarios.ErrScenario)
	}
	res, err := Run(context.Background(), steady(t), Options{Out: out, Runs: 3, run: run, shrink: noShrink})
	if !errors.Is(err, scenarios.ErrScenario) || res != nil {
		t.Fatalf("result %v, error %v: want the harness's refusal", res, err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output folder after a refused first run: %v, want none", err)
	}
}

// TestParentWeights: a kept schedule weighs one, plus one per tuple it reached first that is
// not only a fault kind taking hold or a promise, up to eleven, and ten more if it made a
// pipeline's zombie first (before, such a schedule weighed as any other); the schedule
// without faults weighs one; parents are picked in proportion.
func TestParentWeights(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf("op work info %d", i)
	}
	for _, c := range []struct {
		n    int
		new  []string
		want int
	}{
		{0, many, 1},
		{4, []string{"fault drop-response endtxn took-hold", "promise fence not-kept"}, 1},
		{4, []string{"fault error-response addoffsetstotxn took-hold", "promise txn-aborted kept"}, 2},
		{4, []string{"fault drop-response endtxn took-hold", "op-in-fault work info drop-response endtxn", "answer endtxn NONE"}, 3},
		{9, many, 11},
		{9, []string{"fault freeze before-commit took-hold", "state zombie freeze before-commit"}, 12},
		{9, append([]string{"state zombie freeze"}, many...), 21},
	} {
		if got := weight(c.n, c.new); got != c.want {
			t.Errorf("weight(run %d, %v) = %d, want %d", c.n, c.new, got, c.want)
		}
	}
	e := &search{rng: newRand(1), weights: []int{1, 9}}
	picked := 0
	for range 1000 {
		picked += e.pickParent()
	}
	if picked < 850 || picked > 950 {
		t.Errorf("the parent of weight 9 of 10 was picked %d times in 1000", picked)
	}
}

// TestMenuLeavesOutWhatTheClusterCannotRun: a pipeline on the embedded cluster draws no broker
// fault (a moved leader makes kfake's consumers start their partitions over, a known kfake
// deviation the catalogue's leader-epochs requirement keeps its pipelines from; explore drew
// kill leader of in1 on pipeline-steady before, and its run came out invalid on
// eos-no-duplicate), a lease run on it does; isolate needs peer links.
func TestMenuLeavesOutWhatTheClusterCannotRun(t *testing.T) {
	for _, c := range []struct {
		scenario string
		kind     string
		has      []string
		lacks    []string
	}{
		{"pipeline-steady", scenarios.KindEmbedded, []string{"drop-response", "partition", "move-coordinator", "freeze"}, []string{"kill", "pause", "restart", "isolate"}},
		{"steady", scenarios.KindEmbedded, []string{"kill", "pause", "restart", "freeze"}, []string{"isolate"}},
		{"steady", scenarios.KindLocal, []string{"kill", "isolate"}, nil},
		{"pipeline-steady", scenarios.KindLocal, []string{"kill", "pause", "restart", "isolate", "freeze"}, nil},
	} {
		base, err := scenarios.Find(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		base.UseCluster(c.kind)
		e := &search{opts: Options{MaxFaults: 3}, base: base}
		if err := e.menu(); err != nil {
			t.Fatal(err)
		}
		for _, k := range c.has {
			if !slices.Contains(e.m.kinds, k) {
				t.Errorf("%s on %s: the menu %v lacks %s", c.scenario, c.kind, e.m.kinds, k)
			}
		}
		for _, k := range c.lacks {
			if slices.Contains(e.m.kinds, k) {
				t.Errorf("%s on %s: the menu %v holds %s", c.scenario, c.kind, e.m.kinds, k)
			}
		}
	}
}

// TestBrokerFaultsDoNotOverlap: a schedule whose broker faults overlap (a restart of all
// during a kill, seen in a search: the restart found no free broker, never took hold, and
// made the run inconclusive), or whose rolling restart outlasts the run, is not drawn; one
// whose broker faults follow each other is.
func TestBrokerFaultsDoNotOverlap(t *testing.T) {
	m := &menu{brokers: 3, duration: 30e9}
	kill := step{At: 10500e6, For: 2e9, Kind: "kill", Brokers: "coordinator of r4"}
	restart := step{At: 11e9, Kind: "restart", Brokers: "all", Param: "interval=4s"}
	latency := step{At: 11e9, For: 3e9, Kind: "latency", Processes: "p4", Brokers: "leader of r5", Param: "latency=100ms"}
	if err := m.valid(schedule{kill, restart}); err == nil {
		t.Error("a restart of all during a kill: valid, want refused")
	}
	later := restart
	later.At = 13e9
	if err := m.valid(schedule{kill, later, latency}); err != nil {
		t.Errorf("a restart after a kill, a latency beside them: %v", err)
	}
	early := restart
	early.At = 1e9 // three brokers, 4 s apart: it holds them until 13 s
	if err := m.valid(schedule{early, kill}); err == nil {
		t.Error("a kill during a rolling restart: valid, want refused")
	}
	// Seen too: a restart of all at 17.5 s, 4 s apart, cut short by a 20 s run's end.
	late := restart
	late.At = 17500e6
	if err := (&menu{brokers: 3, duration: 20e9}).valid(schedule{late}); err == nil {
		t.Error("a rolling restart past the run's end: valid, want refused")
	}
}

// tookHoldRun is a run whose feedback says every fault of its schedule took hold, named as
// the real feedback names it (faultWhat), after a first run answered on apis.
func tookHoldRun(apis []string) func(context.Context, *scenarios.Scenario, uint64) (*observation, error) {
	return func(_ context.Context, s *scenarios.Scenario, seed uint64) (*observation, error) {
		t := tuples{}
		t.add("op", "work", "ok")
		for _, api := range apis {
			t.add("answer", api, "NONE")
		}
		for _, line := range s.Nemesis.Script {
			st, err := nemesis.ParseStep(line)
			if err != nil {
				return nil, err
			}
			what := st.Fault
			if slices.Contains(nemesis.KafkaFaultNames(), st.Fault) {
				what += " " + st.Params.API
			}
			if st.Params.Point != "" {
				what += " " + st.Params.Point
			}
			t.add("fault", what, "took-hold")
			if st.Fault == "freeze" && s.Workload.IsPipeline() {
				t.add("state", "zombie", what) // a pipeline's freeze is drawn long enough to make one
			}
		}
		return &observation{Dir: fmt.Sprintf("runs/%s/%d", s.Name, seed), Verdict: checker.VerdictValid, Tuples: t}, nil
	}
}

// TestCoversEveryFaultFirst: the search tries every fault of its menu, each Kafka-aware kind
// on each request type the first run was answered on, before it follows the feedback alone:
// within 25 runs of steady (about 45 faults, 4 a schedule) and 35 of pipeline-steady (about 70,
// a freeze at each pause point among them),
// every one has taken hold. A uniform draw, as the search made before, leaves a dozen or more
// untried after as many runs.
func TestCoversEveryFaultFirst(t *testing.T) {
	for _, c := range []struct {
		scenario string
		apis     []string
		runs     int
	}{
		{"steady", []string{"initproducerid", "addpartitionstotxn", "produce", "endtxn", "describetransactions", "findcoordinator"}, 25},
		{"pipeline-steady", []string{"initproducerid", "addpartitionstotxn", "produce", "endtxn", "addoffsetstotxn", "txnoffsetcommit",
			"joingroup", "syncgroup", "heartbeat", "offsetfetch", "findcoordinator"}, 35},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			base, err := scenarios.Find(c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), base, Options{Out: t.TempDir(), Runs: c.runs, Seed: 3, run: tookHoldRun(c.apis), shrink: noShrink})
			if err != nil {
				t.Fatal(err)
			}
			// The menu the search had: its kinds, and the request types of the first run.
			m := menu{kinds: res.Faults, apis: slices.Sorted(slices.Values(c.apis)), tookHold: map[string]bool{}}
			for _, tu := range res.Tuples {
				if what, ok := strings.CutPrefix(tu.Tuple, "fault "); ok {
					m.tookHold[strings.TrimSuffix(what, " took-hold")] = true
				}
			}
			all := len((&menu{kinds: m.kinds, apis: m.apis}).untried())
			if u := m.untried(); len(u) > 0 {
				var names []string
				for _, s := range u {
					names = append(names, s.faultKey())
				}
				t.Errorf("after %d runs, %d of the menu's %d faults never took hold: %s", c.runs, len(u), all, strings.Join(names, ", "))
			}
			if all < c.runs {
				t.Errorf("the menu has %d faults: too few for the test to tell covering from chance", all)
			}
		})
	}
}

// TestPipelineFreezeDrawsPausePoints: a pipeline's freeze is drawn at the member's default
// point and at each pause point of its kind (before-commit holds the offsets pending: the
// window unstable-fetch needs), each a step the scenario accepts; a lease freeze names none.
func TestPipelineFreezeDrawsPausePoints(t *testing.T) {
	for _, c := range []struct {
		scenario string
		want     []string
	}{
		{"pipeline-steady", []string{"", "point=after-produce", "point=before-commit"}},
		{"steady", []string{""}},
	} {
		base, err := scenarios.Find(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		e := &search{opts: Options{MaxFaults: 3}, base: base}
		if err := e.menu(); err != nil {
			t.Fatal(err)
		}
		rng := newRand(9)
		seen := map[string]bool{}
		for range 100 {
			st := e.m.freshOf(rng, "freeze", "")
			seen[st.Param] = true
			s, err := clone(base)
			if err != nil {
				t.Fatal(err)
			}
			s.Nemesis.Script = []string{st.String()}
			if err := s.Validate(); err != nil {
				t.Fatalf("%s: %q: %v", c.scenario, st, err)
			}
		}
		got := slices.Sorted(maps.Keys(seen))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: freezes drawn with %q, want %q", c.scenario, got, c.want)
		}
	}
}

// TestPipelineFreezeOutlastsTheSession: every freeze of a pipeline is drawn longer than the
// members' session timeout (3 s in pipeline-steady), fresh or by a mutation (a new duration,
// a fault turned into a freeze, new parameters), and within the run when drawn fresh: a
// shorter freeze makes no zombie. Before, a freeze lasted 1, 2, 3, 5 or 8 s, so three draws
// in five could not make one. A lease freeze keeps the durations of every fault.
func TestPipelineFreezeOutlastsTheSession(t *testing.T) {
	for _, c := range []struct {
		scenario string
		min      time.Duration // every freeze is longer
		short    bool          // some freeze is no longer than 3 s
	}{
		{"pipeline-steady", 3 * time.Second, false},
		{"steady", 0, true},
	} {
		base, err := scenarios.Find(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		e := &search{opts: Options{MaxFaults: 4}, base: base}
		if err := e.menu(); err != nil {
			t.Fatal(err)
		}
		rng := newRand(11)
		short := false
		check := func(how string, sc schedule) {
			for _, st := range sc {
				if st.Kind != "freeze" {
					continue
				}
				if st.For <= c.min {
					t.Errorf("%s: %s drew %q: want longer than %v", c.scenario, how, st, c.min)
				}
				short = short || st.For <= 3*time.Second
			}
		}
		for range 200 {
			st := e.m.freshOf(rng, "freeze", "")
			if st.At+st.For > e.m.duration-time.Second {
				t.Errorf("%s: %q ends after the run's last second", c.scenario, st)
			}
			check("fresh", schedule{st})
			// A schedule of a short fault and a freeze, each mutation alone.
			parent := schedule{{At: 2 * time.Second, For: time.Second, Kind: "partition", Processes: "p1", Brokers: "all"}, st}
			for _, mu := range mutations {
				if sc, ok := mu.fn(&e.m, rng, slices.Clone(parent), []schedule{parent}); ok {
					check(mu.name, sc)
				}
			}
		}
		if short != c.short {
			t.Errorf("%s: some freeze of 3 s or less drawn: %v, want %v", c.scenario, short, c.short)
		}
	}
}

// TestFreezeTriedOnceItMadeAZombie: on a pipeline, a freeze at a point leaves the faults
// still to try (untried) when it made a zombie in zombieRuns (3) runs, not when it only took
// hold: one that ended before the group moved the member's partition is drawn again, and so
// is one whose zombie raced once. Before f5d50a3, a freeze was tried once it took hold; at
// f5d50a3, once it made one zombie. On a lease workload taking hold is enough.
func TestFreezeTriedOnceItMadeAZombie(t *testing.T) {
	untried := func(m *menu, key string) bool {
		return slices.ContainsFunc(m.untried(), func(s step) bool { return s.faultKey() == key })
	}
	pipe := &search{m: menu{kinds: []string{"freeze"}, points: []string{"after-produce", "before-commit"}, session: 3 * time.Second,
		tookHold: map[string]bool{}}}
	pipe.noteTookHold(tuples{"fault freeze before-commit took-hold": true, "fault freeze took-hold": true})
	if !untried(&pipe.m, "freeze before-commit") || !untried(&pipe.m, "freeze") {
		t.Errorf("a pipeline freeze that made no zombie is tried: untried %v", pipe.m.untried())
	}
	for run := 1; run <= zombieRuns; run++ {
		pipe.noteTookHold(tuples{"fault freeze before-commit took-hold": true, "state zombie freeze before-commit": true})
		if got, want := untried(&pipe.m, "freeze before-commit"), run < zombieRuns; got != want {
			t.Errorf("after %d runs that made a zombie, untried %v, want %v", run, got, want)
		}
	}
	if !untried(&pipe.m, "freeze") || !untried(&pipe.m, "freeze after-produce") {
		t.Errorf("the other points are tried by another point's zombie: untried %v", pipe.m.untried())
	}
	lease := &search{m: menu{kinds: []string{"freeze"}, tookHold: map[string]bool{}}}
	lease.noteTookHold(tuples{"fault freeze took-hold": true})
	if untried(&lease.m, "freeze") {
		t.Error("a lease freeze that took hold is still untried")
	}
}

// TestPipelineCoveringDrawsAFreezeFirst: while a pipeline's freezes are untried, a schedule
// drawn fresh to cover the menu holds one of them (seven in eight: the first untried fault
// is drawn as the others are), the first untried freeze and none of the other untried ones.
// Before, the three freezes were three faults of about seventy, in about one fresh schedule
// in six.
func TestPipelineCoveringDrawsAFreezeFirst(t *testing.T) {
	base, err := scenarios.Find("pipeline-steady")
	if err != nil {
		t.Fatal(err)
	}
	e := &search{opts: Options{MaxFaults: 4}, base: base}
	if err := e.menu(); err != nil {
		t.Fatal(err)
	}
	e.m.apis = []string{"initproducerid", "addpartitionstotxn", "produce", "endtxn", "addoffsetstotxn", "txnoffsetcommit",
		"joingroup", "syncgroup", "heartbeat", "offsetfetch", "findcoordinator"}
	e.m.tookHold = map[string]bool{}
	rng := newRand(5)
	with := 0
	for range 200 {
		sc := e.m.freshSchedule(rng, e.m.maxFaults)
		if slices.ContainsFunc(sc, func(st step) bool { return st.Kind == "freeze" }) {
			with++
		}
	}
	if with < 160 {
		t.Errorf("%d of 200 fresh schedules held a freeze, want 7 in 8 or more", with)
	}
	avail := []step{{Kind: "drop", API: "produce"}, {Kind: "freeze"}, {Kind: "partition"}, {Kind: "freeze", Param: "point=before-commit"}}
	got := pipelineFreezeFirst(avail)
	if want := []step{{Kind: "freeze"}, {Kind: "drop", API: "produce"}, {Kind: "partition"}}; !slices.Equal(got, want) {
		t.Errorf("pipelineFreezeFirst(%v) = %v, want %v", avail, got, want)
	}
}

// TestRunZeroIsAShortProbe: run 0, the scenario without faults, runs a probe's duration (a
// quarter of the scenario's, at least three of the workload's handoff periods and 8 s), and
// every schedule after it the scenario's whole duration. Before, run 0 ran the whole
// duration: a whole run before the first fault. --probe sets it; the scenario's duration or
// more runs all of it.
func TestRunZeroIsAShortProbe(t *testing.T) {
	find := func(name string, d time.Duration) *scenarios.Scenario {
		s, err := scenarios.Find(name)
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			s.Duration = scenarios.Duration(d)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		s     *scenarios.Scenario
		probe time.Duration
		want  time.Duration
	}{
		// steady: 20 s, members contend every 2 s: a quarter is 5 s, three handoffs 6 s.
		{"steady", find("steady", 0), 0, 8 * time.Second},
		// pipeline-steady: 20 s, a member stays 4 s: three stays are 12 s.
		{"pipeline-steady", find("pipeline-steady", 0), 0, 12 * time.Second},
		// chaos's workload contends every 8 s: three handoffs are 24 s of its 40 s.
		{"chaos", find("chaos", 0), 0, 24 * time.Second},
		{"steady for 2m", find("steady", 2*time.Minute), 0, 30 * time.Second},
		{"steady for 6s", find("steady", 6*time.Second), 0, 6 * time.Second},
		{"steady --probe 15s", find("steady", 0), 15 * time.Second, 15 * time.Second},
		{"steady --probe 1h", find("steady", 0), time.Hour, 20 * time.Second},
	} {
		var calls []*scenarios.Scenario
		res, err := Run(context.Background(), c.s, Options{Out: t.TempDir(), Runs: 3, Seed: 5, Probe: c.probe,
			run: byKinds(&calls), shrink: noShrink})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(calls) != 3 {
			t.Fatalf("%s: %d runs, want 3", c.name, len(calls))
		}
		for n, s := range calls {
			want := c.s.Duration.D()
			if n == 0 {
				want = c.want
			}
			if s.Duration.D() != want || time.Duration(res.Runs[n].Duration) != want {
				t.Errorf("%s: run %d ran %v (explore.json: %v), want %v", c.name, n, s.Duration.D(), time.Duration(res.Runs[n].Duration), want)
			}
			if n > 0 && len(s.Nemesis.Script) == 0 {
				t.Errorf("%s: run %d has no schedule", c.name, n)
			}
		}
		// The probe's corpus file repeats it as it ran.
		kept, err := scenarios.Find(filepath.Join(res.Out, res.Runs[0].File))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if kept.Duration.D() != c.want {
			t.Errorf("%s: run 0's corpus file runs %v, want %v", c.name, kept.Duration.D(), c.want)
		}
	}
}
