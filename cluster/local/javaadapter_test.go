package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// TestJavaAdapterConformance runs the conformance suite on the Java reference adapter (the
// seed's transport on kafka-clients, adapters/java) behind the exec protocol, against the
// shared TV2 cluster through one process's links. TestTransportConformance runs it on a
// cluster formatted with transaction.version 1 too. make test builds the adapter
// (make java-adapter); with FENCECHECK_REQUIRE_KAFKA=1 a missing build fails the test.
func TestJavaAdapterConformance(t *testing.T) {
	argv := javaAdapter(t)
	c := sharedCluster(t)
	dial := processLinks(t, c, 91)
	transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(c.Bootstrap(), ","), Dial: dial, TransactionVersion: 2,
		PinTransactionVersion: true, New: lineprotoStart(argv)})
}

// javaAdapter returns the command that starts the Java adapter, skipping the test when it is
// not built (failing it under FENCECHECK_REQUIRE_KAFKA=1).
func javaAdapter(t *testing.T) []string {
	t.Helper()
	dir, err := filepath.Abs("../../adapters/java")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "classes")); err != nil {
		if os.Getenv(EnvRequireKafka) == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Java adapter is not built (make java-adapter): %v", err)
		}
		t.Skipf("the Java adapter is not built (make java-adapter): %v", err)
	}
	return []string{filepath.Join(dir, "fencecheck-java-adapter")}
}

// lineprotoStart starts an exec-protocol adapter for the conformance suite.
func lineprotoStart(argv []string) func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
	return func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
		tr, err := lineproto.Start(ctx, argv, cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
}
