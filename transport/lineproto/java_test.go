package lineproto_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// javaAdapter returns the launcher of the Java reference adapter (adapters/java, built by
// make java-adapter), or skips the test when it is not built; make test builds it and sets
// FENCECHECK_REQUIRE_KAFKA=1, which turns the skip into a failure.
func javaAdapter(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../adapters/java")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "classes")); err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_KAFKA") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Java adapter is not built (make java-adapter): %v", err)
		}
		t.Skipf("the Java adapter is not built (make java-adapter): %v", err)
	}
	return filepath.Join(dir, "fencecheck-java-adapter")
}

func startJava(bin string) func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
	return func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
		tr, err := lineproto.Start(ctx, []string{bin}, cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
}

// TestJavaAdapterConformanceKfake runs the conformance suite on the Java adapter (kafka-clients)
// on kfake, TV2.
func TestJavaAdapterConformanceKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs")
	}
	bin := javaAdapter(t)
	transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2, New: startJava(bin)})
}
