package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
)

// TestSelftestRowJudgesAndTimes: a mutant's run counts as caught only on one of its
// guarantees; its time to detect is the earliest FirstAt of the checks it broke; the median
// of an even count is the mean of the middle two.
func TestSelftestRowJudgesAndTimes(t *testing.T) {
	run := func(checks ...checker.Result) *checker.Results {
		return &checker.Results{Verdict: checker.VerdictInvalid, Checks: checks}
	}
	bad := func(name string, at time.Duration) checker.Result {
		return checker.Result{Name: name, Verdict: checker.VerdictInvalid, FirstAt: int64(at)}
	}
	r := &selftestRow{transport: "mutant:x", guarantees: []string{checker.NoLostWrite}}
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
	if got := (&selftestRow{}).median(); got != "-" {
		t.Errorf("median with no times = %s, want -", got)
	}
}

// TestSelftestListsEveryMutant: --list names every mutant --transport accepts, those made for
// regressions under a heading of their own.
func TestSelftestListsEveryMutant(t *testing.T) {
	out, err := exec.Command(buildBinary(t), "selftest", "--list").CombinedOutput()
	if err != nil {
		t.Fatalf("selftest --list: %v\n%s", err, out)
	}
	regressions := strings.Index(string(out), "made for regressions")
	if regressions < 0 {
		t.Fatalf("no heading for the regression mutants:\n%s", out)
	}
	for _, m := range scenarios.Mutants() {
		if i := strings.Index(string(out), m.Name+" "); i < 0 || i > regressions {
			t.Errorf("%s is not listed before the regression mutants", m.Name)
		}
	}
	for _, m := range scenarios.RegressionMutants() {
		if !strings.Contains(string(out)[regressions:], m.Name+" ") {
			t.Errorf("regression mutant %s is not listed", m.Name)
		}
	}
}

// TestScenariosListHasAHeaderAndEveryScenario: scenarios list starts with a header and lists
// every built-in scenario and regression, each with its cluster and a description of more
// than a few words.
func TestScenariosListHasAHeaderAndEveryScenario(t *testing.T) {
	out, err := exec.Command(buildBinary(t), "scenarios", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("scenarios list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.HasPrefix(lines[0], "SCENARIO") || !strings.Contains(lines[0], "WHAT IT TESTS") {
		t.Errorf("first line %q is not a header", lines[0])
	}
	names := append(scenarios.Names(), scenarios.RegressionNames()...)
	if len(lines)-1 != len(names) {
		t.Fatalf("%d rows, want %d scenarios:\n%s", len(lines)-1, len(names), out)
	}
	for i, name := range names {
		f := strings.Fields(lines[i+1])
		if len(f) < 2+6 || f[0] != name {
			t.Errorf("row %q: want %s, its cluster and a description of at least 6 words", lines[i+1], name)
		}
	}
}
