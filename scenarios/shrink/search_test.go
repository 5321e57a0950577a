//go:build !kafka

package shrink

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
)

// The tests here drive the real search, confirmation and output with a stand-in for the
// harness's runs (a tryFunc), so that what they assert (the order of the search, its bounds)
// does not depend on how fast the machine runs real tries. The real runs are shrunk in
// shrink_test.go.

// fakeOrigin is a failing run of chaosShort's workload whose faults are script, broken on
// fenced-stale-write, at seed 1.
func fakeOrigin(t *testing.T, duration time.Duration, script ...string) *Origin {
	t.Helper()
	s, err := scenarios.Parse("chaos-short.yaml", []byte(chaosShort))
	if err != nil {
		t.Fatal(err)
	}
	s.Nemesis = scenarios.NemesisSpec{Script: script}
	s.Duration = units.Duration(duration)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var steps []step
	for _, line := range script {
		steps = append(steps, mustStep(t, line))
	}
	dir := t.TempDir()
	return &Origin{Dir: dir, Info: &reports.RunInfo{Scenario: s.Name, Seed: 1, Transport: mutantName},
		Scenario: s, Steps: steps, Failed: []string{"fenced-stale-write"}, Report: filepath.Join(dir, "report.html")}
}

// rule says whether a try of s with seed fails.
type rule func(s *scenarios.Scenario, seed uint64) bool

// instant is a tryFunc that ends at once, failing fenced-stale-write where fails says so.
func instant(fails rule) tryFunc {
	return func(ctx context.Context, s *scenarios.Scenario, seed uint64) (tryOut, error) {
		if ctx.Err() != nil {
			return tryOut{seed: seed, interrupted: true}, nil
		}
		t := tryOut{seed: seed, done: true}
		if fails(s, seed) {
			t.broken = []string{"fenced-stale-write"}
		}
		return t, nil
	}
}

func hasFault(s *scenarios.Scenario, fault string) bool {
	return slices.ContainsFunc(s.Nemesis.Script, func(l string) bool { return strings.Contains(l, " "+fault+" ") })
}

// TestSearchTriesEachFaultAfterAnUnluckyCut: a run with three faults of which one matters,
// where the scenario without faults fails one try in two (as a loaded machine made it fail in
// CI). Dropping every fault is not kept (two of two tries must fail); the search must then try
// dropping each fault before it moves on to the workload, and reach the smallest shape.
func TestSearchTriesEachFaultAfterAnUnluckyCut(t *testing.T) {
	o := fakeOrigin(t, 6*time.Second,
		"at 1s partition p2 from all for 1s", "at 2s freeze holder of r1 for 1s", "at 3s pause b1 for 1s")
	fails := func(s *scenarios.Scenario, seed uint64) bool {
		switch {
		case s.Workload.MembersPerRole < 2: // no handoff, no stale write
			return false
		case len(s.Nemesis.Script) == 0:
			return seed%2 == 1 // the unlucky half
		default:
			return hasFault(s, "freeze")
		}
	}
	var progress strings.Builder
	res, err := run(context.Background(), o, Options{Out: t.TempDir(), Budget: time.Hour, Tries: 2, MinFails: 2, Confirm: -1, Progress: &progress}, instant(fails))
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, c := range res.Candidates {
		whats = append(whats, fmt.Sprintf("%s %d/%d", c.What, c.Fails, c.Tries))
	}
	// The first candidates, in order: every fault, then each fault, the latest first, and
	// again on the two faults left; only then the workload.
	want := []string{
		"drop every fault 1/2",
		"drop fault 3 (pause) 2/2",
		"drop every fault 1/2",
		"drop fault 2 (freeze) 0/2",
		"drop fault 1 (partition) 2/2",
		"drop fault 1 (freeze) 1/2",
		"3 processes 2/2",
	}
	if len(whats) < len(want) || !slices.Equal(whats[:len(want)], want) {
		t.Errorf("candidates:\n%s\nwant them to begin:\n%s", strings.Join(whats, "\n"), strings.Join(want, "\n"))
	}
	if a := res.After; a.Faults != 1 || a.Processes != 2 || a.Roles != 1 || a.Members != 2 {
		t.Errorf("result %s, want 1 fault, 2 processes × 1 role × 2 members", a)
	}
	if len(res.Script) != 1 || !strings.Contains(res.Script[0], "freeze") {
		t.Errorf("result script %q, want the freeze alone", res.Script)
	}
}

