//go:build !kafka

package shrink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// chaosShort is chaos made fast: a random fault every 1.2 s on a high-contention workload
// of 6 processes, for 6 s (three leases, the shortest run shrinking tries). Each member
// contends about every quarter lease, so every role changes hands several times a second and
// a deposed holder's next write is fenced in nearly every run, of every shape the search
// tries with two members or more: the mutant below breaks fencing then. (With the preset's
// contention, once a lease, the smaller shapes fail about half their runs, and a search that
// keeps them on two tries ends with a result that reproduces 2 or 3 times in 5.)
const chaosShort = `
name: chaos-short
cluster: {kind: embedded}
workload:
  preset: high
  processes: 6
  roles: 2
  members_per_role: 3
  readers: 2
  load: {contend: 500ms}
nemesis:
  random:
    interval: 1200ms
    for: 1s
duration: 6s
`

var (
	originOnce sync.Once
	originDir  string
	originErr  string
)

// failingChaos runs chaosShort with the mutant until a run is invalid (at most 4 seeds) and
// returns its directory; the tests share it.
func failingChaos(t *testing.T) string {
	t.Helper()
	originOnce.Do(func() {
		s, err := scenarios.Parse("chaos-short.yaml", []byte(chaosShort))
		if err != nil {
			originErr = err.Error()
			return
		}
		root, err := os.MkdirTemp("", "shrink-origin-")
		if err != nil {
			originErr = err.Error()
			return
		}
		// Seeds until one fails with enough faults, bounded: on a loaded machine the mutant's
		// race is run into less often, so the bound is twice what an idle machine needs.
		for seed := uint64(1); seed <= 8; seed++ {
			out, err := harness.Run(context.Background(), s, harness.Options{Root: root, Seed: seed, Transport: mutantName})
			if err != nil {
				originErr = err.Error()
				return
			}
			if len(Failed(out.Results)) > 0 && out.Results.History.Faults >= 3 {
				originDir = string(out.Dir)
				return
			}
		}
		originErr = "the mutant's chaos-short runs never failed with 3 faults or more"
	})
	if originErr != "" {
		t.Fatal(originErr)
	}
	return originDir
}

// TestExplicitScriptReplaysTheFaults runs the explicit script made from a random schedule and
// requires the same faults on the same targets, in the same order, none earlier than the
// original (within the script's rounding).
func TestExplicitScriptReplaysTheFaults(t *testing.T) {
	t.Parallel() // beside the other shrinks: see TestShrinkMutantChaos
	dir, o := loadFailingChaos(t)
	if o.Scenario.Nemesis.Random != nil || len(o.Scenario.Nemesis.Script) == 0 {
		t.Fatalf("the loaded scenario's nemesis is not an explicit script: %+v", o.Scenario.Nemesis)
	}
	// The replay runs 10 s longer, so that a loaded machine, on which every step comes a
	// little late, still reaches the last step before the run ends; the steps' times are
	// from the start, so the longer run changes none of them.
	s := *o.Scenario
	s.Duration += units.Duration(10 * time.Second)
	out, err := harness.Run(context.Background(), &s, harness.Options{Root: t.TempDir(), Seed: o.Info.Seed, Transport: mutantName})
	if err != nil {
		t.Fatal(err)
	}
	want := faults(t, dir)
	got := faults(t, string(out.Dir))
	if len(got) < len(want) {
		t.Fatalf("replay injected %d faults, the original %d\nscript: %q", len(got), len(want), o.Scenario.Nemesis.Script)
	}
	for i := range want {
		w, g := want[i], got[i]
		// A fault aimed at a role's holder or coordinator finds whoever that is at replay time.
		byRole := w.Kind == "move-coordinator" || w.Kind == history.KindMemberPause || strings.Contains(w.Spec, "holder of")
		if w.Kind != g.Kind || !slices.Equal(w.Targets, g.Targets) && !byRole {
			t.Errorf("fault %d: replay %s %v, original %s %v", i+1, g.Kind, g.Targets, w.Kind, w.Targets)
		}
		// Never early: the script rounds the original's start down to 100 ms, and the two runs'
		// first operations, which the times count from, may differ by as much again. Late is
		// what a loaded machine makes of any schedule, so it is not bounded.
		if d := time.Duration(w.Start - g.Start); d > 300*time.Millisecond {
			t.Errorf("fault %d (%s): replay starts %v before the original", i+1, w.Kind, d)
		}
	}
}

