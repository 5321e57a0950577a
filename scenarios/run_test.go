package scenarios_test

import (
	"context"
	"fmt"
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
	start := func() (*harness.Outcome, error) { return startScenario(name, kind, seed, t.TempDir(), nil) }
	out, err := start()
	mustBeValid(t, name, kind, seed, out, err, start)
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

// reruns is how many times mustBeValid runs a scenario again that came out inconclusive for
// want of a promised event.
const reruns = 2

// mustBeValid fails t unless the run ended without a harness error and came out valid,
// naming every check and coverage that did not, and returns the run it judged. A run that is
// inconclusive only for want of a promised event (a freeze whose member did not reach its
// pause point within the window, no handoff: what a starved process on a loaded machine
// causes) says nothing about the system under test: rerun runs the same scenario with the same
// seed again, up to reruns times, until the events happen. An invalid verdict, a failed check
// or a harness error fails at once. rerun nil: no second run.
func mustBeValid(t *testing.T, name, kind string, seed uint64, out *harness.Outcome, err error, rerun func() (*harness.Outcome, error)) *harness.Outcome {
	t.Helper()
	out, err = untilCovered(t, fmt.Sprintf("%s on %s (seed %d)", name, kind, seed), out, err, rerun)
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
	return out
}

// untilCovered runs rerun again, at most reruns times, while the run it has (out, err) is
// inconclusive only for want of a promised event (see mustBeValid), and returns the last run.
// rerun nil: the run as it is.
func untilCovered(t *testing.T, what string, out *harness.Outcome, err error, rerun func() (*harness.Outcome, error)) (*harness.Outcome, error) {
	t.Helper()
	for i := 0; err == nil && rerun != nil && i < reruns && coverageOnly(out.Results); i++ {
		t.Logf("%s: inconclusive for want of %s (run directory %s): running it again", what, strings.Join(missed(out.Results), ", "), out.Dir)
		logFaultLines(t, out.Dir.Logs())
		out, err = rerun()
	}
	return out, err
}

// coverageOnly reports whether res is inconclusive for want of promised coverage alone: every
// check valid (or advisory, or not covered), no harness error, and some promise not met.
func coverageOnly(res *checker.Results) bool {
	if res == nil || res.Verdict != checker.VerdictInconclusive || res.Error != "" {
		return false
	}
	for _, r := range res.Checks {
		// A check with nothing to judge in this run (a pipeline that is not stateful has no
		// aggregate to fold) counts as valid for the run.
		if r.Verdict != checker.VerdictValid && r.Verdict != checker.VerdictNotCovered && !r.Advisory {
			return false
		}
	}
	return len(missed(res)) > 0
}

// missed names the promises res did not meet.
func missed(res *checker.Results) []string {
	var out []string
	for _, r := range res.Coverage {
		if r.Verdict != checker.VerdictValid {
			out = append(out, r.Name)
		}
	}
	return out
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

// checkVerdict is the verdict of the check named name in res, "" when res has none.
func checkVerdict(res *checker.Results, name string) checker.Verdict {
	for _, r := range res.Checks {
		if r.Name == name {
			return r.Verdict
		}
	}
	return ""
}
