package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/scenarios"
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