// TestCandidatesBoundTheSearch: with --candidates N the search stops after N candidates
// (the budget in time far away), says so, and keeps the best it found.
func TestCandidatesBoundTheSearch(t *testing.T) {
	o := fakeOrigin(t, 6*time.Second, "at 1s partition p2 from all for 1s", "at 2s freeze holder of r1 for 1s")
	always := func(*scenarios.Scenario, uint64) bool { return true }
	var progress strings.Builder
	res, err := run(context.Background(), o, Options{Out: t.TempDir(), Budget: time.Hour, Tries: 2, Confirm: 3, Candidates: 3, Progress: &progress}, instant(always))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Candidates) != 3 || !strings.Contains(progress.String(), "candidates: all 3 tried; the search stops") {
		t.Errorf("%d candidates tried, want 3 and the reason:\n%s", len(res.Candidates), progress.String())
	}
	// Every candidate fails, so each is kept: no faults, then 3 processes, then 1 role.
	if got := fmt.Sprint(res.After); got != "0 faults, 3 processes × 1 roles × 3 members, 6s" {
		t.Errorf("result %s after 3 candidates, want 0 faults, 3 processes × 1 roles × 3 members, 6s", got)
	}
	if res.Fails != 3 || res.Tries != 3 {
		t.Errorf("confirmed %d/%d, want 3/3", res.Fails, res.Tries)
	}
	if _, err := run(context.Background(), o, Options{Out: t.TempDir(), Candidates: -1}, instant(always)); err == nil || !strings.Contains(err.Error(), "--candidates") {
		t.Errorf("negative --candidates: %v, want an error naming the flag", err)
	}
}

// timed is a tryFunc whose tries take the scenario's duration and overhead more, or end at
// once, not done, when ctx ends first; every try it ran is in tries. Fresh tries (the
// confirmation's seeds, 1000 and up) are told apart by their order, never by the clock, so
// what the shrink meets does not depend on the machine's speed: the first Parallel of them
// take the usual time, the next two run past the deadline (until cut off), and the ones after
// those end at endBefore before the deadline, too close to it for another try to fit.
type timed struct {
	overhead  time.Duration
	deadline  time.Time
	endBefore time.Duration
	mu        sync.Mutex
	fresh     int
	tries     []timedTry
}

type timedTry struct {
	seed       uint64
	start, end time.Time
	done       bool
}

func (f *timed) run(ctx context.Context, s *scenarios.Scenario, seed uint64) (tryOut, error) {
	start := time.Now()
	end := start.Add(s.Duration.D() + f.overhead)
	if seed >= 1000 {
		f.mu.Lock()
		n := f.fresh
		f.fresh++
		f.mu.Unlock()
		switch {
		case n < embeddedParallel:
		case n < embeddedParallel+2:
			end = f.deadline.Add(20 * time.Second) // unless cut off at the deadline
		default:
			end = f.deadline.Add(-f.endBefore)
		}
	}
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	out := tryOut{seed: seed, broken: []string{"fenced-stale-write"}}
	select {
	case <-t.C:
		out.done = true
	case <-ctx.Done():
		out.interrupted = true
	}
	f.mu.Lock()
	f.tries = append(f.tries, timedTry{seed: seed, start: start, end: time.Now(), done: out.done})
	f.mu.Unlock()
	return out, nil
}

// estimateAt is the least a try's estimate can be at time at: the scenario's duration d and
// the longest overhead of the tries that ended before at. The shrink measures a try from
// around the stand-in's call, so its own estimate is never smaller.
func (f *timed) estimateAt(d time.Duration, at time.Time) time.Duration {
	over := time.Duration(0)
	for _, tr := range f.tries {
		if tr.done && tr.end.Before(at) {
			over = max(over, tr.end.Sub(tr.start)-d)
		}
	}
	return d + over
}