// faults returns a run's fault windows, relative to its first operation.
// loadFailingChaos returns failingChaos's run directory and its shrink origin.
func loadFailingChaos(t *testing.T) (string, *Origin) {
	t.Helper()
	dir := failingChaos(t)
	o, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, o
}

func faults(t *testing.T, dir string) []history.Fault {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := h.Op(0).Invoke
	for _, op := range h.All() {
		first = min(first, op.Invoke)
	}
	out := slices.Clone(h.Faults)
	for i := range out {
		out[i].Start -= first
	}
	return out
}

// TestShrinkMutantChaos shrinks a mutant's chaos failure and requires the target shape (at
// most 2 fault steps, at most 4 processes) and an honest reproduction rate: the 5 fresh tries
// ran, the rate is what they measured, and a rate under 8 in 10 is said to be. A candidate is
// kept only when both its tries fail. The search is bounded by candidates, not time (the
// budget is only a guard against a hang): a loaded machine takes longer but searches as far,
// so the shape it reaches does not depend on the machine's speed (a 75 s budget once ran out
// in CI before single faults were tried). The rate itself is not asserted: the smallest
// shapes the search reaches (one role, two members) fail about 3 runs in 5 with this mutant;
// what a time-bounded shrink reaches, idle and loaded, is measured in docs/measurements.md.
func TestShrinkMutantChaos(t *testing.T) {
	// The package's shrinks and replays run side by side (four at a time, -parallel): their
	// runs on kfake wait on lease timers nearly all the time (the package took 19 s of CPU in
	// 319 s run one test after another, measured with /usr/bin/time beside other work), and
	// TestShrinkStaysWithinBudget's stand-in tries only sleep.
	t.Parallel()
	dir, o := loadFailingChaos(t)
	out := t.TempDir()
	var progress strings.Builder
	res, err := Run(context.Background(), o, Options{Out: out, Budget: 20 * time.Minute, Candidates: 12, Tries: 2, MinFails: 2, Confirm: 5, Progress: &progress})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted {
		t.Fatal("interrupted")
	}
	if res.After.Faults > 2 || res.After.Processes > 4 {
		t.Errorf("result %s: want at most 2 faults and 4 processes", res.After)
	}
	// The fresh tries of the last confirmation: "  try 2/5 seed 1003: fails no-lost-write".
	last := progress.String()
	i := strings.LastIndex(last, "confirming ")
	if i < 0 {
		t.Fatal("the shrink confirmed nothing")
	}
	last = last[i:]
	failedTries := strings.Count(last, ": fails ")
	switch {
	case res.Tries != 5:
		t.Errorf("result measured over %d fresh tries, want 5", res.Tries)
	case res.Fails != failedTries:
		t.Errorf("result reproduces %d/%d, but %d fresh tries failed", res.Fails, res.Tries, failedTries)
	case res.Fails < 4 && !strings.Contains(progress.String(), fmt.Sprintf("reproduces %d/5, below 4/5", res.Fails)):
		t.Errorf("result reproduces %d/5 and the shrink does not say it is below 4/5", res.Fails)
	}
	s, err := scenarios.Find(filepath.Join(out, ScenarioFile))
	if err != nil {
		t.Fatalf("the written scenario does not load: %v", err)
	}
	if s.Workload.Processes != res.After.Processes || len(s.Nemesis.Script) != res.After.Faults || s.Duration.D() != res.After.Duration {
		t.Errorf("scenario.yaml (%d processes, %d steps, %v) is not the result %s", s.Workload.Processes, len(s.Nemesis.Script), s.Duration, res.After)
	}
	text, _ := os.ReadFile(filepath.Join(out, ScenarioFile))
	for _, want := range []string{dir, "Reproduced", "seeds that failed", "report.html"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("scenario.yaml's comment does not mention %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat(res.Report); err != nil || !strings.HasPrefix(res.Report, out) {
		t.Errorf("report %q: want a report of a run of the minimal scenario: %v", res.Report, err)
	}
	if len(res.FailingSeeds) == 0 {
		t.Error("no failing seeds recorded")
	}
	if _, err := os.Stat(filepath.Join(out, RunLink, "report.html")); err != nil {
		t.Errorf("%s does not lead to a report: %v", RunLink, err)
	}
}

// TestInterruptKeepsBest cancels the shrink (Ctrl-C) as soon as it kept a first candidate and
// requires that candidate, smaller than the original, to be written out. The budget only
// guards against a hang: the interrupt ends the shrink, however fast the machine.
func TestInterruptKeepsBest(t *testing.T) {
	t.Parallel() // beside the other shrinks: see TestShrinkMutantChaos
	_, o := loadFailingChaos(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := t.TempDir()
	w := &cancelOn{word: "FAILS, kept", cancel: cancel}
	res, err := Run(ctx, o, Options{Out: out, Budget: 20 * time.Minute, Tries: 2, Confirm: 10, Progress: w})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Tries != 0 {
		t.Errorf("interrupted %v after %d confirmation tries: want interrupted before any", res.Interrupted, res.Tries)
	}
	kept := 0
	for _, c := range res.Candidates {
		if c.Kept {
			kept++
		}
	}
	if kept != 1 {
		t.Fatalf("%d candidates kept, want the 1 before the interrupt:\n%s", kept, w.b.String())
	}
	s, err := scenarios.Find(filepath.Join(out, ScenarioFile))
	if err != nil {
		t.Fatal(err)
	}
	before, after := res.Before, res.After
	if after == before || after.Duration > before.Duration || after.Faults > before.Faults || after.Processes > before.Processes {
		t.Errorf("kept %s, not smaller than the original %s", after, before)
	}
	if s.Duration.D() != after.Duration || len(s.Nemesis.Script) != after.Faults {
		t.Errorf("scenario.yaml is not the best so far %s", after)
	}
	if _, err := os.Stat(filepath.Join(out, ResultFile)); err != nil {
		t.Error(err)
	}
}

// cancelOn cancels when a line containing word is written.
type cancelOn struct {
	mu     sync.Mutex
	b      strings.Builder
	word   string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.Write(p)
	if strings.Contains(string(p), c.word) {
		c.cancel()
	}
	return len(p), nil
}

// TestShrinkKafkaAwareFaults shrinks a mutant's failing run of a random schedule of
// Kafka-aware faults (kafkaChaos): the run loads as an explicit script of those faults, a
// replay of that script injects the same faults, and the shrink runs candidates of it and
// writes a result. The search is bounded by candidates, not time, so that a loaded machine
// still tries as many.
func TestShrinkKafkaAwareFaults(t *testing.T) {
	t.Parallel() // beside the other shrinks: see TestShrinkMutantChaos
	s, err := scenarios.Parse("kafka-chaos.yaml", []byte(kafkaChaos))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var dir string
	for seed := uint64(1); seed <= 4 && dir == ""; seed++ {
		out, err := harness.Run(context.Background(), s, harness.Options{Root: root, Seed: seed, Transport: mutantName})
		if err != nil {
			t.Fatal(err)
		}
		if len(Failed(out.Results)) > 0 && out.Results.History.Faults >= 2 {
			dir = string(out.Dir)
		}
	}
	if dir == "" {
		t.Fatal("the mutant's kafka-chaos runs of seeds 1 to 4 never failed with 2 faults or more")
	}
	o, err := Load(dir)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	want := faults(t, dir)
	if len(o.Steps) != len(want) {
		t.Fatalf("script %q for %d fault windows", o.Scenario.Nemesis.Script, len(want))
	}
	for i, st := range o.Steps {
		if string(want[i].Kind) != st.Fault || !slices.Contains(nemesis.KafkaFaultNames(), st.Fault) {
			t.Errorf("step %d %q for window %s %v: want the same Kafka-aware fault", i+1, st, want[i].Kind, want[i].Targets)
		}
	}
	replay, err := harness.Run(context.Background(), o.Scenario, harness.Options{Root: t.TempDir(), Seed: o.Info.Seed, Transport: mutantName})
	if err != nil {
		t.Fatal(err)
	}
	got := faults(t, string(replay.Dir))
	if len(got) != len(want) {
		t.Fatalf("the replay injected %d faults, the original %d\nscript: %q", len(got), len(want), o.Scenario.Nemesis.Script)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Spec != want[i].Spec {
			t.Errorf("fault %d: replay %s %q, original %s %q", i+1, got[i].Kind, got[i].Spec, want[i].Kind, want[i].Spec)
		}
	}

	out := t.TempDir()
	var progress strings.Builder
	res, err := Run(context.Background(), o, Options{Out: out, Budget: 20 * time.Minute, Candidates: 6, Tries: 2, Confirm: 2, Progress: &progress})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Candidates) == 0 || res.After == res.Before {
		t.Errorf("%d candidates, %s → %s: want a smaller scenario kept", len(res.Candidates), res.Before, res.After)
	}
	if _, err := scenarios.Find(filepath.Join(out, ScenarioFile)); err != nil {
		t.Errorf("the written scenario does not load: %v", err)
	}
}
