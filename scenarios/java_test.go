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

// javaAdapter returns the exec transport of the Java reference adapter (the seed's transport
// on kafka-clients, adapters/java), skipping t when it is not built (make java-adapter), or
// failing it under FENCECHECK_REQUIRE_KAFKA=1, which make test sets after building it.
func javaAdapter(t *testing.T) string {
	t.Helper()
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
	return "exec:" + filepath.Join(dir, "fencecheck-java-adapter")
}

// TestKillCoordinatorLocalKafka runs kill-coordinator against Apache Kafka with fencecheck's
// own transport, on a cluster of its own (the kills change a cluster under any later run). A
// long test (60 s on Kafka): make test runs kill-coordinator through the Java adapter
// (TestScenariosLocalKafka), and the same kill and restart in cluster/local's tests.
func TestKillCoordinatorLocalKafka(t *testing.T) {
	testenv.NeedKafka(t, "starts Kafka clusters")
	testenv.Long(t)
	ctx := context.Background()
	cl, err := scenarios.StartCluster(ctx, scenarios.ClusterSpec{Kind: scenarios.KindLocal}, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	const name = "kill-coordinator"
	s, _, err := scenarios.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	s.UseCluster(scenarios.KindLocal)
	out, err := scenarios.Run(ctx, s, scenarios.Options{Root: t.TempDir(), Seed: 11, Cluster: cl})
	mustBeValid(t, name, scenarios.KindLocal, 11, out, err)
}
