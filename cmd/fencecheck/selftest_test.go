//go:build !kafka

package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/transport/mutant"
)

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

// TestSelftest runs `fencecheck selftest` on the embedded cluster: it passes only if every
// mutant transport is judged invalid on a guarantee it breaks and the real one valid.
func TestSelftest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario per transport")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	// A mutant's race, or a fence the real transport must see, may not happen in a run on a
	// loaded machine: --tries lets a run that misses go again on a fresh seed.
	out, err := exec.Command(bin, "selftest", "--duration", "8s", "--tries", "3", "--out", t.TempDir()).CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("selftest exit %d:\n%s", code, out)
	}
	// On the embedded cluster the runs go side by side by default.
	want := []string{"PASS  real", "selftest passed", "at a time"}
	for _, m := range scenarios.Mutants() {
		want = append(want, "PASS  mutant:"+m.Name)
	}
	if len(want) < 2+10 {
		t.Errorf("%d mutants, want at least 10", len(want)-2)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("selftest output lacks %q:\n%s", w, out)
		}
	}
	// The table has a row per mutant, caught once within its three tries, with a time to detect.
	rows := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 5 || !slices.ContainsFunc(scenarios.Mutants(), func(m mutant.Description) bool { return m.Name == f[0] }) {
			continue
		}
		rows++
		if n := len(f); !slices.Contains([]string{"1", "2", "3"}, f[n-3]) || f[n-2] != "1" {
			t.Errorf("row %q: want 1 to 3 seeds tried and 1 caught", line)
		} else if d, err := time.ParseDuration(f[n-1]); err != nil || d <= 0 {
			t.Errorf("row %q: no time to detect (%v)", line, err)
		}
	}
	if rows != len(scenarios.Mutants()) {
		t.Errorf("%d table rows, want one per mutant (%d):\n%s", rows, len(scenarios.Mutants()), out)
	}
}
