//go:build !kafka

package shrink

import (
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/scenarios"
)

// TestRepeatLineQuotesForAShell: the scenario file's "Repeat:" line must run when pasted into
// a shell, also for an exec transport, whose command line has blanks, and a folder with one.
func TestRepeatLineQuotesForAShell(t *testing.T) {
	s, _, err := scenarios.Builtin("steady")
	if err != nil {
		t.Fatal(err)
	}
	const transport = "exec:/opt/my adapters/bin/adapter --mutant ack-fenced"
	sh := &shrinker{best: plan{s: *s}, res: &Result{Origin: "/runs/steady/1", Scenario: "steady", Seed: 1,
		Transport: transport, Cluster: "embedded", Guarantees: []string{"fenced-stale-write"},
		File: "/tmp/bug report/scenario.yaml"}}
	b, err := sh.scenarioFile()
	if err != nil {
		t.Fatal(err)
	}
	want := `# Repeat: fencecheck run '/tmp/bug report/scenario.yaml' --transport '` + transport + `' --seed SEED` + "\n"
	if !strings.Contains(string(b), want) {
		t.Errorf("scenario file lacks %q:\n%s", want, b)
	}
	if got, want := repeatCommand("/tmp/out/scenario.yaml", "mutant:ack-fenced"), "fencecheck run /tmp/out/scenario.yaml --transport mutant:ack-fenced"; got != want {
		t.Errorf("repeatCommand = %q, want %q", got, want)
	}
}
