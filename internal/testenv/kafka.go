//go:build kafka

// The Kafka lane's switches: defined only under the kafka build tag, so a test that needs a
// broker but sits in a file without the tag does not compile in the light lane.

package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// NeedKafka skips t under -short (what) and unless the default version's
// Kafka jars are installed, which EnvRequireKafka turns into a failure.
func NeedKafka(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv(EnvRequireKafka) == "1" {
			t.Fatalf("%s=1 and the Kafka jars are missing: %v", EnvRequireKafka, err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
}

// EnvRequireDocker makes a missing Docker engine or image fail a test instead of skipping it:
// FENCECHECK_REQUIRE_DOCKER=1, as `make test` sets it after starting the engine.
const EnvRequireDocker = "FENCECHECK_REQUIRE_DOCKER"

// NeedDocker skips t under -short (what) and unless a Docker engine
// answers and holds images (default: the Kafka image of containers.DefaultVersion), which
// EnvRequireDocker turns into a failure.
func NeedDocker(t testing.TB, what string, images ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := containers.Available(ctx, images...); err != nil {
		if os.Getenv(EnvRequireDocker) == "1" {
			t.Fatalf("%s=1: %v", EnvRequireDocker, err)
		}
		t.Skip(err)
	}
}
