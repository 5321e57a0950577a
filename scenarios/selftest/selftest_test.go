package selftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// TestRowJudgesAndTimes: a mutant's run counts as caught only on one of its
// guarantees; its time to detect is the earliest FirstAt of the checks it broke; the median
// of an even count is the mean of the middle two.
func TestRowJudgesAndTimes(t *testing.T) {
	run := func(checks ...checker.Result) *checker.Results {
		return &checker.Results{Verdict: checker.VerdictInvalid, Checks: checks}
	}
	bad := func(name string, at time.Duration) checker.Result {
		return checker.Result{Name: name, Verdict: checker.VerdictInvalid, FirstAt: int64(at)}
	}
	r := &Row{transport: "mutant:x", guarantees: []string{checker.NoLostWrite}}
	if ok, why := r.add(run(bad(checker.ReadPrefix, time.Second))); ok {
		t.Errorf("caught on a guarantee the mutant does not name: %s", why)
	}
	r.add(run(bad(checker.NoLostWrite, 4*time.Second), bad(checker.ReadPrefix, 2*time.Second)))
	r.add(run(bad(checker.NoLostWrite, 6*time.Second)))
	advisory := bad(checker.SpuriousFence, time.Millisecond)
	advisory.Advisory = true
	r.add(run(bad(checker.NoLostWrite, 3*time.Second), advisory))
	if r.tried != 4 || r.caught != 3 {
		t.Errorf("tried %d caught %d, want 4 and 3", r.tried, r.caught)
	}
	// Detect times 2 s (read-prefix came first), 6 s, 3 s: the advisory check does not count.
	if got := r.median(); got != "3s" {
		t.Errorf("median %s, want 3s", got)
	}
	r.add(run(bad(checker.NoLostWrite, 5*time.Second)))
	if got := r.median(); got != "4s" {
		t.Errorf("median of 2s 3s 5s 6s = %s, want 4s", got)
	}
	if got := (&Row{}).median(); got != "-" {
		t.Errorf("median with no times = %s, want -", got)
	}
}

// TestTriesRunAMissAgainOnAFreshSeed: with Tries a mutant that is not caught, or a real run
// that is inconclusive, is made again on the seed Seeds further on, until a run hits or the
// tries are spent; an invalid real run fails at once; every run is counted and has its line.
func TestTriesRunAMissAgainOnAFreshSeed(t *testing.T) {
	invalid := &checker.Results{Verdict: checker.VerdictInvalid, Checks: []checker.Result{{Name: checker.NoLostWrite, Verdict: checker.VerdictInvalid}}}
	valid := &checker.Results{Verdict: checker.VerdictValid}
	inconclusive := &checker.Results{Verdict: checker.VerdictInconclusive}
	// What each (transport, seed) run gives; a run not listed is a test failure.
	give := map[string]*checker.Results{
		"mutant:late 1": valid, "mutant:late 3": valid, "mutant:late 5": invalid, // caught on its third try
		"mutant:never 1": valid, "mutant:never 3": inconclusive, "mutant:never 5": valid, // never caught
		"mutant:at-once 1": invalid,
		"real 1":           inconclusive, "real 3": valid, // a promise missed, then valid
		"real 2": invalid, // invalid: no second try
	}
	var mu sync.Mutex
	var made []string
	try := func(_ context.Context, _ *scenarios.Scenario, o harness.Options) (*harness.Outcome, error) {
		key := fmt.Sprintf("%s %d", o.Transport, o.Seed)
		mu.Lock()
		made = append(made, key)
		mu.Unlock()
		res, ok := give[key]
		if !ok {
			return nil, fmt.Errorf("unexpected run %s", key)
		}
		return &harness.Outcome{Results: res}, nil
	}
	row := func(transport string, guarantees ...string) *Row {
		return &Row{transport: transport, guarantees: guarantees}
	}
	late, never, atOnce := row("mutant:late", checker.NoLostWrite), row("mutant:never", checker.NoLostWrite), row("mutant:at-once", checker.NoLostWrite)
	real := row("real")
	jobs := []job{
		{row: late, seeds: []uint64{1, 3, 5}}, {row: never, seeds: []uint64{1, 3, 5}}, {row: atOnce, seeds: []uint64{1, 3, 5}},
		{row: real, seeds: []uint64{1, 3, 5}}, {row: real, seeds: []uint64{2, 4, 6}},
	}
	var out strings.Builder
	failed, runs, missed, err := runJobs(context.Background(), &out, jobs, 2, harness.Options{}, try)
	if err != nil {
		t.Fatal(err)
	}
	// Runs: late 3, never 3, at-once 1, real 2 + 1.
	if failed != 2 || runs != 10 || missed != 5 {
		t.Errorf("failed %d runs %d missed %d, want 2 (never, real seed 2), 10 and 5:\n%s", failed, runs, missed, out.String())
	}
	if late.tried != 3 || late.caught != 1 || never.tried != 3 || never.caught != 0 || atOnce.tried != 1 || atOnce.caught != 1 || real.tried != 3 {
		t.Errorf("rows: late %d/%d, never %d/%d, at-once %d/%d, real tried %d", late.tried, late.caught, never.tried, never.caught, atOnce.tried, atOnce.caught, real.tried)
	}
	for _, w := range []string{"MISS  mutant:late", "again on seed 3", "PASS  mutant:late", "FAIL  mutant:never", "MISS  real", "FAIL  real"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Count(out.String(), "\n") != runs {
		t.Errorf("%d lines for %d runs:\n%s", strings.Count(out.String(), "\n"), runs, out.String())
	}
}

// TestTriesTakeFreshSeeds: seed i's tries are Seed+i, Seed+i+Seeds, ...: no two runs of a
// transport share a seed.
func TestTriesTakeFreshSeeds(t *testing.T) {
	if _, err := Run(context.Background(), Options{Seeds: 1, Tries: -1}); !errors.Is(err, ErrUsage) {
		t.Errorf("--tries -1: %v, want a usage error", err)
	}
	var seeds []uint64
	for i := range 3 {
		seeds = append(seeds, trySeeds(10, i, 3, 2)...)
	}
	if want := []uint64{10, 13, 11, 14, 12, 15}; !slices.Equal(seeds, want) {
		t.Errorf("seeds %v, want %v", seeds, want)
	}
	if got := trySeeds(7, 0, 1, 0); !slices.Equal(got, []uint64{7}) {
		t.Errorf("no tries: %v, want one run on seed 7", got)
	}
}
