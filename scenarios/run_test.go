package scenarios_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/scenarios"
)

// runScenario runs a built-in scenario on kind and requires a valid verdict: every guarantee
// held and every promised coverage was met (a fault that never took hold is inconclusive).
func runScenario(t *testing.T, name, kind string, seed uint64) {
	t.Helper()
	s, _, err := scenarios.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	s.Cluster.Kind = kind
	out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: t.TempDir(), Seed: seed})
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
		t.Fatalf("%s on %s (seed %d): %s %s; run directory %s", name, kind, seed, res.Verdict, res.Error, out.Dir)
	}
}

// TestBuiltinScenariosEmbedded runs every built-in scenario that the embedded cluster can run.
// The scenarios run side by side: an embedded run spends most of its time waiting on lease
// timers (about 5% of a core each, measured by the soak), so running them one after another
// cost CI six minutes of an idle machine.
func TestBuiltinScenariosEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario for its full duration")
	}
	for _, name := range scenarios.Names() {
		s, _, _ := scenarios.Builtin(name)
		if s.Supports(scenarios.KindEmbedded) != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, name, scenarios.KindEmbedded, 11)
		})
	}
}

// TestScenariosLocalKafka runs the scenarios that matter most against Apache Kafka.
func TestScenariosLocalKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Kafka clusters")
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_KAFKA") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Kafka jars are missing: %v", err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
	for _, name := range []string{"holder-partition", "zombie-holder", "kill-coordinator"} {
		t.Run(name, func(t *testing.T) { runScenario(t, name, scenarios.KindLocal, 11) })
	}
}

// TestScenariosContainers runs the partition and coordinator-kill scenarios against Apache
// Kafka in containers (the project's engine and images: make docker-engine images).
func TestScenariosContainers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Kafka clusters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := containers.Available(ctx); err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_DOCKER") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_DOCKER=1: %v", err)
		}
		t.Skip(err)
	}
	for _, name := range []string{"holder-partition", "kill-coordinator"} {
		t.Run(name, func(t *testing.T) { runScenario(t, name, scenarios.KindContainers, 11) })
	}
}