// TestShrinkStaysWithinBudget gives a shrink whose tries take 3.3 s (3 s of scenario and
// 0.3 s of overhead) a 30 s budget and asks for 40 fresh tries: ten rounds of four, more than
// the half of the budget the search keeps for them. The confirmation's first round ends as
// estimated; of its second, two tries run past the deadline (longer than the shrink can know)
// and two end 1.5 s before it, when no try fits any more. The search must stop early enough to
// leave time for fresh tries, the confirmation must start only tries that are expected to end
// within the budget, the tries running at the deadline must be cut off and not counted, and
// shrink.json and scenario.yaml must say how many ran of how many asked. Which try does what
// is fixed by its order, so none of this depends on the machine's speed; the bounds in
// wall-clock time allow for a slow machine: a try's start may come up to 1 s after the shrink
// decided it fitted (a try started when none fitted starts at least 1.8 s too late), and the
// shrink returns within 5 s of its deadline once its tries are cut off (uncut, they would run
// 20 s more).
func TestShrinkStaysWithinBudget(t *testing.T) {
	t.Parallel() // beside the other shrinks: see TestShrinkMutantChaos
	const scenario = 3 * time.Second
	o := fakeOrigin(t, scenario, "at 300ms partition p2 from all for 500ms")
	const budget = 30 * time.Second
	began := time.Now()
	deadline := began.Add(budget)
	f := &timed{overhead: 300 * time.Millisecond, deadline: deadline, endBefore: 1500 * time.Millisecond}
	out := t.TempDir()
	var progress strings.Builder
	res, err := run(context.Background(), o, Options{Out: out, Budget: budget, Tries: 2, Confirm: 40, Progress: &progress}, f.run)
	took := time.Since(began)
	t.Logf("took %v; progress:\n%s", took, progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if took > budget+5*time.Second {
		t.Errorf("the shrink took %v, more than its %v budget and 5 s", took, budget)
	}
	if len(res.Candidates) == 0 {
		t.Error("no candidate tried: the time kept for the fresh tries left none for the search")
	}
	confirmed, cut := 0, 0
	for _, tr := range f.tries {
		if tr.seed < 1000 {
			continue
		}
		switch {
		case tr.done:
			confirmed++
			if tr.end.After(deadline) {
				t.Errorf("fresh try seed %d ended %v after the deadline: it should have been cut off", tr.seed, tr.end.Sub(deadline))
			}
		case tr.end.Before(deadline):
			t.Errorf("fresh try seed %d was cut off %v before the deadline", tr.seed, deadline.Sub(tr.end))
		default:
			cut++
		}
		if est := f.estimateAt(scenario, tr.start); tr.start.Add(est).After(deadline.Add(time.Second)) {
			t.Errorf("fresh try seed %d started %v before the deadline, with an estimate of at least %v: it could not end within the budget", tr.seed, deadline.Sub(tr.start), est)
		}
	}
	if cut == 0 {
		t.Error("no fresh try was running at the deadline: the cut-off is not exercised")
	}
	if res.Asked != 40 || res.Tries == 0 || res.Tries >= 40 || res.Tries != confirmed {
		t.Errorf("%d fresh tries counted (%d ended, %d cut off) of %d asked: want some of the 40 asked, not all, each that ended", res.Tries, confirmed, cut, res.Asked)
	}
	if !strings.Contains(progress.String(), "tries not started: they would not have ended within the budget") {
		t.Error("the progress does not say that tries were left unstarted")
	}
	var file struct {
		Fails, Tries, Asked int
	}
	b, err := os.ReadFile(filepath.Join(out, ResultFile))
	if err == nil {
		err = json.Unmarshal(b, &file)
	}
	if err != nil || file.Asked != res.Asked || file.Tries != res.Tries || file.Fails != res.Fails {
		t.Errorf("shrink.json says %d/%d of %d asked (%v), want %d/%d of %d", file.Fails, file.Tries, file.Asked, err, res.Fails, res.Tries, res.Asked)
	}
	text, _ := os.ReadFile(filepath.Join(out, ScenarioFile))
	if want := fmt.Sprintf("/%d within the budget, 40 asked", res.Tries); !strings.Contains(string(text), want) {
		t.Errorf("scenario.yaml's comment does not say %q:\n%s", want, text)
	}
}

// TestSpentCandidatesDoNotGoBack: when the result reproduces too rarely and the candidates are
// spent, the shrink must not go back to an earlier, larger plan (it could not search again to
// make it smaller), and must say why.
func TestSpentCandidatesDoNotGoBack(t *testing.T) {
	o := fakeOrigin(t, 6*time.Second, "at 1s partition p2 from all for 1s", "at 2s freeze holder of r1 for 1s")
	// Every scenario fails one try in two: each candidate is kept on one failing try
	// (--min-fails 1), and the result reproduces about half the time.
	half := func(_ *scenarios.Scenario, seed uint64) bool { return seed%2 == 1 }
	var progress strings.Builder
	res, err := run(context.Background(), o, Options{Out: t.TempDir(), Budget: time.Hour, Tries: 2, Confirm: 10, Candidates: 2, Progress: &progress}, instant(half))
	if err != nil {
		t.Fatal(err)
	}
	p := progress.String()
	if !strings.Contains(p, "all 2 candidates were tried, so it cannot go back") || strings.Contains(p, "going back to") {
		t.Errorf("progress does not say it cannot go back, or went back:\n%s", p)
	}
	if len(res.Candidates) != 2 || res.MaxCandidates != 2 {
		t.Errorf("%d candidates, max_candidates %d: want 2 and 2", len(res.Candidates), res.MaxCandidates)
	}
}
