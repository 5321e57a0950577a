package scenarios_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
)

// TestRegressionsLoad: every regression loads through Find as "regression/NAME", names its bug
// and the verdicts expected in its header comments, and an unknown name is an error that lists
// the regressions.
func TestRegressionsLoad(t *testing.T) {
	names := scenarios.RegressionNames()
	for _, want := range []string{"regression/first-metadata-race", "regression/late-produce"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("regressions %v lack %s", names, want)
		}
	}
	for _, name := range names {
		s, b, err := scenarios.Regression(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if found, err := scenarios.Find(name); err != nil || found.Name != s.Name {
			t.Errorf("Find(%s) = %v, %v; want the regression %s", name, found, err, s.Name)
		}
		for _, field := range []string{"# Bug", "# Affects:", "# Fixed", "# Expected:"} {
			if !strings.Contains(string(b), field) {
				t.Errorf("%s: the header comments have no %q", name, field)
			}
		}
		if s.Description == "" {
			t.Errorf("%s has no description", name)
		}
	}
	_, err := scenarios.Find("regression/no-such")
	if !errors.Is(err, scenarios.ErrScenario) || !strings.Contains(err.Error(), "regression/late-produce") {
		t.Errorf("Find(regression/no-such) = %v; want ErrScenario listing the regressions", err)
	}
}

// TestLateProduceEmbedded runs regression/late-produce on kfake (TV2): every late Produce must
// reach the broker and be refused with a stale-epoch error, and the run must be valid. 26 s.
func TestLateProduceEmbedded(t *testing.T) {
	testenv.Light(t)
	if testing.Short() {
		t.Skip("runs a regression for its full duration")
	}
	t.Parallel()
	s, _, err := scenarios.Regression("regression/late-produce")
	if err != nil {
		t.Fatal(err)
	}
	out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if out.Results.Verdict != checker.VerdictValid {
		for _, r := range append(out.Results.Checks, out.Results.Coverage...) {
			if r.Verdict != checker.VerdictValid {
				t.Errorf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
			}
		}
		t.Fatalf("late-produce: %s; run directory %s", out.Results.Verdict, out.Dir)
	}
	b, err := os.ReadFile(out.Dir.HarnessLog())
	if err != nil {
		t.Fatal(err)
	}
	deliveries := regexp.MustCompile(`delivery\d+="([^"]*)"`).FindAllStringSubmatch(string(b), -1)
	if len(deliveries) != 3 {
		t.Fatalf("%d late deliveries in harness.log, want 3 (one per step): %q", len(deliveries), deliveries)
	}
	for _, d := range deliveries {
		if !strings.HasSuffix(d[1], "answered INVALID_PRODUCER_EPOCH") {
			t.Errorf("late produce %q: want it refused with INVALID_PRODUCER_EPOCH (TV2 bumps the epoch at every commit)", d[1])
		}
	}
}
