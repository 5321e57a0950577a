package scenarios_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// runScenario runs a built-in scenario on kind and requires a valid verdict: every guarantee
// held and every promised coverage was met (a fault that never took hold is inconclusive).
func runScenario(t *testing.T, name, kind string, seed uint64) {
	t.Helper()
	out, err := startScenario(name, kind, seed, t.TempDir(), nil)
	mustBeValid(t, name, kind, seed, out, err)
}

// startScenario runs a built-in scenario on kind with its run directories under root, on cl
// if it is not nil (a cluster of that kind several runs share), else on a cluster of its own.
func startScenario(name, kind string, seed uint64, root string, cl cluster.Cluster) (*harness.Outcome, error) {
	s, _, err := scenarios.Builtin(name)
	if err != nil {
		return nil, err
	}
	s.UseCluster(kind)
	return harness.Run(context.Background(), s, harness.Options{Root: root, Seed: seed, Cluster: cl})
}

// mustBeValid fails t unless the run ended without a harness error and came out valid,
// naming every check and coverage that did not.
func mustBeValid(t *testing.T, name, kind string, seed uint64, out *harness.Outcome, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	res := out.Results
	if res.Verdict != checker.VerdictValid {
		for _, r := range append(res.Checks, res.Coverage...) {
			if r.Verdict != checker.VerdictValid {
				t.Errorf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
			}
		}
		logFaultLines(t, out.Dir.Logs())
		t.Fatalf("%s on %s (seed %d): %s %s; run directory %s", name, kind, seed, res.Verdict, res.Error, out.Dir)
	}
}

// logFaultLines logs what the harness log says of faults and freezes: a test's run directory
// is gone after it fails, and these lines say why a fault did not take hold.
func logFaultLines(t *testing.T, logs string) {
	b, err := os.ReadFile(filepath.Join(logs, "harness.log"))
	if err != nil {
		t.Logf("harness log: %v", err)
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "fault") || strings.Contains(l, "freeze") || strings.Contains(l, "member frozen") ||
			strings.Contains(l, "member resumed") {
			t.Log(l)
		}
	}
}
